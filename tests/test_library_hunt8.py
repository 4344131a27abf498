"""The kernel library and the compute-device interface read from the spec's text, at edges
the other hunts leave: odd sizes, half precision, strided inputs, extreme values; on every
device, compared with torch (CPU, float64 or autograd) or numpy written here."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import zynbook
from zynbook import library
from zynbook.session import Session

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "gl:"))]
F = torch.nn.functional


def _rand(seed, *shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _host(t):
    return np.asarray(t.numpy(), np.float64)


def _call(name, device, *args, **kwargs):
    return library.call(name, Session(device), list(args), kwargs)


# ------------------------------------------------------------------ library attention

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_float_mask_of_nan_makes_its_row_nan_as_torch(device, causal):
    """A float mask is added to the scores: a NaN there makes that query's row NaN, as
    torch's attn_mask does (the kernel admitted keys whose mask is `> -inf`, so a NaN key
    was dropped as if masked and the row was the softmax of the others)."""
    q, k, v = (_rand(s, 1, 2, 6, 4) for s in (1, 2, 3))
    mask = np.zeros((6, 6), np.float32)
    mask[3, 2] = np.nan         # under the diagonal: a key query 3 sees when causal too
    mask[4, 1] = -np.inf
    got = _host(_call("attention", device, q, k, v, mask=mask, causal=causal))
    want = F.scaled_dot_product_attention(
        *(torch.tensor(t).double() for t in (q, k, v)),
        attn_mask=torch.tensor(mask).double() + (torch.triu(torch.full((6, 6), -math.inf,
                                                  dtype=torch.float64), 1) if causal else 0))
    assert np.isnan(got[:, :, 3]).all()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def _sdpa(q, k, v, mask=None, causal=False, scale=None):
    """Attention in float64 written here: grouped heads repeated, a bool mask keeping keys, a
    float mask added, a query of no key giving zeros (as the library defines it)."""
    q, k, v = (torch.tensor(np.asarray(t, np.float64)) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    keep = torch.ones(s.shape[-2:], dtype=torch.bool)
    if causal:
        keep &= torch.tril(keep)
    if mask is not None:
        m = torch.tensor(np.asarray(mask))
        if m.dtype == torch.bool:
            keep &= m
        else:
            s = s + m.double()
    p = torch.softmax(s.masked_fill(~keep, -math.inf), -1).nan_to_num(0.0)
    return (p @ v).numpy()


_ATT_SHAPES = [(1, 1, 1, 1, 1, 1, 1), (2, 4, 2, 3, 33, 5, 3), (1, 6, 3, 33, 7, 4, 4),
               (1, 2, 1, 0, 5, 4, 4), (1, 2, 1, 5, 0, 4, 4)]
_ATT_KW = ["none", "causal", "bool", "bool+causal", "float", "float+causal", "scale",
           "float+scale"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", _ATT_SHAPES)
def test_attention_of_grouped_heads_masks_and_empty_sides_equals_torch(device, shape):
    """[batch, heads, seq, head_dim] attention with fewer key/value heads, a value width
    other than the keys', a bool or additive mask with -inf, causal, a scale, and no
    queries or no keys (zeros)."""
    b, hq, hk, sq, sk, d, dv = shape
    rng = np.random.default_rng(sum(shape))
    q = (rng.standard_normal((b, hq, sq, d)) * 2).astype(np.float32)
    k = (rng.standard_normal((b, hk, sk, d)) * 2).astype(np.float32)
    v = rng.standard_normal((b, hk, sk, dv)).astype(np.float32)
    bmask = rng.random((sq, sk)) < 0.6
    fmask = np.where(rng.random((sq, sk)) < 0.3, -np.inf,
                     rng.standard_normal((sq, sk))).astype(np.float32)
    for kind in _ATT_KW:
        kw = {"causal": "causal" in kind}
        if "bool" in kind:
            kw["mask"] = bmask
        if "float" in kind:
            kw["mask"] = fmask
        if "scale" in kind:
            kw["scale"] = 0.3
        got = _host(_call("attention", device, q, k, v, **kw))
        np.testing.assert_allclose(got, _sdpa(q, k, v, **kw), rtol=1e-4, atol=1e-5,
                                   err_msg=kind)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_of_strided_inputs_and_large_scores(device):
    """q, k, v as views [batch, seq, heads, d] with the heads axis swapped in (strided), and
    scores near 10^4 (the softmax's running maximum keeps exp from overflowing)."""
    q, k, v = (_rand(s, 1, 9, 2, 8) for s in (4, 5, 6))
    views = [np.swapaxes(t, 1, 2) for t in (q, k, v)]
    got = _host(_call("attention", device, *views, causal=True))
    np.testing.assert_allclose(got, _sdpa(*views, causal=True), rtol=1e-4, atol=1e-5)
    big = [_rand(7, 1, 1, 6, 4, scale=300), _rand(8, 1, 1, 6, 4, scale=300), _rand(9, 1, 1, 6, 4)]
    got = _host(_call("attention", device, *big))
    np.testing.assert_allclose(got, _sdpa(*big), rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------ the tiny model

@pytest.mark.parametrize("temperature", [1e-310, 5e-324])
def test_generation_at_a_temperature_near_zero_takes_the_likeliest_token(temperature):
    """A positive temperature so small that logit / temperature overflows: the likeliest
    token (numpy's argmax of the full forward pass's last logits), as the limit of
    sampling; the weights were inf - inf and numpy's choice() raised on NaN."""
    from zynbook.nn.model import GPTConfig, TinyGPT
    dev = zynbook.device("cpu")
    cfg = GPTConfig(vocab=11, dim=8, n_heads=2, n_kv_heads=1, ffn=8, n_layers=1, max_seq=8)
    model = TinyGPT(dev, cfg)
    tokens = model.generate([1, 2], 3, temperature=temperature, top_k=4)
    assert tokens[:2] == [1, 2] and len(tokens) == 5
    for n in range(2, 5):
        logits, _ = model.forward(dev.upload_u32(tokens[:n]), n)
        last = dev.download(logits).reshape(n, cfg.vocab)[-1]
        assert tokens[n] == int(np.argmax(last))


# ------------------------------------------------------------------ the device interface

def _t(a, grad=False):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=grad)


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_and_its_backward_at_extremes_equal_torch(device):
    """Rows of 1 and 1000 values, rows of 1e30, of -inf, with one NaN or +inf: torch's
    softmax (NaN where it gives NaN) and its gradient."""
    dev = zynbook.device(device)
    x = _rand(11, 5, 1000, scale=30)
    x[0] = 1e30
    x[1, 5] = -np.inf
    x[2] = -np.inf
    x[3, 7] = np.nan
    x[4, 9] = np.inf
    got = dev.download(dev.softmax(dev.upload(x), 5, 1000))
    np.testing.assert_allclose(got.reshape(5, 1000), torch.softmax(_t(x), -1).numpy(),
                               rtol=1e-4, atol=1e-7)
    for rows, cols in ((1, 1), (33, 1), (3, 1000)):
        x, g = _rand(rows, rows, cols, scale=5), _rand(cols, rows, cols)
        tx = _t(x, True)
        torch.softmax(tx, -1).backward(_t(g))
        s = dev.softmax(dev.upload(x), rows, cols)
        got = dev.download(dev.softmax_backward(s, dev.upload(g), rows, cols))
        np.testing.assert_allclose(got.reshape(rows, cols), tx.grad.numpy(), rtol=1e-4,
                                   atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, dim, eps", [(1, 1, 1e-6), (3, 33, 1e-5), (2, 1000, 0.0),
                                            (4, 3, 1.0)])
