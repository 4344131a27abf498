"""Recognition and scheduling of structured kernels, hunted with programs written from the
spec's "Kernel Types" text and varied: grouped-query heads with an i32 padding mask, a
sliding window, f16, flash blocks of 24/48/80/16x7 over cross attention with min(...) tiles
and a V of its own width, contractions with an accumulator started from an input, k in
steps of 2 or from 3, shifted and strided operands, a transposed output, rows in steps of
2, an epilogue with a `* 0.125` scale, bias and relu.

Near misses must never run as the pattern they resemble. The ones found here: a `let` that
copies a running value BEFORE the loop that updates it (`let l0 = l`, then `l0` used in the
loop or in the store) was read by the recogniser as the running value itself, so a flash
body whose sum restarts from `l0` each key block, a one-pass body that divides by `l0` (0)
and a three-pass body whose weights divide by `l0` all ran as attention (flash: off by 57
on cpu:native, Vulkan and GL). Also found and fixed: an integer quotient in the score's
scale (`* (1 / 8)`, `/ (vd / 3)`) was taken as a float one; an integer and a float
quotient were one key condition (`j / 4`, `j / 4.0`); stores of one iteration on different
axes of the loop variable (`out[i, k]` and `out[k, i]`) made both loops parallel, and the
block schedule split such a loop over its threads (races); the rows schedule read rows
16 bytes at a time where the buffer's rows were not a multiple of 4 long (misaligned).

Every program runs on each local device (`cpu`, `cpu:native`, Vulkan, GL: whatever
`wanted_devices` lists) and is compared with numpy written here; a device may refuse a
program only with a ZynML error that says why. The CUDA C (compiled by nvcc where it is
installed) and the MSL of the variants are generated as well."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.compiler.passes import recognise as R
from zynbook.errors import ZynMLError

import nvcc_runs
from compute_testing import lower_block, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(20261129)
TOL = 2e-4


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def np_attention(Q, K, V, scale, mask=None, group=1):
    """softmax(Q K^T * scale) V in f64, K and V of head h // group, keys where `mask` is
    False left out."""
    Q, K, V = (x.astype(np.float64) for x in (Q, K, V))
    K, V = np.repeat(K, group, 1), np.repeat(V, group, 1)
    s = np.einsum("bhid,bhjd->bhij", Q, K) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p, V) / p.sum(-1, keepdims=True)


def _run(src, device, inputs):
    return np.asarray(zynbook.run(src, device=device, **inputs))


def _check_everywhere(src, inputs, want, tol=TOL, may_refuse=()):
    """`src` equals `want` on every device, or (on a device of `may_refuse` only) is refused
    with a ZynML error that says why."""
    for dev in DEVICES:
        try:
            got = _run(src, dev, inputs)
        except ZynMLError as err:
            if dev not in may_refuse:
                raise
            assert err.message, dev
            continue
        assert got.shape == np.shape(want), (dev, got.shape, np.shape(want))
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol,
                                       equal_nan=True, err_msg=dev)


def _kernel(src, inputs, sizes=None):
    """(kernel, inputs, sizes, scalars) of the compute block of `src`."""
    return lower_block(src, inputs, sizes=sizes)


# ------------------------------------------------------- near misses: snapshot lets

_Q, _K, _V = (_f32(2, 3, 37, 16) for _ in range(3))
_ATT = {"Q": _Q, "K": _K, "V": _V}

# the running sum restarts from `l0` (0, the sum before the key loop) at every key block
FLASH_L0 = """
let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 16:
            var m = -inf
            var l = 0.0
            var o = zeros(min(16, seq_len - q_block), head_dim)
            let l0 = l
            for kv_block in 0..seq_len step 16:
                let S = Q[b, h, q_block:q_block+16] @ transpose(K[b, h, kv_block:kv_block+16]) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l0 + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kv_block:kv_block+16]
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+16] = o / l
}
attn
"""


def np_flash_l0(Q, K, V, B=16):
    """FLASH_L0 as written: l is the last key block's row sum (rescaled o over it)."""
    n, d = Q.shape[2], Q.shape[3]
    out = np.zeros(Q.shape)
    for q0 in range(0, n, B):
        q = Q[:, :, q0:q0 + B].astype(np.float64)
        m = np.full(q.shape[:3] + (1,), -np.inf)
        o = np.zeros(q.shape)
        for k0 in range(0, n, B):
            S = q @ np.swapaxes(K[:, :, k0:k0 + B], -1, -2).astype(np.float64) / np.sqrt(d)
            mn = np.maximum(m, S.max(-1, keepdims=True))
            l = np.exp(S - mn).sum(-1, keepdims=True)
            o = np.exp(m - mn) * o + np.exp(S - mn) @ V[:, :, k0:k0 + B].astype(np.float64)
            m = mn
        out[:, :, q0:q0 + B] = o / l
    return out


