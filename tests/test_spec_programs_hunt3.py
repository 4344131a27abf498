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
