"""f64 sin, cos, tan, erf, gelu and pow on every device against numpy (the C library's erf,
mpmath where numpy itself is off): WebGPU adapters with `shader-f64` refused them by name
(GLSL.std.450 has none in 64 bits) and now compute them as helpers in f64 arithmetic;
adapters without `shader-f64` refuse f64 kernels, naming it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from compute_testing import raises, wanted_devices
from test_wgsl_hunt13 import _WEBGPU, _assert_ulps, _has_f64, _run, _ulps

DEVICES = wanted_devices()
_ONE = """let y = compute(x) {{
    for i in 0..n:
        out[i] = {call}
}}
y"""
_TWO = """let y = compute(a, b) {{
    for i in 0..n:
        out[i] = {call}
}}
y"""


def _refused_without_f64(device, src, **inputs) -> bool:
    """True (the refusal checked) where `device` is a WebGPU adapter without `shader-f64`."""
    if device.startswith(_WEBGPU) and not _has_f64(device):
        assert "shader-f64" in str(raises("device", src, device=device, **inputs))
        return True
    return False


def _edges():
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.2250738585072014e-308,
                     1e-300, 1e-20, 1e-8, 0.5, 0.7853981633974483, 0.7853981633974484, 1.0,
                     1.5707963267948966, 3.141592653589793, 1e5, 1e9, 1e22, 2.0 ** 1023,
                     1.7976931348623157e308])


# ------------------------------------------------------------------------ sin, cos, tan

_TRIG = {"sin": np.sin, "cos": np.cos, "tan": np.tan}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", sorted(_TRIG))
def test_f64_trigonometry_within_a_few_ulp_of_numpy(fn, device):
    """Every finite x is reduced by pi/2 exactly (Payne and Hanek's reduction in integers:
    x times 192 bits of 2/pi from x's exponent on), so the result stays within 2 ulp
    up to 1.8e308; the zeros keep their sign, infinities and NaN give NaN."""
    rng = np.random.default_rng(14)
    x = np.concatenate([rng.uniform(-10, 10, 3000), rng.uniform(-1e5, 1e5, 2000),
                        rng.uniform(-1e9, 1e9, 2000), 10.0 ** rng.uniform(-300, 308, 2000)
                        * rng.choice([-1.0, 1.0], 2000), _edges(), -_edges()])
    src = _ONE.format(call=f"{fn}(x[i])")
    if _refused_without_f64(device, src, x=x):
        return
    with np.errstate(invalid="ignore"):
        want = _TRIG[fn](x)
    got = _run(device, src, x=x)
    assert got.dtype == np.float64
    # (cpu:native's loops call the vectorised C library, within 4 ulp of numpy's)
    _assert_ulps(got, want, 4 if device == "cpu:native" else 2, x)


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(_WEBGPU)])
@pytest.mark.parametrize("fn", sorted(_TRIG))
def test_f64_trigonometry_near_multiples_of_half_pi(fn, device):
    """The reduction's hard cases, the doubles nearest k pi/2 (a result of 1e-16 of its
    argument and less: the bits of x pi/2 cancel), against mpmath's exact value; numpy's own
    cos of 6381956970095103 * 2^797, the double nearest a multiple of pi/2, is 8 ulp off."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(1414)
    k = np.concatenate([np.arange(1.0, 300.0), rng.integers(1, 2 ** 52, 300).astype(np.float64)])
    near = k * (np.pi / 2)
    x = np.concatenate([near, np.nextafter(near, 0), np.nextafter(near, np.inf),
                        [6381956970095103 * 2.0 ** 797, -6381956970095103 * 2.0 ** 797]])
    src = _ONE.format(call=f"{fn}(x[i])")
    if _refused_without_f64(device, src, x=x):
        return
    mpmath.mp.prec = 1300
    want = np.array([float(getattr(mpmath, fn)(mpmath.mpf(v))) for v in x])
    _assert_ulps(_run(device, src, x=x), want, 2, x)


