"""The runtime features of the spec (devices, async, memory, tuning, fusion, placement, the
kernel library, the Jupyter kernel) on every local device, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()


# ---------------------------------------------------------------- transfers


@pytest.mark.parametrize("device", DEVICES)
def test_f64_data_moved_through_a_device_keeps_its_digits(device):
    # an adapter without shader-f64 held f64 buffers as f32: a round trip lost digits,
    # and host arithmetic on the tensor computed with them, reported as f64
    x = np.random.default_rng(1).standard_normal((3, 7)) + 1e-9
    back = zynbook.run('x.to_device(d).to_device("cpu")', x=x, d=device)
    assert np.asarray(back).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(back), x)
    scaled = zynbook.run("x.to_device(d).T * 3.0 + x.to_device(d).T", x=x, d=device)
    np.testing.assert_array_equal(np.asarray(scaled), x.T * 3.0 + x.T)


# ------------------------------------------------------------------ tuning


@pytest.mark.parametrize("text, seconds", [("nan", 60.0), ("NaN", 60.0), ("2.5", 2.5),
                                           ("soon", 60.0)])
def test_the_tuning_budget_variable_that_is_not_a_number_is_the_default(monkeypatch, text,
                                                                          seconds):
    # NaN compared false with the time spent, so it stopped no candidate at all
    from zynbook import tuning
    monkeypatch.setenv("ZYNBOOK_TUNE_BUDGET_S", text)
    assert tuning.DEFAULT_BUDGET_S == 60.0
    assert tuning.budget(None) == seconds
    assert tuning.budget(tuning.Settings(budget_s=3.0)) == 3.0
