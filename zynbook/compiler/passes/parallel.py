"""Mark parallel loops: a loop whose iterations are independent, inside loops that are
parallel themselves, becomes `Loop(parallel=True)`; GPU backends map those to threads and
blocks and the reference executor to lanes.

Independent means: each iteration writes its own part of `out` (a store index uses the loop
variable) or only yields, and none assigns a variable declared outside it, writes a shared
array declared outside it or waits at a barrier over memory shared between iterations.
Loops under an `if` stay serial.
"""
from __future__ import annotations

from dataclasses import replace

from .. import affine, cir
from .loops import names_of
from .tiles import substitute


def mark_parallel(kernel: cir.Kernel) -> cir.Kernel:
    shared = names_of(kernel.body, cir.SharedAlloc)
    return replace(kernel, body=_mark(kernel.body, True, shared))


def _mark(body, ancestors_parallel: bool, shared: set) -> tuple:
    out = []
    for s in body:
        if isinstance(s, cir.Loop):
            par = ancestors_parallel and independent(s, shared)
            out.append(replace(s, body=_mark(s.body, par, shared), parallel=par))
        elif isinstance(s, cir.If):
            out.append(replace(s, then=_mark(s.then, False, shared),
                               orelse=_mark(s.orelse, False, shared)))
        else:
            out.append(s)
    return tuple(out)


def independent(loop: cir.Loop, shared: set) -> bool:
    """Iterations of `loop` are independent: each writes its own part of out (or yields),
    and none changes a variable declared outside it. `shared`: the kernel's shared arrays."""
    declared = names_of(loop.body, cir.Let)
    own_shared = names_of(loop.body, cir.SharedAlloc)
    stores, yields = [], []
    for n in cir.walk(loop.body):
        if isinstance(n, cir.Assign) and n.name not in declared:
            return False
        if isinstance(n, cir.Store):
            if n.buffer == "out":
                stores.append(n)
            elif n.buffer in shared and n.buffer not in own_shared:
                return False
        if isinstance(n, cir.Yield):
            yields.append(n)
        if isinstance(n, cir.Barrier) and not own_shared:
            return False        # a barrier over memory shared between iterations
    if yields:
        return not stores
    # an index read through a let (`let k = n - 1 - i; out[k] = ...`) is the let's value
    lets = {}
    for n in cir.walk(loop.body):
        if isinstance(n, cir.Let) and not n.mutable and not n.value.ty.shape:
            lets[n.name] = substitute(n.value, lets)
    return bool(stores) and all(
        st.index and any(_own(substitute(i.start if isinstance(i, cir.Span) else i, lets),
                              loop.var) for i in st.index) for st in stores)


def _own(index, var: str) -> bool:
    """Whether different values of `var` give different values of `index`: it uses `var`,
    not through `/`, `%` or a function (`out[i / 2]` is written by two iterations), and not
    so that it cancels (`i - i`)."""
    if not affine.uses_vars(index, {var}) or _hidden(index, var):
        return False
    form = affine.linear(index)
    return form is None or any(c != 0 and affine.uses_vars(e, {var})
                               for c, e in form[0].values())


def _hidden(e, var: str) -> bool:
    """`var` occurs in `e` under an operation that can map two of its values to one."""
    if isinstance(e, cir.Bin) and e.op in ("/", "%") or isinstance(e, (cir.Call, cir.Select,
                                                                       cir.Load)):
        return affine.uses_vars(e, {var})
    return any(_hidden(c, var) for c in _children(e))


def _children(e):
    if isinstance(e, cir.Bin):
        return (e.left, e.right)
    if isinstance(e, (cir.Unary, cir.Cast)):
        return (e.operand,)
    return ()
