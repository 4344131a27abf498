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
