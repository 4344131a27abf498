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


def widen_vars(kernel: cir.Kernel) -> cir.Kernel:
    final: dict = {}                 # mutable local -> its type after every assignment
    weak = WeakLocals()

    def visit(body):
        for s in body:
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
            elif isinstance(s, cir.Loop):
                visit(s.body)
            elif isinstance(s, cir.If):
                visit(s.then)
                visit(s.orelse)

    visit(kernel.body)

    def rewrite(body):
        out = []
        for s in body:
            if isinstance(s, cir.Let) and s.mutable:
                ty = final.get(s.name)
                if ty is not None and ty != s.declared_ty:
                    if isinstance(s.value, cir.Const) and not ty.shape:
                        s = cir.Let(s.name, cir.Const(s.value.value, ty), True, s.line)
                    else:
                        s = cir.Let(s.name, s.value, True, s.line, ty)
            elif isinstance(s, cir.Loop):
                s = replace(s, body=rewrite(s.body))
            elif isinstance(s, cir.If):
                s = replace(s, then=rewrite(s.then), orelse=rewrite(s.orelse))
            out.append(s)
        return tuple(out)

    return replace(kernel, body=rewrite(kernel.body))
