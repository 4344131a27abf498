"""i64 arithmetic on devices without 64-bit integers (WebGPU): argmax/argmin positions and
i64 values of 32-bit ones are computed in i32 where their values provably fit, as numpy
computes them in i64; the result stays i64. Arithmetic that may leave 32 bits (a product of
positions, i64 data) is computed in i32 checked: a value past 32 bits is a ZynML error
naming the line, never a wrapped value."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_RNG = np.random.default_rng(7)
_M = _RNG.standard_normal((6, 9)).astype(np.float32)
_V = _RNG.standard_normal(9).astype(np.float32)
_K = _RNG.integers(-50, 50, 6).astype(np.int32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _rows(expr):
    return f"""let y = compute(m, v, k) {{
    for i in 0..r:
        out[i] = {expr}
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("reduce(argmax, m[i]) + 1", lambda: _M.argmax(1) + 1),
    ("reduce(argmin, m[i]) - 3", lambda: _M.argmin(1) - 3),
    ("1 + reduce(argmax, m[i]) % 4", lambda: 1 + _M.argmax(1) % 4),
    ("-reduce(argmin, m[i])", lambda: -_M.argmin(1)),
    ("reduce(argmax, m[i]) > 4", lambda: _M.argmax(1) > 4),
    ("v[reduce(argmax, m[i]) - 1]", lambda: _V[_M.argmax(1) - 1]),
    ("v[reduce(argmin, m[i])] * 2.0", lambda: _V[_M.argmin(1)] * np.float32(2.0)),
    ("i64(k[i]) / 7", lambda: (np.trunc(_K / 7)).astype(np.int64)),
    ("reduce(argmin, m[i]) - k[i] % 2", lambda: _M.argmin(1) - np.fmod(_K, 2)),
    ("v[reduce(argmax, m[i]) + k[i] % 2 - 1]", lambda: _V[_M.argmax(1) + np.fmod(_K, 2) - 1]),
])
def test_small_i64_arithmetic_as_numpy(device, expr, want):
    """These were refused on WebGPU ("cannot spell 64-bit integers"): their values fit i32."""
    got = zynbook.run(_rows(expr), device=device, m=_M, v=_V, k=_K)
    w = want()
    assert_equals_numpy(_host(got), w, 1e-6)
    if w.dtype == np.int64:
        assert str(got.dtype) in ("i64", "int64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("reduce(argmax, m[i]) * 1000000000", lambda: _M.argmax(1) * 1000000000),
    ("reduce(argmax, m[i]) + 2147483647", lambda: _M.argmax(1) + 2147483647),
    ("i64(k[i]) + 1", lambda: _K.astype(np.int64) + 1),
    ("reduce(argmax, m[i]) + i64(k[i])", lambda: _M.argmax(1) + _K),
])
def test_i64_arithmetic_that_may_leave_32_bits(device, expr, want):
    """Correct where 64-bit integers exist, and on WebGPU where every value fits 32 bits
    (i64 data plus one); else there a ZynML error at the line (a position below 9 times
    10^9 leaves 32 bits)."""
    w = want()
    if device not in ("vulkan:0", "gl:0") or np.abs(w).max() < 2 ** 31:
        assert_equals_numpy(_host(zynbook.run(_rows(expr), device=device, m=_M, v=_V, k=_K)),
                            w, 0)
        return
    with pytest.raises(ZynMLError) as err:
        _host(zynbook.run(_rows(expr), device=device, m=_M, v=_V, k=_K))
    text = str(err.value)
    assert "32 bits" in text and "line 3" in text, text


@pytest.mark.parametrize("device", DEVICES)
def test_the_i32_spelling_of_a_refused_product(device):
    got = zynbook.run(_rows("i32(reduce(argmax, m[i])) * 2 + k[i]"), device=device, m=_M,
                      v=_V, k=_K)
    assert_equals_numpy(_host(got), (_M.argmax(1).astype(np.int32) * 2 + _K), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_i64_input_data_compared_and_stored(device):
    """i64 data with small values: compared and stored as numpy does; arithmetic on it
    too (on WebGPU in i32, checked: its values are bounded only by the data)."""
    x = _RNG.integers(-9, 9, 6).astype(np.int64)
    src = """let y = compute(x) {
    for i in 0..n:
        out[i] = -1
        if x[i] > 2:
            out[i] = x[i]
}
y
"""
    got = zynbook.run(src, device=device, x=x)
    assert_equals_numpy(_host(got), np.where(x > 2, x, -1), 0)
    src2 = src.replace("out[i] = x[i]\n", "out[i] = x[i] * 3\n")
    assert_equals_numpy(_host(zynbook.run(src2, device=device, x=x)),
                        np.where(x > 2, x * 3, -1), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_positions_summed(device):
    """A sum of positions grows with the rows (past 32 bits for enough of them): numpy's
    answer on every device (WebGPU holds the i64 sum in two 32-bit words: test_wgsl_hunt7);
    summed in i32, numpy's."""
    src = """let y = compute(m) {
    for i in 0..1:
        var s = 0
        for j in 0..r:
            s = s + reduce(argmax, m[j])
        out[i] = s
}
y
"""
    want = np.array([_M.argmax(1).sum()], np.int64)
    assert_equals_numpy(_host(zynbook.run(src, device=device, m=_M)), want, 0)
    got = zynbook.run(src.replace("reduce(argmax, m[j])", "i32(reduce(argmax, m[j]))"),
                      device=device, m=_M)
    assert_equals_numpy(_host(got).astype(np.int64), want, 0)
