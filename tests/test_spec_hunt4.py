"""Programs written from the spec's text (zynml-compute-system.md, compute-device-trait.rs)
and docs/language.md as an outside tester writes them, with names, dtypes and sizes the
existing tests do not use. Each runs on every device present (the CPU reference included)
and is compared with numpy written here; mistakes are ZynML errors with a caret."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(4144)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


_SMALL = np.float32([1e-8, -1e-6, 1e-5, -1e-4, 1e-3, -3e-3, 1e-2, -0.1, 0.3, -0.6, 0.7, -0.99,
                     1.2, -2.5])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, ref", [("tanh", np.tanh), ("sinh", np.sinh),
                                     ("erf", np.vectorize(math.erf))])
def test_odd_functions_keep_their_digits_near_zero(fn, ref, device):
    """tanh, sinh and erf of small values to f32's precision of the value itself: WebGPU's
    tanh and sinh (quotients of exponentials) and its erf (Abramowitz-Stegun, an absolute
    error of 1.5e-7) kept only the absolute error, so tanh(1e-4) was off by 2e-4 of itself,
    erf(1e-4) by 1e-3 and tanh(1e-8) was 3e-8."""
    got = zynbook.Session(device).run(
        f"let y = compute(x) {{\n    for k in 0..n:\n        out[k] = {fn}(x[k])\n}}\ny\n", x=_SMALL)
    want = ref(_SMALL.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=0)
