"""The GEMM schedule on Hopper's warpgroup MMAs fed by the tensor memory accelerator (TMA,
sm_90a), with the warps specialised: `GemmParams(wgmma=True, tma=True)`, built by
`TmaBuilder`.

The block's first warpgroup is the producer: one of its threads walks the block's tiles and
their 64-deep K slices, and for each slice waits until its ring buffer is free (the `empty`
mbarrier of the buffer), says how many bytes will land (`full`), and asks the copy engine
for A's and B's boxes (one `TensorLoad` a 64-wide block of a side; zeros land outside the
matrix, so partial tiles need no guard). It gives its registers up (`setmaxnreg`) to the
other warpgroups, which multiply as `WgmmaBuilder` does (64 x TN each), waiting on `full`
instead of their own copies and a block barrier, and release a buffer (arrive on `empty`)
once the MMAs that read it completed:

    producer (one thread)                 consumers (the other warpgroups)
    for each slice g of each tile:        for each slice g of each tile:
      wait empty[g % S], parity ^ 1         wait full[g % S], parity (g / S) % 2
      arrive full[g % S], expecting bytes   wgmma x 4 on buffer g % S; commit
      TMA A, B -> buffer g % S              wait until only this slice's MMAs run
                                            arrive empty[(g - 1) % S]

so the copies of the next tile's slices run during this tile's epilogue (a block a
multiprocessor walks the tiles, where their number is known).

With `pingpong`, the two consumer warpgroups take whole BM x BN tiles in turn (the block's
tiles 0, 2, 4, ... and 1, 3, 5, ...): one's epilogue (an activation's math, the staged C's
stores) runs while the other multiplies. The ring holds the slices of the tiles in order, so
a warpgroup skips the other's; and as a wait on a ring buffer's parity only tells phases one
apart, a warpgroup starts multiplying a tile only once the other finished multiplying its
previous one (mbarriers `_turn`, each warpgroup arriving on the other's). Each has a staged
C of its own and a named barrier of its own. A staged C
(`_shc`) has memory of its own, since the ring is never idle, and the consumers order
their use of it with a named barrier of their own. The tensor maps are host data
(ir.TensorMap): a side's matrix as 2 or 3 dimensions (K or X innermost, then X or K, then
the batch where the side has one), made from the buffer's address at each launch.
"""
from __future__ import annotations

import dataclasses
from math import prod

from .. import cir
from ..launch import ir
from ..launch.scalar import user_name
from .gemm_wgmma import WgmmaBuilder
from ..passes.loops import counts_from_zero, trip_count

PRODUCER_REGISTERS = 40     # setmaxnreg: what the copying warpgroup keeps; the multiplying
REGISTER_FILE = 65536       # ones share the rest of the multiprocessor's registers (at most
MAX_REGISTERS = 232         # 232 each: 2 x 128 x 232 + 128 x 40 fit), or wait for them forever
_CONSUMERS_BARRIER = 1      # named barrier of the consumers (0 is the block's)


def tma_layout(kernel: cir.Kernel, form, side, sizes: dict):
    """(dims, strides, batched) of the side's operand as a TMA tensor: dims innermost first
    (K, X or X, K, then the batch where the load reads the batch variables), strides in
    elements of dims[1:]; None where its load is not a plain row-major view of the matrix:
    its indices the batch variables (all or none), the side's variables and the one
    reduction variable, in that order (K or X last), each loop from 0 by 1, the inner
    variables of X and the batch spanning their whole dimension, rows 16-byte aligned."""
    c = form.c
    if len(c.rloops) != 1 or c.cond is not None or side.cond is not None:
        return None
    buf = next(b for b in kernel.inputs if b.name == side.load.buffer)
    idx = side.load.index
    if not all(isinstance(i, cir.Var) for i in idx):
        return None
    names = [i.name for i in idx]
    k = c.rloops[0].var
    bvars = [v for v in c.bvars if v in names]
    if bvars and bvars != list(c.bvars):
        return None
    x = list(side.vars)
    order = bvars + (x + [k] if side.kcontig else [k] + x)
    if names != order:
        return None
    loops = {lp.var: lp for lp in list(c.ploops) + list(c.rloops)}
    if not counts_from_zero(loops[v] for v in names):
        return None
    shape = [cir.eval_dim(d, sizes) for d in buf.shape]
    trips = {v: trip_count(loops[v], sizes) for v in names}
    elem = [prod(shape[i + 1:]) for i in range(len(shape))]
    pos = {v: i for i, v in enumerate(names)}
    # a group of variables flattened into one dimension: its inner ones span their dimension
    groups = [[k], x] if side.kcontig else [x, [k]]
    if bvars:
        groups.append(bvars)
    dims, strides = [], []
    for n, g in enumerate(groups):
        if any(shape[pos[v]] != trips[v] for v in g[1:]):
            return None
        dims.append(prod(trips[v] for v in g))
        if n:
            strides.append(elem[pos[g[-1]]])
    if elem[pos[groups[0][-1]]] != 1 or any(s * 2 % 16 for s in strides) or \
            any(d >= 1 << 31 for d in dims) or any(s * 2 >= 1 << 40 for s in strides):
        return None
    return tuple(dims), tuple(strides), bool(bvars)


