"""Widen `var`s: declare each mutable local with the type its assignments gave it.

`var m = -inf` later assigned a column of row maxima holds a tile, `var acc = 0.0` summing
f16 products stays f16 (a literal is weak). Lowering types each assignment as it meets it;
this pass replays those assignments in program order with the promotion rules of
`compiler/types.py` and writes the final type on the declaration: a scalar literal is
retyped, any other value keeps its own type and the `Let` carries the wider one.
"""
from __future__ import annotations

from dataclasses import replace

from .. import cir
from ..types import WeakLocals, promote
from .simplify import map_stmts


def widen_vars(kernel: cir.Kernel) -> cir.Kernel:
    final: dict = {}                 # mutable local -> its type after every assignment
    weak = WeakLocals(kernel.dims)
    for s in cir.walk(kernel.body):     # in program order
        if isinstance(s, cir.Let):
            weak.declare(s.name, s.value)
            if s.mutable:
                final[s.name] = s.declared_ty
        elif isinstance(s, cir.Assign):
            ty = final.get(s.name)
            v = s.value
            if ty is not None and (v.ty.shape != ty.shape or v.ty.dtype != ty.dtype):
                final[s.name] = cir.Ty(promote(ty.dtype, v.ty.dtype, s.name in weak.names,
                                               weak.weak(v)), v.ty.shape or ty.shape)
            weak.assign(s.name, v)

    def declared(s):
        ty = final.get(s.name) if isinstance(s, cir.Let) and s.mutable else None
        if ty is None or ty == s.declared_ty:
            return s
        if isinstance(s.value, cir.Const) and not ty.shape:
            return cir.Let(s.name, cir.Const(s.value.value, ty), True, s.line)
        return cir.Let(s.name, s.value, True, s.line, ty)

    return replace(kernel, body=map_stmts(kernel.body, declared))
