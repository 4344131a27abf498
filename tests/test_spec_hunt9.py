"""Programs written from the spec's kernel types and tile bodies (zynml-compute-system.md,
docs/language.md) with unusual but legal variations: odd sizes, f16 and bf16 tiles, masks
written as floats, bools or index arithmetic, names the generated code also uses. Every
device present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9909)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ f16 `@` of tiles that stay tiles (the block schedule)

_HA = RNG.standard_normal((9, 257)).astype(np.float16)
_HB = RNG.standard_normal((257, 5)).astype(np.float16)

_HALF_PRODUCTS = {
    "row_blocks_of_3": ("""let c = compute(a, b) {
    @kernel fused
    for r in 0..rows step 3:
        out[r:r+3] = a[r:r+3] @ b
}
c""", lambda p: p),
    "row_blocks_of_4_held_then_scaled": ("""let c = compute(a, b) {
    @kernel fused
    for r in 0..rows step 4:
        let t = a[r:r+4] @ b
        out[r:r+4] = t * 2.0 - 1.0
}
c""", lambda p: p * np.float16(2) - np.float16(1)),
    "transposed_operand": ("""let c = compute(a, bt) {
    @kernel fused
    for r in 0..rows step 7:
        out[r:r+7] = a[r:r+7] @ transpose(bt)
}
c""", lambda p: p),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_PRODUCTS))
def test_an_f16_product_of_tiles_rounds_once_as_numpy(name, device):
    """`a[r:r+3] @ b` of f16 tiles in a block body: numpy's f16 matmul sums f32 products in
    f32 and rounds once. The block schedule (cpu:native, WebGPU) multiplied in f16, rounding
    every product, and was up to 4 ulp off at K = 257; now exact."""
    src, epilogue = _HALF_PRODUCTS[name]
    got = np.asarray(_run(device, src, a=_HA, b=_HB, bt=np.ascontiguousarray(_HB.T)))
    want = epilogue(_HA @ _HB)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ dot of f16 vectors

_HQ = RNG.standard_normal((2, 7, 33)).astype(np.float16)
_HK = RNG.standard_normal((2, 5, 33)).astype(np.float16)

_HALF_DOTS = {
    "scores_elementwise": ("""let s = compute(q, k) {
    @kernel elementwise
    for b in 0..batch, i in 0..sq, j in 0..sk:
        out[b, i, j] = dot(q[b, i], k[b, j])
}
s""", lambda s: s),
    "row_max_of_scores_in_a_var": ("""let s = compute(q, k) {
    for b in 0..batch, i in 0..sq:
        var best = -inf
        for j in 0..sk:
            let sc = dot(q[b, i], k[b, j])
            best = max(best, sc)
        out[b, i] = best
}
s""", lambda s: s.max(2)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_DOTS))
def test_an_f16_dot_rounds_once_as_numpy(name, device):
    """`dot(q[b, i], k[b, j])` of f16 rows is numpy's `dot`: f32 products summed in f32,
    rounded once. Every device rounded each product to f16 first (`sum(x * y)`), so the dot
    differed from numpy's and from the same product written with `@` (up to 1 ulp in 2 of
    3 scores at head_dim 33)."""
    src, pick = _HALF_DOTS[name]
    got = np.asarray(_run(device, src, q=_HQ, k=_HK))
    want = pick(np.einsum("bid,bjd->bij", _HQ.astype(np.float32),
                          _HK.astype(np.float32)).astype(np.float16))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ f16 sums along an axis other than the last

# multiples of 1/16 whose f32 sums are exact in any order, past f16's steps of 1/16 from 128
_HM = (RNG.integers(-2000, 2000, (257, 7)) / 16).astype(np.float16)

_HALF_SUMS = {
    "reduce_axis_0_of_an_input": """let r = compute(m) {
    @kernel fused
    out = reduce(+, m, axis=0)
}
r""",
    "reduce_axis_0_in_a_loop": """let r = compute(m) {
    @kernel fused
    for c in 0..1:
        out[c] = reduce(+, m, axis=0)
}
r""",
    "reduce_kernel_along_the_outer_loop": """let r = compute(m) {
    @kernel reduce(+, axis=0)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
r""",
    "row_sum_of_the_transpose": """let r = compute(m) {
    @kernel fused
    out = transpose(row_sum(transpose(m)))
}
r""",
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HALF_SUMS))
def test_an_f16_sum_along_the_first_axis_rounds_once(name, device):
    """An f16 sum over rows is summed in f32 and rounded once, as along the last axis (numpy
    does that only along the last axis: along another its add.reduce rounds each step to
    f16). The reference followed numpy there and differed from every compiled device, by
    up to 3 (of 1472) here."""
    got = np.asarray(_run(device, _HALF_SUMS[name], m=_HM)).reshape(-1)
    want = _HM.astype(np.float32).sum(0).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


# ------------------------------------ an untyped var summing f16 values

_HR = (RNG.integers(-2000, 2000, (7, 257)) / 16).astype(np.float16)

_UNTYPED_SUMS = {
    "row_sum": ("""let r = compute(x) {
    for i in 0..rows:
        var s = 0.0
        for j in 0..cols:
            s += x[i, j]
        out[i] = s
}
r""", lambda x: x.astype(np.float32).sum(1).astype(np.float16)),
    "mean_of_a_row_then_centred": ("""let r = compute(x) {
    @kernel fused
    for b in 0..batch:
        var mean = 0.0
        for i in 0..hidden:
            mean += x[b, i]
        mean /= hidden
        for i in 0..hidden:
            out[b, i] = x[b, i] - mean
}
r""", lambda x: x - (x.astype(np.float32).sum(1, keepdims=True).astype(np.float16)
                     / np.float16(257))),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_UNTYPED_SUMS))
def test_an_untyped_var_summing_f16_sums_in_f32_as_a_typed_one(name, device):
    """`var s = 0.0` summing f16 values is an f16 accumulator (the literal is weak), which
    sums in f32 and is rounded where it is stored, as `var s: f16 = 0.0` does. The read of
    `s` in `s + x[i, j]` kept the f32 type it was lowered with, so the compiled devices
    rounded the running sum to f16 at every step (off by up to 4 at sums near 1000)."""
    src, want = _UNTYPED_SUMS[name]
    got = np.asarray(_run(device, src, x=_HR))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want(_HR))


# ------------------------------------ the device interface: a tiny transformer trained

_S, _E, _H, _KV, _D, _VOC, _PAD = 7, 6, 3, 1, 2, 5, 3
_IDS, _TARGETS = [3, 1, 4, 1, 0, 2, 4], [1, 4, 1, 0, 2, 4, 3]
_LR, _B1, _B2, _EPS_A, _WD, _EPS = 0.05, 0.8, 0.95, 1e-6, 0.1, 1e-5
_STEPS = 2
_PARAMS = {"table": RNG.standard_normal((_VOC, _E)).astype(np.float32),
           "g": (1 + 0.1 * RNG.standard_normal(_E)).astype(np.float32),
           "wq": (0.5 * RNG.standard_normal((_E, _H * _D))).astype(np.float32),
           "wk": (0.5 * RNG.standard_normal((_E, _KV * _D))).astype(np.float32),
           "wv": (0.5 * RNG.standard_normal((_E, _KV * _D))).astype(np.float32),
           "wo": (0.5 * RNG.standard_normal((_H * _D, _VOC))).astype(np.float32)}

_TRAIN = f"""let P = [upload(table), upload(g), upload(wq), upload(wk), upload(wv), upload(wo)]
let M = [alloc(len(P[0])), alloc(len(P[1])), alloc(len(P[2])), alloc(len(P[3])), alloc(len(P[4])), alloc(len(P[5]))]
let V = [alloc(len(P[0])), alloc(len(P[1])), alloc(len(P[2])), alloc(len(P[3])), alloc(len(P[4])), alloc(len(P[5]))]
let ids = upload_u32({_IDS})
let tg = upload_u32({_TARGETS})
let S = {_S}
let E = {_E}
let HD = {_H * _D}
let KD = {_KV * _D}
var losses = []
for step in 1..{_STEPS + 1}:
    let x = embedding(P[0], ids, S, E)
    let h = rms_norm(x, P[1], S, E, {_EPS})
    let q = matmul(h, P[2], S, E, HD)
    let k = matmul(h, P[3], S, E, KD)
    let v = matmul(h, P[4], S, E, KD)
    let a = causal_attention(q, k, v, S, {_H}, {_KV}, {_D})
    let logits = matmul(a, P[5], S, HD, {_VOC})
    let (loss, dl) = cross_entropy_forward_backward(logits, tg, S, {_VOC}, {_PAD})
    let dwo = matmul(transpose_2d(a, S, HD), dl, HD, S, {_VOC})
    let da = matmul(dl, transpose_2d(P[5], HD, {_VOC}), S, {_VOC}, HD)
    let (dq, dk, dv) = causal_attention_backward(da, q, k, v, S, {_H}, {_KV}, {_D})
    let ht = transpose_2d(h, S, E)
    let dh = matmul(dq, transpose_2d(P[2], E, HD), S, HD, E)
    add_assign(dh, matmul(dk, transpose_2d(P[3], E, KD), S, KD, E))
    add_assign(dh, matmul(dv, transpose_2d(P[4], E, KD), S, KD, E))
    let (dx, dg) = rms_norm_backward(x, P[1], dh, S, E, {_EPS})
    let G = [embedding_backward(dx, ids, {_VOC}, S, E), dg, matmul(ht, dq, E, S, HD),
             matmul(ht, dk, E, S, KD), matmul(ht, dv, E, S, KD), dwo]
    for p in 0..6:
        adamw_step(P[p], G[p], M[p], V[p], {_LR}, {_B1}, {_B2}, {_EPS_A}, {_WD}, step)
    losses = losses + [loss]
[losses, download(P[0]), download(P[1]), download(P[2]), download(P[3]), download(P[4]), download(P[5])]"""


def _torch_training():
    """The losses and the parameters after _STEPS AdamW steps, by torch's autograd in f64."""
    import torch
    tp = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in _PARAMS.values()]
    opt = torch.optim.AdamW(tp, lr=_LR, betas=(_B1, _B2), eps=_EPS_A, weight_decay=_WD)
    ids, targets, losses = torch.tensor(_IDS), torch.tensor(_TARGETS), []
    group = _H // _KV
    for _ in range(_STEPS):
        opt.zero_grad()
        x = tp[0][ids]
        h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + _EPS) * tp[1]
        q = (h @ tp[2]).view(_S, _H, _D).transpose(0, 1)
        k = (h @ tp[3]).view(_S, _KV, _D).transpose(0, 1).repeat_interleave(group, 0)
        v = (h @ tp[4]).view(_S, _KV, _D).transpose(0, 1).repeat_interleave(group, 0)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = a.transpose(0, 1).reshape(_S, _H * _D) @ tp[5]
        loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=_PAD)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy() for p in tp]


