"""The compute-device interface (zynbook.nn.Device): every operation, forward and backward,
equals PyTorch autograd on the CPU (f32, odd sizes, grouped-query ratios 1, 2 and 4, pad
positions, cache_start 0 and > 0), and every other device present gives the CPU's result.
Shape mistakes are ZynML errors naming both sizes."""
from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pytest

import zynbook
from zynbook import nn
from zynbook.errors import (ZynMLDeviceError, ZynMLError, ZynMLRuntimeError, ZynMLShapeError,
                            ZynMLTypeError)

from compute_testing import wanted_devices
from tolerances import assert_within

torch = pytest.importorskip("torch")

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
OTHER_DEVICES = [d["id"] for d in zynbook.compute_devices()
                 if d["id"] != "cpu" and not d["id"].startswith("gl:")
                 and (not _WANTED or d["id"] in _WANTED.split(","))]

TOL = {"rtol": 2e-4, "atol": 2e-5}


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def T(a, grad=False):
    return torch.tensor(np.asarray(a, np.float32), dtype=torch.float32, requires_grad=grad)


def attention_ref(q, k, v, n_heads, n_kv, head_dim, start=0):
    """[q_len, H*D] attention of torch tensors over [start + q_len, KV*D] keys."""
    s_q, s_k = q.shape[0], k.shape[0]
    g = n_heads // n_kv
    qh = q.reshape(s_q, n_heads, head_dim).transpose(0, 1)
    kh = k.reshape(s_k, n_kv, head_dim).transpose(0, 1).repeat_interleave(g, 0)
    vh = v.reshape(s_k, n_kv, head_dim).transpose(0, 1).repeat_interleave(g, 0)
    scores = qh @ kh.transpose(1, 2) / math.sqrt(head_dim)
    allowed = torch.arange(s_k)[None, :] <= (start + torch.arange(s_q))[:, None]
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, -1) @ vh).transpose(0, 1).reshape(s_q, n_heads * head_dim)


# ---------------------------------------------------------------- the cases
# each case: (run on a device -> list of arrays, PyTorch reference -> list of arrays)

def case_matmul(rng):
    a, b = rand(rng, 5, 7), rand(rng, 7, 3)
    return (lambda d: [d.download(d.matmul(d.upload(a), d.upload(b), 5, 7, 3))],
            lambda: [(T(a) @ T(b)).numpy().ravel()])


def case_softmax(rng):
    x = rand(rng, 3, 11, scale=3.0)
    return (lambda d: [d.download(d.softmax(d.upload(x), 3, 11))],
            lambda: [torch.softmax(T(x), -1).numpy().ravel()])


def case_rms_norm(rng):
    x, w = rand(rng, 4, 9), rand(rng, 9)
    ref = lambda: [torch.nn.functional.rms_norm(T(x), (9,), T(w), 1e-5).numpy().ravel()]
    return (lambda d: [d.download(d.rms_norm(d.upload(x), d.upload(w), 4, 9, 1e-5))], ref)


def case_embedding(rng):
    w, ids = rand(rng, 7, 5), np.array([3, 0, 6, 3, 1], np.uint32)
    return (lambda d: [d.download(d.embedding(d.upload(w), d.upload_u32(ids), 5, 5))],
            lambda: [torch.nn.functional.embedding(torch.tensor(ids.astype(np.int64)),
                                                   T(w)).numpy().ravel()])


def case_reduce_sum(axis):
    def make(rng):
        x = rand(rng, 3, 5, 2)
        return (lambda d: [d.download(d.reduce_sum(d.upload(x), [3, 5, 2], axis))],
                lambda: [T(x).sum(axis).numpy().ravel()])
    return make


def case_transpose(rng):
    x = rand(rng, 3, 7)
    return (lambda d: [d.download(d.transpose_2d(d.upload(x), 3, 7))],
            lambda: [x.T.ravel()])


