"""Traces of pipeline calls that look host values up and make views (runtime/traces.py), on
the stand-in for CuPy (tests/cupy_standin.py): the spec's transformer block
(examples/transformer_block.zyn), called again with the same shapes, replays its CUDA
graphs without evaluating its body, equal to the interpreted run and to numpy; another
layer's record, another shape or another device runs the body; the views of split() are
read at their offsets."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cupy_standin  # noqa: E402
from test_examples_cpu import make_model, np_transformer_block  # noqa: E402

import zynbook  # noqa: E402
from zynbook.errors import ZynMLShapeError, ZynMLTypeError  # noqa: E402

REAL_CUPY = importlib.util.find_spec("cupy") is not None

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "transformer_block.zyn")


def block_source() -> str:
    """The example's pipeline (its `@device("auto")` dropped: the session's device runs it)."""
    with open(EXAMPLE) as f:
        src = f.read()
    body = src[src.index("pipeline transformer_block"):src.index("\ntransformer_block(x, 0)")]
    return "let num_heads = 3\nlet head_dim = 8\n" + body.replace(' @device("auto")', "") \
        .replace('        @device("auto")\n', "") + "\n"


@pytest.fixture
def cuda(monkeypatch, tmp_path):
    """(the stand-in CuPy module, the log)"""
    if REAL_CUPY:
        pytest.skip("CuPy is installed: test_spec_block_on_the_gpu runs the CUDA device itself")
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    log = cupy_standin.install(monkeypatch)
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    registry.get_device("cpu")
    monkeypatch.setitem(registry._devices, "cuda:0", CudaDevice(0))
    return sys.modules["cupy"], log


def on_gpu(cp, model):
    return {"layers": [{k: cp.asarray(v) for k, v in layer.items()} for layer in model["layers"]]}


def counting(session, monkeypatch) -> list:
    """The compute blocks the interpreter evaluates, appended as it meets them."""
    evaluated = []
    real = session.interpreter.compute
    monkeypatch.setattr(session.interpreter, "compute",
                        lambda node: evaluated.append(node) or real(node))
    return evaluated


def close(got, want):
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float64), want, rtol=2e-4, atol=2e-4)


def test_the_spec_block_replays_equal_to_the_interpreted_run_and_numpy(cuda, monkeypatch):
    cp, log = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 100, 24)).astype(np.float32) for _ in range(5)]
    outs, launches = [], []
    for x in xs:
        outs.append(s.run("transformer_block(x, 0)", x=cp.asarray(x)))
        launches.append([ln.kernel for ln in s.launches])
    assert len(evaluated) == 2 * 6       # the first two calls only: then it replays
    assert s.interpreter.lazy.traces.entries
    assert all(ln == launches[0] for ln in launches)      # the same kernels, listed
    # split and reshape are no boundary: the whole block is one graph, one launch a call
    before = len(log.graph_launches)
    s.run("transformer_block(x, 0)", x=cp.asarray(xs[0]))
    assert len(log.graph_launches) - before == 1
    for x, out in zip(xs, outs):
        close(out, np_transformer_block(x, model["layers"][0]))
    # the interpreted run gives the same values, bit for bit
    plain = zynbook.Session("cuda:0")
    plain.run('config { cuda_graph: false }\n' + block_source(), model=on_gpu(cp, model))
    for x, out in zip(xs, outs):
        want = plain.run("transformer_block(x, 0)", x=cp.asarray(x))
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert not plain.interpreter.lazy.traces.entries


@pytest.mark.skipif(not REAL_CUPY, reason="needs CuPy and a CUDA GPU")
def test_spec_block_on_the_gpu(monkeypatch):
    """On a real GPU: the replayed trace equals the block run without CUDA graphs, bit for
    bit, and numpy within the f32 tolerance."""
    import cupy as cp
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    evaluated = counting(s, monkeypatch)
    plain = zynbook.Session("cuda:0")
    plain.run('config { cuda_graph: false }\n' + block_source(), model=on_gpu(cp, model))
    rng = np.random.default_rng(7)
    for _ in range(6):
        x = rng.standard_normal((2, 100, 24)).astype(np.float32)
        out = s.run("transformer_block(x, 0)", x=cp.asarray(x))
        want = plain.run("transformer_block(x, 0)", x=cp.asarray(x))
        np.testing.assert_array_equal(out.numpy(), want.numpy())
        close(out, np_transformer_block(x, model["layers"][0]))
    assert len(evaluated) == 2 * 6 and s.interpreter.lazy.traces.entries


def test_another_layer_shape_or_device_runs_the_body(cuda, monkeypatch):
    cp, log = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 100, 24)).astype(np.float32)
    for _ in range(3):
        close(s.run("transformer_block(x, 0)", x=cp.asarray(x)),
              np_transformer_block(x, model["layers"][0]))
    per_call = len(evaluated) // 2
    # another layer: another record, looked up again -> its body runs
    close(s.run("transformer_block(x, 1)", x=cp.asarray(x)),
          np_transformer_block(x, model["layers"][1]))
    assert len(evaluated) == 3 * per_call
    # another shape
    x2 = rng.standard_normal((1, 7, 24)).astype(np.float32)
    close(s.run("transformer_block(x, 0)", x=cp.asarray(x2)),
          np_transformer_block(x2, model["layers"][0]))
    assert len(evaluated) == 4 * per_call
    # another device: x on the host, the block placed on cuda:0 by the session still runs it
    close(s.run("transformer_block(x, 0)", x=x), np_transformer_block(x, model["layers"][0]))
    assert len(evaluated) == 5 * per_call
    # another weights record of the same shapes (a new model bound): its body runs twice
    # (its graphs are its own, captured at the second identical run), then its trace replays
    w = model["layers"][0]
    w2 = dict(w, out_proj=(w["out_proj"] * np.float32(-0.5)))
    s.run("let bound = 1", model=on_gpu(cp, {"layers": [w2]}))
    before = len(evaluated)
    for _ in range(4):
        close(s.run("transformer_block(x, 0)", x=cp.asarray(x)), np_transformer_block(x, w2))
    assert len(evaluated) == before + 2 * per_call



def test_layers_called_in_turn_replay_each_with_its_own_weights(cuda, monkeypatch):
    """Once both layers' traces are kept, calls alternating between them replay, each
    reading the weights of the record it looks up (a replay keeps the fields it read
    from each record while that record lives)."""
    cp, _ = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    x = np.random.default_rng(6).standard_normal((2, 100, 24)).astype(np.float32)
    for layer in (0, 0, 1, 1):
        s.run(f"transformer_block(x, {layer})", x=cp.asarray(x))
    evaluated = counting(s, monkeypatch)
    for layer in (0, 1, 1, 0, 1, 0, 0):
        close(s.run(f"transformer_block(x, {layer})", x=cp.asarray(x)),
              np_transformer_block(x, model["layers"][layer]))
        assert s.interpreter.lazy.traces.last_miss is None
    assert not evaluated


def test_a_stack_of_layers_reads_each_layers_weights_in_place(cuda):
    """A model's forward pass, each layer's output the next one's input: every layer's
    graphs are its own (captured while its call is recorded), so the weights it looks up
    are read where they lie (before, the same shapes' graph, captured after a call of
    another layer, copied them in at every call); the stack equals numpy's."""
    cp, _ = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    block = s.namespace["transformer_block"]
    x = np.random.default_rng(7).standard_normal((2, 100, 24)).astype(np.float32)
    want = x
    for w in model["layers"]:
        want = np_transformer_block(want, w)
    for _ in range(5):
        h = cp.asarray(x)
        for layer in range(len(model["layers"])):
            h = block(h, layer)
            # (a layer's input is the layer before's result, a new array each call: it is
            # read in place once the memory pool gives it where it gave it at the capture)
            assert s.interpreter.lazy.traces.last_miss is None or _ < 3
        close(h, want)
    traces = s.interpreter.lazy.traces.entries.values()
    assert len(traces) == len(model["layers"])
    for trace in traces:
        for record, sources, _ in trace.steps:
            in_place = {j for j, _ in record.in_place}
            assert {j for j, (kind, _) in enumerate(sources) if kind == "label"} <= in_place


