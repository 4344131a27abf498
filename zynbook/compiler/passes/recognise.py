"""Structural recognition of the patterns schedules are written for.

Each recogniser reads a kernel's CIR and returns a frozen dataclass describing the pattern
(its buffers, loop variables, sizes, the scale and mask of an attention, the block sizes of a
flash attention, the operands of a contraction), or a falsy `NoMatch` that says why not.
Nothing here looks at names or at the text the kernel was written in: variables, buffers and
sizes may be called anything, statements may come in any order that computes the same
values, `let`s may be inlined or not, and sums and products are compared up to the order of
their operands. What is checked is the algebra:

* **attention** (one query per iteration of a parallel (b, h, i) nest, in any order, b or h
  absent for 3-D or 2-D tensors): the score
  `dot(Q[b, h, i], K[b, h, j]) * c` for any launch-constant `c` (`/ sqrt(head_dim)`,
  `* 0.125`, a scalar argument), the same key range and the same key condition (any
  condition over b, h, i, j: a mask of any dtype, `j <= i`, ...) in every key loop, and the
  softmax-weighted sum of `V[b, h, j, d]` stored to `out[b, h, i, d]`, in one of the forms
  `Attention.form` names: ``three-pass`` (running max, then the sum of exp(s - m), then the
  weighted sum), ``online-stats`` (max and sum in one online-softmax pass, then the weighted
  sum) and ``one-pass`` (per output element: max, sum and weighted sum in one online-softmax
  loop, divided by the sum at the end);
* **flash attention** (one block of queries per iteration): running max `m`, sum `l` and
  output `o`, for each key block `m_new = max(m, row_max(S))`,
  `l = exp(m - m_new) * l + row_sum(exp(S - m_new))`,
  `o = exp(m - m_new) * o + exp(S - m_new) @ V_block`, `m = m_new`, and `out = o / l`, with
  `S = Q_block @ transpose(K_block) * c`; any block sizes, any constant initial tile
  (`zeros(B, d)`, `zeros(min(B, seq - q_block), d)`); a body missing any of these pieces
  (no rescale of `o`, no `m = m_new`, ...) is no flash attention;
* **contraction**: `out[P] = f(init + sum_k A[..] * B[..])` with one serial reduction loop,
  operand indices made of the output's loop variables and the reduction variable (batch
  axes, transposes), any accumulator name and an epilogue `f`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import reduce

from .. import affine, cir
from ..types import EXACT_WIDENING
from .loops import free_vars
from .tiles import substitute

F32 = cir.Ty("f32")


# ------------------------------------------------------------------------- results


@dataclass(frozen=True)
class NoMatch:
    """Not the pattern; `reason` says which piece is missing. Falsy."""
    pattern: str
    reason: str

    def __bool__(self) -> bool:
        return False

    def note(self, kind: str | None = None) -> str:
        what = f"`{kind}` kernel" if kind else "kernel"
        return f"the body of this {what} is not {self.pattern} ({self.reason}); it runs on the generic schedule"


@dataclass(frozen=True, kw_only=True)
class _AttentionPattern:
    """What both attention forms name: the buffers, the kernel's own loop variables of
    batch, head, query and key (batch and head None where the tensors lack the axis: their
    range is then 1), the CIR expressions of their ranges (launch constants) and `scale`, a
    launch-constant CIR expression with score = dot(Q row, K row) * scale [+ bias]."""
    q: str
    k: str
    v: str
    out: str
    batch_var: str | None
    head_var: str | None
    query_var: str
    key_var: str
    n_batch: cir.Expr
    n_heads: cir.Expr
    n_queries: cir.Expr
    n_keys: cir.Expr
    scale: cir.Expr
    mask: cir.Expr | None = None
    causal: bool = False
    # the axes of (batch, head, sequence) in Q, K, V and out (None: no such axis); head_dim
    # is the last axis
    q_axes: tuple = (0, 1, 2)
    k_axes: tuple = (0, 1, 2)
    v_axes: tuple = (0, 1, 2)
    out_axes: tuple = (0, 1, 2)
    # grouped-query heads: K and V rows of head `head_var / kv_group` (a launch constant)
    kv_group: cir.Expr | None = None
    # an additive score term (a relative-position bias, a float mask of 0 and -inf): a CIR
    # expression over the same names as `mask`
    bias: cir.Expr | None = None
    # the score's kept condition, over the names of `mask`: a key where it fails is admitted
    # with the score -inf (`where(keep, score, -inf)`), unlike a key `mask` leaves out
    keep: cir.Expr | None = None

    @property
    def rescored(self) -> bool:
        """Whether the score is more than the scaled dot product (a bias, a kept condition)."""
        return self.bias is not None or self.keep is not None

    @property
    def masked(self) -> bool:
        return self.mask is not None


@dataclass(frozen=True, kw_only=True)
class Attention(_AttentionPattern):
    """softmax(Q K^T * scale, masked) V, one query per iteration. `mask`: None, or the key
    condition, a CIR expression over `batch_var`, `head_var`, `query_var`, `key_var`, sizes,
    scalars and input loads. `empty_row`: what a query with no admitted key stores ("zero":
    the sum is never divided by; "nan": 0 / 0)."""
    form: str
    head_dim: cir.Expr
    empty_row: str = "zero"


@dataclass(frozen=True, kw_only=True)
class FlashAttention(_AttentionPattern):
    """The tiled online-softmax attention: the same result as `Attention` without a mask.
    `block_q`, `block_kv`: the kernel's block sizes (the schedules choose their own);
    `query_var`/`key_var` are the block loop variables."""
    block_q: int
    block_kv: int
    clipped_tile: bool = False          # the running output was made with min(...) rows
    empty_row: str = "nan"
    form: str = "flash"


@dataclass(frozen=True)
class Contraction:
    """out[P] = epilogue(init + sum over the reduction loops of a[..] * b[..] [if cond]).

    `ploops`: the parallel loops around it (outermost first), `rloops`: the perfectly nested
    serial reduction loops; `a_load`, `b_load`: the two factors (the left and right operand
    of the product as written), indexed by any expressions of the loop variables and launch
    constants; `cond`: the guard of the accumulation or None; `store`: the store of the
    result, whose value is the epilogue, a scalar expression of the accumulator `acc`, the
    parallel variables and inputs (e.g. a bias); `epilogue` is None when it is `acc` alone.
    `mvars`/`nvars`/`bvars`: the parallel variables only `a` reads, only `b` reads, both."""
    a: str
    b: str
    out: str
    ploops: tuple
    rloops: tuple
    acc: str
    init: cir.Expr
    a_load: cir.Load
    b_load: cir.Load
    cond: cir.Expr | None
    store: cir.Store
    mvars: tuple
    nvars: tuple
    bvars: tuple
    epilogue: cir.Expr | None = None
    # launch-constant factors of the products, (op, value) with op `*` or `/`, applied to
    # the sum (`acc += alpha * a * b / d` sums a * b and scales the sum: alpha, then d)
    scale: tuple = ()

    @property
    def out_vars(self) -> tuple:
        return tuple(lp.var for lp in self.ploops)

    @property
    def red_vars(self) -> tuple:
        return tuple(lp.var for lp in self.rloops)


class _No(Exception):
    pass


# errors from CIR of a shape a recogniser did not expect: the body is then not the pattern
# (it keeps the generic schedule), never a crash of the renderer
_UNEXPECTED = (AttributeError, TypeError, KeyError, IndexError, ValueError, ZeroDivisionError)


# ------------------------------------------------------------------ canonical forms

@dataclass(frozen=True)
class _FromCanon(cir.Expr):
    """An expression known only by its canonical form (inside comparisons)."""
    c: tuple
    ty: cir.Ty = F32


_COMM = {"+", "*", "==", "!=", "and", "or"}
_FLIP = {">": "<", ">=": "<="}


def canon(e):
    """`e` up to types (but an integer quotient or remainder is not a float one), the order
    of the operands of commutative operators, associativity of + and *, and a > b written
    b < a. Equal canonical forms compute the same value."""
    if e is None:
        return None
    if isinstance(e, _FromCanon):
        return e.c
    if isinstance(e, (tuple, list)):
        return tuple(canon(x) for x in e)
    if isinstance(e, cir.Const):
        return ("C", e.value if isinstance(e.value, bool) else float(e.value))
    if isinstance(e, cir.Var):
        return ("V", e.name)
    if isinstance(e, cir.Span):
        return ("S", canon(e.start), canon(e.stop))
    if isinstance(e, cir.Load):
        return ("L", e.buffer, canon(e.index))
    if isinstance(e, cir.Bin):
        a, b = canon(e.left), canon(e.right)
        if e.op in _FLIP:
            return ("B", _FLIP[e.op], b, a)
        if e.op in ("+", "*"):
            return c_nary(e.op, a, b)
        if e.op in _COMM:
            return ("B", e.op) + tuple(sorted((a, b), key=repr))
        if e.op in ("/", "%") and e.ty.dtype not in cir.FLOAT_DTYPES:
            # an integer quotient truncates: `j / 2` is not `j / 2.0`
            return ("B", e.op + "int", a, b)
        return ("B", e.op, a, b)
    if isinstance(e, cir.Unary):
        return ("U", e.op, canon(e.operand))
    if isinstance(e, cir.Call):
        return c_fn(e.fn, *canon(e.args))
    if isinstance(e, cir.Dot):
        return ("dot",) + tuple(sorted((canon(e.a), canon(e.b)), key=repr))
    if isinstance(e, cir.Cast):
        return ("cast", e.ty.dtype, canon(e.operand))
    if isinstance(e, cir.Select):
        return ("sel", canon(e.cond), canon(e.if_true), canon(e.if_false))
    if isinstance(e, cir.Reduce):
        return ("red", e.op, canon(e.input), e.axis)
    raise _No(f"unexpected {type(e).__name__}")


def _flat(tag, op, xs):
    """(tag, op, the operands): those of the same form spliced in, sorted."""
    flat = []
    for x in xs:
        flat.extend(x[2] if x[0] == tag and x[1] == op else (x,))
    return (tag, op, tuple(sorted(flat, key=repr)))


def c_nary(op, *xs):
    return _flat("N", op, xs)


def c_sub(a, b):
    return ("B", "-", a, b)


def c_fn(fn, *args):
    return _flat("F", fn, args) if fn in ("max", "min") else ("F", fn, tuple(args))


def c_var(name):
    return ("V", name)


# ------------------------------------------------------------------------ utilities


def loads(e) -> list:
    return [n for n in cir.walk(e) if isinstance(n, cir.Load)]


def _constants(kernel) -> set:
    return set(kernel.dims) | {s.name for s in kernel.scalars}


def is_launch_constant(e, kernel) -> bool:
    """Made of constants, sizes and scalar arguments only (the same for every thread)."""
    return not loads(e) and free_vars(e) <= _constants(kernel) and not getattr(e.ty, "shape", ())


def _int_const(e):
    if isinstance(e, cir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _is_const(e, value) -> bool:
    if isinstance(e, cir.Unary) and e.op == "neg":
        return _is_const(e.operand, -value)
    if isinstance(e, cir.Cast):
        return _is_const(e.operand, value)
    return isinstance(e, cir.Const) and not isinstance(e.value, bool) and float(e.value) == value


def _is_zero_tile(e, kernel, allowed: set) -> bool:
    return _is_const(e, 0.0) or (isinstance(e, cir.Call) and e.fn == "zeros" and not loads(e)
                                 and free_vars(e) <= _constants(kernel) | allowed)


def _mul_factors(e):
    """(numerator factors, denominator factors) of a product/quotient tree of floats (an
    integer product or quotient is one factor: `(1 / 8)` truncates to 0, it is not 1 / 8)."""
    if isinstance(e, cir.Bin) and e.op in ("*", "/") and e.ty.dtype in cir.FLOAT_DTYPES:
        n1, d1 = _mul_factors(e.left)
        n2, d2 = _mul_factors(e.right)
        return (n1 + n2, d1 + d2) if e.op == "*" else (n1 + d2, d1 + n2)
    if isinstance(e, cir.Unary) and e.op == "neg" and e.ty.dtype in cir.FLOAT_DTYPES:
        n, d = _mul_factors(e.operand)        # -x is x * -1
        return n + [cir.Const(-1.0, e.ty)], d
    return ([], []) if _is_const(e, 1.0) else ([e], [])


def _sum_terms(e, sign: int = 1) -> list:
    """[(sign, term)] of a float sum/difference tree."""
    if isinstance(e, cir.Bin) and e.op in ("+", "-") and e.ty.dtype in cir.FLOAT_DTYPES:
        return _sum_terms(e.left, sign) + _sum_terms(e.right, sign if e.op == "+" else -sign)
    return [(sign, e)]


def _nonzero_terms(e) -> list:
    """`_sum_terms` of `e` without its constant zeros: adding or subtracting a zero leaves a
    float as it is (but for the sign of a zero)."""
    return [(sign, t) for sign, t in _sum_terms(e) if not _is_const(t, 0.0)]


def _sum_of(terms: list):
    """The CIR sum of `_sum_terms`' (sign, term) pairs, None for none."""
    out = None
    for sign, t in terms:
        if out is None:
            out = t if sign > 0 else cir.Unary("neg", t, t.ty)
        else:
            out = cir.Bin("+" if sign > 0 else "-", out, t, F32)
    return out


