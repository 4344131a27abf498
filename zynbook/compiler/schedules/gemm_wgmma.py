"""The GEMM schedule on Hopper's warpgroup MMAs (PTX `wgmma.mma_async`, sm_90a; f16 or
bf16 operands, f32 sums): `GemmParams(wgmma=True)`, built by `WgmmaBuilder`.

A block of (BM / 64) x (BN / TN) warpgroups computes a BM x BN tile of C, each warpgroup a
64 x TN piece as m64nTNk16 steps whose operands the hardware reads from the shared tiles
itself (no fragments in registers): a thread holds TN / 2 f32 accumulators. K is walked in
64-deep slices through a ring of `stages` shared buffers filled by 16-byte cp.async copies
(zeros outside the matrix), `stages - 2` slices ahead of the one multiplied while the
previous slice's MMAs may still run:

    wait for slice kt's copies; fence.proxy.async (they become visible to the MMAs); barrier
    wgmma.fence; 4 m64nTNk16 steps on slice kt; commit
    copy slice kt + stages - 2 into the buffer of slice kt - 2 (its MMAs completed before
        the barrier: every warpgroup waited for them in the previous step)
    wait until only this step's group runs

Each operand keeps its layout (WGMMA_SWIZZLE, ir.WarpgroupMma): a side read along K is
stored as rows of 64 K elements (128 bytes) per row of M or N; a side read along M or N as
rows of 64 M or N elements per K, in blocks of 64 along M or N (BK rows each). Either way
the 16-byte unit u of a row lies at u ^ (row % 8) (the 128-byte swizzle), every buffer
starts on a 1024-byte boundary, and a descriptor's start moves 32 bytes (K-major) or 16
rows (MN-major) per k16 step.
"""
from __future__ import annotations

from ..launch import ir
from .gemm import _Builder

SBO = 1024                  # bytes between groups of 8 rows: eight 128-byte rows


