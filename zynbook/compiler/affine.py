"""Affine arithmetic on CIR size expressions: simplify `S - 1 + 1` to `S`, compare forms,
and bound index expressions by the ranges of their loop variables."""
from __future__ import annotations

from . import cir

I32 = cir.Ty("i32")


def const(v: int) -> cir.Const:
    return cir.Const(int(v), I32)


def var(name: str) -> cir.Var:
    return cir.Var(name, I32)


def linear(e) -> tuple[dict, int] | None:
    """e as ({opaque term key: (coefficient, expr)}, constant), or None if not integer-affine."""
    if isinstance(e, cir.Const):
        if isinstance(e.value, bool) or not isinstance(e.value, int):
            return None
        return {}, e.value
    if isinstance(e, cir.Var):
        return {e.name: (1, e)}, 0
    if isinstance(e, cir.Unary) and e.op == "neg":
        inner = linear(e.operand)
        return None if inner is None else _scale(inner, -1)
    if isinstance(e, cir.Bin):
        if e.op in ("+", "-"):
            a, b = linear(e.left), linear(e.right)
            if a is None or b is None:
                return _opaque(e)
            return _add(a, b if e.op == "+" else _scale(b, -1))
        if e.op == "*":
            a, b = linear(e.left), linear(e.right)
            if a is not None and b is not None:
                if not a[0]:
                    return _scale(b, a[1])
                if not b[0]:
                    return _scale(a, b[1])
            return _opaque(e)
        if e.op in ("/", "%") and cir_is_int(e):
            return _opaque(e)
    if isinstance(e, (cir.Call,)) and cir_is_int(e):
        return _opaque(e)
    return None


def cir_is_int(e) -> bool:
    ty = getattr(e, "ty", None)
    return ty is not None and ty.dtype.startswith(("i", "u")) and not ty.shape


def _opaque(e):
    return {cir.format_expr(e): (1, e)}, 0


def _scale(form, k: int):
    terms, c = form
    return {key: (coef * k, ex) for key, (coef, ex) in terms.items() if coef * k}, c * k


def _add(a, b):
    terms = dict(a[0])
    for key, (coef, ex) in b[0].items():
        old = terms.get(key, (0, ex))[0]
        if old + coef:
            terms[key] = (old + coef, ex)
        else:
            terms.pop(key, None)
    return terms, a[1] + b[1]


def rebuild(form) -> cir.Expr:
    terms, c = form
    out = None
    for _key, (coef, ex) in sorted(terms.items()):
        term = ex if abs(coef) == 1 else cir.Bin("*", const(abs(coef)), ex, I32)
        if out is None:
            out = term if coef > 0 else cir.Unary("neg", term, I32)
        else:
            out = cir.Bin("+" if coef > 0 else "-", out, term, I32)
    if out is None:
        return const(c)
    if c:
        out = cir.Bin("+" if c > 0 else "-", out, const(abs(c)), I32)
    return out


def simplify(e) -> cir.Expr:
    form = linear(e)
    if form is None:
        return e
    return _into_extreme(form) or rebuild(form)


def _into_extreme(form):
    """A form `±min(a, b) + r` (or max) as `min(a + r, b + r)` (`-min(a, b) + r` as
    `max(r - a, r - b)`), r nonzero: exact on integers, and it makes the length of a slice
    `q:min(q + 32, n)` the bounded `min(32, n - q)` a tile's size can be read from."""
    terms, c = form
    ext = [(k, coef, ex) for k, (coef, ex) in terms.items()
           if abs(coef) == 1 and isinstance(ex, cir.Call) and ex.fn in ("min", "max")]
    if len(ext) != 1 or (len(terms) == 1 and not c):
        return None
    key, coef, ex = ext[0]
    rest = rebuild(({k: v for k, v in terms.items() if k != key}, c))
    fn = ex.fn if coef > 0 else {"min": "max", "max": "min"}[ex.fn]
    args = tuple(simplify(cir.Bin("+" if coef > 0 else "-", rest, a, I32) if coef < 0
                          else cir.Bin("+", a, rest, I32)) for a in ex.args)
    return cir.Call(fn, args, ex.ty)


def same(a, b) -> bool:
    fa, fb = linear(a), linear(b)
    if fa is None or fb is None:
        return cir.format_expr(a) == cir.format_expr(b)
    return ({k: v[0] for k, v in fa[0].items()}, fa[1]) == ({k: v[0] for k, v in fb[0].items()}, fb[1])


def add(a, b) -> cir.Expr:
    return simplify(cir.Bin("+", a, b, I32))


def sub(a, b) -> cir.Expr:
    return simplify(cir.Bin("-", a, b, I32))


def maximum(a, b) -> cir.Expr:
    """max of two size expressions, folded where their difference is a constant."""
    fa, fb = linear(a), linear(b)
    if fa is not None and fb is not None:
        if {k: v[0] for k, v in fa[0].items()} == {k: v[0] for k, v in fb[0].items()}:
            return a if fa[1] >= fb[1] else b
    return cir.Call("max", (a, b), I32)