@pytest.mark.parametrize("device", DEVICES)
def test_a_tiny_transformer_trained_with_the_device_builtins_equals_torch(device):
    """Embedding, RMSNorm, grouped-query causal attention (3 heads over 1 key/value head of
    2), a vocabulary projection and cross-entropy with a padded target, backward through
    each with the builtins' backward passes and matmuls of transposes, then AdamW with weight
    decay on every parameter, two steps: the losses and parameters equal torch's."""
    pytest.importorskip("torch")
    got = _run(device, _TRAIN, **_PARAMS)
    losses, params = _torch_training()
    assert_equals_numpy(np.asarray(got[0], np.float64), losses, 1e-5)
    for g, w in zip(got[1:], params):
        assert_equals_numpy(np.asarray(g), w.reshape(-1), 1e-5)


# ------------------------------------ tile bodies: attention by query blocks, a tiled GEMM

_TQ, _TK, _TV = (RNG.standard_normal((1, 2, 33, 7)).astype(np.float32) for _ in range(3))
_TMASK = (RNG.random((33, 33)) > 0.3).astype(np.float32)
_TMASK[:, 5] = 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [1, 7])
def test_attention_by_query_blocks_of_tiles_with_a_float_mask(rows, device):
    """Scores of a block of queries against every key as tiles, masked by `where` on a
    float mask's rows, softmax by `row_max`/`row_sum`, then `@ V`: blocks of 1 and 7 (the
    last clipped to 5) of 33 queries, a scale held in a let."""
    src = f"""let scale = 1.0 / sqrt(7.0)
let a = compute(Q, K, V, mask) {{
    @kernel fused
    for b in 0..batch, h in 0..heads:
        for i in 0..seq step {rows}:
            let S = where(mask[i:i+{rows}] > 0.5, Q[b, h, i:i+{rows}] @ transpose(K[b, h]) * scale, -inf)
            let P = exp(S - row_max(S))
            out[b, h, i:i+{rows}] = (P / row_sum(P)) @ V[b, h]
}}
a"""
    s = np.einsum("bhid,bhjd->bhij", _TQ.astype(np.float64), _TK) / np.sqrt(7.0)
    s = np.where(_TMASK > 0.5, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), _TV)
    assert_equals_numpy(_run(device, src, Q=_TQ, K=_TK, V=_TV, mask=_TMASK), want, 1e-5)


