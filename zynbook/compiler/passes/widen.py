"""Widen `var`s: declare each mutable local with the type its assignments gave it.

`var m = -inf` later assigned a column of row maxima holds a tile, `var acc = 0.0` summing
f16 products stays f16 (a literal is weak). Lowering types each assignment as it meets it;
this pass replays those assignments in program order with the promotion rules of
`compiler/types.py` and writes the final type on the declaration: a scalar literal is
retyped, any other value keeps its own type and the `Let` carries the wider one.

A `var` still holding a weak value (`var c = 0.1`, `c = c * 3.0`) that meets f64, read
beside it or assigned it later, is f64 from its declaration on, and the weak values it was
given are computed in f64, as the reference computes weak values: lowering had typed them
f32 before it met the f64.
"""
from __future__ import annotations

from dataclasses import replace

from .. import cir
from ..types import WeakLocals, arithmetic_dtype, is_float, promote
from .simplify import bottom_up, map_stmts, rewrite_exprs


def widen_vars(kernel: cir.Kernel) -> cir.Kernel:
    final: dict = {}                 # mutable local -> its type after every assignment
    weak_values: set = set()         # ids of the declarations and assignments of weak values
    weak = WeakLocals(kernel.dims)
    for s in cir.walk(kernel.body):     # in program order
        if isinstance(s, cir.Let):
            weak.declare(s.name, s.value)
            if s.mutable:
                final[s.name] = s.declared_ty
                if weak.weak(s.value):
                    weak_values.add(id(s))
        elif isinstance(s, cir.Assign):
            ty = final.get(s.name)
            v = s.value
            if ty is not None and weak.weak(v):
                weak_values.add(id(s))
            if ty is not None and (v.ty.shape != ty.shape or v.ty.dtype != ty.dtype):
                final[s.name] = cir.Ty(promote(ty.dtype, v.ty.dtype, s.name in weak.names,
                                               weak.weak(v)), v.ty.shape or ty.shape)
            weak.assign(s.name, v)
        else:
            for name in _weak_reads_beside_f64(s, final, weak):
                final[name] = cir.Ty("f64", final[name].shape)
    in_f64 = {n for n, ty in final.items() if ty.dtype == "f64"}

    def declared(s):
        if id(s) in weak_values and s.name in in_f64 and is_float(s.value.ty.dtype):
            s = replace(s, value=_weak_in_f64(s.value, in_f64))
        ty = final.get(s.name) if isinstance(s, cir.Let) and s.mutable else None
        if ty is None or ty == s.declared_ty:
            return s
        if isinstance(s.value, cir.Const) and not ty.shape:
            return cir.Let(s.name, cir.Const(s.value.value, ty), True, s.line)
        return cir.Let(s.name, s.value, True, s.line, ty)

    body = map_stmts(kernel.body, declared)
    narrowed: dict = {}             # id -> the reads rewritten below and the arithmetic on them

    def as_declared(e):
        new = _read_as_declared(e, final)
        if new is e and isinstance(e, cir.Bin) and (id(e.left) in narrowed
                                                    or id(e.right) in narrowed):
            new = _in_operands_dtype(e, weak)
        if new is not e:
            narrowed[id(new)] = new
        return new
    return rewrite_exprs(replace(kernel, body=body), as_declared)


def _in_operands_dtype(e, weak):
    """Arithmetic over a float local read in a narrower declared type, in the dtype its
    operands now give: `0.9 * a` of `var a = 0.0` that an f16 value made f16 was lowered
    f32, beside a weak literal, before `a` took f16. (`weak` holds the names weak after the
    whole body, a subset of those weak at any read, so this never narrows what was wide.)"""
    if e.op not in ("+", "-", "*", "/", "%", "**") or e.ty.shape or not is_float(e.ty.dtype):
        return e
    want = arithmetic_dtype(e.op, e.left, e.right, weak.weak(e.left), weak.weak(e.right))
    return replace(e, ty=cir.Ty(want, e.ty.shape)) if want != e.ty.dtype and is_float(want) else e


def _read_as_declared(e, final):
    """A read of a float local in its declared (final) type: a read lowered before the local
    took it (`s + x[i]` of `var s = 0.0` summing f16 x read `s` as f32, so the compiled
    devices rounded the running sum to f16 at every step). An integer local that became a
    float (`var s = 0` summing f16 values) read through a cast to that float reads the float:
    lowering's `f16(s)` of an i32 `s` made the reference round the sum at every step."""
    if isinstance(e, cir.Cast) and isinstance(e.operand, cir.Var) and is_float(e.ty.dtype):
        ty = final.get(e.operand.name)
        if ty is not None and ty == e.ty and not is_float(e.operand.ty.dtype):
            return cir.Var(e.operand.name, ty)
    ty = final.get(e.name) if isinstance(e, cir.Var) else None
    if ty is None or ty.shape or e.ty.shape or ty.dtype == e.ty.dtype or \
            not (is_float(ty.dtype) and is_float(e.ty.dtype)):
        return e
    return cir.Var(e.name, ty)


def _weak_reads_beside_f64(e, final, weak):
    """The mutable locals holding a weak float that `e` (an expression) reads beside an f64
    operand."""
    if isinstance(e, cir.Bin):
        operands = (e.left, e.right)
    elif isinstance(e, cir.Select):
        operands = (e.if_true, e.if_false)
    elif isinstance(e, cir.Call):
        operands = e.args
    else:
        return []
    if not any(o.ty.dtype == "f64" for o in operands):
        return []
    return [o.name for o in operands if isinstance(o, cir.Var) and o.name in final and
            o.name in weak.names and is_float(o.ty.dtype) and o.ty.dtype != "f64"]


def _weak_in_f64(value, names):
    """A weak value given to an f64 local, its reads of the f64 locals `names` and its float
    literals and arithmetic in f64."""
    from ..lower import _in_f64

    def retype(e):
        if isinstance(e, cir.Var) and e.name in names and is_float(e.ty.dtype):
            return cir.Var(e.name, cir.Ty("f64", e.ty.shape))
        return e
    return _in_f64(bottom_up(value, retype))
