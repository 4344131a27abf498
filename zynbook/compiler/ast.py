"""The ZynML syntax tree: small dataclasses, each keeping the source span it came from."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NO_SPAN, Span


@dataclass(eq=False)
class Node:
    span: Span = field(default=NO_SPAN, repr=False, kw_only=True)


# ------------------------------------------------------------------ expressions


@dataclass(eq=False)
class Expr(Node):
    pass


@dataclass(eq=False)
class Name(Expr):
    id: str


@dataclass(eq=False)
class Number(Expr):
    value: int | float


@dataclass(eq=False)
class String(Expr):
    value: str


@dataclass(eq=False)
class Bool(Expr):
    value: bool


@dataclass(eq=False)
class Duration(Expr):
    """`1000ms`, `2s`: kept in seconds."""
    seconds: float
    text: str


@dataclass(eq=False)
class Size(Expr):
    """`1GB`, `512MB`: kept in bytes."""
    nbytes: int
    text: str


@dataclass(eq=False)
class ListLit(Expr):
    items: list


@dataclass(eq=False)
class TupleLit(Expr):
    items: list


@dataclass(eq=False)
class OpRef(Expr):
    """An operator passed as an argument: the `+` of `reduce(+, x)`."""
    op: str


@dataclass(eq=False)
class BinOp(Expr):
    op: str            # + - * / % @ ** < <= > >= == != and or
    left: Expr
    right: Expr


@dataclass(eq=False)
class UnaryOp(Expr):
    op: str            # neg, pos, not
    operand: Expr


@dataclass(eq=False)
class Keyword(Node):
    name: str
    value: Expr


@dataclass(eq=False)
class Call(Expr):
    func: Expr
    args: list
    kwargs: list       # of Keyword


@dataclass(eq=False)
class SliceItem(Node):
    start: Expr | None
    stop: Expr | None
    step: Expr | None = None     # host slices only: numpy's x[a:b:s]


@dataclass(eq=False)
class Index(Expr):
    base: Expr
    items: list        # of Expr | SliceItem


@dataclass(eq=False)
class Attr(Expr):
    base: Expr
    name: str


@dataclass(eq=False)
class Pipe(Expr):
    """`value |> f(args)` means `f(value, args)`."""
    value: Expr
    func: Expr


@dataclass(eq=False)
class Await(Expr):
    future: Expr
    timeout: Expr | None = None
    default: Expr | None = None


@dataclass(eq=False)
class Annotation(Node):
    """`@name(args)`; for `@kernel TYPE(params)` also `kernel` and its args."""
    name: str
    args: list = field(default_factory=list)
    kwargs: list = field(default_factory=list)
    kernel: str | None = None
    kernel_args: list = field(default_factory=list)
    kernel_kwargs: list = field(default_factory=list)
    kernel_span: Span = NO_SPAN


@dataclass(eq=False)
class Compute(Expr):
    inputs: list              # of Expr
    annotations: list         # of Annotation written after compute(...)
    body: list                # of Stmt (annotations inside the body included)


# ------------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt(Node):
    pass


@dataclass(eq=False)
class TypeExpr(Node):
    name: str
    dims: list | None = None   # of Expr


@dataclass(eq=False)
class Let(Stmt):
    names: list               # one name, or several for `let (a, b) = ...`
    value: Expr
    type: TypeExpr | None = None
    destructure: bool = False
    name_spans: list = field(default_factory=list)


@dataclass(eq=False)
class VarDecl(Stmt):
    name: str
    value: Expr
    type: TypeExpr | None = None


@dataclass(eq=False)
class Assign(Stmt):
    target: Expr              # Name, Index or Attr
    op: str                   # = += -= *= /= %=
    value: Expr


@dataclass(eq=False)
class ExprStmt(Stmt):
    expr: Expr


@dataclass(eq=False)
class Yield(Stmt):
    value: Expr               # a TupleLit for (value, index)


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False)
class SharedVar(Stmt):
    name: str
    dims: list
    type: TypeExpr | None = None


@dataclass(eq=False)
class AnnotationStmt(Stmt):
    annotation: Annotation


@dataclass(eq=False)
class Ellipsis(Stmt):
    pass


@dataclass(eq=False)
class Config(Stmt):
    entries: list             # of Keyword


@dataclass(eq=False)
class RangeIter(Node):
    var: str
    start: Expr
    stop: Expr
    step: Expr | None = None


@dataclass(eq=False)
class EachIter(Node):
    var: str
    iterable: Expr


@dataclass(eq=False)
class For(Stmt):
    iters: list               # of RangeIter | EachIter; `for a in .., b in ..:` nests them
    body: list


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list
    orelse: list = field(default_factory=list)


@dataclass(eq=False)
class Param(Node):
    name: str
    type: TypeExpr | None = None


@dataclass(eq=False)
class Pipeline(Stmt):
    name: str
    params: list              # of Param
    returns: TypeExpr | None
    body: list


@dataclass(eq=False)
class Program(Node):
    body: list
    source: str = ""
