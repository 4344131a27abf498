"""Attention on CUDA tensor cores (FlashAttention-2): Q K^T and P V by `mma.sync` m16n8k16 over
f16 or bf16 Q, K, V with f32 accumulators, the online softmax in registers.

A block of `warps` warps takes `block_q` queries of one (batch, head), each warp 16 or 32 of
them (one or two m16 tiles). The block's Q rows are copied once (cp.async) into shared
memory, from which each warp loads the A fragments of its queries for all of head_dim and
keeps them in registers (`hold_q`), or loads each k16 step's again at every tile. The keys go
by tiles of `block_kv` (64 or 128): their K and V rows are copied by cp.async into a ring of
`stages` shared buffers: with two, the next tile is copied while this one is computed (two
barriers a tile: the buffer refilled is the one just read); with three, the copy runs two
tiles ahead and one barrier a tile both publishes this tile and frees the one refilled
(where the warps hold Q's fragments, Q's rows borrow that ring's last buffer). Per tile and
warp:

* S = Q K^T: B fragments from the K rows by ldmatrix (the rows are K's columns: no
  transpose), the tile's keys as n8 accumulator tiles;
* each accumulator element (query g + 8 (e // 2), key 2 t + e % 2 of its tile: `ir.Mma`)
  scaled by the launch's scale times log2(e), the score's added term (a bias, ALiBi, an
  additive mask) added times log2(e), the key condition applied and keys past the
  end masked (under no condition or a causal one, only in the tiles that may hold a key they
  exclude); the row's maximum reduced over the four lanes of a quad, exp2, and each lane's
  share of the row sum kept (summed over the quad once, at the end). With `fold_scale` (a
  scale known not negative, no added term) the maximum is the raw scores' and each weight one FMA and exp2,
  exp2(s c - m c); with `skip_rescale` O is rescaled only where a row of the warp found a
  larger maximum (a warp-uniform branch; a factor of 1 elsewhere is exact anyway); with
  `fast_math` exp2 is one ex2.approx.ftz and the running maximum one max.f32;
* P goes from the C accumulators straight into A fragments of the input's type: the C layout
  of two adjacent n8 tiles is the A layout of one k16 step, A[2 p + h] = C_{2 kk + p // 2}[2 (p % 2) + h]
  (with `packed`, by pairs: one cvt.rn.f16x2.f32 / bf16x2 a pair, as the output's stores);
* O += P V with B fragments from the V rows by transposed ldmatrix.

Finally each query in range stores O / l in the output's type; a query no key is admitted to
stores what the other schedules store (0, or 0 / 0 where the body divides inside its loop).
Shared rows are padded by 16 bytes, so that the eight rows an ldmatrix phase reads meet eight
different bank groups. Where the condition is causal (key <= query) the key loop ends at the
block's last query, and the blocks with the most keys are launched first. The sizes are
baked in; where the keys fill whole tiles no key bound is tested. `occupancy`, where not 0,
is the blocks a multiprocessor should hold (the register cap of __launch_bounds__). V's
head_dim may differ from Q's and K's (multi-head latent attention): V's copies, O's tiles and
the stores take V's, and the shared rows of every tile the longer of the two.
"""
from __future__ import annotations

from dataclasses import replace

from .. import cir
from ..launch import ir
from ..launch.scalar import NotScalar, buffer_params, cast, lit, user_name
from ..passes import recognise
from .attention import NAN, AttentionParams, _alive, _Kernel, _widths
from .base import kernel_name

F = "f32"
NEG = lit(float("-inf"), F)
ZERO = lit(0.0, F)
LOG2E = 1.4426950408889634
HALVES = ("f16", "bf16")
BLOCK_KV = (64, 128)        # keys a tile
STAGES = (2, 3)             # K/V buffers in the ring
PAD = 8                     # elements after each shared row (16 bytes)
MAX_HEAD_DIM = 256
HELD_HEAD_DIM = 128         # beyond, 16 queries a warp and Q read at each tile (the registers)
STATIC_SHARED = 48 * 1024   # more is requested as dynamic shared memory


# FlashAttention-2's block up to head_dim 64: 4 warps of 32 queries (two m16 tiles, so that
# each K/V fragment read from shared memory feeds two MMAs), Q's fragments held in registers
# (245 registers a thread, nvcc sm_90; held at 128 they would spill 800 bytes); beyond, and
# where a head's queries fit 64, 4 warps of 16 queries with Q held; then the tuner's other
# candidates. Past head_dim 128 only 16 queries a warp with Q read at each
# tile fit the registers (255 a thread at 256 without spills)
MMA = AttentionParams(mma=True)
CHOICES = (replace(MMA, block_q=128), replace(MMA, block_q=128, hold_q=False), MMA,
           replace(MMA, block_q=128, warps=8), replace(MMA, hold_q=False),
           replace(MMA, block_q=128, warps=8, hold_q=False))


EVERY = dict(packed=True, fold_scale=True, skip_rescale=True, fast_math=True)


def variants(base) -> list:
    """The structural variants of one block shape, for the tuner and the benchmark: 128-key
    tiles, a 3-stage ring, packed conversions, the scale folded into the exponent, the
    rescale skipped, the fast exp2 and maxima, each alone, then all the others with each
    tile size and ring (a ring of three 128-key buffers at head_dim 128 takes 209 KiB: one
    block a multiprocessor). Where a warp takes 32 queries, 128-key tiles also over twice
    the warps of 16 (32 x 128 scores a warp spill: about 100 bytes, nvcc sm_90, head_dim
    64): 166 registers with a ring of three (one block of 8 warps a multiprocessor, the
    registers), or capped at 128 for two blocks with two buffers (60 bytes spilled)."""
    every = EVERY
    out = [replace(base, block_kv=128), replace(base, stages=3), replace(base, packed=True),
           replace(base, fold_scale=True), replace(base, skip_rescale=True), replace(base, fast_math=True)]
    out += [replace(base, block_kv=bk, stages=st, **every) for bk in BLOCK_KV for st in STAGES]
    if base.block_q // base.warps == 32:
        wide = replace(base, warps=2 * base.warps, block_kv=128, **every)
        out += [replace(wide, stages=3), replace(wide, occupancy=2)]
    return out


