"""f16 results between the largest f16 (65504) and the overflow tie (65520) round to 65504,
as numpy rounds them, on every device. NVIDIA's Vulkan driver gave an infinity there: its
quantizeToF16 overflows past 65504, which WGSL leaves undefined."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

SOURCE = """let y = compute(x, d) {
    for i in 0..n:
        out[i] = x[i] + d[i]
}
y
"""


@pytest.mark.parametrize("device", wanted_devices())
def test_sums_near_the_largest_f16_round_as_numpy(device):
    x = np.float16([65504, 65504, 65504, -65504, 65504, 65504, 32768, 60000])
    d = np.float16([1, 8, 15.5, -15, 16, 32, 32736, 5504])
    got = zynbook.Session(device).run(SOURCE, x=x, d=d)
    with np.errstate(over="ignore"):
        want = x + d    # numpy rounds the exact sum once: 65504 below 65520, inf from it
    assert np.isinf(want[4]) and want[0] == 65504
    assert_equals_numpy(got, want, 0)