def case_attention(ratio, seq=7, head_dim=5, n_kv=1):
    n_heads = n_kv * ratio

    def make(rng):
        q = rand(rng, seq, n_heads * head_dim)
        k, v = rand(rng, seq, n_kv * head_dim), rand(rng, seq, n_kv * head_dim)
        return (lambda d: [d.download(d.causal_attention(
                    d.upload(q), d.upload(k), d.upload(v), seq, n_heads, n_kv, head_dim))],
                lambda: [attention_ref(T(q), T(k), T(v), n_heads, n_kv, head_dim)
                         .detach().numpy().ravel()])
    return make


def case_kv_attention(cache_start, q_len, ratio=2, n_kv=2, head_dim=3):
    n_heads = n_kv * ratio

    def make(rng):
        total = cache_start + q_len
        q = rand(rng, q_len, n_heads * head_dim)
        k, v = rand(rng, total, n_kv * head_dim), rand(rng, total, n_kv * head_dim)
        return (lambda d: [d.download(d.kv_attention(
                    d.upload(q), d.upload(k), d.upload(v), cache_start, q_len, n_heads, n_kv,
                    head_dim))],
                lambda: [attention_ref(T(q), T(k), T(v), n_heads, n_kv, head_dim, cache_start)
                         .detach().numpy().ravel()])
    return make


def case_softmax_backward(rng):
    x, g = rand(rng, 3, 7, scale=2.0), rand(rng, 3, 7)

    def ref():
        xt = T(x, True)
        torch.softmax(xt, -1).backward(T(g))
        return [xt.grad.numpy().ravel()]

    def run(d):
        sm = d.softmax(d.upload(x), 3, 7)
        return [d.download(d.softmax_backward(sm, d.upload(g), 3, 7))]
    return run, ref


def case_rms_norm_backward(rng):
    x, w, g = rand(rng, 5, 9), rand(rng, 9), rand(rng, 5, 9)

    def ref():
        xt, wt = T(x, True), T(w, True)
        torch.nn.functional.rms_norm(xt, (9,), wt, 1e-5).backward(T(g))
        return [xt.grad.numpy().ravel(), wt.grad.numpy()]

    def run(d):
        dx, dw = d.rms_norm_backward(d.upload(x), d.upload(w), d.upload(g), 5, 9, 1e-5)
        return [d.download(dx), d.download(dw)]
    return run, ref


def case_embedding_backward(rng):
    ids, g = np.array([2, 5, 2, 0, 2, 4], np.uint32), rand(rng, 6, 3)

    def ref():
        wt = T(np.zeros((7, 3)), True)
        torch.nn.functional.embedding(torch.tensor(ids.astype(np.int64)), wt).backward(T(g))
        return [wt.grad.numpy().ravel()]
    return (lambda d: [d.download(d.embedding_backward(d.upload(g), d.upload_u32(ids), 7, 6, 3))],
            ref)


def case_attention_backward(ratio, seq=6, head_dim=4, n_kv=1):
    n_heads = n_kv * ratio

    def make(rng):
        q = rand(rng, seq, n_heads * head_dim)
        k, v = rand(rng, seq, n_kv * head_dim), rand(rng, seq, n_kv * head_dim)
        g = rand(rng, seq, n_heads * head_dim)

        def ref():
            qt, kt, vt = T(q, True), T(k, True), T(v, True)
            attention_ref(qt, kt, vt, n_heads, n_kv, head_dim).backward(T(g))
            return [t.grad.numpy().ravel() for t in (qt, kt, vt)]

        def run(d):
            out = d.causal_attention_backward(d.upload(g), d.upload(q), d.upload(k),
                                              d.upload(v), seq, n_heads, n_kv, head_dim)
            return [d.download(b) for b in out]
        return run, ref
    return make


