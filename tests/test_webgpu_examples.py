"""Every program in examples/ on the WebGPU device equals the CPU reference executor."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zynbook.backends.webgpu import discover
from zynbook.errors import ZynMLError

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.zyn"))
DEVICES = discover()

# Tolerances by the result's dtype, written once: relative and absolute, since values near
# zero (x0 * c - x1 * s in RoPE, say) differ from the reference by a few ulps of their
# operands, not of the result.
TOL = {"f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2), "f32": (1e-4, 1e-4), "f64": (1e-4, 1e-4)}
INT_TOL = (0, 0)


def _tol(value):
    dt = str(getattr(value, "dtype", ""))
    dt = {"float16": "f16", "float32": "f32", "float64": "f64"}.get(dt, dt)
    if dt in TOL:
        return TOL[dt]
    if isinstance(value, float):
        return TOL["f32"]
    if dt.startswith(("i", "u", "int", "uint", "bool")) or isinstance(value, int):
        return INT_TOL
    return TOL["f32"]


def _value(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


@pytest.mark.webgpu
@pytest.mark.skipif(not DEVICES, reason="no wgpu adapter")
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_equals_cpu(path):
    import zynbook
    src = path.read_text()
    try:
        want = zynbook.run(src, device="cpu")
    except ZynMLError as exc:
        pytest.skip(f"does not run on the CPU reference either: {exc.message}")
    got = zynbook.run(src, device=DEVICES[0].aliases[0])
    if isinstance(want, (list, tuple)) or not hasattr(want, "__array__") and \
            not isinstance(want, (int, float)):
        pytest.skip("the program's value is not a tensor or number")
    rtol, atol = _tol(want)
    np.testing.assert_allclose(_value(got), _value(want), rtol=rtol, atol=atol)
