"""On two CUDA GPUs (skipped elsewhere; scripts/multi_gpu_check.sh runs it): pipeline calls
split over cuda:0 + cuda:1 replay their CUDA graphs per GPU (runtime/traces.py), equal bit
for bit to the same calls run block by block (`config { cuda_graph: false }`) and to numpy:
the spec's transformer block (batch not dividing evenly, weights on one GPU or sharded) and a
contraction whose partial products are reduce-scattered by NCCL between two stages. Every
call's reason for not replaying (`Traces.last_miss`) is in the assertion's message.
tests/test_group_traces.py runs the same logic on a stand-in without GPUs (its memory pool
modelled: arrays made afresh at each call, the weights' peer copies to the other GPU and
the host's chunks uploaded, are staged, never read in place)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")
try:
    _GPUS = cupy.cuda.runtime.getDeviceCount()
except Exception:           # no driver
    _GPUS = 0
if _GPUS < 2:
    pytest.skip("needs two CUDA GPUs", allow_module_level=True)

sys.path.insert(0, os.path.dirname(__file__))
from test_examples_cpu import HIDDEN, make_model, np_transformer_block  # noqa: E402

import zynbook  # noqa: E402
from zynbook.runtime.sharded import ShardedTensor  # noqa: E402

GPUS = ["cuda:0", "cuda:1"]

CUT = """compute(x) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, t in 0..seq, f in 0..features:
        out[b, t, f] = x[b, t, f]
}"""


def block_source() -> str:
    from test_parallel import _spec_block_on
    body = _spec_block_on("devs")
    return "let num_heads = 3\nlet head_dim = 8\n" + \
        body[:body.index("\ntransformer_block(x, 0)")] + "\n"


def weights_on(model, where: str):
    if where == "one":
        return {"layers": [{k: cupy.asarray(v) for k, v in layer.items()}
                           for layer in model["layers"]]}
    cut = {1: "for i in 0..n:\n        out[i] = w[i]",
           2: "for i in 0..n, j in 0..m:\n        out[i, j] = w[i, j]"}
    return {"layers": [{k: zynbook.run(f"compute(w) @device(devs) @parallel(data) {{\n"
                                       f"    @kernel elementwise\n    {cut[v.ndim]}\n}}",
                                       w=v, devs=GPUS)
                        for k, v in layer.items()} for layer in model["layers"]]}


def graphs_listed(session) -> bool:
    return all("graph" in (ln.geometry or {}) for ln in session.launches)


def replay_of_last_call(session) -> tuple:
    """(whether the last call replayed its graphs, why not: runtime/traces.py's reason)."""
    return graphs_listed(session), session.interpreter.lazy.traces.last_miss


def said(calls: list) -> str:
    return "per call (replayed, why not):\n" + "\n".join(f"  {c}" for c in calls)


@pytest.mark.parametrize("where", ["one", "sharded"])
def test_the_spec_block_replays_per_gpu_equal_to_the_run_block_by_block(where):
    model = make_model()
    s, plain = zynbook.Session("cuda:0"), zynbook.Session("cuda:0")
    s.run(block_source(), model=weights_on(model, where), devs=GPUS)
    plain.run("config { cuda_graph: false }\n" + block_source(),
              model=weights_on(model, where), devs=GPUS)
    rng = np.random.default_rng(7)
    calls = []
    for _ in range(6):
        x = rng.standard_normal((3, 100, HIDDEN)).astype(np.float32)
        xs = zynbook.run(CUT, x=x, devs=GPUS)
        out = s.run("transformer_block(x, 0)", x=xs)
        calls.append(replay_of_last_call(s))
        want = plain.run("transformer_block(x, 0)", x=xs)
        assert isinstance(out, ShardedTensor) and out.bounds == [(0, 1), (1, 3)]
        np.testing.assert_array_equal(out.numpy(), want.numpy())
        np.testing.assert_allclose(out.numpy(), np_transformer_block(x, model["layers"][0]),
                                   rtol=2e-3, atol=2e-3)
    assert [r for r, _ in calls] == [False, False, True, True, True, True], said(calls)
    assert [m is None for _, m in calls] == [False, False, True, True, True, True], said(calls)


def test_a_reduce_scatter_between_two_stages_replays():
    prog = """config { model_split: "contraction" }
pipeline mm(a: tensor[n, k], b: tensor[k, m]):
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
    s, plain = zynbook.Session("cuda:0"), zynbook.Session("cuda:0")
    s.run(prog, devs=GPUS)
    plain.run("config { cuda_graph: false }\n" + prog, devs=GPUS)
    rng = np.random.default_rng(8)
    calls = []
    for _ in range(5):
        a = rng.standard_normal((67, 130)).astype(np.float32)
        b = rng.standard_normal((130, 45)).astype(np.float32)
        got = s.run("mm(a, b)", a=a, b=b)
        calls.append(replay_of_last_call(s))
        np.testing.assert_array_equal(got.numpy(), plain.run("mm(a, b)", a=a, b=b).numpy())
        np.testing.assert_allclose(got.numpy(), a.astype(np.float64) @ b + 1.0,
                                   rtol=1e-3, atol=1e-3)
    assert [r for r, _ in calls] == [False, False, True, True, True], said(calls)
    assert [m is None for _, m in calls] == [False, False, True, True, True], said(calls)
