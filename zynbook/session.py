"""Sessions: the state one notebook (or one `zynbook.run`) keeps between cells."""
from __future__ import annotations

import dataclasses
import functools
import threading

import numpy as np

from .backends.registry import get_device
from .compiler import ast as A
from .compiler.syntax_cache import parse as parse_kept
from .compiler.types import dtype_list
from .errors import (Span, ZynMLError, ZynMLSyntaxError, ZynMLTypeError,
                     source_lines)
from .runtime import builtins as B
from .runtime.interp import Interpreter, annotated_devices
from .backends.cuda.views import torch_stream
from .runtime.tensor import Tensor, to_tensor
from .runtime.values import Record


class _Unusable(ZynMLTypeError):
    """A bound Python value (or a part of it) that no ZynML value stands for."""

    def __init__(self, value, path: str = "", dtype=None, why: str = ""):
        super().__init__(_unreadable(value, path, why) if why else
                         f"a Python value of type `{type(value).__name__}`"
                         f"{f' (at {path})' if path else ''} cannot become a ZynML value; "
                         + _USABLE if dtype is None else _no_dtype(value, path, dtype))
        self.value, self.path, self.dtype, self.why = value, path, dtype, why


_USABLE = "pass arrays (numpy, CuPy, torch), numbers, strings, dicts or lists"


def _unreadable(value, path: str, why: str) -> str:
    """What is wrong with an array its own library cannot hand over (a sparse or meta torch
    tensor), in that library's words."""
    return (f"a `{type(value).__name__}`{f' (at {path})' if path else ''} that cannot be read "
            f"as an array: {why}")


def _no_dtype(value, path: str, dtype) -> str:
    """What is wrong with an array whose elements ZynML has no type for (complex, text, fp8)."""
    return (f"a `{type(value).__name__}`{f' (at {path})' if path else ''} of dtype `{dtype}`, "
            f"which ZynML has no type for (its dtypes: {dtype_list()})")


@functools.lru_cache(maxsize=None)
def _zynml_types() -> tuple:
    from .runtime.interp import _BuiltinRef, _Method
    from .runtime.values import Future, MemoryPool, Pipeline
    from .nn.device import Buffer
    return (Tensor, Record, Future, MemoryPool, Pipeline, _BuiltinRef, _Method, Buffer)


def _zynml_value(value) -> bool:
    return isinstance(value, _zynml_types())


# array types bound before (CuPy arrays, torch tensors): the checks below take them to
# `_tensor_of` whatever the value, so a cell run again goes there at once
_ARRAY_TYPES: set = {np.ndarray}
_ARRAY_MODULES = ("cupy", "torch")


def bind_value(value, _path: str = "", _within: tuple = ()):
    """A Python value as ZynML sees it: arrays become tensors, dicts records. A value no
    ZynML value stands for (a Python object, a function, a class, a list or dict holding
    itself: `_within`, the containers it is inside) raises `_Unusable`."""
    if type(value) in _ARRAY_TYPES:
        return _tensor_of(value, _path)
    if isinstance(value, (np.bool_, np.integer, np.floating, np.str_)):
        # a numpy number is a number (np.float64 is a float too), np.str_ a string
        number = value.item()
        if isinstance(number, np.generic) or not isinstance(number, (bool, int, float, str)):
            # np.longdouble, which no Python number holds; np.timedelta64 (an integer to
            # numpy), whose item is a datetime.timedelta
            raise _Unusable(value, _path, value.dtype)
        return number
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.ndarray):
        return _tensor_of(value, _path)
    if isinstance(value, Record):   # (one %%compute gave Python: its fields are arrays)
        fields = {k: bind_value(value[k], f"{_path}.{k}") for k in value.keys()}
        return value if all(fields[k] is value[k] for k in fields) else Record(fields)
    if _zynml_value(value):
        return value
    if isinstance(value, (dict, list, tuple)):
        if id(value) in _within:        # (Python's RecursionError, even for a name not read)
            raise _Unusable(value, _path, why="it contains itself")
        inside = _within + (id(value),)
        if isinstance(value, dict):
            return Record({k: bind_value(v, f"{_path}.{k}", inside) for k, v in value.items()})
        items = [bind_value(v, f"{_path}[{k}]", inside) for k, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, type) or callable(value) and not hasattr(value, "__dlpack__"):
        raise _Unusable(value, _path)
    t = _tensor_of(value, _path)
    if type(value).__module__.split(".")[0] in _ARRAY_MODULES:
        _ARRAY_TYPES.add(type(value))
    return t


