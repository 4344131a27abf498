"""Every program in examples/ runs on the `cpu` device and equals an independent numpy
computation written here. The inputs are the ones each program makes (read back from the
session's namespace); the references use numpy only, in float64 where that is natural.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import zynbook
from tolerances import assert_close

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, **env):
    from unittest import mock
    from zynbook.backends import registry
    session = zynbook.Session(device="cpu")
    # `@device("auto")` in an example is the CPU here, as on a machine with no GPU
    with mock.patch.object(registry, "best_device_id", lambda: "cpu"):
        value = session.run((EXAMPLES / f"{name}.zyn").read_text(), **env)
    return session, value


def arr(session, name):
    return np.asarray(session.namespace[name])


def assert_ran_on_cpu(session):
    assert session.launches, "no kernel was launched"
    assert {launch.device for launch in session.launches} == {"cpu"}


# ------------------------------------------------------------------ numpy references


def np_softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d)) v over the last two axes, keys outside `mask` left out."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return np_softmax(s) @ v


def np_conv2d(x, w, bias=None, stride=1, padding=0):
    """Cross-correlation as deep-learning frameworks define conv2d, NCHW / OIHW."""
    x = x.astype(np.float64)
    b, c, h, wd = x.shape
    oc, ic, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((b, oc, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j])
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def np_depthwise(x, w):
    x = x.astype(np.float64)
    c, kh, kw = w.shape
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += x[:, :, i:i + oh, j:j + ow] * w[None, :, i, j, None, None]
    return out


def np_gelu_tanh(x):
    """GELU, tanh approximation, with sqrt(2/pi) rounded to 0.7978845608 as the spec has it."""
    x = x.astype(np.float64)
    assert abs(0.7978845608 - math.sqrt(2.0 / math.pi)) < 1e-10
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def np_layer_norm(x, gamma, beta, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_rope(x, cos, sin):
    x0, x1 = x[..., 0::2].astype(np.float64), x[..., 1::2].astype(np.float64)
    out = np.empty(x.shape)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


# ------------------------------------------------------------------------ examples


def test_every_example_has_a_test():
    tested = {name[len("test_example_"):] for name in globals() if name.startswith("test_example_")}
    programs = {p.stem for p in EXAMPLES.glob("*.zyn")}
    assert programs - tested == set()


def test_example_relu():
    s, y = run_example("relu")
    assert_ran_on_cpu(s)
    x = arr(s, "x")
    assert x.shape == (1000,) and (x < 0).any()
    assert_close(y, np.maximum(x, 0), "f32")
    assert y.dtype == "f32" and y.device == "cpu"


def test_example_elementwise_mul_add():
    s, z = run_example("elementwise_mul_add")
    x, y = arr(s, "x"), arr(s, "y")
    assert_close(z, x.astype(np.float64) * y + 1.0, "f32")


def test_example_broadcast_scale():
    s, out = run_example("broadcast_scale")
    m, v = arr(s, "matrix"), arr(s, "vector")
    assert m.shape == (37, 53) and v.shape == (53,)
    assert_close(out, m * v[None, :], "f32")


def test_example_compute_syntax():
    s, out = run_example("compute_syntax")
    a, b = arr(s, "input1"), arr(s, "input2")
    assert_close(out, a.astype(np.float64) * b + a, "f32")
    assert_ran_on_cpu(s)


def test_example_reduce_sum():
    s, total = run_example("reduce_sum")
    assert isinstance(total, float)
    assert_close(total, arr(s, "data").astype(np.float64).sum(), "f32", "reduction")


def test_example_reduce_max():
    s, m = run_example("reduce_max")
    assert m == arr(s, "data").max()


def test_example_norm_pipe_sqrt():
    s, norm = run_example("norm_pipe_sqrt")
    d = arr(s, "data").astype(np.float64)
    assert_close(norm, np.sqrt((d * d).sum()), "f32", "reduction")


def test_example_row_sums_axis():
    s, sums = run_example("row_sums_axis")
    m = arr(s, "matrix")
    assert_close(sums, m.astype(np.float64).sum(axis=1), "f32", "reduction")


def test_example_argmax():
    s, idx = run_example("argmax")
    assert isinstance(idx, int)
    assert idx == int(np.argmax(arr(s, "data")))


def test_example_matmul():
    s, c = run_example("matmul")
    a, b = arr(s, "A"), arr(s, "B")
    assert_close(c, a.astype(np.float64) @ b, "f32", "contraction")


def test_example_batched_matmul():
    s, c = run_example("batched_matmul")
    a, b = arr(s, "A"), arr(s, "B")
    assert_close(c, np.matmul(a.astype(np.float64), b), "f32", "contraction")


def test_example_conv2d():
    s, out = run_example("conv2d")
    x, w, b = arr(s, "input"), arr(s, "kernel"), arr(s, "bias")
    expected = np_conv2d(x, w, b, stride=2, padding=1)
    assert expected.shape == (2, 5, 9, 10)
    assert_close(out, expected, "f32", "contraction")


def test_example_conv2d_depthwise():
    s, out = run_example("conv2d_depthwise")
    expected = np_depthwise(arr(s, "input"), arr(s, "kernel"))
    assert expected.shape == (2, 3, 15, 17)
    assert_close(out, expected, "f32", "contraction")


def test_example_attention_mask():
    s, out = run_example("attention_mask")
    q, k, v, mask = (arr(s, n) for n in ("Q", "K", "V", "mask"))
    assert mask.dtype == np.bool_ and 0 < mask.mean() < 1
    assert_close(out, np_attention(q, k, v, mask), "f32", "contraction")


def test_example_flash_attention():
    s, out = run_example("flash_attention")
    q, k, v = (arr(s, n) for n in ("Q", "K", "V"))
    assert q.shape[2] % 64 != 0
    assert_close(out, np_attention(q, k, v), "f32", "contraction")


def test_example_softmax_fused():
    s, probs = run_example("softmax_fused")
    logits = arr(s, "logits").astype(np.float64)
    assert_close(probs, np_softmax(logits), "f32", "reduction")


def test_example_layer_norm_fused():
    s, out = run_example("layer_norm_fused")
    x, g, b = arr(s, "x"), arr(s, "gamma"), arr(s, "beta")
    assert_close(out, np_layer_norm(x, g, b, 1e-5), "f32", "reduction")


def test_example_gelu():
    s, out = run_example("gelu")
    assert_close(out, np_gelu_tanh(arr(s, "x")), "f32")


def test_example_rope():
    s, out = run_example("rope")
    x = arr(s, "x")
    d = np.arange(8)
    angles = np.arange(100)[:, None] * 10000.0 ** (-2.0 * d / 16)[None, :]
    # the caches the program built equal the textbook ones
    assert_close(s.namespace["cos_cache"], np.cos(angles), "f32", "reduction")
    assert_close(s.namespace["sin_cache"], np.sin(angles), "f32", "reduction")
    assert_close(out, np_rope(x, np.cos(angles), np.sin(angles)), "f32", "reduction")


def test_example_async():
    s, total = run_example("async")
    data = arr(s, "data").astype(np.float64)
    batches = [arr(s, f"batch{k}").astype(np.float64) for k in (1, 2, 3)]
    expected = [np.sqrt(b * b + 1.0) for b in batches]
    assert_close(total, sum(expected), "f32")
    results = s.namespace["results"]
    assert isinstance(results, list) and len(results) == 3
    for got, want in zip(results, expected):
        assert_close(got, want, "f32")
    # `await any(futures)` gave one of the three results with its index
    index = s.namespace["index"]
    assert index in (0, 1, 2)
    # ... and the last `result` is the awaited (or default) value of the first future
    assert_close(s.namespace["result"], np.tanh(data) * np.exp(-data * data), "f32")
    assert s.namespace["cpu_work"] == 64 + 1000 * 4


def test_example_devices():
    s, max_diff = run_example("devices")
    data = arr(s, "data").astype(np.float64)
    ids = [d.id for d in s.namespace["devices"]]
    assert "cpu" in ids
    assert_close(s.namespace["cpu_result"], data @ data, "f32", "contraction")
    assert_close(s.namespace["result"], data @ data, "f32", "contraction")
    assert 0.0 <= max_diff < 1e-3


def test_example_memory():
    s, cpu_data = run_example("memory")
    data = arr(s, "data")
    np.testing.assert_array_equal(np.asarray(cpu_data), data)
    assert cpu_data.device == "cpu"
    gpu = s.namespace["gpu_tensor"]
    assert gpu.shape == (1024, 1024) and gpu.dtype == "f32"
    assert not np.asarray(gpu).any()
    pinned = s.namespace["pinned"]
    assert pinned.device == "cpu" and pinned.shape == (1024, 1024)
    pool = s.namespace["pool"]
    assert pool.used == 0             # after pool.reset()
    assert s.namespace["tensor2"].shape == (256, 256)


def _two_cuda_devices() -> bool:
    ids = {d["id"] for d in zynbook.compute_devices()}
    return {"cuda:0", "cuda:1"} <= ids


@pytest.mark.gpu
@pytest.mark.skipif(not _two_cuda_devices(), reason="needs two CUDA devices")
def test_example_multi_gpu():
    s, max_diff = run_example("multi_gpu")
    data = arr(s, "data").astype(np.float64)
    assert_close(s.namespace["gpu_result"], data @ data, "f32", "contraction")
    assert_close(s.namespace["forward"], np.tanh(data), "f32")
    assert max_diff < 1e-3


# --------------------------------------------------------------- transformer block

HIDDEN, HEADS, FFN = 24, 3, 40


def make_model(seed=0, layers=2):
    rng = np.random.default_rng(seed)

    def w(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / math.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {"layers": [{
        "qkv_proj": w(HIDDEN, 3 * HIDDEN), "out_proj": w(HIDDEN, HIDDEN),
        "ln1_weight": (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "ln1_bias": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "ffn_up": w(HIDDEN, FFN), "ffn_down": w(FFN, HIDDEN),
        "ln2_weight": (1.0 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "ln2_bias": (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
    } for _ in range(layers)]}


def np_transformer_block(x, w, heads=HEADS):
    """Post-norm encoder block: x + MHA -> LN1 -> + FFN(GELU tanh) -> LN2."""
    x = x.astype(np.float64)
    b, s, h = x.shape
    d = h // heads
    qkv = x @ w["qkv_proj"]
    q, k, v = np.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(b, s, heads, d).transpose(0, 2, 1, 3) for t in (q, k, v))
    attn = np_attention(q, k, v).transpose(0, 2, 1, 3).reshape(b, s, h)
    normed = np_layer_norm(x + attn @ w["out_proj"], w["ln1_weight"], w["ln1_bias"], 1e-6)
    ffn = np_gelu_tanh(normed @ w["ffn_up"]) @ w["ffn_down"]
    return np_layer_norm(normed + ffn, w["ln2_weight"], w["ln2_bias"], 1e-6)


def test_example_transformer_block():
    model = make_model()
    s, out = run_example("transformer_block", model=model)
    assert_ran_on_cpu(s)
    x = arr(s, "x")
    assert x.shape == (2, 100, HIDDEN)
    assert_close(out, np_transformer_block(x, model["layers"][0]), "f32", "contraction")
    # the pipeline stays callable with another layer and another input
    x2 = np.random.default_rng(5).standard_normal((1, 7, HIDDEN)).astype(np.float32)
    out2 = s.run("transformer_block(x2, 1)", x2=x2)
    assert_close(out2, np_transformer_block(x2, model["layers"][1]), "f32", "contraction")
