"""The kernel library and the compute-device interface at the edges: half-precision inputs
whose intermediate values leave f16's range, odd sizes, every device present; compared with
PyTorch (CPU) or numpy written here."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from zynbook import library
from zynbook.session import Session

torch = pytest.importorskip("torch")

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if not d["id"].startswith("gl:") and (not _WANTED or d["id"] == "cpu"
                                                 or d["id"] in _WANTED.split(","))]


def host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_half_rmsnorm_of_values_whose_squares_pass_f16_range(device):
    """rmsnorm of f16 values near 300 (squares past f16's 65504): computed in f32 as torch's
    rms_norm does. The reference squared the halves in f16, the sum was inf and every
    output 0."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 70)) * 300).astype(np.float16)
    w = rng.standard_normal(70).astype(np.float16)
    got = library.call("rmsnorm", Session(device), [x, w], {"eps": 1e-5})
    assert got.dtype == "f16"
    want = torch.nn.functional.rms_norm(torch.tensor(x).float(), (70,),
                                        torch.tensor(w).float(), 1e-5).half()
    np.testing.assert_allclose(host(got), want.double().numpy(), rtol=2e-3, atol=2e-3)
