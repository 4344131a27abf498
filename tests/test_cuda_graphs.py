"""CUDA graphs of the lazy graph's runs (runtime/replay.py, backends/cuda/graph.py) and the
warm CUDA launch's caches, on the stand-in for CuPy (tests/cupy_standin.py: a capture
records the kernels, a graph launch runs them again). A pipeline of many launches run
again with the same shapes is captured at its second run and replayed after; results equal
numpy and the CPU reference executor on every run, whatever input addresses change, a
value kept from an earlier run never changes, a bad index inside a graph is still the
error naming its line, and `config { cuda_graph }` turns capture on at once or off."""
from __future__ import annotations

import gc
import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import cupy_standin  # noqa: E402
from bench_launch import pipeline_source  # noqa: E402

import zynbook  # noqa: E402
from zynbook.errors import ZynMLRuntimeError, ZynMLTypeError  # noqa: E402

if importlib.util.find_spec("cupy") is not None:
    pytest.skip("CuPy is installed: test_cuda_gpu.py runs the CUDA device itself",
                allow_module_level=True)

KERNELS = 6
PIPELINE = pipeline_source(KERNELS)

GATHERS = """pipeline g(x, idx):
    let b = compute(x, idx) {
        @kernel elementwise
        for i in 0..m:
            out[i] = x[idx[i]] * 2.0
    }
    let c = compute(b) {
        @kernel elementwise
        for i in 0..m:
            out[i] = b[i] + 1.0
    }
    return c + b
"""


def reference(x: np.ndarray, kernels: int = KERNELS) -> np.ndarray:
    """What `pipeline_source(kernels)` computes, in numpy (float32 as the kernels do)."""
    h = [x, (x * np.float32(0.5) + np.float32(1.0)).astype(np.float32)]
    for _ in range(kernels):
        h.append((h[-1] * np.float32(0.5) + h[-2] * np.float32(0.25)).astype(np.float32))
    return h[-1]


@pytest.fixture
def cuda(monkeypatch, tmp_path):
    """(the stand-in CuPy module, the `cuda:0` device on it, the log)"""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    log = cupy_standin.install(monkeypatch)
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    registry.get_device("cpu")
    dev = CudaDevice(0)
    monkeypatch.setitem(registry._devices, "cuda:0", dev)
    return sys.modules["cupy"], dev, log


def on_gpu(cp, values, dtype=np.float32):
    return cp.asarray(np.asarray(values, dtype=dtype))


def close(got, want):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_a_repeated_pipeline_is_captured_once_and_replayed(cuda):
    cp, dev, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    cpu = zynbook.Session("cpu")
    cpu.run(PIPELINE)
    x = on_gpu(cp, np.linspace(-1, 1, 64))
    close(s.run("p(x)", x=x), reference(x.host))
    assert len(s.last_kernels) == KERNELS and len(log.streams) == KERNELS
    assert log.graph_launches == [] and log.captured == 0
    for run in range(4):
        y = s.run("p(x)", x=x)
        close(y, reference(x.host))
        np.testing.assert_allclose(y.numpy(), cpu.run("p(x)", x=x.host).numpy(), rtol=1e-6)
        assert len(log.graph_launches) == run + 1
    # captured once, but for the last kernel: the result's, queued after the graph at each
    # replay into a new array (no copy of the graph's buffer); none launched one by one since
    assert log.captured == KERNELS - 1
    assert len(log.streams) == KERNELS + 4
    assert [st.ptr for st in log.graph_launches] == [0] * 4    # the caller's stream
    assert len(s.last_kernels) == len(s.launches) == KERNELS
    assert "CUDA graph" in s.launches[0].geometry["graph"]
    assert s.launches[-1].times.kernel == pytest.approx(0.25e-3)
    assert dev.cache.misses == KERNELS
    graphs = [r.graph for rs in s.interpreter.lazy.replays.graphs.values() for r in rs]
    pairs = len(graphs[0].events)           # event pairs timing replays, reused once dropped
    for _ in range(3):
        s.run("p(x)", x=x)
    assert len(graphs) == 1 and len(graphs[0].events) == pairs
    kept = s.launches                       # a time not read yet keeps its events
    s.run("p(x)", x=x)
    s.run("p(x)", x=x)
    assert len(graphs[0].events) == pairs + 1
    assert kept[-1].times.kernel == pytest.approx(0.25e-3)


