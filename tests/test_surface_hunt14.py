"""The Python surface written from docs/api.md: the device interface's traced elementwise
kernels, compared with numpy written here on every device present."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLTypeError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [lambda xs: (xs[0] != 0.0) * 3.0,
                                lambda xs: 2.0 + (xs[0] == xs[1]),
                                lambda xs: (xs[0] == 1.0) + (xs[1] != 2.0)],
                         ids=["ne_times_number", "number_plus_eq", "eq_plus_ne"])
def test_python_equality_of_traced_values_meeting_a_number_is_refused(device, fn):
    """Python's `!=` of a traced value is a bool, and Python's arithmetic took it as a number
    before any expression saw it: `(x != 0.0) * 3.0` traced the constant 3.0, every element
    3.0 whatever x held. The comparison refuses at once and names equal / not_equal, whose
    kernel equals numpy's."""
    from zynbook.nn import expr as E
    x = np.array([0.0, -0.0, 1.5, np.nan, -2.0, 1.0, 7.0], np.float32)
    y = np.array([0.0, 2.0, 1.5, np.nan, 3.0, 1.0, 2.0], np.float32)
    dev = zynbook.device(device)
    bx, by = dev.upload(x), dev.upload(y)
    with pytest.raises(ZynMLTypeError) as info:
        dev.elementwise([bx, by], 7, fn)
    msg = info.value.message
    assert "not traced" in msg and "equal(a, b)" in msg and "not_equal(a, b)" in msg, msg
    got = dev.download(dev.elementwise([bx, by], 7,
                                       lambda xs: E.not_equal(xs[0], 0.0) * 3.0
                                       + E.equal(xs[0], xs[1])))
    assert_equals_numpy(_host(got), ((x != 0) * 3.0 + (x == y)).astype(np.float32), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [lambda xs: min(xs[0], 1.0), lambda xs: max(xs[0], xs[1])],
                         ids=["min", "max"])
def test_pythons_min_and_max_of_traced_values_name_minimum_and_maximum(device, fn):
    """Python's min() compares, so it asked for a truth value: the message named only
    where(cond, a, b); it names expr.maximum and minimum, whose kernel equals numpy's."""
    from zynbook.nn import expr as E
    x = np.array([0.5, 2.0, -3.0, 1.0], np.float32)
    y = np.array([1.5, -2.0, -1.0, 1.0], np.float32)
    dev = zynbook.device(device)
    bx, by = dev.upload(x), dev.upload(y)
    with pytest.raises(ZynMLTypeError) as info:
        dev.elementwise([bx, by], 4, fn)
    assert "maximum(a, b) and minimum(a, b)" in info.value.message
    got = dev.download(dev.elementwise([bx, by], 4,
                                       lambda xs: E.minimum(xs[0], 1.0) + E.maximum(xs[0], xs[1])))
    assert_equals_numpy(_host(got), np.minimum(x, 1.0) + np.maximum(x, y), 0)