# ---------------------------------------------------------------------------- erf, gelu

@pytest.mark.parametrize("device", DEVICES)
def test_f64_erf_within_two_ulp_of_the_c_library(device):
    """fdlibm's erf (rationals below 1.25, exp(-x^2 - 0.5625 + R / S) / x past it, x^2 split
    so that its square is exact), against C's erf (numpy has none)."""
    rng = np.random.default_rng(15)
    x = np.concatenate([np.linspace(-7, 7, 4001), rng.standard_normal(2000) * 2,
                        rng.uniform(1.2, 6.5, 1000), _edges(), -_edges()])
    src = _ONE.format(call="erf(x[i])")
    if _refused_without_f64(device, src, x=x):
        return
    want = np.array([math.erf(v) for v in x])
    _assert_ulps(_run(device, src, x=x), want, 2, x)


@pytest.mark.parametrize("device", DEVICES)
def test_f64_gelu_within_a_few_ulp(device):
    """gelu(x) = x / 2 erfc(-x / sqrt(2)) (docs/language.md) against mpmath's exact value:
    WebGPU takes -x / sqrt(2) in two parts (its rounding, times erfc's slope 2 |x|, would be
    some 900 ulp at -30) and keeps a subnormal result's digits, within 3 ulp down to -39;
    the compiled devices and the reference round x / sqrt(2) first, an error that grows as
    x^2 (allowed for them: 4 + 2 x^2 ulp)."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(16)
    x = np.concatenate([np.linspace(-39, 8, 2351), rng.standard_normal(1500) * 3,
                        [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e300, -1e300, np.inf, np.nan]])
    src = _ONE.format(call="gelu(x[i])")
    if _refused_without_f64(device, src, x=x):
        return
    mpmath.mp.prec = 160

    def exact(v):
        if v == 0 or not abs(v) < 1e10:     # (numpy's: -0.0 stays -0.0, inf gives inf)
            with np.errstate(invalid="ignore"):
                return 0.5 * v * math.erfc(-v / math.sqrt(2.0))
        return float(mpmath.mpf(v) / 2 * mpmath.erfc(-mpmath.mpf(v) / mpmath.sqrt(2)))
    want = np.array([exact(v) for v in x])
    got = _run(device, src, x=x)
    if device.startswith(_WEBGPU):
        _assert_ulps(got, want, 3, x)
        return
    d = _ulps(got, want)
    allowed = np.where(np.abs(x) < 40, 4 + 2 * np.minimum(x * x, 1600), 4)
    k = int(np.argmax(d - allowed))
    assert d[k] <= allowed[k], f"{d[k]:.0f} ulp at x = {x[k]!r}: {got[k]!r}, exact {want[k]!r}"


# -------------------------------------------------------------------------------- pow

def _pow_pairs():
    rng = np.random.default_rng(17)
    n = 3000
    a = np.concatenate([rng.uniform(0, 3, n), np.exp(rng.uniform(-700, 700, n)), rng.uniform(-5, 5, n),
                        rng.integers(-20, 20, n).astype(np.float64), 1 + rng.standard_normal(n) * 1e-6])
    b = np.concatenate([rng.uniform(-30, 30, n), rng.uniform(-1, 1, n), rng.integers(-40, 40, n).astype(np.float64),
                        rng.integers(-300, 300, n).astype(np.float64), rng.uniform(-1e8, 1e8, n)])
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 1.5, -2.5, np.inf, -np.inf, np.nan,
               1e-310, -1e-310, 1e300, -1e300, 2.0 ** 31, 2.0 ** 53, 2.0 ** 64, 1e20]
    sa, sb = np.meshgrid(special, special)
    return np.concatenate([a, sa.ravel()]), np.concatenate([b, sb.ravel()])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("call", ["pow(a[i], b[i])", "a[i] ** b[i]"])
def test_f64_pow_within_two_ulp_of_numpy(call, device):
    """numpy's power (C's pow): exp(b log a) with log a and the product in two parts (a
    rounded log, times b, loses up to 700 times its last digit), whole exponents by
    squaring in two parts; zeros, infinities, NaN, negative bases and their signs as
    numpy's (exactly where it is 0, 1, an infinity or NaN)."""
    a, b = _pow_pairs()
    src = _TWO.format(call=call)
    if _refused_without_f64(device, src, a=a, b=b):
        return
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    got = _run(device, src, a=a, b=b)
    assert got.dtype == np.float64
    _assert_ulps(got, want, 2, np.rec.fromarrays([a, b]))
    exact = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    np.testing.assert_array_equal(got[exact], want[exact])
    signed = exact & ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


