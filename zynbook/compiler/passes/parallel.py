"""Mark parallel loops: a loop whose iterations are independent, inside loops that are
parallel themselves, becomes `Loop(parallel=True)`; GPU backends map those to threads and
blocks and the reference executor to lanes.

Independent means: each iteration writes its own part of `out` (a store index uses the loop
variable) or only yields, and none assigns a variable declared outside it, writes a shared
array declared outside it or waits at a barrier over memory shared between iterations.
Loops under an `if` stay serial.
"""
from __future__ import annotations

from dataclasses import replace

from .. import affine, cir
from .loops import names_of
from .tiles import substitute


def mark_parallel(kernel: cir.Kernel) -> cir.Kernel:
    shared = names_of(kernel.body, cir.SharedAlloc)
    return replace(kernel, body=_mark(kernel.body, True, shared))


def _mark(body, ancestors_parallel: bool, shared: set) -> tuple:
    out = []
    for s in body:
        if isinstance(s, cir.Loop):
            par = ancestors_parallel and independent(s, shared)
            out.append(replace(s, body=_mark(s.body, par, shared), parallel=par))
        elif isinstance(s, cir.If):
            out.append(replace(s, then=_mark(s.then, False, shared),
                               orelse=_mark(s.orelse, False, shared)))
        else:
            out.append(s)
    return tuple(out)


def independent(loop: cir.Loop, shared: set) -> bool:
    """Iterations of `loop` are independent: each writes its own part of out (or yields),
    and none changes a variable declared outside it. `shared`: the kernel's shared arrays."""
    declared = names_of(loop.body, cir.Let)
    own_shared = names_of(loop.body, cir.SharedAlloc)
    stores, yields = [], []
    for n in cir.walk(loop.body):
        if isinstance(n, cir.Assign) and n.name not in declared:
            return False
        if isinstance(n, cir.Store):
            if n.buffer == "out":
                stores.append(n)
            elif n.buffer in shared and n.buffer not in own_shared:
                return False
        if isinstance(n, cir.Yield):
            yields.append(n)
        if isinstance(n, cir.Barrier) and not own_shared:
            return False        # a barrier over memory shared between iterations
    if yields:
        return not stores
    # an index read through a let (`let k = n - 1 - i; out[k] = ...`) is the let's value
    lets = {}
    for n in cir.walk(loop.body):
        if isinstance(n, cir.Let) and not n.mutable and not n.value.ty.shape:
            lets[n.name] = substitute(n.value, lets)
    inner = _inner(loop, lets)
    if not stores or not all(st.index for st in stores):
        return False
    # one axis along which every store's positions are apart from another iteration's, each
    # store's from every store's (out[i, k] and out[k, i] over k are each apart along their
    # own axis of i, but iteration i writes what iteration k does: they raced on the GPUs)
    ranks = {len(st.index) for st in stores}
    if len(ranks) != 1:
        return False
    items = [[substitute(i, lets) for i in st.index] for st in stores]
    sizes = _positive_sizes(loop)
    positive = [sizes.get(id(st), set()) for st in stores]
    return any(_axis_apart([it[a] for it in items], loop, inner, positive)
               for a in range(ranks.pop()))


def _positive_sizes(loop: cir.Loop) -> dict:
    """{id of each store into out in `loop`: the names at least 1 wherever it runs}: the
    stops of the loops around it, `loop` included, that start at a constant 0 or more."""
    def stop_of(lp):
        start = lp.start
        ok = isinstance(lp.stop, cir.Var) and isinstance(start, cir.Const) and \
            isinstance(start.value, int) and start.value >= 0
        return {lp.stop.name} if ok else set()

    out = {}

    def visit(body, names):
        for n in body:
            if isinstance(n, cir.Store) and n.buffer == "out":
                out[id(n)] = names
            elif isinstance(n, cir.Loop):
                visit(n.body, names | stop_of(n))
            elif isinstance(n, cir.If):
                visit(n.then, names)
                visit(n.orelse, names)
    visit(loop.body, stop_of(loop))
    return out


