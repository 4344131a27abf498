"""The CUDA device group's logic on a stand-in for CuPy and NCCL over several GPUs
(tests/nccl_standin.py), for machines without GPUs: the NCCL collectives with uneven parts
(the padding NCCL's equal parts need), one communicator per device group made once, peer
copies between GPUs, and `@parallel` programs split over `cuda:0 + cuda:1` (and three GPUs)
equal to one device, their shards on their GPUs, a chain of blocks that never goes through
the host. The kernels run on the CPU reference executor. test_multi_gpu.py runs the real thing
on two GPUs."""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import nccl_standin  # noqa: E402

import zynbook  # noqa: E402
from zynbook.runtime.sharded import ShardedTensor, chunk_bounds, group_for  # noqa: E402

from test_parallel import (KERNELS, MATMUL, SCALE_ROWS, SPEC_KERNELS, _rand,  # noqa: E402
                           check_spec_kernel_split)

if importlib.util.find_spec("cupy") is not None:
    pytest.skip("CuPy is installed: test_multi_gpu.py runs the device group itself",
                allow_module_level=True)


@pytest.fixture
def gpus(monkeypatch):
    """(the stand-in's log, [cuda:0, cuda:1, cuda:2])"""
    return nccl_standin.install(monkeypatch, 3)


def _on(dev, host):
    return nccl_standin.ndarray(np.array(host), dev.index)


def _back(arr, dev):
    assert isinstance(arr, nccl_standin.ndarray) and arr.dev == dev.index
    return arr.host


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_nccl_collectives_with_uneven_parts(gpus, n, dtype):
    log, devs = gpus
    devs = devs[:n]
    group = group_for(devs)
    assert group.kind == "nccl"
    r = np.random.default_rng(1)
    parts = [(r.standard_normal((7, 5)) * 4).astype(dtype) for _ in devs]
    on = [_on(d, p) for d, p in zip(devs, parts)]
    total = parts[0].copy()
    for p in parts[1:]:
        total = total + p
    for op, want in (("+", total), ("max", np.maximum.reduce(parts)),
                     ("min", np.minimum.reduce(parts))):
        for d, got in zip(devs, group.all_reduce(on, op)):
            np.testing.assert_array_equal(_back(got, d), want)
    for axis, length in ((0, 7), (1, 5)):
        bounds = chunk_bounds(length, n)
        for d, got, (lo, hi) in zip(devs, group.reduce_scatter(on, "+", axis, bounds), bounds):
            np.testing.assert_array_equal(_back(got, d), np.take(total, range(lo, hi), axis))
        shards = [_on(d, np.take(parts[0], range(lo, hi), axis))
                  for d, (lo, hi) in zip(devs, bounds)]
        for d, got in zip(devs, group.all_gather(shards, axis)):
            np.testing.assert_array_equal(_back(got, d), parts[0])
    kinds = {kind for kind, ranks in log.collectives}
    assert kinds == {"allReduce", "reduceScatter", "allGather"}
    assert all(ranks == n for _, ranks in log.collectives)


def test_what_nccl_cannot_carry_goes_by_peer_copies(gpus):
    log, devs = gpus
    group = group_for(devs[:2])
    parts = [np.array([1 + 2j, 3j], np.complex64), np.array([1j, 1], np.complex64)]
    got = group.all_reduce([_on(d, p) for d, p in zip(devs, parts)], "+")
    for d, arr in zip(devs, got):
        np.testing.assert_array_equal(_back(arr, d), parts[0] + parts[1])
    assert log.collectives == [] and log.peer_copies >= 2
    flags = [np.array([True, False, True]), np.array([True, True, False])]
    on = [_on(d, f) for d, f in zip(devs, flags)]
    for op, want in (("and", flags[0] & flags[1]), ("or", flags[0] | flags[1])):
        for d, arr in zip(devs, group.all_reduce(on, op)):
            np.testing.assert_array_equal(_back(arr, d).astype(bool), want)


