"""Structural recognition of kernels and the schedules chosen for them, checked with
programs a user would write that differ from the spec's text in small ways: matmuls with
transposed operands, an alpha, a bias and relu epilogue, other names, a start value, a
subtracted or guarded accumulation (with inf and NaN operands); batched products whose
operands share or rotate the batch; convolutions with stride 2, padding 0 or 2, non-square
filters and odd channel counts; softmax, layer norm and RMS norm rows of 1 to 5000 elements
with other reduction orders and eps values; reductions along either axis (argmax with a NaN);
attention with renamed variables, causal conditions written several ways, a negative scale,
Q and K one tensor, more or fewer keys than queries; flash attention with blocks of 16 and 48,
head_dim 8 to 80, one query, f16.

Near misses (a decaying or squared-operand accumulation, a softmax without the maximum's
subtraction, a flash body without the rescale) must not be recognised and must still give
numpy's answer. Each program runs on every local device against numpy written here, and the
schedule the CUDA target chooses runs on the launch-IR emulator (small sizes)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import zynbook
from compute_testing import emulate_kernel, lower_block, wanted_devices
from zynbook.compiler import schedules
from zynbook.compiler.passes import recognise
from zynbook.compiler.targets import cuda_target

# the reference, the C++ device and WebGPU on Vulkan (GL compiles the same WGSL)
DEVICES = [d for d in wanted_devices() if d in ("cpu", "cpu:native", "vulkan:0")]
RNG = np.random.default_rng(20261130)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _block(body, inputs, kind=""):
    head = f"    @kernel {kind}\n" if kind else ""
    return f"let y = compute({', '.join(inputs)}) {{\n{head}{body}\n}}\ny\n"


def _on_devices(src, inputs, want, tol, sizes=None):
    """`src` equals `want` on every local device."""
    for dev in DEVICES:
        got = np.asarray(zynbook.run(src, device=dev, **inputs, **(sizes or {})))
        assert got.shape == np.shape(want), (dev, got.shape, np.shape(want))
        if np.asarray(want).dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=dev)
        else:
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol,
                                       equal_nan=True, err_msg=dev)


def _on_cuda(src, inputs, want, tol, schedule=None, sizes=None):
    """The CUDA target's chosen schedule (named `schedule` where given) equals `want` on the
    launch-IR emulator."""
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    k, ins, sz, sc = lower_block(src, arrays, None, sizes)
    prog = schedules.build(k, cuda_target(), sz)
    if schedule is not None:
        assert f"({schedule}:" in prog.schedule, prog.schedule
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    return k


def _everywhere(src, inputs, want, tol, schedule=None, sizes=None):
    _on_devices(src, inputs, want, tol, sizes)
    return _on_cuda(src, inputs, want, tol, schedule, sizes)


# ------------------------------------------------------------------ matmul

def _mm(body, kind="matmul"):
    return _block(body, ["A", "B"], kind)


MATMULS = {
    # name: (body, numpy of (A, B) in f64, operands stored transposed)
    "renamed_alpha": ("""    for row in 0..M, col in 0..N:
        var acc = 0.0
        for kk in 0..K:
            acc += B[kk, col] * A[row, kk]
        out[row, col] = acc * 0.5""", lambda a, b: a @ b * 0.5, False),
    "both_transposed": ("""    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[k, i] * B[j, k]
        out[i, j] = sum""", lambda a, b: a @ b, True),
    "out_transposed": ("""    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s += A[i, k] * B[k, j]
        out[j, i] = s""", lambda a, b: (a @ b).T, False),
    "bias_relu": ("""    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s += A[i, k] * B[k, j]
        out[i, j] = max(s + 1.0, 0.0)""", lambda a, b: np.maximum(a @ b + 1.0, 0.0), False),
    "start_and_plain_assign": ("""    for i in 0..M, j in 0..N:
        var s = 1.5
        for k in 0..K:
            s = s + A[i, k] * B[k, j] * 2.0
        out[i, j] = s / 4.0""", lambda a, b: (a @ b * 2.0 + 1.5) / 4.0, False),
    "subtracted": ("""    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s -= A[i, k] * B[k, j]
        out[i, j] = s""", lambda a, b: -(a @ b), False),
}


@pytest.mark.parametrize("M,N,K", [(16, 16, 1), (17, 33, 65)])
@pytest.mark.parametrize("name", sorted(MATMULS))
def test_matmul_variants_run_as_gemm(name, M, N, K):
    body, ref, transposed = MATMULS[name]
    a, b = _f32(M, K), _f32(K, N)
    inputs = {"A": a.T.copy(), "B": b.T.copy()} if transposed else {"A": a, "B": b}
    src = _mm(body)
    k = _everywhere(src, inputs, ref(a.astype(np.float64), b.astype(np.float64)), 1e-3, "gemm")
    assert recognise.contraction(k)


@pytest.mark.parametrize("cond,ok", [("k < j", lambda i, j, k: k < j), ("i + k < 25", lambda i, j, k: i + k < 25),
                                     ("k != 5", lambda i, j, k: k != 5)])
def test_guarded_matmul_skips_infinite_operands(cond, ok):
    """A product the condition leaves out is skipped, not multiplied by 0 (inf * 0 is NaN)."""
    M, N, K = 20, 24, 30
    a, b = _f32(M, K), _f32(K, N)
    a[3, 5], a[4, 29], b[7, 2] = np.inf, -np.inf, np.nan
    i, j, k = np.ix_(np.arange(M), np.arange(N), np.arange(K))
    keep = np.broadcast_to(ok(i, j, k), (M, N, K))
    with np.errstate(invalid="ignore"):
        terms = a.astype(np.float64)[:, None, :] * b.T.astype(np.float64)[None, :, :]
    want = np.where(keep, terms, 0.0).sum(-1)
    src = _mm(f"""    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            if {cond}:
                s += A[i, k] * B[k, j]
        out[i, j] = s""")
    _everywhere(src, {"A": a, "B": b}, want, 1e-3, "gemm")


NOT_MATMULS = {
    "decaying": ("s = s * 0.5 + A[i, k] * B[k, j]",
                 lambda a, b: functools.reduce(lambda s, k: s * 0.5 + np.outer(a[:, k], b[k]),
                                               range(a.shape[1]), np.zeros((a.shape[0], b.shape[1])))),
    "squared_operand": ("s += A[i, k] * A[i, k] * B[k, j]", lambda a, b: (a * a) @ b),
    "clamped": ("s = min(s + A[i, k] * B[k, j], 1.0)",
                lambda a, b: functools.reduce(lambda s, k: np.minimum(s + np.outer(a[:, k], b[k]), 1.0),
                                              range(a.shape[1]), np.zeros((a.shape[0], b.shape[1])))),
}


@pytest.mark.parametrize("name", sorted(NOT_MATMULS))
def test_accumulations_that_are_not_products_fall_back(name):
    update, ref = NOT_MATMULS[name]
    a, b = _f32(17, 37), _f32(37, 33)
    src = _mm(f"""    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            {update}
        out[i, j] = s""", kind="")
    k = _everywhere(src, {"A": a, "B": b}, ref(a.astype(np.float64), b.astype(np.float64)), 1e-3)
    assert not recognise.contraction(k)


BATCHED = {
    "spec": ("A[b, i, k] * B[b, k, j]", "out[b, i, j]", (3, 17, 9), (3, 9, 20),
             lambda a, b: np.einsum("bik,bkj->bij", a, b)),
    "shared_A_out_ibj": ("A[i, k] * B[b, k, j]", "out[i, b, j]", (17, 9), (3, 9, 20),
                         lambda a, b: np.einsum("ik,bkj->ibj", a, b)),
    "odd_layouts": ("A[k, b, i] * B[b, k, j]", "out[j, b, i]", (9, 3, 17), (3, 9, 20),
                    lambda a, b: np.einsum("kbi,bkj->jbi", a, b)),
    "rotated_batch": ("A[b, i, k] * B[(b + 1) % batch, k, j]", "out[b, i, j]", (3, 17, 9), (3, 9, 20),
                      lambda a, b: np.einsum("bik,bkj->bij", a, np.roll(b, -1, 0))),
}


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_batched_matmul_variants(name):
    prod, store, sa, sb, ref = BATCHED[name]
    a, b = _f32(*sa), _f32(*sb)
    src = _mm(f"""    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += {prod}
        {store} = sum""", kind="batched_matmul")
    _everywhere(src, {"A": a, "B": b}, ref(a.astype(np.float64), b.astype(np.float64)), 1e-4, "gemm")


# ------------------------------------------------------------------ conv2d

CONV = """let y = compute(inp, ker, bias) {
    @kernel conv2d
    for b in 0..batch, oc in 0..out_channels:
        for oh in 0..out_h, ow in 0..out_w:
            var sum = bias[oc]
            for ic in 0..in_channels:
                for kh in 0..kernel_h, kw in 0..kernel_w:
                    let ih = oh * STRIDE + kh - PAD
                    let iw = ow * STRIDE + kw - PAD
                    if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:
                        sum += inp[b, ic, ih, iw] * ker[oc, ic, kh, kw]
            out[b, oc, oh, ow] = sum
}
y
"""


def _conv_numpy(x, w, bias, stride, pad):
    x, w = x.astype(np.float64), w.astype(np.float64)
    KH, KW = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = (xp.shape[2] - KH) // stride + 1, (xp.shape[3] - KW) // stride + 1
    out = sum(np.einsum("bchw,oc->bohw", xp[:, :, kh:kh + stride * OH:stride, kw:kw + stride * OW:stride],
                        w[:, :, kh, kw]) for kh in range(KH) for kw in range(KW))
    return out + bias.astype(np.float64)[None, :, None, None]


@pytest.mark.parametrize("B,C,H,W,O,KH,KW,stride,pad,dtype,tol", [
    (1, 3, 7, 9, 16, 3, 2, 2, 2, np.float32, 1e-3), (2, 5, 6, 6, 16, 3, 3, 1, 0, np.float32, 1e-3),
    (1, 7, 8, 8, 17, 5, 3, 2, 2, np.float32, 1e-3), (1, 3, 7, 9, 16, 3, 2, 2, 2, np.float16, 3e-2)])
def test_conv2d_strides_paddings_and_odd_channels(B, C, H, W, O, KH, KW, stride, pad, dtype, tol):
    x = _f32(B, C, H, W).astype(dtype)
    w, bias = _f32(O, C, KH, KW).astype(dtype), _f32(O).astype(dtype)
    want = _conv_numpy(x, w, bias, stride, pad)
    sizes = {"out_h": want.shape[2], "out_w": want.shape[3]}
    src = CONV.replace("STRIDE", str(stride)).replace("PAD", str(pad))
    _everywhere(src, {"inp": x, "ker": w, "bias": bias}, want, tol, "gemm", sizes)


# ------------------------------------------------------------------ rows

def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


ROWS = {
    "softmax_first_element_start": ("""    for r in 0..R:
        var m = x[r, 0]
        for c in 0..C:
            m = max(x[r, c], m)
        var total = 0.0
        for c in 0..C:
            total = exp(x[r, c] - m) + total
        let inv = 1.0 / total
        for c in 0..C:
            out[r, c] = exp(x[r, c] - m) * inv""", _softmax, 1e-5),
    "layer_norm_eps_half": ("""    for b in 0..R:
        var mean = 0.0
        for i in 0..C:
            mean += x[b, i]
        mean /= C
        var v = 0.0
        for i in 0..C:
            let diff = x[b, i] - mean
            v += diff * diff
        v /= C
        let inv_std = rsqrt(v + 0.5)
        for i in 0..C:
            out[b, i] = (x[b, i] - mean) * inv_std""",
                            lambda x: (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 0.5), 1e-4),
    "rms_norm": ("""    for b in 0..R:
        var ss = 0.0
        for i in 0..C:
            ss += x[b, i] * x[b, i]
        let rms = sqrt(ss / C + 1e-5)
        for i in 0..C:
            out[b, i] = x[b, i] / rms""", lambda x: x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5), 1e-4),
    "min_and_max_in_one_loop": ("""    for b in 0..R:
        var lo = inf
        var hi = -inf
        for i in 0..C:
            lo = min(lo, x[b, i])
            hi = max(hi, x[b, i])
        for i in 0..C:
            out[b, i] = (x[b, i] - lo) / (hi - lo + 1.0)""",
                                lambda x: (x - x.min(1, keepdims=True)) / (np.ptp(x, 1, keepdims=True) + 1.0), 1e-4),
    "product": ("""    for b in 0..R:
        var p = 1.0
        for i in 0..C:
            p *= 1.0 + x[b, i] * 0.01
        for i in 0..C:
            out[b, i] = x[b, i] * p""", lambda x: x * np.prod(1.0 + x * 0.01, 1, keepdims=True), 1e-4),
}


@pytest.mark.parametrize("R,C", [(3, 1), (5, 33), (2, 5000)])
@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_kernels(name, R, C):
    body, ref, tol = ROWS[name]
    x = _f32(R, C)
    src = _block(body, ["x"])
    _on_devices(src, {"x": x}, ref(x.astype(np.float64)), tol)
    if C >= 32:
        _on_cuda(src, {"x": x}, ref(x.astype(np.float64)), tol, "rows")


def test_softmax_rows_with_nan_and_inf():
    x = _f32(3, 130)
    x[0, 65], x[1, 0] = np.nan, np.inf
    src = _block(ROWS["softmax_first_element_start"][0], ["x"])
    with np.errstate(invalid="ignore"):
        want = _softmax(x.astype(np.float64))
    _everywhere(src, {"x": x}, want, 1e-5, "rows")


def test_softmax_without_the_maximum_is_still_a_softmax():
    """No max subtraction: exp of each element over their sum, as written."""
    x = _f32(3, 70)
    src = _block("""    for r in 0..R:
        var s = 0.0
        for c in 0..C:
            s += exp(x[r, c])
        for c in 0..C:
            out[r, c] = exp(x[r, c]) / s""", ["x"])
    e = np.exp(x.astype(np.float64))
    _everywhere(src, {"x": x}, e / e.sum(1, keepdims=True), 1e-5, "rows")


def test_a_running_recurrence_in_a_row_is_not_a_reduction():
    """`s = x - s` and a prefix sum's maximum run in order, as written."""
    x = _f32(3, 70)
    x64 = x.astype(np.float64)
    src = _block("""    for r in 0..R:
        var s = 0.0
        var t = 0.0
        for c in 0..C:
            s = x[r, c] - s
            t = max(t, s)
        for c in 0..C:
            out[r, c] = t""", ["x"])
    s, t = np.zeros(3), np.zeros(3)
    for c in range(70):
        s = x64[:, c] - s
        t = np.maximum(t, s)
    _everywhere(src, {"x": x}, np.repeat(t[:, None], 70, 1), 1e-4)


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("R,C", [(1, 1), (3, 1000), (257, 5)])
@pytest.mark.parametrize("op,axis", [("+", 0), ("+", 1), ("max", 0), ("min", 1)])
def test_reduce_along_either_axis(op, axis, R, C):
    x = _f32(R, C)
    want = {"+": np.sum, "max": np.max, "min": np.min}[op](x.astype(np.float64), axis=axis)
    src = _block("    for i in 0..rows, j in 0..cols:\n        yield x[i, j]", ["x"], f"reduce({op}, axis={axis})")
    _everywhere(src, {"x": x}, want, 1e-4, "reduce")


