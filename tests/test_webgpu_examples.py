"""Every program in examples/ on the WebGPU device equals the CPU reference executor."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zynbook.backends.webgpu import discover
from zynbook.errors import ZynMLError

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.zyn"))
DEVICES = discover()


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
    np.testing.assert_allclose(_value(got), _value(want), rtol=1e-4, atol=1e-5)
