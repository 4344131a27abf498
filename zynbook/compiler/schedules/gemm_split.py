"""f32 GEMM on Hopper's TF32 warpgroup MMAs: `GemmParams(wgmma=True, terms=3)` exact,
`terms=1` TF32 (where the program allows it), built by `SplitBuilder`.

Each f32 operand x is split into two TF32 values, big = tf32(x) and small = tf32(x - big)
(`cvt.rna`), so x = big + small to about 2^-22 |x|, and a b is taken as big(a) big(b) +
small(a) big(b) + big(a) small(b): three m64nNk8 steps for one (3xTF32; the dropped
small(a) small(b) is below 2^-22 |a b|). The tensor cores' own sums are not f32's: over a
long K their rounding drifts (4096-deep products then differ from f64 by ten times f32's
error). So each 32-deep slice's products go into partial sums of their own, the first step
overwriting them (scale-d 0), and the FP32 units add those to C's accumulators after the
slice: an error of one slice's depth, not of K's. With `terms=1` each operand is only
rounded to TF32 (its big half: as PyTorch's `allow_tf32`) and the MMAs sum into C's
accumulators themselves, one product a step.

The warpgroup MMA reads B from shared memory and TF32 only K-major; A may come from the
threads' registers in any layout. So the side whose elements run along K stays in shared
memory (`s`, the MMA's B: N of a step along it), and the other is read into registers
(`r`, the MMA's A: 64 rows a warpgroup). Where B is the side along K, D is C; where A is,
D is C transposed (`of_d`). Both sides come by cp.async copies (16 bytes, or 4 for a
convolution's gathered input, whose zero fill is its padding) into a ring of `stages` buffers, `stages - 1` slices ahead; the `s` tile in 128-byte swizzled rows of 32
K elements, the `r` tile in padded rows (its fragments are read by element, four lanes'
rows then fall in distinct banks). A slice:

    wait for its copies; barrier; copy slice kt + stages - 1 into the buffer of kt - 1
    split the s tile: big in place, small into `_shs` (the block's threads, element by
    element); fence.proxy.async; barrier
    each thread's r fragments (4 elements a k8 step), split in registers
    4 x (big big, small big, big small) m64nNk8 steps into `_part`; wait for them
    _acc += _part            (terms=1: 4 x big big into `_acc`)
"""
from __future__ import annotations

from ..launch import ir
from .gemm_wgmma import SBO, WgmmaBuilder

SPLIT_N = (64, 128)         # a warpgroup's N (a thread holds N / 2 sums of C and N / 2 partial)
# (r extent, s extent, warpgroup s extent, stages), first the default: two warpgroups of
# 64 x 64, two blocks an SM (H200, bench_cuda --gemm-sweep, 4096^3: 1.99 ms against 2.24
# for 128 x 128 in warpgroups of 64 x 128, cuBLAS 2.73)
SPLIT_TILES = ((128, 64, 64, 4), (128, 128, 128, 4), (128, 128, 128, 3), (256, 64, 64, 4),
               (64, 128, 128, 4), (128, 128, 64, 4), (128, 64, 64, 3), (64, 64, 64, 4))
# a convolution's few filters (the s side, along K) against many pixels: four warpgroups of
# 64 pixels by the 64 filters (H200, ResNet block, bench_cuda --conv-sweep: 0.167 ms against
# 0.184 for SPLIT_TILES[0], cuDNN 0.275, CONV_FMA_TILE 0.231)
SPLIT_CONV_TILE = (256, 64, 64, 4)
BK = 32                     # a slice: one 128-byte row of f32 along K
R_PAD = {True: 4, False: 8}     # elements that pad an r tile row (along K, along X)


def split_sides(form) -> tuple | None:
    """(r, s): the side read into registers and the one kept in shared memory, which must
    run along K (the N side where both do); None where neither does."""
    if form.n.kcontig:
        return "m", "n"
    if form.m.kcontig:
        return "n", "m"
    return None


def oriented(form, r_ext: int, s_ext: int, ws: int, stages: int, terms: int = 3):
    """The GemmParams of a tile given along the sides of split_sides (form): r_ext x s_ext,
    a warpgroup 64 x ws."""
    from .gemm import GemmParams
    r, _ = split_sides(form)
    bm, bn, tm, tn = (r_ext, s_ext, 64, ws) if r == "m" else (s_ext, r_ext, ws, 64)
    return GemmParams(bm, bn, BK, tm, tn, 4, True, stages, True, True, terms=terms)


