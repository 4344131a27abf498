"""Attention written unlike the spec's text, checked against numpy written here on every
local device (the reference, `cpu:native`, WebGPU on Vulkan) and, for the schedule the CUDA
target chooses, on the launch-IR emulator.

Masks written as a score of -inf: `where(j <= i, s, -inf)`, the condition negated with the
-inf first (`where(j > i, -inf, s)`, `where(not (j <= i), -inf, s)`), an additive
`s + where(j > i, -inf, 0.0)`, bool tensors (`where(mask[i, j], s, -inf)`,
`where(mask[i, j] == false, -inf, s)`) are attention with the kept condition, and a query
whose every key is masked is NaN there as numpy's softmax of a row of -inf is."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import emulate_kernel, lower_block, wanted_devices
from zynbook.compiler import schedules
from zynbook.compiler.passes import recognise
from zynbook.compiler.targets import cuda_target

DEVICES = [d for d in wanted_devices() if d in ("cpu", "cpu:native", "vulkan:0")]
RNG = np.random.default_rng(1212)
DOT = "dot(Q[b, h, i], K[b, h, j]) * 0.125"


def _qkv(S, D, SK=None, heads=2, dtype=np.float32):
    shape = lambda s: (1, heads, s, D)
    return {n: RNG.standard_normal(shape(S if n == "Q" else SK or S)).astype(dtype) for n in "QKV"}


def _softmax_av(a, scale, ok=None):
    """softmax(where(ok, Q K^T * scale, -inf)) V in f64, numpy's: a row of -inf is NaN."""
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * scale
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return np.einsum("bhij,bhjd->bhid", p, V) / p.sum(-1, keepdims=True)


def _three_pass(score, inputs="Q, K, V"):
    """Three passes over the keys with `score` (key variable j), the weight divided inside."""
    return f"""let y = compute({inputs}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S:
        var m = -inf
        for j in 0..SK:
            m = max(m, {score})
        var l = 0.0
        for j in 0..SK:
            l += exp({score} - m)
        for d in 0..D:
            var acc = 0.0
            for j in 0..SK:
                acc += exp({score} - m) / l * V[b, h, j, d]
            out[b, h, i, d] = acc
}}
y
"""


def _one_pass(score, inputs="Q, K, V"):
    """Per output element, one online-softmax loop over the keys with `score`."""
    return f"""let y = compute({inputs}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S, d in 0..D:
        var m = -inf
        var l = 0.0
        var acc = 0.0
        for j in 0..SK:
            let s = {score}
            let mn = max(m, s)
            l = l * exp(m - mn) + exp(s - mn)
            acc = acc * exp(m - mn) + exp(s - mn) * V[b, h, j, d]
            m = mn
        out[b, h, i, d] = acc / l
}}
y
"""


def _on_devices(src, inputs, want, tol):
    for dev in DEVICES:
        got = np.asarray(zynbook.run(src, device=dev, **inputs)).astype(np.float64)
        assert got.shape == want.shape, (dev, got.shape)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=dev)


def _on_cuda(src, inputs, want, tol, schedule="attention"):
    """The CUDA target's chosen schedule equals `want` on the launch-IR emulator."""
    k, ins, sz, sc = lower_block(src, inputs, None, None)
    prog = schedules.build(k, cuda_target(), sz)
    assert f"({schedule}:" in prog.schedule, prog.schedule
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    return k


def _everywhere(src, inputs, want, tol=2e-4, schedule="attention"):
    _on_devices(src, inputs, want, tol)
    return _on_cuda(src, inputs, want, tol, schedule)


# ------------------------------------------------------------ masks written as -inf scores

def _bool_mask(S, SK, empty_row=None):
    m = RNG.random((S, SK)) < 0.6
    m[:, 0] = True                  # key 0 kept: an online step never starts at -inf ...
    if empty_row is not None:
        m[empty_row] = False        # ... but in the row no key is kept
    return m


CAUSAL_WHERE = ["where(j <= i, S_, -inf)", "where(j > i, -inf, S_)", "where(not (j <= i), -inf, S_)",
                "S_ + where(j > i, -inf, 0.0)", "where(i < j, -inf, S_)"]


@pytest.mark.parametrize("form", ["three", "one"])
@pytest.mark.parametrize("score", CAUSAL_WHERE)
def test_causal_mask_written_as_a_minus_inf_score(score, form):
    """Either branch order of the where, the condition negated or not, or added: the
    attention schedule with a kept condition, numpy's causal answer."""
    a = _qkv(13, 8, heads=2)
    src = (_three_pass if form == "three" else _one_pass)(score.replace("S_", DOT))
    ok = np.arange(13)[None] <= np.arange(13)[:, None]
    k = _everywhere(src, a, _softmax_av(a, 0.125, ok))
    assert recognise.attention(k)


