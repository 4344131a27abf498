"""The loop nest a schedule distributes: the outermost perfectly nested parallel loops of a
body with bounds known at launch, flattened into one iteration count; and what every schedule
that flattens a nest writes alike: its index dtype, a thread's position, the loop variables
of a flat iteration (`decompose`) and the loop spreading the iterations over threads
(`spread`)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from .. import cir
from ..launch import ir
from ..launch.scalar import index_dtype, lit
from ..passes.loops import classify_loop, free_vars, trip_count


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
        return prod(self.extents)


def _lets_then_loops(body, sizes, symbolic: bool, parallel_only: bool, keep_one: bool):
    """(leading immutable scalar lets, the perfectly nested loops after them with bounds
    known at launch, their trip counts, what runs inside); `keep_one`: a lone statement is
    not taken as a prologue."""
    prologue, rest = [], list(body)
    while rest and (len(rest) > 1 or not keep_one) and isinstance(rest[0], cir.Let) \
            and not rest[0].mutable and not rest[0].value.ty.shape:
        prologue.append(rest.pop(0))
    loops, counts, cur = [], [], tuple(rest)
    while True:
        if loops and not parallel_only:
            cur = _sunk(cur)
        if not (len(cur) == 1 and isinstance(cur[0], cir.Loop) and (cur[0].parallel or not parallel_only)):
            break
        lp = cur[0]
        n = trip_count(lp, sizes, symbolic)
        if n is None or free_vars((lp.start, lp.stop, lp.step)) & {l.var for l in loops}:
            break
        loops.append(lp)
        counts.append(n)
        cur = lp.body
    return prologue, loops, counts, cur


def _sunk(stmts: tuple) -> tuple:
    """`stmts` as one loop where they are scalar locals computed before one loop (lets,
    vars and their assignments), or an `if` without `else` around such statements: those
    moved inside the loop (run per iteration, computing the same values), so that a reduce
    kernel's nest reaches the loops around its yield (`for r: let base = x[r, 0]; for c:
    yield x[r, c] - base`). Anything else is returned as it is."""
    if len(stmts) == 1 and isinstance(stmts[0], cir.If) and not stmts[0].orelse:
        inner = _sunk(tuple(stmts[0].then))
        if len(inner) == 1 and isinstance(inner[0], cir.Loop):
            lp = inner[0]
            return (replace(lp, body=(replace(stmts[0], then=tuple(lp.body)),)),)
        return stmts
    *prefix, last = stmts or (None,)
    if not prefix or not isinstance(last, cir.Loop):
        return stmts
    nodes = list(cir.walk(tuple(prefix)))
    local = {n.name for n in nodes if isinstance(n, cir.Let)}
    if any(isinstance(n, (cir.Loop, cir.Store, cir.Yield, cir.Atomic, cir.Barrier, cir.SharedAlloc))
           or isinstance(n, cir.Let) and n.value.ty.shape
           or isinstance(n, cir.Assign) and n.name not in local for n in nodes) or \
            free_vars((last.start, last.stop, last.step)) & local or \
            any(isinstance(n, cir.Assign) and n.name in local for n in cir.walk(last.body)):
        return stmts        # (a var the loop carries from one iteration to the next stays)
    return (replace(last, body=tuple(prefix) + tuple(last.body)),)


def parallel_nest(body, sizes, symbolic: bool = False) -> Nest:
    """The parallel nest of `body` (no loops: the whole body, run once)."""
    prologue, loops, counts, cur = _lets_then_loops(body, sizes, symbolic, True, True)
    if not loops:
        return Nest([], [], (), tuple(body))
    return Nest(loops, counts, tuple(prologue), cur)


def shared_loops(body):
    """The loops of `body` the block schedule splits over a block's threads: parallel
    ones and those that only write their own elements or only accumulate."""
    mutable = {n.name for n in cir.walk(body) if isinstance(n, cir.Let) and n.mutable}
    return [n for n in cir.walk(body) if isinstance(n, cir.Loop)
            and (n.parallel or classify_loop(n, mutable) is not None)]


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
    bounds known at launch (lets and an `if` between two loops moved into the inner one),
    and the scalar lets before them."""
    prologue, loops, counts, cur = _lets_then_loops(body, sizes, symbolic, False, False)
    return Nest(loops, counts, tuple(prologue), cur)


def flat_index_dtype(kernel: cir.Kernel, sizes: dict, symbolic: bool, total: int) -> str:
    """The index dtype of a program that flattens `total` iterations: i32 for every size
    set (a launch reaching 2^31 is refused by the device), else wide enough for both the
    buffers and `total`."""
    if symbolic:
        return "i32"
    return "i64" if total >= 2 ** 31 - 1 else index_dtype(kernel, sizes)


def thread(axis: str, idx: str) -> ir.Expr:
    """Where a thread runs (`ir.Thread`), as a value of the index dtype."""
    e = ir.Thread(axis)
    return e if idx == "i32" else ir.Cast(e, idx)


def first_thread(axis: str = "thread") -> ir.Expr:
    """True in the first thread of the block (`axis` "lane": of the warp)."""
    return ir.Bin("==", ir.Thread(axis), lit(0, "i32"), "bool")


def loop_value(low, lp: cir.Loop, t: ir.Expr, idx: str) -> ir.Expr:
    """The value of `lp`'s variable in iteration `t` (start + t * step)."""
    start, step = low.index(lp.start), low.index(lp.step)
    if not (isinstance(step, ir.Lit) and step.value == 1):
        t = ir.Bin("*", t, step, idx)
    if not (isinstance(start, ir.Lit) and start.value == 0):
        t = ir.Bin("+", start, t, idx)
    return t


def decompose(low, loops, exts, flat: ir.Expr, idx: str, quotient=lambda k: f"_r{k}") -> list:
    """Declarations binding each variable of `loops` (trip counts `exts`, numbers or
    expressions) from the flat iteration `flat`, the innermost fastest; `quotient(k)` names
    the local holding what is left after loop k."""
    out, rem = [], flat
    for k in range(len(loops) - 1, -1, -1):
        lp, ext = loops[k], exts[k]
        ext = lit(ext, idx) if isinstance(ext, int) else ext
        part = ir.Bin("%", rem, ext, idx) if k > 0 else rem
        out.append(ir.Decl(low.bind(lp.var, idx), idx, loop_value(low, lp, part, idx), False,
                           lp.line))
        if k > 0:
            name = quotient(k)
            out.append(ir.Decl(name, idx, ir.Bin("/", rem, ext, idx), False, lp.line))
            rem = ir.Ref(name, idx)
    return out


def spread(g: str, total, threads: int, chunk: int, body, idx: str, line: int = 0) -> ir.For:
    """`for g` over this thread's part of 0..total: a contiguous `chunk` per block (one
    thread a block), else a grid stride (neighbouring threads, neighbouring iterations)."""
    total = lit(total, idx) if isinstance(total, int) else total
    if chunk:
        start = ir.Bin("*", thread("block", idx), lit(chunk, idx), idx)
        stop = ir.Math("min", (ir.Bin("+", start, lit(chunk, idx), idx), total), idx)
        return ir.For(g, start, stop, lit(1, idx), tuple(body), idx, line)
    start = ir.Bin("+", ir.Bin("*", thread("block", idx), lit(threads, idx), idx),
                   thread("thread", idx), idx)
    step = ir.Bin("*", thread("blocks", idx), lit(threads, idx), idx)
    return ir.For(g, start, total, step, tuple(body), idx, line)
