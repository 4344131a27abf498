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


def mark_parallel(kernel: cir.Kernel) -> cir.Kernel:
    shared = {n.name for n in cir.walk(kernel.body) if isinstance(n, cir.SharedAlloc)}
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


def independent(loop: cir.Loop, shared: set = frozenset()) -> bool:
    """Iterations of `loop` are independent: each writes its own part of out (or yields),
    and none changes a variable declared outside it. `shared`: the kernel's shared arrays."""
    declared = {n.name for n in cir.walk(loop.body) if isinstance(n, cir.Let)}
    own_shared = {n.name for n in cir.walk(loop.body) if isinstance(n, cir.SharedAlloc)}
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
    return bool(stores) and all(
        st.index and any(affine.uses_vars(i.start if isinstance(i, cir.Span) else i, {loop.var})
                         for i in st.index) for st in stores)
