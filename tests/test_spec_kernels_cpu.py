"""Every kernel snippet of the spec (`SPEC_*` in kernel_sources.py, copied verbatim from its
code blocks), run on the `cpu`
device through `zynbook.run(src, name=array, ...)` with inputs made here, at sizes that are
not multiples of any block or workgroup (1, 7, 65, 129, ...) and in f16/f32/f64 where the
kernel is dtype-generic; each result equals an independent numpy computation.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import zynbook
from kernel_sources import (SPEC_RELU, SPEC_MUL_ADD, SPEC_BROADCAST, SPEC_REDUCE_SUM,
                            SPEC_REDUCE_MAX, SPEC_NORM, SPEC_ROW_SUMS, SPEC_ARGMAX, SPEC_MATMUL,
                            SPEC_BATCHED_MATMUL, SPEC_CONV2D, SPEC_DEPTHWISE, SPEC_ATTENTION,
                            SPEC_FLASH, SPEC_SOFTMAX, SPEC_LAYER_NORM, SPEC_GELU, SPEC_ROPE)
from test_examples_cpu import (np_attention, np_conv2d, np_depthwise, np_gelu_tanh,
                               np_layer_norm, np_rope, np_softmax)
from tolerances import assert_close

ODD = [1, 7, 65, 129]
DTYPES = ["f16", "f32", "f64"]
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def randn(seed, *shape, dtype="f32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(NP[dtype])


def kernel_types_run(session) -> list:
    return [k.kernel.kernel_type.kind for k in session.last_kernels]


# ------------------------------------------------------------------- elementwise


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ODD)
def test_relu(n, dtype):
    x = randn(n, n, dtype=dtype)
    y = zynbook.run(SPEC_RELU, x=x)
    assert y.dtype == dtype and y.shape == (n,)
    np.testing.assert_array_equal(np.asarray(y), np.maximum(x, 0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ODD)
def test_mul_add(n, dtype):
    x, y = randn(1, n, dtype=dtype), randn(2, n, dtype=dtype)
    z = zynbook.run(SPEC_MUL_ADD, x=x, y=y)
    assert z.dtype == dtype
    assert_close(z, x.astype(np.float64) * y + 1.0, dtype)


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 65), (129, 3)])
def test_broadcast(rows, cols):
    m, v = randn(3, rows, cols), randn(4, cols)
    assert_close(zynbook.run(SPEC_BROADCAST, matrix=m, vector=v), m * v, "f32")


def test_broadcast_vector_of_wrong_length_is_a_shape_error():
    with pytest.raises(zynbook.ZynMLShapeError) as err:
        zynbook.run(SPEC_BROADCAST, matrix=randn(0, 4, 5), vector=randn(1, 6))
    assert err.value.line > 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_gelu(n, dtype):
    x = randn(n, n, dtype=dtype)
    out = zynbook.run(SPEC_GELU, x=x)
    assert out.dtype == dtype
    # 0.7978845608 is sqrt(2/pi) to 10 digits
    assert_close(out, np_gelu_tanh(x), dtype, "reduction" if dtype == "f16" else "elementwise")


@pytest.mark.parametrize("batch,heads,seq,head_dim", [(1, 1, 1, 2), (2, 3, 7, 10), (1, 2, 65, 16)])
def test_rope_verbatim(batch, heads, seq, head_dim):
    x = randn(5, batch, heads, seq, head_dim)
    theta = 10000.0 ** (-2.0 * np.arange(head_dim // 2) / head_dim)
    angles = np.arange(seq)[:, None] * theta[None, :]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    out = zynbook.run(SPEC_ROPE, x=x, cos_cache=cos, sin_cache=sin)
    assert out.shape == x.shape
    assert_close(out, np_rope(x, cos, sin), "f32")
    # a rotation keeps the length of every pair
    pairs = np.asarray(out).reshape(batch, heads, seq, head_dim // 2, 2)
    np.testing.assert_allclose(np.linalg.norm(pairs, axis=-1),
                               np.linalg.norm(x.reshape(pairs.shape), axis=-1), rtol=1e-5)


# --------------------------------------------------------------------- reductions


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ODD + [100_000])
def test_reduce_sum(n, dtype):
    x = randn(n, n, dtype=dtype)
    total = zynbook.run(SPEC_REDUCE_SUM, data=x)
    assert isinstance(total, float)
    # f16 sums are compared relative to the sum of magnitudes, as their rounding is
    scale = np.abs(x.astype(np.float64)).sum()
    expected = x.astype(np.float64).sum()
    assert abs(total - expected) <= {"f16": 1e-2, "f32": 1e-5, "f64": 1e-12}[dtype] * scale + 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ODD)
def test_reduce_max(n, dtype):
    x = randn(n, n, dtype=dtype)
    assert zynbook.run(SPEC_REDUCE_MAX, data=x) == x.max()


def test_reduce_max_of_all_negative_values():
    x = -np.abs(randn(3, 65)) - 1.0
    assert zynbook.run(SPEC_REDUCE_MAX, data=x) == x.max()


@pytest.mark.parametrize("n", ODD)
def test_norm_pipe_sqrt(n):
    x = randn(n, n)
    norm = zynbook.run(SPEC_NORM, data=x)
    assert_close(norm, np.linalg.norm(x.astype(np.float64)), "f32", "reduction")


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 65), (129, 7), (3, 1)])
def test_row_sums_axis(rows, cols):
    m = randn(rows, rows, cols)
    out = zynbook.run(SPEC_ROW_SUMS, matrix=m)
    assert out.shape == (rows,)
    assert_close(out, m.astype(np.float64).sum(axis=1), "f32", "reduction")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", ODD)
def test_argmax(n, dtype):
    x = randn(n + 10, n, dtype=dtype)
    idx = zynbook.run(SPEC_ARGMAX, data=x)
    assert isinstance(idx, int) and idx == int(np.argmax(x))


def test_argmax_takes_the_first_of_equal_values():
    x = np.array([1.0, 5.0, 2.0, 5.0, 5.0], np.float32)
    assert zynbook.run(SPEC_ARGMAX, data=x) == 1


# ---------------------------------------------------------------------- matrices


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 65, 3), (65, 129, 17), (129, 1, 7)])
def test_matmul(m, k, n, dtype):
    a, b = randn(m, m, k, dtype=dtype), randn(n, k, n, dtype=dtype)
    c = zynbook.run(SPEC_MATMUL, A=a, B=b)
    assert c.shape == (m, n)
    assert_close(c, a.astype(np.float64) @ b, dtype, "contraction")




@pytest.mark.parametrize("dtype", ["f16", "f64"])
def test_accumulator_takes_the_dtype_it_accumulates(dtype):
    session = zynbook.Session(device="cpu")
    a = randn(0, 3, 5, dtype=dtype)
    c = session.run(SPEC_MATMUL, A=a, B=a.T.copy())
    assert c.dtype == dtype
    assert f"var sum: {dtype} = 0.0" in session.last_kernels[0].cir_text


def test_matmul_inner_sizes_that_differ_are_a_shape_error():
    with pytest.raises(zynbook.ZynMLShapeError) as err:
        zynbook.run(SPEC_MATMUL, A=randn(0, 4, 5), B=randn(1, 6, 3))
    assert err.value.line > 0 and "K" in err.value.message


@pytest.mark.parametrize("batch,m,k,n", [(1, 1, 1, 1), (3, 7, 65, 5), (2, 17, 3, 129)])
def test_batched_matmul(batch, m, k, n):
    a, b = randn(1, batch, m, k), randn(2, batch, k, n)
    c = zynbook.run(SPEC_BATCHED_MATMUL, A=a, B=b)
    assert_close(c, np.matmul(a.astype(np.float64), b), "f32", "contraction")


# -------------------------------------------------------------------- convolution


@pytest.mark.parametrize("stride,padding,h,w,k", [(1, 0, 7, 9, 3), (2, 1, 17, 19, 3),
                                                  (3, 2, 13, 8, 5), (1, 1, 1, 1, 1)])
def test_conv2d(stride, padding, h, w, k):
    x, kern, bias = randn(1, 2, 3, h, w), randn(2, 5, 3, k, k), randn(3, 5)
    expected = np_conv2d(x, kern, bias, stride, padding)
    out_h, out_w = expected.shape[2:]
    out = zynbook.run(SPEC_CONV2D, input=x, kernel=kern, bias=bias, stride=stride, padding=padding,
                      in_h=h, in_w=w, out_h=out_h, out_w=out_w)
    assert_close(out, expected, "f32", "contraction")


@pytest.mark.parametrize("h,w,k", [(7, 9, 3), (3, 3, 3), (17, 5, 2)])
def test_depthwise_conv(h, w, k):
    x, kern = randn(4, 2, 3, h, w), randn(5, 3, k, k)
    expected = np_depthwise(x, kern)
    out = zynbook.run(SPEC_DEPTHWISE, input=x, kernel=kern, out_h=h - k + 1, out_w=w - k + 1)
    assert_close(out, expected, "f32", "contraction")


# ---------------------------------------------------------------------- attention


@pytest.mark.parametrize("seq", [1, 7, 65])
def test_attention_with_mask(seq):
    rng = np.random.default_rng(seq)
    q, k, v = (randn(seq + i, 2, 3, seq, 8) for i in range(3))
    mask = rng.random((seq, seq)) > 0.3
    mask[np.arange(seq), np.arange(seq)] = True          # every query sees at least itself
    out = zynbook.run(SPEC_ATTENTION, Q=q, K=k, V=v, mask=mask)
    assert_close(out, np_attention(q, k, v, mask), "f32", "contraction")


def test_causal_attention_mask():
    seq = 33
    q, k, v = (randn(i, 1, 2, seq, 16) for i in range(3))
    mask = np.tril(np.ones((seq, seq), bool))
    out = zynbook.run(SPEC_ATTENTION, Q=q, K=k, V=v, mask=mask)
    assert_close(out, np_attention(q, k, v, mask), "f32", "contraction")


@pytest.mark.parametrize("seq", [1, 7, 63, 64, 65, 100, 129, 200])
def test_flash_attention_verbatim(seq):
    q, k, v = (randn(seq * 3 + i, 2, 3, seq, 16) for i in range(3))
    out = zynbook.run(SPEC_FLASH, Q=q, K=k, V=v)
    assert out.shape == q.shape
    assert_close(out, np_attention(q, k, v), "f32", "contraction")


def test_flash_attention_f64():
    q, k, v = (randn(i, 1, 2, 100, 8, dtype="f64") for i in range(3))
    out = zynbook.run(SPEC_FLASH, Q=q, K=k, V=v)
    assert_close(out, np_attention(q, k, v), "f64", "contraction")


# ------------------------------------------------------------------- fused kernels


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", ODD + [1000])
def test_softmax(n, dtype):
    logits = randn(n, n, dtype=dtype) * 10
    probs = zynbook.run(SPEC_SOFTMAX, logits=logits)
    assert_close(probs, np_softmax(logits.astype(np.float64)), dtype, "reduction")
    assert abs(float(np.asarray(probs, np.float64).sum()) - 1.0) < 1e-5


def test_softmax_of_large_logits_does_not_overflow():
    logits = np.array([1000.0, 999.0, -1000.0], np.float32)
    probs = np.asarray(zynbook.run(SPEC_SOFTMAX, logits=logits))
    assert np.isfinite(probs).all()
    assert_close(probs, np_softmax(logits.astype(np.float64)), "f32", "reduction")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("batch,hidden", [(1, 1), (7, 65), (129, 3), (2, 257)])
def test_layer_norm(batch, hidden, dtype):
    x = randn(1, batch, hidden, dtype=dtype) * 3 + 1
    gamma, beta = randn(2, hidden, dtype=dtype), randn(3, hidden, dtype=dtype)
    out = zynbook.run(SPEC_LAYER_NORM, x=x, gamma=gamma, beta=beta, eps=1e-5)
    assert_close(out, np_layer_norm(x, gamma, beta, 1e-5), dtype, "reduction")


def test_layer_norm_without_eps_names_it():
    with pytest.raises(zynbook.ZynMLError) as err:
        zynbook.run(SPEC_LAYER_NORM, x=randn(0, 2, 3), gamma=randn(1, 3), beta=randn(2, 3))
    assert "eps" in err.value.message and err.value.line > 0


def test_shared_array_outside_any_parallel_loop():
    """`shared var` at the top of a fused body: written element by element by a loop that
    cannot be parallel (it writes shared memory), then read inside an accumulation."""
    src = """