def _has_dot(e) -> bool:
    return any(isinstance(n, cir.Dot) for n in cir.walk(e))


def _product(nums, dens):
    out = reduce(lambda a, x: cir.Bin("*", a, x, F32), nums) if nums else cir.Const(1.0, F32)
    return reduce(lambda a, x: cir.Bin("/", a, x, F32), dens, out)


def _same_multiset(xs, ys) -> bool:
    return sorted(map(repr, map(canon, xs))) == sorted(map(repr, map(canon, ys)))


def _chain(kernel):
    """The leading loop nest: loops while a loop's body is exactly one loop."""
    loops = []
    body = kernel.body
    while len(body) == 1 and isinstance(body[0], cir.Loop):
        loops.append(body[0])
        body = body[0].body
    return loops, body


def _unit_loop(lp: cir.Loop) -> bool:
    return _is_const(lp.start, 0) and _is_const(lp.step, 1)


def _uncast(e, state: set):
    """`e` with its casts of the running values in `state` from one float type to another
    dropped: the lowering rounds a weak running value (`var m = -inf`) to f16 beside f16
    scores, as numpy rounds a Python float; the schedules keep the running values in f32."""
    if isinstance(e, cir.Cast) and isinstance(e.operand, cir.Var) and e.operand.name in state \
            and e.ty.dtype in cir.FLOAT_DTYPES and e.operand.ty.dtype in cir.FLOAT_DTYPES:
        return e.operand
    if isinstance(e, tuple):
        return tuple(_uncast(x, state) for x in e)
    if not isinstance(e, cir.Expr):
        return e
    changes = {f.name: _uncast(getattr(e, f.name), state) for f in fields(e) if f.name != "ty"}
    changes = {k: v for k, v in changes.items() if v is not getattr(e, k)}
    return replace(e, **changes) if changes else e


def _exec(stmts, env: dict, state: set, what: str):
    """Symbolic execution of straight-line statements: immutable lets are inlined into
    `env`, assignments to the names in `state` become their new values (in terms of the
    values before the statements, casts of them between floats dropped: `_uncast`).
    Returns the assigned names in order."""
    assigned = []
    for s in stmts:
        if isinstance(s, cir.Let) and not s.mutable:
            env[s.name] = _uncast(substitute(s.value, env), state)
        elif isinstance(s, cir.Assign) and s.name in state:
            env[s.name] = _uncast(substitute(s.value, env), state)
            if s.name not in assigned:
                assigned.append(s.name)
        elif (new := _max_by_if(s, env, state)) is not None:
            name = s.then[0].name
            env[name] = new
            if name not in assigned:
                assigned.append(name)
        else:
            raise _No(f"{what} holds a statement other than lets and updates of the running values")
    return assigned