@pytest.mark.parametrize("n", [1, 1285, 3000])
def test_argmax_with_a_nan(n):
    v = _f32(n)
    v[n // 2] = np.nan
    src = _block("    for i in 0..n:\n        yield (v[i], i)", ["v"], "reduce(argmax)")
    _everywhere(src, {"v": v}, np.int32(np.argmax(v)), 0, "reduce")


# ------------------------------------------------------------------ attention

def _qkv(S, D, SK=None, dtype=np.float32, heads=2):
    shape = lambda s: (1, heads, s, D)
    return {n: _f32(*shape(S if n == "Q" else SK or S)).astype(dtype) for n in "QKV"}


def _attention_numpy(a, scale, ok=None):
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * scale
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return np.einsum("bhij,bhjd->bhid", p, V) / p.sum(-1, keepdims=True)


def _three_pass(score, cond=None, names=("m", "l", "acc", "j", "d"), weight=None, inputs="Q, K, V"):
    m, l, acc, j, d = names
    sc = score.replace("%j", j)

    def key(line, n):
        pad = " " * n
        return f"{pad}if {cond}:\n{pad}    {line}" if cond else pad + line
    weight = weight or f"exp({sc} - {m})"
    return f"""let y = compute({inputs}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S:
        var {m} = -inf
        for {j} in 0..SK:
{key(f"{m} = max({m}, {sc})", 12)}
        var {l} = 0.0
        for {j} in 0..SK:
{key(f"{l} += exp({sc} - {m})", 12)}
        for {d} in 0..D:
            var {acc} = 0.0
            for {j} in 0..SK:
{key(f"{acc} += {weight} * V[b, h, {j}, {d}]", 16)}
            out[b, h, i, {d}] = {acc} / {l}
}}
y
"""


DOT = "dot(Q[b, h, i], K[b, h, %j])"
# condition: (numpy of it, recognised as causal: the key loop may end at the query)
CAUSAL = {"j <= i": (lambda i, j: j <= i, True), "i >= j": (lambda i, j: j <= i, True),
          "j < i + 1": (lambda i, j: j <= i, True), "not (j > i)": (lambda i, j: j <= i, True),
          "j - i <= 0": (lambda i, j: j <= i, True), "i + 1 > j": (lambda i, j: j <= i, True),
          "j < i": (lambda i, j: j < i, False), "j <= i + 1": (lambda i, j: j <= i + 1, False)}


@pytest.mark.parametrize("cond", sorted(CAUSAL))
def test_causal_conditions_written_several_ways(cond):
    a = _qkv(21, 16)
    fn, causal = CAUSAL[cond]
    src = _three_pass(DOT + " * 0.125", cond)
    k = _everywhere(src, a, _attention_numpy(a, 0.125, fn(np.arange(21)[:, None], np.arange(21)[None])),
                    2e-4, "attention")
    assert recognise.attention(k).causal == causal


@pytest.mark.parametrize("score,scale", [(DOT + " / sqrt(D)", 1 / np.sqrt(40)), (DOT + " * -0.125", -0.125),
                                         ("dot(K[b, h, %j], Q[b, h, i]) / 8.0", 0.125)])
def test_attention_scales_and_names(score, scale):
    a = _qkv(21, 40)
    src = _three_pass(score, names=("mx", "den", "o", "k", "e"))
    _everywhere(src, a, _attention_numpy(a, scale), 2e-4, "attention")


@pytest.mark.parametrize("S,SK", [(45, 20), (20, 45)])
def test_causal_cross_attention(S, SK):
    a = _qkv(S, 16, SK)
    src = _three_pass(DOT + " * 0.25", "j <= i")
    _everywhere(src, a, _attention_numpy(a, 0.25, np.arange(SK)[None] <= np.arange(S)[:, None]), 2e-4,
                "attention")


def test_self_attention_with_q_and_k_one_tensor():
    x, v = _f32(1, 2, 21, 16), _f32(1, 2, 21, 16)
    src = _three_pass("dot(X[b, h, i], X[b, h, %j]) * 0.25", inputs="X, V")
    _everywhere(src, {"X": x, "V": v}, _attention_numpy({"Q": x, "K": x, "V": v}, 0.25), 2e-4, "attention")


def test_weights_without_the_maximum_are_not_attention():
    """The weighted sum's exp(score) without `- m` is not softmax's: the loops as written."""
    a = _qkv(21, 16)
    src = _three_pass(DOT + " * 0.125", weight="exp(dot(Q[b, h, i], K[b, h, j]) * 0.125)")
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", Q, K) * 0.125
    want = np.einsum("bhij,bhjd->bhid", np.exp(s), V) / np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)
    k = _everywhere(src, a, want, 2e-4)
    assert not recognise.attention(k)


