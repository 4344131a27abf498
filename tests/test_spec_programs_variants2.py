"""More variations of the spec's kernel programs, written from the spec's text and
docs/language.md: causal and bool masks, f16 attention, scans, gathers, shared memory,
reductions of every kind, sizes that are multiples of nothing, the kernel library and the
device interface. Each runs on every device present (the CPU reference included) and is
compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(4111)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _attention(q, k, v, mask=None, add=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if add is not None:
        s = s + add
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


_QH, _KH, _VH = (RNG.standard_normal((2, 3, 7, 16)).astype(np.float16) for _ in range(3))
_BLOCK_CAUSAL = np.kron(np.tril(np.ones((2, 2), bool)), np.ones((4, 4), bool))[:7, :7]

_THREE_PASS = """
let attn = compute(Q, K, V{extra}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..kv_len:
            if {cond}:
                let score = dot(Q[b, h, i], K[b, h / 2, j]) / sqrt(head_dim){add}
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..kv_len:
            if {cond}:
                let score = dot(Q[b, h, i], K[b, h / 2, j]) / sqrt(head_dim){add}
                sum_exp += exp(score - max_score)
        for d in 0..v_dim:
            var acc = 0.0
            for j in 0..kv_len:
                if {cond}:
                    let score = dot(Q[b, h, i], K[b, h / 2, j]) / sqrt(head_dim){add}
                    let weight = exp(score - max_score) / sum_exp
                    acc += weight * V[b, h / 2, j, d]
            out[b, h, i, d] = acc
}}
attn
"""
_AQ, _AK, _AV = _f32(2, 4, 7, 8), _f32(2, 2, 7, 8), _f32(2, 2, 7, 5)
_AKe, _AVe = np.repeat(_AK, 2, 1), np.repeat(_AV, 2, 1)
_ATT = {"Q": _AQ, "K": _AK, "V": _AV}
_M3 = RNG.random((2, 7, 7)) > 0.4
_M3[:, np.arange(7), np.arange(7)] = True
_MI = (RNG.random((7, 7)) > 0.4).astype(np.int32)
np.fill_diagonal(_MI, 1)
_BIAS = _f32(7, 7)
_WINDOW = (np.arange(7)[None, :] <= np.arange(7)[:, None]) & \
    (np.arange(7)[:, None] - np.arange(7)[None, :] < 3)
_AKc, _AVc = _f32(2, 2, 11, 8), _f32(2, 2, 11, 5)
_OFFSET = np.arange(11)[None, :] <= np.arange(7)[:, None] + 4

_CONV = """
let output = compute(input, kernel) {{
    @kernel conv2d{params}
    @workgroup(8, 8, 4)
    for b in 0..batch, oc in 0..out_channels:
        for oh in 0..out_h, ow in 0..out_w:
            var sum = 0.0
            for ic in 0..in_channels:
                for kh in 0..kernel_h, kw in 0..kernel_w:
                    let ih = oh * stride + kh - padding
                    let iw = ow * stride + kw - padding
                    if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:
                        sum += input[b, ic, ih, iw] * kernel[oc, ic, kh, kw]
            out[b, oc, oh, ow] = sum
}}
output
"""


def _conv(x, k, stride, pad):
    b, _, h, w = x.shape
    o, _, kh, kw = k.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    out = np.zeros((b, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("bchw,ochw->bo", win, k.astype(np.float64))
    return out


# name: (source, inputs, numpy's answer, tolerance)
CASES = {
    # f16 flash attention whose key blocks stop at the query block (block-causal): the
    # running max `var m = -inf` is an f16 tile, and cpu:native's C++ had no spelling for an
    # f16 infinity (a KeyError in the printer)
    "flash_attention_f16_block_causal": ("""
