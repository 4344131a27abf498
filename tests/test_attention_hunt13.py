"""Attention with non-finite values at keys the scores or the mask make weigh nothing, on
every local device and on the CUDA kernels (the launch-IR emulator), against numpy that
runs the loops as written: a key the mask leaves out (`if cond:`) is never read, so its
NaN or inf value reaches no query; a key scored -inf (`where(..., -inf, s)`) is weighed 0,
so its NaN value makes every query NaN in that column (0 * NaN), as numpy's softmax @ V."""
from __future__ import annotations

import shutil
from dataclasses import replace

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


# ------------------------------------------------------------ keys the mask leaves out (an if)

def _kernels(k, sz, dtype):
    """(name, params) of the CUDA kernels that run `k`: over f32 the register-tiled products
    (the default, exp2, and 4 x 8 with exp and the prefetch); over f16 the mma.sync kernel
    (its default and every variant at once) and the warpgroup kernels (cp.async, the copy
    engine)."""
    if dtype == np.float32:
        return [("products", PRODUCTS), ("products_exp", replace(PRODUCTS, rows=4, cols=8, prefetch=True, exp2=False))]
    from test_attention_mma import mma_sync_default
    shape = match(k, CUDA, sz)[0]
    mma = mma_sync_default(k, sz)
    D = shape.D
    return [("mma", mma), ("mma_every", attention_mma.unfolded(shape, replace(mma, stages=3, **attention_mma.EVERY))),
            ("wgmma", attention_mma.unfolded(shape, attention_wgmma.copied(D))),
            ("tma", next(iter(attention_wgmma.tma_choices(attention_wgmma.default(D), D))))]


def _left_out_case(form, mask, dtype, S=40, D=16, seed=9):
    """Q, K, V (and a bool mask `allowed`) where key 9's value is NaN in column 3 and key
    S - 3's is inf in column 5; the mask (a causal one, or a bool one) leaves key 9 out of
    some queries and key S - 3 out of all: numpy's answer over the admitted keys alone."""
    a = qkv(seed, 1, 2, S, D, dtype)
    a["V"][0, 0, 9, 3] = np.nan
    a["V"][0, 1, S - 3, 5] = np.inf
    i, j = np.arange(S)[:, None], np.arange(S)[None]
    if mask == "causal":
        ok = j <= i
        src = getattr(A, form)("causal", "const")
        a["V"][0, 1, S - 3, 5] = 1.0            # (the last queries admit every key)
        a["V"][0, 1, S - 1, 5] = np.inf          # key S - 1: query S - 1's alone
    else:
        ok = np.random.default_rng(seed).random((S, S)) < 0.6
        ok[:, 0] = True
        ok[:, S - 3] = False
        ok[::3, 9] = False
        a["allowed"] = ok
        src = getattr(A, form)("bool", "const")
    s = dots(a["Q"], a["K"]) * 0.125
    want = weighed(s, np.broadcast_to(ok, s.shape), a["V"].astype(np.float64))
    return src, a, want, ok


def _same(got, want, tol):
    assert (np.isnan(got) == np.isnan(want)).all(), np.argwhere(np.isnan(got) != np.isnan(want))[:8]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("form,mask", [("three_pass", "causal"), ("three_pass", "bool"),
                                       ("online_stats", "bool"), ("one_pass", "causal")])
def test_value_at_a_key_the_mask_leaves_out_on_the_cuda_kernels(form, mask, dtype):
    """The register-tiled, mma.sync and wgmma kernels weigh a key the condition leaves out 0
    in P V (a product over the tile), and 0 * NaN or inf is NaN: key 9's NaN reached the
    queries that never read it, as inf did. Each such element is now the loops' value."""
    src, a, want, ok = _left_out_case(form, mask, dtype)
    assert np.isnan(want[0, 0, :, 3]).sum() not in (0, 40)       # some queries read key 9
    k, ins, sz, sc = lower_block(src, a)
    tol = 2e-4 if dtype == np.float32 else 2e-2
    for name, p in _kernels(k, sz, dtype):
        prog = SCHED.build(k, CUDA, sz, p)
        got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
        try:
            _same(got, want, tol)
        except AssertionError as e:
            raise AssertionError(f"{name}: {p.describe()}\n{e}") from None
        if p == PRODUCTS:           # its fallback, where the buffers are not 16-byte aligned
            _same(emulate_kernel(prog.fallback, k, ins, sz, sc, warp=32).astype(np.float64), want, tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,mask", [("three_pass", "causal"), ("online_stats", "bool")])
def test_value_at_a_key_the_mask_leaves_out_on_the_devices(device, form, mask):
    src, a, want, _ = _left_out_case(form, mask, np.float32, S=37, D=12)
    check(device, src, a, want)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_cuda_kernels_that_mend_a_left_out_key_compile_with_nvcc(dtype):
    """The CUDA C of each kernel above under a bool mask (its recomputation of an element
    included) compiles for sm_90a."""
    import nvcc_runs
    from zynbook.compiler.codegen.cuda import render_cuda
    from zynbook.compiler.schedules.base import Choice
    src, a, _, _ = _left_out_case("three_pass", "bool", dtype, S=77, D=64)
    k, _, sz, _ = lower_block(src, a)
    runs = []
    for name, p in _kernels(k, sz, dtype):
        cu = render_cuda(k, sz, options={"params": Choice("attention", p)}).source
        assert "_ev" in cu and ("wgmma" in cu) == (name in ("wgmma", "tma")), name
        runs.append((name, nvcc_runs.queue(cu, ("-arch=sm_90a", "-cubin"))))
    for name, fut in runs:
        res = fut.result()
        assert res.returncode == 0, (name, res.stderr[-3000:])
