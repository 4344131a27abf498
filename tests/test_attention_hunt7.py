"""Attention whose scores reach -inf (an added term of -inf beside a key condition, a first
key of -inf in an online form) and attention written in more ways (names, masks of every
dtype, scales, grouped heads, sizes that fill no tile), on every device against numpy that
runs the loops as the program writes them: exp(-inf - -inf) is NaN there, so a row whose
every admitted score is -inf is NaN, and an online form whose first admitted score is -inf
is NaN whatever keys follow."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import assert_equals_numpy, lower_block, wanted_devices
from zynbook.backends.registry import get_device

DEVICES = wanted_devices()


# ---------------------------------------------------------------- the programs

def _lines(lines, indent, cond):
    """`lines` at `indent`, under `if cond:` where there is one."""
    pad = " " * indent
    if cond is None:
        return "\n".join(pad + x for x in lines)
    return pad + f"if {cond}:\n" + "\n".join(pad + "    " + x for x in lines)


def source(form, score, cond=None, inputs="Q, K, V", v="V[b, h, j, d]", sizes=("B", "H", "S", "S", "D")):
    """An attention kernel of `form` over the score expression `score` (of b, h, i, j),
    under the key condition `cond`: "three" divides by the sum after the key loop,
    "three_inline" inside it, "online" keeps max and sum in one pass, "one_pass" all three."""
    B, H, S, SK, D = sizes
    s = score
    if form in ("three", "three_inline"):
        w = f"exp({s} - m) / l * {v}" if form == "three_inline" else f"exp({s} - m) * {v}"
        body = f"""        var m = -inf
        for j in 0..{SK}:
{_lines([f"m = max(m, {s})"], 12, cond)}
        var l = 0.0
        for j in 0..{SK}:
{_lines([f"l += exp({s} - m)"], 12, cond)}
        for d in 0..{D}:
            var acc = 0.0
            for j in 0..{SK}:
{_lines([f"acc += {w}"], 16, cond)}
            out[b, h, i, d] = {"acc" if form == "three_inline" else "acc / l"}"""
    elif form == "online":
        step = [f"let s = {s}", "let mn = max(m, s)", "l = l * exp(m - mn) + exp(s - mn)", "m = mn"]
        body = f"""        var m = -inf
        var l = 0.0
        for j in 0..{SK}:
{_lines(step, 12, cond)}
        for d in 0..{D}:
            var acc = 0.0
            for j in 0..{SK}:
{_lines([f"acc += exp({s} - m) * {v}"], 16, cond)}
            out[b, h, i, d] = acc / l"""
    else:
        step = [f"let s = {s}", "let mx = max(m, s)", "let a = exp(m - mx)", "let p = exp(s - mx)",
                "l = a * l + p", f"acc = acc * a + p * {v}", "m = mx"]
        body = f"""        for d in 0..{D}:
            var m = -inf
            var l = 0.0
            var acc = 0.0
            for j in 0..{SK}:
{_lines(step, 16, cond)}
            out[b, h, i, d] = acc / l"""
    return f"""let y = compute({inputs}) {{
    @kernel attention
    for b in 0..{B}, h in 0..{H}, i in 0..{S}:
{body}
}}
y"""


# ---------------------------------------------------------------- numpy, as the loops run

def _quiet():
    return np.errstate(invalid="ignore", divide="ignore", over="ignore")


def loops_numpy(form, s, ok, V):
    """What the loops of `form` compute from the scores s[b, h, i, j] (float64), the key
    condition ok[b, h, i, j] and V[b, h, j, d]."""
    with _quiet():
        if form in ("three", "three_inline"):
            m = np.where(ok, s, -np.inf).max(-1, keepdims=True)
            w = np.where(ok, np.exp(s - m), 0.0)
            l = w.sum(-1, keepdims=True)
            if form == "three_inline":
                return np.einsum("bhij,bhjd->bhid", np.where(ok, w / l, 0.0), V)
            return np.einsum("bhij,bhjd->bhid", w, V) / l
        m = np.full(s.shape[:-1], -np.inf)
        l = np.zeros(s.shape[:-1])
        num = np.zeros(s.shape[:-1] + V.shape[-1:])
        for j in range(s.shape[-1]):
            sj, okj = s[..., j], ok[..., j]
            mn = np.maximum(m, sj)
            a, p = np.exp(m - mn), np.exp(sj - mn)
            l = np.where(okj, l * a + p, l)
            num = np.where(okj[..., None], num * a[..., None] + p[..., None] * V[:, :, j, None, :], num)
            m = np.where(okj, mn, m)
        if form == "one_pass":
            return num / l[..., None]
        w = np.where(ok, np.exp(s - m[..., None]), 0.0)
        return np.einsum("bhij,bhjd->bhid", w, V) / l[..., None]


def dots(Q, K, group=1):
    """Q K^T in float64, K's head h // group for head h."""
    K = np.repeat(K.astype(np.float64), group, axis=1)
    return np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K)


