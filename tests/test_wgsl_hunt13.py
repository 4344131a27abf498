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
