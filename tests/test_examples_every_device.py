"""One test, every device: each program in examples/ on every device present equals the CPU
reference executor (the devices come from `compute_devices()`: `cpu:native`, wgpu adapters,
CUDA GPUs)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zynbook
from tolerances import assert_within, tolerance
from zynbook.errors import ZynMLError

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.zyn"))
DEVICES = [d["id"] for d in zynbook.compute_devices() if d["id"] != "cpu"]


def _dtype(value) -> str:
    if isinstance(value, bool) or isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "f32"
    return {"f16": "f16", "f64": "f64", "i32": "int", "i64": "int", "u32": "int",
            "bool": "int"}.get(getattr(value, "dtype", "f32"), "f32")


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_equals_cpu_reference(path, device):
    src = path.read_text()
    try:
        want = zynbook.run(src, device="cpu")
    except ZynMLError as exc:
        pytest.skip(f"does not run on the CPU reference either: {exc.message}")
    session = zynbook.Session(device=device)
    got = session.run(src)
    if "compute(" in src and "@device" not in src:
        assert {launch.device for launch in session.launches} == {device}
    if not isinstance(want, (int, float, zynbook.Tensor)):
        return          # records, lists: the devices example
    dtype = _dtype(want)
    if dtype == "int":
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    else:
        # the loosest tolerance of the dtype: these programs hold matmuls and attention
        assert_within(got, want, **tolerance(dtype, "contraction"))


AUTO_EXAMPLES = [p for p in EXAMPLES if '@device("auto")' in p.read_text()]


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", AUTO_EXAMPLES, ids=[p.stem for p in AUTO_EXAMPLES])
def test_example_runs_where_auto_is_another_device(path, device):
    """Programs that name @device("auto") run the same on a machine whose best device is
    not the CPU (each device present stands in for it): placement never refuses them."""
    src = path.read_text()
    try:
        want = zynbook.run(src, device="cpu")
    except ZynMLError as exc:
        pytest.skip(f"does not run on the CPU reference either: {exc.message}")
    got = zynbook.run(src.replace('@device("auto")', f'@device("{device}")'), device="cpu")
    if isinstance(want, (int, float, zynbook.Tensor)):
        dtype = _dtype(want)
        assert_within(got, want, **tolerance(dtype if dtype != "int" else "f32", "contraction"))
