"""Kernel programs written from docs/language.md's text for each schedule (gemm, reduce,
rows, vector, attention and flash attention, block, generic), varied as a user writes them:
renamed accumulators and loop variables (`float`, `int`, `var`, `tile`, `acc`, `i0`),
other loop orders, transposed, strided and offset operands, scales written as `*`, `/` or a
host scalar, bool, float, causal and computed masks, grouped-query heads, f16 and i32,
odd `@workgroup`/`@tile` values and sizes that are multiples of nothing. Each runs on
every device present and is compared with numpy written here; the schedule the CUDA target
picks is checked (structure, not text, decides it), and a sample runs as launch IR on the
emulator for several targets and as MSL on the Metal model."""
from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.compiler import schedules
from zynbook.compiler.targets import cuda_target, metal_target, webgpu_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compute_testing import emulate_kernel, lower_block, wanted_devices  # noqa: E402
from tolerances import tolerance  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

RNG = np.random.default_rng(4242)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _gelu(z):
    z = np.asarray(z, np.float64)
    return z * 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


def _bf16(x):
    """f32 to bf16 (to nearest, ties to even), held in f32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def _f16_running_dot(a, b):
    """a @ b summed in an f16 accumulator rounded at every step, the products in f32."""
    out = np.zeros((a.shape[0], b.shape[1]), np.float16)
    for k in range(a.shape[1]):
        out = (out.astype(np.float32) + np.outer(a[:, k], b[k])).astype(np.float16)
    return out


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attention(Q, K, V, scale, keep=None, bias=None, group=1):
    """softmax(Q K^T * scale + bias, masked to `keep`) V in f64; K and V of head h / group."""
    K = np.repeat(K.astype(np.float64), group, 1)
    V = np.repeat(V.astype(np.float64), group, 1)
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    return _softmax(s) @ V


def _three_pass(cond=None, inputs="Q, K, V", score="dot(Q[b, h, i], K[b, h, j]) * 0.25",
                value="V[b, h, j, d]"):
    """The spec's three-pass attention, with `cond` as the mask `if` of every key loop."""
    def guarded(line, pad):
        return (f"{pad}{line}" if cond is None else f"{pad}if {cond}:\n{pad}    {line}")
    return f"""
let y = compute({inputs}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S:
        var m = -inf
        for j in 0..S:
{guarded(f"m = max(m, {score})", " " * 12)}
        var l = 0.0
        for j in 0..S:
{guarded(f"l += exp({score} - m)", " " * 12)}
        for d in 0..D:
            var acc = 0.0
            for j in 0..S:
{guarded(f"acc += exp({score} - m) * {value}", " " * 16)}
            out[b, h, i, d] = acc / l
}}
y
"""


def _flash(bq, bk, score, o_tile="zeros(BQ, D)", ann="", kv="K[b, h, ks:ks+BK]",
           vv="V[b, h, ks:ks+BK]"):
    text = f"""
let y = compute(Q, K, V) {{
    @kernel flash_attention
    {ann}
    for b in 0..B, h in 0..H:
        for qs in 0..S step BQ:
            var top = -inf
            var den = 0.0
            var acc = {o_tile}
            for ks in 0..S step BK:
                let sc = Q[b, h, qs:qs+BQ] @ transpose({kv}) {score}
                let nm = max(top, row_max(sc))
                let p = exp(sc - nm)
                den = exp(top - nm) * den + row_sum(p)
                acc = exp(top - nm) * acc + p @ {vv}
                top = nm
            out[b, h, qs:qs+BQ] = acc / den
}}
y
"""
    return text.replace("BQ", str(bq)).replace("BK", str(bk))


def _cases():
    c = {}
    # ---------------------------------------------------------------- gemm
    A, B, bias = _f32(17, 33), _f32(33, 77), _f32(77)
    c["gemm_float_accumulator_transposed_a_bias_relu"] = ("""
let y = compute(At, B, bias) {
    @kernel matmul
    for j in 0..N, i in 0..M:
        var float = 0.0
        for k in 0..K:
            float += At[k, i] * B[k, j]
        out[i, j] = relu(float + bias[j])
}
y
""", {"At": A.T.copy(), "B": B, "bias": bias}, np.maximum(A @ B + bias, 0), "f32",
        "contraction", "gemm")
    a, b = _f32(1, 130), _f32(130, 3)
    c["gemm_m1_host_scale"] = ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += a[i, k] * b[k, j]
        out[i, j] = acc * alpha
}
y
""", {"a": a, "b": b, "alpha": 0.5}, a @ b * 0.5, "f32", "contraction", "block")
    x, w = _f32(33, 1), _f32(1, 2)
    c["gemm_k1_gelu_of_a_division"] = ("""
