"""Compute IR (CIR): the device-independent form of one `compute()` block.

The CIR keeps the loop nest exactly as the user wrote it (that is its meaning); the kernel
type and the annotations ride along as the `Schedule`, which backends may use to pick a
faster implementation but never to change results.

Conventions every backend relies on:

* Sizes are named. `Kernel.dims` lists every size name the body uses (`M`, `seq_len`, ...);
  their values are bound at launch from the input shapes (`Buffer.shape` entries that are
  strings) or from scalar arguments. `Kernel.scalars` are the other scalar arguments
  (`eps`, `stride`, ...), in order.
* `Load(buffer, index)` reads an input, the output or a shared array. An index entry is an
  `Expr` (one position) or a `Span` (a half-open slice `start:stop`, clipped to the axis as
  numpy clips). Trailing axes that are not indexed are taken whole, so `Q[b, h, i]` of a
  rank-4 `Q` is the row vector of head_dim values.
* `Store(buffer, index, value)` writes; an empty index writes the whole buffer.
* Expressions carry their type (`Ty`): dtype and a shape. Scalars have shape `()`; tile
  values (slices, `zeros(64, d)`, `A @ B`) carry symbolic shapes.
* `Loop(parallel=True)` marks loops whose iterations write disjoint parts of the output
  and share no mutable state: GPU backends map them to threads and blocks.
* `Yield` appears only in `reduce` kernels: the value(s) combined by the reduction.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Union

# ----------------------------------------------------------------------------- types

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

Dim = Union[int, str]          # a fixed size or a named one ("?" when not known statically)


@dataclass(frozen=True)
class Ty:
    dtype: str
    shape: tuple = ()

    def __str__(self) -> str:
        if not self.shape:
            return self.dtype
        return f"{self.dtype}[{', '.join(format_dim(d) for d in self.shape)}]"


def format_dim(d) -> str:
    return format_expr(d) if isinstance(d, Expr) else str(d)


# ----------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Const(Expr):
    value: Any              # int, float or bool; float("inf") for `inf`
    ty: Ty


@dataclass(frozen=True)
class Var(Expr):
    """A loop variable, a local, a size name or a scalar argument."""
    name: str
    ty: Ty


@dataclass(frozen=True)
class Span:
    """A slice `start:stop` inside an index (stop exclusive, clipped to the axis)."""
    start: Expr
    stop: Expr


@dataclass(frozen=True)
class Load(Expr):
    buffer: str
    index: tuple            # of Expr | Span
    ty: Ty
    # where each index entry is written (errors.Span), for errors about it; not meaning
    spans: tuple = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Bin(Expr):
    """Binary operator. ops: + - * / % ** @ (tile matmul) < <= > >= == != and or"""
    op: str
    left: Expr
    right: Expr
    ty: Ty
    # where it is written (errors.Span), for an integer division's errors; not meaning
    span: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Unary(Expr):
    """ops: neg, not"""
    op: str
    operand: Expr
    ty: Ty


@dataclass(frozen=True)
class Call(Expr):
    """A builtin function: math (exp, sqrt, rsqrt, tanh, max, ...) and tile operations
    (transpose, row_max, row_sum, zeros, ones). `MATH_FUNCTIONS` and `TILE_FUNCTIONS` list them."""
    fn: str
    args: tuple
    ty: Ty
    weak: bool = False      # zeros/ones without dtype=: typed by what they meet (types.is_weak)
    # where it is written (errors.Span), and the function written there where a pass put
    # another in its place (`1 + tanh(z)` as a sigmoid), for errors about it; not meaning
    span: Any = field(default=None, compare=False, repr=False)
    written: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Dot(Expr):
    """Inner product of two equal-length vectors (e.g. rows `Q[b, h, i]` and `K[b, h, j]`)."""
    a: Expr
    b: Expr
    ty: Ty


@dataclass(frozen=True)
class Reduce(Expr):
    """Reduce a tile or a whole buffer: op in REDUCE_OPS, axis None for all axes."""
    op: str
    input: Expr
    axis: int | None
    ty: Ty


@dataclass(frozen=True)
class Cast(Expr):
    operand: Expr
    ty: Ty


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    if_true: Expr
    if_false: Expr
    ty: Ty


def fresh_name(name: str, taken: set) -> str:
    """`name`, or `name_2`, `name_3`, ... where it is taken; the one returned is taken now."""
    fresh, n = name, 1
    while fresh in taken:
        n += 1
        fresh = f"{name}_{n}"
    taken.add(fresh)
    return fresh


MATH_FUNCTIONS = {
    # name: arity (None = variadic min 2)
    "sin": 1, "cos": 1, "tan": 1, "exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1,
    "rsqrt": 1, "abs": 1, "floor": 1, "ceil": 1, "round": 1, "tanh": 1, "sinh": 1, "cosh": 1,
    "sigmoid": 1, "relu": 1, "silu": 1, "gelu": 1, "erf": 1,
    "pow": 2, "min": None, "max": None, "clamp": 3,
}
TILE_FUNCTIONS = {"transpose": 1, "row_max": 1, "row_sum": 1, "zeros": None, "ones": None,
                  "sum": 1}
REDUCE_OPS = ("+", "*", "min", "max", "and", "or", "argmin", "argmax")


# ------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Stmt:
    pass


@dataclass(frozen=True)
class Let(Stmt):
    name: str
    value: Expr
    mutable: bool = False   # `var` (True) or `let` (False)
    line: int = 0
    ty: Ty | None = None    # a `var` later assigned a wider value (`var m = -inf`, then a
                            # column of maxima) is declared with that type; None: value's

    @property
    def declared_ty(self) -> Ty:
        return self.ty or self.value.ty


@dataclass(frozen=True)
class Assign(Stmt):
    """`name = value` on a local (compound assignments are already expanded)."""
    name: str
    value: Expr
    line: int = 0


@dataclass(frozen=True)
class Store(Stmt):
    buffer: str
    index: tuple            # of Expr | Span; () writes the whole buffer
    value: Expr
    line: int = 0
    spans: tuple = field(default=(), compare=False, repr=False)    # as Load's


@dataclass(frozen=True)
class Loop(Stmt):
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple
    parallel: bool = False
    line: int = 0


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple
    orelse: tuple = ()
    line: int = 0


@dataclass(frozen=True)
class Yield(Stmt):
    """A value for the kernel's reduction; `index` is set for argmin/argmax."""
    value: Expr
    index: Expr | None = None
    line: int = 0


