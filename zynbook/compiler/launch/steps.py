"""Loops a device may quit early, checked: for a target whose driver stops long loops silently.

Mesa's llvmpipe (the `lavapipe` Vulkan driver, and its OpenGL one) gives every shader
invocation one budget of loop iterations (65,535, all loops together, its own helpers' too)
and quits the loops when it is spent, without an error: a longer row or sequence gave a
wrong result. On a target with `loop_steps`, every loop counts its iterations and, after it,
compares the count with its trip count; a loop quit early fails an error-flag site
(compiler/errflag.py), so the launch raises a ZynML error instead of returning what the
driver left. One increment an iteration; loops written out (`unroll`) are no loops there.
A loop in a branch the thread does not take spends one iteration too (the driver runs
branches masked): the WGSL dialect sets the error flag without a loop there.
"""
from __future__ import annotations

from dataclasses import replace

from .. import errflag
from . import ir
from .scalar import user_name
from .unroll import _substitute, constant_bounds, writes_out, written_out


# the copies of an innermost loop's body one iteration of it runs on such a target: its
# budget is spent by iterations, so a dot product over 65,536 terms and more still runs
UNROLL = 8
_UNROLLED_NODES = 400       # larger bodies are left as they are (the shader would grow past it)


# the statements and expressions a loop's body may grow to where the loops of constant
# bounds inside it are written out (a GEMM's step of K: 8 rows of an 8-wide tile)
_WRITTEN_NODES = 4000


def write_out_constant_loops(program: ir.Program) -> ir.Program:
    """`program` with the loops of constant bounds inside each loop of other bounds (a
    GEMM's K tile and its 8 steps) written out where that body stays small, but those a
    printer writes out itself (`unroll.writes_out`): each of their iterations spent the
    budget, 9 a K tile of 8, and K >= 65,536 did not run; written out, the K tile loop
    spends one an iteration and, innermost now, may be unrolled."""
    def kernel(k: ir.Kernel) -> ir.Kernel:
        registers = {n.name for n in ir.walk(k.body) if isinstance(n, ir.Array) and n.space == "local"}

        def write(s: ir.For, inner) -> list:
            # (the printer's to write out; an array declared in the body would be declared
            # once a copy)
            if writes_out(s, registers) or any(isinstance(n, ir.Array) for n in ir.walk(s.body)):
                return [replace(s, body=inner(s.body))]
            return list(inner(tuple(written_out(s))))

        def loop(s: ir.For, inner) -> list:
            s = replace(s, body=inner(s.body))
            loops = [n for n in ir.walk(s.body) if isinstance(n, ir.For)]
            if constant_bounds(s) or not loops or not all(map(constant_bounds, loops)) or \
                    _grid_strided(s):
                return [s]
            body = ir.map_body(s.body, write)
            return [s if sum(1 for _ in ir.walk(body)) > _WRITTEN_NODES else replace(s, body=body)]
        return replace(k, body=ir.map_body(k.body, loop))
    return replace(program, kernels=tuple(kernel(k) for k in program.kernels))


def _grid_strided(s: ir.For) -> bool:
    """A loop strided by the grid: it runs a few iterations a thread."""
    return any(isinstance(n, ir.Thread) for n in ir.walk(s.step))


def unroll_inner_loops(program: ir.Program, sizes: dict | None = None, budget: int = 0) -> ir.Program:
    """`program` with each innermost loop of bounds not all constant run UNROLL
    iterations at a time (the body copied, its loop variable advanced by the step, its
    locals renamed), then the iterations left one at a time: the same work in fewer
    iterations of loops. A program for the launch's `sizes` runs a loop longer than
    `budget` times UNROLL (a row of 600,000) as many more at a time as keep it in the
    budget, where its body stays small."""
    count = [0]
    env = host_values(program, sizes) if sizes is not None and budget else None

    def loop(s: ir.For, inner) -> list:
        s = replace(s, body=inner(s.body))
        nodes = sum(1 for _ in ir.walk(s.body))
        innermost = not any(isinstance(n, ir.For) for n in ir.walk(s.body))
        # (a loop strided by the grid runs a few iterations a thread: copies only grow it)
        if s.unroll or constant_bounds(s) or not innermost or nodes > _UNROLLED_NODES or \
                _grid_strided(s):
            return [s]
        count[0] += 1
        n = loop_trips(s, env) if env is not None else None
        factor = UNROLL if n is None else _factor(n, nodes, budget)
        dt, var = s.dtype, ir.Ref(s.var, s.dtype)
        end = ir.Ref(f"_unrolled{count[0]}", dt)
        trips = ir.Math("max", (ir.Bin("/", ir.Bin("+", ir.Bin("-", s.stop, s.start, dt),
                                                   ir.Bin("-", s.step, ir.Lit(1, dt), dt), dt),
                                       s.step, dt), ir.Lit(0, dt)), dt)
        stride = ir.Bin("*", s.step, ir.Lit(factor, dt), dt)
        whole = ir.Bin("+", s.start, ir.Bin("*", ir.Bin("/", trips, ir.Lit(factor, dt), dt),
                                            stride, dt), dt)
        # (a thread's array declared in the body is declared once a copy: renamed too)
        declared = {n.name for n in ir.walk(s.body) if isinstance(n, ir.Decl)
                    or isinstance(n, ir.Array) and n.space != "shared"}
        copies = tuple(_substitute(st, {s.var: ir.Bin("+", var, ir.Bin("*", s.step, ir.Lit(
            u, dt), dt), dt)} if u else {}, {d: f"{d}_u{u}" for d in declared} if u else {})
            for u in range(factor) for st in s.body)
        # (the copies read a sum as many times: what the body did is said before it is copied)
        return [ir.Decl(end.name, dt, whole),
                replace(s, stop=end, step=stride, body=copies,
                        reduce=s.reduce or ir.loop_reductions(s.body)),
                replace(s, start=end)]
    return ir.map_loops(program, loop)


