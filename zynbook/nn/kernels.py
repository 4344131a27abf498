"""The device interface's operations, written in ZynML.

Every operation of `zynbook.nn.Device` is one of these programs (one or a few compute
blocks), compiled and launched like any user program, so each runs on every device a
session has. Buffers reach them reshaped (no copy) to the axes the body indexes; host ints
are sizes, host floats scalar arguments (so a new learning rate does not compile again).
"""
from __future__ import annotations

from ..library import GEMM, RMSNORM, SOFTMAX

MATMUL = GEMM                     # a [M, K], b [K, N]

SOFTMAX_ROWS = SOFTMAX            # x [rows, n]

RMS_NORM = RMSNORM                # x [rows, n], weight [n], eps

COPY = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i]
}
y
"""

ZERO = """let y = compute() {
    @kernel elementwise
    for i in 0..n:
        out[i] = 0.0
}
y
"""

ADD = """let y = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] + b[i]
}
y
"""

BIAS_ADD = """let y = compute(m, b) {
    @kernel elementwise
    for r in 0..rows, c in 0..dim:
        out[r, c] = m[r, c] + b[c]
}
y
"""

# m [numel], b [dim], numel not a multiple of dim: the bias wraps around mid-row
BIAS_ADD_FLAT = """let y = compute(m, b) {
    @kernel elementwise
    for i in 0..numel:
        out[i] = m[i] + b[i % dim]
}
y
"""

TRANSPOSE = """let y = compute(x) {
    @kernel elementwise
    for c in 0..cols, r in 0..rows:
        out[c, r] = x[r, c]
}
y
"""

# weight [vocab, dim], ids [seq] (u32)
EMBEDDING = """let y = compute(weight, ids) {
    @kernel elementwise
    for t in 0..seq, d in 0..dim:
        out[t, d] = weight[int(ids[t]), d]
}
y
"""

# the largest token id of ids [seq] (u32), which the embedding operations check against
# the table's rows on every device
MAX_ID = """let y = compute(ids) {
    @kernel reduce(max)
    for t in 0..seq:
        yield ids[t]
}
y
"""

# x [outer, n, inner] -> [outer, inner]
REDUCE_SUM = """let y = compute(x) {
    for o in 0..outer, c in 0..inner:
        var s = 0.0
        for a in 0..n:
            s += x[o, a, c]
        out[o, c] = s
}
y
"""

SUM_ALL = """let y = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
y
"""

# grouped-query causal attention over a KV cache. q [seq_q, heads, head_dim], k and v
# [seq_k, kv_heads, head_dim]; query i sees keys 0..start + i; `group` query heads share one
# key/value head. `causal_attention` is this with start = 0 and seq_k = seq_q. Written as
# the three-pass attention the attention schedule recognises (one block of queries a
# (head, query block), keys in tiles); as loops a thread would score every key again for
# each of head_dim outputs
KV_ATTENTION = """let y = compute(q, k, v) {
    @kernel attention
    for i in 0..seq_q, h in 0..heads:
        let g = h / group
        var m = -inf
        for j in 0..seq_k:
            if j <= start + i:
                m = max(m, dot(q[i, h], k[j, g]) * scale)
        var s = 0.0
        for j in 0..seq_k:
            if j <= start + i:
                s += exp(dot(q[i, h], k[j, g]) * scale - m)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_k:
                if j <= start + i:
                    acc += exp(dot(q[i, h], k[j, g]) * scale - m) * v[j, g, d]
            out[i, h, d] = acc / s
}
y
"""

SOFTMAX_BACKWARD = """let y = compute(sm, g) {
    @kernel fused
    for r in 0..rows:
        var d = 0.0
        for i in 0..n:
            d += sm[r, i] * g[r, i]
        for i in 0..n:
            out[r, i] = sm[r, i] * (g[r, i] - d)
}
y
"""

# y = x * r * w with r = rsqrt(mean(x^2) + eps):
# dx = r w g - x r^3 / n * sum(g w x), dw = sum over rows of g x r
RMS_NORM_BACKWARD = """let rstd = compute(x) {
    for r in 0..rows:
        var ss = 0.0
        for i in 0..n:
            ss += x[r, i] * x[r, i]
        out[r] = rsqrt(ss / n + eps)
}
let dx = compute(x, weight, g, rstd) {
    @kernel fused
    for r in 0..rows:
        var a = 0.0
        for i in 0..n:
            a += g[r, i] * weight[i] * x[r, i]
        let rs = rstd[r]
        for i in 0..n:
            out[r, i] = rs * weight[i] * g[r, i] - x[r, i] * rs * rs * rs * a / n
}
let dw = compute(x, g, rstd) {
    for i in 0..n:
        var s = 0.0
        for r in 0..rows:
            s += g[r, i] * x[r, i] * rstd[r]
        out[i] = s
}
(dx, dw)
"""

# scatter-add written as a gather (every row of the table sums the positions that chose it),
# so it needs no atomics and adds in the same order on every device
# the positions of each token id are a bucket of `order` (the positions sorted by id, stably),
# from start[w] to start[w + 1]: a row sums its own positions only, in increasing position
# (vocab x dim + seq x dim steps, where testing every position in every row took
# vocab x dim x seq)
EMBEDDING_BACKWARD = """let y = compute(g, order, start) {
    for w in 0..vocab, d in 0..dim:
        var s = 0.0
        for t in start[w]..start[w + 1]:
            s += g[order[t], d]
        out[w, d] = s
}
y
"""

# causal attention backward, recomputing the scores: P = softmax(q k^T * scale) from the
# row log-sum-exp, dS = P (dO v^T - rowsum(dO * O)), dQ = scale dS k, dK = scale dS^T q,
# dV = P^T dO (key/value heads summing over the query heads of their group)
ATTENTION_BACKWARD = """let lse = compute(q, k) {
    for i in 0..seq, h in 0..heads:
        let g = h / group
        var m = -inf
        for j in 0..seq:
            if j <= i:
                m = max(m, dot(q[i, h], k[j, g]) * scale)
        var s = 0.0
        for j in 0..seq:
            if j <= i:
                s += exp(dot(q[i, h], k[j, g]) * scale - m)
        out[i, h] = m + log(s)
}
let p = compute(q, k, lse) {
    for h in 0..heads, i in 0..seq, j in 0..seq:
        if j <= i:
            out[h, i, j] = exp(dot(q[i, h], k[j, h / group]) * scale - lse[i, h])
}
let delta = compute(dout, o) {
    for i in 0..seq, h in 0..heads:
        out[i, h] = dot(dout[i, h], o[i, h])
}
let ds = compute(p, dout, v, delta) {
    for h in 0..heads, i in 0..seq, j in 0..seq:
        if j <= i:
            out[h, i, j] = p[h, i, j] * (dot(dout[i, h], v[j, h / group]) - delta[i, h])
}
let dq = compute(ds, k) {
    for i in 0..seq, h in 0..heads, d in 0..head_dim:
        var acc = 0.0
        for j in 0..seq:
            acc += ds[h, i, j] * k[j, h / group, d]
        out[i, h, d] = acc * scale
}
let dk = compute(ds, q) {
    for j in 0..seq, g in 0..kv_heads, d in 0..head_dim:
        var acc = 0.0
        for r in 0..group:
            for i in 0..seq:
                acc += ds[g * group + r, i, j] * q[i, g * group + r, d]
        out[j, g, d] = acc * scale
}
let dv = compute(p, dout) {
    for j in 0..seq, g in 0..kv_heads, d in 0..head_dim:
        var acc = 0.0
        for r in 0..group:
            for i in 0..seq:
                acc += p[g * group + r, i, j] * dout[i, g * group + r, d]
        out[j, g, d] = acc
}
(dq, dk, dv)
"""

# logits [rows, vocab], targets [rows] (u32); rows whose target is the pad id count for
# nothing. The pad id is any u32 (u32::MAX is a common one), compared as u32: it comes as
# two sizes below 2^16, pad_hi and pad_lo, since a size reaches a WebGPU kernel as an i32
# and int(targets[r]) of a u32 past 2^31 is negative
CE_KEEP = "targets[r] / u32(65536) != u32(pad_hi) or targets[r] % u32(65536) != u32(pad_lo)"

CE_COUNT = f"""let y = compute(targets) {{
    @kernel reduce(+)
    for r in 0..rows:
        yield float({CE_KEEP})
}}
y
"""

# the largest target that is not the pad id (0 where every one is)
CE_MAX_TARGET = f"""let y = compute(targets) {{
    @kernel reduce(max)
    for r in 0..rows:
        yield targets[r] * u32({CE_KEEP})
}}
y
"""

CE_FORWARD_BACKWARD = f"""let loss_rows = compute(logits, targets) {{
    for r in 0..rows:
        var m = -inf
        for c in 0..vocab:
            m = max(m, logits[r, c])
        var s = 0.0
        for c in 0..vocab:
            s += exp(logits[r, c] - m)
        if {CE_KEEP}:
            // m - logit first: m + log(s) rounds log(s) away where the logits are large
            out[r] = (m - logits[r, int(targets[r])] + log(s)) / count
}}
let grad = compute(logits, targets) {{
    for r in 0..rows:
        let t = int(targets[r])
        var m = -inf
        for c in 0..vocab:
            m = max(m, logits[r, c])
        var s = 0.0
        for c in 0..vocab:
            s += exp(logits[r, c] - m)
        for c in 0..vocab:
            if {CE_KEEP}:
                out[r, c] = (exp(logits[r, c] - m) / s - float(c == t)) / count
}}
let loss = compute(loss_rows) {{
    @kernel reduce(+)
    for r in 0..rows:
        yield loss_rows[r]
}}
(loss, grad)
"""

# AdamW, decoupled weight decay: p <- p * decay, then the bias-corrected Adam step, in
# torch.optim.AdamW's order. The host computes in f64 what depends on the hyperparameters
# alone (decay = 1 - lr wd, one_b = 1 - beta, step_size = lr / (1 - beta1^t), sqrt_bc2 =
# sqrt(1 - beta2^t)): 1 - beta2 taken in f32 is off by 1.3e-5 of itself at 0.999 and 1.4e-3
# at 0.99999 (f32(0.99999) is not 0.99999), and v with it
ADAMW = """let m_new = compute(m, g) {
    @kernel elementwise
    for i in 0..n:
        out[i] = beta1 * m[i] + one_b1 * g[i]
}
let v_new = compute(v, g) {
    @kernel elementwise
    for i in 0..n:
        out[i] = beta2 * v[i] + one_b2 * g[i] * g[i]
}
let p_new = compute(p, m_new, v_new) {
    @kernel elementwise
    for i in 0..n:
        out[i] = p[i] * decay - step_size * m_new[i] / (sqrt(v_new[i]) / sqrt_bc2 + eps)
}
(p_new, m_new, v_new)
"""

# rotary position embedding of x [seq, heads, head_dim], interleaved pairs (2p, 2p + 1) of
# position pos0 + s turned by (pos0 + s) * base^(-2p / head_dim); `log_step` is
# -2 log(base) / head_dim. sign = -1 turns back: the backward pass (the rotation's transpose).
ROPE = """let y = compute(x) {
    @kernel elementwise
    for s in 0..seq, h in 0..heads, p in 0..half:
        let angle = (float(s) + pos0) * exp(float(p) * log_step)
        let c = cos(angle)
        let sn = sign * sin(angle)
        let x0 = x[s, h, p * 2]
        let x1 = x[s, h, p * 2 + 1]
        out[s, h, p * 2] = x0 * c - x1 * sn
        out[s, h, p * 2 + 1] = x0 * sn + x1 * c
}
y
"""

# rows of b [rows_b, dim] after the rows of a [rows_a, dim] (a KV cache growing)
APPEND_ROWS = """let y = compute(a, b) {
    for t in 0..rows_a, c in 0..dim:
        out[t, c] = a[t, c]
    for t in 0..rows_b, c in 0..dim:
        out[rows_a + t, c] = b[t, c]
}
y
"""

# kv_attention over a cache buffer of fixed capacity (rows past the valid ones are ignored):
# the position `start` is a scalar argument, so decoding one token after another launches
# the same compiled kernel every time
KV_ATTENTION_FIXED = KV_ATTENTION.replace("if j <= start + i:", "if float(j) <= start + float(i):")

# rows of `new` written into `cache` from row `at` on (a scalar argument), the rest kept
WRITE_ROWS = """let y = compute(cache, new) {
    @kernel elementwise
    for t in 0..rows, c in 0..dim:
        let r = t - int(at)
        var v = cache[t, c]
        if r >= 0 and r < q_len:
            v = new[clamp(r, 0, q_len - 1), c]
        out[t, c] = v
}
y
"""