def test_look_ups_read_as_the_interpreter_reads_them(cuda):
    """A replay reads its look-ups (`model.layers[layer]`) without the interpreter where
    every step is a record's field or a list's index in range: a negative index reads from
    the end, as the body does; an index out of range is the body's own error."""
    cp, _ = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    x = np.random.default_rng(9).standard_normal((2, 100, 24)).astype(np.float32)
    for layer in (-1, -1, -1, 0, 0, 0):
        close(s.run(f"transformer_block(x, {layer})", x=cp.asarray(x)),
              np_transformer_block(x, model["layers"][layer]))
    assert s.interpreter.lazy.traces.last_miss is None
    with pytest.raises(ZynMLShapeError, match="out of range for a list of 2"):
        s.run("transformer_block(x, 2)", x=cp.asarray(x))
    with pytest.raises(ZynMLTypeError, match="`layer` must be an int"):
        s.run("transformer_block(x, 0.5)", x=cp.asarray(x))


def test_the_heads_are_read_where_they_lie(cuda):
    """The attention reads Q, K and V as the views of the QKV projection they are
    (cir.Buffer.strides): the block's graph holds its kernels and no copy of a head."""
    cp, _ = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    x = np.random.default_rng(8).standard_normal((2, 100, 24)).astype(np.float32)
    for _ in range(3):
        close(s.run("transformer_block(x, 0)", x=cp.asarray(x)),
              np_transformer_block(x, model["layers"][0]))
    (trace,) = s.interpreter.lazy.traces.entries.values()
    ((record, _, _),) = trace.steps
    # (the last kernel, whose output is the result, runs after the graph into a new array)
    assert len(record.graph.graph.operations) == len(record.plans) - 1 == 6
    assert record.graph.fresh(6)
    attention = next(p for p in record.plans if "attention" in p.kernel.name)
    (strided,) = [p for p in attention._strided.values() if p is not None]
    assert sorted(b.strides for b in strided.kernel.inputs) == [(7200, 72, 8, 1)] * 3


