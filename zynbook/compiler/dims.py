"""Solve a kernel's named dimensions against the shapes of its inputs.

Every input axis has a size name (`A_d1`); lowering ties those names to loop bounds
(`A_d1 = K` because `A[i, k]` with `k in 0..K`). Solving unifies the names, takes values
from the real shapes and from sizes the program defines, and reports a disagreement
before any data moves, pointing at both places that disagree. With shapes only partly
known (checking a program before its inputs are bound) it refuses what is already wrong.
"""
from __future__ import annotations

import difflib
import re

from ..errors import Span, ZynMLNameError, ZynMLShapeError
from . import cir
from .lower import LoweredKernel


_FAR = Span(10**9, 0)


class _Classes:
    """Union-find over size names; each class remembers where it was tied together."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _try_eval(e, values):
    try:
        return cir.eval_expr_static(e, values)
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def _runs_empty(loops, values) -> bool:
    """Whether one of the loops (start, stop) runs no iteration at these sizes."""
    for start, stop in loops:
        a, b = _try_eval(start, values), _try_eval(stop, values)
        if a is not None and b is not None and b <= a:
            return True
    return False


def _reads(expr, names) -> bool:
    """Whether size expression `expr` reads one of `names`."""
    return any(isinstance(v, cir.Var) and v.name in names for v in cir.walk(expr))


def short_host_bounds(lowered: LoweredKernel, sizes: dict, names) -> list:
    """(constraint, the names of `names` it reads, positions covered, the axis's size) of
    each loop of `lowered` whose bound reads one of the host sizes `names` and, at a launch's
    solved `sizes`, covers fewer positions than the axis its variable indexes directly (not
    under an `if`). Legal (a bound the host gives is a bound, see `solve`); a notebook says
    so where the int came from Python, unseen in the cell."""
    short = []
    for c in lowered.constraints:
        if c.loop and not c.guarded and not c.broadcast and _reads(c.right, names):
            covered, size = _try_eval(c.right, sizes), sizes.get(c.left)
            if covered is not None and size is not None and covered < size:
                read = [n for n in names if _reads(c.right, (n,))]
                short.append((c, read, covered, size))
    return short


def solve(lowered: LoweredKernel, shapes: dict, given: dict, partial: bool = False,
          host_names=()) -> dict:
    """Sizes for every name in lowered.kernel.dims. `shapes`: buffer name -> shape (or None
    when unknown); `given`: sizes the program defines. With partial=True unknown sizes are
    left out instead of being an error. A loop bound over a size the host gives (in `given`,
    or in `host_names` when its value is not known yet) is a bound checked against the axes
    its loop indexes, never an equation: only free size names are unified with shapes."""
    host = set(given) | set(host_names)
    kernel = lowered.kernel
    values: dict = {}
    origin: dict = {}            # name -> (value, span or None, description)
    for name, value in given.items():
        values[name] = int(value)
        origin[name] = (int(value), None, f"`{name}` = {value} in the program")
    for buf, axes in lowered.placeholders.items():
        shape = shapes.get(buf)
        if shape is None:
            continue
        label = lowered.labels[buf]
        if len(shape) != len(axes):
            raise ZynMLShapeError(f"`{label}` has {len(shape)} axes; the kernel was built for "
                                  f"{len(axes)}")
        for k, (axis, size) in enumerate(zip(axes, shape)):
            values[axis] = int(size)
            origin[axis] = (int(size), None, f"`{label}` is {list(shape)}")

    classes = _Classes()
    spans: dict = {}             # class member -> (span, what) that tied it
    pending = []
    host_bounds = []             # loops whose bound the host gives: bounds, not equations
    broadcasts = []              # axes combined elementwise: equal, or one of them 1
    for c in lowered.constraints:
        if c.broadcast:
            broadcasts.append(c)
            continue
        # a loop of a constant or host bound indexing an axis under an `if` (`for t in 0..64`
        # with `if t < n: a[t] = x[blk, t]`) ties nothing and is not held to the axis: the
        # `if` says which positions are read, and those are checked as they are read
        if c.loop and c.guarded and all(v.name in host for v in cir.walk(c.right)
                                        if isinstance(v, cir.Var)):
            continue
        if c.loop and _reads(c.right, host):
            host_bounds.append(c)
            continue
        if isinstance(c.right, cir.Var):
            classes.union(c.left, c.right.name)
            spans.setdefault(c.left, (c.span, c.what))
            spans.setdefault(c.right.name, (c.span, c.what))
        else:
            pending.append(c)

    # every class takes one value; two different ones are the mistake we report
    members: dict = {}
    for name in list(classes.parent):
        members.setdefault(classes.find(name), []).append(name)
    for root, names in members.items():
        known = [(n, values[n]) for n in names if n in values]
        if not known:
            continue
        first_name, first_value = known[0]
        for n, v in known[1:]:
            if v != first_value:
                raise _mismatch(lowered, names, values, origin, spans, first_name, n)
        for n in names:
            values.setdefault(n, first_value)

    defaults = dict(lowered.defaults)
    for _ in range(4):                       # defaults may depend on one another
        for c in pending:
            v = _try_eval(c.right, values)
            if v is None:
                if c.left in values:
                    _solve_one(c.right, values[c.left], values, members, classes)
                continue
            root_names = members.get(classes.find(c.left), [c.left])
            if c.left in values:
                if values[c.left] != v:
                    raise ZynMLShapeError(
                        f"{c.what}: the loop covers {v} positions but the axis has "
                        f"{values[c.left]}" if c.loop else
                        f"{c.what} differ: {v} and {values[c.left]}", c.span)
            else:
                for n in root_names:
                    values[n] = int(v)
        for c in broadcasts:
            _broadcast_one(c, values, origin, members, classes, lowered)
        for name, expr in list(defaults.items()):
            if name in values:
                defaults.pop(name)
                continue
            v = _try_eval(expr, values)
            if v is not None:
                for n in members.get(classes.find(name), [name]):
                    values.setdefault(n, int(v))
                defaults.pop(name)

    for c in pending:
        unknown = {v.name for v in cir.walk(c.right) if isinstance(v, cir.Var)} - set(values)
        if c.loop and c.left in values and len(unknown) == 1:
            raise ZynMLShapeError(f"{c.what}: no value of `{unknown.pop()}` makes the loop "
                                  f"cover the axis's {values[c.left]} positions", c.span)

    for c in host_bounds:
        covered, size = _try_eval(c.right, values), values.get(c.left)
        if covered is None or size is None or covered <= size:
            continue
        given_text = ", ".join(f"`{v.name}` = {given[v.name]}" for v in cir.walk(c.right)
                               if isinstance(v, cir.Var) and v.name in given)
        raise ZynMLShapeError(
            f"{c.what}: the loop covers {covered} positions ({given_text}, given: a bound, "
            f"not a size solved from the shapes) but the axis has only {size}", c.span)

    for weak in lowered.weak_checks:
        weak.refuse_outside(values)

    for arg in lowered.arg_loops:
        if _runs_empty([(arg.start, arg.stop)], values) and \
                not any(_runs_empty([loop], values) for loop in arg.outer):
            raise ZynMLShapeError(f"reduce({arg.op}) over nothing: {arg.what}, and {arg.op} "
                                  "of an empty sequence has no index (numpy refuses it too)",
                                  arg.span)

    for check in lowered.bound_checks:
        low, high = _try_eval(check.low, values), _try_eval(check.high, values)
        size = values.get(check.dim)
        if size is None or high is None or _runs_empty(check.loops, values):
            continue
        if high >= size or (low is not None and low < 0):
            bad = high if high >= size else low
            raise ZynMLShapeError(f"index {bad} is outside {check.what}, which has size {size}",
                                  check.span)

    if partial:
        return values
    missing = [n for n in kernel.dims if n not in values]
    if missing:
        raise _unknown_size(lowered, missing)
    return {n: values[n] for n in kernel.dims}


def _unknown_size(lowered, missing):
    """A name nothing defines. One that bounds no loop is most likely a typo (`m[i, jj]`),
    so it is reported first, as an unknown name; a loop bound is a size we could not infer."""
    bounds, loop_vars, shared = set(), [], set()
    for n in cir.walk(lowered.kernel.body):
        if isinstance(n, cir.Loop):
            loop_vars.append(n.var)
            for e in (n.start, n.stop, n.step):
                bounds |= {v.name for v in cir.walk(e) if isinstance(v, cir.Var)}
        elif isinstance(n, cir.SharedAlloc):     # `shared var t[cols]`: a size, not a typo
            for d in n.shape:
                shared |= {d} if isinstance(d, str) else \
                    {v.name for v in cir.walk(d) if isinstance(v, cir.Var)}
    bounds |= shared
    typos = [n for n in missing if n not in bounds and n in lowered.size_spans]
    if typos:
        name = min(typos, key=lambda n: (lowered.size_spans[n].line, lowered.size_spans[n].column))
        # (not a loop variable of the same name renamed apart, `i_2` for an `i` used past
        # its loop: the program never wrote that name)
        known = [v for v in loop_vars + list(lowered.labels.values())
                 if not re.fullmatch(re.escape(name) + r"_\d+", v)]
        # Python's True is `true`; no other name is taken for a literal (`scale`: `false`)
        close = [name.lower()] if name.lower() in ("true", "false") else \
            difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        return ZynMLNameError(f"unknown name `{name}`{hint}", lowered.size_spans[name], unknown=name)
    name = min(missing, key=lambda n: (lowered.size_spans.get(n, _FAR).line,
                                       lowered.size_spans.get(n, _FAR).column))
    why, alternative = _why_untied(lowered, name) or (
        ("it sizes a shared array and " if name in shared else "it ")
        + "bounds no loop that indexes an input", "")
    return ZynMLNameError(
        f"cannot tell the size `{name}`: {why}; {alternative}define it before the compute "
        f"block (let {name} = ...)", lowered.size_spans.get(name))


def _why_untied(lowered, name):
    """Why the loops that `name` bounds tie it to no axis, where they read an input: an
    index computed from the loop's variable (`x[i + 10]`, `x[2 * i]`) ties no size, and
    a loop that indexes an input directly ties one only from 0 by steps of 1 (or as a
    stencil whose reads reach back to 0). None where no such loop reads an input."""
    inputs = {b.name for b in lowered.kernel.inputs}
    for loop in cir.walk(lowered.kernel.body):
        if not isinstance(loop, cir.Loop) or name not in {
                v.name for v in cir.walk(loop.stop) if isinstance(v, cir.Var)}:
            continue
        loads = [n for n in cir.walk(loop.body) if isinstance(n, cir.Load) and n.buffer in inputs]
        var = loop.var
        direct = next((load for load in loads for it in load.index
                       if isinstance(it, cir.Var) and it.name == var), None)
        from_0_by_1 = cir.format_expr(loop.start) == "0" and cir.format_expr(loop.step) == "1"
        if direct is not None and from_0_by_1:
            continue        # (something else keeps it from a size: say nothing wrong)
        if direct is not None:
            return (f"its loop indexes `{direct.buffer}` with `{var}` but runs from "
                    f"{cir.format_expr(loop.start)} by steps of {cir.format_expr(loop.step)}, "
                    f"and only a loop from 0 by steps of 1 (or a stencil whose reads reach "
                    f"back to 0) ties a size", "")
        for load in loads:
            if any(isinstance(v, cir.Var) and v.name == var for v in cir.walk(load.index)):
                return (f"its loop reads `{load.buffer}` only as `{cir.format_expr(load)}`, "
                        f"and an index computed from `{var}` ties no size",
                        f"index `{load.buffer}` with `{var}` alone in the loop, or ")
    return None


def _mismatch(lowered, names, values, origin, spans, a, b):
    def where(n):
        for m in [n] + names:
            if m in spans:
                return spans[m]
        return (None, "")

    def said(n):
        return origin.get(n, (values.get(n), None, ""))[2]

    span_a, what_a = where(a)
    span_b, what_b = where(b)
    if (span_a, what_a) == (span_b, what_b):
        # one place, two values: say where each value comes from, not the place twice
        size_name = next((n for n in names if not _is_placeholder(n, lowered)), None)
        label = f"`{size_name}`" if size_name else "this size"
        return ZynMLShapeError(f"shape mismatch at {what_b}: {label} is {values[a]} "
                               f"({said(a)}) and {values[b]} ({said(b)})", span_b)
    # report at the later of the two places, with a note at the earlier one
    if span_a is not None and span_b is not None and \
            (span_b.line, span_b.column) < (span_a.line, span_a.column):
        a, b = b, a
        span_a, what_a, span_b, what_b = span_b, what_b, span_a, what_a
    size_name = next((n for n in names if not _is_placeholder(n, lowered)), None)
    label = f"`{size_name}`" if size_name else "this size"
    msg = (f"shape mismatch: {label} is {values[a]} for {what_a} ({said(a)}) but {values[b]} "
           f"for {what_b} ({said(b)})")
    notes = (("the other side is here", span_a),) if span_a is not None else ()
    return ZynMLShapeError(msg, span_b, notes=notes)


def _size_said(lowered, name, value, origin) -> str:
    """`name` is `value` (where it comes from), an input's axis said by its size alone: its
    size name (`x_d1`) is none the program wrote."""
    said = origin.get(name, (value, None, ""))[2]
    who = "this size" if _is_placeholder(name, lowered) else f"`{name}`"
    return f"{who} is {value}" + (f" ({said})" if said else "")


def _broadcast_one(c, values, origin, members, classes, lowered):
    """Axes combined elementwise (`c.left` and `c.right`): where both sizes are known they
    must be equal or one of them 1, as numpy broadcasts; where only one is, the other is
    taken to be equal to it (the tie that infers a size the loops leave open). A tile's axis
    stored into a slice (`c.broadcast` "store") is as long as the slice (`c.right`), or 1."""
    left, right = values.get(c.left), _try_eval(c.right, values)
    if left is not None and right is not None:
        if c.broadcast == "store" and left not in (right, 1):
            raise ZynMLShapeError(f"{c.what} differ: {right} and {left} "
                                  f"({_size_said(lowered, c.left, left, origin)}; a tile is "
                                  "stored into a slice as long as it, or of 1)", c.span)
        if left != right and 1 not in (left, right):
            other = _size_said(lowered, c.right.name, right, origin) \
                if isinstance(c.right, cir.Var) else f"the other is {right}"
            raise ZynMLShapeError(
                f"shape mismatch at {c.what}: {_size_said(lowered, c.left, left, origin)} and "
                f"{other}; they broadcast only when equal or when one of them is 1", c.span)
    elif right is not None:
        for n in members.get(classes.find(c.left), [c.left]):
            values[n] = int(right)
    elif left is not None and isinstance(c.right, cir.Var):
        for n in members.get(classes.find(c.right.name), [c.right.name]):
            values.setdefault(n, left)


def _is_placeholder(name, lowered) -> bool:
    return any(name in axes for axes in lowered.placeholders.values())


def _solve_one(expr, target: int, values: dict, members: dict, classes: _Classes):
    """Bind the one unknown size in `expr` so that it evaluates to `target`, choosing the
    smallest such value (`d in 0..head_dim/2` indexing an axis of 8 gives head_dim = 16)."""
    unknown = {n.name for n in cir.walk(expr) if isinstance(n, cir.Var)} - set(values)
    if len(unknown) != 1:
        return
    name = unknown.pop()
    for guess in range(0, 4 * target + 130):
        if _try_eval(expr, {**values, name: guess}) == target:
            for n in members.get(classes.find(name), [name]):
                values.setdefault(n, guess)
            return