# one pass per output element, divided by `l0`, the sum before the key loop: 0
ONE_PASS_L0 = """
let attn = compute(Q, K, V) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        for d in 0..head_dim:
            var m = -inf
            var l = 0.0
            var acc = 0.0
            let l0 = l
            for j in 0..seq_len:
                let s = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                let m_new = max(m, s)
                l = exp(m - m_new) * l + exp(s - m_new)
                acc = exp(m - m_new) * acc + exp(s - m_new) * V[b, h, j, d]
                m = m_new
            out[b, h, i, d] = acc / l0
}
attn
"""

# three passes whose weights divide by `l0`, taken between the max and the sum loops: 0
THREE_PASS_L0 = """
let attn = compute(Q, K, V) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var m = -inf
        for j in 0..seq_len:
            m = max(m, dot(Q[b, h, i], K[b, h, j]) * 0.25)
        var l = 0.0
        let l0 = l
        for j in 0..seq_len:
            l += exp(dot(Q[b, h, i], K[b, h, j]) * 0.25 - m)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_len:
                acc += exp(dot(Q[b, h, i], K[b, h, j]) * 0.25 - m) / l0 * V[b, h, j, d]
            out[b, h, i, d] = acc
}
attn
"""


def _unnormalised(Q, K, V):
    """(sum_j exp(s - max) V, per key weight exp(s - max)) of softmax attention, scale 1/4."""
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) * 0.25
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p, V.astype(np.float64)), p


def _want_one_pass_l0():
    num, _ = _unnormalised(_Q, _K, _V)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / 0.0                      # +-inf (a weighted sum of 0 would be NaN)


def _want_three_pass_l0():
    _, p = _unnormalised(_Q, _K, _V)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = p / 0.0                           # every weight +inf
        return np.einsum("bhij,bhjd->bhijd", w, _V.astype(np.float64)).sum(3)


SNAPSHOTS = {
    "flash_l0": (FLASH_L0, lambda: np_flash_l0(_Q, _K, _V)),
    "one_pass_l0": (ONE_PASS_L0.replace("/ sqrt(head_dim)", "* 0.25"), _want_one_pass_l0),
    "three_pass_l0": (THREE_PASS_L0, _want_three_pass_l0),
}


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_a_copy_of_a_running_value_before_its_loop_is_no_attention(name):
    src, _ = SNAPSHOTS[name]
    k, _, _, _ = _kernel(src, _ATT)
    p = R.attention(k)
    assert not p, p


@pytest.mark.parametrize("name", ["flash_l0"])
def test_a_copy_of_a_running_value_runs_as_written_everywhere(name):
    """(The one- and three-pass near misses divide by a 0 the shader compiler knows: lavapipe
    folds x / 0.0 to 0, not to an infinity, so only their recognition is checked.)"""
    src, want = SNAPSHOTS[name]
    _check_everywhere(src, _ATT, want(), tol=1e-4)


def test_a_copy_taken_after_its_loop_is_still_attention():
    """The same copy after the loop that updates it is the final value: still attention."""
    src = THREE_PASS_L0.replace("        let l0 = l\n", "").replace(
        "        for d in 0..head_dim:", "        let l0 = l\n        for d in 0..head_dim:")
    k, _, _, _ = _kernel(src, _ATT)
    p = R.attention(k)
    assert isinstance(p, R.Attention) and p.form == "three-pass", p
    _check_everywhere(src, _ATT, np_attention(_Q, _K, _V, 0.25))


def test_a_flash_copy_of_m_before_the_loop_is_no_flash():
    """`m_new = max(m0, row_max(S))` with m0 = -inf copied before the loop: each block's own
    max, which the algebra of flash attention does not name (it happens to give the same
    softmax; the recogniser must still not read m0 as the running max)."""
    src = FLASH_L0.replace("let l0 = l", "let m0 = m").replace("* l0 +", "* l +").replace(
        "max(m, row_max(S))", "max(m0, row_max(S))")
    k, _, _, _ = _kernel(src, _ATT)
    assert not R.attention(k)
    _check_everywhere(src, _ATT, np_attention(_Q, _K, _V, 0.25), tol=1e-4)