def run(device, src, arrays, scalars=None):
    """The result of `src` on `device` (float64) and the schedule it ran with."""
    k, ins, sz, sc = lower_block(src, arrays, scalars)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    return np.asarray(dev.to_host(got), np.float64), str((launch.geometry or {}).get("schedule", ""))


def check(device, src, arrays, want, scalars=None, tol=2e-4, attention=True):
    got, schedule = run(device, src, arrays, scalars)
    assert_equals_numpy(got, want, tol)
    if attention and device != "cpu":
        assert "attention" in schedule.lower(), schedule


def qkv(seed, B, H, S, D, dtype=np.float32, kv_heads=None, SK=None):
    r = np.random.default_rng(seed)
    kv = (B, kv_heads or H, SK or S, D)
    return {"Q": r.standard_normal((B, H, S, D)).astype(dtype),
            "K": r.standard_normal(kv).astype(dtype), "V": r.standard_normal(kv).astype(dtype)}


# ---------------------------------------------------------------- -inf scores

def _padding(B, S, first):
    """A bias of 0 and -inf over the keys: batch 0's first `first` keys -inf, batch 1's
    keys 1 and 3 (its first key kept)."""
    pad = np.zeros((B, S), np.float32)
    pad[0, :first] = -np.inf
    pad[1, [1, 3]] = -np.inf
    return pad


MASKS = {
    "causal": ("j <= i", lambda r, B, S: {}, lambda a, B, H, S: np.tril(np.ones((S, S), bool))[None, None]),
    "bool": ("keep[b, i, j]", lambda r, B, S: {"keep": r.random((B, S, S)) < 0.7},
             lambda a, B, H, S: a["keep"][:, None]),
    "float": ("keep[b, i, j] > 0.5", lambda r, B, S: {"keep": (r.random((B, S, S)) < 0.7).astype(np.float32)},
              lambda a, B, H, S: a["keep"][:, None] > 0.5),
    "int": ("keep[b, i, j] != 0", lambda r, B, S: {"keep": (r.random((B, S, S)) < 0.7).astype(np.int32)},
            lambda a, B, H, S: a["keep"][:, None] != 0),
}


def masked_case(form, mask, first=3, B=2, H=2, S=37, D=24, seed=0):
    """(source, arrays, numpy's answer) of `form` with the key condition `mask` and an
    added padding term of -inf at batch 0's first `first` keys (under a causal condition
    its first rows admit only those keys)."""
    r = np.random.default_rng(seed)
    a = qkv(seed, B, H, S, D)
    cond, make, ref = MASKS[mask]
    a.update(make(r, B, S))
    if mask != "causal":        # row 4 admits none, row 5 only keys of -inf
        keep = a["keep"]
        keep[:, 4] = 0
        keep[:, 5] = 0
        keep[:, 5, :first] = 1
    a["pad"] = _padding(B, S, first)
    score = "dot(Q[b, h, i], K[b, h, j]) * 0.2 + pad[b, j]"
    s = dots(a["Q"], a["K"]) * np.float32(0.2) + a["pad"][:, None, None, :]
    ok = np.broadcast_to(ref(a, B, H, S), s.shape)
    names = "Q, K, V, pad" + (", keep" if mask != "causal" else "")
    return source(form, score, cond, names), a, loops_numpy(form, s, ok, a["V"])


