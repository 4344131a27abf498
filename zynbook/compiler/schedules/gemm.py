"""The GEMM schedule: a recognised contraction (passes/recognise.py) as a tiled matrix product.

`out[P] = f(init + sum_R a(P, R) * b(P, R))` is read as C = A B per batch element: the
output variables only `a` reads span M, those only `b` reads span N (the side holding the
output's innermost index is N, so neighbouring threads store neighbouring elements), those
both read are the batch, the reduction variables span K. An operand's index may be any
expression of them (transposes, the gathered input of a convolution: implicit im2col); it
is evaluated per element, bounds-checked where it cannot be proven in range.

One block computes a BM x BN tile of C (blocks stride over the tiles), walking K in BK-deep
slices. A slice reaches shared memory either staged through registers into two buffers (the
next slice's global loads are in flight while the current one is multiplied, one barrier
per slice) or, with `stages` (tensor cores on a target with `async_copy`), by 16-byte
`cp.async` copies into a ring of that many buffers: `stages - 1` slices are in flight while
one is multiplied (commit a group per slice, wait for all but the newest `stages - 2`, one
barrier per slice; out-of-range rows land as zeros), and tiles are visited in groups of
`GROUP_M` tile rows so that neighbouring blocks share operand rows in L2. A side whose
contiguous axis allows it is read `width` elements at a time (16-byte loads; a device whose
buffers are not aligned runs the program's `fallback`); any other side is gathered element
by element.

A convolution's gathered input (the im2col of implicit GEMM, read under its padding guard):
in f32 each element is a 4-byte cp.async whose zero fill is the guard, so the ring serves
it too (f16 and bf16 elements, 2 bytes, which cp.async cannot copy, are staged through
registers); the output pixel (image, row, column) of a tile row is decomposed once a tile
(`hoist`), and where BK divides the input channels, K is walked tap by tap, (kh, kw, ic)
with the channel fastest (`k_order`): a slice has one filter tap, decomposed once a slice,
so the padding guard of a tile row is the same for all its columns in the slice and their
addresses differ by constants. The filter's (ic, kh, kw), one contiguous K in memory, is read
in 16-byte vectors where K keeps the loops' order. The product itself is either

* FMA: each thread keeps TM x TN sums in registers, reading TM values of A and TN of B
  from shared memory per step of K (A is stored k-major, so both are 4-wide reads), or
* tensor cores (`mma`, f16/bf16 on a target with `mma.sync`; f32, or any mix of f32, f16
  and bf16, as TF32 where the program says `config { allow_tf32: true }`: a half operand
  widens exactly to f32, so the product is TF32's of the widened operands; cp.async copies
  each operand into a tile of its own type, the fragment loads widening a half, while
  operands staged through registers widen on their way into f32 tiles): each warp keeps a
  TM x TN piece as m16n8k16 (TF32: m16n8k8) accumulators; the tiles keep the operands' own
  layout in shared memory, rows padded against bank conflicts or, with `swizzle`, unpadded
  with each 16-byte unit's place in its row XOR-ed by its row (`_Builder.at`), so that the
  eight rows an ldmatrix phase reads fall in eight different bank groups. Fragments come
  by ldmatrix x4 (transposed where a tile runs along M or N); TF32 fragments by ldmatrix
  where an f32 tile runs along K, else element by element; or
* warpgroup MMAs (`wgmma`, f16/bf16 on sm_90a, first there): the hardware reads both
  operands from 128-byte swizzled shared tiles itself (schedules/gemm_wgmma.py).

The epilogue adds the accumulator's start and runs the kernel's own store (`f`, a bias, an
activation) per element of C, tested against C's extent only along a side the tile does not
divide (`in_c`: straight-line code lets the compiler interleave the elements' math). On tensor cores, where the store writes C's own layout
(`_staged_ok`), the values go to a shared tile first (`_shc`, over the operand tiles' memory)
and leave in 16-byte stores of whole rows: a fragment's elements are two columns of eight
rows, so stored directly a warp writes 2- or 4-byte pieces of 8 rows at a time. Sums are f32 (f64 for f64 operands). A guarded accumulation
(`if cond: acc += a * b`) reads 0 for the guarded operand where `cond` is false; where the
guard reads only one side's variables, an infinite or NaN element of the other side then
makes a NaN the reference, which skips the product, does not make.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import reduce
from math import prod

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import DTYPE_BYTES as _BYTES
from ..launch.scalar import (ScalarLowering, buffer_params, cast, index_dtype, lit,
                             product_expr, user_name)
from ..passes.loops import counts_from_zero, free_vars
from ..passes.recognise import contraction
from . import configs
from .base import Builder, Params, Schedule, one_kernel, workgroup_threads
from .nest import extents, parallel_nest, trip_count

_TF32_OPERANDS = ("f32", "f16", "bf16")   # widen exactly to f32, then round to TF32
GROUP_M = 8             # tile rows visited together by the pipelined tensor-core schedule
MIN_SIDE = 16           # M or N below this wastes most of a tile: the thread schedule does better
# tensor-core block tiles of the pipelined schedule: (BM, BN, TM, TN), a warp per TM x TN
MMA_TILES = ((128, 128, 64, 64), (128, 256, 64, 64), (256, 128, 64, 64), (128, 128, 64, 32),
             (64, 128, 32, 32), (64, 64, 32, 32), (64, 256, 32, 64), (64, 128, 32, 64))
# a convolution's few filters (M <= 64) against many pixels: a 64 x 256 tile of 8 warps of
# 32 x 64, 32-deep slices in 3 stages (H100, ResNet block in TF32, bench_cuda --conv-sweep:
# 0.139 ms, where 64 x 128 in warps of 32 x 32, two blocks an SM at 128 registers a thread,
# took 0.157 ms; 64 x 256 takes 224 registers, one block)
CONV_TILE = dict(bm=64, bn=256, bk=32, tm=32, tn=64, stages=3)
# and on the FP32 units (exact f32): 64 x 256 in 8 x 8 per thread, 8-deep slices (H200, ResNet
# block, bench_cuda --conv-sweep: 0.229 ms against cuDNN's 0.275; the 64 x 128 tile of 4 x 8
# per thread that the sizes alone pick took 0.292)
CONV_FMA_TILE = dict(bm=64, bn=256, bk=8, tm=8, tn=8)
# warpgroup-MMA block tiles (sm_90a): (BM, BN, TN), a warpgroup per 64 x TN
WGMMA_TILES = ((128, 256, 256), (128, 128, 128), (256, 128, 128), (128, 256, 128), (64, 256, 256))
# the same fed by the copy engine (schedules/gemm_tma.py), with their ring's stages: (BM, BN,
# TN, stages), best first (H100, bench_cuda --gemm-sweep: 4096^3 f16 0.224 ms for the first
# two, 0.239 for the fourth)
TMA_TILES = ((128, 256, 256, 3), (128, 192, 192, 4), (128, 128, 128, 4), (128, 256, 256, 4),
             (64, 256, 256, 4), (128, 128, 128, 3), (128, 256, 256, 2))
# and two warpgroups taking whole BM x BN tiles in turn (ping-pong): (BM, BN, stages)
PINGPONG_TILES = ((128, 128, 4), (128, 128, 3), (64, 256, 4), (64, 256, 3), (64, 192, 4), (64, 128, 4))
# FMA tiles are k-major, their rows padded by this many elements where the memory allows
# (16 bytes of f32: the 4-wide reads stay aligned): a side read along K is stored
# transposed, consecutive threads writing consecutive k of one row, whose stores then fall
# in distinct banks; both sides padded alike, the two tiles' reads share their offsets
# (WebGPU on an H200, matmul 4096: 4.05 ms against 4.20 unpadded, 4.22 with one side padded)
FMA_PAD = 4
# FMA block tiles, best first: (BM, BN, TM, TN); threads = (BM / TM) (BN / TN)
FMA_TILES = ((128, 128, 8, 8), (128, 64, 8, 4), (64, 128, 4, 8), (64, 64, 4, 4),
             (64, 64, 8, 8), (32, 32, 4, 4), (16, 16, 4, 4), (64, 256, 8, 8))
_FMA_SUMS = max(tm * tn for _bm, _bn, tm, tn in FMA_TILES)     # a thread's sums, at most
# where a target's threads hold 128 sums (Target.fma_sums) and a launch has many tiles: 8 x 16
# a thread in 4-deep slices (WebGPU on an H200, matmul 4096: 3.49 ms against 4.13 for 128 x
# 128 x 8; 256 x 128 at 16 x 8: 3.78; 8-deep slices of either: 3.98 to 4.16)
WIDE_FMA_TILES = ((128, 256, 8, 16), (256, 128, 16, 8))
WIDE_FMA_BK = 4


@dataclass(frozen=True)
class GemmParams(Params):
    bm: int = 128           # block tile rows (M)
    bn: int = 128           # block tile columns (N)
    bk: int = 8             # depth of a K slice
    tm: int = 8             # rows per thread (FMA) or per warp (tensor cores)
    tn: int = 8             # columns per thread (FMA) or per warp (tensor cores)
    width: int = 4          # elements per vector load of an operand (1: element by element)
    mma: bool = False       # tensor cores: m16n8k16 (TF32: m16n8k8) steps of a warp
    stages: int = 0         # tensor cores: a ring of this many shared buffers filled by
                            # cp.async (0: two buffers staged through registers)
    swizzle: bool = False   # tensor cores: XOR-swizzled operand tiles instead of padded rows
    wgmma: bool = False     # tensor cores: warpgroup MMAs (sm_90a) from the shared tiles, a
                            # warpgroup per 64 x TN, 64-deep slices (schedules/gemm_wgmma.py)
    tma: bool = False       # warpgroup MMAs fed by the tensor memory accelerator from a
                            # producer warpgroup of its own (schedules/gemm_tma.py)
    pingpong: bool = False  # with tma: two warpgroups, each multiplying whole tiles of its
                            # own in turn, one's epilogue running while the other multiplies
                            # (a tile 64 or 128 rows: one or two m64 steps a slice step)
    terms: int = 0          # with wgmma: f32 operands as TF32 warpgroup MMAs, 1 product a step
                            # (TF32, where allowed) or 3 (exact: each operand's big and small
                            # TF32 halves, sums taken over by the FP32 units every slice;
                            # schedules/gemm_split.py)
    pad: int = FMA_PAD      # FMA: elements padding a row of the shared tiles

    def describe(self) -> str:      # (names these only where not the default: earlier keys stand)
        return super().describe().replace(", pingpong=False", "").replace(", terms=0", "") \
            .replace(f", pad={FMA_PAD}", "")

    @property
    def threads(self) -> int:
        groups = 2 if self.pingpong else (self.bm // self.tm) * (self.bn // self.tn)
        return groups * (128 if self.wgmma else 32 if self.mma else 1) + (128 if self.tma else 0)

    def tile_rows(self, side: str, in_bytes: int, kcontig: bool) -> tuple:
        """(rows, elements a row) of a tensor-core operand tile of side "m" or "n": rows of
        the side's X along K (kcontig) or rows of K along X, padded by 16 bytes (32 where
        TF32 fragments read a tile along X) unless swizzled."""
        bx = self.bm if side == "m" else self.bn
        pad = 0 if self.swizzle else (16 // in_bytes if kcontig else 8)
        return (bx, self.bk + pad) if kcontig else (self.bk, bx + pad)

    def shared_bytes(self, in_bytes, acc_bytes: int, kcontig=(True, False)) -> int:
        """Bytes of the shared tiles; `in_bytes`: of a tensor-core tile's element, or a pair
        (M side, N side) where the two differ."""
        if self.terms:
            from .gemm_split import split_shared_bytes
            return split_shared_bytes(self, kcontig)
        if self.mma:
            ibs = in_bytes if isinstance(in_bytes, tuple) else (in_bytes, in_bytes)
            per = sum(ib * r * w for ib, (r, w) in zip(ibs, (
                self.tile_rows(s, ib, kc) for s, ib, kc in zip("mn", ibs, kcontig))))
            return max(2, self.stages) * per
        return 2 * acc_bytes * self.bk * (self.bm + self.bn + 2 * self.pad)

    def valid(self) -> bool:
        if self.pingpong and not (self.tma and self.bm in (self.tm, 2 * self.tm) and self.bn == self.tn):
            return False        # a ping-pong warpgroup holds its whole tile
        if self.terms:          # 32-deep slices of f32: one 128-byte swizzled row
            from .gemm_split import SPLIT_N
            return self.terms in (1, 3) and self.wgmma and self.mma and self.swizzle and not self.tma and self.bk == 32 \
                and self.width == 4 and self.stages >= 2 and self.bm % self.tm == 0 and \
                self.bn % self.tn == 0 and {self.tm, self.tn} <= {64} | set(SPLIT_N) and \
                64 in (self.tm, self.tn)
        if self.bm % self.tm or self.bn % self.tn or min(self.bm, self.bn, self.bk) < 1:
            return False
        if self.wgmma:      # a 64-deep slice of 16-bit elements: one 128-byte swizzled row
            # fed by the copy engine: one or two warpgroups multiply (with four, their
            # setmaxnreg never returned on an H100)
            return self.mma and self.swizzle and self.bk == 64 and self.tm == 64 and \
                self.tn in ir.WGMMA_N and self.width == 8 and self.stages >= (2 if self.tma else 3) \
                and (not self.tma or self.threads <= 384)
        if self.tma:        # the copy engine feeds warpgroup MMAs only
            return False
        if self.mma:
            pow2 = all(v & (v - 1) == 0 for v in (self.bm, self.bn, self.bk))
            return self.tm % 16 == 0 and self.tn % 8 == 0 and self.bk % 16 == 0 and \
                self.width in (1, 4, 8) and self.stages in (0, 2, 3, 4) and \
                (pow2 or not self.swizzle) and (self.width > 1 or not self.stages)
        return self.tm % 4 == 0 and self.tn % 4 == 0 and self.width in (1, 2, 4) and \
            self.bk % self.width == 0 and self.bm % self.width == 0 and self.bn % self.width == 0 \
            and not self.stages and not self.swizzle


@dataclass(frozen=True)
class _Side:
    load: cir.Load
    vars: tuple             # the output variables only this operand reads, in loop order
    cond: object            # the accumulation's guard where it reads this side's variables
    kcontig: bool           # consecutive elements in memory run along K


@dataclass(frozen=True)
class _Form:
    c: object               # the recognised Contraction
    m: _Side
    n: _Side
    nest: object            # the kernel's parallel nest (its prologue runs first)
    acc: str                # the dtype sums are made in
    dtypes: tuple           # of the M and N operands


def _tf32(dtypes: tuple) -> bool:
    """Whether tensor cores take operands of these dtypes as TF32: f32, or a mix of f32, f16
    and bf16 (each widened to f32, exactly, then rounded as f32 is); two operands of one
    half type are multiplied as they are."""
    return all(d in _TF32_OPERANDS for d in dtypes) and \
        (dtypes[0] != dtypes[1] or dtypes[0] == "f32")


def _tile_dtypes(p: GemmParams, dtypes: tuple) -> tuple:
    """The element types of the (M, N) tensor-core tiles: each operand's own (cp.async copies
    it as it is; a TF32 fragment load widens a half), but f32 where TF32 operands are staged
    through registers (where a half widens)."""
    if p.mma and _tf32(dtypes) and not p.stages:
        return ("f32", "f32")
    return dtypes


def _side_width(p: GemmParams, dtype: str, tf32: bool) -> int:
    """Elements of `dtype` a vector load of an operand reads: `width`, counted in 4-byte
    elements for TF32 (a 16-byte load is 4 f32 or 8 f16)."""
    return p.width * 4 // _BYTES[dtype] if tf32 and p.width > 1 else p.width


def _zero(dtype: str) -> ir.Expr:
    """0 of `dtype` (a half is a converted f32 literal: C has no half literals)."""
    return ir.Cast(lit(0, "f32"), dtype) if dtype in ("f16", "bf16") else lit(0, dtype)


_NAN = "_nan"       # whether one of a thread's guarded sums is NaN (_Builder.stored)


def _gathered(form: _Form) -> bool:
    """Whether the contraction reads an operand gathered (a convolution's input: several
    reduction loops, or a guard)."""
    return len(form.c.rloops) > 1 or form.c.cond is not None


def _kcontig(load: cir.Load, vars_) -> bool:
    return not load.index or not (free_vars(load.index[-1]) & set(vars_))


def match(kernel: cir.Kernel, sizes: dict, symbolic: bool = False):
    """(_Form, None) for a contraction this schedule takes, else (None, why not)."""
    c = contraction(kernel)
    if not c:
        return None, c.reason
    nest = parallel_nest(kernel.body, sizes, symbolic)
    if [lp.var for lp in nest.loops] != list(c.out_vars):
        return None, "the contraction's loops are not the kernel's parallel nest"
    if any(trip_count(lp, sizes, symbolic) is None for lp in c.rloops):
        return None, "a reduction loop's count is not known at launch"
    sides = [[c.a_load, c.mvars, None], [c.b_load, c.nvars, None]]
    if c.cond is not None:
        # the guard zeroes the elements of the side whose variables it reads (of both where
        # it reads neither's: a product skipped is then 0 * 0, whatever the other holds)
        cv = free_vars(c.cond) & set(c.out_vars)
        guarded = [s for s in sides if cv <= set(s[1]) | set(c.bvars)]
        if not guarded:
            return None, "the accumulation's condition reads both operands' output variables"
        for side in guarded:
            side[2] = c.cond
    m, n = (_Side(ld, vs, cond, _kcontig(ld, vs)) for ld, vs, cond in sides)
    if free_vars(c.store.index[-1]) & set(m.vars):
        m, n = n, m
    bufs = {b.name: b for b in kernel.inputs}
    dtypes = (bufs[m.load.buffer].dtype, bufs[n.load.buffer].dtype)
    acc = next(s for s in cir.walk(kernel.body) if isinstance(s, cir.Let) and s.name == c.acc)
    wide = "f64" in dtypes + (acc.declared_ty.dtype,)
    return _Form(c, m, n, nest, "f64" if wide else "f32", dtypes), None


def _vector_ok(kernel, form: _Form, side: _Side, sizes: dict, width: int) -> bool:
    """Whether `width` consecutive elements of the side's contiguous axis are consecutive,
    aligned addresses that are all in or all out of bounds (sizes baked in). The axis may
    be several loops whose variables are the load's trailing indices in order, each inner
    one spanning its whole dimension (a convolution's filter read along ic, kh, kw: one
    contiguous K)."""
    if width == 1:
        return True
    if side.cond is not None:
        return False
    buf = next(b for b in kernel.inputs if b.name == side.load.buffer)
    if buf.dtype not in ir.FLOAT_DTYPES or len(side.load.index) != len(buf.shape):
        return False
    if side.kcontig:
        loops = list(form.c.rloops)
    else:
        loops = [lp for lp in form.c.ploops if lp.var in side.vars]
    n = len(loops)
    if not 0 < n <= len(buf.shape):
        return False
    trailing, names = side.load.index[-n:], {lp.var for lp in loops}
    if not all(isinstance(i, cir.Var) and i.name == lp.var for i, lp in zip(trailing, loops)) or \
            any(names & free_vars(i) for i in side.load.index[:-n]):
        return False
    if not counts_from_zero(loops):
        return False
    dims = [cir.eval_dim(d, sizes) for d in buf.shape[-n:]]
    counts = [trip_count(lp, sizes) for lp in loops]
    return dims[1:] == counts[1:] and prod(counts) % width == 0 and prod(dims) % width == 0


def _staged_ok(kernel, form: _Form, sizes: dict) -> bool:
    """Whether the store is `out[batch.., m.., n..] = v` over C's own layout: the output's
    indices are the batch, M and N variables in that order, each dimension its loop's trip
    count, so row gm of batch bz starts at (bz M + gm) N and a row's elements are
    consecutive, and a row is whole 16-byte vectors."""
    c, st = form.c, form.c.store
    order = list(c.bvars) + list(form.m.vars) + list(form.n.vars)
    if not isinstance(st, cir.Store) or len(st.index) != len(order) or \
            any(not isinstance(i, cir.Var) or i.name != v for i, v in zip(st.index, order)):
        return False
    loops = {lp.var: lp for lp in c.ploops}
    if not counts_from_zero(loops[v] for v in order):
        return False
    dims = [cir.eval_dim(d, sizes) for d in kernel.output.shape]
    width = 16 // _BYTES[kernel.output.dtype]
    return dims == [trip_count(loops[v], sizes) for v in order] and dims[-1] * prod(
        dims[len(order) - len(form.n.vars):-1]) % width == 0


def _to_shared(st, ident: str, at: ir.Expr):
    """The lowered store `st`, and those under it, into `_shc` at `at` where they write C
    (`ident`): the staged tile's place is in range by construction."""
    if isinstance(st, ir.Store) and st.array == ident:
        return ir.Store("_shc", at, st.value, None, st.line)
    if isinstance(st, ir.If):
        return dataclasses.replace(st, then=tuple(_to_shared(x, ident, at) for x in st.then),
                                   orelse=tuple(_to_shared(x, ident, at) for x in st.orelse))
    return st


