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
    """The CUDA target's chosen schedule (an attention one, or "generic": none) equals
    `want` on the launch-IR emulator."""
    k, ins, sz, sc = lower_block(src, inputs, None, None)
    prog = schedules.build(k, cuda_target(), sz)
    assert ("attention" not in prog.schedule) if schedule == "generic" else \
        f"({schedule}:" in prog.schedule, prog.schedule
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


# ------------------------------------------------------------------ other conditions

def test_sliding_window_where_with_a_host_value():
    a = _qkv(13, 8)
    i, j = np.arange(13)[:, None], np.arange(13)[None]
    src = _three_pass(f"where(j <= i and j > i - W, {DOT}, -inf)")
    want = _softmax_av(a, 0.125, (j <= i) & (j > i - 3))
    _on_devices(src, {**a, "W": 3}, want, 2e-4)
    k, ins, sz, sc = lower_block(src, a, None, {"W": 3})
    prog = schedules.build(k, cuda_target(), sz)
    assert "(attention:" in prog.schedule
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)


def test_int_and_float_tensor_masks_as_conditions_of_a_where():
    """`mask == 0` of an int mask; `f <= 0.5` of a float mask with a NaN, whose negation
    is not `f > 0.5` (a NaN fails both): the where keeps the score where f > 0.5 fails."""
    a = _qkv(9, 8)
    mi = (RNG.random((9, 9)) < 0.6).astype(np.int32)
    mi[:, 0] = 1
    _everywhere(_three_pass(f"where(Mi[i, j] == 0, -inf, {DOT})", "Q, K, V, Mi"), {**a, "Mi": mi},
                _softmax_av(a, 0.125, mi != 0))
    mf = mi.astype(np.float32)
    mf[2, 3] = np.nan
    _everywhere(_three_pass(f"where(Mf[i, j] > 0.5, -inf, {DOT})", "Q, K, V, Mf"), {**a, "Mf": mf},
                _softmax_av(a, 0.125, ~(mf > 0.5)))


# ------------------------------------------------------------------ near misses

def test_denominator_over_transposed_scores_is_not_attention():
    a = _qkv(9, 8)
    src = _three_pass(DOT).replace("l += exp(dot(Q[b, h, i], K[b, h, j])", "l += exp(dot(Q[b, h, j], K[b, h, i])")
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * 0.125
    m = s.max(-1, keepdims=True)
    l = np.exp(np.swapaxes(s, -1, -2) - m).sum(-1, keepdims=True)
    k = _everywhere(src, a, np.exp(s - m) @ V / l, schedule="generic")
    assert not recognise.attention(k)


def test_one_pass_without_the_rescale_is_not_attention():
    a = _qkv(9, 8)
    src = _one_pass(DOT).replace("acc = acc * exp(m - mn) +", "acc = acc +")
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * 0.125
    running = np.maximum.accumulate(s, -1)            # m after each key
    acc = np.exp(s - running) @ V
    want = acc / np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)
    k = _everywhere(src, a, want, schedule="generic")
    assert not recognise.attention(k)


def test_a_large_negative_fill_or_a_scale_outside_the_where_runs_as_written():
    """-1e9 is no -inf (a masked key's weight is exp(-1e9 - m), 0 here, but its score is
    not -inf); the scale applied to the where is not the recognised form: both give
    numpy's causal answer on the generic schedule."""
    a = _qkv(9, 8)
    ok = np.arange(9)[None] <= np.arange(9)[:, None]
    for score in (f"where(j <= i, {DOT}, -1e9)", "where(j <= i, dot(Q[b, h, i], K[b, h, j]), -inf) * 0.125"):
        k = _everywhere(_three_pass(score), a, _softmax_av(a, 0.125, ok), schedule="generic")
        assert not recognise.attention(k)


# ------------------------------------------------------------------ scales

SCALES = {"-dot(Q[b, h, i], K[b, h, j]) * 0.5": -0.5,
          "dot(Q[b, h, i] * 0.125, K[b, h, j])": 0.125,
          "dot(K[b, h, j], Q[b, h, i] / sqrt(D))": 1 / np.sqrt(12),
          "dot(Q[b, h, i], K[b, h, j]) / D ** 0.5": 1 / np.sqrt(12),
          "dot(Q[b, h, i], K[b, h, j]) * pow(D, -0.5)": 1 / np.sqrt(12)}


@pytest.mark.parametrize("score", sorted(SCALES))
def test_scales_written_several_ways(score):
    """A negated score and a scale on a row inside the dot are the scale too."""
    a = _qkv(9, 12)
    k = _everywhere(_three_pass(score), a, _softmax_av(a, SCALES[score]))
    assert recognise.attention(k)


def test_a_subtracted_bias():
    a = _qkv(9, 8)
    bias = RNG.standard_normal((9, 9)).astype(np.float32)
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * 0.125 - bias
    p = np.exp(s - s.max(-1, keepdims=True))
    k = _everywhere(_one_pass(DOT + " - Bm[i, j]", "Q, K, V, Bm"), {**a, "Bm": bias}, p @ V / p.sum(-1, keepdims=True))
    assert recognise.attention(k).bias is not None