def case_cross_entropy(rng):
    logits = rand(rng, 6, 9, scale=2.0)
    targets = np.array([3, 0, 8, 0, 5, 1], np.uint32)      # pad_id 0 at positions 1 and 3

    def ref():
        lt = T(logits, True)
        loss = torch.nn.functional.cross_entropy(lt, torch.tensor(targets.astype(np.int64)),
                                                 ignore_index=0)
        loss.backward()
        return [np.array([loss.item()], np.float32), lt.grad.numpy().ravel()]

    def run(d):
        loss, grad = d.cross_entropy_forward_backward(d.upload(logits), d.upload_u32(targets),
                                                      6, 9, 0)
        return [np.array([loss], np.float32), d.download(grad)]
    return run, ref


def case_small_ops(rng):
    a, b, bias = rand(rng, 4, 3), rand(rng, 4, 3), rand(rng, 3)

    def run(d):
        x = d.upload(a)
        c = d.copy_buffer(x)
        d.add_assign(c, d.upload(b))
        z = d.upload(b)
        d.zero_buffer(z)
        fresh = d.alloc(5)
        d.sync()
        return [d.download(x), d.download(c), d.download(d.bias_add(x, d.upload(bias), 12, 3)),
                d.download(z), d.download(fresh)]
    return run, lambda: [a.ravel(), (a + b).ravel(), (a + bias).ravel(), np.zeros(12),
                         np.zeros(5)]


def case_adamw(rng):
    p0, grads = rand(rng, 11), [rand(rng, 11) for _ in range(3)]
    hp = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    def ref():
        pt = T(p0, True)
        opt = torch.optim.AdamW([pt], **hp)
        for g in grads:
            pt.grad = T(g)
            opt.step()
        st = opt.state[pt]
        return [pt.detach().numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy()]

    def run(d):
        p, m, v = d.upload(p0), d.alloc(11), d.alloc(11)
        for t, g in enumerate(grads, 1):
            d.adamw_step(p, d.upload(g), m, v, 1e-2, 0.9, 0.95, 1e-8, 0.1, t)
        return [d.download(p), d.download(m), d.download(v)]
    return run, ref


def case_elementwise(rng):
    a, b = rand(rng, 13), rand(rng, 13)
    E = nn.expr

    def f(xs):
        x, y = xs
        s = E.sigmoid(x) * y
        return E.where(x > 0.0, s * s, E.tanh(y) - 1.5) + E.maximum(x, y) / (1.0 + E.exp(-y))

    def ref():
        x, y = T(a), T(b)
        s = torch.sigmoid(x) * y
        return [(torch.where(x > 0, s * s, torch.tanh(y) - 1.5) +
                 torch.maximum(x, y) / (1 + torch.exp(-y))).numpy()]
    return (lambda d: [d.download(d.elementwise([d.upload(a), d.upload(b)], 13, f))], ref)


CASES = {
    "matmul": case_matmul, "softmax": case_softmax, "rms_norm": case_rms_norm,
    "embedding": case_embedding, "reduce_sum axis 0": case_reduce_sum(0),
    "reduce_sum axis 1": case_reduce_sum(1), "reduce_sum axis 2": case_reduce_sum(2),
    "transpose_2d": case_transpose,
    "causal_attention gqa 1": case_attention(1, n_kv=2),
    "causal_attention gqa 2": case_attention(2, n_kv=2),
    "causal_attention gqa 4": case_attention(4, n_kv=1),
    "kv_attention prefill cache_start 0": case_kv_attention(0, 5),
    "kv_attention prefill cache_start 3": case_kv_attention(3, 4),
    "kv_attention decode cache_start 6": case_kv_attention(6, 1, ratio=4, n_kv=1),
    "softmax_backward": case_softmax_backward, "rms_norm_backward": case_rms_norm_backward,
    "embedding_backward": case_embedding_backward,
    "causal_attention_backward gqa 1": case_attention_backward(1, n_kv=2),
    "causal_attention_backward gqa 2": case_attention_backward(2, n_kv=2),
    "causal_attention_backward gqa 4": case_attention_backward(4, n_kv=1),
    "cross_entropy pad positions": case_cross_entropy,
    "copy add_assign zero_buffer bias_add alloc sync": case_small_ops,
    "adamw_step 3 steps": case_adamw, "elementwise traced": case_elementwise,
}
# the cases every other device runs (one of each kernel; the CPU runs every variant)
ON_EVERY_DEVICE = [name for name in CASES if not name.endswith(("gqa 1", "gqa 4", "axis 0",
                                                                "axis 2", "cache_start 0"))]


