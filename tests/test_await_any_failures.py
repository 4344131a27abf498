"""`await any(futures)` gives the first future to finish without an error: a future that
fails first (an index out of range) is passed over while another may still succeed, so
the answer does not depend on which device finished first; where every one fails, the
lowest index's error. On every device, the value against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLRuntimeError

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

FAILING = """let bad{k} = compute(x, idx) @device("{dev}") @async {{
    @kernel elementwise
    for i in 0..m:
        out[i] = x[idx[i]]
}}
"""
GOOD = """let good = compute(y) @device("{dev}") @async {{
    @kernel elementwise
    for i in 0..n:
        out[i] = y[i] * 2.0 + 1.0
}}
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("order", ["failing_first", "failing_last"])
def test_a_failed_future_is_passed_over_for_one_that_succeeds(device, order):
    x = np.arange(5, dtype=np.float32)
    idx = np.array([0, 9], np.int32)            # 9 is past x's 5 elements
    y = np.linspace(-1.0, 1.0, 20001, dtype=np.float32)
    src = FAILING.format(k=0, dev=device) + GOOD.format(dev=device)
    futures = "[bad0, good]" if order == "failing_first" else "[good, bad0]"
    s = zynbook.Session(device)
    s.run(src, x=x, idx=idx, y=y)
    value, index = s.run(f"await any({futures})")
    assert index == (1 if order == "failing_first" else 0)
    np.testing.assert_allclose(np.asarray(value), y * 2.0 + 1.0, rtol=1e-6)
    with pytest.raises(ZynMLRuntimeError):       # the failure is still there to await
        s.run("await bad0")


@pytest.mark.parametrize("device", DEVICES)
def test_where_every_future_fails_the_lowest_index_error_is_raised(device):
    x = np.arange(5, dtype=np.float32)
    idx = np.array([0, 9], np.int32)
    src = FAILING.format(k=0, dev=device) + FAILING.format(k=1, dev=device).replace("x[idx[i]]", "x[idx[i] + 20]")
    s = zynbook.Session(device)
    s.run(src, x=x, idx=idx)
    with pytest.raises(ZynMLRuntimeError) as info:
        s.run("await any([bad0, bad1])")
    assert info.value.line == 4                  # bad0's read (bad1's is on line 9)
    assert s.run("1 + 1") == 2
