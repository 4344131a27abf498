"""Programs written from the spec's text (zynml-compute-system.md, gpu-kernel-library.md) and
docs/language.md as an outside tester writes them: attention under float masks that cover a
whole row, the library's fused operations written as one block (layer norm and a linear
layer, RMSNorm and RoPE, residual and layer norm, SwiGLU, GeGLU, softmax and dropout), a
feed-forward block staged in shared memory, scans in shared memory, triangular loops, and
integer and float edge values. Each runs on every device present and is compared with numpy
written here."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(6160)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------ attention under a float mask of -inf

_S, _D = 17, 8
_QKV = {n: _f32(1, 2, _S, _D) for n in "QKV"}
_FLOAT_MASK = np.where(RNG.random((_S, _S)) > 0.5, 0.0, -np.inf).astype(np.float32)
_FLOAT_MASK[:, 0] = 0.0
_FLOAT_MASK[3] = -np.inf                # query 3 sees no key

_THREE_PASS_BIAS = """let head_dim = 8
let y = compute(Q, K, V, fm) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq:
        var mx = -inf
        for j in 0..seq:
            mx = max(mx, dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim) + fm[i, j])
        var den = 0.0
        for j in 0..seq:
            den += exp(dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim) + fm[i, j] - mx)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq:
                acc += exp(dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim) + fm[i, j] - mx) / den * V[b, h, j, d]
            out[b, h, i, d] = acc
}
y
"""


def _softmax_attention(q, k, v, added):
    """numpy's softmax(q k^T / sqrt(D) + added) v, as the loops compute it: a row whose every
    score is -inf is NaN (exp(-inf - -inf))."""
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / np.sqrt(q.shape[-1]) + added
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("device", DEVICES)
def test_a_float_mask_of_minus_inf_over_a_whole_row_is_nan(device):
    """Attention with an added float mask of 0 and -inf (torch's additive mask), one query's
    row all -inf: the loops make that row NaN (its maximum is -inf, and exp(-inf - -inf) is
    NaN), as numpy and torch do; the attention schedule stored 0 there on `cpu:native` and
    WebGPU, where the recognised pattern had said NaN."""
    want = _softmax_attention(_QKV["Q"], _QKV["K"], _QKV["V"], _FLOAT_MASK)
    assert np.isnan(want[:, :, 3]).all() and not np.isnan(np.delete(want, 3, 2)).any()
    assert_equals_numpy(_run(device, _THREE_PASS_BIAS, fm=_FLOAT_MASK, **_QKV), want, 1e-5)


_SHIFTED_CAUSAL = _THREE_PASS_BIAS.replace(", fm)", ")").replace(" + fm[i, j]", "").replace(
    "        for j in 0..seq:\n            mx", "        for j in 0..seq:\n            if j + 5 <= i:\n                mx").replace(
    "        for j in 0..seq:\n            den", "        for j in 0..seq:\n            if j + 5 <= i:\n                den").replace(
    "            for j in 0..seq:\n                acc", "            for j in 0..seq:\n                if j + 5 <= i:\n                    acc")


@pytest.mark.parametrize("device", DEVICES)
def test_a_key_condition_that_admits_no_key_gives_zeros(device):
    """The same attention with a key condition (`if j + 5 <= i`) in place of the float mask:
    queries 0 to 4 see no key, and the loops leave their rows 0 (the sum is never divided
    by), beside numpy's softmax over the keys each other query sees."""
    keep = np.arange(_S)[None, :] + 5 <= np.arange(_S)[:, None]
    want = _softmax_attention(_QKV["Q"], _QKV["K"], _QKV["V"], np.where(keep, 0.0, -np.inf))
    want[:, :, :5] = 0.0
    assert_equals_numpy(_run(device, _SHIFTED_CAUSAL, **_QKV), want, 1e-5)


# ------------------------------------------------ the kernel library's fused operations as blocks

_X, _W, _G, _BETA = _f32(17, 33), _f32(33, 13), _f32(33), _f32(33)
_RES = _f32(17, 33)
_XR, _WR = _f32(17, 6), _f32(6)
_GATE, _UP = _f32(17, 1000), _f32(17, 1000)
_KEEP = RNG.random((17, 1000)) > 0.1


def _layer_norm(x, g, b, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def _rms_rope(x, w):
    """RMSNorm then RoPE over the two halves of each row (head_dim 6, base 10000)."""
    x = x.astype(np.float64)
    r = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * w
    angle = np.arange(len(x))[:, None] * 10000.0 ** (-np.arange(3) * 2.0 / 6)
    a, b = r[:, :3], r[:, 3:]
    return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                           a * np.sin(angle) + b * np.cos(angle)], -1)