let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 4:
            var m = -inf
            var l = 0.0
            var o = zeros(4, head_dim)
            for kv_block in 0..q_block + 4 step 4:
                let S = Q[b, h, q_block:q_block+4] @ transpose(K[b, h, kv_block:kv_block+4]) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kv_block:kv_block+4]
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+4] = o / l
}
attn
""", {"Q": _QH, "K": _KH, "V": _VH}, _attention(_QH, _KH, _VH, _BLOCK_CAUSAL), 2e-2),
    # a workgroup of 64 loading a row of 37 under `if t < n` (Hillis-Steele scan in shared
    # memory, double-buffered): the constant bound 0..64 indexing x directly under the `if`
    # was held to the axis ("the loop covers 64 positions but the axis has 37")
    "shared_scan_workgroup_wider_than_the_row": ("""
let y = compute(x) {
    for blk in 0..B:
        shared var a[64]
        shared var c[64]
        for t in 0..64:
            if t < n:
                a[t] = x[blk, t]
            else:
                a[t] = 0.0
        barrier()
        var off = 1
        for lvl in 0..6:
            for t in 0..64:
                if t >= off:
                    c[t] = a[t] + a[t - off]
                else:
                    c[t] = a[t]
            barrier()
            for t in 0..64:
                a[t] = c[t]
            barrier()
            off *= 2
        for t in 0..n:
            out[blk, t] = a[t]
}
y
""", {"x": (_x := _f32(7, 37)), "n": 37}, np.cumsum(_x, 1), 1e-4),
    # an i64 accumulator of i32 products: each product wraps in i32, the sum does not (the
    # CPU reference summed the products in i32, as einsum of i32 arrays does: 840382737
    # where cpu:native gave 26610186513); an f32 sum of f16 terms, an i32 one of i16 products
    "typed_i64_sum_of_i32_products": ("""
let y = compute(a) {
    for i in 0..r:
        var acc: i64 = 0
        for j in 0..c:
            acc += a[i, j] * a[i, j]
        out[i] = acc
}
y
""", {"a": (_a := RNG.integers(-50000, 50000, (5, 37)).astype(np.int32))},
        (_a * _a).astype(np.int64).sum(1), 0),
    "typed_i64_sum_of_wrapping_products": ("""
let y = compute(a) {
    for i in 0..r:
        var acc: i64 = 0
        for j in 0..c:
            acc += a[i, j] * 2
        out[i] = acc
}
y
""", {"a": np.full((1, 3), 2 ** 30, np.int32)}, np.int64([-3 * 2 ** 31]), 0),
    "typed_f32_sum_of_f16_terms": ("""
let y = compute(h) {
    for i in 0..r:
        var acc: f32 = 0.0
        for j in 0..c:
            acc += h[i, j]
        out[i] = acc
}
y
""", {"h": (_h := (1 + 0.001 * RNG.standard_normal((3, 4097))).astype(np.float16))},
        _h.astype(np.float64).sum(1), 1e-6),
    "typed_i32_sum_of_i16_products": ("""
let y = compute(a) {
    for i in 0..r:
        var acc: i32 = 0
        for j in 0..c:
            acc += a[i, j] * a[i, j]
        out[i] = acc
}
y
""", {"a": (_a := RNG.integers(-200, 200, (3, 1000)).astype(np.int16))},
        (_a * _a).astype(np.int32).sum(1).astype(np.int32), 0),
    # the spec's three-pass attention over grouped-query heads whose values are narrower
    # than the keys, a mask per batch, an int mask compared with 0, an additive bias, a
    # sliding causal window and queries offset into a longer key sequence
    "attention_gqa_values_narrower_than_keys": (
        _THREE_PASS.format(extra="", cond="true", add=""), {**_ATT, "head_dim": 8},
        _attention(_AQ, _AKe, _AVe), 1e-4),
    "attention_mask_per_batch": (
        _THREE_PASS.format(extra=", mask", cond="mask[b, i, j]", add=""),
        {**_ATT, "head_dim": 8, "mask": _M3}, _attention(_AQ, _AKe, _AVe, _M3[:, None]), 1e-4),
    "attention_int_mask_compared_with_zero": (
        _THREE_PASS.format(extra=", mask", cond="mask[i, j] != 0", add=""),
        {**_ATT, "head_dim": 8, "mask": _MI}, _attention(_AQ, _AKe, _AVe, _MI > 0), 1e-4),
    "attention_additive_bias": (
        _THREE_PASS.format(extra=", bias", cond="true", add=" + bias[i, j]"),
        {**_ATT, "head_dim": 8, "bias": _BIAS},
        _attention(_AQ, _AKe, _AVe, add=_BIAS), 1e-4),
    "attention_sliding_causal_window": (
        _THREE_PASS.format(extra="", cond="j <= i and i - j < 3", add=""),
        {**_ATT, "head_dim": 8}, _attention(_AQ, _AKe, _AVe, _WINDOW), 1e-4),
    "attention_queries_offset_into_longer_keys": (
        _THREE_PASS.format(extra="", cond="j <= i + 4", add=""),
        {"Q": _AQ, "K": _AKc, "V": _AVc, "head_dim": 8},
        _attention(_AQ, np.repeat(_AKc, 2, 1), np.repeat(_AVc, 2, 1), _OFFSET), 1e-4),
    # reductions: along the middle of three loops, argmax of a flattened index written
    # through a let, a masked sum along rows of a triangle, yields in both branches
    "reduce_along_the_middle_loop": ("""