def _max_by_if(s, env: dict, state: set):
    """max(m, x) where `s` is `if x > m: m = x` (or `m < x`, `>=`, `<=`) on a running value
    m, with the values before `s`; else None."""
    if not (isinstance(s, cir.If) and not s.orelse and len(s.then) == 1 and
            isinstance(s.then[0], cir.Assign) and s.then[0].name in state and
            isinstance(s.cond, cir.Bin) and s.cond.op in (">", ">=", "<", "<=")):
        return None
    name = s.then[0].name
    x = substitute(s.then[0].value, env)
    m = substitute(cir.Var(name, x.ty), env)
    big, small = (s.cond.left, s.cond.right) if s.cond.op in (">", ">=") else (s.cond.right, s.cond.left)
    big, small = substitute(big, env), substitute(small, env)
    if canon(big) != canon(x) or canon(small) != canon(m):
        return None
    return cir.Call("max", (m, x), x.ty)


def _rename(e, old: str, new: str):
    return substitute(e, {old: cir.Var(new, cir.Ty("i32"))})


def _leading_lets(stmts: list, env: dict) -> dict:
    """Pops the lets that begin `stmts`: immutable ones are inlined into `env`; returns the
    mutable ones (running values), name -> initial value."""
    state = {}
    while stmts and isinstance(stmts[0], cir.Let):
        s = stmts.pop(0)
        if s.mutable:
            state[s.name] = substitute(s.value, env)
        else:
            # a let before the loop that updates the running values reads their initial
            # values (`let l0 = l` is 0, not the running sum)
            env[s.name] = substitute(s.value, {**env, **state})
    return state


def _float_input(kernel, name: str, rank: int, floats: bool = True) -> bool:
    """`name` is an input of `rank` axes (of a float dtype where `floats`)."""
    b = next((x for x in kernel.inputs if x.name == name), None)
    return b is not None and len(b.shape) == rank and (not floats or b.dtype in cir.FLOAT_DTYPES)


def _roles(rows: list, k_groups: list) -> tuple:
    """(batch, head) of the variables a Q row shares with its K row (`rows`, in Q's order),
    None for an axis the tensors lack: one shared axis is the head's, of two the head is
    the one K divides by a group (grouped-query heads), else the second."""
    if len(rows) == 1:
        return None, rows[0]
    if len(rows) == 2:
        grouped = [n for n, g in zip(rows, k_groups) if g is not None]
        h = grouped[0] if len(grouped) == 1 else rows[1]
        return next(n for n in rows if n != h), h
    return None, None


def _running_max(names, state: dict) -> str:
    """The one of `names` whose initial value (`state`) is -inf: the running maximum."""
    m = next((n for n in names if _is_const(state.get(n), -math.inf)), None)
    if m is None:
        raise _No("the running maximum does not start at -inf")
    return m


def _max_of(new, m: str):
    """x where `new` is max(m, x) or max(x, m), else None."""
    if not (isinstance(new, cir.Call) and new.fn == "max" and len(new.args) == 2):
        return None
    a, b = new.args
    if isinstance(a, cir.Var) and a.name == m:
        return b
    return a if isinstance(b, cir.Var) and b.name == m else None


# ----------------------------------------------------------------------- attention

_J = "%j"        # the key variable, renamed alike in every key loop


@dataclass
class _KeyLoop:
    stop: cir.Expr
    cond: object          # canonical form (key var renamed) or None
    cond_expr: cir.Expr | None
    var: str
    updates: dict         # state name -> new value, key variable renamed %j


def _key_loop(lp: cir.Loop, state: set, outer_env: dict) -> _KeyLoop:
    if not _unit_loop(lp):
        raise _No("a key loop does not run from 0 in steps of 1")
    body, cond = lp.body, None
    if len(body) == 1 and isinstance(body[0], cir.If) and not body[0].orelse:
        cond, body = substitute(body[0].cond, outer_env), body[0].then
    env = dict(outer_env)
    names = _exec(body, env, state, "a key loop")
    if not names:
        raise _No("a key loop updates no running value")
    ups = {n: _rename(env[n], lp.var, _J) for n in names}
    c = _rename(cond, lp.var, _J) if cond is not None else None
    return _KeyLoop(lp.stop, canon(c), cond, lp.var, ups)


class _Att:
    """The facts gathered while matching one attention body."""

    def __init__(self, kernel, chain_vars):
        self.k = kernel
        self.chain_vars = chain_vars
        self.score = None           # canonical score (key var %j)
        self.kv_group = None        # K's and V's head is h / kv_group (grouped-query heads)
        self.parts = None           # (Q, K, b, h, i, scale)
        self.key = None             # (stop canon, cond canon)
        self.key_loop = None
        self.bias = None            # the score's added term (key var %j), if any
        self.keep = None            # the score's kept condition (key var %j), if any

    def check_score(self, s):
        """`s` (key variable %j) is dot(Q[b, h, i], K[b, h, %j]) * launch constant, plus
        any terms without a dot product (the bias), where a kept condition holds and -inf
        elsewhere where it is `where(cond, ..., -inf)`."""
        keep, kept = _kept_score(s)
        terms = _sum_terms(kept)
        with_dot = [t for t in terms if _has_dot(t[1])]
        if len(with_dot) != 1 or with_dot[0][0] != 1:
            raise _No("the score is not one dot(Q row, K row) times a constant")
        bias = [t for t in terms if t is not with_dot[0]]
        nums, dens = _mul_factors(with_dot[0][1])
        dots = [x for x in nums if isinstance(x, cir.Dot)]
        if len(dots) != 1:
            raise _No("the score is not one dot(Q row, K row) times a constant")
        rest = [x for x in nums if x is not dots[0]]
        d = dots[0]
        # a row scaled inside the dot (`dot(Q[b, h, i] * 0.125, K[b, h, j])`) scales the score
        qk = []
        for row in (d.a, d.b):
            row_n, row_d = _mul_factors(row)
            loaded = [x for x in row_n if isinstance(x, cir.Load)]
            qk.append(loaded[0] if len(loaded) == 1 else row)
            if len(loaded) == 1:
                rest += [x for x in row_n if x is not loaded[0]]
                dens = dens + row_d
        for x in rest + dens:
            if not is_launch_constant(x, self.k):
                raise _No("the score's scale is not a launch constant")
        if not all(isinstance(x, cir.Load) and 1 <= len(x.index) <= 3 and
                   all(_grouped(t, self.k)[0] for t in x.index) for x in qk):
            raise _No("the score is not dot(Q[b, h, i], K[b, h, j])")
        kl = [x for x in qk if _J in [_grouped(t, self.k)[0] for t in x.index]]
        if len(kl) != 1:
            raise _No("the score's K row is not indexed by the key variable")
        kload = kl[0]
        qload = qk[1] if kload is qk[0] else qk[0]
        if not all(isinstance(t, cir.Var) for t in qload.index):
            raise _No("the score is not dot(Q[b, h, i], K[b, h, j])")
        qn, kn = [t.name for t in qload.index], [_grouped(t, self.k)[0] for t in kload.index]
        only_q = [n for n in qn if n not in kn]
        if len(set(qn)) != len(qn) or len(set(kn)) != len(kn) or len(qn) != len(kn) or \
                len(only_q) != 1 or not set(qn) <= set(self.chain_vars) or \
                set(kn) - {_J} != set(qn) - set(only_q):
            raise _No("the score's Q and K rows are not [b, h, query] and [b, h, key] of the parallel loops")
        i = only_q[0]
        shared = [n for n in qn if n != i]
        b, h = _roles(shared, [_grouped(kload.index[kn.index(n)], self.k)[1] for n in shared])
        pos = lambda names, n: None if n is None else names.index(n)
        self.q_axes = (pos(qn, b), pos(qn, h), qn.index(i))
        self.k_axes = (pos(kn, b), pos(kn, h), kn.index(_J))
        groups = [t for t in kload.index if _grouped(t, self.k)[1] is not None]
        head_group = None if h is None else _grouped(kload.index[self.k_axes[1]], self.k)[1]
        if len(groups) != (head_group is not None):
            raise _No("the score's K row divides another index than the head's")
        self.kv_group = head_group
        self.rank = len(qn) + 1
        if not (_float_input(self.k, qload.buffer, self.rank) and _float_input(self.k, kload.buffer, self.rank)):
            raise _No(f"Q and K are not {self.rank}-D float inputs")
        bias_expr = _sum_of(bias)
        if bias_expr is not None:
            names = free_vars(bias_expr)
            if not names <= _constants(self.k) | {b, h, i, _J} - {None} or \
                    any(ld.buffer == self.k.output.name for ld in loads(bias_expr)):
                raise _No("the score's added term depends on more than b, h, query, key and inputs")
        if keep is not None and (not free_vars(keep) <= _constants(self.k) | {b, h, i, _J} - {None} or
                                 any(ld.buffer == self.k.output.name for ld in loads(keep))):
            raise _No("the score's condition depends on more than b, h, query, key and inputs")
        parts = (qload.buffer, kload.buffer, b, h, i, canon(_product(rest, dens)), self.q_axes,
                 self.k_axes, canon(head_group), canon(bias_expr), canon(keep))
        if self.parts is not None and self.parts != parts:
            raise _No("the key loops compute different scores")
        if self.parts is None:
            self.scale = _product(rest, dens)
            self.bias = bias_expr
            self.keep = keep
        self.parts = parts
        self.score = canon(s)

    def key_range(self, kl: _KeyLoop):
        key = (canon(kl.stop), kl.cond)
        if self.key is not None and self.key != key:
            raise _No("the key loops differ in their range or condition")
        if self.key is None:
            self.key_loop = kl
        self.key = key


