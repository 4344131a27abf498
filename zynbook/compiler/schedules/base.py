"""What a schedule is: the one place a decision about how a kernel runs is made.

A schedule looks at a kernel (and what the recognition pass found in it) on a `Target` and
says whether it applies (`why_not` returns the reason it does not, or None), offers a space
of parameters (frozen dataclasses: hashable, printable, part of every cache key), takes the
annotations (`@workgroup`, `@tile`, `@shared`) as its default parameters, and builds the
launch IR for one choice. Printers and devices only spell and run what it built.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from math import prod

from .. import cir
from ..launch import ir
from ..launch.scalar import lit
from ..targets import Target


@dataclass(frozen=True)
class Params:
    def describe(self) -> str:
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


@dataclass(frozen=True)
class Choice:
    """One schedule's parameters, named with the schedule: what a device compiles when it is
    told which parameters to use (a tuning candidate, a tuned winner) instead of choosing."""
    schedule: str
    params: Params

    def describe(self) -> str:
        return f"{self.schedule}: {self.params.describe()}"


class Schedule(ABC):
    name = "schedule"
    kinds: tuple = ()           # kernel types it is written for, besides its name

    @abstractmethod
    def why_not(self, kernel: cir.Kernel, target: Target, sizes: dict) -> str | None:
        """None when the schedule applies to `kernel` on `target`, else the reason."""

    @abstractmethod
    def default(self, kernel: cir.Kernel, target: Target, sizes: dict) -> Params:
        """The parameters to use without measuring (the annotations' hints among them)."""

    def space(self, kernel: cir.Kernel, target: Target, sizes: dict) -> list:
        """Every parameter choice worth measuring (the default first)."""
        return [self.default(kernel, target, sizes)]

    def wants_launch_sizes(self, kernel: cir.Kernel, target: Target, sizes: dict) -> bool:
        """Whether a program built for these sizes (`target` has them baked in) runs a
        better algorithm than one for every size set would (a target that compiles one
        program for every size set then compiles one for these)."""
        return False

    @abstractmethod
    def build(self, kernel: cir.Kernel, target: Target, sizes: dict, params: Params) -> ir.Program:
        """The launch IR of `kernel` for one choice of parameters."""


class Builder:
    """What the builders of programs share: fresh local names `_<stem><n>` and values of
    the index dtype `self.idx`."""
    tmp = 0

    def new(self, stem: str) -> str:
        self.tmp += 1
        return f"_{stem}{self.tmp}"

    def i(self, v) -> ir.Expr:
        return v if isinstance(v, ir.Expr) else lit(v, self.idx)


def one_kernel(kernel: cir.Kernel, params: tuple, body, block: int, idx: str, what: str, grid,
               sites: tuple, schedule: str, symbolic: bool = False, suffix: str = "",
               scratch: tuple = (), **extra) -> ir.Program:
    """A program of one kernel, named after `kernel` (+ `suffix`), launched once on `grid`
    blocks of `block` threads: a number, or an expression the host evaluates now unless the
    program is for every size set (`symbolic`)."""
    name = kernel_name(kernel) + suffix
    if not isinstance(grid, ir.Expr) or not symbolic:
        grid = lit(grid if isinstance(grid, int) else ir.evaluate(grid, {}), "i64")
    k = ir.Kernel(name, params, tuple(body), block, idx, what, **extra)
    return ir.Program(kernel.name, (k,), (ir.Launch(name, grid, block),), scratch, sites, schedule)


def workgroup_threads(kernel: cir.Kernel) -> int:
    """The threads a `@workgroup(x, y, z)` hint asks for (1 without one)."""
    return prod(int(w) for w in kernel.schedule.workgroup or ())


def kernel_name(kernel: cir.Kernel, part: str = "") -> str:
    """The device function of a kernel (or of one launch `part` of it): generated names start
    with `zyn_`, user names with `u_`, so neither can meet the other."""
    base = "".join(c if c.isalnum() else "_" for c in kernel.name)
    return f"zyn_k_{base}" + (f"_{part}" if part else "")