def bounds(e, ranges: dict, steps: dict | None = None):
    """(low, high) inclusive CIR bounds of integer expression e, given loop ranges
    {var: (start, stop)} (stop exclusive) and, where a loop steps by more than 1, its step
    {var: step}; None where e is not affine in them (a quotient by a positive constant of an
    affine form counts: truncating division by it is monotone)."""
    form = linear(e)
    if form is None:
        return None
    terms, c = form
    lo_form, hi_form = ({}, c), ({}, c)
    for key, (coef, ex) in terms.items():
        if isinstance(ex, cir.Var) and ex.name in ranges:
            start, stop = ranges[ex.name]
            last = _last_value(start, stop, (steps or {}).get(ex.name))
            smallest, largest = (start, last) if coef > 0 else (last, start)
            lo_form = _add(lo_form, _scale(linear(smallest) or _opaque(smallest), coef))
            hi_form = _add(hi_form, _scale(linear(largest) or _opaque(largest), coef))
        elif uses_vars(ex, ranges):
            q = _quotient_bounds(ex, ranges, steps) or _remainder_bounds(ex, ranges, steps) \
                or _product_bounds(ex, ranges, steps)
            if q is None:
                return None
            smallest, largest = q if coef > 0 else (q[1], q[0])
            lo_form = _add(lo_form, _scale(linear(smallest) or _opaque(smallest), coef))
            hi_form = _add(hi_form, _scale(linear(largest) or _opaque(largest), coef))
        else:
            lo_form = _add(lo_form, ({key: (coef, ex)}, 0))
            hi_form = _add(hi_form, ({key: (coef, ex)}, 0))
    return rebuild(lo_form), rebuild(hi_form)


def _last_value(start, stop, step):
    """The last value a loop `start..stop step` takes: stop - 1 for a step of 1, else
    start + (stop - 1 - start) / step * step (for a constant step)."""
    last = sub(stop, const(1))
    if isinstance(step, cir.Const) and isinstance(step.value, int) and step.value > 1:
        span = _div(sub(last, start), step)
        return add(start, simplify(cir.Bin("*", span, step, I32)))
    return last


def _div(a, c: cir.Const) -> cir.Expr:
    """a / c as C divides (truncating), folded when a is a constant."""
    if isinstance(a, cir.Const) and isinstance(a.value, int):
        q = abs(a.value) // c.value
        return const(q if a.value >= 0 else -q)
    return cir.Bin("/", a, c, I32)


def _quotient_bounds(e, ranges, steps):
    """Bounds of `a / c` for an affine `a` and a constant c > 0 (C division is monotone)."""
    if not (isinstance(e, cir.Bin) and e.op == "/" and isinstance(e.right, cir.Const)
            and isinstance(e.right.value, int) and e.right.value > 0):
        return None
    inner = bounds(e.left, ranges, steps)
    if inner is None:
        return None
    return tuple(_div(b, e.right) for b in inner)


def _remainder_bounds(e, ranges, steps):
    """Bounds of `a % c` for an affine `a` and a constant c > 0: C's remainder takes the sign
    of `a` and is smaller than c in size, and never further from 0 than `a` is (`j % 4`
    with j in 0..n is at most min(n - 1, 3))."""
    if not (isinstance(e, cir.Bin) and e.op == "%" and cir_is_int(e)
            and isinstance(e.right, cir.Const) and isinstance(e.right.value, int)
            and e.right.value > 0):
        return None
    inner = bounds(e.left, ranges, steps)
    if inner is None:
        return None
    lo, hi = inner
    largest = const(e.right.value - 1)
    if isinstance(lo, cir.Const) and lo.value >= 0:
        # never negative: an empty range (hi < 0) keeps its empty bound
        return const(0), _extreme("min", hi, largest)
    return (_extreme("max", _extreme("min", lo, const(0)), const(-e.right.value + 1)),
            _extreme("min", _extreme("max", hi, const(0)), largest))


def _product_bounds(e, ranges, steps):
    """Bounds of `a * s` for an affine `a` and a factor `s` free of loop variables (a size:
    `b * S + s` flattens two loops): a product is monotone in `a` either way, so its bounds
    are the products of a's bounds, ordered by min and max where s's sign is not known."""
    if not (isinstance(e, cir.Bin) and e.op == "*" and cir_is_int(e)):
        return None
    inner, factor = e.left, e.right
    if uses_vars(factor, ranges):
        inner, factor = factor, inner
    if uses_vars(factor, ranges) or linear(factor) is None:
        return None
    b = bounds(inner, ranges, steps)
    if b is None:
        return None
    lo, hi = (simplify(cir.Bin("*", x, factor, I32)) for x in b)
    if same(lo, hi):
        return lo, hi
    form = linear(factor)
    if not form[0]:                     # a constant factor (linear() folds most of these)
        return (lo, hi) if form[1] >= 0 else (hi, lo)
    return _extreme("min", lo, hi), _extreme("max", lo, hi)


def _extreme(fn, a, b):
    """min or max of two size expressions, folded where both are constants (a host int
    may be negative, so a product of sizes is not known to be 0 or more)."""
    if isinstance(a, cir.Const) and isinstance(b, cir.Const):
        return const(min(a.value, b.value) if fn == "min" else max(a.value, b.value))
    return cir.Call(fn, (a, b), I32)


def uses_vars(e, names) -> bool:
    return any(isinstance(n, cir.Var) and n.name in names for n in cir.walk(e))