def _kept_score(s) -> tuple:
    """(cond, x) where `s` is where(cond, x, -inf), or where(c, -inf, x) with cond `not c`
    (nested ones joined by `and`): x where cond holds, -inf elsewhere; (None, s) otherwise."""
    if isinstance(s, cir.Select):
        for x, other, flip in ((s.if_true, s.if_false, False), (s.if_false, s.if_true, True)):
            if _is_const(other, -math.inf) and _has_dot(x):
                cond = cir.Unary("not", s.cond, s.cond.ty) if flip else s.cond
                inner, x = _kept_score(x)
                return (cond if inner is None else cir.Bin("and", cond, inner, s.cond.ty)), x
    return None, s


def _max_update(att: _Att, kl: _KeyLoop, m: str):
    """kl updates m to max(m, score); returns the canonical new m."""
    new = kl.updates[m]
    s = _max_of(new, m)
    if s is None:
        raise _No("the running maximum is not m = max(m, score)")
    att.check_score(s)
    return canon(new)


def _online(att, kl, m, l, extra=None):
    """kl is one online-softmax step over (m, l[, extra = (name, value factor canon)])."""
    M = _max_update(att, kl, m)
    S = att.score
    alpha = c_fn("exp", c_sub(c_var(m), M))
    p = c_fn("exp", c_sub(S, M))
    if canon(kl.updates[l]) != c_nary("+", c_nary("*", alpha, c_var(l)), p):
        raise _No("the running sum is not l = exp(m - m_new) * l + exp(score - m_new)")
    if extra is not None:
        acc, val = extra
        if acc not in kl.updates:
            raise _No("the weighted sum is not updated in the key loop")
        got = canon(kl.updates[acc])
        if got == c_nary("+", c_var(acc), c_nary("*", p, val)):
            raise _No("the output sum is not rescaled by exp(m - m_new)")
        if got != c_nary("+", c_nary("*", alpha, c_var(acc)), c_nary("*", p, val)):
            raise _No("the output sum is not acc = exp(m - m_new) * acc + exp(score - m_new) * V")


def _recognised(pattern: str, match, kernel: cir.Kernel):
    """match(kernel), or the `NoMatch` of `pattern` that says why not."""
    try:
        return match(kernel)
    except _No as exc:
        return NoMatch(pattern, str(exc))
    except _UNEXPECTED as exc:      # a shape this recogniser does not know: not the pattern
        return NoMatch(pattern, f"a form the recognition does not read ({type(exc).__name__})")


def attention(kernel: cir.Kernel):
    """`Attention`, `FlashAttention` or `NoMatch` for `kernel`'s body."""
    return _recognised("attention", _any_attention, kernel)


def _any_attention(kernel):
    loops, body = _chain(kernel)
    if any(not _is_const(lp.step, 1) for lp in loops):
        return _flash(kernel, loops, body)
    return _attention(kernel, loops, body)


def _attention(kernel, loops, body):
    # the parallel loops run over (batch, head, query) in any order, either missing (3-D
    # or 2-D tensors), and over head_dim too where each thread computes one output value
    if not 1 <= len(loops) <= 4:
        raise _No("not a parallel (batch, head, query) loop nest")
    for lp in loops:
        if not _unit_loop(lp) or not is_launch_constant(lp.stop, kernel):
            raise _No("the parallel loops do not run from 0 in steps of 1 to a launch constant")
    out = kernel.output
    if out.dtype not in cir.FLOAT_DTYPES:
        raise _No("the output is not a float tensor")
    stmts = list(body)
    if stmts and isinstance(stmts[-1], cir.Store):
        stmts[-1] = _row_store(stmts[-1], out)
    if stmts and isinstance(stmts[-1], cir.Store) and len(stmts[-1].index) == len(out.shape) - 1:
        # for b, h, i: one-pass online softmax over a row tile, out[b, h, i] = acc / l
        return _one_pass(kernel, _Att(kernel, [lp.var for lp in loops]), loops, None, stmts)
    if stmts and isinstance(stmts[-1], cir.Store):
        # for b, h, i, d (any order): one-pass online softmax per element, d the store's last index
        d = stmts[-1].index[-1] if stmts[-1].index else None
        d_loop = next((lp for lp in loops if isinstance(d, cir.Var) and lp.var == d.name), None)
        if d_loop is None:
            raise _No("the result is not stored at the head_dim index of a parallel loop")
        par = [lp for lp in loops if lp is not d_loop]
        return _one_pass(kernel, _Att(kernel, [lp.var for lp in par]), par, d_loop, stmts)
    att = _Att(kernel, [lp.var for lp in loops])
    if len(stmts) == 1 and isinstance(stmts[0], cir.Loop) and _unit_loop(stmts[0]):
        return _one_pass(kernel, att, loops, stmts[0], list(stmts[0].body))
    env: dict = {}
    state: dict = {}                  # mutable name -> init
    # three-pass / online-stats: running statistics, then for d: weighted sum
    stats: list = []
    updated: set = set()              # running values a key loop before this point updates
    while stmts and not (isinstance(stmts[0], cir.Loop) and any(isinstance(x, cir.Loop) for x in stmts[0].body)):
        s = stmts.pop(0)
        if isinstance(s, cir.Let) and s.mutable:
            state[s.name] = substitute(s.value, env)
        elif isinstance(s, cir.Let):
            # a running value no key loop has updated yet is still its initial value
            env[s.name] = substitute(s.value, {**env, **{n: v for n, v in state.items()
                                                        if n not in updated}})
        elif isinstance(s, cir.Loop):
            stats.append(_key_loop(s, set(state), env))
            if set(stats[-1].updates) & updated:
                raise _No("two key loops update the same running value")
            updated |= set(stats[-1].updates)
        else:
            raise _No("the statistics part holds a statement other than lets and key loops")
    if len(stmts) != 1:
        raise _No("the body does not end with the loop over head_dim")
    d_loop = stmts[0]
    if not _unit_loop(d_loop):
        raise _No("the loop over head_dim does not run from 0 in steps of 1")
    if not stats:
        raise _No("no key loop computes the running maximum")
    m = _running_max(stats[0].updates, state)
    if len(stats) == 2:
        form = "three-pass"
        if set(stats[0].updates) != {m}:
            raise _No("the first key loop updates more than the running maximum")
        _max_update(att, stats[0], m)
        att.key_range(stats[0])
        (l,) = list(stats[1].updates) if len(stats[1].updates) == 1 else (None,)
        if l is None or l == m or not _is_const(state.get(l), 0.0):
            raise _No("the second key loop is not a sum starting at 0")
        if canon(stats[1].updates[l]) != c_nary("+", c_var(l), c_fn("exp", c_sub(att.score, c_var(m)))):
            raise _No("the second key loop is not the softmax denominator l += exp(score - m)")
        att.key_range(stats[1])
    elif len(stats) == 1:
        form = "online-stats"
        names = list(stats[0].updates)
        if len(names) != 2 or m not in names:
            raise _No("the statistics loop does not update exactly the maximum and the sum")
        l = names[1] if names[0] == m else names[0]
        if not _is_const(state.get(l), 0.0):
            raise _No("the running sum does not start at 0")
        _online(att, stats[0], m, l)
        att.key_range(stats[0])
    else:
        raise _No("the statistics part has more than two key loops")
    # for d: var acc = 0; for j: acc += exp(s - m) [/ l] * V[b, h, j, d]; out[b, h, i, d] = acc [/ l]
    dv = d_loop.var
    db = list(d_loop.body)
    denv = dict(env)
    dstate = _leading_lets(db, denv)
    if len(db) != 2 or not isinstance(db[0], cir.Loop) or not isinstance(db[1], cir.Store):
        raise _No("the loop over head_dim is not `acc = 0; for key: acc += ...; out[...] = acc`")
    if len(dstate) != 1:
        raise _No("the loop over head_dim does not keep exactly one running sum")
    (acc, a0), = dstate.items()
    if not _is_const(a0, 0.0):
        raise _No("the weighted sum does not start at 0")
    kl = _key_loop(db[0], {acc}, denv)
    if set(kl.updates) != {acc}:
        raise _No("the weighted-sum loop updates more than its sum")
    att.key_range(kl)
    upd = kl.updates[acc]
    if not (isinstance(upd, cir.Bin) and upd.op == "+"):
        raise _No("the weighted sum is not acc += weight * V")
    term = upd.right if isinstance(upd.left, cir.Var) and upd.left.name == acc else \
        upd.left if isinstance(upd.right, cir.Var) and upd.right.name == acc else None
    if term is None:
        raise _No("the weighted sum is not acc += weight * V")
    b, h, i = att.parts[2:5]
    st = db[1]
    vload = _check_value_sum(att, kernel, term, substitute(st.value, denv), acc, b, h, dv, m, l)
    o_axes = _check_store(st, out.name, [b, h, i], dv)
    return _result(kernel, att, form, loops, vload, d_loop.stop, "zero" if vload[1] else "nan",
                   o_axes)