# --------------------------------------------------------------- attention variants

_GQ = _f32(2, 4, 29, 16)
_GK = _f32(2, 2, 29, 16)
_GV = _f32(2, 2, 29, 16)
_GQA = {"Q": _GQ, "K": _GK, "V": _GV}

GQA_THREE_PASS = """
let attn = compute(Q, K, V{extra}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var mx = -inf
        for j in 0..kv:
            if {cond}:
                mx = max(mx, dot(Q[b, h, i], K[b, h / 2, j]) * 0.125)
        var den = 0.0
        for j in 0..kv:
            if {cond}:
                den += exp(dot(Q[b, h, i], K[b, h / 2, j]) * 0.125 - mx)
        for d in 0..vd:
            var acc = 0.0
            for j in 0..kv:
                if {cond}:
                    acc += exp(dot(Q[b, h, i], K[b, h / 2, j]) * 0.125 - mx) * V[b, h / 2, j, d]
            out[b, h, i, d] = acc / den
}}
attn
"""
_PAD = np.ones((2, 29), bool)
_PAD[0, 20:] = False
_PAD[1, 5:] = False
_CAUSAL = np.tril(np.ones((29, 29), bool))
_WINDOW = _CAUSAL & (np.arange(29)[:, None] - np.arange(29)[None, :] < 4)


def _gqa(cond, extra="", dtype=np.float32, extra_inputs=None):
    ins = {k: v.astype(dtype) for k, v in _GQA.items()}
    ins.update(extra_inputs or {})
    return GQA_THREE_PASS.format(extra=extra, cond=cond), ins


ATTENTION_VARIANTS = {
    "gqa_i32_padding_mask": (*_gqa("keep[b, j] != 0", ", keep", extra_inputs={"keep": _PAD.astype(np.int32)}),
                             np_attention(_GQ, _GK, _GV, 0.125, _PAD[:, None, None, :], 2), TOL),
    "gqa_causal_i_ge_j": (*_gqa("i >= j"), np_attention(_GQ, _GK, _GV, 0.125, _CAUSAL, 2), TOL),
    "gqa_sliding_window": (*_gqa("j <= i and i - j < 4"),
                           np_attention(_GQ, _GK, _GV, 0.125, _WINDOW, 2), TOL),
    "gqa_f16_causal": (*_gqa("j <= i", dtype=np.float16),
                       np_attention(*(x.astype(np.float16) for x in (_GQ, _GK, _GV)), 0.125, _CAUSAL, 2),
                       3e-3),
}


@pytest.mark.parametrize("name", sorted(ATTENTION_VARIANTS))
def test_attention_variants_are_attention_and_equal_numpy(name):
    src, ins, want, tol = ATTENTION_VARIANTS[name]
    k, _, _, _ = _kernel(src, ins)
    p = R.attention(k)
    assert isinstance(p, R.Attention), p
    assert p.kv_group is not None
    _check_everywhere(src, ins, want, tol)


# near misses: the three-pass form with one piece changed; each runs as written
GQA_NEAR_MISSES = {
    # the denominator over other keys than the max and the weighted sum
    "den_over_other_keys": GQA_THREE_PASS.replace(
        "        for j in 0..kv:\n            if {cond}:\n                den",
        "        for j in 0..kv:\n            if i >= j:\n                den").format(extra="", cond="i > j"),
    # the weights' scale differs from the max's and the sum's
    "weights_scaled_otherwise": GQA_THREE_PASS.replace(
        "acc += exp(dot(Q[b, h, i], K[b, h / 2, j]) * 0.125",
        "acc += exp(dot(Q[b, h, i], K[b, h / 2, j]) * 0.25").format(extra="", cond="j <= i"),
    # V of another head than K's
    "value_of_another_head": GQA_THREE_PASS.replace(
        "V[b, h / 2, j, d]", "V[b, (h + 1) / 2 % 2, j, d]").format(extra="", cond="j <= i"),
    # V read at the query's row, not the key's
    "value_at_the_query_row": GQA_THREE_PASS.replace(
        "V[b, h / 2, j, d]", "V[b, h / 2, i, d]").format(extra="", cond="j <= i"),
}


