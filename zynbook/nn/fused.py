"""The fused-op library: LayerNorm + Linear, RMSNorm + RoPE, SwiGLU, GeGLU,
Residual + LayerNorm and Softmax + Dropout, each one ZynML kernel forward, with its backward
pass, as methods of `zynbook.nn.Device`.

Dropout draws its mask from Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3"), written in ZynML: a counter-based generator, so a seed and an offset give the
same bits on every device. ZynML has no bitwise operators, so the generator works on u32
values with integer arithmetic alone: the 32 x 32 -> 64-bit products in 16-bit halves, and
exclusive-or bit by bit in a loop.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ZynMLShapeError, ZynMLTypeError

# ------------------------------------------------------------------ Philox in ZynML

PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _u32(c: int) -> str:
    """A u32 constant as ZynML text (WGSL takes literals as i32, so large ones are built)."""
    c &= 0xFFFFFFFF
    if c < 2 ** 31:
        return f"u32({c})"
    return f"(u32({c >> 16}) * u32(65536) + u32({c & 0xFFFF}))"


def philox_lines(c: list, k: list, tag: str) -> tuple[list, list]:
    """(statements, the four output names) of Philox-4x32-10 on counter words `c` and key
    words `k` (ZynML u32 expressions); `tag` keeps the names of two expansions apart. The
    two three-way exclusive-ors of a round run bit by bit in one loop of 32 steps."""
    lines = []
    c = list(c)
    for r in range(10):
        k0 = k[0] if r == 0 else f"({k[0]} + {_u32(r * PHILOX_W[0])})"
        k1 = k[1] if r == 0 else f"({k[1]} + {_u32(r * PHILOX_W[1])})"
        names = []
        for j, (m, x) in enumerate(((PHILOX_M[0], c[0]), (PHILOX_M[1], c[2]))):
            p = f"{tag}r{r}m{j}"
            mh, ml = m >> 16, m & 0xFFFF
            lines += [f"let {p}x = {x}",
                      f"let {p}bh = {p}x / u32(65536)",
                      f"let {p}bl = {p}x % u32(65536)",
                      f"let {p}hl = u32({mh}) * {p}bl",
                      f"let {p}lh = u32({ml}) * {p}bh",
                      f"let {p}mid = {p}hl % u32(65536) + {p}lh % u32(65536) + "
                      f"(u32({ml}) * {p}bl) / u32(65536)",
                      f"let {p}hi = u32({mh}) * {p}bh + {p}hl / u32(65536) + "
                      f"{p}lh / u32(65536) + {p}mid / u32(65536)",
                      f"let {p}lo = {_u32(m)} * {p}x"]
            names.append((f"{p}hi", f"{p}lo"))
        (hi0, lo0), (hi1, lo1) = names
        p = f"{tag}r{r}"
        # c0' = hi1 ^ c1 ^ k0 and c2' = hi0 ^ c3 ^ k1, one bit per step
        lines += [f"var {p}a0 = {hi1}", f"var {p}a1 = {c[1]}", f"var {p}a2 = {k0}",
                  f"var {p}b0 = {hi0}", f"var {p}b1 = {c[3]}", f"var {p}b2 = {k1}",
                  f"var {p}c0 = u32(0)", f"var {p}c2 = u32(0)", f"var {p}bit = u32(1)",
                  f"for {p}t in 0..32:",
                  f"    {p}c0 += ({p}a0 + {p}a1 + {p}a2) % u32(2) * {p}bit",
                  f"    {p}c2 += ({p}b0 + {p}b1 + {p}b2) % u32(2) * {p}bit",
                  f"    {p}a0 = {p}a0 / u32(2)", f"    {p}a1 = {p}a1 / u32(2)",
                  f"    {p}a2 = {p}a2 / u32(2)", f"    {p}b0 = {p}b0 / u32(2)",
                  f"    {p}b1 = {p}b1 / u32(2)", f"    {p}b2 = {p}b2 / u32(2)",
                  f"    {p}bit = {p}bit * u32(2)"]
        c = [f"{p}c0", lo1, f"{p}c2", lo0]
    return lines, c


def philox_reference(counter, key) -> list:
    """Philox-4x32-10 in plain Python (the tests' reference)."""
    c, k = [int(v) & 0xFFFFFFFF for v in counter], [int(v) & 0xFFFFFFFF for v in key]
    for r in range(10):
        if r:
            k = [(k[0] + PHILOX_W[0]) & 0xFFFFFFFF, (k[1] + PHILOX_W[1]) & 0xFFFFFFFF]
        p0, p1 = PHILOX_M[0] * c[0], PHILOX_M[1] * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1],
             p0 & 0xFFFFFFFF]
    return c