@dataclass(frozen=True)
class SharedAlloc(Stmt):
    """`shared var name[shape]`: scratch memory shared by one parallel iteration's threads."""
    name: str
    shape: tuple
    dtype: str
    line: int = 0


@dataclass(frozen=True)
class Barrier(Stmt):
    line: int = 0


@dataclass(frozen=True)
class Atomic(Stmt):
    """Atomic read-modify-write `buffer[index] op= value` (op in + min max)."""
    op: str
    buffer: str
    index: tuple
    value: Expr
    line: int = 0


@dataclass(frozen=True)
class Check(Stmt):
    """Tile extents that must agree as the kernel runs (passes/tile_loops.py writes them
    where they are known only then): `kind` "@" (equal: the inner sizes of a matmul),
    "broadcast" (equal, or one of them 1: tiles combined elementwise) or "store" (equal, or
    `left`, the value's, 1: a tile stored into a slice). Where they do not, the device fails
    an error site (errflag.TILES) with both extents, as the reference refuses the statement."""
    kind: str
    left: Expr
    right: Expr
    line: int = 0


# --------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Buffer:
    name: str               # as written in the body: `x`, `weights.qkv_proj`
    dtype: str
    shape: tuple            # of Dim
    access: str = "read"    # read | write | readwrite
    # elements from one index of each axis to the next, where the buffer is a strided view
    # (its last axis contiguous) read by a schedule that says it addresses such views
    # (`Program.strided_ok`); None: C-contiguous, strides follow from the shape
    strides: tuple | None = None


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: str