let y = compute(x, w) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var tile = 0.0
        for k in 0..K:
            tile += x[i, k] * w[k, j]
        out[i, j] = gelu(tile / 3.0)
}
y
""", {"x": x, "w": w}, _gelu(x @ w / 3), "f32", "contraction", "generic")
    x, w, r = _f32(77, 40), _f32(257, 40), _f32(77, 257)
    c["gemm_b_transposed_residual_int_accumulator"] = ("""
let y = compute(x, w, r) {
    @kernel matmul
    for i0 in 0..M, i1 in 0..N:
        var int = 0.0
        for i2 in 0..K:
            int += w[i1, i2] * x[i0, i2]
        out[i0, i1] = r[i0, i1] + int
}
y
""", {"x": x, "w": w, "r": r}, r + x @ w.T, "f32", "contraction", "gemm")
    p, q = _f32(3, 5, 7).astype(np.float16), _f32(3, 7, 2).astype(np.float16)
    c["batched_matmul_f16_products_in_typed_f32_var"] = ("""
let y = compute(p, q) {
    @kernel batched_matmul
    for b in 0..Bt, i in 0..M, j in 0..N:
        var var: f32 = 0.0
        for k in 0..K:
            var += f32(p[b, i, k]) * f32(q[b, k, j])
        out[b, i, j] = var
}
y
""", {"p": p, "q": q}, p.astype(np.float32) @ q.astype(np.float32), "f32", "contraction",
        "generic")
    a = RNG.integers(-5, 5, (9, 13)).astype(np.int32)
    b = RNG.integers(-5, 5, (13, 6)).astype(np.int32)
    c["gemm_i32"] = ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 0
        for k in 0..K:
            s += a[i, k] * b[k, j]
        out[i, j] = s
}
y
""", {"a": a, "b": b}, a @ b, "i32", "exact", "generic")
    a, b = _f32(2, 1025), _f32(1025, 1)
    c["gemm_n1_long_k_untyped_operands_swapped"] = ("""
let y = compute(a, b) {
    for i in 0..M, j in 0..N:
        var out_ = 0.0
        for k in 0..K:
            out_ += b[k, j] * a[i, k]
        out[i, j] = out_
}
y
""", {"a": a, "b": b}, a @ b, "f32", "contraction", "block")
    A, B = _f32(40, 67), _f32(33, 36)
    c["gemm_strided_and_offset_k"] = ("""
let y = compute(A, B) {
    @kernel matmul
    for i in 0..40, j in 0..36:
        var acc = 0.0
        for k in 0..33:
            acc = acc + A[i, 2 * k] * B[k, j] + A[i, k + 1] * B[k, j]
        out[i, j] = acc
}
y
""", {"A": A, "B": B}, (A[:, 0:66:2] + A[:, 1:34]) @ B, "f32", "contraction", "generic")
    G = _f32(40, 40)
    c["gemm_gram_of_one_input_odd_tile_and_workgroup"] = ("""
let y = compute(G) {
    @kernel matmul
    @tile(block_m=3, block_n=5, block_k=7)
    @workgroup(7, 3)
    for i in 0..M, j in 0..M:
        var acc = 0.0
        for k in 0..K:
            acc = acc + G[i, k] * G[j, k]
        out[i, j] = acc
}
y
""", {"G": G}, G @ G.T, "f32", "contraction", "gemm")
    # `@kernel matmul` bodies that accumulate products in other words: the sum in either
    # order, the product in a `let`, a typed accumulator (each was refused with "this body
    # has no loop accumulating products")
    A, B = _f32(40, 33), _f32(33, 36)
    c["matmul_product_held_in_a_let_bf16_epilogue"] = ("""
let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            let p = A[i, k] * B[k, j]
            acc += p
        out[i, j] = f32(bf16(acc))
}
y
""", {"A": A, "B": B}, _bf16(A @ B), "f16", "contraction", "gemm")   # a bf16 step: the
    # f32 sum's rounding to bf16 turns on its order (numpy's BLAS's, the devices' own)
    c["matmul_accumulator_added_last"] = ("""
let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc = A[i, k] * B[k, j] + acc
        out[i, j] = acc
}
y
""", {"A": A, "B": B}, A @ B, "f32", "contraction", "gemm")
    a, b = _f32(5, 33), _f32(33, 4)
    c["matmul_into_an_f16_accumulator"] = ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc: f16 = 0.0
        for k in 0..K:
            acc += a[i, k] * b[k, j]
        out[i, j] = acc
}
y
""", {"a": a, "b": b}, _f16_running_dot(a, b), "f16", "reduction", "generic")
    # a constant factor inside the product, multiplied or dividing: the GEMM sums the
    # products and scales the sum (such bodies ran on the thread-per-output schedule)
    c["matmul_host_scale_inside_the_product_init_and_relu"] = ("""
let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 1.0
        for k in 0..K:
            acc += A[i, k] * alpha * B[k, j]
        out[i, j] = relu(acc)
}
y
""", {"A": A, "B": B, "alpha": -1.5}, np.maximum(1 - 1.5 * (A @ B), 0), "f32", "contraction", "gemm")
    q, kk = _f32(2, 33, 16), _f32(2, 40, 16)
    c["batched_scores_divided_by_sqrt_of_a_size"] = ("""