def _axis_apart(entries: list, loop: cir.Loop, inner, positive: list) -> bool:
    """Whether the index entries `entries` (one per store, of one axis) each use the loop
    variable as their own (`positive`: each store's sizes that are not 0) and, together,
    reach positions in one iteration apart from those they reach in any other."""
    if not all(_own(e.start if isinstance(e, cir.Span) else e, loop.var, names)
               for e, names in zip(entries, positive)):
        return False
    if len(entries) == 1:
        return _apart(entries[0], loop, inner)
    if len({cir.format_expr(e.start) + ":" + cir.format_expr(e.stop) if isinstance(e, cir.Span)
            else cir.format_expr(e) for e in entries}) == 1:
        return _apart(entries[0], loop, inner)
    bounds = [_iteration_bounds(e, loop, inner) for e in entries]
    if any(b is None for b in bounds):
        return False
    # the next iteration's positions all past this one's, or all before them
    return all(_positive_const(_psub(there[0], here[1])) for here, _ in bounds for _, there in bounds) \
        or all(_positive_const(_psub(here[0], there[1])) for here, _ in bounds for _, there in bounds)


def _inner(loop: cir.Loop, lets: dict):
    """({loop variable: (start, stop)}, {variable: step}, other names) of what varies inside
    one iteration of `loop`: the loops nested in it (None for a name two loops use with
    different ranges) and the names it declares."""
    ranges, steps = {}, {}
    for n in cir.walk(loop.body):
        if isinstance(n, cir.Loop):
            r = (substitute(n.start, lets), substitute(n.stop, lets))
            if n.var in ranges and ranges[n.var] != r:
                r = None
            ranges[n.var] = r
            steps[n.var] = substitute(n.step, lets)
    declared = {n.name for n in cir.walk(loop.body) if isinstance(n, (cir.Let, cir.Assign))}
    return ranges, steps, declared - set(lets)


def _apart(item, loop: cir.Loop, inner) -> bool:
    """Whether the positions that index entry `item` (an index or a slice) reaches in one
    iteration of `loop`, over every loop nested in it, are apart from another iteration's:
    `out[b * S + s]` for `s` in 0..S is, `out[j + k]` for `k` in 0..C is not (iterations of
    `j` write the same positions: with `+=` they raced on the GPUs, and the reference
    vectorised them as though apart)."""
    ranges, steps, declared = inner
    if isinstance(item, cir.Span) and isinstance(item.stop, cir.Var) and item.stop.name == "__end__":
        return False                    # out[i:]: to the end of the axis
    lo, hi = (item.start, cir.Bin("-", item.stop, cir.Const(1, _I32), _I32)) \
        if isinstance(item, cir.Span) else (item, item)
    varying = set(ranges) | declared
    if not isinstance(item, cir.Span) and not affine.uses_vars(item, varying):
        return True                     # one position per iteration, apart by `_own`
    if any(affine.uses_vars(e, declared) for e in (lo, hi)) or any(
            isinstance(n, (cir.Load, cir.Call, cir.Select)) and affine.uses_vars(n, varying)
            for e in (lo, hi) for n in cir.walk(e)):
        return False                    # a position read from data or a variable
    b = _bounds_over(lo, hi, ranges, loop, steps)
    if b is None:
        return False
    here, there = b
    # the next iteration starts past this one's end, or ends before its start: then every
    # iteration's positions are apart from every other's
    return _positive_const(_psub(there[0], here[1])) or \
        _positive_const(_psub(here[0], there[1]))


def _neighbour_bounds(lo, hi, used: dict, loop: cir.Loop, steps: dict):
    """((least, largest) of the positions of [lo, hi] in one iteration of `loop`, the same in
    the next iteration), as polynomials, over the nested loops' ranges `used`; or None."""
    var = loop.var
    nxt = {var: cir.Bin("+", cir.Var(var, _I32), loop.step, _I32)}
    here = _pbounds(lo, hi, used, steps)
    there = _pbounds(substitute(lo, nxt), substitute(hi, nxt),
                     {v: (substitute(r[0], nxt), substitute(r[1], nxt)) for v, r in used.items()},
                     {v: substitute(st, nxt) for v, st in steps.items()})
    return None if here is None or there is None else (here, there)


