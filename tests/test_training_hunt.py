"""Training on every device, at the edges the other training tests leave: the device
interface's losses, gradients and AdamW steps, checked against torch's autograd and
torch.optim.AdamW written here (f64 on the CPU unless said)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]
RNG = np.random.default_rng(20261129)


def _f32(*shape, scale=1.0, offset=0.0):
    return (RNG.standard_normal(shape) * scale + offset).astype(np.float32)


def _leaf(a):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [3e4, -1e6])
def test_cross_entropy_loss_of_large_logits_keeps_the_log_sum(offset, device):
    # the loss of a row is (max - logit[target]) + log(sum): max + log(sum) first rounded
    # log(sum) away where the logits are large (torch's f32 loss keeps it)
    n, v = 7, 13
    logits = _f32(n, v, scale=2.0, offset=offset)
    targets = RNG.integers(0, v, n).astype(np.uint32)
    targets[2] = 99
    lt = _leaf(logits)
    keep = torch.tensor(targets.astype(np.int64)) != 99
    want = torch.nn.functional.cross_entropy(lt[keep], torch.tensor(targets[keep.numpy()]
                                                                   .astype(np.int64)))
    want.backward()
    dev = zynbook.device(device)
    loss, grad = dev.cross_entropy_forward_backward(dev.upload(logits), dev.upload_u32(targets),
                                                    n, v, 99)
    assert abs(loss - want.item()) <= 1e-5 * abs(want.item())
    np.testing.assert_allclose(dev.download(grad).reshape(n, v), lt.grad.numpy(), rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_power_of_signed_zero_and_negative_bases_equals_numpy(device):
    # 1 / x written x ** -1 (a gradient of log |x|): -0 to an odd negative power is -inf,
    # as numpy's (C's) pow; WebGPU gave +inf
    from zynbook.nn import expr as E
    x = np.array([-0.0, 0.0, -0.0, -2.0, -0.5, 3.0, -0.0], np.float32)
    b = np.array([-1.0, -1.0, -2.0, -3.0, 3.0, -1.0, 3.0], np.float32)
    dev = zynbook.device(device)
    got = dev.download(dev.elementwise([dev.upload(x), dev.upload(b)], len(x),
                                       lambda v: E.pow(v[0], v[1])))
    with np.errstate(divide="ignore"):
        want = np.power(x, b)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (np.signbit(got) == np.signbit(want)).all(), (got, want)


# ------------------------------------------------------------------ backward passes in ZynML
# gradients a user writes as compute blocks, at odd sizes, against torch's autograd: each
# case is (source, inputs, the torch function of the inputs named in `wrt`, its upstream
# gradient's name, the input whose gradient the program computes)

def _grad_of(fn, inputs, wrt, upstream):
    leaves = {k: _leaf(v) for k, v in inputs.items() if k != upstream}
    fn(leaves).backward(torch.tensor(np.asarray(inputs[upstream], np.float64)))
    return leaves[wrt].grad.numpy()


_C, _H, _W, _O = 3, 13, 11, 5                      # conv2d: stride 2, padding 1, 3 x 3
_OH, _OW = (_H - 1) // 2 + 1, (_W - 1) // 2 + 1
_CONV = dict(x=_f32(1, _C, _H, _W), w=_f32(_O, _C, 3, 3), g=_f32(1, _O, _OH, _OW))


def _conv(t):
    return torch.nn.functional.conv2d(t["x"], t["w"], stride=2, padding=1)


BACKWARD = {
    # y = a b: da = g b^T over batch dims, db = sum over the batch of a^T g
    "matmul da": ("""let y = compute(g, b) {
    for n in 0..batch, i in 0..m, k in 0..kk:
        var s = 0.0
        for j in 0..cols:
            s += g[n, i, j] * b[k, j]
        out[n, i, k] = s
}
y
""", dict(a=_f32(3, 33, 13), b=_f32(13, 7), g=_f32(3, 33, 7)),
        lambda t: t["a"] @ t["b"], "g", "a"),
    "matmul db": ("""let y = compute(a, g) {
    for k in 0..kk, j in 0..cols:
        var s = 0.0
        for n in 0..batch, i in 0..m:
            s += a[n, i, k] * g[n, i, j]
        out[k, j] = s
}
y
""", dict(a=_f32(3, 33, 13), b=_f32(13, 7), g=_f32(3, 33, 7)),
        lambda t: t["a"] @ t["b"], "g", "b"),
    # a bias broadcast over rows: its gradient accumulated into out across every row
    "broadcast bias": ("""let y = compute(g) {
    for n in 0..batch, i in 0..m, j in 0..cols:
        out[j] += g[n, i, j]
}
y
""", dict(x=_f32(3, 13, 33), bias=_f32(33), g=_f32(3, 13, 33)),
        lambda t: t["x"] + t["bias"], "g", "bias"),
    "log_softmax": ("""let y = compute(x, g) {
    @kernel fused
    for r in 0..rows:
        var m = -inf
        for c in 0..n:
            m = max(m, x[r, c])
        var s = 0.0
        var gs = 0.0
        for c in 0..n:
            s += exp(x[r, c] - m)
            gs += g[r, c]
        for c in 0..n:
            out[r, c] = g[r, c] - exp(x[r, c] - m) / s * gs
}
y
""", dict(x=_f32(13, 33, scale=3.0), g=_f32(13, 33)),
        lambda t: torch.log_softmax(t["x"], -1), "g", "x"),
    "layer_norm": ("""let y = compute(x, gamma, g) {
    @kernel fused
    for r in 0..rows:
        var mean = 0.0
        for i in 0..n:
            mean += x[r, i]
        mean /= n
        var v = 0.0
        for i in 0..n:
            v += (x[r, i] - mean) * (x[r, i] - mean)
        let inv = rsqrt(v / n + 0.00001)
        var a = 0.0
        var b = 0.0
        for i in 0..n:
            a += g[r, i] * gamma[i]
            b += g[r, i] * gamma[i] * (x[r, i] - mean) * inv
        for i in 0..n:
            out[r, i] = inv * (g[r, i] * gamma[i] - a / n - (x[r, i] - mean) * inv * b / n)
}
y
""", dict(x=_f32(7, 33, offset=20.0), gamma=_f32(33), beta=_f32(33), g=_f32(7, 33)),
        lambda t: torch.nn.functional.layer_norm(t["x"], (33,), t["gamma"], t["beta"], 1e-5),
        "g", "x"),
    "gelu tanh": ("""let y = compute(x, g) {
    @kernel elementwise
    for i in 0..r, j in 0..c:
        let v = x[i, j]
        let t = tanh(0.7978845608 * (v + 0.044715 * v * v * v))
        out[i, j] = g[i, j] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * 0.7978845608 * (1.0 + 0.134145 * v * v))
}
y
""", dict(x=_f32(7, 13, scale=3.0), g=_f32(7, 13)),
        lambda t: torch.nn.functional.gelu(t["x"], approximate="tanh"), "g", "x"),
    "conv2d dw": ("""let y = compute(x, g) {
    for o in 0..oc, c in 0..ic, kh in 0..3, kw in 0..3:
        var s = 0.0
        for oh in 0..OH, ow in 0..OW:
            let h = oh * 2 + kh - 1
            let w = ow * 2 + kw - 1
            if h >= 0 and h < H and w >= 0 and w < W:
                s += x[0, c, h, w] * g[0, o, oh, ow]
        out[o, c, kh, kw] = s
}
y
""", _CONV, _conv, "g", "w"),
    # the input's gradient scattered from every output position it fed
    "conv2d dx": ("""let y = compute(g, w) {
    for c in 0..ic, o in 0..oc, oh in 0..OH, ow in 0..OW, kh in 0..3, kw in 0..3:
        let h = oh * 2 + kh - 1
        let x = ow * 2 + kw - 1
        if h >= 0 and h < H and x >= 0 and x < W:
            out[0, c, h, x] += g[0, o, oh, ow] * w[o, c, kh, kw]
}
y
""", _CONV, _conv, "g", "x"),
}
_SIZES = {"conv2d dw": dict(oc=_O, ic=_C, H=_H, W=_W), "conv2d dx": dict(ic=_C, H=_H, W=_W)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_written_in_zynml_equals_torch_autograd(name, device):
    source, inputs, fn, upstream, wrt = BACKWARD[name]
    want = _grad_of(fn, inputs, wrt, upstream)
    got = zynbook.run(source, device=device, **inputs, **_SIZES.get(name, {}))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4,
                               atol=1e-4 * max(1.0, np.abs(want).max()))


def _half(a, dtype):
    a = np.asarray(a, np.float32)
    return a.astype(np.float16) if dtype == "f16" else torch.tensor(a).to(torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("name", ["matmul db", "log_softmax", "layer_norm", "conv2d dx"])
def test_half_precision_backward_equals_torch_on_the_rounded_inputs(name, dtype, device):
    source, inputs, fn, upstream, wrt = BACKWARD[name]
    halves = {k: _half(v, dtype) for k, v in inputs.items()}
    want = _grad_of(fn, {k: np.asarray(v.float() if torch.is_tensor(v) else v, np.float64)
                         for k, v in halves.items()}, wrt, upstream)
    got = zynbook.run(source, device=device, **halves, **_SIZES.get(name, {}))
    assert got.dtype == dtype
    err = np.abs(np.asarray(got.numpy(), np.float64) - want).max()
    assert err <= (1e-2 if dtype == "f16" else 4e-2) * max(1.0, np.abs(want).max()), err


# ------------------------------------------------------------------ a model trained in ZynML

MLP_PROGRAM = """pipeline relu_grad(xs):
    return where(xs[1] > 0.0, xs[0], 0.0)
