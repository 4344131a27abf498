"""The static checker: what can be refused before any data moves.

It walks the host program with *abstract* values (a tensor's dtype and the sizes known so
far, an int's value when it is a literal), so names resolve, pipelines are called with
the right number of arguments, and every compute block is lowered and its dimensions
solved against whatever shapes the program fixes (`randn([64, 32])`). Names a program
uses but never defines are its inputs, to be bound later; the checker refuses them only
where they cannot be inputs (called as functions, used before their definition, or one
letter away from a defined name).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ..errors import Span, ZynMLError, ZynMLNameError, ZynMLShapeError, ZynMLTypeError
from . import ast as A
from . import cir
from .dims import solve
from .freenames import compute_free_names
from .lower import InputSig, dotted, lower_compute
from .passes.pipeline import run_pipeline
from .types import CONSTANTS, DTYPE_ALIASES, canonical_dtype, int_dtype
from ..runtime.device_ops import DEVICE_OPS, BufferShape, check_call as check_device_call

def _host_builtins() -> set:
    # the host's builtin functions are defined once, where they run
    from ..runtime.builtins import BUILTINS
    return set(BUILTINS) | {"all", "any"}


HOST_BUILTINS = _host_builtins()
# functions only a compute body has: a host program calling one is told where it belongs
# (it read as a misspelling, 'unknown name `barrier`')
KERNEL_ONLY = {"barrier", "dot", "row_max", "row_sum", *cir.MATH_FUNCTIONS} - HOST_BUILTINS


def kernel_only(name: str, span) -> ZynMLNameError:
    return ZynMLNameError(f"{name}() is a function of compute bodies: it belongs inside "
                          "compute(...) { ... }", span)
HOST_CONSTANTS = set(DTYPE_ALIASES) | set(CONSTANTS)
_CONSTRUCTORS = {"zeros", "ones", "randn", "rand"}


@dataclass
class TensorShape:
    """A tensor known only by its dtype and (some of) its sizes; None: not known."""
    dtype: str = "f32"
    shape: tuple | None = None


class Unknown:
    """A value the checker cannot follow (an input, a record field, a call's result)."""


UNKNOWN = Unknown()


@dataclass
class CheckedKernel:
    lowered: object
    node: A.Compute

    @property
    def kernel(self) -> cir.Kernel:
        return self.lowered.kernel


@dataclass
class CheckResult:
    kernels: list = field(default_factory=list)
    free_names: dict = field(default_factory=dict)     # name -> span of first use


class Checker:
    def __init__(self, program: A.Program, source: str, known: dict | None = None):
        self.program = program
        self.source = source
        self.scopes: list = [dict(known or {})]
        self.result = CheckResult()
        self.defined_later = top_level_names(program)
        # names some pipeline assigns: a call, anywhere, may change them
        self.assigned_in_pipelines = _assigned_in_pipelines(program)
        self.kernel_count = 0
        self.pipeline_depth = 0     # inside a pipeline, later top-level names are visible

    # --------------------------------------------------------------- scopes
    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def define(self, name: str, value):
        self.scopes[-1][name] = value

    def all_names(self) -> list:
        names = set(HOST_BUILTINS) | set(HOST_CONSTANTS)
        for s in self.scopes:
            names |= set(s)
        return sorted(names)

    # ----------------------------------------------------------- statements
    def check(self) -> CheckResult:
        self.block(self.program.body)
        return self.result

    def block(self, body):
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        if isinstance(s, A.Let):
            value = self.expr(s.value)
            if s.destructure:
                parts = value if isinstance(value, tuple) and len(value) == len(s.names) else \
                    [UNKNOWN] * len(s.names)
                for n, part in zip(s.names, parts):
                    self.define(n, part)
            else:
                self.define(s.names[0], value)
        elif isinstance(s, A.VarDecl):
            value = self.expr(s.value)
            self.define(s.name, UNKNOWN if s.name in self.assigned_in_pipelines else value)
        elif isinstance(s, A.Assign):
            if isinstance(s.target, A.Name) and self.lookup(s.target.id) is None and \
                    s.target.id in self.defined_later and not self.pipeline_depth:
                raise used_before_defined(s.target.id, s.target.span,
                                          self.defined_later[s.target.id])
            if isinstance(s.target, A.Name) and self.lookup(s.target.id) is None and \
                    s.target.id not in self.defined_later:
                raise ZynMLNameError(f"`{s.target.id}` is not declared; declare it with "
                                     f"`var {s.target.id} = ...`", s.target.span)
            if not isinstance(s.target, A.Name):
                self.expr(s.target)
            self.expr(s.value)
            if isinstance(s.target, A.Name):
                # a var assigned: its value from here on is not followed (an int's value, a
                # buffer's length or a tensor's shape was kept from its declaration, so
                # `var n = 4` then `n = 6` refused alloc(n) as 4 elements long)
                for scope in reversed(self.scopes):
                    if s.target.id in scope:
                        scope[s.target.id] = UNKNOWN
                        break
        elif isinstance(s, A.ExprStmt):
            self.expr(s.expr)
        elif isinstance(s, A.For):
            self.scopes.append({})
            for it in s.iters:
                if isinstance(it, A.RangeIter):
                    for e in (it.start, it.stop, it.step):
                        if e is not None:
                            self.expr(e)
                else:
                    self.expr(it.iterable)
                self.define(it.var, UNKNOWN)
            self.block(s.body)
            self.scopes.pop()
        elif isinstance(s, A.If):
            self.expr(s.cond)
            for body in (s.then, s.orelse):
                self.scopes.append({})
                self.block(body)
                self.scopes.pop()
        elif isinstance(s, A.Pipeline):
            self.define(s.name, s)
            self.scopes.append({})
            self.pipeline_depth += 1
            seen = set()
            for p in s.params:
                if p.name in seen:
                    raise ZynMLTypeError(f"pipeline {s.name} has two parameters named "
                                         f"`{p.name}`", p.span)
                seen.add(p.name)
                self.define(p.name, self.param_value(p))
            self.block(s.body)
            self.pipeline_depth -= 1
            self.scopes.pop()
        elif isinstance(s, A.Return):
            if s.value is not None:
                self.expr(s.value)
        elif isinstance(s, A.Config):
            from ..runtime.interp import CONFIG_KEYS, unknown_config_key
            for kw in s.entries:
                if kw.name not in CONFIG_KEYS:      # (the keys the interpreter sets)
                    raise unknown_config_key(kw)
                self.expr(kw.value)
        elif isinstance(s, A.Yield):
            raise ZynMLTypeError("`yield` belongs inside a reduce kernel's compute body", s.span)
        elif isinstance(s, A.SharedVar):
            raise ZynMLTypeError("`shared var` belongs inside a compute body", s.span)
        elif isinstance(s, A.AnnotationStmt):
            raise ZynMLTypeError(f"@{s.annotation.name} belongs inside or after compute(...)",
                                 s.span)
        elif isinstance(s, A.Ellipsis):
            pass        # elided code in a sketch: nothing to check

    def param_value(self, p: A.Param):
        if p.type is None:
            return UNKNOWN
        if p.type.name == "tensor":
            if p.type.dims is None:
                return TensorShape("f32", None)
            dims = []
            dtype = "f32"
            for d in p.type.dims:
                if isinstance(d, A.Name) and canonical_dtype(d.id):
                    dtype = canonical_dtype(d.id)
                    continue
                dims.append(None)
                if isinstance(d, A.Name):
                    self.define(d.id, UNKNOWN)
            return TensorShape(dtype, tuple(dims))
        return UNKNOWN

    # ---------------------------------------------------------- expressions
    def name(self, e: A.Name):
        v = self.lookup(e.id)
        if v is not None:
            return v
        if e.id in HOST_CONSTANTS:
            return e.id if e.id not in CONSTANTS else 1.0
        if e.id in HOST_BUILTINS:
            return UNKNOWN
        if e.id in self.defined_later:
            if self.pipeline_depth:
                return UNKNOWN
            raise used_before_defined(e.id, e.span, self.defined_later[e.id])
        close = difflib.get_close_matches(e.id, self.all_names(), n=1, cutoff=0.8)
        if close:
            raise ZynMLNameError(f"unknown name `{e.id}`; did you mean `{close[0]}`?", e.span,
                                 unknown=e.id)
        # a free name: an input of the program, bound when it runs
        self.result.free_names.setdefault(e.id, e.span)
        self.scopes[0][e.id] = UNKNOWN
        return UNKNOWN

    def expr(self, e):
        if isinstance(e, A.Number):
            return e.value
        if isinstance(e, (A.String,)):
            return e.value
        if isinstance(e, A.Bool):
            return e.value
        if isinstance(e, (A.Duration, A.Size)):
            return e.seconds if isinstance(e, A.Duration) else e.nbytes
        if isinstance(e, A.Name):
            return self.name(e)
        if isinstance(e, (A.ListLit, A.TupleLit)):
            items = [self.expr(x) for x in e.items]
            return items if isinstance(e, A.ListLit) else tuple(items)
        if isinstance(e, A.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            return self.binary(e, a, b)
        if isinstance(e, A.UnaryOp):
            v = self.expr(e.operand)
            if e.op == "neg" and isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
            return v if isinstance(v, TensorShape) else UNKNOWN
        if isinstance(e, A.Attr):
            self.expr(e.base)
            return UNKNOWN
        if isinstance(e, A.Index):
            base = self.expr(e.base)
            for axis, it in enumerate(e.items):
                if isinstance(it, A.SliceItem):
                    for part in (it.start, it.stop, it.step):
                        self.expr(part) if part is not None else None
                    continue
                value = self.expr(it)
                size = base.shape[axis] if isinstance(base, TensorShape) and base.shape and \
                    axis < len(base.shape) else None
                if isinstance(value, int) and not isinstance(value, bool) and size is not None \
                        and not -size <= value < size:
                    raise ZynMLShapeError(f"index {value} is out of range for axis {axis} of "
                                          f"size {size}", it.span)
            return UNKNOWN if not isinstance(base, TensorShape) else TensorShape(base.dtype, None)
        if isinstance(e, A.Call):
            return self.call(e, [])
        if isinstance(e, A.Pipe):
            value = self.expr(e.value)
            if isinstance(e.func, A.Call):
                return self.call(e.func, [value])
            self.callee(e.func)
            return UNKNOWN
        if isinstance(e, A.Await):
            self.expr(e.future)
            if e.timeout is not None:
                self.expr(e.timeout)
                self.expr(e.default)
            return UNKNOWN
        if isinstance(e, A.Compute):
            return self.compute(e)
        if isinstance(e, A.OpRef):
            raise ZynMLTypeError(f"`{e.op}` is an operator, not a value", e.span)
        return UNKNOWN

    def binary(self, e, a, b):
        if isinstance(a, str) and isinstance(b, (int, float)) and not isinstance(b, bool) or \
                isinstance(b, str) and isinstance(a, (int, float)) and not isinstance(a, bool):
            if e.op not in ("==", "!="):
                bad = e.left if isinstance(a, str) else e.right
                raise ZynMLTypeError(f"cannot apply {e.op} to a string and a number", bad.span)
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and \
                not isinstance(b, bool) and e.op in ("+", "-", "*", "/"):
            if e.op == "/":
                return a // b if b and (a >= 0) == (b > 0) else UNKNOWN
            return {"+": a + b, "-": a - b, "*": a * b}[e.op]
        if isinstance(a, TensorShape) and isinstance(b, TensorShape):
            if e.op == "@" and a.shape and b.shape and len(a.shape) >= 1 and len(b.shape) >= 1:
                inner_a = a.shape[-1]
                inner_b = b.shape[-2] if len(b.shape) > 1 else b.shape[0]
                if inner_a is not None and inner_b is not None and inner_a != inner_b:
                    raise ZynMLShapeError(f"cannot multiply {list(a.shape)} @ {list(b.shape)}: "
                                          "inner sizes differ", e.right.span)
            return TensorShape(a.dtype, None)
        if isinstance(a, TensorShape) or isinstance(b, TensorShape):
            t, other = (a, b) if isinstance(a, TensorShape) else (b, a)
            if e.op in ("<", "<=", ">", ">=", "==", "!="):
                return TensorShape("bool", t.shape)
            # a float number makes an integer tensor float (as the host's arithmetic does)
            integral = t.dtype == "bool" or t.dtype.startswith(("i", "u"))
            dtype = "f32" if isinstance(other, float) and integral else t.dtype
            return TensorShape(dtype, t.shape)
        return UNKNOWN

    def callee(self, func):
        if isinstance(func, A.Name):
            v = self.lookup(func.id)
            if v is not None:
                return v
            if func.id in HOST_BUILTINS:
                return func.id
            if func.id in self.defined_later:
                if self.pipeline_depth:
                    return UNKNOWN
                raise used_before_defined(func.id, func.span, self.defined_later[func.id])
            if func.id in KERNEL_ONLY:
                raise kernel_only(func.id, func.span)
            close = difflib.get_close_matches(func.id, self.all_names(), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ZynMLNameError(f"unknown function `{func.id}`{hint}", func.span)
        self.expr(func)
        return UNKNOWN

    def call(self, e: A.Call, prepend: list):
        fn = self.callee(e.func)
        args = prepend + [self.expr(a) for a in e.args]
        kwargs = {kw.name: self.expr(kw.value) for kw in e.kwargs}
        if isinstance(fn, A.Pipeline):
            if len(args) + len(kwargs) != len(fn.params):
                raise ZynMLTypeError(f"pipeline {fn.name} takes {len(fn.params)} argument(s), "
                                     f"got {len(args) + len(kwargs)}", e.span)
            return UNKNOWN
        if isinstance(fn, TensorShape):
            raise ZynMLTypeError("a tensor is not a function; index it with [...]", e.func.span)
        if isinstance(fn, str) and fn in _CONSTRUCTORS:
            shape = kwargs.get("shape", args[0] if args else None)
            return TensorShape(_dtype(kwargs.get("dtype")), _literal_shape(shape))
        if fn == "arange" and args and all(isinstance(a, (int, float)) and not isinstance(a, bool)
                                           for a in args):
            floats = any(isinstance(a, float) for a in args)
            dtype = _dtype(kwargs.get("dtype")) if "dtype" in kwargs else ("f32" if floats else "i32")
            count = len(range(*args)) if not floats and (len(args) < 3 or args[2]) else None
            return TensorShape(dtype, (count,))
        if fn == "tensor" and args and isinstance(args[0], list):
            return _literal_tensor(args[0], kwargs)
        if fn == "allocate":
            return TensorShape(_dtype(kwargs.get("dtype")), _literal_shape(kwargs.get("shape")))
        if fn == "reshape" and len(args) == 2 and isinstance(args[1], list):
            dtype = args[0].dtype if isinstance(args[0], TensorShape) else "f32"
            return TensorShape(dtype, _literal_shape(args[1]))
        if fn == "split" and args and isinstance(args[0], TensorShape):
            return UNKNOWN
        if isinstance(fn, str) and fn in DEVICE_OPS:      # the compute-device interface
            return check_device_call(fn, args, kwargs, e)
        return UNKNOWN

    # --------------------------------------------------------------- compute
    def compute(self, node: A.Compute):
        sigs, shapes = [], []
        for expr in node.inputs:
            label = dotted(expr)
            if label is None:
                raise ZynMLTypeError("compute() inputs are names (x) or fields (weights.w)",
                                     expr.span)
            value = self.expr(expr)
            if isinstance(value, (int, float, str)) and not isinstance(value, bool):
                raise ZynMLTypeError(f"compute() inputs are tensors; `{label}` is a "
                                     f"{type(value).__name__}", expr.span)
            sigs.append((label, value, expr.span))
        scalars, given, computed = {}, {}, set()
        for label, span in compute_free_names(node).items():
            root = label.split(".")[0]
            value = self.lookup(root)
            if value is None:
                if "." not in label and _rank_in_body(node, label, whole=False):
                    # indexed, so a tensor the host binds later, not a size (it was refused
                    # as 'not an input of this compute block')
                    sigs.append((label, UNKNOWN, span))
                continue                      # a size to infer, or an input bound later
            if "." in label or isinstance(value, TensorShape):
                sigs.append((label, value if "." not in label else UNKNOWN, span))
            elif isinstance(value, bool):
                scalars[label] = "bool"
            elif isinstance(value, int):
                scalars[label] = "i32"
                given[label] = value
            elif isinstance(value, float):
                scalars[label] = "f32"
            elif value is UNKNOWN:
                scalars[label] = "i32"        # most likely a size the program computes
                computed.add(label)
        inputs, known_shapes = [], {}
        for label, value, span in sigs:
            # an input not bound yet is f32, but i32 where the body indexes with it
            # (out[ids[j]] += v[j] was refused: 'an index must be an integer, not f32')
            dtype = value.dtype if isinstance(value, TensorShape) else \
                "i32" if _indexes_with(node, label) else "f32"
            rank = len(value.shape) if isinstance(value, TensorShape) and value.shape is not None \
                else _rank_in_body(node, label)
            inputs.append(InputSig(label, dtype, rank, span))
            if isinstance(value, TensorShape) and value.shape is not None:
                known_shapes[label] = value.shape
        self.kernel_count += 1
        lowered = run_pipeline(lower_compute(node, inputs, scalars, _kernel_name(node),
                                             self.source))
        for kw_ann in ("device",):
            ann = lowered.annotations.get(kw_ann)
            if ann is not None:
                for a in ann.args:
                    v = self.expr(a)
                    if not isinstance(v, (str, list)) and not isinstance(v, Unknown):
                        raise ZynMLTypeError("@device takes a device id string like \"cuda:0\"",
                                             ann.span)
        shapes = {}
        for b in lowered.kernel.inputs:
            label = lowered.labels[b.name]
            shape = known_shapes.get(label)
            if shape is not None and all(d is not None for d in shape):
                shapes[b.name] = shape
        sizes = solve(lowered, shapes, {k: v for k, v in given.items()
                                        if k in lowered.kernel.dims}, partial=True,
                      host_names=computed & set(lowered.kernel.dims))
        self.result.kernels.append(CheckedKernel(lowered, node))
        out = lowered.kernel.output
        if not out.shape:
            return 1.0
        dims = []
        for d in out.shape:
            try:
                dims.append(cir.eval_dim(d, sizes))
            except (KeyError, TypeError, ZeroDivisionError):
                dims.append(None)
        return TensorShape(out.dtype, tuple(dims))


def _dtype(value) -> str:
    return canonical_dtype(value) if isinstance(value, str) and canonical_dtype(value) else "f32"


def _literal_tensor(rows: list, kwargs: dict):
    """tensor() of nested lists of numbers the program writes: their dtype as the host
    infers it (bools bool, any float f32, integers builtins' int rule) and their shape where
    the lists are rectangular; UNKNOWN where an element is not known here."""
    flat, shape = [], []

    def walk(v, depth):
        if isinstance(v, list):
            if len(shape) <= depth:
                shape.append(len(v))
            elif shape[depth] != len(v):
                shape[depth] = None
            for x in v:
                walk(x, depth + 1)
        else:
            flat.append(v)
    walk(rows, 0)
    if not flat or not all(isinstance(v, (bool, int, float)) for v in flat):
        return UNKNOWN
    if "dtype" in kwargs:
        dtype = _dtype(kwargs["dtype"])
    elif all(isinstance(v, bool) for v in flat):
        dtype = "bool"
    elif any(isinstance(v, float) for v in flat):
        dtype = "f32"
    else:
        ints = [int(v) for v in flat]
        dtype = int_dtype(min(ints), max(ints))
    return TensorShape(dtype, tuple(shape) if None not in shape else None)


def _literal_shape(value):
    if isinstance(value, list):
        return tuple(v if isinstance(v, int) and not isinstance(v, bool) else None for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return None


def _rank_in_body(node: A.Compute, label: str, whole: bool = True) -> int:
    """The rank a body implies for `label` (for inputs not bound yet): the most indices it
    takes, plus one where a use leaves a trailing axis (a row for dot(), a tile sliced out),
    and, where `whole`, what a use of the whole input needs (2 for transpose, row_max,
    row_sum and `@`, k + 1 for reduce(op, x, axis=k)); else 0 where it is not indexed."""
    best = 0

    def is_label(a):
        return isinstance(a, (A.Name, A.Attr)) and dotted(a) == label

    def visit(x):
        nonlocal best
        if isinstance(x, A.Call) and isinstance(x.func, A.Name) and x.func.id == "dot":
            for a in x.args:
                if isinstance(a, A.Index) and dotted(a.base) == label:
                    best = max(best, len(a.items) + 1)
        if whole and isinstance(x, A.Call) and isinstance(x.func, A.Name) and \
                any(is_label(a) for a in x.args):
            if x.func.id in ("transpose", "row_max", "row_sum"):
                best = max(best, 2)
            axis = next((kw.value for kw in x.kwargs if kw.name == "axis"), None)
            if x.func.id == "reduce" and isinstance(axis, A.Number) and \
                    isinstance(axis.value, int):
                best = max(best, axis.value + 1)
        if whole and isinstance(x, A.BinOp) and x.op == "@" and \
                (is_label(x.left) or is_label(x.right)):
            best = max(best, 2)
        if isinstance(x, A.Index) and dotted(x.base) == label:
            sliced = any(isinstance(it, A.SliceItem) for it in x.items)
            best = max(best, len(x.items) + (1 if sliced else 0))
        if isinstance(x, A.Node):
            for v in vars(x).values():
                if isinstance(v, list):
                    for item in v:
                        visit(item)
                elif isinstance(v, A.Node):
                    visit(v)

    for s in node.body:
        visit(s)
    return max(best, 1) if whole else best


def _indexes_with(node: A.Compute, label: str) -> bool:
    """Whether the body reads `label` inside an index (`x[ids[j]]`, `out[ids[j]]`)."""
    def reads(x) -> bool:
        if isinstance(x, A.Index) and dotted(x.base) == label:
            return True
        if isinstance(x, A.Node):
            return any(reads(i) for v in vars(x).values()
                       for i in (v if isinstance(v, list) else [v]))
        return False

    def visit(x) -> bool:
        if isinstance(x, A.Index) and any(reads(it) for it in x.items):
            return True
        if isinstance(x, A.Node):
            return any(visit(i) for v in vars(x).values()
                       for i in (v if isinstance(v, list) else [v]))
        return False

    return any(visit(s) for s in node.body)


def _kernel_name(node: A.Compute) -> str:
    kind = "kernel"
    for s in node.body:
        if isinstance(s, A.AnnotationStmt) and s.annotation.name == "kernel" and s.annotation.kernel:
            kind = s.annotation.kernel
    return f"{kind}_l{node.span.line}"


def _assigned_in_pipelines(program: A.Program) -> set:
    """Names assigned (`n = ...`, `n += ...`) inside the bodies of the program's pipelines."""
    names = set()

    def visit(x, inside):
        if isinstance(x, A.Pipeline):
            inside = True
        if inside and isinstance(x, A.Assign) and isinstance(x.target, A.Name):
            names.add(x.target.id)
        if isinstance(x, A.Compute):
            return      # a body's assignments are the kernel's own
        if isinstance(x, A.Node):
            for v in vars(x).values():
                visit(v, inside)
        elif isinstance(x, (list, tuple)):
            for item in x:
                visit(item, inside)

    visit(program.body, False)
    return names


def top_level_names(program: A.Program) -> dict:
    """name -> the span of the top-level statement (let, var, pipeline) first defining it."""
    names = {}
    for s in program.body:
        if isinstance(s, A.Let):
            for n in s.names:
                names.setdefault(n, s.span)
        elif isinstance(s, (A.VarDecl, A.Pipeline)):
            names.setdefault(s.name, s.span)
    return names


def used_before_defined(name: str, span: Span, defined: Span,
                        pipeline: str | None = None) -> ZynMLNameError:
    """`name` read at `span`, above (or in) the top-level statement at `defined` that
    defines it (or by `pipeline`, called above it): compile() (the checker) and run() (the
    interpreter's lookup) say the same."""
    if pipeline is not None:
        said = (f"`{name}` is read by pipeline `{pipeline}`, called before `{name}` is defined "
                f"on line {defined.line}: define it above the call")
    else:
        where = "in its own definition" if defined.line == span.line else \
            f"before it is defined on line {defined.line}"
        said = f"`{name}` is used {where}: a name is defined by a statement above its first use"
    return ZynMLNameError(said, span, notes=((f"`{name}` is defined here", defined),),
                          unknown=name)


def check_program(program: A.Program, source: str, known: dict | None = None) -> CheckResult:
    """Check a parsed program; raises the first ZynMLError it finds."""
    try:
        return Checker(program, source, known).check()
    except ZynMLError as err:
        raise err.with_source(source) from None
