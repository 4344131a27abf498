"""Mistakes inside the function that `Device.elementwise` traces are ZynML type errors saying
what to write instead, never another library's exception from the middle of the trace; the
device stays usable (the next call against numpy written here)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from zynbook.errors import ZynMLTypeError
from zynbook.nn import expr as E

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "gl:"))]

MISTAKES = {
    "and_of_comparisons": (lambda v: (v[0] > 0.0) & (v[1] > 0.0), "where"),
    "or_of_comparisons": (lambda v: (v[0] > 0.0) | (v[1] > 0.0), "where"),
    "not_of_a_comparison": (lambda v: ~(v[0] > 0.0), "where"),
    "shift": (lambda v: v[0] << 1, "where"),
    "round": (lambda v: round(v[0]), "round"),
    "floor": (lambda v: __import__("math").floor(v[0]), "zynbook.nn.expr"),
    "torch_function": (lambda v: torch.exp(v[0]), "zynbook.nn.expr"),
    "huge_constant": (lambda v: v[0] * 10 ** 400, "too large"),
    "huge_result": (lambda v: 10 ** 400, "too large"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_in_the_traced_function_is_a_type_error(device, name):
    fn, says = MISTAKES[name]
    x = np.array([-1.5, 0.0, 2.0, 3.5], np.float32)
    y = np.array([1.0, -2.0, 0.5, 0.0], np.float32)
    dev = zynbook.device(device)
    bx, by = dev.upload(x), dev.upload(y)
    with pytest.raises(ZynMLTypeError) as info:
        dev.elementwise([bx, by], 4, fn)
    assert says in str(info.value)
    # what the message points to computes the same thing
    got = dev.elementwise([bx, by], 4, lambda v: E.where(v[0] > 0.0, E.where(v[1] > 0.0, 1.0, 0.0), 0.0))
    np.testing.assert_array_equal(dev.download(got), ((x > 0) & (y > 0)).astype(np.float32))
