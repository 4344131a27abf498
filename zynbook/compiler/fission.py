"""Fission of a row-staged compute block: one kernel per phase (loop distribution).

A block whose parallel loops run, per row, phases separated by `barrier()`, where a phase
fully writes a `shared var` (the staging array) and later phases only read it, is the block
schedule's shape: one thread block per row, every row reading the whole of each weight
(4096 rows of an FFN, 4096 GEMVs). `split` distributes it: phase p becomes a kernel over the
same parallel loops storing its staging array into a temporary tensor indexed by them
(`up[f]` becomes `up[b, s, f]`, in the shared var's dtype, so every element is what the
block computed, or in the narrower dtype every value stored into it has, widened again where
it is read: exact), and later phases read the temporaries. Each kernel then meets the ordinary
recognition and schedules: a staged `sum over h` with an elementwise epilogue is a
contraction (the GEMM schedule, the epilogue fused), and so is the phase that reads it.

Exact: every element is computed by the same operations in the same order; only trailing
`let`s of a staging store are substituted into it (so the contraction recogniser sees
`out[..] = f(acc)`). Errors keep their ZynML lines (statements keep theirs), and reads of a
staging array must be provably in range, as they were. Refused (left alone, with a reason):
a barrier inside a loop or condition, a staging array read in the phase that writes it or
written other than once per element at its own loop position, a local shared across phases,
the output written before the last phase, reductions or atomics, a temporary over
`MAX_TEMPORARY_BYTES`.

lazy.py applies it where it records a block (so `@nofuse` and `config { fuse: false }`,
which launch a block where it is met, also keep it whole).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import math

from . import cir
from .launch.scalar import DTYPE_BYTES
from .fusion import _loop_stop, _map, _reads_in_range
from .passes.pipeline import run_passes
from .passes.recognise import free_vars, loads, substitute
from .types import EXACT_WIDENING

# the temporaries a split makes, at most (beyond it the block runs whole)
MAX_TEMPORARY_BYTES = 1 << 30


@dataclass(frozen=True)
class Phase:
    """One kernel of a split block. `reads` names, per input of `kernel`, either an input of
    the block (an int: its position) or an earlier phase (a str: the temporary's name)."""
    kernel: cir.Kernel
    reads: tuple
    writes: str            # the staging array whose temporary it writes, or "out"
    stages: str            # "up[batch, seq, ffn_hidden]" (that temporary) or "out"


def split(kernel: cir.Kernel, sizes: dict) -> list | str:
    """The phases of `kernel` (a list of `Phase`, the last writing `out`), or why it is not
    split (a sentence)."""
    outer, body = _parallel_nest(kernel)
    if not outer:
        return "it has no parallel loops"
    allocs = {s.name: s for s in body if isinstance(s, cir.SharedAlloc)}
    phases = _phases([s for s in body if not isinstance(s, cir.SharedAlloc)])
    problem = _nested_barrier(body) or _forbidden(kernel)
    if problem:
        return problem
    if len(phases) < 2:
        return "its rows do not run phases separated by barrier()"
    extents = []
    for lp in outer:
        stop = _loop_stop(lp, sizes)
        if stop is None or not (isinstance(lp.step, cir.Const) and lp.step.value == 1):
            return "its parallel loops do not run from 0 by 1 to a size"
        extents.append(stop)
    writer = {}
    for p, stmts in enumerate(phases):
        for name in _stored(stmts):
            if name == kernel.output.name:
                if p != len(phases) - 1:
                    return "a phase before the last writes the output"
            elif name not in allocs:
                return f"a phase writes {name}, which is neither a staging array nor the output"
            elif writer.setdefault(name, p) != p:
                return f"more than one phase writes {name}"
    for p in range(len(phases)):
        count = sum(q == p for q in writer.values())
        if p < len(phases) - 1 and count != 1:     # one output per kernel
            return f"phase {p + 1} does not stage exactly one shared array for the next"
        if p == len(phases) - 1 and count:
            return "the last phase stages a shared array no phase reads"
    temporary = 0
    for name, p in writer.items():
        a = allocs[name]
        problem = _written_once(phases[p], a, sizes)
        if problem:
            return problem
        if any(ld.buffer == name for ld in loads(tuple(phases[p]))):
            return f"{name} is read in the phase that writes it"
        for later in phases[:p]:
            if any(ld.buffer == name for ld in loads(tuple(later))):
                return f"{name} is read before the phase that writes it"
        shape = tuple(cir.eval_dim(d, sizes) for d in a.shape)
        for later in phases[p + 1:]:
            if not _reads_in_range(_wrapped(kernel, outer, later), {name}, shape, sizes):
                return f"{name} is read where no loop keeps the position in range"
        temporary += math.prod(extents + list(shape)) * DTYPE_BYTES.get(a.dtype, 8)
    if temporary > MAX_TEMPORARY_BYTES:
        return f"its temporaries would take {temporary / 2**30:.1f} GiB"
    unread = [n for n in allocs if n not in writer]
    if any(ld.buffer in unread for ld in loads(kernel.body)):
        return "a shared array is read that no phase writes"
    problem = _locals_cross(phases)
    if problem:
        return problem
    return _build(kernel, outer, phases, allocs, writer)


# ------------------------------------------------------------------------------ pieces


def _parallel_nest(k: cir.Kernel):
    """(the parallel loops around everything, the statements inside them)."""
    body, loops = k.body, []
    while len(body) == 1 and isinstance(body[0], cir.Loop) and body[0].parallel:
        loops.append(body[0])
        body = body[0].body
    return loops, body


def _phases(stmts: list) -> list:
    phases, cur = [], []
    for s in stmts:
        if isinstance(s, cir.Barrier):
            phases.append(cur)
            cur = []
        else:
            cur.append(s)
    phases.append(cur)
    return [p for p in phases if p]


def _nested_barrier(body) -> str:
    for s in body:
        if not isinstance(s, cir.Barrier) and any(isinstance(n, cir.Barrier) for n in cir.walk(s)):
            return "a barrier is inside a loop or a condition of the row"
    return ""


def _forbidden(k: cir.Kernel) -> str:
    for n in cir.walk(k.body):
        if isinstance(n, (cir.Yield, cir.Atomic)):
            return "it reduces or accumulates atomically"
        if isinstance(n, cir.Load) and n.buffer == k.output.name:
            return "it reads its output"
    return ""


def _stored(stmts) -> set:
    return {n.buffer for s in stmts for n in cir.walk(s) if isinstance(n, cir.Store)}


def _written_once(stmts, a: cir.SharedAlloc, sizes: dict) -> str:
    """Why the staging array `a` is not written, every element, once, by one unconditional
    store at loop positions covering it."""
    stores = cir.stores_into(stmts, a.name)
    why = f"{a.name} is not written once per element at its own loop position"
    if len(stores) != 1:
        return why
    s, loops, guarded = stores[0]
    names = [i.name if isinstance(i, cir.Var) else None for i in s.index]
    if guarded or len(names) != len(a.shape) or None in names or len(set(names)) != len(names):
        return why
    for name, d in zip(names, a.shape):
        lp = loops.get(name)
        if lp is None or _loop_stop(lp, sizes) != cir.eval_dim(d, sizes) or \
                not (isinstance(lp.step, cir.Const) and lp.step.value == 1):
            return why
    # every loop around the store is one of its index loops: no element is written twice
    if set(loops) != set(names):
        return why
    return ""


def _wrapped(k: cir.Kernel, outer, stmts):
    return dataclasses.replace(k, body=_nest(outer, tuple(stmts)))


def _nest(outer, body: tuple) -> tuple:
    for lp in reversed(outer):
        body = (dataclasses.replace(lp, body=body),)
    return body


def _locals_cross(phases) -> str:
    declared = []
    for stmts in phases:
        names = set()
        for n in cir.walk(tuple(stmts)):
            if isinstance(n, (cir.Let, cir.Assign)):
                names.add(n.name)
        declared.append(names)
    for p, stmts in enumerate(phases):
        used = free_vars(tuple(stmts))
        for q, names in enumerate(declared):
            if q != p and used & (names - declared[p]):
                return "a local of one phase is used in another"
    return ""


# ---------------------------------------------------------------------------- building


def _held_dtype(stmts, name: str, dtype: str) -> str:
    """The dtype the temporary of staging array `name` (of `dtype`) needs: a narrower one
    where every value stored into it is of that dtype (an f16 GELU stored into an f32
    `shared var`), as widening it again on every read is exact; else `dtype`."""
    held = {_narrow(st.value, dtype) for st in cir.walk(tuple(stmts))
            if isinstance(st, cir.Store) and st.buffer == name}
    return held.pop() if len(held) == 1 else dtype


def _narrow(value, dtype: str) -> str:
    inner = value.operand if isinstance(value, cir.Cast) else value
    return inner.ty.dtype if (inner.ty.dtype, dtype) in EXACT_WIDENING else dtype


def _build(k: cir.Kernel, outer, phases, allocs, writer) -> list:
    # a later phase reads a temporary under the shared var's name (its alloc is gone there),
    # widened back to the shared var's dtype where the temporary holds a narrower one; the
    # phase writing it stores `out`
    outer_dims = tuple(lp.stop.name if isinstance(lp.stop, cir.Var) else lp.stop for lp in outer)
    index = tuple(cir.Var(lp.var, cir.Ty("i32")) for lp in outer)
    held = {name: _held_dtype(phases[p], name, allocs[name].dtype) for name, p in writer.items()}
    buffers = {name: cir.Buffer(name, held[name], outer_dims + tuple(allocs[name].shape))
               for name in writer}
    out = []
    for p, stmts in enumerate(phases):
        staged = [n for n, q in writer.items() if q == p]
        read = [n for n, q in writer.items() if q < p]

        def rewrite(e, read=read):
            if isinstance(e, cir.Load) and e.buffer in read:
                ld = dataclasses.replace(e, index=index + tuple(_map(i, rewrite) for i in e.index))
                if held[e.buffer] == e.ty.dtype:
                    return ld
                return cir.Cast(dataclasses.replace(ld, ty=cir.Ty(held[e.buffer], e.ty.shape)), e.ty)
            if isinstance(e, cir.Store) and e.buffer in staged:
                value = _map(e.value, rewrite)
                if held[e.buffer] != allocs[e.buffer].dtype and isinstance(value, cir.Cast):
                    value = value.operand       # the widening the narrower temporary drops
                return dataclasses.replace(e, buffer="out", index=index + e.index, value=value)
            return None
        body = _map(tuple(stmts), rewrite)
        if staged:
            body = _staging_loops_parallel(_lets_into_stores(body), {"out"})
            output = dataclasses.replace(buffers[staged[0]], name="out", access="write")
        else:
            output = k.output
        inputs, reads = [], []
        used = {ld.buffer for ld in loads(body)}
        for pos, b in enumerate(k.inputs):
            if b.name in used:
                inputs.append(b)
                reads.append(pos)
        for n in read:
            if n in used:
                inputs.append(buffers[n])
                reads.append(n)
        kernel = dataclasses.replace(
            k, name=f"{k.name}_p{p + 1}", inputs=tuple(inputs), output=output,
            body=_nest(outer, body),
            schedule=cir.Schedule(autotune=k.schedule.autotune,
                                  allow_tf32=k.schedule.allow_tf32))
        try:
            kernel = run_passes(kernel)
        except Exception as exc:        # a phase breaks a rule its own kernel needs
            return f"phase {p + 1} is refused ({exc})"
        stages = "out" if not staged else \
            f"{staged[0]}[{', '.join(cir.format_dim(d) for d in output.shape)}]"
        out.append(Phase(kernel, tuple(reads), staged[0] if staged else "out", stages))
    return out


def _lets_into_stores(body: tuple) -> tuple:
    """Immutable scalar lets just before a store, used only by it, substituted into it."""
    new = []
    for s in body:
        if isinstance(s, cir.Loop):
            s = dataclasses.replace(s, body=_lets_into_stores(s.body))
        new.append(s)
    while len(new) >= 2 and isinstance(new[-1], cir.Store) and isinstance(new[-2], cir.Let) \
            and not new[-2].mutable and not new[-2].value.ty.shape:
        let, store = new[-2], new[-1]
        if any(let.name in free_vars(x) for x in new[:-2]):
            break
        new[-2:] = [dataclasses.replace(store, value=substitute(store.value,
                                                                {let.name: let.value}))]
    return tuple(new)


def _staging_loops_parallel(body: tuple, staged: set) -> tuple:
    """The loops indexing a staging store run in parallel (each writes its own element)."""
    def mark(s):
        if isinstance(s, cir.Loop):
            inner = tuple(mark(x) for x in s.body)
            stores = [n for n in cir.walk(inner) if isinstance(n, cir.Store) and n.buffer in staged]
            indexes = {i.name for st in stores for i in st.index if isinstance(i, cir.Var)}
            return dataclasses.replace(s, body=inner, parallel=s.parallel or s.var in indexes)
        return s
    return tuple(mark(s) for s in body)
