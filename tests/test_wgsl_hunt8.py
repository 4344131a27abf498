"""WebGPU (llvmpipe's `vulkan:0` and `gl:0`) against numpy, next to the reference and the
C++ device: conversions of f64 to f16 and bf16."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr, inputs="a"):
    return f"let y = compute({inputs}) {{\n    for k in 0..n:\n        out[k] = {expr}\n}}\ny\n"


def _run_f64(src, device, **inputs):
    """The block's value; None where the adapter has no `shader-f64` and says so."""
    if device == "gl:0":
        with pytest.raises(ZynMLError, match="shader-f64"):
            _host(zynbook.run(src, device=device, **inputs))
        return None
    return _host(zynbook.run(src, device=device, **inputs))


_F64_TO_HALF = np.float64([
    1 + 2.0 ** -11 + 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40), 1 + 2.0 ** -11,
    2.0 ** -25 + 2.0 ** -60, 1.5 * 2.0 ** -24, 65519.99, 65520.0, 1e300, -1e40, -1e-300,
    np.nan, -np.inf, 3.0])


@pytest.mark.parametrize("device", DEVICES)
def test_f64_to_f16_is_rounded_once(device):
    """numpy rounds an f64 to the nearest f16: WebGPU went through the nearest f32, where a
    value just past a tie of f16's became the tie and then went to even (1 + 2^-11 + 2^-40
    gave 1, 2^-25 + 2^-60 gave 0). Now through f32 rounded to odd."""
    got = _run_f64(_elementwise("f16(a[k])"), device, a=_F64_TO_HALF)
    if got is not None:
        assert got.dtype == np.float16
        with np.errstate(over="ignore"):
            assert_equals_numpy(got, _F64_TO_HALF.astype(np.float16), 0)


def _torch_bf16(x):
    """torch's bf16 of an f64: through f32, as ZynBook's is."""
    torch = pytest.importorskip("torch")
    return torch.tensor(x).to(torch.bfloat16).to(torch.float32).numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_f64_to_bf16_compiles(device):
    """bf16(x) of an f64 x passed the f64 to the f32 rounding helper: the WGSL did not
    validate."""
    x = np.float64([1 + 2.0 ** -8 + 2.0 ** -40, 3.0, -2.5e-3, 1e300, 2.0 ** -130, np.nan])
    got = _run_f64(_elementwise("bf16(a[k])"), device, a=x)
    if got is not None:
        assert_equals_numpy(got, _torch_bf16(x), 0)


_NEG_INF_BASES = np.float32([-np.inf] * 8 + [-2.0, -0.5, np.inf, np.inf, -np.inf, -np.inf])
_EXPONENTS = np.float32([0.5, -0.5, 2.5, -1.5, 3.0, -3.0, 2.0, 1e30, 0.5, -2.5, 0.5, -0.5,
                         np.inf, -np.inf])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_minus_infinity_to_a_power_that_is_not_whole(device, dtype):
    """numpy's power (C's pow) of -inf to a power that is not a whole number is inf, or 0
    for a negative one; WebGPU gave NaN, as for a finite negative base."""
    with np.errstate(over="ignore"):      # 1e30 is inf in f16
        a, b = _NEG_INF_BASES.astype(dtype), _EXPONENTS.astype(dtype)
    src = "let y = compute(a, b) {\n    for k in 0..n:\n        out[k] = a[k] ** b[k]\n}\ny\n"
    with np.errstate(all="ignore"):
        w = np.power(a, b)
    got = _host(zynbook.run(src, device=device, a=a, b=b))
    assert got.dtype == dtype
    assert_equals_numpy(got, w, 0)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("exponent", ["2.5", "-0.5", "-1.5"])
def test_minus_infinity_to_a_literal_power(device, exponent):
    a = np.float32([-np.inf, -2.0, np.inf, 4.0])
    with np.errstate(all="ignore"):
        w = np.power(a, np.full(a.shape, float(exponent), np.float32))
    assert_equals_numpy(_host(zynbook.run(_elementwise(f"a[k] ** {exponent}"), device=device, a=a)), w, 0)


def _ulps(got, want):
    return np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))


