"""Numeric semantics on every device against numpy: the sign of zero in max, min, relu and
clamp, integer and float powers by exponents read per element, and the elementwise
builtins at their edges."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

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
