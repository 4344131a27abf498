"""Edge values of float arithmetic on every device present (WebGPU on llvmpipe, the C++
device, the reference): expressions of constants that overflow, next to values that are
infinite or NaN, compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_F = np.array([1.0, -1.5, 0.0, np.inf, -np.inf, np.nan], np.float32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr):
    return f"""let y = compute(f) {{
    @kernel elementwise
    for k in 0..n:
        out[k] = {expr}
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, numpy_expr", [
    ("f[k] + 3e38 * 3.0", "f + np.float32(3e38) * np.float32(3.0)"),
    ("f[k] - 3e38 * 3.0", "f - np.float32(3e38) * np.float32(3.0)"),
    ("2e38 * 2.0 + f[k]", "np.float32(2e38) * np.float32(2.0) + f"),
])
def test_a_product_of_constants_past_f32_added_to_a_value(device, expr, numpy_expr):
    """3e38 * 3.0 is f32's infinity, so -inf + 3e38 * 3.0 is NaN as numpy has it: the C++
    device compiled x + 3e38f * 3.0f into one fma, whose product is not rounded (9e38), and
    gave -inf."""
    with np.errstate(all="ignore"):
        want = eval(numpy_expr, {"np": np, "f": _F}).astype(np.float32)
    got = _host(zynbook.run(_elementwise(expr), device=device, f=_F))
    assert_equals_numpy(got, want, 1e-6)


_HALF = np.array([-17.0, -15.0, -12.0, -11.5, -10.0, -3.0, 0.0, 2.0, 11.5, 17.0], np.float16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, numpy_fn", [
    ("silu", lambda x: x / (1 + np.exp(-x))),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
])
def test_half_activations_past_where_exp_leaves_the_half_range(device, fn, numpy_fn):
    """silu and sigmoid of f16 values below -11.1, where exp(-x) is past f16's range: the
    reference computed them in f16 steps and gave 0 (silu(-12) for -7.4e-5, a normal half),
    in compute blocks and on tensors outside them, where the compiled devices compute in f32
    and round once; computed in float64 here and rounded to f16."""
    want = numpy_fn(_HALF.astype(np.float64)).astype(np.float16).astype(np.float64)
    got = zynbook.run(_elementwise(f"{fn}(f[k])"), device=device, f=_HALF)
    assert got.dtype == "f16"
    np.testing.assert_allclose(_host(got).astype(np.float64), want, rtol=1e-3, atol=6e-8)
    got = zynbook.run(f"{fn}(f)", device=device, f=_HALF)
    assert got.dtype == "f16"
    np.testing.assert_allclose(_host(got).astype(np.float64), want, rtol=1e-3, atol=6e-8)
