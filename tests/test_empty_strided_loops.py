"""A strided loop that runs no iteration at a launch's sizes (`for k in 1..cols step 3` with
cols = 1) indexes nothing: its index is not checked against the axis (C's truncating
division put such a loop's last value at its start, and a valid program was a shape error).
Against numpy written here, on every device, beside loops that run."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

SOURCE = """let y = compute(x) {
    for i in 0..rows:
        var acc = -inf
        for k in START..cols step STEP:
            acc = max(acc, x[i, k])
        out[i] = acc
}
y"""


def numpy_max(x, start, step):
    cols = x.shape[1]
    taken = x[:, start:cols:step]
    return taken.max(1) if taken.shape[1] else np.full(len(x), -np.inf, np.float32)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("cols,start,step", [(1, 1, 3), (2, 1, 3), (1, 1, 2), (3, 2, 5), (7, 1, 3), (10, 4, 3)])
def test_strided_loop_empty_or_not_equals_numpy(device, cols, start, step):
    x = np.random.default_rng(cols * 10 + step).standard_normal((5, cols)).astype(np.float32)
    src = SOURCE.replace("START", str(start)).replace("STEP", str(step))
    got = zynbook.run(src, device=device, x=x, cols=cols)
    np.testing.assert_array_equal(np.asarray(got.numpy()), numpy_max(x, start, step))