def _exact_adapter(device) -> bool:
    """Whether `device` computes f32 as written: the CPU devices and llvmpipe. A GPU's
    driver may reorder float operations and flush subnormal results to 0 (NVIDIA's Vulkan
    driver does both), which WGSL allows."""
    from zynbook.backends.registry import get_device
    return device.startswith("cpu") or "llvmpipe" in getattr(get_device(device), "name", "")


def _flushed(device, want):
    """`want` as `device` gives it: where its results flush subnormals, 0 there."""
    if _exact_adapter(device) or device.startswith("cuda"):
        return want
    tiny = np.isfinite(want) & (np.abs(want) < np.finfo(want.dtype).tiny)
    return np.where(tiny, np.zeros_like(want), want)


@pytest.mark.parametrize("device", DEVICES)
def test_exp_near_and_below_the_smallest_normal(device):
    """exp(x) for x from -104.5 (0) through the subnormal results to where f32 overflows:
    WebGPU gave 0 for x in (-87, -86.99) (2^(n - 1) of the reduction was 0 there), llvmpipe's
    builtin flushed every subnormal result to 0 and was 28 ulp off near -87.3, and 32 ulp
    off near 88.72. Within 3 ulp of numpy's now, 1 where subnormal."""
    x = np.concatenate([np.linspace(-104.5, -86.5, 2001), np.linspace(88.5, 89.0, 101),
                        [-86.99, -87.336, -103.97, -103.28, 88.7228, -np.inf, np.inf,
                         np.nan]]).astype(np.float32)
    with np.errstate(over="ignore"):
        w = _flushed(device, np.exp(x))
    got = _host(zynbook.run(_elementwise("exp(a[k])"), device=device, a=x))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(w))
    np.testing.assert_array_equal(got == 0, w == 0)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(w))
    normal = np.isfinite(w) & (w >= np.float32(1.1754944e-38))
    assert _ulps(got[normal], w[normal]).max() <= 3
    tiny = np.isfinite(w) & ~normal
    assert _ulps(got[tiny], w[tiny]).max() <= 1


