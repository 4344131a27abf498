"""WebGPU (llvmpipe's `vulkan:0`) against numpy, next to the reference and the C++ device:
f64 products with zero, host ints past 32 bits used as floats, sin and cos of large
arguments, long argmax rows and i64 sums."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_RNG = np.random.default_rng(71)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr, inputs="a"):
    return f"let y = compute({inputs}) {{\n    for k in 0..n:\n        out[k] = {expr}\n}}\ny\n"


_EDGES64 = np.array([1.0, np.nan, -np.inf, np.inf, 0.0, -0.0, -3.0, 1e300, -1e300, 5e-324])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("a[k] * 0.0", lambda a: a * 0.0), ("0.0 * a[k]", lambda a: 0.0 * a),
    ("a[k] * -0.0", lambda a: a * -0.0), ("0.0 / a[k]", lambda a: 0.0 / a),
    ("a[k] - a[k]", lambda a: a - a), ("a[k] * 0.0 + 1.0", lambda a: a * 0.0 + 1.0),
])
def test_f64_products_with_zero_keep_nan_and_infinities(device, expr, want):
    """As f32's (test_wgsl_hunt6): llvmpipe folded x * 0 and x - x of f64 to 0 where numpy
    gives NaN for a NaN or infinite x; the largest and a subnormal f64 keep the zero's sign.
    An adapter without `shader-f64` (gl:0) says so, never a value computed in 32 bits."""
    src = _elementwise(expr)
    with np.errstate(all="ignore"):
        w = want(_EDGES64)
    if device == "gl:0":
        with pytest.raises(ZynMLError, match="shader-f64"):
            _host(zynbook.run(src, device=device, a=_EDGES64))
        return
    got = _host(zynbook.run(src, device=device, a=_EDGES64))
    assert got.dtype == np.float64
    assert_equals_numpy(got, w, 0)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))


_X = np.float32([1.5, -2.0, 3.0, 1.1])
_K = 3_000_000_001          # past i32: a host int read as i64


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, dtype, want", [
    ("x[i] * k", np.float32, lambda x, k: x * np.float32(k)),
    ("x[i] * k", np.float64, lambda x, k: x * np.float64(k)),
    ("x[i] * k", np.float16, lambda x, k: x * np.float16(k)),       # inf: past f16
    ("x[i] / k - 1.0", np.float32, lambda x, k: x / np.float32(k) - np.float32(1)),
    ("f32(k) + x[i]", np.float32, lambda x, k: np.float32(k) + x),
    ("f64(k) - x[i]", np.float32, lambda x, k: np.float64(k) - x.astype(np.float64)),
    ("(x[i] * 1e9 < k) * 1.0", np.float32,
     lambda x, k: (x * np.float32(1e9) < np.float32(k)).astype(np.float32)),
])
def test_a_host_int_past_i32_used_as_a_float(device, expr, dtype, want):
    """k = 3 * 10^9 + 1 converted to the float it meets, as numpy converts it (f32 rounds it
    to 3 * 10^9): WebGPU takes it as that float (it refused the host int past its 32-bit
    integers, though the program needs no integer)."""
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    x = _X.astype(dtype)
    with np.errstate(over="ignore"):
        w = want(x, _K)
    if device == "gl:0" and w.dtype == np.float64:
        with pytest.raises(ZynMLError, match="shader-f64"):
            _host(zynbook.run(src, device=device, x=x, k=_K))
        return
    got = _host(zynbook.run(src, device=device, x=x, k=_K))
    assert got.dtype == w.dtype, (got.dtype, w.dtype)
    assert_equals_numpy(got, w, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_int_past_i32_used_as_an_integer_too_is_still_refused(device):
    """k also in i64 arithmetic (k % 7): numpy's value where 64-bit integers exist, else
    the refusal naming k. (Products exact in f32: fused into the sum or not, equal.)"""
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * k + i64(k % 7)\n}\ny\n"
    x = np.float32([1.0, -2.0, 0.5])
    if device not in ("vulkan:0", "gl:0"):
        w = x * np.float32(_K) + np.float32(_K % 7)
        assert_equals_numpy(_host(zynbook.run(src, device=device, x=x, k=_K)), w, 0)
        return
    with pytest.raises(ZynMLError, match="`k` = 3000000001"):
        _host(zynbook.run(src, device=device, x=x, k=_K))


def _large_arguments():
    """f32 values of every magnitude from 2^14 to 2^127, both signs, with the edges."""
    mags = np.float32(2.0) ** np.linspace(14, 127, 3000).astype(np.float32)
    signs = np.where(_RNG.random(mags.size) < 0.5, -1, 1).astype(np.float32)
    edges = np.float32([1e8, -3e9, 1.2345e10, 7e12, 1e20, 3.4028235e38, -3.4028235e38,
                        2.0 ** 20, np.inf, -np.inf, np.nan, 0.5, -0.0])
    return np.concatenate([mags * signs, edges]).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
def test_trigonometry_of_large_arguments(device, fn):
    """llvmpipe's sin and cos reduce the argument in f32: from about 1.3e7 on every digit
    was lost (sin(3e9) was -1, numpy's 0.987). Arguments of 2^20 and more are reduced by
    Payne and Hanek's method in the WGSL prelude: within 2e-7 of numpy's f32 values (tan,
    which grows past 1 and doubles an error of its argument near its poles, within 4e-7
    relative: llvmpipe's own tan of small arguments is off by 1.4e-7)."""
    x = _large_arguments()
    got = _host(zynbook.run(_elementwise(f"{fn}(a[k])"), device=device, a=x))
    with np.errstate(invalid="ignore"):
        w = getattr(np, fn)(x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(w))
    ok = ~np.isnan(w)
    scale = np.maximum(1, np.abs(w[ok])) if fn == "tan" else 1
    tol = 4e-7 if fn == "tan" else 2e-7
    assert np.max(np.abs(got[ok].astype(np.float64) - w[ok]) / scale) < tol


_I64 = np.array([2 ** 31 - 1, 2 ** 31 - 1, -2 ** 31, 7, -2 ** 31 + 5, 12, -9], np.int64)
_ROWS = _RNG.integers(-2 ** 31, 2 ** 31, (3, 40)).astype(np.int64)
_ROWS[:, 0] = [2 ** 31 - 1, -2 ** 31, 0]
_ROWS[:, 1:] //= 40             # each row's sum fits 32 bits, its running sums may not


def _i64_block(body, inputs="x"):
    return f"let y = compute({inputs}) {{\n    for i in 0..r:\n        {body}\n}}\ny\n"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, arg, want", [
    ("out[i] = reduce(+, x)", _I64, lambda x: np.array([x.sum()] * 3)),
    ("out[i] = reduce(+, x[i])", _ROWS, lambda x: x.sum(1)),
    ("out[i] = reduce(max, x[i])", _ROWS, lambda x: x.max(1)),
    ("out[i] = reduce(min, x[i])", _ROWS, lambda x: x.min(1)),
    ("out[i] = reduce(+, x[i]) / 7 - 1", _ROWS, lambda x: np.trunc(x.sum(1) / 7).astype(np.int64) - 1),
    ("out[i] = max(reduce(+, x[i]), 0)", _ROWS, lambda x: np.maximum(x.sum(1), 0)),
    ("var s: i64 = 0\n        for j in 0..k:\n            s += x[i, j]\n            out[i, j] = s",
     _ROWS // 8, lambda x: np.cumsum(x, 1)),           # each running sum read, and fitting
    ("out[i] = min(reduce(max, x[i]), x[i, 1])", _ROWS, lambda x: np.minimum(x.max(1), x[:, 1])),
    ("var s: i64 = 5\n        for j in 0..k:\n            s -= x[i, j]\n        out[i] = s",
     _ROWS, lambda x: 5 - x.sum(1)),
    ("var s: i64 = 0\n        for j in 0..k:\n            s += x[i, j] * 2\n        out[i] = s",
     _ROWS.astype(np.int32), lambda x: (x * np.int32(2)).astype(np.int64).sum(1)),  # (i32 wraps)
])
def test_i64_sums_maxima_and_minima(device, body, arg, want):
    """An i64 sum, maximum or minimum of values that fit 32 bits, whose result fits them
    too, is numpy's on WebGPU: two 32-bit words, added with carry (the running sum of
    2^31 - 1 and 2^31 - 1 passes 32 bits), compared high word first (it was refused: an
    i64 local, or arithmetic that may leave 32 bits)."""
    r = 3
    k = arg.shape[-1]
    got = _host(zynbook.run(_i64_block(body), device=device, x=arg, r=r, k=k))
    assert_equals_numpy(got, want(arg).astype(np.int64), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, arg, want", [
    ("out[i] = reduce(+, x[i])", np.full((3, 4), 2 ** 31 - 1, np.int64), None),
    ("out[i] = reduce(max, x[i])", np.zeros((3, 0), np.int64), None),
])
def test_i64_results_past_32_bits(device, body, arg, want):
    """A sum past 32 bits (4 (2^31 - 1)), and the maximum of no values (-2^63): numpy's (the
    reference's) where 64-bit integers exist; on WebGPU, whose buffers hold 32 bits of an
    i64, the runtime error naming the line, never the low word."""
    src = _i64_block(body)
    if device not in ("vulkan:0", "gl:0"):
        ref = _host(zynbook.run(src, device="cpu", x=arg, r=3))
        w = arg.sum(1) if "+" in body else np.full(3, np.iinfo(np.int64).min)
        assert_equals_numpy(ref, w, 0)
        assert_equals_numpy(_host(zynbook.run(src, device=device, x=arg, r=3)), w, 0)
        return
    with pytest.raises(ZynMLError, match="line 3[\\s\\S]*past the 32 bits"):
        _host(zynbook.run(src, device=device, x=arg, r=3))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_an_argmax_along_a_row_past_the_loop_budget(device, op):
    """One thread finds a row's argmax along 600,000 columns: 75,000 steps of 8, past
    llvmpipe's budget of 65,535 iterations (a runtime error); the program built for the
    launch's sizes runs it 16 at a time."""
    m = _RNG.standard_normal((2, 600_000)).astype(np.float32)
    m[1, 599_990] = 9.0 if op == "argmax" else -9.0        # near the end
    src = f"let y = compute(m) {{\n    for i in 0..r:\n        out[i] = reduce({op}, m[i])\n}}\ny\n"
    got = _host(zynbook.run(src, device=device, m=m))
    assert_equals_numpy(got, getattr(m, op)(1), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_tanh_keeps_the_sign_of_zero(device):
    """tanh(-0.0) is -0.0 (numpy's): the WGSL polynomial near 0 added x to a product of
    the other sign, -0 + 0 = +0."""
    x = np.float32([-0.0, 0.0, -1e-30, 1e-30, -1e-40, 0.3, -0.3, np.nan])
    got = _host(zynbook.run(_elementwise("tanh(a[k])"), device=device, a=x))
    w = np.tanh(x)
    assert_equals_numpy(got, w, 1e-6)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))