let r = compute(x) {
    @kernel reduce(+, axis=1)
    for b in 0..B, i in 0..I, j in 0..J:
        yield x[b, i, j]
}
r
""", {"x": (_x := _f32(3, 37, 5))}, _x.sum(1), 1e-4),
    "argmin_of_an_index_through_a_let": ("""
let r = compute(x) {
    @kernel reduce(argmin)
    for i in 0..rows, j in 0..cols:
        let flat = j * rows + i
        yield (x[i, j], flat)
}
r
""", {"x": (_x := _f32(7, 5))}, np.int64(_x.T.argmin()), 0),
    "row_sums_of_a_lower_triangle": ("""
let r = compute(m) {
    @kernel reduce(+, axis=1)
    for i in 0..rows:
        for j in 0..cols:
            if j <= i:
                yield m[i, j]
}
r
""", {"m": (_m := _f32(37, 37))}, np.tril(_m).sum(1), 1e-4),
    "yields_in_both_branches": ("""
let r = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        if x[i] > 0.0:
            yield x[i]
        else:
            yield -2.0 * x[i]
}
r
""", {"x": (_x := _f32(1000))}, np.where(_x > 0, _x, -2 * _x).sum(dtype=np.float64), 1e-3),
    # gathers: i64 ids (numpy's default), u8 ids of a 2-D batch, ids guarded against the
    # table's length, a cross-entropy kernel reading the target's logit
    "gather_by_i64_ids": ("""
let r = compute(table, ids) {
    for t in 0..T, d in 0..D:
        out[t, d] = table[ids[t], d]
}
r
""", {"table": (_t := _f32(11, 5)), "ids": (_i := np.array([3, 0, 10, 3, 7, 1, 1]))}, _t[_i], 0),
    "gather_by_u8_ids": ("""
let r = compute(table, ids) {
    for b in 0..B, t in 0..T:
        out[b, t] = table[ids[b, t]]
}
r
""", {"table": (_t := _f32(256)), "ids": (_i := RNG.integers(0, 256, (3, 37)).astype(np.uint8))},
        _t[_i], 0),
    "gather_guarded_against_the_table": ("""
let r = compute(table, ids) {
    for t in 0..T:
        if ids[t] >= 0 and ids[t] < V:
            out[t] = table[ids[t]]
        else:
            out[t] = -1.0
}
r
""", {"table": (_t := _f32(11)), "ids": (_i := np.int32([3, -1, 11, 100, 0, 10])), "V": 11},
        np.where((_i >= 0) & (_i < 11), _t[np.clip(_i, 0, 10)], -1), 0),
    "cross_entropy_kernel": ("""
let r = compute(logits, targets) {
    @kernel reduce(+)
    for t in 0..T:
        var m = -inf
        for c in 0..C:
            m = max(m, logits[t, c])
        var z = 0.0
        for c in 0..C:
            z += exp(logits[t, c] - m)
        yield log(z) + m - logits[t, targets[t]]
}
r / 7.0
""", {"logits": (_l := _f32(7, 37)), "targets": (_i := RNG.integers(0, 37, 7).astype(np.int32))},
        (np.log(np.exp(_l.astype(np.float64)).sum(1)) - _l[np.arange(7), _i]).mean(), 1e-5),
    # scans written as loops storing a running sum, row by row and over a whole input
    "running_sum_of_each_row": ("""