def split_shared_bytes(p, kcontig: tuple) -> int:
    """The ring of both sides' tiles and (exact) the small halves of one s tile (bytes)."""
    s_m = kcontig[0] and not kcontig[1]     # the s side is M (split_sides)
    br, bs = (p.bn, p.bm) if s_m else (p.bm, p.bn)
    r_kcontig = kcontig[1] if s_m else kcontig[0]
    r_tile = br * (BK + R_PAD[True]) if r_kcontig else BK * (br + R_PAD[False])
    return 4 * (p.stages * (bs * BK + r_tile) + (bs * BK if p.terms == 3 else 0))


class SplitBuilder(WgmmaBuilder):
    def setup(self, head: list):
        p, f = self.p, self.f
        self.r, self.s = split_sides(f)
        ext = {"m": p.bm, "n": p.bn}
        self.br, self.bs = ext[self.r], ext[self.s]
        self.shape = {}
        for s, bx in ext.items():
            chunks = bx * BK // self.W[s]
            if s == self.s:
                rows, row, align = bx, BK, ir.WGMMA_SWIZZLE * 8
            else:
                kc = getattr(f, s).kcontig
                rows, row = (bx, BK + R_PAD[True]) if kc else (BK, bx + R_PAD[False])
                align = 16
            self.shape[s] = (chunks, -(-chunks // p.threads), "f32", rows, row, "f32")
            head.append(ir.Array(f"_sh{s}", "f32", p.stages * rows * row, "shared", align=align))
        self.exact = p.terms == 3
        if self.exact:
            head.append(ir.Array("_shs", "f32", self.bs * BK, "shared", align=ir.WGMMA_SWIZZLE * 8))
        self.warpgroups(head, p.tn if self.s == "n" else p.tm, self.bs)
        head.append(ir.Array("_fr", "f32", 8 * BK // 8, "local"))
        if self.exact:
            head.append(ir.Array("_part", "f32", self.acc_count, "local"))
        self.sums = "_part" if self.exact else "_acc"      # what the MMAs add to

    def at(self, s: str, buf: ir.Expr, x: ir.Expr, k: ir.Expr, key=None, aligned: bool = False) -> ir.Expr:
        """Offset of element (x, k) of side `s`'s tile in buffer `buf`: the s tile in rows
        of 32 K (128 bytes) whose 16-byte unit u lies at u ^ (x % 8); the r tile in padded
        rows of K or of X."""
        op = self.op
        _, _, _, rows, row, _ = self.shape[s]
        base = op("*", buf, rows * row)
        if s == self.s:
            unit = ir.Bin("^", op("/", k, 4), op("%", x, 8), self.idx)
            inner = op("*", unit, 4) if aligned else op("+", op("*", unit, 4), op("%", k, 4))
            return op("+", base, op("+", op("*", x, BK), inner))
        r, c = (x, k) if getattr(self.f, s).kcontig else (k, x)
        return op("+", base, op("+", op("*", r, row), c))

    def pipelined(self) -> list:
        S, op = self.p.stages, self.op
        head, nk, refill = self.prefetch(S - 1, BK)
        kt = self.ref("_kt")
        buf = op("%", kt, S)
        n = self.acc_count
        body = [ir.AsyncWait(S - 2), ir.Barrier(), refill(op("+", kt, S - 1)), ir.AsyncCommit()]
        body += self.split_shared(buf) + [ir.ProxyFence(), ir.Barrier()]
        body += self.split_registers(buf) + [ir.WarpgroupFence(self.sums, n, 0, "_fr", 8 * BK // 8)]
        body += self.multiply(buf) + [ir.WarpgroupCommit(), ir.WarpgroupWait(0, self.sums, n)]
        if self.exact:
            body.append(self.unrolled("_pj", n, lambda j: [ir.Store("_acc", j, ir.Bin(
                "+", ir.Load("_acc", j, self.cd), ir.Load("_part", j, "f32"), self.cd))]))
        return head + [self.k_loop(nk, body)]

    def split_shared(self, buf: ir.Expr) -> list:
        """The s tile of buffer `buf` as its big halves, in place, and (exact) its small
        ones in `_shs`: element by element, consecutive threads on consecutive elements."""
        op, per = self.op, self.bs * BK
        head = [ir.Decl("_sb", self.idx, op("*", buf, per))]
        base = self.ref("_sb")

        def one(j):
            e = op("+", self.tid, op("*", j, self.p.threads))
            v = ir.Load(f"_sh{self.s}", op("+", base, e), "f32")
            big = ir.Math("tf32", (ir.Ref("_x", "f32"),), "f32")
            body = [ir.Decl("_x", "f32", v), ir.Decl("_xb", "f32", big),
                    ir.Store(f"_sh{self.s}", op("+", base, e), ir.Ref("_xb", "f32"))]
            if self.exact:
                body.append(ir.Store("_shs", e, ir.Math("tf32", (ir.Bin(
                    "-", ir.Ref("_x", "f32"), ir.Ref("_xb", "f32"), "f32"),), "f32")))
            return body if per % self.p.threads == 0 else [ir.If(op("<", e, per), tuple(body))]
        return head + [self.unrolled("_sj", -(-per // self.p.threads), one)]

    def split_registers(self, buf: ir.Expr) -> list:
        """This thread's r fragments of the slice, k8 step q at `_fr[8 q ..]`: its 4
        elements' big halves, then (exact) their small ones (ir.Mma's tf32 A layout: element
        e at row g + 8 (e % 2), k t + 4 (e // 2) of the warp's 16 rows)."""
        op = self.op
        row = op("+", op("*", self.ref("_wgm"), 64), op("+", op("*", self.ref("_w4"), 16), self.ref("_g")))

        def step(q):
            out = []
            for e in range(4):
                x = op("+", row, 8 * (e % 2))
                k = op("+", op("*", q, 8), op("+", self.ref("_t4"), 4 * (e // 2)))
                v = ir.Load(f"_sh{self.r}", self.at(self.r, buf, x, k), "f32")
                big, at = ir.Math("tf32", (v,), "f32"), op("+", op("*", q, 8), e)
                out.append(ir.Store("_fr", at, big))
                if self.exact:
                    out.append(ir.Store("_fr", op("+", at, 4), ir.Math("tf32", (ir.Bin(
                        "-", v, ir.Load("_fr", at, "f32"), "f32"),), "f32")))
            return out
        return [self.unrolled("_fq", BK // 8, step)]

    def multiply(self, buf: ir.Expr) -> list:
        """The slice's k8 steps: big r x big s (exact: overwriting `_part` on the first),
        then (exact) small r x big s, big r x small s."""
        op = self.op
        x0 = op("*", self.ref("_wgn"), self.wn)

        def step(q):
            k = op("*", q, 8)
            big = self.at(self.s, buf, x0, k, aligned=True)
            small = op("-", big, op("*", buf, self.bs * BK))
            fresh = ir.Bin("==", q, self.i(0), "bool")
            mma = lambda a, b, bi, first: ir.WarpgroupMma(
                "_fr", op("+", op("*", q, 8), a), True, 0, 0, b, bi, True, 16, SBO, self.sums,
                self.i(0), self.wn, "tf32", a_regs=True, fresh=fresh if first and self.exact else None)
            return [mma(0, f"_sh{self.s}", big, True)] + ([
                mma(4, f"_sh{self.s}", big, False), mma(0, "_shs", small, False)] if self.exact else [])
        return [self.unrolled("_kq", BK // 8, step)]

    def of_d(self, row: ir.Expr, col: ir.Expr) -> tuple:
        return (row, col) if self.r == "m" else (col, row)

    def product(self, shape: str) -> str:
        p = self.p
        how = ("as three TF32 products (f32 split into big + small halves; "
               f"wgmma m64n{self.wn}k8 tf32, each slice's sums added in f32)") if self.exact else \
            f"(wgmma m64n{self.wn}k8 tf32, operands rounded to TF32, f32 accumulate)"
        return (f"on tensor cores {how}: {shape}; "
                f"{p.bm}x{p.bn}x{BK} tiles, {p.threads // 128} warpgroups of 64x{self.wn} "
                f"({'C' if self.r == 'm' else 'C transposed'}), {p.stages} shared-memory stages "
                f"by cp.async, 128-byte swizzle")