class TmaBuilder(WgmmaBuilder):
    c_alias = ""            # the ring is never idle: the staged C has memory of its own

    def __init__(self, kernel, target, sizes, params, sites, suffix: str = ""):
        super().__init__(kernel, target, sizes, params, sites, suffix)
        self.layout = {s: tma_layout(kernel, self.f, getattr(self.f, s), self.sizes) for s in "mn"}
        if None in self.layout.values():
            raise ValueError("TMA needs each operand a plain row-major view of its matrix")
        ob = {"f16": 2, "bf16": 2}.get(kernel.output.dtype, 4)
        ring = params.stages * (params.bm + params.bn) * params.bk * 2 + 16 * params.stages + 1024
        self.c_tiles = 2 if params.pingpong else 1
        self.staged = self.staged and ring + self.c_tiles * params.bm * self.ldc * ob <= target.shared_bytes

    def setup(self, head: list):
        super().setup(head)
        for name in ("_full", "_empty"):
            head.append(ir.Array(name, "u64", self.p.stages, "shared", align=8))
        if self.p.pingpong:
            head.append(ir.Array("_turn", "u64", 2, "shared", align=8))

    def consumer(self) -> ir.Expr:
        """The consumer warpgroup of this thread (the producer is warpgroup 0)."""
        return self.op("-", self.op("/", self.axis("warp"), 4), 1)

    def group(self) -> ir.Expr:
        """This thread's warpgroup within the tile: a ping-pong one holds its whole tile."""
        return self.i(0) if self.p.pingpong else self.consumer()

    def sync(self) -> ir.Stmt:
        """The consumers' barrier (each ping-pong warpgroup has one of its own)."""
        if self.p.pingpong:
            return ir.NamedBarrier(self.op("+", self.consumer(), _CONSUMERS_BARRIER), 128)
        return ir.NamedBarrier(self.i(_CONSUMERS_BARRIER), self.p.threads - 128)

    def c_base(self) -> ir.Expr:
        return self.op("*", self.consumer(), self.p.bm * self.ldc) if self.p.pingpong else self.i(0)

    def resident_blocks(self) -> int:
        """A block a multiprocessor where their number is known: a block takes most of one's
        shared memory, and a block that stays loads its next tile's slices during this
        tile's epilogue."""
        return min(self.t.multiprocessors or self.t.max_blocks, self.t.max_blocks)

    def program(self) -> ir.Program:
        prog = super().program()
        k = prog.kernels[0]
        maps = tuple(ir.Param(m.name, "tensormap", m.dtype) for m in self.maps)
        prog.kernels = (dataclasses.replace(k, params=k.params + maps),) + prog.kernels[1:]
        prog.tensor_maps = tuple(self.maps)
        return prog

    def roles(self, tile_loop, tile_body) -> list:
        p, S = self.p, self.p.stages
        consumers = p.threads - 128
        # a ping-pong warpgroup takes every other tile of the block, its slices every other
        # tile's in the ring: it starts after the first tile's if it is the second
        self.workers = 128 if p.pingpong else consumers
        self.tid = self.op("%" if p.pingpong else "-", self.axis("thread"), 128)
        first = self.op("<", self.axis("thread"), 1)
        init = [ir.Mbarrier("init", n, self.i(s), count=c) for s in range(S)
                for n, c in (("_full", 1), ("_empty", self.workers))]
        if p.pingpong:
            init += [ir.Mbarrier("init", "_turn", self.i(c), count=128) for c in range(2)]
        producer = [ir.SetMaxRegisters(PRODUCER_REGISTERS, False),
                    ir.If(first, (ir.Decl("_ks", self.idx, self.i(0), True), tile_loop(self.produce())))]
        share = (REGISTER_FILE - 128 * PRODUCER_REGISTERS) // consumers // 8 * 8
        turn = self.op("*", self.consumer(), self.slices()) if p.pingpong else self.i(0)
        consumer = [ir.SetMaxRegisters(min(MAX_REGISTERS, share), True), ir.Decl("_ks", self.idx, turn, True)]
        if p.pingpong:
            consumer.append(ir.Decl("_tj", self.idx, self.i(0), True))
        consumer += [tile_loop(tile_body(), *((self.consumer(), 2) if p.pingpong else ()))]
        is_producer = self.op("<", self.axis("thread"), 128)
        return [ir.If(first, tuple(init)), ir.Barrier(), ir.If(is_producer, tuple(producer), tuple(consumer))]

    # ---- the producer ---------------------------------------------------------------

    def produce(self) -> list:
        """One tile's slices: wait for a free buffer, expect its bytes, ask for A's and B's
        boxes."""
        p, S = self.p, self.p.stages
        self.maps = []
        head = []
        nk = self.name(head, "nk", self.slices())
        ks, k0 = self.ref("_ks"), self.op("*", self.ref("_kt"), p.bk)
        slot = ir.Ref("_slot", self.idx)
        body = [ir.Decl("_slot", self.idx, self.op("%", ks, S)),
                ir.Mbarrier("wait", "_empty", slot, parity=self.op("%", self.op("+", self.op("/", ks, S), 1), 2)),
                ir.Mbarrier("arrive", "_full", slot, tx=(p.bm + p.bn) * p.bk * 2)]
        for s in "mn":
            body += self.boxes(s, slot, k0)
        body.append(ir.Set("_ks", self.op("+", ks, 1)))
        return head + [self.k_loop(nk, body)]

    def boxes(self, s: str, slot: ir.Expr, k0: ir.Expr) -> list:
        """Side s's boxes of the slice at k0 into buffer `slot` (the tile layout of
        WgmmaBuilder.at): K-major, one box of 64 K x BX rows; else a box of 64 X x 64 K for
        each 64 columns of the tile."""
        p, side = self.p, getattr(self.f, s)
        dims, strides, batched = self.layout[s]
        bx = p.bm if s == "m" else p.bn
        name = f"_map{s}"
        box = (64, bx) if side.kcontig else (64, p.bk)
        if batched:
            box += (1,)
        buffer = user_name(side.load.buffer)
        host = lambda vals: tuple(ir.Lit(v, "i64") for v in vals)      # host values, not indices
        self.maps.append(ir.TensorMap(name, buffer, self.tile_dt[s], host(dims), host(strides), box))
        x0 = self.m0 if s == "m" else self.n0
        extra = (ir.Ref("_bz", self.idx),) if batched else ()
        base = self.op("*", slot, bx * p.bk)
        if side.kcontig:
            return [ir.TensorLoad(name, (k0, x0) + extra, f"_sh{s}", base, "_full", slot)]
        return [ir.TensorLoad(name, (self.op("+", x0, 64 * j), k0) + extra, f"_sh{s}",
                              self.op("+", base, 64 * j * p.bk), "_full", slot) for j in range(bx // 64)]

    # ---- the consumers --------------------------------------------------------------

    def pipelined(self) -> list:
        p, S, n = self.p, self.p.stages, self.acc_count
        head = []
        nk = self.name(head, "nk", self.slices())
        ks = self.ref("_ks")
        slot = ir.Ref("_slot", self.idx)
        release = lambda: ir.Mbarrier("arrive", "_empty", self.op("%", self.op("+", ks, S - 1), S))
        body = [ir.Decl("_slot", self.idx, self.op("%", ks, S)),
                ir.Mbarrier("wait", "_full", slot, parity=self.op("%", self.op("/", ks, S), 2)),
                ir.WarpgroupFence("_acc", n)]
        body += self.multiply(slot)
        # the previous slice's MMAs are complete once only this one's run: its buffer is free
        body += [ir.WarpgroupCommit(), ir.WarpgroupWait(1, "_acc", n),
                 ir.If(self.op("<", self.i(0), self.ref("_kt")), (release(),)),
                 ir.Set("_ks", self.op("+", ks, 1))]
        loop = [ir.For("_kt", self.i(0), nk, self.i(1), tuple(body), self.idx, self.f.c.rloops[0].line),
                ir.WarpgroupWait(0, "_acc", n), ir.If(self.op("<", self.i(0), nk), (release(),))]
        if not p.pingpong:
            return head + loop
        # the warpgroups multiply in turn, each after the other's previous tile (a wait on the
        # ring's parity only tells phases one apart); then it skips the other's slices
        me, tj = self.consumer(), self.ref("_tj")
        turn = self.op("%", self.op("+", self.op("+", tj, me), 1), 2)
        return head + [ir.Mbarrier("wait", "_turn", me, parity=turn)] + loop + [
            ir.Mbarrier("arrive", "_turn", self.op("-", self.i(1), me)),
            ir.Set("_tj", self.op("+", tj, 1)), ir.Set("_ks", self.op("+", ks, nk))]

    def product(self, shape: str) -> str:
        p = self.p
        split = "2 warpgroups taking whole tiles in turn (ping-pong)" if p.pingpong else \
            f"{(p.threads - 128) // 128} warpgroups of 64x{p.tn}"
        return (f"on tensor cores (wgmma m64n{p.tn}k16 {self.f.dtypes[0]}, f32 accumulate): {shape}; "
                f"{p.bm}x{p.bn}x{p.bk} tiles, {split} "
                f"fed by a TMA producer warpgroup through {p.stages} shared-memory stages (mbarriers), "
                f"128-byte swizzle")
