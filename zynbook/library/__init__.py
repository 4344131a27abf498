"""The kernel library of wgsl-compute-kernels.md, written in ZynML.

Each kernel is a ZynML program of compute blocks (`KERNELS[name].source`), so it runs on
every device a session has: the CPU reference, CUDA, and every WebGPU adapter, where the
GEMM schedule tiles GEMM, softmax and RMSNorm one workgroup per row,
attention the flash schedule and Sinkhorn-Knopp row and column passes.

    from zynbook import library
    y = library.call("rmsnorm", session, [x, weight], {"eps": 1e-6})

`call(name, session, args, kwargs)` runs on `session.default_device`, or where committed
inputs live, as any compute block, and returns a Tensor (on that device). The library keeps
one private session per device for its programs, so the caller's names are never touched;
compiled kernels are cached as for any program.
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import ZynMLShapeError, ZynMLTypeError

# ------------------------------------------------------------------------ programs

GEMM = """let c = compute(a, b) {
    @kernel matmul
    @workgroup(16, 16)
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += a[i, k] * b[k, j]
        out[i, j] = sum
}
c
"""

BATCHED_GEMM = """let c = compute(a, b) {
    @kernel batched_matmul
    @workgroup(16, 16, 1)
    for n in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += a[n, i, k] * b[n, k, j]
        out[n, i, j] = sum
}
c
"""

SOFTMAX = """let y = compute(x) {
    @kernel softmax
    @workgroup(256)
    for r in 0..rows:
        var m = -inf
        for i in 0..n:
            m = max(m, x[r, i])
        var s = 0.0
        for i in 0..n:
            s += exp(x[r, i] - m)
        for i in 0..n:
            out[r, i] = exp(x[r, i] - m) / s
}
y
"""

RMSNORM = """let y = compute(x, weight) {
    @kernel rmsnorm
    @workgroup(256)
    for r in 0..rows:
        var ss = 0.0
        for i in 0..n:
            ss += x[r, i] * x[r, i]
        let scale = rsqrt(ss / n + eps)
        for i in 0..n:
            out[r, i] = x[r, i] * scale * weight[i]
}
y
"""

SILU = """let y = compute(x) {
    @kernel elementwise
    @workgroup(256)
    for i in 0..len:
        out[i] = x[i] / (1.0 + exp(-x[i]))
}
y
"""

GELU = """let y = compute(x) {
    @kernel elementwise
    @workgroup(256)
    for i in 0..len:
        let v = x[i]
        let inner = 0.7978845608 * (v + 0.044715 * v * v * v)
        out[i] = 0.5 * v * (1.0 + tanh(inner))
}
y
"""

# x: [rows, seq, head_dim]; pairs (2d, 2d + 1) of position s turn by s * base^(-2d / head_dim);
# the tables are f32 (f64 for an f64 x: TDT), the rotated pairs stored in x's dtype (XDT, see
# _rope)
ROPE = """let positions = arange(seq)
let pairs = arange(half)
let angles = compute(positions, pairs) {
    @kernel elementwise
    for s in 0..seq, d in 0..half:
        out[s, d] = TDT(positions[s]) * exp(TDT(pairs[d]) * (-2.0 / head_dim) * log(base))
}
let cos_t = compute(angles) {
    @kernel elementwise
    for s in 0..seq, d in 0..half:
        out[s, d] = cos(angles[s, d])
}
let sin_t = compute(angles) {
    @kernel elementwise
    for s in 0..seq, d in 0..half:
        out[s, d] = sin(angles[s, d])
}
let y = compute(x, cos_t, sin_t) {
    @kernel elementwise
    @workgroup(64)
    for r in 0..rows, s in 0..seq, d in 0..half:
        let x0 = x[r, s, d * 2]
        let x1 = x[r, s, d * 2 + 1]
        let c = cos_t[s, d]
        let sn = sin_t[s, d]
        out[r, s, d * 2] = XDT(x0 * c - x1 * sn)
        out[r, s, d * 2 + 1] = XDT(x0 * sn + x1 * c)
}
y
"""

_ATTENTION_BODY = """    for b in 0..batch, h in 0..heads, i in 0..seq_q:
        var max_score = -inf
        for j in 0..seq_k:
            COND
                let score = dot(q[b, h, i], k[b, h, j]) / sqrt(head_dim)
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..seq_k:
            COND
                let score = dot(q[b, h, i], k[b, h, j]) / sqrt(head_dim)
                sum_exp += exp(score - max_score)
        for d in 0..v_dim:
            var acc = 0.0
            for j in 0..seq_k:
                COND
                    let score = dot(q[b, h, i], k[b, h, j]) / sqrt(head_dim)
                    let weight = exp(score - max_score) / sum_exp
                    acc += weight * v[b, h, j, d]
            out[b, h, i, d] = acc
}
y
"""


def _unindent_cond(body: str) -> str:
    """The body without the `COND` lines, the lines under them one level out."""
    out, skip = [], None
    for line in body.splitlines():
        if line.strip() == "COND":
            skip = len(line) - len(line.lstrip())
            continue
        indent = len(line) - len(line.lstrip())
        if skip is not None and line.strip() and indent > skip:
            line = line[4:]
        elif skip is not None and line.strip():
            skip = None
        out.append(line)
    return "\n".join(out) + "\n"


ATTENTION_MASKED = ("let y = compute(q, k, v, mask) {\n    @kernel attention\n" +
                    _ATTENTION_BODY.replace("COND", "if mask[i, j]:"))
ATTENTION = ("let y = compute(q, k, v) {\n    @kernel attention\n" + _unindent_cond(_ATTENTION_BODY))
# causal (the spec's `causal` flag): query i sees keys 0..i, as torch's is_causal (its
# upper-left corner where seq_q and seq_k differ); a query of no key gives zeros
ATTENTION_CAUSAL = ("let y = compute(q, k, v) {\n    @kernel attention\n" +
                    _ATTENTION_BODY.replace("COND", "if j <= i:"))
ATTENTION_MASKED_CAUSAL = ("let y = compute(q, k, v, mask) {\n    @kernel attention\n" +
                           _ATTENTION_BODY.replace("COND", "if mask[i, j] and j <= i:"))
# a float mask is additive (torch's attn_mask of a float dtype): added to the scores, so a
# key under -inf gets no weight (and a query whose keys are all -inf gives zeros, as torch's
# and as one of no key under a bool mask), one under NaN makes its query's row NaN, as torch's
# (`> -inf` dropped it as if masked); a bool or integer mask keeps the keys where it holds
_ADDED = _ATTENTION_BODY.replace(") / sqrt(head_dim)", ") / sqrt(head_dim) + mask[i, j]")
ATTENTION_ADDITIVE = ("let y = compute(q, k, v, mask) {\n    @kernel attention\n" +
                      _ADDED.replace("COND", "if mask[i, j] != -inf:"))
ATTENTION_ADDITIVE_CAUSAL = ("let y = compute(q, k, v, mask) {\n    @kernel attention\n" +
                             _ADDED.replace("COND", "if mask[i, j] != -inf and j <= i:"))

# a row or column whose sum is 1e-10 or less (exp(m - top) underflowed there) is left as
# it is, as the spec's normalize_rows and normalize_cols leave it (0 / 0 made every value NaN)
SINKHORN_PASSES = """let top = compute(m) {
    @kernel reduce(max)
    for i in 0..n, j in 0..n2:
        yield m[i, j]
}
var p = compute(m) {
    @kernel elementwise
    for i in 0..n, j in 0..n2:
        out[i, j] = exp(m[i, j] - top)
}
for it in 0..iterations:
    p = compute(p) {
        @kernel fused
        @workgroup(256)
        for i in 0..n:
            var s = 0.0
            for j in 0..n2:
                s += p[i, j]
            var d = 1.0
            if s > 1e-10:
                d = s
            for j in 0..n2:
                out[i, j] = p[i, j] / d
    }
    p = compute(p) {
        @kernel fused
        @workgroup(256)
        for j in 0..n2:
            var s = 0.0
            for i in 0..n:
                s += p[i, j]
            var d = 1.0
            if s > 1e-10:
                d = s
            for i in 0..n:
                out[i, j] = p[i, j] / d
    }
