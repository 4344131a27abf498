"""Activations: `1 + tanh(z)` as `2 * sigmoid(2 * z)`, and `1 - tanh(z)` as
`2 * sigmoid(-2 * z)`.

The two are one function, and the sigmoid form is the better one to compute: where tanh
nears -1, `1 + tanh(z)` loses the digits a sigmoid keeps (at z = -5 a correctly rounded tanh
leaves `1 + tanh` with a relative error of about 1e-3; the sigmoid, about 1e-7), and a
sigmoid is one exponential and one reciprocal where tanh is an exponential, a reciprocal and
a polynomial with a branch. The tanh form of GELU (`x * 0.5 * (1 + tanh(...))`, GPT-2's and
the spec's transformer block's) is the usual case: in a GEMM's epilogue its math is the part
of the tile's work that no tensor core hides. Limits agree: z = +-inf gives 2 and 0 either
way, and NaN stays NaN.

Only a literal 1 added to or taking away one float tanh is rewritten; nothing else moves.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .. import cir


def tanh_as_sigmoid(kernel: cir.Kernel) -> cir.Kernel:
    return replace(kernel, body=tuple(_stmt(s) for s in kernel.body))


def _stmt(s):
    kw = {}
    for f in fields(s):
        v = getattr(s, f.name)
        if isinstance(v, cir.Expr):
            kw[f.name] = _expr(v)
        elif isinstance(v, tuple) and v and all(isinstance(x, (cir.Stmt, cir.Expr)) for x in v):
            kw[f.name] = tuple(_stmt(x) if isinstance(x, cir.Stmt) else _expr(x) for x in v)
    return replace(s, **kw) if kw else s


def _expr(e):
    if not isinstance(e, cir.Expr) or isinstance(e, (cir.Const, cir.Var)):
        return e
    kw = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, cir.Expr):
            kw[f.name] = _expr(v)
        elif isinstance(v, tuple) and any(isinstance(x, cir.Expr) for x in v):
            kw[f.name] = tuple(_expr(x) if isinstance(x, cir.Expr) else x for x in v)
    e = replace(e, **kw) if kw else e
    if isinstance(e, cir.Bin) and e.op in ("+", "-") and not e.ty.shape and _float(e.ty):
        if _one(e.left) and _tanh(e.right, e.ty):
            return _twice_sigmoid(e.right.args[0], 2.0 if e.op == "+" else -2.0, e.ty)
        if e.op == "+" and _one(e.right) and _tanh(e.left, e.ty):
            return _twice_sigmoid(e.left.args[0], 2.0, e.ty)
    return e


def _float(ty: cir.Ty) -> bool:
    return ty.dtype in ("f16", "bf16", "f32", "f64")


def _one(e) -> bool:
    return isinstance(e, cir.Const) and not e.ty.shape and e.value == 1 and \
        not isinstance(e.value, bool)


def _tanh(e, ty: cir.Ty) -> bool:
    return isinstance(e, cir.Call) and e.fn == "tanh" and len(e.args) == 1 and e.ty == ty and \
        e.args[0].ty == ty


def _twice_sigmoid(z, scale: float, ty: cir.Ty):
    """2 * sigmoid(scale * z)."""
    inner = cir.Bin("*", cir.Const(scale, ty), z, ty)
    return cir.Bin("*", cir.Const(2.0, ty), cir.Call("sigmoid", (inner,), ty), ty)