def _case(name):
    return CASES[name](np.random.default_rng(zlib.crc32(name.encode())))


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_equals_pytorch_autograd(name):
    run, ref = _case(name)
    got, want = run(nn.device("cpu")), ref()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == np.asarray(w).ravel().shape
        assert_within(g, np.asarray(w).ravel(), **TOL)


@pytest.mark.parametrize("device_id", OTHER_DEVICES)
@pytest.mark.parametrize("name", ON_EVERY_DEVICE)
def test_every_device_equals_cpu(name, device_id):
    run, _ref = _case(name)
    want = run(nn.device("cpu"))
    got = run(nn.device(device_id))
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert_within(g, w, rtol=1e-4, atol=1e-5)


def test_buffers_stay_on_their_device():
    for device_id in ["cpu"] + OTHER_DEVICES[:1]:
        d = nn.device(device_id)
        b = d.matmul(d.upload(np.ones(6)), d.upload(np.ones(6)), 2, 3, 2)
        assert b.device == d.backend.id and len(b) == 4 and not b.is_empty()
        np.testing.assert_array_equal(b.to_vec(), np.full(4, 3.0, np.float32))


# ---------------------------------------------------------------- mistakes

def test_wrong_lengths_are_shape_errors_naming_both_sizes():
    d = nn.device("cpu")
    a = d.upload(np.zeros(12))
    with pytest.raises(ZynMLShapeError) as e:
        d.matmul(a, d.upload(np.zeros(20)), 3, 4, 4)
    assert "has 20 elements" in e.value.message and "16" in e.value.message
    with pytest.raises(ZynMLShapeError, match=r"has 12 elements but n_rows \* row_len = 5 \* 2 = 10"):
        d.softmax(a, 5, 2)
    with pytest.raises(ZynMLShapeError, match="n_kv_heads = 3 does not divide n_heads = 4"):
        d.causal_attention(a, a, a, 1, 4, 3, 3)
    with pytest.raises(ZynMLShapeError, match=r"`k_cache` has 12 elements but"):
        d.kv_attention(d.upload(np.zeros(4)), a, a, 5, 1, 2, 2, 2)
    with pytest.raises(ZynMLShapeError, match="`src` has 5 elements but len"):
        d.add_assign(a, d.upload(np.zeros(5)))
    with pytest.raises(ZynMLShapeError, match="`grad` has 3 elements"):
        d.adamw_step(a, d.upload(np.zeros(3)), d.alloc(12), d.alloc(12), 0.1, 0.9, 0.99,
                     1e-8, 0.0, 1)
    with pytest.raises(ZynMLShapeError, match="`inputs\\[1\\]` has 4 elements but numel = 12"):
        d.elementwise([a, d.upload(np.zeros(4))], 12, lambda xs: xs[0] + xs[1])


@pytest.mark.parametrize("device_id", wanted_devices())
@pytest.mark.parametrize("numel,dim", [(12, 5), (7, 3), (2, 5), (12, 4)])
def test_bias_add_takes_any_numel(device_id, numel, dim):
    """out[i] = matrix[i] + bias[i % dim] for every i in 0..numel, as the spec writes it,
    also where numel is not a multiple of dim (it was a shape error on every device)."""
    rng = np.random.default_rng(numel * 10 + dim)
    m, b = rand(rng, numel), rand(rng, dim)
    d = nn.device(device_id)
    got = d.download(d.bias_add(d.upload(m), d.upload(b), numel, dim))
    np.testing.assert_allclose(got, m + b[np.arange(numel) % dim], rtol=1e-6, atol=1e-6)


