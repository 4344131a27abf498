"""Schedules (base.py): the one place decisions are made. `build(kernel, target, sizes)`
tries them in order and returns the launch IR of the first that applies, with the reasons
the others gave, or None where only a renderer of the older form handles the kernel yet."""
from __future__ import annotations

from .. import cir
from ..launch import ir
from ..launch.scalar import NotScalar
from ..launch.steps import check_loop_counts, unroll_inner_loops, write_out_constant_loops
from ..launch.wide_sums import widen_sums
from ..targets import Target
from .attention import Attention
from .cpu_gemm import CpuGemm
from .gemm import Gemm
from .generic import GenericThread
from .reduce import Reduce
from .rows import Rows
from .base import Choice
from .block import Block
from .configs import check_config
from .vector import VectorThread

SCHEDULES = (Attention(), Reduce(), CpuGemm(), Gemm(), Rows(), VectorThread(), GenericThread(), Block())


def why_none(kernel: cir.Kernel, target: Target, sizes: dict) -> str:
    """Why no schedule applies to `kernel` on `target`: the reason of the schedule named
    after its kernel type, else every schedule's."""
    reasons = {s.name: s.why_not(kernel, target, sizes) for s in SCHEDULES}
    for s in SCHEDULES:
        if kernel.kernel_type.kind in (s.name,) + s.kinds and reasons[s.name]:
            return reasons[s.name]
    return "; ".join(f"{name}: {why}" for name, why in reasons.items() if why)


def refusal(kernel: cir.Kernel, target: Target, sizes: dict) -> tuple[str, int]:
    """(why no schedule builds `kernel` on `target`, the ZynML line to point at, or 0): a
    schedule that applies but could not build it says what it met and where (a tile the
    block schedule could not hold), else `why_none`."""
    for sched in SCHEDULES:
        if sched.why_not(kernel, target, sizes) is None:
            try:
                sched.build(kernel, target, sizes, sched.default(kernel, target, sizes))
            except NotScalar as err:
                return f"{why_none(kernel, target, sizes)}; {sched.name}: {err}", err.line
    return why_none(kernel, target, sizes), 0


def chosen(kernel: cir.Kernel, target: Target, sizes: dict):
    """The schedule `build` tries first for `kernel` on `target` (the one whose space a
    tuner searches), or None."""
    return next((s for s in SCHEDULES if s.why_not(kernel, target, sizes) is None), None)


def build(kernel: cir.Kernel, target: Target, sizes: dict, params=None,
          only: str | None = None, exclude: tuple = ()) -> ir.Program | None:
    """The launch IR of the first schedule that applies. `params`: that schedule's
    parameters, or a `Choice` (which names its schedule)."""
    if isinstance(params, Choice):
        only, params = params.schedule, params.params
    notes = []
    for sched in SCHEDULES:
        if (only is not None and sched.name != only) or sched.name in exclude:
            continue
        reason = sched.why_not(kernel, target, sizes)
        if reason is None:
            check_config(sched.name, kernel, target, sizes)
            try:
                prog = sched.build(kernel, target, sizes, params or sched.default(kernel, target, sizes))
            except NotScalar as err:
                reason = str(err)
            else:
                prog.notes = notes + prog.notes
                if target.loop_steps:
                    prog = unroll_inner_loops(write_out_constant_loops(prog), sizes=None if
                                              target.symbolic_sizes else sizes,
                                              budget=target.loop_steps)
                # (after the unrolling, whose steps a chunk counts; a program that serves
                # every size set knows no loop's length)
                prog = widen_sums(prog, {} if target.symbolic_sizes else sizes,
                                  "f64" if target.wide_sums else "f32")
                if target.loop_steps:
                    prog = check_loop_counts(prog, target.loop_steps, kernel.first_line)
                return prog
        notes.append(f"{sched.name}: {reason}")
    return None