let y = compute(v, w) {
    @kernel fused
    shared var t[n]
    for i in 0..n:
        t[i] = v[i] * 2.0
    barrier()
    for j in 0..m:
        var acc = 0.0
        for i in 0..n:
            acc += t[i] * w[i, j]
        out[j] = acc
}
y
"""
    for n, m in [(1, 1), (7, 5), (65, 3)]:
        v, w = randn(n, n), randn(m, n, m)
        assert_close(zynbook.run(src, v=v, w=w), (2.0 * v.astype(np.float64)) @ w, "f32",
                     "contraction")


def test_residual_layer_norm_and_ffn_with_shared_memory():
    """The transformer block's fused kernels (residual + layer norm, FFN with a shared
    intermediate and a barrier) at odd sizes."""
    src = """
let ffn = compute(h, up_w, down_w) {
    @kernel fused
    for b in 0..batch, s in 0..seq:
        shared var up[ffn_hidden]
        for f in 0..ffn_hidden:
            var sum = 0.0
            for i in 0..hidden:
                sum += h[b, s, i] * up_w[i, f]
            up[f] = max(sum, 0.0)
        barrier()
        for i in 0..hidden:
            var sum = 0.0
            for f in 0..ffn_hidden:
                sum += up[f] * down_w[f, i]
            out[b, s, i] = sum
}
ffn
"""
    for b, s, hid, f in [(1, 1, 1, 1), (2, 7, 5, 65), (1, 65, 3, 7)]:
        h, up, down = randn(b, b, s, hid), randn(s, hid, f), randn(f, f, hid)
        expected = np.maximum(h.astype(np.float64) @ up, 0) @ down
        assert_close(zynbook.run(src, h=h, up_w=up, down_w=down), expected, "f32", "contraction")