@pytest.mark.parametrize("name", sorted(GQA_NEAR_MISSES))
def test_attention_near_misses_run_as_written(name):
    src = GQA_NEAR_MISSES[name]
    k, _, _, _ = _kernel(src, _GQA)
    assert not R.attention(k)
    want = _run(src, "cpu", _GQA).astype(np.float64)
    assert np.isfinite(want).all()
    _check_everywhere(src, _GQA, want)


FLASH = """
let attn = compute(Q, K, V) {{
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for qb in 0..seq_q step {BQ}:
            var m = -inf
            var l = 0.0
            var o = zeros(min({BQ}, seq_q - qb), vd)
            for kb in 0..seq_k step {BK}:
                let S = Q[b, h, qb:qb+{BQ}] @ transpose(K[b, {KH}, kb:kb+{BK}]){SC}
                let m_new = max(m, row_max(S))
                {LUPD}
                o = {RES} + exp(S - m_new) @ V[b, {KH}, kb:kb+{BK}]
                m = m_new
            out[b, h, qb:qb+{BQ}] = o / l
}}
attn
"""


def flash(bq=24, bk=24, kh="h", sc=" * 0.125",
          lupd="l = exp(m - m_new) * l + row_sum(exp(S - m_new))", res="exp(m - m_new) * o"):
    return FLASH.format(BQ=bq, BK=bk, KH=kh, SC=sc, LUPD=lupd, RES=res)


_FQ = _f32(2, 4, 53, 16)
_FK = _f32(2, 2, 70, 16)
_FV = _f32(2, 2, 70, 20)
_FLASH_GQA = {"Q": _FQ, "K": _FK, "V": _FV}
_FLASH_MHA = {"Q": _FQ, "K": np.repeat(_FK, 2, 1), "V": np.repeat(_FV, 2, 1)}


@pytest.mark.parametrize("bq,bk", [(24, 24), (48, 80), (80, 48), (16, 7)])
def test_flash_cross_attention_grouped_heads_wider_values(bq, bk):
    """53 queries against 70 keys, K and V of head h / 2, V 20 wide against 16: the flash
    schedule refuses the other V width and the generic one runs it (GL may refuse it for
    the storage buffers it needs, saying so)."""
    src = flash(bq, bk, kh="h / 2")
    k, _, _, _ = _kernel(src, _FLASH_GQA)
    p = R.attention(k)
    assert isinstance(p, R.FlashAttention) and (p.block_q, p.block_kv) == (bq, bk), p
    assert p.clipped_tile
    _check_everywhere(src, _FLASH_GQA, np_attention(_FQ, _FK, _FV, 0.125, group=2),
                      may_refuse=("gl:0",))


FLASH_NEAR_MISSES = {
    "sum_over_the_old_max": "l = exp(m - m_new) * l + row_sum(exp(S - m))",
    "sum_not_rescaled": "l = l + row_sum(exp(S - m_new))",
    "sum_rescaled_upside_down": "l = exp(m_new - m) * l + row_sum(exp(S - m_new))",
}


@pytest.mark.parametrize("name", sorted(FLASH_NEAR_MISSES))
def test_flash_near_misses_run_as_written(name):
    src = flash(lupd=FLASH_NEAR_MISSES[name])
    k, _, _, _ = _kernel(src, _FLASH_MHA)
    assert not R.attention(k)
    want = _run(src, "cpu", _FLASH_MHA).astype(np.float64)
    _check_everywhere(src, _FLASH_MHA, want)


# ------------------------------------------------------------- contraction variants

_A = _f32(37, 29)
_B = _f32(29, 41)
_C = _f32(37, 41)
_BIAS = _f32(41)
_SQ = _f32(29, 29)
_A64, _B64 = _A.astype(np.float64), _B.astype(np.float64)


def mm(body, out="out[i, j] = acc", loops="for i in 0..M, j in 0..N:", init="0.0",
       kl="for k in 0..K:", ins="a, b", pre=""):
    return f"""{pre}
let r = compute({ins}) {{
    @kernel matmul
    {loops}
        var acc = {init}
        {kl}
            {body}
        {out}
}}
r
"""


