"""Activation checkpointing: under a memory budget, the training step keeps only the inputs of
the layers that do not fit and recomputes their activations in the backward pass. The loss
and every gradient equal those of the step that keeps everything, and the device's peak
memory (its allocator's count of live buffers) is lower. The budget comes from the model's
config, or from the device (`dev.memory_budget`, `config { memory_budget: ... }` in ZynML)."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import zynbook
from zynbook.nn.model import GPTConfig, TinyGPT

CONFIG = GPTConfig(vocab=23, dim=16, n_layers=3, n_heads=4, n_kv_heads=2, ffn=32, max_seq=32,
                   seed=3)
SEQ = 24
_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = ["cpu"] + [d["id"] for d in zynbook.compute_devices()
                     if d["id"] != "cpu" and not d["id"].startswith("gl:")
                     and (not _WANTED or d["id"] in _WANTED.split(","))]


def _batch():
    rng = np.random.default_rng(5)
    ids = rng.integers(1, CONFIG.vocab, SEQ + 1)
    return ids[:-1], ids[1:]


def _step(budget, device_id="cpu"):
    """(loss, {name: gradient}, peak bytes of the step above what was alive before it,
    layers kept whole)."""
    dev = zynbook.device(device_id)
    model = TinyGPT(dev, dataclasses.replace(CONFIG, memory_budget=budget))
    ids, targets = _batch()
    model.loss_and_grads(ids, targets)              # compile first
    before = dev.memory_stats()["live_bytes"]
    dev.reset_peak_memory()
    loss, grads = model.loss_and_grads(ids, targets)
    peak = dev.memory_stats()["peak_bytes"] - before
    host = {k: g.to_vec() for k, g in grads.items()}
    del grads
    return loss, host, peak, model.layers_kept_whole(SEQ)


@pytest.mark.parametrize("device_id", DEVICES)
def test_checkpointing_gives_the_same_loss_and_gradients_in_less_memory(device_id):
    loss_w, grads_w, peak_w, kept_w = _step(None, device_id)
    loss_c, grads_c, peak_c, kept_c = _step(0, device_id)   # nothing fits: every layer recomputed
    assert (kept_w, kept_c) == (CONFIG.n_layers, 0)
    assert loss_c == pytest.approx(loss_w, rel=1e-5)
    assert grads_w.keys() == grads_c.keys()
    for k in grads_w:
        np.testing.assert_allclose(grads_c[k], grads_w[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert peak_c < peak_w, (peak_c, peak_w)
    # what a layer keeps whole against checkpointed, times the layers checkpointed, is about
    # what the peak saves (the recomputed layer's activations live again in the backward pass)
    model = TinyGPT(zynbook.device("cpu"), CONFIG)
    whole, ckpt = model.activation_bytes(SEQ)
    assert peak_w - peak_c >= (CONFIG.n_layers - 1) * (whole - ckpt) * 0.9


def test_a_budget_between_keeps_the_first_layers_whole():
    model = TinyGPT(zynbook.device("cpu"), CONFIG)
    whole, ckpt = model.activation_bytes(SEQ)
    base = 4 * 2 * SEQ * CONFIG.dim
    budget = base + whole + 2 * ckpt             # room for one layer kept whole
    loss_w, grads_w, peak_w, _ = _step(None)
    loss_b, grads_b, peak_b, kept = _step(budget)
    assert kept == 1
    assert loss_b == pytest.approx(loss_w, rel=1e-6)
    for k in grads_w:
        np.testing.assert_allclose(grads_b[k], grads_w[k], rtol=1e-5, atol=1e-7, err_msg=k)
    assert peak_b < peak_w


def test_the_budget_from_zynml_config():
    dev = zynbook.device("cpu")
    try:
        zynbook.run("config { memory_budget: 1KB }", device="cpu")
        assert dev.memory_budget == 1000
        model = TinyGPT(dev, CONFIG)
        assert model.memory_budget == 1000 and model.layers_kept_whole(SEQ) == 0
        stats = zynbook.run("memory_stats()", device="cpu")
        assert stats.budget_bytes == 1000 and stats.peak_bytes >= stats.live_bytes > 0
        zynbook.run("config { memory_budget: inf }", device="cpu")
        assert dev.memory_budget is None and model.layers_kept_whole(SEQ) == CONFIG.n_layers
    finally:
        dev.memory_budget = None
    with pytest.raises(zynbook.ZynMLTypeError):
        zynbook.run('config { memory_budget: "a lot" }', device="cpu")


def test_the_allocator_counts_buffers_while_they_live():
    dev = zynbook.device("cpu")
    live = dev.memory_stats()["live_bytes"]
    dev.reset_peak_memory()
    a = dev.upload(np.zeros(1000))
    b = dev.copy_buffer(a)
    dev.add_assign(b, a)
    assert dev.memory_stats()["live_bytes"] == live + 8000
    del a, b
    stats = dev.memory_stats()
    assert stats["live_bytes"] == live and stats["peak_bytes"] >= live + 8000