def _tensor_of(value, path: str) -> Tensor:
    try:
        t = to_tensor(value)
    except Exception as err:    # an array of text, __array__ or __dlpack__ failing
        dtype = getattr(value, "dtype", None)
        if dtype is not None and _has_type(dtype) and not isinstance(err, ZynMLTypeError):
            # (a sparse or meta torch tensor): why, in its library's words
            raise _Unusable(value, path, why=str(err).strip() or type(err).__name__) from None
        t = None
    if t is None:
        raise _Unusable(value, path, getattr(value, "dtype", None))
    B.borrowed(t.data)      # the caller's: host code writing into it copies it first
    return t


def _has_type(dtype) -> bool:
    """Whether ZynML has a type for an array's dtype (numpy's, or torch's `torch.f32`)."""
    from .compiler.types import dtype_from_numpy
    try:
        dtype_from_numpy(str(dtype).removeprefix("torch."))
    except ZynMLTypeError:
        return False
    return True


def _first_use(program: A.Program, name: str):
    """The span of the first place `program` reads `name` (None when it never does)."""
    best = None

    def visit(x):
        nonlocal best
        if isinstance(x, A.Name) and x.id == name:
            if best is None or (x.span.line, x.span.column) < (best.line, best.column):
                best = x.span
        if isinstance(x, A.Node):
            for v in vars(x).values():
                visit(v)
        elif isinstance(x, (list, tuple)):
            for item in x:
                visit(item)

    visit(program.body)
    return best


def _bind_env(env: dict, program: A.Program, source: str) -> dict:
    bound = {}
    for name, value in env.items():
        try:
            # an array type bound before goes to its tensor at once (as in bind_value)
            bound[name] = _tensor_of(value, "") if type(value) in _ARRAY_TYPES else \
                bind_value(value)
        except _Unusable as bad:
            span = _first_use(program, name)
            if span is None:
                continue        # a name the program never reads: nothing to bind
            what = type(bad.value).__name__
            raise ZynMLTypeError(
                f"`{name}` is bound to " + _unreadable(bad.value, bad.path.removeprefix("."), bad.why)
                if bad.why else
                f"`{name}` is bound to " + _no_dtype(bad.value, bad.path.removeprefix("."), bad.dtype)
                if bad.dtype is not None else
                f"`{name}{bad.path}` is bound to a Python value of type `{what}`, which a ZynML "
                "program cannot use; bind arrays (numpy, CuPy, torch), numbers, strings, dicts or lists",
                span, source) from None
    return bound


_PLAIN = frozenset({bool, int, float, str, type(None), Tensor})


def _unbound(value, within: tuple = ()) -> bool:
    """Whether `value`, put into a session's namespace directly (`session.namespace["x"] =
    array`) rather than bound by `run(**env)`, is not yet as ZynML holds it: an array, a
    numpy number, a dict, or a list, tuple or record holding one; or a Python function or
    class, which no ZynML value stands for (binding says so where a program reads it)."""
    if type(value) in _PLAIN:
        return False
    if isinstance(value, (list, tuple, Record)):
        if id(value) in within:         # (bind_value says it contains itself)
            return True
        items = [value[k] for k in value.keys()] if isinstance(value, Record) else value
        inside = within + (id(value),)
        return any(type(v) not in _PLAIN and _unbound(v, inside) for v in items)
    if _zynml_value(value):
        return False
    return isinstance(value, (np.generic, dict, type)) or callable(value) or \
        hasattr(value, "__array__") or hasattr(value, "__array_interface__") or \
        hasattr(value, "__dlpack__")