_GA, _GB = RNG.standard_normal((33, 257)).astype(np.float32), \
    RNG.standard_normal((257, 7)).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_a_gemm_tiled_by_hand_in_shared_arrays_of_5(device):
    """The spec's matmul written as workgroup tiles: 5 x 5 tiles of A and B loaded into
    shared arrays (zero past the edges) between barriers, partial products kept in a shared
    accumulator, M = 33, K = 257, N = 7 (no size a multiple of the tile)."""
    src = """let T = 5
let C = compute(A, B) {
    @kernel matmul
    @workgroup(5, 5)
    for bi in 0..(M + T - 1) / T, bj in 0..(N + T - 1) / T:
        shared var acc[T, T]
        for ti in 0..T, tj in 0..T:
            acc[ti, tj] = 0.0
        for kb in 0..(K + T - 1) / T:
            shared var As[T, T]
            shared var Bs[T, T]
            for ti in 0..T, tj in 0..T:
                let r = bi * T + ti
                let c = kb * T + tj
                As[ti, tj] = 0.0
                if r < M and c < K:
                    As[ti, tj] = A[r, c]
                let r2 = kb * T + ti
                let c2 = bj * T + tj
                Bs[ti, tj] = 0.0
                if r2 < K and c2 < N:
                    Bs[ti, tj] = B[r2, c2]
            barrier()
            for ti in 0..T, tj in 0..T:
                var s = 0.0
                for kk in 0..T:
                    s += As[ti, kk] * Bs[kk, tj]
                acc[ti, tj] += s
            barrier()
        for ti in 0..T, tj in 0..T:
            let r = bi * T + ti
            let c = bj * T + tj
            if r < M and c < N:
                out[r, c] = acc[ti, tj]
}
C"""
    got = _run(device, src, A=_GA, B=_GB, M=33, K=257, N=7)
    assert_equals_numpy(got, _GA.astype(np.float64) @ _GB, 1e-4)


