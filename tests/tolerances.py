"""Tolerances for comparing ZynML results with numpy, per dtype and kind of computation.

Written once here and used by every CPU test; never tuned per test. `elementwise` covers
results that are a handful of operations per element; `reduction` covers sums, norms,
softmax and normalisation over rows; `contraction` covers matmuls, convolutions and
attention, whose error grows with the length of the inner sums.
"""
from __future__ import annotations

import numpy as np

TOLERANCES = {
    "f16": {"elementwise": (2e-3, 1e-3), "reduction": (1e-2, 1e-2), "contraction": (2e-2, 2e-2)},
    "f32": {"elementwise": (1e-5, 1e-6), "reduction": (1e-4, 1e-5), "contraction": (1e-4, 1e-4)},
    "f64": {"elementwise": (1e-12, 1e-14), "reduction": (1e-10, 1e-12),
            "contraction": (1e-10, 1e-10)},
}


def tolerance(dtype: str, kind: str = "elementwise") -> dict:
    """{"rtol": ..., "atol": ...} for results of `dtype` ("f32", np.float32, ...)."""
    name = {"float16": "f16", "float32": "f32", "float64": "f64"}.get(np.dtype(dtype).name) \
        if not isinstance(dtype, str) or dtype not in TOLERANCES else dtype
    rtol, atol = TOLERANCES[name][kind]
    return {"rtol": rtol, "atol": atol}


def assert_close(actual, expected, dtype="f32", kind="elementwise"):
    """`actual` (a Tensor, array or number) equals `expected` within the tolerance of its
    dtype and kind, with the same shape."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    assert_within(a, e, **tolerance(dtype, kind))


def assert_within(actual, expected, rtol, atol):
    """`actual` equals `expected` within these tolerances, both compared as float64."""
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol)