def choices(target, shape, sizes) -> list:
    """The tensor-core parameters that run this attention on `target`, the default first."""
    fitting = lambda ps: list(dict.fromkeys(q for q in (unfolded(shape, p) for p in ps)
                                            if why_not(target, shape, q) is None))
    fits = fitting(CHOICES)
    if not fits:
        return []
    # measured (H100, bench_cuda --mma-choices): BERT-base f16 (head_dim 64) 0.138 ms with
    # 4 warps of 32 queries against 0.148 with 4 of 16; causal bf16 at head_dim 128 0.356 ms
    # with 4 warps of 16 (Q held) against 0.53 with 4 of 32 (Q read at each tile)
    if int(recognise.launch_value(shape.p.n_queries, sizes)) <= 64 or width(shape) > 64:
        first = MMA
    else:
        first = replace(MMA, block_q=128)
    first = first if first in fits else fits[0]
    # every variant over a ring of three 64-key tiles (H100, bench_cuda --mma-choices):
    # BERT-base f16 (head_dim 64) 0.108 ms against 0.142 for the plain kernel, causal bf16 at
    # head_dim 128 0.316 against 0.358; head_dim past 128 (Q read at each tile) not measured
    tuned = unfolded(shape, replace(first, stages=3, **EVERY))
    extra = fitting(variants(first))
    if width(shape) <= 128 and tuned in extra:
        out = [tuned] + fits + [p for p in extra if p != tuned]
    else:
        out = [first] + [p for p in fits if p != first] + extra
    # on Hopper the warpgroup kernel first (H100, bench_cuda --mma-choices: BERT-base f16
    # 0.083 ms against 0.108 above, causal bf16 at head_dim 128 0.195 against 0.327)
    wide = fitting(attention_wgmma.choices(attention_wgmma.default(shape.D), shape.D))
    return list(dict.fromkeys(wide + out))


def shared_bytes(params, D: int) -> int:
    """Q's rows (unless they borrow the ring's last buffer) and `stages` buffers of K and V
    rows, padded (the warpgroup kernel's: attention_wgmma.shared_bytes)."""
    if params.wgmma:
        return attention_wgmma.shared_bytes(params, D)
    q = 0 if q_in_ring(params) else params.block_q
    return 2 * (q + 2 * params.stages * params.block_kv) * (D + PAD)


def q_in_ring(params) -> bool:
    """Whether Q's rows are copied into the K rows of the ring's last buffer: where the warps
    hold Q's fragments and that buffer is first refilled after a barrier that finds every
    warp past loading them (a ring of three or more), and the queries fit its rows (at
    head_dim 128, 64 queries and a ring of three: 104 KiB a block, two a multiprocessor)."""
    return params.hold_q and params.stages >= 3 and params.block_q <= params.block_kv


def aligned(params) -> tuple:
    """The roles whose buffers the kernel accesses by 16 bytes (cp.async), and the output,
    stored by pairs, where `packed`."""
    return ("q", "k", "v") + (("out",) if params.packed else ())


def nonnegative(e) -> bool:
    """Whether the CIR scale `e` is known not negative (a constant, a square root or
    exponential, products and quotients of such): the raw scores' maximum is then the scaled
    scores' (`fold_scale`)."""
    if isinstance(e, cir.Const):
        return not isinstance(e.value, bool) and e.value >= 0
    if isinstance(e, cir.Call):
        return e.fn in ("sqrt", "exp", "exp2", "rsqrt")
    if isinstance(e, cir.Bin) and e.op in ("*", "/"):
        return nonnegative(e.left) and nonnegative(e.right)
    if isinstance(e, cir.Cast):     # rounding keeps the sign (f16(sqrt(head_dim)))
        return e.ty.dtype in cir.FLOAT_DTYPES and nonnegative(e.operand)
    return False


def width(shape) -> int:
    """The longer of Q's and V's head_dim: the shared rows' (K's and V's share a stride)."""
    return max(shape.D, shape.Dv)


def foldable(shape) -> bool:
    """Whether the scale may be folded into the exponent's FMA (`fold_scale`): the raw
    scores' maximum is the scores' where the scale is not negative and nothing is added."""
    return not shape.p.rescored and nonnegative(shape.p.scale)


def unfolded(shape, params):
    """`params` without `fold_scale` where this attention cannot fold its scale: the same
    kernel with the scale applied to each score."""
    return params if not params.fold_scale or foldable(shape) else replace(params, fold_scale=False)


def why_not(target, shape, params=None) -> str | None:
    """None where the tensor-core schedule runs this attention (`match`'s Shape) on `target`
    with `params` (by default: 4 warps of 16 queries, Q read at each tile), else the reason."""
    params = params or replace(MMA, hold_q=False)
    block_q, warps = params.block_q, params.warps
    if target.symbolic_sizes:
        return "the tensor-core attention is written for sizes known when compiled"
    if target.warp != 32 or "mma.sync" not in target.tensor_cores or not target.async_copy:
        return f"the {target.name} target has no mma.sync tensor cores with cp.async"
    dts = {shape.bufs[r].dtype for r in ("q", "k", "v")}
    if len(dts) != 1 or not dts <= set(HALVES):
        return (f"Q, K, V are {', '.join(shape.bufs[r].dtype for r in ('q', 'k', 'v'))}: the "
                "tensor-core attention takes all f16 or all bf16")
    for name, d in (("head_dim", shape.D), ("V's head_dim", shape.Dv)):
        if d % 16 or d > MAX_HEAD_DIM:
            return f"{name} {d}: the tensor-core attention takes multiples of 16 up to {MAX_HEAD_DIM}"
    rows = block_q // warps
    if block_q % warps or rows not in (16, 32) or warps * 32 > target.max_threads:
        return f"{block_q} queries over {warps} warps: each warp takes 16 or 32"
    if width(shape) > HELD_HEAD_DIM and (rows != 16 or params.hold_q):
        return (f"head_dim {_widths(shape)}: past {HELD_HEAD_DIM} a warp takes 16 queries and reads Q "
                "at each tile (the registers)")
    if params.block_kv not in BLOCK_KV or params.stages not in STAGES:
        return (f"{params.block_kv}-key tiles in {params.stages} buffers: the tensor-core attention "
                f"takes {' or '.join(map(str, BLOCK_KV))} keys in {' or '.join(map(str, STAGES))}")
    if params.fold_scale and not foldable(shape):
        return ("the score has an added term: the scores' maximum is not the raw dot products'"
                if shape.p.rescored else
                "the scale's sign is not known: the scaled scores' maximum is not the raw ones'")
    if shared_bytes(params, width(shape)) > target.shared_bytes:
        return f"head_dim {_widths(shape)}: the Q, K and V tiles outgrow the shared memory"
    return attention_wgmma.why_not(target, shape, params) if params.wgmma else None


