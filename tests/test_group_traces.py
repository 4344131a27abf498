"""Traces of pipeline calls whose blocks run split over a group of CUDA devices
(runtime/traces.py's _GroupTrace), on a two-GPU stand-in with real CudaDevices and CUDA
graphs (tests/cuda_group_standin.py): the spec's transformer block with every block
`@device(devs) @parallel(data)`, a batch that does not divide evenly, called again with the
same key replays one graph per GPU without evaluating its body, equal bit for bit to the run
without graphs and to numpy; another key, a collective or copy between the GPUs in the middle
of the call, or graphs turned off run the body as before, each call saying why it did not
replay. The stand-in's memory pool hands a freed block to the next array of its size, as
CuPy's does: arrays a call makes afresh (the weights' peer copies to the other GPU, chunks
of host inputs uploaded) would never be at the address a graph read them at."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_group_standin  # noqa: E402
from test_examples_cpu import HIDDEN, make_model, np_transformer_block  # noqa: E402

import zynbook  # noqa: E402
from zynbook.errors import ZynMLRuntimeError  # noqa: E402
from zynbook.runtime.sharded import ShardedTensor  # noqa: E402

if importlib.util.find_spec("cupy") is not None:
    pytest.skip("CuPy is installed: bench/bench_multi_gpu.py times the real device group",
                allow_module_level=True)

GPUS = ["cuda:0", "cuda:1"]

CUT = """compute(x) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, t in 0..seq, f in 0..features:
        out[b, t, f] = x[b, t, f]
}"""


@pytest.fixture
def group(monkeypatch, tmp_path):
    """(cupy_standin's log, nccl_standin's log, [cuda:0, cuda:1])"""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    return cuda_group_standin.install(monkeypatch, 2)


def block_source() -> str:
    """The spec's block (examples/transformer_block.zyn) with every compute block
    `@device(devs) @parallel(data)`, as bench/bench_multi_gpu.py runs it."""
    from test_parallel import _spec_block_on
    body = _spec_block_on("devs")
    return "let num_heads = 3\nlet head_dim = 8\n" + \
        body[:body.index("\ntransformer_block(x, 0)")] + "\n"


def sharded(x) -> ShardedTensor:
    """`x` cut by its batch over the two GPUs."""
    out = zynbook.run(CUT, x=x, devs=GPUS)
    assert isinstance(out, ShardedTensor) and [a.dev for _, a, _ in out.shards] == [0, 1]
    return out


def placed(model, weights: str):
    """The layers' weights on cuda:0 alone ("one", each call copies them to cuda:1), or
    sharded by rows over both GPUs ("sharded", replicated once)."""
    import nccl_standin as ns
    if weights == "one":
        return {"layers": [{k: ns.ndarray(np.array(v), 0) for k, v in layer.items()}
                           for layer in model["layers"]]}
    cut = """compute(w) @device(devs) @parallel(data) {
    @kernel elementwise
    for i in 0..n:
        out[i] = w[i]
}"""
    cut2 = """compute(w) @device(devs) @parallel(data) {
    @kernel elementwise
    for i in 0..n, j in 0..m:
        out[i, j] = w[i, j]
}"""
    return {"layers": [{k: zynbook.run(cut if v.ndim == 1 else cut2, w=v, devs=GPUS)
                        for k, v in layer.items()} for layer in model["layers"]]}


def counting(session, monkeypatch) -> list:
    evaluated = []
    real = session.interpreter.compute
    monkeypatch.setattr(session.interpreter, "compute",
                        lambda node: evaluated.append(node) or real(node))
    return evaluated


def listing(session) -> list:
    return [(ln.kernel, ln.device) for ln in session.launches]


def miss(session):
    """Why the session's last call did not replay (None: it did)."""
    return session.interpreter.lazy.traces.last_miss


