"""Programs written from the spec's text (zynml-compute-system.md, wgsl-compute-kernels.md)
and docs/language.md as an outside tester writes them: shared arrays, reductions, scans,
gathers, masks, pipelines and placement, with names, dtypes and sizes the spec's own
examples do not use. Each runs on every device present (the CPU reference included) and is
compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(4133)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _attention(q, k, v, mask):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


_SPEC_ATTENTION = """
let attn = compute(Q, K, V, mask) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_len:
                if mask[i, j]:
                    let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                    let weight = exp(score - max_score) / sum_exp
                    acc += weight * V[b, h, j, d]
            out[b, h, i, d] = acc
}
attn
"""


def _histogram(ids, weights, bins):
    got = np.zeros((ids.shape[0], bins), np.float64)
    for r in range(ids.shape[0]):
        for c in range(ids.shape[1]):
            if ids[r, c] >= 0:
                got[r, ids[r, c]] += weights[r, c]
    return got


_IDS = RNG.integers(-2, 7, (5, 33)).astype(np.int32)
_W = _f32(5, 33)
_PAIRS = RNG.integers(0, 3, (4, 6, 2)).astype(np.int64)
_U8 = RNG.integers(0, 255, (4, 33)).astype(np.uint8)
_I16 = RNG.integers(-200, 200, (6, 33)).astype(np.int16)
_DOT16 = (_I16.astype(np.int64) ** 2).sum(1).astype(np.int16)      # wrapped in i16
_I16S = RNG.integers(-9, 9, (6, 11)).astype(np.int16)
_X = _f32(5, 33)
_X9 = _f32(9, 9)
_M9 = RNG.integers(0, 4, (9, 9))
_M9[:, 0] = 1
_AQ, _AK, _AV = _f32(2, 3, 9, 5), _f32(2, 3, 9, 5), _f32(2, 3, 9, 5)
_AMASK = RNG.random((9, 9)) > 0.5
np.fill_diagonal(_AMASK, True)
_XH = _f32(5, 33).astype(np.float16)


# name: (source, inputs, numpy's answer, tolerance)
CASES = {
    # a histogram in each row's own shared array, its bin read from data: the CPU reference
    # refused a shared array written at a position that differs between the rows ("shared
    # arrays are indexed by values the same in every lane") where every compiled device ran
    "shared_histogram_indexed_by_data": ("""
let y = compute(ids) {
    for r in 0..R:
        shared var cnt[7]: i32
        for b in 0..7:
            cnt[b] = 0
        barrier()
        for c in 0..C:
            if ids[r, c] >= 0:
                cnt[ids[r, c]] += 1
        barrier()
        for b in 0..7:
            out[r, b] = cnt[b]
}
y
""", {"ids": _IDS}, _histogram(_IDS, np.ones(_IDS.shape), 7).astype(np.int32), 0),
    "shared_weighted_histogram_under_a_mask": ("""
let y = compute(ids, w) {
    for r in 0..R:
        shared var h[7]
        for b in 0..7:
            h[b] = 0.0
        barrier()
        for c in 0..C:
            if ids[r, c] >= 0:
                h[ids[r, c]] += w[r, c]
        barrier()
        for b in 0..7:
            out[r, b] = h[b]
}
y
""", {"ids": _IDS, "w": _W}, _histogram(_IDS, _W, 7), 1e-5),
    "shared_2d_counts_of_pairs": ("""
let y = compute(m) {
    for a in 0..A:
        shared var h[3, 3]: i32
        for i in 0..3, j in 0..3:
            h[i, j] = 0
        barrier()
        for c in 0..C:
            h[m[a, c, 0], m[a, c, 1]] += 1
        barrier()
        for i in 0..3, j in 0..3:
            out[a, i, j] = h[i, j]
}
y
""", {"m": _PAIRS}, np.stack([np.histogram2d(p[:, 0], p[:, 1], bins=3, range=[[0, 3], [0, 3]])[0]
                              for p in _PAIRS]).astype(np.int32), 0),
    # the dot of two u8 rows, or the sum or product of a narrow integer tile, is of the
    # rows' type and wraps in it, as numpy's dot and every compiled device give it: the CPU
    # reference summed them in 64 bits (numpy's sum widens), so a cast or a division after
    # it saw the unwrapped value
    "dot_of_u8_rows_cast_to_i32": ("""