def test_rms_norm_and_its_backward_of_odd_sizes_equal_torch(device, rows, dim, eps):
    dev = zynbook.device(device)
    x, w, g = _rand(rows, rows, dim), _rand(dim, dim), _rand(rows + dim, rows, dim)
    tx, tw = _t(x, True), _t(w, True)
    y = F.rms_norm(tx, (dim,), tw, eps)
    y.backward(_t(g))
    got = dev.download(dev.rms_norm(dev.upload(x), dev.upload(w), rows, dim, eps))
    np.testing.assert_allclose(got.reshape(rows, dim), y.detach().numpy(), rtol=1e-4, atol=1e-5)
    dx, dw = dev.rms_norm_backward(dev.upload(x), dev.upload(w), dev.upload(g), rows, dim, eps)
    np.testing.assert_allclose(dev.download(dx).reshape(rows, dim), tx.grad.numpy(),
                               rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dev.download(dw), tw.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_backward_of_repeated_ids_and_reduce_sum_of_every_axis(device):
    """The scatter-add sums every position of an id (a table of one row, 1000 rows); reduce_sum
    over each axis, a negative one and an axis of no values, against numpy."""
    dev = zynbook.device(device)
    rng = np.random.default_rng(5)
    for vocab, seq, dim in ((1, 7, 1), (5, 33, 3), (1000, 7, 2)):
        table, g = _rand(vocab, vocab, dim), _rand(seq, seq, dim)
        ids = rng.integers(0, vocab, seq).astype(np.uint32)
        got = dev.download(dev.embedding(dev.upload(table), dev.upload_u32(ids), seq, dim))
        np.testing.assert_array_equal(got.reshape(seq, dim), table[ids])
        want = np.zeros((vocab, dim))
        np.add.at(want, ids, g.astype(np.float64))
        got = dev.embedding_backward(dev.upload(g), dev.upload_u32(ids), vocab, seq, dim)
        np.testing.assert_allclose(dev.download(got).reshape(vocab, dim), want, rtol=1e-5,
                                   atol=1e-6)
    for shape, axis in (([1], 0), ([3, 33, 4], 0), ([3, 33, 4], 1), ([3, 33, 4], -1),
                        ([2, 0, 3], 1), ([2, 0, 3], 0), ([1000], 0)):
        x = _rand(len(shape), *shape)
        got = dev.download(dev.reduce_sum(dev.upload(x), shape, axis))
        np.testing.assert_allclose(got, x.astype(np.float64).sum(axis).reshape(-1),
                                   rtol=1e-4, atol=1e-4)


def _causal_ref(q, k, v, s, h, kv, d, start=0):
    total = start + s
    tq = _t(q).reshape(s, h, d).transpose(0, 1)
    tk, tv = (_t(t[:total]).reshape(total, kv, d).transpose(0, 1).repeat_interleave(h // kv, 0)
              for t in (k, v))
    keep = torch.arange(total)[None, :] <= (start + torch.arange(s))[:, None]
    return F.scaled_dot_product_attention(tq, tk, tv, attn_mask=keep).transpose(0, 1) \
        .reshape(-1).numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("start, q_len, heads, kv_heads, head_dim",
                         [(0, 1, 2, 1, 4), (5, 1, 4, 2, 3), (32, 33, 3, 1, 4), (3, 0, 2, 1, 4)])
def test_kv_attention_and_its_fixed_capacity_form_equal_torch(device, start, q_len, heads,
                                                              kv_heads, head_dim):
    dev = zynbook.device(device)
    total, cap = start + q_len, start + q_len + 3
    q = _rand(1, q_len, heads * head_dim)
    k, v = _rand(2, cap, kv_heads * head_dim), _rand(3, cap, kv_heads * head_dim)
    want = _causal_ref(q, k, v, q_len, heads, kv_heads, head_dim, start)
    got = dev.kv_attention(dev.upload(q), dev.upload(k[:total]), dev.upload(v[:total]), start,
                           q_len, heads, kv_heads, head_dim)
    np.testing.assert_allclose(dev.download(got), want, rtol=1e-4, atol=1e-5)
    got = dev.kv_attention_fixed(dev.upload(q), dev.upload(k), dev.upload(v), start, q_len, cap,
                                 heads, kv_heads, head_dim)
    np.testing.assert_allclose(dev.download(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_of_extreme_logits_equals_torch(device):
    """Logits of 1e38 and -1e38, -inf off the target, a whole row of NaN under the pad id
    (left out: neither the loss nor the gradient sees it), the pad id u32::MAX."""
    dev = zynbook.device(device)
    pad = 2 ** 32 - 1
    logits = np.array([[1e38, -1e38, 0, 1], [-np.inf, 0, 1, 2], [np.nan] * 4,
                       [3, -np.inf, -np.inf, 5]], np.float32)
    targets = np.array([1, 2, pad, 3], np.uint32)
    loss, grad = dev.cross_entropy_forward_backward(dev.upload(logits), dev.upload_u32(targets),
                                                    4, 4, pad)
    keep = [0, 1, 3]
    tl = _t(logits[keep], True)
    want = F.cross_entropy(tl, torch.tensor(targets[keep].astype(np.int64)))
    want.backward()
    assert loss == pytest.approx(want.item(), rel=1e-5)
    wgrad = np.zeros((4, 4))
    wgrad[keep] = tl.grad.numpy()
    np.testing.assert_allclose(dev.download(grad).reshape(4, 4), wgrad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n, lr, betas, eps, wd, steps", [
    (1, 1e-3, (0.9, 0.999), 1e-8, 0.01, 5), (33, 0.1, (0.0, 0.0), 1e-8, 0.1, 4),
    (1000, 1e-2, (0.5, 0.99), 1e-3, 1.0, 6), (7, 0.0, (0.9, 0.999), 1e-8, 0.5, 3)])
def test_adamw_steps_equal_torch_over_hyperparameters_at_their_edges(device, n, lr, betas, eps,
                                                                      wd, steps):
    """Several AdamW steps (weight decay up to 1, beta1 = beta2 = 0, lr = 0) against
    torch.optim.AdamW, the moments too."""
    dev = zynbook.device(device)
    p0 = _rand(n, n)
    tp = torch.nn.Parameter(torch.tensor(p0))
    opt = torch.optim.AdamW([tp], lr=lr, betas=betas, eps=eps, weight_decay=wd)
    p, m, v = dev.upload(p0), dev.alloc(n), dev.alloc(n)
    for t in range(1, steps + 1):
        g = _rand(100 + t, n)
        tp.grad = torch.tensor(g)
        opt.step()
        dev.adamw_step(p, dev.upload(g), m, v, lr, betas[0], betas[1], eps, wd, t)
    state = opt.state[tp]
    np.testing.assert_allclose(dev.download(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dev.download(m), state["exp_avg"].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dev.download(v), state["exp_avg_sq"].numpy(), rtol=1e-5,
                               atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
def test_adamw_of_huge_and_zero_gradients_equals_torch(device):
    dev = zynbook.device(device)
    p0 = _rand(3, 4)
    g = np.array([1e30, -1e30, 1e-30, 0.0], np.float32)
    tp = torch.nn.Parameter(torch.tensor(p0))
    opt = torch.optim.AdamW([tp], lr=0.1, weight_decay=0.01)
    p, m, v = dev.upload(p0), dev.alloc(4), dev.alloc(4)
    for t in (1, 2):
        tp.grad = torch.tensor(g)
        opt.step()
        dev.adamw_step(p, dev.upload(g), m, v, 0.1, 0.9, 0.999, 1e-8, 0.01, t)
    np.testing.assert_allclose(dev.download(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dev.download(v), opt.state[tp]["exp_avg_sq"].numpy(), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_of_odd_sizes_and_of_inf_and_nan_equals_torch(device):
    dev = zynbook.device(device)
    for m, k, n in ((1, 1, 1), (3, 33, 1), (33, 3, 1000), (1, 1000, 3), (3, 0, 4)):
        a, b = _rand(m, m, k), _rand(k + 7, k, n)
        got = dev.download(dev.matmul(dev.upload(a), dev.upload(b), m, k, n))
        np.testing.assert_allclose(got.reshape(m, n), a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-4)
    a = np.array([[np.inf, 1], [0, np.nan], [3e38, 3e38]], np.float32)
    b = np.array([[0, 1, 2], [1, 2, 3]], np.float32)
    got = dev.download(dev.matmul(dev.upload(a), dev.upload(b), 3, 2, 3))
    np.testing.assert_array_equal(got.reshape(3, 3), (torch.tensor(a) @ torch.tensor(b)).numpy())


_HALF = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("kind", ["none", "scale", "causal", "float mask", "no queries"])
def test_half_attention_computes_in_f32_and_keeps_the_inputs_dtype(device, dtype, kind):
    """f16 / bf16 q, k, v over 700 keys: the scores and the softmax's sums in f32 and the
    result stored in the inputs' dtype, as torch's kernels do, on every device. The
    reference summed an f16 score's exponentials in f16 one key at a time (0.1 off over
    1500 keys, where the compiled devices were 1e-3), and a scale= or an f32 mask made the
    result f32."""
    rng = np.random.default_rng(3)
    sq = 0 if kind == "no queries" else 9
    q = torch.tensor(rng.standard_normal((1, 2, sq, 64))).to(_HALF[dtype])
    k = torch.tensor(rng.standard_normal((1, 1, 700, 64))).to(_HALF[dtype])
    v = torch.tensor(rng.standard_normal((1, 1, 700, 64)) + 3).to(_HALF[dtype])
    kw = {"scale": {"scale": 0.2}, "causal": {"causal": True},
          "float mask": {"mask": np.zeros((sq, 700), np.float32)}}.get(kind, {})
    got = _call("attention", device, q, k, v, **kw)
    assert got.dtype == dtype and got.shape == (1, 2, sq, 64)
    want = F.scaled_dot_product_attention(q.double(), k.double().repeat_interleave(2, 1),
                                          v.double().repeat_interleave(2, 1),
                                          is_causal=kind == "causal", scale=kw.get("scale"))
    # the result's own rounding (f16: 2^-11, bf16: 2^-8 of values near 3), the f16 scores'
    tol = 2e-3 if dtype == "f16" else 8e-3
    np.testing.assert_allclose(_host(got), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_of_a_head_dim_of_zero_weighs_the_keys_alike(device, dtype, causal):
    """q and k of head_dim 0, v of 3 values: every score is the empty dot, 0, so each query
    averages the values of its keys (torch's answer); the reference divided 0 by sqrt(0)
    and gave NaN where cpu:native gave the average."""
    q = np.zeros((1, 2, 4, 0), dtype)
    v = np.arange(24, dtype=np.float64).reshape(1, 2, 4, 3).astype(dtype)
    got = _call("attention", device, q, q, v, causal=causal)
    count = np.arange(1, 5)[:, None] if causal else 4
    want = (np.cumsum(v, 2) if causal else v.sum(2, keepdims=True)) / count
    np.testing.assert_allclose(_host(got), np.broadcast_to(want, v.shape), rtol=1e-3)


# ------------------------------------------------------------------ the fused ops

def _rope_torch(x, seq, heads, head_dim, pos0, base):
    x = x.reshape(seq, heads, head_dim // 2, 2)
    angle = (torch.arange(seq, dtype=torch.float64)[:, None] + pos0) * \
        base ** (-2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    c, s = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    a, b = x[..., 0], x[..., 1]
    return torch.stack([a * c - b * s, a * s + b * c], -1).reshape(seq, heads * head_dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, dim, n_out", [(1, 1, 1), (33, 3, 5), (2, 1000, 3)])
def test_layer_norm_fusions_and_their_backward_of_odd_sizes_equal_torch(device, rows, dim,
                                                                        n_out):
    """LayerNorm + Linear and Residual + LayerNorm (rows offset by 5 from 0: the two-pass
    variance), forward and backward, against torch autograd."""
    dev = zynbook.device(device)
    up = dev.upload
    x = _rand(rows, rows, dim, scale=3) + 5
    res, gamma, beta = _rand(1, rows, dim), _rand(2, dim), _rand(3, dim)
    w, gy, gr = _rand(4, dim, n_out), _rand(5, rows, n_out), _rand(6, rows, dim)
    tx, tg, tb, tw, tr = (_t(a, True) for a in (x, gamma, beta, w, res))
    y = F.layer_norm(tx, (dim,), tg, tb, 1e-5) @ tw
    y.backward(_t(gy))
    got = dev.layernorm_linear(up(x), up(gamma), up(beta), up(w), rows, dim, n_out)
    np.testing.assert_allclose(dev.download(got).reshape(rows, n_out), y.detach().numpy(),
                               rtol=1e-3, atol=1e-4)
    grads = dev.layernorm_linear_backward(up(x), up(gamma), up(beta), up(w), up(gy), rows, dim,
                                          n_out)
    for g, t in zip(grads, (tx, tg, tb, tw)):
        np.testing.assert_allclose(dev.download(g), t.grad.numpy().ravel(), rtol=1e-3, atol=1e-3)
    for t in (tx, tg, tb):
        t.grad = None
    y = F.layer_norm(tx + tr, (dim,), tg, tb, 1e-5)
    y.backward(_t(gr))
    got = dev.residual_layernorm(up(x), up(res), up(gamma), up(beta), rows, dim)
    np.testing.assert_allclose(dev.download(got), y.detach().numpy().ravel(), rtol=1e-3,
                               atol=1e-4)
    grads = dev.residual_layernorm_backward(up(x), up(res), up(gamma), up(beta), up(gr), rows,
                                            dim)
    for g, t in zip(grads, (tx, tg, tb)):
        np.testing.assert_allclose(dev.download(g), t.grad.numpy().ravel(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seq, heads, head_dim, pos0, base", [(1, 1, 2, 0, 10000.0),
                                                               (33, 3, 6, 5, 10000.0),
                                                               (7, 2, 64, 1000, 500000.0)])
def test_rms_norm_rope_and_its_backward_equal_torch(device, seq, heads, head_dim, pos0, base):
    dev = zynbook.device(device)
    n = heads * head_dim
    # angles of f32 positions: about 1e-7 of the position off, radians
    atol = 1e-4 + 2e-6 * (pos0 + seq)
    x, w, g = _rand(seq, seq, n), _rand(n, n), _rand(seq + n, seq, n)
    tx, tw = _t(x, True), _t(w, True)
    y = _rope_torch(F.rms_norm(tx, (n,), tw, 1e-5), seq, heads, head_dim, pos0, base)
    y.backward(_t(g))
    got = dev.rms_norm_rope(dev.upload(x), dev.upload(w), seq, heads, head_dim, 1e-5, pos0, base)
    np.testing.assert_allclose(dev.download(got), y.detach().numpy().ravel(), rtol=1e-4,
                               atol=atol)
    dx, dw = dev.rms_norm_rope_backward(dev.upload(x), dev.upload(w), dev.upload(g), seq, heads,
                                        head_dim, 1e-5, pos0, base)
    np.testing.assert_allclose(dev.download(dx), tx.grad.numpy().ravel(), rtol=1e-3, atol=atol)
    np.testing.assert_allclose(dev.download(dw), tw.grad.numpy().ravel(), rtol=1e-3, atol=atol)
    # the rotation alone and its inverse, R^T x (the backward pass of rope)
    xr = x.reshape(seq, heads, head_dim // 2, 2).astype(np.float64)
    angle = (np.arange(seq)[:, None] + pos0) * base ** (-2 * np.arange(head_dim // 2) / head_dim)
    c, s = np.cos(angle)[:, None], np.sin(angle)[:, None]
    for inverse, sign in ((False, 1.0), (True, -1.0)):
        want = np.stack([xr[..., 0] * c - sign * xr[..., 1] * s,
                         sign * xr[..., 0] * s + xr[..., 1] * c], -1)
        got = dev.rope(dev.upload(x), seq, heads, head_dim, pos0, base, inverse=inverse)
        np.testing.assert_allclose(dev.download(got), want.ravel(), rtol=1e-4, atol=atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", ["swiglu", "geglu"])
@pytest.mark.parametrize("rows, dim, hidden", [(1, 1, 1), (3, 33, 5), (5, 7, 1000)])
def test_gated_units_and_their_backward_of_odd_sizes_equal_torch(device, act, rows, dim,
                                                                 hidden):
    dev = zynbook.device(device)
    x, wg, wu, g = (_rand(s, *shape, scale=2) for s, shape in
                    enumerate(((rows, dim), (dim, hidden), (dim, hidden), (rows, hidden))))
    tx, tg, tu = _t(x, True), _t(wg, True), _t(wu, True)
    f = F.silu if act == "swiglu" else F.gelu
    y = f(tx @ tg) * (tx @ tu)
    y.backward(_t(g))
    ups = [dev.upload(a) for a in (x, wg, wu)]
    got = getattr(dev, act)(*ups, rows, dim, hidden)
    np.testing.assert_allclose(dev.download(got), y.detach().numpy().ravel(), rtol=1e-4,
                               atol=1e-4)
    grads = getattr(dev, act + "_backward")(*ups, dev.upload(g), rows, dim, hidden)
    for got, t in zip(grads, (tx, tg, tu)):
        np.testing.assert_allclose(dev.download(got), t.grad.numpy().ravel(), rtol=1e-3,
                                   atol=1e-3)
