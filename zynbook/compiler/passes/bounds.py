"""Which indices and divisors of a kernel are provably safe: the one analysis every renderer
asks before it decides to guard an access or a division (the guard itself is spelled by the
renderer, the failure reported through `compiler/errflag.py`).

An index is *provably in range* when, for every value the loop variables it uses can take
(`for i in a..b` gives `a <= i <= b - 1`), it lies in `0 .. extent - 1`. Two ways to know:

* with the sizes of the launch (the C-like renderers compile them in): interval arithmetic
  on numbers;
* without them (WGSL is compiled once for all sizes): `affine.bounds`, the index's low and
  high ends as affine forms in the size names, compared with the extent symbolically
  (`i` in `0..len` against an axis of size `len`; `i + 1` in `0..len - 1`).

Immutable scalar `let`s are seen through (`let j = i + 1`); loads, mutable variables and
scalar arguments are unknown, so `x[idx[i]]`, `out[i + k]` and a `shared` array indexed by
data are guarded while the loop-variable indices of the common kernels are not.
"""
from __future__ import annotations

import contextlib

from .. import affine, cir
from .loops import free_vars
from .tiles import substitute


class Facts:
    """Loop ranges and immutable scalar lets of one kernel body (CIR names are unique per
    kernel; a name defined twice is dropped, so it is unknown rather than wrong)."""

    def __init__(self, body, sizes: dict | None = None, dims=(), equal=()):
        self.sizes = {k: int(v) for k, v in (sizes or {}).items()}
        self.dims = set(dims) | set(self.sizes)
        # groups of size names known to be equal (a program compiled for all sizes may be
        # specialised on which of its sizes are equal: `x_d0` and `len`)
        self.alias = {}
        for group in equal:
            group = sorted(group)
            for name in group:
                self.alias[name] = group[0]
        self.ranges: dict = {}          # loop var -> (start, stop) CIR expressions
        self.lets: dict = {}            # immutable scalar let -> CIR value
        self.consts: dict = {}          # immutable scalar let of a number -> the number
        self.loop_ranges: dict = {}     # loop var -> every (start, stop) it runs over
        seen: dict = {}
        bad_loops = set()
        for n in cir.walk(body):
            if isinstance(n, cir.Loop):
                step = n.step
                if isinstance(step, cir.Const) and isinstance(step.value, int) and step.value > 0:
                    self.loop_ranges.setdefault(n.var, []).append((n.start, n.stop))
                else:
                    bad_loops.add(n.var)
            elif isinstance(n, cir.Let):
                seen[n.name] = seen.get(n.name, 0) + 1
                if not n.mutable and not n.value.ty.shape and _is_int_dtype(n.value.ty.dtype):
                    self.lets[n.name] = n.value
                if not n.mutable and isinstance(n.value, cir.Const) and not n.value.ty.shape \
                        and n.ty is None:
                    self.consts[n.name] = n.value.value
            elif isinstance(n, cir.Assign):
                seen[n.name] = seen.get(n.name, 0) + 2
        for name, count in seen.items():
            if count > 1:
                self.lets.pop(name, None)
                self.consts.pop(name, None)
        # a loop variable is only read inside its loops: several loops of one name (`for i`
        # three times in a row) give the hull of their ranges; a name a let or an
        # assignment also defines is unknown
        for name in set(self.loop_ranges) & (set(seen) | bad_loops):
            del self.loop_ranges[name]
        for name, rs in self.loop_ranges.items():
            if all(affine.same(a, rs[0][0]) and affine.same(b, rs[0][1]) for a, b in rs):
                self.ranges[name] = rs[0]
        self.assumed: list = []         # bounds from the conditions of enclosing `if`s
        self.mutable = {n.name for n in cir.walk(body)
                        if isinstance(n, cir.Assign) or (isinstance(n, cir.Let) and n.mutable)}

    # ---- conditions -------------------------------------------------------------------

    @contextlib.contextmanager
    def assuming(self, cond):
        """Inside `if cond:` the bounds `cond` puts on names (`0 <= ih and ih < in_h`)
        hold: `with facts.assuming(s.cond): render the then branch`."""
        found: dict = {}
        _bounds_of(cond, found)
        for key in list(found):         # what the branch may change keeps no bound
            if found[key][2] & self.mutable:
                del found[key]
        self.assumed.append({k: v[:2] for k, v in found.items()})
        try:
            yield
        finally:
            self.assumed.pop()

    def _assumed(self, key):
        """[(low or None, high exclusive or None)] the enclosing conditions give the
        expression printed `key` (a name, `oh * stride + kh - padding`, ...)."""
        return [a[key] for a in self.assumed if key in a]

    # ---- numbers (sizes known) --------------------------------------------------------

    def interval(self, e, depth: int = 0):
        """(low, high) of integer expression e over every value its loop variables take, or
        None when unknown. A loop that never runs gives an empty range (low > high)."""
        if depth > 40:
            return None
        d = depth + 1
        if isinstance(e, cir.Const):
            v = e.value
            return None if isinstance(v, bool) or not isinstance(v, int) else (v, v)
        r = self._var_interval(e, d) if isinstance(e, cir.Var) else self._interval(e, depth)
        if r is not None and not isinstance(e, cir.Var) and r[0] <= r[1] and \
                not _fits(r, e.ty.dtype):
            r = None    # it wraps in its type: `i * 1000000000 / 1000000000` is not i
        if not (self.assumed and isinstance(e, cir.Expr)):
            return r
        for lo_e, hi_e in self._assumed(cir.format_expr(e)):
            lo, hi = self.interval(lo_e, d), self.interval(hi_e, d)     # None: no bound
            if r is None:
                if lo is None or hi is None:
                    continue
                r = (lo[0], hi[1] - 1)
            else:
                r = (r[0] if lo is None else max(r[0], lo[0]),
                     r[1] if hi is None else min(r[1], hi[1] - 1))
        return r

    def _var_interval(self, e, d):
        if e.name in self.loop_ranges:
            lo = hi = None
            for start, stop in self.loop_ranges[e.name]:
                a, b = self.interval(start, d), self.interval(stop, d)
                if a is None or b is None:
                    return None
                if a[0] > b[1] - 1:
                    continue            # this loop never runs
                lo = a[0] if lo is None else min(lo, a[0])
                hi = b[1] - 1 if hi is None else max(hi, b[1] - 1)
            return (1, 0) if lo is None else (lo, hi)
        if e.name in self.lets:
            return self.interval(self.lets[e.name], d)
        if e.name in self.sizes:
            v = self.sizes[e.name]
            return v, v
        return None

    def _interval(self, e, depth):
        d = depth + 1
        if isinstance(e, cir.Cast):
            if not _is_int_dtype(e.ty.dtype) or not _is_int_dtype(e.operand.ty.dtype):
                return None
            return self.interval(e.operand, d)
        if isinstance(e, cir.Unary) and e.op == "neg":
            r = self.interval(e.operand, d)
            return None if r is None else (-r[1], -r[0])
        if isinstance(e, cir.Bin) and e.op in ("+", "-", "*", "/", "%"):
            a, b = self.interval(e.left, d), self.interval(e.right, d)
            if a is None or b is None:
                return None
            if a[0] > a[1] or b[0] > b[1]:
                return 1, 0                 # empty: the code never runs
            r = arith_interval(e.op, a, b)
            if r is not None:
                return r
            if b[0] <= 0 <= b[1]:
                return None
            # truncating remainder: |r| < |divisor|, sign of the dividend
            m = max(abs(b[0]), abs(b[1])) - 1
            lo = 0 if a[0] >= 0 else -m
            hi = 0 if a[1] <= 0 else m
            if a[0] >= 0 and a[1] < b[0] and b[0] > 0:
                return a                    # already below the divisor
            return lo, hi
        if isinstance(e, cir.Call) and e.fn in ("min", "max") and e.args:
            parts = [self.interval(x, d) for x in e.args]
            if any(p is None for p in parts):
                return None
            f = min if e.fn == "min" else max
            return f(p[0] for p in parts), f(p[1] for p in parts)
        return None

    # ---- symbols (sizes not known) ----------------------------------------------------

    def _expand(self, e, depth=0):
        """e with immutable integer lets replaced by their values."""
        names = free_vars(e) & set(self.lets)
        if depth > 20 or not names:
            return e
        return self._expand(substitute(e, {n: self.lets[n] for n in names}), depth + 1)

    def _canon(self, e):
        names = free_vars(e) & set(self.alias)
        return substitute(e, {n: cir.Var(self.alias[n], cir.Ty("i32")) for n in names})

    def symbolic_in_range(self, index, extent) -> bool:
        ext = _dim_expr(extent)
        if ext is None:
            return False
        ext = self._canon(ext)
        if isinstance(index, cir.Expr):
            for lo, hi in self._assumed(cir.format_expr(index)):
                if lo is not None and hi is not None and _nonneg(self._canon(lo), self.dims) \
                        and _nonneg(affine.sub(ext, self._canon(hi)), self.dims):
                    return True
        ranges = {v: (self._canon(a), self._canon(b)) for v, (a, b) in self.ranges.items()}
        b = affine.bounds(self._canon(self._expand(index)), ranges)
        if b is None:
            return False
        lo, hi = b
        return _nonneg(lo, self.dims) and _nonneg(affine.sub(affine.sub(ext, hi), affine.const(1)),
                                                  self.dims)

    # ---- the questions ----------------------------------------------------------------

    def index_in_range(self, index, extent) -> bool:
        """True when `index` (a CIR expression) is provably in 0 .. extent - 1; `extent` is
        a number, a size name or a CIR size expression."""
        if not _is_int_dtype(getattr(getattr(index, "ty", None), "dtype", "")):
            return False
        n = _dim_value(extent, self.sizes)
        if n is not None:
            r = self.interval(index)
            if r is not None:
                return r[0] > r[1] or (r[0] >= 0 and r[1] <= n - 1)
        return self.symbolic_in_range(index, extent)

    def divisor_safe(self, divisor) -> tuple:
        """(never 0, never -1) for an integer divisor."""
        if isinstance(divisor, cir.Const):
            v = divisor.value
            return v != 0, v != -1
        r = self.interval(divisor)
        if r is None:
            ext = self._expand(divisor)
            form = affine.linear(ext)
            if form is not None and not form[0]:
                return form[1] != 0, form[1] != -1
            return False, False
        lo, hi = r
        return (True, True) if lo > hi else (not (lo <= 0 <= hi), not (lo <= -1 <= hi))


