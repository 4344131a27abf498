"""Scores of -inf on the tensor-core attention kernels (mma.sync, and wgmma by cp.async and by
the copy engine) on the launch-IR emulator, against numpy that runs the program's loops
(tests/test_attention_hunt7.py): an online form whose first admitted score is -inf is NaN
whatever keys follow, flash attention whose first key block is all -inf is NaN, and under a
key condition a row whose every admitted score is -inf is NaN where a row with no admitted
key is 0. The -inf scores come from K's elements of -inf where Q's are positive."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block
from test_attention_hunt7 import _quiet, dots, flash_numpy, flash_source, loops_numpy, qkv, source
from test_attention_mma import CUDA, SCHED, _gpu, mma_sync_default
from tolerances import assert_within
from zynbook.compiler.schedules import attention_wgmma as W
from zynbook.compiler.schedules.base import Choice

KERNELS = ("mma.sync", "wgmma", "wgmma+tma")


def params_of(kind, k, sz, D):
    if kind == "mma.sync":
        return mma_sync_default(k, sz)
    if kind == "wgmma":
        return W.copied(D)
    return next(p for p in W.tma_choices(W.default(D), D))


def inputs(B, S, D, minus_inf, seed=3):
    """f16 Q, K, V; Q's first column positive, so that K's -inf there makes -inf scores at
    the keys minus_inf[b] of batch b."""
    a = qkv(seed, B, 1, S, D, np.float16)
    a["Q"][..., 0] = np.abs(a["Q"][..., 0]) + np.float16(0.5)
    for b, keys in enumerate(minus_inf):
        a["K"][b, :, keys, 0] = -np.inf
    return a


def emulated(kind, src, a, D):
    """The output of the `kind` kernel for `src` over `a`: on the emulator, or (where the
    test asks for a GPU and there is an sm_90 one) on the GPU."""
    k, ins, sz, sc = lower_block(src, a)
    params = params_of(kind, k, sz, D)
    if ON_GPU:
        dev = _gpu()
        if dev is None or tuple(getattr(dev, "cc", (0, 0))) != (9, 0):
            pytest.skip("no sm_90 CUDA GPU (or no CuPy)")
        plan = dev.prepare(k, sz, params=Choice("attention", params))
        assert "tensor cores" in plan.compiled.program.schedule
        out, _ = plan.launch(ins, sc)
        return np.asarray(dev.to_host(out), np.float64)
    prog = SCHED.build(k, CUDA, sz, params)
    assert "tensor cores" in prog.schedule, prog.schedule
    return emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)


ON_GPU = False


def same(got, want, tol=2e-2):
    assert (np.isnan(got) == np.isnan(want)).all(), np.argwhere(np.isnan(got) != np.isnan(want))[:5]
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], tol, tol)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("form", ["online", "one_pass"])
@pytest.mark.parametrize("cond", [None, "j <= i"])
def test_online_first_key_of_minus_inf(kind, form, cond):
    """Batch 0's keys 0 and 1 -inf (every row NaN), batch 1's keys 1 and 40 (finite: its
    first key is not -inf)."""
    B, S, D = 2, 70, 64
    a = inputs(B, S, D, ([0, 1], [1, 40]))
    with _quiet():
        s = dots(a["Q"], a["K"]) * 0.125
    ok = np.ones(s.shape, bool) if cond is None else np.broadcast_to(
        np.arange(S)[None, :] <= np.arange(S)[:, None], s.shape)
    want = loops_numpy(form, s, ok, a["V"].astype(np.float64))
    assert np.isnan(want[0]).all() and not np.isnan(want[1]).any()
    src = source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.125", cond, sizes=("B", "H", "S", "S", "D"))
    same(emulated(kind, src, a, D), want)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("form", ["three", "three_inline"])
def test_causal_row_of_one_key_of_minus_inf(kind, form):
    """`j <= i` with key 0 -inf: query 0, whose only key it is, is NaN; the others are not."""
    B, S, D = 1, 150, 64
    a = inputs(B, S, D, ([0],))
    with _quiet():
        s = dots(a["Q"], a["K"]) * 0.125
    ok = np.broadcast_to(np.arange(S)[None, :] <= np.arange(S)[:, None], s.shape)
    want = loops_numpy(form, s, ok, a["V"].astype(np.float64))
    assert np.isnan(want[0, 0, 0]).all() and not np.isnan(want[0, 0, 1:]).any()
    src = source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.125", "j <= i", sizes=("B", "H", "S", "S", "D"))
    same(emulated(kind, src, a, D), want)


@pytest.mark.parametrize("kind", KERNELS)
def test_every_admitted_score_minus_inf_under_a_mask(kind):
    """A bool mask: query 5 admits only keys 0-2 (all -inf: NaN), query 9 none (0); the
    body divides inside its key loop, so a row with no key is 0 and not 0 / 0."""
    B, S, D = 1, 40, 64
    a = inputs(B, S, D, ([0, 1, 2],))
    keep = np.random.default_rng(1).random((S, S)) < 0.6
    keep[:, :3] = False
    keep[5] = False
    keep[5, :3] = True
    keep[9] = False
    a["keep"] = keep
    with _quiet():
        s = dots(a["Q"], a["K"]) * 0.125
    want = loops_numpy("three_inline", s, np.broadcast_to(keep, s.shape), a["V"].astype(np.float64))
    assert np.isnan(want[0, 0, 5]).all() and (want[0, 0, 9] == 0).all()
    src = source("three_inline", "dot(Q[b, h, i], K[b, h, j]) * 0.125", "keep[i, j]", "Q, K, V, keep",
                 sizes=("B", "H", "S", "S", "D"))
    same(emulated(kind, src, a, D), want)


@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("bk,minus_inf,S", [(24, 24, 70), (24, 23, 70), (20, 20, 70), (20, 19, 70),
                                             (64, 37, 37), (64, 36, 37), (64, 64, 150), (128, 128, 150),
                                             (128, 100, 150)])
def test_flash_first_block_of_minus_inf(kind, bk, minus_inf, S):
    """Flash blocks of `bk` keys (less than a tile, not a multiple of 8, more than the
    keys, one tile, two of 64): the first `minus_inf` keys -inf make every row NaN where
    they fill the first block."""
    D = 64
    a = inputs(1, S, D, (list(range(minus_inf)),))
    with _quiet():
        s = dots(a["Q"], a["K"]) * 0.125
    want = flash_numpy(s, a["V"].astype(np.float64), bk)
    assert np.isnan(want).all() if minus_inf >= min(bk, S) else not np.isnan(want).any()
    src = flash_source(64, bk)
    same(emulated(kind, src, a, D), want)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KERNELS)
def test_on_the_gpu(kind, monkeypatch):
    """The cases above as the hardware runs them."""
    monkeypatch.setattr(sys.modules[__name__], "ON_GPU", True)
    for cond in (None, "j <= i"):
        test_online_first_key_of_minus_inf(kind, "online", cond)
    test_every_admitted_score_minus_inf_under_a_mask(kind)
    test_causal_row_of_one_key_of_minus_inf(kind, "three_inline")
    for case in ((24, 24, 70), (64, 64, 150), (128, 100, 150)):
        test_flash_first_block_of_minus_inf(kind, *case)
