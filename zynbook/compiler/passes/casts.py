"""Casts from a float to an integer saturate: a value past the integer's range gives its
largest or smallest value, NaN gives 0, and a value in range is truncated toward zero.

C and C++ leave an out-of-range conversion undefined (x86 gives the smallest integer, so
`int(3e9)` was -2147483648 on the CPU), WGSL clamps to the integer's values that an f32 can
hold (2147483520), and numpy gives x86's answer or wraps unsigned types: every device
answered differently. Saturating is what CUDA's conversions, Rust's `as` and WGSL (within a
float's precision) do; spelled here once, as comparisons around the cast, it is the same on
every device, the reference included:

    x >= 2^31 ? 2147483647 : (x >= -2^31 ? i32(x) : (x < -2^31 ? -2147483648 : 0))

The bounds are powers of two, exact in every float type; an f16 or bf16 operand is compared
in f32 (where 2^31 is finite).

Casts from an integer to bf16 go through f32, as the reference rounds them.
"""
from __future__ import annotations

from .. import cir
from ..types import is_weak
from .simplify import INT_BITS, rewrite_exprs

# [lowest, past the largest) of each integer dtype
INT_RANGES = {d: (-2 ** (b - 1), 2 ** (b - 1)) if d[0] == "i" else (0, 2 ** b) for d, b in INT_BITS.items()}


def saturate_casts(kernel: cir.Kernel) -> cir.Kernel:
    # a cast this pass made already (fusion runs the passes again on fused kernels) is kept
    return rewrite_exprs(kernel, _rule, keep=_saturating)


def _rule(e):
    """`e`, whose operands are rewritten already, saturating where it is a cast from a float
    to an integer."""
    if isinstance(e, cir.Cast) and e.ty.dtype in INT_RANGES and e.operand.ty.dtype in cir.FLOAT_DTYPES:
        return _saturate(e)
    if isinstance(e, cir.Cast) and e.ty.dtype == "bf16" and e.operand.ty.dtype not in cir.FLOAT_DTYPES:
        # an integer (or bool) becomes bf16 through f32, as the reference rounds it
        # (WGSL's bf16 rounding takes an f32)
        return cir.Cast(cir.Cast(e.operand, cir.Ty("f32", e.operand.ty.shape)), e.ty)
    return e


def _saturate(e):
    x = e.operand
    if isinstance(x, cir.Const) and not x.ty.shape:
        c = _const(x.value, e.ty)
        # a constant in i32's range stands alone as a weak literal, which would take the dtype
        # of what it meets: a cast keeps it of the dtype asked for (x[i] + i16(10.5) on u8 x
        # is i16, as x[i] + i16(10) is)
        return cir.Cast(cir.Const(c.value, cir.Ty("i32")), e.ty) if is_weak(c) else c
    if x.ty.dtype in ("f16", "bf16"):
        x = cir.Cast(x, cir.Ty("f32", x.ty.shape))
    lo, past = INT_RANGES[e.ty.dtype]
    cmp_ty = cir.Ty("bool", x.ty.shape)
    fty = cir.Ty(x.ty.dtype)
    ity = cir.Ty(e.ty.dtype)

    def compare(op, bound):
        return cir.Bin(op, x, cir.Const(float(bound), fty), cmp_ty)

    below = cir.Select(compare("<", lo), cir.Const(lo, ity), cir.Const(0, ity), e.ty)
    inside = cir.Select(compare(">=", lo), cir.Cast(x, e.ty), below, e.ty)
    return cir.Select(compare(">=", past), cir.Const(past - 1, ity), inside, e.ty)


def _saturating(e) -> bool:
    """Whether `e` is the form `_saturate` builds."""
    if not (isinstance(e, cir.Select) and isinstance(e.cond, cir.Bin) and e.cond.op == ">="
            and isinstance(e.if_false, cir.Select)):
        return False
    inner = e.if_false.if_true
    return isinstance(inner, cir.Cast) and inner.ty == e.ty and inner.operand == e.cond.left


def _const(value, ty):
    lo, past = INT_RANGES[ty.dtype]
    if value != value:
        return cir.Const(0, ty)
    if value >= past:
        return cir.Const(past - 1, ty)
    if value < lo:
        return cir.Const(lo, ty)
    return cir.Const(int(value), ty)
