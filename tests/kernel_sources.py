"""ZynML kernel sources that the tests and benches feed to every device, written once.

`SPEC_*` are the spec's kernel snippets as its code blocks have them (comments, blank lines
and the line naming the result included), programs that `zynbook.run` takes as they are.
The backend tests and benches lower one compute block at a time: `block_of` gives a
snippet's block without comments, blank lines, the result line or the annotations named,
and the plain names below (`MATMUL`, `LAYER_NORM`, ...) are those blocks. The spec's
attention kernels (`ATTENTION_TEMPLATE`, `FLASH_TEMPLATE` with `BLOCK` for its block size) are
the spec's text; `lower_template` lowers one to CIR. `program` turns a block back into a
program that yields its result.
"""
from __future__ import annotations


# ------------------------------------------------------- the spec's attention kernels

# `BLOCK` stands for the block size (any positive size).
FLASH_TEMPLATE = """let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step BLOCK:
            var m = -inf
            var l = 0.0
            var o = zeros(BLOCK, head_dim)
            for kv_block in 0..seq_len step BLOCK:
                let K_block = K[b, h, kv_block:kv_block+BLOCK]
                let V_block = V[b, h, kv_block:kv_block+BLOCK]
                let S = Q[b, h, q_block:q_block+BLOCK] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+BLOCK] = o / l
}
"""

ATTENTION_TEMPLATE = """let attn = compute(Q, K, V, mask) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_len:
                if mask[i, j]:
                    let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                    let weight = exp(score - max_score) / sum_exp
                    acc += weight * V[b, h, j, d]
            out[b, h, i, d] = acc
}
"""

# The flash attention with the running output clipped to the last query block: the same
# meaning (the rows past seq_len are never stored).
CLIPPED_FLASH_TEMPLATE = FLASH_TEMPLATE.replace(
    "var o = zeros(BLOCK, head_dim)", "var o = zeros(min(BLOCK, seq_len - q_block), head_dim)")


def lower_template(text: str, ranks: list, dtypes: list | None = None):
    """The CIR of the one compute block in `text`, its inputs f32 (or `dtypes`) of the
    given ranks."""
    from zynbook.compiler import ast as A
    from zynbook.compiler.lower import InputSig, lower_compute
    from zynbook.compiler.passes.pipeline import run_pipeline
    from zynbook.compiler.parser import parse
    prog = parse(text)
    node = None
    stack = [prog.body]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Compute):
            node = x
            break
        if isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, A.Node):
            stack.extend(vars(x).values())
    dtypes = dtypes or ["f32"] * len(ranks)
    sigs = [InputSig(e.id, t, r) for e, r, t in zip(node.inputs, ranks, dtypes)]
    return run_pipeline(lower_compute(node, sigs, {}, source=text)).kernel


# ---------------------------------------------------------------- the spec's text

SPEC_RELU = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = relu(x[i])
}
y
"""

SPEC_MUL_ADD = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * y[i] + 1.0
}
z
"""

SPEC_BROADCAST = """
let scaled = compute(matrix, vector) {
    @kernel elementwise
    @broadcast(vector, axis=1)
    for i in 0..rows, j in 0..cols:
        out[i, j] = matrix[i, j] * vector[j]
}
scaled
"""

SPEC_REDUCE_SUM = """
let sum = compute(data) {
    @kernel reduce(+)
    for i in 0..len:
        yield data[i]
}
sum
"""

SPEC_REDUCE_MAX = """
let max_val = compute(data) {
    @kernel reduce(max)
    for i in 0..len:
        yield data[i]
}
max_val
"""

SPEC_NORM = """
let norm = compute(data) {
    @kernel reduce(+)
    for i in 0..len:
        yield data[i] * data[i]
} |> sqrt()
norm
"""

SPEC_ROW_SUMS = """
let row_sums = compute(matrix) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}
row_sums
"""

SPEC_ARGMAX = """
let max_idx = compute(data) {
    @kernel reduce(argmax)
    for i in 0..len:
        yield (data[i], i)  // (value, index) pair
}
max_idx
"""

SPEC_MATMUL = """
let C = compute(A, B) {
    @kernel matmul
    @workgroup(16, 16)
    @shared(16 * 16 * 4 * 2)  // Tile A and B in shared memory
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
C
"""

SPEC_BATCHED_MATMUL = """
let C = compute(A, B) {
    @kernel batched_matmul
    @workgroup(16, 16, 1)
    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[b, i, k] * B[b, k, j]
        out[b, i, j] = sum
}
C
"""

SPEC_CONV2D = """
let output = compute(input, kernel, bias) {
    @kernel conv2d
    @workgroup(8, 8, 4)
    for b in 0..batch, oc in 0..out_channels:
        for oh in 0..out_h, ow in 0..out_w:
            var sum = bias[oc]
            for ic in 0..in_channels:
                for kh in 0..kernel_h, kw in 0..kernel_w:
                    let ih = oh * stride + kh - padding
                    let iw = ow * stride + kw - padding
                    if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:
                        sum += input[b, ic, ih, iw] * kernel[oc, ic, kh, kw]
            out[b, oc, oh, ow] = sum
}
output
"""

