"""Attention kernels written in several ways (names, masks, scales, forms, block sizes), and
flash bodies that are not attention. Shared by the recognition and the differential tests."""
from __future__ import annotations

# the key condition of a masked kernel, by kind; `I`, `J` are the query and key variables
MASKS = {
    "none": None,
    "bool": "allowed[I, J]",                  # a bool mask input
    "float": "allowed[I, J] > 0.5",           # a float mask compared
    "causal": "J <= I",                       # no input: a causal condition
    "causal_rev": "I >= J",
}

SCALES = {
    "sqrt": "/ sqrt(head_dim)",
    "const": "* 0.125",
    "scalar": "* temp",                        # a scalar argument
}


def _cond(mask, i, j):
    return None if MASKS[mask] is None else MASKS[mask].replace("I", i).replace("J", j)


def _inputs(mask):
    return "Q, K, V, allowed" if mask in ("bool", "float") else "Q, K, V"


def three_pass(mask="none", scale="sqrt", names=("b", "h", "i", "j", "d", "m", "l", "acc", "s"),
               inline=False):
    b, h, i, j, d, m, l, acc, s = names
    sc = SCALES[scale]
    score = f"dot(Q[{b}, {h}, {i}], K[{b}, {h}, {j}]) {sc}"
    cond = _cond(mask, i, j)

    def guarded(lines, ind):
        pad = " " * ind
        if cond is None:
            return "\n".join(pad + x for x in lines)
        return pad + f"if {cond}:\n" + "\n".join(pad + "    " + x for x in lines)
    p1 = guarded([f"let {s} = {score}", f"{m} = max({s}, {m})"], 12)
    p2 = guarded([f"let {s} = {score}", f"{l} += exp({s} - {m})"], 12)
    if inline:
        p3 = guarded([f"{acc} = {acc} + V[{b}, {h}, {j}, {d}] * exp(({score}) - {m}) / {l}"], 16)
    else:
        p3 = guarded([f"let {s} = {score}", f"let w = exp({s} - {m}) / {l}",
                      f"{acc} += w * V[{b}, {h}, {j}, {d}]"], 16)
    return f"""let attn = compute({_inputs(mask)}) {{
    @kernel attention
    for {b} in 0..batch, {h} in 0..heads, {i} in 0..seq_len:
        var {m} = -inf
        for {j} in 0..seq_len:
{p1}
        var {l} = 0.0
        for {j} in 0..seq_len:
{p2}
        for {d} in 0..head_dim:
            var {acc} = 0.0
            for {j} in 0..seq_len:
{p3}
            out[{b}, {h}, {i}, {d}] = {acc}
}}
"""


def online_stats(mask="none", scale="sqrt"):
    cond = _cond(mask, "i", "j")
    sc = SCALES[scale]
    step = ["let s = dot(Q[b, h, i], K[b, h, j]) " + sc, "let mn = max(m, s)",
            "l = l * exp(m - mn) + exp(s - mn)", "m = mn"]
    wsum = ["acc += exp(dot(Q[b, h, i], K[b, h, j]) " + sc + " - m) * V[b, h, j, d]"]
    if cond is not None:
        step = [f"if {cond}:"] + ["    " + x for x in step]
        wsum = [f"if {cond}:"] + ["    " + x for x in wsum]
    step = "\n".join(" " * 12 + x for x in step)
    wsum = "\n".join(" " * 16 + x for x in wsum)
    return f"""let attn = compute({_inputs(mask)}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var m = -inf
        var l = 0.0
        for j in 0..seq_len:
{step}
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_len:
{wsum}
            out[b, h, i, d] = acc / l
}}
"""


def one_pass(mask="none", scale="sqrt"):
    cond = _cond(mask, "i", "key")
    sc = SCALES[scale]
    step = ["let s = dot(Q[b, h, i], K[b, h, key]) " + sc, "let mx = max(run_max, s)",
            "let a = exp(run_max - mx)", "let p = exp(s - mx)",
            "tot = a * tot + p", "num = num * a + p * V[b, h, key, c]", "run_max = mx"]
    if cond is not None:
        step = [f"if {cond}:"] + ["    " + x for x in step]
    step = "\n".join(" " * 12 + x for x in step)
    return f"""let attn = compute({_inputs(mask)}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len, c in 0..head_dim:
        var run_max = -inf
        var tot = 0.0
        var num = 0.0
        for key in 0..seq_len:
{step}
        out[b, h, i, c] = num / tot
}}
"""


