"""`@async` on every device present: futures resolve to what the synchronous launch gives."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook

DEVICES = [d["id"] for d in zynbook.compute_devices()]

PROGRAM = """let f = compute(x) @device(dev) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let g = compute(x) @device(dev) @async {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
let (first, index) = await any([f, g])
(await f, await all([f, g]), index)
"""


@pytest.mark.parametrize("dev", DEVICES)
def test_async_futures_resolve_on_every_device(dev):
    x = np.arange(1001, dtype=np.float32) / 7
    doubled, both, index = zynbook.run(PROGRAM, x=x, dev=dev)
    np.testing.assert_allclose(np.asarray(doubled), x * 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(both[0]), x * 2.0, rtol=1e-6)
    assert both[1] == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-5)
    assert index in (0, 1)