pipeline relu_f(xs):
    return relu(xs[0])
let w1 = upload(W1)
let b1 = upload(B1)
let w2 = upload(W2)
let params = [w1, b1, w2]
let ms = [alloc(len(w1)), alloc(len(b1)), alloc(len(w2))]
let vs = [alloc(len(w1)), alloc(len(b1)), alloc(len(w2))]
let accs = [alloc(len(w1)), alloc(len(b1)), alloc(len(w2))]
var losses = []
for step in 1..steps + 1:
    for a in accs:
        zero_buffer(a)
    var total = 0.0
    for mb in 0..2:
        let x = upload(X[mb])
        let pre = bias_add(matmul(x, w1, nb, ni, nh), b1, nb * nh, nh)
        let h = elementwise([pre], nb * nh, relu_f)
        let logits = matmul(h, w2, nb, nh, no)
        let (loss, dl) = cross_entropy_forward_backward(logits, upload_u32(Y[mb]), nb, no, pad)
        total = total + loss
        let dh = matmul(dl, transpose_2d(w2, nh, no), nb, no, nh)
        let dpre = elementwise([dh, pre], nb * nh, relu_grad)
        add_assign(accs[0], matmul(transpose_2d(x, nb, ni), dpre, ni, nb, nh))
        add_assign(accs[1], reduce_sum(dpre, [nb, nh], 0))
        add_assign(accs[2], matmul(transpose_2d(h, nb, nh), dl, nh, nb, no))
    // cosine decay of the learning rate over the steps
    let lr = 0.05 * 0.5 * (1.0 + cos(3.141592653589793 * (step - 1) / steps))
    for p in 0..3:
        adamw_step(params[p], accs[p], ms[p], vs[p], lr, 0.9, 0.98, 1e-6, 0.1, step)
    losses = losses + [total / 2.0]
