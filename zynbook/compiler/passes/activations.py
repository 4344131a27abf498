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

from .. import cir
from .simplify import rewrite_exprs


def tanh_as_sigmoid(kernel: cir.Kernel) -> cir.Kernel:
    return rewrite_exprs(kernel, _rule)


def _rule(e):
    """`e`, whose operands are rewritten already, as a sigmoid where it is 1 +- tanh(z)."""
    if isinstance(e, cir.Bin) and e.op in ("+", "-") and not e.ty.shape and \
            e.ty.dtype in cir.FLOAT_DTYPES:
        if _one(e.left) and _tanh(e.right, e.ty):
            return _twice_sigmoid(e.right, 2.0 if e.op == "+" else -2.0, e.ty)
        if e.op == "+" and _one(e.right) and _tanh(e.left, e.ty):
            return _twice_sigmoid(e.left, 2.0, e.ty)
    return e


def _one(e) -> bool:
    return isinstance(e, cir.Const) and not e.ty.shape and e.value == 1 and \
        not isinstance(e.value, bool)


def _tanh(e, ty: cir.Ty) -> bool:
    return isinstance(e, cir.Call) and e.fn == "tanh" and len(e.args) == 1 and e.ty == ty and \
        e.args[0].ty == ty


def _twice_sigmoid(tanh: cir.Call, scale: float, ty: cir.Ty):
    """2 * sigmoid(scale * z) for tanh(z), the sigmoid keeping where the tanh is written
    (errors about it name the tanh: WebGPU's f64 refusal)."""
    inner = cir.Bin("*", cir.Const(scale, ty), tanh.args[0], ty)
    sigmoid = cir.Call("sigmoid", (inner,), ty, span=tanh.span, written=tanh.written or "tanh")
    return cir.Bin("*", cir.Const(2.0, ty), sigmoid, ty)
