"""Block-wide all-reductions built from what a target has: the dialect's own (a block
collective), warp collectives and one shared slot per warp, or a tree in shared memory.
Every thread of the block must reach them; every thread ends with the block's result in
the local it passed."""
from __future__ import annotations

from ..launch import ir
from ..launch.scalar import NotScalar, lit
from ..passes.loops import identity_value
from ..targets import Target


def identity(op: str, dtype: str) -> ir.Lit:
    """The value a reduction by `op` starts from."""
    return lit(identity_value(op, dtype), dtype)


def combine_expr(op: str, a: ir.Expr, b: ir.Expr, dtype: str) -> ir.Expr:
    """`a op b` for a reduction operator (max and min propagate NaN, as the reference)."""
    if op in ("max", "min"):
        return ir.Math(op, (a, b), dtype)
    if op in ("and", "or"):
        return ir.Bin(op, a, b, "bool")
    if dtype == "bool":         # sums and products of bools are or and and
        return ir.Bin("or" if op == "+" else "and", a, b, "bool")
    return ir.Bin(op, a, b, dtype)


def warp_collectives(target: Target, op: str, threads: int) -> bool:
    """Whether `op` over a block of `threads` can be two rounds of warp collectives."""
    w = target.warp
    return (target.collectives and w > 1 and op in ir.COLLECTIVE_OPS and threads % w == 0
            and threads // w <= w)


def block_allreduce(target: Target, op: str, name: str, dtype: str, threads: int,
                    tag: str = "") -> list:
    """Statements that leave the block's reduction of local `name` in every thread's `name`."""
    if threads == 1:
        return []
    acc = ir.Ref(name, dtype)
    if dtype in target.block_collectives and op in ("+", "max", "min"):
        return [ir.Set(name, ir.Collective(op, acc, "block", dtype))]
    if warp_collectives(target, op, threads):
        out = [ir.Set(name, ir.Collective(op, acc, "warp", dtype))]
        nw = threads // target.warp
        if nw == 1:
            return out
        lane, wid = ir.Thread("lane"), ir.Thread("warp")
        red = f"_red{tag}"
        return out + [
            ir.Array(red, dtype, nw, "shared"),
            ir.If(ir.Bin("==", lane, lit(0, "i32"), "bool"), (ir.Store(red, wid, acc),)),
            ir.Barrier(),
            ir.Set(name, identity(op, dtype)),
            ir.If(ir.Bin("<", lane, lit(nw, "i32"), "bool"), (ir.Set(name, ir.Load(red, lane, dtype)),)),
            ir.Set(name, ir.Collective(op, acc, "warp", dtype))]
    th = ir.Thread("thread")
    tree = f"_tree{tag}"

    def step(th, other):
        return [ir.Store(tree, th, combine_expr(op, ir.Load(tree, th, dtype), ir.Load(tree, other, dtype),
                                                dtype))]
    return [ir.Array(tree, dtype, threads, "shared"), ir.Store(tree, th, acc), ir.Barrier(),
            *tree_rounds(threads, step), ir.Set(name, ir.Load(tree, lit(0, "i32"), dtype))]


def partials(low, accs: dict, new, line: int = 0) -> tuple:
    """(declarations, parts) of a per-thread partial for each accumulator of `accs` (CIR
    name -> op) of a loop split over threads, starting at the op's identity; a part is
    (partial, op, dtype, the accumulator's identifier); `new(stem)` names a partial."""
    decls, parts = [], {}
    for acc, op in accs.items():
        ident, dt = low.lookup(acc)
        if ident in low.wide:       # (its two words are combined by no collective)
            raise NotScalar(f"the 64-bit sum `{acc}` in two 32-bit words, split over threads")
        part = new("part")
        decls.append(ir.Decl(part, dt, identity(op, dt), True, line))
        parts[acc] = (part, op, dt, ident)
    return decls, parts


def fold_partials(target: Target, parts: dict, threads: int, warp: bool = False,
                  line: int = 0) -> list:
    """Each partial of `parts` reduced over the block (`warp`: over the warp), then combined
    into its accumulator (so the value before the loop counts once)."""
    out = []
    for part, op, dt, ident in parts.values():
        if warp:
            out.append(ir.Set(part, ir.Collective(op, ir.Ref(part, dt), "warp", dt)))
        else:
            out += block_allreduce(target, op, part, dt, threads, tag=part)
        out.append(ir.Set(ident, combine_expr(op, ir.Ref(ident, dt), ir.Ref(part, dt), dt), line))
    return out


def tree_rounds(threads: int, step) -> list:
    """The rounds of a tree over `threads` values in shared memory: in each, with s halving
    from the largest power of two below `threads`, thread t < s whose partner t + s exists
    runs `step(t, t + s)`; a barrier ends each round."""
    th = ir.Thread("thread")
    s = 1
    while s < threads:
        s *= 2
    out = []
    while s > 1:
        s //= 2
        other = ir.Bin("+", th, lit(s, "i32"), "i32")
        cond = ir.Bin("and", ir.Bin("<", th, lit(s, "i32"), "bool"),
                      ir.Bin("<", other, lit(threads, "i32"), "bool"), "bool")
        out += [ir.If(cond, tuple(step(th, other))), ir.Barrier()]
    return out
