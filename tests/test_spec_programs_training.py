"""The training half of the compute-device interface (compute-device-trait.rs): the forward
operations, their backward passes, cross-entropy and the AdamW step, called through
`zynbook.device(id)` and as ZynML builtins, each on every device present (the CPU reference
included) and compared with PyTorch's autograd and optimiser on the CPU, in f64, written
here; then a few AdamW steps of a tiny model trained with them against the same model in
torch."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import zynbook
from tolerances import assert_close, tolerance

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if not d["id"].startswith("browser")
           and (not _WANTED or d["id"] in _WANTED.split(",") or d["id"] == "cpu")]

RNG = np.random.default_rng(8117)
U32_MAX = 2 ** 32 - 1


def _f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _leaf(a):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=True)


def _got(dev, buf):
    return dev.download(buf).astype(np.float64)


def _attention(q, k, v, seq, heads, kv_heads, head_dim):
    """Causal grouped-query attention in torch: q [seq, heads * head_dim], k and v
    [seq, kv_heads * head_dim]; query head h reads key/value head h // (heads / kv_heads)."""
    group = heads // kv_heads
    qh = q.view(seq, heads, head_dim).transpose(0, 1)
    kh = k.view(seq, kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, 0)
    vh = v.view(seq, kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, 0)
    scores = qh @ kh.transpose(1, 2) / head_dim ** 0.5
    future = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)
    p = torch.softmax(scores.masked_fill(future, float("-inf")), -1)
    return (p @ vh).transpose(0, 1).reshape(seq, heads * head_dim)


def _rms_norm(x, w, eps):
    return x * w / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def _cross_entropy(logits, targets, pad):
    """The mean over the positions whose target is not `pad` (0 where every one is)."""
    t = torch.tensor(np.asarray(targets, np.int64))
    keep = t != pad
    if not keep.any():
        return (logits * 0).sum()
    return torch.nn.functional.cross_entropy(logits[keep], t[keep])


# ------------------------------------------------------------------ one operation at a time

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, cols, scale", [(1, 1, 1.0), (3, 77, 1.0), (2, 1025, 30.0),
                                               (5, 130, 1e3)])
def test_softmax_and_its_backward_equal_torch(rows, cols, scale, device):
    dev = zynbook.device(device)
    x, g = _f32(rows, cols, scale=scale), _f32(rows, cols)
    xt = _leaf(x)
    y = torch.softmax(xt, -1)
    y.backward(torch.tensor(g, dtype=torch.float64))
    sm = dev.softmax(dev.upload(x), rows, cols)
    dx = dev.softmax_backward(sm, dev.upload(g), rows, cols)
    assert_close(_got(dev, sm), y.detach().numpy().ravel(), "f32", "reduction")
    assert_close(_got(dev, dx), xt.grad.numpy().ravel(), "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, dim, eps", [(1, 1, 1e-5), (3, 77, 1e-6), (4, 130, 0.0),
                                            (2, 1025, 0.1)])
def test_rms_norm_and_its_backward_equal_torch(rows, dim, eps, device):
    dev = zynbook.device(device)
    x, w, g = _f32(rows, dim), _f32(dim), _f32(rows, dim)
    xt, wt = _leaf(x), _leaf(w)
    y = _rms_norm(xt, wt, eps)
    y.backward(torch.tensor(g, dtype=torch.float64))
    out = dev.rms_norm(dev.upload(x), dev.upload(w), rows, dim, eps)
    dx, dw = dev.rms_norm_backward(dev.upload(x), dev.upload(w), dev.upload(g), rows, dim, eps)
    assert_close(_got(dev, out), y.detach().numpy().ravel(), "f32", "reduction")
    assert_close(_got(dev, dx), xt.grad.numpy().ravel(), "f32", "reduction")
    assert_close(_got(dev, dw), wt.grad.numpy(), "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab, seq, dim", [(1, 1, 1), (10, 77, 3), (130, 5, 33)])
def test_embedding_and_its_backward_equal_torch(vocab, seq, dim, device):
    # ids repeat (77 positions over 10 rows): the backward pass sums their rows
    dev = zynbook.device(device)
    table, g = _f32(vocab, dim), _f32(seq, dim)
    ids = RNG.integers(0, vocab, seq)
    tt = _leaf(table)
    y = tt[torch.tensor(ids)]
    y.backward(torch.tensor(g, dtype=torch.float64))
    out = dev.embedding(dev.upload(table), dev.upload_u32(ids), seq, dim)
    dt = dev.embedding_backward(dev.upload(g), dev.upload_u32(ids), vocab, seq, dim)
    assert_close(_got(dev, out), y.detach().numpy().ravel())
    assert_close(_got(dev, dt), tt.grad.numpy().ravel(), "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seq, heads, kv_heads, head_dim", [(1, 1, 1, 1), (3, 4, 2, 5),
                                                             (7, 3, 1, 8), (13, 2, 2, 3)])