FLASH = """let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step BQ:
            var m = -inf
            var l = 0.0
            var o = OTILE
            for kv_block in 0..seq_len step BK:
                let K_block = K[b, h, kv_block:kv_block+BK]
                let V_block = V[b, h, kv_block:kv_block+BK]
                let S = Q[b, h, q_block:q_block+BQ] @ transpose(K_block) SCALE
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = RESCALE + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+BQ] = o / l
}
"""


def flash(bq=64, bk=None, tile="plain", scale="sqrt", rescale=True, renamed=False):
    bk = bk or bq
    otile = {"plain": f"zeros({bq}, head_dim)",
             "min": f"zeros(min({bq}, seq_len - q_block), head_dim)"}[tile]
    text = (FLASH.replace("OTILE", otile).replace("BQ", str(bq)).replace("BK", str(bk))
            .replace("RESCALE", "exp(m - m_new) * o" if rescale else "o")
            .replace("SCALE", SCALES[scale]))
    if renamed:
        for a, b_ in (("m_new", "peak2"), ("l_new", "den2"), ("K_block", "kt"), ("V_block", "vt"),
                      ("q_block", "qs"), ("kv_block", "ks"), ("S", "scores")):
            text = text.replace(a, b_)
        text = text.replace("var m ", "var peak ").replace("(m,", "(peak,").replace("(m -", "(peak -")
        text = text.replace("m = peak2", "peak = peak2").replace("var l ", "var den ")
        text = text.replace(") * l +", ") * den +").replace("l = den2", "den = den2")
        text = text.replace("o / l", "o / den")
    return text


def flash_reordered():
    """The same algebra, statements in another order (the lets inlined, m updated last)."""
    return """let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for qb in 0..seq_len step 32:
            var acc_o = zeros(32, head_dim)
            var total = 0.0
            var best = -inf
            for kb in 0..seq_len step 16:
                let S = Q[b, h, qb:qb+32] @ transpose(K[b, h, kb:kb+16]) * 0.125
                let nb = max(row_max(S), best)
                acc_o = exp(S - nb) @ V[b, h, kb:kb+16] + acc_o * exp(best - nb)
                total = row_sum(exp(S - nb)) + total * exp(best - nb)
                best = nb
            out[b, h, qb:qb+32] = acc_o / total
}
"""


# tutorial 05's flash attention: tensors [batch, seq, heads, head_dim], min(...) tiles
FLASH_BSHD = """let attn_out = compute(q, k, v) {
    @kernel flash_attention
    @workgroup(64)
    @tile(block_q=64, block_kv=64)
    for b in 0..batch, h in 0..num_heads:
        for q_block in 0..seq step 64:
            var m = -inf
            var l = 0.0
            var o = zeros(min(64, seq - q_block), head_dim)
            for kv_block in 0..seq step 64:
                let K_block = k[b, kv_block:kv_block+64, h]
                let V_block = v[b, kv_block:kv_block+64, h]
                let S = q[b, q_block:q_block+64, h] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, q_block:q_block+64, h] = o / l
}
"""

# the three-pass form over [batch, seq, heads, head_dim] tensors, causal
ATTENTION_BSHD = """let attn = compute(q, k, v) {
    @kernel attention
    for b in 0..batch, i in 0..seq, h in 0..heads:
        var m = -inf
        for j in 0..seq:
            if j <= i:
                m = max(m, dot(q[b, i, h], k[b, j, h]) * 0.25)
        var l = 0.0
        for j in 0..seq:
            if j <= i:
                l += exp(dot(q[b, i, h], k[b, j, h]) * 0.25 - m)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq:
                if j <= i:
                    acc += exp(dot(q[b, i, h], k[b, j, h]) * 0.25 - m) / l * v[b, j, h, d]
            out[b, i, h, d] = acc
}
"""


def grouped(text: str, group: str) -> str:
    """`text` with grouped-query heads: K's and V's rows those of head `h / group`."""
    return text.replace("K[b, h,", f"K[b, h / {group},").replace("V[b, h,", f"V[b, h / {group},")