let y = compute(q, kk) {
    @kernel batched_matmul
    for b in 0..Bt, i in 0..Sq, j in 0..Sk:
        var s = 0.0
        for d in 0..D:
            s += 0.5 * q[b, i, d] * kk[b, j, d] / sqrt(D)
        out[b, i, j] = s
}
y
""", {"q": q, "kk": kk}, 0.5 * q @ kk.transpose(0, 2, 1) / 4, "f32", "contraction", "gemm")
    # products subtracted from a residual (refused as "no loop accumulating products"), and
    # a product minus the accumulator, which alternates signs: not a contraction
    Cr = _f32(40, 36)
    c["matmul_products_subtracted_from_a_residual"] = ("""
let y = compute(A, B, C) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = C[i, j]
        for k in 0..K:
            acc -= A[i, k] * B[k, j]
        out[i, j] = acc
}
y
""", {"A": A, "B": B, "C": Cr}, Cr - A @ B, "f32", "contraction", "gemm")
    signs = (-1.0) ** (32 - np.arange(33))
    c["not_a_contraction_product_minus_the_accumulator"] = ("""
let y = compute(A, B) {
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc = A[i, k] * B[k, j] - acc
        out[i, j] = acc
}
y
""", {"A": A, "B": B}, (A * signs) @ B, "f32", "contraction", "generic")
    A3, B3 = _f32(3, 20, 17), _f32(3, 17, 19)
    c["batched_matmul_subtracted_batch_in_the_middle_of_out"] = ("""
let y = compute(A, B) {
    @kernel batched_matmul
    for i in 0..M, b in 0..Bt, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc -= A[b, i, k] * B[b, k, j] / 2.0
        out[i, b, j] = acc
}
y
""", {"A": A3, "B": B3}, -np.einsum("bik,bkj->ibj", A3, B3) / 2, "f32", "contraction", "gemm")
    # --------------------------------------------------------------- reduce
    x = _f32(1025, 3)
    c["reduce_sum_over_the_first_axis"] = ("""
let y = compute(x) {
    @kernel reduce(+, axis=0)
    for r in 0..R, c in 0..C:
        yield x[r, c]
}
y
""", {"x": x}, x.sum(0), "f32", "reduction", "reduce")
    x = _f32(7, 33, 5)
    c["reduce_max_over_the_middle_axis_negative"] = ("""
let y = compute(x) {
    @kernel reduce(max, axis=-2)
    for a in 0..A, b in 0..B, c in 0..C:
        yield x[a, b, c] * 2.0
}
y
""", {"x": x}, x.max(1) * 2, "f32", "elementwise", "reduce")
    v = RNG.integers(-1000, 1000, 1025).astype(np.int32)
    c["reduce_min_i32_loop_named_int"] = ("""
let y = compute(v) {
    @kernel reduce(min)
    for int in 0..n:
        yield v[int]
}
y
""", {"v": v}, v.min(), "i32", "exact", "reduce")
    x = _f32(3, 257)
    c["argmin_last_axis_loops_named_float_and_var"] = ("""
let y = compute(x) {
    @kernel reduce(argmin, axis=-1)
    for float in 0..R, var in 0..C:
        yield (x[float, var], var)
}
y
""", {"x": x}, x.argmin(1), "i32", "exact", "reduce")
    h = _f32(1025).astype(np.float16)
    c["reduce_sum_f16"] = ("""
let y = compute(h) {
    @kernel reduce(+)
    for i in 0..n:
        yield h[i]
}
y
""", {"h": h}, h.astype(np.float32).sum(), "f16", "reduction", "reduce")
    x = _f32(5, 130)
    c["reduce_kept_loop_indexes_the_columns"] = ("""
let y = compute(x) {
    @kernel reduce(+, axis=1)
    for c in 0..C, r in 0..R:
        var v = 0.0
        if x[r, c] > 0.0:
            v = x[r, c]
        yield v
}
y
""", {"x": x}, np.where(x > 0, x, 0).sum(0), "f32", "reduction", "reduce")
    c["reduce_max_rows_of_one"] = ("""
let y = compute(x) {
    @kernel reduce(max, axis=1)
    for r in 0..R, c in 0..C:
        yield x[r, c]
}
y
""", {"x": (x := _f32(2, 1))}, x.max(1), "f32", "exact", "reduce")
    c["reduce_sum_of_an_empty_axis"] = ("""
let y = compute(x) {
    @kernel reduce(+, axis=0)
    for r in 0..R, c in 0..C:
        yield x[r, c]
}
y
""", {"x": np.zeros((0, 4), np.float32)}, np.zeros(4, np.float32), "f32", "exact", "reduce")
    xt = np.repeat(_f32(5, 7), 11, 1)
    c["argmax_of_a_reversed_index_with_ties"] = ("""
