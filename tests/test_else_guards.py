"""An output written in an `else` branch, or under `not (...)`, takes its extent from the
guard as `if i + 2 < n: out[i] = ...` does: the failing condition of the `if` bounds the
index (it was n elements, the last two never written), and at sizes where no value passes
the guard the output is empty (not 'out's axis would have -1 elements'). Against numpy on
every device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

BODIES = {
    "if_then": ("if i + 2 < n:\n            out[i] = x[i] + x[i + 2]", 0),
    "else": ("if i + 2 >= n:\n            let q = 0\n        else:\n            out[i] = x[i] + x[i + 2]", 0),
    "else_of_or": ("if i + 2 > n - 1 or n < 0:\n            let q = 0\n        else:\n"
                   "            out[i] = x[i] + x[i + 2]", 0),
    "not": ("if not (i >= n - 2):\n            out[i] = x[i] + x[i + 2]", 0),
    "not_of_or": ("if not (i + 2 >= n or i < 1):\n            out[i - 1] = x[i] + x[i + 2]", 1),
}


def want(x, first):
    n = len(x)
    return np.array([x[i] + x[i + 2] for i in range(first, n - 2)], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", sorted(BODIES))
@pytest.mark.parametrize("n", [1, 2, 3, 10])
def test_the_guard_of_an_else_or_not_bounds_the_output(device, form, n):
    body, first = BODIES[form]
    src = f'let r = compute(x) @device("{device}") {{\n    for i in 0..n:\n        {body}\n}}\nr'
    x = (np.arange(n, dtype=np.float32) * 1.5 - 2.0)
    got = np.asarray(zynbook.run(src, x=x))
    np.testing.assert_array_equal(got, want(x, first))
