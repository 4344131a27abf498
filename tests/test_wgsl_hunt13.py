"""WebGPU (`vulkan:0`, `gl:0`) against numpy, next to the reference and the C++ device: i64
comparisons with a constant past 32 bits, a 64-bit local past the 32 bits WebGPU holds it
in, f32 gelu to a few ulp, and f64 exp, log, tanh and what builds on them where the adapter
has `shader-f64`."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zynbook
from compute_testing import raises, wanted_devices

DEVICES = wanted_devices()
_WEBGPU = ("vulkan", "gl", "webgpu", "browser")


def _run(device, src, /, **inputs):
    out = zynbook.run(src, device=device, **inputs)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


def _has_f64(device) -> bool:
    return "shader-f64" in next(d for d in zynbook.compute_devices() if d["id"] == device).get(
        "features", ())


# ------------------------------------------- i64 comparisons with a constant past 32 bits

_CMP = """let y = compute(x) {{
    for i in 0..n:
        out[i] = {left} {op} {right}
}}
y"""

_SIDES = [("i64(-3e9)", "i64(x[i])"), ("i64(x[i])", "i64(-3000000000)"),
          ("i64(x[i])", "i64(5000000000)"), ("i64(3e9)", "i64(x[i]) + 1")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
@pytest.mark.parametrize("sides", _SIDES)
def test_an_i64_comparison_with_a_constant_past_32_bits(sides, op, dtype, device):
    """Refused on WebGPU (`the WGSL dialect cannot spell 64-bit integers`) where the value
    was not provably within 32 bits (i64 of a float, i64 arithmetic) or the constant sat
    under a conversion (`i64(-3000000000)`): every value is held in 32 bits there, so it
    lies on one side of the constant, its own check still run."""
    x = (np.array([-2 ** 31, -5, 0, 7, 2 ** 31 - 1], np.int32) if dtype == "int32"
         else np.array([-2.1e9, -1.5, -0.0, 0.75, 1e9, 2.1e9], np.float32))
    left, right = sides
    src = _CMP.format(left=left, op=op, right=right)
    if dtype == "int32" and "+ 1" in right:
        x = x[:-1]          # i64(x[i]) + 1 of 2^31 - 1 is past 32 bits on WebGPU
    wide = lambda s: (np.float64(float(s[4:-1])) if s.startswith("i64(") and "x" not in s
                      else np.trunc(x.astype(np.float64)) + (1 if "+ 1" in s else 0))
    want = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}[op](wide(left), wide(right))
    got = _run(device, src, x=x)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.broadcast_to(want, x.shape))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["<", "==", "!="])
def test_an_i64_comparison_of_two_constants_past_32_bits(op, device):
    """Both sides constants, one past 32 bits: numpy's answer (WebGPU refused the constants)."""
    x = np.array([3, -4, 0], np.int32)
    src = _CMP.format(left="i64(-3e9)", op=op, right="i64(5000000000) and x[i] > 0")
    want = {"<": True, "==": False, "!=": True}[op] & (x > 0)
    np.testing.assert_array_equal(_run(device, src, x=x), want)


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(_WEBGPU)])
def test_an_i64_comparison_runs_the_check_of_its_value(device):
    """i64 of a float past 32 bits is a runtime error on WebGPU (it holds 64-bit integers in
    32 bits), not the answer a folded comparison would give."""
    src = _CMP.format(left="i64(-3e9)", op="<", right="i64(x[i])")
    err = raises("runtime", src, 3, 9, device=device, x=np.array([1.0, -2.9e9], np.float32))
    assert "past the 32 bits" in str(err)


# --------------------------------------------------- a 64-bit local past 32 bits on WebGPU