FORMS = ("three", "three_inline", "online", "one_pass")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("form", FORMS)
def test_rows_whose_admitted_scores_are_all_minus_inf(device, form, mask):
    """A key condition and a term of -inf: a row whose admitted keys all score -inf is NaN
    (the loops take exp(-inf - -inf)), one with no admitted key 0 or 0 / 0 as the body
    divides; an online form's row whose first admitted key scores -inf is NaN too. The
    attention schedules took both for a row with no key."""
    src, a, want = masked_case(form, mask)
    assert np.isnan(want).any() and np.isfinite(want).any()
    check(device, src, a, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("first", [1, 2, 37])
def test_a_first_key_of_minus_inf_without_a_key_condition(device, form, first):
    """No key condition: batch 0's first `first` keys -inf (all of them at 37), batch 1's
    keys 1 and 3. The online forms make batch 0 NaN (their first update is exp(-inf - -inf)),
    the three-pass forms only where every key is -inf."""
    B, H, S, D = 2, 2, 37, 24
    a = qkv(3, B, H, S, D)
    a["pad"] = _padding(B, S, first)
    s = dots(a["Q"], a["K"]) * np.float32(0.2) + a["pad"][:, None, None, :]
    want = loops_numpy(form, s, np.ones(s.shape, bool), a["V"])
    check(device, source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.2 + pad[b, j]", None, "Q, K, V, pad"),
          a, want)


# ---------------------------------------------------------------- written in more ways

CONDS = {
    "none": (None, lambda i, j: np.ones(np.broadcast(i, j).shape, bool)),
    "causal_lt": ("j < i + 1", lambda i, j: j < i + 1),
    "causal_ge": ("i >= j", lambda i, j: i >= j),
    "window": ("j <= i and i - j < 8", lambda i, j: (j <= i) & (i - j < 8)),
    "strict": ("j < i", lambda i, j: j < i),           # query 0 admits no key
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,cond", [("three", "causal_lt"), ("three_inline", "strict"), ("online", "window"),
                                       ("one_pass", "causal_ge"), ("online", "strict"), ("three", "none")])
def test_key_conditions_over_positions(device, form, cond):
    """Causal conditions written several ways and a sliding window, over 37 queries and
    head_dim 40; `j < i` leaves query 0 no key (0, or 0 / 0 where the sum divides after
    the loop)."""
    B, H, S, D = 1, 2, 37, 40
    a = qkv(11, B, H, S, D)
    text, ok = CONDS[cond]
    s = dots(a["Q"], a["K"]) / np.sqrt(np.float64(D))
    idx = np.arange(S)
    admitted = np.broadcast_to(ok(idx[:, None], idx[None, :]), s.shape)
    src = source(form, "dot(Q[b, h, i], K[b, h, j]) / sqrt(D)", text)
    check(device, src, a, loops_numpy(form, s, admitted, a["V"]))


SCALES = {"const": ("* 0.125", lambda D: 0.125), "sqrt": ("/ sqrt(D)", lambda D: 1 / np.sqrt(D)),
          "rsqrt": ("* (1.0 / sqrt(D))", lambda D: 1 / np.sqrt(D)),
          "scalar": ("* temp", lambda D: 0.3)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form,scale", [("three", "const"), ("online", "sqrt"), ("one_pass", "rsqrt"),
                                        ("three_inline", "scalar")])
def test_scales(device, form, scale):
    B, H, S, D = 2, 1, 23, 24
    a = qkv(5, B, H, S, D)
    text, value = SCALES[scale]
    s = dots(a["Q"], a["K"]) * value(D)
    want = loops_numpy(form, s, np.ones(s.shape, bool), a["V"])
    check(device, source(form, f"dot(Q[b, h, i], K[b, h, j]) {text}"), a, want,
          {"temp": 0.3} if scale == "scalar" else None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["three", "one_pass"])
