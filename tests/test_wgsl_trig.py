"""sin, cos and tan of f32 arguments of every magnitude below 2^14 on every device,
against numpy: on WebGPU they are Cephes' polynomials on [-pi/4, pi/4] and on the argument
reduced by Payne and Hanek's method past it, the same digits on every adapter (NVIDIA's
Vulkan driver reduced in f32 and was off by 0.1 from 2^14 on)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()
_RNG = np.random.default_rng(7)


def _arguments():
    """Magnitudes from 2^-30 to 2^14, both signs, and the quadrants' edges."""
    mags = np.float32(2.0) ** np.linspace(-30, 14, 2000).astype(np.float32)
    signs = np.where(_RNG.random(mags.size) < 0.5, -1, 1).astype(np.float32)
    edges = np.float32([0.7853981, 0.7853982, 0.7853983, 1.5707963, 3.1415927, 4.712389,
                        -0.7853982, 100.0, 1e-45, 0.0, -0.0])
    return np.concatenate([mags * signs, _RNG.uniform(-7, 7, 500).astype(np.float32), edges])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
def test_trigonometry_below_2_to_the_14(device, fn):
    x = _arguments()
    src = f"let y = compute(a) {{\n    for k in 0..n:\n        out[k] = {fn}(a[k])\n}}\ny\n"
    got = np.asarray(zynbook.run(src, device=device, a=x))
    w = getattr(np, fn)(x.astype(np.float64))
    assert got.dtype == np.float32
    # tan grows past 1 and doubles an error of its argument near its poles
    scale = np.maximum(1, np.abs(w)) if fn == "tan" else 1
    err = np.abs(got.astype(np.float64) - w) / scale
    assert np.max(err) < (4e-7 if fn == "tan" else 2e-7), x[np.argmax(err)]