def bind_namespace(namespace: dict, program: A.Program, source: str, skip=()) -> None:
    """Bind the values put into `namespace` directly as `run(**env)` binds them (a numpy
    array a tensor, a dict a record, a numpy number a number), so that `program` reads
    them as it reads its inputs; one no ZynML value stands for is a type error where
    `program` (or a pipeline's definition called from Python) reads it. Names in `skip`
    (the run's inputs) are bound anew anyway."""
    raw = {name: value for name, value in namespace.items()     # (a run's every call)
           if type(value) not in _PLAIN and name not in skip and _unbound(value)}
    if raw:
        if not isinstance(program, A.Program):
            program = A.Program([program])
        namespace.update(_bind_env(raw, program, source))


class Session:
    """Names, the default device, and what the last cell compiled and launched.

    A session may be shared between threads (widget callbacks, a thread pool): its calls
    (`run`, `run_cell`, calling one of its pipelines from Python) run one at a time, each
    seeing exactly the names it bound and the names earlier calls left. A call waits for the
    one before it to finish; `@async` blocks still run in the background."""

    def __init__(self, device: str = "cpu", namespace: dict | None = None):
        self.lock = threading.RLock()
        self.namespace: dict = namespace if namespace is not None else {}
        self._default_device = "cpu"
        self.default_device = device
        self.last_kernels: list = []
        self.launches: list = []
        self.last_plans: dict = {}  # the last run's blocks' plans (Interpreter.planned)
        self.last_async: list = []  # (future, CompiledKernel) of the last run's @async blocks
        self.last_failed: list = []     # CompiledKernels of the last run's failed launches
        self.fuse = True            # compute blocks launched lazily and fused (runtime/lazy.py)
        # None, or a function binding here, before a pipeline is called from Python, the
        # values outside ZynML of the names it reads (%%compute: the notebook's, as Python
        # holds them at the call)
        self.outside_names = None
        self.interpreter = Interpreter(self)

    @property
    def namespace(self) -> dict:
        return self._namespace

    @namespace.setter
    def namespace(self, names: dict):
        """`session.namespace = {...}`: the next run reads these names (the interpreter
        kept reading the dict it was made with), their `var`s declared anew."""
        if not isinstance(names, dict):
            raise ZynMLTypeError(f"a session's namespace is a dict of names, not "
                                 f"{type(names).__name__}")
        with self.lock:
            self._namespace = names
            interp = getattr(self, "interpreter", None)
            if interp is not None:
                interp.globals, interp.mutable = names, {}

    @property
    def default_device(self) -> str:
        return self._default_device

    @default_device.setter
    def default_device(self, device_id: str):
        if not isinstance(device_id, str) or device_id != "auto":
            get_device(device_id)        # raises ZynMLDeviceError for unknown ids
        self._default_device = device_id

    def forget_deleted(self, names, python_names) -> list:
        """Drop the `names` this session holds that `python_names` (the notebook's
        namespace) no longer has: Python deleted them (`del x`, `%reset`), and a cell must
        not read the value kept here (every name a notebook's session holds came from
        Python or went to it). Returns the names dropped."""
        gone = [n for n in names if n in self.namespace and n not in python_names]
        if gone:
            with self.lock:
                for name in gone:
                    self.namespace.pop(name, None)
        return gone

    def forget_unusable(self, env: dict, bound: dict) -> None:
        """Drop the names this session holds that `env` rebinds to a value ZynML cannot use
        and the program does not read itself (`_bind_env` leaves them out): a pipeline it
        calls must not read the value kept here, it says the name is unknown."""
        gone = [n for n in env if n not in bound and n in self.namespace]
        if gone:
            with self.lock:
                for name in gone:
                    self.namespace.pop(name, None)

    def run_cell(self, source: str, compute_annotations: str | None = None, /, **env):
        """Run ZynML `source`; returns (value of the last statement, it was an expression).
        `compute_annotations` (e.g. '@device("cuda:0") @async') apply to every compute block;
        given by position, the keyword `compute_annotations=` is an input of that name."""
        if compute_annotations is None:
            compute_annotations = env.pop("compute_annotations", "")
        if not isinstance(compute_annotations, str):
            raise ZynMLTypeError(f"compute annotations are text such as '@device(\"cpu\") "
                                 f"@async', not {type(compute_annotations).__name__}")
        compute_annotations = compute_annotations.rstrip()      # a text's last newline too
        if not compute_annotations or not isinstance(source, str):
            return self._run_cell(source, compute_annotations, env)
        # the annotations are parsed on the line after the program, so that an error in them
        # is told from one on the program's line 1 and shown in their own text, as a
        # magic's are on its line
        line = len(source_lines(source)) + 1
        try:
            return self._run_cell(source, compute_annotations, env, line)
        except ZynMLError as err:
            if err.line == line and not err.calls:
                on_annotation_line(err, compute_annotations, -len(_BEFORE_ANNOTATIONS), line,
                                   source)
            raise

    def _run_cell(self, source: str, compute_annotations: str, env: dict, line: int = 1):
        """`line`: the line the annotations are parsed on (a magic's: 1, the blank line its
        magic line leaves in `source`)."""
        if not isinstance(source, str):
            raise ZynMLTypeError(f"a ZynML program is text (a str), not "
                                 f"{type(source).__name__}")
        program = parse_cached(source)
        extra = _annotations_cached(compute_annotations, line) if compute_annotations else ()
        bound = _bind_env(env, program, source) if env else None
        if env and len(bound) < len(env):
            self.forget_unusable(env, bound)
        with self.lock:
            bind_namespace(self.namespace, program, source, env)
            if bound:
                self.namespace.update(bound)
                # (inputs now, whatever bound these names before)
                given = self.interpreter.bound_as.get(id(self.namespace), {})
                for name in bound:
                    given.pop(name, None)
            self.last_kernels = []
            self.launches = []
            self.last_plans = {}
            self.last_async = []
            self.last_failed = []
            interp = self.interpreter
            # (the key holds a line other than 1: a kernel's errors point into its annotations)
            interp.extra_annotations, interp.extra_key = extra, \
                compute_annotations if line == 1 else (compute_annotations, line)
            try:
                stream = torch_stream()     # the caller's torch stream, where it made one current
                if stream is None:
                    return interp.run_program(program, source)
                with stream:
                    return interp.run_program(program, source)
            except ZynMLError as err:
                raise err.with_source(source) from None
            finally:
                interp.extra_annotations, interp.extra_key = [], ""

    def run(self, source: str, /, **env):
        """Run ZynML `source`; returns the value of its last statement. (`self` and `source`
        are positional, so a program's input may have either name.)"""
        return self._run_cell(source, "", env)[0]


