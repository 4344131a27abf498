"""@device([...]) @parallel(data|model): one block split across devices equals one device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError

MATMUL = """compute(A, B) @device(devices) @parallel({mode}) {{
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}}"""

SCALE_ROWS = """compute(x, w) @device(devices) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = x[b, f] * w[f] + 1.0
}"""


def device_lists():
    ids = [d["id"] for d in zynbook.compute_devices()]
    lists = [["cpu", "cpu"], ["cpu", "cpu", "cpu"]]
    gpus = [i for i in ids if i != "cpu"]
    if gpus:
        lists.append(["cpu", gpus[0]])
    return lists


@pytest.mark.parametrize("devices", device_lists(), ids=lambda d: "+".join(d))
@pytest.mark.parametrize("mode", ["data", "model"])
def test_split_matmul_equals_numpy(devices, mode):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 23)).astype(np.float32)
    session = zynbook.Session()
    out = session.run(MATMUL.format(mode=mode), A=a, B=b, devices=devices)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)
    # every device ran a part
    assert sorted(launch.device for launch in session.launches) == sorted(devices)


def test_split_with_more_devices_than_rows():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.ones(3, np.float32)
    out = zynbook.run(SCALE_ROWS, x=x, w=w, devices=["cpu", "cpu", "cpu"])
    np.testing.assert_allclose(np.asarray(out), x * w + 1.0)


def test_a_loop_variable_used_as_a_value_cannot_be_split():
    src = """compute(x) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * i
}"""
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run(src, x=np.ones(10, np.float32))
    assert "cannot split" in info.value.message and info.value.line == 1


def test_without_parallel_a_device_list_runs_on_its_first_device():
    session = zynbook.Session()
    out = session.run(SCALE_ROWS.replace(" @parallel(data)", ""),
                      x=np.ones((4, 3), np.float32), w=np.ones(3, np.float32),
                      devices=["cpu", "cpu"])
    assert [launch.device for launch in session.launches] == ["cpu"]
    np.testing.assert_allclose(np.asarray(out), 2.0)
