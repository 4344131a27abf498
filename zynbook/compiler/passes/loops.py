"""Analyses of loop nests that schedules (and the renderers of the older form) ask: trip
counts, which names a body reads, assigns and declares, and whether a loop's iterations are
independent or only accumulate into outer variables (`classify_loop`)."""
from __future__ import annotations

from .. import cir


def static_value(e, sizes):
    try:
        return cir.eval_expr_static(e, sizes)
    except (TypeError, KeyError, ZeroDivisionError):
        return None


def trip_count(loop: cir.Loop, sizes, symbolic: bool = False) -> int | None:
    """The iterations of `loop` at these sizes (None: not known at launch). `symbolic`: the
    count must be an expression over the sizes for every launch, so the step is a number."""
    a, b, s = (static_value(x, sizes) for x in (loop.start, loop.stop, loop.step))
    if symbolic and static_value(loop.step, {}) is None:
        return None
    if a is None or b is None or s is None or s <= 0:
        return None
    return max(0, -(-(b - a) // s))


def counts_from_zero(loops) -> bool:
    """Whether every loop counts 0, 1, 2, ... (its variable is an index of its own)."""
    return all(isinstance(lp.start, cir.Const) and lp.start.value == 0 and
               isinstance(lp.step, cir.Const) and lp.step.value == 1 for lp in loops)


def free_vars(node) -> set:
    return {n.name for n in cir.walk(node) if isinstance(n, cir.Var)}


def names_of(body, kind) -> set:
    """The names of the `kind` statements (lets, assignments, shared arrays) in `body`."""
    return {n.name for n in cir.walk_stmts(body) if isinstance(n, kind)}


def assigned_vars(body) -> set:
    return {n.name for n in cir.walk(body) if isinstance(n, cir.Assign)}


def declared_vars(body) -> set:
    return {n.var if isinstance(n, cir.Loop) else n.name for n in cir.walk(body)
            if isinstance(n, (cir.Let, cir.Loop))}


def stored_buffers(body) -> set:
    return {n.buffer for n in cir.walk(body) if isinstance(n, (cir.Store, cir.Atomic))}


def has_node(body, types) -> bool:
    return any(isinstance(n, types) for n in cir.walk(body))


def has_tiles(body) -> bool:
    return any((isinstance(n, cir.Expr) and n.ty.shape) or
               (isinstance(n, cir.Store) and any(isinstance(i, cir.Span) for i in n.index))
               for n in cir.walk(body))


def identity_value(op: str, dtype: str):
    """The value a reduction by `op` starts from in `dtype` (max starts at the lowest)."""
    if op in ("+", "or"):
        return 0
    if op in ("*", "and"):
        return 1
    low = op in ("max", "argmax")
    if dtype in cir.FLOAT_DTYPES:
        return float("-inf") if low else float("inf")
    if dtype == "bool":
        return not low
    bits = int(dtype[1:])
    if dtype.startswith("u"):
        return 0 if low else 2 ** bits - 1
    return -2 ** (bits - 1) if low else 2 ** (bits - 1) - 1


def accumulation(stmt: cir.Assign):
    """If `stmt` is `acc = acc OP e` / `acc = max(acc, e)`: (op, e); else None."""
    v, name = stmt.value, stmt.name

    def rest(own, other):
        """`other`, where `own` is the accumulator and `other` does not read it."""
        mine = isinstance(own, cir.Var) and own.name == name and name not in free_vars(other)
        return other if mine else None
    if isinstance(v, cir.Bin) and v.op in ("+", "*", "-", "and", "or"):
        e = rest(v.left, v.right)
        if e is not None:
            return ("+", cir.Unary("neg", e, e.ty)) if v.op == "-" else (v.op, e)
        e = rest(v.right, v.left) if v.op in ("+", "*") else None
        if e is not None:
            return v.op, e
    if isinstance(v, cir.Call) and v.fn in ("max", "min") and len(v.args) == 2:
        a, b = v.args
        e = rest(a, b)
        e = rest(b, a) if e is None else e
        if e is not None:
            return v.fn, e
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
        written = {s.buffer for s in stores}
        # per buffer, one axis that every store indexes with the loop variable: out[i, k]
        # and out[k, i] over k each do, but iteration i writes what iteration k does
        for b in written:
            idx = [s.index for s in stores if s.buffer == b]
            if len({len(i) for i in idx}) != 1 or not any(
                    all(isinstance(i[a], cir.Var) and i[a].name == loop.var for i in idx)
                    for a in range(len(idx[0]))):
                return None
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
    reads = set()
    for n in cir.walk(body):
        if isinstance(n, cir.Assign) and n.name in accs:
            reads |= free_vars(accumulation(n)[1])
    if reads & set(accs):
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
