"""cpu:native puts a block's large local arrays (past the stack's 16 KiB) on the heap: over
many blocks on the host's threads, and over launches, each block's shared array starts at
zero as it does on every device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

# a shared array of `cols` sums per row, accumulated from zero over three steps
SHARED_SUMS = """let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        shared var acc[cols]
        for step in 0..3:
            for j in 0..cols:
                acc[j] = acc[j] + x[r, j] * f32(step + 1)
            barrier()
        var total = 0.0
        for j in 0..cols:
            total += acc[j]
        out[r] = total
}
y
"""


@pytest.mark.parametrize("device", [d for d in wanted_devices() if d.startswith("cpu")])
@pytest.mark.parametrize("cols", [5000, 70000])
def test_large_block_arrays_start_at_zero_in_every_block_and_launch(device, cols):
    session = zynbook.Session(device)
    for seed, rows in ((0, 37), (1, 23), (2, 37)):
        x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
        got = np.asarray(session.run(SHARED_SUMS, x=x))
        np.testing.assert_allclose(got, 6.0 * x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-2)