def _batch(form: _Form, sizes: dict) -> int:
    return prod(trip_count(lp, sizes) for lp in form.c.ploops if lp.var in form.c.bvars)


def _side_sizes(form: _Form, sizes: dict):
    """(M, N, K) at these sizes."""
    ext = {lp.var: trip_count(lp, sizes) for lp in form.c.ploops}
    return (prod(ext[v] for v in form.m.vars), prod(ext[v] for v in form.n.vars),
            prod(trip_count(lp, sizes) for lp in form.c.rloops))


def why_not_contraction(kernel, target, sizes, tile: str = "tile"):
    """(form, None) for a contraction in the target's types whose sides are MIN_SIDE or
    more, else (None, why not); a side under it leaves most of a `tile` idle."""
    if kernel.kernel_type.kind == "reduce":
        return None, "a reduce kernel"
    form, why = match(kernel, sizes, target.symbolic_sizes)
    if form is None:
        return None, why
    for dt in set(form.dtypes) | {form.acc}:
        if not target.has(dt):
            return None, f"{dt} is not a type of the {target.name} target"
    if not target.symbolic_sizes:
        M, N, K = _side_sizes(form, sizes)
        if min(M, N) < MIN_SIDE:
            return None, f"M={M}, N={N}: a side under {MIN_SIDE} leaves most of a {tile} idle"
        if K == 0:
            return None, "K=0: no product to sum, only zeros to store"
    return form, None