def test_causal_attention_and_its_backward_equal_torch(seq, heads, kv_heads, head_dim, device):
    dev = zynbook.device(device)
    q, g = _f32(seq, heads * head_dim), _f32(seq, heads * head_dim)
    k, v = _f32(seq, kv_heads * head_dim), _f32(seq, kv_heads * head_dim)
    qt, kt, vt = _leaf(q), _leaf(k), _leaf(v)
    o = _attention(qt, kt, vt, seq, heads, kv_heads, head_dim)
    o.backward(torch.tensor(g, dtype=torch.float64))
    bq, bk, bv = dev.upload(q), dev.upload(k), dev.upload(v)
    out = dev.causal_attention(bq, bk, bv, seq, heads, kv_heads, head_dim)
    grads = dev.causal_attention_backward(dev.upload(g), bq, bk, bv, seq, heads, kv_heads,
                                          head_dim)
    assert_close(_got(dev, out), o.detach().numpy().ravel(), "f32", "contraction")
    for got, want in zip(grads, (qt.grad, kt.grad, vt.grad)):
        assert_close(_got(dev, got), want.numpy().ravel(), "f32", "contraction")


# (n_positions, vocab_size, pad_id, targets or None for random ones, logit scale)
CE_CASES = {
    "pad_outside_vocab": (3, 5, 99, [1, 2, 0], 1.0),
    "pad_inside_vocab": (77, 130, 0, None, 1.0),
    "one_position_one_class": (1, 1, 5, [0], 1.0),
    # u32::MAX is a pad id as good as any: int(target) of it was -1 (an index error on
    # the CPUs) and the size 2^32 - 1 a device error on WebGPU
    "pad_is_u32_max": (4, 7, U32_MAX, [1, U32_MAX, 3, 6], 1.0),
    "pad_past_2_31": (3, 4, 2 ** 31 + 5, [2 ** 31 + 5, 0, 3], 1.0),
    "every_position_padded": (4, 7, 6, [6, 6, 6, 6], 1.0),
    "large_logits": (5, 1025, 3, None, 1e3),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CE_CASES))
def test_cross_entropy_forward_backward_equals_torch(name, device):
    n, vocab, pad, targets, scale = CE_CASES[name]
    if targets is None:
        targets = RNG.integers(0, vocab, n)
    dev = zynbook.device(device)
    logits = _f32(n, vocab, scale=scale)
    lt = _leaf(logits)
    want = _cross_entropy(lt, targets, pad)
    want.backward()
    loss, grad = dev.cross_entropy_forward_backward(dev.upload(logits), dev.upload_u32(targets),
                                                    n, vocab, pad)
    assert isinstance(loss, float)
    np.testing.assert_allclose(loss, want.item(), **tolerance("f32", "reduction"))
    assert_close(_got(dev, grad), lt.grad.numpy().ravel(), "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_pad_of_u32_max_in_a_program(device):
    # the same through the builtin: `pad_id` an integer literal of 2^32 - 1
    src = """
let (loss, grad) = cross_entropy_forward_backward(upload(logits), upload_u32(targets), 4, 7,
                                                  4294967295)
[loss, download(grad)]
"""
    logits, targets = _f32(4, 7), [U32_MAX, 2, 6, U32_MAX]
    loss, grad = zynbook.Session(device=device).run(src, logits=logits,
                                                    targets=np.array(targets, np.uint32))
    lt = _leaf(logits)
    want = _cross_entropy(lt, targets, U32_MAX)
    want.backward()
    np.testing.assert_allclose(float(loss), want.item(), **tolerance("f32", "reduction"))
    assert_close(np.asarray(grad), lt.grad.numpy().ravel(), "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad", [2 ** 32, 2 ** 40])
def test_cross_entropy_pad_id_beyond_u32_is_refused(pad, device):
    # a pad id past u32 was taken (and matched nothing) on the CPUs
    dev = zynbook.device(device)
    with pytest.raises(zynbook.ZynMLError, match=r"`pad_id` is a token id \(a u32"):
        dev.cross_entropy_forward_backward(dev.upload(np.zeros(6)), dev.upload_u32([1, 2]),
                                           2, 3, pad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ids", [[1, 4], [4], [U32_MAX, 0], [2 ** 31]])
def test_token_ids_past_the_table_are_a_runtime_error(ids, device):
    # embedding_backward's gather left an id past vocab_size out of the gradient, silently;
    # embedding said `index -1` of the weights for ids past 2^31 on the compiled devices
    dev = zynbook.device(device)
    n = len(ids)
    top = max(ids)
    with pytest.raises(zynbook.ZynMLRuntimeError) as info:
        dev.embedding_backward(dev.upload(np.ones(n * 3)), dev.upload_u32(ids), 4, n, 3)
    assert info.value.message == \
        f"embedding_backward(): token id {top} is outside the table of 4 rows"
    with pytest.raises(zynbook.ZynMLRuntimeError) as info:
        dev.embedding(dev.upload(np.ones(12)), dev.upload_u32(ids), n, 3)
    assert info.value.message == f"embedding(): token id {top} is outside the table of 4 rows"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("upload", ["upload", "upload_u32"])
@pytest.mark.parametrize("data", [["a", "b"], [[1.0, 2.0], [3.0]], None, "12", {"a": 1},
                                  [1 + 2j]])
def test_upload_of_what_is_not_numbers_is_a_type_error(data, upload, device):
    # numpy's ValueError or TypeError reached the caller; None and "12" were uploaded
    # as [nan] and [12.0]
    dev = zynbook.device(device)
    with pytest.raises(zynbook.ZynMLTypeError) as info:
        getattr(dev, upload)(data)
    assert info.value.message.startswith(f"{upload}(): `data` takes an array or a "
                                         "(rectangular) list of numbers")