def first_two_calls_said(misses: list):
    """The first call is recorded, the second captured, the others replay; the first two
    say so in their last launch's geometry."""
    assert misses[0][0].endswith("recorded: captured at the next call with this key")
    assert misses[1][0].endswith("captured at this call: replays from the next one")
    assert [m for m, _ in misses[:2]] == [n for _, n in misses[:2]]
    assert misses[2:] == [(None, None)] * (len(misses) - 2)


def said(session) -> tuple:
    """(the last call's reason, the note on its last launch: what the inspector shows)"""
    return miss(session), session.launches[-1].geometry.get("trace")


@pytest.mark.parametrize("weights", ["one", "sharded"])
def test_the_spec_block_over_two_gpus_replays_one_graph_per_gpu(group, monkeypatch, weights):
    clog, nlog, devs = group
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=placed(model, weights), devs=GPUS)
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((3, 20, HIDDEN)).astype(np.float32) for _ in range(5)]
    outs, listed, graphs, misses = [], [], [], []
    for x in xs:
        before = len(clog.graph_launches)
        outs.append(s.run("transformer_block(x, 0)", x=sharded(x)))
        graphs.append(len(clog.graph_launches) - before)
        listed.append(listing(s))
        misses.append(said(s))
    assert len(evaluated) == 2 * 6, misses  # the first two calls only: then it replays
    assert graphs[2:] == [2, 2, 2]          # one graph per GPU
    first_two_calls_said(misses)
    assert len(s.interpreter.lazy.traces.entries) == 1
    # cuda:1's graph reads the weights' replicas kept with them in place; their peer
    # copies made at each call ("one") are copied into the graph's own buffers
    (trace,) = s.interpreter.lazy.traces.entries.values()
    record, sources = trace.stages[0]["cuda:1"]
    fields = {j for j, src in enumerate(sources)
              if src[0] == "entry" and trace.entries[src[1]][0][0] == "label"}
    in_place = {j for j, _ in record.in_place}
    assert len(fields) == 8
    assert (in_place & fields) == (set() if weights == "one" else fields)
    # the same launches listed (the first call compiles, its GPUs' launches on threads)
    assert all(ln == listed[1] for ln in listed[1:])
    assert sorted(listed[0]) == sorted(listed[1]) and len(listed[0]) == 12
    for x, out in zip(xs, outs):            # every result kept as it was made
        assert isinstance(out, ShardedTensor) and out.bounds == [(0, 1), (1, 3)]
        assert [a.dev for _, a, _ in out.shards] == [0, 1]
        np.testing.assert_allclose(out.numpy(), np_transformer_block(x, model["layers"][0]),
                                   rtol=2e-4, atol=2e-4)
    # the run without graphs (block by block) gives the same values, bit for bit
    plain = zynbook.Session("cuda:0")
    plain.run("config { cuda_graph: false }\n" + block_source(),
              model=placed(model, weights), devs=GPUS)
    for x, out in zip(xs, outs):
        want = plain.run("transformer_block(x, 0)", x=sharded(x))
        np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert not plain.interpreter.lazy.traces.entries


def test_another_key_runs_the_body(group, monkeypatch):
    clog, nlog, devs = group
    model = make_model()
    s = zynbook.Session("cuda:0")
    s.run(block_source(), model=placed(model, "sharded"), devs=GPUS)
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 20, HIDDEN)).astype(np.float32)
    xs = sharded(x)
    for _ in range(3):
        got = s.run("transformer_block(x, 0)", x=xs)
    assert len(evaluated) == 12
    np.testing.assert_allclose(got.numpy(), np_transformer_block(x, model["layers"][0]),
                               rtol=2e-4, atol=2e-4)
    for layer, x2 in ((1, x), (0, rng.standard_normal((4, 20, HIDDEN)).astype(np.float32))):
        before = len(evaluated)         # another layer's record, another batch
        got = s.run("transformer_block(x, layer)", x=sharded(x2), layer=layer)
        assert len(evaluated) == before + 6
        assert miss(s).startswith("no trace kept for this key; recorded")
        np.testing.assert_allclose(got.numpy(),
                                   np_transformer_block(x2, model["layers"][layer]),
                                   rtol=2e-4, atol=2e-4)
    before = len(evaluated)             # the whole input on one GPU: another placement
    got = s.run("transformer_block(x, 0)", x=zynbook.run("x", x=x))
    assert len(evaluated) == before + 6
    # the key's trace read its input in place: the same placement elsewhere runs the body
    xs2 = sharded(x)
    got = s.run("transformer_block(x, 0)", x=xs2)
    assert len(evaluated) == before + 12
    assert miss(s) == ("not replayed: argument 1, read in place by the graph on cuda:0, is "
                       "at another address than at the capture; recorded: captured at the "
                       "next call with this key")
    np.testing.assert_allclose(got.numpy(), np_transformer_block(x, model["layers"][0]),
                               rtol=2e-4, atol=2e-4)