def _flash(bq, bk, scale="/ sqrt(head_dim)", update="exp(m - m_new) * o + exp(S - m_new) @ V_block",
           m_new="max(m, row_max(S))", kind="flash_attention"):
    return f"""let attn = compute(Q, K, V) {{
    {"@kernel " + kind if kind else ""}
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step {bq}:
            var m = -inf
            var l = 0.0
            var o = zeros(min({bq}, seq_len - q_block), head_dim)
            for kv_block in 0..seq_len step {bk}:
                let K_block = K[b, h, kv_block:kv_block+{bk}]
                let V_block = V[b, h, kv_block:kv_block+{bk}]
                let S = Q[b, h, q_block:q_block+{bq}] @ transpose(K_block) {scale}
                let m_new = {m_new}
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = {update}
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+{bq}] = o / l
}}
attn
"""


@pytest.mark.parametrize("bq,bk,S,D,dtype,tol", [(16, 16, 37, 8, np.float32, 2e-4), (48, 64, 70, 40, np.float32, 2e-4),
                                                 (64, 16, 1, 64, np.float32, 2e-4), (16, 48, 37, 80, np.float16, 5e-3)])
def test_flash_blocks_head_dims_and_dtypes(bq, bk, S, D, dtype, tol):
    a = _qkv(S, D, dtype=dtype)
    _everywhere(_flash(bq, bk), a, _attention_numpy(a, 1 / np.sqrt(D)), tol, "attention")


