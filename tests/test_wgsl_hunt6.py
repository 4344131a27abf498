"""WebGPU (llvmpipe's `vulkan:0`) against numpy, next to the reference and the C++ device:
i64 arithmetic on argmax positions bounded by the launch's sizes, GEMMs whose K passes
llvmpipe's budget of 65,535 loop iterations, and host ints past 32 bits."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_RNG = np.random.default_rng(61)
_M = _RNG.standard_normal((6, 9)).astype(np.float32)
_V = _RNG.standard_normal(11).astype(np.float32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _block(body, inputs="m, v", loop="for i in 0..r:"):
    return f"""let y = compute({inputs}) {{
    {loop}
        {body}
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("out[i] = reduce(argmax, m[i]) * 2", lambda: _M.argmax(1) * 2),
    ("out[i] = reduce(argmax, m[i]) * reduce(argmin, m[i])", lambda: _M.argmax(1) * _M.argmin(1)),
    ("let p = reduce(argmax, m[i])\n        out[i] = p * 2 + 1", lambda: _M.argmax(1) * 2 + 1),
    ("let p = reduce(argmin, m[i])\n        out[i] = p", lambda: _M.argmin(1)),
    ("let p = reduce(argmax, m[i]) + 1\n        out[i] = p * p", lambda: (_M.argmax(1) + 1) ** 2),
])
def test_arithmetic_on_a_row_argmax(device, body, want):
    """A position along a row of 9 is below 9: its arithmetic fits 32 bits at these sizes
    and is computed, an i64 as numpy's (WebGPU refused it: a position along some i32 axis
    may be 2^31 - 2, and an i64 local was no WGSL)."""
    got = zynbook.run(_block(body), device=device, m=_M, v=_V)
    w = want()
    assert_equals_numpy(_host(got), w, 0)
    assert str(got.dtype) in ("i64", "int64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("reduce(argmax, v) * 2", lambda: _V.argmax() * 2),
    ("reduce(argmax, m) + 1", lambda: _M.argmax() + 1),
    ("reduce(argmin, m) * 3 - 1", lambda: _M.argmin() * 3 - 1),
    ("reduce(argmax, v) + reduce(argmin, m)", lambda: _V.argmax() + _M.argmin()),
])
def test_arithmetic_on_a_whole_tile_argmax(device, expr, want):
    """The flat position in a whole 6 x 9 tile is below 54."""
    got = zynbook.run(_block(f"out[i] = {expr}", loop="for i in 0..1:"), device=device,
                      m=_M, v=_V)
    assert_equals_numpy(_host(got), np.array([want()], np.int64), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_an_argmax_product_past_32_bits_at_these_sizes(device):
    """A position below 11 times 3 * 10^8 may leave 32 bits: numpy's value where 64-bit
    integers exist, and on WebGPU where it fits 32 bits, else the ZynML error at its line."""
    src = _block("out[i] = reduce(argmax, v) * 300000000", loop="for i in 0..1:")
    want = np.array([_V.argmax() * 300000000], np.int64)
    if device not in ("vulkan:0", "gl:0") or want[0] < 2 ** 31:
        assert_equals_numpy(_host(zynbook.run(src, device=device, m=_M, v=_V)), want, 0)
        return
    with pytest.raises(ZynMLError) as err:
        _host(zynbook.run(src, device=device, m=_M, v=_V))
    assert "line 3" in str(err.value) and "32 bits" in str(err.value), str(err.value)


_MATMUL = """let C = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
C
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m, k, n", [(5, 65537, 2), (3, 131075, 1)])
def test_a_matmul_whose_k_passes_the_loop_budget(device, m, k, n):
    """llvmpipe quits a thread's loops after 65,535 iterations in all: the GEMM's K tile
    loop spent 9 a tile of 8 (its 8 steps a loop of their own), so K >= 65,536 failed the
    loop check. Small integers: every sum is exact in f32."""
    a = _RNG.integers(-2, 3, (m, k)).astype(np.float32)
    b = _RNG.integers(-2, 3, (k, n)).astype(np.float32)
    got = _host(zynbook.run(_MATMUL, device=device, A=a, B=b))
    assert_equals_numpy(got, a.astype(np.float64) @ b.astype(np.float64), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr", ["a[i] + k", "k * a[i]", "a[i] - k + 1"])
def test_a_host_int_past_i32_beside_a_tensor_is_named(device, expr):
    """k = 3 * 10^9 from the host is i64: numpy's sum where 64-bit integers exist; on
    WebGPU the refusal at the statement's line names `k` and its value (it said only
    "64-bit integer arithmetic")."""
    src = f"let y = compute(a) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    a = np.int32([1, -5, 7, 2 ** 31 - 1])
    k = 3_000_000_000
    if device not in ("vulkan:0", "gl:0"):
        want = eval(expr.replace("a[i]", "a.astype(np.int64)"), {"np": np, "a": a, "k": k})
        assert_equals_numpy(_host(zynbook.run(src, device=device, a=a, k=k)), want, 0)
        return
    with pytest.raises(ZynMLError) as err:
        _host(zynbook.run(src, device=device, a=a, k=k))
    text = str(err.value)
    assert "line 3" in text and "`k` = 3000000000" in text, text


_SUBNORMAL = np.array([1e-40, 1e-45, 5e-39, 3e-39, 2e-38, 1.0, 0.0], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("log(f[k])", np.log), ("log2(f[k])", np.log2),
    ("f[k] ** 0.5", lambda x: x ** 0.5), ("f[k] ** -0.25", lambda x: x ** -0.25),
    ("f[k] ** -1.0", lambda x: x ** -1.0), ("f[k] ** 1.5", lambda x: x ** 1.5),
])
def test_logarithms_and_powers_of_subnormal_numbers(device, expr, want):
    """llvmpipe's log, log2 and pow read a subnormal number as a normal one: log(1e-40)
    was -88.02 (numpy: -92.10), 1e-40 ** 0.5 was 7.7e-20 (numpy: 1e-20). Computed in
    float64 here and rounded to f32."""
    src = f"let y = compute(f) {{\n    for k in 0..n:\n        out[k] = {expr}\n}}\ny\n"
    with np.errstate(all="ignore"):
        w = want(_SUBNORMAL.astype(np.float64)).astype(np.float32)
    got = _host(zynbook.run(src, device=device, f=_SUBNORMAL))
    keep = np.ones(_SUBNORMAL.shape, bool)
    if _flushes_subnormals(device):     # WGSL lets an adapter read them as 0 (NVIDIA's does)
        keep = ~((_SUBNORMAL > 0) & (_SUBNORMAL < np.finfo(np.float32).tiny))
    np.testing.assert_allclose(got[keep], w[keep], rtol=1e-5, atol=0)     # relative: tiny values


def _flushes_subnormals(device) -> bool:
    """Whether `device` reads a subnormal f32 as 0 in arithmetic (1e-40 * 2 gives 0)."""
    src = "let y = compute(f) {\n    for k in 0..n:\n        out[k] = f[k] * 2.0\n}\ny\n"
    return float(_host(zynbook.run(src, device=device, f=np.array([1e-40], np.float32)))[0]) == 0.0


_RECURRENCE = """let y = compute(x) {
    for b in 0..bs:
        var s = 0.0
        var t = 0.0
        for j in 0..n:
            for c in 0..3:
                s = s * 0.5 + x[b, j, c]
            t += s
        out[b] = t
}
y
"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_long_sequential_loop_around_a_constant_one(device):
    """70,001 steps of a loop whose body is a loop of 3: 4 iterations of llvmpipe's budget
    a step, so it stopped at 65,535 in all; written out, the 3 are none and the long loop
    runs 8 steps at a time. Numpy's f32 steps (s * 0.5 is exact: fused or not, equal)."""
    x = _RNG.integers(-3, 4, (2, 70001, 3)).astype(np.float32)
    want = []
    for row in x:
        s, t = np.float32(0), np.float32(0)
        for v in row:
            for c in range(3):
                s = np.float32(s * np.float32(0.5) + v[c])
            t = np.float32(t + s)
        want.append(t)
    got = _host(zynbook.run(_RECURRENCE, device=device, x=x))
    assert_equals_numpy(got, np.array(want, np.float32), 1e-6)


_EDGES = np.array([1.0, np.nan, -np.inf, np.inf, 0.0, -0.0, -3.0], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("a[k] * 0.0", lambda a: a * np.float32(0)), ("0.0 * a[k]", lambda a: np.float32(0) * a),
    ("a[k] * -0.0", lambda a: a * np.float32(-0.0)), ("0.0 / a[k]", lambda a: np.float32(0) / a),
    ("a[k] - a[k]", lambda a: a - a), ("a[k] * 0.0 + 1.0", lambda a: a * np.float32(0) + 1),
])
def test_products_with_zero_keep_nan_and_infinities(device, expr, want):
    """llvmpipe's shader compiler folded x * 0, 0 / x and x - x to 0 (WGSL lets it assume
    no NaN or infinity): numpy's NaN for a NaN or infinite x, and the zero's sign."""
    src = f"let y = compute(a) {{\n    for k in 0..n:\n        out[k] = {expr}\n}}\ny\n"
    with np.errstate(all="ignore"):
        w = want(_EDGES)
    got = _host(zynbook.run(src, device=device, a=_EDGES))
    assert_equals_numpy(got, w, 0)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))
