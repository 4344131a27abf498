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