@dataclass(frozen=True)
class KernelType:
    """`kind` is the @kernel name (elementwise, reduce, matmul, batched_matmul, conv2d,
    conv2d_depthwise, attention, flash_attention, fused, or a user name treated as custom);
    `params` holds its parameters, e.g. {"op": "+", "axis": 1} for reduce(+, axis=1)."""
    kind: str
    params: tuple = ()      # sorted (key, value) pairs so the type stays hashable
    # where the @kernel annotation names the type (for errors); not part of the meaning
    span: Any = field(default=None, compare=False, repr=False)

    def param(self, key, default=None):
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class Schedule:
    """Hints from the annotations. They may change speed, never results."""
    workgroup: tuple | None = None      # @workgroup(x, y, z)
    shared_bytes: int | None = None     # @shared(bytes)
    tile: tuple = ()                    # @tile(block_q=64, ...) as sorted pairs
    broadcast: tuple = ()               # @broadcast(name, axis=1) as (name, axis) pairs
    parallel: str | None = None         # @parallel(data|model)
    autotune: bool | None = None        # @autotune: measure the schedule's space (None: not asked)
    # where @tile is written (for errors); not part of the meaning
    tile_span: Any = field(default=None, compare=False, repr=False)
    # config { allow_tf32: true }: f32 contractions may round their operands to TF32 on tensor
    # cores (the one hint that changes results, within TF32's precision; None: exact)
    allow_tf32: bool | None = None


@dataclass(frozen=True)
class Kernel:
    name: str
    kernel_type: KernelType
    inputs: tuple           # of Buffer, in compute(...) order
    output: Buffer          # `out`; shape in terms of dims
    dims: tuple             # size names, sorted
    scalars: tuple          # of Scalar: non-size scalar arguments (eps, ...)
    body: tuple             # of Stmt
    schedule: Schedule = field(default_factory=Schedule)
    source: str = ""        # the ZynML text of the block, for comments in generated code
    first_line: int = 0     # line of the block in the program

    def stable_hash(self, placed: bool = True) -> str:
        """A hash of the meaning and the schedule, not the source text or its position;
        `placed`: with where its accesses are written within the block, which a compiled
        program's error sites point at (errflag), so that one built for a block is not
        used for the same block written with other spacing."""
        text = print_kernel(self, with_source=False)
        if placed:
            text += repr([(s.line - self.first_line, s.column, s.end_line - self.first_line, s.end_column)
                          for n in walk(self.body) for s in _positions(n)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- printer

_PREC = {"or": 1, "and": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "@": 5, "**": 7}


def format_expr(e, prec: int = 0) -> str:
    if isinstance(e, Const):
        v = e.value
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            if v == float("inf"):
                return "inf"
            if v == float("-inf"):
                return "-inf"
            return repr(v)
        return str(v)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Span):
        return f"{format_expr(e.start)}:{format_expr(e.stop)}"
    if isinstance(e, Load):
        if not e.index:
            return e.buffer
        return f"{e.buffer}[{', '.join(format_expr(i) for i in e.index)}]"
    if isinstance(e, Bin):
        p = _PREC[e.op]
        right_p = p + 1 if e.op != "**" else p
        text = f"{format_expr(e.left, p if e.op != '**' else p + 1)} {e.op} {format_expr(e.right, right_p)}"
        return f"({text})" if p < prec else text
    if isinstance(e, Unary):
        if e.op == "neg":
            return f"-{format_expr(e.operand, 6)}"
        text = f"not {format_expr(e.operand, 3)}"
        return f"({text})" if prec > 2 else text
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Dot):
        return f"dot({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Reduce):
        axis = "" if e.axis is None else f", axis={e.axis}"
        return f"reduce({e.op}, {format_expr(e.input)}{axis})"
    if isinstance(e, Cast):
        return f"{e.ty.dtype}({format_expr(e.operand)})"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.if_true)}, {format_expr(e.if_false)})"
    raise TypeError(f"not a CIR expression: {e!r}")