def _softmax_rows(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


_erf = np.vectorize(math.erf)

FUSED = {
    "layer norm and a linear layer": ("""let eps = 1e-5
let y = compute(x, g, b, W) {
    @kernel fused
    for r in 0..rows:
        var mean = 0.0
        for i in 0..hidden:
            mean += x[r, i]
        mean /= hidden
        var v = 0.0
        for i in 0..hidden:
            v += (x[r, i] - mean) * (x[r, i] - mean)
        let inv = rsqrt(v / hidden + eps)
        for o in 0..outs:
            var acc = 0.0
            for i in 0..hidden:
                acc += ((x[r, i] - mean) * inv * g[i] + b[i]) * W[i, o]
            out[r, o] = acc
}
y
""", {"x": _X, "g": _G, "b": _BETA, "W": _W}, _layer_norm(_X, _G, _BETA) @ _W, 1e-4),
    "a residual and layer norm of tiles": ("""let cols = 33
let y = compute(x, res, g, b) {
    @kernel fused
    @workgroup(33)
    for r in 0..rows:
        let h = x[r] + res[r]
        let d = h - sum(h) / cols
        out[r] = d * rsqrt(sum(d * d) / cols + 0.00001) * g + b
}
y
""", {"x": _X, "res": _RES, "g": _G, "b": _BETA}, _layer_norm(_X + _RES, _G, _BETA), 1e-4),
    "rmsnorm and rope": ("""let half = 3
let y = compute(xs, wr) {
    @kernel fused
    for s in 0..seq:
        var ss = 0.0
        for d in 0..head_dim:
            ss += xs[s, d] * xs[s, d]
        let inv = rsqrt(ss / head_dim + 0.000001)
        for d in 0..half:
            let theta = float(s) * pow(10000.0, -2.0 * float(d) / float(head_dim))
            let a = xs[s, d] * inv * wr[d]
            let b2 = xs[s, d + half] * inv * wr[d + half]
            out[s, d] = a * cos(theta) - b2 * sin(theta)
            out[s, d + half] = a * sin(theta) + b2 * cos(theta)
}
y
""", {"xs": _XR, "wr": _WR}, _rms_rope(_XR, _WR), 1e-4),
    "swiglu": ("let y = compute(gt, up) {\n    @kernel elementwise\n    for i in 0..r, j in 0..c:\n"
               "        out[i, j] = silu(gt[i, j]) * up[i, j]\n}\ny\n", {"gt": _GATE, "up": _UP},
               _GATE / (1 + np.exp(-_GATE.astype(np.float64))) * _UP, 1e-5),
    "geglu of halves": ("let y = compute(gt, up) {\n    @kernel elementwise\n    for i in 0..r, j in 0..c:\n"
                        "        out[i, j] = gelu(gt[i, j]) * up[i, j]\n}\ny\n",
                        {"gt": _GATE.astype(np.float16), "up": _UP.astype(np.float16)},
                        (lambda g, u: (g * 0.5 * (1 + _erf(g / np.sqrt(2))) * u).astype(np.float16))(
                            _GATE.astype(np.float16).astype(np.float64),
                            _UP.astype(np.float16).astype(np.float64)), 3e-3),
    "softmax and dropout by a mask": ("""let p = 0.1
let y = compute(gt, keep) {
    for r in 0..rows:
        var mx = -inf
        for c in 0..cols:
            mx = max(mx, gt[r, c])
        var s = 0.0
        for c in 0..cols:
            s += exp(gt[r, c] - mx)
        for c in 0..cols:
            if keep[r, c]:
                out[r, c] = exp(gt[r, c] - mx) / s / (1.0 - p)
}
y
""", {"gt": _GATE, "keep": _KEEP}, np.where(_KEEP, _softmax_rows(_GATE.astype(np.float64)) / 0.9, 0), 1e-5),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(FUSED))
def test_library_fusions_written_as_one_block(name, device):
    src, inputs, want, tol = FUSED[name]
    assert_equals_numpy(_run(device, src, **inputs), want, tol)


# ------------------------------------------------ loops whose iterations overlap through % and /

def _in_order(rows, cols, index, shape):
    """numpy's `out` of `out[index(i, j)] = 10 * i + j` run in loop order (the last write
    stays)."""
    out = np.zeros(shape, np.int32)
    for i in range(rows):
        for j in range(cols):
            out[index(i, j)] = 10 * i + j
    return out


OVERLAPS = {
    "i + j % 3, j / 2": (5, 6, lambda i, j: (i + j % 3, j // 2), (7, 3)),
    "i + j % 3": (5, 8, lambda i, j: i + j % 3, (7,)),
    "i * 3 + j / 2": (5, 8, lambda i, j: i * 3 + j // 2, (16,)),
    "i * 4 + j / 2": (5, 8, lambda i, j: i * 4 + j // 2, (20,)),
    "i * 4 + j % 4": (5, 8, lambda i, j: i * 4 + j % 4, (20,)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", list(OVERLAPS))
def test_writes_that_overlap_through_a_remainder_run_in_order(index, device):
    """`out[i + j % 3, j / 2]`: iterations of `i` write the same positions (i = 1, j = 0 and
    i = 0, j = 1 both write out[1, 0]), so the loop runs in order and the last write stays.
    The parallel-loop analysis took `j % 3` as one value, the same in every iteration, and
    marked `i` parallel: the reference and WebGPU kept the first write."""
    rows, cols, at, shape = OVERLAPS[index]
    src = (f"let y = compute() {{\n    for i in 0..{rows}, j in 0..{cols}:\n"
           f"        out[{index}] = i * 10 + j\n}}\ny\n")
    assert_equals_numpy(_run(device, src), _in_order(rows, cols, at, shape), 0)


@pytest.mark.parametrize("index, parallel", [("i * 4 + j % 4", True), ("i * 4 + j / 2", True),
                                             ("i + j % 3", False), ("i * 3 + j / 2", False)])
def test_a_remainder_of_an_inner_variable_counts_its_values(index, parallel):
    """The loop over `i` stays parallel where the remainder's or quotient's values keep the
    iterations apart (j % 4 or j / 2 within 0..3 beside i * 4), and runs in order where they
    do not."""
    src = f"let y = compute() {{\n    for i in 0..5, j in 0..8:\n        out[{index}] = i * 10 + j\n}}\ny\n"
    assert ("parallel for i" in zynbook.compile(src).cir_text()) == parallel


def _accumulated(k, rows=5):
    out = np.zeros(4 * k + 1, np.int32)
    for i in range(rows):
        out[i * k] += i + 1
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [0, 1, 2])
def test_a_stride_of_a_host_int_that_is_zero_writes_one_position(k, device):
    """`out[i * k] += i + 1` with the host int k = 0: every iteration adds into out[0] (15);
    the analysis took k as a factor that is never 0, marked `i` parallel, and the reference
    and WebGPU kept one iteration's value (5)."""
    src = f"let k = {k}\nlet y = compute() {{\n    for i in 0..5:\n        out[i * k] += i + 1\n}}\ny\n"
    assert_equals_numpy(_run(device, src), _accumulated(k), 0)


@pytest.mark.parametrize("src, parallel", [
    ("let k = 2\nlet y = compute(x) {\n    for i in 0..n:\n        out[i * k] = x[i]\n}\ny\n", False),
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i * n] = x[i]\n}\ny\n", True),
    ("let y = compute(x) {\n    for b in 0..B, s in 0..S:\n        out[b * S + s] = x[b, s]\n}\ny\n", True),
    ("let y = compute(x) {\n    for r in 0..R:\n        for c in 0..C:\n            out[r * C + c] = x[r, c]\n"
     "        for c in 0..C:\n            out[r * C + c] += 1.0\n}\ny\n", True)])
def test_a_stride_is_a_size_of_a_loop_around_the_store(src, parallel):
    """A size that bounds a loop around the store (from 0) is at least 1 where it runs, so
    `out[b * S + s]` and `out[i * n]` stay parallel; a host int may be 0."""
    first = next(ln for ln in zynbook.compile(src).cir_text().splitlines() if " in 0.." in ln)
    assert first.strip().startswith("parallel for") == parallel, first


# ------------------------------------------------ a fold that changed an operand's weakness

_H8 = np.int8([126, -128, 100])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", ["(i + 0)", "(0 + i)", "(i * 1)", "(i - 0)"])
def test_a_loop_variable_plus_zero_beside_i8(index, device):
    """`(i + 0) + h[j]` on i8 `h` is i32 arithmetic, as `i + h[j]` is (a loop variable is an
    i32 value, not a literal, and arithmetic on it with literals is too). Simplify folds
    `i + 0` to the bare `i` under the addition, which must keep its type (it was an internal
    compiler error: "`i + h[j]` is typed i8; i32 + i8 gives i32")."""
    src = f"let y = compute(h) {{\n    for i in 0..4, j in 0..3:\n        out[i, j] = {index} + h[j]\n}}\ny\n"
    want = np.arange(4, dtype=np.int32)[:, None] + _H8[None, :].astype(np.int32)
    assert_equals_numpy(_run(device, src, h=_H8), want, 0)