def _check_value_sum(att, kernel, term, stored, acc, b, h, dv, m, l):
    """term * (stored / acc) == exp(score - m) * V[b, h, j, d] / l."""
    tn, td = _mul_factors(term)
    sn, sd = _mul_factors(stored)
    accs = [x for x in sn if isinstance(x, cir.Var) and x.name == acc]
    if len(accs) != 1:
        raise _No("the stored value is not the weighted sum (times constants)")
    sn = [x for x in sn if x is not accs[0]]
    vl = [x for x in tn if isinstance(x, cir.Load) and x.buffer not in (att.parts[0], att.parts[1])]
    if len(vl) != 1:
        raise _No("the weighted sum does not take one value V[b, h, key, d]")
    v = vl[0]
    v_axes = _value_axes(kernel, v, b, h, dv, att.kv_group)
    want_n = [cir.Call("exp", (cir.Bin("-", _FromCanon(att.score), cir.Var(m, F32), F32),), F32), v]
    want_d = [cir.Var(l, F32)]
    got_n = [x for x in tn + sn if x is not v] + [v]
    if not _same_multiset(got_n, want_n) or not _same_multiset(td + sd, want_d):
        raise _No("the weights are not exp(score - m) / l")
    # the division by l inside the key loop leaves 0 for a row without keys
    inside = any(isinstance(x, cir.Var) and x.name == l for x in td)
    return v.buffer, inside, v_axes


def _grouped(t, kernel) -> tuple:
    """(variable, group) of an index `x` (group None) or `x / group`, a positive integer
    launch constant (grouped-query heads); (None, None) of any other index."""
    if isinstance(t, cir.Var):
        return t.name, None
    if isinstance(t, cir.Bin) and t.op == "/" and isinstance(t.left, cir.Var) and \
            t.ty.dtype in cir.INT_DTYPES and is_launch_constant(t.right, kernel):
        c = t.right.value if isinstance(t.right, cir.Const) else None
        if c is None or (not isinstance(c, bool) and c > 0):
            return t.left.name, t.right
    return None, None


def _value_axes(kernel, v: cir.Load, b: str, h: str, dv: str | None, group) -> tuple:
    """The axes of b, h and the key in `v`, a load V[b, h, key (any order, b or h absent
    where Q's row lacks them), d] of an input (its row V[b, h, key] where `dv` is None),
    its head `h / group` where K's is (grouped-query heads)."""
    named = [_grouped(t, kernel) for t in v.index] + ([] if dv else [(None, None)])
    names = [n for n, _ in named]
    rows = [x for x in (b, h, _J) if x is not None]
    if len(names) != len(rows) + 1 or names[-1] != dv or sorted(map(str, names[:-1])) != sorted(rows):
        raise _No("the value is not V[b, h, key, d]")
    if any(g is not None for n, g in named if n != h) or \
            (h is not None and canon(named[names.index(h)][1]) != canon(group)):
        raise _No("the value's head is not the key's (h, or h / the same group)")
    if not _float_input(kernel, v.buffer, len(names), floats=False):
        raise _No(f"V is not a {len(names)}-D input")
    return tuple(None if n is None else names.index(n) for n in (b, h, _J))


def _check_store(st: cir.Store, out: str, bhi: list, dv: str | None) -> tuple:
    """st stores to out[b, h, i (any order, b or h None where absent), d] (the row
    out[b, h, i] where `dv` is None); returns the axes of b, h, i (None for an absent one)."""
    names = [t.name if isinstance(t, cir.Var) else None for t in st.index] + ([] if dv else [None])
    rows = [n for n in bhi if n is not None]
    if st.buffer != out or len(names) != len(rows) + 1 or names[-1] != dv or \
            sorted(map(str, names[:-1])) != sorted(rows):
        raise _No(f"the result is not stored to {out}[{', '.join(rows)}, {dv}]")
    return tuple(None if n is None else names.index(n) for n in bhi)


def _row_store(st: cir.Store, out: cir.Buffer) -> cir.Store:
    """st, a store to out[b, h, i, 0:E] where 0:E spans out's whole last axis, as the row
    store out[b, h, i] it equals; any other store as it is."""
    if len(st.index) == len(out.shape) and isinstance(st.index[-1], cir.Span):
        dim = out.shape[-1]         # a size's name, a number or an expression
        if isinstance(dim, (str, int)):
            dim = (cir.Var if isinstance(dim, str) else cir.Const)(dim, cir.Ty("i32"))
        if _is_const(st.index[-1].start, 0) and canon(st.index[-1].stop) == canon(dim):
            return replace(st, index=st.index[:-1])
    return st