let C = 77
let y = compute(x) {
    @kernel reduce(argmax, axis=1)
    for r in 0..R, c in 0..C:
        yield (x[r, c], C - 1 - c)
}
y
""", {"x": xt}, np.array([76 - np.flatnonzero(row == row.max()).max() for row in xt]), "i32",
        "exact", "reduce")
    # the index an i32 expression of three loops (the reference gave -1: an i64 sentinel
    # wrapped in i32 won every tie)
    x = _f32(2, 3, 1025)
    c["argmax_of_a_computed_flat_index"] = ("""
let y = compute(x) {
    @kernel reduce(argmax)
    for a in 0..A, b in 0..B, c in 0..C:
        yield (x[a, b, c], (a * B + b) * C + c)
}
y
""", {"x": x}, x.argmax(), "i32", "exact", "reduce")
    x = _f32(1025)
    c["reduce_workgroup_of_7"] = ("""
let y = compute(x) {
    @kernel reduce(+)
    @workgroup(7)
    for i in 0..n:
        yield x[i] * x[i]
}
y
""", {"x": x}, (x.astype(np.float64) ** 2).sum(), "f32", "reduction", "reduce")
    m = RNG.random((3, 130)) > 0.5
    c["reduce_and_of_a_computed_bool"] = ("""
let y = compute(m) {
    @kernel reduce(and, axis=1)
    @workgroup(96)
    for i in 0..R, j in 0..C:
        yield m[i, j] or j > 120
}
y
""", {"m": m}, (m | (np.arange(130) > 120)).all(1), "i32", "exact", "reduce")
    # statements between the loops around the yield, reducing an outer loop: every compiled
    # device summed all the yields into out[0] (the nest stopped at the let), or refused a
    # 3-deep nest ("reduce axis=1 does not name one of the loops around the yield")
    x = _f32(6, 257)
    c["reduce_outer_axis_past_a_let_between_the_loops"] = ("""
let y = compute(x) {
    @kernel reduce(max, axis=0)
    for r in 0..R:
        let base = x[r, 0]
        for c in 0..C:
            yield x[r, c] - base
}
y
""", {"x": x}, (x - x[:, :1]).max(0), "f32", "exact", "reduce")
    c["reduce_outer_axis_past_an_if_between_the_loops"] = ("""
let y = compute(x) {
    @kernel reduce(+, axis=0)
    for r in 0..R:
        if x[r, 0] > 0.0:
            for c in 0..C:
                yield x[r, c]
}
y
""", {"x": x}, (x * (x[:, :1] > 0)).sum(0), "f32", "reduction", "reduce")
    c["argmax_outer_axis_past_a_var_between_the_loops"] = ("""
let y = compute(x) {
    @kernel reduce(argmax, axis=0)
    for r in 0..R:
        var t = x[r, 0]
        t = t * 2.0
        for c in 0..C:
            yield (x[r, c] - t, r)
}
y
""", {"x": x}, (x - 2 * x[:, :1]).argmax(0), "i32", "exact", "reduce")
    x = _f32(2, 3, 5)
    c["reduce_middle_axis_of_three_past_lets"] = ("""
let y = compute(x) {
    @kernel reduce(max, axis=1)
    for a in 0..A:
        let s = x[a, 0, 0]
        for b in 0..B:
            let t = x[a, b, 0]
            for c in 0..C:
                yield x[a, b, c] * s - t
}
y
""", {"x": x}, (x * x[:, :1, :1] - x[:, :, :1]).max(1), "f32", "elementwise", "reduce")
    # ----------------------------------------------------------------- rows
    x = _f32(3, 1)
    c["softmax_rows_of_one_column"] = ("""
let y = compute(x) {
    for r in 0..R:
        var tile = -inf
        for c in 0..C:
            tile = max(tile, x[r, c])
        var shared_ = 0.0
        for c in 0..C:
            shared_ += exp(x[r, c] - tile)
        for c in 0..C:
            out[r, c] = exp(x[r, c] - tile) / shared_
}
y
""", {"x": x}, _softmax(x), "f32", "reduction", "generic")
    x = _f32(5, 1025)
    c["softmax_rows_wider_than_a_workgroup_of_48"] = ("""
let y = compute(x) {
    @workgroup(48)
    for r in 0..R:
        var mx = -inf
        for c in 0..C:
            mx = max(mx, x[r, c])
        var den = 0.0
        for c in 0..C:
            den += exp(x[r, c] - mx)
        let inv = 1.0 / den
        for c in 0..C:
            out[r, c] = exp(x[r, c] - mx) * inv
}
y
""", {"x": x}, _softmax(x), "f32", "reduction", "rows")
    x, g, bt = _f32(7, 130), _f32(130), _f32(130)
    mu = x.mean(-1, keepdims=True)
    c["layer_norm_mean_named_float_sum_named_int"] = ("""
