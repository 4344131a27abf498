"""Programs written from the spec's kernel types and tile bodies (zynml-compute-system.md,
docs/language.md) with unusual but legal variations: odd sizes, f16 and bf16 tiles, masks
written as floats, bools or index arithmetic, names the generated code also uses. Every
device present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9909)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ f16 `@` of tiles that stay tiles (the block schedule)

_HA = RNG.standard_normal((9, 257)).astype(np.float16)
_HB = RNG.standard_normal((257, 5)).astype(np.float16)

_HALF_PRODUCTS = {
    "row_blocks_of_3": ("""let c = compute(a, b) {
    @kernel fused
    for r in 0..rows step 3:
        out[r:r+3] = a[r:r+3] @ b
}
c""", lambda p: p),
    "row_blocks_of_4_held_then_scaled": ("""let c = compute(a, b) {
    @kernel fused
    for r in 0..rows step 4:
        let t = a[r:r+4] @ b
        out[r:r+4] = t * 2.0 - 1.0
}
c""", lambda p: p * np.float16(2) - np.float16(1)),
    "transposed_operand": ("""let c = compute(a, bt) {
    @kernel fused
    for r in 0..rows step 7:
        out[r:r+7] = a[r:r+7] @ transpose(bt)
}
c""", lambda p: p),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_PRODUCTS))
def test_an_f16_product_of_tiles_rounds_once_as_numpy(name, device):
    """`a[r:r+3] @ b` of f16 tiles in a block body: numpy's f16 matmul sums f32 products in
    f32 and rounds once. The block schedule (cpu:native, WebGPU) multiplied in f16, rounding
    every product, and was up to 4 ulp off at K = 257; now exact."""
    src, epilogue = _HALF_PRODUCTS[name]
    got = np.asarray(_run(device, src, a=_HA, b=_HB, bt=np.ascontiguousarray(_HB.T)))
    want = epilogue(_HA @ _HB)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ dot of f16 vectors

_HQ = RNG.standard_normal((2, 7, 33)).astype(np.float16)
_HK = RNG.standard_normal((2, 5, 33)).astype(np.float16)

_HALF_DOTS = {
    "scores_elementwise": ("""let s = compute(q, k) {
    @kernel elementwise
    for b in 0..batch, i in 0..sq, j in 0..sk:
        out[b, i, j] = dot(q[b, i], k[b, j])
}
s""", lambda s: s),
    "row_max_of_scores_in_a_var": ("""let s = compute(q, k) {
    for b in 0..batch, i in 0..sq:
        var best = -inf
        for j in 0..sk:
            let sc = dot(q[b, i], k[b, j])
            best = max(best, sc)
        out[b, i] = best
}
s""", lambda s: s.max(2)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_DOTS))
def test_an_f16_dot_rounds_once_as_numpy(name, device):
    """`dot(q[b, i], k[b, j])` of f16 rows is numpy's `dot`: f32 products summed in f32,
    rounded once. Every device rounded each product to f16 first (`sum(x * y)`), so the dot
    differed from numpy's and from the same product written with `@` (up to 1 ulp in 2 of
    3 scores at head_dim 33)."""
    src, pick = _HALF_DOTS[name]
    got = np.asarray(_run(device, src, q=_HQ, k=_HK))
    want = pick(np.einsum("bid,bjd->bij", _HQ.astype(np.float32),
                          _HK.astype(np.float32)).astype(np.float16))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ f16 sums along an axis other than the last

# multiples of 1/16 whose f32 sums are exact in any order, past f16's steps of 1/16 from 128
_HM = (RNG.integers(-2000, 2000, (257, 7)) / 16).astype(np.float16)

_HALF_SUMS = {
    "reduce_axis_0_of_an_input": """let r = compute(m) {
    @kernel fused
    out = reduce(+, m, axis=0)
}
r""",
    "reduce_axis_0_in_a_loop": """let r = compute(m) {
    @kernel fused
    for c in 0..1:
        out[c] = reduce(+, m, axis=0)
}
r""",
    "reduce_kernel_along_the_outer_loop": """let r = compute(m) {
    @kernel reduce(+, axis=0)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
r""",
    "row_sum_of_the_transpose": """let r = compute(m) {
    @kernel fused
    out = transpose(row_sum(transpose(m)))
}
r""",
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_SUMS))
def test_an_f16_sum_along_the_first_axis_rounds_once(name, device):
    """An f16 sum over rows is summed in f32 and rounded once, as along the last axis (numpy
    does that only along the last axis: along another its add.reduce rounds each step to
    f16). The reference followed numpy there and differed from every compiled device, by
    up to 3 (of 1472) here."""
    got = np.asarray(_run(device, _HALF_SUMS[name], m=_HM)).reshape(-1)
    want = _HM.astype(np.float32).sum(0).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ an untyped var summing f16 values

_HR = (RNG.integers(-2000, 2000, (7, 257)) / 16).astype(np.float16)

_UNTYPED_SUMS = {
    "row_sum": ("""let r = compute(x) {
    for i in 0..rows:
        var s = 0.0
        for j in 0..cols:
            s += x[i, j]
        out[i] = s
}
r""", lambda x: x.astype(np.float32).sum(1).astype(np.float16)),
    "mean_of_a_row_then_centred": ("""let r = compute(x) {
    @kernel fused
    for b in 0..batch:
        var mean = 0.0
        for i in 0..hidden:
            mean += x[b, i]
        mean /= hidden
        for i in 0..hidden:
            out[b, i] = x[b, i] - mean
}
r""", lambda x: x - (x.astype(np.float32).sum(1, keepdims=True).astype(np.float16)
                     / np.float16(257))),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_UNTYPED_SUMS))
def test_an_untyped_var_summing_f16_sums_in_f32_as_a_typed_one(name, device):
    """`var s = 0.0` summing f16 values is an f16 accumulator (the literal is weak), which
    sums in f32 and is rounded where it is stored, as `var s: f16 = 0.0` does. The read of
    `s` in `s + x[i, j]` kept the f32 type it was lowered with, so the compiled devices
    rounded the running sum to f16 at every step (off by up to 4 at sums near 1000)."""
    src, want = _UNTYPED_SUMS[name]
    got = np.asarray(_run(device, src, x=_HR))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want(_HR))