let r = compute(m) {
    for i in 0..rows:
        var s = 0.0
        for j in 0..cols:
            s += m[i, j]
            out[i, j] = s
}
r
""", {"m": (_m := _f32(7, 37))}, np.cumsum(_m, 1), 1e-4),
    "running_sum_of_one_input": ("""
let r = compute(x) {
    var s = 0.0
    for j in 0..n:
        s += x[j]
        out[j] = s
}
r
""", {"x": (_x := _f32(1000))}, np.cumsum(_x.astype(np.float64)), 1e-3),
    # shared memory: partial sums strided over a row of 1000 by 32 threads, their total in
    # a one-element shared array, read back by every element of the row
    "shared_partial_sums_then_broadcast": ("""
let r = compute(x) {
    for row in 0..R:
        shared var part[32]
        for t in 0..32:
            var s = 0.0
            for j in t..C step 32:
                s += x[row, j]
            part[t] = s
        barrier()
        shared var tot[1]
        for t in 0..1:
            var s = 0.0
            for u in 0..32:
                s += part[u]
            tot[0] = s
        barrier()
        for j in 0..C:
            out[row, j] = x[row, j] / tot[0]
}
r
""", {"x": (_x := np.abs(_f32(5, 1000)) + 0.1)},
        _x / _x.sum(1, keepdims=True, dtype=np.float64), 1e-5),
    # tiles: a var tile accumulated over rows, int tiles multiplied, blocks of rows whose
    # last is clipped, a whole input less its column maxima
    "var_tile_accumulated_over_rows": ("""
let r = compute(x) {
    for i in 0..1:
        var acc = zeros(1, C)
        for r in 0..R:
            acc = acc + x[r:r+1]
        out = acc
}
r
""", {"x": (_x := _f32(37, 7))}, _x.sum(0, keepdims=True), 1e-4),
    "int_tiles_multiplied": ("""
let r = compute(a, b) {
    for i in 0..1:
        out = a @ b
}
r
""", {"a": (_a := RNG.integers(-5, 5, (7, 5)).astype(np.int32)),
      "b": (_b := RNG.integers(-5, 5, (5, 3)).astype(np.int32))}, _a @ _b, 0),
    "row_blocks_with_a_clipped_last_block": ("""
let r = compute(x) {
    for blk in 0..rows step 16:
        out[blk:blk+16] = x[blk:blk+16] * 2.0 + row_max(x[blk:blk+16])
}
r
""", {"x": (_x := _f32(37, 5))}, _x * 2 + _x.max(1, keepdims=True), 1e-5),
    # the spec's conv2d on a 1 x 1 image padded by 2, and strided by 3 in f16
    "conv2d_of_a_one_pixel_image_padded_by_two": (
        _CONV.format(params="(stride=1, padding=2)"),
        {"input": (_i := _f32(1, 2, 1, 1)), "kernel": (_k := _f32(3, 2, 3, 3))},
        _conv(_i, _k, 1, 2), 1e-5),
    "conv2d_f16_stride_3_padding_1": (
        _CONV.format(params="(stride=3, padding=1)"),
        {"input": (_i := RNG.standard_normal((1, 2, 11, 13)).astype(np.float16)),
         "kernel": (_k := RNG.standard_normal((3, 2, 3, 3)).astype(np.float16))},
        _conv(_i, _k, 3, 1), 3e-2),
    # integer literals past i32 meeting floats: f32 arithmetic and comparisons, on WebGPU too
    "float_times_an_integer_literal_past_i32": ("""
let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 3000000000 + float(2147483648)
}
y
""", {"x": (_x := _f32(7))}, _x * np.float32(3e9) + np.float32(2147483648), 1e-6),
    "float_compared_with_an_integer_literal_past_i32": ("""
