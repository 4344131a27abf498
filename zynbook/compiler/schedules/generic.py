"""The generic thread schedule: one thread per iteration of the parallel loop nest.

Every kernel whose parallel iterations are scalar code (elementwise maps, gathers, stencils,
loops with scalar accumulators inside an iteration) runs this way on every target:

* GPUs: `threads` per block, a grid of ceil(total / threads) blocks, and a grid-stride loop
  over the flattened nest, so neighbouring threads touch neighbouring elements;
* the CPU (one thread per block, blocks run by the host's cores): each block takes a
  contiguous `chunk` of iterations, so a core streams through memory.

Tile values are loops first (passes/tile_loops.py); kernels whose tiles need block memory,
with shared arrays or barriers, and nests of few iterations whose bodies
are long loops (where one block per iteration pays), need a block schedule.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import NotScalar, ScalarLowering, buffer_params, host_expr, lit, product_expr
from .base import Params, Schedule, one_kernel, workgroup_threads
from ..passes.loops import has_node, trip_count
from .nest import (decompose, extents, flat_index_dtype, parallel_nest, shared_loops, spread,
                   without_tiles)


@dataclass(frozen=True)
class ThreadParams(Params):
    threads: int = 256          # threads per block
    chunk: int = 0              # iterations per block, contiguous (0: grid-stride)


# kernel types whose iterations are independent and many (a block per iteration never
# pays): for every size set, the thread schedule whatever their inner loops
THREAD_KINDS = ("elementwise", "conv2d", "conv2d_depthwise")


class GenericThread(Schedule):
    name = "generic"

    def why_not(self, kernel, target, sizes):
        if kernel.kernel_type.kind == "reduce":
            return "a reduce kernel has its own schedule"
        sym = target.symbolic_sizes
        nest = parallel_nest(kernel.body, sizes, sym)
        if not nest.loops:
            return "no parallel loop to spread over threads"
        kernel, why = without_tiles(kernel, sizes)
        if why:
            return why
        nest = parallel_nest(kernel.body, sizes, sym)
        if has_node(nest.body, (cir.SharedAlloc, cir.Barrier, cir.Yield)):
            return "shared arrays and barriers (tiles held in block memory) need a block schedule"
        # (a 64-bit sum where the target has no 64-bit integers is one thread's: two words
        # that no block's collective combines, launch/scalar.py `wide_sum`)
        wide = not target.int64 and any(isinstance(n, cir.Assign) and
                                        n.value.ty.dtype in ("i64", "u64")
                                        for n in cir.walk(nest.body))
        if sym and kernel.kernel_type.kind not in THREAD_KINDS and not wide and \
                self._long_inner(nest, None):
            return "inner loops over a size: one block per iteration pays"
        if not sym and target.max_threads > 1 and nest.total <= 65536 and not wide \
                and self._long_inner(nest, sizes):
            return "few iterations with long inner loops: one block per iteration pays"
        return None

    @staticmethod
    def _long_inner(nest, sizes) -> bool:
        """An inner loop the block schedule would split over a block's threads, of 64
        iterations or more (sizes None: for every size set, so any loop whose count
        depends on a size)."""
        for lp in shared_loops(nest.body):
            n = trip_count(lp, sizes if sizes is not None else {})
            if (n is None and sizes is None) or (n or 0) >= 64:
                return True
        return False

    def default(self, kernel, target, sizes):
        if target.max_threads == 1 and not target.symbolic_sizes:
            total = parallel_nest(kernel.body, sizes).total
            blocks = max(1, min(total, 8 * target.cores))
            return ThreadParams(1, -(-total // blocks))
        wg = workgroup_threads(kernel)
        return ThreadParams(min(target.max_threads, wg) if wg >= 32 else min(256, target.max_threads))

    def space(self, kernel, target, sizes):
        first = self.default(kernel, target, sizes)
        if target.max_threads == 1:
            return [first]
        return [first] + [ThreadParams(t) for t in (64, 128, 256, 512, 1024)
                          if t <= target.max_threads and t != first.threads]

    def build(self, kernel, target, sizes, params: ThreadParams) -> ir.Program:
        """Baked sizes (CUDA, C++, Metal): counts are numbers. Symbolic sizes (WebGPU): the
        program serves every size set; counts are expressions over the sizes, the grid a
        host expression, indices i32 (a launch reaching 2^31 is refused by the device)."""
        sym = target.symbolic_sizes
        sizes = {k: int(v) for k, v in sizes.items()}
        kernel = without_tiles(kernel, sizes)[0] or kernel
        nest = parallel_nest(kernel.body, sizes, sym)
        idx = flat_index_dtype(kernel, sizes, sym, nest.total)
        sites = errflag.ErrorSites()
        low = ScalarLowering(kernel, sizes, sites, idx, symbolic=sym, target=target)
        body = list(low.stmts(nest.prologue))
        line = nest.loops[0].line
        exts = extents(low, nest.loops) if sym else [lit(e, idx) for e in nest.extents]
        total_e = product_expr(exts, idx)
        if not host_expr(total_e):
            raise NotScalar("a loop bound the host cannot compute")
        names = []                  # the extents as the kernel reads them
        for k, e in enumerate(exts):
            if isinstance(e, ir.Lit):
                names.append(e)
                continue
            body.append(ir.Decl(f"_n{k}", idx, e, False, line))
            names.append(ir.Ref(f"_n{k}", idx))
        total = product_expr(names, idx)
        if not isinstance(total, (ir.Lit, ir.Ref)):
            body.append(ir.Decl("_total", idx, total, False, line))
            total = ir.Ref("_total", idx)
        if params.chunk:
            grid = ir.ceildiv(total_e, params.chunk)
        else:
            grid = ir.Math("min", (ir.ceildiv(total_e, params.threads),
                                   lit(target.max_blocks, idx)), idx)
        grid = ir.Math("max", (grid, lit(1, idx)), idx)
        inner = decompose(low, nest.loops, names, ir.Ref("_g", idx), idx)
        inner += low.stmts(nest.body)
        body.append(spread("_g", total, params.threads, params.chunk, inner, idx, line))
        what = (f"one thread per iteration of ({', '.join(l.var for l in nest.loops)})"
                if not params.chunk else
                f"blocks of {params.chunk} iteration{'s' if params.chunk > 1 else ''} of "
                f"({', '.join(l.var for l in nest.loops)})")
        return one_kernel(kernel, buffer_params(kernel, sizes, idx), body, params.threads, idx, what,
                          grid, sites.as_tuple(), f"thread: {what} (generic: {params.describe()}"
                          + (", every size)" if sym else ")"), sym)
