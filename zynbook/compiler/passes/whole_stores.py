"""A whole-tensor store as a loop nest over the output: `out = E`, where E combines whole
inputs element by element (numpy's trailing alignment), scalars and at most one matrix
product of two 2-D inputs (or their transposes), becomes

    parallel for i0 in 0..d0, ...:          (the output's axes)
        [var acc = 0; for k in 0..K: acc = acc + A[i0, k] * B[k, i1]]
        out[i0, ...] = E at (i0, ...)          (the product read as acc)

the form every schedule recognises (elementwise, GEMM with its epilogue), so such a body no
longer runs as one block of threads. The element values are the tile's: each operation is
the same operation on the same operands (a half-precision product sums f32 products in f32
and rounds once, as numpy's matmul). Scalar lets of constants, scalars and sizes may come first;
anything else (slices, reductions, tile lets that stay, other statements) is left as it is.
"""
from __future__ import annotations

from dataclasses import replace

from .. import cir
from .tiles import inline_tile_lets

I32 = cir.Ty("i32")
F32 = cir.Ty("f32")
HALVES = ("f16", "bf16")


class _NotWhole(Exception):
    """The value is not an element-by-element combination this pass writes as loops."""


def whole_stores(kernel: cir.Kernel) -> cir.Kernel:
    body = inline_tile_lets(kernel.body)
    *lets, store = body or (None,)
    if not isinstance(store, cir.Store) or not all(isinstance(s, cir.Let) and _plain_scalar(s.value)
                                                   for s in lets):
        return kernel
    out = kernel.output
    if store.buffer != out.name or store.index or tuple(store.value.ty.shape) != tuple(out.shape):
        return kernel
    shapes = {b.name: tuple(b.shape) for b in kernel.inputs}
    taken = _names(kernel)
    axes = [cir.fresh_name("i", taken) for _ in out.shape]
    try:
        return replace(kernel, body=(*lets, _Nest(shapes, axes, taken).loops(store, out.shape)))
    except _NotWhole:
        return kernel


def _plain_scalar(e: cir.Expr) -> bool:
    """A scalar of constants, scalars and sizes (no element read, no reduction)."""
    return not e.ty.shape and not any(
        isinstance(n, (cir.Load, cir.Dot, cir.Reduce)) or (isinstance(n, cir.Call) and n.fn in cir.TILE_FUNCTIONS)
        for n in cir.walk(e))


def _names(kernel) -> set:
    """Every name the kernel uses (generated names avoid them)."""
    names = {kernel.output.name, *kernel.dims, *(b.name for b in kernel.inputs),
             *(s.name for s in kernel.scalars)}
    for n in cir.walk(kernel.body):
        for attr in ("name", "var"):
            if isinstance(getattr(n, attr, None), str):
                names.add(getattr(n, attr))
    return names


def _dim(d) -> cir.Expr:
    return cir.Var(d, I32) if isinstance(d, str) else d


class _Nest:
    def __init__(self, shapes: dict, axes: list, taken: set):
        self.shapes, self.axes, self.taken = shapes, axes, taken
        self.product = None         # (acc name, its Let and loop) of the one matrix product

    def loops(self, store: cir.Store, dims) -> cir.Stmt:
        index = tuple(cir.Var(a, I32) for a in self.axes)
        value = self.element(store.value, index)
        body = (cir.Store(store.buffer, index, value, store.line),)
        if self.product is not None:
            body = self.product + body
        for axis, d in reversed(list(zip(self.axes, dims))):
            body = (cir.Loop(axis, cir.Const(0, I32), _dim(d), cir.Const(1, I32), body, False, store.line),)
        return body[0]

    def element(self, e: cir.Expr, index: tuple) -> cir.Expr:
        """`e` (a tile of the output's trailing axes, or a scalar) at `index`."""
        if not e.ty.shape:
            if not _plain_scalar(e):
                raise _NotWhole      # (a reduction, or an element read: left as written)
            return e
        scalar = replace(e.ty, shape=())
        rank = len(e.ty.shape)
        at = index[len(index) - rank:]
        if isinstance(e, cir.Load):
            if e.index or self.shapes.get(e.buffer) != tuple(e.ty.shape):
                raise _NotWhole
            return cir.Load(e.buffer, at, scalar)
        if isinstance(e, cir.Call) and e.fn == "transpose" and rank == 2 and isinstance(e.args[0], cir.Load):
            return self.element(e.args[0], at[::-1])
        if isinstance(e, cir.Bin) and e.op == "@":
            return self.matmul(e, at, scalar)
        if isinstance(e, cir.Bin):
            return cir.Bin(e.op, self.element(e.left, at), self.element(e.right, at), scalar, e.span)
        if isinstance(e, cir.Unary):
            return cir.Unary(e.op, self.element(e.operand, at), scalar)
        if isinstance(e, cir.Cast):
            return cir.Cast(self.element(e.operand, at), scalar)
        if isinstance(e, cir.Select):
            return cir.Select(self.element(e.cond, at), self.element(e.if_true, at),
                              self.element(e.if_false, at), scalar)
        if isinstance(e, cir.Call) and e.fn in cir.MATH_FUNCTIONS:
            return replace(e, args=tuple(self.element(a, at) for a in e.args), ty=scalar)
        raise _NotWhole

    def matmul(self, e: cir.Bin, at: tuple, scalar: cir.Ty) -> cir.Expr:
        """A[i, :] . B[:, j] summed in the product's dtype, one per output element."""
        if self.product is not None or len(at) != 2 or scalar.dtype == "bool":
            raise _NotWhole
        a, b = e.left, e.right
        if len(a.ty.shape) != 2 or len(b.ty.shape) != 2 or any(
                isinstance(n, cir.Bin) and n.op == "@" for n in cir.walk((a, b))):
            raise _NotWhole
        acc, k = cir.fresh_name("acc", self.taken), cir.fresh_name("k", self.taken)
        kv = cir.Var(k, I32)
        # half precision as numpy's matmul: f32 products summed in f32, rounded once
        sum_ty = F32 if scalar.dtype in HALVES else scalar
        operand = (lambda x: cir.Cast(x, F32)) if scalar.dtype in HALVES else (lambda x: x)
        term = cir.Bin("*", operand(self.element(a, (at[0], kv))), operand(self.element(b, (kv, at[1]))), sum_ty)
        zero = cir.Const(0 if sum_ty.dtype[0] in "iu" else 0.0, sum_ty)
        loop = cir.Loop(k, cir.Const(0, I32), _dim(a.ty.shape[1]), cir.Const(1, I32),
                        (cir.Assign(acc, cir.Bin("+", cir.Var(acc, sum_ty), term, sum_ty)),))
        self.product = (cir.Let(acc, zero, True, 0, sum_ty), loop)
        total = cir.Var(acc, sum_ty)
        return cir.Cast(total, scalar) if sum_ty is not scalar else total
