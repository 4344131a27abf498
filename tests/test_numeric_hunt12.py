"""Numeric semantics on every device against numpy: the sign of zero in max, min, relu and
clamp, integer and float powers by exponents read per element, and the elementwise
builtins at their edges."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr, inputs="x, y"):
    return f"let r = compute({inputs}) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\nr\n"


def _no_f64(device, *dtypes):
    """Skip where the device has no f64 (WebGPU through OpenGL)."""
    if device.startswith("gl") and np.dtype(np.float64) in map(np.dtype, dtypes):
        pytest.skip("no shader-f64")


def _same_bits(got, want):
    """Equal values, NaN where numpy has NaN, and the same sign of every zero."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), (got, want)


_ZX = np.float32([-0.0, 0.0, -0.0, 0.0, 1.0, -1.0, np.nan])
_ZY = np.float32([0.0, -0.0, -0.0, 0.0, -0.0, 0.0, 0.0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("expr, want", [
    ("relu(x[i])", lambda x, y: np.maximum(x, x.dtype.type(0))),
    ("max(x[i], y[i])", lambda x, y: np.maximum(x, y)),
    ("min(x[i], y[i])", lambda x, y: np.minimum(x, y)),
    ("max(x[i], y[i], x[i])", lambda x, y: np.maximum(np.maximum(x, y), x)),
    ("min(x[i], -0.0)", lambda x, y: np.minimum(x, x.dtype.type(-0.0))),
    ("clamp(x[i], 0.0, 1.0)", lambda x, y: np.clip(x, x.dtype.type(0), x.dtype.type(1))),
    # numpy's clip by arrays gives the bound where x equals it (by a number, x): x always
    ("clamp(x[i], y[i], 1.0)", lambda x, y: np.minimum(x.dtype.type(1), np.maximum(y, x))),
    ("clamp(x[i], -1.0, y[i])", lambda x, y: np.minimum(y, np.maximum(x.dtype.type(-1), x))),
])
def test_sign_of_zero_in_max_min_relu_clamp(device, dtype, expr, want):
    """Of equal values max and min give the second, as numpy's maximum and minimum do
    (max(0.0, -0.0) is -0.0), relu(-0.0) is 0.0 (numpy's maximum(x, 0)) and clamp keeps x
    where it equals a bound, as numpy's clip: the C++ device gave the first of equal values
    (relu(-0.0) was -0.0) and every device's clamp(-0.0, 0.0, 1.0) was 0.0."""
    _no_f64(device, dtype)
    x, y = _ZX.astype(dtype), _ZY.astype(dtype)
    _same_bits(_host(zynbook.run(_elementwise(expr), device=device, x=x, y=y)), want(x, y))


def _ulps(got, want):
    """How many f32 spacings each of `got` is from numpy's `want` (0 where equal, NaN for NaN)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    with np.errstate(invalid="ignore"):
        far = np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(want), np.float32(1e-45)))
    far[(got == want) | np.isnan(got) & np.isnan(want)] = 0
    return far


def _flushes(device) -> bool:
    """Whether `device` may flush subnormal f32 to zero, as WGSL allows (NVIDIA's Vulkan
    driver does; the CPU devices, CUDA and llvmpipe keep them)."""
    if device.startswith(("cpu", "cuda")):
        return False
    from zynbook.backends.registry import get_device
    return "llvmpipe" not in getattr(get_device(device), "name", "")


def _flushed(device, v):
    """`v` as `device` holds it: subnormals a zero of their sign where it flushes them."""
    v = np.asarray(v, np.float32)
    if not _flushes(device):
        return v
    return np.where(np.abs(v) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), v), v)


def _numpy_power(device, x, e):
    """numpy's f32 power of the operands and the result as `device` holds them."""
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        return _flushed(device, np.power(_flushed(device, x), e))


def _power(device, x, e):
    return _host(zynbook.run(_elementwise("x[i] ** e[i]", "x, e"), device=device, x=x, e=e))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_integer_power_by_exponents_read_per_element(device, dtype):
    """`**` of integers by an exponent read per element gives f32 (docs), numpy's f32 power
    of the two: WebGPU took it through a logarithm, 7 ** 11 and 3 ** 20 3 and 4 ulp off."""
    x = np.int32([2, -3, 0, 1, -1, 7, 5, 12345, -2, 3, 0, 2, 10, -7]).astype(dtype)
    e = np.int32([10, 3, 0, 5, 7, 11, 13, 3, 31, 20, 5, 30, 9, 9]).astype(dtype)
    got = _power(device, x, e)
    assert got.dtype == np.float32
    with np.errstate(over="ignore"):
        assert _ulps(got, np.power(x.astype(np.float32), e.astype(np.float32))).max() <= 1


@pytest.mark.parametrize("device", DEVICES)
def test_float_power_by_whole_exponents_read_per_element(device):
    """A float to a whole power read per element is within one ulp of numpy's f32 power,
    large exponents of bases near 1, negative ones, results near overflow and in the
    subnormals too: WebGPU's logarithm was 3 to 20 ulp off (0.99918^-16833 by 2 in 1e5)."""
    rng = np.random.default_rng(12)
    x = (np.exp(rng.uniform(-6, 6, 400)) * rng.choice([-1, 1], 400)).astype(np.float32)
    e = rng.integers(-40, 40, 400).astype(np.float32)
    x[:100] = 1 + rng.uniform(-1e-3, 1e-3, 100)
    e[:100] = rng.integers(-20000, 20000, 100)
    edges = np.float32([[2, 127], [2, 128], [2, -126], [0.5, 149], [1e-40, 1], [1e-40, -1],
                        [3e-39, 2], [-2, 127], [-2, -149], [-1, 16777215], [-1, 16777214],
                        [10, 38], [10, -45], [0.1, 45], [1.5, 219], [1e30, 2], [1e-30, -2],
                        [-0.5, -149], [3.4e38, -1], [2, -150], [1e-45, -1], [65536, -9]])
    x, e = np.concatenate([x, edges[:, 0]]), np.concatenate([e, edges[:, 1]])
    far = _ulps(_power(device, x, e), _numpy_power(device, x, e))
    assert far.max() <= 1, (x[far > 1], e[far > 1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("expr, want", [
    ("x[i] + 0.0", lambda x: x + x.dtype.type(0)),
    ("0.0 + x[i]", lambda x: x.dtype.type(0) + x),
    ("0.0 - x[i]", lambda x: x.dtype.type(0) - x),
    ("-(0.0 - x[i])", lambda x: -(x.dtype.type(0) - x)),
    ("x[i] * 1.0 + 0.0", lambda x: x * x.dtype.type(1) + x.dtype.type(0)),
])
def test_adding_a_zero_gives_numpys_zero(device, dtype, expr, want):
    """x + 0.0 of -0.0 is 0.0 and 0.0 - x of 0.0 is 0.0, as numpy's: WebGPU's shader
    compiler folded x + 0.0 to x and 0.0 - x to -x, keeping -0.0 and giving it."""
    _no_f64(device, dtype)
    x = np.array([-0.0, 0.0, -0.0, np.nan, np.inf, -1.0, 2.5], dtype)
    _same_bits(_host(zynbook.run(_elementwise(expr, "x"), device=device, x=x)), want(x))


@pytest.mark.parametrize("device", DEVICES)
def test_float_power_by_fractional_exponents_read_per_element(device):
    """A positive float to any power read per element is within one ulp of numpy's f32
    power: WebGPU's log m in f32, times the exponent, left 0.696 ** -26.8 24 ulp off."""
    rng = np.random.default_rng(13)
    x = np.exp(rng.uniform(-80, 80, 300)).astype(np.float32)
    e = rng.uniform(-1, 1, 300).astype(np.float32)
    x[:100], e[:100] = rng.uniform(0, 5, 100), rng.uniform(-60, 60, 100)
    x[100:150], e[100:150] = 1 + rng.uniform(-1e-4, 1e-4, 50), rng.uniform(-1e5, 1e5, 50)
    edges = np.float32([[0.6964648, -26.823904], [0.0167, 14.75], [1e-40, 0.5], [1e-45, 0.25],
                        [3.4e38, 0.999], [3.4e38, 1.001], [10, 38.5], [10, -44.9], [4, -74.7],
                        [1.0000001, 1e8], [0.9999999, 1e8]])
    x, e = np.concatenate([x, edges[:, 0]]), np.concatenate([e, edges[:, 1]])
    far = _ulps(_power(device, x, e), _numpy_power(device, x, e))
    # (NVIDIA's Vulkan driver, which reorders float arithmetic as WGSL allows, left the
    # double-f32 products up to 7 ulp off before their steps were hidden from it)
    assert far.max() <= 1, (x[far > 1], e[far > 1])


def _fold(op, v):
    """A fold of numpy's maximum (minimum) in iteration order: of equal values the later."""
    return functools.reduce(np.maximum if op == "max" else np.minimum, v)


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith("cpu")])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("n, plus", [(2, [0]), (2, [1]), (7, [2, 5]), (17, [4]), (33, [20]),
                                      (1000, [3, 700])])
def test_max_and_min_reductions_of_zeros_keep_the_last_sign(device, op, n, plus):
    """A reduce(max) or reduce(min) of 0.0 and -0.0 is the loop as written, a fold of max:
    the last zero's sign. The reference took numpy's max, whose SIMD lanes give another
    (17 values, -0.0 but a 0.0 at 4: 0.0; the C++ device's loops -0.0). WebGPU's threads
    and subgroups combine in another order and may give either zero."""
    v = -np.zeros(n, np.float32)
    v[plus] = 0.0
    want = _fold(op, v)
    src = f"let r = compute(x) {{\n    @kernel reduce({op})\n    for i in 0..n:\n        yield x[i]\n}}\nr\n"
    loop = (f"let r = compute(x) {{\n    var m = {'-inf' if op == 'max' else 'inf'}\n"
            f"    for i in 0..n:\n        m = {op}(m, x[i])\n    out[0] = m\n}}\nr\n")
    for s in (src, loop):
        got = np.float32(_host(zynbook.run(s, device=device, x=v)).reshape(-1)[0])
        assert np.signbit(got) == np.signbit(want), (s, got, want)