def _bounds_of(cond, out: dict):
    """Bounds on integer expressions that `cond` (a conjunction of comparisons) implies:
    out[printed expression] = (low or None, high exclusive or None, names it reads)."""
    if isinstance(cond, cir.Bin) and cond.op == "and":
        _bounds_of(cond.left, out)
        _bounds_of(cond.right, out)
        return
    if not (isinstance(cond, cir.Bin) and cond.op in ("<", "<=", ">", ">=")):
        return
    a, b, op = cond.left, cond.right, cond.op
    if isinstance(a, cir.Const) and not isinstance(b, cir.Const):
        a, b, op = b, a, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
    if isinstance(a, cir.Const) or not _is_int_dtype(a.ty.dtype) \
            or not _is_int_dtype(b.ty.dtype) or a.ty.shape or b.ty.shape:
        return
    key = cir.format_expr(a)
    lo, hi, _ = out.get(key, (None, None, None))
    if op in (">=", ">"):
        lo = b if op == ">=" else affine.add(b, affine.const(1))
    else:
        hi = b if op == "<" else affine.add(b, affine.const(1))
    out[key] = (lo, hi, free_vars((a, b)) | out.get(key, (None, None, set()))[2])


def _is_int_dtype(dtype: str) -> bool:
    return dtype in cir.INT_DTYPES