def describe(params, shape) -> str:
    """The schedule line's account of the algorithm."""
    mt = params.block_q // params.warps // 16
    if params.wgmma:
        head = attention_wgmma.describe(params, shape)
    else:
        head = (f"Q K^T and P V on tensor cores (mma.sync m16n8k16 {shape.bufs['q'].dtype}, f32 "
                f"accumulate), {params.warps} warps of {16 * mt} queries, Q fragments "
                + ("held in registers" if params.hold_q else "read from shared memory each tile")
                + f", online softmax in registers (exp2), {params.block_kv}-key K/V tiles by cp.async into "
                + ("two shared buffers" if params.stages == 2 else f"a ring of {params.stages} shared buffers"))
    return (head
            + (" (Q's rows copied into the last)" if q_in_ring(params) else "")
            + (", P and O converted by pairs" if params.packed else "")
            + (", the scale in the exponent's FMA" if params.fold_scale else "")
            + (", O rescaled only where a row's maximum grew" if params.skip_rescale else "")
            + (", exp2 by ex2.approx.ftz, maxima by max.f32" if params.fast_math else "")
            + (", the key condition tested on the causal diagonal's tiles only" if shape.p.causal else ""))


def kernel(kernel_, target, sizes, shape, params, sites, idx):
    """(ir.Kernel, grid, tensor maps) of the tensor-core attention (named apart from its
    fallback's)."""
    why = why_not(target, shape, params)
    if why:
        raise NotScalar(why)
    cls = attention_wgmma.TmaKernel if params.tma else attention_wgmma.WgmmaKernel if params.wgmma else _MmaKernel
    built = cls(kernel_, target, sizes, shape, params, sites, idx, shape.D, 0,
                params.block_q, params.block_kv, 16, 0, 0, "mma")
    return (*built.kernel(), tuple(built.maps))