let y = compute(x) {
    for i in 0..n:
        if x[i] * 1e10 > 3000000000:
            out[i] = 1.0
        else:
            out[i] = 0.0
}
y
""", {"x": (_x := _f32(37))}, (_x * np.float32(1e10) > 3e9).astype(np.float32), 0),
    # max and min of bools are `or` and `and`, bool as numpy's maximum and minimum (they
    # counted as i32: 1 or 0, and WebGPU could not spell max() on bool)
    "max_of_two_comparisons": ("""
let y = compute(a) {
    for i in 0..n:
        out[i] = max(a[i] > 0, a[i] < -50)
}
y
""", {"a": (_a := RNG.integers(-100, 100, 37).astype(np.int32))}, (_a > 0) | (_a < -50), 0),
    "bool_var_updated_by_max_under_a_mask": ("""
let y = compute(a) {
    for i in 0..r:
        var m = false
        for j in 0..c:
            if j > 3:
                m = max(m, a[i, j] > 90)
        out[i] = m
}
y
""", {"a": (_a := RNG.integers(-100, 100, (3, 37)).astype(np.int32))}, (_a[:, 4:] > 90).any(1), 0),
    "max_and_min_of_bool_tiles": ("""
let y = compute(x) {
    for i in 0..r:
        out[i, 0:C] = max(x[i] > 1.0, x[i] < -1.0, x[i] == 0.0)
        out[i, C:2 * C] = min(x[i] > -1.0, i > 2)
}
y
""", {"x": (_x := _f32(7, 37))},
        np.concatenate([(_x > 1) | (_x < -1) | (_x == 0),
                        (_x > -1) & (np.arange(7) > 2)[:, None]], 1), 0),
    # a masked running max of i64 values past 2^53 (the CPU reference filled the masked
    # lanes with -inf, which took the values through f64: 2^60 + 3 came back 2^60), and of
    # ints into a float -inf that no lane reaches
    "masked_running_max_of_i64_past_2_53": ("""
let y = compute(a) {
    for i in 0..r:
        var m = a[i, 0]
        for j in 0..c:
            if a[i, j] % 2 == 1:
                m = max(m, a[i, j])
        out[i] = m
}
y
""", {"a": (_a := (2 ** 60 + RNG.integers(0, 1000, (3, 37))).astype(np.int64))},
        np.array([max([r[0]] + [v for v in r if v % 2 == 1]) for r in _a], np.int64), 0),
    "masked_running_max_of_ints_none_reached": ("""
let y = compute(a) {
    for i in 0..r:
        var m = -inf
        for j in 0..c:
            if a[i, j] > 1000:
                m = max(m, a[i, j])
        out[i] = m
}
y
""", {"a": RNG.integers(-100, 100, (3, 37)).astype(np.int32)}, np.full(3, -np.inf, np.float32), 0),
    # reduce kernels yielding under an `if`: the lanes the `if` leaves out are filled with
    # the integer's own extreme (the CPU reference filled them with -inf or inf, which took
    # u64 and i64 values through f64: a max of 2^63 + 978 came back 2^63); bools likewise
    "masked_reduce_max_of_u64": ("""
let r = compute(a) {
    @kernel reduce(max)
    for i in 0..n:
        if a[i] % 2 == 0:
            yield a[i]
}
r
""", {"a": (_u := (2 ** 63 + RNG.integers(0, 1000, 37).astype(np.uint64)).astype(np.uint64))},
        np.uint64(_u[_u % 2 == 0].max()), 0),
    "masked_reduce_min_of_i64_along_rows": ("""
let r = compute(a) {
    @kernel reduce(min, axis=1)
    for i in 0..r, j in 0..c:
        if j > 0:
            yield a[i, j]
}
r
""", {"a": (_a := (2 ** 60 + RNG.integers(0, 1000, (3, 37))).astype(np.int64))},
        _a[:, 1:].min(1), 0),
    "masked_argmax_of_i64_over_many_chunks": ("""
let r = compute(a) {
    @kernel reduce(argmax)
    for i in 0..r, j in 0..c:
        if j % 3 != 1:
            yield (a[i, j], i * c + j)
}
r
""", {"a": (_a := (2 ** 60 + np.arange(15000).reshape(3, 5000) * 7 % 9973).astype(np.int64))},
        np.int64(np.argmax(np.where(np.arange(5000) % 3 != 1, _a, np.iinfo(np.int64).min))), 0),
    "masked_argmax_and_max_of_bools": ("""