SPEC_DEPTHWISE = """
let output = compute(input, kernel) {
    @kernel conv2d_depthwise
    @workgroup(8, 8)
    for b in 0..batch, c in 0..channels:
        for oh in 0..out_h, ow in 0..out_w:
            var sum = 0.0
            for kh in 0..kernel_h, kw in 0..kernel_w:
                sum += input[b, c, oh + kh, ow + kw] * kernel[c, kh, kw]
            out[b, c, oh, ow] = sum
}
output
"""

SPEC_ATTENTION = """
let attn = compute(Q, K, V, mask) {
    @kernel attention
    @workgroup(32, 4)  // seq_tile, head_tile
    @shared(32 * 64 * 4)  // K, V tiles

    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        // Compute max for numerical stability
        var max_score = -inf
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                max_score = max(max_score, score)

        // Compute softmax denominator
        var sum_exp = 0.0
        for j in 0..seq_len:
            if mask[i, j]:
                let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                sum_exp += exp(score - max_score)

        // Weighted sum of values
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_len:
                if mask[i, j]:
                    let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)
                    let weight = exp(score - max_score) / sum_exp
                    acc += weight * V[b, h, j, d]
            out[b, h, i, d] = acc
}
attn
"""

# the spec's block as written, `zeros(64, head_dim)` included; only the closing brace the
# spec leaves out is added
SPEC_FLASH = """
let attn = compute(Q, K, V) {
    @kernel flash_attention
    @workgroup(64)
    @tile(block_q=64, block_kv=64)

    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 64:
            // Online softmax computation
            var m = -inf  // Running max
            var l = 0.0   // Running sum of exp
            var o = zeros(64, head_dim)  // Running output

            for kv_block in 0..seq_len step 64:
                // Load K, V blocks to shared memory
                let K_block = K[b, h, kv_block:kv_block+64]
                let V_block = V[b, h, kv_block:kv_block+64]

                // Compute attention scores for this block
                let S = Q[b, h, q_block:q_block+64] @ transpose(K_block) / sqrt(head_dim)

                // Update running statistics
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))

                // Update output
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new

            // Normalize
            out[b, h, q_block:q_block+64] = o / l
}
attn
"""

SPEC_SOFTMAX = """
let probs = compute(logits) {
    @kernel fused
    // First pass: find max
    let max_val = reduce(max, logits)
    // Second pass: compute exp and sum
    let shifted = logits - max_val
    let exp_vals = exp(shifted)
    let sum_exp = reduce(+, exp_vals)
    // Third pass: normalize
    out = exp_vals / sum_exp
}
probs
"""

SPEC_LAYER_NORM = """
let normalized = compute(x, gamma, beta) {
    @kernel fused
    @workgroup(256)

    for b in 0..batch:
        // Compute mean
        var mean = 0.0
        for i in 0..hidden:
            mean += x[b, i]
        mean /= hidden

        // Compute variance
        var var = 0.0
        for i in 0..hidden:
            let diff = x[b, i] - mean
            var += diff * diff
        var /= hidden

        // Normalize and scale
        let inv_std = rsqrt(var + eps)
        for i in 0..hidden:
            out[b, i] = (x[b, i] - mean) * inv_std * gamma[i] + beta[i]
}
normalized
"""

SPEC_GELU = """
let activated = compute(x) {
    @kernel elementwise
    for i in 0..len:
        // GELU: x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        let x3 = x[i] * x[i] * x[i]
        out[i] = x[i] * 0.5 * (1.0 + tanh(0.7978845608 * (x[i] + 0.044715 * x3)))
}
activated
"""

# verbatim: `let s = sin_cache[s, d]` shadows the position loop variable `s`; the writes
# below index with `s` in an index position, which means the loop variable
SPEC_ROPE = """
let rotated = compute(x, cos_cache, sin_cache) {
    @kernel elementwise
    for b in 0..batch, h in 0..heads, s in 0..seq, d in 0..head_dim/2:
        let x0 = x[b, h, s, d * 2]
        let x1 = x[b, h, s, d * 2 + 1]
        let c = cos_cache[s, d]
        let s = sin_cache[s, d]
        out[b, h, s, d * 2] = x0 * c - x1 * s
        out[b, h, s, d * 2 + 1] = x0 * s + x1 * c
}
rotated
"""


# ------------------------------------------------------------------------ blocks


def block_of(snippet: str, without: tuple = ("@shared",)) -> str:
    """The compute block of a spec snippet: no comments, blank lines or result line, and
    none of the annotation lines that start with a prefix in `without`."""
    lines = []
    for line in snippet.splitlines():
        code = line.split("//", 1)[0].rstrip()
        if code.strip() and not code.strip().startswith(without):
            lines.append(code)
    if lines[-1].isidentifier():
        lines.pop()
    return "\n".join(lines)


def unannotated(snippet: str) -> str:
    """The block with neither `@workgroup` nor `@shared`: each device picks its own."""
    return block_of(snippet, without=("@shared", "@workgroup"))