def _one_pass(kernel, att, loops, d_loop, stmts):
    """for d: var m = -inf; var l = 0; var acc = 0; for key: online step; out = acc / l.
    Without `d_loop` acc is a row, `zeros(head_dim)`, of V's rows, stored to out[b, h, i]."""
    dv = d_loop and d_loop.var
    env: dict = {}
    state = _leading_lets(stmts, env)
    if len(stmts) != 2 or not isinstance(stmts[0], cir.Loop) or not isinstance(stmts[1], cir.Store):
        raise _No("the body is not `running values; for key: ...; out[...] = ...`")
    if len(state) != 3:
        raise _No("the online softmax does not keep a maximum, a sum and a weighted sum")
    kl = _key_loop(stmts[0], set(state), env)
    if set(kl.updates) != set(state):
        raise _No("the key loop does not update the maximum, the sum and the weighted sum")
    m = _running_max(state, state)
    _max_update(att, kl, m)
    others = [n for n in state if n != m]
    b, h, i = att.parts[2:5]
    st = stmts[1]
    sv = substitute(st.value, env)
    sn, sd = _mul_factors(sv)
    if not (len(sn) == 1 and len(sd) == 1 and isinstance(sn[0], cir.Var) and isinstance(sd[0], cir.Var)
            and {sn[0].name, sd[0].name} == set(others)):
        raise _No("the stored value is not the weighted sum divided by the sum")
    acc, l = sn[0].name, sd[0].name
    a0 = state[acc]
    row = d_loop is None and isinstance(a0, cir.Call) and len(a0.args) == 1 and len(a0.ty.shape) == 1
    if not _is_const(state[l], 0.0) or not (_is_zero_tile(a0, kernel, set()) if row else dv and _is_const(a0, 0.0)):
        raise _No("the running sums do not start at 0" + (" and a zero row" if d_loop is None else ""))
    scored = {att.parts[0], att.parts[1]} | {x.buffer for x in loads(att.bias) + loads(att.keep)}
    vl = [x for x in loads(kl.updates[acc]) if x.buffer not in scored]
    if len(vl) != 1:
        raise _No("the value is not V[b, h, key, d]")
    v_axes = _value_axes(kernel, vl[0], b, h, dv, att.kv_group)
    _online(att, kl, m, l, (acc, canon(vl[0])))
    att.key_range(kl)
    o_axes = _check_store(st, kernel.output.name, [b, h, i], dv)
    return _result(kernel, att, "one-pass", loops, (vl[0].buffer, False, v_axes),
                   a0.args[0] if row else d_loop.stop, "nan", o_axes)


def _result(kernel, att, form, loops, vinfo, head_dim, empty_row, o_axes):
    q, k_, b, h, i = att.parts[:5]
    kl = att.key_loop
    stops = {lp.var: lp.stop for lp in loops}
    mask = kl.cond_expr
    if set(stops) != {b, h, i} - {None}:
        raise _No("the parallel loops are not the query row's (batch, head, query)")
    one = cir.Const(1, cir.Ty("i32"))
    if len(kernel.output.shape) != att.rank:
        raise _No(f"the output is not a {att.rank}-D tensor as Q is")
    if not is_launch_constant(kl.stop, kernel):
        raise _No("the key range is not a launch constant")
    causal = False
    if mask is not None:
        if not free_vars(mask) <= _constants(kernel) | {b, h, i, kl.var}:
            raise _No("the key condition depends on more than b, h, query and key")
        if any(ld.buffer == kernel.output.name for ld in loads(mask)):
            raise _No("the key condition reads the output")
        causal = _key_at_most_query(mask, kl.var, i)
    if not _float_input(kernel, vinfo[0], att.rank):
        raise _No("V is not a float input")
    bias = None if att.bias is None else _rename(att.bias, _J, kl.var)
    keep = None if att.keep is None else _rename(att.keep, _J, kl.var)
    return Attention(form=form, q=q, k=k_, v=vinfo[0], out=kernel.output.name,
                     batch_var=b, head_var=h, query_var=i, key_var=kl.var,
                     n_batch=stops.get(b, one), n_heads=stops.get(h, one), n_queries=stops[i],
                     n_keys=kl.stop, head_dim=head_dim, scale=att.scale, mask=mask, causal=causal,
                     empty_row=empty_row, q_axes=att.q_axes, k_axes=att.k_axes,
                     v_axes=vinfo[2], out_axes=o_axes, kv_group=att.kv_group, bias=bias,
                     keep=keep)


def _key_at_most_query(cond, key: str, query: str) -> bool:
    """Whether `cond` is key <= query in any integer form: j <= i, i >= j, j < i + 1,
    j - i <= 0, 2 * j <= 2 * i, not (j > i). As a(j - i) + c <= 0 (a < or a > moved to
    <= by one), that is a > 0 with the largest j - i allowed, floor(-c / a), 0."""
    if isinstance(cond, cir.Unary) and cond.op == "not":
        cond = cir.negated(cond.operand)
    if not (isinstance(cond, cir.Bin) and cond.op in ("<", "<=", ">", ">=")) or \
            not (affine.cir_is_int(cond.left) and affine.cir_is_int(cond.right)):
        return False
    lin = affine.linear(cir.Bin("-", cond.left, cond.right, cond.left.ty))
    if lin is None or set(lin[0]) != {key, query}:
        return False
    a, c = lin[0][key][0], lin[1]
    if lin[0][query][0] != -a:
        return False
    if cond.op in (">", ">="):         # L - R >= 0 is R - L <= 0
        a, c = -a, -c
    if cond.op in ("<", ">"):          # d < 0 is d + 1 <= 0 for integers
        c += 1
    return a > 0 and -c // a == 0


# ------------------------------------------------------------------ flash attention


def _span_of(e, var: str, width: int, stop=None) -> bool:
    """e is Span(var, var + width), or Span(var, min(var + width, stop)) for the `stop` of
    var's loop: the same block, since a slice is clipped to its axis and `match` checks that
    the loop covers the axis."""
    if not isinstance(e, cir.Span) or not (isinstance(e.start, cir.Var) and e.start.name == var):
        return False
    end = c_nary("+", c_var(var), ("C", float(width)))
    if stop is not None and isinstance(e.stop, cir.Call) and e.stop.fn == "min" and len(e.stop.args) == 2:
        return sorted(map(canon, e.stop.args), key=repr) == sorted([end, canon(stop)], key=repr)
    return canon(e.stop) == end


