"""Attention on Hopper's warpgroup MMAs (PTX `wgmma.mma_async`, sm_90a): the products of
FlashAttention-3 inside the tensor-core kernel of attention_mma.py, whose copies, online
softmax and stores it keeps.

A block of `warps / 4` warpgroups takes 64 queries each. Q's rows, and each tile's K and V
rows, are copied by cp.async into 128-byte swizzled shared tiles (`shared_at`): a row of
head_dim is cut into chunks of 64 elements, chunk c of all the tile's rows one after another
(a 128-byte row each, its 16-byte unit u at u ^ (row % 8)), every tile 1024-byte aligned.
Per tile and warpgroup:

* S = Q K^T as head_dim / 16 steps m64n`block_kv`k16, both operands read by the hardware
  from the shared tiles (K-major: Q's rows are A's, K's rows B's columns);
* the softmax of attention_mma.py on S's accumulators, whose layout is a warp's m16n8 C
  tiles side by side (the warp's 16 queries, key 8 i + 2 (lane % 4) + e % 2 at 4 i + e);
  P goes into A fragments of the input's type as there;
* O += P V as block_kv / 16 steps m64n`head_dim`k16, A (P) from the registers, B (V) read
  from the shared tile along head_dim (MN-major: the chunks of 64 columns are the blocks
  the descriptor's leading byte offset steps over).

Each product is one group, waited for before its results are used; the copies of the next
tiles run meanwhile, as in the tensor-core kernel (`stages`), published to the MMAs' proxy
by fence.proxy.async before the barrier. With `pingpong` the two warpgroups of a block take
turns at the tensor cores (FlashAttention-3's ping-pong, through named barriers): one's
softmax runs while the other's products do.
"""
from __future__ import annotations

from dataclasses import replace
from math import prod

from .. import cir
from ..launch import ir
from ..launch.scalar import user_name
from .attention import AttentionParams
from .attention_mma import EVERY, _MmaKernel

CHUNK = 64                  # elements of a 128-byte swizzled row (16-bit elements)
ROW_BYTES = 128
SBO = 8 * ROW_BYTES         # bytes between groups of eight rows

WGMMA = AttentionParams(mma=True, wgmma=True, block_q=128, warps=8, hold_q=False, **EVERY)


