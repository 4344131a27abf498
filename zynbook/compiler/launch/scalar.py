"""Scalar CIR -> launch IR: one thread's statements, typed and checked.

Every schedule lowers the scalar part of a kernel body (lets, assignments, stores, loops,
ifs, atomics and the expressions in them) through `ScalarLowering`; what a schedule adds
around it (which thread runs which iteration, shared arrays, collectives) it builds itself.
This is where the typing rules of generated code live, once, for every language:

* halves (f16, bf16) compute in f32: a load converts, a store converts back;
* a number meets the type it is used in (an exact f64 literal, never a widened float);
* comparisons of a float with an integer compare in the float type; integers of two types
  compare in 64 bits;
* `bool + bool` is `or`, `bool * bool` is `and`; integer division truncates as the reference
  does, checked (`CheckedDiv`) unless the divisor is provably neither 0 nor -1;
* an index the bounds analysis (passes/bounds.py) cannot prove in range is `Checked` (loads)
  or guards its store (`InRange`), reporting through the error flag (compiler/errflag.py);
* on a target without 64-bit integers (WebGPU), i64 arithmetic and i64 locals whose values
  provably fit 32 bits (argmax + 1; argmax * 2 at the launch's sizes) are computed in i32;
  other i64 arithmetic (of i64 data), and i64(x) of a float or unsigned x, are computed in
  i32 checked: a value past 32 bits is a runtime error at its line; u64 likewise in u32.
"""
from __future__ import annotations

import operator
import re
from dataclasses import replace
from functools import reduce
from math import prod

from .. import cir, errflag
from ..passes.bounds import Facts, arith_interval
from ..passes.casts import INT_RANGES, _saturating as saturating
from ..passes.recognise import is_launch_constant
from ..passes.simplify import INT_BITS
from ..types import int_pow_exponent
from . import ir

USER_PREFIX = "u_"      # every user name; generated names start with `_` or `zyn_`

DTYPE_BYTES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2, "i32": 4, "u32": 4,
               "f32": 4, "i64": 8, "u64": 8, "f64": 8, "bool": 1}


FIELD_PREFIX = "uf_"     # a record's field (`w.a`)


def user_name(name: str) -> str:
    """The generated code's name for a user's: after USER_PREFIX, the name with any
    character C does not take as `_` (a pass's `%n1`); a field (`w.a`) after FIELD_PREFIX,
    `_` written `_u` and `.` written `_d`, so that `w.a`, `w_a`, `w.a_b` and `w_a.b` stay four
    names."""
    if "." not in name:
        return USER_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", name)
    return FIELD_PREFIX + re.sub(r"[^A-Za-z0-9]", lambda m: {"_": "_u", ".": "_d"}.get(m.group(), "_x"),
                                 name)


def compute_dtype(dtype: str) -> str:
    return "f32" if dtype in ("f16", "bf16") else dtype