def _flash(kernel, loops, body):
    # (batch, head, query block) in any order, batch or head absent for 3-D or 2-D tensors
    blocked = [lp for lp in loops if not _is_const(lp.step, 1)]
    if len(loops) > 3 or len(blocked) != 1:
        raise _No("not a parallel (batch, head, query block) loop nest")
    lq = blocked[0]
    rows = [lp for lp in loops if lp is not lq]
    for lp in loops:
        if not _is_const(lp.start, 0) or not is_launch_constant(lp.stop, kernel):
            raise _No("the parallel loops do not start at 0 and end at a launch constant")
    if not all(_unit_loop(lp) for lp in rows):
        raise _No("the batch and head loops do not run in steps of 1")
    BQ = _int_const(lq.step)
    if BQ is None or BQ <= 0:
        raise _No("the query blocks are not a positive constant size")
    qb = lq.var
    env: dict = {}
    stmts = list(body)
    state = _leading_lets(stmts, env)
    if not stmts or not isinstance(stmts[0], cir.Loop):
        raise _No("no loop over key blocks follows the running values")
    kv = stmts.pop(0)
    after_env = dict(env)
    for s in stmts[:-1]:
        if not (isinstance(s, cir.Let) and not s.mutable):
            raise _No("statements other than lets follow the key-block loop")
        after_env[s.name] = substitute(s.value, after_env)
    if not stmts or not isinstance(stmts[-1], cir.Store):
        raise _No("the body does not end with the store of the result")
    st = stmts[-1]
    if len(state) != 3:
        raise _No("the body does not keep exactly a running max, a running sum and a running output")
    m = _running_max(state, state)
    if not _is_const(kv.start, 0) or not is_launch_constant(kv.stop, kernel):
        raise _No("the key-block loop does not run from 0 to a launch constant")
    BK = _int_const(kv.step)
    if BK is None or BK <= 0:
        raise _No("the key blocks are not a positive constant size")
    kenv = dict(env)
    names = _exec(kv.body, kenv, set(state), "the key-block loop")
    if set(names) != set(state):
        missing = sorted(set(state) - set(names))
        raise _No(f"the key-block loop does not update {', '.join(missing)}")
    # the running max: m = max(m, row_max(S))
    new_m = kenv[m]
    rm = _max_of(new_m, m)
    if not (isinstance(rm, cir.Call) and rm.fn == "row_max"):
        raise _No("the running maximum is not m = max(m, row_max(S))")
    S = rm.args[0]
    nums, dens = _mul_factors(S)
    mm = [x for x in nums if isinstance(x, cir.Bin) and x.op == "@"]
    if len(mm) != 1:
        raise _No("the scores are not Q_block @ transpose(K_block) times a constant")
    rest = [x for x in nums if x is not mm[0]]
    qt, kt = mm[0].left, mm[0].right
    # a scale applied to the query tile ((Q_block * c) @ transpose(K_block)) is the same
    qn, qd = _mul_factors(qt)
    if len(qn) > 1 or qd:
        tiles = [x for x in qn if x.ty.shape]
        if len(tiles) != 1:
            raise _No("the scores are not Q_block @ transpose(K_block) times a constant")
        qt = tiles[0]
        rest, dens = rest + [x for x in qn if x is not qt], dens + qd
    for x in rest + dens:
        if not is_launch_constant(x, kernel):
            raise _No("the scores' scale is not a launch constant")
    if not (isinstance(kt, cir.Call) and kt.fn == "transpose"):
        raise _No("the scores are not Q_block @ transpose(K_block)")
    kt = kt.args[0]
    # the batch and head of the tiles: the row loops' variables Q's and K's tiles both index
    named_of = lambda ld: [_grouped(t, kernel) for t in ld.index] if isinstance(ld, cir.Load) else []
    qn = [n for n, _ in named_of(qt) if n is not None]
    kg = {n: g for n, g in named_of(kt) if n is not None}
    if sorted(qn) != sorted(lp.var for lp in rows):
        raise _No("the query tile is not indexed by the parallel loops")
    b, h = _roles(qn, [kg.get(n) for n in qn])
    bh = [x for x in (b, h) if x is not None]
    rank = len(bh) + 2

    axes, groups = {}, {}
    loop_stop = {qb: lq.stop, kv.var: kv.stop}

    def tile_axes(index, var, width, role="out"):
        """(axis of b, of h, of the block) of a [b, h, var:var + width] index in any order
        (None for an absent b or h); K's and V's head may be h / group (grouped-query heads)."""
        if len(index) != len(bh) + 1:
            return None
        named = [_grouped(t, kernel) for t in index]
        names = [n for n, _ in named]
        spans = [n for n, t in enumerate(index) if _span_of(t, var, width, loop_stop.get(var))]
        if len(spans) != 1 or any(x not in names for x in bh) or \
                (b is not None and named[names.index(b)][1] is not None):
            return None
        group = None if h is None else named[names.index(h)][1]
        if group is not None and role not in ("k", "v"):
            return None
        groups[role] = group
        return tuple(None if x is None else names.index(x) for x in (b, h)) + (spans[0],)

    def block(ld, var, width, what, role):
        ax = tile_axes(ld.index, var, width, role) if isinstance(ld, cir.Load) else None
        if ax is None or not _float_input(kernel, ld.buffer, rank):
            raise _No(f"{what} is not a block [{', '.join(bh + [f'{var}:{var} + {width}'])}] "
                      f"of a {rank}-D float input")
        axes[role] = ax
        return ld.buffer
    Q = block(qt, qb, BQ, "the query tile", "q")
    K = block(kt, kv.var, BK, "the key tile", "k")
    others = [n for n in state if n != m]
    cS, cM = canon(S), canon(new_m)
    alpha = c_fn("exp", c_sub(c_var(m), cM))
    P = c_fn("exp", c_sub(cS, cM))
    l = next((n for n in others if canon(kenv[n]) == c_nary("+", c_nary("*", alpha, c_var(n)),
                                                              c_fn("row_sum", P))), None)
    if l is None:
        raise _No("the running sum is not l = exp(m - m_new) * l + row_sum(exp(S - m_new))")
    o = next(n for n in others if n != l)
    if not _is_const(state[l], 0.0):
        raise _No("the running sum does not start at 0")
    if not _is_zero_tile(state[o], kernel, {b, h, qb}):
        raise _No("the running output does not start as a zero tile")
    new_o = kenv[o]
    if not (isinstance(new_o, cir.Bin) and new_o.op == "+"):
        raise _No("the running output is not o = exp(m - m_new) * o + exp(S - m_new) @ V_block")
    terms = [new_o.left, new_o.right]
    pv = [t for t in terms if isinstance(t, cir.Bin) and t.op == "@"]
    if len(pv) != 1 or canon(pv[0].left) != P:
        raise _No("the running output does not add exp(S - m_new) @ V_block")
    V = block(pv[0].right, kv.var, BK, "the value tile", "v")
    keep = terms[1] if pv[0] is terms[0] else terms[0]
    if canon(keep) == c_var(o):
        raise _No("the running output is not rescaled by exp(m - m_new)")
    if canon(keep) != c_nary("*", alpha, c_var(o)):
        raise _No("the running output is not rescaled: o = exp(m - m_new) * o + ...")
    if canon(groups["k"]) != canon(groups["v"]):
        raise _No("the key and value tiles are of different heads")
    axes["out"] = tile_axes(st.index, qb, BQ) if st.buffer == kernel.output.name else None
    if axes["out"] is None:
        raise _No(f"the result is not stored to out[{', '.join(bh + [f'{qb}:{qb} + {BQ}'])}]")
    sn, sd = _mul_factors(substitute(st.value, after_env))
    if canon(tuple(sn)) != (c_var(o),) or canon(tuple(sd)) != (c_var(l),):
        raise _No("the stored result is not o / l")
    out = kernel.output
    if len(out.shape) != rank or out.dtype not in cir.FLOAT_DTYPES:
        raise _No(f"the output is not a {rank}-D float tensor")
    stops, one = {lp.var: lp.stop for lp in rows}, cir.Const(1, cir.Ty("i32"))
    clipped = isinstance(state[o], cir.Call) and any(
        isinstance(n, cir.Call) and n.fn == "min" for n in cir.walk(state[o].args))
    return FlashAttention(q=Q, k=K, v=V, out=out.name, batch_var=b, head_var=h, query_var=qb,
                          key_var=kv.var, n_batch=stops.get(b, one), n_heads=stops.get(h, one),
                          n_queries=lq.stop,
                          n_keys=kv.stop, block_q=BQ, block_kv=BK, scale=_product(rest, dens),
                          clipped_tile=clipped, q_axes=axes["q"], k_axes=axes["k"],
                          v_axes=axes["v"], out_axes=axes["out"], kv_group=groups["k"])


# --------------------------------------------------------------------- contraction


def contraction(kernel: cir.Kernel):
    """`Contraction` or `NoMatch`: a parallel nest, `var acc = init`, one serial loop
    `acc += A[..] * B[..]` (times or over launch constants: `scale`), then
    `out[vars] = f(acc)` (f may read inputs at the output's position, e.g. a bias)."""
    return _recognised("a contraction", _contraction, kernel)


def _widened_load(e):
    """A load under an exact widening (f16 or bf16 to f32, ...: an operand the GEMM
    multiplies as it is stored, with the products in the accumulator's type), else `e`."""
    if isinstance(e, cir.Cast) and isinstance(e.operand, cir.Load) and \
            (e.operand.ty.dtype, e.ty.dtype) in EXACT_WIDENING:
        return e.operand
    return e