[losses, download(w1), download(b1), download(w2)]
"""


@pytest.mark.parametrize("device", DEVICES)
def test_mlp_trained_in_zynml_with_accumulation_and_a_schedule_equals_torch(device):
    """Two micro-batches (a padded target among them) accumulated per step, AdamW with weight
    decay and a cosine learning-rate schedule, against torch.optim.AdamW and LambdaLR."""
    import math
    nb, ni, nh, no, steps, pad = 13, 7, 33, 5, 4, 7
    x = _f32(2, nb, ni)
    y = RNG.integers(0, no, (2, nb)).astype(np.uint32)
    y[0, 3] = pad
    init = [_f32(ni, nh, scale=0.4), _f32(nh, scale=0.1), _f32(nh, no, scale=0.3)]
    tw = [_leaf(a) for a in init]
    opt = torch.optim.AdamW(tw, lr=0.05, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    want = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for mb in range(2):
            h = torch.relu(torch.tensor(x[mb], dtype=torch.float64) @ tw[0] + tw[1])
            t = torch.tensor(y[mb].astype(np.int64))
            loss = torch.nn.functional.cross_entropy(h @ tw[2], t, ignore_index=pad)
            loss.backward()
            total += loss.item()
        opt.step()
        sched.step()
        want.append(total / 2)
    losses, *weights = zynbook.run(MLP_PROGRAM, device=device, W1=init[0], B1=init[1],
                                   W2=init[2], X=x, Y=y, steps=steps, nb=nb, ni=ni, nh=nh,
                                   no=no, pad=pad)
    np.testing.assert_allclose(np.asarray(losses, np.float64), want, rtol=1e-5)
    for got, t in zip(weights, tw):
        np.testing.assert_allclose(np.asarray(got, np.float64), t.detach().numpy().ravel(),
                                   rtol=1e-4, atol=1e-5)


def _attention_ref(q, k, v, start, heads, kv_heads, head_dim):
    """Grouped-query attention of q [q_len, heads * head_dim] over k and v [start + q_len,
    kv_heads * head_dim], query i seeing keys 0..start + i."""
    q_len, total, group = len(q), len(k), heads // kv_heads
    qh = q.view(q_len, heads, head_dim).transpose(0, 1)
    kh = k.view(total, kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, 0)
    vh = v.view(total, kv_heads, head_dim).transpose(0, 1).repeat_interleave(group, 0)
    scores = qh @ kh.transpose(1, 2) / head_dim ** 0.5
    future = torch.arange(total)[None, :] > start + torch.arange(q_len)[:, None]
    p = torch.softmax(scores.masked_fill(future, float("-inf")), -1)
    return (p @ vh).transpose(0, 1).reshape(q_len, heads * head_dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("start, q_len, heads, kv_heads, head_dim",
                         [(0, 20, 2, 1, 64), (7, 13, 2, 2, 33), (12, 1, 6, 3, 4)])
def test_attention_and_its_backward_of_wide_heads_equal_torch(start, q_len, heads, kv_heads,
                                                              head_dim, device):
    # a thread computed every score again for each of head_dim outputs: seq_k * head_dim^2
    # steps, past llvmpipe's loop budget (vulkan:0, gl:0) from 16 keys of 64 dimensions
    total = start + q_len
    q, g = _f32(q_len, heads * head_dim), _f32(q_len, heads * head_dim)
    k, v = _f32(total, kv_heads * head_dim), _f32(total, kv_heads * head_dim)
    lq, lk, lv = _leaf(q), _leaf(k), _leaf(v)
    want = _attention_ref(lq, lk, lv, start, heads, kv_heads, head_dim)
    want.backward(torch.tensor(g, dtype=torch.float64))
    dev = zynbook.device(device)
    bq, bk, bv = dev.upload(q), dev.upload(k), dev.upload(v)
    got = dev.kv_attention(bq, bk, bv, start, q_len, heads, kv_heads, head_dim)
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dev.download(got), want.detach().numpy().ravel(), **tol)
    cap = total + 3     # the fixed-capacity cache: rows past the filled ones are not read
    pad = np.full((3, kv_heads * head_dim), 1e3, np.float32)
    fixed = dev.kv_attention_fixed(bq, dev.upload(np.concatenate([k, pad])),
                                   dev.upload(np.concatenate([v, pad])), start, q_len, cap,
                                   heads, kv_heads, head_dim)
    np.testing.assert_allclose(dev.download(fixed), want.detach().numpy().ravel(), **tol)
    if start == 0:
        grads = dev.causal_attention_backward(dev.upload(g), bq, bk, bv, q_len, heads,
                                              kv_heads, head_dim)
        for b, leaf in zip(grads, (lq, lk, lv)):
            np.testing.assert_allclose(dev.download(b), leaf.grad.numpy().ravel(), **tol)
