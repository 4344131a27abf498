"""The recognition pass (compiler/passes/recognise.py): attention, flash attention and
contractions are recognised by their structure, whatever their names, masks, scales and
block sizes; bodies that lack a piece of the algorithm are refused, with a reason."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import attention_sources as A  # noqa: E402
from kernel_sources import (ATTENTION_TEMPLATE, CLIPPED_FLASH_TEMPLATE, FLASH_TEMPLATE,  # noqa: E402
                            lower_template)

from zynbook.compiler import cir  # noqa: E402
from zynbook.compiler.passes import recognise as R  # noqa: E402


def lower(text, mask=None):
    ranks = [4, 4, 4] + ([2] if "allowed" in text.split("{")[0] or "mask" in text.split("{")[0] else [])
    dtypes = ["f32"] * 3 + ([mask or "f32"] if len(ranks) == 4 else [])
    return lower_template(text, ranks, dtypes)


def scale_value(p, head_dim=16, temp=0.3):
    return R.launch_value(p.scale, {"head_dim": head_dim, "temp": temp})


# ---------------------------------------------------------------- attention forms


@pytest.mark.parametrize("mask", sorted(A.MASKS))
@pytest.mark.parametrize("form", ["three_pass", "online_stats", "one_pass"])
def test_attention_forms_and_masks(form, mask):
    text = getattr(A, form)(mask=mask)
    k = lower(text, "bool" if mask == "bool" else None)
    p = R.attention(k)
    assert isinstance(p, R.Attention), p
    assert p.form == form.replace("_", "-")
    assert (p.q, p.k, p.v, p.out) == ("Q", "K", "V", "out")
    assert p.masked == (mask != "none")
    assert p.causal == mask.startswith("causal")
    if p.masked:
        names = R.free_vars(p.mask)
        assert p.key_var in names and p.query_var in names
        if mask in ("bool", "float"):
            assert any(ld.buffer == "allowed" for ld in R.loads(p.mask))
    assert scale_value(p) == pytest.approx(0.25)
    # a division by the sum inside the key loop leaves 0 for rows without keys; outside, 0 / 0
    assert p.empty_row == ("zero" if form == "three_pass" else "nan")


@pytest.mark.parametrize("scale,value", [("sqrt", 0.25), ("const", 0.125), ("scalar", 0.3)])
def test_attention_scales(scale, value):
    p = R.attention(lower(A.three_pass(scale=scale)))
    assert isinstance(p, R.Attention), p
    assert scale_value(p) == pytest.approx(value)


def test_attention_renamed_and_inlined():
    names = ("batch_ix", "head", "row", "col", "e", "peak", "den", "total", "sc")
    p = R.attention(lower(A.three_pass(mask="causal", names=names, inline=True)))
    assert isinstance(p, R.Attention), p
    assert (p.batch_var, p.head_var, p.query_var, p.key_var) == ("batch_ix", "head", "row", "col")
    assert p.causal


def test_spec_attention_and_flash_texts():
    p = R.attention(lower_template(ATTENTION_TEMPLATE, [4, 4, 4, 2]))
    assert isinstance(p, R.Attention) and p.masked and not p.causal
    for blk in (16, 48, 64, 100):
        f = R.attention(lower_template(FLASH_TEMPLATE.replace("BLOCK", str(blk)), [4, 4, 4]))
        assert isinstance(f, R.FlashAttention), f
        assert (f.block_q, f.block_kv) == (blk, blk) and not f.clipped_tile
        c = R.attention(lower_template(CLIPPED_FLASH_TEMPLATE.replace("BLOCK", str(blk)), [4, 4, 4]))
        assert isinstance(c, R.FlashAttention) and c.clipped_tile


# ------------------------------------------------------------------ flash variants


@pytest.mark.parametrize("bq,bk", [(48, 48), (32, 16), (64, 128), (7, 5)])
@pytest.mark.parametrize("tile", ["plain", "min"])
def test_flash_blocks_and_tiles(bq, bk, tile):
    f = R.attention(lower(A.flash(bq, bk, tile=tile)))
    assert isinstance(f, R.FlashAttention), f
    assert (f.block_q, f.block_kv, f.clipped_tile) == (bq, bk, tile == "min")
    assert scale_value(f) == pytest.approx(0.25)


def test_flash_scale_on_the_query_tile():
    text = A.flash(32).replace("Q[b, h, q_block:q_block+32] @ transpose(K_block) / sqrt(head_dim)",
                               "(Q[b, h, q_block:q_block+32] * 0.5) @ transpose(K_block) / sqrt(head_dim)")
    f = R.attention(lower(text))
    assert isinstance(f, R.FlashAttention), f
    assert scale_value(f) == pytest.approx(0.125)
    t2 = text.replace("* 0.5)", "* V[b, h, q_block:q_block+32])")
    assert isinstance(R.attention(lower(t2)), R.NoMatch)


def test_keys_as_values_is_still_attention():
    # softmax(Q V^T) V is attention with K = V
    f = R.attention(lower(A.flash(64).replace("transpose(K_block)", "transpose(V_block)")))
    assert isinstance(f, R.FlashAttention) and f.k == f.v == "V"


def test_flash_renamed_scaled_and_reordered():
    f = R.attention(lower(A.flash(48, renamed=True, scale="const")))
    assert isinstance(f, R.FlashAttention), f
    assert (f.query_var, f.key_var) == ("qs", "ks")
    assert scale_value(f) == pytest.approx(0.125)
    g = R.attention(lower(A.flash_reordered()))
    assert isinstance(g, R.FlashAttention), g
    assert (g.block_q, g.block_kv) == (32, 16)


# ------------------------------------------------------------------ non-patterns


def test_flash_without_rescale_is_not_attention():
    r = R.attention(lower(A.flash(64, rescale=False)))
    assert not r and isinstance(r, R.NoMatch)
    assert "rescaled" in r.reason
    assert "not attention" in r.note("flash_attention") or "generic" in r.note()


@pytest.mark.parametrize("edit,why", [
    (("m = m_new", "m = m"), "maximum"),                                   # m never advances
    (("row_sum(exp(S - m_new))", "row_sum(exp(S - m))"), "running sum"),   # wrong shift
    (("o / l", "o"), "o / l"),                                             # no normalisation
    (("@ transpose(K_block)", "@ K_block"), "transpose"),                  # no transpose
    (("max(m, row_max(S))", "row_max(S)"), "maximum"),                      # max not running
    (("kv_block:kv_block+64]\n                let V", "kv_block:kv_block+32]\n                let V"),
     "key tile"),                                                          # K block narrower than the step
])
def test_broken_flash_bodies_are_refused(edit, why):
    text = A.flash(64)
    assert edit[0] in text
    r = R.attention(lower(text.replace(*edit, 1)))
    assert isinstance(r, R.NoMatch), r
    assert why in r.reason, r.reason


@pytest.mark.parametrize("edit,why", [
    (("l += exp(s - m)", "l += exp2(s - m)"), "denominator"),
    (("let w = exp(s - m) / l", "let w = exp(s - m)"), "weights"),
    (("m = max(s, m)", "m = s"), "maximum"),
    (("var l = 0.0", "var l = 1.0"), "0"),
    (("acc += w * V[b, h, j, d]", "acc += w * V[b, h, i, d]"), "value"),
    (("let w = exp(s - m) / l", "let w = exp(s * 0.5 - m) / l"), "weights"),   # another score
])
def test_broken_attention_bodies_are_refused(edit, why):
    text = A.three_pass()
    assert edit[0] in text
    r = R.attention(lower(text.replace(*edit, 1)))
    assert isinstance(r, R.NoMatch), r
    assert why in r.reason, r.reason


def test_different_masks_in_the_key_loops_are_refused():
    text = A.three_pass(mask="causal").replace("if j <= i:", "if j < i:", 1)
    r = R.attention(lower(text))
    assert isinstance(r, R.NoMatch) and "condition" in r.reason


def test_mask_on_the_output_dimension_is_refused():
    text = A.three_pass().replace("                let s = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)\n                let w",
                                  "                if j <= d:\n                    let s = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)\n                    let w")
    text = text.replace("                acc += w", "                    acc += w")
    r = R.attention(lower(text))
    assert isinstance(r, R.NoMatch)


def test_elementwise_is_no_attention():
    k = lower_template("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\n", [1])
    assert isinstance(R.attention(k), R.NoMatch)


# -------------------------------------------------------------------- contractions

MATMUL = """let c = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var total = 1.5
        for k in 0..K:
            total += a[i, k] * b[k, j]
        out[i, j] = relu(total)
}
"""

BMM_T = """let c = compute(x, y) {
    @kernel fused
    for n in 0..B, i in 0..M, j in 0..N:
        var acc = 0.0
        for r in 0..K:
            acc = y[n, j, r] * x[n, r, i] + acc
        out[n, i, j] = acc
}
"""


def test_contractions():
    c = R.contraction(lower_template(MATMUL, [2, 2]))
    assert isinstance(c, R.Contraction), c
    assert (c.a, c.b, c.acc, c.red_vars) == ("a", "b", "total", ("k",))
    assert (c.mvars, c.nvars, c.bvars) == (("i",), ("j",), ())
    assert c.epilogue is not None and R.launch_value(c.init, {}) == 1.5
    d = R.contraction(lower_template(BMM_T, [3, 3]))
    assert isinstance(d, R.Contraction), d
    assert (d.a, d.b) == ("y", "x") and d.epilogue is None
    assert (d.mvars, d.nvars, d.bvars) == (("j",), ("i",), ("n",))
    assert isinstance(R.recognise(lower_template(MATMUL, [2, 2])), R.Contraction)


CONV = """let y = compute(x, w) {
    @kernel conv2d
    for n in 0..N, f in 0..F, oh in 0..OH, ow in 0..OW:
        var s = 0.0
        for c in 0..C, kh in 0..3, kw in 0..3:
            let ih = oh + kh - 1
            let iw = ow + kw - 1
            if ih >= 0 and ih < H and iw >= 0 and iw < W:
                s += x[n, c, ih, iw] * w[f, c, kh, kw]
        out[n, f, oh, ow] = s
}
"""


def test_convolution_is_a_contraction_with_a_guard():
    c = R.contraction(lower_template(CONV, [4, 4]))
    assert isinstance(c, R.Contraction), c
    assert c.red_vars == ("c", "kh", "kw") and c.cond is not None
    assert (c.mvars, c.nvars, c.bvars) == (("n", "oh", "ow"), ("f",), ())


def test_not_contractions():
    fused = MATMUL.replace("@kernel matmul", "@kernel fused")
    notmm = fused.replace("total += a[i, k] * b[k, j]", "total += a[i, k] + b[k, j]")
    r = R.contraction(lower_template(notmm, [2, 2]))
    assert isinstance(r, R.NoMatch) and "a * b" in r.reason
    bias = fused.replace("out[i, j] = relu(total)", "out[i, j] = max(total + a[i, 0], 0.0)")
    assert isinstance(R.contraction(lower_template(bias, [2, 2])), R.Contraction)
    nored = fused.replace("total += a[i, k] * b[k, j]", "total += a[i, j] * b[i, j]")
    assert isinstance(R.contraction(lower_template(nored, [2, 2])), R.NoMatch)
    assert isinstance(R.contraction(lower_template(FLASH_TEMPLATE.replace("BLOCK", "64"), [4, 4, 4])),
                      R.NoMatch)