"""
SINKHORN = SINKHORN_PASSES + "p\n"
# the passes compute in f32 (exp(m - top) meets the f32 scalar `top`); a half-precision
# input's result is stored in its dtype
SINKHORN_HALF = SINKHORN_PASSES + """let y = compute(p) {
    @kernel elementwise
    for i in 0..n, j in 0..n2:
        out[i, j] = XDT(p[i, j])
}
y
"""

# ------------------------------------------------------------------------- helpers


def _at(err, where):
    """`err` said under the call's argument `where` (a position or a keyword's name)."""
    err.argument = (where, None)
    return err


def _tensor(value, fn, what, where=0):
    from ..nn.device import Buffer
    from ..runtime.tensor import Tensor, to_tensor
    if isinstance(value, Buffer):
        # a buffer of the device interface read as a flat tensor gave a tensor back where a
        # buffer was meant (softmax(buf, rows, cols) gives a buffer), and rmsnorm(buf, w)
        # normalised the whole buffer as one row; sum(buf) refuses a buffer likewise
        raise _at(ZynMLTypeError(f"{fn}(): {what} must be a tensor, not a buffer of the "
                                 f"device interface (download(buf) gives its values)"), where)
    t = value if isinstance(value, Tensor) else to_tensor(value)
    if t is None:
        raise _at(ZynMLTypeError(f"{fn}(): {what} must be a tensor"), where)
    if t.dtype not in ("f16", "f32", "f64", "bf16") and what != "mask":
        raise _at(ZynMLTypeError(f"{fn}(): {what} must be a float tensor, not {t.dtype}"),
                  where)
    return t


def reshape(t, shape, committed=None):
    """`t` viewed with another shape of the same size, on its own device (no copy for
    host, CuPy and WebGPU arrays), committed there where `t` is (or as `committed` says)."""
    from ..runtime.tensor import Tensor
    shape = tuple(int(d) for d in shape)
    if int(np.prod(shape)) != t.size:
        raise ZynMLShapeError(f"cannot view {list(t.shape)} as {list(shape)}")
    data = t.data
    if hasattr(data, "reshape"):
        data = data.reshape(shape)
    elif hasattr(data, "buffer") and hasattr(data, "storage"):     # a WebGPU array
        data = type(data)(data.device, data.buffer, shape, data.dtype, data.storage)
    else:
        data = t.numpy().reshape(shape)
        return Tensor(data, "cpu", shape, t.dtype)
    # (a view stays committed where `t` was: a library kernel of a tensor placed with
    # to_device runs there, as a compute block does)
    return Tensor(data, t.device, shape, t.dtype,
                  committed=t.committed if committed is None else committed)


def _kw(kwargs, allowed, fn):
    for k in kwargs:
        if k not in allowed:
            raise _at(ZynMLTypeError(f"{fn}() has no parameter `{k}`" +
                                     (f"; it takes {', '.join(allowed)}" if allowed else "")), k)


def _number(kwargs, name, default, fn, positive=False):
    """Keyword `name` of `fn`: a finite number at least 0 (above 0 where `positive`); a
    string, a bool or a list was a Python error, a negative eps or base a result of NaN."""
    v = kwargs.get(name, default)
    ok = isinstance(v, (int, float, np.integer, np.floating)) and \
        not isinstance(v, (bool, np.bool_)) and np.isfinite(v) and (v > 0 if positive else v >= 0)
    if not ok:
        raise _at(ZynMLTypeError(f"{fn}(): {name}= takes a finite number "
                                 f"{'above' if positive else 'at least'} 0, not {v!r}"), name)
    return float(v)


def _args(args, n, fn, usage):
    if len(args) not in (n if isinstance(n, tuple) else (n,)):
        raise ZynMLTypeError(f"{fn}() is called as {usage}")


# ------------------------------------------------------------------------- kernels


@dataclass
class LibraryKernel:
    name: str
    usage: str
    prepare: Callable          # (args, kwargs) -> (source, bindings, finish(result))
    doc: str = ""
    # the arguments before the optional ones, and the optional keywords in the order the
    # usage gives them, which may be given by position too: rmsnorm(x, w, 1e-5)
    required: int = 1
    optional: tuple = ()


def _gemm(args, kwargs):
    _kw(kwargs, (), "gemm")
    _args(args, 2, "gemm", "gemm(a, b)")
    a, b = _tensor(args[0], "gemm", "a"), _tensor(args[1], "gemm", "b", 1)
    if a.ndim == 2 and b.ndim == 2:
        if a.shape[1] != b.shape[0]:
            raise ZynMLShapeError(f"gemm(): {list(a.shape)} @ {list(b.shape)} do not match")
        return GEMM, {"a": a, "b": b}, None
    if a.ndim == 3 and b.ndim == 3:
        if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise ZynMLShapeError(f"gemm(): {list(a.shape)} @ {list(b.shape)} do not match")
        return BATCHED_GEMM, {"a": a, "b": b}, None
    raise ZynMLShapeError("gemm() takes two matrices or two batches of matrices")


def _rows(t, fn):
    if t.ndim < 1:
        raise ZynMLShapeError(f"{fn}() takes a tensor of at least one axis")
    n = t.shape[-1]
    rows = t.size // n if n else 0
    return reshape(t, (rows, n)), rows, n


def _softmax(args, kwargs):
    _kw(kwargs, ("axis",), "softmax")
    _args(args, 1, "softmax", "softmax(x, axis=-1)")
    x = _tensor(args[0], "softmax", "x")
    axis = kwargs.get("axis", -1)
    if axis not in (-1, x.ndim - 1):
        raise ZynMLTypeError("the library's softmax() runs over the last axis (axis=-1)")
    x2, rows, n = _rows(x, "softmax")
    shape = x.shape
    return _half(SOFTMAX, x.dtype), {"x": x2}, lambda y: reshape(y, shape)


def _half(source: str, dtype: str) -> str:
    """A library program over a half-precision x (f16, bf16) computing in f32 and storing
    in x's dtype, as torch's kernels do: halves in f16 arithmetic are rounded at every step
    by the reference (tanh(inner) near -1 left few digits of 1 + tanh in gelu, an f16 sum of
    exponentials lost the small terms of a long softmax row), which the compiled devices,
    holding them in f32, did not."""
    if dtype not in ("f16", "bf16"):
        return source
    body = []
    for line in source.splitlines():
        if "out[" in line and " = " in line:
            target, value = line.split(" = ", 1)
            line = f"{target} = {dtype}({value})"
        body.append(line)
    text = "\n".join(body) + "\n"
    # every read of x as an f32 value (the softmax's max is of halves: exact in f32)
    return re.sub(r"\bx\[([^\]]*)\]", r"f32(x[\1])", text)


def _rmsnorm(args, kwargs):
    _kw(kwargs, ("eps",), "rmsnorm")
    _args(args, 2, "rmsnorm", "rmsnorm(x, weight, eps=1e-6)")
    x, w = _tensor(args[0], "rmsnorm", "x"), _tensor(args[1], "rmsnorm", "weight", 1)
    x2, rows, n = _rows(x, "rmsnorm")      # (first: a 0-d x has no last axis to match)
    if w.ndim != 1 or w.shape[0] != x.shape[-1]:
        raise _at(ZynMLShapeError(f"rmsnorm(): weight {list(w.shape)} does not match the "
                                  f"last axis of x {list(x.shape)}"), 1)
    shape = x.shape
    source = RMSNORM
    if x.dtype in ("f16", "bf16"):
        # the squares of a half-precision x are of f32 values, as torch's rms_norm computes
        # them: x * x of halves is a half, which the reference rounds (a value past 256
        # squared to inf there, and the row's norm to 0)
        source = source.replace("ss += x[r, i] * x[r, i]", "ss += f32(x[r, i]) * f32(x[r, i])")
    if {x.dtype, w.dtype} <= {"f16", "bf16"} and len({x.dtype, w.dtype}) == 1:
        # eps is an f32 scalar, which made a half-precision norm's result f32: computed
        # in f32 and stored in the inputs' dtype, as torch's rms_norm does
        source = source.replace("out[r, i] = x[r, i] * scale * weight[i]",
                                f"out[r, i] = {x.dtype}(f32(x[r, i]) * scale * f32(weight[i]))")
    return source, {"x": x2, "weight": w, "eps": _number(kwargs, "eps", 1e-6, "rmsnorm")}, \
        lambda y: reshape(y, shape)


def _elementwise(src, fn):
    def prepare(args, kwargs):
        _kw(kwargs, (), fn)
        _args(args, 1, fn, f"{fn}(x)")
        x = _tensor(args[0], fn, "x")
        shape = x.shape
        return _half(src, x.dtype), {"x": reshape(x, (x.size,))}, lambda y: reshape(y, shape)
    return prepare


def _rope(args, kwargs):
    _kw(kwargs, ("base",), "rope")
    _args(args, 1, "rope", "rope(x, base=10000.0)")
    x = _tensor(args[0], "rope", "x")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ZynMLShapeError("rope() takes x of shape [..., seq, head_dim] with an even head_dim")
    seq, hd = x.shape[-2], x.shape[-1]
    rows = x.size // (seq * hd) if seq * hd else 0
    shape = x.shape
    # an f16 x gave an f32 result (x times the f32 tables): stored in x's dtype; an f64 x
    # turns by angles of f64 (tables of f32, from the integer positions, left an f64 result
    # only f32's digits)
    source = ROPE.replace("XDT", x.dtype).replace("TDT", "f64" if x.dtype == "f64" else "f32")
    return source, {"x": reshape(x, (rows, seq, hd)), "seq": seq, "half": hd // 2,
                  "head_dim": float(hd), "base": _number(kwargs, "base", 10000.0, "rope", True)}, \
        lambda y: reshape(y, shape)


def _attention(args, kwargs):
    _kw(kwargs, ("mask", "causal", "scale"), "attention")
    _args(args, 3, "attention", "attention(q, k, v, mask=None, causal=False, scale=None)")
    q, k, v = (_tensor(a, "attention", n, i) for i, (a, n) in enumerate(zip(args, "qkv")))
    mask = kwargs.get("mask")
    causal = kwargs.get("causal", False)
    if not isinstance(causal, (bool, np.bool_)):
        raise ZynMLTypeError(f"attention(): causal= takes true or false, not {causal!r}")
    # the scores' scale (the spec's AttentionUniform.scale, torch's scale=): 1 / sqrt(head_dim)
    # unless given, a finite number
    scale = kwargs.get("scale")
    if scale is not None and (isinstance(scale, (bool, np.bool_)) or not isinstance(
            scale, (int, float, np.integer, np.floating)) or not np.isfinite(scale)):
        raise ZynMLTypeError(f"attention(): scale= takes a finite number, not {scale!r}")
    if q.ndim != k.ndim or q.ndim != v.ndim or q.ndim not in (3, 4):
        raise ZynMLShapeError("attention() takes q, k, v of shape [batch, heads, seq, head_dim] "
                              "(or [batch, seq, head_dim])")
    shape = q.shape
    if q.ndim == 3:
        q, k, v = (reshape(t, (t.shape[0], 1) + t.shape[1:]) for t in (q, k, v))
    # grouped-query heads: k and v may have fewer heads than q, each shared by
    # heads(q) / heads(k) query heads in a row (as torch's enable_gqa)
    if q.shape[-1] != k.shape[-1] or k.shape[:-1] != v.shape[:-1] or \
            q.shape[0] != k.shape[0] or not k.shape[1] or q.shape[1] % k.shape[1]:
        raise ZynMLShapeError(f"attention(): q {list(q.shape)}, k {list(k.shape)} and v "
                              f"{list(v.shape)} do not match (k and v have the heads of q, or "
                              f"a number of heads that divides them)")
    finish = (lambda y: reshape(y, shape[:-1] + (v.shape[-1],)))
    # the scores' scale is q's and k's head_dim; the output's last axis is v's (they may
    # differ, as in cross attention with another value width)
    sizes = {"head_dim": q.shape[-1]}
    grouped = k.shape[1] != q.shape[1]
    if grouped:
        sizes["group"] = q.shape[1] // k.shape[1]
    half = _half_attention(q, k, v)
    if scale is None and (half or not q.shape[-1]):
        # the scores in f32, as torch's kernels take them: an f16 score made every sum of
        # the row f16, which the reference rounds at each key (0.1 off over 1500 keys). A
        # head_dim of 0 scores every key 0, as torch (0 / sqrt(0) was NaN on the reference)
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    if scale is not None:
        sizes["scale"] = float(scale)
    if mask is None:
        return _grouped(ATTENTION_CAUSAL if causal else ATTENTION, grouped, scale, half), \
            {"q": q, "k": k, "v": v, **sizes}, finish
    m = _tensor(mask, "attention", "mask", "mask")
    if m.shape != (q.shape[2], k.shape[2]):
        raise ZynMLShapeError(f"attention(): the mask is [seq_q, seq_k] = "
                              f"{[q.shape[2], k.shape[2]]}, not {list(m.shape)}")
    if m.dtype in ("f16", "bf16", "f32", "f64"):
        source = ATTENTION_ADDITIVE_CAUSAL if causal else ATTENTION_ADDITIVE
    else:
        source = ATTENTION_MASKED_CAUSAL if causal else ATTENTION_MASKED
    return _grouped(source, grouped, scale, half), {"q": q, "k": k, "v": v, "mask": m, **sizes}, \
        finish


def _half_attention(q, k, v):
    """The half-precision dtype q, k and v share (f16, bf16), else None."""
    dtypes = {q.dtype, k.dtype, v.dtype}
    return q.dtype if len(dtypes) == 1 and q.dtype in ("f16", "bf16") else None


# the attention's f32 output `y` stored in the inputs' half-precision dtype, by a block of its
# own (a conversion inside the attention's store is a body the attention schedule does not take)
ATTENTION_TO_HALF = """let z = compute(y) {
    @kernel elementwise
    for b in 0..batch, h in 0..heads, i in 0..seq_q, d in 0..v_dim:
        out[b, h, i, d] = XDT(y[b, h, i, d])
}
z
"""


def _grouped(source: str, grouped: bool, scale=None, half=None) -> str:
    """The attention program reading key/value head h / group for query head h (where
    `grouped`), its scores scaled by the scalar `scale` (where one is given), its result
    stored in `half` (a dtype, where given)."""
    if half:
        assert source.endswith("}\ny\n")
        source = source[:-2] + ATTENTION_TO_HALF.replace("XDT", half)
    if scale is not None:
        source = source.replace(") / sqrt(head_dim)", ") * scale")
    if not grouped:
        return source
    return source.replace("k[b, h, j]", "k[b, h / group, j]").replace(
        "v[b, h, j, d]", "v[b, h / group, j, d]")


def _sinkhorn(args, kwargs):
    _kw(kwargs, ("iterations",), "sinkhorn")
    _args(args, 1, "sinkhorn", "sinkhorn(m, iterations=20)")
    m = _tensor(args[0], "sinkhorn", "m")
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ZynMLShapeError(f"sinkhorn() takes a square matrix, not {list(m.shape)}")
    it = kwargs.get("iterations", 20)
    # (a numpy integer too: a count read from an array or a config)
    if not isinstance(it, (int, np.integer)) or isinstance(it, (bool, np.bool_)) or it < 1:
        raise _at(ZynMLTypeError("sinkhorn(): iterations= takes a positive integer"), "iterations")
    it = int(it)
    source = SINKHORN_HALF.replace("XDT", m.dtype) if m.dtype in ("f16", "bf16") else SINKHORN
    return source, {"m": m, "iterations": it}, None


KERNELS = {
    "gemm": LibraryKernel("gemm", "gemm(a, b)", _gemm, "C = A @ B (tiled GEMM), batched for 3-D",
                          2),
    "softmax": LibraryKernel("softmax", "softmax(x, axis=-1)", _softmax,
                             "softmax over the last axis, one workgroup per row", 1, ("axis",)),
    "rmsnorm": LibraryKernel("rmsnorm", "rmsnorm(x, weight, eps=1e-6)", _rmsnorm,
                             "x * rsqrt(mean(x^2) + eps) * weight over the last axis", 2, ("eps",)),
    "silu": LibraryKernel("silu", "silu(x)", _elementwise(SILU, "silu"), "x / (1 + exp(-x))"),
    "gelu": LibraryKernel("gelu", "gelu(x)", _elementwise(GELU, "gelu"),
                          "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"),
    "rope": LibraryKernel("rope", "rope(x, base=10000.0)", _rope,
                          "rotary embedding of x [..., seq, head_dim], interleaved pairs", 1,
                          ("base",)),
    "attention": LibraryKernel("attention",
                               "attention(q, k, v, mask=None, causal=False, scale=None)",
                               _attention, "softmax(q k^T / sqrt(head_dim)) v over the keys the "
                               "mask keeps (a float mask is added to the scores) and, "
                               "causal, keys 0..i of query i", 3, ("mask", "causal", "scale")),
    "sinkhorn": LibraryKernel("sinkhorn", "sinkhorn(m, iterations=20)", _sinkhorn,
                              "Sinkhorn-Knopp: exp(m) made doubly stochastic", 1, ("iterations",)),
}

# ------------------------------------------------------------------------- running

_SESSIONS: dict = {}
_PROGRAMS: dict = {}
_LOCK = threading.Lock()


def _session_for(device: str):
    from ..session import Session
    with _LOCK:
        s = _SESSIONS.get(device)
        if s is None:
            s = _SESSIONS[device] = Session(device)
        return s


def _program(source: str):
    from ..compiler.parser import parse
    with _LOCK:
        p = _PROGRAMS.get(source)
        if p is None:
            p = _PROGRAMS[source] = parse(source)
        return p


def run(name: str, device: str, args: list, kwargs: dict):
    """Library kernel `name` on `device` (a device id); returns its value."""
    from ..errors import ZynMLError
    from ..session import bind_value
    kern = KERNELS.get(name)
    if kern is None:
        raise ZynMLTypeError(f"no library kernel `{name}`; the library has "
                             f"{', '.join(sorted(KERNELS))}")
    from ..runtime.builtins import by_position, placed_by_position
    args, kwargs, moved = by_position(name, list(args), dict(kwargs), kern.required,
                                      kern.optional)
    try:
        source, bindings, finish = kern.prepare(args, kwargs)
    except ZynMLError as err:
        raise placed_by_position(err, moved)
    session = _session_for(device)
    program = _program(source)
    with _LOCK:
        session.namespace.clear()
        for k, v in bindings.items():
            session.namespace[k] = bind_value(v)
        try:
            value = session.interpreter.run_program(program, source)
        except ZynMLError as err:
            err.inner_program = source
            raise err.with_source(source) from None
        finally:
            session.namespace.clear()
    value = value[0] if isinstance(value, tuple) else value
    return finish(value) if finish else value


def call(name: str, session, args, kwargs):
    """Library kernel `name` with ZynML arguments, on `session.default_device` (builtins
    pass `interp.session`)."""
    return run(name, session.default_device, list(args), dict(kwargs or {}))
