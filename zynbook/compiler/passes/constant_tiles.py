"""Constant tiles (`zeros(r, c)`, `ones(r, c)`) reduced or multiplied by their own shape.

Every device holds a constant tile as one element that broadcasts: it takes the shape of the
(possibly clipped) tiles it meets, as flash attention's `var o = zeros(64, head_dim)` meets the
last, shorter block of a sequence. A tile made only of constant tiles and numbers (`ones(4, 3)`,
`zeros(2, 5) + x[i]`, a `let` or a never-assigned `var` of one) has one value throughout, and
where it is reduced or is a factor of `@` or `dot` before it meets another tile, its own
shape is what counts: `sum(ones(4, 3))` is 12, as numpy's, where the one element gave 1. This
pass writes such a reduction with the number of elements it runs over (`v * n` for a sum,
`v ** n` for a product, `v` for a maximum, ...), so no device has to hold the tile at its
full size.
"""
from __future__ import annotations

from dataclasses import replace

from ...errors import ZynMLShapeError
from .. import cir
from ..types import int_pow_exponent, is_float, is_int
from .simplify import rewrite_exprs

_ELEMENTWISE = (cir.Bin, cir.Unary, cir.Cast, cir.Select)


def constant_tiles(kernel: cir.Kernel) -> cir.Kernel:
    held = _held(kernel)
    return rewrite_exprs(kernel, lambda e: _rewrite(e, held))


def _held(kernel) -> dict:
    """{name: (value, dims)} of the locals that hold a constant tile all the time: a `let`,
    or a `var` never assigned, declared once."""
    lets = [s for s in cir.walk(kernel.body) if isinstance(s, cir.Let)]
    assigned = {s.name for s in cir.walk(kernel.body) if isinstance(s, cir.Assign)}
    once = {n for n in (s.name for s in lets) if sum(s.name == n for s in lets) == 1}
    held = {}
    for s in lets:
        if s.name in once and s.name not in assigned:
            u = _uniform(s.value, held)
            if u is not None:
                held[s.name] = u
    return held


def _dims_broadcast(a: tuple, b: tuple):
    """numpy's broadcast of two tuples of extents (CIR expressions); None where two differ
    and neither is 1 (the devices' own checks then stand)."""
    out = []
    for k in range(1, max(len(a), len(b)) + 1):
        p = a[-k] if k <= len(a) else None
        q = b[-k] if k <= len(b) else None
        if p is None or _is_one(p):
            out.append(q if q is not None else p)
        elif q is None or _is_one(q) or p == q:
            out.append(p)
        else:
            return None
    return tuple(reversed(out))


def _is_one(d) -> bool:
    return isinstance(d, cir.Const) and d.value == 1


def _uniform(e, held):
    """(value, dims) where tile `e` has one value throughout: its element (a scalar
    expression of e's dtype) and its extents; else None."""
    if not e.ty.shape:
        return None
    if isinstance(e, cir.Call) and e.fn in ("zeros", "ones"):
        one = e.fn == "ones"
        value = one if e.ty.dtype == "bool" else type(1.0 if is_float(e.ty.dtype) else 1)(one)
        # a Cast: typed as the tile, where a literal is weak (`ones(2, 3, dtype=i64) * 3`
        # would be an i32 product of two literals)
        return cir.Cast(cir.Const(value, cir.Ty(e.ty.dtype)), cir.Ty(e.ty.dtype)), tuple(e.args)
    if isinstance(e, cir.Var):
        return held.get(e.name)
    if isinstance(e, cir.Call) and e.fn == "transpose":
        u = _uniform(e.args[0], held)
        return None if u is None or len(u[1]) < 2 else (u[0], u[1][:-2] + u[1][-2:][::-1])
    if isinstance(e, cir.Call) and e.fn in cir.MATH_FUNCTIONS:
        names, parts = "args", list(e.args)
    elif isinstance(e, cir.Bin) and e.op != "@":
        names, parts = ("left", "right"), [e.left, e.right]
    elif isinstance(e, (cir.Unary, cir.Cast)):
        names, parts = ("operand",), [e.operand]
    elif isinstance(e, cir.Select):
        names, parts = ("cond", "if_true", "if_false"), [e.cond, e.if_true, e.if_false]
    else:
        return None
    values, dims = [], ()
    for p in parts:
        if not p.ty.shape:
            values.append(p)
            continue
        u = _uniform(p, held)
        if u is None:
            return None
        dims = _dims_broadcast(dims, u[1])
        if dims is None:
            return None
        values.append(u[0])
    ty = cir.Ty(e.ty.dtype)
    if names == "args":
        return replace(e, args=tuple(values), ty=ty), dims
    return replace(e, ty=ty, **dict(zip(names, values))), dims


def _as(e, dtype: str):
    return e if e.ty.dtype == dtype else cir.Cast(e, cir.Ty(dtype, e.ty.shape))


def _count(dims: tuple):
    n = None
    for d in dims:
        d = _as(d, "i32")
        n = d if n is None else cir.Bin("*", n, d, cir.Ty("i32"))
    return n if n is not None else cir.Const(1, cir.Ty("i32"))


