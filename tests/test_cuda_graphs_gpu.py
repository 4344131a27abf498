"""CUDA graphs and pipeline traces on a real GPU (runtime/replay.py, runtime/traces.py,
backends/cuda/graph.py): a pipeline of many launches repeated with the same shapes is
captured and replayed, its results equal numpy written here and the CPU reference
executor on every run (CuPy and torch inputs, inputs at new addresses, new contents at the
same address), results kept from earlier runs never change, a bad index inside a replayed
graph is the error naming its line, and a warm one-kernel cell on torch tensors imports
them once. tests/test_cuda_graphs.py runs the host logic on a stand-in for CuPy.

Skipped where CuPy or a GPU is missing; scripts/gpu_tests.sh runs them on a GPU machine."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from bench_launch import pipeline_source  # noqa: E402

import zynbook  # noqa: E402
from zynbook.backends import cuda as backend  # noqa: E402
from zynbook.errors import ZynMLRuntimeError  # noqa: E402

pytestmark = pytest.mark.gpu
if not backend.discover():
    pytest.skip("no CUDA GPU (or no CuPy)", allow_module_level=True)
import cupy as cp  # noqa: E402

KERNELS = 20
PIPELINE = pipeline_source(KERNELS)

GATHER = """pipeline q(x, idx):
    let a = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * scale + 1.0
    }
    let b = compute(a, idx) {
        @kernel elementwise
        for i in 0..m:
            out[i] = a[idx[i]] * 2.0
    }
    let c = compute(b, a) {
        @kernel elementwise
        for i in 0..m:
            out[i] = b[i] + a[i]
    }
    return c
"""


def reference(x: np.ndarray, kernels: int = KERNELS) -> np.ndarray:
    h = [x, (x * np.float32(0.5) + np.float32(1.0)).astype(np.float32)]
    for _ in range(kernels):
        h.append((h[-1] * np.float32(0.5) + h[-2] * np.float32(0.25)).astype(np.float32))
    return h[-1]


def close(got, want):
    np.testing.assert_allclose(np.asarray(got.numpy()), want, rtol=1e-5, atol=1e-5)


def graph_ran(session) -> bool:
    return any("graph" in ln.geometry for ln in session.launches)


def test_a_repeated_pipeline_replays_as_a_graph_and_equals_numpy():
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    cpu = zynbook.Session("cpu")
    cpu.run(PIPELINE)
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.standard_normal(1 << 14).astype(np.float32))
    kept = []
    for run in range(6):
        y = s.run("p(x)", x=x)
        host = cp.asnumpy(x)
        close(y, reference(host))
        np.testing.assert_allclose(y.numpy(), cpu.run("p(x)", x=host).numpy(), rtol=1e-5,
                                   atol=1e-5)
        assert len(s.launches) == KERNELS and graph_ran(s) == (run >= 1)
        kept.append((y, host))
        if run == 3:
            x *= 2.0                            # new contents at the same address
        if run == 4:
            x = cp.asarray(rng.standard_normal(1 << 14).astype(np.float32))   # a new address
    for y, host in kept:
        close(y, reference(host))
    assert s.launches[-1].times.kernel > 0


def test_torch_inputs_replay_and_are_imported_once():
    torch = pytest.importorskip("torch")
    from zynbook.backends.cuda import views
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    x = torch.randn(4096, device="cuda:0")
    for _ in range(4):
        y = s.run("p(x)", x=x)
        close(y, reference(x.cpu().numpy()))
    assert graph_ran(s) and id(x) in views._views
    view = views._views[id(x)][2]
    s.run("p(x)", x=x)
    assert views._views[id(x)][2] is view


def test_a_bad_index_in_a_replayed_graph_names_its_line():
    s = zynbook.Session("cuda:0")
    s.run(GATHER)
    x = cp.arange(8, dtype=cp.float32)
    good = cp.asarray([1, 2, 3, 4, 5, 6, 7, 0], dtype=cp.int32)

    def want(scale, idx):
        a = np.arange(8, dtype=np.float32) * np.float32(scale) + 1
        return a[idx] * 2 + a

    for scale in (2.0, 2.0, 2.0, -0.5, -0.5, -0.5):
        close(s.run("q(x, idx)", x=x, idx=good, scale=scale), want(scale, cp.asnumpy(good)))
    assert graph_ran(s)
    bad = cp.asarray([0, 8, 1, 1, 1, 1, 1, 1], dtype=cp.int32)
    for _ in range(2):
        with pytest.raises(ZynMLRuntimeError) as info:
            s.run("q(x, idx)", x=x, idx=bad, scale=-0.5)
        assert info.value.span.line == 10
        assert "index 8 is out of range for an axis of size 8 of `a`" in str(info.value)
    close(s.run("q(x, idx)", x=x, idx=good, scale=-0.5), want(-0.5, cp.asnumpy(good)))