def test_other_mistakes_are_zynml_errors():
    d = nn.device("cpu")
    a = d.upload(np.zeros(6))
    with pytest.raises(ZynMLTypeError, match="upload_u32"):
        d.embedding(a, a, 6, 1)                  # ids uploaded as f32
    with pytest.raises(ZynMLTypeError, match="size"):
        d.softmax(a, 2.0, 3)
    with pytest.raises(ZynMLTypeError, match="buffer"):
        d.softmax(np.zeros(6), 2, 3)
    with pytest.raises(ZynMLTypeError, match="truth value"):
        d.elementwise([a], 6, lambda xs: xs[0] if xs[0] > 0 else -xs[0])
    with pytest.raises(ZynMLTypeError, match="expression"):
        d.elementwise([a], 6, lambda xs: "x")
    with pytest.raises(ZynMLRuntimeError, match="outside the table"):
        d.embedding(a, d.upload_u32([0, 9]), 2, 3)
    with pytest.raises(ZynMLDeviceError):
        nn.device("cuda:99")
    with pytest.raises(ZynMLError):
        d.reduce_sum(a, [2, 3], 2)


# ---------------------------------------------------------------- weights

def _safetensors_bytes(tensors: dict) -> bytes:
    """A safetensors file built by hand here (the format's own layout), for load_weights."""
    import json
    import struct
    header, blobs, off = {}, b"", 0
    codes = {"float32": "F32", "float16": "F16", "int32": "I32", "uint32": "U32", "bool": "BOOL"}
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": codes[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs += raw
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blobs


def test_load_weights_gives_records_and_lists_by_dotted_names(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {"layers.0.qkv_proj": rand(rng, 4, 6), "layers.1.qkv_proj": rand(rng, 4, 6),
               "layers.0.norm": rand(rng, 4).astype(np.float16),
               "layers.1.norm": rand(rng, 4).astype(np.float16),
               "embed": rand(rng, 5, 4), "vocab_ids": np.arange(5, dtype=np.uint32),
               "step": np.array([7], np.int32), "mask": np.array([True, False])}
    path = tmp_path / "model.safetensors"
    path.write_bytes(_safetensors_bytes(tensors))
    model = zynbook.load_weights(path)
    assert len(model.layers) == 2
    np.testing.assert_array_equal(np.asarray(model.layers[1].qkv_proj), tensors["layers.1.qkv_proj"])
    assert model.layers[0].norm.dtype == "f16" and model.vocab_ids.dtype == "u32"
    np.testing.assert_array_equal(np.asarray(model.mask), [True, False])
    # as the spec's transformer block reads it
    got = zynbook.run("""let layer = 1
let w = model.layers[layer].qkv_proj
let y = compute(x, w) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s += x[i, k] * w[k, j]
        out[i, j] = s
}
y
""", model=model, x=np.ones((2, 4), np.float32))
    assert_within(np.asarray(got), np.ones((2, 4)) @ tensors["layers.1.qkv_proj"], 1e-5, 1e-5)


def test_save_weights_round_trip_and_format(tmp_path):
    import json
    import struct
    d = nn.device("cpu")
    rng = np.random.default_rng(4)
    w = {"layers": [{"w": rand(rng, 3, 2), "b": d.upload(rand(rng, 2))} for _ in range(3)],
         "ids": np.array([1, 2], np.uint32), "half": rand(rng, 3).astype(np.float16)}
    path = tmp_path / "w.safetensors"
    zynbook.save_weights(path, w, metadata={"steps": 10})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"steps": "10"}
    assert header["layers.2.w"]["dtype"] == "F32" and header["layers.2.w"]["shape"] == [3, 2]
    assert header["ids"]["dtype"] == "U32" and header["half"]["dtype"] == "F16"
    begin, end = header["layers.1.w"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(raw[8 + n + begin:8 + n + end], "<f4")
                                  .reshape(3, 2), w["layers"][1]["w"])
    back = zynbook.load_weights(path)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(back.layers[i].w), w["layers"][i]["w"])
        np.testing.assert_array_equal(np.asarray(back.layers[i].b), w["layers"][i]["b"].to_vec())
    np.testing.assert_array_equal(np.asarray(back.half), w["half"])
    # saving what was loaded gives the same file
    zynbook.save_weights(tmp_path / "again.safetensors", back, metadata={"steps": 10})
    assert (tmp_path / "again.safetensors").read_bytes() == raw