@pytest.mark.parametrize("device", DEVICES)
def test_f64_whole_powers_that_f64_holds_are_exact(device):
    """A whole power whose value f64 holds exactly (3^33, 10^22, 2^-1074, (-7)^17,
    0.5^-1000) is that value, as Python's exact integer and fraction arithmetic gives it
    (others within an ulp of it);
    by a logarithm it was a few ulp off."""
    from fractions import Fraction
    pairs = [(3, 33), (10, 22), (7, 18), (-7, 17), (-3, 5), (2, -1074), (0.5, -1000), (1.5, 40),
             (-1.25, 33), (9, 16), (0.1, 0), (5, -3), (-2, -1021), (1.0000001, 2)]
    a = np.array([float(p) for p, _ in pairs])
    b = np.array([float(e) for _, e in pairs])
    src = _TWO.format(call="pow(a[i], b[i])")
    if _refused_without_f64(device, src, a=a, b=b):
        return
    exact = [Fraction(p) ** e for p, e in pairs]
    want = np.array([float(v) for v in exact])
    held = np.array([Fraction(w) == v for w, v in zip(want, exact)])
    got = _run(device, src, a=a, b=b)
    np.testing.assert_array_equal(got[held], want[held])
    # the others (1.5^40, (-1.25)^33, 5^-3, 1.0000001^2) within an ulp (CUDA's pow is not
    # correctly rounded)
    _assert_ulps(got[~held], want[~held], 1, np.rec.fromarrays([a[~held], b[~held]]))


@pytest.mark.parametrize("device", DEVICES)
def test_f64_power_by_constants(device):
    """x ** 2.5 and x ** 0.5 of an f64 x (`** in 64 bits` was refused on WebGPU): a scalar
    0.5 is numpy's sqrt (-0.0 stays -0.0, -inf gives NaN), others C's pow."""
    x = np.array([0.0, -0.0, 2.0, 0.25, 1e-300, 1e300, np.inf, -np.inf, -2.0, np.nan, 7.5])
    src = _ONE.format(call="x[i] ** 2.5 + x[i] ** 0.5")
    if _refused_without_f64(device, src, x=x):
        return
    with np.errstate(all="ignore"):
        want = np.power(x, 2.5) + np.power(x, 0.5)
    _assert_ulps(_run(device, src, x=x), want, 1, x)


# ------------------------------------------------------------------- the WGSL program

def test_f64_math_helpers_are_emitted_only_where_used():
    """Each f64 helper is in the WGSL of a kernel that calls it, and nothing more: sin brings
    the reduction and its kernels, not erf's or pow's tables."""
    from compute_testing import lower_block
    from zynbook.compiler.codegen import wgsl
    from zynbook.compiler.codegen.wgsl import WGSLOptions

    def source(call):
        k, *_ = lower_block(_ONE.format(call=call), {"x": np.ones(4)})
        return wgsl.render(k, WGSLOptions(f64=True)).source
    sin = source("sin(x[i])")
    assert "fn zyn_sin_f64(" in sin and "fn zyn_reduce_pio2_f64(" in sin
    assert "zyn_erf" not in sin and "zyn_pow" not in sin and "zyn_cos_f64" not in sin
    power = source("pow(x[i], 1.5)")
    assert "fn zyn_pow_f64(" in power and "fn zyn_log_dd_f64(" in power
    assert "reduce_pio2" not in power and "zyn_erf" not in power
    gelu = source("gelu(x[i])")
    assert "fn zyn_gelu_f64(" in gelu and "fn zyn_erfc_tail_f64(" in gelu and "zyn_pow" not in gelu


