"""Every program in examples/ run with its kernels as MSL on the Metal model (tests/metal_emu)
equals the CPU reference executor, launch by launch and in its final value."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from zynbook.backends import registry
from zynbook.errors import ZynMLError

from metal_emu import emulator as emu
from metal_emu.device import EmulatedMetalDevice

pytestmark = pytest.mark.skipif(shutil.which(emu.CXX) is None, reason="no C++ compiler")

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.zyn"))


def _value(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


@pytest.fixture
def device(monkeypatch):
    dev = EmulatedMetalDevice()
    devices = registry._discover()
    monkeypatch.setitem(devices, dev.id, dev)
    # `@device("auto")` is the Metal model, as on a Mac (a CUDA device here would take it)
    monkeypatch.setattr(registry, "best_device_id", lambda: dev.id)
    return dev


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_equals_cpu(device, path):
    import zynbook
    src = path.read_text()
    try:
        want = zynbook.run(src, device="cpu")
    except ZynMLError as exc:
        pytest.skip(f"does not run on the CPU reference either: {exc.message}")
    got = zynbook.run(src, device=device.id)
    assert not device.mismatches, device.mismatches
    if "compute(" in src:
        assert device.launches, "no kernel ran on the Metal model"
    if isinstance(want, (list, tuple)) or not hasattr(want, "__array__") and \
            not isinstance(want, (int, float)):
        return
    np.testing.assert_allclose(_value(got), _value(want), rtol=1e-4, atol=1e-5)