CHAIN = """pipeline chain(a: tensor[n, m]):
    let b = compute(a) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = a[i, j] * 2.0 + 1.0
    }
    let (l, r) = split(b, 2, axis=1)
    let c = compute(l, r) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..k:
            out[i, j] = l[i, j] - r[i, j] * 0.5
    }
    let d = reshape(c, [n, k])
    let e = compute(d, a) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..k:
            out[i, j] = d[i, j] * a[i, j]
    }
    return e
"""


@pytest.mark.parametrize("gpus", [2, 3])
def test_views_of_shards_are_read_at_their_offsets_inside_the_graphs(monkeypatch, tmp_path,
                                                                     gpus):
    """split() gives strided views of a block's shards: inside the graph they are copied
    contiguous as a launch one by one copies them; odd row counts cut unevenly."""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    clog, nlog, devs = cuda_group_standin.install(monkeypatch, gpus)
    ids = [d.id for d in devs]
    s = zynbook.Session("cuda:0")
    s.run("let k = 3\n" + CHAIN, devs=ids)
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(5)
    for _ in range(5):
        a = rng.standard_normal((7, 6)).astype(np.float32)
        cut = zynbook.run("""compute(a) @device(devs) @parallel(data) {
    @kernel elementwise
    for i in 0..n, j in 0..m:
        out[i, j] = a[i, j]
}""", a=a, devs=ids)
        before = len(clog.graph_launches)
        got = s.run("chain(a)", a=cut)
        b = a * np.float32(2.0) + np.float32(1.0)
        want = (b[:, :3] - b[:, 3:] * np.float32(0.5)) * a[:, :3]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
        assert got.bounds == ([(0, 3), (3, 7)] if gpus == 2 else [(0, 2), (2, 4), (4, 7)])
    assert len(clog.graph_launches) - before == gpus     # the last call: a graph per GPU
    assert len(evaluated) == 2 * 3
    assert s.interpreter.lazy.traces.entries


MODEL = """pipeline mm(a: tensor[n, k], b: tensor[k, m]):
    let c = compute(a, b) @device(devs) @parallel(model) {
        @kernel matmul
        for i in 0..n, j in 0..m:
            var sum = 0.0
            for p in 0..k:
                sum += a[i, p] * b[p, j]
            out[i, j] = sum
    }
    let d = compute(c) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = c[i, j] + 1.0
    }
    return d
"""

RECUT = """pipeline recut(a: tensor[n, m], w: tensor[m, p]):
    let b = compute(a) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = a[i, j] * 3.0
    }
    let c = compute(b, w) @device(devs) @parallel(model) {
        @kernel matmul
        for i in 0..n, j in 0..p:
            var sum = 0.0
            for q in 0..m:
                sum += b[i, q] * w[q, j]
            out[i, j] = sum
    }
    return c
"""


LAST = """pipeline mm2(a: tensor[n, k], b: tensor[k, m]):
    let b2 = compute(b) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..k, j in 0..m:
            out[i, j] = b[i, j] * 0.5
    }
    let c = compute(a, b2) @device(devs) @parallel(model) {
        @kernel matmul
        for i in 0..n, j in 0..m:
            var sum = 0.0
            for p in 0..k:
                sum += a[i, p] * b2[p, j]
            out[i, j] = sum
    }
    return c
"""