def _powers_to_check():
    """Whole powers: the exact ones above, overflow and underflow edges, subnormal results,
    exponents near 2^31, and random bases of every size with exponents of every sign."""
    pairs = [(3, 33), (10, 22), (7, 18), (-7, 17), (-3, 5), (2, -1074), (0.5, -1000), (9, 16),
             (5, -3), (-2, -1021), (2, 1024), (2, 1023), (0.5, 1075), (-0.5, 1075), (-0.5, 1074),
             (1e300, 2), (1e-300, 2), (1e-300, -2), (3, -700), (1.0000001, 2 ** 30 + 1),
             (0.9999999, 2 ** 31 - 1), (-1, 2 ** 31 - 1), (-1.0000000001, 2 ** 31 - 1)]
    rng = np.random.default_rng(19)
    pairs += [(float(v), int(e)) for v, e in zip(rng.uniform(-5, 5, 600), rng.integers(-300, 300, 600))]
    pairs += [(float(v), int(e)) for v, e in zip(np.exp(rng.uniform(-700, 700, 600)),
                                                  rng.integers(-3, 4, 600)) if e]
    return pairs


def test_cuda_f64_whole_powers_are_correctly_rounded_as_host_code():
    """CUDA's f64 pow of a whole exponent is the helper's squaring in two parts (CUDA's own
    pow gave 9^16 an ulp off). Its source, compiled for the host (it is plain C++ math), is
    mpmath's power at 200 bits rounded to f64, on every pair: overflow, underflow
    and signs included; and nvcc compiles the kernel that calls it."""
    import shutil
    import subprocess

    mpmath = pytest.importorskip("mpmath")
    from zynbook.compiler.codegen.dialects.cuda import CUDA_HELPERS
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "pow.cpp")
        src.write_text("#include <cmath>\n#include <cstdio>\nusing namespace std;\n"
                       + CUDA_HELPERS["zyn_pow_f64"][0].format(q="static inline ")
                       + '\nint main() { double a, b; while (scanf("%lf %lf", &a, &b) == 2) '
                       'printf("%a\\n", zyn_pow_f64(a, b)); }\n')
        subprocess.run([cxx, "-O2", "-o", str(Path(tmp, "pow")), str(src)], check=True)
        pairs = _powers_to_check()
        out = subprocess.run([str(Path(tmp, "pow"))], input="".join(f"{float(a)!r} {float(b)!r}\n" for a, b in pairs),
                             capture_output=True, text=True, check=True).stdout.split()
    mpmath.mp.prec = 200
    for (a, b), text in zip(pairs, out):
        exact = mpmath.power(mpmath.mpf(a), b)
        want = float(exact) if abs(exact) < mpmath.mpf(2) ** 1024 else math.copysign(math.inf, exact)
        got = float.fromhex(text)
        assert got == want, (a, b, got, want)
    import nvcc_runs
    if nvcc_runs.NVCC is not None:
        from compute_testing import lower_block

        from zynbook.compiler.codegen.cuda import render_cuda
        a = np.array([9.0, 2.0]); b = np.array([16.0, 0.5])
        k, _, sz, _ = lower_block(_TWO.format(call="a[i] ** b[i]"), {"a": a, "b": b})
        prog = render_cuda(k, sz)
        assert "zyn_pow_f64" in prog.source
        res = nvcc_runs.run(prog.source, ("--ptx", "-arch=sm_90"))
        assert res.returncode == 0, res.stderr[-4000:]
