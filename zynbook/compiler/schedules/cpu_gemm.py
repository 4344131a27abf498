"""The CPU GEMM schedule: a recognised contraction as cache-blocked panels and a
register-blocked micro-kernel, for the C++ target (one thread a block, blocks on the cores).

The contraction is read as the GPU GEMM schedule reads it (schedules/gemm.py: `match`, the
M / N / batch / K split, operands indexed by any expression, guarded accumulations) and its
epilogue is that schedule's store (`init + sum`, then the kernel's own store: a bias, an
activation, a conversion); only the loops around them differ, as in BLIS:

* a block takes an MC x NC tile of C (of one batch element), the blocks spread over the
  cores;
* K is walked in KC-deep slices; per slice the tile's B columns are packed into NR-wide
  strips and its A rows into MR-high strips, k-major and contiguous, in the accumulation
  dtype (zeros past the matrix's edge, so the micro-kernel never tests one), each element
  gathered once through the operand's own index;
* the micro-kernel keeps MR x NR sums in a local array indexed only by constants of
  unrolled loops, so the C++ compiler holds them in vector registers and turns the
  `acc[i][j] = fma(a[i], b[j], acc[i][j])` step (f32 and f64: fused by name, as the
  compiler fuses nothing by itself) into MR x (NR / lanes) vector fused multiply-adds per k;
* between slices the sums wait in the tile's own buffer; after the last one each element
  in range goes through the epilogue.

MR x NR follow the target's vector registers (`Target.simd_bytes`): 8 rows of two vectors
where there are 32 registers (AVX-512), 6 rows of two where there are 16.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import errflag
from ..launch import ir
from ..launch.scalar import buffer_params
from .base import Params, Schedule, one_kernel
from .gemm import _BYTES, _Builder, _batch, _side_sizes, _zero, match, why_not_contraction


TILES_PER_CORE = 4


@dataclass(frozen=True)
class CpuGemmParams(Params):
    mr: int = 8             # micro-tile rows (M)
    nr: int = 32            # micro-tile columns (N): a multiple of the vector's lanes
    kc: int = 256           # depth of a packed K slice
    mc: int = 128           # rows of a block's tile (a multiple of mr)
    nc: int = 256           # columns of a block's tile (a multiple of nr)

    def valid(self) -> bool:
        return min(self.mr, self.nr, self.kc, self.mc, self.nc) >= 1 and \
            self.mc % self.mr == 0 and self.nc % self.nr == 0


def micro_tile(target, acc_dtype: str) -> tuple:
    """(MR, NR): two vectors of the accumulation dtype a row, as many rows as leave
    registers for the operands."""
    simd = target.simd_bytes or 16
    lanes = max(1, simd // _BYTES[acc_dtype])
    return (8 if simd >= 64 else 6), 2 * lanes


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


class CpuGemm(Schedule):
    name = "cpu_gemm"

    def why_not(self, kernel, target, sizes):
        if target.lang != "cpp":
            return "a schedule for the C++ (CPU) target"
        return why_not_contraction(kernel, target, sizes, "micro-tile")[1]

    def default(self, kernel, target, sizes):
        """The target's micro-tile; tiles shrunk (NC, then MC) until every core has
        TILES_PER_CORE (the blocks are handed out as cores come free, so a core slowed by
        another process holds back a small share), down to 4 x 2 micro-tiles, then to one
        micro-tile while a core has none. Measured (16-core Sapphire Rapids, f32 1024^3):
        128x128 tiles, four a core, 1.9 ms; 64x64, sixteen a core, 2.5 ms; numpy 2.1."""
        form, _ = match(kernel, sizes)
        mr, nr = micro_tile(target, form.acc)
        M, N, _ = _side_sizes(form, sizes)
        batch = _batch(form, sizes)
        mc, nc = mr * max(1, 128 // mr), nr * max(1, 256 // nr)
        tiles = lambda: -(-M // mc) * -(-N // nc) * batch
        for want, mc_min, nc_min in ((TILES_PER_CORE * target.cores, 4 * mr, 2 * nr), (target.cores, mr, nr)):
            while tiles() < want and (nc > nc_min or mc > mc_min):
                if nc > nc_min and nc >= mc:
                    nc = max(nc_min, _round_up(nc // 2, nr))
                else:
                    mc = max(mc_min, _round_up(mc // 2, mr))
        return CpuGemmParams(mr, nr, 256, mc, nc)

    def space(self, kernel, target, sizes):
        first = self.default(kernel, target, sizes)
        out = [first]
        mr, nr = first.mr, first.nr
        for p in (CpuGemmParams(mr, nr, kc, mc, nc) for kc in (128, 256, 384)
                  for mc in (mr * (64 // mr), mr * (128 // mr)) for nc in (nr * (128 // nr), nr * (256 // nr))):
            if p.valid() and p not in out:
                out.append(p)
        # a micro-tile of fewer registers (where the compiler spills the target's own)
        alt = CpuGemmParams(6, max(1, nr // 2), first.kc, _round_up(first.mc, 6), first.nc)
        if alt.valid() and alt not in out:
            out.append(alt)
        return out

    def build(self, kernel, target, sizes, params: CpuGemmParams) -> ir.Program:
        if not params.valid():
            raise ValueError(f"CPU GEMM parameters that do not tile: {params.describe()}")
        sites = errflag.ErrorSites()
        prog = _PanelBuilder(kernel, target, sizes, params, sites).program()
        prog.sites = sites.as_tuple()
        return prog


class _PanelBuilder(_Builder):
    """The GEMM builder's helpers (index arithmetic, loop-variable binding, the epilogue
    store) around packed panels and a register micro-kernel."""

    def __init__(self, kernel, target, sizes, params: CpuGemmParams, sites):
        self.begin(kernel, target, sizes, params, sites, "")     # (the C++ target bakes sizes in)
        self.staged = False                 # C goes straight from the registers
        self.ragged = {"m": True, "n": True}    # every store tests C's extent

    def program(self) -> ir.Program:
        f, p, c, cd = self.f, self.p, self.f.c, self.cd
        head, bloops, bexts = self.nest_parts()
        M, N, K = _side_sizes(f, self.sizes)
        B = _batch(f, self.sizes)
        self.M, self.N, self.K = self.i(M), self.i(N), self.i(K)
        mc, nc = min(p.mc, _round_up(M, p.mr)), min(p.nc, _round_up(N, p.nr))
        kc = min(p.kc, K)
        slices = -(-K // kc)
        tiles_m, tiles_n = -(-M // mc), -(-N // nc)
        ntiles = tiles_m * tiles_n * B
        self.kc_cap = kc
        head += [ir.Array("_pa", cd, mc * kc, "local"), ir.Array("_pb", cd, nc * kc, "local")]
        if slices > 1:
            head.append(ir.Array("_cb", cd, mc * nc, "local"))
        body = self.tile_origin(bloops, tiles_m * tiles_n, tiles_m, tiles_n, mc, nc, False)

        def strips(x0, X, r, most):         # micro-strips of this tile inside the matrix
            left = self.op("/", self.op("+", self.op("-", X, x0), r - 1), r)
            return ir.Math("min", (self.i(most), left), self.idx)

        def tile_body():
            out = self.decompose(ir.Ref("_bz", self.idx), bloops, bexts)
            out += [ir.Decl("_sm", self.idx, strips(self.m0, self.M, p.mr, mc // p.mr)),
                    ir.Decl("_sn", self.idx, strips(self.n0, self.N, p.nr, nc // p.nr))]
            pc = ir.Ref("_pc", self.idx)
            slice_body = [ir.Decl("_kc", self.idx, ir.Math(
                "min", (self.i(kc), self.op("-", self.K, pc)), self.idx))]
            slice_body += self.pack("n", pc) + self.pack("m", pc)
            slice_body += self.micro_tiles(pc, mc, slices)
            out.append(ir.For("_pc", self.i(0), self.K, self.i(kc), tuple(slice_body), self.idx,
                              c.rloops[0].line))
            return out
        body += self.scoped(tile_body)
        grid = max(1, min(ntiles, self.t.max_blocks))
        head.append(ir.For("_tile", self.axis("block"), self.i(ntiles), self.axis("blocks"),
                           tuple(body), self.idx, c.ploops[0].line))
        what = (f"contraction as {self.kind()} on the CPU: {self.shape_text()}; {mc}x{nc} tiles, K in "
                f"{kc}-deep packed slices, {p.mr}x{p.nr} register micro-tiles")
        return one_kernel(self.k, buffer_params(self.k, self.sizes, self.idx), head, 1, self.idx, what,
                          grid, (), f"{what} (cpu_gemm: {p.describe()})")

    # ---- packing ----------------------------------------------------------------------

    def pack(self, s: str, pc: ir.Expr) -> list:
        """Side `s`'s rows (M) or columns (N) of this tile and slice into its panel: strip
        t, depth k, place x at t * (KC r) + k r + x; zeros past the matrix's edge. The loop
        along the operand's contiguous axis is the inner one. A strip inside the matrix is
        copied without the edge's test, which kept the compiler from vectorising the copy
        (scalar packing took more instructions than the micro-kernel's FMAs at 64x64 tiles)."""
        side, low, cd = getattr(self.f, s), self.low, self.cd
        r = self.p.mr if s == "m" else self.p.nr
        x0, X = (self.m0, self.M) if s == "m" else (self.n0, self.N)
        arr, count = ("_pa", "_sm") if s == "m" else ("_pb", "_sn")
        t, k, x = (ir.Ref(n, self.idx) for n in (f"_p{s}t", f"_p{s}k", f"_p{s}x"))
        low.line = self.f.c.rloops[-1].line or low.line

        def element(edge: bool):
            gx = self.op("+", x0, self.op("+", self.op("*", t, r), x))
            gk = self.op("+", pc, k)
            v = self.new("v")

            def value():
                return self.decompose(gx, self.loops[s], self.exts[s]) + \
                    self.decompose(gk, list(self.f.c.rloops), self.rext) + self.read(side, v, cd)
            at = self.op("+", self.op("*", t, self.kc_cap * r), self.op("+", self.op("*", k, r), x))
            read = ir.If(self.op("<", gx, X), tuple(self.scoped(value))) if edge else self.scoped(value)
            return [ir.Decl(v, cd, _zero(cd), True), *([read] if edge else read), ir.Store(arr, at, ir.Ref(v, cd))]
        kc = ir.Ref("_kc", self.idx)
        over_x = lambda body: ir.For(x.name, self.i(0), self.i(r), self.i(1), tuple(body), self.idx)
        over_k = lambda body: ir.For(k.name, self.i(0), kc, self.i(1), tuple(body), self.idx)

        def strip(edge: bool):
            inner = over_x(element(edge)) if not side.kcontig else over_k(element(edge))
            return over_k([inner]) if not side.kcontig else over_x([inner])
        inside = self.op("<=", self.op("+", x0, self.op("*", self.op("+", t, 1), r)), X)
        return [ir.For(t.name, self.i(0), ir.Ref(count, self.idx), self.i(1),
                       (ir.If(inside, (strip(False),), (strip(True),)),), self.idx)]

    # ---- the micro-kernel -------------------------------------------------------------

    def micro_tiles(self, pc: ir.Expr, mc: int, slices: int) -> list:
        """For each NR strip of B, each MR strip of A: MR x NR sums over the slice in a
        register array; kept in the tile's buffer between slices, stored after the last."""
        p, cd = self.p, self.cd
        mr, nr = p.mr, p.nr
        sn, sm = ir.Ref("_ms", self.idx), ir.Ref("_mt", self.idx)
        k = ir.Ref("_mk", self.idx)
        acc = lambda i, j: self.op("+", self.op("*", i, nr), j)
        kept = self.op("*", self.op("+", self.op("*", sn, mc // mr), sm), mr * nr)
        body = [ir.Array("_acc", cd, mr * nr, "local"),
                self.unrolled("_z", mr * nr, lambda e: [ir.Store("_acc", e, _zero(cd))])]
        if slices > 1:
            body.append(ir.If(self.op("<", 0, pc), (self.unrolled("_z", mr * nr, lambda e: [
                ir.Store("_acc", e, ir.Load("_cb", self.op("+", kept, e), cd))]),)))
        a0 = self.op("+", self.op("*", sm, self.kc_cap * mr), self.op("*", k, mr))
        b0 = self.op("+", self.op("*", sn, self.kc_cap * nr), self.op("*", k, nr))

        def fma(i, j):
            a, b = ir.Load("_pa", self.op("+", a0, i), cd), ir.Load("_pb", self.op("+", b0, j), cd)
            s = ir.Load("_acc", acc(i, j), cd)
            # fused by name: the compiler fuses no product and sum by itself (native.py)
            step = ir.Math("fma", (a, b, s), cd) if cd in ("f32", "f64") else \
                ir.Bin("+", s, ir.Bin("*", a, b, cd), cd)
            return [ir.Store("_acc", acc(i, j), step)]
        body.append(ir.For(k.name, self.i(0), ir.Ref("_kc", self.idx), self.i(1), (
            self.unrolled("_i", mr, lambda i: [self.unrolled("_j", nr, lambda j: fma(i, j))]),),
            self.idx, self.f.c.rloops[-1].line))
        gm = lambda i: self.op("+", self.op("*", sm, mr), i)      # in the block's tile
        gn = lambda j: self.op("+", self.op("*", sn, nr), j)
        final = self.stored((mr, nr), lambda i, j: self.store(
            gm(i), gn(j), ir.Load("_acc", acc(i, j), cd)))
        if slices > 1:
            keep = [self.unrolled("_z", mr * nr, lambda e: [
                ir.Store("_cb", self.op("+", kept, e), ir.Load("_acc", e, cd))])]
            body.append(ir.If(self.op("<", self.op("+", pc, self.kc_cap), self.K), tuple(keep),
                              tuple(final)))
        else:
            body += final
        return [ir.For(sn.name, self.i(0), ir.Ref("_sn", self.idx), self.i(1), (
            ir.For(sm.name, self.i(0), ir.Ref("_sm", self.idx), self.i(1), tuple(body), self.idx),),
            self.idx)]