def test_weights_mistakes_are_zynml_errors(tmp_path):
    from zynbook.errors import ZynMLRuntimeError
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00")
    with pytest.raises(ZynMLRuntimeError, match="not a safetensors file"):
        zynbook.load_weights(bad)
    bad.write_bytes(_safetensors_bytes({"a": np.zeros(3, np.float32)})[:-4])
    with pytest.raises(ZynMLRuntimeError, match="outside the file"):
        zynbook.load_weights(bad)
    with pytest.raises(ZynMLRuntimeError, match="cannot read"):
        zynbook.load_weights(tmp_path / "missing.safetensors")
    with pytest.raises(ZynMLTypeError, match="not a tensor"):
        zynbook.save_weights(tmp_path / "x.safetensors", {"a": object()})
    with pytest.raises(ZynMLTypeError, match="without dots"):
        zynbook.save_weights(tmp_path / "x.safetensors", {"a.b": np.zeros(2)})


def test_spec_transformer_block_runs_with_loaded_weights(tmp_path):
    """examples/transformer_block.zyn with `model` read from a safetensors file equals the
    same program with the weights bound as arrays (test_examples_cpu checks that against
    numpy)."""
    from pathlib import Path
    source = (Path(__file__).parent.parent / "examples" / "transformer_block.zyn").read_text()
    rng = np.random.default_rng(8)
    model = {"layers": [{"qkv_proj": rand(rng, 24, 72, scale=0.2), "out_proj": rand(rng, 24, 24, scale=0.2),
                         "ln1_weight": np.ones(24, np.float32), "ln1_bias": rand(rng, 24, scale=0.1),
                         "ffn_up": rand(rng, 24, 40, scale=0.2), "ffn_down": rand(rng, 40, 24, scale=0.2),
                         "ln2_weight": np.ones(24, np.float32), "ln2_bias": rand(rng, 24, scale=0.1)}]}
    zynbook.save_weights(tmp_path / "block.safetensors", model)
    loaded = zynbook.load_weights(tmp_path / "block.safetensors")
    got = np.asarray(zynbook.run(source, model=loaded))
    want = np.asarray(zynbook.run(source, model=model))
    assert got.shape == (2, 100, 24)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- a training step

