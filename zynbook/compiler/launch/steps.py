"""Loops a device may quit early, checked: for a target whose driver stops long loops silently.

Mesa's llvmpipe (the `lavapipe` Vulkan driver, and its OpenGL one) gives every shader
invocation one budget of loop iterations (65,535, all loops together, its own helpers' too)
and quits the loops when it is spent, without an error: a longer row or sequence gave a
wrong result. On a target with `loop_steps`, every loop counts its iterations and, after it,
compares the count with its trip count; a loop quit early fails an error-flag site
(compiler/errflag.py), so the launch raises a ZynML error instead of returning what the
driver left. One increment an iteration; loops written out (`unroll`) are no loops there.
"""
from __future__ import annotations

from dataclasses import replace

from .. import errflag
from . import ir


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
