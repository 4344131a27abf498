"""The block schedule: one block per iteration of the parallel loop nest, its threads sharing
the work inside (fused kernels with `shared var` and `barrier()`, nests of few iterations
with long inner loops).

Inside an iteration every thread runs the scalar statements itself (its locals are copies,
equal in every thread, so conditions and loop counts are the same for the whole block);
what the loops do is shared:

* a loop whose iterations are independent (a parallel loop, or one that writes its own
  elements) is split over the threads (thread t takes t, t + T, ...), a barrier after it;
* a loop that only accumulates into outer variables is split the same way into per-thread
  partials, then a block all-reduction combines them with the value before the loop;
* any other loop runs in every thread, in order; the loops inside it are shared again;
* a store or an atomic outside a shared loop is made by thread 0, a barrier after it;
* `shared var` is block memory, zero-filled by the block when the iteration reaches it (as
  the reference fills it), or, where the arrays pass the target's shared memory, a slice
  of a scratch buffer per block (at most SPILL_BLOCKS blocks); `barrier()` is a barrier.

Tile values are loops over block arrays first (passes/tile_loops.py): an element loop is
shared, a reduction of a tile is a block all-reduction. Without a parallel loop, one block
runs the whole body.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import (NotScalar, ScalarLowering, buffer_params, cast, index_dtype, lit,
                             user_name)
from ..passes.loops import assigned_vars, classify_loop, declared_vars, has_node, trip_count
from .base import Builder, Params, Schedule, one_kernel, workgroup_threads
from .collective import fold_partials, partials
from .generic import GenericThread
from .nest import decompose, first_thread, parallel_nest, shared_loops, thread, without_tiles
from .reduce import pow2_at_least


@dataclass(frozen=True)
class BlockParams(Params):
    threads: int = 256


# blocks of a launch whose shared arrays live in scratch memory (a slice each)
SPILL_BLOCKS = 1024


def _shared_bytes(body, sizes) -> int:
    return sum((8 if s.dtype in ("f64", "i64", "u64") else 4) *
               prod(cir.eval_dim(d, sizes) for d in s.shape)
               for s in cir.walk(body) if isinstance(s, cir.SharedAlloc))


def _spills(body, target, sizes, threads: int) -> bool:
    """Whether the shared arrays of `body` pass the target's shared memory (less what the
    block all-reductions may take: a tree of 8-byte values), so that they live in a scratch
    buffer instead, one slice per block."""
    limit = (target.static_shared_bytes or target.shared_bytes) - 8 * threads
    return _shared_bytes(body, sizes) > limit


class Block(Schedule):
    name = "block"

    def why_not(self, kernel, target, sizes):
        if kernel.kernel_type.kind == "reduce":
            return "a reduce kernel"
        if target.symbolic_sizes:
            return "shared arrays need the sizes of the launch"
        thread_takes = GenericThread().why_not(kernel, target, sizes) is None
        kernel, why = without_tiles(kernel, sizes)
        if why:
            return why
        nest = parallel_nest(kernel.body, sizes)
        if has_node(nest.body, cir.Yield):
            return "a yield outside a reduce kernel"
        if not has_node(nest.body, (cir.SharedAlloc, cir.Barrier)) and thread_takes:
            return "no shared arrays or barriers, and the thread schedule takes it"
        return None

    def default(self, kernel, target, sizes):
        wg = workgroup_threads(kernel)
        if wg >= 32:
            return BlockParams(min(target.max_threads, wg))
        kernel = without_tiles(kernel, sizes)[0] or kernel
        nest = parallel_nest(kernel.body, sizes)
        if not nest.loops:          # one block runs the whole body: as wide as it goes
            return BlockParams(min(1024, target.max_threads))
        trip = max((trip_count(lp, sizes) or 0 for lp in shared_loops(nest.body)), default=0)
        threads = pow2_at_least(max(trip // 8, 1), 32, 1024) if trip else 256
        return BlockParams(min(threads, target.max_threads))

    def space(self, kernel, target, sizes):
        first = self.default(kernel, target, sizes)
        return [first] + [BlockParams(t) for t in (32, 64, 128, 256, 512, 1024)
                          if t <= target.max_threads and t != first.threads]

    def build(self, kernel, target, sizes, params: BlockParams) -> ir.Program:
        return _Builder(kernel, target, sizes, params).program()


class _Builder(Builder):
    spill = False                       # shared arrays in scratch (device) memory

    def barrier(self, ln) -> ir.Barrier:
        return ir.Barrier(ln, self.spill)

    def __init__(self, kernel, target, sizes, params: BlockParams):
        self.sizes = {k: int(v) for k, v in sizes.items()}
        kernel = without_tiles(kernel, self.sizes)[0] or kernel
        self.k, self.t, self.T = kernel, target, params.threads
        self.nest = parallel_nest(kernel.body, self.sizes)
        # shared arrays, one copy a block where they spill to memory (all of them one after
        # another in a block's slice), index past 2^31 too
        shared = [prod(cir.eval_dim(d, self.sizes) for d in s.shape) for s in cir.walk(self.nest.body)
                  if isinstance(s, cir.SharedAlloc)]
        wide = sum(shared) * max(1, self.nest.total) >= 2 ** 31 - 1
        self.idx = "i64" if wide else index_dtype(kernel, self.sizes)
        self.sites = errflag.ErrorSites()
        self.low = ScalarLowering(kernel, self.sizes, self.sites, self.idx, target=target)
        self.shared = []
        self.counts: dict = {}          # shared array -> elements

    def at(self, axis):
        return thread(axis, self.idx)

    def program(self) -> ir.Program:
        nest, idx = self.nest, self.idx
        spill = self.spill = _spills(nest.body, self.t, self.sizes, self.T)
        blocks = max(1, min(nest.total, self.t.max_blocks, SPILL_BLOCKS if spill else nest.total))
        # shared arrays: block memory declared once at the top of the kernel, or (past the
        # target's shared memory) a slice per block of one scratch buffer per dtype, the
        # block's arrays one after another in it (an adapter binds few storage buffers)
        scratch, params = [], list(buffer_params(self.k, self.sizes, idx))
        allocs = [s for s in cir.walk(nest.body) if isinstance(s, cir.SharedAlloc)]
        per_block: dict = {}            # dtype -> (scratch name, elements a block)
        offsets: dict = {}              # spilled array -> its offset in the block's slice
        for s in allocs:
            if s.name in self.low.buffers:
                raise NotScalar(f"shared array `{s.name}` declared twice")
            count = self.counts[s.name] = prod(cir.eval_dim(d, self.sizes) for d in s.shape)
            ident = user_name(s.name)
            if spill:
                ident, offsets[s.name] = per_block.get(s.dtype, (f"_spill_{s.dtype}", 0))
                per_block[s.dtype] = (ident, offsets[s.name] + count)
            else:
                self.shared.append(ir.Array(ident, s.dtype, count, "shared", s.line))
            self.low.buffers[s.name] = (ident, s.dtype, tuple(s.shape))
        for s in allocs if spill else ():
            total = per_block[s.dtype][1]
            self.low.bases[s.name] = ir.Bin("+", ir.Bin("*", self.at("block"), self.i(total), idx),
                                            self.i(offsets[s.name]), idx)
        for dtype, (name, total) in per_block.items():
            scratch.append(ir.Scratch(name, dtype, lit(total * blocks, "i64")))
            params.append(ir.Param(name, "scratch", dtype, True))
        body = list(self.shared) + list(self.low.stmts(nest.prologue))
        threads = f"{self.T} thread{'s' if self.T > 1 else ''}"
        if nest.loops:
            inner = decompose(self.low, nest.loops, nest.extents, ir.Ref("_b", idx), idx)
            inner += self.stmts(nest.body)
            body.append(ir.For("_b", self.at("block"), self.i(nest.total), self.at("blocks"),
                               tuple(inner), idx, nest.loops[0].line))
            what = (f"block: one block of {threads} per iteration of "
                    f"({', '.join(l.var for l in nest.loops)})")
        else:
            body += self.stmts(nest.body)
            what = f"block: one block runs the whole body ({threads})"
        if spill:
            what += ", its shared arrays in scratch memory"
        return one_kernel(self.k, tuple(params), body, self.T, idx, what, blocks, self.sites.as_tuple(),
                          f"{what} (block: threads={self.T})", scratch=tuple(scratch))

    def stmts(self, body, mutable: set | None = None, scope: bool = False) -> list:
        """`body` in the block (`scope`: in a scope of its own)."""
        mutable = set(mutable or ())
        out: list = []
        if scope:
            self.low.scopes.append({})
        try:
            for s in body:
                self.low.line = getattr(s, "line", 0) or self.low.line
                out += self.stmt(s, mutable)
        finally:
            if scope:
                self.low.scopes.pop()
        return out

    def stmt(self, s, mutable: set) -> list:
        low = self.low
        ln = getattr(s, "line", 0)
        if isinstance(s, cir.SharedAlloc):
            ident, dtype, _ = low.buffers[s.name]
            e = self.new("e")
            at = ir.Ref(e, self.idx)
            if s.name in low.bases:
                at = ir.Bin("+", low.bases[s.name], at, self.idx)
            fill = ir.For(e, self.at("thread"), self.i(self.counts[s.name]), self.i(self.T),
                          (ir.Store(ident, at, lit(0, dtype) if dtype != "bool"
                                    else lit(False, "bool"), None, ln),), self.idx, ln)
            return [fill, self.barrier(ln)]
        if isinstance(s, cir.Barrier):
            return [self.barrier(ln)]
        if isinstance(s, cir.Let):
            if s.mutable:
                mutable.add(s.name)
            return list(low.stmts((s,)))
        if isinstance(s, (cir.Store, cir.Atomic)):
            return [ir.If(first_thread(), tuple(low.stmts((s,))), (), ln), self.barrier(ln)]
        if isinstance(s, cir.If):
            cond = low.expr(s.cond)
            with low.facts.assuming(s.cond):
                then = self.stmts(s.then, mutable, scope=True)
            orelse = self.stmts(s.orelse, mutable, scope=True)
            return [ir.If(cast(cond, "bool"), tuple(then), tuple(orelse), ln)]
        if isinstance(s, cir.Loop):
            independent = s.parallel and not has_node(s.body, (cir.Barrier, cir.SharedAlloc)) \
                and not (assigned_vars(s.body) - declared_vars(s.body))
            kind = "independent" if independent else classify_loop(s, mutable)
            if kind == "independent":
                return [self.split(s, {}), self.barrier(ln)]
            # (a 64-bit sum held in two 32-bit words has no collective: its loop runs as written)
            if isinstance(kind, tuple) and not any(low.lookup(a)[0] in low.wide for a in kind[1]):
                return self.accumulate(s, kind[1])
            start, stop, step = low.index(s.start), low.index(s.stop), low.index(s.step)
            var, inner = low.in_loop(s.var, lambda: self.stmts(s.body, mutable))
            return [ir.For(var, start, stop, step, tuple(inner), self.idx, ln)]
        return list(low.stmts((s,)))

    def split(self, s: cir.Loop, rename: dict) -> ir.For:
        """`s` with thread t taking iterations t, t + T, ... (`rename`: CIR names that mean
        other locals inside, the accumulators' partials)."""
        low = self.low
        start, stop, step = low.index(s.start), low.index(s.stop), low.index(s.step)
        first = ir.Bin("+", start, ir.Bin("*", self.at("thread"), step, self.idx), self.idx)
        stride = ir.Bin("*", step, self.i(self.T), self.idx)
        var, inner = low.in_loop(s.var, lambda: low.stmts(s.body), rename)
        return ir.For(var, first, stop, stride, tuple(inner), self.idx, s.line)

    def accumulate(self, s: cir.Loop, accs: dict) -> list:
        """A loop that only accumulates: per-thread partials, a block all-reduction each, then
        the variable combined with its partial sum."""
        out, parts = partials(self.low, accs, self.new, s.line)
        out.append(self.split(s, {acc: (part, dt) for acc, (part, _, dt, _) in parts.items()}))
        return out + fold_partials(self.t, parts, self.T, line=s.line)