def test_grouped_query_heads_with_more_keys_than_queries(device, form):
    """Six query heads over two K/V heads (h / 3), 19 queries over 70 keys, head_dim 24."""
    B, H, S, SK, D = 1, 6, 19, 70, 24
    a = qkv(7, B, H, S, D, kv_heads=2, SK=SK)
    s = dots(a["Q"], a["K"], 3) * 0.125
    src = source(form, "dot(Q[b, h, i], K[b, h / 3, j]) * 0.125", v="V[b, h / 3, j, d]",
                 sizes=("B", "H", "S", "SK", "D"))
    V = np.repeat(a["V"].astype(np.float64), 3, axis=1)
    check(device, src, a, loops_numpy(form, s, np.ones(s.shape, bool), V))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["three_inline", "online"])
def test_half_inputs_with_a_bool_mask(device, form):
    """f16 Q, K and V, a bool mask input, against numpy on the f16 values (the output f16)."""
    B, H, S, D = 1, 2, 37, 40
    r = np.random.default_rng(9)
    a = qkv(9, B, H, S, D, np.float16)
    a["mask"] = r.random((S, S)) < 0.6
    a["mask"][:, 0] = True
    s = dots(a["Q"], a["K"]) * 0.125
    want = loops_numpy(form, s, np.broadcast_to(a["mask"], s.shape), a["V"].astype(np.float64))
    src = source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.125", "mask[i, j]", "Q, K, V, mask")
    check(device, src, a, want, tol=4e-3)


# ---------------------------------------------------------------- flash attention

def flash_source(bq, bk):
    """Flash attention over `bq`-query and `bk`-key blocks, min(...) output tiles."""
    return f"""let attn = compute(Q, K, V) {{
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for qb in 0..seq step {bq}:
            var m = -inf
            var l = 0.0
            var o = zeros(min({bq}, seq - qb), D)
            for kb in 0..seq step {bk}:
                let S = Q[b, h, qb:qb+{bq}] @ transpose(K[b, h, kb:kb+{bk}]) * 0.125
                let m_new = max(m, row_max(S))
                l = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kb:kb+{bk}]
                m = m_new
            out[b, h, qb:qb+{bq}] = o / l
}}
attn"""


def flash_numpy(s, V, bk):
    """The flash loops over key blocks of `bk` (their first update of a block of -inf
    scores is NaN, exp(-inf - -inf))."""
    m = np.full(s.shape[:-1] + (1,), -np.inf)
    l = np.zeros_like(m)
    o = np.zeros(s.shape[:-1] + V.shape[-1:])
    with _quiet():
        for k0 in range(0, s.shape[-1], bk):
            S = s[..., k0:k0 + bk]
            mn = np.maximum(m, S.max(-1, keepdims=True))
            l = np.exp(m - mn) * l + np.exp(S - mn).sum(-1, keepdims=True)
            o = np.exp(m - mn) * o + np.einsum("bhij,bhjd->bhid", np.exp(S - mn), V[:, :, k0:k0 + bk])
            m = mn
        return o / l


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bq,bk,S,D,dtype", [(48, 48, 70, 24, np.float32), (40, 24, 37, 40, np.float32),
                                             (24, 40, 70, 24, np.float16)])