def test_one_communicator_per_device_group_made_once(gpus):
    log, devs = gpus
    a = group_for(devs[:2])
    assert group_for(devs[:2]) is a and log.communicators == 1
    assert group_for(devs[1:]) is not a and log.communicators == 2
    assert group_for([devs[0], devs[0]]).kind == "peer"        # one GPU twice: no NCCL
    assert log.communicators == 2


GPUS = ["cuda:0", "cuda:1"]


@pytest.mark.parametrize("devices", [GPUS, ["cuda:0", "cuda:1", "cuda:2"]],
                         ids=["2gpus", "3gpus"])
@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_type_split_over_gpus_equals_one_device(gpus, name, mode, devices):
    log, devs = gpus
    src, make, expect = KERNELS[name]
    inputs = make(_rand(11))
    one = zynbook.run(src.format(mode=mode), devices=["cpu"], **inputs)
    session = zynbook.Session()
    out = session.run(src.format(mode=mode), devices=devices, **inputs)
    assert sorted(launch.device for launch in session.launches) == sorted(devices)
    if isinstance(out, ShardedTensor):
        for dev, arr, _ in out.shards:
            assert isinstance(arr, nccl_standin.ndarray) and f"cuda:{arr.dev}" == dev
    elif np.ndim(np.asarray(out)) > 0:          # partial results combined on the GPUs
        assert log.collectives == [("allReduce", len(devices))]
        assert out.device == "cuda:0" and out.data.dev == 0
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), expect(**inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(13, 6, 11), (2, 17, 3), (9, 2, 4)])
@pytest.mark.parametrize("n", [2, 3])
def test_the_contraction_split_reduce_scatters_through_nccl(gpus, shape, n):
    log, devs = gpus
    m, k, cols = shape
    r = _rand(8)
    a, b = r((m, k)), r((k, cols))
    ids = [d.id for d in devs[:n]]
    out = zynbook.run('config { model_split: "contraction" }\n' + MATMUL.format(mode="model"),
                      A=a, B=b, devices=ids)
    assert isinstance(out, ShardedTensor) and out.axis == 0
    assert out.bounds == [bd for bd in chunk_bounds(m, min(n, k)) if bd[1] > bd[0]]
    assert ("reduceScatter", min(n, k)) in log.collectives
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)


def test_a_chain_of_blocks_stays_on_the_gpus(gpus):
    """The shards of one block feed the next in place, a differently cut input is re-cut with
    peer copies, a whole input is all-gathered by NCCL; the host sees the result only when
    asked."""
    log, devs = gpus
    x, w = _rand(5)((11, 4)), _rand(6)((4,))
    y = zynbook.run(SCALE_ROWS, x=x, w=w, devices=GPUS)
    assert y.bounds == [(0, 5), (5, 11)]
    to_host = [d.to_host_calls for d in devs]
    from_host = [d.from_host_calls for d in devs]
    z = zynbook.run("""compute(y) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] * 2.0
}""", y=y, devs=GPUS)
    assert log.peer_copies == 0
    three = zynbook.run("""compute(z) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = z[b, f] - 1.0
}""", z=z, devs=[d.id for d in devs])         # 11 rows as 3/4/4: re-cut between GPUs
    assert log.peer_copies > 0
    b = _rand(7)((4, 6))
    prod = zynbook.run(MATMUL.format(mode="model"), A=three, B=b, devices=[d.id for d in devs])
    assert ("allGather", 3) in log.collectives          # A whole on every GPU
    # nothing came back to the host; only B's columns went out to the GPUs
    assert [d.to_host_calls for d in devs] == to_host
    assert [d.from_host_calls - n for d, n in zip(devs, from_host)] == [1, 1, 1]
    want = ((x * w + 1.0) * 2.0 - 1.0) @ b
    np.testing.assert_allclose(np.asarray(prod), want, rtol=1e-4, atol=1e-5)
    gathered = prod.gather("cuda:1")
    assert gathered.device == "cuda:1" and gathered.data.dev == 1
    np.testing.assert_allclose(gathered.data.host, want, rtol=1e-4, atol=1e-5)