let y = compute(x, g, b) {
    @workgroup(64)
    for i0 in 0..rows:
        var int = 0.0
        for j in 0..cols:
            int += x[i0, j]
        let float = int / cols
        var sq = 0.0
        for j in 0..cols:
            sq += (x[i0, j] - float) * (x[i0, j] - float)
        let r = rsqrt(sq / cols + eps)
        for j in 0..cols:
            out[i0, j] = (x[i0, j] - float) * r * g[j] + b[j]
}
y
""", {"x": x, "g": g, "b": bt, "eps": 1e-5},
        (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + bt, "f32",
        "reduction", "rows")
    x, w = _f32(4, 77).astype(np.float16), _f32(77).astype(np.float16)
    xf = x.astype(np.float32)
    c["rms_norm_f16_rows"] = ("""
let y = compute(x, w) {
    for r in 0..R:
        var ss = 0.0
        for c in 0..C:
            ss += f32(x[r, c]) * f32(x[r, c])
        let s = rsqrt(ss / C + 1e-6)
        for c in 0..C:
            out[r, c] = f16(f32(x[r, c]) * s) * w[c]
}
y
""", {"x": x, "w": w}, xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float32),
        "f16", "reduction", "rows")
    x = _f32(6, 257)
    c["log_softmax_of_a_transposed_input"] = ("""
let y = compute(xt) {
    for r in 0..R:
        var m = -inf
        for c in 0..C:
            m = max(m, xt[c, r])
        var s = 0.0
        for c in 0..C:
            s += exp(xt[c, r] - m)
        for c in 0..C:
            out[r, c] = xt[c, r] - m - log(s)
}
y
""", {"xt": x.T.copy()}, np.log(_softmax(x.astype(np.float64))), "f32", "reduction", "rows")
    x, res = _f32(3, 40), _f32(3, 40)
    z = x + res
    c["residual_rms_norm_then_a_relu_written_as_an_if"] = ("""
let y = compute(x, res) {
    for r in 0..R:
        var acc = 0.0
        for c in 0..C:
            acc += (x[r, c] + res[r, c]) * (x[r, c] + res[r, c])
        let inv = rsqrt(acc / C + 1e-5)
        for c in 0..C:
            var v = (x[r, c] + res[r, c]) * inv
            if v < 0.0:
                v = 0.0
            out[r, c] = v
}
y
""", {"x": x, "res": res}, np.maximum(z / np.sqrt((z * z).mean(-1, keepdims=True) + 1e-5), 0),
        "f32", "reduction", "rows")
    x = _f32(2, 3, 33)
    c["softmax_3d_rows_host_scale"] = ("""
let y = compute(x) {
    for b in 0..B, h in 0..H:
        var m = -inf
        for c in 0..C:
            m = max(m, x[b, h, c] * scale)
        var s = 0.0
        for c in 0..C:
            s += exp(x[b, h, c] * scale - m)
        for c in 0..C:
            out[b, h, c] = exp(x[b, h, c] * scale - m) / s
}
y
""", {"x": x, "scale": 0.125}, _softmax(x * 0.125), "f32", "reduction", "rows")
    x = _f32(9, 64)
    c["rows_argmax_mask_as_i32"] = ("""
let y = compute(x) {
    for r in 0..R:
        var top = -inf
        for c in 0..C:
            top = max(top, x[r, c])
        for c in 0..C:
            out[r, c] = int(x[r, c] >= top)
}
y
""", {"x": x}, (x >= x.max(1, keepdims=True)).astype(np.int32), "i32", "exact", "rows")
    # `shared` as a name where no `shared var` declaration starts (it was a syntax error at
    # `shared += ...`, after `var shared = 0.0` had been accepted)
    x = _f32(4, 300)
    c["rows_sum_into_a_var_named_shared"] = ("""
let y = compute(x) {
    for r in 0..R:
        var shared = 0.0
        for c in 0..C:
            shared += x[r, c]
        for c in 0..C:
            out[r, c] = x[r, c] - shared / C
}
y
""", {"x": x}, x - x.mean(1, keepdims=True), "f32", "reduction", "rows")
    x = _f32(5, 33)
    c["block_shared_array_named_shared_workgroup_of_7"] = ("""
let y = compute(x) {
    @workgroup(7)
    for shared in 0..R:
        shared var shared_row[C]: f16
        for var in 0..C:
            shared_row[var] = x[shared, var] * 2.0
        barrier()
        for var in 0..C:
            out[shared, var] = f32(shared_row[C - 1 - var])
}
y
""", {"x": x}, (x * 2).astype(np.float16).astype(np.float32)[:, ::-1], "f32", "exact", "block")
    # rows read reversed, from another row, or two rows of one input: each row is held by
    # its own index, not by the buffer's name
    x = _f32(6, 100)
    c["rows_read_reversed_and_from_the_mirrored_row"] = ("""
