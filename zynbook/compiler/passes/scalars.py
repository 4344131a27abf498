"""Host floats meeting f64 are read in f64.

A host float (`let scale = 0.1`, a Python float given to `Session.run`) is an f32 scalar
argument, so `x[i] * scale` on f32 `x` stays f32 as numpy computes it. Beside f64 data
numpy reads the Python float as f64, so here a scalar argument of f32 (and the arithmetic
on it with literals: `1.0 - scale`) that meets an f64 value (an f64 operation, comparison,
call, select, cast, or a store into an f64 output or local) is read as f64, and so is a
`let` holding such arithmetic (`let inv = 1.0 / scale`): the argument (the local) becomes
f64, and its f32 reads, where it has any, read it rounded to f32 (`f32(scale)`, the value
the f32 argument held). An f32 kernel is left as it was. (Passing the f32 argument and
widening it gave 0.30000000447 for `3 * 0.1`.)
"""
from __future__ import annotations

from dataclasses import replace

from .. import cir
from .simplify import bottom_up, map_stmts, rewrite_exprs

F32, F64 = cir.Ty("f32"), cir.Ty("f64")
_ARITH = ("+", "-", "*", "/", "%", "**")
_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


def f64_scalars(kernel: cir.Kernel) -> cir.Kernel:
    floats = {s.name for s in kernel.scalars if s.dtype == "f32"}
    if not floats:
        return kernel
    wide: set = set()           # the scalars (and locals holding them) read as f64 somewhere

    def host(e) -> bool:
        """`e` is an f32 value computed from host floats and literals (sizes may take part)."""
        def leaf_ok(n):
            if isinstance(n, cir.Var):
                return n.name in floats or n.ty.dtype in ("i32", "i64")
            if isinstance(n, cir.Const):
                return True
            if isinstance(n, cir.Bin):
                return n.op in _ARITH and leaf_ok(n.left) and leaf_ok(n.right)
            if isinstance(n, cir.Unary):
                return n.op == "neg" and leaf_ok(n.operand)
            if isinstance(n, cir.Call):
                return not n.weak and n.fn in cir.MATH_FUNCTIONS and all(map(leaf_ok, n.args))
            return False
        return e.ty == F32 and leaf_ok(e) and any(
            isinstance(n, cir.Var) and n.name in floats for n in cir.walk(e))

    def widened(e):
        """`e` (see `host`) computed in f64; its integer parts keep their types."""
        if not isinstance(e, cir.Expr) or e.ty.dtype != "f32":
            return e
        if isinstance(e, cir.Var):
            wide.add(e.name)
            return cir.Var(e.name, F64)
        if isinstance(e, cir.Const):
            return cir.Const(float(e.value), F64)
        if isinstance(e, cir.Bin):
            return cir.Bin(e.op, widened(e.left), widened(e.right), F64)
        if isinstance(e, cir.Unary):
            return cir.Unary(e.op, widened(e.operand), F64)
        return cir.Call(e.fn, tuple(widened(a) for a in e.args), F64)

    def meet(e, wide_context: bool):
        return widened(e) if wide_context and host(e) else e

    def rule(e):
        if isinstance(e, cir.Bin):
            if e.op in _ARITH:
                wide_ctx = e.ty.dtype == "f64"
                return replace(e, left=meet(e.left, wide_ctx), right=meet(e.right, wide_ctx))
            if e.op in _COMPARE:
                return replace(e, left=meet(e.left, e.right.ty.dtype == "f64"),
                               right=meet(e.right, e.left.ty.dtype == "f64"))
            return e
        if isinstance(e, cir.Call) and e.ty == F64:
            return replace(e, args=tuple(meet(a, True) for a in e.args))
        if isinstance(e, cir.Select) and e.ty == F64:
            return replace(e, if_true=meet(e.if_true, True), if_false=meet(e.if_false, True))
        if isinstance(e, cir.Cast) and e.ty == F64 and host(e.operand):
            return widened(e.operand)
        return e

    def expr(e):
        return bottom_up(e, rule)

    out_f64 = kernel.output.dtype == "f64"
    f64_locals: set = set()

    def stmts(body):
        res = []
        for s in body:
            if isinstance(s, cir.Let):
                wide_local = s.declared_ty == F64
                if wide_local:
                    f64_locals.add(s.name)
                s = replace(s, value=meet(expr(s.value), wide_local))
                if not s.mutable and host(s.value):
                    floats.add(s.name)      # `let inv = 1.0 / scale`: read as scale is
            elif isinstance(s, cir.Assign):
                s = replace(s, value=meet(expr(s.value), s.name in f64_locals))
            elif isinstance(s, cir.Store):
                s = replace(s, index=tuple(expr(i) for i in s.index),
                            value=meet(expr(s.value), out_f64 and s.buffer == kernel.output.name))
            elif isinstance(s, cir.Yield):
                s = replace(s, value=meet(expr(s.value), out_f64),
                            index=None if s.index is None else expr(s.index))
            elif isinstance(s, cir.Loop):
                s = replace(s, start=expr(s.start), stop=expr(s.stop), step=expr(s.step),
                            body=stmts(s.body))
            elif isinstance(s, cir.If):
                s = replace(s, cond=expr(s.cond), then=stmts(s.then), orelse=stmts(s.orelse))
            elif isinstance(s, cir.Atomic):
                s = replace(s, index=tuple(expr(i) for i in s.index), value=expr(s.value))
            res.append(s)
        return tuple(res)

    body = stmts(kernel.body)
    if not wide:
        return kernel

    def widen_let(s):
        """A let of a widened local computed in f64 (which may widen the scalars and locals
        its value reads)."""
        if isinstance(s, cir.Let) and s.name in wide and s.value.ty == F32:
            return replace(s, value=widened(s.value))
        return s

    while True:             # a widened local's value may read an earlier one
        seen = set(wide)
        body = map_stmts(body, widen_let)
        if wide == seen:
            break
    # the scalar is passed as f64 (a local holds f64); where it is still read as f32 it
    # reads f32(scale), the value the f32 argument held

    def narrow(e):
        if isinstance(e, cir.Var) and e.name in wide and e.ty == F32:
            return cir.Cast(cir.Var(e.name, F64), F32)
        return e

    scalars = tuple(cir.Scalar(s.name, "f64") if s.name in wide else s for s in kernel.scalars)
    return rewrite_exprs(replace(kernel, body=body, scalars=scalars), narrow)
