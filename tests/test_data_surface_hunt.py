"""How data goes into a program and comes back (`zynbook.run`, `%%compute`, `zynbook.Tensor`):
dtypes, layouts, scalars and Python values, each compared with numpy or torch written here,
on every device present. Each test is the regression of what the hunt found."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

SUM = """let s = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
s"""

ROW_SUMS = """let s = compute(x) {
    @kernel reduce(+, axis=1)
    for i in 0..m, j in 0..n:
        yield x[i, j]
}
s"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_bf16_reduction_is_rounded_to_bf16_as_torch_sums(device):
    """A reduce kernel over a torch bf16 tensor gives a bf16 result, accumulated in f32 and
    rounded once, as torch's sum; the reference device kept the f32 sum (100.78125 for a
    hundred bf16(1.01), which no bf16 holds)."""
    torch = pytest.importorskip("torch")
    # multiples of 1/64 below 4: exact in bf16, and their sums exact in f32 in any order
    ints = np.random.default_rng(0).integers(-255, 256, (4, 100))
    x = torch.tensor(ints / 64.0, dtype=torch.bfloat16)
    want = x.sum(1)
    assert not torch.equal(want.double(), x.double().sum(1))    # rounding shows
    session = zynbook.Session(device)
    rows = session.run(ROW_SUMS, x=x)
    assert rows.dtype == "bf16"
    np.testing.assert_array_equal(np.asarray(rows, np.float64), want.double().numpy())
    for r in range(4):
        assert session.run(SUM, x=x[r]) == float(want[r])