@functools.lru_cache(maxsize=256)
def parse_cached(source: str):
    """The syntax tree of `source`, parsed once: trees are never changed after parsing, so
    a cell run again reuses its tree (and with it the kernels lowered for it); a new process
    finds it in the one cache (compiler/syntax_cache.py)."""
    return parse_kept(source)


@functools.lru_cache(maxsize=64)
def _annotations_cached(text: str, line: int = 1) -> tuple:
    return tuple(parse_annotations(text, line))


_BEFORE_ANNOTATIONS = "compute() "     # what annotations are parsed after


def parse_annotations(text: str, line: int = 1) -> list:
    """'@device("cpu") @async' -> [Annotation, Annotation] (for magics' annotation lines),
    parsed on line `line`, after `compute() ` (a magic's `%%compute ` is as long).
    A `//` comment ends the line, as on any ZynML line (`%%compute @device("cpu")  // why`):
    it swallowed the block's brace the annotations are parsed before."""
    from .compiler.parser import code_part, in_string, parse
    code = code_part(text)
    brace = min((k for k in (code.find("{"), code.find("}")) if k >= 0), default=-1)
    if brace >= 0 and not in_string(code[:brace]):
        # (the block's own brace follows them: `{name}` would open it)
        column = len(_BEFORE_ANNOTATIONS) + brace + 1
        raise ZynMLSyntaxError(f"unexpected '{code[brace]}': annotations take no braces (a "
                               "magic's `{name}` is expanded only where Python defines "
                               "`name`)", Span(line, column, line, column + 1))
    try:
        program = parse("\n" * (line - 1) + f"{_BEFORE_ANNOTATIONS}{code} {{\n}}\n")
    except ZynMLError as err:
        # at the block's brace the annotations are parsed before: the line ended there
        brace = len(_BEFORE_ANNOTATIONS) + len(code) + 2
        if err.line == line and err.column == brace and \
                err.message.startswith("unexpected '{'"):
            err.message = "unexpected end of the line" + err.message[len("unexpected '{'"):]
            err.args = (err.message,)
            err.span = dataclasses.replace(err.span, column=brace - 1, end_column=brace)
        raise
    stmt = program.body[0]
    node = stmt.expr if isinstance(stmt, A.ExprStmt) else None
    if not isinstance(node, A.Compute):
        raise ZynMLError("expected annotations such as @device(\"cpu\") @async")
    from .compiler.lower import check_annotation
    for k, ann in enumerate(node.annotations):    # refused even in a cell with no compute block
        check_annotation(ann, {a.name for a in node.annotations[:k]})
        if ann.name == "device":
            # an id written out names a device or is an error here, in a cell with no
            # compute block too (an id held in a name is looked up at the block)
            try:
                annotated_devices(ann, _literal)
            except _NotLiteral:
                pass
    return node.annotations


