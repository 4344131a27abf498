"""The training half of the compute-device interface (compute-device-trait.rs): the forward
operations, their backward passes, cross-entropy and the AdamW step, called through
`zynbook.device(id)` and as ZynML builtins, each on every device present (the CPU reference
included) and compared with PyTorch's autograd and optimiser on the CPU, in f64, written
here; then a few AdamW steps of a tiny model trained with them against the same model in
torch."""
from __future__ import annotations

import math
import numpy as np
import pytest
import torch

import zynbook
from compute_testing import wanted_devices
from tolerances import assert_close, tolerance

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

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


# ------------------------------------------------------------------ AdamW and training

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n, lr, betas, eps, weight_decay", [
    (1, 1e-3, (0.9, 0.999), 1e-8, 0.01), (77, 0.1, (0.0, 0.0), 1e-6, 0.5),
    (130, 0.05, (0.5, 0.99), 0.0, 0.0), (1025, 0.0, (0.9, 0.95), 1e-8, 0.1)])
def test_adamw_steps_equal_torch(n, lr, betas, eps, weight_decay, device):
    dev = zynbook.device(device)
    p0 = _f32(n)
    param = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW([param], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    p, m, v = dev.upload(p0), dev.alloc(n), dev.alloc(n)
    for step in range(1, 5):
        g = _f32(n) if step != 3 else np.zeros(n, np.float32)     # a step of zero gradient
        param.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        dev.adamw_step(p, dev.upload(g), m, v, lr, *betas, eps, weight_decay, step)
    state = opt.state[param]
    assert_close(_got(dev, p), param.detach().numpy(), "f32", "reduction")
    assert_close(_got(dev, m), state["exp_avg"].numpy(), "f32", "reduction")
    assert_close(_got(dev, v), state["exp_avg_sq"].numpy(), "f32", "reduction")


# a tiny model: embedding, RMSNorm, grouped-query causal attention, an output projection
# and cross-entropy with a pad id among the targets
VOCAB, SEQ, DIM, HEADS, KV_HEADS, HEAD_DIM, PAD = 11, 7, 6, 2, 1, 3, 10


def _tiny_weights():
    return {"table": _f32(VOCAB, DIM), "norm": 1 + _f32(DIM, scale=0.1),
            "wq": _f32(DIM, HEADS * HEAD_DIM, scale=0.5),
            "wk": _f32(DIM, KV_HEADS * HEAD_DIM, scale=0.5),
            "wv": _f32(DIM, KV_HEADS * HEAD_DIM, scale=0.5),
            "wo": _f32(HEADS * HEAD_DIM, VOCAB, scale=0.5)}


def _tiny_loss_torch(w, ids, targets):
    x = w["table"][torch.tensor(ids)]
    h = _rms_norm(x, w["norm"], 1e-5)
    a = _attention(h @ w["wq"], h @ w["wk"], h @ w["wv"], SEQ, HEADS, KV_HEADS, HEAD_DIM)
    return _cross_entropy(a @ w["wo"], targets, PAD)


def _tiny_grads(dev, w, ids, targets):
    """(loss, gradients) of the tiny model by the interface's forward and backward passes."""
    q_dim, kv_dim = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    ids = dev.upload_u32(ids)
    x = dev.embedding(w["table"], ids, SEQ, DIM)
    h = dev.rms_norm(x, w["norm"], SEQ, DIM, 1e-5)
    q = dev.matmul(h, w["wq"], SEQ, DIM, q_dim)
    k = dev.matmul(h, w["wk"], SEQ, DIM, kv_dim)
    v = dev.matmul(h, w["wv"], SEQ, DIM, kv_dim)
    a = dev.causal_attention(q, k, v, SEQ, HEADS, KV_HEADS, HEAD_DIM)
    logits = dev.matmul(a, w["wo"], SEQ, q_dim, VOCAB)
    loss, dlogits = dev.cross_entropy_forward_backward(logits, dev.upload_u32(targets), SEQ,
                                                       VOCAB, PAD)
    grads = {"wo": dev.matmul(dev.transpose_2d(a, SEQ, q_dim), dlogits, q_dim, SEQ, VOCAB)}
    da = dev.matmul(dlogits, dev.transpose_2d(w["wo"], q_dim, VOCAB), SEQ, VOCAB, q_dim)
    dq, dk, dv = dev.causal_attention_backward(da, q, k, v, SEQ, HEADS, KV_HEADS, HEAD_DIM)
    ht = dev.transpose_2d(h, SEQ, DIM)
    dh = dev.alloc(SEQ * DIM)
    for name, d, n in (("wq", dq, q_dim), ("wk", dk, kv_dim), ("wv", dv, kv_dim)):
        grads[name] = dev.matmul(ht, d, DIM, SEQ, n)
        dev.add_assign(dh, dev.matmul(d, dev.transpose_2d(w[name], DIM, n), SEQ, n, DIM))
    dx, grads["norm"] = dev.rms_norm_backward(x, w["norm"], dh, SEQ, DIM, 1e-5)
    grads["table"] = dev.embedding_backward(dx, ids, VOCAB, SEQ, DIM)
    return loss, grads


@pytest.mark.parametrize("device", DEVICES)
def test_tiny_model_trains_as_in_torch(device):
    """Four AdamW steps, each on the summed gradients of two sequences (accumulated with
    zero_buffer and add_assign), against the same model and optimiser in torch."""
    dev = zynbook.device(device)
    init = _tiny_weights()
    batch = [(RNG.integers(0, VOCAB - 1, SEQ), RNG.integers(0, VOCAB - 1, SEQ))
             for _ in range(2)]
    batch[1][1][[0, 4]] = PAD
    tw = {k: _leaf(v) for k, v in init.items()}
    opt = torch.optim.AdamW(tw.values(), lr=0.05, betas=(0.9, 0.98), eps=1e-8,
                            weight_decay=0.1)
    w = {k: dev.upload(v) for k, v in init.items()}
    state = {k: (dev.alloc(v.size), dev.alloc(v.size), dev.alloc(v.size))
             for k, v in init.items()}        # accumulated gradient, m, v
    for step in range(1, 5):
        opt.zero_grad()
        want = sum(_tiny_loss_torch(tw, ids, t) for ids, t in batch)
        want.backward()
        opt.step()
        for acc, _, _ in state.values():
            dev.zero_buffer(acc)
        got = 0.0
        for ids, t in batch:
            loss, grads = _tiny_grads(dev, w, ids, t)
            got += loss
            for name, g in grads.items():
                dev.add_assign(state[name][0], g)
        for name, (acc, m, v) in state.items():
            dev.adamw_step(w[name], acc, m, v, 0.05, 0.9, 0.98, 1e-8, 0.1, step)
        np.testing.assert_allclose(got, want.item(), **tolerance("f32", "contraction"))
    dev.sync()
    for name, t in tw.items():
        assert_close(_got(dev, w[name]), t.detach().numpy().ravel(), "f32", "contraction")


# ------------------------------------------------------------------ zynbook.nn's TinyGPT

def _rope(x, seq, heads, head_dim, base):
    """Interleaved pairs (2p, 2p + 1) of position s turned by s * base^(-2p / head_dim)."""
    x = x.view(seq, heads, head_dim // 2, 2)
    theta = torch.arange(seq, dtype=torch.float64)[:, None] * \
        base ** (-2 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    c, s = torch.cos(theta)[:, None], torch.sin(theta)[:, None]
    a, b = x[..., 0], x[..., 1]
    return torch.stack([a * c - b * s, a * s + b * c], -1).reshape(seq, heads * head_dim)


def _gpt_loss_torch(p, c, ids, targets):
    """The model of zynbook/nn/model.py's docstring: pre-norm blocks of RMSNorm, GQA causal
    attention with RoPE on q and k, a SwiGLU feed-forward network; final norm, lm_head."""
    seq, hd = len(ids), c.dim // c.n_heads
    x = p["embed"][torch.tensor(np.asarray(ids, np.int64))]
    for i in range(c.n_layers):
        w = {k.split(".")[-1]: v for k, v in p.items() if k.startswith(f"layers.{i}.")}
        h = _rms_norm(x, w["attn_norm"], c.eps)
        q = _rope(h @ w["wq"], seq, c.n_heads, hd, c.rope_base)
        k = _rope(h @ w["wk"], seq, c.n_kv_heads, hd, c.rope_base)
        x = x + _attention(q, k, h @ w["wv"], seq, c.n_heads, c.n_kv_heads, hd) @ w["wo"]
        h2 = _rms_norm(x, w["mlp_norm"], c.eps)
        x = x + (torch.nn.functional.silu(h2 @ w["w1"]) * (h2 @ w["w3"])) @ w["w2"]
    logits = _rms_norm(x, p["final_norm"], c.eps) @ p["lm_head"]
    return _cross_entropy(logits, targets, c.pad_id)


@pytest.mark.parametrize("device", DEVICES)
def test_tiny_gpt_train_batch_equals_torch(device):
    """Three train_batch steps (the mean gradient of two sequences, AdamW with no decay on
    the norms) against the same model in torch; the pad id is u32::MAX, outside the
    vocabulary, and some targets are it (TinyGPT refused them as outside the vocabulary)."""
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    c = GPTConfig(vocab=13, dim=12, n_layers=2, n_heads=3, n_kv_heads=1, ffn=10, max_seq=9,
                  lr=0.02, weight_decay=0.1, pad_id=U32_MAX, seed=3)
    host = init_weights(c)
    flat = {"embed": host["embed"], "final_norm": host["final_norm"],
            "lm_head": host["lm_head"]}
    for i, layer in enumerate(host["layers"]):
        flat.update({f"layers.{i}.{k}": v for k, v in layer.items()})
    p = {k: _leaf(v) for k, v in flat.items()}
    opt = torch.optim.AdamW(
        [{"params": [t for k, t in p.items() if not k.endswith("norm")]},
         {"params": [t for k, t in p.items() if k.endswith("norm")], "weight_decay": 0.0}],
        lr=c.lr, betas=c.betas, eps=c.adam_eps, weight_decay=c.weight_decay)
    model = TinyGPT(zynbook.device(device), c)
    for _ in range(3):
        ids = RNG.integers(0, c.vocab, (2, 7))
        targets = RNG.integers(0, c.vocab, (2, 7)).astype(np.int64)
        targets[1, [2, 5]] = U32_MAX
        opt.zero_grad()
        want = sum(_gpt_loss_torch(p, c, i, t) for i, t in zip(ids, targets)) / 2
        want.backward()
        opt.step()
        got = model.train_batch(ids, targets)
        np.testing.assert_allclose(got, want.item(), **tolerance("f32", "contraction"))
    for name, buf in model.params.items():
        assert_close(buf.to_vec(), p[name].detach().numpy().ravel(), "f32", "contraction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mistake, message", [
    (lambda dev, G, T: G(vocab=0), r"`vocab` is a size"),
    (lambda dev, G, T: G(vocab=5.0), r"`vocab` is a size"),
    (lambda dev, G, T: G(vocab=5, pad_id=-100), r"`pad_id` is a token id"),
    (lambda dev, G, T: T(dev, G(vocab=5)).train_step("abc", [1, 2, 3]), r"integer token ids"),
    (lambda dev, G, T: T(dev, G(vocab=5)).train_step([1.0, 2.0], [1, 2]),
     r"integer token ids"),
    (lambda dev, G, T: T(dev, G(vocab=5)).train_batch([[1, 2], [3]], [[1, 2], [3]]),
     r"integer token ids"),
    (lambda dev, G, T: T(dev, G(vocab=5)).generate([1], 2, top_k=6), r"`top_k` is an int"),
    (lambda dev, G, T: T(dev, G(vocab=5)).generate([1], -1), r"`n_new` is a number"),
    (lambda dev, G, T: T(dev, G(vocab=5)).generate([1], 2.0), r"`n_new` is a number"),
    (lambda dev, G, T: T(dev.id, G(vocab=5)), r"takes a device interface"),
    (lambda dev, G, T: T(dev, {"vocab": 5}), r"config is a GPTConfig"),
    (lambda dev, G, T: zynbook.nn.DataParallel([dev.id], {"vocab": 5}),
     r"config is a GPTConfig"),
])
def test_tiny_gpt_mistakes_are_type_errors(mistake, message, device):
    # each was a Python error (TypeError, UFuncTypeError, ValueError, IndexError,
    # AttributeError) or went through: a model of no vocabulary, a negative n_new giving the
    # prompt back
    from zynbook.nn.model import GPTConfig, TinyGPT

    def config(**kw):
        return GPTConfig(**dict(dict(dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn=8,
                                     max_seq=6), **kw))
    with pytest.raises(zynbook.ZynMLTypeError, match=message):
        mistake(zynbook.device(device), config, TinyGPT)


# ------------------------------------------------------------------ as ZynML builtins

_TRAINING_PROGRAM = """
let xb = upload(x)
let w = upload(w0)
let m = alloc(n_in * n_out)
let v = alloc(n_in * n_out)
let targets = upload_u32(t)
var losses = []
for step in 1..4:
    let logits = matmul(xb, w, rows, n_in, n_out)
    let (loss, dlogits) = cross_entropy_forward_backward(logits, targets, rows, n_out, 99)
    let dw = matmul(transpose_2d(xb, rows, n_in), dlogits, n_in, rows, n_out)
    adamw_step(w, dw, m, v, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
               step_t=step)
    losses = losses + [loss]
sync()
[losses, download(w), download(m), download(v)]
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, n_in, n_out", [(8, 4, 3), (77, 5, 130), (1, 1, 1)])
def test_training_program_of_builtins_equals_torch(rows, n_in, n_out, device):
    """The training step of docs/language.md (keyword arguments for AdamW, a pad id among
    the targets) as a ZynML program, against torch's cross_entropy and AdamW."""
    x, w0 = _f32(rows, n_in), _f32(n_in, n_out)
    t = RNG.integers(0, n_out, rows).astype(np.uint32)
    t[::3] = 99
    losses, w, m, v = zynbook.Session(device=device).run(
        _TRAINING_PROGRAM, x=x, w0=w0, t=t, rows=rows, n_in=n_in, n_out=n_out)
    wt = _leaf(w0)
    opt = torch.optim.AdamW([wt], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    want = []
    for _ in range(3):
        opt.zero_grad()
        loss = _cross_entropy(torch.tensor(x, dtype=torch.float64) @ wt, t, 99)
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(np.asarray(losses, np.float64), want,
                               **tolerance("f32", "contraction"))
    state = opt.state[wt]
    for got, ref in ((w, wt), (m, state["exp_avg"]), (v, state["exp_avg_sq"])):
        assert_close(np.asarray(got), ref.detach().numpy().ravel(), "f32", "contraction")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("same", ["m_v", "param_m", "param_v"])
def test_adamw_step_refuses_one_buffer_for_two_states(same, device):
    # m and v given as one buffer silently held v's new values alone (the trait's
    # three `&mut` borrows cannot alias)
    dev = zynbook.device(device)
    p, m, v = dev.upload([1.0, 2.0]), dev.alloc(2), dev.alloc(2)
    args = {"m_v": (p, m, m), "param_m": (p, p, v), "param_v": (p, m, p)}[same]
    with pytest.raises(zynbook.ZynMLTypeError, match="must be three different buffers"):
        dev.adamw_step(args[0], dev.upload([1.0, 1.0]), args[1], args[2], 0.1, 0.9, 0.99,
                       1e-8, 0.0, 1)
    np.testing.assert_array_equal(dev.download(p), [1.0, 2.0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("targets, pad", [([1, 7, 0], 99), ([U32_MAX, 3], 5),
                                          ([2 ** 31 + 1, U32_MAX], U32_MAX)])
def test_cross_entropy_target_past_the_vocabulary_is_named(targets, pad, device):
    # the error was the kernel's index error on its `logits`, a target past 2^31 shown as a
    # negative index
    dev = zynbook.device(device)
    n = len(targets)
    top = max(t for t in targets if t != pad)
    with pytest.raises(zynbook.ZynMLRuntimeError) as info:
        dev.cross_entropy_forward_backward(dev.upload(np.zeros(n * 5)), dev.upload_u32(targets),
                                           n, 5, pad)
    assert info.value.message == (f"cross_entropy_forward_backward(): target {top} is outside "
                                  f"the vocabulary of vocab_size = 5 (and is not pad_id = {pad})")


# ------------------------------------------------------------------ the fused ops' training

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows, cols, p", [(1, 1, 0.0), (3, 77, np.float32(0.3)),
                                           (2, 130, np.float64(0.9))])
def test_softmax_dropout_and_its_backward_equal_torch(rows, cols, p, device):
    """The mask is Philox-4x32-10's word 0 at counter (element, offset, 0, 0), top 24 bits
    scaled by 2^-24, kept where >= p (the fused-op library's text); a numpy float p is
    a probability like a Python one (np.float32 was refused as outside [0, 1))."""
    from zynbook.nn.fused import philox_reference
    dev = zynbook.device(device)
    seed, offset = 12345678901, 7
    x, g = _f32(rows, cols), _f32(rows, cols)
    words = [philox_reference([e, offset, 0, 0], [seed & 0xFFFFFFFF, seed >> 32])[0]
             for e in range(rows * cols)]
    keep = (np.array(words) >> 8) * 2.0 ** -24 >= float(p)
    mask = torch.tensor(keep.reshape(rows, cols), dtype=torch.float64)
    xt = _leaf(x)
    y = torch.softmax(xt, -1) * mask / (1 - float(p))
    y.backward(torch.tensor(g, dtype=torch.float64))
    out = dev.softmax_dropout(dev.upload(x), rows, cols, p, seed, offset)
    dx = dev.softmax_dropout_backward(dev.upload(x), dev.upload(g), rows, cols, p, seed, offset)
    assert_close(_got(dev, out), y.detach().numpy().ravel(), "f32", "reduction")
    assert_close(_got(dev, dx), xt.grad.numpy().ravel(), "f32", "reduction")


# ------------------------------------------------------------------ safetensors weights

def _safetensors(path, header, data):
    import json
    import struct
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize("entry, nbytes, why", [
    ({"dtype": "F32", "shape": [1], "data_offsets": [0, 6]}, 8, "holds 6 bytes"),
    ({"dtype": "BF16", "shape": [2], "data_offsets": [0, 3]}, 4, "holds 3 bytes"),
    ({"dtype": "F16", "shape": [3], "data_offsets": [0, 4]}, 4, "holds 4 bytes"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, "x"]}, 8, "lacks dtype"),
    ({"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}, 8, "lacks dtype"),
    ({"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}, 8, "lacks dtype"),
])
def test_a_damaged_weights_file_is_a_runtime_error(tmp_path, entry, nbytes, why):
    # byte counts that do not fit the dtype, offsets that are not numbers and negative
    # dimensions were numpy's ValueError or a TypeError
    path = _safetensors(tmp_path / "w.safetensors", {"w": entry}, bytes(nbytes))
    with pytest.raises(zynbook.ZynMLRuntimeError, match=f"is not a safetensors file: .*{why}"):
        zynbook.load_weights(path)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_and_f16_weights_train_as_torch_reads_them(tmp_path, device):
    """BF16 and F16 tensors of a safetensors file (the bits torch writes) load as their
    values, and one AdamW step on them equals torch's on the same values."""
    w16 = torch.tensor(_f32(3, 5), dtype=torch.bfloat16)
    h16 = torch.tensor(_f32(7), dtype=torch.float16)
    data = w16.view(torch.int16).numpy().tobytes() + h16.numpy().tobytes()
    path = _safetensors(tmp_path / "w.safetensors",
                        {"w": {"dtype": "BF16", "shape": [3, 5], "data_offsets": [0, 30]},
                         "h": {"dtype": "F16", "shape": [7], "data_offsets": [30, 44]}}, data)
    weights = zynbook.load_weights(path)
    dev = zynbook.device(device)
    for name, t in (("w", w16), ("h", h16)):
        value = t.double()
        np.testing.assert_array_equal(weights[name].numpy().astype(np.float64), value.numpy())
        g = _f32(*t.shape)
        param = value.clone().requires_grad_(True)
        param.grad = torch.tensor(g, dtype=torch.float64)
        torch.optim.AdamW([param], lr=0.01).step()
        p, m, v = dev.upload(weights[name].numpy()), dev.alloc(t.numel()), dev.alloc(t.numel())
        dev.adamw_step(p, dev.upload(g), m, v, 0.01, 0.9, 0.999, 1e-8, 0.01, 1)
        assert_close(_got(dev, p), param.detach().numpy().ravel(), "f32", "reduction")


# ------------------------------------------------------------------ elementwise and reduce_sum

@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_takes_numpy_numbers_and_abs(device):
    # np.float32(2.5) was refused as "not float32"; abs(x) was Python's TypeError, though
    # abs is among elementwise's functions
    from zynbook.nn import expr as E
    dev = zynbook.device(device)
    x, y = _f32(130), _f32(130)
    got = dev.elementwise([dev.upload(x), dev.upload(y)], 130,
                          lambda xs: abs(xs[0]) * np.float32(2.5) + E.maximum(xs[1], np.int64(0)))
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    assert_close(_got(dev, got), np.abs(xd) * 2.5 + np.maximum(yd, 0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("call, message", [
    (lambda d, b: d.elementwise([b], 6, lambda xs: xs[0] % 2.0), "no `%`, `//` or `@`"),
    (lambda d, b: d.elementwise([b], 6, lambda xs: xs[0] @ xs[0]), "no `%`, `//` or `@`"),
    (lambda d, b: d.elementwise([b], 6, lambda xs: math.exp(xs[0])), "not a number while"),
    (lambda d, b: d.elementwise(None, 6, lambda xs: 1.0), "`inputs` is a list of buffers"),
    (lambda d, b: d.elementwise([b], 6, 3.0), "`f` is a function"),
    (lambda d, b: d.reduce_sum(b, 6, 0), "`shape` is a list of sizes"),
    (lambda d, b: d.reduce_sum(b, [2, 3], 1.0), "`axis` is an int"),
])
def test_elementwise_and_reduce_sum_mistakes_are_type_errors(call, message, device):
    # each was a Python TypeError (reduce_sum's float axis a shape error saying
    # "axis 1.0 is outside a shape of 2 axes")
    dev = zynbook.device(device)
    with pytest.raises(zynbook.ZynMLTypeError, match=message):
        call(dev, dev.upload(np.ones(6)))