def _iteration_bounds(item, loop: cir.Loop, inner):
    """`_neighbour_bounds` of index entry `item` (an index or a slice), or None where the
    positions are read from data, a variable declared inside, or an open slice."""
    ranges, steps, declared = inner
    if isinstance(item, cir.Span) and isinstance(item.stop, cir.Var) and item.stop.name == "__end__":
        return None
    lo, hi = (item.start, cir.Bin("-", item.stop, cir.Const(1, _I32), _I32)) \
        if isinstance(item, cir.Span) else (item, item)
    varying = set(ranges) | declared
    if any(affine.uses_vars(e, declared) for e in (lo, hi)) or any(
            isinstance(n, (cir.Load, cir.Call, cir.Select)) and affine.uses_vars(n, varying)
            for e in (lo, hi) for n in cir.walk(e)):
        return None
    return _bounds_over(lo, hi, ranges, loop, steps)


def _bounds_over(lo, hi, ranges: dict, loop: cir.Loop, steps: dict):
    """`_neighbour_bounds` of positions [lo, hi] over the nested loops' `ranges`, a quotient
    or remainder of their variables taken as a name over the values it can take (or None)."""
    lo, hi, ranges, steps = _quotients(lo, hi, ranges, steps)
    if lo is None:
        return None
    used = {v: r for v, r in ranges.items() if affine.uses_vars(lo, {v}) or
            affine.uses_vars(hi, {v})}
    if any(r is None for r in used.values()):
        return None
    return _neighbour_bounds(lo, hi, used, loop, steps)


def _quotients(lo, hi, ranges: dict, steps: dict):
    """(lo, hi, ranges, steps) with each `e % c` and `e / c` over the nested loops' variables
    (c a positive constant, e at least 0) replaced by a name ranging over the values it takes
    (0..c for the remainder, 0 to the largest e / c for the quotient), so that `out[i + j % 3]`
    is seen to reach three positions an iteration (its atom `j % 3` was taken as one value,
    the same in every iteration: iterations that overlap ran as though apart); (None, ...)
    where one cannot be bounded."""
    names: dict = {}
    for n in [n for e in (lo, hi) for n in cir.walk(e)]:
        if not (isinstance(n, cir.Bin) and n.op in ("/", "%") and affine.uses_vars(n, ranges)):
            continue
        key = cir.format_expr(n)
        if key in names:
            continue
        c = n.right
        inner = {v: r for v, r in ranges.items() if affine.uses_vars(n.left, {v})}
        if not (isinstance(c, cir.Const) and isinstance(c.value, int) and c.value > 0) or \
                any(r is None for r in inner.values()) or any(
                    isinstance(m, cir.Bin) and m.op in ("/", "%") for m in cir.walk(n.left)):
            return None, None, ranges, steps
        b = _pbounds(n.left, n.left, inner, steps)
        if b is None or not _nonnegative(b[0]):
            return None, None, ranges, steps
        if n.op == "%":
            top = c.value
        elif set(b[1]) <= {()}:
            top = b[1].get((), 0) // c.value + 1
        else:
            return None, None, ranges, steps
        names[key] = f"__q{len(names)}"
        ranges = {**ranges, names[key]: (cir.Const(0, _I32), cir.Const(top, _I32))}
        steps = {**steps, names[key]: cir.Const(1, _I32)}
    return _swap(lo, names), _swap(hi, names), ranges, steps


def _swap(e, names: dict):
    """`e` with the subexpressions whose text `names` holds replaced by those names."""
    if not names:
        return e
    if cir.format_expr(e) in names:
        return cir.Var(names[cir.format_expr(e)], _I32)
    if isinstance(e, cir.Bin):
        return replace(e, left=_swap(e.left, names), right=_swap(e.right, names))
    if isinstance(e, (cir.Unary, cir.Cast)):
        return replace(e, operand=_swap(e.operand, names))
    return e