MIX = """pipeline mix(a: tensor[n, k], b: tensor[k, m], e: tensor[n, m]):
    let e2 = compute(e) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = e[i, j] * 2.0
    }
    let c = compute(a, b) @device(devs) @parallel(model) {
        @kernel matmul
        for i in 0..n, j in 0..m:
            var sum = 0.0
            for p in 0..k:
                sum += a[i, p] * b[p, j]
            out[i, j] = sum
    }
    let d = compute(c, e2) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = c[i, j] + e2[i, j]
    }
    return d
"""


NORM = """pipeline norm(a: tensor[rows, cols]):
    let top = compute(a) @device(devs) @parallel(data) {
        @kernel reduce(max, axis=0)
        for i in 0..rows, j in 0..cols:
            yield a[i, j]
    }
    let y = compute(a, top) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..rows, j in 0..cols:
            out[i, j] = a[i, j] - top[j]
    }
    return y
"""


@pytest.mark.parametrize("case", ["between", "last", "earlier", "all-reduce"])
def test_a_collective_between_launches_splits_the_replay(group, monkeypatch, case):
    """Partial products reduce-scattered by NCCL end one stage of graphs; the next reads
    the collective's result (staged), or the call returns it; equal bit for bit to the run
    without graphs."""
    clog, nlog, devs = group
    rng = np.random.default_rng(6)
    prog, call = {"between": (MODEL, "mm(a, w)"), "last": (LAST, "mm2(a, w)"),
                  "earlier": (MIX, "mix(a, w, e)"), "all-reduce": (NORM, "norm(a)")}[case]
    setting = 'config { model_split: "contraction" }\n'
    s, plain = zynbook.Session("cuda:0"), zynbook.Session("cuda:0")
    s.run(setting + prog, devs=GPUS)
    plain.run(setting + "config { cuda_graph: false }\n" + prog, devs=GPUS)
    evaluated = counting(s, monkeypatch)
    misses = []
    for _ in range(5):
        a, w, e = (rng.standard_normal(shape).astype(np.float32)
                   for shape in ((5, 7), (7, 4), (5, 4)))
        before = len(nlog.collectives)
        got = s.run(call, a=a, w=w, e=e)
        misses.append(said(s))
        assert nlog.collectives[before:] == [("allReduce" if case == "all-reduce" else
                                              "reduceScatter", 2)]
        want = {"between": a @ w + np.float32(1.0), "last": a @ (w * np.float32(0.5)),
                "earlier": a @ w + e * np.float32(2.0), "all-reduce": a - a.max(0)}[case]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got.numpy(), plain.run(call, a=a, w=w, e=e).numpy())
        assert isinstance(got, ShardedTensor) and got.bounds == [(0, 2), (2, 5)]
        assert [a.dev for _, a, _ in got.shards] == [0, 1]
    assert len(evaluated) == 2 * (3 if case == "earlier" else 2), misses
    first_two_calls_said(misses)        # the host's inputs, uploaded afresh, are staged
    assert miss(plain) == "config { cuda_graph: false }"


def test_a_result_gathered_whole_between_launches_is_never_traced(group, monkeypatch):
    """A sharded result gathered onto every GPU for the next block (an all-gather between
    the devices): the calls run the body, with the same results."""
    clog, nlog, devs = group
    rng = np.random.default_rng(6)
    s = zynbook.Session("cuda:0")
    a, w = rng.standard_normal((5, 6)).astype(np.float32), \
        rng.standard_normal((6, 4)).astype(np.float32)
    s.run(RECUT, devs=GPUS)
    evaluated = counting(s, monkeypatch)
    for _ in range(4):
        got = s.run("recut(a, w)", a=a, w=w)
        np.testing.assert_allclose(np.asarray(got.numpy()), (a * np.float32(3.0)) @ w,
                                   rtol=1e-5, atol=1e-5)
        assert "a result of the call, is re-cut or copied between devices" in miss(s)
        assert s.launches[-1].geometry["trace"] == miss(s)
    assert len(evaluated) == 4 * 2
    assert not s.interpreter.lazy.traces.entries
    assert nlog.collectives