class WgmmaBuilder(_Builder):
    def setup(self, head: list):
        """Shared tiles (1024-byte aligned) and the warpgroup's accumulators, declared once."""
        p, f = self.p, self.f
        self.shape = {}
        for s, bx in (("m", p.bm), ("n", p.bn)):
            chunks = bx * p.bk // self.W[s]
            rows, row = (bx, p.bk) if getattr(f, s).kcontig else (p.bk, bx)
            self.shape[s] = (chunks, -(-chunks // p.threads), self.tile_dt[s], rows, row, self.tile_dt[s])
            head.append(ir.Array(f"_sh{s}", self.tile_dt[s], p.stages * bx * p.bk, "shared",
                                 align=ir.WGMMA_SWIZZLE * 8))
        self.warpgroups(head, p.tn, p.bn)

    def warpgroups(self, head: list, wn: int, bn: int):
        """The accumulators of steps of N = wn, and this thread's place: warpgroup (_wgm,
        _wgn) of those tiling the block's D, bn wide; warp _w4 in it; lane (_g, _t4)."""
        self.wn = wn                # the N of a warpgroup's steps
        # m64 steps a warpgroup takes a slice step: a ping-pong one holds its whole tile
        self.halves = self.p.bm // 64 if getattr(self.p, "pingpong", False) else 1
        self.fm, self.fn = 1, wn // 8
        self.acc_count = self.halves * wn // 2
        group, warp, lane = self.group(), self.axis("warp"), self.axis("lane")
        for n, e in (("_wgm", self.op("/", group, bn // wn)), ("_wgn", self.op("%", group, bn // wn)),
                     ("_w4", self.op("%", warp, 4)), ("_g", self.op("/", lane, 4)),
                     ("_t4", self.op("%", lane, 4))):
            head.append(ir.Decl(n, self.idx, e))
        head.append(ir.Array("_acc", self.cd, self.acc_count, "local"))

    def group(self) -> ir.Expr:
        """This thread's warpgroup among those that multiply."""
        return self.op("/", self.axis("warp"), 4)

    def program(self) -> ir.Program:
        prog = super().program()
        prog.arch_specific = True
        return prog

    def at(self, s: str, buf: ir.Expr, x: ir.Expr, k: ir.Expr, key=None, aligned: bool = False) -> ir.Expr:
        """Offset of element (x, k) of side `s`'s tile in buffer `buf` (module doc)."""
        p, op = self.p, self.op
        bx = p.bm if s == "m" else p.bn
        base = op("*", buf, bx * p.bk)
        if getattr(self.f, s).kcontig:          # rows of K (64 elements, 128 bytes) along X
            r, c, start = x, k, op("*", x, p.bk)
        else:                                   # blocks of 64 along X, rows of X along K
            r, c = k, op("%", x, 64)
            start = op("+", op("*", op("/", x, 64), 64 * p.bk), op("*", k, 64))
        unit = ir.Bin("^", op("/", c, 8), op("%", r, 8), self.idx)
        inner = op("*", unit, 8) if aligned else op("+", op("*", unit, 8), op("%", c, 8))
        return op("+", base, op("+", start, inner))

    def pipelined(self) -> list:
        p, S, n = self.p, self.p.stages, self.acc_count
        head, nk, refill = self.prefetch(S - 2, p.bk)
        kt = self.ref("_kt")
        body = [ir.AsyncWait(S - 3), ir.ProxyFence(), ir.Barrier(), ir.WarpgroupFence("_acc", n)]
        body += self.multiply(self.op("%", kt, S))
        body += [ir.WarpgroupCommit(),      # the copies are issued while the MMAs run
                 refill(self.op("+", kt, S - 2)), ir.AsyncCommit(), ir.WarpgroupWait(1, "_acc", n)]
        return head + [self.k_loop(nk, body), ir.WarpgroupWait(0, "_acc", n)]

    def multiply(self, buf: ir.Expr) -> list:
        """The slice's m64nTNk16 steps of this thread's warpgroup: A from its 64 rows, B from
        its TN columns, 16 deep each."""
        p, f = self.p, self.f
        lbo = {s: 16 if getattr(f, s).kcontig else 64 * p.bk * self.ibs[s] for s in ("m", "n")}
        x0 = {"m": self.op("*", self.ref("_wgm"), 64), "n": self.op("*", self.ref("_wgn"), p.tn)}

        def step(kk):
            b = self.at("n", buf, x0["n"], kk, aligned=True)
            return [ir.WarpgroupMma("_shm", self.at("m", buf, self.op("+", x0["m"], 64 * h), kk, aligned=True),
                                    f.m.kcontig, lbo["m"], SBO, "_shn", b, f.n.kcontig, lbo["n"], SBO,
                                    "_acc", self.i(h * p.tn // 2), p.tn, f.dtypes[0])
                    for h in range(self.halves)]
        return [self.unrolled("_kk", p.bk, step, 16)]

    def epilogue(self) -> list:
        """C's elements of this thread (ir.WarpgroupMma's accumulator layout: warpgroup
        (_wgm, _wgn) holds rows _wgm 64 .. of D, columns _wgn N ..) through the kernel's
        store."""
        op = self.op
        row = op("+", op("*", self.ref("_wgm"), 64), op("*", self.ref("_w4"), 16))
        col = op("*", self.ref("_wgn"), self.wn)

        def one(j):
            out = []
            for h in range(self.halves):
                for e in range(4):
                    gm = op("+", row, op("+", self.ref("_g"), 64 * h + 8 * (e // 2)))
                    gn = op("+", col, op("+", op("*", j, 8), op("+", op("*", self.ref("_t4"), 2), e % 2)))
                    at = op("+", op("*", j, 4), h * self.wn // 2 + e)
                    out += self.store(*self.of_d(gm, gn), ir.Load("_acc", at, self.cd))
            return out
        return self.stored((self.fn,), one, ("_ej",))

    def of_d(self, row: ir.Expr, col: ir.Expr) -> tuple:
        """(row, column) of C of element (row, col) of the steps' D."""
        return row, col

    def product(self, shape: str) -> str:
        p = self.p
        return (f"on tensor cores (wgmma m64n{p.tn}k16 {self.f.dtypes[0]}, f32 accumulate): {shape}; "
                f"{p.bm}x{p.bn}x{p.bk} tiles, {p.threads // 128} warpgroups of 64x{p.tn}, "
                f"{p.stages} shared-memory stages by cp.async, 128-byte swizzle")