CONTRACTIONS = {
    "init_from_an_input": (mm("acc += a[i, k] * b[k, j]", init="c[i, j]", ins="a, b, c"),
                           {"a": _A, "b": _B, "c": _C}, lambda: _A64 @ _B64 + _C),
    "k_in_steps_of_2": (mm("acc += a[i, k] * b[k, j]", kl="for k in 0..K step 2:", pre="let K = 29"),
                        {"a": _A, "b": _B}, lambda: _A64[:, ::2] @ _B64[::2]),
    "k_from_3": (mm("acc += a[i, k] * b[k, j]", kl="for k in 3..K:", pre="let K = 29"),
                 {"a": _A, "b": _B}, lambda: _A64[:, 3:] @ _B64[3:]),
    "shifted_operand": (mm("acc += a[i, k + 1] * b[k, j]", kl="for k in 0..K - 1:", pre="let K = 29"),
                        {"a": _A, "b": _B}, lambda: _A64[:, 1:] @ _B64[:-1]),
    "strided_operand": (mm("acc += a[i, 2 * k] * b[k, j]", kl="for k in 0..15:"),
                        {"a": _A, "b": _B[:15].copy()}, lambda: _A64[:, ::2] @ _B64[:15]),
    "transposed_output": (mm("acc += a[i, k] * b[k, j]", out="out[j, i] = acc"),
                          {"a": _A, "b": _B}, lambda: (_A64 @ _B64).T),
    "rows_in_steps_of_2": (mm("acc += a[i, k] * b[k, j]", loops="for i in 0..M step 2, j in 0..N:",
                              pre="let M = 37"),
                           {"a": _A, "b": _B},
                           lambda: np.where((np.arange(37) % 2 == 0)[:, None], _A64 @ _B64, 0)),
    "scaled_bias_relu_epilogue": (mm("acc += a[i, k] * b[k, j]",
                                     out="out[i, j] = max(acc * 0.125 + bias[j], 0.0)", ins="a, b, bias"),
                                  {"a": _A, "b": _B, "bias": _BIAS},
                                  lambda: np.maximum(_A64 @ _B64 * 0.125 + _BIAS, 0)),
    "twice_per_step": (mm("acc += a[i, k] * b[k, j]\n            acc += a[i, k] * b[k, j]"),
                       {"a": _A, "b": _B}, lambda: 2 * _A64 @ _B64),
    "divided_by_k_plus_1": (mm("acc += a[i, k] * b[k, j] / (k + 1)"), {"a": _A, "b": _B},
                            lambda: _A64 @ (_B64 / np.arange(1, 30)[:, None])),
    "one_operand_twice": (mm("acc += a[i, k] * a[j, k]", loops="for i in 0..M, j in 0..M:", ins="a"),
                          {"a": _A}, lambda: _A64 @ _A64.T),
    "guard_on_the_diagonal": (mm("if k != i:\n                acc += a[i, k] * b[k, j]"),
                              {"a": _A, "b": _B},
                              lambda: _A64 @ _B64 - np.array(
                                  [[_A64[i, i] * _B64[i, j] if i < 29 else 0.0 for j in range(41)]
                                   for i in range(37)])),
    # near miss: b[k, k], a diagonal, whatever j is
    "b_k_k_is_no_matmul": (mm("acc += a[i, k] * b[k, k]", pre="let N = 41"), {"a": _A, "b": _SQ},
                           lambda: np.repeat((_A64 * np.diag(_SQ.astype(np.float64))).sum(1, keepdims=True),
                                             41, 1)),
}


@pytest.mark.parametrize("name", sorted(CONTRACTIONS))
def test_contraction_variants_equal_numpy(name):
    src, ins, want = CONTRACTIONS[name]
    _check_everywhere(src, ins, want())


def test_a_diagonal_operand_is_no_contraction():
    src, ins, _ = CONTRACTIONS["b_k_k_is_no_matmul"]
    k, _, _, _ = _kernel(src, ins, {"N": 41})
    assert not R.contraction(k)


# non-associative and self-reading updates: never a contraction; run as written
ORDERED = {
    "decaying_sum": mm("acc = acc * 0.5 + a[i, k] * b[k, j]"),
    "sum_reading_itself": mm("acc += a[i, k] * b[k, j] + acc * 0.25"),
}