GATHER = """pipeline pick(x: tensor[n], idx: tensor[m]):
    let y = compute(x) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] + 1.0
    }
    let z = compute(idx, x) @device(devs) @parallel(data) {
        @kernel elementwise
        for i in 0..m:
            out[i] = x[idx[i]] * 2.0
    }
    return z
"""


def test_a_failing_launch_in_a_replayed_graph_raises_its_error(group):
    """An index out of range in a kernel of a replayed graph is raised as the launch one
    by one raises it, naming the block's line."""
    clog, nlog, devs = group
    s = zynbook.Session("cuda:0")
    s.run(GATHER, devs=GPUS)
    x = np.arange(8, dtype=np.float32)
    one = zynbook.run("""compute(x) @device(devs) @parallel(data) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i]
}""", x=x, devs=GPUS)
    ok = np.array([7, 0, 3, 5, 1], np.int32)
    for _ in range(3):
        got = s.run("pick(x, idx)", x=one, idx=ok)
        np.testing.assert_array_equal(got.numpy(), x[ok] * 2.0)
    assert s.interpreter.lazy.traces.entries
    graphs = len(clog.graph_launches)
    with pytest.raises(ZynMLRuntimeError) as err:
        s.run("pick(x, idx)", x=one, idx=np.array([7, 0, 3, 9, 1], np.int32))
    assert len(clog.graph_launches) > graphs and "index" in str(err.value)


def test_the_bench_row_replays_over_the_group(group):
    """bench/bench_multi_gpu.py's transformer block row (its --quick sizes) on the stand-in:
    the two-GPU call replays its graphs (checked there against one GPU), the row without
    graphs does not."""
    clog, nlog, devs = group
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
    import bench_multi_gpu as bench
    bench.ROWS.clear()
    bench.bench_transformer_block(GPUS, True, 2, 3)
    rows = list(bench.ROWS)
    assert [r.get("error") for r in rows] == [None, None]
    assert [r["many_replayed"] for r in rows] == [True, False]
    assert all("many_queue_ms" in r for r in rows)


def test_a_call_that_fails_leaves_nothing_logged(group):
    """A call that raises never reaches its end: what it logged is dropped once its frame
    is gone, so later blocks are neither logged nor held."""
    from zynbook.runtime import sharded
    clog, nlog, devs = group
    s = zynbook.Session("cuda:0")
    s.run(GATHER, devs=GPUS)
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(ZynMLRuntimeError):
        s.run("pick(x, idx)", x=x, idx=np.array([7, 0, 3, 9, 1], np.int32))
    s.run(CUT, x=np.ones((3, 2, 2), np.float32))
    assert sharded.recording() is None
    got = s.run("pick(x, idx)", x=x, idx=np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(got.numpy(), x[[1, 2, 3]] * 2.0)


def test_a_collective_result_returned_whole_replays(group, monkeypatch):
    """A call that returns partial results all-reduced onto the first GPU (a plain tensor,
    fresh at every call) replays the graphs before the collective."""
    clog, nlog, devs = group
    s = zynbook.Session("cuda:0")
    s.run(NORM.replace("return y", "return top").replace("pipeline norm", "pipeline peak"),
          devs=GPUS)
    evaluated = counting(s, monkeypatch)
    rng = np.random.default_rng(9)
    outs = []
    for _ in range(4):
        a = rng.standard_normal((5, 7)).astype(np.float32)
        outs.append((a, s.run("peak(a)", a=a)))
    for a, got in outs:
        assert not isinstance(got, ShardedTensor) and got.device == "cuda:0"
        np.testing.assert_array_equal(got.numpy(), a.max(0))
    assert len(evaluated) == 2 * 2 and s.interpreter.lazy.traces.entries