def _indent(lines, n):
    return "".join(" " * n + ln + "\n" for ln in lines)


def _keep_lines(index: str, tag: str) -> tuple[list, str]:
    """Lines computing `{tag}keep` (1.0 to keep, 0.0 to drop) for flat element `index`."""
    lines, out = philox_lines([f"u32({index})", "rng[2]", "u32(0)", "u32(0)"],
                              ["rng[0]", "rng[1]"], tag)
    lines.append(f"let {tag}u = float({out[0]} / u32(256)) * 0.000000059604644775390625")
    lines.append(f"let {tag}keep = float({tag}u >= p)")
    return lines, f"{tag}keep"


PHILOX_UNIFORM = ("let y = compute(rng) {\n    for i in 0..n:\n" +
                  _indent(philox_lines(["u32(i)", "rng[2]", "u32(0)", "u32(0)"],
                                       ["rng[0]", "rng[1]"], "g")[0], 8) +
                  "        out[i] = float({w0} / u32(256)) * 0.000000059604644775390625\n"
                  "}\ny\n").replace("{w0}", "gr9c0")

_FWD_KEEP, _ = _keep_lines("r * n + c", "f")
# the row's maximum m and sum of exponentials s, as softmax and its backward pass start
_ROW_STATS = """        var m = -inf
        for c in 0..n:
            m = max(m, x[r, c])
        var s = 0.0
        for c in 0..n:
            s += exp(x[r, c] - m)
"""
SOFTMAX_DROPOUT = ("""let y = compute(x, rng) {
    @kernel fused
    for r in 0..rows:
""" + _ROW_STATS + """        for c in 0..n:
""" + _indent(_FWD_KEEP, 12) + """            out[r, c] = exp(x[r, c] - m) / s * fkeep * inv_keep
}
y
""")

# y = softmax(x) * mask / (1 - p): dx = sm * (dz - sum(sm * dz)) with dz = dy * mask / (1 - p);
# u holds the uniforms the forward pass drew (philox_uniform of the same seed and offset)
SOFTMAX_DROPOUT_BACKWARD = """let y = compute(x, g, u) {
    @kernel fused
    for r in 0..rows:
""" + _ROW_STATS + """        var d = 0.0
        for c in 0..n:
            d += exp(x[r, c] - m) / s * g[r, c] * float(u[r * n + c] >= p) * inv_keep
        for c in 0..n:
            let sm = exp(x[r, c] - m) / s
            out[r, c] = sm * (g[r, c] * float(u[r * n + c] >= p) * inv_keep - d)
}
y
"""

# ------------------------------------------------------------------ LayerNorm + Linear

LAYERNORM_LINEAR = """let y = compute(x, gamma, beta, w) {
    @kernel fused
    for r in 0..rows, j in 0..n_out:
        var mean = 0.0
        for i in 0..dim:
            mean += x[r, i]
        mean /= dim
        var v = 0.0
        for i in 0..dim:
            v += (x[r, i] - mean) * (x[r, i] - mean)
        let inv = rsqrt(v / dim + eps)
        var acc = 0.0
        for i in 0..dim:
            acc += ((x[r, i] - mean) * inv * gamma[i] + beta[i]) * w[i, j]
        out[r, j] = acc
}
y
"""

# mean and 1 / std of each row of h = x (+ residual)
_LN_STATS = """let stats = compute(h) {
    for r in 0..rows:
        var mean = 0.0
        for i in 0..dim:
            mean += h[r, i]
        mean /= dim
        var v = 0.0
        for i in 0..dim:
            v += (h[r, i] - mean) * (h[r, i] - mean)
        out[r, 0] = mean
        out[r, 1] = rsqrt(v / dim + eps)
}
"""