class NotScalar(Exception):
    """The body holds something only a richer schedule handles (tiles, shared arrays...);
    `line`: the ZynML line of the statement that holds it (0 where none is known)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne}


def const_value(e, consts: dict):
    """The number a CIR constant (or its negation, or an immutable let of one) stands for."""
    if isinstance(e, cir.Var) and e.name in consts and not e.ty.shape:
        return consts[e.name]
    if isinstance(e, cir.Const) and not e.ty.shape:
        return e.value
    if isinstance(e, cir.Unary) and e.op == "neg" and isinstance(e.operand, cir.Const) \
            and not isinstance(e.operand.value, bool) and not e.operand.ty.shape:
        return -e.operand.value
    return None


def converted(value, dtype: str):
    """A constant converted to `dtype` as the devices' casts convert a value: an integer
    wraps to a narrower integer type (i32(3000000000) is -1294967296), a float becomes an
    integer truncated toward zero and saturated, NaN 0 (int(3e9) is 2147483647)."""
    if dtype not in INT_BITS or isinstance(value, bool):
        return value
    bits = INT_BITS[dtype]
    low, high = (0, (1 << bits) - 1) if dtype.startswith("u") else \
        (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if isinstance(value, float):
        if value != value:
            return 0
        return int(min(max(value, low), high)) if abs(value) != float("inf") else \
            (high if value > 0 else low)
    v = int(value) % (1 << bits)
    return v - (1 << bits) if v > high else v


def half_rounded(value, dtype: str) -> float:
    """A constant rounded to the half type `dtype` (f16 or bf16, ties to even, through f32 as
    the reference rounds it), as a cast of a value is: f16(2049) is 2048, f16(1e5) inf."""
    import numpy as np
    with np.errstate(over="ignore"):
        x = np.float32(value)
        if dtype == "f16":
            return float(np.float16(x))
    u = int(x.view(np.uint32))
    if x != x:
        return float(x)
    return float(np.uint32(((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000) % 2**32).view(np.float32))


def lit(value, dtype: str) -> ir.Lit:
    kind = bool if dtype == "bool" else float if dtype in ir.FLOAT_DTYPES else int
    return ir.Lit(kind(value), dtype)


def cast(e: ir.Expr, dtype: str) -> ir.Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, ir.Lit) and not (dtype == "bool") and e.dtype != "bool":
        if dtype in ("f16", "bf16"):
            return lit(half_rounded(e.value, dtype), dtype)
        if dtype in ir.FLOAT_DTYPES or isinstance(e.value, int):
            return lit(e.value, dtype)
    return ir.Bin("!=", e, lit(0, e.dtype), "bool") if dtype == "bool" else ir.Cast(e, dtype)


# f16 operations whose f32 result is an f16 value already (half_step)
_EXACT_ON_HALVES = frozenset(("abs", "min", "max", "clamp", "relu", "floor", "ceil", "round",
                              "%"))


_INT_RANGE = {"bool": (0, 1), **{d: (lo, past - 1) for d, (lo, past) in INT_RANGES.items()}}


def _hull(parts: list) -> tuple:
    parts = [p for p in parts if p[0] <= p[1]]
    return (min(p[0] for p in parts), max(p[1] for p in parts)) if parts else (1, 0)


def _signed32(v: int) -> int:
    """The low 32 bits of integer `v` as an i32."""
    return (v & 0xFFFFFFFF) - ((v & 0x80000000) << 1)


def _fits32(r) -> bool:
    return _fits(r, "i32")


def _fits(r, dtype: str) -> bool:
    """Whether the span `r` (None: unbounded) lies in the range of integer `dtype`."""
    lo, hi = _INT_RANGE[dtype]
    return r is not None and (r[0] > r[1] or (lo <= r[0] and r[1] <= hi))


# on a target without 64-bit integers, the 32-bit type each is held (and computed) in
_HELD_IN = {"i64": "i32", "u64": "u32"}

# the operand fields of the integer arithmetic `narrowed` computes in 32 bits
_OPERANDS = {cir.Unary: ("operand",), cir.Select: ("if_true", "if_false"), cir.Bin: ("left", "right")}


def _operands(e) -> tuple:
    return tuple(e.args) if isinstance(e, cir.Call) else tuple(getattr(e, f) for f in _OPERANDS[type(e)])


def _in_type(e, parts: tuple, ty: cir.Ty):
    """`e` of type `ty` on `parts` (its operands, `_operands`), each converted to `ty`."""
    parts = tuple(cir.Cast(x, ty) for x in parts)
    if isinstance(e, cir.Call):
        return replace(e, ty=ty, args=parts)
    return replace(e, ty=ty, **dict(zip(_OPERANDS[type(e)], parts)))


def _common_int(a: str, b: str) -> str:
    """The type two integers are compared in: the narrowest that holds both exactly (at
    least 32 bits; u8 against an i32 literal in i32, not i64, which WGSL lacks)."""
    if a == b:
        return a
    if a == "bool" or b == "bool":
        return b if a == "bool" else a
    if a.startswith("u") == b.startswith("u"):
        return a if INT_BITS[a] >= INT_BITS[b] else b
    signed, unsigned = (a, b) if b.startswith("u") else (b, a)
    bits = max(INT_BITS[signed], 2 * INT_BITS[unsigned], 32)
    return "i32" if bits <= 32 else "i64"


class ScalarLowering:
    """The scalar statements of one kernel as launch IR (`stmts`, `expr`)."""

    def __init__(self, kernel: cir.Kernel, sizes: dict, sites: errflag.ErrorSites,
                 index_dtype: str, *, symbolic: bool = False, target=None):
        self.kernel = kernel
        # False: the kernel's signed + - * are written as wrapping operations (the target's
        # language leaves overflow undefined), but in the indices it reads and writes at,
        # which bounds checks hold below 2^31
        self.signed_wraps = target is None or target.signed_wraps
        # whether 64-bit integers are 64 bits wide on the target (WebGPU holds them in 32)
        self.int64 = target is None or target.int64
        if not self.int64:      # every value each local is given: see `span32`
            self.values: dict = {}
            for n in cir.walk(kernel.body):
                if isinstance(n, (cir.Let, cir.Assign)):
                    self.values.setdefault(n.name, []).append(n.value)
        self.indexing = 0
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.sites = sites
        self.idx = index_dtype
        # symbolic: the code is for every launch whose sizes are equal (and negative) where
        # these are; no value of a size is used, so the bounds analysis works on symbols
        self.symbolic = symbolic
        # whether the program is for these sizes only: `launch_sizes`
        self.sized = target is None or not target.symbolic_sizes
        self.unsized = False
        if symbolic:
            equal, nonneg = size_pattern(kernel, self.sizes)
            self.facts = Facts(kernel.body, None, nonneg, equal)
        else:
            self.facts = Facts(kernel.body, self.sizes, kernel.dims)
        self.line = kernel.first_line
        # buffer name -> (identifier, dtype, shape as tuple of dims)
        self.buffers = {b.name: (user_name(b.name), b.dtype, tuple(b.shape))
                        for b in list(kernel.inputs) + [kernel.output]}
        self.scalars = {s.name: s.dtype for s in kernel.scalars if s.name not in self.sizes}
        self.scopes: list = [{}]            # CIR name -> (identifier, dtype)
        # loops entered (in_loop), and each identifier's count where it was bound: an update
        # below more loops than its local's binding is an accumulator's (accumulation)
        self.loop_level = 0
        self.bound_level: dict = {}
        # f16 locals updated as sums (`accumulation`, held in f32 as they sum): any other
        # read sees the f16 value they hold, as the reference's (`s / n` after the loop)
        self.f16_sums = {s.name for s in cir.walk(kernel.body) if isinstance(s, cir.Assign)
                         and s.value.ty.dtype == "f16" and cir.accumulated(s)}
        # a reduce schedule's combine: (value, index or None, line) -> statements
        self.on_yield = None
        self.taken: set = set()
        self.narrow_locals: set = set()     # identifiers of i64 locals `held` in i32
        self.wide: dict = {}                # i64 (u64) sums in two i32 words: low -> (high, u64?)
        # buffer name -> the offset of its part (an array a schedule keeps in a slice of a
        # scratch buffer, one slice per block)
        self.bases: dict = {}

    # ---- names ------------------------------------------------------------------------

    def bind(self, name: str, dtype: str) -> str:
        """A fresh identifier for CIR local `name` in the innermost scope."""
        base = user_name(name)
        ident, n = base, 1
        while ident in self.taken:
            ident = f"{base}_{n}"
            n += 1
        self.taken.add(ident)
        self.scopes[-1][name] = (ident, dtype)
        self.bound_level[ident] = self.loop_level
        return ident

    def lookup(self, name: str):
        return next((s[name] for s in reversed(self.scopes) if name in s), None)

    def in_loop(self, var: str, fn, names: dict | None = None):
        """(the identifier of CIR loop variable `var`, fn()) in a scope of its own that
        starts with `names` (CIR name -> (identifier, dtype))."""
        self.scopes.append(dict(names or {}))
        try:
            ident = self.bind(var, self.idx)
            self.loop_level += 1
            try:
                return ident, fn()
            finally:
                self.loop_level -= 1
        finally:
            self.scopes.pop()

    def with_var(self, var: str, value: ir.Expr, fn) -> list:
        """fn()'s statements with CIR loop variable `var` bound to `value`, in a scope of
        its own."""
        ident, got = self.in_loop(var, fn)
        return [ir.Decl(ident, self.idx, value)] + list(got)

    def lane_stmts(self, body, outs: dict, lane: ir.Expr) -> list:
        """`body`, each store in `outs` (id -> local array) writing lane `lane` of its array
        instead (one vector store writes the array later: `copy_out`)."""
        got = []
        for s in body:
            self.line = s.line or self.line       # checks name the statement's line
            if isinstance(s, cir.Store) and id(s) in outs:
                dtype = self.buffers[s.buffer][1]
                value = cast(self.operand(s.value, compute_dtype(dtype)), dtype)
                got.append(ir.Store(outs[id(s)], lane, value, None, s.line))
            else:
                got += self.stmts((s,))
        return got

    def copy_out(self, s: cir.Store, array: str, start: ir.Expr, count: int) -> ir.Stmt:
        """`count` values of local `array` from `start` to where store `s` writes, guarded
        where its index is not provably in range."""
        ident, dtype, _ = self.buffers[s.buffer]
        self.line = s.line or self.line       # its check names the store's line
        off, guard = self.flat(s.buffer, s.index, True, s.spans)
        copy = ir.Copy(ident, off, array, start, count, dtype, s.line)
        return copy if guard is None else ir.If(guard, (copy,), (), s.line)

    def size(self, d) -> ir.Expr:
        """A dimension (a number, a size name or a CIR size expression) as an index value."""
        if isinstance(d, int):
            return lit(d, self.idx)
        if isinstance(d, str):
            return ir.Ref(user_name(d), self.idx)
        return self.index(d)

    # ---- expressions ------------------------------------------------------------------

    def expr(self, e) -> ir.Expr:
        """A scalar CIR expression in its compute dtype."""
        if e.ty.shape:
            raise NotScalar(f"a tile value ({e.ty}): {cir.format_expr(e)}")
        dt = compute_dtype(e.ty.dtype)
        if isinstance(e, cir.Const):
            return lit(e.value, dt)
        if isinstance(e, cir.Var):
            hit = self.lookup(e.name)
            if hit is not None and hit[0] in self.wide:
                return cast(self.wide_value(hit[0], e.name), dt)
            if hit is not None and e.name in self.f16_sums and hit[1] == "f32":
                return cast(cast(ir.Ref(hit[0], hit[1]), "f16"), "f32")
            if hit is not None:     # (an i64 local `held` in i32 read as the i64 it is)
                return cast(ir.Ref(hit[0], hit[1]), dt) if hit[0] in self.narrow_locals \
                    else ir.Ref(hit[0], hit[1])
            if e.name in self.sizes or e.name in self.kernel.dims:
                return cast(ir.Ref(user_name(e.name), self.idx), dt)
            if e.name in self.scalars:
                return cast(ir.Ref(user_name(e.name), compute_dtype(self.scalars[e.name])), dt)
            raise NotScalar(f"unknown name `{e.name}`")
        if isinstance(e, cir.Load):
            return self.load(e)
        n = self.narrowed(e)
        if n is not None:
            return n
        if isinstance(e, cir.Bin):
            return self.half_step(e, self.binary(e))
        if isinstance(e, cir.Unary):
            x = self.expr(e.operand)
            if e.op == "not":
                return ir.Un("not", cast(x, "bool"), "bool")
            if not self.signed_wraps and dt in ("i32", "i64") and self.may_wrap(e):
                return ir.Math(ir.WRAPPING_NEG, (cast(x, dt),), dt)     # as + - * (binary)
            return ir.Un("neg", cast(x, dt), dt)
        if isinstance(e, cir.Cast):
            c = const_value(e.operand, self.facts.consts)
            if c is not None and dt != "bool":
                if e.ty.dtype in ("f16", "bf16"):
                    c = half_rounded(c, e.ty.dtype)     # f16(0.1), `var c: bf16 = 383.0`
                return lit(converted(c, dt), dt)
            x = self.expr(e.operand)
            if e.ty.dtype in ("f16", "bf16") and x.dtype != e.ty.dtype:
                x = cast(x, e.ty.dtype)     # an explicit half: rounded to it, computed wider
            if not self.int64 and (dt == "i64" and x.dtype in ("u32", "u64") or dt == "u64"
                                   and x.dtype in ("i8", "i16", "i32", "i64")):
                return self.checked_i64(x, getattr(e, "span", None), dt)
            return cast(x, dt)
        if isinstance(e, cir.Select) and dt in _HELD_IN and not self.int64 and saturating(e):
            # i64(x) of a float x (passes/casts.py): past 32 bits, saturated or not, an error
            return self.checked_i64(self.expr(e.cond.left), getattr(e, "span", None), dt)
        if isinstance(e, cir.Select):
            return ir.Select(cast(self.expr(e.cond), "bool"), self.operand(e.if_true, dt, e.ty.dtype),
                             self.operand(e.if_false, dt, e.ty.dtype), dt)
        if isinstance(e, cir.Call):
            return self.half_step(e, self.call(e, dt))
        raise NotScalar(f"{type(e).__name__} needs a tile schedule")

    def half_step(self, e, x: ir.Expr) -> ir.Expr:
        """Arithmetic `e` of f16, computed as `x` in f32, rounded to f16 as each f16 operation
        of the reference (numpy's) is: a chain of them rounded once at its store differed
        in the last place. (bf16 arithmetic stays f32 until a cast or store rounds it, as the
        reference holds bf16 values in f32.) Exact operations need no rounding."""
        if e.ty.dtype != "f16" or x.dtype != "f32" or \
                (e.fn if isinstance(e, cir.Call) else e.op) in _EXACT_ON_HALVES:
            return x
        return cast(cast(x, "f16"), "f32")

    def accumulation(self, s: cir.Assign, hit) -> ir.Expr:
        """An update `acc += x` / `acc -= x` of float local `hit`: an f16 one sums in f32,
        rounded where it is stored or cast, as the reference sums f16 terms (numpy's f16
        sum): no half_step; in a loop below its binding (an accumulator), a product of f16
        values added straight in is not rounded either (cir.unrounded_product)."""
        op, term = cir.accumulated(s)
        prod = cir.unrounded_product(s) if self.loop_level > self.bound_level.get(hit[0], 0) \
            else None
        x = self.exact_product(prod) if prod is not None else self.operand(term, hit[1], s.value.ty.dtype)
        return ir.Bin(op, ir.Ref(hit[0], hit[1]), cast(x, hit[1]), hit[1])

    def exact_product(self, e: cir.Bin) -> ir.Expr:
        """`x * y` of f16 values in f32, unrounded (exact); a literal factor is f16's."""
        def factor(f):
            c = const_value(f, self.facts.consts)
            return lit(half_rounded(c, "f16"), "f32") if c is not None else self.operand(f, "f32")
        return ir.Bin("*", factor(e.left), factor(e.right), "f32")

    def operand(self, e, dtype: str, within: str = "") -> ir.Expr:
        """`e` as a value of compute dtype `dtype`; numbers are written in that type. An
        operand of an f16 operation (`within`) that is a wider float is a weak value known
        only as it runs (`var s = 0.1` then `s = s * 3.0`): rounded to f16 first, as numpy
        rounds a Python float beside f16 data (h[i] * s was 1 ulp off it)."""
        c = const_value(e, self.facts.consts)
        if c is not None and not isinstance(c, bool) and dtype != "bool":
            # (a weak integer literal meeting an unsigned value wraps to it: u[i] + -1)
            return lit(converted(c, dtype) if isinstance(c, int) else c, dtype)
        if not self.int64 and dtype in _HELD_IN and e.ty.dtype in _INT_RANGE and \
                e.ty.dtype != dtype and not _fits(_INT_RANGE[e.ty.dtype], _HELD_IN[dtype]):
            # an integer of the other signedness (i32 stored to u64): converted checked,
            # as its bits would be another value of the 32 bits a 64-bit one is held in
            e = cir.Cast(e, cir.Ty(dtype))
        v = self.expr(e)
        if within == "f16" and e.ty.dtype in ("f32", "f64") and not e.ty.shape:
            v = cast(v, "f16")
        return cast(v, dtype)

    def index(self, e) -> ir.Expr:
        return cast(self.index_value(e), self.idx)

    def may_wrap(self, e) -> bool:
        """Whether signed `e` needs wrapping arithmetic: a value, or an index whose
        interval may leave its type (`x[i * 1000000000 / 1000000000]`: the compiler of an
        overflow it may assume away would read x[i] where every device checks x[-1])."""
        return not self.indexing or self.facts.interval(e) is None

    def index_value(self, e) -> ir.Expr:
        """Index `e` in its own integer type, not yet converted to the index type."""
        self.indexing += 1
        try:
            return self.expr(e)
        finally:
            self.indexing -= 1

    def unsigned_against_signed(self, op: str, e: cir.Bin, u_left: bool, ut: str) -> ir.Expr:
        """An unsigned integer of type `ut` (u64, or u32 against a signed integer of at most
        32 bits) compared with a signed one, without a type that holds both (no integer
        holds a u64 and an i64; WGSL has no i64 to hold a u32 and an i32): a negative signed
        side is below every unsigned value; else both compare as `ut`."""
        st = "i64" if ut == "u64" else "i32"
        if not self.int64:      # every 64-bit value held in 32 bits: compared in those
            ut, st = ut.replace("64", "32"), st.replace("64", "32")
        side = e.right if u_left else e.left
        # the unsigned side is the larger: what `op` says of (unsigned side > signed side)
        larger = op in ((">", ">=", "!=") if u_left else ("<", "<=", "!="))
        c = const_value(side, self.facts.consts)
        if c is not None and not isinstance(c, bool) and c < 0:
            return lit(larger, "bool")
        both = ir.Bin(op, self.operand(e.left, ut), self.operand(e.right, ut), "bool")
        if c is not None and not isinstance(c, bool):
            return both
        negative = ir.Bin("<", self.operand(side, st), lit(0, st), "bool")
        return ir.Select(negative, lit(larger, "bool"), both, "bool")

    def past_held(self, op: str, e: cir.Bin, ct: str) -> ir.Expr | None:
        """On a target without 64-bit integers, comparison `e` in i64 (u64) `ct` of a value
        with a constant past 32 bits (`a[i] == -2^63`, `i64(-3e9) < i64(x[i])`): every value
        is held in them (or fails its check), so it lies below (above) the constant; the
        answer, or, where the value may fail a check (arithmetic that may pass 32 bits, i64
        of a float), a comparison of it with the held range's end that gives the answer
        and runs the check; else None."""
        if self.int64 or ct not in _HELD_IN:
            return None
        held = _HELD_IN[ct]
        lo, hi = _INT_RANGE[held]

        def constant(side):     # (under a cast too: i64(-3000000000))
            c = const_value(side, self.facts.consts)
            r = self.span32(side) if c is None else (c, c)
            return r[0] if r and r[0] == r[1] and isinstance(r[0], int) and not isinstance(r[0], bool) else None
        left, right = constant(e.left), constant(e.right)
        if left is not None and right is not None:
            return lit(_COMPARE[op](left, right), "bool")
        for c, value_left in ((right, True), (left, False)):
            value = e.left if value_left else e.right
            if c is not None and not lo <= c <= hi:
                below = c > hi       # the value lies below the constant
                if not value_left:
                    below = not below
                known = {"==": False, "!=": True, "<": below, "<=": below,
                         ">": not below, ">=": not below}[op]
                if _fits(self.span32(value), held):
                    return lit(known, "bool")
                return ir.Bin(">=" if known else "<", self.operand(value, ct), lit(lo, ct), "bool")
        return None

    def binary(self, e: cir.Bin) -> ir.Expr:
        op = e.op
        lt, rt = compute_dtype(e.left.ty.dtype), compute_dtype(e.right.ty.dtype)
        dt = compute_dtype(e.ty.dtype)
        if op in ("and", "or"):
            return ir.Bin(op, self.operand(e.left, "bool"), self.operand(e.right, "bool"), "bool")
        if op in ("<", "<=", ">", ">=", "==", "!="):
            floats = [t for t in (lt, rt) if t in ir.FLOAT_DTYPES]
            ct = ("f64" if "f64" in floats else floats[0]) if floats else _common_int(lt, rt)
            if not floats and lt != "bool" and rt != "bool" and \
                    lt.startswith("u") != rt.startswith("u"):
                ut, st = (lt, rt) if lt.startswith("u") else (rt, lt)
                if ut == "u64" or (ut == "u32" and INT_BITS[st] <= 32):
                    return self.unsigned_against_signed(op, e, lt == ut, ut)
            known = self.past_held(op, e, ct)
            if known is not None:
                return known
            return ir.Bin(op, self.operand(e.left, ct), self.operand(e.right, ct), "bool")
        a, b = self.operand(e.left, dt, e.ty.dtype), self.operand(e.right, dt, e.ty.dtype)
        if dt in ir.FLOAT_DTYPES:
            if op == "%":
                return ir.Math("fmod", (a, b), dt)
            if op == "**":
                return self.float_power(a, b, e.right, dt)
            return ir.Bin(op, a, b, dt)
        if op == "**":
            k = const_value(e.right, self.facts.consts)
            if isinstance(k, int) and not isinstance(k, bool) and k >= 0:
                b = lit(int_pow_exponent(k, dt), dt)      # not wrapped into dt
            return ir.Math("ipow", (a, b), dt)
        if dt == "bool" and op in ("+", "*"):
            return ir.Bin("or" if op == "+" else "and", a, b, "bool")
        if op in ("/", "%"):
            nonzero, not_minus_one = self.facts.divisor_safe(e.right)
            if nonzero and (not_minus_one or dt.startswith("u")):
                return ir.Bin(op, a, b, dt)
            if op == "/":
                return ir.CheckedDiv("/", a, b, self.sites.add(errflag.DIV_ZERO, self.line, span=e.span),
                                     self.sites.add(errflag.DIV_OVERFLOW, self.line, dt, span=e.span), dt)
            return ir.CheckedDiv("%", a, b, self.sites.add(errflag.REM_ZERO, self.line, span=e.span), 0, dt)
        if not self.signed_wraps and dt in ("i32", "i64") and op in "+-*" and self.may_wrap(e):
            return ir.Math(next(f for f, o in ir.WRAPPING.items() if o == op), (a, b), dt)
        return ir.Bin(op, a, b, dt)

    def narrowed(self, e) -> ir.Expr | None:
        """On a target without 64-bit integers, i64 (u64) arithmetic `e` computed in i32
        (u32) where its operands and its value provably fit (argmax + 1, i64(k) - 1,
        max(sum, 0)), else checked (`checked32`); None where `e` is no such arithmetic; an
        error where an operand is past 32 bits, never a wrapped value."""
        if self.int64 or e.ty.dtype not in _HELD_IN or e.ty.shape or not (
                isinstance(e, cir.Bin) and e.op in ("+", "-", "*", "/", "%", "**")
                or isinstance(e, cir.Unary) and e.op == "neg"
                or isinstance(e, cir.Call) and e.fn in ("min", "max", "clamp", "abs")
                or isinstance(e, cir.Select) and not saturating(e)):
            return None
        parts = _operands(e)
        self.unsized = False
        held = _HELD_IN[e.ty.dtype]
        if all(_fits(self.span32(x), held) for x in parts + (e,)):
            return cast(self.expr(_in_type(e, parts, cir.Ty(held))), e.ty.dtype)
        if self.unsized:
            # the launch's sizes may bound it (a size, the extent argmax chooses among): the
            # program for every size set gives way to one for the launch's sizes
            raise NotScalar("i64 arithmetic whose values the launch's sizes may bound")
        from ...errors import Span, ZynMLDeviceError
        span = getattr(e, "span", None)
        if span is None and self.line:      # a value the passes built: the statement's line
            lines = (self.kernel.source or "").split("\n")
            at = self.line - self.kernel.first_line
            text = lines[at] if 0 <= at < len(lines) else ""
            col = len(text) - len(text.lstrip()) + 1
            span = Span(self.line, col, self.line, max(len(text.rstrip()) + 1, col + 1))
        host = self.host_ints_past_i32(e)
        if host:            # a host int read as i64 (lower.py): named, not the i64 it became
            raise ZynMLDeviceError(
                f"64-bit integer arithmetic with the host int {host}, past the 32-bit integers "
                "this device computes with (-2^31 to 2^31 - 1): it has no 64-bit integers; "
                "run it on `cpu`, `cpu:native` or a CUDA device", span)
        if not any(isinstance(c, int) and not _fits((c, c), held)
                   for c in (const_value(x, self.facts.consts) for x in parts)) and \
                not any(r and r[0] == r[1] and not _fits(r, held)
                        for r in map(self.span32, parts)):     # i64(3000000000): one value
            return self.checked32(e, parts, span)
        raise ZynMLDeviceError(
            "64-bit integer arithmetic with a constant past 32 bits: this device has no "
            "64-bit integers (it computes them in 32 bits); run it on `cpu`, `cpu:native` or "
            "a CUDA device", span)

    def checked32(self, e, parts: tuple, span) -> ir.Expr:
        """i64 (u64) arithmetic `e` of `parts`, each held in 32 bits (as every i64 value is
        on a target without 64-bit integers, in an i32, and every u64 value in a u32),
        computed in those: + - *, ** by a constant (and -x as 0 - x) fail an error site at
        the line where the exact value passes them (the 64-bit buffers hold 32 bits), abs(x)
        of i64 too where x is -2^31; / % min max clamp and a select of such values cannot
        pass them but for MIN / -1, checked as i32's."""
        wide = e.ty.dtype
        h = _HELD_IN[wide]
        ht = cir.Ty(h)
        # a part of the other signedness (u32 beside i64, i32 beside u64) converted to the
        # wide type first, checked there (`checked_i64`): its bits would be another value
        parts = tuple(x if _fits(_INT_RANGE.get(x.ty.dtype), h) or x.ty.dtype == wide
                      else cir.Cast(x, e.ty) for x in parts)
        if isinstance(e, cir.Call) and e.fn == "abs" and wide == "i64":
            x = self.operand(parts[0], "i32")
            v = ir.Math("abs", (x,), "i32")
            site = self.sites.add(errflag.PAST32, self.line, span=span)
            # the operand tested, not abs's result: SPIR-V leaves abs(-2^31) undefined, and
            # NVIDIA's Vulkan driver takes the result as never negative (a test of its sign
            # was folded away)
            smallest = ir.Select(ir.Bin("==", x, lit(-2 ** 31, "i32"), "bool"), lit(1, "i32"), lit(0, "i32"), "i32")
            return cast(ir.Bin("+", v, ir.Checked(smallest, lit(1, "i32"), site, "i32"), "i32"), "i64")
        if isinstance(e, cir.Bin) and e.op == "/" and wide == "i64":
            # -2^31 / -1 is 2^31: past the 32 bits, not an overflow of i64 (its message)
            a, b = (self.operand(x, h) for x in parts)
            return cast(ir.CheckedDiv("/", a, b, self.sites.add(errflag.DIV_ZERO, self.line, span=e.span),
                                      self.sites.add(errflag.PAST32, self.line, span=span), h), wide)
        if isinstance(e, (cir.Select, cir.Call)) or isinstance(e, cir.Bin) and e.op in ("/", "%"):
            return cast(self.expr(_in_type(e, parts, ht)), wide)
        op, (a, b) = ("-", (lit(0, h), self.operand(parts[0], h))) \
            if isinstance(e, cir.Unary) else (e.op, tuple(self.operand(x, h) for x in parts))
        if op == "**":
            k = const_value(e.right, self.facts.consts)
            if not isinstance(k, int) or isinstance(k, bool) or k < 0:
                from ...errors import ZynMLDeviceError
                raise ZynMLDeviceError(
                    "a 64-bit integer power by an exponent known only as the kernel runs: this "
                    "device has no 64-bit integers; run it on `cpu`, `cpu:native` or a CUDA "
                    "device", span)
            b = lit(k if k < 32 else 32 + k % 2, h)     # past 31: past 32 bits but for 0, 1, -1
        site = self.sites.add(errflag.PAST32, self.line, span=span)
        return cast(ir.CheckedDiv(op, a, b, 0, site, h), wide)

    def checked_i64(self, x: ir.Expr, span, dt: str = "i64") -> ir.Expr:
        """i64(x) of a float or an unsigned `x` (`dt` u64: u64(x) of a float or a signed
        `x`) on a target without 64-bit integers: the i32 (u32) it is held in (a float
        truncated, NaN 0, u64 of a negative float 0), an error site at the line failing
        where the value is past it (a float's saturated value is too)."""
        i32 = "i32"
        site = self.sites.add(errflag.PAST32, self.line, span=span)
        if dt == "u64":
            if x.dtype in ir.FLOAT_DTYPES:
                inside = ir.Bin("and", ir.Bin(">=", x, lit(0.0, x.dtype), "bool"),
                                ir.Bin("<", x, lit(2.0 ** 32, x.dtype), "bool"), "bool")
                v = ir.Select(inside, ir.Cast(x, "u32"), lit(0, "u32"), "u32")
                past = ir.Select(ir.Bin(">=", x, lit(2.0 ** 32, x.dtype), "bool"),
                                 lit(1, i32), lit(0, i32), i32)
            else:
                v = cast(cast(x, i32), "u32")       # its bits: past 2^32 - 1 where negative
                past = ir.Bin(">>", cast(x, i32), lit(31, i32), i32)   # 0, or -1
            return cast(ir.Bin("+", v, ir.Cast(ir.Checked(past, lit(1, i32), site, i32), "u32"),
                               "u32"), "u64")
        if x.dtype in ("u32", "u64"):
            v = ir.Cast(cast(x, "u32"), i32)            # its bits: negative past 2^31 - 1
            past = ir.Bin(">>", v, lit(31, i32), i32)   # 0, or -1
        else:
            v = ir.Cast(x, i32)         # (truncated toward zero, saturating)
            # past: at 2^31 and up, at -2^31 - 1 and down (f32 holds none between it and -2^31)
            low = ir.Bin("<=", x, lit(-2 ** 31 - 1, x.dtype), "bool") if x.dtype == "f64" \
                else ir.Bin("<", x, lit(-2.0 ** 31, x.dtype), "bool")
            high = ir.Bin(">=", x, lit(2.0 ** 31, x.dtype), "bool")
            past = ir.Select(ir.Bin("or", low, high, "bool"), lit(1, i32), lit(0, i32), i32)
            v = ir.Select(ir.Bin("!=", x, x, "bool"), lit(0, i32), v, i32)
        return cast(ir.Bin("+", v, ir.Checked(past, lit(1, i32), site, i32), i32), "i64")

    def host_ints_past_i32(self, e) -> str:
        """The host ints (sizes) `e` reads whose values at the launch's sizes are past
        i32, as `k` = 3000000000, joined by `and`; '' where none."""
        sizes = self.launch_sizes() or {}
        names = dict.fromkeys(n.name for n in cir.walk(e) if isinstance(n, cir.Var)
                              and n.name in sizes and not -2 ** 31 <= sizes[n.name] < 2 ** 31)
        return " and ".join(f"`{n}` = {sizes[n]}" for n in names)

    def span32(self, e, within=frozenset(), seen=frozenset()):
        """(low, high) every value of integer `e` lies in, from the types and loops of what
        it reads, whatever the sizes (but where the program is for these sizes only:
        `launch_sizes`); None where nothing bounds it (i64 data). `within`:
        the locals whose values are being bounded (a value that only keeps one adds no
        bound: `at = k` or at as it was); `seen`: every local being bounded."""
        dt = e.ty.dtype
        if isinstance(e, cir.Const):
            v = e.value
            return (int(v), int(v)) if isinstance(v, (int, bool)) else None
        own = _INT_RANGE.get(dt)
        if isinstance(e, cir.Var):
            if e.name in within:
                return (1, 0)                   # empty: nothing new
            hit = self.lookup(e.name)
            if hit is not None and hit[0] in self.wide:
                return _INT_RANGE["i32"]        # (read as the 32 bits it is stored in)
            vals = self.values.get(e.name)
            if vals is not None:
                if e.name in seen:              # grown by arithmetic on itself: `s = s + 1`
                    return own if dt != "i64" else None
                got = [self.span32(v, within | {e.name}, seen | {e.name}) for v in vals]
                if any(g is None for g in got):
                    return own if dt != "i64" else None
                return _hull(got)
            rs = self.facts.loop_ranges.get(e.name)
            if rs:
                got = [(a and b) and (a[0], b[1] - 1) for a, b in
                       ((self.span32(lo, seen=seen), self.span32(hi, seen=seen)) for lo, hi in rs)]
                return None if any(g is None for g in got) else _hull(got)
            if e.name in self.sizes and self.launch_sizes() is not None:
                return (self.sizes[e.name],) * 2
            return own if dt != "i64" else None         # sizes, scalars: their type's
        if isinstance(e, cir.Cast) and _INT_RANGE.get(e.operand.ty.dtype):
            r = self.span32(e.operand, within, seen)
            return r if r is not None and own and own[0] <= r[0] and r[1] <= own[1] else \
                (own if dt != "i64" else None)
        if isinstance(e, cir.Select):
            a, b = self.span32(e.if_true, within, seen), self.span32(e.if_false, within, seen)
            return None if a is None or b is None else _hull([a, b])
        if isinstance(e, cir.Reduce) and e.op in ("argmax", "argmin"):
            return (-1, self.positions(e) - 1)  # a position in the tile, -1 of none
        if isinstance(e, cir.Load) and dt in ("i64", "u64"):
            return _INT_RANGE[dt.replace("64", "32")]   # (the buffers hold 32 bits of it)
        if isinstance(e, cir.Call) and e.fn in ("min", "max"):    # one of its arguments
            got = [self.span32(x, within, seen) for x in e.args]
            return None if any(g is None for g in got) else _hull(got)
        within = frozenset()                    # arithmetic on a local bounds nothing
        if isinstance(e, cir.Unary) and e.op == "neg":
            r = self.span32(e.operand, within, seen)
            return None if r is None else (-r[1], -r[0])
        if isinstance(e, cir.Bin) and e.op in ("+", "-", "*", "/", "%"):
            a, b = self.span32(e.left, within, seen), self.span32(e.right, within, seen)
            if a is None or b is None or a[0] > a[1] or b[0] > b[1]:
                return None if a is None or b is None else (1, 0)
            r = arith_interval(e.op, a, b)
            if r is not None:
                return r
            m = max(abs(a[0]), abs(a[1]))       # truncating: |a / b| and |a % b| <= |a|
            if e.op == "%":
                m = min(m, max(abs(b[0]), abs(b[1])) - 1)
            return (-m, m)
        return own if dt != "i64" else None

    # ---- i64 sums, maxima and minima on a target without 64-bit integers --------------

    def summand(self, name: str, v) -> tuple | None:
        """(op, the value combined) where `v`, assigned to `name`, is name + value, value +
        name, name - value, max(name, value) or min(name, value) (either order), else None."""
        if v.ty.shape:
            return None
        if isinstance(v, cir.Call) and v.fn in ("max", "min") and len(v.args) == 2:
            a, b = v.args
            mine = [isinstance(x, cir.Var) and x.name == name for x in (a, b)]
            return (v.fn, b) if mine[0] else (v.fn, a) if mine[1] else None
        if not isinstance(v, cir.Bin) or v.op not in "+-":
            return None
        if isinstance(v.left, cir.Var) and v.left.name == name:
            return v.op, v.right
        if v.op == "+" and isinstance(v.right, cir.Var) and v.right.name == name:
            return v.op, v.left
        return None

    def is_wide_sum(self, s: cir.Let, dt: str) -> bool:
        """Whether i64 (u64) `var` `s` is a sum, a maximum or a minimum of values that fit
        32 bits (reduce(+, x) of i64 x, `acc += x[j]`, reduce(max, m[i])), on a target
        without 64-bit integers: it starts at such a value or a constant (max's -2^63), and
        every value it is given later combines one with it."""
        if self.int64 or dt not in ("i64", "u64") or not s.mutable or s.declared_ty.shape or \
                not (self.fits32(s.value, dt) or
                     isinstance(const_value(s.value, self.facts.consts), int)):
            return False
        later = self.values.get(s.name, [])[1:]
        terms = [self.summand(s.name, v) for v in later]
        return bool(terms) and all(t is not None and self.fits32(t[1], dt) for t in terms)

    def fits32(self, e, dt: str = "i64") -> bool:
        """Whether every value of integer `e` fits i32 (for a u64 `dt`, u32): that of a
        narrower type (wrapped in it: x[i] * 2 of i32 x), or what its span says."""
        lo, hi = _INT_RANGE["u32" if dt == "u64" else "i32"]
        r = _INT_RANGE.get(e.ty.dtype)
        if r is not None and lo <= r[0] and r[1] <= hi:
            return True
        r = self.span32(e)
        return r is not None and (r[0] > r[1] or lo <= r[0] and r[1] <= hi)

    def wide_sum(self, s: cir.Let, ln: int) -> list:
        """An i64 (u64) sum (`is_wide_sum`) held in two i32 words, its value the low word
        (unsigned) plus 2^32 times the high one (signed for i64): a constant's words, or a
        value's and its sign (0 for u64)."""
        unsigned = compute_dtype(s.declared_ty.dtype) == "u64"
        lo = self.bind(s.name, "i32")
        hi = self.bind(s.name + "%hi", "i32")
        self.wide[lo] = (hi, unsigned)
        c = const_value(s.value, self.facts.consts)
        if isinstance(c, int) and not isinstance(c, bool):
            return [ir.Decl(lo, "i32", lit(_signed32(c), "i32"), True, ln),
                    ir.Decl(hi, "i32", lit(_signed32(c >> 32), "i32"), True, ln)]
        first = self.operand(s.value, "i32")
        sign = lit(0, "i32") if unsigned else ir.Bin(">>", ir.Ref(lo, "i32"), lit(31, "i32"), "i32")
        return [ir.Decl(lo, "i32", first, True, ln), ir.Decl(hi, "i32", sign, True, ln)]

    def wide_add(self, lo: str, s: cir.Assign, ln: int) -> list:
        """`s` combining a value into the wide sum `lo`: added (subtracted), the low words
        wrap and their carry (borrow) and the value's sign go to the high word; a maximum
        (minimum) takes the value's words where it is larger (smaller), high words compared
        signed (u64: unsigned), low words unsigned."""
        op, v = self.summand(s.name, s.value)
        (hi, unsigned), i32, u32 = self.wide[lo], "i32", "u32"
        t = self.bind("%term", i32)
        L, H, T = ir.Ref(lo, i32), ir.Ref(hi, i32), ir.Ref(t, i32)

        def below(a, b, dt):
            return ir.Bin("<", cast(a, dt), cast(b, dt), "bool")

        def unsigned_below(a, b):   # the carry out of (or borrow into) the low word
            return ir.Select(below(a, b, u32), lit(1, i32), lit(0, i32), i32)
        # the value's high word: 0 or -1 (a u64's: 0)
        high = lit(0, i32) if unsigned else ir.Bin(">>", T, lit(31, i32), i32)
        out = [ir.Decl(t, i32, self.operand(v, i32), False, ln)]
        if op == "+":
            return out + [ir.Set(lo, self.wrapping("+", L, T), ln), ir.Set(hi, self.wrapping(
                "+", self.wrapping("+", H, high), unsigned_below(L, T)), ln)]
        if op == "-":
            return out + [ir.Set(hi, self.wrapping("-", self.wrapping("-", H, high),
                                                   unsigned_below(L, T)), ln),
                          ir.Set(lo, self.wrapping("-", L, T), ln)]
        a, b = ((H, high), (L, T)) if op == "max" else ((high, H), (T, L))   # a < b: take it
        takes = ir.Bin("or", below(*a, u32 if unsigned else i32), ir.Bin(
            "and", ir.Bin("==", H, high, "bool"), below(*b, u32), "bool"), "bool")
        return out + [ir.If(takes, (ir.Set(lo, T, ln), ir.Set(hi, high, ln)), (), ln)]

    def wrapping(self, op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        if self.signed_wraps:
            return ir.Bin(op, a, b, "i32")
        return ir.Math(next(f for f, o in ir.WRAPPING.items() if o == op), (a, b), "i32")

    def wide_value(self, lo: str, name: str) -> ir.Expr:
        """The wide sum `lo` (the user's `name`) as the 32 bits its i64 (u64) is stored in:
        its low word, where the high word is the low word's sign (0); else the site fails
        (a value past them)."""
        (hi, unsigned) = self.wide[lo]
        L, H = ir.Ref(lo, "i32"), ir.Ref(hi, "i32")
        past = H if unsigned else ir.Bin("-", H, ir.Bin(">>", L, lit(31, "i32"), "i32"), "i32")
        site = self.sites.add(errflag.WIDE, self.line, name if name.isidentifier() else "")
        low = ir.Bin("+", L, ir.Checked(past, lit(1, "i32"), site, "i32"), "i32")   # 0 where it fits
        return cast(low, "u32") if unsigned else low

    def held(self, name: str, dt: str) -> str:
        """The dtype local `name` of compute dtype `dt` is held in: on a target without
        64-bit integers, an i64 local is an i32 where every value it is given provably fits
        (`let p = reduce(argmax, m[i])`), and a u64 local a u32 likewise (an argmax's best
        of u64 data, which its buffer holds in 32 bits); it is read as the i64 (u64) it
        stands for."""
        if self.int64 or dt not in ("i64", "u64"):
            return dt
        r = self.span32(cir.Var(name, cir.Ty(dt)))
        if dt == "i64":
            return "i32" if _fits32(r) else dt
        return "u32" if r is not None and (r[0] > r[1] or 0 <= r[0] and r[1] < 2 ** 32) else dt

    def launch_sizes(self) -> dict | None:
        """The sizes where the program is for these sizes only (a target that compiles per
        launch, WebGPU's program for one launch), else None, noted in `unsized` (a program
        for the launch's sizes may bound what one for every size set cannot)."""
        if not self.symbolic and self.sized:
            return self.sizes
        self.unsized = True
        return None

    def positions(self, e: cir.Reduce) -> int:
        """How many positions argmax/argmin `e` chooses among: the extent of its tile at
        the launch's sizes, else at most 2^31 - 1 (an i32 axis)."""
        shape = e.input.ty.shape if e.axis is None else e.input.ty.shape[e.axis:e.axis + 1]
        sizes = self.launch_sizes()
        try:
            return 2 ** 31 - 1 if sizes is None else prod(cir.eval_dim(d, sizes) for d in shape)
        except (KeyError, TypeError, ZeroDivisionError):
            return 2 ** 31 - 1

    def float_power(self, a: ir.Expr, b: ir.Expr, exponent, dt: str) -> ir.Expr:
        """`a ** b` (and pow) in float dtype `dt`, as numpy's: by a scalar 0.5 (a constant,
        or a host float that is 0.5) it is sqrt (numpy's power by a scalar 0.5), so -inf
        gives NaN and -0.0 stays -0.0 where C's pow gives inf and 0; by exponents read per
        element, C's pow, as numpy's of an array (`exponent`: the CIR of b)."""
        k = const_value(exponent, self.facts.consts)
        if k is None:
            try:                # an expression of literals (0.25 * 2.0), as the reference's
                k = cir.eval_expr_static(exponent, {})
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                pass
        if k == 2:
            return ir.Math("pow2", (a,), dt)
        if k == 0.5:
            return ir.Math("sqrt", (a,), dt)
        if is_launch_constant(exponent, self.kernel):
            # one exponent for the whole launch (a host float): numpy's power by a scalar is
            # sqrt where that scalar is 0.5
            half = ir.Bin("==", b, lit(0.5, dt), "bool")
            return ir.Select(half, ir.Math("sqrt", (a,), dt), ir.Math("pow", (a, b), dt), dt)
        return ir.Math("pow", (a, b), dt)

    def call(self, e: cir.Call, dt: str) -> ir.Expr:
        if e.fn in ("zeros", "ones"):
            return lit(0 if e.fn == "zeros" else 1, dt)
        if e.fn in cir.TILE_FUNCTIONS:
            raise NotScalar(f"{e.fn}() of a tile")
        if dt in ir.FLOAT_DTYPES:
            args = tuple(self.operand(a, dt, e.ty.dtype) for a in e.args)
            if e.fn == "pow":
                return self.float_power(*args, e.args[1], dt)
            return ir.Math(e.fn, args, dt)
        args = tuple(self.operand(a, dt) for a in e.args)
        if e.fn in ("floor", "ceil", "round"):
            return args[0]
        if e.fn == "abs" and not self.signed_wraps and dt in ("i32", "i64"):
            # -x of a negative x, wrapping: abs of the smallest integer is itself, as numpy's
            negative = ir.Bin("<", args[0], lit(0, dt), "bool")
            return ir.Select(negative, ir.Math(ir.WRAPPING_NEG, args, dt), args[0], dt)
        if e.fn in ("min", "max", "abs", "clamp", "relu"):
            return ir.Math(e.fn, args, dt)
        # other math on integers computes in f32, as a float result would
        return cast(ir.Math(e.fn, tuple(cast(a, "f32") for a in args), "f32"), dt)

    # ---- buffers ----------------------------------------------------------------------

    def _step_known(self, step) -> bool:
        """Whether a loop's step needs no check as the kernel runs: a constant (positive,
        as lowering checks) or an expression of sizes (cir.check_loop_steps checks it at
        the launch)."""
        return all(isinstance(n, cir.Const) or (isinstance(n, cir.Var) and (
            n.name in self.sizes or n.name in self.kernel.dims)) or
            isinstance(n, (cir.Bin, cir.Unary)) for n in cir.walk(step))

    def flat(self, buffer: str, index: tuple, store: bool, spans: tuple = ()):
        """(flat offset, store guard or None) of `buffer[index]` (every axis given, or the
        trailing ones of size 1); `spans`: where each index is written."""
        ident, dtype, shape = self.buffers[buffer]
        if any(isinstance(i, cir.Span) for i in index) or len(index) > len(shape):
            raise NotScalar(f"a slice of `{buffer}`")
        rest = shape[len(index):]
        if any((d != 1 if self.symbolic else cir.eval_dim(d, self.sizes) != 1) for d in rest):
            raise NotScalar(f"a row of `{buffer}`")
        off, guards = None, []
        for k, ix in enumerate(index):
            raw = self.index_value(ix)
            i = cast(raw, self.idx)
            if not self.facts.index_in_range(ix, shape[k]):
                site = self.sites.add(errflag.INDEX, self.line, buffer, shape[k],
                                      spans[k] if k < len(spans) else None)
                # an index wider than the index type (an i64 or u64 read from an input) is
                # checked before it is narrowed: x[n[i]] with n[i] = 2^40 read x[0]
                wide = raw.dtype if self.int64 and INT_BITS.get(raw.dtype, 0) > INT_BITS[self.idx] \
                    else None
                if store:
                    guards.append(ir.InRange(raw, cast(self.size(shape[k]), wide), site)
                                  if wide else ir.InRange(i, self.size(shape[k]), site))
                elif wide:
                    i = cast(ir.Checked(raw, cast(self.size(shape[k]), wide), site, wide), self.idx)
                else:
                    i = ir.Checked(i, self.size(shape[k]), site, self.idx)
            stride = [self.size(d) for d in shape[k + 1:]
                      if not (isinstance(d, int) and d == 1)]
            term = reduce(lambda a, s: ir.Bin("*", a, s, self.idx), stride, i)
            off = term if off is None else ir.Bin("+", off, term, self.idx)
        guard = reduce(lambda a, g: ir.Bin("and", a, g, "bool"), guards) if guards else None
        off = off if off is not None else lit(0, self.idx)
        if buffer in self.bases:
            off = ir.Bin("+", self.bases[buffer], off, self.idx)
        return off, guard

    def load(self, e: cir.Load) -> ir.Expr:
        if e.buffer not in self.buffers:
            raise NotScalar(f"an array `{e.buffer}` of a richer schedule")
        ident, dtype, _ = self.buffers[e.buffer]
        off, _ = self.flat(e.buffer, e.index, False, e.spans)
        return cast(ir.Load(ident, off, dtype), compute_dtype(dtype))

    # ---- statements -------------------------------------------------------------------

    def stmts(self, body) -> tuple:
        out: list = []
        for s in body:
            self.line = getattr(s, "line", 0) or self.line
            try:
                out.extend(self.stmt(s))
            except NotScalar as err:    # the innermost statement's line: where it is written
                err.line = err.line or getattr(s, "line", 0)
                raise
        return tuple(out)

    def block(self, body) -> tuple:
        self.scopes.append({})
        try:
            return self.stmts(body)
        finally:
            self.scopes.pop()

    def stmt(self, s) -> list:
        ln = getattr(s, "line", 0)
        if isinstance(s, cir.Let):
            ty = s.declared_ty
            if ty.shape or s.value.ty.shape:
                raise NotScalar(f"tile `{s.name}`")
            dt = self.held(s.name, compute_dtype(ty.dtype))
            if self.is_wide_sum(s, dt):
                return self.wide_sum(s, ln)
            if dt in _HELD_IN and not self.int64:
                dt = _HELD_IN[dt]       # as every i64 (u64) value is there (`checked32`)
            value = self.operand(s.value, dt)
            ident = self.bind(s.name, dt)
            if dt != compute_dtype(ty.dtype):
                self.narrow_locals.add(ident)
            return [ir.Decl(ident, dt, value, s.mutable, ln)]
        if isinstance(s, cir.Assign):
            hit = self.lookup(s.name)
            if hit is None:
                raise NotScalar(f"assignment to `{s.name}` outside its scope")
            if hit[0] in self.wide:
                return self.wide_add(hit[0], s, ln)
            v = s.value
            if hit[0] in self.narrow_locals and isinstance(v, cir.Call) and \
                    v.fn in ("min", "max") and not v.ty.shape:
                # a running max of a local held narrower (its values fit, `held`): in that type
                args = tuple(self.operand(a, hit[1]) for a in v.args)
                return [ir.Set(hit[0], ir.Math(v.fn, args, hit[1]), ln)]
            if cir.accumulated(s) is not None and v.ty.dtype in cir.FLOAT_DTYPES and \
                    compute_dtype(v.ty.dtype) == hit[1]:
                return [ir.Set(hit[0], self.accumulation(s, hit), ln)]
            return [ir.Set(hit[0], self.operand(s.value, hit[1]), ln)]
        if isinstance(s, (cir.Store, cir.Atomic)):
            if s.buffer not in self.buffers:
                raise NotScalar(f"a store to `{s.buffer}` of a richer schedule")
            ident, dtype, _ = self.buffers[s.buffer]
            off, guard = self.flat(s.buffer, s.index, True, getattr(s, "spans", ()))
            value = cast(self.operand(s.value, compute_dtype(dtype)), dtype)
            if isinstance(s, cir.Atomic):
                return [ir.Atomic(s.op, ident, off, value, guard, ln)]
            return [ir.Store(ident, off, value, guard, ln)]
        if isinstance(s, cir.Loop):
            start, stop, step = self.index(s.start), self.index(s.stop), self.index(s.step)
            var, body = self.in_loop(s.var, lambda: self.stmts(s.body))
            loop = ir.For(var, start, stop, step, body, self.idx, ln,
                          reduce=ir.loop_reductions(body))
            if not self._step_known(s.step):
                # a step from a loop variable or data (`step i`): one that is not positive
                # fails its site instead of looping forever (sizes are checked at the launch)
                site = self.sites.add(errflag.STEP, ln)
                one = lit(1, self.idx)
                positive = ir.InRange(ir.Bin("-", step, one, self.idx),
                                      lit(2 ** 31 - 1, self.idx), site)
                return [ir.If(positive, (loop,), (), ln)]
            return [loop]
        if isinstance(s, cir.If):
            cond = cast(self.expr(s.cond), "bool")
            with self.facts.assuming(s.cond):
                then = self.block(s.then)
            return [ir.If(cond, then, self.block(s.orelse), ln)]
        if isinstance(s, cir.Check):
            return self.check(s)
        if isinstance(s, cir.Yield) and self.on_yield is not None:
            index = None if s.index is None else self.expr(s.index)     # the schedule's type
            return list(self.on_yield(self.expr(s.value), index, ln))
        raise NotScalar(f"{type(s).__name__} needs a block schedule")

    def check(self, s: cir.Check) -> list:
        """Tile extents that must agree (cir.Check), held in two locals: where they do not,
        the site fails with both, packed 16 bits each (errflag.unpack_extents), or -1 past
        that."""
        idx = self.idx
        decls = []
        for stem, e in (("%fit_a", s.left), ("%fit_b", s.right)):
            decls.append(ir.Decl(self.bind(stem, idx), idx, self.index(e), False, s.line))
        a, b = (ir.Ref(d.name, idx) for d in decls)
        one = lit(1, idx)
        if s.kind in ("argmax", "argmin"):     # an extent of at least 1 (`right`: 1)
            site = self.sites.add(errflag.NO_INDEX, s.line or self.line, s.kind + " tile")
            empty = ir.Select(ir.Bin("<", a, b, "bool"), one, lit(0, idx), idx)
            return decls + [ir.If(ir.InRange(empty, one, site), (), (), s.line)]
        ok = ir.Bin("==", a, b, "bool")
        if s.kind in ("broadcast", "store"):
            ok = ir.Bin("or", ok, ir.Bin("==", a, one, "bool"), "bool")
        if s.kind == "broadcast":
            ok = ir.Bin("or", ok, ir.Bin("==", b, one, "bool"), "bool")
        limit = lit(errflag.EXTENT_LIMIT, idx)
        small = ir.Bin("and", ir.Bin("<", a, limit, "bool"), ir.Bin("<", b, limit, "bool"), "bool")
        packed = ir.Bin("+", ir.Bin("*", a, lit(1 << errflag.EXTENT_BITS, idx), idx), b, idx)
        value = ir.Select(ok, lit(0, idx), ir.Select(small, packed, lit(-1, idx), idx), idx)
        site = self.sites.add(errflag.TILES, s.line or self.line, s.kind)
        return decls + [ir.If(ir.InRange(value, one, site), (), (), s.line)]


def buffer_params(kernel: cir.Kernel, sizes: dict, index_dtype: str) -> tuple:
    """The parameters every kernel of a program takes: the inputs, the output, the scalar
    arguments and the sizes (the printer bakes sizes in or passes them)."""
    stored = {n.buffer for n in cir.walk(kernel.body) if isinstance(n, (cir.Store, cir.Atomic))}
    ps = [ir.Param(user_name(b.name), "buffer", b.dtype,
                   b is kernel.output or b.name in stored or b.access != "read")
          for b in list(kernel.inputs) + [kernel.output]]
    ps += [ir.Param(user_name(s.name), "scalar", s.dtype) for s in kernel.scalars
           if s.name not in sizes]
    ps += [ir.Param(user_name(d), "size", index_dtype) for d in kernel.dims]
    return tuple(ps)


def size_pattern(kernel: cir.Kernel, sizes: dict) -> tuple:
    """What a program for every size set may assume of `sizes`: (groups of size names of
    equal value, the size names that are not negative)."""
    groups: dict = {}
    for name in kernel.dims:
        if name in sizes:
            groups.setdefault(int(sizes[name]), []).append(name)
    equal = tuple(sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1))
    return equal, tuple(d for d in kernel.dims if int(sizes.get(d, 0)) >= 0)


def pattern_sizes(dims, equal=(), negative=(), base: int = 1000) -> dict:
    """Sizes of the pattern (`size_pattern`) `equal`, `negative`: one value per group, a
    different one for each, from `base` on (a program for every size set is built from
    these)."""
    out, n = {}, 0
    for d in dims:
        if d in out:
            continue
        n += 1
        group = next((g for g in equal if d in g), (d,))
        for name in group:
            out[name] = -n if d in negative else base + n
    return out


def trip_count_expr(start: ir.Expr, stop: ir.Expr, step: ir.Expr, dtype: str) -> ir.Expr:
    """The iterations of `for start..stop step step` (step > 0) as an expression:
    ceil((stop - start) / step), never below 0."""
    span = stop if isinstance(start, ir.Lit) and start.value == 0 else ir.Bin("-", stop, start, dtype)
    span = ir.Math("max", (span, lit(0, dtype)), dtype)
    if isinstance(step, ir.Lit) and step.value == 1:
        return span
    return ir.Bin("/", ir.Bin("+", span, ir.Bin("-", step, lit(1, dtype), dtype), dtype), step, dtype)


def product_expr(terms: list, dtype: str) -> ir.Expr:
    kept = [t for t in terms if not (isinstance(t, ir.Lit) and t.value == 1)]
    return reduce(lambda a, t: ir.Bin("*", a, t, dtype), kept) if kept else lit(1, dtype)


def map_nodes(node, fn):
    """`node` (launch IR, or a tuple of it) rebuilt bottom-up with `fn` applied to every
    expression and statement."""
    if isinstance(node, tuple):
        mapped = tuple(map_nodes(n, fn) for n in node)
        return node if all(a is b for a, b in zip(mapped, node)) else mapped
    if not isinstance(node, (ir.Expr, ir.Stmt)):
        return node
    # (a node none of whose parts changed is passed on as it is: rebuilding every node of a
    # written-out register loop was most of a WGSL attention kernel's printing time)
    changes = {}
    for name in node.__dataclass_fields__:
        part = getattr(node, name)
        new = map_nodes(part, fn)
        if new is not part:
            changes[name] = new
    return fn(replace(node, **changes) if changes else node)


def host_expr(e: ir.Expr) -> bool:
    """Whether `e` is a host expression (`ir.evaluate` computes it from the sizes)."""
    return all(isinstance(n, (ir.Lit, ir.Ref, ir.Cast, ir.Bin, ir.Math, ir.Select)) and
               (not isinstance(n, ir.Math) or n.fn in ("min", "max", "ceildiv")) and
               (not isinstance(n, ir.Bin) or n.op in ("+", "-", "*", "/", "%", "=="))
               for n in ir.walk(e))


def index_dtype(kernel: cir.Kernel, sizes: dict) -> str:
    """i64 where a buffer or a loop bound reaches 2^31, else i32."""
    for b in list(kernel.inputs) + [kernel.output]:
        if prod(cir.eval_dim(d, sizes) for d in b.shape) >= 2 ** 31 - 1:
            return "i64"
    for lp in (n for n in cir.walk(kernel.body) if isinstance(n, cir.Loop)):
        for bound in (lp.start, lp.stop):
            try:
                v = cir.eval_expr_static(bound, sizes)
            except (TypeError, KeyError, ZeroDivisionError):
                continue
            if isinstance(v, int) and not -2 ** 31 < v < 2 ** 31 - 1:
                return "i64"
    return "i32"
