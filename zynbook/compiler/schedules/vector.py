"""The generic thread schedule with vector accesses: each thread takes `width` consecutive
iterations of the innermost parallel loop, reads each contiguous row the body loads with
one vector access, runs the body once per lane and writes each store with one.

It applies where the innermost loop starts at 0 with step 1, every load that depends on it
reads consecutive elements (the loop variable is the last index and appears nowhere else),
every statement is an immutable scalar `let` or a store of that form, and the loop count
and the rows' lengths are multiples of the width; the width fills 16 bytes of the widest
element. A buffer whose base is not 16-byte aligned runs the program's `fallback`: the
generic thread schedule.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import (DTYPE_BYTES, ScalarLowering, buffer_params, cast, compute_dtype, lit,
                             map_nodes, user_name)
from ..passes.loops import counts_from_zero, free_vars
from .base import Params, Schedule, one_kernel
from .generic import GenericThread, ThreadParams
from .nest import decompose, flat_index_dtype, parallel_nest, spread


@dataclass(frozen=True)
class VectorParams(Params):
    threads: int = 256
    width: int = 4
    per_thread: int = 1         # vectors a thread takes, `threads` vectors apart


def contiguous_in(e: cir.Load, var: str) -> bool:
    if not e.index or any(isinstance(i, cir.Span) for i in e.index):
        return False
    last = e.index[-1]
    return isinstance(last, cir.Var) and last.name == var and \
        not any(var in free_vars(i) for i in e.index[:-1])


def vector_width(kernel: cir.Kernel, nest, vector_bytes: int):
    """(width, buffers) when the innermost loop can move `vector_bytes` per access, else
    (None, why not)."""
    if not nest.loops:
        return None, "no parallel loop"
    lp = nest.loops[-1]
    if not counts_from_zero([lp]):
        return None, "the innermost loop is not 0..n"
    v = lp.var
    stored = set()
    for s in nest.body:
        # the rows are loaded before the body runs: a load after a store of its buffer
        # (out[i] += a then out[i] += b) would read the row as it was
        late = {n.buffer for n in cir.walk([s]) if isinstance(n, cir.Load)} & stored
        if late:
            return None, f"a load of `{min(late)}` after a store to it"
        if isinstance(s, cir.Let):
            if s.mutable or s.value.ty.shape:
                return None, "a mutable or tile `let`"
        elif isinstance(s, cir.Store):
            if s.value.ty.shape or not contiguous_in(cir.Load(s.buffer, s.index, s.value.ty), v):
                return None, "a store that is not element j of a row"
            stored.add(s.buffer)
        else:
            return None, f"a {type(s).__name__} in the loop body"
    dtypes = {b.name: b for b in list(kernel.inputs) + [kernel.output]}
    bufs = set()
    for n in cir.walk(nest.body):
        if isinstance(n, (cir.Dot, cir.Reduce)):
            return None, "tile reductions"
        if isinstance(n, cir.Load) and v in free_vars(n):
            if n.buffer not in dtypes or not contiguous_in(n, v):
                return None, f"a load of `{n.buffer}` that is not consecutive in `{v}`"
            bufs.add(n.buffer)
    bufs |= {s.buffer for s in nest.body if isinstance(s, cir.Store)}
    if not bufs:
        return None, "nothing to move"
    widths = [DTYPE_BYTES[dtypes[b].dtype] for b in bufs]
    w = vector_bytes // max(widths)
    if w < 2 or w * min(widths) < 2:
        return None, "elements too wide for a vector"
    if nest.extents[-1] % w:
        return None, f"{nest.extents[-1]} iterations are not a multiple of {w}"
    if any(not isinstance(dtypes[b].shape[-1], (int, str)) for b in bufs):
        return None, "a row length the launch does not give"
    return (w, tuple(sorted(bufs))), None


# the calls a few instructions compute, beside a memory access
CHEAP = frozenset({"abs", "min", "max", "clamp", "relu", "floor", "ceil", "round"})


class VectorThread(Schedule):
    name = "vector"

    def why_not(self, kernel, target, sizes):
        if not getattr(target, "vector_bytes", 0) or target.symbolic_sizes:
            return "the target has no vector accesses"
        why = GenericThread().why_not(kernel, target, sizes)
        if why is not None:
            return why
        nest = parallel_nest(kernel.body, sizes)
        got, why = vector_width(kernel, nest, target.vector_bytes)
        if got is None:
            return why
        w, bufs = got
        shapes = {b.name: b.shape for b in list(kernel.inputs) + [kernel.output]}
        for b in bufs:
            if cir.eval_dim(shapes[b][-1], sizes) % w:
                return f"rows of `{b}` are not a multiple of {w} long"
        return None

    def default(self, kernel, target, sizes):
        """Two vectors a thread where the body computes a costly function: measured (H200,
        8192 x 4096 f32, % of the copy bandwidth), bias + GELU 90% with one and 94 to 96% with
        two (88% with four), a scale and add 99% with one and 95 to 98% with two."""
        nest = parallel_nest(kernel.body, sizes)
        (w, _), _ = vector_width(kernel, nest, target.vector_bytes)
        costly = any(isinstance(n, cir.Call) and n.fn not in CHEAP for n in cir.walk(nest.body))
        return VectorParams(GenericThread().default(kernel, target, sizes).threads, w, 2 if costly else 1)

    def space(self, kernel, target, sizes):
        first = self.default(kernel, target, sizes)
        return [first] + [VectorParams(t, first.width, u) for u in (1, 2) for t in (64, 128, 256, 512, 1024)
                          if t <= target.max_threads and (t, u) != (first.threads, first.per_thread)]

    def build(self, kernel, target, sizes, params: VectorParams) -> ir.Program:
        sizes = {k: int(v) for k, v in sizes.items()}
        nest = parallel_nest(kernel.body, sizes)
        W = params.width
        (_, bufs), _ = vector_width(kernel, nest, target.vector_bytes)
        idx = flat_index_dtype(kernel, sizes, False, nest.total)
        sites = errflag.ErrorSites()
        low = _LaneLowering(kernel, sizes, sites, idx)
        lp = nest.loops[-1]
        vnest = replace(nest, extents=nest.extents[:-1] + [nest.extents[-1] // W])
        total = vnest.total
        inner = decompose(low, vnest.loops, vnest.extents, ir.Ref("_g", idx), idx)
        vec = low.lookup(lp.var)[0]              # the vector's index in the row
        base = ir.Bin("*", ir.Ref(vec, idx), lit(W, idx), idx)
        inner.append(ir.Decl("_v0", idx, base, False, lp.line))
        v0 = ir.Ref("_v0", idx)
        # one vector load per distinct contiguous load, one vector store per store
        loads: dict = {}
        for n, line in ((n, s.line) for s in nest.body for n in cir.walk(s)):
            if isinstance(n, cir.Load) and lp.var in free_vars(n) and (n.buffer, n.index) not in loads:
                low.line = line or low.line     # a check names the statement that reads
                arr = f"_vin{len(loads)}"
                dtype = low.buffers[n.buffer][1]
                inner.append(ir.Array(arr, dtype, W, "local", lp.line))
                inner += low.with_var(lp.var, v0, lambda n=n, arr=arr, dtype=dtype: [ir.Copy(
                    arr, lit(0, idx), low.buffers[n.buffer][0],
                    low.flat(n.buffer, n.index, False, n.spans)[0], W, dtype, lp.line)])
                loads[(n.buffer, n.index)] = arr
        stores = [s for s in nest.body if isinstance(s, cir.Store)]
        outs = {}
        for k, s in enumerate(stores):
            outs[id(s)] = f"_vout{k}"
            inner.append(ir.Array(f"_vout{k}", low.buffers[s.buffer][1], W, "local", s.line))
        low.vectors = loads
        for lane in range(W):
            low.lane = lane

            col = v0 if lane == 0 else ir.Bin("+", v0, lit(lane, idx), idx)
            inner += low.with_var(lp.var, col, lambda: low.lane_stmts(nest.body, outs,
                                                                      lit(lane, "i32")))
        low.lane = None
        for s in stores:
            inner += low.with_var(lp.var, v0, lambda s=s: [
                low.copy_out(s, outs[id(s)], lit(0, "i32"), W)])
        body = list(low.stmts(nest.prologue))
        body.append(self.spread(total, params, inner, idx, nest.loops[0].line))
        what = (f"one thread per {W} consecutive elements of ({', '.join(l.var for l in nest.loops)}), "
                f"{W * max(DTYPE_BYTES[low.buffers[b][1]] for b in bufs)}-byte vector loads")
        blocks = max(1, min(-(-total // (params.threads * params.per_thread)), target.max_blocks))
        prog = one_kernel(kernel, buffer_params(kernel, sizes, idx), body, params.threads, idx, what,
                          blocks, sites.as_tuple(), f"thread: {what} (vector: {params.describe()})")
        prog.aligned = tuple(sorted(user_name(b) for b in bufs))
        fallback = GenericThread().build(kernel, target, sizes, ThreadParams(params.threads))
        prog.fallback = _renamed(fallback, "_w1", len(prog.sites))
        prog.sites = prog.sites + fallback.sites
        return prog

    @staticmethod
    def spread(total: int, params: VectorParams, inner: list, idx: str, line: int):
        """`inner` (one vector at `_g`) over this thread's vectors: one a grid stride, or
        `per_thread` of them, `threads` apart, in an unrolled loop (their loads issued
        together: an elementwise kernel's single one each left too few bytes in flight to
        reach the copy bandwidth)."""
        u = params.per_thread
        if u == 1:
            return spread("_g", total, params.threads, 0, inner, idx, line)
        g = ir.Bin("+", ir.Ref("_gb", idx), ir.Bin("*", ir.Ref("_u", idx), lit(params.threads, idx), idx), idx)
        whole = total % (params.threads * u) == 0
        each = ir.For("_u", lit(0, idx), lit(u, idx), lit(1, idx), (
            ir.Decl("_g", idx, g), *(inner if whole else [
                ir.If(ir.Bin("<", ir.Ref("_g", idx), lit(total, idx), "bool"), tuple(inner))])),
            idx, line, unroll=True)
        return spread("_gb", total, params.threads * u, 0, [each], idx, line)


def _renamed(prog: ir.Program, suffix: str, first_site: int) -> ir.Program:
    """`prog` with its kernels renamed (one source holds both) and its error sites
    numbered after `first_site` others."""
    def shift(node):
        if isinstance(node, (ir.Checked, ir.InRange)):
            return replace(node, site=node.site + first_site)
        if isinstance(node, ir.CheckedDiv):
            return replace(node, site_zero=node.site_zero + first_site,
                           site_overflow=node.site_overflow + first_site if node.site_overflow else 0)
        return node
    kernels = tuple(replace(k, name=k.name + suffix, body=map_nodes(k.body, shift))
                    for k in prog.kernels)
    launches = tuple(replace(l, kernel=l.kernel + suffix) for l in prog.launches)
    return replace(prog, kernels=kernels, launches=launches)


class _LaneLowering(ScalarLowering):
    """Inside a lane, a load that was read as a vector reads its lane of the vector."""

    vectors: dict = {}
    lane = None

    def load(self, e: cir.Load) -> ir.Expr:
        if self.lane is not None and (e.buffer, e.index) in self.vectors:
            dtype = self.buffers[e.buffer][1]
            return cast(ir.Load(self.vectors[(e.buffer, e.index)], lit(self.lane, "i32"), dtype),
                        compute_dtype(dtype))
        return super().load(e)
