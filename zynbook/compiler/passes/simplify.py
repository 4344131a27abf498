"""Simplify: exact rewrites that make later analyses and printed code simpler.

Only rewrites that cannot change a value on any device are made:

* integer arithmetic on two constants (`+ - *`) folds when the result fits the dtype;
* `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x` on integers of one dtype become `x` (the
  literal is weak, so `x` alone is as weak as `x + 0` was: the dtype of what it meets stays);
* `if true:` / `if false:` keep the branch that runs (CIR names are unique per kernel, so
  its statements can join the enclosing block); `select` on a constant likewise.

Floating-point expressions are left as written: folding them could round differently from
the device that evaluates them.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .. import cir

INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}


def simplify(kernel: cir.Kernel) -> cir.Kernel:
    return replace(kernel, body=_block(kernel.body))


def _fits(value: int, dtype: str) -> bool:
    b = INT_BITS[dtype]
    return 0 <= value < (1 << b) if dtype[0] == "u" else -(1 << (b - 1)) <= value < (1 << (b - 1))


def _int_const(e, value=None) -> bool:
    return isinstance(e, cir.Const) and isinstance(e.value, int) and \
        not isinstance(e.value, bool) and not e.ty.shape and \
        (value is None or e.value == value)


def expr(e):
    """`e` simplified (statements' expressions, indices and spans)."""
    return bottom_up(e, _fold)


def bottom_up(e, rule, keep=None):
    """`e` (an expression or span) with `rule` applied to each expression, operands first
    (a rule sees its operands already rewritten), except where `keep(expression)` holds:
    that one is left as it is; passes that rewrite expressions share it."""
    if isinstance(e, cir.Span):
        return cir.Span(bottom_up(e.start, rule, keep), bottom_up(e.stop, rule, keep))
    if not isinstance(e, cir.Expr) or (keep is not None and keep(e)):
        return e
    kw = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if f.name == "ty":
            continue
        if isinstance(v, tuple):
            kw[f.name] = tuple(bottom_up(x, rule, keep) for x in v)
        elif isinstance(v, (cir.Expr, cir.Span)):
            kw[f.name] = bottom_up(v, rule, keep)
    return rule(replace(e, **kw) if kw else e)


def _fold(e):
    """Integer folds and a `select` on a constant, on `e` whose operands are folded."""
    if isinstance(e, cir.Bin) and e.op in ("+", "-", "*") and not e.ty.shape and \
            e.ty.dtype in INT_BITS:
        a, b = e.left, e.right
        if _int_const(a) and _int_const(b) and a.ty == b.ty == e.ty:
            v = {"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value}[e.op]
            if _fits(v, e.ty.dtype):
                return cir.Const(v, e.ty)
        unit = 1 if e.op == "*" else 0      # x + 0, 0 + x, x - 0, x * 1, 1 * x
        if _int_const(b, unit) and a.ty == e.ty:
            return a
        if e.op != "-" and _int_const(a, unit) and b.ty == e.ty:
            return b
    if isinstance(e, cir.Select) and isinstance(e.cond, cir.Const) and \
            isinstance(e.cond.value, bool):
        pick = e.if_true if e.cond.value else e.if_false
        if pick.ty == e.ty:
            return pick
    return e


def _block(body, ex=expr, fold_ifs: bool = True) -> tuple:
    """`body` with `ex` applied to every expression of its statements; with `fold_ifs`, an
    `if` on a constant replaced by the branch that runs."""
    out = []
    for s in body:
        if isinstance(s, cir.If):
            cond = ex(s.cond)
            if fold_ifs and isinstance(cond, cir.Const) and isinstance(cond.value, bool):
                out.extend(_block(s.then if cond.value else s.orelse, ex, fold_ifs))
                continue
            out.append(replace(s, cond=cond, then=_block(s.then, ex, fold_ifs),
                               orelse=_block(s.orelse, ex, fold_ifs)))
        elif isinstance(s, cir.Loop):
            out.append(replace(s, start=ex(s.start), stop=ex(s.stop), step=ex(s.step),
                               body=_block(s.body, ex, fold_ifs)))
        elif isinstance(s, (cir.Let, cir.Assign)):
            out.append(replace(s, value=ex(s.value)))
        elif isinstance(s, (cir.Store, cir.Atomic)):
            out.append(replace(s, index=tuple(ex(i) for i in s.index), value=ex(s.value)))
        elif isinstance(s, cir.Yield):
            out.append(replace(s, value=ex(s.value),
                               index=None if s.index is None else ex(s.index)))
        elif isinstance(s, cir.SharedAlloc):
            out.append(replace(s, shape=tuple(ex(d) if isinstance(d, cir.Expr) else d
                                              for d in s.shape)))
        else:
            out.append(s)
    return tuple(out)


def map_stmts(body, rule) -> tuple:
    """`body` with each statement other than a loop or an `if` replaced by `rule(s)`, the
    bodies of loops and ifs mapped the same way."""
    out = []
    for s in body:
        if isinstance(s, cir.Loop):
            out.append(replace(s, body=map_stmts(s.body, rule)))
        elif isinstance(s, cir.If):
            out.append(replace(s, then=map_stmts(s.then, rule), orelse=map_stmts(s.orelse, rule)))
        else:
            out.append(rule(s))
    return tuple(out)


def rewrite_exprs(kernel: cir.Kernel, rule, keep=None) -> cir.Kernel:
    """`kernel` with `rule` applied bottom-up to every expression of its body (statements
    kept as they are; `keep`: see `bottom_up`)."""
    return replace(kernel, body=_block(kernel.body, lambda e: bottom_up(e, rule, keep), False))
