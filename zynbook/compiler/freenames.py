"""The names a compute body takes from outside: inputs it reads without listing them,
host scalars, and sizes to infer."""
from __future__ import annotations

from . import ast as A
from .lower import dotted


def compute_free_names(node: A.Compute) -> dict:
    """{name or dotted label: span of first use} for names the body does not define."""
    listed = {dotted(e) for e in node.inputs if dotted(e)}
    free: dict = {}
    _stmts(node.body, [set()], listed, free)
    return free


def _bound(name, scopes) -> bool:
    return any(name in s for s in scopes)


def _stmts(body, scopes, listed, free):
    scopes.append(set())
    for s in body:
        _stmt(s, scopes, listed, free)
    scopes.pop()


def _stmt(s, scopes, listed, free):
    if isinstance(s, A.Let):
        _expr(s.value, scopes, listed, free)
        scopes[-1].update(s.names)
    elif isinstance(s, A.VarDecl):
        _expr(s.value, scopes, listed, free)
        scopes[-1].add(s.name)
    elif isinstance(s, A.Assign):
        if not (isinstance(s.target, A.Name) and _bound(s.target.id, scopes)):
            _expr(s.target, scopes, listed, free)
        _expr(s.value, scopes, listed, free)
    elif isinstance(s, A.For):
        scopes.append(set())
        for it in s.iters:
            if isinstance(it, A.RangeIter):
                for e in (it.start, it.stop, it.step):
                    if e is not None:
                        _expr(e, scopes, listed, free)
            else:
                _expr(it.iterable, scopes, listed, free)
            scopes[-1].add(it.var)
        _stmts(s.body, scopes, listed, free)
        scopes.pop()
    elif isinstance(s, A.If):
        _expr(s.cond, scopes, listed, free)
        _stmts(s.then, scopes, listed, free)
        _stmts(s.orelse, scopes, listed, free)
    elif isinstance(s, A.SharedVar):
        for d in s.dims:
            _expr(d, scopes, listed, free)
        scopes[-1].add(s.name)
    elif isinstance(s, (A.Yield, A.ExprStmt)):
        _expr(s.value if isinstance(s, A.Yield) else s.expr, scopes, listed, free)


def _expr(e, scopes, listed, free):
    if e is None:
        return
    label = dotted(e)
    if label is not None:
        root = label.split(".")[0]
        if _bound(root, scopes) or label in listed or root in listed and label == root:
            return
        # (`inf`, `pi`, `e` and a builtin's name read as a value are free: a host name of
        # theirs shadows them; a call of a builtin is not a read of its name)
        if isinstance(e, A.Name) and e.id == "out":
            return
        if isinstance(e, A.Attr) and any(label.startswith(lbl + ".") for lbl in listed):
            return
        free.setdefault(label, e.span)
        return
    if isinstance(e, A.Call):
        if not isinstance(e.func, A.Name):
            _expr(e.func, scopes, listed, free)
        for a in e.args:
            _expr(a, scopes, listed, free)
        for kw in e.kwargs:
            _expr(kw.value, scopes, listed, free)
    elif isinstance(e, A.Index):
        _expr(e.base, scopes, listed, free)
        for it in e.items:
            if isinstance(it, A.SliceItem):
                _expr(it.start, scopes, listed, free)
                _expr(it.stop, scopes, listed, free)
                _expr(it.step, scopes, listed, free)
            else:
                _expr(it, scopes, listed, free)
    elif isinstance(e, A.BinOp):
        _expr(e.left, scopes, listed, free)
        _expr(e.right, scopes, listed, free)
    elif isinstance(e, A.UnaryOp):
        _expr(e.operand, scopes, listed, free)
    elif isinstance(e, A.Pipe):
        _expr(e.value, scopes, listed, free)
        _expr(e.func, scopes, listed, free) if not isinstance(e.func, A.Name) else None
    elif isinstance(e, A.Attr):
        _expr(e.base, scopes, listed, free)
    elif isinstance(e, (A.TupleLit, A.ListLit)):
        for x in e.items:
            _expr(x, scopes, listed, free)