# dx of LayerNorm from dn (the gradient of its output), and dgamma, dbeta
_LN_BACKWARD = """let dx = compute(h, gamma, dn, stats) {
    @kernel fused
    for r in 0..rows:
        let mean = stats[r, 0]
        let inv = stats[r, 1]
        var a = 0.0
        var b = 0.0
        for i in 0..dim:
            let dxh = dn[r, i] * gamma[i]
            a += dxh
            b += dxh * (h[r, i] - mean) * inv
        for i in 0..dim:
            let xh = (h[r, i] - mean) * inv
            out[r, i] = inv * (dn[r, i] * gamma[i] - a / dim - xh * b / dim)
}
let dgamma = compute(h, dn, stats) {
    for i in 0..dim:
        var acc = 0.0
        for r in 0..rows:
            acc += dn[r, i] * (h[r, i] - stats[r, 0]) * stats[r, 1]
        out[i] = acc
}
let dbeta = compute(dn) {
    for i in 0..dim:
        var acc = 0.0
        for r in 0..rows:
            acc += dn[r, i]
        out[i] = acc
}
"""

LAYERNORM_LINEAR_BACKWARD = ("let h = x\n" + _LN_STATS + """let dn = compute(dy, w) {
    for r in 0..rows, i in 0..dim:
        var acc = 0.0
        for j in 0..n_out:
            acc += dy[r, j] * w[i, j]
        out[r, i] = acc
}
let dw = compute(h, gamma, beta, dy, stats) {
    for i in 0..dim, j in 0..n_out:
        var acc = 0.0
        for r in 0..rows:
            acc += ((h[r, i] - stats[r, 0]) * stats[r, 1] * gamma[i] + beta[i]) * dy[r, j]
        out[i, j] = acc
}
""" + _LN_BACKWARD + "(dx, dgamma, dbeta, dw)\n")

# ------------------------------------------------------------------ Residual + LayerNorm

RESIDUAL_LAYERNORM = """let y = compute(x, res, gamma, beta) {
    @kernel fused
    for r in 0..rows:
        var mean = 0.0
        for i in 0..dim:
            mean += x[r, i] + res[r, i]
        mean /= dim
        var v = 0.0
        for i in 0..dim:
            let d = x[r, i] + res[r, i] - mean
            v += d * d
        let inv = rsqrt(v / dim + eps)
        for i in 0..dim:
            out[r, i] = (x[r, i] + res[r, i] - mean) * inv * gamma[i] + beta[i]
}
y
"""

RESIDUAL_LAYERNORM_BACKWARD = ("""let h = compute(x, res) {
    @kernel elementwise
    for r in 0..rows, i in 0..dim:
        out[r, i] = x[r, i] + res[r, i]
}
""" + _LN_STATS + _LN_BACKWARD + "(dx, dgamma, dbeta)\n")

# ------------------------------------------------------------------ RMSNorm + RoPE
# x [seq, heads, head_dim] normalised over each position's heads * head_dim values, then
# turned pairwise (2p, 2p + 1) by (pos0 + s) * base^(-2p / head_dim) (log_step = -2 ln(base) / head_dim)

RMS_NORM_ROPE = """let y = compute(x, weight) {
    @kernel fused
    for s in 0..seq:
        var ss = 0.0
        for h in 0..heads, d in 0..head_dim:
            ss += x[s, h, d] * x[s, h, d]
        let rs = rsqrt(ss / (heads * head_dim) + eps)
        for h in 0..heads, p in 0..half:
            let angle = (float(s) + pos0) * exp(float(p) * log_step)
            let c = cos(angle)
            let sn = sin(angle)
            let n0 = x[s, h, p * 2] * rs * weight[h, p * 2]
            let n1 = x[s, h, p * 2 + 1] * rs * weight[h, p * 2 + 1]
            out[s, h, p * 2] = n0 * c - n1 * sn
            out[s, h, p * 2 + 1] = n0 * sn + n1 * c
}
y
"""