def test_new_inputs_are_copied_in_and_kept_results_never_change(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    xs = [on_gpu(cp, np.random.default_rng(k).standard_normal(32)) for k in range(5)]
    kept = [s.run("p(x)", x=x) for x in xs]        # a new address every run: staged
    assert len(log.graph_launches) == 4
    for x, y in zip(xs, kept):
        close(y, reference(x.host))
    xs[0].host[:] = 7.0                             # the same address, new contents
    close(s.run("p(x)", x=xs[0]), reference(xs[0].host))
    close(kept[1], reference(xs[1].host))


def test_a_held_buffer_of_the_graph_is_not_overwritten(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    x = on_gpu(cp, np.arange(16))
    for _ in range(2):
        s.run("p(x)", x=x)
    record = next(iter(s.interpreter.lazy.replays.graphs.values()))[0]
    held = record.handed[0]                 # an intermediate's buffer, still referenced
    before = held.host.copy()
    x.host *= 3.0                           # new contents at the same address
    close(s.run("p(x)", x=x), reference(x.host))
    np.testing.assert_array_equal(held.host, before)   # another graph ran instead
    assert log.captured == 2 * (KERNELS - 1)            # (each but the result's kernel)
    del held
    gc.collect()
    replays = len(log.graph_launches)
    close(s.run("p(x)", x=x), reference(x.host))
    assert len(log.graph_launches) == replays + 1 and log.captured == 2 * (KERNELS - 1)


def test_config_turns_capture_on_at_once_or_off(cuda):
    cp, _, log = cuda
    x = on_gpu(cp, np.arange(8))
    on = zynbook.Session("cuda:0")
    on.run(PIPELINE + "config { cuda_graph: true }\n")
    close(on.run("p(x)", x=x), reference(x.host))
    assert len(log.graph_launches) == 1
    off = zynbook.Session("cuda:0")
    off.run(PIPELINE + "config { cuda_graph: false }\n")
    for _ in range(3):
        close(off.run("p(x)", x=x), reference(x.host))
    assert len(log.graph_launches) == 1
    with pytest.raises(ZynMLTypeError, match="cuda_graph takes"):
        off.run("config { cuda_graph: 2 }")


def test_a_bad_index_inside_a_graph_names_its_line(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(GATHERS)
    x = on_gpu(cp, np.arange(8))
    good = on_gpu(cp, [1, 2, 3], np.int32)

    def want(idx):
        b = x.host[idx] * 2
        return b + 1 + b

    for _ in range(3):
        close(s.run("g(x, idx)", x=x, idx=good), want(good.host))
    assert log.graph_launches
    for bad in ([1, 9, 3], [0, -20, 1]):
        replays = len(log.graph_launches)
        with pytest.raises(ZynMLRuntimeError) as info:
            s.run("g(x, idx)", x=x, idx=on_gpu(cp, bad, np.int32))
        assert info.value.span.line == 5
        assert f"index {bad[1]} is out of range for an axis of size 8 of `x`" in str(info.value)
        assert len(log.graph_launches) == replays + 1
        close(s.run("g(x, idx)", x=x, idx=good), want(good.host))


def test_a_warm_launch_reuses_its_bound_kernels_events_and_allocates_only_the_output(cuda):
    cp, dev, _ = cuda
    s = zynbook.Session("cuda:0")
    source = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""
    masked = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        if x[i] > 0.0:
            out[i] = x[i]
}
y"""
    x = on_gpu(cp, np.arange(-4, 4))
    for _ in range(3):
        close(s.run(source, x=x), x.host * 2)
        close(s.run(masked, x=x), np.maximum(x.host, 0))
    plans = [b.plans for b in s.interpreter.blocks.lowered.values()]
    prepared = [next(iter(p.values()))._prepared for p in plans]
    full, partial = [next(iter(p.values())) for p in prepared]
    assert not full.zeroed and partial.zeroed
    assert len(full._streams) == 1 and len(next(iter(full._streams.values()))[2]) == 1
    assert len(full._events) == 1           # a launch's events reused once its time is dropped
    close(s.run(source, x=x), x.host * 2)
    kept = s.launches                       # a time not read yet keeps its events
    close(s.run(source, x=x), x.host * 2)
    assert len(full._events) == 2 and kept[0].times.kernel == pytest.approx(0.25e-3)
    close(s.run(source, x=x), x.host * 2)
    assert len(full._events) == 2


def test_a_torch_style_input_is_imported_once_while_it_lives(cuda, monkeypatch):
    from zynbook.backends.cuda import views

    class Tensor:       # what cupy_view reads of a torch CUDA tensor
        def __init__(self, values):
            self.values = np.asarray(values, np.float32)
            self.shape, self.dtype = self.values.shape, "float32"

        def data_ptr(self):
            return self.values.__array_interface__["data"][0]

        def stride(self):
            return self.values.strides

        def __array__(self, dtype=None, copy=None):
            return self.values

    cp, _, log = cuda
    monkeypatch.setitem(sys.modules, "torch", None)     # torch's stream: the default one
    t = Tensor(np.arange(4))
    first = views.cupy_view(t)
    assert views.cupy_view(t) is first and log.dlpack == 1
    with cp.cuda.Stream(non_blocking=True):     # on another stream the exchange orders them
        a, b = views.cupy_view(t), views.cupy_view(t)
        assert a is not first and b is not a and log.dlpack == 3
    first = views.cupy_view(t)                  # the default stream again: the last one kept
    assert first is b and log.dlpack == 3
    made = []                                   # a wrapper of the view made once with it
    wrapped = views.cupy_view(t, lambda v: made.append(v) or ("wrapped", v))
    assert wrapped == ("wrapped", b) and views.cupy_view(t, made.append) is wrapped
    assert made == [b] and log.dlpack == 3
    t.values = np.arange(8, dtype=np.float32)       # new storage: a new view
    t.shape = t.values.shape
    assert views.cupy_view(t) is not first and log.dlpack == 4
    key = id(t)
    del t
    gc.collect()
    assert key not in views._views


SCALED = """pipeline q(x, idx):
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


def test_a_straight_line_pipeline_call_replays_without_running_its_body(cuda, monkeypatch):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(SCALED)
    evaluated = []
    real = s.interpreter.compute
    monkeypatch.setattr(s.interpreter, "compute", lambda node: evaluated.append(node) or
                        real(node))
    x = on_gpu(cp, np.arange(8))
    good = on_gpu(cp, [1, 2, 3, 4, 5, 6, 7, 0], np.int32)

    def want(scale, idx):
        a = x.host * np.float32(scale) + 1
        return a[idx] * 2 + a

    kept = None
    for run, scale in enumerate([2.0, 2.0, 2.0, 2.0, -0.5, -0.5, -0.5]):
        y = s.run("q(x, idx)", x=x, idx=good, scale=scale)
        close(y, want(scale, good.host))
        assert len(s.last_kernels) == len(s.launches) == 2      # b fused into c
        kept = y if kept is None else kept
    # blocks evaluated: the first two calls of each scale (then the trace replays)
    assert len(evaluated) == 3 * 4
    close(kept, want(2.0, good.host))
    with pytest.raises(ZynMLRuntimeError) as info:
        s.run("q(x, idx)", x=x, idx=on_gpu(cp, [0, 8, 1, 1, 1, 1, 1, 1], np.int32), scale=-0.5)
    assert info.value.span.line == 10
    assert "index 8 is out of range for an axis of size 8 of `a`" in str(info.value)
    close(s.run("q(x, idx)", x=x, idx=good, scale=-0.5), want(-0.5, good.host))


def test_a_call_whose_launches_run_in_two_graphs_is_not_traced(cuda):
    from zynbook.runtime.lazy import MAX_PENDING
    cp, _, log = cuda
    kernels = MAX_PENDING + 8           # the lazy graph runs once before the return
    s = zynbook.Session("cuda:0")
    s.run(pipeline_source(kernels))
    x = on_gpu(cp, np.linspace(0, 1, 16))
    for _ in range(4):
        close(s.run("p(x)", x=x), reference(x.host, kernels))
        assert len(s.launches) == kernels
    assert len(log.graph_launches) == 2 * 3         # both runs replayed from the second call
    assert not s.interpreter.lazy.traces.entries


def test_a_capture_the_driver_refuses_falls_back_to_launches_one_by_one(cuda, monkeypatch):
    cp, _, log = cuda

    def refuse(self, mode=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cupy_standin.Stream, "begin_capture", refuse)
    s = zynbook.Session("cuda:0")
    s.run(PIPELINE)
    x = on_gpu(cp, np.arange(8))
    for _ in range(3):
        close(s.run("p(x)", x=x), reference(x.host))
    assert log.graph_launches == [] and len(log.streams) == 3 * KERNELS
    assert len(s.interpreter.lazy.replays.refused) == 1


def test_a_call_with_one_tensor_for_two_parameters_is_not_replayed_for_two(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run("""pipeline add(a, b):
    let s = compute(a, b) {
        @kernel elementwise
        for i in 0..n:
            out[i] = a[i] + b[i] * 2.0
    }
    let t = compute(s, a) {
        @kernel elementwise
        for i in 0..n:
            out[i] = s[i] * a[i]
    }
    let u = compute(s, t) {
        @kernel elementwise
        for i in 0..n:
            out[i] = s[i] - t[i]
    }
    return u
""")
    a = on_gpu(cp, np.arange(8))
    b = on_gpu(cp, np.arange(8) * 10.0)

    def want(a, b):
        s = a + b * 2
        return s - s * a

    for _ in range(3):
        close(s.run("add(a, a)", a=a), want(a.host, a.host))
    assert log.graph_launches
    close(s.run("add(a, b)", a=a, b=b), want(a.host, b.host))


def test_only_straight_line_pipelines_with_literal_annotations_are_traced():
    from zynbook.compiler.parser import parse
    from zynbook.runtime.traces import _Form

    def form(text):
        return _Form.of(parse(text).body[0])

    block = """    let y = compute(x) {{
        @kernel elementwise
        {ann}
        for i in 0..n:
            out[i] = x[i] * a
    }}
"""
    outside = form("pipeline f(x):\n" + block.format(ann="") + "    return y\n").outside
    assert outside == ("n", "a")         # n: a size the block infers where no name holds it
    assert form("pipeline f(x):\n" + block.format(ann='@device("cuda:0")') + "    return y\n")
    # a device named by a name (a list of them: a device group) is keyed by its value
    assert "dev" in form("pipeline f(x):\n" + block.format(ann="@device(dev)") +
                         "    return y\n").outside
    assert form("pipeline f(x):\n" + block.format(ann="") + "    print(y)\n    return y\n") is None
    assert form("pipeline f(x):\n" + block.format(ann="") + "    return y * 2.0\n") is None


def test_only_an_output_every_element_of_which_is_stored_starts_uninitialised(cuda):
    from kernel_sources import SPEC_MATMUL, SPEC_ROW_SUMS
    cp, _, _ = cuda
    s = zynbook.Session("cuda:0")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), \
        rng.standard_normal((7, 3)).astype(np.float32)
    for _ in range(2):
        np.testing.assert_allclose(s.run(SPEC_MATMUL, A=on_gpu(cp, a), B=on_gpu(cp, b)).numpy(),
                                   a @ b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.run(SPEC_ROW_SUMS, matrix=on_gpu(cp, a)).numpy(),
                                   a.sum(axis=1), rtol=1e-5, atol=1e-5)
    plans = {b.lowered.kernel.name: next(iter(next(iter(b.plans.values()))._prepared.values()))
             for b in s.interpreter.blocks.lowered.values()}
    zeroed = {name.split("_l")[0]: plan.zeroed for name, plan in plans.items()}
    assert zeroed == {"matmul": False, "reduce": True}


MLP = """pipeline mlp(x, w1, b1, w2):
    let h = compute(x, w1) {
        @kernel matmul
        for i in 0..M, j in 0..N:
            var sum = 0.0
            for k in 0..K:
                sum += x[i, k] * w1[k, j]
            out[i, j] = sum
    }
    let a = compute(h, b1) {
        @kernel elementwise
        for i in 0..M, j in 0..N:
            out[i, j] = max(h[i, j] + b1[j], 0.0)
    }
    let y = compute(a, w2) {
        @kernel matmul
        for i in 0..M, j in 0..P:
            var sum = 0.0
            for k in 0..N:
                sum += a[i, k] * w2[k, j]
            out[i, j] = sum
    }
    return y
"""


def test_a_fused_matmul_pipeline_replays_equal_to_numpy(cuda):
    cp, _, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(MLP)
    rng = np.random.default_rng(7)
    w1, b1, w2 = (rng.standard_normal(shape).astype(np.float32)
                  for shape in ((6, 5), (5,), (5, 4)))
    weights = dict(w1=on_gpu(cp, w1), b1=on_gpu(cp, b1), w2=on_gpu(cp, w2))
    for run in range(4):
        x = rng.standard_normal((3, 6)).astype(np.float32)
        y = s.run("mlp(x, w1, b1, w2)", x=on_gpu(cp, x), **weights)
        np.testing.assert_allclose(y.numpy(), np.maximum(x @ w1 + b1, 0) @ w2, rtol=1e-5,
                                   atol=1e-5)
        assert len(s.launches) == 2          # the bias and ReLU are the first GEMM's epilogue
    assert len(log.graph_launches) == 3
