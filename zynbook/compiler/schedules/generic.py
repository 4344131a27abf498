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
from ..launch.scalar import (NotScalar, ScalarLowering, buffer_params, host_expr, index_dtype,
                              lit, product_expr)
from .base import Params, Schedule, kernel_name, workgroup_threads
from .nest import extents, parallel_nest, trip_count, without_tiles


@dataclass(frozen=True)
class ThreadParams(Params):
    threads: int = 256          # threads per block
    chunk: int = 0              # iterations per block, contiguous (0: grid-stride)


# kernel types whose iterations are independent and many (a block per iteration never
# pays): for every size set, the thread schedule whatever their inner loops
THREAD_KINDS = ("elementwise", "conv2d", "conv2d_depthwise")


def _has(body, types) -> bool:
    return any(isinstance(n, types) for n in cir.walk(body))


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
        if _has(nest.body, (cir.SharedAlloc, cir.Barrier, cir.Yield)):
            return "shared arrays and barriers (tiles held in block memory) need a block schedule"
        if sym and kernel.kernel_type.kind not in THREAD_KINDS and self._long_inner(nest, None):
            return "inner loops over a size: one block per iteration pays"
        if not sym and target.max_threads > 1 and nest.total <= 65536 \
                and self._long_inner(nest, sizes):
            return "few iterations with long inner loops: one block per iteration pays"
        return None

    @staticmethod
    def _long_inner(nest, sizes) -> bool:
        """An inner loop the block schedule would split over a block's threads, of 64
        iterations or more (sizes None: for every size set, so any loop whose count
        depends on a size)."""
        from ..passes.loops import classify_loop        # the block schedule's own test
        mutable = {n.name for n in cir.walk(nest.body) if isinstance(n, cir.Let) and n.mutable}
        for lp in (n for n in cir.walk(nest.body) if isinstance(n, cir.Loop)):
            if not (lp.parallel or classify_loop(lp, mutable) is not None):
                continue
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
        idx = "i32" if sym else index_dtype(kernel, sizes)
        if not sym and nest.total >= 2 ** 31 - 1:
            idx = "i64"
        sites = errflag.ErrorSites()
        low = ScalarLowering(kernel, sizes, sites, idx, symbolic=sym)
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

        def at(axis):
            e = ir.Thread(axis)
            return e if idx == "i32" else ir.Cast(e, idx)
        if params.chunk:
            start = ir.Bin("*", at("block"), lit(params.chunk, idx), idx)
            stop = ir.Math("min", (ir.Bin("+", start, lit(params.chunk, idx), idx), total), idx)
            step = lit(1, idx)
            grid = ir.ceildiv(total_e, params.chunk)
        else:
            start = ir.Bin("+", ir.Bin("*", at("block"), lit(params.threads, idx), idx),
                           at("thread"), idx)
            stop = total
            step = ir.Bin("*", at("blocks"), lit(params.threads, idx), idx)
            grid = ir.Math("min", (ir.ceildiv(total_e, params.threads),
                                   lit(target.max_blocks, idx)), idx)
        grid = ir.Math("max", (grid, lit(1, idx)), idx)
        if not sym:
            grid = lit(ir.evaluate(grid, {}), "i64")
        inner = self._decompose(low, nest, "_g", idx, names) + list(low.stmts(nest.body))
        body.append(ir.For("_g", start, stop, step, tuple(inner), idx, line))
        name = kernel_name(kernel)
        what = (f"one thread per iteration of ({', '.join(l.var for l in nest.loops)})"
                if not params.chunk else
                f"blocks of {params.chunk} iterations of ({', '.join(l.var for l in nest.loops)})")
        k = ir.Kernel(name, buffer_params(kernel, sizes, idx), tuple(body), params.threads, idx, what)
        return ir.Program(kernel.name, (k,), (ir.Launch(name, grid, params.threads),), (),
                          sites.as_tuple(), f"thread: {what} (generic: {params.describe()}"
                          + (", every size)" if sym else ")"))

    @staticmethod
    def _decompose(low: ScalarLowering, nest, g: str, idx: str, exts=None) -> list:
        """Bind each nest variable from the flat iteration `g` (innermost fastest); `exts`:
        the extents as expressions (else the numbers of the nest)."""
        out: list = []
        rem = ir.Ref(g, idx)
        n = len(nest.loops)
        for k in range(n - 1, -1, -1):
            lp = nest.loops[k]
            ext = exts[k] if exts is not None else lit(nest.extents[k], idx)
            part = ir.Bin("%", rem, ext, idx) if k > 0 else rem
            start, step = low.index(lp.start), low.index(lp.step)
            val = part
            if not (isinstance(step, ir.Lit) and step.value == 1):
                val = ir.Bin("*", val, step, idx)
            if not (isinstance(start, ir.Lit) and start.value == 0):
                val = ir.Bin("+", start, val, idx)
            out.append(ir.Decl(low.bind(lp.var, idx), idx, val, False, lp.line))
            if k > 0:
                nxt = f"_r{k}"
                out.append(ir.Decl(nxt, idx, ir.Bin("/", rem, ext, idx), False, lp.line))
                rem = ir.Ref(nxt, idx)
        return out