@pytest.mark.parametrize("name", sorted(ORDERED))
def test_ordered_updates_run_as_written(name):
    src = ORDERED[name]
    ins = {"a": _A, "b": _B}
    k, _, _, _ = _kernel(src, ins)
    assert not R.contraction(k)
    want = np.zeros((37, 41))
    for kk in range(29):
        if name == "decaying_sum":
            want = want * 0.5 + np.outer(_A64[:, kk], _B64[kk])
        else:
            want = want + np.outer(_A64[:, kk], _B64[kk]) + want * 0.25
    _check_everywhere(src, ins, want, tol=1e-4)


# ------------------------------------------------------------ CUDA and MSL sources

RENDERED = {
    "flash_gqa_48_80": (flash(48, 80, kh="h / 2").replace("seq_q - qb), vd)", "seq_q - qb), head_dim)"),
                        {"Q": _FQ, "K": _FK, "V": _FK}),
    "flash_l0": (FLASH_L0, _ATT),
    "three_pass_l0": (THREE_PASS_L0, _ATT),
    "gqa_i32_padding_mask": ATTENTION_VARIANTS["gqa_i32_padding_mask"][:2],
    "scaled_bias_relu_epilogue": CONTRACTIONS["scaled_bias_relu_epilogue"][:2],
    "k_in_steps_of_2": CONTRACTIONS["k_in_steps_of_2"][:2],
}
_SIZES = {"k_in_steps_of_2": {"K": 29}}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_cuda_and_msl_sources_generate(name):
    from zynbook.compiler.codegen import cuda, msl
    src, ins = RENDERED[name]
    k, _, sz, _ = _kernel(src, ins, _SIZES.get(name))
    prog = cuda.render_cuda(k, sz)
    assert "__global__" in prog.source
    is_attention = bool(R.attention(k)) if k.kernel_type.kind.endswith("attention") else None
    if is_attention is False:
        assert "attention" not in prog.schedule
    m = msl.render_program(k, sz)
    assert "kernel void" in m.source
    if nvcc_runs.NVCC is not None:
        flags = ("--ptx", "-arch=sm_90a" if prog.arch_specific else "-arch=sm_90")
        res = nvcc_runs.run(prog.source, flags)
        assert res.returncode == 0, res.stderr[-4000:]


# ------------------------------------------- rows whose buffer is wider than the row

_XR = _f32(5, 257)
_XR64 = _XR.astype(np.float64)
# each row scaled by its last element, x[b, 256], which the row loops do not reach: x's
# rows are 257 long, so row b starts at element 257 b, not a multiple of 4
ROW_LAST_COLUMN = """let C = 256
let y = compute(x) {
    for b in 0..B:
        var s = 0.0
        for j in 0..C:
            s += x[b, j] * x[b, j]
        for j in 0..C:
            out[b, j] = x[b, j] * x[b, C] / s
}
y
"""
# a neighbour product over rows of 301: the loops cover 300, a multiple of 4
ROW_NEIGHBOURS = """let C = 301
let y = compute(x) {
    for b in 0..B:
        var s = 0.0
        for j in 0..C - 1:
            s += x[b, j + 1] * x[b, j]
        for j in 0..C - 1:
            out[b, j] = x[b, j + 1] - s
}
y
"""
_XN = _f32(5, 301)
_XN64 = _XN.astype(np.float64)
ROWS = {
    "scaled_by_the_last_column": (ROW_LAST_COLUMN, {"x": _XR}, {"C": 256},
                                  _XR64[:, :256] * _XR64[:, 256:] / (_XR64[:, :256] ** 2).sum(1, keepdims=True)),
    "neighbours": (ROW_NEIGHBOURS, {"x": _XN}, {"C": 301},
                   _XN64[:, 1:] - (_XN64[:, 1:] * _XN64[:, :-1]).sum(1, keepdims=True)),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_rows_of_a_wider_buffer_equal_numpy(name):
    src, ins, _, want = ROWS[name]
    _check_everywhere(src, ins, want)


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("name", sorted(ROWS))
def test_rows_of_a_wider_buffer_read_no_misaligned_vectors(name, target):
    """The rows schedule read such rows 16 bytes at a time (the buffer's base is aligned, a
    row's start is not: a misaligned address on a GPU); the emulator refuses a vector access
    at an offset that is not a multiple of its width."""
    from compute_testing import emulate_kernel
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    src, ins, sizes, want = ROWS[name]
    k, arrays, sz, sc = _kernel(src, ins, sizes)
    t = {"cuda": cuda_target, "metal": metal_target}[target]()
    prog = schedules.build(k, t, sz)
    assert prog.schedule.startswith("rows"), prog.schedule
    got = emulate_kernel(prog, k, arrays, sz, sc)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL, atol=TOL)


