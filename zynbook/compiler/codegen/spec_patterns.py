"""The spec's attention kernels as ZynML text, and how renderers recognise them.

A renderer gives `@kernel attention` / `@kernel flash_attention` its attention schedule only
when the kernel's body is the spec's algorithm (spec: "Attention", "Flash attention"). The
check lowers the spec's text once and compares CIR up to renaming of buffers, sizes and
variables (`canon`), so any other body under those kernel types keeps its meaning on the
generic schedule. The texts live here once; renderers and tests import them.
"""
from __future__ import annotations

from .. import cir

# `BLOCK` stands for the tile size; `flash_templates` lowers it for each size it accepts.
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

BLOCKS = (16, 32, 64, 128)


def lower_template(text: str, ranks: list) -> cir.Kernel:
    """The CIR of the one compute block in `text`, its inputs f32 of the given ranks."""
    from .. import ast as A
    from ..lower import InputSig, lower_compute
    from ..parser import parse
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
    sigs = [InputSig(e.id, "f32", r) for e, r in zip(node.inputs, ranks)]
    return lower_compute(node, sigs, {}, source=text).kernel


def canon(k: cir.Kernel):
    """The kernel's body up to renaming of buffers, sizes and variables, without dtypes."""
    names: dict = {}

    def nm(x):
        if x not in names:
            names[x] = f"n{len(names)}"
        return names[x]

    for b_ in k.inputs:
        nm(b_.name)
    nm(k.output.name)

    def ty(t):
        return tuple(nm(d) if isinstance(d, str) else (d if isinstance(d, int) else ex(d)) for d in t.shape)

    def ex(e):
        if isinstance(e, (tuple, list)):
            return tuple(ex(x) for x in e)
        if e is None:
            return None
        if isinstance(e, cir.Var):
            return ("V", nm(e.name), ty(e.ty))
        if isinstance(e, cir.Const):
            return ("C", float(e.value) if not isinstance(e.value, bool) else e.value)
        if isinstance(e, cir.Span):
            return ("S", ex(e.start), ex(e.stop))
        if isinstance(e, cir.Load):
            return ("L", nm(e.buffer), ex(e.index), ty(e.ty))
        if isinstance(e, cir.Let):
            return ("let", nm(e.name), ex(e.value), e.mutable)
        if isinstance(e, cir.Assign):
            return ("asg", nm(e.name), ex(e.value))
        if isinstance(e, cir.Store):
            return ("st", nm(e.buffer), ex(e.index), ex(e.value))
        if isinstance(e, cir.Loop):
            return ("loop", nm(e.var), ex(e.start), ex(e.stop), ex(e.step), ex(e.body), e.parallel)
        if isinstance(e, cir.If):
            return ("if", ex(e.cond), ex(e.then), ex(e.orelse))
        out = [type(e).__name__]
        for f in e.__dataclass_fields__:
            if f in ("ty", "line"):
                continue
            val = getattr(e, f)
            out.append(ex(val) if isinstance(val, (cir.Expr, cir.Stmt, tuple, list, cir.Span)) else val)
        if isinstance(e, cir.Expr):
            out.append(ty(e.ty))
        return tuple(out)

    body = ex(k.body)
    return (len(k.inputs), tuple(len(b_.shape) for b_ in k.inputs), len(k.output.shape), body)


_CANON: dict = {}


def _flash_by_block(text: str) -> dict:
    return {("flash_attention", blk): canon(lower_template(text.replace("BLOCK", str(blk)), [4, 4, 4]))
            for blk in BLOCKS}


def _cached(key: str, build) -> dict:
    if key not in _CANON:
        try:
            _CANON[key] = build()
        except Exception:           # the lowering is unavailable: no template, generic schedule
            _CANON[key] = {("none", 0): None}
    return _CANON[key]


def templates() -> dict:
    """{(kind, block): canonical CIR} of the spec's attention kernels (block 0: no tiles)."""
    return _cached("spec", lambda: {
        **_flash_by_block(FLASH_TEMPLATE),
        ("attention", 0): canon(lower_template(ATTENTION_TEMPLATE, [4, 4, 4, 2]))})


def clipped_templates() -> dict:
    """The same for `CLIPPED_FLASH_TEMPLATE`."""
    return _cached("clipped", lambda: _flash_by_block(CLIPPED_FLASH_TEMPLATE))


def match_spec_attention(kernel: cir.Kernel, notes: list, clipped: bool = False):
    """The (kind, block) of the spec kernel that `kernel`'s body is, else None, with a note
    saying the generic schedule runs it. `clipped` also accepts the clipped flash form."""
    kind = kernel.kernel_type.kind
    c = canon(kernel)
    found = list(templates().items())
    if clipped:
        found += list(clipped_templates().items())
    for (tk, blk), tc in found:
        if tk == kind and tc == c:
            return tk, blk
    notes.append(f"the body of this `{kind}` kernel is not the spec's {kind} algorithm; "
                 "it runs on the generic schedule")
    return None