RMS_NORM_ROPE_BACKWARD = """let rstd = compute(x) {
    for s in 0..seq:
        var ss = 0.0
        for h in 0..heads, d in 0..head_dim:
            ss += x[s, h, d] * x[s, h, d]
        out[s] = rsqrt(ss / (heads * head_dim) + eps)
}
let dn = compute(g) {
    @kernel elementwise
    for s in 0..seq, h in 0..heads, p in 0..half:
        let angle = (float(s) + pos0) * exp(float(p) * log_step)
        let c = cos(angle)
        let sn = sin(angle)
        out[s, h, p * 2] = g[s, h, p * 2] * c + g[s, h, p * 2 + 1] * sn
        out[s, h, p * 2 + 1] = g[s, h, p * 2 + 1] * c - g[s, h, p * 2] * sn
}
let dx = compute(x, weight, dn, rstd) {
    @kernel fused
    for s in 0..seq:
        let rs = rstd[s]
        var a = 0.0
        for h in 0..heads, d in 0..head_dim:
            a += dn[s, h, d] * weight[h, d] * x[s, h, d]
        for h in 0..heads, d in 0..head_dim:
            out[s, h, d] = rs * weight[h, d] * dn[s, h, d] - x[s, h, d] * rs * rs * rs * a / (heads * head_dim)
}
let dw = compute(x, dn, rstd) {
    for h in 0..heads, d in 0..head_dim:
        var acc = 0.0
        for s in 0..seq:
            acc += dn[s, h, d] * x[s, h, d] * rstd[s]
        out[h, d] = acc
}
(dx, dw)
"""

# ------------------------------------------------------------------ gated linear units
# y = act(x wg) * (x wu), x [rows, dim], wg and wu [dim, hidden]

_ACTS = {
    "silu": ("gv / (1.0 + exp(-gv))",
             "(1.0 / (1.0 + exp(-gv))) * (1.0 + gv * (1.0 - 1.0 / (1.0 + exp(-gv))))"),
    # the kernels' exact gelu (through erfc): 0.5 * gv * (1 + erf(gv / sqrt(2))) cancelled
    # for a negative gate, 0.06% off at -3.8 on WebGPU
    "gelu": ("gelu(gv)",
             "0.5 * (1.0 + erf(gv * 0.7071067811865476)) + gv * 0.3989422804014327 * exp(-0.5 * gv * gv)"),
}


def _glu_sources(act: str) -> tuple[str, str]:
    f, df = _ACTS[act]
    proj = """        var gv = 0.0
        var uv = 0.0
        for i in 0..dim:
            gv += x[r, i] * wg[i, f]
            uv += x[r, i] * wu[i, f]
"""
    fwd = ("let y = compute(x, wg, wu) {\n    @kernel fused\n    for r in 0..rows, f in 0..hidden:\n"
           + proj + f"        out[r, f] = {f} * uv\n}}\ny\n")
    bwd = ("let dg = compute(x, wg, wu, dy) {\n    for r in 0..rows, f in 0..hidden:\n" + proj +
           f"        out[r, f] = dy[r, f] * uv * ({df})\n}}\n"
           "let du = compute(x, wg, dy) {\n    for r in 0..rows, f in 0..hidden:\n"
           "        var gv = 0.0\n        for i in 0..dim:\n            gv += x[r, i] * wg[i, f]\n"
           f"        out[r, f] = dy[r, f] * {f}\n}}\n" + """let dx = compute(dg, du, wg, wu) {
    for r in 0..rows, i in 0..dim:
        var acc = 0.0
        for f in 0..hidden:
            acc += dg[r, f] * wg[i, f] + du[r, f] * wu[i, f]
        out[r, i] = acc
}
let dwg = compute(x, dg) {
    for i in 0..dim, f in 0..hidden:
        var acc = 0.0
        for r in 0..rows:
            acc += x[r, i] * dg[r, f]
        out[i, f] = acc
}
let dwu = compute(x, du) {
    for i in 0..dim, f in 0..hidden:
        var acc = 0.0
        for r in 0..rows:
            acc += x[r, i] * du[r, f]
        out[i, f] = acc
}
(dx, dwg, dwu)
""")
    return fwd, bwd