_LOCAL = """let y = compute(x) {
    for i in 0..n:
        var c = 3000000000
        c += x[i]
        out[i] = c
}
y"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_64_bit_local_from_a_constant_past_32_bits(device):
    """var c = 3000000000; c += x[i] is numpy's int64 sum; on WebGPU, which holds 64-bit
    integers in 32 bits, the values that come back within them are right and the others a
    runtime error naming `c` and what to write (it said a sum, maximum or minimum "of no
    values: its identity, as -2^63" was past them)."""
    x = np.array([-2 ** 31, -2 ** 31 + 5, 7, 2 ** 31 - 1], np.int32)
    want = np.int64(3000000000) + x.astype(np.int64)
    if not device.startswith(_WEBGPU):
        np.testing.assert_array_equal(_run(device, _LOCAL, x=x), want)
        return
    np.testing.assert_array_equal(_run(device, _LOCAL, x=x[:2]), want[:2])
    err = raises("runtime", _LOCAL, 5, 9, device=device, x=x)
    assert "the 64-bit integer `c` is past the 32 bits" in str(err)
    assert "var c: f64 = ..." in str(err) and "no values" not in str(err)
    if _has_f64(device):        # what it names runs
        src = _LOCAL.replace("var c = ", "var c: f64 = ")
        np.testing.assert_array_equal(_run(device, src, x=x), want.astype(np.float64))


_SERIAL = """let y = compute(x) {
    var c = 3000000000
    for i in 0..n:
        c += x[i]
    out[0] = c
}
y"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_64_bit_sum_from_a_constant_past_32_bits_in_one_block(device):
    """The block's loop adding into var c = 3000000000 is numpy's int64 sum; WebGPU, which
    holds the sum in two 32-bit words that no collective combines, runs the loop as written
    (it had no program: 'generic: no parallel loop to spread over threads'), a sum past 32
    bits a runtime error naming `c`."""
    for x in (np.array([-2 ** 31, -2 ** 31 + 7, 5], np.int32), np.full(1000, -3000000, np.int32)):
        want = np.int64(3000000000) + x.astype(np.int64).sum()
        np.testing.assert_array_equal(_run(device, _SERIAL, x=x), [want])
    x = np.array([1, 2], np.int32)
    if device.startswith(_WEBGPU):
        assert "the 64-bit integer `c` is past" in str(raises("runtime", _SERIAL, 5, 5, device=device, x=x))
    else:
        np.testing.assert_array_equal(_run(device, _SERIAL, x=x), [3000000003])


# ------------------------------------------------------------------- ulps against numpy

def _ulps(got, want):
    """The distance in units in the last place of `got` from `want` (same float dtype),
    0 where both are NaN; zeros of the two signs one apart."""
    bits = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    magnitude = (1 << (8 * got.dtype.itemsize - 1)) - 1

    def ordered(a):     # (Python ints: their differences are exact)
        i = a.view(bits).astype(np.int64)
        return np.where(i < 0, -(i & magnitude) - 1, i).astype(object)
    d = np.abs(ordered(got) - ordered(want)).astype(np.float64)
    d[np.isnan(got) & np.isnan(want)] = 0
    return d


def _assert_ulps(got, want, most, x):
    d = _ulps(got, want)
    k = int(np.argmax(d))
    assert d[k] <= most, f"{d[k]:.0f} ulp at x = {x[k]!r}: {got[k]!r}, numpy {want[k]!r}"
    zero = want == 0        # (a zero's sign as numpy's)
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=str(x[zero]))


# --------------------------------------------------------------------------- f32 gelu

_GELU = """let y = compute(x) {
    for i in 0..n:
        out[i] = gelu(x[i])
}
y"""


# (not cpu:native: its gelu is a faster approximation, kept to some 1e-6 of itself)
@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu:native"])
def test_f32_gelu_within_a_few_ulp(device):
    """gelu(x) = x / 2 * erfc(-x / sqrt(2)) (docs/language.md), numpy's float64 rounded to
    f32: WebGPU's erfc took -x / sqrt(2) rounded to f32, an error its slope 2 |x| multiplied
    (154 ulp near -13); now x / sqrt(2) has a low part."""
    rng = np.random.default_rng(13)
    x = np.concatenate([np.linspace(-12.5, 6, 40001), rng.standard_normal(4000) * 3,
                        [0.0, -0.0, 1e-30, -1e-30, 1e-3, 3e38, -3e38, -20.0, np.inf, -np.inf,
                         np.nan]]).astype(np.float32)
    x64 = x.astype(np.float64)
    erfc = np.frompyfunc(math.erfc, 1, 1)
    with np.errstate(invalid="ignore"):
        want = (0.5 * x64 * erfc(-x64 / math.sqrt(2.0)).astype(np.float64)).astype(np.float32)
    got = _run(device, _GELU, x=x)
    assert got.dtype == np.float32
    _assert_ulps(got, want, 8, x)


# ---------------------------------------------------------- f64 math on WebGPU's shader-f64

_F64 = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "tanh": np.tanh,
    "sinh": np.sinh, "cosh": np.cosh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "silu": lambda x: x / (1.0 + np.exp(-x)),
}
_ONE = """let y = compute(x) {{
    for i in 0..n:
        out[i] = {fn}(x[i])
}}
y"""


def _f64_values(fn):
    rng = np.random.default_rng(64)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 2.2250738585072014e-308,
             1.7976931348623157e308, 1.0, 2.0, 0.5, 1e-300, 1e-20, 1e-8, 0.625, 20.0, 22.0,
             354.0, 709.78, 709.79, 710.4, 710.5, 745.1, 745.2, 1023.5, 1074.0, 1075.0, 1e300]
    if fn in ("log", "log2"):
        return np.concatenate([np.exp(rng.uniform(-744, 709, 3000)), rng.uniform(0.5, 2, 3000),
                               1 + rng.standard_normal(500) * 1e-9, 2.0 ** np.arange(-1074, 1024, 7),
                               rng.uniform(0, 1e-305, 200), edges, np.negative(edges)])
    return np.concatenate([rng.uniform(-750, 750, 3000), rng.uniform(-2, 2, 3000),
                           rng.uniform(-1080, 1030, 500), rng.standard_normal(500) * 1e-8,
                           edges, np.negative(edges)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", sorted(_F64))
def test_f64_math_within_three_ulp_of_numpy(fn, device):
    """Refused on WebGPU with `shader-f64` (GLSL.std.450 has no 64-bit exp, log or tanh):
    fdlibm's exp and log as helpers, and what builds on them, within 3 ulp of numpy's
    float64, with subnormals, infinities, NaN and the zeros' signs; an adapter without
    `shader-f64` refuses f64."""
    x = _f64_values(fn)
    with np.errstate(all="ignore"):
        want = _F64[fn](x)
    src = _ONE.format(fn=fn)
    if device.startswith(_WEBGPU) and not _has_f64(device):
        assert "shader-f64" in str(raises("device", src, device=device, x=x))
        return
    got = _run(device, src, x=x)
    assert got.dtype == np.float64
    _assert_ulps(got, want, 3, x)


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(_WEBGPU)])
@pytest.mark.parametrize("call", ["sin(x[i])", "erf(x[i])", "gelu(x[i])", "pow(x[i], 2.5)"])
def test_f64_math_webgpu_lacked_runs_with_shader_f64(call, device):
    """What f64 shaders lack (sin, erf, gelu, pow) is computed where the adapter has
    `shader-f64` (tests/test_wgsl_hunt14.py: to a few ulp), never in f32; without it the
    kernel is refused, naming `shader-f64`."""
    src = _ONE.format(fn=call.split("(")[0]).replace(f"{call.split('(')[0]}(x[i])", call)
    x = np.array([0.5, 2.0])
    if not _has_f64(device):
        assert "shader-f64" in str(raises("device", src, device=device, x=x))
        return
    want = {"sin": np.sin(x), "erf": np.array([math.erf(v) for v in x]), "pow": x ** 2.5,
            "gelu": 0.5 * x * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x])}[call.split("(")[0]]
    _assert_ulps(_run(device, src, x=x), want, 2, x)