def annotated(block: str, *annotations: str) -> str:
    """`block` with these annotation lines after its `@kernel` line."""
    at = block.index("\n", block.index("@kernel"))
    return block[:at] + "".join(f"\n    {a}" for a in annotations) + block[at:].rstrip("\n")


def program(block: str) -> str:
    """`let NAME = compute(...) {...}` followed by `NAME`: a program whose value is the
    block's result."""
    name = block.split("=", 1)[0].split()[-1]
    return f"{block}\n{name}"


MUL_ADD = block_of(SPEC_MUL_ADD)
GELU = block_of(SPEC_GELU)
BROADCAST = block_of(SPEC_BROADCAST)
REDUCE_SUM = block_of(SPEC_REDUCE_SUM)
REDUCE_MAX = block_of(SPEC_REDUCE_MAX)
ARGMAX = block_of(SPEC_ARGMAX)
ROW_SUMS = block_of(SPEC_ROW_SUMS)
MATMUL = block_of(SPEC_MATMUL)
BATCHED_MATMUL = block_of(SPEC_BATCHED_MATMUL)
CONV2D = block_of(SPEC_CONV2D)
SOFTMAX_FUSED = block_of(SPEC_SOFTMAX)
LAYER_NORM = block_of(SPEC_LAYER_NORM)
ATTENTION = annotated(ATTENTION_TEMPLATE, "@workgroup(32, 4)")
# `BLOCK` stands for the tile size; the running output is clipped to the last query block
FLASH = annotated(CLIPPED_FLASH_TEMPLATE, "@workgroup(64)", "@tile(block_q=BLOCK, block_kv=BLOCK)")

# ------------------------------------------------------------- beyond the spec's text

# softmax over each row of a matrix, one loop per pass
SOFTMAX_ROWS = """let probs = compute(x) {
    @kernel fused
    for b in 0..batch:
        var m = -inf
        for i in 0..n:
            m = max(m, x[b, i])
        var s = 0.0
        for i in 0..n:
            s += exp(x[b, i] - m)
        for i in 0..n:
            out[b, i] = exp(x[b, i] - m) / s
}"""

RMS_NORM = """let n = compute(x, weight) {
    @kernel fused
    for b in 0..batch:
        var ss = 0.0
        for i in 0..hidden:
            ss += x[b, i] * x[b, i]
        let r = rsqrt(ss / hidden + eps)
        for i in 0..hidden:
            out[b, i] = x[b, i] * r * weight[i]
}"""

# a feed-forward layer whose hidden activations live in shared memory between a barrier
SHARED_FFN = """let y = compute(x, up_w, down_w) {
    @kernel fused
    for r in 0..rows:
        shared var up[ffn]
        for f in 0..ffn:
            var sum = 0.0
            for h in 0..hidden:
                sum += x[r, h] * up_w[h, f]
            up[f] = max(sum, 0.0)
        barrier()
        for h in 0..hidden:
            var sum = 0.0
            for f in 0..ffn:
                sum += up[f] * down_w[f, h]
            out[r, h] = sum
}"""

# elementwise builtins, integer arithmetic and reductions along either axis
ACTIVATIONS = """let a = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = gelu(x[i]) + sigmoid(x[i]) * relu(x[i]) - exp(x[i] * 0.1) + silu(x[i])
}"""

MATH = """let a = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        let t = tanh(x[i]) + rsqrt(abs(x[i]) + 1.0) + pow(x[i], 3.0) + floor(y[i] * 3.0)
        var u = min(x[i], y[i], 0.5)
        if x[i] > y[i]:
            u = t
        out[i] = u + clamp(y[i], -0.5, 0.5) + x[i] % 0.7
}"""

SCALE_INT = """let s = compute(x, n) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * 3 + n[i] / 2 - n[i] % 3
}"""

ARGMIN_ROWS = """let s = compute(matrix) {
    @kernel reduce(argmin, axis=1)
    for i in 0..rows, j in 0..cols:
        yield (matrix[i, j], j)
}"""

COL_MAX = """let s = compute(matrix) {
    @kernel reduce(max, axis=0)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}"""


# matmuls with an epilogue and with a guarded accumulation (the GEMM schedules' tests)
EPILOGUE = """let y = compute(A, B, bias) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = bias[j]
        for k in 0..K:
            acc += A[i, k] * B[k, j]
        out[i, j] = gelu(max(acc, 0.0) + bias[j] * 0.5)
}
y
"""

# the epilogue without gelu (whose f16 rounding the tensor-core tests' tolerance would not
# cover): a bias read twice and a relu
HALF_EPILOGUE = EPILOGUE.replace("gelu(max(acc, 0.0) + bias[j] * 0.5)", "max(acc, 0.0) + bias[j] * 0.5")

BATCHED = SPEC_BATCHED_MATMUL

GUARDED = """let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 1.5
        for k in 0..K:
            if k <= i:
                s += A[i, k] * B[k, j]
        out[i, j] = s
}
y
"""


# cells of one block run again and again (the launch cache, warm cells): a scalar `a` and a
# size `m` of their own
SCALE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * a + 1.0
}
y"""

FIRST = """let y = compute(x) {
    @kernel elementwise
    for i in 0..m:
        out[i] = x[i] * 2.0
}
y"""