@pytest.mark.parametrize("device", DEVICES)
def test_exp2_of_subnormal_results(device):
    """exp2(x) for x below -126 is subnormal: llvmpipe's builtin flushed it to 0 (exp2(-140)
    was 0, not 7.2e-43). Against exp2 in f64 rounded once to f32 (from -149.4: numpy's f32
    exp2 gives 0 for 2^-149.99, whose nearest f32 is 2^-149, as the compiled devices')."""
    x = np.concatenate([np.linspace(-149.4, -120.0, 2941),
                        [-149.0, -150.1, -151.0, -126.0, 127.9, 128.0, -np.inf, np.inf, np.nan,
                         0.0]]).astype(np.float32)
    with np.errstate(over="ignore"):
        w = _flushed(device, np.exp2(x.astype(np.float64)).astype(np.float32))
    got = _host(zynbook.run(_elementwise("exp2(a[k])"), device=device, a=x))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(w))
    np.testing.assert_array_equal(got == 0, w == 0)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(w))
    finite = np.isfinite(w)
    assert _ulps(got[finite], w[finite]).max() <= 3       # the builtin's own error


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["log", "log2"])
def test_logarithms_between_a_quarter_and_four(device, fn):
    """llvmpipe's log was 14 ulp off from 0.8 to 0.94 (log2 8): the series around 1 now
    covers 0.7 to 1.0625. Within 4 ulp of the f64 logarithm rounded to f32 (cpu:native's
    log is 4 off somewhere; WebGPU's 3); a GPU driver that reorders the series' arithmetic
    (NVIDIA's Vulkan driver: 25 ulp) within 32."""
    x = np.concatenate([np.linspace(0.25, 4.0, 40001),
                        [0.7, 0.6999999, 1.0625, 1.0624999, 1.0, 0.99999994]]).astype(np.float32)
    w = getattr(np, fn)(x.astype(np.float64)).astype(np.float32)
    got = _host(zynbook.run(_elementwise(f"{fn}(a[k])"), device=device, a=x))
    assert got.dtype == np.float32
    assert _ulps(got, w).max() <= (4 if _exact_adapter(device) or device.startswith("cuda") else 32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sinh", "cosh"])
def test_sinh_and_cosh_from_one_to_nine(device, fn):
    """llvmpipe's sinh and cosh were 8 ulp off near 7.6: from exp now, within 3 ulp of the
    f64 values rounded to f32, as CUDA's sinhf (signs, infinities and NaN as numpy's)."""
    x = np.concatenate([np.linspace(-10.0, 10.0, 20001),
                        [1.0, -1.0, 9.0, -9.0, np.nan, np.inf, -np.inf]]).astype(np.float32)
    with np.errstate(over="ignore"):
        w = getattr(np, fn)(x.astype(np.float64)).astype(np.float32)
    got = _host(zynbook.run(_elementwise(f"{fn}(a[k])"), device=device, a=x))
    fin = np.isfinite(w)
    assert_equals_numpy(got[~fin], w[~fin], 0)
    assert _ulps(got[fin], w[fin]).max() <= 3


@pytest.mark.parametrize("device", DEVICES)
def test_powers_of_positive_bases_keep_their_digits(device):
    """a^b was exp(b * log(a)) (or the builtin, exp2(b * log2(a))): the product's rounding
    cost up to 86 ulp (0.0167^14.75, 6.5e-6 of itself), 2 ulp for 2^0.5, and the builtin
    flushed subnormal results (1.39e31^-1.218 was 0). Now 2^i * exp(t)
    with i the whole part of e * b's exact leading product: within 2 ulp of numpy's (half
    an ulp on average), and 2^0.5 and results past f32's ends (0, inf, subnormals) as numpy's."""
    rng = np.random.default_rng(81)
    a = np.exp(rng.uniform(-5.0, 5.0, 4000)).astype(np.float32)
    b = rng.uniform(-15.0, 15.0, 4000).astype(np.float32)
    ends = ([1.3919765e+31, 1e35, 2.0, 0.7, 0.7, 1e-40, 3.0, 1.0000001, 0.5, 10.0],
            [-1.2180284, -1.1, 0.5, 300.0, -300.0, 0.5, 80.5, 1e9, 149.5, -44.9])
    a = np.concatenate([a, np.float32(ends[0])])
    b = np.concatenate([b, np.float32(ends[1])])
    src = "let y = compute(a, b) {\n    for k in 0..n:\n        out[k] = a[k] ** b[k]\n}\ny\n"
    with np.errstate(over="ignore", under="ignore"):
        w = _flushed(device, np.power(_flushed(device, a), b))      # (1e-40 read as 0 there)
    got = _host(zynbook.run(src, device=device, a=a, b=b))
    np.testing.assert_array_equal(got == 0, w == 0)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(w))
    fin = np.isfinite(w)
    ulps = _ulps(got[fin], w[fin])
    # (NVIDIA's Vulkan driver, which reorders float arithmetic, left it 21 ulp off before the
    # steps of the double-f32 products were hidden from it)
    assert ulps.max() <= 2 and ulps.mean() <= 0.5
    assert got[-8] == w[-8]                                  # 2^0.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sine_keeps_the_sign_of_zero(device, dtype):
    """numpy's sin(-0.0) is -0.0; WebGPU's polynomial gave +0.0."""
    x = np.array([-0.0, 0.0, -1e-30, 1e-30, -0.5], dtype)
    with np.errstate(under="ignore"):
        w = np.sin(x)
    got = _host(zynbook.run(_elementwise("sin(a[k])"), device=device, a=x))
    assert_equals_numpy(got, w, 0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(w))


@pytest.mark.parametrize("device", DEVICES)
def test_exact_gelu_whose_values_are_subnormal(device):
    """gelu(x) from -13.8 to -13.25 is subnormal (3e-39 to 2e-42): WebGPU gave 0, as
    llvmpipe's exp flushed erfc's exp(-h * h) past -87.3. Within 1% of the f64 value (a
    subnormal keeps few digits)."""
    import math
    x = np.linspace(-13.8, -13.25, 551).astype(np.float32)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    got = _host(zynbook.run(_elementwise("gelu(a[k])"), device=device, a=x)).astype(np.float64)
    if not (_exact_adapter(device) or device.startswith("cuda")):
        want = np.zeros_like(want)          # (its results flush subnormals)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=0)