let y = compute(u) {
    for i in 0..n, j in 0..n:
        out[i, j] = i32(dot(u[i], u[j]))
}
y
""", {"u": _U8}, np.dot(_U8, _U8.T).astype(np.int32), 0),
    "dot_of_i16_rows_divided": ("""
let y = compute(w) {
    for i in 0..n:
        out[i] = dot(w[i], w[i]) / 7
}
y
""", {"w": _I16}, np.fix(_DOT16 / 7).astype(np.int16), 0),
    "sum_of_a_u8_tile_cast_to_i32": ("""
let y = compute(u) {
    for i in 0..n:
        out[i] = i32(sum(u[i]))
}
y
""", {"u": _U8}, _U8.sum(1, dtype=np.uint8).astype(np.int32), 0),
    "product_of_an_i16_tile_cast_to_i64": ("""
let y = compute(w) {
    for i in 0..n:
        out[i] = i64(reduce(*, w[i, 0:9]))
}
y
""", {"w": _I16S}, np.prod(_I16S[:, :9], 1, dtype=np.int16).astype(np.int64), 0),
    # a running max or sum over the tiles of a row in steps of 7 (33 is no multiple of 7):
    # the CPU reference ran the loop's iterations side by side, each a tile at its own
    # start, and refused it ("this value differs between parallel iterations but must not")
    "running_max_over_tiles_of_seven": ("""
let y = compute(x) {
    for r in 0..R:
        var m = -inf
        for c in 0..C step 7:
            m = max(m, reduce(max, x[r, c:c+7]))
        out[r] = m
}
y
""", {"x": _X}, _X.max(1), 0),
    "f32_sum_over_f16_tiles_of_seven": ("""
let y = compute(h) {
    for r in 0..R:
        var s: f32 = 0.0
        for c in 0..C step 7:
            s += sum(h[r, c:c+7])
        out[r] = s
}
y
""", {"h": _XH}, _XH.astype(np.float64).sum(1), 2e-2),
    # 64-bit integer masks and ids compared with constants: WebGPU holds them in 32 bits
    # (refusing data that does not fit), so the comparison in 32 bits is exact; it refused
    # the kernel ("the WGSL dialect cannot spell 64-bit integers") though it reads i64 ids
    "spec_attention_with_an_i64_mask": (_SPEC_ATTENTION, {
        "Q": _AQ, "K": _AK, "V": _AV, "mask": _AMASK.astype(np.int64)},
        _attention(_AQ, _AK, _AV, _AMASK), 1e-4),
    "running_max_under_a_u64_mask": ("""
let y = compute(x, m) {
    for i in 0..R:
        var s = -inf
        for j in 0..C:
            if m[i, j] != 0 and m[i, j] <= 2:
                s = max(s, x[i, j])
        out[i] = s
}
y
""", {"x": _X9, "m": _M9.astype(np.uint64)},
        np.where((_M9 != 0) & (_M9 <= 2), _X9, -np.inf).max(1), 0),
    "i64_ids_compared_with_a_negative_bound": ("""
let y = compute(ids) {
    @kernel elementwise
    for i in 0..n:
        out[i] = ids[i] > -3 and ids[i] < 40000
}
y
""", {"ids": (_IDS64 := np.int64([-5, -3, -2, 0, 39999, 40000, 7]))},
        (_IDS64 > -3) & (_IDS64 < 40000), 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_hunt_program_equals_numpy(name, device):
    src, inputs, want, tol = CASES[name]
    got = np.asarray(zynbook.Session(device=device).run(src, **inputs))
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        if got.ndim:      # a scalar comes back as a Python number
            assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)