def on_annotation_line(err: ZynMLError, text: str, shift: int, line: int = 1,
                       program: str | None = None) -> None:
    """Show `err`, raised on line `line` where annotations were parsed (after `compute() `),
    on line 1 of `text` (a magic's cell with its magic line in place, or run_cell's
    annotations), its columns there moved by `shift`; notes on the lines of `program`, where
    given, are shown in it."""
    def moved(span):
        if span.line != line:
            return span
        end = span.end_column + shift if span.end_line == line else span.end_column
        return dataclasses.replace(span, line=1, column=span.column + shift, end_column=end,
                                   end_line=1 if span.end_line == line else span.end_line)

    err.span = moved(err.span)
    if program is not None:
        err.calls += tuple((note, span, program) for note, span in err.notes if span.line != line)
        err.notes = tuple((note, span) for note, span in err.notes if span.line == line)
    err.notes = tuple((note, moved(span)) for note, span in err.notes)
    err.source = text


class _NotLiteral(Exception):
    pass


def _literal(node):
    """The value of a literal (a string, number, bool, or a list of them)."""
    if isinstance(node, (A.String, A.Number, A.Bool)):
        return node.value
    if isinstance(node, A.ListLit):
        return [_literal(item) for item in node.items]
    raise _NotLiteral




def run(source: str, device: str | None = None, /, **env):
    """Run a ZynML program (or one expression) and return the value of its last statement.
    Keyword arguments are bound as names: arrays (numpy, anything with __array__ or
    __dlpack__) become tensors, ints and floats scalars, dicts records, lists lists.
    `device=` names the device (default "cpu") unless the device is given by position:
    `run(source, "cpu", device=x)` binds an input named `device`."""
    return Session(session_device(device, env)).run(source, **env)


def session_device(device, env: dict) -> str:
    """The device of `run(source, device, **env)`: the one given by position, else the
    keyword `device` taken out of `env`, else "cpu"."""
    if device is not None:
        return device
    device = env.pop("device", "cpu")
    if not isinstance(device, str):
        raise ZynMLTypeError(f"device= names the device to run on (a string such as \"cpu\"), "
                             f"not {type(device).__name__}; to bind an input named `device`, "
                             f"give the device first: run(source, \"cpu\", device=...)")
    return device
