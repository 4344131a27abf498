"""Long sums of f32 kept accurate on every target.

A thread that adds a long run of f32 values one after another loses digits: 131,000 values
of 0.1 added in order are off by about 1e-3, 4 million by 4e-2, where a tree of partial sums
is off by about 1e-6. A CPU runs a row's or a block's sum in one thread; a GPU thread runs
its share of a long row, or a whole row where no tree schedule applies. Every loop whose
body only adds into f32 locals (`ir.loop_reductions`, whatever schedule made it: a
reduction's, a row kernel's, a loop of a generic thread) and may run more than `LONG`
iterations (a GPU thread's: `CHUNK`) runs in chunks of `CHUNK`: each chunk sums into f32
partials as before (vector lanes, a partial each), and the chunks' sums are added

* in f64 on the CPU (`Target.wide_sums`), which has it to spare: a chunk's error, as small
  as a tree's;
* in f32 on a GPU, in chunks of their own (CHUNK chunks): no run of additions in order is
  longer than CHUNK but the last, of n / CHUNK^2 (64 for 4 million values).

The inner loop stays as fast as it was. Shorter loops, where the sizes are known, are left
as they are: a CPU's row of a few thousand (a few hundred values a vector lane), a GPU
thread's share of at most CHUNK values; their error is already a tree's.
"""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .scalar import user_name

# iterations a chunk sums in f32: with 8 vector lanes, 32 values a lane (an error of a few
# units in the last place), and a chunk's overhead (its partials combined) spread over 256;
# a CPU loop is long past LONG (its vector lanes a partial each), a GPU thread's past CHUNK
CHUNK = 256
LONG = 4096


def widen_sums(program: ir.Program, sizes: dict, wide: str = "f64") -> ir.Program:
    """`program` with the long f32 sums of its loops taken in chunks whose sums are added
    in `wide` ("f64"; "f32": in chunks of chunks). `sizes` (CIR name -> value): a launch's,
    where the program is built for one (a loop of known length may be short); {} for a
    program that serves every size set."""
    env = {user_name(name): value for name, value in sizes.items()}
    widened = _Widened(env, wide)
    kernels = tuple(widened.kernel(k) for k in program.kernels)
    return replace(program, kernels=kernels) if widened.n else program


def _reductions(loop: ir.For) -> tuple:
    """The loop's `reduce`, or where its schedule left it out, what its body does."""
    return loop.reduce or ir.loop_reductions(loop.body)


