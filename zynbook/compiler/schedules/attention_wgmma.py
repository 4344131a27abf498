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

from ..launch import ir
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
    return tiles + (ir.WGMMA_SWIZZLE * 8 - 16 if tiles > 48 * 1024 else 0)


def why_not(target, shape, params) -> str | None:
    """None where the warpgroup kernel runs with `params`, else why not (the checks the
    tensor-core kernel shares are attention_mma.why_not's)."""
    if "wgmma" not in target.tensor_cores:
        return f"the {target.name} target has no warpgroup MMAs (wgmma)"
    if params.warps % 4 or params.block_q != 16 * params.warps or params.hold_q:
        return (f"{params.block_q} queries over {params.warps} warps: the warpgroup kernel takes 64 "
                "queries a warpgroup, Q read by the MMAs from shared memory")
    if shape.D > 128 and params.block_kv > 64:
        return f"head_dim {shape.D}: past 128 the key tiles are 64 (the registers)"
    if params.pingpong and params.warps != 8:
        return "the warpgroups' turns take two warpgroups"
    return None


def choices(first: AttentionParams, D: int) -> list:
    """The warpgroup kernel's candidates: `first` then one and two warpgroups (taking turns
    or not), 64- and 128-key tiles, a ring of two and of three."""
    out = [first]
    for warps in (8, 4):
        for bk in ((128, 64) if D <= 128 else (64,)):
            for st in (2, 3):
                p = replace(first, block_q=16 * warps, warps=warps, block_kv=bk, stages=st, pingpong=False)
                out += [p, replace(p, pingpong=True)] if warps == 8 else [p]
    return list(dict.fromkeys(out))


def default(D: int) -> AttentionParams:
    """Measured (H100, bench_cuda --mma-choices wgmma): BERT-base f16 (head_dim 64) 0.083 ms
    with one warpgroup over 128-key tiles in two buffers (two warpgroups, with turns or not:
    0.090 to 0.119); causal bf16 at head_dim 128 0.195 ms with two warpgroups taking turns
    over a ring of three 128-key tiles (224 KiB of shared memory; without turns 0.211, the
    others 0.203 to 0.279). Past 128, 64-key tiles (the registers: S and O are block_kv / 2
    + head_dim / 2 accumulators a thread)."""
    if D <= 64:
        return replace(WGMMA, block_q=64, warps=4, block_kv=128)
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
        loop = super().key_loop()
        if not self.P.pingpong:
            return loop
        wg = lambda g: ir.Bin("==", self.warpgroup(), self.i(g), "bool")
        return [ir.If(wg(1), (ir.NamedBarrier(self.i(1), 256, arrive=True),)), *loop,
                ir.If(wg(0), (ir.NamedBarrier(self.i(1), 256),))]

    def warpgroup(self) -> ir.Expr:
        return self.idiv(self.at("warp"), 4)

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


def describe(params, shape) -> str:
    return (f"Q K^T and P V on warpgroup tensor cores (wgmma m64n{params.block_kv}k16 and "
            f"m64n{shape.D}k16 {shape.bufs['q'].dtype}, f32 accumulate, P from registers), "
            f"{params.warps // 4} warpgroups of 64 queries, 128-byte swizzled Q, K and V tiles, "
            f"online softmax in registers (exp2), {params.block_kv}-key K/V tiles by cp.async into "
            + ("two shared buffers" if params.stages == 2 else f"a ring of {params.stages} shared buffers")
            + (", the two warpgroups taking turns at the tensor cores" if params.pingpong else ""))