def _pbounds(lo, hi, ranges, steps):
    """(least of `lo`, largest of `hi`) over the nested loops' `ranges`, as polynomials;
    None where it cannot tell. Sizes and the variables of the loops around are taken as 0
    or more (a loop that runs has a bound past its start); a nested loop's variable must
    appear in a monomial at most once, beside names only, and its bounds must not read
    another nested loop's variable."""
    ends = {}
    for v, (start, stop) in ranges.items():
        if affine.uses_vars(start, ranges) or affine.uses_vars(stop, ranges):
            return None
        first, last = _poly(start), _poly(affine._last_value(start, stop, steps.get(v)))
        if first is None or last is None or not _nonnegative(first):
            return None
        ends[v] = (first, last)
    out = []
    for e, which in ((lo, 0), (hi, 1)):
        p = _poly(e)
        if p is None:
            return None
        total: dict = {}
        for mono, coef in p.items():
            mine = [x for x in mono if x in ranges]
            if not mine:
                total = _padd(total, {mono: coef})
                continue
            rest = tuple(x for x in mono if x not in ranges)
            if len(mine) > 1 or not all(x.isidentifier() for x in rest):
                return None
            first, last = ends[mine[0]]
            low = (coef > 0) == (which == 0)
            total = _padd(total, _pmul(first if low else last, {rest: coef}))
        out.append(total)
    return tuple(out)


def _nonnegative(p) -> bool:
    return all(v > 0 for v in p.values()) and all(x.isidentifier() for mono in p for x in mono)


def _pmul(a, b):
    out: dict = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


_I32 = cir.Ty("i32")


def _poly(e):
    """`e` as a polynomial {sorted tuple of atoms: integer coefficient}; atoms are names
    and the text of anything else (a load, a call, a quotient); None for a float."""
    if isinstance(e, cir.Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return {(): e.value} if e.value else {}
    if isinstance(e, cir.Var):
        return {(e.name,): 1}
    if isinstance(e, cir.Unary) and e.op == "neg":
        p = _poly(e.operand)
        return None if p is None else {k: -v for k, v in p.items()}
    if isinstance(e, cir.Bin) and e.op in ("+", "-", "*"):
        a, b = _poly(e.left), _poly(e.right)
        if a is None or b is None:
            return None
        if e.op == "*":
            return _pmul(a, b)
        return _padd(a, b if e.op == "+" else {k: -v for k, v in b.items()})
    if isinstance(e, cir.Cast) and e.ty.dtype not in cir.FLOAT_DTYPES:
        return _poly(e.operand)
    if not affine.cir_is_int(e):
        return None
    return {(cir.format_expr(e),): 1}


def _padd(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v}


def _psub(a, b):
    return _padd(a, {k: -v for k, v in b.items()})


def _positive_const(p) -> bool:
    return set(p) <= {()} and p.get((), 0) > 0


def _own(index, var: str, positive: set) -> bool:
    """Whether different values of `var` give different values of `index`: it uses `var`,
    not through `/`, `%` or a function (`out[i / 2]` is written by two iterations), and not
    so that it cancels (`i - i`), times a factor that cannot be 0 (a constant, or sizes in
    `positive`: `out[i * k]` with a host int k of 0 is written by every iteration)."""
    if not affine.uses_vars(index, {var}) or _hidden(index, var):
        return False
    form = affine.linear(index)
    if form is not None and not any(c != 0 and affine.uses_vars(e, {var})
                                    for c, e in form[0].values()):
        return False
    p = _poly(index)
    if p is None:
        return form is None
    factor = {tuple(x for x in mono if x != var): c for mono, c in p.items() if var in mono}
    # the loop variable's coefficient: one sign, every term a product of positive sizes
    return all(mono.count(var) == 1 for mono in p if var in mono) and bool(factor) and (
        all(c > 0 for c in factor.values()) or all(c < 0 for c in factor.values())) and \
        all(x in positive for mono in factor for x in mono)


def _hidden(e, var: str) -> bool:
    """`var` occurs in `e` under an operation that can map two of its values to one."""
    if isinstance(e, cir.Bin) and e.op in ("/", "%") or isinstance(e, (cir.Call, cir.Select,
                                                                       cir.Load)):
        return affine.uses_vars(e, {var})
    return any(_hidden(c, var) for c in _children(e))


def _children(e):
    if isinstance(e, cir.Bin):
        return (e.left, e.right)
    if isinstance(e, (cir.Unary, cir.Cast)):
        return (e.operand,)
    return ()