def chunks(D: int) -> int:
    return -(-D // CHUNK)


def shared_bytes(params, D: int) -> int:
    """Q's tile and `stages` K and V tiles, rows of whole chunks, and where they are the
    launch's memory (past 48 KiB) what aligning them to 1024 bytes may skip."""
    tiles = 2 * (params.block_q + 2 * params.stages * params.block_kv) * chunks(D) * CHUNK
    tiles += 8 * (1 + 3 * params.stages) if params.tma else 0      # the mbarriers
    return tiles + (ir.WGMMA_SWIZZLE * 8 - 16 if tiles > 48 * 1024 else 0)


def why_not(target, shape, params) -> str | None:
    """None where the warpgroup kernel runs with `params`, else why not (the checks the
    tensor-core kernel shares are attention_mma.why_not's)."""
    if "wgmma" not in target.tensor_cores:
        return f"the {target.name} target has no warpgroup MMAs (wgmma)"
    if not shape.one_width:       # its swizzled tiles and P V's n are cut for Q's head_dim
        return f"V's head_dim {shape.Dv} is not Q's and K's {shape.D}: the warpgroup kernel takes one"
    if params.warps % 4 or params.block_q != 16 * params.warps or params.hold_q:
        return (f"{params.block_q} queries over {params.warps} warps: the warpgroup kernel takes 64 "
                "queries a warpgroup, Q read by the MMAs from shared memory")
    if shape.D > 128 and params.block_kv > 64:
        return f"head_dim {shape.D}: past 128 the key tiles are 64 (the registers)"
    if params.pingpong and params.warps != 8:
        return "the warpgroups' turns take two warpgroups"
    if params.tma:
        if not target.bulk_copy:
            return f"the {target.name} target makes no tensor maps (TMA)"
        if params.warps > 12:
            return f"{params.warps // 4} warpgroups beside the producer: at most 3 share the registers"
        if params.block_q > 256:
            return f"{params.block_q} queries: a box of the copy engine holds at most 256 rows"
        for role in ("q", "k", "v"):
            if tma_layout(shape, role) is None:
                return (f"`{user_name(shape.bufs[role].name)}` is not a view the copy engine reads "
                        "(head_dim contiguous, the other strides multiples of 16 bytes)")
    return None


def tma_layout(shape, role: str, sizes: dict | None = None):
    """(dims, strides, coordinates) of the tensor of `role` as the copy engine reads it:
    head_dim innermost, then the sequence, then the head and batch (one dimension where the
    batch's stride is the heads' times their number); `coordinates` names the box's
    coordinates (col, row, then h and b, or bh). None where head_dim is not contiguous or a
    stride is not a multiple of 16 bytes. Without `sizes`, only a view's strides are
    checked (a row-major tensor's are multiples of head_dim)."""
    buf = shape.bufs[role]
    if sizes is None:
        st = buf.strides
        ok = st is None or (st[-1] == 1 and all(x * 2 % 16 == 0 and x > 0 for x in st[:-1]))
        return ("strides",) if ok else None
    dims = [int(cir.eval_dim(d, sizes)) for d in buf.shape]
    el = list(buf.strides) if buf.strides is not None else [prod(dims[a + 1:]) for a in range(len(dims))]
    ab, ah, asq = shape.axes[role]
    if el[-1] != 1:
        return None
    # an axis the tensor lacks is one of size 1 (its stride never used)
    (B, sb), (H, sh), (S, ss) = ((1, 0) if a is None else (dims[a], el[a]) for a in (ab, ah, asq))
    out_dims, out_strides, which = [dims[-1], S], [ss], ["col", "row"]
    if H > 1 and B > 1 and sb == sh * H:
        out_dims.append(H * B), out_strides.append(sh), which.append("bh")
    else:
        for n, st, w in ((H, sh, "h"), (B, sb, "b")):
            if n > 1:
                out_dims.append(n), out_strides.append(st), which.append(w)
    if any(st * 2 % 16 or st < 1 or st * 2 >= 1 << 40 for st in out_strides) or any(d >= 1 << 31 for d in out_dims):
        return None
    return tuple(out_dims), tuple(out_strides), tuple(which)


def choices(first: AttentionParams, D: int) -> list:
    """The warpgroup kernel's candidates: `first`, the best of those copying by cp.async
    (where the target makes no tensor maps), then one and two warpgroups (taking turns or
    not), 64- and 128-key tiles, a ring of two and of three, then the copy engine's."""
    plain = replace(first, tma=False, occupancy=0)
    out = [first, copied(D)]
    for warps in (8, 4):
        for bk in ((128, 64) if D <= 128 else (64,)):
            for st in (2, 3):
                p = replace(plain, block_q=16 * warps, warps=warps, block_kv=bk, stages=st, pingpong=False)
                out += [p, replace(p, pingpong=True)] if warps == 8 else [p]
    out += tma_choices(plain, D)
    return list(dict.fromkeys(out))


def tma_choices(first: AttentionParams, D: int) -> list:
    """The copy engine's candidates (a producer warpgroup beside one to three computing
    ones): (warps, key tile, stages, blocks a multiprocessor, turns), the blocks setting the
    registers the computing warpgroups share (TmaKernel.registers)."""
    t = replace(first, tma=True, hold_q=False)
    if D <= 64:
        shapes = [(4, 128, 2, 2, False), (4, 64, 2, 3, False), (4, 64, 3, 3, False),
                  (8, 128, 2, 1, False), (8, 128, 2, 1, True), (8, 64, 2, 2, False), (8, 64, 3, 2, False),
                  (12, 128, 2, 1, False)]
    elif D <= 128:
        shapes = [(8, 128, 2, 1, True), (8, 128, 2, 1, False), (8, 128, 3, 1, True), (8, 64, 2, 1, True),
                  (8, 64, 3, 1, True), (4, 128, 2, 2, False), (4, 64, 3, 2, False)]
    else:
        shapes = [(8, 64, 2, 1, True), (8, 64, 2, 1, False)]
    return [replace(t, block_q=16 * w, warps=w, block_kv=bk, stages=st, occupancy=occ, pingpong=pp)
            for w, bk, st, occ, pp in shapes]


def default(D: int) -> AttentionParams:
    """Measured (H200, bench_cuda --mma-choices wgmma, one run): BERT-base f16 (head_dim 64)
    0.079 ms with two warpgroups over a ring of three 128-key tiles copied by cp.async (one
    warpgroup over two: 0.084; the copy engine's best, two warpgroups over 64-key tiles, two
    blocks a multiprocessor: 0.081; SDPA 0.071); causal bf16 at head_dim 128 0.167 ms with
    two warpgroups fed by the copy engine over two 128-key buffers (the cp.async kernel's
    best, two warpgroups taking turns over three: 0.196; SDPA 0.151); a second run gave the
    same (0.079 and 0.166 ms). Tried there and no faster, so not kept: the weights'
    exponentials by pairs in f16 (ex2.approx.f16x2; BERT 0.081, causal bf16 0.202 with its
    conversions) and the copy engine's kernel walking the query blocks, a block a
    multiprocessor (BERT 0.083 to 0.101); FlashAttention-3's overlap within a warpgroup
    (a tile's scores issued, then the previous tile's P V, its softmax while that runs, P
    packed after it; the copies one tile ahead in a ring of three or two in one of four):
    BERT 0.089 to 0.109 (161 registers: one block a multiprocessor; 64-key tiles at 108
    registers, two blocks: 0.089), causal bf16 0.206 to 0.250; 2 or 3 of every 8 weights'
    exponentials by a cubic on the FMA units (FlashAttention-4's split; 2026-11-29): BERT
    0.114 ms (130 registers, one block a multiprocessor), on the copy engine's kernel 0.084
    to 0.092 against 0.081 to 0.088 without. Past 128, the cp.async kernel's (`copied`).
    2026-11-30 (H200, ncu): at 0.081 the kernel executed 20% more instructions than cuDNN's
    (33.9 against 28.2 million) at the same issue rate; with the first block's test from
    the softmax's own maximum, a vote, descriptors added to and copies without bound tests
    it executes as many (28.3 million) and takes 0.075 ms (SDPA cuDNN 0.071, flash 0.106).
    Tried then and not kept: P V left running into the next tile, whose scores' wait
    covers it (128-key tiles: 155 registers, one block a multiprocessor, 0.105 ms; capped at
    128, ptxas serialises the products; 64-key tiles: 0.083), and the next tiles' copies
    issued while P V runs (0.075, no change). 2026-11-30, against SDPA's cuDNN kernel at
    0.071 to 0.072: the gap is the key loop's, not the blocks' start (head_dim 64, f16: 0.94
    of cuDNN at seq 2048, 0.93 at 8192, 0.96 at 1024); not kept: the rows' sums on the
    tensor cores (P times a tile of ones, m64n8k16, in P V's group: 64 additions a thread a
    tile fewer, but 139 registers; capped at 128, 52 bytes spilled: 0.084 ms over three
    buffers, the ones' tile pushing the shared memory past two blocks without the alignment
    slack, 0.086 over two), 256 or 192 queries a block (four or three warpgroups sharing the
    K and V tiles, one block a multiprocessor: 0.090 and 0.107), and the register cap of two
    blocks said (0.075, as without)."""
    if D <= 64:
        return copied(D)
    return replace(WGMMA, block_kv=128, tma=True, occupancy=1) if D <= 128 else copied(D)


def copied(D: int) -> AttentionParams:
    """The best kernel copying by cp.async (where the target makes no tensor maps).
    Measured (H200 as `default`); causal bf16 at head_dim 128, two warpgroups taking turns
    over a ring of three 128-key tiles (224 KiB of shared memory; H100: 0.195 ms, without
    turns 0.211, the others 0.203 to 0.279). Past 128, 64-key tiles (the registers: S and
    O are block_kv / 2 + head_dim / 2 accumulators a thread)."""
    if D <= 64:
        return replace(WGMMA, block_kv=128, stages=3)
    return replace(WGMMA, block_kv=128, stages=3, pingpong=True) if D <= 128 else replace(WGMMA, block_kv=64)


class WgmmaKernel(_MmaKernel):
    """The tensor-core kernel with warpgroup products over swizzled tiles."""

    def kernel(self):
        self.CH = chunks(self.dcap)
        return super().kernel()

    # ---- the warpgroups' turns (`pingpong`): warpgroup g waits at named barrier 1 + g for its
    # turn at the tensor cores and, its products issued, hands the turn on at the other's
    # (so one's softmax runs while the other's products do); warpgroup 1 hands warpgroup 0
    # the first turn, and warpgroup 0 takes the turn handed on last: every arrival is met

    def key_loop(self) -> list:
        return self.turns(super().key_loop())

    def turns(self, loop: list) -> list:
        if not self.P.pingpong:
            return loop
        wg = lambda g: ir.Bin("==", self.warpgroup(), self.i(g), "bool")
        return [ir.If(wg(1), (ir.NamedBarrier(self.i(1), 256, arrive=True),)), *loop,
                ir.If(wg(0), (ir.NamedBarrier(self.i(1), 256),))]

    def warpgroup(self) -> ir.Expr:
        return self.idiv(self.warp(), 4)

    def in_turn(self, issue: list, acc: str, count: int) -> list:
        """The products `issue` as one group, in this warpgroup's turn; then their wait."""
        if not self.P.pingpong:
            return [*issue, ir.WarpgroupCommit(), ir.WarpgroupWait(0, acc, count)]
        other = ir.Bin("-", self.i(2), self.warpgroup(), self.idx)
        return [ir.NamedBarrier(self.add(self.warpgroup(), self.i(1)), 256), *issue, ir.WarpgroupCommit(),
                ir.NamedBarrier(other, 256, arrive=True), ir.WarpgroupWait(0, acc, count)]

    def who(self) -> str:
        return f"({self.NW // 4} warpgroups of 64 queries, wgmma)"

    def tile_size(self, rows: int) -> int:
        return rows * self.CH * CHUNK

    def shared_at(self, base, row, unit, rows: int) -> ir.Expr:
        """Unit `unit` (8 elements) of row `row`: its chunk's rows, then the swizzle."""
        swz = ir.Bin("^", self.imod(unit, 8), self.imod(row, 8), self.idx)
        return self.add(base, self.mul(self.idiv(unit, 8), self.i(rows * CHUNK)),
                        self.mul(row, self.i(CHUNK)), self.mul(swz, self.i(8)))

    def arrays(self) -> list:
        tile = lambda name, n: ir.Array(name, self.dt, n, "shared", align=ir.WGMMA_SWIZZLE * 8)
        return [tile("_qs", self.tile_size(self.BQ)), tile("_ks", self.NS * self.tile_elems),
                tile("_vs", self.NS * self.tile_elems)]

    def q_ready(self) -> list:
        return []           # the first tile's wait covers Q's group, committed before it

    def publish(self, pending: int) -> list:
        return [ir.AsyncWait(pending), ir.ProxyFence(), ir.Barrier()]

    def k_step_at(self, base, rows: int, kk) -> ir.Expr:
        """A K-major operand's start at k16 step kk of head_dim: its chunk, 32 bytes a step
        within the row (the hardware swizzles the address)."""
        return self.add(base, self.mul(self.idiv(kk, 4), self.i(rows * CHUNK)), self.mul(self.imod(kk, 4), self.i(16)))

    def scores(self) -> list:
        """S = Q K^T: the warpgroup's 64 query rows (A) by the tile's keys (B), the first
        step overwriting the accumulators (no zeros written first)."""
        n = self.BK // 2
        q0 = self.mul(self.warpgroup(), self.i(64 * CHUNK))

        def step(kk):
            return [ir.WarpgroupMma("_qs", self.k_step_at(q0, self.BQ, kk), True, 16, SBO,
                                    "_ks", self.k_step_at(self.ref("_kb"), self.BK, kk), True, 16, SBO,
                                    "_sc", self.i(0), self.BK, self.dt,
                                    fresh=ir.Bin("==", kk, self.i(0), "bool"))]
        return self.in_turn([ir.WarpgroupFence("_sc", n), self.loop("_kk", self.dcap // 16, step)], "_sc", n)

    def values(self) -> list:
        """O += P V: P's fragments (A) by the tile's V rows read along head_dim (B)."""
        n = self.dcap // 2

        def step(kk):
            v = self.add(self.ref("_kb"), self.mul(kk, self.i(16 * CHUNK)))
            return [ir.WarpgroupMma("_pa", self.mul(kk, self.i(8)), True, 0, 0,
                                    "_vs", v, False, self.BK * ROW_BYTES, SBO,
                                    "_o", self.i(0), self.dcap, self.dt, a_regs=True)]
        return self.in_turn([ir.WarpgroupFence("_o", n, a="_pa", a_count=self.KS * 8),
                             self.loop("_kk", self.KS, step)], "_o", n)


PRODUCER_REGISTERS = 24     # setmaxnreg: what the copying warpgroup keeps
MAX_REGISTERS = 240         # what a computing one takes at most


class TmaKernel(WgmmaKernel):
    """The warpgroup kernel fed by the copy engine: warpgroup 0 is the producer, one of whose
    threads asks for Q's box, then for each key tile waits until its ring buffer is free
    (`_empty`), and asks for K's and V's boxes (one a chunk of 64 columns; zeros land past
    the tensor), each counted on an mbarrier of its own (`_kfull`, `_vfull`: the scores
    start before V landed); the other warpgroups compute as WgmmaKernel's, waiting on those
    mbarriers instead of their copies and a block barrier, and free a buffer (every thread
    arrives on `_empty`) once their products that read it completed. The producer gives its
    registers up (setmaxnreg) to them:

        producer (one thread)                consumers (64 queries a warpgroup)
        Q -> _qs, on _qbar                   wait _qbar
        for each tile kt (slot kt % S):      for each tile kt:
          wait _empty[slot], parity ^ 1        wait _kfull[slot]; S = Q K^T; softmax
          K -> _ks[slot] on _kfull[slot]       wait _vfull[slot]; O += P V
          V -> _vs[slot] on _vfull[slot]       arrive _empty[slot]
    """

    def warp(self) -> ir.Expr:
        return ir.Bin("-", self.at("warp"), self.i(4), self.idx)

    def threads(self) -> int:
        return self.T + 128

    def blocks_per_sm(self) -> int:
        return max(1, self.P.occupancy)

    def registers(self) -> int:
        """What a computing warpgroup's threads take: the block's share of the registers
        (its launch bound) less what the producer keeps, at most MAX_REGISTERS."""
        launch = min(255, 65536 // (self.threads() * self.blocks_per_sm())) // 8 * 8
        return min(MAX_REGISTERS, (launch * self.threads() - 128 * PRODUCER_REGISTERS) // self.T // 8 * 8)

    def arrays(self) -> list:
        bars = lambda name, n: ir.Array(name, "u64", n, "shared", align=8)
        return super().arrays() + [bars("_qbar", 1), bars("_kfull", self.NS), bars("_vfull", self.NS),
                                   bars("_empty", self.NS)]

    def extra_params(self) -> tuple:
        self.maps = [self.tensor_map(role) for role in ("q", "k", "v")]
        return tuple(ir.Param(m.name, "tensormap", m.dtype) for m in self.maps)

    def layout(self, role: str):
        got = tma_layout(self.shape, role, self.low.sizes)
        if got is None:
            raise ValueError(f"`{user_name(self.shape.bufs[role].name)}` is not a view the copy engine reads")
        return got

    def tensor_map(self, role: str) -> ir.TensorMap:
        dims, strides, _ = self.layout(role)
        rows = self.BQ if role == "q" else self.BK
        box = (CHUNK, rows) + (1,) * (len(dims) - 2)
        host = lambda vals: tuple(ir.Lit(int(v), "i64") for v in vals)
        buf = self.shape.bufs[role]
        return ir.TensorMap(f"_map{role}", user_name(buf.name), buf.dtype, host(dims), host(strides), box)

    def boxes(self, role: str, row0, dst: str, base, bar: str, slot) -> list:
        """The boxes of `role`'s rows from row0 (a box a chunk of 64 columns) into `dst`
        from `base`, counted on mbarrier bar[slot]."""
        rows = self.BQ if role == "q" else self.BK
        _, _, which = self.layout(role)
        buf = self.shape.bufs[role]
        ah = self.shape.axes[role][1]
        heads = 1 if ah is None else int(cir.eval_dim(buf.shape[ah], self.low.sizes))
        h = self.ref("_h")
        group = self.shape.p.kv_group
        if role in ("k", "v") and group is not None:
            h = ir.Bin("/", h, self.low.index(group), self.idx)
        coord = {"row": row0, "h": h, "b": self.ref("_b"),
                 "bh": self.add(self.mul(self.ref("_b"), self.i(heads)), h)}
        return [ir.TensorLoad(f"_map{role}", (self.i(c * CHUNK),) + tuple(coord[w] for w in which[1:]),
                              dst, self.add(base, self.i(c * rows * CHUNK)), bar, slot) for c in range(self.CH)]

    def main(self, regs: list) -> list:
        r, idx, NS = self.ref, self.idx, self.NS
        bar_init = [ir.Mbarrier("init", "_qbar", self.i(0), count=1)]
        for s in range(NS):
            bar_init += [ir.Mbarrier("init", "_kfull", self.i(s), count=1),
                         ir.Mbarrier("init", "_vfull", self.i(s), count=1),
                         ir.Mbarrier("init", "_empty", self.i(s), count=self.T)]
        kt, slot = r("_kt"), r("_slot")
        tile_bytes = self.BK * self.CH * ROW_BYTES
        base = self.mul(slot, self.i(self.tile_elems))
        k0 = self.mul(kt, self.i(self.BK))
        produce = [ir.Mbarrier("arrive", "_qbar", self.i(0), tx=self.BQ * self.CH * ROW_BYTES),
                   *self.boxes("q", r("_q0"), "_qs", self.i(0), "_qbar", self.i(0)),
                   ir.For("_kt", self.i(0), r("_nk"), self.i(1), (
                       ir.Decl("_slot", idx, self.imod(kt, NS)),
                       ir.Mbarrier("wait", "_empty", slot, parity=self.imod(self.add(self.idiv(kt, NS), self.i(1)), 2)),
                       ir.Mbarrier("arrive", "_kfull", slot, tx=tile_bytes),
                       *self.boxes("k", k0, "_ks", base, "_kfull", slot),
                       ir.Mbarrier("arrive", "_vfull", slot, tx=tile_bytes),
                       *self.boxes("v", k0, "_vs", base, "_vfull", slot)), idx)]
        first = ir.Bin("<", self.at("thread"), self.i(1), "bool")
        producer = (ir.SetMaxRegisters(PRODUCER_REGISTERS, False), ir.If(first, tuple(produce)))
        consumer = (ir.SetMaxRegisters(self.registers(), True), *regs,
                    ir.Mbarrier("wait", "_qbar", self.i(0), parity=self.i(0)), *self.key_loop(), *self.finish())
        return [ir.If(first, tuple(bar_init)), ir.Barrier(),
                ir.If(ir.Bin("<", self.at("warp"), self.i(4), "bool"), producer, consumer)]

    def key_loop(self) -> list:
        r, idx, kt, slot = self.ref, self.idx, self.ref("_kt"), self.ref("_slot")
        parity = self.imod(self.idiv(kt, self.NS), 2)
        tile = [ir.Decl("_k0", idx, self.mul(kt, self.i(self.BK))),
                ir.Decl("_slot", idx, self.imod(kt, self.NS)),
                ir.Decl("_kb", idx, self.mul(slot, self.i(self.tile_elems))),
                ir.Mbarrier("wait", "_kfull", slot, parity=parity),
                *self.scores(), *self.masked_or_not(),
                ir.Mbarrier("wait", "_vfull", slot, parity=parity),
                *self.values(),
                ir.Mbarrier("arrive", "_empty", slot)]
        return self.turns([ir.For("_kt", self.i(0), r("_nk"), self.i(1), tuple(tile), idx)])

    def who(self) -> str:
        return f"({self.NW // 4} warpgroups of 64 queries, wgmma, fed by a TMA producer warpgroup)"


def describe(params, shape) -> str:
    return (f"Q K^T and P V on warpgroup tensor cores (wgmma m64n{params.block_kv}k16 and "
            f"m64n{shape.D}k16 {shape.bufs['q'].dtype}, f32 accumulate, P from registers), "
            f"{params.warps // 4} warpgroups of 64 queries, 128-byte swizzled Q, K and V tiles, "
            f"online softmax in registers (exp2), {params.block_kv}-key K/V tiles "
            + ("by the copy engine (TMA, a producer warpgroup, mbarriers) into " if params.tma else "by cp.async into ")
            + ("two shared buffers" if params.stages == 2 else f"a ring of {params.stages} shared buffers")
            + (", the two warpgroups taking turns at the tensor cores" if params.pingpong else ""))