@pytest.mark.parametrize("device", DEVICES)
def test_an_f16_product_is_rounded_once(device):
    """reduce(*) of f16 rows: numpy's prod (and the reference) multiply in f32 and round
    once; the compiled devices rounded each step to f16, off by 1% where the product is
    subnormal in f16 (5.603e-06 for numpy's 5.543e-06)."""
    m = np.random.default_rng(5).standard_normal((4, 9)).astype(np.float16)
    src = "let y = compute(m) {\n    for i in 0..r:\n        out[i] = reduce(*, m[i])\n}\ny\n"
    got = _host(zynbook.run(src, device=device, m=m))
    assert got.dtype == np.float16
    assert_equals_numpy(got, np.prod(m, axis=1), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_of_64_bit_integers(device, dtype, op):
    """The argmax of i64 and u64 rows (values their 32-bit buffers hold on WebGPU, ties
    first): the running best started at the i64's identity, -2^63, which no 32-bit local
    holds, and a u64 best had no 32-bit local at all ("cannot spell 64-bit integers")."""
    lo, hi = (-2 ** 31, 2 ** 31) if dtype == np.int64 else (0, 2 ** 32)
    m = _RNG.integers(lo, hi, (4, 9)).astype(dtype)
    m[1, 2] = m[1, 7] = m[1].max() if op == "argmax" else m[1].min()
    src = f"let y = compute(m) {{\n    for i in 0..r:\n        out[i] = reduce({op}, m[i])\n}}\ny\n"
    got = _host(zynbook.run(src, device=device, m=m))
    assert_equals_numpy(got, getattr(m, op)(1), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["max", "min", "+"])
def test_maxima_minima_and_sums_of_u64_rows(device, op):
    """reduce(max), reduce(min) and reduce(+) of u64 rows whose values fit the 32 bits
    WebGPU's buffers hold: a running maximum is a u32; a minimum (from 2^64 - 1, the
    minimum of no values) and a sum are held in two words, as an i64's (all three were
    'cannot spell 64-bit integers')."""
    m = _RNG.integers(0, 2 ** 32, (4, 9), dtype=np.uint64)
    if op == "+":
        m //= 16            # each row's sum fits 32 bits: 2^32 - 1
        m[:, 0] = 2 ** 32 - 1 - m[:, 1:].sum(1)
    src = f"let y = compute(m) {{\n    for i in 0..r:\n        out[i] = reduce({op}, m[i])\n}}\ny\n"
    got = _host(zynbook.run(src, device=device, m=m))
    want = m.sum(1) if op == "+" else getattr(m, op)(1)
    assert_equals_numpy(got, want, 0)
