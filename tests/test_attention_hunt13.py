"""Attention with non-finite values at keys the scores or the mask make weigh nothing, on
every local device and on the CUDA kernels (the launch-IR emulator), against numpy that
runs the loops as written: a key the mask leaves out (`if cond:`) is never read, so its
NaN or inf value reaches no query; a key scored -inf (`where(..., -inf, s)`) is weighed 0,
so its NaN value makes every query NaN in that column (0 * NaN), as numpy's softmax @ V."""
from __future__ import annotations

import numpy as np
import pytest

import attention_sources as A
from compute_testing import emulate_kernel, lower_block, wanted_devices
from test_attention_hunt7 import _quiet, check, dots, qkv, source
from zynbook.compiler.schedules import attention_mma, attention_wgmma
from zynbook.compiler.schedules.attention import PRODUCTS, Attention, match
from zynbook.compiler.targets import cuda_target

DEVICES = [d for d in wanted_devices() if d in ("cpu", "cpu:native", "vulkan:0")]
SCHED = Attention()
CUDA = cuda_target()


def weighed(s, ok, V):
    """sum_j w[i, j] V[j, d] / l over the keys `ok` admits only (a key left out adds nothing,
    not 0 times its value): the three-pass loops over scores s[b, h, i, j] (float64)."""
    with _quiet():
        m = np.where(ok, s, -np.inf).max(-1, keepdims=True)
        w = np.where(ok, np.exp(s - m), 0.0)
        terms = np.where(ok[..., None], w[..., None] * V[:, :, None], 0.0)      # b h i j d
        return terms.sum(-2) / w.sum(-1)[..., None]


# ------------------------------------------------------------ keys scored -inf (a where)

@pytest.mark.parametrize("device", DEVICES)
def test_nan_value_behind_a_first_chunk_of_minus_inf_scores(device):
    """Query 3 scores its first 40 keys -inf (a bool mask in a where): the one-thread and
    lanes schedules saw no maximum over those keys' chunks and skipped their update, so key
    5's NaN value (weight 0) was lost for that query; numpy's 0 * NaN makes every query NaN
    in column 2."""
    a = qkv(5, 1, 2, 45, 8)
    a["V"][0, 1, 5, 2] = np.nan
    keep = np.ones((45, 45), bool)
    keep[3, :40] = False
    a["M"] = keep
    src = source("three", "where(M[i, j], dot(Q[b, h, i], K[b, h, j]) * 0.125, -inf)",
                 inputs="Q, K, V, M")
    s = np.where(keep, dots(a["Q"], a["K"]) * 0.125, -np.inf)
    with _quiet():
        p = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("bhij,bhjd->bhid", p, a["V"].astype(np.float64)) / p.sum(-1)[..., None]
    assert np.isnan(want[0, 1, :, 2]).all() and np.isnan(want).sum() == 45
    check(device, src, a, want)