class Gemm(Schedule):
    name = "gemm"

    def why_not(self, kernel, target, sizes):
        form, why = why_not_contraction(kernel, target, sizes)
        if form is None:
            return why
        if self._auto(kernel, target, sizes, form) is None:
            return "no tile fits the target's threads and shared memory"
        return None

    # ---- parameters -------------------------------------------------------------------

    def _fits(self, p: GemmParams, target, form: _Form) -> bool:
        ib = tuple(_BYTES[d] for d in _tile_dtypes(p, form.dtypes)) if p.mma else \
            max(_BYTES[d] for d in form.dtypes)
        # a GPU thread's register tile (FMA: tm x tn sums, bk deep, written out by the
        # printers) no larger than the automatic tiles' (8 x 8, 16 deep): a hint of 16 x 16 x
        # 16 took minutes to compile on Mesa's llvmpipe and spills on a GPU (a CPU's one
        # thread a block holds larger tiles)
        sums = target.fma_sums if _BYTES[form.acc] <= 4 else _FMA_SUMS
        if target.max_threads > 1 and not p.mma and \
                (p.tm * p.tn > sums or p.tm * p.tn * p.bk > _FMA_SUMS * 16):
            return False
        return p.valid() and p.threads <= target.max_threads and \
            p.shared_bytes(ib, _BYTES[form.acc], (form.m.kcontig, form.n.kcontig)) + \
            (1024 if p.wgmma else 0) + (16 * p.stages if p.tma else 0) <= target.shared_bytes and \
            (not p.tma or target.bulk_copy) and (not p.mma or (target.warp == 32 and "mma.sync" in target.tensor_cores)) and \
            (not p.stages or target.async_copy) and (not p.wgmma or self._wgmma_ok(target, form, p))

    @staticmethod
    def _wgmma_ok(target, form: _Form, p: GemmParams) -> bool:
        """Warpgroup MMAs: sm_90a (not later architectures, which lack them), f16 or bf16
        operands of one type, f32 sums; as TF32 (`terms`): f32 operands, one of them along K,
        the other side's warpgroup extent 64 (gemm_split)."""
        if target.arch != "sm_90" or "wgmma" not in target.tensor_cores or form.acc != "f32":
            return False
        if p.terms:
            from .gemm_split import split_sides
            sides = split_sides(form)
            return sides is not None and form.dtypes == ("f32", "f32") and \
                (p.tm if sides[0] == "m" else p.tn) == 64
        return form.dtypes[0] == form.dtypes[1] and form.dtypes[0] in ("f16", "bf16")

    @staticmethod
    def _tma_ok(kernel, target, form: _Form, sizes) -> bool:
        """Whether the copy engine can bring both operands (gemm_tma.tma_layout)."""
        if not target.bulk_copy or target.symbolic_sizes:
            return False
        from .gemm_tma import tma_layout
        return all(tma_layout(kernel, form, s, sizes) for s in (form.m, form.n))

    @staticmethod
    def _in_waves(p: GemmParams, target, M: int, N: int, batch: int) -> GemmParams:
        """A warpgroup tile 192 wide instead of 256 where its tiles fill the multiprocessors'
        last wave better: a wave takes about as long as a tile is wide, so the estimate is
        waves x width, and 192 must save a tenth, or tie (its ring then has a fourth stage).
        H100, bench_cuda --gemm-sweep, f16, M = 4096: N = 768 gives 96 tiles of 256, 3/4 of
        a wave, or 128 of 192 (0.035 -> 0.023 ms); N = 2304, 288 tiles in 3 waves or 384
        (0.055 -> 0.051); N = 3072 ties (0.053 -> 0.048); 4096^3 and 8192^3 keep 256."""
        if not target.multiprocessors or p.bn != 256 or p.tn != 256:
            return p
        def cost(bn):
            tiles = -(-M // p.bm) * -(-N // bn) * batch
            return -(-tiles // target.multiprocessors) * bn
        if cost(192) >= 0.9 * cost(256) and cost(192) != cost(256):
            return p
        q = dataclasses.replace(p, bn=192, tn=192, stages=max(p.stages, 4) if p.tma else p.stages)
        return q if q.valid() else p

    def _width(self, target, form: _Form) -> int:
        """The widest vector load of the FMA tiles (4 at most: the shared tiles are read
        4 wide)."""
        ib = max(_BYTES[d] for d in form.dtypes)
        return max(1, min(4, target.vector_bytes // ib)) if not target.symbolic_sizes else 1

    def _mma_kind(self, kernel, target, sizes, form: _Form):
        """"half" (f16/bf16 operands of one type in 16-byte loads, or a gathered operand
        element by element through registers), "tf32" (f32 operands, or
        any mix of f32, f16 and bf16, where the program allows TF32: `config { allow_tf32:
        true }`) or None: no tensor cores."""
        if target.symbolic_sizes or "mma.sync" not in target.tensor_cores or form.acc != "f32":
            return None
        if form.dtypes[0] == form.dtypes[1] and form.dtypes[0] in ("f16", "bf16") and \
                target.vector_bytes >= 16 and (_gathered(form) or
                                               all(_vector_ok(kernel, form, s, sizes, 8) for s in (form.m, form.n))):
            return "half"
        if _tf32(form.dtypes) and getattr(kernel.schedule, "allow_tf32", None):
            return "tf32"
        return None

    def _vectors(self, kernel, form: _Form, sizes, width: int, kind: str) -> list:
        """Whether each operand (M, N) is read in 16-byte loads (`width` elements; for TF32
        as many of each operand's own type, _side_width)."""
        p = GemmParams(width=width, mma=True)
        return [_vector_ok(kernel, form, s, sizes, _side_width(p, d, kind == "tf32"))
                for s, d in zip((form.m, form.n), form.dtypes)]

    def _copies(self, kernel, target, form: _Form, sizes, width: int, kind: str) -> bool:
        """Whether both operands reach shared memory by cp.async: in 16-byte copies, or, in a
        gathered contraction, a 4-byte element a copy (a convolution's f32 input, the copy's
        zero fill its bounds and padding guard)."""
        return target.async_copy and all(v or (_BYTES[d] == 4 and _gathered(form)) for v, d in zip(
            self._vectors(kernel, form, sizes, width, kind), form.dtypes))

    def _mma_firsts(self, kernel, target, sizes, form: _Form, kind: str, M: int, N: int,
                    wgmma: bool = True):
        """Tensor-core parameters to try first: the architecture's warpgroup-MMA configuration
        (half operands, where `wgmma`; a smaller tile along a short side), its tuned mma.sync
        one (configs.gemm_config), halved along a side of 64 or less, then the two-buffer one."""
        width = 8 if kind == "half" else 4
        async_ok = self._copies(kernel, target, form, sizes, width, kind)
        out = []
        wconf = configs.gemm_config(target, "wgmma") if kind == "half" and wgmma else None
        tma = self._tma_ok(kernel, target, form, sizes)
        for conf in ([configs.gemm_config(target, "tma")] if tma else []) + [wconf]:
            if conf is not None and wconf is not None and async_ok:     # warpgroup MMAs (sm_90a)
                p = GemmParams(width=width, mma=True, **conf)
                if M <= 64:
                    p = dataclasses.replace(p, bm=64)
                if N <= 128:
                    p = dataclasses.replace(p, bn=128 if N > 64 else 64, tn=128 if N > 64 else 64)
                out.append(self._in_waves(p, target, M, N, _batch(form, sizes)))
        conf = configs.gemm_config(target, kind)
        if conf is not None and async_ok:
            p = GemmParams(width=width, mma=True, **conf)
            if M <= 64:
                p = dataclasses.replace(p, bm=64, tm=min(p.tm, 32))
                if _gathered(form) and N > 64:      # a convolution's few filters: CONV_TILE
                    p = dataclasses.replace(p, **CONV_TILE)
            if N <= 64:
                p = dataclasses.replace(p, bn=64, tn=min(p.tn, 32))
            out.append(p)
        bm, bn = (128 if M > 64 else 64), (128 if N > 64 else 64)
        if kind == "half" and _gathered(form) and M <= 64 and N > 128:
            bn = 256        # a convolution's few filters, CONV_TILE's shape without its copies
            # (H200, ResNet block f16, bench_cuda --conv-sweep: 0.087 ms against 0.092 for 64 x 128)
        out.append(GemmParams(bm, bn, 32 if kind == "half" else 16, bm // 2, bn // 4,
                              width if kind == "half" or async_ok else 1, True))
        return out

    def _split_tiles(self, kernel, target, sizes, form: _Form, terms: int = 3) -> list:
        """f32 on TF32 warpgroup MMAs (gemm_split; `terms` 3: exact, 1: TF32), best first,
        where both operands come by cp.async (16-byte copies, or a gathered operand's 4-byte
        ones) and one runs along K."""
        from .gemm_split import SPLIT_TILES, oriented, split_sides
        if target.symbolic_sizes or form.dtypes != ("f32", "f32") or split_sides(form) is None \
                or "wgmma" not in target.tensor_cores or \
                not self._copies(kernel, target, form, sizes, 4, "tf32"):
            return []
        return [oriented(form, *t, terms) for t in SPLIT_TILES]

    def _auto(self, kernel, target, sizes, form: _Form, fma_only: bool = False, wgmma: bool = True):
        """The parameters chosen by sizes and target, or None where no tile fits."""
        sym = target.symbolic_sizes
        M, N, K = _side_sizes(form, sizes) if not sym else (1 << 20,) * 3
        kind = None if fma_only else self._mma_kind(kernel, target, sizes, form)
        if kind:
            firsts = self._mma_firsts(kernel, target, sizes, form, kind, M, N, wgmma)
            if kind == "tf32" and wgmma and _gathered(form) and M <= 64 and \
                    self._split_tiles(kernel, target, sizes, form, 1):
                # a convolution's few filters in TF32: one warpgroup-MMA product a step
                # (H200, ResNet block, bench_cuda --conv-sweep: 0.109 ms against 0.138 on
                # mma.sync; cuDNN 0.103)
                from .gemm_split import SPLIT_CONV_TILE, oriented
                firsts.insert(0, oriented(form, *SPLIT_CONV_TILE, terms=1))
            for p in firsts:
                if self._fits(p, target, form):
                    return p
        elif not fma_only and wgmma and min(M, N) >= 64:   # (smaller: the FMA tiles waste less)
            from .gemm_split import SPLIT_CONV_TILE, oriented
            tiles = self._split_tiles(kernel, target, sizes, form)[:1]
            if tiles and _gathered(form) and M <= 64:       # a convolution's few filters
                tiles = [oriented(form, *SPLIT_CONV_TILE)]
            for p in tiles:
                if self._fits(p, target, form):
                    return p
        if target.max_threads == 1:         # one thread a block holds the block's tile
            p = GemmParams(16, 16, 16, 16, 16, 1)
            return p if self._fits(p, target, form) else None
        w = self._width(target, form)
        vec = any(_vector_ok(kernel, form, s, sizes, w) for s in (form.m, form.n)) if not sym else False
        bm, bn = (128 if M > 64 else 64), (128 if N > 64 else 64)
        tm, tn = (8 if bm == 128 else 4), (8 if bn == 128 else 4)
        # 8-deep slices keep the 128x128 tile within 128 registers a thread; a 64-wide side
        # needs 16-deep slices to give every thread whole vectors to load
        bk = 8 if (bm == 128 and bn == 128) or not vec or K < 64 else 16
        first = GemmParams(bm, bn, bk, tm, tn, w)
        if self._wide(target, form, M, N, K):
            first = GemmParams(*WIDE_FMA_TILES[0][:2], WIDE_FMA_BK, *WIDE_FMA_TILES[0][2:], w)
        if _gathered(form) and M <= 64 and N > 128:      # a convolution's few filters (before
            first = GemmParams(**CONV_FMA_TILE, width=w)    # Hopper: SPLIT_CONV_TILE)
        for p in [first] + [GemmParams(a, b, 8, c, d, w) for a, b, c, d in FMA_TILES]:
            for q in (p, dataclasses.replace(p, width=1)):
                for r in (q, dataclasses.replace(q, pad=0)):
                    if self._fits(r, target, form):
                        return r
        return None

    @staticmethod
    def _wide(target, form: _Form, M: int, N: int, K: int) -> bool:
        """Whether the automatic FMA tile is the wide one: a launch's sizes known, whole
        tiles and slices (no bounds tests: with them the wide tile ran at 5.31 ms), 4-byte
        sums, threads that hold 128 of them, and at least 256 tiles (two for each
        multiprocessor of the largest GPUs; fewer, and 128 x 128 tiles keep more of them busy)."""
        bm, bn = WIDE_FMA_TILES[0][:2]
        return not target.symbolic_sizes and target.max_threads >= 256 and \
            target.fma_sums >= 128 and _BYTES[form.acc] <= 4 and \
            M % bm == 0 and N % bn == 0 and K % WIDE_FMA_BK == 0 and (M // bm) * (N // bn) >= 256

    def wants_launch_sizes(self, kernel, target, sizes):
        form, _ = match(kernel, sizes, target.symbolic_sizes)
        if form is None or self._mma_kind(kernel, target, sizes, form):
            return False
        return self._wide(target, form, *_side_sizes(form, sizes))

    def default(self, kernel, target, sizes):
        """The automatic choice; `@tile(bm=, bn=, bk=, tm=, tn=)` sets those fields and a
        `@workgroup` of a tile's thread count picks that tile, where they fit (`@shared` is
        not read: a tile's memory follows from the tile)."""
        form, _ = match(kernel, sizes, target.symbolic_sizes)
        auto = self._auto(kernel, target, sizes, form)
        hint = {k: int(v) for k, v in kernel.schedule.tile if k in ("bm", "bn", "bk", "tm", "tn")}
        wg = workgroup_threads(kernel)
        if not hint and wg > 1 and not auto.mma and wg != auto.threads:
            hinted = [GemmParams(a, b, auto.bk, c, d, auto.width, pad=pad)
                      for a, b, c, d in FMA_TILES if (a // c) * (b // d) == wg
                      for pad in (FMA_PAD, 0)]
            return next((p for p in hinted if self._fits(p, target, form)), auto)
        # a warpgroup tile takes a hint's bm and bn (TN at most BN); one it cannot take goes
        # to the warp tiles of mma.sync
        bases = [auto] + ([self._auto(kernel, target, sizes, form, wgmma=False)] if auto.wgmma else [])
        for base in bases if hint else ():
            p = dataclasses.replace(base, **hint)
            if base.wgmma and "tn" not in hint:
                p = dataclasses.replace(p, tn=min(base.tn, p.bn))
            if self._fits(p, target, form):
                return p
        return auto

    def space(self, kernel, target, sizes):
        form, _ = match(kernel, sizes, target.symbolic_sizes)
        first = self.default(kernel, target, sizes)
        out = [first]
        cands = [GemmParams(a, b, bk, c, d, w, pad=pad) for a, b, c, d in FMA_TILES + WIDE_FMA_TILES
                 for bk in ((WIDE_FMA_BK, 8) if c * d > _FMA_SUMS else (8, 16))
                 for w in sorted({1, self._width(target, form)}) for pad in (FMA_PAD, 0)]
        kind = self._mma_kind(kernel, target, sizes, form)
        if kind:
            w = 8 if kind == "half" else 4
            copies = self._copies(kernel, target, form, sizes, w, kind)
            w = w if copies or kind == "half" or all(self._vectors(kernel, form, sizes, w, kind)) else 1
            piped = [GemmParams(a, b, bk, c, d, w, True, st, sw) for sw in (True, False)
                     for bk in (32, 16) for a, b, c, d in MMA_TILES for st in (3, 4, 2)] if copies else []
            staged = [GemmParams(a, b, bk, a // 2, b // 4, w, True) for a in (64, 128)
                      for b in (64, 128) for bk in (16, 32)]
            if _gathered(form):     # few filters, many pixels (CONV_TILE's shape)
                staged += [GemmParams(64, 256, bk, 32, 64, w, True) for bk in (32, 16)]
            fed = [GemmParams(a, b, 64, 64, tn, w, True, st, True, True, True) for a, b, tn, st in TMA_TILES] + \
                [GemmParams(a, b, 64, 64, b, w, True, st, True, True, True, True) for a, b, st in PINGPONG_TILES] \
                if self._tma_ok(kernel, target, form, sizes) else []
            warpgroups = fed + [GemmParams(a, b, 64, 64, tn, w, True, st, True, True)
                                for a, b, tn in WGMMA_TILES for st in (4, 3, 5, 6)] \
                if kind == "half" and copies else []
            # (TF32 on warpgroup MMAs, one product a slice step, is slower than mma.sync at
            # 4096^3 on an H200: 1.04 ms against 0.92; a candidate still)
            cands = warpgroups + piped + staged + self._split_tiles(kernel, target, sizes, form, 1) + cands
        else:
            cands = self._split_tiles(kernel, target, sizes, form) + cands
        for p in cands:
            if p not in out and self._fits(p, target, form):
                out.append(p)
        return out

    # ---- the program ------------------------------------------------------------------

    def build(self, kernel, target, sizes, params: GemmParams) -> ir.Program:
        """The program; with vector loads also its `fallback` without them (for buffers
        whose base is not aligned), error sites numbered with the program's."""
        if not params.valid():
            raise ValueError(f"GEMM parameters that do not tile: {params.describe()}")
        sites = errflag.ErrorSites()
        if params.tma:
            from .gemm_tma import TmaBuilder
            b = TmaBuilder(kernel, target, sizes, params, sites)
        elif params.terms:
            from .gemm_split import SplitBuilder
            b = SplitBuilder(kernel, target, sizes, params, sites)
        elif params.wgmma:
            from .gemm_wgmma import WgmmaBuilder
            b = WgmmaBuilder(kernel, target, sizes, params, sites)
        else:
            b = _Builder(kernel, target, sizes, params, sites)
        prog = b.program()
        vector = [s for s in ("m", "n") if b.W[s] > 1]
        if vector or b.staged:
            prog.aligned = tuple(sorted({user_name(getattr(b.f, s).load.buffer) for s in vector} |
                                        ({user_name(b.f.c.store.buffer)} if b.staged else set())))
            plain = self._auto(kernel, dataclasses.replace(target, vector_bytes=0), sizes,
                               b.f, fma_only=True)
            prog.fallback = _Builder(kernel, target, sizes, plain, sites, "_w1").program()
        prog.sites = sites.as_tuple()
        return prog


class _Builder(Builder):
    again = False       # while building the sums' second stores (see `stored`)
    def __init__(self, kernel, target, sizes, params: GemmParams, sites, suffix: str = ""):
        self.begin(kernel, target, sizes, params, sites, suffix)
        self.tf32 = params.mma and _tf32(self.f.dtypes)
        # a tensor-core tile's element type and bytes, by side (_tile_dtypes)
        self.tile_dt = dict(zip("mn", _tile_dtypes(params, self.f.dtypes)))
        self.ibs = {s: _BYTES[self.tile_dt[s]] for s in ("m", "n")}
        self.korder = self.k_order()
        self.W = self.widths()
        if self.korder and params.stages and any(self.W[s] * self.ibs[s] < 16 and self.ibs[s] != 4
                                                 for s in ("m", "n")):
            self.korder = None          # a side would lose its 16-byte copies to a 2-byte one
            self.W = self.widths()
        if params.mma and not self.tf32 and min(self.W.values()) < 8 and \
                (params.stages or not _gathered(self.f)):
            raise ValueError("half-precision tensor-core tiles need both operands in 16-byte loads "
                             "(a gathered one is staged through registers)")
        if params.stages and any(self.W[s] * self.ibs[s] < 16 and not (self.W[s] == 1 and self.ibs[s] == 4)
                                 for s in ("m", "n")):
            raise ValueError("cp.async stages need each operand in 16-byte loads or 4-byte elements")
        # C through a shared tile of rows padded by 16 bytes (a fragment's 8 rows then fall in
        # distinct banks), where it fits the block's shared memory (module doc)
        ob = _BYTES[kernel.output.dtype]
        self.ldc = params.bn + 16 // ob
        M, N, _ = _side_sizes(self.f, self.sizes) if not self.sym else (0, 0, 0)
        self.ragged = {"m": self.sym or M % params.bm != 0, "n": self.sym or N % params.bn != 0}
        self.staged = params.mma and not self.sym and target.vector_bytes >= 16 and \
            params.bm * self.ldc * ob + (1024 if params.wgmma else 0) <= target.shared_bytes and \
            _staged_ok(kernel, self.f, self.sizes)

    def begin(self, kernel, target, sizes, params, sites, suffix: str):
        """What every GEMM builder knows first: the contraction, the index dtype, the
        lowering of its scalar code and the dtype sums are made in."""
        self.k, self.t, self.p, self.suffix = kernel, target, params, suffix
        self.sym = target.symbolic_sizes
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.f, _ = match(kernel, self.sizes, self.sym)
        self.idx = "i32" if self.sym else index_dtype(kernel, self.sizes)
        self.low = ScalarLowering(kernel, self.sizes, sites, self.idx, symbolic=self.sym,
                                   target=target)
        self.cd = self.f.acc

    def k_order(self) -> tuple | None:
        """(outer, inner) reduction loops where K is walked with the loops a gathered
        operand's guard reads outermost (a convolution's kh, kw) and the others innermost
        (its input channels), because BK divides the inner ones' extent: a K slice then has
        one value of the outer loops, decomposed once a slice (the padding guard is the same
        for all of a tile row's columns in it), and a column's inner index is the slice's plus
        a constant. The filters, read along (ic, kh, kw), are then gathered too. None: K in
        the loops' order."""
        c, p = self.f.c, self.p
        if self.sym or c.cond is None or (p.wgmma and not p.terms):
            return None
        guarded = free_vars(c.cond)
        outer = [lp for lp in c.rloops if lp.var in guarded]
        inner = [lp for lp in c.rloops if lp.var not in guarded]
        if not outer or not inner or prod(trip_count(lp, self.sizes) for lp in inner) % p.bk:
            return None
        return outer, inner

    def widths(self) -> dict:
        """Elements a load of each side reads: its vector width where _vector_ok (a side
        contiguous along K only with K in the loops' order), else 1."""
        out = {}
        for s, d in zip("mn", self.f.dtypes):
            side = getattr(self.f, s)
            w = _side_width(self.p, d, self.tf32)
            ok = not self.sym and _vector_ok(self.k, self.f, side, self.sizes, w) and \
                not (self.korder and side.kcontig)
            out[s] = w if ok else 1
        return out

    # ---- small helpers ----------------------------------------------------------------

    def op(self, o: str, a, b) -> ir.Expr:
        a = self.i(a) if isinstance(a, int) else a
        b = self.i(b) if isinstance(b, int) else b
        if isinstance(b, ir.Lit) and ((o in ("*", "/") and b.value == 1) or (o in "+-" and b.value == 0)):
            return a
        if isinstance(a, ir.Lit) and ((o == "*" and a.value == 1) or (o == "+" and a.value == 0)):
            return b
        return ir.Bin(o, a, b, "bool" if o in ("<", "<=", "and") else self.idx)

    def axis(self, name: str) -> ir.Expr:
        e = ir.Thread(name)
        return e if self.idx == "i32" else ir.Cast(e, self.idx)

    def name(self, body: list, stem: str, e: ir.Expr) -> ir.Expr:
        """`e` as a local declared in `body` (a literal stays one)."""
        if isinstance(e, (ir.Lit, ir.Ref)):
            return e
        n = self.new(stem)
        body.append(ir.Decl(n, self.idx, e))
        return ir.Ref(n, self.idx)

    def move(self, dst, di, src, si, n: int, dtype: str) -> list:
        """`n` consecutive elements: one vector access where the target has one."""
        if self.t.vector_bytes >= n * _BYTES.get(dtype, 4) and n > 1:
            return [ir.Copy(dst, di, src, si, n, dtype)]
        return [ir.Store(dst, self.op("+", di, w), ir.Load(src, self.op("+", si, w), dtype))
                for w in range(n)]

    def unrolled(self, var: str, n: int, body_of, step: int = 1) -> ir.For:
        v = ir.Ref(var, self.idx)
        return ir.For(var, self.i(0), self.i(n), self.i(step), tuple(body_of(v)), self.idx,
                      unroll=True)

    def extents(self, loops) -> list:
        if self.sym:
            return extents(self.low, loops)
        return [self.i(trip_count(lp, self.sizes)) for lp in loops]

    def decompose(self, flat: ir.Expr, loops, exts) -> list:
        """Bind each CIR loop variable of `loops` from a flat index over them (innermost
        fastest) in the current scope."""
        out, rem = [], flat
        for k in range(len(loops) - 1, -1, -1):
            out += self.bind(loops[k], self.op("%", rem, exts[k]) if k > 0 else rem)
            if k > 0:
                rem = self.name(out, "q", self.op("/", rem, exts[k]))
        return out

    def bind(self, lp, digit: ir.Expr) -> list:
        """CIR loop variable `lp.var` bound to its `digit`-th value in the current scope."""
        low = self.low
        val = self.op("+", low.index(lp.start), self.op("*", digit, low.index(lp.step)))
        return [ir.Decl(low.bind(lp.var, self.idx), self.idx, val, False, lp.line)]

    def slice_digits(self, out: list, k0: ir.Expr):
        """With self.korder: the K slice from k0's outer loop digits and first inner index,
        named in `out` (once a slice), else None."""
        if self.korder is None:
            return None
        n = len(self.korder[0])
        inner = self.i(prod(trip_count(lp, self.sizes) for lp in self.korder[1]))
        first = self.name(out, "ki", self.op("%", k0, inner))
        rem, digits = self.name(out, "ko", self.op("/", k0, inner)), [None] * n
        for k in range(n - 1, -1, -1):
            digits[k] = self.name(out, "kd", self.op("%", rem, self.kext[k]) if k > 0 else rem)
            if k > 0:
                rem = self.name(out, "q", self.op("/", rem, self.kext[k]))
        return digits, first

    def k_binds(self, gk: ir.Expr, k: ir.Expr, sl) -> list:
        """The reduction loops' variables of K index gk = k0 + k bound in the current scope:
        from the slice's digits `sl` (slice_digits) where it has them."""
        if sl is None:
            return self.decompose(gk, self.kloops, self.kext)
        outer, inner = self.korder
        digits, first = sl
        out = self.decompose(self.op("+", first, k), inner, self.kext[len(outer):])
        for lp, d in zip(outer, digits):
            out += self.bind(lp, d)
        return out

    def scoped(self, fn) -> list:
        self.low.scopes.append({})
        try:
            return list(fn())
        finally:
            self.low.scopes.pop()

    # ---- the kernel -------------------------------------------------------------------

    def nest_parts(self) -> tuple:
        """(the prologue's statements, the batch loops, their extents); the M and N sides'
        loops and extents in self.loops and self.exts, K's extents in self.rext."""
        f, c = self.f, self.f.c
        ploops = {lp.var: lp for lp in c.ploops}
        pext = dict(zip(c.out_vars, self.extents(list(c.ploops))))
        self.loops = {s: [ploops[v] for v in getattr(f, s).vars] for s in ("m", "n")}
        self.exts = {s: [pext[v] for v in getattr(f, s).vars] for s in ("m", "n")}
        self.rext = self.extents(list(c.rloops))
        return list(self.low.stmts(f.nest.prologue)), [ploops[v] for v in c.bvars], \
            [pext[v] for v in c.bvars]

    def tile_origin(self, bloops, per_batch, tiles_m, tiles_n, bm: int, bn: int,
                    grouped: bool) -> list:
        """The block's tile `_tile` as its batch element `_bz` and the first row `_m0` and
        column `_n0` of its piece of C; `grouped`: GROUP_M tile rows at a time, column by
        column (L2 reuse)."""
        tile = ir.Ref("_tile", self.idx)
        body = [ir.Decl("_bz", self.idx, self.op("/", tile, per_batch))] if bloops else []
        body.append(ir.Decl("_tb", self.idx, self.op("%", tile, per_batch)))
        tb = ir.Ref("_tb", self.idx)
        if grouped:
            span = self.op("*", tiles_n, GROUP_M)
            first = self.name(body, "gm", self.op("*", self.op("/", tb, span), GROUP_M))
            rows = self.name(body, "gs", ir.Math("min", (self.op("-", tiles_m, first), self.i(GROUP_M)),
                                                 self.idx))
            within = self.name(body, "gi", self.op("%", tb, span))
            tile_m, tile_n = self.op("+", first, self.op("%", within, rows)), self.op("/", within, rows)
        else:
            tile_m, tile_n = self.op("/", tb, tiles_n), self.op("%", tb, tiles_n)
        self.m0, self.n0 = ir.Ref("_m0", self.idx), ir.Ref("_n0", self.idx)
        return body + [ir.Decl("_m0", self.idx, self.op("*", tile_m, bm)),
                       ir.Decl("_n0", self.idx, self.op("*", tile_n, bn))]

    def program(self) -> ir.Program:
        p, c = self.p, self.f.c
        head, bloops, bexts = self.nest_parts()
        self.kloops = list(c.rloops) if self.korder is None else self.korder[0] + self.korder[1]
        self.kext = self.extents(self.kloops)
        raw = {"M": product_expr(self.exts["m"], self.idx), "N": product_expr(self.exts["n"], self.idx),
               "B": product_expr(bexts, self.idx), "K": product_expr(self.rext, self.idx)}
        self.M, self.N, self.K, nb = (self.name(head, "n" + s, raw[s]) for s in "MNKB")
        tiles_m = self.name(head, "tm", self.op("/", self.op("+", self.M, p.bm - 1), p.bm))
        tiles_n = self.name(head, "tn", self.op("/", self.op("+", self.N, p.bn - 1), p.bn))
        per_batch = self.name(head, "tb", self.op("*", tiles_m, tiles_n))
        ntiles = self.name(head, "tiles", self.op("*", per_batch, nb))
        self.tid, self.workers = self.axis("thread"), p.threads
        self.setup(head)
        if self.staged:     # over the operand tiles, which are read by the epilogue's time
            head.append(ir.Array("_shc", self.k.output.dtype, self.c_tiles * p.bm * self.ldc, "shared",
                                 alias=self.c_alias))
        for s in ("m", "n"):
            if self.hoisted(s):
                slots = 1 if self.x_fixed(s) else self.shape[s][1]
                head += [ir.Array(f"_h{s}{j}", self.idx, slots, "local") for j in range(len(self.loops[s]))]
        body = self.tile_origin(bloops, per_batch, tiles_m, tiles_n, p.bm, p.bn, p.stages > 0)

        def tile_body():
            out = self.decompose(ir.Ref("_bz", self.idx), bloops, bexts) + self.hoist()
            zero = self.unrolled("_z", self.acc_count, lambda v: [ir.Store("_acc", v, _zero(self.cd))])
            # an FMA tile's sums zeroed by a loop the shader compiler sees, not written out
            # (WebGPU on an H200, 128 x 256 tiles at 4096: 3.47 ms against 4.66)
            out.append(zero if p.mma else dataclasses.replace(zero, unroll=False))
            out += self.mainloop()
            if self.staged and self.c_alias:    # C is staged over the operand tiles, which
                out.append(self.sync())         # slower warps may still be reading
            return out + self.epilogue() + (self.staged_out() if self.staged else [])
        blocks, stride = self.axis("block"), self.axis("blocks")

        def tile_loop(inner, first=0, every=1):     # the block's tiles first, first + every, ...
            start = self.op("+", blocks, self.op("*", stride, first)) if first else blocks
            step = self.op("*", stride, every) if every > 1 else stride
            return ir.For("_tile", start, ntiles, step, tuple(body + inner), self.idx, c.ploops[0].line)
        head += self.roles(tile_loop, lambda: self.scoped(tile_body))
        host = ir.Math("max", (ir.Math("min", (
            product_expr([ir.ceildiv(raw["M"], p.bm), ir.ceildiv(raw["N"], p.bn), raw["B"]], self.idx),
            lit(self.resident_blocks(), self.idx)), self.idx), lit(1, self.idx)), self.idx)
        what = self.describe()
        vec = self.W["m"] > 1 or self.W["n"] > 1
        # tiles beyond what a kernel may declare with fixed sizes live in memory the launch gives
        arrays = [a for a in head if isinstance(a, ir.Array) and a.space == "shared"]
        shared = max([sum(a.count * _BYTES[a.dtype] for a in arrays if not a.alias)] +
                     [a.count * _BYTES[a.dtype] for a in arrays if a.alias])
        align = max([a.align for a in arrays] + [16])
        # (the launch's memory is 16-byte aligned: a tile aligned further may start later); a
        # staged C larger than A's tiles spans the others, which only the launch's memory
        # keeps contiguous
        spans = self.staged and self.c_alias and p.bm * self.ldc * _BYTES[self.k.output.dtype] > \
            next(a.count * _BYTES[a.dtype] for a in arrays if a.name == "_shm")
        dynamic = shared + align - 16 if 0 < self.t.static_shared_bytes < shared or spans else 0
        return one_kernel(self.k, buffer_params(self.k, self.sizes, self.idx), head, p.threads, self.idx,
                          what, host, (), f"{what} (gemm: {p.describe()})", self.sym, self.suffix,
                          min_blocks=2 if vec and not p.mma and p.threads == 256 else 0,
                          dynamic_shared=dynamic)

    c_alias = "_shm"        # the staged C tile lies over A's tiles
    c_tiles = 1             # staged C tiles: one a warpgroup with tiles of its own

    def roles(self, tile_loop, tile_body) -> list:
        """The kernel after its declarations: `tile_loop(inner, first=0, every=1)` is the
        loop over the block's tiles (from its `first`, every `every`-th) running `inner` after
        each tile's place is found; `tile_body()`, a tile's work."""
        return [tile_loop(tile_body())]

    def resident_blocks(self) -> int:
        """The most blocks the grid needs: its tiles are strided over whatever it has."""
        return self.t.max_blocks

    def c_base(self) -> ir.Expr:
        """Where this thread's staged C tile starts in `_shc`."""
        return self.i(0)

    def slices(self) -> ir.Expr:
        """The number of BK-deep slices of K."""
        return self.op("/", self.op("+", self.K, self.p.bk - 1), self.p.bk)

    def sync(self) -> ir.Stmt:
        """What orders the threads that multiply (all of the block's here)."""
        return ir.Barrier()

    def kind(self) -> str:
        return "implicit GEMM (gathered operand)" if _gathered(self.f) else "GEMM"

    def shape_text(self) -> str:
        if self.sym:
            return "every size"
        M, N, K = _side_sizes(self.f, self.sizes)
        B = _batch(self.f, self.sizes)
        return f"M={M} N={N} K={K}" + (f" batch={B}" if B > 1 else "")

    def describe(self) -> str:
        f = self.f
        how = self.product(self.shape_text())
        loads = " and ".join(f"{getattr(f, s).load.buffer} in {self.W[s] * _BYTES[d]}-byte loads"
                             for s, d in zip("mn", f.dtypes) if self.W[s] > 1)
        staged = "; C out through shared memory in 16-byte stores" if self.staged else ""
        return f"contraction as {self.kind()} {how}".replace(" :", ":") + (f"; {loads}" if loads else "") + staged

    def product(self, shape: str) -> str:
        """How the block multiplies, for the description."""
        f, p = self.f, self.p
        if p.mma:
            widened = " and ".join(sorted({d for d in f.dtypes if d != "f32"}))
            op = ("m16n8k8 tf32 (operands rounded to TF32" +
                  (f"; {widened} widened to f32 first)" if widened else ")")) if self.tf32 else \
                f"m16n8k16 {f.dtypes[0]}"
            stages = (f"{p.stages} shared-memory stages by cp.async" if p.stages else
                      "2 shared-memory stages")
            how = (f"on tensor cores (mma.sync {op}, f32 accumulate): {shape}; "
                   f"{p.bm}x{p.bn}x{p.bk} tiles, {p.threads // 32} warps of {p.tm}x{p.tn}, "
                   f"{stages}" + (", swizzled" if p.swizzle else ""))
        else:
            how = (f": {shape}; {p.bm}x{p.bn}x{p.bk} tiles in two shared-memory buffers, "
                   f"{p.tm}x{p.tn} per thread")
        return how

    def setup(self, head: list):
        """Shared tiles, staging registers and the accumulators, declared once."""
        p, f = self.p, self.f
        self.shape = {}
        for s, bx in (("m", p.bm), ("n", p.bn)):
            side = getattr(f, s)
            chunks = bx * p.bk // self.W[s]
            per = -(-chunks // p.threads)
            dt = f.dtypes[0 if s == "m" else 1]
            # an element staged alone is held in the sum's type, but in its own where the
            # tile keeps that type (a half element into a half tensor-core tile)
            reg_dt = dt if self.W[s] > 1 or (p.mma and self.tile_dt[s] == dt) else self.cd
            if p.mma:       # the operand's own layout: rows of K or of X (GemmParams.tile_rows)
                rows, row = p.tile_rows(s, self.ibs[s], side.kcontig)
                sh_dt = self.tile_dt[s]
            else:           # k-major: a thread's TM (TN) values of one k are consecutive
                rows, row, sh_dt = p.bk, bx + p.pad, self.cd
            self.shape[s] = (chunks, per, reg_dt, rows, row, sh_dt)
            head.append(ir.Array(f"_sh{s}", sh_dt, max(2, p.stages) * rows * row, "shared"))
            if not p.stages:
                head.append(ir.Array(f"_reg{s}", reg_dt, per * self.W[s], "local"))
        if p.mma:
            self.fm, self.fn = p.tm // 16, p.tn // 8
            self.acc_count = self.fm * self.fn * 4
            per_a, per_b = (4, 2) if self.tf32 else (8, 4)
            head += [ir.Array("_fa", "f32" if self.tf32 else f.dtypes[0], self.fm * per_a, "local"),
                     ir.Array("_fb", "f32" if self.tf32 else f.dtypes[1], self.fn * per_b, "local")]
            warps_n = p.bn // p.tn
            warp, lane = self.axis("warp"), self.axis("lane")
            for n, e in (("_wm", self.op("/", warp, warps_n)), ("_wn", self.op("%", warp, warps_n)),
                         ("_g", self.op("/", lane, 4)), ("_t4", self.op("%", lane, 4)),
                         ("_l8", self.op("%", lane, 8)), ("_lq", self.op("/", lane, 8))):
                head.append(ir.Decl(n, self.idx, e))
        else:
            self.acc_count = p.tm * p.tn
            head += [ir.Array("_a", self.cd, p.tm, "local"), ir.Array("_b", self.cd, p.tn, "local")]
            tx = p.bn // p.tn
            head += [ir.Decl("_tx", self.idx, self.op("%", self.tid, tx)),
                     ir.Decl("_ty", self.idx, self.op("/", self.tid, tx))]
        head.append(ir.Array("_acc", self.cd, self.acc_count, "local"))

    def ref(self, n: str) -> ir.Expr:
        return ir.Ref(n, self.idx)

    # ---- the K loop -------------------------------------------------------------------

    def place(self, s: str, r: ir.Expr) -> tuple:
        """(x, k): the place in side `s`'s tile of this thread's chunk r of a slice, chunk
        e = thread + r * threads. Where the threads are a multiple of the divisor q, e % q
        and e / q are the thread's own plus a constant of r."""
        p, side, W = self.p, getattr(self.f, s), self.W[s]
        bx = p.bm if s == "m" else p.bn
        if p.mma and side.kcontig:          # chunks walk K along a row of the tile
            q, x_of_rem, k_of = p.bk // W, False, lambda d: self.op("*", d, W)
        elif side.kcontig and W == 1:       # consecutive threads read consecutive k
            q, x_of_rem, k_of = p.bk, False, lambda d: d
        elif side.kcontig:                  # a vector of k per row; a warp covers 32 rows
            q, x_of_rem, k_of = bx, True, lambda d: self.op("*", d, W)
        else:
            q, x_of_rem, k_of = bx // W, True, lambda d: d
        if p.threads % q == 0:
            rem = self.op("%", self.tid, q)
            quo = self.op("+", self.op("/", self.tid, q), self.op("*", r, p.threads // q))
        else:
            e = self.op("+", self.tid, self.op("*", r, p.threads))
            rem, quo = self.op("%", e, q), self.op("/", e, q)
        if x_of_rem:
            return (self.op("*", rem, W) if not side.kcontig else rem), k_of(quo)
        return quo, k_of(rem)

    def x_fixed(self, s: str) -> bool:
        """Whether every chunk of this thread in side `s` lies in one row x of the tile."""
        p, side, W = self.p, getattr(self.f, s), self.W[s]
        _, per, *_ = self.shape[s]
        bx = p.bm if s == "m" else p.bn
        q = None if side.kcontig and (p.mma or W == 1) else bx if side.kcontig else bx // W
        return per == 1 or (q is not None and p.threads % q == 0)

    def chunks(self, s: str, body_of) -> ir.For:
        """For each of this thread's chunks of side `s`'s slice: body_of(x, k, r), with the
        chunk's place (x, k) in the tile and its slot r in the staging registers."""
        p = self.p
        chunks, per, *_ = self.shape[s]

        def body(r):
            e = self.op("+", self.tid, self.op("*", r, p.threads))
            x, k = self.place(s, r)
            out = [ir.Decl("_x", self.idx, x), ir.Decl("_k", self.idx, k)]
            out += body_of(self.ref("_x"), self.ref("_k"), r)
            if chunks % p.threads:
                return [ir.If(self.op("<", e, chunks), tuple(out))]
            return out
        return self.unrolled(self.new("r"), per, body)

    def hoisted(self, s: str) -> bool:
        """Whether side `s`'s output variables are decomposed from a tile row once a tile
        (several of them: a convolution's image, row and column), not per element and slice."""
        return len(self.loops[s]) > 1

    def hoist(self) -> list:
        """Each hoisted side's variables of this thread's tile rows (one row where all its
        chunks share it, else one a chunk) into registers `_h<side><j>`."""
        out = []
        for s in ("m", "n"):
            if not self.hoisted(s):
                continue
            x0 = self.m0 if s == "m" else self.n0

            def store(x, r):
                def body():
                    got = self.decompose(self.op("+", x0, x), self.loops[s], self.exts[s])
                    return got + [ir.Store(f"_h{s}{j}", r, ir.Ref(self.low.lookup(lp.var)[0], self.idx))
                                  for j, lp in enumerate(self.loops[s])]
                return self.scoped(body)
            if self.x_fixed(s):
                out += store(self.place(s, self.i(0))[0], self.i(0))
            else:
                out.append(self.chunks(s, lambda x, k, r: store(x, r)))
        return out

    def x_binds(self, s: str, gx: ir.Expr, r: ir.Expr) -> list:
        """Side `s`'s output variables of tile row gx (chunk r) bound in the current scope."""
        if not self.hoisted(s):
            return self.decompose(gx, self.loops[s], self.exts[s])
        slot = self.i(0) if self.x_fixed(s) else r
        return [ir.Decl(self.low.bind(lp.var, self.idx), self.idx, ir.Load(f"_h{s}{j}", slot, self.idx),
                        False, lp.line) for j, lp in enumerate(self.loops[s])]

    def in_matrix(self, s: str, gx: ir.Expr, gk: ir.Expr) -> ir.Expr | None:
        """Whether element (gx, gk) of side `s` lies in the matrix: in a gathered contraction
        None where every tile and slice does (sizes fixed, multiples of the tile's side and
        of BK), and so in an FMA tile's (WebGPU on an H200, 128 x 256 tiles at 4096: the
        tests took a fifth of the time); a plain GEMM on tensor cores keeps its bounds test
        (ptxas allocates the warpgroup tiles' registers better with it)."""
        p = self.p
        X, bx = (self.M, p.bm) if s == "m" else (self.N, p.bn)
        fixed = not self.sym and (_gathered(self.f) or not p.mma)
        M, N, K = _side_sizes(self.f, self.sizes) if fixed else (None,) * 3
        whole = lambda n, b: n is not None and n % b == 0
        return self.all_of(*(t for t, ok in ((self.op("<", gx, X), whole(M if s == "m" else N, bx)),
                                             (self.op("<", gk, self.K), whole(K, p.bk))) if not ok))

    def all_of(self, *tests) -> ir.Expr | None:
        """The conjunction of the tests that are not None (None where none is)."""
        tests = [t for t in tests if t is not None]
        return reduce(lambda a, b: self.op("and", a, b), tests) if tests else None

    def slice_chunks(self, s: str, k0: ir.Expr, one) -> list:
        """For each of this thread's chunks of side `s`'s slice from K index `k0`:
        one(x, k, r, inside, binds), with the chunk's place, whether it lies in the matrix
        (`in_matrix`) and binds() binding the loop variables of its element."""
        low = self.low
        low.line = self.f.c.rloops[-1].line or low.line
        head = []
        sl = self.slice_digits(head, k0)
        x0 = self.m0 if s == "m" else self.n0

        def chunk(x, k, r):
            gx, gk = self.op("+", x0, x), self.op("+", k0, k)
            return one(x, k, r, self.in_matrix(s, gx, gk),
                       lambda: self.x_binds(s, gx, r) + self.k_binds(gk, k, sl))
        return head + [self.chunks(s, chunk)]

    def read(self, side: _Side, v: str, dtype: str) -> list:
        """`v` = side's element as `dtype`, where its guard holds (it keeps its zero
        elsewhere)."""
        low = self.low
        if side.cond is None:
            return [ir.Set(v, cast(low.expr(side.load), dtype))]
        with low.facts.assuming(side.cond):
            got = cast(low.expr(side.load), dtype)
        return [ir.If(cast(low.expr(side.cond), "bool"), (ir.Set(v, got),))]

    def stage(self, s: str, k0: ir.Expr) -> list:
        """Side `s`'s chunks of the slice from K index `k0` into the staging registers;
        zeros outside the matrix."""
        side, W, low = getattr(self.f, s), self.W[s], self.low
        reg_dt = self.shape[s][2]
        buf_ident, buf_dt, _ = low.buffers[side.load.buffer]

        def one(x, k, r, inside, binds):
            slot = self.op("*", r, W)
            if W > 1:
                def copy():
                    off, _ = low.flat(side.load.buffer, side.load.index, False, side.load.spans)
                    return [ir.Copy(f"_reg{s}", slot, buf_ident, off, W, buf_dt)]
                zero = [ir.Store(f"_reg{s}", self.op("+", slot, w), _zero(reg_dt)) for w in range(W)]
                if inside is None:
                    return self.scoped(lambda: binds() + copy())
                return [ir.If(inside, tuple(self.scoped(lambda: binds() + copy())), tuple(zero))]
            v = self.new("v")
            got = self.scoped(lambda: binds() + self.read(side, v, reg_dt))
            return [ir.Decl(v, reg_dt, _zero(reg_dt), True)] + \
                (got if inside is None else [ir.If(inside, tuple(got))]) + \
                [ir.Store(f"_reg{s}", slot, ir.Ref(v, reg_dt))]
        return self.slice_chunks(s, k0, one)

    def fill(self, s: str, buf: ir.Expr) -> list:
        """The staging registers of side `s` into shared buffer `buf` (0 or 1)."""
        p, side, W = self.p, getattr(self.f, s), self.W[s]
        _, _, reg_dt, rows, row, sh_dt = self.shape[s]
        base = self.op("*", buf, rows * row)

        def at(x, k, aligned=False):        # tensor-core tiles: their layout; else k-major
            if p.mma:
                return self.at(s, buf, x, k, aligned=aligned)
            return self.op("+", base, self.op("+", self.op("*", k, row), x))

        def one(x, k, r):
            slot = self.op("*", r, W)
            if reg_dt != sh_dt or (side.kcontig and not p.mma):
                # element by element: widened (a half operand of TF32), converted or transposed
                return [ir.Store(f"_sh{s}", at(*((x, self.op("+", k, w)) if side.kcontig else
                                                 (self.op("+", x, w), k))),
                                 cast(ir.Load(f"_reg{s}", self.op("+", slot, w), reg_dt), sh_dt))
                        for w in range(W)]
            return self.move(f"_sh{s}", at(x, k, W * self.ibs[s] >= 16), f"_reg{s}", slot, W, sh_dt)
        return [self.chunks(s, one)]

    def at(self, s: str, buf: ir.Expr, x: ir.Expr, k: ir.Expr, key: ir.Expr | None = None,
           aligned: bool = False) -> ir.Expr:
        """Offset of element (x, k) of side `s`'s tensor-core tile in shared buffer `buf`.
        Swizzled, the 16-byte unit holding it is XOR-ed, within its row, by the row's `key`:
        (row % 8) / R where R rows share a 128-byte line, so that eight consecutive rows at
        one unit (an ldmatrix phase) and a warp's consecutive units (the copies) fall in
        eight bank groups. `key` where the caller knows it; `aligned`: (x, k) starts a unit."""
        _, _, _, rows, row, _ = self.shape[s]
        r, c = (x, k) if getattr(self.f, s).kcontig else (k, x)
        base = self.op("*", buf, rows * row)
        if not self.p.swizzle:
            return self.op("+", base, self.op("+", self.op("*", r, row), c))
        E = 16 // self.ibs[s]
        if key is None:
            key = self.op("/", self.op("%", r, 8), max(1, 8 * E // row))
        unit = ir.Bin("^", self.op("/", c, E), key, self.idx)
        inner = self.op("*", unit, E) if aligned else self.op("+", self.op("*", unit, E), self.op("%", c, E))
        return self.op("+", base, self.op("+", self.op("*", r, row), inner))

    def lane_key(self, s: str, r8: ir.Expr | None = None) -> ir.Expr:
        """The swizzle key of a row whose remainder by 8 is `r8`: by default the row this
        lane gives an ldmatrix (an 8-aligned row + lane % 8)."""
        _, _, _, _, row, _ = self.shape[s]
        return self.op("/", self.ref("_l8") if r8 is None else r8, max(1, 8 * (16 // self.ibs[s]) // row))

    def issue(self, s: str, k0: ir.Expr, buf: ir.Expr) -> list:
        """Side `s`'s chunks of the slice from K index `k0` as cp.async copies into shared
        buffer `buf`; zeros land outside the matrix."""
        side, W, low = getattr(self.f, s), self.W[s], self.low
        buf_ident, buf_dt, _ = low.buffers[side.load.buffer]

        def one(x, k, r, guard, binds):
            def copy():
                out = binds()
                if side.cond is None:
                    off, _ = low.flat(side.load.buffer, side.load.index, False, side.load.spans)
                    g = guard
                else:       # a gathered element: zeros land where the guard (padding) is false
                    g = self.all_of(guard, cast(low.expr(side.cond), "bool"))
                    with low.facts.assuming(side.cond):
                        off, _ = low.flat(side.load.buffer, side.load.index, False, side.load.spans)
                at = self.at(s, buf, x, k, aligned=W * self.ibs[s] >= 16)
                return out + [ir.AsyncCopy(f"_sh{s}", at, buf_ident, off, W, buf_dt, g)]
            return self.scoped(copy)
        return self.slice_chunks(s, k0, one)

    def pipelined(self) -> list:
        """The K loop over a ring of `stages` buffers: stages - 1 slices in flight ahead of
        the one multiplied; a slice's group is complete when all but the newest stages - 2
        groups are, and the barrier after the wait also tells every warp that the buffer
        the next copies refill was multiplied in the previous step."""
        p, S = self.p, self.p.stages
        head, nk, refill = self.prefetch(S - 1, p.bk, literal=True)
        kt = self.ref("_kt")
        body = [ir.AsyncWait(S - 2), ir.Barrier(), refill(self.op("+", kt, S - 1)), ir.AsyncCommit()]
        body += self.multiply(self.op("%", kt, S))
        return head + [self.k_loop(nk, body)]

    def prefetch(self, ahead: int, bk: int, literal: bool = False) -> tuple:
        """(statements, nk, refill): the start of a tile's pipelined K loop, a barrier (the
        previous tile's slices are read by now), the count nk of its slices and the copies of
        the first `ahead` of them, a committed group each (from a literal K index where
        `literal`); refill(kt) copies both sides' slice kt, where there is one, into its buffer
        of the ring of `stages`."""
        head = [ir.Barrier()]
        nk = self.name(head, "nk", self.slices())
        fill = lambda k0, slot: self.issue("m", k0, slot) + self.issue("n", k0, slot)
        for st in range(ahead):
            k0 = self.i(st * bk) if literal else self.op("*", self.i(st), bk)
            head += [ir.If(self.op("<", self.i(st), nk), tuple(fill(k0, self.i(st)))), ir.AsyncCommit()]
        S = self.p.stages
        return head, nk, lambda kt: ir.If(self.op("<", kt, nk), tuple(fill(
            self.op("*", kt, bk), self.op("%", kt, S))))

    def k_loop(self, nk: ir.Expr, body: list) -> ir.For:
        """The loop over the `nk` slices of K (`_kt`), at the contraction's line."""
        return ir.For("_kt", self.i(0), nk, self.i(1), tuple(body), self.idx, self.f.c.rloops[0].line)

    def mainloop(self) -> list:
        p = self.p
        if p.stages:
            return self.pipelined()
        head = []
        nk = self.name(head, "nk", self.slices())
        kt = self.ref("_kt")
        nxt = self.op("+", kt, 1)
        more = self.op("<", nxt, nk)
        other = self.op("%", nxt, 2)
        body = [ir.If(more, tuple(self.stage("m", self.op("*", nxt, p.bk)) +
                                  self.stage("n", self.op("*", nxt, p.bk))))]
        body += self.multiply(self.op("%", kt, 2))
        body += [ir.If(more, tuple(self.fill("m", other) + self.fill("n", other))), ir.Barrier()]
        return head + self.stage("m", self.i(0)) + self.stage("n", self.i(0)) + \
            self.fill("m", self.i(0)) + self.fill("n", self.i(0)) + [
                ir.Barrier(), self.k_loop(nk, body)]

    def multiply(self, buf: ir.Expr) -> list:
        return self.mma_step(buf) if self.p.mma else self.fma_step(buf)

    def fma_step(self, buf: ir.Expr) -> list:
        """acc[i][j] += A[kk][row i] * B[kk][col j] over the slice: a thread's rows are
        groups of 4, TY apart (likewise its columns), read 4 at a time."""
        p, cd = self.p, self.cd
        ty_n, tx_n = p.bm // p.tm, p.bn // p.tn

        def step(kk):
            out = []
            for arr, s, t, own, n in (("_a", "m", self.ref("_ty"), ty_n, p.tm),
                                      ("_b", "n", self.ref("_tx"), tx_n, p.tn)):
                row, sh = self.shape[s][4], f"_sh{s}"
                base = self.op("+", self.op("*", buf, p.bk * row), self.op("*", kk, row))
                for g in range(n // 4):
                    at = self.op("+", base, self.op("+", self.i(g * own * 4), self.op("*", t, 4)))
                    out += self.move(arr, self.i(g * 4), sh, at, 4, cd)
            fma = lambda i, j: [ir.Store("_acc", self.op("+", self.op("*", i, p.tn), j), ir.Bin(
                "+", ir.Load("_acc", self.op("+", self.op("*", i, p.tn), j), cd),
                ir.Bin("*", ir.Load("_a", i, cd), ir.Load("_b", j, cd), cd), cd))]
            out.append(self.unrolled("_i", p.tm, lambda i: [self.unrolled("_j", p.tn,
                                                                          lambda j: fma(i, j))]))
            return out
        return [self.unrolled("_kk", p.bk, step)]

    def mma_step(self, buf: ir.Expr) -> list:
        """Per 16-deep step: each warp's A fragments (16 rows each) and B fragments (8
        columns each, two at a time where the warp has an even number) from the shared tiles
        by warp matrix loads (transposed where the tile runs along M or N), then FM x FN
        MMAs."""
        if self.tf32:
            return self.tf32_step(buf)
        p, f = self.p, self.f
        tile, row = self.ref("_lq"), self.ref("_l8")
        pair = self.fn % 2 == 0

        def step(kk):
            def a_frag(i):      # tiles (rows 0-7 | 8-15) x (k 0-7 | 8-15), this lane's row
                top = self.op("+", self.op("*", self.ref("_wm"), p.tm), self.op("*", i, 16))
                x_off, k_off = self.op("*", self.op("%", tile, 2), 8), self.op("*", self.op("/", tile, 2), 8)
                x, k = self.op("+", top, x_off), self.op("+", kk, k_off)
                x, k = (self.op("+", x, row), k) if f.m.kcontig else (x, self.op("+", k, row))
                return [ir.MatrixLoad("_fa", self.op("*", i, 8), "_shm",
                                      self.at("m", buf, x, k, self.lane_key("m"), True), 4,
                                      not f.m.kcontig, f.dtypes[0])]

            def b_frag(j):      # tiles (k 0-7 | 8-15) of 8 columns (of columns j, j + 1)
                group = self.op("+", j, self.op("/", tile, 2)) if pair else j
                x = self.op("+", self.op("*", self.ref("_wn"), p.tn), self.op("*", group, 8))
                k = self.op("+", kk, self.op("*", self.op("%", tile, 2), 8))
                x, k = (self.op("+", x, row), k) if f.n.kcontig else (x, self.op("+", k, row))
                return [ir.MatrixLoad("_fb", self.op("*", j, 4), "_shn",
                                      self.at("n", buf, x, k, self.lane_key("n"), True),
                                      4 if pair else 2, not f.n.kcontig, f.dtypes[1])]
            return self.warp_mmas(a_frag, b_frag, pair, 8, 4, f.dtypes[0], (16, 8, 16))
        return [self.unrolled("_kk", p.bk, step, 16)]

    def warp_mmas(self, a_frag, b_frag, pair: bool, per_a: int, per_b: int, dtype: str,
                  shape: tuple) -> list:
        """A step's fragment loads (a_frag(i), b_frag(j), two B fragments at a time where
        `pair`), then the warp's FM x FN MMAs on them."""
        mma = lambda i, j: [ir.Mma("_fa", self.op("*", i, per_a), "_fb", self.op("*", j, per_b), "_acc",
                                   self.op("*", self.op("+", self.op("*", i, self.fn), j), 4), dtype, shape)]
        return [self.unrolled("_i", self.fm, a_frag), self.unrolled("_j", self.fn, b_frag, 2 if pair else 1),
                self.unrolled("_i", self.fm, lambda i: [self.unrolled("_j", self.fn, lambda j: mma(i, j))])]

    def tf32_step(self, buf: ir.Expr) -> list:
        """Per 8-deep step: the warp's A fragments (16 x 8) and B fragments (8 x 8) from the
        shared tiles (ir.Mma's tf32 layout): by ldmatrix of 32-bit rows where an f32 tile runs
        along K, else each lane reading its elements (a half one widened to f32); then FM x FN
        m16n8k8 MMAs, which round the operands to TF32."""
        p, f = self.p, self.f
        g, t = self.ref("_g"), self.ref("_t4")
        tile, row = self.ref("_lq"), self.ref("_l8")
        rows32 = {s: getattr(f, s).kcontig and self.tile_dt[s] == "f32" for s in ("m", "n")}
        pair = self.fn % 2 == 0 and rows32["n"]
        elem = lambda s, at: cast(ir.Load(f"_sh{s}", at, self.tile_dt[s]), "f32")

        def step(kk):
            def key(s, k_in8):      # rows are 8-aligned + g along X, or + t + 4 p along K
                return self.lane_key(s, g if getattr(f, s).kcontig else k_in8)

            def a_frag(i):
                top = self.op("+", self.op("*", self.ref("_wm"), p.tm), self.op("*", i, 16))
                if rows32["m"]:     # tiles (rows 0-7 | 8-15) x (k 0-3 | 4-7) by one ldmatrix
                    x = self.op("+", top, self.op("+", self.op("*", self.op("%", tile, 2), 8), row))
                    k = self.op("+", kk, self.op("*", self.op("/", tile, 2), 4))
                    return [ir.MatrixLoad("_fa", self.op("*", i, 4), "_shm",
                                          self.at("m", buf, x, k, self.lane_key("m"), True), 4, False, "f32")]
                return [ir.Store("_fa", self.op("+", self.op("*", i, 4), q), elem(
                    "m", self.at("m", buf, self.op("+", top, self.op("+", g, 8 * (q % 2))),
                                 self.op("+", kk, self.op("+", t, 4 * (q // 2))),
                                 key("m", self.op("+", t, 4 * (q // 2))))))
                        for q in range(4)]

            def b_frag(j):
                if rows32["n"]:     # tiles (k 0-3 | 4-7) of 8 columns (of columns j, j + 1)
                    group = self.op("+", j, self.op("/", tile, 2)) if pair else j
                    x = self.op("+", self.op("*", self.ref("_wn"), p.tn), self.op("+", self.op("*", group, 8), row))
                    k = self.op("+", kk, self.op("*", self.op("%", tile, 2), 4))
                    return [ir.MatrixLoad("_fb", self.op("*", j, 2), "_shn",
                                          self.at("n", buf, x, k, self.lane_key("n"), True),
                                          4 if pair else 2, False, "f32")]
                x = self.op("+", self.op("+", self.op("*", self.ref("_wn"), p.tn), self.op("*", j, 8)), g)
                return [ir.Store("_fb", self.op("+", self.op("*", j, 2), q), elem(
                    "n", self.at("n", buf, x, self.op("+", kk, self.op("+", t, 4 * q)),
                                 key("n", self.op("+", t, 4 * q)))))
                        for q in range(2)]
            return self.warp_mmas(a_frag, b_frag, pair, 4, 2, "tf32", (16, 8, 8))
        return [self.unrolled("_kk", p.bk, step, 8)]

    # ---- the epilogue -----------------------------------------------------------------

    def store(self, lm: ir.Expr, ln: ir.Expr, value: ir.Expr) -> list:
        """out = f(init + scale(value)) at row lm, column ln of the block's tile of C, where it is in
        range: into the shared tile `_shc` where C is staged."""
        c, low, cd = self.f.c, self.low, self.cd
        low.line = c.store.line or low.line
        gm, gn = self.op("+", self.m0, lm), self.op("+", self.n0, ln)

        def body():
            out = self.decompose(gm, self.loops["m"], self.exts["m"])
            out += self.decompose(gn, self.loops["n"], self.exts["n"])
            init = low.operand(c.init, cd)
            total = value
            for op, factor in c.scale:      # the products' constant factors, on the sum
                total = ir.Bin(op, total, low.operand(factor, cd), cd)
            if self.again:      # (see `stored`): the program's own loops sum it again
                out.append(ir.Decl(low.bind(c.acc, cd), cd, init, True, c.store.line))
                out += low.block(c.rloops[:1])
            else:
                out.append(ir.Decl(low.bind(c.acc, cd), cd, ir.Bin("+", init, total, cd),
                                   False, c.store.line))
            if c.cond is not None and not self.again:
                acc = ir.Ref(low.lookup(c.acc)[0], cd)
                out.append(ir.Set(_NAN, ir.Bin("or", ir.Ref(_NAN, "bool"),
                                               ir.Bin("!=", acc, acc, "bool"), "bool")))
            stmts = list(low.stmts((c.store,)))
            if self.staged:
                at = self.op("+", self.c_base(), self.op("+", self.op("*", lm, self.ldc), ln))
                stmts = [_to_shared(st, low.buffers[c.store.buffer][0], at) for st in stmts]
            return out + stmts
        inside = self.in_c(gm, gn)
        if inside is None:
            return self.scoped(body)
        return [ir.If(inside, tuple(self.scoped(body)), (), c.store.line)]

    def stored(self, counts: tuple, one, names=("_ei", "_ej")) -> list:
        """The stores of a thread's sums, `one(*position)` over positions `counts` (unrolled:
        registers are indexed by constants). A guarded accumulation's skipped products are
        zeros of the gathered side in the tiles, and 0 times an inf or NaN of the other side
        is NaN where the program adds nothing (a padded convolution's filter holding inf at
        a tap on the padding): where one of the thread's sums is NaN, every one of them is
        summed again by the program's own guarded loops (`again`), as the reference sums."""
        def nest(names, unroll, k=0, at=()):
            if k == len(counts):
                return list(one(*at))
            v = ir.Ref(names[k], self.idx)
            return [ir.For(v.name, self.i(0), self.i(counts[k]), self.i(1),
                           tuple(nest(names, unroll, k + 1, at + (v,))), self.idx, unroll=unroll)]
        if self.f.c.cond is None:
            return nest(names, True)
        first = [ir.Decl(_NAN, "bool", lit(False, "bool"), True)] + nest(names, True)
        self.again = True
        try:
            again = nest(tuple("_r" + n for n in names), False)
        finally:
            self.again = False
        return first + [ir.If(ir.Ref(_NAN, "bool"), tuple(again), ())]

    def in_c(self, gm: ir.Expr, gn: ir.Expr) -> ir.Expr | None:
        """Whether row gm, column gn of the tile is in C, or None where every element of
        every tile is: only a side whose extent the tile does not divide needs its test. (An
        epilogue without tests is straight-line code, so the compiler interleaves the
        elements' math: with a branch an element, an activation's chain of dependent
        instructions ran one element at a time, on the few warps a multiprocessor holds.)"""
        return self.all_of(*(self.op("<", g, ext) for g, ext, s in ((gm, self.M, "m"), (gn, self.N, "n"))
                             if self.ragged[s]))

    def staged_out(self) -> list:
        """The staged tile's rows to C in 16-byte stores, after every thread's values are in
        (and before the next tile's copies reuse the memory)."""
        p = self.p
        dtype = self.k.output.dtype
        width = 16 // _BYTES[dtype]
        per_row = p.bn // width
        ident = self.low.buffers[self.f.c.store.buffer][0]
        row0 = self.op("+", self.op("*", ir.Ref("_bz", self.idx), self.M), self.m0) \
            if self.f.c.bvars else self.m0

        chunks, threads = p.bm * per_row, self.workers

        def one(it):
            chunk = self.op("+", self.tid, self.op("*", it, threads))
            r, col = self.op("/", chunk, per_row), self.op("*", self.op("%", chunk, per_row), width)
            inside = self.in_c(self.op("+", self.m0, r), self.op("+", self.n0, col))
            if chunks % threads:
                inside = self.all_of(self.op("<", chunk, chunks), inside)
            dst = self.op("+", self.op("*", self.op("+", row0, r), self.N), self.op("+", self.n0, col))
            at = self.op("+", self.c_base(), self.op("+", self.op("*", r, self.ldc), col))
            copy = ir.Copy(ident, dst, "_shc", at, width, dtype)
            return [copy] if inside is None else [ir.If(inside, (copy,))]
        return [self.sync(), self.unrolled("_oc", -(-chunks // threads), one), self.sync()]

    def epilogue(self) -> list:
        p = self.p
        if p.mma:
            def one(i, j):
                out = []
                for e in range(4):
                    gm = self.op("+", self.op("*", self.ref("_wm"), p.tm), self.op(
                        "+", self.op("*", i, 16), self.op("+", self.ref("_g"), 8 * (e // 2))))
                    gn = self.op("+", self.op("*", self.ref("_wn"), p.tn), self.op(
                        "+", self.op("*", j, 8), self.op("+", self.op("*", self.ref("_t4"), 2), e % 2)))
                    at = self.op("+", self.op("*", self.op("+", self.op("*", i, self.fn), j), 4), e)
                    out += self.store(gm, gn, ir.Load("_acc", at, self.cd))
                return out
        else:
            ty_n, tx_n = p.bm // p.tm, p.bn // p.tn

            def place(v, own, t):           # row (column) of a thread's register v
                return self.op("+", self.op("*", self.op("/", v, 4), own * 4),
                               self.op("+", self.op("*", t, 4), self.op("%", v, 4)))

            def one(i, j):
                gm, gn = place(i, ty_n, self.ref("_ty")), place(j, tx_n, self.ref("_tx"))
                return self.store(gm, gn, ir.Load("_acc", self.op("+", self.op("*", i, p.tn), j), self.cd))
        return self.stored((self.fm, self.fn) if p.mma else (p.tm, p.tn), one)