# ------------------------------------ bf16 tiles held in f32 (the block schedule)


@pytest.mark.parametrize("device", DEVICES)
def test_a_bf16_flash_attention_in_blocks_of_one_query_keeps_its_tiles_in_f32(device):
    """The spec's flash attention over bf16 Q, K, V in blocks of 1 query and 33 keys (the
    block schedule): bf16 values are held in f32 until stored into a tensor, so the running
    output and the score and value products are not rounded at each step. The block arrays
    of those tiles were bf16, and the products were rounded to bf16: 7.9e-3 off torch's
    attention at outputs up to 1.4, now 1.5e-3, as the reference is."""
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(38)
    q, k, v = (torch.randn(1, 2, 33, 5, generator=gen).bfloat16() for _ in range(3))
    src = """let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 1:
            var m = -inf
            var l = 0.0
            var o = zeros(1, head_dim)
            for kv_block in 0..seq_len step 33:
                let S = Q[b, h, q_block:q_block+1] @ transpose(K[b, h, kv_block:kv_block+33]) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kv_block:kv_block+33]
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+1] = o / l
}
attn"""
    got = _run(device, src, Q=q, K=k, V=v, head_dim=5)
    got = np.asarray(got.float().numpy() if hasattr(got, "float") else got, np.float64)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    # outputs up to 1.4: the reference is 1.5e-3 off, the tiles rounded at each step 7.9e-3
    assert_equals_numpy(got, want.numpy(), 3e-3)