SWIGLU, SWIGLU_BACKWARD = _glu_sources("silu")
GEGLU, GEGLU_BACKWARD = _glu_sources("gelu")


# ------------------------------------------------------------------ the methods

class FusedOps:
    """Methods of Device: the fused-op library (see the module's text)."""

    def _rs(self, t, shape):
        from .device import _reshape
        return _reshape(t, shape)

    def _rng(self, seed, offset, op):
        for v, w in ((seed, "seed"), (offset, "offset")):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2 ** 64:
                raise ZynMLTypeError(f"{op}(): `{w}` is an integer from 0 to 2^64 - 1, not {v!r}")
        if offset >= 2 ** 32:
            raise ZynMLTypeError(f"{op}(): `offset` is below 2^32, not {offset}")
        seed = int(seed)
        return self.upload_u32([seed & 0xFFFFFFFF, seed >> 32, int(offset)]).tensor

    @staticmethod
    def _p(p, op):
        """(p, the scale of a kept value): p = 1 drops every value and gives zeros, as
        PyTorch's dropout does (the scale 1 / (1 - p) would make them 0 * inf = NaN)."""
        # numpy's numbers as Python's (np.float32(0.1) was refused as outside [0, 1))
        if not isinstance(p, (int, float, np.integer, np.floating)) or isinstance(p, bool) \
                or not 0.0 <= p <= 1.0:
            raise ZynMLTypeError(f"{op}(): the drop probability p is in [0, 1], not {p!r}")
        p = float(p)
        return p, (1.0 / (1.0 - p) if p < 1.0 else 0.0)

    def philox_uniform(self, n: int, seed: int, offset: int = 0):
        """n uniform values in [0, 1): word 0 of Philox-4x32-10 at counter (i, offset, 0, 0)
        with key (seed mod 2^32, seed / 2^32), its top 24 bits scaled by 2^-24."""
        n = self._size(n, "n", "philox_uniform", positive=False)
        return self._wrap(self._run(PHILOX_UNIFORM, rng=self._rng(seed, offset, "philox_uniform"), n=n))

    def softmax_dropout(self, data, n_rows: int, row_len: int, p: float, seed: int,
                        offset: int = 0):
        """softmax over rows, then each value kept with probability 1 - p (and scaled by
        1 / (1 - p)); element e = row * row_len + col is dropped when
        philox_uniform(seed, offset)[e] < p, on every device alike."""
        op = "softmax_dropout"
        r, c = self._rows(n_rows, "n_rows", op), self._rows(row_len, "row_len", op)
        t = self._need(data, r * c, "data", f"n_rows * row_len = {r} * {c}", op)
        p, inv_keep = self._p(p, op)
        return self._wrap(self._run(SOFTMAX_DROPOUT, x=self._rs(t, (r, c)),
                                    rng=self._rng(seed, offset, op), p=p, inv_keep=inv_keep))

    def softmax_dropout_backward(self, data, grad_output, n_rows: int, row_len: int, p: float,
                                 seed: int, offset: int = 0):
        """d loss / d data of softmax_dropout, recomputing the softmax and the mask."""
        op = "softmax_dropout_backward"
        r, c = self._rows(n_rows, "n_rows", op), self._rows(row_len, "row_len", op)
        f = f"n_rows * row_len = {r} * {c}"
        t = self._need(data, r * c, "data", f, op)
        g = self._need(grad_output, r * c, "grad_output", f, op)
        p, inv_keep = self._p(p, op)
        u = self.philox_uniform(r * c, seed, offset).tensor
        return self._wrap(self._run(SOFTMAX_DROPOUT_BACKWARD, x=self._rs(t, (r, c)),
                                    g=self._rs(g, (r, c)), u=u, p=p, inv_keep=inv_keep))

    def _ln_args(self, op, x, gamma, beta, rows, dim):
        r, d = self._rows(rows, "rows", op), self._size(dim, "dim", op)
        tx = self._need(x, r * d, "x", f"rows * dim = {r} * {d}", op)
        tg = self._need(gamma, d, "gamma", "dim", op)
        tb = self._need(beta, d, "beta", "dim", op)
        return r, d, self._rs(tx, (r, d)), tg, tb

    def layernorm_linear(self, x, gamma, beta, w, rows: int, dim: int, n_out: int,
                         eps: float = 1e-5):
        """LayerNorm(x; gamma, beta) @ w: x [rows, dim], w [dim, n_out]."""
        op = "layernorm_linear"
        r, d, tx, tg, tb = self._ln_args(op, x, gamma, beta, rows, dim)
        n = self._size(n_out, "n_out", op)
        tw = self._need(w, d * n, "w", f"dim * n_out = {d} * {n}", op)
        return self._wrap(self._run(LAYERNORM_LINEAR, x=tx, gamma=tg, beta=tb,
                                    w=self._rs(tw, (d, n)), eps=self._number(eps, "eps", op)))

    def layernorm_linear_backward(self, x, gamma, beta, w, grad_output, rows: int, dim: int,
                                  n_out: int, eps: float = 1e-5):
        """(dx, dgamma, dbeta, dw) of layernorm_linear."""
        op = "layernorm_linear_backward"
        r, d, tx, tg, tb = self._ln_args(op, x, gamma, beta, rows, dim)
        n = self._size(n_out, "n_out", op)
        tw = self._need(w, d * n, "w", f"dim * n_out = {d} * {n}", op)
        tdy = self._need(grad_output, r * n, "grad_output", f"rows * n_out = {r} * {n}", op)
        out = self._run(LAYERNORM_LINEAR_BACKWARD, x=tx, gamma=tg, beta=tb,
                        w=self._rs(tw, (d, n)), dy=self._rs(tdy, (r, n)),
                        eps=self._number(eps, "eps", op))
        return tuple(self._wrap(t) for t in out)

    def residual_layernorm(self, x, residual, gamma, beta, rows: int, dim: int,
                           eps: float = 1e-5):
        """LayerNorm(x + residual; gamma, beta) over rows of `dim`."""
        op = "residual_layernorm"
        r, d, tx, tg, tb = self._ln_args(op, x, gamma, beta, rows, dim)
        tr = self._need(residual, r * d, "residual", f"rows * dim = {r} * {d}", op)
        return self._wrap(self._run(RESIDUAL_LAYERNORM, x=tx, res=self._rs(tr, (r, d)),
                                    gamma=tg, beta=tb, eps=self._number(eps, "eps", op)))

    def residual_layernorm_backward(self, x, residual, gamma, beta, grad_output, rows: int,
                                    dim: int, eps: float = 1e-5):
        """(dx, dgamma, dbeta) of residual_layernorm; the residual's gradient is dx too."""
        op = "residual_layernorm_backward"
        r, d, tx, tg, tb = self._ln_args(op, x, gamma, beta, rows, dim)
        f = f"rows * dim = {r} * {d}"
        tr = self._need(residual, r * d, "residual", f, op)
        tdy = self._need(grad_output, r * d, "grad_output", f, op)
        out = self._run(RESIDUAL_LAYERNORM_BACKWARD, x=tx, res=self._rs(tr, (r, d)), gamma=tg,
                        dn=self._rs(tdy, (r, d)), eps=self._number(eps, "eps", op))
        return tuple(self._wrap(t) for t in out)

    def _rope_args(self, op, x, weight, seq_len, n_heads, head_dim, pos0, base):
        s = self._rows(seq_len, "seq_len", op)
        h, d = self._size(n_heads, "n_heads", op), self._size(head_dim, "head_dim", op)
        if d % 2:
            raise ZynMLShapeError(f"{op}(): head_dim = {d} must be even")
        p0 = self._size(pos0, "pos0", op, positive=False)
        tx = self._need(x, s * h * d, "x", f"seq_len * n_heads * head_dim = {s} * {h} * {d}", op)
        tw = self._need(weight, h * d, "weight", f"n_heads * head_dim = {h} * {d}", op)
        base = self._number(base, "base", op, positive=True)
        return dict(x=self._rs(tx, (s, h, d)), weight=self._rs(tw, (h, d)), half=d // 2,
                    head_dim=d, pos0=float(p0), log_step=-2.0 * math.log(base) / d)

    def rms_norm_rope(self, x, weight, seq_len: int, n_heads: int, head_dim: int,
                      eps: float = 1e-5, pos0: int = 0, base: float = 10000.0):
        """RMSNorm over each position's n_heads * head_dim values (weight of that size), then
        RoPE on each head for positions pos0, pos0 + 1, ... (interleaved pairs)."""
        op = "rms_norm_rope"
        args = self._rope_args(op, x, weight, seq_len, n_heads, head_dim, pos0, base)
        return self._wrap(self._run(RMS_NORM_ROPE, eps=self._number(eps, "eps", op), **args))

    def rms_norm_rope_backward(self, x, weight, grad_output, seq_len: int, n_heads: int,
                               head_dim: int, eps: float = 1e-5, pos0: int = 0,
                               base: float = 10000.0):
        """(dx, dweight) of rms_norm_rope."""
        op = "rms_norm_rope_backward"
        args = self._rope_args(op, x, weight, seq_len, n_heads, head_dim, pos0, base)
        s, h, d = args["x"].shape
        tg = self._need(grad_output, s * h * d, "grad_output",
                        f"seq_len * n_heads * head_dim = {s} * {h} * {d}", op)
        args.pop("head_dim")
        dx, dw = self._run(RMS_NORM_ROPE_BACKWARD, g=self._rs(tg, (s, h, d)),
                           eps=self._number(eps, "eps", op),
                           **args)
        return self._wrap(dx), self._wrap(dw)

    def _glu_args(self, op, x, w_gate, w_up, rows, dim, hidden):
        r = self._rows(rows, "rows", op)
        d, f = self._size(dim, "dim", op), self._size(hidden, "hidden", op)
        tx = self._need(x, r * d, "x", f"rows * dim = {r} * {d}", op)
        tg = self._need(w_gate, d * f, "w_gate", f"dim * hidden = {d} * {f}", op)
        tu = self._need(w_up, d * f, "w_up", f"dim * hidden = {d} * {f}", op)
        return r, f, dict(x=self._rs(tx, (r, d)), wg=self._rs(tg, (d, f)), wu=self._rs(tu, (d, f)))

    def swiglu(self, x, w_gate, w_up, rows: int, dim: int, hidden: int):
        """silu(x w_gate) * (x w_up): x [rows, dim], the weights [dim, hidden]."""
        _r, _f, args = self._glu_args("swiglu", x, w_gate, w_up, rows, dim, hidden)
        return self._wrap(self._run(SWIGLU, **args))

    def geglu(self, x, w_gate, w_up, rows: int, dim: int, hidden: int):
        """gelu(x w_gate) * (x w_up), GELU with erf."""
        _r, _f, args = self._glu_args("geglu", x, w_gate, w_up, rows, dim, hidden)
        return self._wrap(self._run(GEGLU, **args))

    def _glu_backward(self, op, source, x, w_gate, w_up, grad_output, rows, dim, hidden):
        r, f, args = self._glu_args(op, x, w_gate, w_up, rows, dim, hidden)
        tdy = self._need(grad_output, r * f, "grad_output", f"rows * hidden = {r} * {f}", op)
        out = self._run(source, dy=self._rs(tdy, (r, f)), **args)
        return tuple(self._wrap(t) for t in out)

    def swiglu_backward(self, x, w_gate, w_up, grad_output, rows: int, dim: int, hidden: int):
        """(dx, dw_gate, dw_up) of swiglu."""
        return self._glu_backward("swiglu_backward", SWIGLU_BACKWARD, x, w_gate, w_up,
                                  grad_output, rows, dim, hidden)

    def geglu_backward(self, x, w_gate, w_up, grad_output, rows: int, dim: int, hidden: int):
        """(dx, dw_gate, dw_up) of geglu."""
        return self._glu_backward("geglu_backward", GEGLU_BACKWARD, x, w_gate, w_up,
                                  grad_output, rows, dim, hidden)