# --------------------------------------------- the GPU schedules through the emulator

def _emulated(src, ins, target, sizes=None):
    """(schedule, output) of the launch IR the schedules build for `target` (the CUDA or
    Metal target), run on the emulator."""
    from compute_testing import emulate_kernel
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    k, arrays, sz, sc = _kernel(src, ins, sizes)
    prog = schedules.build(k, {"cuda": cuda_target, "metal": metal_target}[target](), sz)
    return prog.schedule, emulate_kernel(prog, k, arrays, sz, sc)


_FV16 = _f32(2, 2, 70, 16)


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("name", sorted(ATTENTION_VARIANTS) + ["flash_48_80", "flash_80_48"])
def test_gpu_attention_schedules_of_the_variants(name, target):
    if name.startswith("flash"):
        bq, bk = map(int, name.split("_")[1:])
        src = flash(bq, bk, kh="h / 2").replace("seq_q - qb), vd)", "seq_q - qb), head_dim)")
        ins, tol = {"Q": _FQ, "K": _FK, "V": _FV16}, TOL
        want = np_attention(_FQ, _FK, _FV16, 0.125, group=2)
    else:
        src, ins, want, tol = ATTENTION_VARIANTS[name]
    schedule, got = _emulated(src, ins, target)
    assert "attention" in schedule, schedule
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("name", ["init_from_an_input", "k_in_steps_of_2", "rows_in_steps_of_2",
                                  "scaled_bias_relu_epilogue", "strided_operand", "transposed_output"])
def test_gpu_gemm_schedule_of_the_variants(name, target):
    src, ins, want = CONTRACTIONS[name]
    sizes = {"k_in_steps_of_2": {"K": 29}, "rows_in_steps_of_2": {"M": 37}}.get(name)
    schedule, got = _emulated(src, ins, target, sizes)
    assert "GEMM" in schedule, schedule
    np.testing.assert_allclose(got.astype(np.float64), want(), rtol=TOL, atol=TOL)


# ------------------------------- stores that use the loop variable on different axes

_XS = _f32(70, 70)
# iteration i writes row i and column i: iteration k overwrites what iteration i wrote at
# (i, k) and (k, i), so the order of the iterations decides the result (in order: the lower
# triangle of x, mirrored). Both loops were marked parallel (each store alone is apart
# along its own axis of the loop variable), so the GPUs raced; with them serial, the block
# schedule split the outer loop over its threads (classify_loop: "independent") and raced.
MIRROR = """
let y = compute(x) {
    for i in 0..n:
        for k in 0..n:
            out[i, k] = x[i, k]
            out[k, i] = x[i, k]
}
y
"""
# the same written twice along one axis: two stores apart from other iterations together
# (out[i, 2 k] and out[i, 2 k + 1]), and stores of one iteration's row that do overlap
# another's (out[i, k] and out[i + 1, k])
PAIRS = """
let y = compute(x) {
    for i in 0..n:
        for k in 0..m:
            out[i, 2 * k] = x[i, k]
            out[i, 2 * k + 1] = -x[i, k]
}
y
"""
OVERLAP = """let n = 70
let y = compute(x) {
    for i in 0..n - 1:
        for k in 0..n:
            out[i, k] = x[i, k]
            out[i + 1, k] = 2.0 * x[i, k]
}
y
"""


def _mirror(x):
    x = x.astype(np.float64)
    return np.tril(x) + np.tril(x, -1).T


def _overlap(x):
    x = x.astype(np.float64)
    out = np.zeros((x.shape[0] + 1, x.shape[1]))
    for i in range(x.shape[0]):
        out[i] = x[i]
        out[i + 1] = 2 * x[i]
    return out


@pytest.mark.parametrize("name", ["mirror", "pairs", "overlap"])
def test_stores_on_different_axes_of_the_loop_variable(name):
    x = _XS[:69].copy() if name == "overlap" else _XS
    src, want, parallel = {
        "mirror": (MIRROR, _mirror, False),
        "pairs": (PAIRS, lambda x: np.stack([x, -x], -1).reshape(70, 140).astype(np.float64), True),
        "overlap": (OVERLAP, _overlap, False),
    }[name]
    want = want(x)
    k, _, _, _ = _kernel(src, {"x": x}, {"n": 70} if name == "overlap" else None)
    outer = k.body[0]
    assert outer.parallel == parallel, R.cir.print_kernel(k)
    _check_everywhere(src, {"x": x}, want)