@pytest.mark.parametrize("form", ["three", "one"])
def test_padding_mask_of_per_batch_lengths(form):
    """`where(j < lens[b], s, -inf)`: keys past each batch's length scored -inf; the batch of
    length 0 is NaN throughout, as numpy's softmax of rows of -inf."""
    lens = np.array([5, 0, 17], np.int32)
    a = {n: RNG.standard_normal((3, 2, 17, 8)).astype(np.float32) for n in "QKV"}
    src = (_three_pass if form == "three" else _one_pass)(f"where(j < lens[b], {DOT}, -inf)", "Q, K, V, lens")
    ok = (np.arange(17)[None, :] < lens[:, None])[:, None, None, :]
    want = _softmax_av(a, 0.125, ok)
    assert np.isnan(want[1]).all() and not np.isnan(want[[0, 2]]).any()
    k = _everywhere(src, {**a, "lens": lens}, want)
    assert recognise.attention(k).keep is not None


def test_flash_without_the_sums_rescale_is_not_attention():
    """`l_new = l + row_sum(...)` (the output rescaled, the sum not): what the loops say."""
    S = 37
    a = _qkv(S, 8)
    src = f"""let attn = compute(Q, K, V) {{
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 16:
            var m = -inf
            var l = 0.0
            var o = zeros(min(16, seq_len - q_block), head_dim)
            for kv_block in 0..seq_len step 16:
                let S = Q[b, h, q_block:q_block+16] @ transpose(K[b, h, kv_block:kv_block+16]) * 0.125
                let m_new = max(m, row_max(S))
                l = l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kv_block:kv_block+16]
                m = m_new
            out[b, h, q_block:q_block+16] = o / l
}}
attn
"""
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    want = np.zeros_like(Q)
    for q0 in range(0, S, 16):
        q = Q[:, :, q0:q0 + 16]
        m, l, o = np.full(q.shape[:3] + (1,), -np.inf), np.zeros(q.shape[:3] + (1,)), np.zeros(q.shape)
        for k0 in range(0, S, 16):
            s = q @ np.swapaxes(K[:, :, k0:k0 + 16], -1, -2) * 0.125
            mn = np.maximum(m, s.max(-1, keepdims=True))
            l = l + np.exp(s - mn).sum(-1, keepdims=True)
            o, m = np.exp(m - mn) * o + np.exp(s - mn) @ V[:, :, k0:k0 + 16], mn
        want[:, :, q0:q0 + 16] = o / l
    k = _everywhere(src, a, want, schedule="generic")
    assert not recognise.attention(k)


def _nan_value_case(form):
    a = _qkv(13, 8)
    a["V"][0, 0, 9, 3] = np.nan
    ok = np.arange(13)[None] <= np.arange(13)[:, None]
    want = _softmax_av(a, 0.125, ok)
    assert np.isnan(want[0, 0, :, 3]).all() and np.isnan(want).sum() == 13
    return (_three_pass if form == "three" else _one_pass)(f"where(j > i, -inf, {DOT})"), a, want


@pytest.mark.parametrize("form", ["three", "one"])
def test_a_nan_value_behind_a_minus_inf_score_reaches_every_query_as_numpy(form):
    """A key masked by its -inf score is still weighed (weight 0): its NaN value makes every
    query NaN in that column, as numpy's softmax(...) @ V does; a mask that left the key
    out (`if j <= i:`) would not, so the where is no key condition."""
    src, a, want = _nan_value_case(form)
    for dev in DEVICES:
        got = np.asarray(zynbook.run(src, device=dev, **a)).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True, err_msg=dev)


def test_a_nan_value_behind_a_minus_inf_score_on_the_webgpu_lanes_schedule():
    """The lanes schedule WebGPU gets updates a lane whose scores are all -inf so far too:
    its keys' 0 * NaN reaches the output (on the emulator; on Vulkan in the test above)."""
    from zynbook.compiler.targets import webgpu_target
    src, a, want = _nan_value_case("three")
    k, ins, sz, sc = lower_block(src, a, None, None)
    prog = schedules.build(k, webgpu_target(), sz)
    got = emulate_kernel(prog, k, ins, sz, sc).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)


@pytest.mark.parametrize("form", ["three_pass", "one_pass"])
def test_a_nan_value_at_a_key_the_mask_leaves_out_reaches_no_query(form):
    """`if j <= i:` leaves key 9 out of queries 0..8: its NaN value is in none of them, as
    the loops never read it (the attention schedule weighed it 0 and added 0 * NaN)."""
    import attention_sources as A
    a = _qkv(13, 8)
    a["V"][0, 0, 9, 3] = np.nan
    ok = np.arange(13)[None] <= np.arange(13)[:, None]
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.where(ok, np.einsum("bhid,bhjd->bhij", Q, K) * 0.125, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhij,bhjd->bhid", p, np.nan_to_num(V)) / p.sum(-1, keepdims=True)
    want[0, 0, 9:, 3] = np.nan                      # the queries that admit key 9
    _everywhere(getattr(A, form)("causal", "const"), a, want)