let y = compute(x) {
    for r in 0..R:
        var s = 0.0
        for c in 0..C:
            s += x[R - 1 - r, c]
        for c in 0..C:
            out[r, c] = x[r, C - 1 - c] * s
}
y
""", {"x": x}, x[:, ::-1] * x[::-1].sum(1, keepdims=True), "f32", "reduction", "rows")
    c["rows_two_rows_of_one_input"] = ("""
let y = compute(x) {
    for r in 0..3:
        var s = 0.0
        for c in 0..C:
            s += x[2 * r, c] * x[2 * r + 1, c]
        for c in 0..C:
            out[r, c] = x[2 * r, c] - s
}
y
""", {"x": x}, x[0::2] - (x[0::2] * x[1::2]).sum(1, keepdims=True), "f32", "reduction", "rows")
    # --------------------------------------------------------------- vector
    x, v = _f32(3, 36), _f32(36)
    c["vector_loop_variables_as_values"] = ("""
let y = compute(x, v) {
    @kernel elementwise
    for i in 0..R, j in 0..C:
        out[i, j] = x[i, j] * v[j] + float(j) - float(i)
}
y
""", {"x": x, "v": v}, x * v + np.arange(36)[None] - np.arange(3)[:, None], "f32",
        "elementwise", "vector")
    x = _f32(8, 8)
    c["vector_two_stores_of_strided_rows"] = ("""
let y = compute(x) {
    for i in 0..4, j in 0..C:
        out[2 * i, j] = x[2 * i, j]
        out[2 * i + 1, j] = -x[2 * i + 1, j]
}
y
""", {"x": x}, x * np.float32([1, -1] * 4)[:, None], "f32", "exact", "vector")
    xi = RNG.integers(-9, 9, (3, 16)).astype(np.int32)
    c["vector_integer_division_and_remainder"] = ("""
let y = compute(x) {
    for i in 0..R, j in 0..C:
        out[i, j] = x[i, j] / 3 + x[i, j] % 4
}
y
""", {"x": xi}, (np.trunc(xi / 3) + np.fmod(xi, 4)).astype(np.int32), "i32", "exact", "vector")
    x = _f32(1, 4)
    c["vector_select_written_with_a_bool_as_number"] = ("""
let y = compute(x) {
    for i in 0..R, j in 0..C:
        let pos = x[i, j] > 0.0
        out[i, j] = float(pos) * x[i, j] + (1.0 - float(pos)) * 0.1 * x[i, j]
}
y
""", {"x": x}, np.where(x > 0, x, 0.1 * x), "f32", "elementwise", "vector")
    x = _f32(5, 40)
    c["elementwise_transposed_store"] = ("""
let y = compute(x) {
    for i in 0..R, j in 0..C:
        out[j, i] = x[i, j] * 2.0
}
y
""", {"x": x}, (x * 2).T, "f32", "exact", "generic")
    # ------------------------------------------------------------ attention
    Q, K, V = _f32(1, 2, 1, 48), _f32(1, 2, 1, 48), _f32(1, 2, 1, 48)
    c["attention_seq_1_head_dim_48_host_scale"] = (_three_pass(
        score="dot(Q[b, h, i], K[b, h, j]) * temp"), {"Q": Q, "K": K, "V": V, "temp": 0.3},
        _attention(Q, K, V, 0.3), "f32", "contraction", "attention")
    Q, K, V = _f32(1, 4, 33, 80), _f32(1, 2, 33, 80), _f32(1, 2, 33, 80)
    c["attention_gqa_causal_head_dim_80_divided_scale"] = (_three_pass(
        "j <= i", score="dot(Q[b, h, i], K[b, h / 2, j]) / sqrt(80.0)", value="V[b, h / 2, j, d]"),
        {"Q": Q, "K": K, "V": V}, _attention(Q, K, V, 80 ** -0.5, np.tril(np.ones((33, 33), bool)),
                                             group=2), "f32", "contraction", "attention")
    Q, K, V = _f32(2, 1, 7, 128), _f32(2, 1, 7, 128), _f32(2, 1, 7, 128)
    keep = RNG.random((7, 7)) > 0.3
    np.fill_diagonal(keep, True)
    c["attention_one_pass_bool_mask_head_dim_128"] = ("""
