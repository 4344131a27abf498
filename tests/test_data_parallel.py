"""Data-parallel training (zynbook.nn.DataParallel): a replica of the model per device of a
group, each running the step on its shard of the batch, the gradients all-reduced through the
group's collectives. The loss, the gradients and the weights after a few AdamW steps equal
the one-device step on the whole batch (TinyGPT.train_batch), for even and uneven shards and
a device with no share; on a `["cpu", "cpu"]` group here, and on the groups of the devices
present (two GPUs: NCCL)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError, ZynMLShapeError
from zynbook.nn import DataParallel
from zynbook.nn.model import GPTConfig, TinyGPT, init_weights

CONFIG = GPTConfig(vocab=19, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn=32, max_seq=16,
                   seed=1)
WEIGHTS = init_weights(CONFIG)

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
_OTHERS = [d["id"] for d in zynbook.compute_devices()
           if d["id"] != "cpu" and not d["id"].startswith("gl:")
           and (not _WANTED or d["id"] in _WANTED.split(","))]
_CUDA = [d for d in _OTHERS if d.startswith("cuda:")]
GROUPS = [["cpu", "cpu"]] + [["cpu", d] for d in _OTHERS[:1]] + \
    ([_CUDA[:2]] if len(_CUDA) >= 2 else [[d, d] for d in _OTHERS[:1]])


def _batch(n, seq=9, seed=0):
    tokens = np.random.default_rng(seed).integers(1, CONFIG.vocab, (n, seq + 1))
    return tokens[:, :-1], tokens[:, 1:]


def _close(a, b, tol):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), **tol)


@pytest.mark.parametrize("group", GROUPS, ids=["+".join(g) for g in GROUPS])
def test_data_parallel_steps_equal_one_device(group):
    check_steps_equal_one_device(group, {"rtol": 1e-5, "atol": 1e-6} if group == ["cpu", "cpu"]
                                 else {"rtol": 2e-3, "atol": 2e-4})


def check_steps_equal_one_device(group, tol):
    """The loss and gradients of a batch of 4 on `group`, and three AdamW steps, equal the
    one-device batch step on the group's first device; returns the DataParallel."""
    one = TinyGPT(zynbook.device(group[0]), CONFIG, WEIGHTS)
    dp = DataParallel(group, CONFIG, WEIGHTS)
    x, y = _batch(4)
    # the gradients: every replica holds the batch's mean gradient
    loss_1, grads_1 = one.batch_loss_and_grads(x, y)
    loss_p, grads_p = dp.loss_and_grads(x, y)
    assert loss_p == pytest.approx(loss_1, rel=tol["rtol"])
    for grads in grads_p:
        assert grads.keys() == grads_1.keys()
        for name in grads_1:
            _close(grads[name].to_vec(), grads_1[name].to_vec(), tol)
    # three AdamW steps: the same losses, the same weights on every replica
    for step in range(3):
        x, y = _batch(4, seed=step + 1)
        l1, lp = one.train_batch(x, y), dp.train_step(x, y)
        assert lp == pytest.approx(l1, rel=tol["rtol"] * 10)
    dp.sync()
    for name, buf in one.params.items():
        for replica in dp.replicas:
            _close(replica.params[name].to_vec(), buf.to_vec(), tol)
    return dp


@pytest.mark.parametrize("batch", [3, 1])
def test_uneven_shards_and_an_idle_device(batch):
    one = TinyGPT(zynbook.device("cpu"), CONFIG, WEIGHTS)
    dp = DataParallel(["cpu", "cpu"], CONFIG, WEIGHTS)
    assert dp.shards(batch) == ([(0, 1), (1, 3)] if batch == 3 else [(0, 0), (0, 1)])
    x, y = _batch(batch)
    assert dp.train_step(x, y) == pytest.approx(one.train_batch(x, y), rel=1e-6)
    for name, buf in one.params.items():
        _close(dp.replicas[0].params[name].to_vec(), buf.to_vec(), {"rtol": 1e-5, "atol": 1e-6})


def test_a_single_sequence_is_a_batch_of_one_and_mistakes_are_zynml_errors():
    dp = DataParallel(["cpu", "cpu"], CONFIG, WEIGHTS)
    x, y = _batch(1)
    loss, _ = dp.loss_and_grads(x[0], y[0])
    assert loss == pytest.approx(TinyGPT(zynbook.device("cpu"), CONFIG, WEIGHTS).loss(x[0], y[0]),
                                 rel=1e-6)
    with pytest.raises(ZynMLShapeError):
        dp.train_step(x, y[:, :-1])
    with pytest.raises(ZynMLDeviceError):
        DataParallel("cpu", CONFIG)


def test_the_gradients_are_all_reduced_as_one_flat_bucket(monkeypatch):
    """One collective per step over every gradient packed end to end; each replica's
    gradients come back as spans of its bucket, equal to the mean of the replicas' sums
    computed here with numpy."""
    dp = DataParallel(["cpu", "cpu"], CONFIG, WEIGHTS)
    x, y = _batch(3, seed=4)
    sums = [r.grad_sum(x[lo:hi], y[lo:hi]) for r, (lo, hi) in zip(dp.replicas, dp.shards(3))]
    want = {name: (sums[0][1][name].to_vec().astype(np.float64) +
                   sums[1][1][name].to_vec().astype(np.float64)) / 3 for name in sums[0][1]}
    calls = []
    original = dp.group.all_reduce

    def counted(arrays, op="+"):
        calls.append([np.asarray(a).shape for a in arrays])
        return original(arrays, op)
    monkeypatch.setattr(dp.group, "all_reduce", counted)
    _, grads = dp.loss_and_grads(x, y)
    total = sum(len(b) for b in dp.replicas[0].params.values())
    assert calls == [[(total,), (total,)]]
    for replica_grads in grads:
        bases = {id(np.asarray(b.tensor.data).base) for b in replica_grads.values()}
        assert len(bases) == 1
        for name, g in replica_grads.items():
            _close(g.to_vec(), want[name], {"rtol": 1e-5, "atol": 1e-6})
