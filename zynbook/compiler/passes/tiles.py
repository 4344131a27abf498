"""Inline tile lets: replace immutable tile `let`s by their definitions where they are used.

A tile let whose value reads no mutable variable means the same wherever it is used, so
inlining keeps the meaning and lets each element be computed where it is needed (no
per-thread copy of a whole tile). The C-like printers (C++, CUDA, MSL) want their bodies in
this form; the reference executor and WGSL compute a tile let once and read it, which is
faster for them (a tile used twice would be computed twice), so the pass is not in the
pipeline every device gets: those printers run it on the bodies they print.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .. import cir
from .loops import free_vars


def substitute(e, env: dict):
    """`e` (an expression, a span or a tuple of them) with the `Var`s named in `env`
    replaced by their expressions; what does not change is returned as it is."""
    if not env or e is None:
        return e
    if isinstance(e, cir.Var):
        return env.get(e.name, e)
    if isinstance(e, (tuple, list)):
        return tuple(substitute(x, env) for x in e)
    if not isinstance(e, (cir.Expr, cir.Span)):
        return e
    changes = {}
    for f in fields(e):
        val = getattr(e, f.name)
        if f.name != "ty" and isinstance(val, (cir.Expr, cir.Span, tuple, list)):
            new = substitute(val, env)
            if new is not val:
                changes[f.name] = new
    return replace(e, **changes) if changes else e


def inline_tile_lets(body, mutable: set | None = None, env: dict | None = None,
                     lines: dict | None = None) -> tuple:
    """`body` with its immutable tile lets that read no mutable variable inlined. `lines`,
    where given, gets id(value) -> (value, the let's line) of each value inlined, so that a
    check of that value points at the line that wrote it, not at the one that reads it."""
    if mutable is None:
        mutable = {n.name for n in cir.walk(body) if isinstance(n, cir.Let) and n.mutable}
    env = dict(env or {})
    out = []
    for s in body:
        if isinstance(s, cir.Let):
            v = substitute(s.value, env)
            if not s.mutable and v.ty.shape and not (free_vars(v) & mutable):
                env[s.name] = v
                if lines is not None:
                    lines[id(v)] = (v, s.line)
                continue
            env.pop(s.name, None)
            out.append(replace(s, value=v))
        elif isinstance(s, cir.Assign):
            out.append(replace(s, value=substitute(s.value, env)))
        elif isinstance(s, (cir.Store, cir.Atomic)):
            out.append(replace(s, index=substitute(s.index, env), value=substitute(s.value, env)))
        elif isinstance(s, cir.Loop):
            inner = {k: v for k, v in env.items() if k != s.var}
            out.append(replace(s, start=substitute(s.start, env), stop=substitute(s.stop, env),
                               step=substitute(s.step, env),
                               body=inline_tile_lets(s.body, mutable, inner, lines)))
        elif isinstance(s, cir.If):
            out.append(replace(s, cond=substitute(s.cond, env),
                               then=inline_tile_lets(s.then, mutable, env, lines),
                               orelse=inline_tile_lets(s.orelse, mutable, env, lines)))
        elif isinstance(s, cir.Yield):
            out.append(replace(s, value=substitute(s.value, env), index=substitute(s.index, env)))
        else:
            out.append(s)
    return tuple(out)


def inline_tiles(kernel: cir.Kernel) -> cir.Kernel:
    """The pass: `kernel` with `inline_tile_lets` run on its body."""
    return replace(kernel, body=inline_tile_lets(kernel.body))