let y = compute(Q, K, V, keep) {
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S, c in 0..D:
        var mx = -inf
        var tot = 0.0
        var num = 0.0
        for key in 0..S:
            if keep[i, key]:
                let s = dot(Q[b, h, i], K[b, h, key]) / sqrt(128.0)
                let mn = max(mx, s)
                tot = tot * exp(mx - mn) + exp(s - mn)
                num = num * exp(mx - mn) + exp(s - mn) * V[b, h, key, c]
                mx = mn
        out[b, h, i, c] = num / tot
}
y
""", {"Q": Q, "K": K, "V": V, "keep": keep}, _attention(Q, K, V, 128 ** -0.5, keep), "f32",
        "contraction", "attention")
    S = 13
    Q, K, V = _f32(2, 2, S, 16), _f32(2, 2, S, 16), _f32(2, 2, S, 16)
    ii, jj = np.arange(S)[:, None], np.arange(S)[None]
    keep = RNG.random((2, S, S)) > 0.4
    for k in keep:
        np.fill_diagonal(k, True)
    for name, cond, extra, mask in (
            ("causal_with_an_offset", "j <= i + 2", {}, jj <= ii + 2),
            ("sliding_window", "j <= i and i - j < 4", {}, (jj <= ii) & (ii - jj < 4)),
            ("transposed_bool_mask", "keep[b, j, i]", {"keep": keep}, keep.transpose(0, 2, 1)[:, None]),
            ("negated_float_mask", "not (drop[i, j] > 0.5)", {"drop": (~keep[0]).astype(np.float32)},
             keep[0]),
            ("causal_or_the_last_key", "j <= i or j == S - 1", {}, (jj <= ii) | (jj == S - 1))):
        inputs = "Q, K, V" + "".join(f", {n}" for n in extra)
        c[f"attention_{name}"] = (_three_pass(cond, inputs), {"Q": Q, "K": K, "V": V, **extra},
                                  _attention(Q, K, V, 0.25, mask), "f32", "contraction",
                                  "attention")
    # the running max written as an `if` (it ran on the generic schedule), and its mirror,
    # a running min, which is not attention's max (softmax does not care: generic)
    maxed = _three_pass().replace(
        "            m = max(m, dot(Q[b, h, i], K[b, h, j]) * 0.25)",
        "            let s = dot(Q[b, h, i], K[b, h, j]) * 0.25\n            if s > m:\n                m = s")
    c["attention_running_max_written_as_an_if"] = (maxed, {"Q": Q, "K": K, "V": V},
                                                   _attention(Q, K, V, 0.25), "f32", "contraction",
                                                   "attention")
    c["not_attention_running_min_written_as_an_if"] = (
        maxed.replace("var m = -inf", "var m = inf").replace("if s > m:", "if m > s:"),
        {"Q": Q, "K": K, "V": V}, _attention(Q, K, V, 0.25), "f32", "contraction", "generic")
    Q, K, V = _f32(1, 4, 9, 16), _f32(1, 4, 9, 16), _f32(1, 4, 9, 16)
    # the normaliser summed without the max: not attention, run as written
    s = np.einsum("bhid,bhjd->bhij", *(a.astype(np.float64) for a in (Q, K))) * 0.25
    c["not_attention_denominator_without_the_max"] = (_three_pass().replace(
        "l += exp(dot(Q[b, h, i], K[b, h, j]) * 0.25 - m)", "l += exp(dot(Q[b, h, i], K[b, h, j]) * 0.25)"),
        {"Q": Q, "K": K, "V": V},
        np.exp(s - s.max(-1, keepdims=True)) / np.exp(s).sum(-1, keepdims=True) @ V.astype(np.float64),
        "f32", "contraction", "generic")
    # the query row held in a let, heads looped outside the batch, dot's operands swapped
    c["attention_query_row_in_a_let_heads_outermost"] = ("""