let best = compute(x) {
    @kernel reduce(argmax, axis=1)
    for i in 0..r, j in 0..c:
        if j > 2:
            yield (x[i, j] > 1.5, j)
}
let m = compute(x) {
    @kernel reduce(max, axis=1)
    for i in 0..r, j in 0..c:
        if j > 2:
            yield x[i, j] > 1.5
}
best * 2 + m
""", {"x": (_x := _f32(7, 37))},
        np.array([3 + np.argmax(w[3:] > 1.5) for w in _x], np.int64) * 2 + (_x[:, 3:] > 1.5).any(1), 0),
}


# kernels computing in i64, which WebGPU has not: a device error there
_I64_KERNELS = {"typed_i64_sum_of_i32_products", "typed_i64_sum_of_wrapping_products",
                "masked_running_max_of_i64_past_2_53", "masked_reduce_max_of_u64",
                "masked_reduce_min_of_i64_along_rows", "masked_argmax_of_i64_over_many_chunks"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_variant_equals_numpy(name, device):
    src, inputs, want, tol = CASES[name]
    if name in _I64_KERNELS and device.startswith(("vulkan", "gl")):
        # (a kernel of i32 inputs summing into an i64 var listed the schedules' reasons,
        # none of them the 64-bit integers that the program the launch's sizes build has;
        # such a sum is now held in two words, and its result, past the 32 bits an i64 is
        # stored in there, a runtime error)
        kind = "runtime" if name.startswith("typed_i64_sum") else "device"
        err = raises(kind, src, None, None, device, **inputs)
        assert "64-bit integers" in err.message, err.render()
        return
    assert_equals_numpy(zynbook.Session(device=device).run(src, **inputs), want, tol)


@pytest.mark.parametrize("device", DEVICES)
def test_an_integer_literal_past_i32_is_i64(device):
    """`a[i] + 3000000000` on i32 `a`: the literal does not fit i32, so it is i64 and not
    weak, as numpy infers it (it took a's i32 and wrapped: -1294967295 for 1; WebGPU said it
    could not spell the i32 constant); a device without 64-bit integers says so."""
    src = ("let y = compute(a) {\n"
           "    for i in 0..n:\n"
           "        out[i] = a[i] + 3000000000 - (-2147483649 + i)\n"
           "}\ny\n")
    a = np.int32([1, -5, 7, 2 ** 31 - 1])
    want = a.astype(np.int64) + 3000000000 - (-2147483649 + np.arange(4))
    if device.startswith(("vulkan", "gl")):
        # refused at the statement whose i64 arithmetic may leave 32 bits
        err = raises("device", src, 3, 9, device, a=a)
        assert "64-bit integers" in err.message, err.render()
        return
    assert_equals_numpy(zynbook.Session(device=device).run(src, a=a), want, 0)


def test_an_integer_literal_past_64_bits_is_a_type_error():
    src = ("let y = compute(x) {\n"
           "    for i in 0..n:\n"
           "        out[i] = x[i] + float(99999999999999999999)\n"
           "}\ny\n")
    err = raises("type", src, 3, 31, x=np.ones(3, np.float32))
    assert "does not fit 64 bits" in err.message, err.render()


@pytest.mark.parametrize("device", DEVICES)
def test_a_guarded_read_past_the_axis_by_a_constant_loop_is_a_runtime_error(device):
    """The same load with a guard that lets t reach past the row (t < 50 of 37): the reads
    that happen are checked, a runtime error at the index on every device; without the `if`
    the constant bound is still held to the axis (a shape error before anything runs)."""
    src = ("let y = compute(x) {\n"
           "    for blk in 0..B:\n"
           "        shared var a[64]\n"
           "        for t in 0..64:\n"
           "            if t < 50:\n"
           "                a[t] = x[blk, t]\n"
           "        barrier()\n"
           "        for t in 0..37:\n"
           "            out[blk, t] = a[t]\n"
           "}\ny\n")
    x = np.ones((3, 37), np.float32)
    err = raises("runtime", src, 6, 31, device, x=x)
    assert "index 37 is out of range for an axis of size 37 of `x`" in err.message, err.render()
    unguarded = src.replace("            if t < 50:\n    ", "").replace("\n                a[t]", "\n            a[t]")
    err = raises("shape", unguarded, 5, 27, device, x=x)
    assert "the loop covers 64 positions but the axis has 37" in err.message, err.render()


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_int_past_i32_in_integer_arithmetic_is_i64(device):
    """`a[i] + k` with the host's k = 3000000000 on i32 `a`: the host int keeps its value,
    as the literal does (it was an i32 size: -1294967295 for 1 on cpu and cpu:native); a
    WebGPU device refuses the 64-bit sum at its line."""
    src = "let y = compute(a) {\n    for i in 0..n:\n        out[i] = a[i] + k\n}\ny\n"
    a = np.int32([1, -5, 7])
    if device.startswith(("vulkan", "gl")):
        # k is i64 there: the sum is refused at its statement, before any launch
        err = raises("device", src, 3, 9, device, a=a, k=3_000_000_000)
        assert "64-bit integer arithmetic" in err.message, err.render()
        return
    assert_equals_numpy(zynbook.Session(device=device).run(src, a=a, k=3_000_000_000),
           a.astype(np.int64) + 3_000_000_000, 0)


_BIG_SHARED = """
let y = compute(x) {
    for b in 0..1:
        shared var s[N]
        for i in 0..7:
            s[i] = x[i]
        barrier()
        for i in 0..7:
            out[i] = s[i]
}
"""


def test_a_shared_array_past_2_31_elements_is_indexed_in_64_bits():
    """cpu:native's block memory of 3e9 elements: 64-bit indices and loop counters (a 32-bit
    counter never reached the bound: the kernel ran for ever)."""
    from compute_testing import lower_block
    from zynbook.compiler.codegen import c as c_codegen
    k, _, sizes, _ = lower_block(_BIG_SHARED.replace("N", "3000000000"), {"x": np.zeros(7, np.float32)})
    program = c_codegen.render_program(k, sizes)
    assert "3000000000LL" in program.source and "for (int " not in program.source
    assert program.scratch_bytes == 3000000000 * 4


@pytest.mark.parametrize("device", DEVICES)
def test_a_shared_array_past_the_machines_memory_is_refused(device):
    """Shared arrays of 1.1 TiB: a memory error on the CPU devices (before anything is
    allocated), a device error where the target cannot hold it."""
    x = np.arange(7, dtype=np.float32)
    with pytest.raises((zynbook.ZynMLMemoryError, zynbook.ZynMLDeviceError)) as err:
        zynbook.Session(device=device).run(_BIG_SHARED.replace("N", "300000000000"), x=x)
    if device.startswith("cpu"):
        assert isinstance(err.value, zynbook.ZynMLMemoryError) and "1.1 TiB" in err.value.message


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_u64_compared_with_signed_integers(device, op):
    """A u64 against an i64 or i32 as numpy compares them (no integer type holds both: a
    negative signed value is below every u64), the u64 on either side."""
    a = np.array([2 ** 63 + 5, 3, 2 ** 64 - 1, 0, 7], np.uint64)
    b = np.array([-1, -7, 5, 0, 7], np.int64)
    c = np.array([-1, 2, 5, 0, 9], np.int32)
    for other, name in ((b, "b"), (c, "c")):
        for left, right, l, r in (("a", name, a, other), (name, "a", other, a)):
            src = f"let y = compute(a, {name}) {{\n    for i in 0..n:\n        out[i] = {left}[i] {op} {right}[i]\n}}"
            session = zynbook.Session(device=device)
            if device.startswith(("vulkan", "gl", "webgpu", "metal")):
                with pytest.raises(zynbook.ZynMLDeviceError):
                    session.run(src, a=a, **{name: other})
                continue
            session.run(src, a=a, **{name: other})
            got = np.asarray(session.namespace["y"].numpy()).astype(bool)
            np.testing.assert_array_equal(got, eval(f"l {op} r"), err_msg=f"{left} {op} {right}")