def test_flash_blocks_that_fill_no_tile(device, bq, bk, S, D, dtype):
    a = qkv(1, 1, 2, S, D, dtype)
    want = flash_numpy(dots(a["Q"], a["K"]) * 0.125, a["V"].astype(np.float64), bk)
    check(device, flash_source(bq, bk), a, want, tol=4e-3 if dtype == np.float16 else 2e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("minus_inf_keys", [3, 24, 37])
def test_flash_with_a_first_key_block_of_minus_inf(device, minus_inf_keys):
    """K's first keys make -inf scores (an -inf element where Q's is positive): a first
    block of 24 all -inf makes the rows NaN (the loops' first update), fewer do not."""
    a = qkv(2, 1, 2, 37, 24)
    a["Q"][..., 0] = np.abs(a["Q"][..., 0]) + 0.5
    a["K"][:, :, :minus_inf_keys, 0] = -np.inf
    with _quiet():
        s = dots(a["Q"], a["K"]) * 0.125
    want = flash_numpy(s, a["V"].astype(np.float64), 24)
    assert np.isnan(want).all() if minus_inf_keys >= 24 else np.isfinite(want).all()
    check(device, flash_source(16, 24), a, want)


# ---------------------------------------------------------------- more probes

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", FORMS)
def test_a_key_of_plus_inf(device, form):
    """A term of +inf at key 5 of batch 0 under a causal condition: the rows that admit it
    are NaN (exp(inf - inf)), beside the first keys' tracking of -inf."""
    B, H, S, D = 2, 1, 13, 16
    a = qkv(8, B, H, S, D)
    a["pad"] = np.zeros((B, S), np.float32)
    a["pad"][0, 5] = np.inf
    s = dots(a["Q"], a["K"]) * 0.125 + a["pad"][:, None, None, :]
    ok = np.broadcast_to(np.arange(S)[None, :] <= np.arange(S)[:, None], s.shape)
    want = loops_numpy(form, s, ok, a["V"].astype(np.float64))
    assert np.isnan(want[0, :, 5:]).all() and np.isfinite(want[0, :, :5]).all() and np.isfinite(want[1]).all()
    src = source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.125 + pad[b, j]", "j <= i", "Q, K, V, pad")
    check(device, src, a, want)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_attention_with_more_queries_than_keys(device):
    """23 queries over 11 keys under `j <= i`, a scalar scale and a per-head term over
    (query, key)."""
    B, H, S, SK, D = 1, 2, 23, 11, 24
    a = qkv(5, B, H, S, D, SK=SK)
    a["rel"] = np.random.default_rng(6).standard_normal((H, S, SK)).astype(np.float32)
    s = dots(a["Q"], a["K"]) * np.float32(0.3) + a["rel"][None]
    ok = np.broadcast_to(np.arange(SK)[None, :] <= np.arange(S)[:, None], s.shape)
    src = source("online", "dot(Q[b, h, i], K[b, h, j]) * temp + rel[h, i, j]", "j <= i", "Q, K, V, rel",
                 sizes=("B", "H", "S", "SK", "D"))
    check(device, src, a, loops_numpy("online", s, ok, a["V"].astype(np.float64)), {"temp": 0.3})


# ---------------------------------------------------------------- the register-tiled products

@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("form,cond", [("three_inline", "j <= i"), ("online", None), ("one_pass", "j <= i")])
def test_register_tiled_products_keep_the_first_keys(target, form, cond):
    """The CUDA and Metal kernels of register-tiled products on the emulator: a row whose
    admitted scores are all -inf, and an online form's whose first is, are NaN there too
    (the first keys merged over the row's threads by a collective)."""
    from compute_testing import emulate_kernel
    from zynbook.compiler.schedules.attention import Attention
    from zynbook.compiler.targets import cuda_target, metal_target
    t = cuda_target() if target == "cuda" else metal_target()
    B, H, S, D = 2, 2, 37, 32
    a = qkv(3, B, H, S, D)
    a["pad"] = _padding(B, S, 2)
    s = dots(a["Q"], a["K"]) * np.float32(0.2) + a["pad"][:, None, None, :]
    ok = np.broadcast_to(np.tril(np.ones((S, S), bool)) if cond else np.ones((S, S), bool), s.shape)
    want = loops_numpy(form, s, ok, a["V"])
    assert np.isnan(want).any() and np.isfinite(want).any()
    k, ins, sz, sc = lower_block(source(form, "dot(Q[b, h, i], K[b, h, j]) * 0.2 + pad[b, j]", cond,
                                        "Q, K, V, pad"), a)
    sched = Attention()
    products = [p for p in sched.space(k, t, sz) if p.products]
    assert products
    for params in dict.fromkeys([products[0], products[-1]]):
        got = emulate_kernel(sched.build(k, t, sz, params), k, ins, sz, sc, warp=32)
        assert_equals_numpy(got, want, 2e-4)