let y = compute(Q, K, V) {
    @kernel attention
    for h in 0..H, b in 0..B, i in 0..S:
        let q = Q[b, h, i]
        var m = -inf
        for j in 0..S:
            m = max(m, dot(K[b, h, j], q) * 0.25)
        var l = 0.0
        for j in 0..S:
            l += exp(dot(K[b, h, j], q) * 0.25 - m)
        for d in 0..D:
            var acc = 0.0
            for j in 0..S:
                acc += V[b, h, j, d] * exp(dot(K[b, h, j], q) * 0.25 - m)
            out[b, h, i, d] = acc / l
}
y
""", {"Q": Q, "K": K, "V": V}, _attention(Q, K, V, 0.25), "f32", "contraction", "attention")
    K2, V2 = _f32(1, 2, 9, 16), _f32(1, 2, 9, 16)
    c["not_gqa_heads_h_mod_2"] = (_three_pass(score="dot(Q[b, h, i], K[b, h % 2, j]) * 0.25",
                                              value="V[b, h % 2, j, d]"),
                                  {"Q": Q, "K": K2, "V": V2},
                                  _attention(Q, K2[:, [0, 1, 0, 1]], V2[:, [0, 1, 0, 1]], 0.25),
                                  "f32", "contraction", "generic")
    Q, K, V = _f32(1, 2, 37, 16), _f32(1, 2, 37, 16), _f32(1, 2, 37, 16)
    c["flash_blocks_7_and_5_multiplied_scale"] = (_flash(7, 5, "* 0.25"), {"Q": Q, "K": K, "V": V},
                                                  _attention(Q, K, V, 0.25), "f32", "contraction",
                                                  "attention")
    c["flash_host_scale_divided"] = (_flash(16, 32, "/ temp"), {"Q": Q, "K": K, "V": V, "temp": 4.0},
                                     _attention(Q, K, V, 0.25), "f32", "contraction", "attention")
    Q, K, V = _f32(1, 1, 1, 80), _f32(1, 1, 1, 80), _f32(1, 1, 1, 80)
    c["flash_seq_1_head_dim_80"] = (_flash(64, 64, "/ sqrt(80.0)"), {"Q": Q, "K": K, "V": V},
                                    _attention(Q, K, V, 80 ** -0.5), "f32", "contraction",
                                    "attention")
    Q, K, V = (_f32(1, 2, 33, 16).astype(np.float16) for _ in range(3))
    c["flash_f16_gqa_odd_tile"] = (_flash(32, 16, "* 0.25", ann="@tile(block_q=48, block_kv=24)",
                                          kv="K[b, h / 2, ks:ks+BK]", vv="V[b, h / 2, ks:ks+BK]"),
                                   {"Q": Q, "K": K[:, :1].copy(), "V": V[:, :1].copy()},
                                   _attention(Q, K[:, :1], V[:, :1], 0.25, group=2), "f16",
                                   "contraction", "attention")
    return c


CASES = _cases()


def _assert_matches(got, want, dtype, kind, err_msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (err_msg, got.shape, want.shape)
    if kind == "exact":
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   err_msg=err_msg, **tolerance(dtype, kind))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_schedule_program_equals_numpy(name, device):
    src, inputs, want, dtype, kind, _ = CASES[name]
    got = zynbook.Session(device=device).run(src, **inputs)
    _assert_matches(got, want, dtype, kind, f"{name} on {device}")


def _lowered(name):
    src, inputs, *_ = CASES[name]
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {k: v for k, v in inputs.items() if isinstance(v, float)}
    return lower_block(src, arrays, scalars)


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_target_picks_the_schedule_the_structure_asks_for(name):
    kernel, _, sizes, _ = _lowered(name)
    got = schedules.chosen(kernel, cuda_target(), sizes)
    assert got is not None and got.name == CASES[name][5], \
        {s.name: s.why_not(kernel, cuda_target(), sizes) for s in schedules.SCHEDULES}


# a sample of every schedule, as launch IR on the emulator for CUDA (sm_90, sm_80), Metal
# and WebGPU (with subgroups and without)
EMULATED = ["gemm_gram_of_one_input_odd_tile_and_workgroup", "gemm_m1_host_scale",
            "batched_scores_divided_by_sqrt_of_a_size",
            "argmax_of_a_computed_flat_index", "reduce_kept_loop_indexes_the_columns",
            "reduce_outer_axis_past_a_let_between_the_loops",
            "softmax_rows_wider_than_a_workgroup_of_48", "rms_norm_f16_rows",
            "vector_loop_variables_as_values", "attention_gqa_causal_head_dim_80_divided_scale",
            "attention_transposed_bool_mask", "flash_blocks_7_and_5_multiplied_scale",
            "flash_f16_gqa_odd_tile"]
TARGETS = {"sm_90": (cuda_target(), 32), "sm_80": (cuda_target((8, 0)), 32),
           "metal": (metal_target(), 32), "webgpu": (webgpu_target(("shader-f16", "subgroup")), 32),
           "webgpu_plain": (webgpu_target(("shader-f16",)), 1)}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", EMULATED)
def test_launch_ir_on_the_emulator_equals_numpy(name, target):
    kernel, ins, sizes, scalars = _lowered(name)
    tgt, warp = TARGETS[target]
    prog = schedules.build(kernel, tgt, sizes)
    if prog is None:
        pytest.skip(f"no launch IR for {target}: {schedules.why_none(kernel, tgt, sizes)}")
    _, _, want, dtype, kind, _ = CASES[name]
    got = emulate_kernel(prog, kernel, ins, sizes, scalars, warp)
    _assert_matches(got.reshape(np.shape(want)), want, dtype, kind, f"{name} on {target}")


METAL = ["gemm_float_accumulator_transposed_a_bias_relu", "reduce_sum_over_the_first_axis",
         "reduce_outer_axis_past_an_if_between_the_loops",
         "argmax_of_a_computed_flat_index", "layer_norm_mean_named_float_sum_named_int",
         "vector_integer_division_and_remainder", "attention_sliding_window",
         "flash_host_scale_divided"]


@pytest.mark.parametrize("name", METAL)
def test_metal_model_equals_numpy(monkeypatch, name):
    from metal_emu import emulator as emu
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler")
    from metal_emu.device import EmulatedMetalDevice
    from zynbook.backends import registry
    dev = EmulatedMetalDevice()
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    src, inputs, want, dtype, kind, _ = CASES[name]
    got = zynbook.Session(device=dev.id).run(src, **inputs)
    assert dev.launches and not dev.mismatches, dev.mismatches
    _assert_matches(got, want, dtype, kind, f"{name} on the Metal model")
