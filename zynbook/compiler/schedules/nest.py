"""The loop nest a schedule distributes: the outermost perfectly nested parallel loops of a
body with bounds known at launch, flattened into one iteration count."""
from __future__ import annotations

from dataclasses import dataclass

from .. import cir
from ..passes.loops import free_vars, static_value


def trip_count(loop: cir.Loop, sizes, symbolic: bool = False) -> int | None:
    """The iterations of `loop` at these sizes (None: not known at launch). `symbolic`: the
    count must be an expression over the sizes for every launch, so the step is a number."""
    a, b, s = (static_value(x, sizes) for x in (loop.start, loop.stop, loop.step))
    if symbolic and static_value(loop.step, {}) is None:
        return None
    if a is None or b is None or s is None or s <= 0:
        return None
    return max(0, -(-(b - a) // s))


def extents(low, loops) -> list:
    """The trip counts of `loops` as launch-IR expressions over the sizes (`low`: the
    kernel's ScalarLowering), for a program that runs at every size."""
    from ..launch.scalar import trip_count_expr
    return [trip_count_expr(low.index(lp.start), low.index(lp.stop), low.index(lp.step), low.idx)
            for lp in loops]


@dataclass
class Nest:
    loops: list             # of cir.Loop, outermost first
    extents: list           # their trip counts
    prologue: tuple         # immutable scalar lets before the nest
    body: tuple             # what runs per iteration

    @property
    def total(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n


def _lets_then_loops(body, sizes, symbolic: bool, parallel_only: bool, keep_one: bool):
    """(leading immutable scalar lets, the perfectly nested loops after them with bounds
    known at launch, their trip counts, what runs inside); `keep_one`: a lone statement is
    not taken as a prologue."""
    prologue, rest = [], list(body)
    while rest and (len(rest) > 1 or not keep_one) and isinstance(rest[0], cir.Let) \
            and not rest[0].mutable and not rest[0].value.ty.shape:
        prologue.append(rest.pop(0))
    loops, counts, cur = [], [], tuple(rest)
    while len(cur) == 1 and isinstance(cur[0], cir.Loop) and (cur[0].parallel or not parallel_only):
        lp = cur[0]
        n = trip_count(lp, sizes, symbolic)
        if n is None or free_vars((lp.start, lp.stop, lp.step)) & {l.var for l in loops}:
            break
        loops.append(lp)
        counts.append(n)
        cur = lp.body
    return prologue, loops, counts, cur


def parallel_nest(body, sizes, symbolic: bool = False) -> Nest:
    """The parallel nest of `body` (no loops: the whole body, run once)."""
    prologue, loops, counts, cur = _lets_then_loops(body, sizes, symbolic, True, True)
    if not loops:
        return Nest([], [], (), tuple(body))
    return Nest(loops, counts, tuple(prologue), cur)


def without_tiles(kernel: cir.Kernel, sizes: dict):
    """(`kernel` with its tile values written as loops over block arrays, None), or (None,
    why they cannot be): passes/tile_loops.py, for the schedules that run such bodies."""
    from ..passes.tile_loops import TileRefusal, has_tile_values, tile_loops
    if not has_tile_values(kernel.body):
        return kernel, None
    try:
        return tile_loops(kernel, sizes), None
    except TileRefusal as err:
        return None, f"tile values: {err}"


def yield_nest(body, sizes, symbolic: bool = False) -> Nest:
    """The loops around a reduce kernel's `yield` (parallel or not), perfectly nested with
    bounds known at launch, and the scalar lets before them."""
    prologue, loops, counts, cur = _lets_then_loops(body, sizes, symbolic, False, False)
    return Nest(loops, counts, tuple(prologue), cur)