def _format_body(body, indent: int, out: list):
    pad = "  " * indent
    for s in body:
        if isinstance(s, Let):
            kw = "var" if s.mutable else "let"
            out.append(f"{pad}{kw} {s.name}: {s.declared_ty} = {format_expr(s.value)}")
        elif isinstance(s, Assign):
            out.append(f"{pad}{s.name} = {format_expr(s.value)}")
        elif isinstance(s, Store):
            target = s.buffer if not s.index else f"{s.buffer}[{', '.join(format_expr(i) for i in s.index)}]"
            out.append(f"{pad}store {target} = {format_expr(s.value)}")
        elif isinstance(s, Loop):
            kw = "parallel for" if s.parallel else "for"
            step = "" if (isinstance(s.step, Const) and s.step.value == 1) else f" step {format_expr(s.step)}"
            out.append(f"{pad}{kw} {s.var} in {format_expr(s.start)}..{format_expr(s.stop)}{step}:")
            _format_body(s.body, indent + 1, out)
        elif isinstance(s, If):
            out.append(f"{pad}if {format_expr(s.cond)}:")
            _format_body(s.then, indent + 1, out)
            if s.orelse:
                out.append(f"{pad}else:")
                _format_body(s.orelse, indent + 1, out)
        elif isinstance(s, Yield):
            if s.index is None:
                out.append(f"{pad}yield {format_expr(s.value)}")
            else:
                out.append(f"{pad}yield ({format_expr(s.value)}, {format_expr(s.index)})")
        elif isinstance(s, SharedAlloc):
            out.append(f"{pad}shared {s.name}: {s.dtype}[{', '.join(format_dim(d) for d in s.shape)}]")
        elif isinstance(s, Barrier):
            out.append(f"{pad}barrier")
        elif isinstance(s, Check):
            out.append(f"{pad}check {s.kind} {format_expr(s.left)}, {format_expr(s.right)}")
        elif isinstance(s, Atomic):
            out.append(f"{pad}atomic {s.buffer}[{', '.join(format_expr(i) for i in s.index)}] {s.op}= {format_expr(s.value)}")
        else:
            raise TypeError(f"not a CIR statement: {s!r}")


def format_body(body, indent: int = 0) -> str:
    out: list = []
    _format_body(body, indent, out)
    return "\n".join(out)


def _format_buffer(b: Buffer) -> str:
    strides = "" if b.strides is None else f" strides({', '.join(map(str, b.strides))})"
    return f"{b.name}: {b.dtype}[{', '.join(format_dim(d) for d in b.shape)}]{strides}"


def print_kernel(k: Kernel, with_source: bool = True) -> str:
    params = ", ".join(f"{key}={value}" for key, value in k.kernel_type.params)
    ktype = k.kernel_type.kind + (f"({params})" if params else "")
    lines = [f"kernel {k.name} : {ktype}"]
    if with_source and k.first_line:
        lines[0] += f"    // line {k.first_line}"
    lines.append("  in  " + ", ".join(_format_buffer(b) for b in k.inputs))
    lines.append("  out " + _format_buffer(k.output))
    if k.dims:
        lines.append("  dims " + ", ".join(k.dims))
    if k.scalars:
        lines.append("  scalars " + ", ".join(f"{s.name}: {s.dtype}" for s in k.scalars))
    hints = []
    sch = k.schedule
    for f in fields(sch):
        v = getattr(sch, f.name)
        if f.compare and v not in (None, ()):
            hints.append(f"{f.name}={v}")
    if hints:
        lines.append("  schedule " + ", ".join(hints))
    lines.append("  body:")
    lines.append(format_body(k.body, 2))
    return "\n".join(lines)


# ----------------------------------------------------------------------- utilities


def accumulated(st: Assign):
    """(op, term) of a scalar accumulator's update `acc = acc + term`, `acc = term + acc`
    (op "+") or `acc = acc - term` (op "-"), else None."""
    v = st.value
    if not (isinstance(v, Bin) and v.op in ("+", "-") and not v.ty.shape):
        return None
    is_acc = lambda e: isinstance(e, Var) and e.name == st.name and not e.ty.shape
    if is_acc(v.left):
        return v.op, v.right
    if v.op == "+" and is_acc(v.right):
        return "+", v.left
    return None