def test_the_spec_transformer_block_on_two_gpus_never_touches_the_host(gpus):
    from test_parallel import _spec_block_on
    log, devs = gpus
    r = _rand(31)
    hidden, heads, ffn = 16, 2, 24
    layer = {"qkv_proj": r((hidden, 3 * hidden)), "out_proj": r((hidden, hidden)),
             "ln1_weight": r((hidden,)) + 1.0, "ln1_bias": r((hidden,)),
             "ffn_up": r((hidden, ffn)), "ffn_down": r((ffn, hidden)),
             "ln2_weight": r((hidden,)) + 1.0, "ln2_bias": r((hidden,))}
    prog = f"let num_heads = {heads}\nlet head_dim = {hidden // heads}\n" + \
        _spec_block_on("devs")
    x = r((3, 20, hidden))
    one = zynbook.run(prog, x=x, model={"layers": [layer]}, devs=["cpu"])
    placed = {k: _on(devs[0], v) for k, v in layer.items()}
    xs = zynbook.run("""compute(x) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, t in 0..seq, f in 0..features:
        out[b, t, f] = x[b, t, f]
}""", x=x, devs=GPUS)
    before = sum(d.transfers for d in devs)
    out = zynbook.run(prog, x=xs, model={"layers": [placed]}, devs=GPUS)
    assert sum(d.transfers for d in devs) == before         # the weights by peer copies
    assert isinstance(out, ShardedTensor) and out.devices == GPUS
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-5, atol=1e-5)


def test_the_spec_multi_gpu_example_as_written(gpus):
    """examples/multi_gpu.zyn names cuda:0 and cuda:1: on the stand-in it runs unchanged, its
    data-parallel result sharded on the two GPUs and fed to the next block in place."""
    from pathlib import Path
    log, devs = gpus
    text = (Path(__file__).parent.parent / "examples" / "multi_gpu.zyn").read_text()
    session = zynbook.Session()
    max_diff = session.run(text)
    assert max_diff < 1e-3
    data = np.asarray(session.namespace["data"]).astype(np.float64)
    result, scaled = session.namespace["result"], session.namespace["scaled"]
    assert isinstance(result, ShardedTensor) and result.devices == GPUS
    assert [a.dev for _, a, _ in scaled.shards] == [0, 1] and result.bounds == scaled.bounds
    np.testing.assert_allclose(np.asarray(scaled), 0.5 * data @ data, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(session.namespace["forward"]), np.tanh(data),
                               rtol=1e-5, atol=1e-6)


def test_warm_chunks_are_queued_from_the_calling_thread(gpus):
    """The first run launches the chunks on threads of their own (it compiles); once every
    chunk's plan queues without waiting, a run queues them one after another from the
    calling thread, with no hand-off between threads."""
    import threading
    log, devs = gpus
    x, w = _rand(5)((11, 4)), _rand(6)((4,))
    session = zynbook.Session()
    for _ in range(2):
        out = session.run(SCALE_ROWS, x=x, w=w, devices=GPUS)
    np.testing.assert_allclose(np.asarray(out), x * w + 1.0, rtol=1e-6)
    me = threading.current_thread().name
    assert devs[0].threads == [me, me]
    assert devs[1].threads[0] != me and devs[1].threads[1] == me


@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", SPEC_KERNELS)
def test_the_spec_kernels_split_over_gpus(gpus, name, mode):
    out = check_spec_kernel_split(name, mode, GPUS)
    assert [a.dev for _, a, _ in out.shards] == [0, 1]


def test_the_data_parallel_training_step_all_reduces_through_nccl(gpus):
    """zynbook.nn.DataParallel over cuda:0 + cuda:1: every gradient all-reduced by NCCL, and
    the steps equal one device's (tests/test_data_parallel.py's check)."""
    from test_data_parallel import check_steps_equal_one_device
    log, devs = gpus
    dp = check_steps_equal_one_device(GPUS, {"rtol": 1e-5, "atol": 1e-6})
    assert dp.group.kind == "nccl"
    # one all-reduce of one flat bucket per step: loss_and_grads + 3 steps
    assert log.collectives == [("allReduce", 2)] * 4
    for replica, dev in zip(dp.replicas, devs):
        assert all(b.tensor.data.dev == dev.index for b in replica.params.values())