def _contraction(kernel):
    par, body = _chain(kernel)
    if not par or not all(lp.parallel for lp in par):
        raise _No("not a nest of parallel loops around the accumulation")
    consts = _constants(kernel)
    pvars = [lp.var for lp in par]
    for lp in par:
        if free_vars((lp.start, lp.stop, lp.step)) - consts:
            raise _No("the parallel loops' ranges are not launch constants")
    stmts = list(body)
    if len(stmts) != 3 or not (isinstance(stmts[0], cir.Let) and stmts[0].mutable and
                               isinstance(stmts[1], cir.Loop) and isinstance(stmts[2], cir.Store)):
        raise _No("the body is not `var acc = init; for k: acc += a * b; out[...] = f(acc)`")
    decl, red, st = stmts
    acc = decl.name
    if decl.value.ty.shape or decl.declared_ty.shape:
        raise _No("the accumulator is not a scalar")
    # reduction loops: perfectly nested, serial, launch-constant ranges
    rloops = []
    cur = (red,)
    while len(cur) == 1 and isinstance(cur[0], cir.Loop):
        lp = cur[0]
        if lp.parallel or free_vars((lp.start, lp.stop, lp.step)) - consts:
            raise _No("a reduction loop is parallel or its range is not a launch constant")
        rloops.append(lp)
        cur = lp.body
    rvars = {lp.var for lp in rloops}
    env: dict = {}
    cond = upd = None
    rest = list(cur)
    while rest:
        s_ = rest.pop(0)
        if isinstance(s_, cir.Let) and not s_.mutable and not s_.value.ty.shape:
            env[s_.name] = substitute(s_.value, env)
        elif isinstance(s_, cir.If) and not s_.orelse and not rest and cond is None:
            cond = substitute(s_.cond, env)
            rest = list(s_.then)
        elif isinstance(s_, cir.Assign) and s_.name == acc and not rest:
            upd = s_
        else:
            raise _No("the reduction loop does more than accumulate")
    if upd is None:
        raise _No("the reduction loop does not accumulate")
    is_acc = lambda e: isinstance(e, cir.Var) and e.name == acc
    # acc plus or minus one product, in any order, beside zeros (`acc = 0.0 - a * b + acc`)
    terms = _nonzero_terms(upd.value)
    if [sign for sign, t in terms if is_acc(t)] != [1] or len(terms) != 2:
        raise _No("the reduction is not acc += a * b")
    sign, prod = next((sign, substitute(t, env)) for sign, t in terms if not is_acc(t))
    factors, scale = _factors(prod, kernel)
    if prod.ty.dtype == "f16" and any(not _is_const(f, -1.0) for _, f in scale):
        # f16 arithmetic rounds the scaled product (`A * B * 0.1`) where a GEMM would scale
        # the exact sum: one place apart in half the outputs (the scale after the loop,
        # `out = acc * 0.1`, is numpy's (A @ B) * 0.1 and runs as a GEMM)
        raise _No("a constant factor of f16 products rounds with each product, not the sum")
    if sign < 0:
        scale.append(("*", cir.Const(-1.0, cir.Ty(prod.ty.dtype))))
    if len(factors) != 2:
        raise _No("the reduction is not acc += a * b")
    x, y = (_widened_load(e) for e in factors)
    inputs = {b_.name: b_ for b_ in kernel.inputs}
    for ld in (x, y):
        if not (isinstance(ld, cir.Load) and ld.buffer in inputs and not ld.ty.shape and
                not any(isinstance(i, cir.Span) for i in ld.index)):
            raise _No("the operands are not element loads of inputs")
    if prod.ty.dtype not in cir.FLOAT_DTYPES:
        raise _No("the products are not floats")
    fx, fy = free_vars(x), free_vars(y)
    if acc in fx | fy or (fx | fy) - set(pvars) - rvars - consts:
        raise _No("the operands depend on more than the loop variables and launch constants")
    if cond is not None and (acc in free_vars(cond) or free_vars(cond) - set(pvars) - rvars - consts):
        raise _No("the accumulation's condition depends on more than the loop variables")
    if not rvars & (fx | fy):
        raise _No("no operand depends on the reduction variables")
    init = decl.value
    if free_vars(init) & (rvars | {acc}):
        raise _No("the accumulator's start depends on the reduction")
    # the store: out[P] = f(acc)
    if st.buffer != kernel.output.name or acc in free_vars(st.index) or \
            any(isinstance(i, cir.Span) for i in st.index):
        raise _No("the result is not stored to one element of out")
    value = st.value
    if value.ty.shape or free_vars(value) - {acc} - set(pvars) - consts or \
            any(ld.buffer not in inputs for ld in loads(value)) or \
            any(isinstance(n, (cir.Dot, cir.Reduce)) for n in cir.walk(value)):
        raise _No("the stored value is not a function of the accumulator, the output's "
                  "position and inputs")
    px, py = fx & set(pvars), fy & set(pvars)
    bvars = tuple(p_ for p_ in pvars if p_ in px and p_ in py)
    mvars = tuple(p_ for p_ in pvars if p_ in px and p_ not in py)
    nvars = tuple(p_ for p_ in pvars if p_ in py and p_ not in px)
    if set(pvars) - set(bvars) - set(mvars) - set(nvars):
        raise _No("an output variable indexes neither operand")
    if not mvars or not nvars:
        raise _No("each operand does not contribute an output axis of its own")
    epi = None if canon(value) == c_var(acc) else value
    return Contraction(a=x.buffer, b=y.buffer, out=kernel.output.name, ploops=tuple(par),
                       rloops=tuple(rloops), acc=acc, init=init, a_load=x, b_load=y, cond=cond,
                       store=st, mvars=mvars, nvars=nvars, bvars=bvars, epilogue=epi,
                       scale=tuple(scale))


def _factors(e, kernel) -> tuple:
    """(the factors of the product `e` that vary, [(op, launch-constant factor)]): a scale
    multiplied anywhere in the product or dividing it (`alpha * a * b`, `a * b / 8.0`), a
    negation (`-a * b`) a factor -1. An
    integer product is one factor: `a * b * 0.5` of u8 a, b wraps a * b at 256 before it
    is scaled, which a GEMM multiplying the f32 values of a and b did not."""
    if isinstance(e, cir.Bin) and e.op == "*" and e.ty.dtype in cir.FLOAT_DTYPES:
        (lf, ls), (rf, rs) = _factors(e.left, kernel), _factors(e.right, kernel)
        return lf + rf, ls + rs
    if isinstance(e, cir.Bin) and e.op == "/" and e.ty.dtype in cir.FLOAT_DTYPES and \
            is_launch_constant(e.right, kernel):
        f, sc = _factors(e.left, kernel)
        return f, sc + [("/", e.right)]
    if isinstance(e, cir.Unary) and e.op == "neg" and e.ty.dtype in cir.FLOAT_DTYPES:
        f, sc = _factors(e.operand, kernel)         # -a is a * -1, on the sum (exactly)
        return f, sc + [("*", cir.Const(-1.0, e.ty))]
    terms = _nonzero_terms(e)
    if len(terms) == 1 and terms[0][1] is not e:    # 0.0 - a is -a, a + 0.0 is a
        f, sc = _factors(terms[0][1], kernel)
        return f, sc + ([("*", cir.Const(-1.0, e.ty))] if terms[0][0] < 0 else [])
    if is_launch_constant(e, kernel):
        return [], [("*", e)]
    return [e], []


# ---------------------------------------------------------------------- the pass


def recognise(kernel: cir.Kernel):
    """The pattern `kernel`'s body is (Attention, FlashAttention, Contraction), else the
    NoMatch of the recogniser its kernel type asks for first."""
    kind = kernel.kernel_type.kind
    order = [attention, contraction] if kind in ("attention", "flash_attention") else [contraction, attention]
    first = None
    for fn in order:
        r = fn(kernel)
        if r:
            return r
        first = first or r
    return first


def launch_value(e, sizes: dict) -> float:
    """The value of a launch-constant expression (sizes only) for one binding of the sizes."""
    if isinstance(e, cir.Const):
        return e.value
    if isinstance(e, cir.Var):
        return sizes[e.name]
    if isinstance(e, cir.Cast):
        v = launch_value(e.operand, sizes)
        return float(v) if e.ty.dtype in cir.FLOAT_DTYPES else int(v)
    if isinstance(e, cir.Unary) and e.op == "neg":
        return -launch_value(e.operand, sizes)
    if isinstance(e, cir.Call) and len(e.args) == 1 and e.fn in ("sqrt", "rsqrt", "exp", "log"):
        x = float(launch_value(e.args[0], sizes))
        return {"sqrt": math.sqrt, "rsqrt": lambda v: 1 / math.sqrt(v), "exp": math.exp,
                "log": math.log}[e.fn](x)
    if isinstance(e, cir.Bin) and e.op == "/":
        a, b = launch_value(e.left, sizes), launch_value(e.right, sizes)
        if e.ty.dtype in cir.FLOAT_DTYPES:
            return float(a) / float(b)
    return cir.eval_expr_static(e, sizes)
