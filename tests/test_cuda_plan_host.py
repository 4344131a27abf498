"""The CUDA launch plan's host logic on a stand-in for CuPy (tests/cupy_standin.py), for
machines without a GPU: a warm run queues on the caller's stream and does not wait, a
kernel that can fail waits and names the ZynML line of a bad index on every run, an
`@async` block and a direct `CudaDevice.launch` wait on their thread's own stream, and
kernel times are read when asked for. test_cuda_gpu.py runs the real thing on a GPU."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cupy_standin  # noqa: E402

import zynbook  # noqa: E402
from zynbook.errors import ZynMLRuntimeError  # noqa: E402
from zynbook.runtime.tensor import to_tensor  # noqa: E402

if importlib.util.find_spec("cupy") is not None:
    pytest.skip("CuPy is installed: test_cuda_gpu.py runs the CUDA device itself",
                allow_module_level=True)

SCALE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * a + 1.0
}
y"""

GATHER = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]] * 2.0
}
y"""


@pytest.fixture
def cuda(monkeypatch, tmp_path):
    """(the stand-in CuPy module, the `cuda:0` device on it, the log of waits and streams)"""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    log = cupy_standin.install(monkeypatch)
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    registry.get_device("cpu")          # the registry's devices found
    dev = CudaDevice(0)
    monkeypatch.setitem(registry._devices, "cuda:0", dev)
    return sys.modules["cupy"], dev, log


def on_gpu(cp, values, dtype=np.float32):
    return cp.asarray(np.asarray(values, dtype=dtype))


def test_a_warm_run_queues_on_the_callers_stream_without_waiting(cuda):
    cp, dev, log = cuda
    s = zynbook.Session("cuda:0")
    x = on_gpu(cp, np.arange(8))
    assert to_tensor(x).device == "cuda:0"
    for k in range(3):
        y = s.run(SCALE, x=x, a=float(k))
        assert y.device == "cuda:0"
        np.testing.assert_allclose(y.numpy(), np.arange(8) * k + 1)
    assert log.waits == 0 and dev.cache.misses == 1
    assert [st.ptr for st in log.streams] == [0, 0, 0]     # the default stream
    assert s.launches[-1].times.kernel == pytest.approx(0.25e-3)
    assert log.waits == 1                                  # reading the time waited
    mine = cp.cuda.Stream(non_blocking=True)
    with mine:
        s.run(SCALE, x=x, a=1.0)
    assert log.streams[-1] is mine and log.waits == 1


def test_a_kernel_that_can_fail_waits_and_names_the_line_on_every_run(cuda):
    cp, dev, log = cuda
    s = zynbook.Session("cuda:0")
    x = on_gpu(cp, np.arange(8))
    good = on_gpu(cp, [1, 2, 3], np.int32)
    for bad in ([1, 9, 3], [0, -20, 1]):
        np.testing.assert_allclose(s.run(GATHER, x=x, idx=good).numpy(), [2, 4, 6])
        waits = log.waits
        with pytest.raises(ZynMLRuntimeError) as info:
            s.run(GATHER, x=x, idx=on_gpu(cp, bad, np.int32))
        assert info.value.span.line == 4
        assert f"index {bad[1]} is out of range for an axis of size 8 of `x`" in str(info.value)
        assert log.waits == waits + 1
    np.testing.assert_allclose(s.run(GATHER, x=x, idx=good).numpy(), [2, 4, 6])
    assert dev.cache.misses == 1


def test_an_async_block_waits_on_its_own_stream(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    source = """let f = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 3.0
}
await f"""
    x = on_gpu(cp, np.arange(4))
    for _ in range(2):
        np.testing.assert_allclose(s.run(source, x=x).numpy(), np.arange(4) * 3)
    assert log.waits == 2 and all(st.ptr != 0 for st in log.streams)


def test_a_direct_launch_waits(cuda):
    cp, dev, log = cuda
    s = zynbook.Session("cuda:0")
    x = on_gpu(cp, np.arange(4))
    s.run(SCALE, x=x, a=2.0)
    compiled = s.last_kernels[0]
    out, launch = dev.launch(compiled.kernel, [x], compiled.sizes, {"a": 5.0})
    np.testing.assert_allclose(cp.asnumpy(out), np.arange(4) * 5 + 1)
    assert log.waits == 1 and log.streams[-1].ptr != 0
    assert launch.times.kernel == pytest.approx(0.25e-3)


def test_the_cubin_runs_and_the_inspectors_ptx_is_made_only_when_asked_for(cuda):
    cp, dev, log = cuda
    s = zynbook.Session("cuda:0")
    x = on_gpu(cp, np.arange(8))
    np.testing.assert_allclose(s.run(SCALE, x=x, a=2.0).numpy(), np.arange(8) * 2.0 + 1.0)
    assert log.nvrtc == ["cubin"] and log.loaded[0].startswith(b"// stand-in cubin of ")
    kernel = s.last_kernels[-1].kernel
    shown = dev.generated_source(kernel)
    assert shown["ptx"].startswith("// stand-in PTX of ") and log.nvrtc == ["cubin", "ptx"]
    dev.generated_source(kernel)
    assert log.nvrtc == ["cubin", "ptx"]            # made once


def test_a_step_of_an_empty_grid_is_not_launched():
    """No block to run (an attention of no queries: 0 query blocks): the driver refuses an
    empty grid, and the launch of one left the context unusable (an illegal address)."""
    from zynbook.backends.cuda.device import CompiledCuda
    launched = []
    step = lambda grid: (lambda *a: launched.append(grid), grid, (64, 1, 1), 0, f"k{grid[0]}", ("buffers",))
    CompiledCuda.run_bound((step((0, 1, 1)), step((3, 1, 1))), (np.zeros(1),), ())
    assert launched == [(3, 1, 1)]