def test_a_capture_at_the_first_call_compiles_nothing_while_it_records(cuda, monkeypatch):
    """With `cuda_graph: true` the first call is captured: the attention's plan for the
    heads' views is compiled before the capture begins (a module loaded while a stream
    records could end the capture), and the graph still holds no copy."""
    cp, _ = cuda
    from zynbook.backends.cuda.device import CudaDevice
    capturing, compiled_while = [], []
    real_begin, real_end = cp.cuda.Stream.begin_capture, cp.cuda.Stream.end_capture
    monkeypatch.setattr(cp.cuda.Stream, "begin_capture",
                        lambda self, mode=None: capturing.append(1) or real_begin(self, mode))
    monkeypatch.setattr(cp.cuda.Stream, "end_capture",
                        lambda self: capturing.pop() and real_end(self))
    real_compile = CudaDevice.compile
    monkeypatch.setattr(CudaDevice, "compile", lambda self, *a, **k: compiled_while.append(
        bool(capturing)) or real_compile(self, *a, **k))
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run("config { cuda_graph: true }\n" + block_source(), model=on_gpu(cp, model))
    x = np.random.default_rng(9).standard_normal((2, 100, 24)).astype(np.float32)
    close(s.run("transformer_block(x, 0)", x=cp.asarray(x)),
          np_transformer_block(x, model["layers"][0]))
    assert compiled_while and not any(compiled_while)
    close(s.run("transformer_block(x, 0)", x=cp.asarray(x)),
          np_transformer_block(x, model["layers"][0]))
    (trace,) = s.interpreter.lazy.traces.entries.values()
    assert len(trace.steps[0][0].graph.graph.operations) == 6     # and the result's kernel after it

VIEWS = """pipeline parts(x: tensor[n, m]) -> tensor[n, k]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = x[i, j] * 2.0
    }
    let (a, b, c) = split(y, 3, axis=-1)
    let c2 = reshape(c, [n, k])
    let z = compute(c2, a) {
        @kernel elementwise
        for i in 0..n, j in 0..k:
            out[i, j] = c2[i, j] - a[i, j]
    }
    return z
"""