@pytest.mark.parametrize("target", ["cuda", "metal"])
def test_mirrored_stores_do_not_race_on_the_gpus(target):
    _, got = _emulated(MIRROR, {"x": _XS}, target)
    np.testing.assert_array_equal(got, _mirror(_XS).astype(np.float32))


# ------------------------------------------------ integer arithmetic in the scale

# `1 / 8` of two integers truncates (0, as C's); `vd / 3` is 5 for vd = 16. The recogniser
# flattened the products and quotients of the score into float factors whatever their
# type, so the attention schedules scaled by 1.0 / 8 and 3 / vd: off by 1.76 and 0.088
INT_SCALES = {
    "one_over_8_is_0": ("* (1 / 8)", 0.0),
    "over_vd_over_3": ("/ (vd / 3)", 1 / 5),
}


@pytest.mark.parametrize("name", sorted(INT_SCALES))
def test_an_integer_quotient_in_the_scale_truncates(name):
    text, scale = INT_SCALES[name]
    src = GQA_THREE_PASS.format(extra="", cond="j <= i").replace("* 0.125", text)
    k, _, sz, _ = _kernel(src, _GQA)
    p = R.attention(k)
    assert isinstance(p, R.Attention), p
    assert R.launch_value(p.scale, sz) == pytest.approx(scale)
    want = np_attention(_GQ, _GK, _GV, scale, _CAUSAL, 2)
    _check_everywhere(src, _GQA, want)
    for target in ("cuda", "metal"):
        _, got = _emulated(src, _GQA, target)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL, atol=TOL, err_msg=target)


def test_an_integer_quotient_in_the_flash_scale_truncates():
    src = flash(48, 48, kh="h / 2", sc=" * (1 / 8)").replace("seq_q - qb), vd)", "seq_q - qb), head_dim)")
    ins = {"Q": _FQ, "K": _FK, "V": _FV16}
    want = np_attention(_FQ, _FK, _FV16, 0.0, group=2)        # every key weighs the same
    _check_everywhere(src, ins, want)
    for target in ("cuda", "metal"):
        _, got = _emulated(src, ins, target)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL, atol=TOL, err_msg=target)


# block-causal keys by an integer quotient, j / 4 <= i / 4: attention; the same with the
# denominator's keys by a float quotient (j / 4.0 <= i / 4, a different set of keys) was
# read as the same condition (canonical forms compared quotients up to types) and ran as
# attention over the first loop's keys: off by 10.7
_BLOCK4 = (np.arange(29)[None, :] // 4) <= (np.arange(29)[:, None] // 4)


def test_block_causal_keys_by_an_integer_quotient_are_attention():
    src = GQA_THREE_PASS.format(extra="", cond="j / 4 <= i / 4")
    k, _, _, _ = _kernel(src, _GQA)
    p = R.attention(k)
    assert isinstance(p, R.Attention) and p.masked and not p.causal, p
    _check_everywhere(src, _GQA, np_attention(_GQ, _GK, _GV, 0.125, _BLOCK4, 2))


def test_an_integer_and_a_float_quotient_are_different_key_conditions():
    base = GQA_THREE_PASS.format(extra="", cond="j / 4 <= i / 4")
    src = base.replace("        for j in 0..kv:\n            if j / 4 <= i / 4:\n                den",
                       "        for j in 0..kv:\n            if j / 4.0 <= i / 4:\n                den")
    assert src != base
    k, _, _, _ = _kernel(src, _GQA)
    assert not R.attention(k)
    s = np.einsum("bhid,bhjd->bhij", _GQ.astype(np.float64), np.repeat(_GK, 2, 1).astype(np.float64)) * 0.125
    num_keys = _BLOCK4
    den_keys = np.arange(29)[None, :] / 4.0 <= np.arange(29)[:, None] // 4
    mx = np.where(num_keys, s, -np.inf).max(-1, keepdims=True)
    p = np.exp(s - mx)
    want = np.einsum("bhij,bhjd->bhid", np.where(num_keys, p, 0), np.repeat(_GV, 2, 1).astype(np.float64)) \
        / np.where(den_keys, p, 0).sum(-1, keepdims=True)
    _check_everywhere(src, _GQA, want)