def _fits(r, dtype: str) -> bool:
    """Whether every integer in the interval r is a value of the integer dtype."""
    if not _is_int_dtype(dtype):
        return True
    bits = int(dtype[1:])
    lo, hi = (0, 1 << bits) if dtype[0] == "u" else (-(1 << bits - 1), 1 << bits - 1)
    return lo <= r[0] and r[1] < hi


def arith_interval(op: str, a: tuple, b: tuple):
    """(low, high) of `a op b` over the non-empty integer intervals a and b for +, - and *,
    and for / (C's, truncating) where b does not hold 0; None for the others."""
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*" or op == "/" and (b[0] > 0 or b[1] < 0):
        at = [x * y if op == "*" else _trunc_div(x, y) for x in a for y in b]     # the corners
        return min(at), max(at)
    return None


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _dim_value(extent, sizes):
    if isinstance(extent, bool):
        return None
    if isinstance(extent, int):
        return extent
    try:
        return cir.eval_dim(extent, sizes)
    except (KeyError, TypeError, ZeroDivisionError, ValueError):
        return None


def _dim_expr(extent):
    if isinstance(extent, int):
        return affine.const(extent)
    if isinstance(extent, str):
        return affine.var(extent)
    if isinstance(extent, cir.Expr):
        return extent
    return None


def _nonneg(e, dims) -> bool:
    """e >= 0 for every value of the sizes `dims` (sizes are never negative)."""
    form = affine.linear(e)
    if form is None:
        return False
    terms, c = form
    return c >= 0 and all(coef >= 0 and isinstance(ex, cir.Var) and ex.name in dims
                          for coef, ex in terms.values())
