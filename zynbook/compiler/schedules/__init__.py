"""Schedules (base.py): the one place decisions are made. `build(kernel, target, sizes)`
tries them in order and returns the launch IR of the first that applies, with the reasons
the others gave, or None where only a renderer of the older form handles the kernel yet."""
from __future__ import annotations

from .. import cir
from ..launch import ir
from ..launch.scalar import NotScalar
from ..targets import Target
from .attention import Attention
from .gemm import Gemm
from .generic import GenericThread
from .reduce import Reduce
from .rows import Rows
from .block import Block
from .vector import VectorThread

SCHEDULES = (Attention(), Reduce(), Gemm(), Rows(), VectorThread(), GenericThread(), Block())


def why_none(kernel: cir.Kernel, target: Target, sizes: dict) -> str:
    """Why no schedule applies to `kernel` on `target`: the reason of the schedule named
    after its kernel type, else every schedule's."""
    reasons = {s.name: s.why_not(kernel, target, sizes) for s in SCHEDULES}
    for s in SCHEDULES:
        if kernel.kernel_type.kind in (s.name,) + s.kinds and reasons[s.name]:
            return reasons[s.name]
    return "; ".join(f"{name}: {why}" for name, why in reasons.items() if why)


def build(kernel: cir.Kernel, target: Target, sizes: dict, params=None,
          only: str | None = None, exclude: tuple = ()) -> ir.Program | None:
    notes = []
    for sched in SCHEDULES:
        if (only is not None and sched.name != only) or sched.name in exclude:
            continue
        reason = sched.why_not(kernel, target, sizes)
        if reason is None:
            try:
                prog = sched.build(kernel, target, sizes, params or sched.default(kernel, target, sizes))
            except NotScalar as err:
                reason = str(err)
            else:
                prog.notes = notes + prog.notes
                return prog
        notes.append(f"{sched.name}: {reason}")
    return None
