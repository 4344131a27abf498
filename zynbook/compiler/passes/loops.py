"""Analyses of loop nests that schedules (and the renderers of the older form) ask: trip
counts, which names a body reads, assigns and declares, and whether a loop's iterations are
independent or only accumulate into outer variables (`classify_loop`)."""
from __future__ import annotations

from .. import cir


def static_value(e, sizes):
    try:
        v = cir.eval_expr_static(e, sizes)
    except (TypeError, KeyError, ZeroDivisionError):
        return None
    return v


def trip_count(loop: cir.Loop, sizes) -> int | None:
    a, b, s = (static_value(x, sizes) for x in (loop.start, loop.stop, loop.step))
    if a is None or b is None or s is None or s <= 0:
        return None
    return max(0, -(-(b - a) // s))


def free_vars(node) -> set:
    return {n.name for n in cir.walk(node) if isinstance(n, cir.Var)}


def assigned_vars(body) -> set:
    return {n.name for n in cir.walk(body) if isinstance(n, cir.Assign)}


def declared_vars(body) -> set:
    out = set()
    for n in cir.walk(body):
        if isinstance(n, cir.Let):
            out.add(n.name)
        elif isinstance(n, cir.Loop):
            out.add(n.var)
    return out


def stored_buffers(body) -> set:
    return {n.buffer for n in cir.walk(body) if isinstance(n, (cir.Store, cir.Atomic))}


def has_node(body, types) -> bool:
    return any(isinstance(n, types) for n in cir.walk(body))


def is_tile(e) -> bool:
    return isinstance(e, cir.Expr) and bool(e.ty.shape)


def has_tiles(body) -> bool:
    for n in cir.walk(body):
        if isinstance(n, cir.Expr) and n.ty.shape:
            return True
        if isinstance(n, cir.Store) and any(isinstance(i, cir.Span) for i in n.index):
            return True
    return False


REDUCE_COMBINE = {"+": "+", "*": "*"}


def accumulation(stmt: cir.Assign):
    """If `stmt` is `acc = acc OP e` / `acc = max(acc, e)`: (op, e); else None."""
    v = stmt.value
    name = stmt.name
    if isinstance(v, cir.Bin) and v.op in ("+", "*"):
        if isinstance(v.left, cir.Var) and v.left.name == name and name not in free_vars(v.right):
            return v.op, v.right
        if isinstance(v.right, cir.Var) and v.right.name == name and name not in free_vars(v.left):
            return v.op, v.left
    if isinstance(v, cir.Bin) and v.op == "-" and isinstance(v.left, cir.Var) and v.left.name == name \
            and name not in free_vars(v.right):
        return "+", cir.Unary("neg", v.right, v.right.ty)
    if isinstance(v, cir.Call) and v.fn in ("max", "min") and len(v.args) == 2:
        a, b = v.args
        if isinstance(a, cir.Var) and a.name == name and name not in free_vars(b):
            return v.fn, b
        if isinstance(b, cir.Var) and b.name == name and name not in free_vars(a):
            return v.fn, a
    if isinstance(v, cir.Bin) and v.op in ("and", "or"):
        if isinstance(v.left, cir.Var) and v.left.name == name and name not in free_vars(v.right):
            return v.op, v.right
    return None


def classify_loop(loop: cir.Loop, outer_mutable: set):
    """How a loop can be spread over a block's threads.

    "independent": iterations write disjoint elements (each store indexes with the loop
    variable as a whole index entry) and assign no outer variable.
    ("reduction", {acc: op}): iterations only combine values into outer accumulators.
    None: must run sequentially.
    """
    body = loop.body
    if has_node(body, (cir.Yield, cir.Barrier, cir.SharedAlloc)):
        return None
    inner_decl = declared_vars(body)
    assigns = [n for n in cir.walk(body) if isinstance(n, cir.Assign)]
    outer_assigns = [a for a in assigns if a.name not in inner_decl]
    stores = [n for n in cir.walk(body) if isinstance(n, cir.Store)]
    if not outer_assigns:
        if not stores and not has_node(body, cir.Atomic):
            return None
        for s in stores:
            if not any(isinstance(i, cir.Var) and i.name == loop.var for i in s.index):
                return None
        written = {s.buffer for s in stores}
        for ld in (n for n in cir.walk(body) if isinstance(n, cir.Load)):
            if ld.buffer in written and not any(ld.index == s.index for s in stores
                                                if s.buffer == ld.buffer):
                return None
        return "independent"
    if stores or has_node(body, cir.Atomic):
        return None
    accs: dict = {}
    for a in outer_assigns:
        if a.name not in outer_mutable:
            return None
        acc = accumulation(a)
        if acc is None:
            return None
        op = acc[0]
        if accs.setdefault(a.name, op) != op:
            return None
    # accumulators may not be read anywhere in the loop except in their own update
    for a in outer_assigns:
        pass
    reads = []
    for n in cir.walk(body):
        if isinstance(n, cir.Assign) and n.name in accs:
            reads.extend(free_vars(accumulation(n)[1]))
        elif isinstance(n, (cir.Let, cir.Store, cir.If, cir.Loop)):
            pass
    if set(reads) & set(accs):
        return None
    # reading an accumulator in a condition or a let also breaks the reduction
    for n in cir.walk(body):
        if isinstance(n, cir.Let) and free_vars(n.value) & set(accs):
            return None
        if isinstance(n, cir.If) and free_vars(n.cond) & set(accs):
            return None
        if isinstance(n, cir.Loop) and (free_vars((n.start, n.stop, n.step)) & set(accs)):
            return None
    return ("reduction", accs)