def _factor(n: int, nodes: int, budget: int) -> int:
    """The copies a step of a loop of `n` iterations and a body of `nodes` runs: UNROLL,
    or twice that and more while the loop's steps (its chunks' too) and the leftover ones
    pass the budget
    (and the copies stay under _WRITTEN_NODES)."""
    f = UNROLL
    # (n / f steps and a quarter more: a long sum's chunks, launch/wide_sums.py, step at
    # least 4 times a chunk)
    while n // f + n // (4 * f) + f >= budget and 2 * f * nodes <= _WRITTEN_NODES:
        f *= 2
    return f


def host_values(program: ir.Program, sizes: dict) -> dict:
    """What the host can tell at `sizes` (CIR size name -> value): the sizes, by the
    program's names, and each constant the program declares from them alone."""
    env = {user_name(k): int(v) for k, v in sizes.items()}
    for n in ir.walk(program):
        if isinstance(n, ir.Decl) and not n.mutable and n.value is not None:
            try:
                env[n.name] = ir.evaluate(n.value, env)
            except (TypeError, KeyError, ZeroDivisionError):
                pass        # it reads a loop variable, a thread's position or data
    return env


def loop_trips(loop: ir.For, env: dict) -> int | None:
    """The iterations of `loop` where `env` (host_values) gives its bounds, else None."""
    try:
        start, stop, step = (ir.evaluate(b, env) for b in (loop.start, loop.stop, loop.step))
    except (TypeError, KeyError, ZeroDivisionError):
        return None
    return max(-(-(stop - start) // step), 0) if step > 0 else None


def longest_loop(program: ir.Program, sizes: dict) -> int:
    """The most iterations a loop of `program` runs at `sizes`, of the loops whose
    bounds the host can tell (not one over a thread's share of a grid or over data)."""
    env = host_values(program, sizes)
    return max((t for t in (loop_trips(n, env) for n in ir.walk(program)
                            if isinstance(n, ir.For) and not n.unroll) if t is not None), default=0)


def check_loop_counts(program: ir.Program, limit: int, line: int) -> ir.Program:
    """`program` with each loop's iterations checked against its trip count: a site per
    loop, at its ZynML line (else `line`), whose message names `limit`."""
    if not any(isinstance(n, ir.For) and not n.unroll for n in ir.walk(program)):
        return program
    counted = _Counted(list(program.sites), limit, line)
    program = ir.map_loops(program, counted.loop)
    return replace(program, sites=tuple(counted.sites))


class _Counted:
    def __init__(self, sites: list, limit: int, line: int):
        self.sites, self.limit, self.line, self.n = sites, limit, line, 0

    def site(self, line: int) -> int:
        self.sites.append(errflag.Site(errflag.STEPS, line or self.line, "", self.limit))
        return len(self.sites)

    def loop(self, s: ir.For, inner) -> list:
        if s.unroll:                # written out: no loop for the driver
            return [replace(s, body=inner(s.body))]
        self.n += 1
        dt = s.dtype
        want, got = ir.Ref(f"_trips{self.n}", dt), ir.Ref(f"_ran{self.n}", dt)
        zero, one = ir.Lit(0, dt), ir.Lit(1, dt)
        span = ir.Bin("-", s.stop, s.start, dt)
        trips = ir.Math("max", (ir.Bin("/", ir.Bin("+", span, ir.Bin("-", s.step, one, dt), dt),
                                       s.step, dt), zero), dt)
        count = ir.Set(got.name, ir.Bin("+", got, one, dt))
        # a count short of the trip count (their difference, negative) fails the site
        check = ir.If(ir.InRange(ir.Bin("-", got, want, dt), one, self.site(s.line)), ())
        return [ir.Decl(want.name, dt, trips), ir.Decl(got.name, dt, zero, True),
                replace(s, body=inner(s.body) + (count,)), check]