BOOL_WHERE = ["where(M[i, j], S_, -inf)", "where(M[i, j] == false, -inf, S_)", "where(not M[i, j], -inf, S_)"]


@pytest.mark.parametrize("score", BOOL_WHERE)
def test_bool_tensor_mask_written_as_a_minus_inf_score(score):
    a = _qkv(11, 8, SK=17)
    mask = _bool_mask(11, 17)
    src = _three_pass(score.replace("S_", DOT), "Q, K, V, M")
    k = _everywhere(src, {**a, "M": mask}, _softmax_av(a, 0.125, mask))
    att = recognise.attention(k)
    assert att and att.keep is not None and att.mask is None


@pytest.mark.parametrize("form", ["three", "one"])
def test_query_with_every_key_masked_is_nan_as_numpy(form):
    """A row of -inf scores: exp(-inf - -inf) is NaN, numpy's softmax of the row too."""
    a = _qkv(12, 8, SK=9)
    mask = _bool_mask(12, 9, empty_row=5)
    src = (_three_pass if form == "three" else _one_pass)(f"where(M[i, j], {DOT}, -inf)", "Q, K, V, M")
    want = _softmax_av(a, 0.125, mask)
    assert np.isnan(want[:, :, 5]).all() and not np.isnan(np.delete(want, 5, 2)).any()
    _everywhere(src, {**a, "M": mask}, want)


@pytest.mark.parametrize("form", ["three", "one"])
def test_minus_inf_mask_on_the_tensor_core_kernels(form):
    """f16 on the mma.sync and wgmma kernels (the emulator): the kept condition scores -inf,
    the query with no key kept is NaN."""
    from test_attention_mma import CUDA, SCHED, mma_sync_default
    from zynbook.compiler.schedules import attention_mma, attention_wgmma
    from zynbook.compiler.schedules.attention import match
    a = _qkv(40, 16, dtype=np.float16)
    mask = _bool_mask(40, 40, empty_row=7)
    src = (_three_pass if form == "three" else _one_pass)(f"where(M[i, j], {DOT}, -inf)", "Q, K, V, M")
    k, ins, sz, sc = lower_block(src, {**a, "M": mask}, None, None)
    shape = match(k, CUDA, sz)[0]
    want = _softmax_av(a, 0.125, mask)
    for p in (mma_sync_default(k, sz), attention_mma.unfolded(shape, attention_wgmma.default(16))):
        got = emulate_kernel(SCHED.build(k, CUDA, sz, p), k, ins, sz, sc, warp=32).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, equal_nan=True)


@pytest.mark.parametrize("score", ["where(M[i, j], S_, -inf)", "S_ + Bm[i, j]"])
def test_online_row_whose_first_key_scores_minus_inf_on_the_tensor_core_kernels(score):
    """An online step whose first key scores -inf (masked by a where, or a bias of -inf)
    makes the row NaN (exp(-inf - -inf) in its sum), whatever keys follow: on the mma.sync
    and wgmma kernels too, whose test of that first key read the raw dot product."""
    from test_attention_mma import CUDA, SCHED, mma_sync_default
    from zynbook.compiler.schedules import attention_mma, attention_wgmma
    from zynbook.compiler.schedules.attention import match
    a = _qkv(40, 16, dtype=np.float16)
    mask = _bool_mask(40, 40)
    mask[3, 0], mask[8, :5] = False, False      # row 3: only key 0 masked
    bias = np.where(mask, 0.0, -np.inf).astype(np.float32)
    src = _one_pass(score.replace("S_", DOT), "Q, K, V, M" if "M[" in score else "Q, K, V, Bm")
    k, ins, sz, sc = lower_block(src, {**a, "M": mask, "Bm": bias}, None, None)
    want = _softmax_av(a, 0.125, mask)
    want[:, :, [3, 8]] = np.nan
    _on_devices(src, {**a, "M": mask} if "M[" in score else {**a, "Bm": bias}, want, 2e-2)
    shape = match(k, CUDA, sz)[0]
    for p in (mma_sync_default(k, sz), attention_mma.unfolded(shape, attention_wgmma.default(16))):
        got = emulate_kernel(SCHED.build(k, CUDA, sz, p), k, ins, sz, sc, warp=32).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2, equal_nan=True)
