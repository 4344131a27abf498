"""Long sums of f32 kept accurate where the target asks (`Target.wide_sums`: the CPU).

A CPU runs a row's or a block's sum in one thread, in order: 131,000 values of 0.1 added in
f32 one after another are off by about 1e-3, where a GPU's tree of partial sums is off by
about 1e-6. Every loop whose body only adds into f32 locals (`ir.loop_reductions`, whatever
schedule made it: a reduction's, a row kernel's, a loop of a generic thread) and may run
more than `LONG` iterations runs in chunks of `CHUNK`: each chunk sums into f32 partials as
before (vector lanes, a partial each), and the chunks' sums are added in f64. The error is
a chunk's, as small as a tree's, and the inner loop stays as fast as it was. Shorter loops
(a row of a few thousand) keep one partial a lane: a few hundred values each, their error
already a tree's.
"""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .scalar import user_name

# iterations a chunk sums in f32: with 8 vector lanes, 32 values a lane (an error of a few
# units in the last place), and a chunk's overhead (its partials combined) spread over 256
CHUNK = 256
LONG = 4096


def widen_sums(program: ir.Program, sizes: dict) -> ir.Program:
    """`program` (for a launch of `sizes`, CIR name -> value) with the long f32 sums of its
    loops taken in chunks added in f64."""
    env = {user_name(name): value for name, value in sizes.items()}
    if not any(isinstance(n, ir.For) and _sums(n, env) for n in ir.walk(program)):
        return program
    return ir.map_loops(program, _Widened(env).loop)


def _reductions(loop: ir.For) -> tuple:
    """The loop's `reduce`, or where its schedule left it out, what its body does."""
    return loop.reduce or ir.loop_reductions(loop.body)


def _sums(loop: ir.For, env: dict) -> list:
    """The f32 sums of `loop` where it may run more than LONG iterations."""
    start, stop, step = (_value(b, env) for b in (loop.start, loop.stop, loop.step))
    if None not in (start, stop, step) and -(-(stop - start) // step) <= LONG:
        return []
    return [name for name, op, dt in _reductions(loop) if op == "+" and dt == "f32"]


class _Widened:
    def __init__(self, env: dict):
        self.n, self.env = 0, env

    def loop(self, s: ir.For, inner) -> list:
        sums = _sums(s, self.env)
        if not sums:
            return [replace(s, body=inner(s.body))]
        self.n += 1
        n, dt = self.n, s.dtype
        wide = {name: f"_wide{n}_{i}" for i, name in enumerate(sums)}
        part = {name: f"_part{n}_{i}" for i, name in enumerate(sums)}
        at = ir.Ref(f"_chunk{n}", dt)
        size = ir.Bin("*", s.step, ir.Lit(CHUNK, dt), dt)
        # (the chunk's end as at + min(stop - at, size): no sum past the index type)
        end = ir.Bin("+", at, ir.Math("min", (ir.Bin("-", s.stop, at, dt), size), dt), dt)
        inner = replace(s, start=at, stop=end, body=tuple(
            replace(t, name=part[t.name], value=_renamed(t.value, t.name, part[t.name]))
            if isinstance(t, ir.Set) and t.name in part else t for t in s.body),
            reduce=tuple((part.get(name, name), op, t) for name, op, t in _reductions(s)))
        chunk = [ir.Decl(p, "f32", ir.Lit(0.0, "f32"), True, s.line) for p in part.values()]
        chunk.append(inner)
        chunk += [ir.Set(wide[name], ir.Bin("+", ir.Ref(wide[name], "f64"),
                                            ir.Cast(ir.Ref(part[name], "f32"), "f64"), "f64"))
                  for name in sums]
        before = [ir.Decl(w, "f64", ir.Lit(0.0, "f64"), True, s.line) for w in wide.values()]
        after = [ir.Set(name, ir.Cast(ir.Bin("+", ir.Cast(ir.Ref(name, "f32"), "f64"),
                                             ir.Ref(wide[name], "f64"), "f64"), "f32"), s.line)
                 for name in sums]
        return before + [ir.For(at.name, s.start, s.stop, size, tuple(chunk), dt, s.line)] + after


# the thread axes of a CPU block, which one thread runs
_CPU_AXES = {"thread": 0, "lane": 0, "warp": 0, "threads": 1}


def _value(e: ir.Expr, env: dict) -> int | None:
    """A loop bound's value, where it is one (a CPU's sizes are compiled in: `env`), else
    None (it reads a loop variable or data)."""
    if isinstance(e, ir.Lit):
        return e.value
    if isinstance(e, ir.Ref):
        return env.get(e.name)
    if isinstance(e, ir.Thread):
        return _CPU_AXES.get(e.axis)
    if isinstance(e, ir.Cast):
        return _value(e.a, env)
    if isinstance(e, ir.Bin) and e.op in ("+", "-", "*"):
        a, b = _value(e.a, env), _value(e.b, env)
        return None if a is None or b is None else a + b if e.op == "+" else \
            a - b if e.op == "-" else a * b
    return None


def _renamed(value: ir.Bin, name: str, to: str) -> ir.Bin:
    """`name + v` (or `v + name`) as `to + v`."""
    this, other = ir.Ref(name, "f32"), ir.Ref(to, "f32")
    return replace(value, a=other) if value.a == this else replace(value, b=other)