class _MmaKernel(_Kernel):
    """The tensor-core kernel; the attention kernel's helpers (sizes, row offsets, the key
    condition, the empty row's reciprocal) are shared."""

    maps: tuple = ()            # the tensor maps its copies read through (ir.TensorMap)

    def kernel(self):
        p, P, idx, low = self.shape.p, self.P, self.idx, self.low
        D = self.dcap
        self.BQ, self.NW = P.block_q, P.warps
        self.MT = self.BQ // self.NW // 16              # m16 tiles a warp
        self.BK, self.NS = P.block_kv, P.stages
        BK = self.BK
        # V's head_dim (multi-head latent attention's differs from Q's and K's) sets O's
        self.DV = self.shape.Dv
        self.NT, self.KS, self.ND = BK // 8, BK // 16, self.DV // 8
        self.ST = max(D, self.DV) + PAD                 # elements of a shared row
        self.tile_elems = self.tile_size(BK)            # elements of a K or V buffer
        self.dt = self.shape.bufs["q"].dtype
        self.T = 32 * self.NW
        self.D = lit(D, idx)
        self.full = int(recognise.launch_value(p.n_keys, self.low.sizes)) % BK == 0
        # the first keys kept where the key condition is one other than a causal one;
        # otherwise key 0 is every query's first, and a row that `_fni` would make NaN has
        # its NaN put into its sum in the tile that decides it (`poisons`)
        kept = self.kept_firsts
        self.firsts = kept if "_fai" in kept else ()
        self.poisons = kept == ("_fni",)
        self.first_n8 = self.first_tiles()
        r = self.ref
        B, H, S, SK = (self.size(e) for e in (p.n_batch, p.n_heads, p.n_queries, p.n_keys))
        scale = ir.Bin("*", low.operand(p.scale, F), lit(LOG2E, F), F)
        kend = r("_SK")
        if p.causal:            # key <= query: no key past the block's last query
            kend = ir.Math("min", (r("_SK"), self.add(r("_q0"), self.i(self.BQ))), idx)
        lane = self.at("lane")
        body = [ir.Decl("_S", idx, S), ir.Decl("_SK", idx, SK),
                ir.Decl("_nqb", idx, ir.Bin("/", self.add(S, self.i(self.BQ - 1)), self.i(self.BQ), idx)),
                ir.Decl("_bh", idx, ir.Bin("/", self.at("block"), r("_nqb"), idx)),
                ir.Decl("_h", idx, ir.Bin("%", r("_bh"), H, idx)),
                ir.Decl("_b", idx, ir.Bin("/", r("_bh"), H, idx)),
                ir.Decl("_q0", idx, self.mul(self.query_block(), self.i(self.BQ))),
                ir.Decl("_t", idx, self.at("thread")),
                ir.Decl("_wq", idx, self.mul(self.warp(), self.i(16 * self.MT))),
                ir.Decl("_g", idx, ir.Bin("/", lane, self.i(4), idx)),
                ir.Decl("_t4", idx, ir.Bin("%", lane, self.i(4), idx)),
                ir.Decl("_l8", idx, ir.Bin("%", lane, self.i(8), idx)),
                ir.Decl("_lq", idx, ir.Bin("/", lane, self.i(8), idx))]
        bh = (r("_b"), r("_h"))
        body += [ir.Decl(f"_{role}base", idx, self.row_offset(role, *bh, self.i(0)))
                 for role in ("q", "k", "v", "out")]
        body += [ir.Decl("_scale", F, scale),
                 ir.Decl("_nk", idx, ir.Bin("/", self.add(kend, self.i(BK - 1)), self.i(BK), idx)),
                 *self.arrays()]
        regs = [ir.Array("_pa", self.dt, self.MT * self.KS * 8),
                ir.Array("_sc", F, self.MT * self.NT * 4),
                ir.Array("_o", F, self.MT * self.ND * 4),
                ir.Array("_mrow", F, 2 * self.MT), ir.Array("_lrow", F, 2 * self.MT),
                *([ir.Array("_al", F, 2 * self.MT)] if P.skip_rescale else []),
                self.loop("_i", 2 * self.MT, lambda i: [ir.Store("_mrow", i, NEG), ir.Store("_lrow", i, ZERO)]),
                *self.first_rows(2 * self.MT, self.firsts),
                self.loop("_i", self.MT * self.ND * 4, lambda i: [ir.Store("_o", i, ZERO)])]
        body += self.main(regs)
        arrays = [s for s in body if isinstance(s, ir.Array) and s.space == "shared"]
        used = sum(-(-a.count * (8 if a.dtype == "u64" else 2) // 16) * 16 for a in arrays)
        if used > STATIC_SHARED:    # the launch's memory is 16-byte aligned: an array aligned
            used += max(a.align for a in arrays) - 16       # further may start later
        name = kernel_name(self.k, self.suffix or "")
        k = ir.Kernel(name, buffer_params(self.k, self.low.sizes, self.idx) + self.extra_params(), tuple(body),
                      self.threads(), idx,
                      f"attention, head_dim {D}: {self.BQ} queries x {BK}-key tiles on tensor cores "
                      + self.who(),
                      min_blocks=self.blocks_per_sm(), dynamic_shared=used if used > STATIC_SHARED else 0)
        blocks = ir.Bin("*", ir.Bin("*", B, H, idx), ir.ceildiv(self.size(p.n_queries), self.BQ), idx)
        return k, blocks

    # ---- the parts the warpgroup kernel (attention_wgmma.py) replaces --------------------

    def main(self, regs: list) -> list:
        """After the sizes and the shared arrays: the registers `regs` (declared and set),
        Q's copy in a group of its own, then the first tiles' (one a group), Q's fragments
        once its group is complete, the key loop and the stores."""
        r = self.ref
        queries = int(recognise.launch_value(self.shape.p.n_queries, self.low.sizes))
        body = regs + self.issue("q", r("_q0"), self.BQ, r("_S"), *self.q_rows(),
                                 whole=queries % self.BQ == 0) + [ir.AsyncCommit()]
        for t in range(self.NS - 1):
            body += [self.issue_tile(self.i(t)), ir.AsyncCommit()]
        return body + self.q_ready() + self.key_loop() + self.finish()

    def warp(self) -> ir.Expr:
        """This thread's warp among those that compute."""
        return self.at("warp")

    def threads(self) -> int:
        return self.T

    def blocks_per_sm(self) -> int:
        """The blocks a multiprocessor should hold (the register cap), 0: unsaid."""
        return self.P.occupancy

    def extra_params(self) -> tuple:
        return ()

    def who(self) -> str:
        return f"({self.NW} warps of {16 * self.MT} queries)"

    def arrays(self) -> list:
        """Q's rows (unless in the ring), the ring of K and V rows, the K, V and (where held
        or read at each tile) Q fragments."""
        P, D = self.P, self.dcap
        return [*([] if q_in_ring(P) else [ir.Array("_qs", self.dt, self.tile_size(self.BQ), "shared")]),
                ir.Array("_ks", self.dt, self.NS * self.tile_elems, "shared"),
                ir.Array("_vs", self.dt, self.NS * self.tile_elems, "shared"),
                ir.Array("_fq", self.dt, self.MT * (D // 16 if P.hold_q else 1) * 8),
                ir.Array("_fk", self.dt, self.NT * 4),
                ir.Array("_fv", self.dt, self.ND * 4)]

    def q_ready(self) -> list:
        """After Q's and the first tiles' copies are issued: Q's fragments into registers
        where the warps hold them (once its group is complete)."""
        out = []
        if self.P.hold_q or self.NS == 2:
            out += [ir.AsyncWait(self.NS - 1), ir.Barrier()]
        if self.P.hold_q:
            out.append(self.loop("_kk", self.dcap // 16, lambda kk: [
                self.loop("_mt", self.MT, lambda mi: self.q_fragment(mi, kk))]))
        return out

    def key_loop(self) -> list:
        """The loop over the key tiles, each tile's copies issued `stages - 1` tiles before it."""
        r, idx, kt = self.ref, self.idx, self.ref("_kt")
        compute = [ir.Decl("_kb", idx, self.mul(ir.Bin("%", kt, self.i(self.NS), idx), self.i(self.tile_elems))),
                   *self.scores(), *self.masked_or_not(), *self.values()]
        if self.NS == 2:
            # the buffer refilled here was last read in the previous step (its closing barrier)
            tile = [self.issue_tile(self.add(kt, self.i(1))), ir.AsyncCommit(), *self.publish(1),
                    *compute, ir.Barrier()]
        else:
            # this tile's group complete (the next one's may not be); the barrier publishes it
            # and finds every warp past the previous tile, whose buffer is refilled
            tile = [*self.publish(self.NS - 2),
                    self.issue_tile(self.add(kt, self.i(self.NS - 1))), ir.AsyncCommit(), *compute]
        return [ir.For("_kt", self.i(0), r("_nk"), self.i(1),
                       (ir.Decl("_k0", idx, self.mul(kt, self.i(self.BK))), *tile), idx)]

    def publish(self, pending: int) -> list:
        """The copies but the newest `pending` groups complete, and visible to the block."""
        return [ir.AsyncWait(pending), ir.Barrier()]

    def tile_size(self, rows: int) -> int:
        """Elements of a shared tile of `rows` rows of head_dim."""
        return rows * self.ST

    def shared_at(self, base, row, unit, rows: int) -> ir.Expr:
        """Where 16-byte unit `unit` of row `row` lies in a tile of `rows` rows at `base`:
        rows padded by 16 bytes."""
        return self.add(base, self.mul(row, self.i(self.ST)), self.mul(unit, self.i(8)))

    # ---- helpers ----------------------------------------------------------------------

    def query_block(self) -> ir.Expr:
        """The block's place among its head's query blocks; under a causal condition the
        last first (the most keys: the longest blocks start before the short ones)."""
        q = ir.Bin("%", self.at("block"), self.ref("_nqb"), self.idx)
        if not self.shape.p.causal:
            return q
        return ir.Bin("-", ir.Bin("-", self.ref("_nqb"), self.i(1), self.idx), q, self.idx)

    def loop(self, var, n, body_of):
        """for var in 0..n, written out by the target compiler (register indices)."""
        return ir.For(var, self.i(0), self.i(n), self.i(1), tuple(body_of(self.ref(var))), self.idx,
                      unroll=True)

    def idiv(self, a, n):
        return ir.Bin("/", a, self.i(n), self.idx)

    def imod(self, a, n):
        return ir.Bin("%", a, self.i(n), self.idx)

    # ---- copies into shared memory ----------------------------------------------------

    def issue(self, role, first, rows, count, dst, dst_base, whole=False) -> list:
        """Rows first .. first + rows of `role` (zeros past `count`, unless the rows are
        known `whole`: in range) into shared array `dst` from `dst_base`, 16 bytes (8
        elements) a copy, thread t taking copies t, t + T, ..."""
        r, C = self.ref, (self.DV if role == "v" else self.dcap) // 8
        n = rows * C
        buf = self.shape.bufs[role]
        var = f"_c{role}"

        def one(u):
            e = self.add(r("_t"), self.mul(u, self.i(self.T)))
            j = self.add(first, r("_row"))
            src = self.add(r(f"_{role}base"), self.mul(j, self.seq_stride(role)), self.mul(r("_col"), self.i(8)))
            at = self.shared_at(dst_base, r("_row"), r("_col"), rows)
            out = (ir.Decl("_row", self.idx, self.idiv(e, C)), ir.Decl("_col", self.idx, self.imod(e, C)),
                   ir.AsyncCopy(dst, at, user_name(buf.name), src, 8, buf.dtype,
                                None if whole else ir.Bin("<", j, count, "bool")))
            return list(out) if n % self.T == 0 else [ir.If(ir.Bin("<", e, self.i(n), "bool"), out)]
        return [self.loop(var, -(-n // self.T), one)]

    def issue_tile(self, kt) -> ir.Stmt:
        """The K and V rows of tile `kt` (where there is one) into its buffer of the ring."""
        BK, k0 = self.BK, self.mul(kt, self.i(self.BK))
        slot = self.i(kt.value % self.NS) if isinstance(kt, ir.Lit) else self.imod(kt, self.NS)
        base = self.mul(slot, self.i(self.tile_elems))
        return ir.If(ir.Bin("<", kt, self.ref("_nk"), "bool"), tuple(
            self.issue("k", k0, BK, self.ref("_SK"), "_ks", base, self.full)
            + self.issue("v", k0, BK, self.ref("_SK"), "_vs", base, self.full)))

    # ---- fragments and products -------------------------------------------------------

    def q_rows(self):
        """(shared array, first element) of Q's rows: an array of their own, or the K rows of
        the ring's last buffer (`q_in_ring`)."""
        if q_in_ring(self.P):
            return "_ks", self.i((self.NS - 1) * self.tile_elems)
        return "_qs", self.i(0)

    def q_at(self, mi, kk) -> ir.Expr:
        """Where the A fragment of m16 tile mi and k16 step kk is kept: every step's, where
        the warp holds Q in registers (`hold_q`), else the current step's."""
        kd = self.dcap // 16 if self.P.hold_q else 1
        return self.mul(self.add(self.mul(mi, self.i(kd)), kk if self.P.hold_q else self.i(0)), self.i(8))

    def q_fragment(self, mi, kk) -> list:
        """The A fragment of Q's m16 tile mi, k16 step kk: tiles (rows 0-7 | 8-15) x
        (cols 0-7 | 8-15), lane 8 i + l8 giving row l8 of tile i."""
        r = self.ref
        row = self.add(r("_wq"), self.mul(mi, self.i(16)), self.mul(self.imod(r("_lq"), 2), self.i(8)), r("_l8"))
        col = self.add(self.mul(kk, self.i(16)), self.mul(self.idiv(r("_lq"), 2), self.i(8)))
        qs, base = self.q_rows()
        return [ir.MatrixLoad("_fq", self.q_at(mi, kk), qs, self.add(base, self.mul(row, self.i(self.ST)), col),
                              4, False, self.dt)]

    def scores(self) -> list:
        """S = Q K^T for the warp's queries and the tile's keys: per k16 step, the B
        fragments of two key tiles by one ldmatrix x4 (K rows are B's columns)."""
        r, NT, KD = self.ref, self.NT, self.dcap // 16

        def kfrag(jp, kk):
            key = self.add(self.mul(jp, self.i(16)), self.mul(self.idiv(r("_lq"), 2), self.i(8)), r("_l8"))
            col = self.add(self.mul(kk, self.i(16)), self.mul(self.imod(r("_lq"), 2), self.i(8)))
            return [ir.MatrixLoad("_fk", self.mul(jp, self.i(8)), "_ks",
                                  self.add(r("_kb"), self.mul(key, self.i(self.ST)), col), 4, False, self.dt)]

        def mma(mi, j, kk):
            return [ir.Mma("_fq", self.q_at(mi, kk), "_fk", self.mul(j, self.i(4)),
                           "_sc", self.mul(self.add(self.mul(mi, self.i(NT)), j), self.i(4)), self.dt)]
        step = lambda kk: [*([] if self.P.hold_q else [
                               self.loop("_mt", self.MT, lambda mi: self.q_fragment(mi, kk))]),
                           self.loop("_jp", NT // 2, lambda jp: kfrag(jp, kk)),
                           self.loop("_mt", self.MT, lambda mi: [self.loop("_nt", NT, lambda j: mma(mi, j, kk))])]
        return [self.loop("_i", self.MT * NT * 4, lambda i: [ir.Store("_sc", i, ZERO)]),
                self.loop("_kk", KD, step)]

    def masked_or_not(self) -> list:
        """The softmax of the tile, the key condition and bound tested per element only where
        the tile may hold a key they exclude: past the keys (unless they fill whole tiles),
        or, under a causal condition, past the block's first query."""
        ok = self.admitted()
        p, r = self.shape.p, self.ref
        if ok is None or (p.mask is not None and not p.causal):
            return self.poison() + self.softmax(ok)
        last = self.add(r("_k0"), self.i(self.BK - 1))
        test = None if self.full else ir.Bin(">=", last, r("_SK"), "bool")
        if p.causal:
            diagonal = ir.Bin(">", last, r("_q0"), "bool")
            test = diagonal if test is None else ir.Bin("or", diagonal, test, "bool")
        return self.poison() + [ir.If(test, tuple(self.softmax(ok)), tuple(self.softmax(None)))]

    def first_tiles(self) -> int:
        """Where the softmax's own maximum decides `poisons` (no condition on the keys, the
        first block whole n8 tiles of the first key tile): those n8 tiles, else 0. Their
        maximum is taken apart from the other tiles' (`_mf`) and tested in the first tile: a
        row whose first block is all -inf is dead. Its maximum drops NaN, as `fmax` does: a
        NaN score there makes the row NaN through its weight anyway."""
        if not self.poisons or self.shape.p.causal:
            return 0
        block = self.first_keys()
        return block // 8 if block % 8 == 0 and block <= self.BK else 0

    def first_keys(self) -> int:
        """The first block's keys, in range (the sizes are baked in)."""
        return min(self.first_limit(), int(recognise.launch_value(self.shape.p.n_keys, self.low.sizes)))

    def poison(self) -> list:
        """An online form's row whose key 0 scores -inf, flash's whose first key block does
        throughout (where key 0 is every query's first, `poisons`), is NaN as the loops'
        first update exp(-inf - -inf) makes it: in the tile where those keys end, before
        its softmax, its sum is made NaN (the NaN stays in it). Where the softmax's maximum
        decides it (`first_tiles`), the softmax tests it."""
        if not self.poisons or self.first_n8:
            return []
        r, p = self.ref, self.shape.p
        block = self.first_keys()
        one_tile = block <= self.BK
        mf = ir.Ref("_mf", F)
        # the raw scores where the scale is known not negative
        score = (lambda x: x) if self.P.fold_scale else (lambda x: ir.Bin("*", x, ir.Ref("_scale", F), F))
        idx, last = self.idx, lambda n: ir.Bin("-", r(n), self.i(1), self.idx)

        def row(mi, rh):
            slot = self.add(self.mul(mi, self.i(2)), rh)
            qi = self.add(r("_q0"), r("_wq"), self.mul(mi, self.i(16)), r("_g"), self.mul(rh, self.i(8)))
            # a bias or kept condition reads the query and key (`scored`), kept in range
            keyed = [ir.Decl("_qc", idx, ir.Math("min", (qi, last("_S")), idx)),
                     ir.Decl("_j", idx, self.i(0), True), ir.Decl("_jc", idx, self.i(0), True)] \
                if p.rescored else []

            def first(j, c):        # a key of the first block, in range and admitted
                key = self.add(r("_k0"), self.mul(j, self.i(8)), self.mul(r("_t4"), self.i(2)), c)
                at = self.add(self.mul(self.add(self.mul(mi, self.i(self.NT)), j), self.i(4)), self.mul(rh, self.i(2)), c)
                ok = None if one_tile and (j.value + 1) * 8 <= block else ir.Bin("<", key, self.i(block), "bool")
                if p.causal:
                    causal = ir.Bin("<=", key, qi, "bool")
                    ok = causal if ok is None else ir.Bin("and", ok, causal, "bool")
                x, pre = ir.Load("_sc", at, F), []
                if p.rescored:      # the score as the softmax's `mask` makes it
                    pre = [ir.Set("_j", key), ir.Set("_jc", ir.Math("min", (r("_j"), last("_SK")), idx))]
                    v = self.scored(ir.Bin("*", x, ir.Ref("_scale", F), F), LOG2E)
                else:
                    v = score(x)
                larger = ir.Math("max", (mf, v), F)
                return pre + [ir.Set("_mf", larger if ok is None else ir.Select(ok, larger, mf, F))]
            # (the maximum of the earlier tiles, all of the block, is -inf too)
            dead = ir.Un("not", _alive(ir.Collective("max", mf, "warp", F, 4)), "bool")
            if not one_tile:
                dead = ir.Bin("and", dead, ir.Un("not", _alive(ir.Load("_mrow", slot, F)), "bool"), "bool")
            n8 = -(-block // 8) if one_tile else self.NT       # the n8 tiles that hold those keys
            return [*keyed, ir.Decl("_mf", F, NEG, True),
                    *[st for j in range(n8) for c in (0, 1) for st in first(self.i(j), self.i(c))],
                    ir.If(dead, (ir.Store("_lrow", slot, NAN),))]
        rows = self.loop("_mt", self.MT, lambda mi: [self.loop("_rh", 2, lambda rh: row(mi, rh))])
        if one_tile:
            return [ir.If(ir.Bin("==", r("_k0"), self.i(0), "bool"), (rows,))]
        # the tile where the block ends
        end = self.add(r("_k0"), self.i(self.BK))
        return [ir.If(ir.Bin("and", ir.Bin("<", r("_k0"), self.i(block), "bool"),
                             ir.Bin(">=", end, self.i(block), "bool"), "bool"), (rows,))]

    def softmax(self, ok) -> list:
        """Per row the lane holds (query g + 8 rh of each m16 tile): scale and mask (where
        `ok`, the key condition and bound, is not None), the row's maximum over the quad,
        the rescale of l and O, P into A fragments."""
        r, idx, NT, KS, P, p = self.ref, self.idx, self.NT, self.KS, self.P, self.shape.p
        larger = lambda a, b: ir.Select(ir.Bin("<", a, b, "bool"), b, a, F)
        is_neg = lambda x: ir.Bin("==", x, NEG, "bool")
        scaled = lambda x: ir.Bin("*", x, ir.Ref("_scale", F), F)
        fold = P.fold_scale
        # `fast_math`: one MUFU.EX2 (weights below 2^-126 are 0 beside the row's largest, 1)
        # and one FMNMX a score (a NaN score still makes its weight, so the row, NaN)
        exp2 = lambda x: ir.Math("fast_exp2" if P.fast_math else "exp2", (x,), F)
        running = (lambda a, b: ir.Math("fmax", (a, b), F)) if P.fast_math else larger

        def row(mi, rh):
            slot = self.add(self.mul(mi, self.i(2)), rh)
            at = lambda j, c: self.add(self.mul(self.add(self.mul(mi, self.i(NT)), j), self.i(4)),
                                       self.mul(rh, self.i(2)), c)
            s = lambda j, c: ir.Load("_sc", at(j, c), F)

            def mask(j, c, into="_mx"):
                # the added term, in base 2 as the scaled score (at the key clamped in range)
                v = s(j, c) if fold else self.scored(scaled(s(j, c)), LOG2E)
                pre = []
                if ok is not None or p.rescored:
                    key = self.add(r("_k0"), self.mul(j, self.i(8)), self.mul(r("_t4"), self.i(2)), c)
                    pre = [ir.Decl("_j", idx, key),
                           ir.Decl("_jc", idx, ir.Math("min", (r("_j"), ir.Bin("-", r("_SK"), self.i(1), idx)), idx))]
                if ok is not None:
                    v = ir.Select(ok, v, NEG, F)
                put = [] if fold and ok is None else [ir.Store("_sc", at(j, c), v)]
                if "_fai" in self.firsts:   # a key condition (a key not admitted scores -inf now)
                    put += [self.note_row(a, slot, r("_j"), cond) for a, cond in (
                        ("_fai", ok), ("_fni", _alive(s(j, c)))) if a in self.firsts]
                return pre + put + [ir.Set(into, running(ir.Ref(into, F), s(j, c)))]

            def weight(j, c):
                if fold:            # s c - m c: one FMA; a masked score (-inf) weighs 0
                    e = ir.Bin("-", scaled(s(j, c)), ir.Ref("_ms", F), F)
                    w = [ir.Decl("_p", F, exp2(e))]
                else:
                    w = [ir.Decl("_es", F, exp2(ir.Bin("-", s(j, c), ir.Ref("_mn", F), F))),
                         ir.Decl("_p", F, ir.Select(is_neg(s(j, c)), ZERO, ir.Ref("_es", F), F))]
                w.append(ir.Set("_rs", ir.Bin("+", ir.Ref("_rs", F), ir.Ref("_p", F), F)))
                if P.packed:        # P back into S's registers, converted by pairs below
                    return w + [ir.Store("_sc", at(j, c), ir.Ref("_p", F))]
                return w + [ir.Store("_pa", self.pa_at(mi, rh, j, c), cast(ir.Ref("_p", F), self.dt))]
            each = lambda fn: self.loop("_nt", NT, lambda j: [self.loop("_c", 2, lambda c: fn(j, c))])
            scan, dead = [each(mask)], []
            if self.first_n8:       # the first block's maximum apart (`first_tiles`)
                nb = self.first_n8
                tiles = lambda lo, hi, into: ir.For("_nt", self.i(lo), self.i(hi), self.i(1), (
                    self.loop("_c", 2, lambda c: mask(r("_nt"), c, into)),), idx, unroll=True)
                mf = ir.Ref("_mf", F)
                scan = [ir.Decl("_mf", F, NEG, True), tiles(0, nb, "_mf"), tiles(nb, NT, "_mx"),
                        ir.Set("_mx", running(ir.Ref("_mx", F), mf))]
                gone = ir.Un("not", _alive(ir.Collective("max", mf, "warp", F, 4)), "bool")
                dead = [ir.If(ir.Bin("==", r("_k0"), self.i(0), "bool"), (
                    ir.If(gone, (ir.Store("_lrow", slot, NAN),)),))]
            old = ir.Load("_mrow", slot, F)
            mn = ir.Ref("_mn", F)
            if fold:                # the maxima are the raw scores'; -inf (no key yet) stays 0
                factor = [ir.Decl("_ms", F, ir.Select(is_neg(mn), ZERO, scaled(mn), F)),
                          ir.Decl("_alpha", F, exp2(ir.Bin("-", scaled(old), ir.Ref("_ms", F), F)))]
            else:
                factor = [ir.Decl("_ea", F, exp2(ir.Bin("-", old, mn, F))),
                          ir.Decl("_alpha", F, ir.Select(is_neg(mn), lit(1.0, F), ir.Ref("_ea", F), F))]
            if P.skip_rescale:      # O's rescale after every row's, where the warp needs it
                rescale = [ir.Store("_al", slot, ir.Ref("_alpha", F))]
            else:
                rescale = [self.loop("_n", self.ND, lambda n: [
                    self.loop("_c", 2, lambda c: [self.scale_o(mi, rh, n, c, ir.Ref("_alpha", F))])])]
            pack = self.pack(mi, rh) if P.packed else []
            return [
                ir.Decl("_qi", idx, self.add(r("_q0"), r("_wq"), self.mul(mi, self.i(16)), r("_g"),
                                             self.mul(rh, self.i(8)))),
                ir.Decl("_qc", idx, ir.Math("min", (r("_qi"), ir.Bin("-", r("_S"), self.i(1), idx)), idx)),
                ir.Decl("_mx", F, NEG, True), *scan,
                ir.Set("_mx", ir.Collective("fmax" if P.fast_math else "max", ir.Ref("_mx", F), "warp", F, 4)),
                ir.Decl("_mn", F, larger(old, ir.Ref("_mx", F))), *factor,
                ir.Decl("_rs", F, ZERO, True), each(weight), *pack,
                ir.Store("_lrow", slot, ir.Bin("+", ir.Bin("*", ir.Load("_lrow", slot, F), ir.Ref("_alpha", F), F),
                                              ir.Ref("_rs", F), F)),
                ir.Store("_mrow", slot, ir.Ref("_mn", F)), *dead, *rescale]
        out = [self.loop("_mt", self.MT, lambda mi: [self.loop("_rh", 2, lambda rh: row(mi, rh))])]
        return out + (self.rescale_where_grew() if P.skip_rescale else [])

    def rescale_where_grew(self) -> list:
        """A factor of 1 (no larger maximum) leaves O as it is: the warp skips the products
        where none of its rows found one (a branch every lane takes alike)."""
        al = lambda i: ir.Load("_al", i, F)
        return [ir.Decl("_grew", "bool", lit(False, "bool"), True),
                self.loop("_i", 2 * self.MT, lambda i: [ir.Set("_grew", ir.Bin(
                    "or", ir.Ref("_grew", "bool"), ir.Bin("!=", al(i), lit(1.0, F), "bool"), "bool"))]),
                ir.If(ir.Collective("or", ir.Ref("_grew", "bool"), "warp", "bool"), (
                    self.loop("_mt", self.MT, lambda mi: [self.loop("_rh", 2, lambda rh: [
                        self.loop("_n", self.ND, lambda n: [self.loop("_c", 2, lambda c: [
                            self.scale_o(mi, rh, n, c, al(self.add(self.mul(mi, self.i(2)), rh)))])])])]),))]

    def pack(self, mi, rh) -> list:
        """Row rh of m16 tile mi of P, f32 in S's registers, into A fragments by pairs."""
        at = lambda j: self.add(self.mul(self.add(self.mul(mi, self.i(self.NT)), j), self.i(4)), self.mul(rh, self.i(2)))
        return [self.loop("_nt", self.NT, lambda j: [
            ir.Convert("_pa", self.pa_at(mi, rh, j, self.i(0)), "_sc", at(j), 2, self.dt)])]

    def pa_at(self, mi, rh, j, c):
        """Where P's element (row rh, key 2 t + c of n8 tile j) goes among the A fragments:
        A[2 p + h] of k16 step j // 2 is C_j[2 rh + c] with p = 2 (j % 2) + rh, h = c."""
        return self.add(self.mul(self.add(self.mul(mi, self.i(self.KS)), self.idiv(j, 2)), self.i(8)),
                        self.mul(self.add(self.mul(self.imod(j, 2), self.i(2)), rh), self.i(2)), c)

    def o_at(self, mi, rh, n, c):
        return self.add(self.mul(self.add(self.mul(mi, self.i(self.ND)), n), self.i(4)), self.mul(rh, self.i(2)), c)

    def scale_o(self, mi, rh, n, c, factor):
        at = self.o_at(mi, rh, n, c)
        return ir.Store("_o", at, ir.Bin("*", ir.Load("_o", at, F), factor, F))

    def values(self) -> list:
        """O += P V: per k16 step of keys, the B fragments of two head_dim tiles by one
        transposed ldmatrix x4 (V rows run along head_dim, B's columns)."""
        r, ND, KS = self.ref, self.ND, self.KS

        def vfrag(np_, kk):
            key = self.add(self.mul(kk, self.i(16)), self.mul(self.imod(r("_lq"), 2), self.i(8)), r("_l8"))
            col = self.add(self.mul(np_, self.i(16)), self.mul(self.idiv(r("_lq"), 2), self.i(8)))
            return [ir.MatrixLoad("_fv", self.mul(np_, self.i(8)), "_vs",
                                  self.add(r("_kb"), self.mul(key, self.i(self.ST)), col), 4, True, self.dt)]

        def mma(mi, n, kk):
            return [ir.Mma("_pa", self.mul(self.add(self.mul(mi, self.i(KS)), kk), self.i(8)),
                           "_fv", self.mul(n, self.i(4)),
                           "_o", self.mul(self.add(self.mul(mi, self.i(ND)), n), self.i(4)), self.dt)]
        step = lambda kk: [self.loop("_np", ND // 2, lambda np_: vfrag(np_, kk)),
                           self.loop("_mt", self.MT, lambda mi: [self.loop("_n", ND, lambda n: mma(mi, n, kk))])]
        return [self.loop("_kk", KS, step)]

    def finish(self) -> list:
        """l summed over the quad; each query in range stores its columns of O / l."""
        r, idx = self.ref, self.idx
        out = self.shape.bufs["out"]

        def row(mi, rh):
            slot = self.add(self.mul(mi, self.i(2)), rh)
            qi = self.add(r("_q0"), r("_wq"), self.mul(mi, self.i(16)), r("_g"), self.mul(rh, self.i(8)))
            orow = self.add(r("_outbase"), self.mul(r("_qi"), self.seq_stride("out")))

            def put(n, c):
                col = self.add(self.mul(n, self.i(8)), self.mul(r("_t4"), self.i(2)), c)
                v = ir.Bin("*", ir.Load("_o", self.o_at(mi, rh, n, c), F), ir.Ref("_inv", F), F)
                return [ir.Store(user_name(out.name), self.add(orow, col), cast(v, out.dtype))]

            def put_pair(n):        # O / l in place, then the pair (columns 2 t4, + 1) at once
                col = self.add(self.mul(n, self.i(8)), self.mul(r("_t4"), self.i(2)))
                at = self.o_at(mi, rh, n, self.i(0))
                scaled = [self.scale_o(mi, rh, n, self.i(c), ir.Ref("_inv", F)) for c in (0, 1)]
                dst = user_name(out.name)
                if out.dtype == F:
                    return scaled + [ir.Copy(dst, self.add(orow, col), "_o", at, 2, F)]
                return scaled + [ir.Convert(dst, self.add(orow, col), "_o", at, 2, out.dtype)]
            stores = (self.loop("_n", self.ND, put_pair) if self.P.packed else
                      self.loop("_n", self.ND, lambda n: [self.loop("_c", 2, lambda c: put(n, c))]))
            # (a key left out weighed 0 in P V: `mend`; the maximum in the weights' base-2 scale)
            m = ir.Load("_mrow", slot, F)
            if self.P.fold_scale:
                m = ir.Select(ir.Bin("==", m, NEG, "bool"), ZERO, ir.Bin("*", m, ir.Ref("_scale", F), F), F)
            nan = self.nan_flag([ir.Load("_o", self.o_at(mi, rh, self.i(n), self.i(c)), F)
                                 for n in range(self.ND) for c in (0, 1)])
            mend = self.mend(orow, 2 * self.ND, lambda c: self.add(
                self.mul(self.idiv(c, 2), self.i(8)), self.mul(r("_t4"), self.i(2)), self.imod(c, 2)), m, LOG2E,
                             "fast_exp2" if self.P.fast_math else "exp2")
            return [ir.Decl("_L", F, ir.Collective("+", ir.Load("_lrow", slot, F), "warp", F, 4)),
                    *self.first_of_row(slot, 4, self.firsts),
                    ir.Decl("_qi", idx, qi),
                    ir.If(ir.Bin("<", r("_qi"), r("_S"), "bool"), (
                        ir.Decl("_inv", F, self.reciprocal(ir.Ref("_L", F), self.tracks_first, self.poisons)),
                        *nan, stores, *mend))]
        return [self.loop("_mt", self.MT, lambda mi: [self.loop("_rh", 2, lambda rh: row(mi, rh))])]


from . import attention_wgmma  # noqa: E402  (it builds on this module's kernel)