def unrounded_product(st: Assign):
    """The product `x * y` of two f16 values that the update `st` adds to (or subtracts
    from) its local, else None. The rule of every device and the reference: where `st` is an
    accumulator's, in a loop that its local is declared outside (the caller knows), the
    product is added as it is, not rounded to f16: it is exact in f32 (11-bit significands),
    and numpy's matmul and dot, tensor cores and the GEMM schedules add it so. An f16 `x * y`
    anywhere else is rounded as f16 arithmetic is (numpy's `w - a * c`)."""
    acc = accumulated(st)
    term = acc[1] if acc else None
    if isinstance(term, Bin) and term.op == "*" and not term.ty.shape and \
            term.left.ty == term.right.ty == Ty("f16"):
        return term
    return None


def _positions(node) -> tuple:
    """Where the parts of `node` that a run-time error points at are written."""
    if isinstance(node, (Load, Store)):
        return node.spans
    return (node.span,) if isinstance(node, Bin) and node.span is not None else ()


def stores_into(body, buffer: str) -> list:
    """(store, loops, guarded) of each Store into `buffer` in the statements `body`: the
    loops around it by variable, and whether a condition (either branch) is around it."""
    found = []

    def visit(stmts, loops: dict, guarded: bool):
        for s in stmts:
            if isinstance(s, Loop):
                visit(s.body, {**loops, s.var: s}, guarded)
            elif isinstance(s, If):
                visit(s.then, loops, True)
                visit(s.orelse, loops, True)
            elif isinstance(s, Store) and s.buffer == buffer:
                found.append((s, loops, guarded))
    visit(body, {}, False)
    return found


def walk(node):
    """Yield every CIR statement and expression below `node` (a Kernel, Stmt, Expr or tuple),
    in pre-order. (A stack, not nested generators, which pass each node up through every
    level above it.)"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (tuple, list)):
            stack.extend(reversed(n))
            continue
        if isinstance(n, Kernel):
            stack.append(n.body)
            continue
        if not isinstance(n, (Expr, Stmt, Span)):
            continue
        yield n
        stack.extend(getattr(n, name) for name in reversed(_child_fields(type(n))))


_CHILD_FIELDS: dict = {}


def _child_fields(cls) -> tuple:
    """The fields of a CIR node class that may hold nodes (all but its type), once per class:
    dataclasses.fields() on every visit was most of a walk's time."""
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = _CHILD_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.name != "ty")
    return names


def walk_stmts(body):
    """Yield every statement in `body` (a Stmt or a sequence) and in the bodies nested in it,
    never descending into an expression, which holds no statement: a pass asking which lets or
    shared arrays a loop declares stays linear in the statements (walk() visits each use of a
    shared subexpression, and Philox's rounds reuse theirs)."""
    for s in (body if isinstance(body, (tuple, list)) else (body,)):
        if not isinstance(s, Stmt):
            continue
        yield s
        for name in _child_fields(type(s)):
            v = getattr(s, name)
            if isinstance(v, (tuple, list)):
                yield from walk_stmts(v)


def eval_dim(dim, sizes: dict) -> int:
    """The value of a buffer dimension (int, size name or CIR expression over size names)."""
    if isinstance(dim, int):
        return dim
    if isinstance(dim, str):
        return int(sizes[dim])
    return int(eval_expr_static(dim, sizes))