def test_the_views_of_a_split_are_read_at_their_offsets(cuda, monkeypatch):
    cp, log = cuda
    s = zynbook.Session("cuda:0")
    s.run("let k = 4\n" + VIEWS)
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(5)
    for run in range(5):
        x = rng.standard_normal((5, 12)).astype(np.float32)
        got = s.run("parts(x)", x=cp.asarray(x))
        want = x[:, 8:] * np.float32(2.0) - x[:, :4] * np.float32(2.0)
        np.testing.assert_array_equal(got.numpy(), want)
    assert len(evaluated) == 2 * 2
    assert s.interpreter.lazy.traces.entries


def test_a_result_also_read_through_a_view_is_never_overwritten(cuda):
    cp, log = cuda
    s = zynbook.Session("cuda:0")
    s.run("""pipeline both(x: tensor[n, m]):
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = x[i, j] + 1.0
    }
    let (a, b) = split(y, 2, axis=0)
    let z = compute(a) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = a[i, j] * 3.0
    }
    return y
""")
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(5)]
    outs = [s.run("both(x)", x=cp.asarray(x)) for x in xs]
    for x, out in zip(xs, outs):
        np.testing.assert_array_equal(out.numpy(), x + np.float32(1.0))
    # the view is made inside the one graph (no boundary at `split`): the call is traced,
    # and each call's result is a copy of its own
    assert s.interpreter.lazy.traces.entries


def test_a_tensor_looked_up_whole_is_read_where_it_is(cuda, monkeypatch):
    cp, log = cuda
    s = zynbook.Session("cuda:0")
    s.run("""pipeline scaled(x: tensor[n], i: int):
    let w = params.ws[i]
    let y = compute(x, w) {
        @kernel elementwise
        for j in 0..n:
            out[j] = x[j] * w[j]
    }
    let z = compute(y) {
        @kernel elementwise
        for j in 0..n:
            out[j] = y[j] + 1.0
    }
    return z
""", params={"ws": [cp.asarray(np.arange(6, dtype=np.float32)),
                    cp.asarray(np.full(6, 2.0, np.float32))]})
    evaluated = counting(s, monkeypatch)
    x = np.linspace(-1, 1, 6).astype(np.float32)
    for i in (0, 0, 0, 0, 1, 1, 1, 0):
        w = np.arange(6, dtype=np.float32) if i == 0 else np.full(6, 2.0, np.float32)
        got = s.run("scaled(x, i)", x=cp.asarray(x), i=i)
        np.testing.assert_array_equal(got.numpy(), x * w + np.float32(1.0))
    assert len(evaluated) < 8 * 2
    assert len(s.interpreter.lazy.traces.entries) == 2


def test_each_call_that_does_not_replay_says_why(cuda):
    """The first call's runs are seen once, the second's captured (the call's trace kept),
    the others replay; a call with graphs off says so (runtime/traces.py's last_miss, the
    note on the call's last launch)."""
    cp, log = cuda
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=on_gpu(cp, model))
    x = cp.asarray(np.random.default_rng(5).standard_normal((2, 100, 24)).astype(np.float32))
    said = []
    for _ in range(4):
        s.run("transformer_block(x, 0)", x=x)
        said.append((s.interpreter.lazy.traces.last_miss, s.launches[-1].geometry.get("trace")))
    assert said[0][0] == ("no trace kept for this key; a run of the lazy graph launched one "
                          "by one (seen once: captured at the next identical run)")
    assert said[1][0] == "no trace kept for this key; captured at this call: replays from " \
                         "the next one"
    assert [m for m, _ in said[:2]] == [n for _, n in said[:2]]
    assert said[2:] == [(None, None)] * 2
    s.run("config { cuda_graph: false }")
    s.run("transformer_block(x, 0)", x=x)
    assert s.interpreter.lazy.traces.last_miss == "config { cuda_graph: false }"