def test_flash_with_commuted_updates():
    a = _qkv(37, 16)
    src = _flash(16, 16, "* 0.25", "o * exp(m - m_new) + exp(S - m_new) @ V_block", "max(row_max(S), m)")
    _everywhere(src, a, _attention_numpy(a, 0.25), 2e-4, "attention")


def test_flash_without_the_rescale_is_not_attention():
    a = _qkv(37, 16)
    Q, K, V = (a[n].astype(np.float64) for n in "QKV")
    want = np.zeros_like(Q)
    for q0 in range(0, 37, 16):
        q = Q[:, :, q0:q0 + 16]
        m, l, o = np.full(q.shape[:3] + (1,), -np.inf), np.zeros(q.shape[:3] + (1,)), np.zeros(q.shape)
        for k0 in range(0, 37, 16):
            s = q @ np.swapaxes(K[:, :, k0:k0 + 16], -1, -2) * 0.25
            mn = np.maximum(m, s.max(-1, keepdims=True))
            l = np.exp(m - mn) * l + np.exp(s - mn).sum(-1, keepdims=True)
            o, m = o + np.exp(s - mn) @ V[:, :, k0:k0 + 16], mn
        want[:, :, q0:q0 + 16] = o / l
    src = _flash(16, 16, "* 0.25", "o + exp(S - m_new) @ V_block", kind="")
    k = _everywhere(src, a, want, 2e-4)
    assert not recognise.attention(k)


@pytest.mark.parametrize("cond", ["not (j > i)", "j - i <= 0"])
def test_causal_forms_on_the_tensor_core_kernels(cond):
    """A causal condition in another spelling takes the tensor-core kernels' causal path
    (mma.sync and wgmma, f16, on the emulator) and gives the causal answer, numpy's."""
    import attention_sources as A
    from test_attention_mma import CUDA, SCHED, _check, _lower
    from zynbook.compiler.schedules import attention_mma, attention_wgmma
    from zynbook.compiler.schedules.attention import match
    text = A.three_pass("causal", "const")          # the numpy answer reads `j <= i` from it
    k, ins, sz, sc = _lower(text.replace("j <= i", cond), "f16", 70, 70, 16)
    shape = match(k, CUDA, sz)[0]
    assert shape.p.causal
    for p in (attention_wgmma.default(16), attention_mma.choices(CUDA, shape, sz)[-1]):
        _check(text, SCHED.build(k, CUDA, sz, p), k, ins, sz, sc)