def eval_expr_static(e, sizes: dict):
    """Evaluate a CIR expression made only of constants, size names and arithmetic."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return sizes[e.name]
    if isinstance(e, Unary) and e.op == "neg":
        return -eval_expr_static(e.operand, sizes)
    if isinstance(e, Bin):
        a, b = eval_expr_static(e.left, sizes), eval_expr_static(e.right, sizes)
        if e.op in ("/", "%") and isinstance(a, int) and isinstance(b, int):
            # C's, as the kernels compute them: truncating, the remainder of the dividend's
            # sign (numbers floored here made out 3 long where the kernel wrote 4)
            if b == 0:
                raise ZeroDivisionError(format_expr(e))
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return q if e.op == "/" else a - b * q
        if e.op == "/":
            return a / b
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "%": lambda: a % b, "**": lambda: a ** b, "==": lambda: a == b}[e.op]()
    if isinstance(e, Select):       # a broadcast extent: the other where one is 1
        return eval_expr_static(e.if_true if eval_expr_static(e.cond, sizes)
                                else e.if_false, sizes)
    if isinstance(e, Cast) and e.ty.dtype in INT_DTYPES:      # i64(n): an integer's value
        v = eval_expr_static(e.operand, sizes)
        if isinstance(v, int):
            return v
    if isinstance(e, Call) and e.fn in ("min", "max"):
        vals = [eval_expr_static(a, sizes) for a in e.args]
        return min(vals) if e.fn == "min" else max(vals)
    raise TypeError(f"not a static size expression: {format_expr(e)}")


def block_span(kernel: "Kernel"):
    """Where an error about a whole block points: its `compute` on its first line."""
    from ..errors import Span
    if not kernel.first_line:
        return None
    first = kernel.source.splitlines()[0] if kernel.source else ""
    at = first.find("compute")
    return Span(kernel.first_line, at + 1 if at >= 0 else len(first) - len(first.lstrip()) + 1)


def check_loop_steps(kernel: "Kernel", sizes: dict) -> None:
    """A loop step that is a size (a host int) must be positive at the launch's sizes, as a
    constant step must be when the block compiles: compiled code would loop forever on a
    step of 0 and run a negative one past its bound."""
    from ..errors import Span, ZynMLTypeError
    for loop in walk(kernel.body):
        if not isinstance(loop, Loop) or isinstance(loop.step, Const):
            continue
        try:
            step = eval_expr_static(loop.step, sizes)
        except (KeyError, TypeError):       # a step over outer loop variables: checked as it runs
            continue
        if step <= 0:
            text = kernel.source.splitlines()
            rel = loop.line - kernel.first_line
            line = text[rel] if 0 <= rel < len(text) else ""
            at = line.find(" step ")
            col = at + len(" step ") + 1 if at >= 0 else len(line) - len(line.lstrip()) + 1
            raise ZynMLTypeError(f"a loop step must be positive, not {step} "
                                 f"(`{format_expr(loop.step)}` at these sizes)",
                                 Span(loop.line, col) if loop.line else None)


def check_tile_sizes(kernel: "Kernel", sizes: dict) -> None:
    """The sizes of `zeros(r, c)` and `ones(r, c)` must be 0 or more at the launch's sizes, as
    numpy's: a constant tile broadcasts, so none of them would fail on its own, and a sum of
    one counts its elements (`sum(ones(k, 3))` of a `k` of -2 was -6, or 1)."""
    from ..errors import ZynMLShapeError
    for e in walk(kernel.body):
        if not (isinstance(e, Call) and e.fn in ("zeros", "ones")):
            continue
        for d in e.args:
            try:
                v = eval_expr_static(d, sizes)
            except (KeyError, TypeError, ZeroDivisionError):   # over loop variables
                continue
            if isinstance(v, int) and v < 0:
                at = "" if isinstance(d, Const) else f" (`{format_expr(d)}` at these sizes)"
                raise ZynMLShapeError(f"{e.fn}() makes a tile of sizes 0 or more, not "
                                      f"{v}{at}", e.span or block_span(kernel))


def _past_its_type(e, sizes: dict):
    """(sub-expression, value) of the first operation of size expression `e` whose value at
    these sizes leaves its integer type (where the kernel's arithmetic wraps), else None."""
    if not isinstance(e, (Bin, Unary, Cast)):
        return None
    for part in ((e.left, e.right) if isinstance(e, Bin) else (e.operand,)):
        hit = _past_its_type(part, sizes)
        if hit is not None:
            return hit
    v = eval_expr_static(e, sizes)
    dt = e.ty.dtype
    if dt in INT_DTYPES and isinstance(v, int) and not isinstance(v, bool):
        bits = int(dt[1:])
        lo, hi = (0, 1 << bits) if dt[0] == "u" else (-(1 << bits - 1), 1 << bits - 1)
        if not lo <= v < hi:
            return e, v
    return None


def check_loop_bounds(kernel: "Kernel", sizes: dict) -> None:
    """A loop bound or out's length computed from sizes must not leave its integer type at
    the launch's sizes: the kernel computes it in that type, where it wraps
    (`n * 1000000000 / 1000000000` ran 0 iterations on some devices and n on others)."""
    from ..errors import Span, ZynMLRuntimeError
    for loop in walk(kernel.body):
        if not isinstance(loop, Loop):
            continue
        for bound, mark, skip in ((loop.start, " in ", 4), (loop.stop, "..", 2)):
            try:
                hit = _past_its_type(bound, sizes)
            except (KeyError, TypeError, ZeroDivisionError):   # over loop variables: as it runs
                continue
            if hit is not None:
                part, v = hit
                text = kernel.source.splitlines()
                rel = loop.line - kernel.first_line
                at = text[rel].find(mark) if 0 <= rel < len(text) else -1
                raise ZynMLRuntimeError(
                    f"the loop bound `{format_expr(bound)}` leaves {part.ty.dtype} at these sizes "
                    f"(`{format_expr(part)}` is {v}); compute it wider, e.g. with i64(...)",
                    Span(loop.line, at + skip + 1 if at >= 0 else 1) if loop.line else None)
    for axis, d in enumerate(kernel.output.shape):
        try:
            hit = _past_its_type(d, sizes) if isinstance(d, Expr) else None
        except (KeyError, TypeError, ZeroDivisionError):    # output_shape says what is wrong
            continue
        if hit is not None:
            raise ZynMLRuntimeError(
                f"out's axis {axis}, `{format_expr(d)}` long, leaves {hit[0].ty.dtype} at these "
                f"sizes (`{format_expr(hit[0])}` is {hit[1]}); compute its indices wider, e.g. "
                f"with i64(...)", block_span(kernel))


def _static_or_none(e, sizes: dict):
    try:
        return eval_expr_static(e, sizes)
    except (KeyError, TypeError, ZeroDivisionError):    # over loop variables, locals, data
        return None


def _range_of(e, ranges: dict, sizes: dict) -> tuple:
    """(least, greatest) integer value of `e` over the values the loop variables and the
    locals in `ranges` (name -> (least, greatest)) take, at these sizes; None for a side
    not known (data, a float, a division of a loop variable)."""
    static = _static_or_none(e, sizes)
    if isinstance(static, int) and not isinstance(static, bool):
        return static, static
    if isinstance(e, Var):
        return ranges.get(e.name, (None, None))
    if isinstance(e, Unary) and e.op == "neg":
        lo, hi = _range_of(e.operand, ranges, sizes)
        return (None if hi is None else -hi), (None if lo is None else -lo)
    if not isinstance(e, Bin) or e.op not in ("+", "-", "*"):
        return None, None
    (a, b), (c, d) = _range_of(e.left, ranges, sizes), _range_of(e.right, ranges, sizes)
    known = lambda *v: None not in v
    if e.op == "+":
        return (a + c if known(a, c) else None), (b + d if known(b, d) else None)
    if e.op == "-":
        return (a - d if known(a, d) else None), (b - c if known(b, c) else None)
    if not known(a, b, c, d):
        return None, None
    products = (a * c, a * d, b * c, b * d)
    return min(products), max(products)


def _never_true(cond, ranges: dict, sizes: dict) -> bool:
    """Whether `cond` (`i < E`, `b * 64 + t + 2 < n`, `n > i`, `and`s of them, `not`s) is
    false for every value the loop variables and locals in `ranges` take at these sizes."""
    if isinstance(cond, Unary) and cond.op == "not":
        neg = negated(cond.operand)
        return neg is not None and _never_true(neg, ranges, sizes)
    if isinstance(cond, Bin) and cond.op == "and":
        return _never_true(cond.left, ranges, sizes) or _never_true(cond.right, ranges, sizes)
    if not (isinstance(cond, Bin) and cond.op in ("<", "<=", ">", ">=")):
        return False
    small, large = (cond.left, cond.right) if cond.op in ("<", "<=") else \
        (cond.right, cond.left)
    least, greatest = _range_of(small, ranges, sizes)[0], _range_of(large, ranges, sizes)[1]
    if least is None or greatest is None:
        return False
    return least >= greatest if cond.op in ("<", ">") else least > greatest


_OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def negated(cond):
    """`not cond` as comparisons where it is one or a conjunction of them (`not (i >= n)` is
    `i < n`; `not (a or b)` is `not a and not b`), for reasoning about integer indices (a
    float comparison's NaN is not considered); None where it is neither (`not (a and b)`)."""
    if isinstance(cond, Unary) and cond.op == "not":
        return cond.operand
    if isinstance(cond, Bin) and cond.op in _OPPOSITE:
        return Bin(_OPPOSITE[cond.op], cond.left, cond.right, cond.ty)
    if isinstance(cond, Bin) and cond.op == "or":
        left, right = negated(cond.left), negated(cond.right)
        return None if left is None or right is None else Bin("and", left, right, cond.ty)
    return None


def _writes_out(body, sizes: dict, ranges: dict | None = None) -> bool:
    """Whether a write of out in `body` may run at these sizes: not when every one sits in a
    loop whose bounds, known from the sizes, leave it no iteration (`0..n - 2` at n = 1),
    or under an `if` that no value of the loops' variables passes there (`if i < n - 2`,
    also of a tiled index: `let i = b * 64 + t` then `if i + 2 < n`). `ranges`: the least
    and greatest value of each loop variable and local around `body`."""
    ranges = dict(ranges or {})
    for s in body:
        if isinstance(s, (Store, Atomic)) and s.buffer == "out":
            return True
        if isinstance(s, Loop):
            start, stop = _static_or_none(s.start, sizes), _static_or_none(s.stop, sizes)
            if start is not None and stop is not None and start >= stop:
                continue
            step = _static_or_none(s.step, sizes)
            # (a loop stepping up runs from its start to below its stop)
            up = isinstance(step, int) and step > 0
            inner = (start if up else None, stop - 1 if up and stop is not None else None)
            if _writes_out(s.body, sizes, {**ranges, s.var: inner}):
                return True
        elif isinstance(s, Let):
            # a `let` holds its value's range; a `var` may change, its range is not known
            ranges[s.name] = (None, None) if s.mutable else _range_of(s.value, ranges, sizes)
        elif isinstance(s, If):
            # a branch whose condition (the else's: the negation) no value passes never runs
            opposite = negated(s.cond)
            taken = [branch for branch, cond in ((s.then, s.cond), (s.orelse, opposite))
                     if cond is None or not _never_true(cond, ranges, sizes)]
            if any(_writes_out(branch, sizes, ranges) for branch in taken):
                return True
    return False


def output_shape(kernel: "Kernel", sizes: dict) -> tuple:
    shape = tuple(eval_dim(d, sizes) for d in kernel.output.shape)
    if any(n < 0 for n in shape) and not _writes_out(kernel.body, sizes):
        # no iteration writes out (a window `0..n - 2` over 1 element): it is empty, as
        # numpy's x[:-2] + x[1:-1] + x[2:] is
        return tuple(max(n, 0) for n in shape)
    for axis, (n, d) in enumerate(zip(shape, kernel.output.shape)):
        if n < 0:
            # every write lands below 0 at these sizes (out[i - 10] with i in 0..6)
            from ..errors import ZynMLShapeError
            raise ZynMLShapeError(
                f"out's axis {axis} would have {n} elements ({format_expr(d) if isinstance(d, Expr) else d} "
                f"at these sizes): out's size comes from its indices, and no write reaches 0 "
                f"or more (out[-1] does not count from the end)", block_span(kernel))
    return shape