class _Widened:
    def __init__(self, env: dict, wide: str):
        self.n, self.env, self.wide, self.axes = 0, env, wide, {}

    def kernel(self, k: ir.Kernel) -> ir.Kernel:
        # (a CPU runs one thread a block; a GPU thread's first index is 0 and its stride
        # the block's threads, the grid's blocks being unknown here)
        self.axes = dict(_THREAD_INDICES, threads=k.block) if self.wide == "f32" else _CPU_AXES
        return replace(k, body=ir.map_body(k.body, self.loop))

    def sums(self, loop: ir.For) -> list:
        """The f32 sums of `loop` where it may run more than LONG iterations (on a GPU, not
        a loop strided by the grid: few iterations a thread, and chunks of its stride would
        pass the index type)."""
        if self.wide == "f32" and any(isinstance(n, ir.Thread) and n.axis == "blocks"
                                      for n in ir.walk(loop.step)):
            return []
        trips = self.trips(loop)
        # (a GPU thread sums in one partial: more than a chunk is long)
        if trips is not None and trips <= (LONG if self.wide == "f64" else CHUNK):
            return []
        return [name for name, op, dt in _reductions(loop) if op == "+" and dt == "f32"]

    def trips(self, loop: ir.For) -> int | None:
        """The most iterations `loop` runs in a thread, where that is known."""
        start, step = (_value(b, self.env, self.axes) for b in (loop.start, loop.step))
        stop = _most(loop.stop, self.env, self.axes)
        return None if None in (start, stop, step) else -(-(stop - start) // step)

    def loop(self, s: ir.For, inner) -> list:
        sums = self.sums(s)
        if not sums:
            return [replace(s, body=inner(s.body))]
        before, chunks, after = self.chunked(s, sums)
        trips = self.trips(s)
        if self.wide == "f32" and (trips is None or trips > CHUNK * CHUNK):
            # the chunks' sums in chunks of CHUNK chunks
            before2, chunks, after2 = self.chunked(chunks, [d.name for d in before])
            before, after = before + before2, after2 + after
        return before + [chunks] + after

    def chunked(self, s: ir.For, sums: list) -> tuple:
        """(declarations, the loop over chunks of CHUNK of `s`'s iterations, the sums set)
        with `s`'s f32 sums `sums` taken per chunk and the chunks' added in the wide dtype."""
        self.n += 1
        n, dt, wdt, dtype = self.n, s.dtype, self.wide, "f32"
        wide = {name: f"_wide{n}_{i}" for i, name in enumerate(sums)}
        part = {name: f"_part{n}_{i}" for i, name in enumerate(sums)}
        at = ir.Ref(f"_chunk{n}", dt)
        # (a loop written out `copies` iterations a step, launch/steps.py, steps through
        # CHUNK values in fewer steps: at least 4 a chunk, where a device counts them)
        copies = sum(1 for t in s.body if isinstance(t, ir.Set) and t.name == sums[0])
        size = ir.Bin("*", s.step, ir.Lit(max(4, CHUNK // max(copies, 1)), dt), dt)
        # (the chunk's end as at + min(stop - at, size): no sum past the index type)
        end = ir.Bin("+", at, ir.Math("min", (ir.Bin("-", s.stop, at, dt), size), dt), dt)
        inner = replace(s, start=at, stop=end, body=tuple(
            replace(t, name=part[t.name], value=_renamed(t.value, t.name, part[t.name], dtype))
            if isinstance(t, ir.Set) and t.name in part else t for t in s.body),
            reduce=tuple((part.get(name, name), op, t) for name, op, t in _reductions(s)))
        chunk = [ir.Decl(p, dtype, ir.Lit(0.0, dtype), True, s.line) for p in part.values()]
        chunk.append(inner)
        chunk += [ir.Set(wide[name], ir.Bin("+", ir.Ref(wide[name], wdt),
                                            _cast(ir.Ref(part[name], dtype), wdt), wdt))
                  for name in sums]
        before = [ir.Decl(w, wdt, ir.Lit(0.0, wdt), True, s.line) for w in wide.values()]
        after = [ir.Set(name, _cast(ir.Bin("+", _cast(ir.Ref(name, dtype), wdt),
                                           ir.Ref(wide[name], wdt), wdt), dtype), s.line)
                 for name in sums]
        return before, ir.For(at.name, s.start, s.stop, size, tuple(chunk), dt, s.line), after


def _cast(e: ir.Expr, dtype: str) -> ir.Expr:
    return e if e.dtype == dtype else ir.Cast(e, dtype)


# the thread axes of a CPU block, which one thread runs
_CPU_AXES = {"thread": 0, "lane": 0, "warp": 0, "threads": 1}
# a GPU thread's indices, the first thread's
_THREAD_INDICES = {"thread": 0, "lane": 0, "warp": 0, "block": 0}


def _value(e: ir.Expr, env: dict, axes: dict) -> int | None:
    """A loop bound's value, where it is one (sizes compiled in: `env`; thread axes:
    `axes`), else None (it reads a loop variable or data)."""
    if isinstance(e, ir.Lit):
        return e.value
    if isinstance(e, ir.Ref):
        return env.get(e.name)
    if isinstance(e, ir.Thread):
        return axes.get(e.axis)
    if isinstance(e, ir.Cast):
        return _value(e.a, env, axes)
    if isinstance(e, ir.Bin) and e.op in ("+", "-", "*"):
        a, b = _value(e.a, env, axes), _value(e.b, env, axes)
        return None if a is None or b is None else a + b if e.op == "+" else \
            a - b if e.op == "-" else a * b
    return None


def _most(e: ir.Expr, env: dict, axes: dict) -> int | None:
    """The most a loop's stop may be, where that is known: its value, or a `min(...)`'s
    known side (a final pass over at most 1024 partial sums)."""
    if isinstance(e, ir.Math) and e.fn in ("min", "max"):
        most = [_most(a, env, axes) for a in e.args]
        known = [m for m in most if m is not None]
        if e.fn == "min" and known:
            return min(known)
        return max(most) if e.fn == "max" and len(known) == len(most) else None
    if isinstance(e, ir.Cast):
        return _most(e.a, env, axes)
    return _value(e, env, axes)


def _renamed(value: ir.Bin, name: str, to: str, dtype: str) -> ir.Bin:
    """`name + v` (or `v + name`) as `to + v`."""
    this, other = ir.Ref(name, dtype), ir.Ref(to, dtype)
    return replace(value, a=other) if value.a == this else replace(value, b=other)