def _filled(value, ty: cir.Ty):
    """A tile of type `ty` holding `value` throughout (a constant tile that broadcasts)."""
    if not ty.shape:
        return value
    dims = tuple(d if isinstance(d, cir.Expr) else
                 cir.Var(d, cir.Ty("i32")) if isinstance(d, str) else cir.Const(d, cir.Ty("i32"))
                 for d in ty.shape)
    return cir.Bin("*", _as(value, ty.dtype), cir.Call("ones", dims, ty), ty)


def _reduced(op: str, value, n, dtype: str, tile=None):
    """The reduction `op` of n elements that all hold `value`, or None where the one element
    the devices hold already gives it (a maximum, a minimum, `and`, `or`, an arg reduction's
    0). A Cast, so that the sum is typed as the reduction was, never weak as a literal is.
    An integer product is `value ** n` wrapped as the dtype's products wrap, for a count
    known here (`tile`: the constant tile, named where the count is not)."""
    if op == "+":
        total = cir.Bin("*", _as(value, dtype), _as(n, dtype), cir.Ty(dtype))
    elif op == "*" and is_float(dtype):
        total = cir.Call("pow", (_as(value, dtype), _as(n, dtype)), cir.Ty(dtype))
    elif op == "*" and is_int(dtype):
        k = _static(n)
        if k is None:
            raise ZynMLShapeError(
                "an integer product of a constant tile needs its size when the kernel is "
                "compiled; give the tile constant sizes, or multiply the values in a loop",
                _span_of(tile))
        # (a constant exponent past the dtype's width, as one that fits it: types.py)
        total = cir.Bin("**", _as(value, dtype),
                        cir.Const(int_pow_exponent(k, dtype), cir.Ty(dtype)), cir.Ty(dtype))
    else:
        return None
    return cir.Cast(total, cir.Ty(dtype))


def _static(n):
    """The value of a count (a product of i32 extents) where every extent is a constant."""
    if isinstance(n, cir.Cast):
        return _static(n.operand)
    if isinstance(n, cir.Const):
        return int(n.value)
    if isinstance(n, cir.Bin) and n.op == "*":
        a, b = _static(n.left), _static(n.right)
        return None if a is None or b is None else a * b
    return None


def _span_of(tile):
    """Where the first `zeros()`/`ones()` of `tile` is written, or None."""
    return next((n.span for n in cir.walk(tile) if isinstance(n, cir.Call)
                 and n.fn in ("zeros", "ones") and n.span is not None), None)


def _rewrite(e, held):
    if isinstance(e, cir.Reduce):
        u = _uniform(e.input, held)
        if u is None:
            return e
        value, dims = u
        n = _count(dims if e.axis is None else (dims[e.axis % len(dims)],))
        r = _reduced(e.op, value, n, e.ty.dtype, e.input)
        return e if r is None else _filled(r, e.ty)
    if isinstance(e, cir.Call) and e.fn == "row_sum":
        u = _uniform(e.args[0], held)
        if u is None or len(u[1]) < 2:
            return e
        return _filled(_reduced("+", u[0], _count(u[1][-1:]), e.ty.dtype), e.ty)
    if isinstance(e, cir.Dot):
        ua, ub = _uniform(e.a, held), _uniform(e.b, held)
        dtype = e.ty.dtype
        if ua is not None and ub is not None:
            prod = cir.Bin("*", _as(ua[0], dtype), _as(ub[0], dtype), cir.Ty(dtype))
            return _reduced("+", prod, _count(ua[1][-1:]), dtype)
        if ua is not None or ub is not None:
            v, other = (ua[0], e.b) if ua is not None else (ub[0], e.a)
            total = cir.Reduce("+", other, None, cir.Ty(other.ty.dtype))
            return cir.Cast(cir.Bin("*", _as(v, dtype), _as(total, dtype), cir.Ty(dtype)),
                            cir.Ty(dtype))
        return e
    if isinstance(e, cir.Bin) and e.op == "@":
        ua, ub = _uniform(e.left, held), _uniform(e.right, held)
        dtype = e.ty.dtype
        if ua is not None and ub is not None:
            prod = cir.Bin("*", _as(ua[0], dtype), _as(ub[0], dtype), cir.Ty(dtype))
            return _filled(_reduced("+", prod, _count(ua[1][-1:]), dtype), e.ty)
        if ua is not None and len(e.right.ty.shape) == 2:
            # every row is v times the column sums of the right side
            cols = cir.Reduce("+", e.right, 0, cir.Ty(e.right.ty.dtype, e.right.ty.shape[1:]))
            return cir.Bin("*", _filled(_as(ua[0], dtype), e.ty), _as(cols, dtype), e.ty)
        if ub is not None and len(e.left.ty.shape) == 2:
            # every column is v times the row sums of the left side
            rows = cir.Call("row_sum", (e.left,),
                            cir.Ty(e.left.ty.dtype, (e.left.ty.shape[0], 1)))
            return cir.Bin("*", _filled(_as(ub[0], dtype), e.ty), _as(rows, dtype), e.ty)
    return e