def torch_tiny_gpt_loss(w, ids, targets, c):
    """The same model written with PyTorch: w is a dict of leaf tensors by dotted name."""
    S, D, H, KV, hd = len(ids), c.dim, c.n_heads, c.n_kv_heads, c.head_dim
    F = torch.nn.functional

    def rope(x, heads):
        x = x.reshape(S, heads, hd // 2, 2)
        freq = c.rope_base ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
        ang = (torch.arange(S, dtype=torch.float64)[:, None] * freq[None, :]).float()
        cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        x0, x1 = x[..., 0], x[..., 1]
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(S, heads * hd)

    x = F.embedding(torch.tensor(ids.astype(np.int64)), w["embed"])
    for i in range(c.n_layers):
        L = f"layers.{i}."
        h = F.rms_norm(x, (D,), w[L + "attn_norm"], c.eps)
        q, k, v = rope(h @ w[L + "wq"], H), rope(h @ w[L + "wk"], KV), h @ w[L + "wv"]
        x = x + attention_ref(q, k, v, H, KV, hd) @ w[L + "wo"]
        h2 = F.rms_norm(x, (D,), w[L + "mlp_norm"], c.eps)
        x = x + (F.silu(h2 @ w[L + "w1"]) * (h2 @ w[L + "w3"])) @ w[L + "w2"]
    logits = F.rms_norm(x, (D,), w["final_norm"], c.eps) @ w["lm_head"]
    return F.cross_entropy(logits, torch.tensor(targets.astype(np.int64)), ignore_index=c.pad_id)


@pytest.mark.parametrize("heads,kv_heads,dim", [(2, 2, 12), (4, 2, 16), (4, 1, 16)])
def test_training_step_equals_pytorch(heads, kv_heads, dim):
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    c = GPTConfig(vocab=11, dim=dim, n_layers=2, n_heads=heads, n_kv_heads=kv_heads, ffn=20,
                  max_seq=16, lr=1e-2, weight_decay=0.1, seed=heads + kv_heads)
    rng = np.random.default_rng(dim)
    ids = rng.integers(1, c.vocab, 9).astype(np.uint32)
    targets = np.concatenate([ids[1:], [0]]).astype(np.uint32)    # last position padded
    targets[3] = 0
    host = init_weights(c)
    model = TinyGPT(nn.device("cpu"), c, host)
    names = list(model.params)
    leaves = {n: T(model._lookup(host, n), True) for n in names}
    loss_ref = torch_tiny_gpt_loss(leaves, ids, targets, c)
    loss_ref.backward()
    loss, grads = model.loss_and_grads(ids, targets)
    assert abs(loss - loss_ref.item()) < 1e-5 * max(1.0, abs(loss))
    for n in names:
        assert_within(grads[n].to_vec(), leaves[n].grad.numpy().ravel(), rtol=1e-3, atol=2e-5)
    # the AdamW update of that step, weight decay only on matrices
    groups = [{"params": [leaves[n] for n in names if not n.endswith("norm")],
               "weight_decay": c.weight_decay},
              {"params": [leaves[n] for n in names if n.endswith("norm")], "weight_decay": 0.0}]
    torch.optim.AdamW(groups, lr=c.lr, betas=c.betas, eps=c.adam_eps).step()
    model.apply_grads(grads)
    for n in names:
        assert_within(model.params[n].to_vec(), leaves[n].detach().numpy().ravel(),
                      rtol=1e-4, atol=1e-5)


def test_generation_with_kv_cache_equals_full_recompute():
    """Greedy tokens from the KV cache (prefill, then one token at a time) equal the argmax
    of the full forward pass over the same tokens, and the prompt is kept."""
    from zynbook.nn.model import GPTConfig, TinyGPT
    c = GPTConfig(vocab=9, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn=12, max_seq=12)
    model = TinyGPT(nn.device("cpu"), c)
    out = model.generate([3, 1, 4], 5, temperature=0)
    assert out[:3] == [3, 1, 4] and len(out) == 8
    d = model.dev
    logits, _ = model.forward(d.upload_u32(out[:-1]), 7)
    want = d.download(logits).reshape(7, c.vocab).argmax(1)
    assert list(want[2:]) == out[3:]


def test_activation_checkpointing_within_a_memory_budget_gives_the_same_gradients():
    """With memory_budget set, layers past the budget keep only their input and recompute
    their activations in the backward pass: the same loss and gradients, fewer bytes kept."""
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    c = GPTConfig(vocab=13, dim=8, n_layers=3, n_heads=2, n_kv_heads=1, ffn=12, max_seq=10)
    host = init_weights(c)
    ids = np.arange(1, 10, dtype=np.uint32)
    targets = np.roll(ids, -1)
    whole = TinyGPT(nn.device("cpu"), c, host)
    loss0, grads0 = whole.loss_and_grads(ids, targets)
    full_bytes = whole.last_stored_bytes
    per_layer, per_ckpt = whole.activation_bytes(9)
    assert full_bytes == 3 * per_layer + 4 * 2 * 9 * 8
    for budget, kept in ((full_bytes, 3), (full_bytes - 1, 2), (0, 0)):
        c_b = GPTConfig(**{**c.__dict__, "memory_budget": budget})
        m = TinyGPT(nn.device("cpu"), c_b, host)
        assert m.layers_kept_whole(9) == kept
        loss, grads = m.loss_and_grads(ids, targets)
        assert m.last_stored_bytes == 4 * 2 * 9 * 8 + kept * per_layer + (3 - kept) * per_ckpt
        assert m.last_stored_bytes <= max(budget, 4 * 2 * 9 * 8 + 3 * per_ckpt)
        assert loss == loss0
        for name in grads0:
            np.testing.assert_array_equal(grads[name].to_vec(), grads0[name].to_vec())


def test_upload_u32_takes_only_token_ids():
    d = nn.device("cpu")
    np.testing.assert_array_equal(d.upload_u32([0, 2 ** 32 - 1]).to_vec(), [0, 2 ** 32 - 1])
    for bad in ([1.5], [-1], [2 ** 32]):
        with pytest.raises(ZynMLTypeError, match="token ids"):
            d.upload_u32(np.array(bad))


@pytest.mark.parametrize("device_id", ["cpu"] + OTHER_DEVICES)
def test_fixed_capacity_cache_equals_kv_attention(device_id):
    d = nn.device(device_id)
    rng = np.random.default_rng(12)
    cap, H, KV, D = 9, 4, 2, 3
    kc, vc = rand(rng, cap, KV * D), rand(rng, cap, KV * D)
    for start, q_len in ((0, 4), (5, 1)):
        q = rand(rng, q_len, H * D)
        got = d.download(d.kv_attention_fixed(d.upload(q), d.upload(kc), d.upload(vc), start,
                                              q_len, cap, H, KV, D))
        want = attention_ref(T(q), T(kc[:start + q_len]), T(vc[:start + q_len]), H, KV, D, start)
        assert_within(got, want.numpy().ravel(), **TOL)
    new = rand(rng, 2, KV * D)
    out = d.download(d.write_rows(d.upload(kc), d.upload(new), 6, cap, 2, KV * D))
    want = kc.copy()
    want[6:8] = new
    np.testing.assert_array_equal(out.reshape(cap, -1), want)
    with pytest.raises(ZynMLShapeError, match="do not fit in 9 rows"):
        d.write_rows(d.upload(kc), d.upload(new), 8, cap, 2, KV * D)


@pytest.mark.parametrize("device_id", [d for d in OTHER_DEVICES if d != "cpu:native"])
def test_training_step_on_every_device_equals_cpu(device_id):
    """The tiny GPT's loss, gradients and AdamW update on another device equal the CPU's
    (cpu:native, whose every kernel the tests above check, is left out: compiling the step's
    kernels with the C++ compiler takes longer than the rest of this file)."""
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    c = GPTConfig(vocab=10, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn=12, max_seq=8)
    host = init_weights(c)
    ids = np.array([1, 4, 2, 8, 5, 7], np.uint32)
    targets = np.array([4, 2, 8, 0, 7, 3], np.uint32)
    models = [TinyGPT(nn.device(d), c, host) for d in ("cpu", device_id)]
    results = [m.loss_and_grads(ids, targets) for m in models]
    assert abs(results[0][0] - results[1][0]) < 1e-5
    for name, g in results[0][1].items():
        assert_within(results[1][1][name].to_vec(), g.to_vec(), rtol=1e-4, atol=1e-6)
    for m, (_loss, grads) in zip(models, results):
        m.apply_grads(grads)
    for name in models[0].params:
        assert_within(models[1].params[name].to_vec(), models[0].params[name].to_vec(),
                      rtol=1e-4, atol=1e-6)
