"""The host interpreter: runs ZynML programs statement by statement.

Host code (let/var, pipelines, config, await, tensor math) is interpreted here directly;
every `compute()` block goes through the compiler (lower -> CIR -> dimension solving) once
per input signature (runtime/plans.py) and runs on a device, at the next boundary of the lazy
graph, fused with its neighbours where exact (runtime/lazy.py, compiler/fusion.py).
Values: Tensor, int, float, bool, str, list, tuple, Record, Future, Pipeline, MemoryPool.
"""
from __future__ import annotations

import concurrent.futures as cf
import difflib
import sys
import threading
import time
import warnings

import numpy as np

from ..backends.registry import get_device
from ..compiler import ast as A
from ..compiler import cir
from ..compiler.dims import solve
from ..compiler.lower import InputSig, LoweredKernel, lower_compute
from ..compiler.passes.pipeline import run_pipeline
from ..compiler.types import canonical_dtype, dtype_bytes, dtype_from_numpy, is_int
from ..errors import (NO_SPAN, ZynMLDeviceError, ZynMLError, ZynMLMemoryError, ZynMLNameError,
                      ZynMLRuntimeError, ZynMLShapeError, ZynMLTimeoutError, ZynMLTypeError)
from . import bf16
from . import builtins as B
from . import device_ops as D
from . import placement
from .cancel import JobCancelled
from .lazy import PURE_BUILTINS, Fusion, LazyGraph, LazyScalar, numbers
from .parallel import chunk_plan, run_split
from .plans import BlockCache, BlockPlan, LoweredBlock, given_sizes
from .sharded import ShardedTensor
from .tensor import Tensor, to_tensor
from .values import DeviceQueue, Future, MemoryPool, Pipeline, Record, released

# programs whose form (and warm launch, `_WarmCell`) an interpreter keeps
MAX_CELLS = 64

KEYWORDS = ("let", "var", "for", "in", "if", "elif", "else", "and", "or", "not", "return",
            "pipeline", "config", "compute", "yield", "await", "timeout", "step", "true",
            "false", "shared")

# the keys `config { ... }` takes (Interpreter.config sets each)
CONFIG_KEYS = ("compute_device", "seed", "cluster", "model_split", "memory_budget", "autotune",
               "tune_budget", "flash_config", "allow_tf32", "fuse", "cuda_graph")


def unknown_config_key(kw) -> ZynMLNameError:
    close = difflib.get_close_matches(kw.name, CONFIG_KEYS, n=1, cutoff=0.6)
    near = f"did you mean `{close[0]}`? " if close else ""
    return ZynMLNameError(f"unknown config key `{kw.name}`; {near}known: {', '.join(CONFIG_KEYS)}",
                          kw.span)


# the most bits a host int computed by `**` may have (Python's ints are unbounded, but
# 10 ** 10 ** 10 would take minutes and gigabytes before anything could fail)
_INT_BITS_MAX = 1 << 23

# the (kernels, launches) lists an @async block's job records its launch in: those of the
# run that started it, not of whichever cell runs when the job does
_RECORDING = threading.local()



# the type names of lets and pipeline parameters beside the dtypes (check_type)
_TYPE_NAMES = ("tensor", "int", "float", "bool", "str", "string", "any", "record", "list",
               "future")


def _integer(v) -> bool:
    """An int (a Python or numpy integer), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _ieee(fn, a, b) -> float:
    """`fn` of two host numbers in f64 as numpy and C compute it (inf, -inf or NaN where
    Python's own float arithmetic raises)."""
    with np.errstate(all="ignore"):
        return float(fn(np.float64(a), np.float64(b)))

class _Return(Exception):
    def __init__(self, value):
        self.value = value


class CompiledKernel:
    """One compute block as compiled for one input signature (what the inspector shows)."""

    def __init__(self, lowered: LoweredKernel, device=None, launch=None, sizes=None,
                 fusion=None):
        self.lowered = lowered
        self.fusion = fusion                # lazy.Fusion: the blocks fused into it, and why not
        self.kernel: cir.Kernel = lowered.kernel
        self.name = self.kernel.name
        self.device = device
        self.launch = launch
        self.sizes = dict(sizes or {})
        # why it has no launch, shown by the inspector (kernel/state.py): an @async block's
        # not run yet, or its launch failed
        self.note = ""

    @property
    def cir_text(self) -> str:
        """The CIR the devices run (after the pass pipeline)."""
        return cir.print_kernel(self.kernel)

    @property
    def lowered_cir_text(self) -> str:
        """The CIR as lowering wrote it, before the pass pipeline."""
        before = getattr(self.lowered, "before_passes", None)
        return cir.print_kernel(before if before is not None else self.kernel)

    @property
    def zynml(self) -> str:
        if self.fusion is not None and len(self.fusion.origins) > 1:
            return "\n\n".join(f"// {name}, line {line}\n{text}"
                                for name, line, text in self.fusion.origins)
        return self.kernel.source

    @property
    def fusion_text(self) -> str:
        """The blocks fused into this launch and why adjacent ones were not ('' if none)."""
        return self.fusion.text() if self.fusion is not None else ""

    @property
    def launch_ir_text(self) -> str:
        """The launch IR of the schedule for the device the kernel ran on."""
        from ..compiler.codegen import launch_ir_text
        return launch_ir_text(self.kernel, self.device, self.sizes or None)

    def sources(self) -> dict:
        """{language: generated source} from every renderer available here."""
        from ..compiler.codegen import available_sources
        return available_sources(self.kernel, self.device, self.sizes or None)

    def __repr__(self):
        return f"<compiled kernel {self.name} ({self.kernel.kernel_type.kind})>"


def _integral(v) -> bool:
    """Whether host operand `v` (an array or a number) holds integers."""
    dtype = getattr(v, "dtype", None)
    return dtype.kind in "iub" if dtype is not None else isinstance(v, (int, np.integer))


def _broadcast(x, y) -> bool:
    """Whether host operands `x` and `y` (arrays or numbers) broadcast together."""
    try:
        np.broadcast_shapes(np.shape(x), np.shape(y))
        return True
    except ValueError:
        return False


def annotated_devices(ann, evaluate) -> list:
    """The device ids of a `@device(...)` annotation, its argument's value given by
    `evaluate`: a type error for anything but an id string or a list of them, a device
    error at the argument for an id no device has."""
    if len(ann.args) != 1 or ann.kwargs:
        raise ZynMLTypeError("@device takes one device id: @device(\"cuda:0\")", ann.span)
    value = evaluate(ann.args[0])
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        ids = value
    elif isinstance(value, str):
        ids = [value]
    else:
        what = B._kind(value)
        if isinstance(value, list):     # say what is wrong with the list
            bad = next((v for v in value if not isinstance(v, str)), None)
            what = "an empty list" if not value else f"a list holding {B._kind(bad)}"
        raise ZynMLTypeError(f"@device takes a device id string like \"cuda:0\" (or a "
                             f"list of them), not {what}", ann.span)
    arg = ann.args[0]
    for k, v in enumerate(ids):
        try:
            get_device(v)
        except ZynMLError as err:       # an id no device has: the caret under it
            if err.span.line <= 0:
                err.span = arg.items[k].span if isinstance(arg, A.ListLit) and \
                    len(arg.items) == len(ids) else arg.span
            raise
    return value if isinstance(value, list) else [value]



def _elements_for(arr, value):
    """What `arr[key] = value` stores: a tensor's elements on `arr`'s side (numpy for a host
    array; for a CuPy one, a host tensor's elements copied over: CuPy takes no numpy array)."""
    xp = bf16.array_module(arr)
    if not isinstance(value, Tensor):
        if xp is np or not isinstance(value, (list, tuple)):
            return value
        host = np.asarray(value)        # a list of numbers; anything else numpy's refusal
        return xp.asarray(host) if host.dtype.kind in "biuf" else value
    if xp is np:
        return value.numpy()
    return value.data if bf16.array_module(value.data) is xp else xp.asarray(value.numpy())


class Interpreter:
    def __init__(self, session):
        self.session = session
        self.globals: dict = session.namespace
        # names declared with var: name -> the type written after it (None: untyped)
        self.mutable: dict = {}
        self.frames: list = []              # pipeline calls: [(locals, mutable names: type)]
        # id of a scope (the globals, a frame's locals) -> {name: how a name that is not a
        # var was bound there ("let", "loop", "pipeline")}; a name bound otherwise is an input
        # of the program (or a pipeline's parameter), which assignments name as such
        self.bound_as: dict = {}
        self.rng = np.random.default_rng(0)
        self.blocks = BlockCache()          # compute blocks lowered and planned
        self.kernel_counter = 0
        self.source = ""
        self.program = None         # (run_program's: the program running)
        self.pipelines: list = []           # pipelines being called (their text is their blocks')
        # per call in self.pipelines: (message, span, source) of the call where its text is
        # not the caller's (an error's frame, see ZynMLError.calls), else None
        self.call_frames: list = []
        self.extra_annotations: list = []
        self.extra_key = ""                 # the text extra_annotations were parsed from
        self.lazy = LazyGraph(self)         # blocks recorded, launched at a boundary
        self.alone = None                   # the block that is a whole top-level statement
        self.bound_local = None             # the block a `let` of a pipeline's local binds
        self.statement = 0                  # counts top-level statements and Python calls
        self.cells: dict = {}               # id(program) -> [program, _one_block form, _WarmCell]
        self._cell_node = None              # the block of the one-block program being run
        self._direct = None                 # (node, key, ...) of its launch where it was met
        self._lock = threading.RLock()
        # the last launch's result and its kernel (until a top-level name takes it or the
        # cell or call ends), and of those this cell bound to top-level names, id -> (name,
        # kernel, line bound at): a block reading one is told why the two were not fused
        self.last_made = None
        self.named_results: dict = {}
        self.top_line = 0                   # the line of the top-level statement being run
        self.in_flight: list = []           # (Future, its input tensors) of @async blocks

    # ---------------------------------------------------------------- helpers
    @property
    def default_device(self) -> str:
        return self.session.default_device

    def write(self, text: str):
        sys.stdout.write(text)

    def move(self, t: Tensor, device_id: str, commit: bool = True) -> Tensor:
        """`t` on `device_id`; committed there unless `commit` is false (an implicit move of
        an uncommitted tensor to the device that needs it)."""
        dev = get_device(device_id)
        if t.device == dev.id:
            if commit and not t.committed:
                return Tensor(t.data, t.device, t.shape, t.dtype, committed=True)
            return t
        host = t.numpy()
        return Tensor(dev.from_host(host), dev.id, host.shape, t.dtype, committed=commit)

    def allocate(self, shape, dtype, device_id, pinned=False, commit=False) -> Tensor:
        """Zeroed memory on a device; `pinned` host memory comes from the CUDA driver
        (page-locked, for fast transfers) where there is a CUDA device. `commit`: the
        device was named in the program (not the session's default)."""
        dev = get_device(device_id)
        if pinned:
            try:
                cuda = get_device("cuda:0")
            except ZynMLDeviceError:
                cuda = None
            if cuda is not None and hasattr(cuda, "allocate"):
                return Tensor(cuda.allocate(shape, dtype, pinned=True), "cpu", shape, dtype,
                              committed=commit)
        if hasattr(dev, "allocate"):
            return Tensor(dev.allocate(shape, dtype), dev.id, shape, dtype, committed=commit)
        np_dtype = np.dtype(B.NUMPY_NAMES[dtype])
        return Tensor(dev.from_host(np.zeros(shape, np_dtype)), dev.id, shape, dtype,
                      committed=commit)

    # ----------------------------------------------------------------- scopes
    def lookup(self, name: str, span):
        if self.frames and name in self.frames[-1][0]:
            local = self.frames[-1][0]
            value = local[name]
            if type(value) is LazyScalar:   # a reduction's one value, read on the host
                value = local[name] = value.value()
            return _live(value, name, span)
        if name in self.globals:
            return _live(self.globals[name], name, span)
        if name in B.CONSTANTS:
            return B.CONSTANTS[name]
        if name in B.DTYPE_VALUES:
            return B.DTYPE_VALUES[name]
        if name in B.BUILTINS or name in ("all", "any"):
            return _BuiltinRef(name)
        from ..compiler.check import KERNEL_ONLY, kernel_only, used_before_defined
        if name in KERNEL_ONLY:
            raise kernel_only(name, span)
        defined = self._defined_below(name)
        if defined is not None:
            raise used_before_defined(name, span, defined,
                                      self.pipelines[-1].name if self.frames else None)
        raise ZynMLNameError(f"unknown name `{name}`{self._suggest(name)}", span, unknown=name)

    def _defined_below(self, name: str):
        """The span of the running program's top-level statement that defines `name`, which
        has not run yet (the name is unbound), where the code at fault is that program's (a
        pipeline of an earlier cell has its own lines): it is used before it is defined, as
        compile() says."""
        from ..compiler.check import top_level_names
        if self.program is None or self.frames and not (
                self.pipelines and self.pipelines[-1].source is self.source):
            return None
        return top_level_names(self.program).get(name)

    def _suggest(self, name: str) -> str:
        pool = list(self.globals) + list(B.BUILTINS) + list(KEYWORDS) + list(B.DTYPE_VALUES) + \
            list(B.CONSTANTS)
        if self.frames:
            pool += list(self.frames[-1][0])
        close = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
        return f"; did you mean `{close[0]}`?" if close else ""

    def bind(self, name: str, value, mutable: bool, typ: A.TypeExpr | None = None,
             how: str = "let"):
        scope, muts = (self.frames[-1] if self.frames else (self.globals, self.mutable))
        scope[name] = self._bound_at_top(name, value) if scope is self.globals else value
        if mutable:
            muts[name] = typ        # a typed var keeps its type: each assignment is checked
        else:
            muts.pop(name, None)
            self.bound_as.setdefault(id(scope), {})[name] = how

    def _bound_at_top(self, name: str, value):
        """`value` as a top-level name holds it: computed (a boundary of the lazy graph),
        and remembered as this name's where the last launch made it."""
        value = self.lazy.boundary(value)
        made, self.last_made = self.last_made, None
        if made is not None and made[0] is value:
            self.named_results[id(value)] = (name, made[1], self.top_line)
        return value

    def _not_fused(self, inputs, kernel) -> list:
        """Why `kernel` is not fused with the blocks that made those of its inputs that a
        top-level name of this cell holds."""
        notes = []
        for t in inputs:
            hit = self.named_results.get(id(t))
            if hit is not None and self.globals.get(hit[0]) is t:     # (the name holds it still)
                notes.append(f"{hit[1]} -> {kernel.name} (line {kernel.first_line}): not fused: "
                             f"`{hit[0]}`, bound at line {hit[2]}, is a top-level name, computed "
                             "where it is bound since a later cell may read it (blocks chained "
                             "with |>, nested, or in a pipeline are fused)")
        return notes

    def assign_name(self, target: A.Name, value, span=None):
        name = target.id
        scope, muts = (self.frames[-1] if self.frames and name in self.frames[-1][0]
                       else (self.globals, self.mutable))
        if name not in scope:
            from ..compiler.check import used_before_defined
            defined = self._defined_below(name)
            if defined is not None:
                raise used_before_defined(name, target.span, defined,
                                          self.pipelines[-1].name if self.frames else None)
            raise ZynMLNameError(f"`{name}` is not declared; declare it with "
                                 f"`var {name} = ...`{self._suggest(name)}", target.span)
        if name not in muts:
            raise ZynMLTypeError(f"cannot assign to `{name}`: {self._not_var(name, scope)}",
                                 target.span)
        typ = muts[name]
        if typ is not None:     # `var v: int = 2` then `v = 2.5`: checked as the declaration is
            try:
                value = self.check_type(value, typ, {}, name)
            except ZynMLError as err:
                raise type(err)(f"`{name}` is declared {typ.name}: {err.message}",
                                span or target.span) from None
        scope[name] = self._bound_at_top(name, value) if scope is self.globals else value

    def _not_var(self, name: str, scope) -> str:
        """Why `name` of `scope` cannot be assigned, and what to write instead."""
        again = f"declare it again with `var {name} = {name}` to change it from here on"
        how = self.bound_as.get(id(scope), {}).get(name)
        if how == "loop":
            return "it is a loop variable, which the loop sets; use a var of another name"
        if how == "pipeline":
            return "it names a pipeline; pipelines are not reassigned"
        if how == "let":
            return "it is declared with let (use var to change it)"
        if scope is not self.globals:
            return f"it is a parameter of pipeline {self.pipelines[-1].name}; {again}"
        return f"it is an input of the program (bound from outside it, not by var); {again}"

    # -------------------------------------------------------------- programs
    def run_program(self, program: A.Program, source: str):
        """Run every statement; returns (value of the last one, it was an expression). A
        program of one compute block run again as its last run was (`_WarmCell`) launches
        without interpreting its statements."""
        self.source, self.program = source, program
        self.named_results = {}
        self.statement += 1
        entry = self._cell_entry(program)
        _, form, cell = entry
        value, is_expr = None, False
        try:
            if cell is not None and not self.frames and not self.pipelines and \
                    not self.lazy.pending and not self.lazy.fused_away:
                hit = self.exec(cell.stmt, cell)
                if hit is not None:
                    return hit
            self._cell_node, self._direct = (form[1] if form is not None else None), None
            for stmt in program.body:
                value = None    # (not held while the next statement runs: memory_stats)
                value, is_expr = self.exec_top(stmt)
            direct = self._direct
            entry[2] = _WarmCell(form, *direct[1:]) if direct is not None and \
                direct[0] is self._cell_node else None
        except BaseException:
            self.lazy.drop()
            raise
        finally:
            self._cell_node = self._direct = self.last_made = None
        return value, is_expr

    def _cell_entry(self, program) -> list:
        """[program, its `_one_block` form, its `_WarmCell` or None], kept per program."""
        entry = self.cells.get(id(program))
        if entry is None or entry[0] is not program:
            if len(self.cells) >= MAX_CELLS:
                self.cells.pop(next(iter(self.cells)))
            entry = self.cells[id(program)] = [program, _one_block(program), None]
        return entry

    def _replay(self, cell: "_WarmCell"):
        """The warm cell's launch: (value, it is shown) as running its statements gives, or
        None where what its decisions read differs from its last run (then they run)."""
        node = cell.node
        self.alone = node
        inputs, labels, _, scalars, given = self._compute_args(node)
        if self._cell_key(cell.lowered, inputs, labels, scalars, given) != cell.key or \
                get_device(cell.device.id) is not cell.device:
            return None
        plan = cell.plan
        self.planned(plan)
        value = self._launch(cell.device, cell.lowered, inputs, plan.sizes,
                             plan.scalar_values(given), node, commit=cell.commit, plan=plan)
        if cell.name is not None:
            self.bind(cell.name, value, False)
        return self.lazy.boundary(value), cell.shows

    def _cell_key(self, lowered, inputs, labels, scalars, given) -> tuple:
        """Everything a block's launch where it is met was decided from, beside the block
        itself: its inputs' labels, dtypes, shapes, devices and placement (the lowering, the
        plan, the device), the types of the scalars and the sizes given (the lowering, the
        plan), the magic line's annotations, the session's device and fusion setting."""
        sizes = tuple(given_sizes(given, lowered.kernel.dims).items()) if given else ()
        return (labels, tuple([(t._dtype, t._shape, t.device, t.committed) for t in inputs]),
                tuple(scalars.items()), sizes, self.extra_key, self.session.default_device,
                getattr(self.session, "fuse", True))

    def exec_top(self, stmt):
        """(the statement's value, whether it is an expression a notebook should show); the
        end of a top-level statement is a boundary of the lazy graph"""
        self.top_line = stmt.span.line
        self.statement += 1
        # a compute block that is the whole statement has nothing to fuse with: launched
        # where it is met, without recording it
        self.alone = stmt.value if isinstance(stmt, A.Let) else \
            stmt.expr if isinstance(stmt, A.ExprStmt) else None
        return self.lazy.boundary(self.exec(stmt)), isinstance(stmt, A.ExprStmt)

    def exec_block(self, body):
        value = None
        for s in body:
            value = None    # (not held while the next statement runs: memory_stats)
            value = self.exec(s)
        return value

    def exec(self, s, cell=None):
        """Run statement `s` (`cell`: a warm cell's launch in its place, `_replay`); its
        errors name its line."""
        try:
            return self._exec(s) if cell is None else self._replay(cell)
        except ZynMLError as err:
            if err.span is NO_SPAN or err.span.line <= 0:
                err.span = s.span
            raise err.with_source(self._text_of_running())
        except (ValueError, ArithmeticError, IndexError) as err:
            raise ZynMLRuntimeError(str(err), s.span, self._text_of_running()) from None
        except RecursionError:
            raise ZynMLRuntimeError("nested too deep to run: a pipeline that calls itself "
                                    "without end, or an expression nested too deeply (split "
                                    "it with `let`)", s.span, self._text_of_running()) from None
        except MemoryError as err:
            raise ZynMLMemoryError(_memory_message(err), s.span, self._text_of_running()) \
                from None

    def _text_of_running(self) -> str:
        """The source the statements running now come from: the program's, or that of the
        pipeline running (defined in an earlier cell, it has its own)."""
        return self.pipelines[-1].source if self.pipelines else self.source

    def _exec(self, s):
        if isinstance(s, A.Let):
            self.bound_local = s.value if self._holds(s) else None
            value = self.eval(s.value)
            if s.type is not None:
                value = self.check_type(value, s.type, {}, s.names[0])
            if s.destructure:
                if not isinstance(value, (tuple, list)):
                    raise ZynMLTypeError(f"cannot unpack {B._kind(value)} into "
                                         f"({', '.join(s.names)})", s.value.span)
                if len(value) != len(s.names):
                    raise ZynMLShapeError(f"unpacking {len(value)} values into "
                                          f"{len(s.names)} names", s.value.span)
                for n, v in zip(s.names, value):
                    self.bind(n, v, False)
            else:
                self.bind(s.names[0], value, False)
            return value
        if isinstance(s, A.VarDecl):
            self.bound_local = s.value if self._holds(s) else None
            value = self.eval(s.value)
            if s.type is not None:          # checked as a let's type is
                value = self.check_type(value, s.type, {}, s.name)
            self.bind(s.name, value, True, s.type)
            return value
        if isinstance(s, A.Assign):
            return self.assign(s)
        if isinstance(s, A.ExprStmt):
            return self.eval(s.expr)
        if isinstance(s, A.For):
            return self.host_loop(s.iters, s.body)
        if isinstance(s, A.If):
            if self.truth(self.eval(s.cond), s.cond):
                return self.exec_block(s.then)
            return self.exec_block(s.orelse)
        if isinstance(s, A.Pipeline):
            names = [q.name for q in s.params]
            for k, q in enumerate(s.params):
                if q.name in names[:k]:
                    raise ZynMLTypeError(f"pipeline {s.name} has two parameters named "
                                         f"`{q.name}`", q.span)
            # a misspelt type is the signature's mistake: said where it is written, at once
            for typ in [q.type for q in s.params] + [s.returns]:
                if typ is not None and typ.name not in _TYPE_NAMES and \
                        not canonical_dtype(typ.name):
                    raise ZynMLTypeError(f"unknown type `{typ.name}`; the types are "
                                         f"{', '.join(_TYPE_NAMES)} and the dtypes", typ.span)
            p = Pipeline(s, self, self.source)
            self.bind(s.name, p, False, how="pipeline")
            return None
        if isinstance(s, A.Return):
            if not self.frames:
                raise ZynMLTypeError("`return` outside a pipeline", s.span)
            raise _Return(self.eval(s.value) if s.value is not None else None)
        if isinstance(s, A.Config):
            return self.config(s)
        if isinstance(s, A.Yield):
            raise ZynMLTypeError("`yield` belongs inside a reduce kernel's compute body", s.span)
        if isinstance(s, A.SharedVar):
            raise ZynMLTypeError("`shared var` belongs inside a compute body", s.span)
        if isinstance(s, A.AnnotationStmt):
            raise ZynMLTypeError(f"@{s.annotation.name} belongs inside or after compute(...)",
                                 s.span)
        if isinstance(s, A.Ellipsis):
            raise ZynMLTypeError("`...` stands for elided code; write it out", s.span)
        raise ZynMLTypeError("unsupported statement", s.span)

    def _holds(self, s) -> bool:
        """Whether `s` binds a pipeline's local to a compute block, untyped: a reduction to
        one float it records is held there not yet run (lazy.LazyScalar), so a later block
        reading the name may fuse with it."""
        return bool(self.frames) and isinstance(s.value, A.Compute) and s.type is None and \
            not getattr(s, "destructure", False)

    def assign(self, s: A.Assign):
        if isinstance(s.target, A.Name):
            if s.op == "=":
                value = self.eval(s.value)
            else:
                old = self.lookup(s.target.id, s.target.span)
                value = self.binary(s.op[0], old, self.eval(s.value), s.span)
            self.assign_name(s.target, value, s.value.span if s.op == "=" else s.span)
            return value
        if isinstance(s.target, A.Index):
            base = self.eval(s.target.base)
            key = self.index_key(s.target.items)
            value = self.eval(s.value)
            if isinstance(base, list):
                key = [B.as_int(k) for k in key]    # (s[0], np.array(1): as in reading)
                if len(key) != 1 or not _integer(key[0]):
                    raise ZynMLTypeError("a list is indexed by one integer", s.target.span)
                if not -len(base) <= key[0] < len(base):
                    raise ZynMLShapeError(f"index {key[0]} is out of range for a list of "
                                          f"{len(base)}", s.target.items[0].span)
                if s.op != "=":
                    value = self.binary(s.op[0], base[key[0]], value, s.span)
                base[key[0]] = value
                return value
            if isinstance(base, Tensor):
                self._check_tensor_key(base, key, s.target.items, s.target.span)
                self.lazy.finish()          # recorded blocks read the old elements
                self._wait_for_readers(base)    # and so do @async blocks launched before
                B.own(base)             # the caller's array, bound without a copy, stays as it was
                arr = B.host_array(base)
                if s.op != "=":
                    value = self.binary(s.op[0], B.wrap(arr[key], base), value, s.span)
                try:
                    # past f16's range is inf, as numpy stores it, without its warning
                    with np.errstate(all="ignore"), warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        arr[key] = _elements_for(arr, value)
                except (TypeError, ValueError, OverflowError) as err:
                    # a pipeline, a record, text, a list of the wrong length: numpy's int(),
                    # float() or broadcast refused it, in its words, as a Python or runtime error
                    raise self._assigned_badly(value, arr, key, base, s.value.span,
                                               err) from None
                if base.dtype == "bf16":    # its f32 array holds bf16 values only
                    arr[key] = bf16.rounded(arr[key])
                if arr is not base.data:
                    # a device buffer (WebGPU): the element was set in a host copy, which
                    # becomes the tensor's contents
                    kind = getattr(base.data, "dtype", None)
                    base.data = get_device(base.device).from_host(
                        arr, *([kind] if isinstance(kind, str) else []))
                if isinstance(base, ShardedTensor):
                    base.written()      # its shards hold the new elements too
                return value
            raise ZynMLTypeError(f"cannot assign into {B._kind(base)}", s.target.span)
        t = s.target
        if isinstance(t, A.Call) and isinstance(t.func, A.Name) and t.func.id == "var" and \
                len(t.args) > 1 and all(isinstance(a, A.Name) for a in t.args):
            # `var (a, b) = pair` reads as an assignment to a call of a name `var`
            raise ZynMLTypeError("only `let` unpacks: `let (a, b) = pair` (then `var a = ...` "
                                 "for a name to assign again)", t.span)
        raise ZynMLTypeError("cannot assign to this expression", t.span)

    @staticmethod
    def _assigned_badly(value, arr, key, base, span, err=None):
        """The error of `base[key] = value` that numpy refused: a value that is not numbers
        is a type error, numbers of another shape than the elements a shape error, a number
        the elements' dtype cannot hold (300 into u8, NaN into i32) a runtime error."""
        try:
            got = np.asarray(0) if isinstance(value, int) else \
                np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        except (TypeError, ValueError):
            got = None
        if got is None or got.dtype.kind not in "biuf":
            return ZynMLTypeError(f"cannot assign {B._kind(value)} into an element of "
                                  f"{B._kind(base)}", span)
        want = list(np.shape(arr[key]))
        try:
            fits = np.broadcast_shapes(got.shape, tuple(want)) == tuple(want)
        except ValueError:
            fits = False
        if fits and err is not None:        # the value, not its shape
            dt, of = base.dtype, B._kind(base)
            if isinstance(value, int) and dt[0] in "iu":
                lo, hi = np.iinfo(B.NUMPY_NAMES[dt]).min, np.iinfo(B.NUMPY_NAMES[dt]).max
                why = f"{B.int_text(value)} does not fit {dt} ({lo} to {hi})"
            elif isinstance(value, float) and not np.isfinite(value):
                why = f"{'NaN' if value != value else 'an infinity'} has no {dt} value"
            else:
                why = f"{B._kind(value)} does not fit {dt}"
            return ZynMLRuntimeError(f"{why}: the dtype of the elements of {of}", span)
        return ZynMLShapeError(f"cannot assign values of shape {list(got.shape)} into the "
                               f"elements {want} of {B._kind(base)}", span)

    def _wait_for_readers(self, t: Tensor):
        """Host code is about to write into `t`: the @async blocks still running that read
        its memory finish first (they read it as it was when they were launched)."""
        running = []
        for future, inputs in self.in_flight:
            if future.done():
                continue
            if any(_same_memory(t, u) for u in inputs):
                cf.wait([future.inner])
            else:
                running.append((future, inputs))
        self.in_flight = running

    def host_loop(self, iters, body):
        it, rest = iters[0], iters[1:]
        if isinstance(it, A.RangeIter):
            start, stop = B.as_int(self.eval(it.start)), B.as_int(self.eval(it.stop))
            step = B.as_int(self.eval(it.step)) if it.step is not None else 1
            for v, node in ((start, it.start), (stop, it.stop), (step, it.step or it.start)):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise ZynMLTypeError("range bounds are integers", node.span)
            if step <= 0:
                raise ZynMLTypeError("a loop step must be positive", it.step.span)
            values = range(start, stop, step)
        else:
            seq = self.eval(it.iterable)
            if isinstance(seq, Tensor) and seq.ndim == 0:
                raise ZynMLTypeError("cannot loop over a 0-d tensor: it has no first axis",
                                     it.iterable.span)
            if isinstance(seq, Tensor):
                seq = [B.wrap(x, seq) for x in B.host_array(seq)]
            if not isinstance(seq, (list, tuple)):
                raise ZynMLTypeError(f"cannot loop over {B._kind(seq)}", it.iterable.span)
            values = seq
        for v in values:
            self.bind(it.var, v, False, how="loop")
            if rest:
                self.host_loop(rest, body)
            else:
                self.exec_block(body)
        return None

    def config(self, s: A.Config):
        self.lazy.flush()       # recorded blocks run with the settings they were met under
        names = [kw.name for kw in s.entries]
        for k, kw in enumerate(s.entries):
            if kw.name in names[:k]:        # which one was meant? refused before any is set
                raise ZynMLTypeError(f"config key `{kw.name}` is given twice", kw.span)
        for kw in s.entries:
            value = self.eval(kw.value)
            if kw.name == "compute_device":
                try:
                    get_device(value) if value != "auto" else None
                    self.session.default_device = value
                except ZynMLError as err:
                    if err.span.line <= 0:
                        err.span = kw.value.span        # under the device id
                    raise
            elif kw.name == "seed":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ZynMLTypeError("seed takes a non-negative integer", kw.value.span)
                self.rng = np.random.default_rng(value)
            elif kw.name in ("cluster", "model_split"):
                from .parallel import configure
                configure(self.session, kw.name, value, kw.value.span)
            elif kw.name == "memory_budget":
                D.set_memory_budget(self, value, kw.value.span)
            elif kw.name in ("autotune", "tune_budget", "flash_config", "allow_tf32"):
                self._tuning(kw.name, value, kw.value.span)
            elif kw.name == "fuse":
                if not isinstance(value, (bool, np.bool_)):
                    raise ZynMLTypeError("fuse takes true or false", kw.value.span)
                self.session.fuse = bool(value)
            elif kw.name == "cuda_graph":
                if not (isinstance(value, (bool, np.bool_)) or value == "auto"):
                    raise ZynMLTypeError('cuda_graph takes true, false or "auto"', kw.value.span)
                # runtime/replay.py
                self.session.cuda_graph = value if value == "auto" else bool(value)
            else:
                raise unknown_config_key(kw)
        return None

    def _tuning(self, key: str, value, span):
        """`config { autotune: true, tune_budget: 20, flash_config: "ampere", allow_tf32: true }`:
        zynbook/tuning.py's settings."""
        import dataclasses
        from ..compiler.schedules.configs import CONFIGS
        from ..tuning import Settings
        settings = getattr(self.session, "tuning", None) or Settings()
        if key in ("autotune", "allow_tf32"):
            if not isinstance(value, (bool, np.bool_)):
                raise ZynMLTypeError(f"{key} takes true or false", span)
            settings = dataclasses.replace(settings, **{key: bool(value)})
        elif key == "flash_config":
            if not isinstance(value, str):
                raise ZynMLTypeError(f"flash_config takes the name of a configuration, one of "
                                     f"{', '.join(CONFIGS)}, not {B._kind(value)}", span)
            if value not in CONFIGS:
                raise ZynMLNameError(f"flash_config is one of {', '.join(CONFIGS)}, not "
                                     f"{value!r}", span)
            settings = dataclasses.replace(settings, flash_config=value, flash_span=span)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not value > 0:      # (NaN is not)
                raise ZynMLTypeError("tune_budget takes a positive number of seconds", span)
            settings = dataclasses.replace(settings, budget_s=float(value))
        self.session.tuning = settings

    def truth(self, value, node) -> bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, float)):
            return value != 0
        if isinstance(value, Tensor) and value.size == 1:
            return bool(value.numpy().reshape(()))
        raise ZynMLTypeError(f"a condition must be true or false, not {B._kind(value)}",
                             node.span)

    # ------------------------------------------------------------ expressions
    def eval(self, e):
        # one look-up by the node's class (every expression class is a leaf of ast.Expr)
        handler = _EVAL.get(type(e))
        if handler is None:
            raise ZynMLTypeError("unsupported expression", e.span)
        return handler(self, e)

    def _eval_binop(self, e: A.BinOp):
        if e.op == "and":
            return self.truth(self.eval(e.left), e.left) and self.truth(self.eval(e.right), e.right)
        if e.op == "or":
            return self.truth(self.eval(e.left), e.left) or self.truth(self.eval(e.right), e.right)
        left, right = self.eval(e.left), self.eval(e.right)
        try:
            return self.binary(e.op, left, right, e.span)
        except ZynMLShapeError as err:
            if err.span is e.span:
                err.span = e.right.span     # the operand that disagrees with the first
            raise

    def _eval_unary(self, e: A.UnaryOp):
        v = self.eval(e.operand)
        if e.op == "not":
            return not self.truth(v, e.operand)
        if e.op == "pos":
            if isinstance(v, Tensor) and isinstance(v.data, np.ndarray):
                return B.wrap(v.data.copy(), v)     # numpy's +x: a tensor of its own
            return v
        if isinstance(v, Tensor) and v.dtype != "bool":     # (numpy refuses -bools)
            return B.wrap(-B.host_array(v), v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) or D.is_traced(v):
            return -v
        raise ZynMLTypeError(f"cannot negate {B._kind(v)}", e.span)

    def _eval_opref(self, e: A.OpRef):
        raise ZynMLTypeError(f"`{e.op}` is an operator, not a value", e.span)

    def binary(self, op, a, b, span):
        if D.is_traced(a, b):           # elementwise's function being traced
            try:
                return D.traced_binary(op, a, b)
            except ZynMLError as err:
                err.span = span
                raise
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            return self.tensor_binary(op, a, b, span)
        if op in ("==", "!="):
            return (a == b) if op == "==" else (a != b)
        numeric = (int, float, np.integer, np.floating)
        if isinstance(a, str) and isinstance(b, str) and op == "+":
            return a + b
        if isinstance(a, list) and isinstance(b, list) and op == "+":
            return a + b
        if not (isinstance(a, numeric) and isinstance(b, numeric)) or \
                isinstance(a, bool) or isinstance(b, bool):
            raise ZynMLTypeError(f"cannot apply {op} to {B._kind(a)} and {B._kind(b)}"
                                 f"{B.await_hint(a, b)}", span)
        try:
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                if isinstance(a, int) and isinstance(b, int):
                    q = abs(a) // abs(b)
                    return q if (a >= 0) == (b >= 0) else -q
                return a / b if b != 0 else _ieee(np.divide, a, b)
            if op == "%":
                import math
                if isinstance(a, int) and isinstance(b, int):
                    if b == 0:
                        raise ZynMLRuntimeError("integer remainder by zero", span)
                    return int(math.fmod(a, b))
                return math.fmod(a, b) if b != 0 and not math.isinf(a) else math.nan
            if op == "**":
                if isinstance(a, int) and isinstance(b, int) and b >= 0:
                    if abs(a) > 1 and (abs(a).bit_length() - 1) * b > _INT_BITS_MAX:
                        raise ZynMLMemoryError(
                            f"this power is an integer of more than {_INT_BITS_MAX:,} bits, "
                            f"more than a host int may hold (a float power, `10.0 ** n`, "
                            f"gives inf)", span)
                    return a ** b
                return _ieee(np.power, a, b)    # -8.0 ** (1/3) is NaN, 0.0 ** -1 inf, as C's pow
            if op == "<":
                return a < b
            if op == "<=":
                return a <= b
            if op == ">":
                return a > b
            if op == ">=":
                return a >= b
        except ZeroDivisionError:
            raise ZynMLRuntimeError("division by zero", span) from None
        except OverflowError:
            raise ZynMLRuntimeError(f"{op} of numbers too large for a float", span) from None
        raise ZynMLTypeError(f"cannot apply {op} to numbers", span)

    def tensor_binary(self, op, a, b, span):
        for v in (a, b):
            if not isinstance(v, (Tensor, int, float, bool, np.number)):
                raise ZynMLTypeError(f"cannot apply {op} to a tensor and {B._kind(v)}", span)
        if getattr(self.session, "fuse", True):
            source = self.pipelines[-1].source if self.pipelines else self.source
            recorded = self.lazy.binary(op, a, b, span, source)
            if recorded is not None:        # a recorded result's arithmetic joins the graph
                return recorded
        a, b = self.colocate([a, b], span, f"the operands of {op}")
        t = a if isinstance(a, Tensor) else b
        xp = B.xp_of(t)
        x = B.host_array(a) if isinstance(a, Tensor) else a
        y = B.host_array(b) if isinstance(b, Tensor) else b
        try:
            with np.errstate(all="ignore"):
                if op == "@":
                    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
                        raise ZynMLTypeError("@ multiplies two tensors", span)
                    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
                        raise ZynMLShapeError(f"cannot multiply {list(a.shape)} @ {list(b.shape)}: "
                                              "inner sizes differ", span)
                    r = xp.matmul(x, y)
                elif op == "/":
                    r = xp.true_divide(x, y)
                elif op == "%" and all(_integral(v) for v in (x, y)) and bool(xp.any(y == 0)):
                    raise ZynMLRuntimeError("integer remainder by zero", span)
                elif op == "**" and all(_integral(v) for v in (x, y)) and \
                        _broadcast(x, y) and bool(xp.any(xp.asarray(y) < 0)):
                    # (numpy's "Integers to negative integer powers are not allowed.")
                    low = int(xp.min(xp.asarray(y)))
                    raise ZynMLRuntimeError(
                        f"`**` of integer tensors gives integers, and an integer to a negative "
                        f"power (here {low}) is not one: make the base or the exponent a float "
                        f"(`x ** {float(low)!r}`)", span)
                else:
                    r = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y,
                         "%": lambda: xp.fmod(x, y), "**": lambda: x ** y,
                         "<": lambda: x < y, "<=": lambda: x <= y, ">": lambda: x > y,
                         ">=": lambda: x >= y, "==": lambda: x == y, "!=": lambda: x != y}[op]()
        except ValueError as err:
            sa = list(a.shape) if isinstance(a, Tensor) else []
            sb = list(b.shape) if isinstance(b, Tensor) else []
            try:
                np.broadcast_shapes(tuple(sa), tuple(sb))
            except ValueError:
                raise ZynMLShapeError(f"shapes {sa or 'scalar'} and {sb or 'scalar'} do not "
                                      f"broadcast for {op}", span) from None
            raise ZynMLRuntimeError(str(err), span) from None
        except TypeError:       # numpy's refusals of a dtype (true - tensor([true]))
            kinds = " and ".join(B._kind(v) for v in (a, b))
            raise ZynMLTypeError(f"cannot apply {op} to {kinds}", span) from None
        except OverflowError:   # a host int past the tensor's numbers (i8 + 300), as numpy
            n, dtype = (b, a.dtype) if isinstance(a, Tensor) else (a, b.dtype)
            raise ZynMLTypeError(_past_range(n, dtype), span) from None
        return bf16.tagged(B.wrap(r, t, keep_bf16=False), (a, b))

    def colocate(self, values, span=None, what="operands") -> list:
        """`values` with every tensor where host arithmetic on them runs (the placement rule,
        runtime/placement.py): the committed device, an uncommitted CUDA tensor's device, or
        host memory; two committed to different memories are a ZynMLDeviceError."""
        tensors = [v for v in values if isinstance(v, Tensor)]
        if len(tensors) < 2:
            return list(values)
        target = placement.target_device(tensors, span, what)
        if placement.memory_of(target) == placement.HOST or \
                get_device(target).backend != "cuda":
            # host arithmetic on host memory (WebGPU and Metal buffers are read back)
            return [Tensor(v.numpy(), "cpu", v.shape, v.dtype)
                    if isinstance(v, Tensor) and placement.memory_of(v.device) != placement.HOST
                    else v for v in values]
        return [self.move(v, target, commit=v.committed) if isinstance(v, Tensor) else v
                for v in values]

    def attr(self, base, name, span):
        if isinstance(base, Record):
            if name in base.keys():
                return base.get(name)
            # a dict bound from Python may have keys that are not names (ints)
            raise ZynMLNameError(f"the record has no field `{name}`; it has "
                                 f"{', '.join(map(str, base.keys())) or 'none'}", span)
        if isinstance(base, Tensor):
            if name == "shape":
                return list(base.shape)
            if name in ("dtype", "device", "ndim", "size"):
                return getattr(base, name)
            if name == "T":
                return B.wrap(B.host_array(base).T, base)
            if name in _TENSOR_METHODS:
                return _Method(base, name)
            raise ZynMLNameError(f"a tensor has no attribute `{name}`; it has shape, dtype, "
                                 "device, ndim, size, T, to_device(...)", span)
        if isinstance(base, MemoryPool):
            if name in ("allocate", "free", "reset"):
                return _Method(base, name)
            if name in ("size", "used", "free_bytes"):
                return getattr(base, name)
        if isinstance(base, (Future, _Futures)) and name == "done":
            return _Method(base, name)      # all(fs) and any(fs) too, futures of several
        if isinstance(base, dict):
            if name in base:
                return base[name]
        raise ZynMLNameError(f"{B._kind(base)} has no attribute `{name}`{B.await_hint(base)}",
                             span)

    def index_key(self, items):
        key = []
        for it in items:
            if isinstance(it, A.SliceItem):
                lo, hi, step = (B.as_int(self.eval(part)) if part is not None else None
                                for part in (it.start, it.stop, it.step))
                for bound, node in ((lo, it.start), (hi, it.stop), (step, it.step)):
                    if bound is not None and not _integer(bound):
                        what = "step" if node is it.step else "bound"
                        raise ZynMLTypeError(f"a slice {what} is an integer, not "
                                             f"{B._kind(bound)}", node.span)
                if step == 0:
                    raise ZynMLTypeError("a slice step cannot be 0 (numpy's x[a:b:s] takes "
                                          "every s-th position, backwards where s < 0)",
                                          it.step.span)
                key.append(slice(lo, hi, step))
            else:
                v = self.eval(it)
                if isinstance(v, Tensor):
                    v = B.host_array(v)
                elif not _integer(v) and not isinstance(v, str):
                    raise ZynMLTypeError(f"an index is an integer, a slice or a tensor of "
                                         f"integers, not {B._kind(v)}", it.span)
                key.append(v)
        return tuple(key)

    @staticmethod
    def _check_tensor_key(base, key, items, span):
        """Refuse indices a tensor cannot take: more than its axes, text, an integer past
        its axis (as a shape error, reading or assigning alike)."""
        if len(key) > base.ndim:
            raise ZynMLShapeError(f"a {base.ndim}-D tensor indexed with {len(key)} indices", span)
        for k, (item, size) in enumerate(zip(key, base.shape)):
            if isinstance(item, str):
                raise ZynMLTypeError("a tensor index is an integer or a slice, not a string",
                                     items[k].span)
            if _integer(item) and not -size <= item < size:
                raise ZynMLShapeError(f"index {item} is out of range for axis {k} of size "
                                      f"{size}", items[k].span)
            kind = getattr(getattr(item, "dtype", None), "kind", None)
            if kind == "b" and tuple(item.shape) != tuple(base.shape[k:k + item.ndim]):
                raise ZynMLShapeError(f"a mask of shape {list(item.shape)} does not fit the "
                                      f"axes {list(base.shape[k:k + item.ndim])} it selects "
                                      f"from", items[k].span)
            if kind in ("i", "u") and item.size and not (
                    -size <= int(item.min()) and int(item.max()) < size):
                raise ZynMLShapeError(f"indices from {int(item.min())} to {int(item.max())} "
                                      f"are out of range for axis {k} of size {size}",
                                      items[k].span)
            if kind is not None and kind not in "biu":
                raise ZynMLTypeError(f"a tensor used as an index holds integers or bools, "
                                     f"not {dtype_from_numpy(item.dtype)}", items[k].span)

    def index(self, base, e: A.Index):
        key = self.index_key(e.items)
        if isinstance(base, (list, tuple)):
            if len(key) != 1:
                raise ZynMLTypeError("a list is indexed by one integer", e.span)
            k = B.as_int(key[0])
            if isinstance(k, slice):
                return base[k]
            if not isinstance(k, int) or isinstance(k, bool):
                raise ZynMLTypeError(f"a list index is an integer, not "
                                     f"{B._kind(Tensor(k) if isinstance(k, np.ndarray) else k)}",
                                     e.items[0].span)
            if not -len(base) <= k < len(base):
                raise ZynMLShapeError(f"index {k} is out of range for a list of {len(base)}",
                                      e.items[0].span)
            return base[k]
        if isinstance(base, Tensor):
            self._check_tensor_key(base, key, e.items, e.span)
            return B.wrap(B.host_array(base)[key], base)
        if isinstance(base, Record) and len(key) == 1 and isinstance(key[0], str):
            return self.attr(base, key[0], e.span)
        raise ZynMLTypeError(f"{B._kind(base)} cannot be indexed{B.await_hint(base)}", e.span)

    # ------------------------------------------------------------------ calls
    def call(self, e: A.Call, prepend=()):
        func = self.eval(e.func)
        args = list(prepend) + [self.eval(a) for a in e.args]
        kwargs = {}
        for kw in e.kwargs:
            if kw.name in kwargs:
                raise ZynMLTypeError(f"`{kw.name}` is given twice", kw.span)
            kwargs[kw.name] = self.eval(kw.value)
        return self.apply(func, args, kwargs, e)

    def apply(self, func, args, kwargs, node):
        if isinstance(func, _BuiltinRef):
            if func.name in ("all", "any"):
                return self.combine_futures(func.name, args, kwargs, node)
            if func.name not in PURE_BUILTINS:     # print, sync, ...: what ran before runs first
                self.lazy.flush(roots=[*args, *kwargs.values()])
            try:
                if func.name in D.TRACED_FUNCTIONS and D.is_traced(*args, *kwargs.values()):
                    return D.traced_call(func.name, args, kwargs)
                return B.BUILTINS[func.name](self, args, kwargs)
            except ZynMLError as err:
                if err.span is NO_SPAN or err.span.line <= 0:
                    err.span = D.argument_span(node, len(args), getattr(err, "argument", None))
                raise
        if isinstance(func, Pipeline):
            return self.call_pipeline(func, args, kwargs, node)
        if isinstance(func, _Method):
            try:
                return func.call(self, args, kwargs, node)
            except ZynMLError as err:
                if err.span is NO_SPAN or err.span.line <= 0:
                    # the method's call (or the argument at fault), not the statement
                    err.span = D.argument_span(node, len(args), getattr(err, "argument", None))
                raise
        name = getattr(getattr(node, "func", None), "id", None)
        if isinstance(func, str) and name and func == canonical_dtype(name):
            # `float(3)` on the host: the dtype names are values there, for dtype=
            raise ZynMLTypeError(f"`{name}` is a dtype name, a value for dtype= on the host; "
                                 f"a cast such as {name}(x) is written inside a compute body",
                                 node.span)
        raise ZynMLTypeError(f"{B._kind(func)} is not a function", node.span)

    def pipe(self, e: A.Pipe):
        value = self.eval(e.value)
        if isinstance(e.func, A.Call):
            return self.call(e.func, prepend=(value,))
        func = self.eval(e.func)
        return self.apply(func, [value], {}, e)

    def _at_argument(self, err, p: Pipeline, node, n_positional: int, where):
        """A parameter's type check that failed, pointed at the argument of the call (where
        the wrong value comes from), with a note at the declared type where the pipeline is
        in the program running (not a pipeline of an earlier cell)."""
        if not isinstance(node, (A.Call, A.Pipe)) or err.span.line <= 0:
            return err
        declared = err.span
        err.span = D.argument_span(node, n_positional, (where, None))
        if p.source == self.source:
            err.notes = err.notes + ((f"the parameter of pipeline {p.name} is declared here",
                                      declared),)
        return err

    def call_pipeline(self, p: Pipeline, args, kwargs, node):
        params = p.node.params
        n_positional = len(args)
        if kwargs:
            names = [q.name for q in params]
            for k in kwargs:
                if k not in names:
                    raise ZynMLTypeError(f"pipeline {p.name} has no parameter `{k}`",
                                         node.span if node else NO_SPAN)
                if names.index(k) < len(args):
                    raise ZynMLTypeError(f"pipeline {p.name}: `{k}` is given twice (by "
                                         "position and by name)", node.span if node else NO_SPAN)
            missing = [q.name for q in params[len(args):] if q.name not in kwargs]
            args = args + [kwargs[q.name] for q in params[len(args):] if q.name in kwargs]
            if missing and len(args) < len(params):
                raise ZynMLTypeError(f"pipeline {p.name} needs `{missing[0]}`",
                                     node.span if node else NO_SPAN)
        if len(args) != len(params):
            raise ZynMLTypeError(f"pipeline {p.name} takes {len(params)} argument(s), got "
                                 f"{len(args)}", node.span if node else NO_SPAN)
        replayed, recorder = self.lazy.traces.enter(p, args)     # runtime/traces.py
        if replayed is not None:
            return replayed
        local: dict = {}
        dims: dict = {}
        for k, (q, v) in enumerate(zip(params, args)):
            if q.type is not None:
                try:
                    v = self.check_type(v, q.type, dims, q.name)
                except ZynMLError as err:
                    raise self._at_argument(err, p, node, n_positional,
                                            k if k < n_positional else q.name) from None
            local[q.name] = v
        for name, size in dims.items():
            local.setdefault(name, size)
        self.frames.append((local, {}))
        self.bound_as[id(local)] = {}       # (a dict of a call before may have had its id)
        caller = self.pipelines[-1].source if self.pipelines else self.source
        frame = (f"in the call of pipeline {p.name} here", node.span, caller) if \
            p.source != caller and node is not None and node.span.line > 0 else None
        self.pipelines.append(p)
        self.call_frames.append(frame)
        try:
            try:
                self.exec_block(p.node.body)
                result = None
            except _Return as r:
                result = r.value
            if p.node.returns is not None:
                # a pipeline declared `-> int` that returns nothing is refused too (the
                # types ZynML leaves unchecked, `any`, `list`, ..., take nothing)
                result = self.check_type(result, p.node.returns, dims,
                                         f"the result of {p.name}")
        except ZynMLError as err:
            if p.source != caller:      # a pipeline of an earlier cell: its own text
                err.with_source(p.source)
            if frame is not None:       # and where the calling text called it
                err.calls += (frame,)
            raise
        finally:
            self.pipelines.pop()
            self.call_frames.pop()
            self.bound_as.pop(id(self.frames.pop()[0]), None)
        return recorder.leave(result) if recorder is not None else result

    def check_type(self, value, typ: A.TypeExpr, dims: dict, what: str):
        """`value` if it is of type `typ` (a 0-d tensor checked as `int`, `float` or `bool`
        is its Python value), else a type error."""
        name = typ.name
        if name == "tensor":
            if not isinstance(value, Tensor):
                raise ZynMLTypeError(f"`{what}` must be a tensor, not {B._kind(value)}", typ.span)
            if typ.dims is None:
                return value
            dtype_dims = [d for d in typ.dims if isinstance(d, A.Name) and canonical_dtype(d.id)
                          and d.id not in dims and d.id not in self.globals]
            shape_dims = [d for d in typ.dims if d not in dtype_dims]
            for d in dtype_dims:
                if canonical_dtype(d.id) != value.dtype:
                    raise ZynMLTypeError(f"`{what}` must be {canonical_dtype(d.id)}, not "
                                         f"{value.dtype}", d.span)
            if len(shape_dims) != value.ndim:
                raise ZynMLShapeError(f"`{what}` must have {len(shape_dims)} axes "
                                      f"({', '.join(_dim_text(d) for d in shape_dims)}), but its "
                                      f"shape is {list(value.shape)}", typ.span)
            for d, size in zip(shape_dims, value.shape):
                if isinstance(d, A.Name):
                    if d.id in dims and dims[d.id] != size:
                        raise ZynMLShapeError(f"`{what}` has {d.id} = {size}, but {d.id} = "
                                              f"{dims[d.id]} elsewhere in this call", d.span)
                    dims.setdefault(d.id, size)
                else:
                    # an expression of the sizes bound so far (`tensor[n, n * 2]`)
                    self.frames.append((dict(dims), {}))
                    try:
                        expected = self.eval(d)
                    except ZynMLNameError as err:
                        # (it said only 'unknown name `q`' for tensor[2 * q])
                        if err.unknown is None:
                            raise
                        raise ZynMLNameError(
                            f"`{err.unknown}` in a size of `{what}` is not bound before it: "
                            f"a size in an expression is named alone first, as in "
                            f"tensor[{err.unknown}, 2 * {err.unknown}]", d.span) from None
                    finally:
                        self.frames.pop()
                    if expected != size:
                        raise ZynMLShapeError(f"`{what}` must have size {expected} here, not "
                                              f"{size}", d.span)
            return value
        dtype = canonical_dtype(name)
        # a dtype's name or alias (`int32`, `u8`, `double`) checks as its kind does; `int`
        # is any host int (they are unbounded), a sized one must fit its range
        if dtype is not None and dtype != "bool" and is_int(dtype):
            value = B.as_int(value)        # a 0-d integer tensor is its int, as in numpy
            if not isinstance(value, int) or isinstance(value, bool):
                raise ZynMLTypeError(f"`{what}` must be an int, not {B._kind(value)}", typ.span)
            bits = dtype_bytes(dtype) * 8
            low, high = (0, 1 << bits) if dtype.startswith("u") else \
                (-(1 << (bits - 1)), 1 << (bits - 1))
            if name != "int" and not low <= value < high:
                raise ZynMLTypeError(f"`{what}` is {name}: it must be from {low} to "
                                     f"{high - 1}, not {value}", typ.span)
        elif dtype is not None and dtype != "bool":
            value = B.as_number(value)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ZynMLTypeError(f"`{what}` must be a number, not {B._kind(value)}", typ.span)
        elif name == "bool":
            if isinstance(value, Tensor) and not value.ndim and value.dtype == "bool":
                value = bool(value.numpy())
            if not isinstance(value, bool):
                raise ZynMLTypeError(f"`{what}` must be a bool, not {B._kind(value)}", typ.span)
        elif name in ("str", "string"):
            if not isinstance(value, str):
                raise ZynMLTypeError(f"`{what}` must be a string, not {B._kind(value)}", typ.span)
        elif dtype is None and name not in ("any", "record", "list", "future"):
            raise ZynMLTypeError(f"unknown type `{name}`", typ.span)
        return value

    # ------------------------------------------------------------------ async
    def await_(self, e: A.Await):
        self.lazy.flush()
        f = e.future
        if isinstance(f, A.Call) and isinstance(f.func, A.Name) and f.func.id in ("all", "any") \
                and not f.kwargs and len(f.args) == 1 and \
                isinstance(self.eval(f.func), _BuiltinRef):
            items = self.eval(f.args[0])
            if isinstance(items, (list, tuple)) and not items:
                if f.func.id == "all":
                    return []           # every result of no futures
                raise ZynMLTypeError("`await any([])` waits for the first of no futures: the "
                                     "list is empty", f.args[0].span)
            fut = self.combine_futures(f.func.id, [items], {}, f)
        else:
            fut = self.eval(f)
        if isinstance(fut, list) and all(isinstance(f, Future) for f in fut):
            fut = _Gather(fut)
        if not isinstance(fut, (Future, _Futures)):
            raise ZynMLTypeError(f"await takes a future (from compute(...) @async), not "
                                 f"{B._kind(fut)}", e.future.span)
        timeout = None
        if e.timeout is not None:
            timeout = B.as_number(self.eval(e.timeout))
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or \
                    not timeout >= 0:           # (NaN too)
                raise ZynMLTypeError("timeout takes a duration like 500ms or 2s", e.timeout.span)
            if timeout >= threading.TIMEOUT_MAX:
                timeout = None                  # `timeout inf`: no limit
        try:
            return fut.result(timeout)
        except cf.TimeoutError:
            # an expired wait cancels its job (docs/api.md)
            fut.cancel("an earlier wait for it timed out")
            if e.default is None:
                raise ZynMLTimeoutError(f"the future did not finish within {timeout:g} s "
                                        "(it was cancelled)", e.span) from None
            return self.eval(e.default)
        except KeyboardInterrupt:
            # the session stays as it was before the statement (docs/api.md): a job an
            # earlier statement started runs on, its future still bound; one this statement
            # started is cancelled, as nothing can await it any more
            for f in fut.futures if isinstance(fut, _Futures) else [fut]:
                if f.statement == self.statement:
                    f.cancel("an interrupt stopped an earlier wait for it")
            raise
        except (JobCancelled, cf.CancelledError):
            members = fut.futures if isinstance(fut, _Futures) else [fut]
            why = next((f.cancelled_by for f in members if f.cancelled_by), "")
            raise ZynMLRuntimeError(f"this job was cancelled{f' ({why})' if why else ''} "
                                    "before it finished", e.span) from None

    def combine_futures(self, name, args, kwargs, node):
        if kwargs or len(args) != 1:
            raise ZynMLTypeError(f"{name}(futures) takes one list", node.span)
        items = args[0]
        if not isinstance(items, (list, tuple)):
            raise ZynMLTypeError(f"{name}() takes a list, not {B._kind(items)}", node.span)
        if items and all(isinstance(f, Future) for f in items):
            return _Gather(list(items)) if name == "all" else _FirstOf(list(items))
        if any(isinstance(f, Future) for f in items):
            raise ZynMLTypeError(f"{name}() takes a list of futures (or of booleans)", node.span)
        return (all if name == "all" else any)(self.truth(v, node) for v in items)

    # ---------------------------------------------------------------- compute
    def compute(self, node: A.Compute):
        # a block bound to a pipeline's local: a reduction to one float it records is held
        # there not computed (lazy.LazyScalar)
        hold, self.bound_local = node is self.bound_local, None
        inputs, labels, spans, scalars, given = self._compute_args(node)
        block = self._lowered_block(node, inputs, labels, spans, scalars)
        lowered = block.lowered
        plan = block.plan(inputs, given)
        self.planned(plan)
        sizes, sizes_given = plan.sizes, plan.sizes_given
        scalar_values = plan.scalar_values(given)
        device_ids, commit = self._devices_for(lowered, inputs, node)
        run_async = "async" in lowered.annotations
        mode = lowered.kernel.schedule.parallel
        device = get_device(device_ids[0])
        now = self._launched_now(lowered, device, run_async, mode)
        if not now and node is self.alone and not self.frames and not self.lazy.pending \
                and not self.lazy.split(lowered, plan):     # a split block's phases are recorded
            if node is self._cell_node and _fixed_devices(lowered):     # a warm cell's record
                self._direct = (node, self._cell_key(lowered, inputs, labels, scalars, given),
                                lowered, plan, device, commit)
            notes = self._not_fused(inputs, lowered.kernel) if self.named_results else ()
            return self._launch(device, lowered, inputs, sizes, numbers(scalar_values), node,
                                commit=commit, plan=plan,
                                fusion=Fusion((), notes) if notes else None)
        if not now:
            source = self.pipelines[-1].source if self.pipelines else self.source
            lz = self.lazy.defer(node, lowered, plan, inputs, scalar_values, device, commit,
                                 source)
            if plan.out_shape:
                return lz
            return self.lazy.held(lz) if hold else self.lazy.force(lz)
        self.lazy.settle(inputs)
        scalar_values = numbers(scalar_values)
        apart = Fusion((), [f"launched where it is met, never fused: {now}"])
        # the text the block is written in, taken now: an @async block's job runs while
        # later statements (or cells) run
        source = self._text_of_running()
        if device.kind == "cluster":      # @device("dask"): Dask tasks
            job = lambda: self._launch_split([device], lowered, inputs, sizes, sizes_given,
                                             scalar_values, mode, node, source)
        elif mode and len(device_ids) > 1:
            devices = [get_device(d) for d in device_ids]
            job = lambda: self._launch_split(devices, lowered, inputs, sizes, sizes_given,
                                             scalar_values, mode, node, source)
        else:
            job = lambda: self._launch(device, lowered, inputs, sizes, scalar_values, node,
                                       in_background=run_async, commit=commit, plan=plan,
                                       fusion=apart, source=source)
        if run_async:
            job = _recorded_in(job, (self.session.last_kernels, self.session.launches))
            future = Future(DeviceQueue.for_device(device.id).submit(job), lowered.kernel.name)
            future.statement = self.statement
            waiting = CompiledKernel(lowered, device, None, sizes, apart)
            waiting.note = "@async, still running: not launched yet"
            self.session.last_async.append((future, waiting))
            self.in_flight = [f for f in self.in_flight if not f[0].done()]
            self.in_flight.append((future, inputs))
            return future
        return job()

    def planned(self, plan) -> None:
        """Keep the plan of a block this run evaluates, whether it is launched now, later
        (`@async`), split across devices or fused with others: the notes on a run's host
        ints (magics.compute.note_python_bounds) read its sizes. The latest 64 are kept
        (a model calling pipelines from Python runs no cell that starts the list again)."""
        plans = self.session.last_plans
        plans.pop(plan, None)
        plans[plan] = None
        if len(plans) > 64:
            del plans[next(iter(plans))]

    def _launched_now(self, lowered, device, run_async, mode) -> str:
        """Why the block is launched now rather than recorded in the lazy graph
        (runtime/lazy.py), '' when it is recorded."""
        if not getattr(self.session, "fuse", True):
            return "config { fuse: false }"
        if "nofuse" in lowered.annotations:
            return "@nofuse"
        if run_async:
            return "@async"
        if mode:
            return f"@parallel({mode})"
        if device.kind == "cluster":
            return "it runs on a Dask cluster"
        return ""

    def _compute_args(self, node: A.Compute):
        """(input tensors, their labels and spans, the types of the scalars the body reads,
        their values) of one run of a compute block."""
        site = self.blocks.site(node)
        inputs = []
        for e, label in zip(node.inputs, site.labels):
            value = self.eval(e)
            inputs.append(value if isinstance(value, Tensor) else
                          self._input_tensor(value, label, e))
        labels, spans = site.labels, site.spans     # tuples: extended below, never changed
        scalars, given = {}, {}
        for label, span in site.free:
            value = self._free_value(label, span)
            if value is _MISSING:
                continue
            if type(value) is LazyScalar:
                if not value.done:      # a reduction's float, computed before the launch
                    scalars[label] = "f32"
                    given[label] = value
                    continue
                value = value.value()
            if isinstance(value, np.generic) or isinstance(value, Tensor) and value.ndim == 0:
                # a number, however it came (np.int64(3), a 0-d tensor): a size or a scalar
                value = (value.numpy() if isinstance(value, Tensor) else value).item()
            if isinstance(value, Tensor) or to_tensor(value) is not None and \
                    not isinstance(value, (int, float, bool, list, tuple, str)):
                inputs.append(self._input_tensor(value, label, None, span))
                labels += (label,)
                spans += (span,)
            elif isinstance(value, bool):
                scalars[label] = "bool"
                given[label] = value
            elif isinstance(value, (int, np.integer)):
                if not -2**63 <= int(value) < 2**63:
                    raise ZynMLTypeError(f"`{label}` = {B.int_text(int(value), 30)} does "
                                         "not fit a 64-bit integer, the widest a kernel has; "
                                         "pass it as a float if that is what the block needs",
                                         span)
                # (past i32 it is i64 in the block's arithmetic, as a literal of it is)
                scalars[label] = "i32" if -2**31 <= int(value) < 2**31 else "i64"
                given[label] = int(value)
            elif isinstance(value, (float, np.floating)):
                scalars[label] = "f32"
                given[label] = float(value)
            else:
                scalars[label] = None
        return inputs, labels, spans, scalars, given

    def _free_value(self, label, span):
        root, dot, fields = label.partition(".")
        if self.frames and root in self.frames[-1][0]:
            value = self.frames[-1][0][root]
        elif root in self.globals:
            value = self.globals[root]
        else:
            return _MISSING         # a size the kernel infers from its inputs' shapes
        if isinstance(value, Pipeline):
            return _MISSING
        if dot:
            if type(value) is LazyScalar:
                value = self.lookup(root, span)
            for f in fields.split("."):
                value = self.attr(value, f, span)
        return value

    def _input_tensor(self, value, label, expr, span=None):
        t = to_tensor(value)
        if t is None:
            where = expr.span if expr is not None else span
            raise ZynMLTypeError(f"compute() inputs are tensors; `{label}` is {B._kind(value)}"
                                 + ("; use it by name inside the body instead"
                                    if isinstance(value, (int, float)) else
                                    B.await_hint(value)), where)
        return t

    def _lowered_block(self, node, inputs, labels, spans, scalars) -> LoweredBlock:
        """The block lowered (checked, passed) for these input dtypes and ranks and scalar
        types, once: every later run with them reuses it."""
        key = (id(node), labels, tuple([(t._dtype, len(t._shape)) for t in inputs]),
               tuple(scalars.items()) if scalars else (), self.extra_key)
        block = self.blocks.lowered.get(key)
        if block is None or block.node is not node:
            sigs = [InputSig(label, t.dtype, t.ndim, span, t.shape)
                    for label, t, span in zip(labels, inputs, spans)]
            block = self.blocks.lowered[key] = LoweredBlock(node, self.lower(node, sigs, scalars))
        return block

    def lower(self, node, sigs, scalars) -> LoweredKernel:
        self.kernel_counter += 1
        name = self._kernel_name(node)
        # a block inside a pipeline is written in the text the pipeline was defined in
        source = self.pipelines[-1].source if self.pipelines else self.source
        lowered = lower_compute(node, sigs, scalars, name, source, self.extra_annotations)
        run_pipeline(lowered)
        return lowered

    def _kernel_name(self, node) -> str:
        kind = "kernel"
        for s in node.body:
            if isinstance(s, A.AnnotationStmt) and s.annotation.name == "kernel" and \
                    s.annotation.kernel:
                kind = s.annotation.kernel
        return f"{kind}_l{node.span.line}"

    def _devices_for(self, lowered, inputs=(), node=None) -> tuple:
        """(the device ids a compute block runs on, whether its output is committed there):
        @device("id"), @device(["a", "b"]) (with @parallel, split across them; without, the
        first); else the device its committed inputs share; else the session's default."""
        ann = lowered.annotations.get("device")
        if ann is None:
            committed = placement.committed_device(
                inputs, node.span if node is not None else None,
                "the inputs of this compute block")
            if committed is not None:
                return [committed], True
            return [self.session.default_device], False
        return self._annotated_devices(ann), True

    def _annotated_devices(self, ann) -> list:
        return annotated_devices(ann, self.eval)

    def _launch_split(self, devices, lowered, inputs, sizes, given, scalars, mode, node,
                      source=None):
        """A block split across devices (runtime/parallel.py) or run on a Dask cluster."""
        source = self.source if source is None else source

        def launch(device, parts, chunk_sizes, plan=None):
            # (the chunk's plan may be of the block with a wider output: f32 partial sums)
            plan = plan or chunk_plan(lowered, chunk_sizes)
            out = self._launch(device, plan.lowered, parts, chunk_sizes, scalars, node,
                               plan=plan, source=source)
            return out.data if isinstance(out, Tensor) else out

        def solve_chunk(shapes, chunk_given):
            return solve(lowered, shapes, chunk_given)

        options = getattr(self.session, "parallel_options", {})
        try:
            if devices[0].kind == "cluster":
                return devices[0].run(self, lowered, inputs, sizes, given, scalars, mode,
                                      solve_chunk, options)
            return run_split(devices, lowered, inputs, sizes, given, mode, launch, solve_chunk,
                             options.get("model_split", "features"), scalars=scalars,
                             site=(node.span, self.source))
        except ZynMLError as err:
            if err.span is NO_SPAN or err.span.line <= 0:
                err.span = node.span
            raise err.with_source(source)
        except Exception as err:        # a driver, NCCL or transport failure between devices
            names = ", ".join(d.id for d in devices)
            raise ZynMLDeviceError(f"running this block across {names} failed: "
                                   f"{type(err).__name__}: {err}",
                                   node.span).with_source(source) from None

    def _launch(self, device, lowered, inputs, sizes, scalars, node, in_background=False,
                commit=False, plan=None, fusion=None, source=None):
        if plan is None:            # a part of a block split across devices
            plan = BlockPlan(lowered, sizes)
        # what is running now, for progress displays (zynbook/kernel/progress.py)
        self.session.activity = (lowered.kernel.name, device.id)
        try:
            # an input the device cannot hold (u64 values past WebGPU's u32) is refused at
            # the block, as its launch's errors are
            arrays = [t.data if t.device == device.id else device.from_host(t.numpy())
                      for t in inputs]
            if in_background and hasattr(device, "launch_async"):
                # the device reads the output back asynchronously (WebGPU buffer mapping)
                out, launch = device.launch_async(lowered.kernel, arrays, sizes, scalars).result()
            else:
                prepared = plan.prepared(device, getattr(self.session, "tuning", None))
                out, launch = prepared.launch(arrays, scalars, in_background)
        except ZynMLError as err:
            if err.span is NO_SPAN or err.span.line <= 0:
                err.span = node.span
            if not in_background:       # (an @async block's error is its future's)
                failed = CompiledKernel(lowered, device, None, plan.sizes, fusion)
                failed.note = f"its launch failed: ZynML {err.kind} error"
                self.session.last_failed.append(failed)
            raise err.with_source(self.source if source is None else source)
        return self.launched(device, lowered, plan, out, launch, commit, fusion)

    def launched(self, device, lowered, plan, out, launch, commit=False, fusion=None):
        """A launch's output as a ZynML value (a number for a reduction to one value), the
        launch recorded for the inspector."""
        compiled = CompiledKernel(lowered, device, launch, plan.sizes, fusion)
        kernels, launches = getattr(_RECORDING, "lists", None) or \
            (self.session.last_kernels, self.session.launches)
        with self._lock:
            kernels.append(compiled)
            launches.append(launch)
        if not plan.out_shape:
            host = out if device.kind == "cpu" else device.to_host(out)
            return np.asarray(host).reshape(()).item()
        # (positional: a class called with keywords takes a slower path)
        made = Tensor(out, device.id, plan.out_shape, lowered.kernel.output.dtype, commit)
        self.last_made = (made, lowered.kernel.name, lowered.kernel.first_line)
        return made


def _past_range(n: int, dtype: str) -> str:
    """Why host int `n` cannot meet a tensor of `dtype` (numpy refuses it too)."""
    what = n if abs(n) < 10**20 else f"an int of {len(str(abs(n)))} digits"
    if not is_int(dtype):
        return f"{what} is too large for a float (numpy refuses it too)"
    wider = "compute in floats, as f64(...)" if dtype in ("i64", "u64") or \
        n.bit_length() > 63 else \
        f"convert the {dtype} operand to a wider type, as i64(...), to compute in that type"
    return f"{what} is out of bounds for {dtype}, the type it meets (numpy refuses it too); " \
        + wider


def _recorded_in(job, lists):
    """`job`, recording its launches in `lists` (_RECORDING)."""
    def run():
        _RECORDING.lists = lists
        try:
            return job()
        finally:
            _RECORDING.lists = None
    return run


# Interpreter.eval's handler of each expression class (methods called through the instance,
# where a test may replace one)
_EVAL = {
    A.Name: lambda self, e: self.lookup(e.id, e.span),
    A.Compute: lambda self, e: self.compute(e),
    A.Number: lambda self, e: e.value,
    A.String: lambda self, e: e.value,
    A.Bool: lambda self, e: e.value,
    A.Duration: lambda self, e: e.seconds,
    A.Size: lambda self, e: e.nbytes,
    A.ListLit: lambda self, e: [self.eval(x) for x in e.items],
    A.TupleLit: lambda self, e: tuple(self.eval(x) for x in e.items),
    A.BinOp: Interpreter._eval_binop,
    A.UnaryOp: Interpreter._eval_unary,
    A.Attr: lambda self, e: self.attr(self.eval(e.base), e.name, e.span),
    A.Index: lambda self, e: self.index(self.eval(e.base), e),
    A.Call: lambda self, e: self.call(e),
    A.Pipe: lambda self, e: self.pipe(e),
    A.Await: lambda self, e: self.await_(e),
    A.OpRef: Interpreter._eval_opref,
}

_MISSING = object()


def _one_block(program: A.Program):
    """(statement, compute node, name bound or None, whether the cell shows a value) of a
    program that is one compute block: `let y = compute(...) {...}`, then `y` or nothing,
    or the block alone; None for any other program."""
    body = program.body
    first = body[0] if body else None
    if isinstance(first, A.Let) and isinstance(first.value, A.Compute) and \
            first.type is None and not first.destructure:
        name = first.names[0]
        if len(body) == 1:
            return first, first.value, name, False
        last = body[1]
        if len(body) == 2 and isinstance(last, A.ExprStmt) and isinstance(last.expr, A.Name) \
                and last.expr.id == name:
            return first, first.value, name, True
    elif len(body) == 1 and isinstance(first, A.ExprStmt) and isinstance(first.expr, A.Compute):
        return first, first.expr, None, True
    return None


def _fixed_devices(lowered) -> bool:
    """Whether the devices a block runs on follow from its inputs and the session alone (no
    @device, or one naming a device id as a literal)."""
    ann = lowered.annotations.get("device")
    return ann is None or len(ann.args) == 1 and not ann.kwargs and \
        isinstance(ann.args[0], A.String)


class _WarmCell:
    """A one-block program (`_one_block`) whose last run launched its block where it was
    met: what that launch was decided from (`Interpreter._cell_key`) and what was decided
    (the lowered block, its plan, the device, the output's placement). A run with the same
    key launches that plan again (`Interpreter._replay`) without interpreting the
    statements, lowering, planning or placing anything: each of those is a function of the
    key, and the device's own launch plan is still looked up (tuning settings)."""

    __slots__ = ("stmt", "node", "name", "shows", "key", "lowered", "plan", "device", "commit")

    def __init__(self, form, key, lowered, plan, device, commit):
        self.stmt, self.node, self.name, self.shows = form
        self.key, self.lowered, self.plan = key, lowered, plan
        self.device, self.commit = device, commit


class _BuiltinRef:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<builtin {self.name}>"


_TENSOR_METHODS = ("to_device", "reshape", "sum", "mean", "max", "min", "numpy")


class _Method:
    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def __repr__(self):
        return f"<method {self.name}>"

    def call(self, interp, args, kwargs, node):
        obj = self.obj
        if isinstance(obj, Tensor):
            if self.name == "to_device":
                B._unexpected(kwargs, ("id", "copy"), "to_device")
                place = (0, None)
                if "id" in kwargs:      # the documented signature, to_device(id, copy=true)
                    if args:
                        raise ZynMLTypeError("to_device(): `id` is given twice")
                    args, place = [kwargs["id"]], ("id", None)
                B._arity(args, 1, "to_device", "x.to_device(\"cuda:0\", copy=true)")
                copy = kwargs.get("copy", True)
                if not isinstance(copy, (bool, np.bool_)):
                    err = ZynMLTypeError("to_device(): copy= takes true or false, not "
                                         f"{B._kind(copy)}")
                    err.argument = ("copy", None)
                    raise err
                target = B.device_argument(args[0], place).id
                if not copy and obj.device == target:
                    obj.committed = True    # the tensor itself, now placed on purpose
                    return obj
                if copy and obj.device == target:
                    # a copy on the tensor's own device (a WebGPU or Metal buffer: a new
                    # one there), of its dtype (a bf16 tensor's array is f32)
                    data = B.xp_of(obj).array(B.host_array(obj), copy=True) \
                        if isinstance(obj.data, np.ndarray) or B.xp_of(obj) is not np \
                        else get_device(target).from_host(obj.numpy())
                    return Tensor(data, obj.device, obj.shape, obj.dtype, committed=True)
                moved = interp.move(obj, target)
                if copy and isinstance(moved.data, np.ndarray) and \
                        isinstance(obj.data, np.ndarray) and \
                        np.may_share_memory(moved.data, obj.data):
                    # two devices of host memory (cpu, cpu:native) share the array: a copy
                    moved = Tensor(moved.data.copy(), moved.device, moved.shape, moved.dtype,
                                   committed=True)
                return moved
            if self.name == "numpy":       # a copy on the host (the CPU's array too)
                B._unexpected(kwargs, (), "numpy")
                B._arity(args, 0, "numpy", "x.numpy()")     # (x.numpy(1) ignored the 1)
                return Tensor(obj.numpy().copy() if isinstance(obj.data, np.ndarray)
                              else obj.numpy(), "cpu")
            # numpy's method forms: x.sum(1) is x.sum(axis=1), x.reshape(3, 2) is
            # x.reshape([3, 2]) (both were refused with the function's usage)
            if self.name in ("sum", "mean", "max", "min") and len(args) == 1 and \
                    "axis" not in kwargs:
                args, kwargs = (), {**kwargs, "axis": args[0]}
            if self.name == "reshape" and (len(args) > 1 or args and B._is_int(args[0])):
                args = ([*args],)
            fn = B.BUILTINS[self.name]
            return fn(interp, [obj] + list(args), kwargs)
        if isinstance(obj, MemoryPool):
            if self.name == "allocate":
                B._unexpected(kwargs, ("shape", "dtype"), "allocate")
                shape = kwargs.get("shape", args[0] if args else None)
                if shape is None:
                    raise ZynMLTypeError("pool.allocate(shape=[...]) needs a shape", node.span)
                return obj.allocate(B._shape(shape), B._dtype(kwargs.get("dtype")))
            if self.name == "free":
                B._arity(args, 1, "free", "pool.free(tensor)")
                return obj.free(args[0])
            if self.name == "reset":
                B._unexpected(kwargs, (), "reset")
                B._arity(args, 0, "reset", "pool.reset()")
                return obj.reset()
        if isinstance(obj, (Future, _Futures)) and self.name == "done":
            B._unexpected(kwargs, (), "done")
            B._arity(args, 0, "done", "f.done()")
            return obj.done()
        raise ZynMLTypeError(f"cannot call {self.name}", node.span)


def _live(value, name, span):
    """`value`, unless it is a tensor whose memory pool released it, or a view of one made
    before: an error naming it."""
    if type(value) is Tensor:
        gone = released(value.data)
        if gone is not None:
            raise gone[0].error(name, span, view=gone[1])
    return value


class _Futures:
    """`all(futures)` or `any(futures)` of `@async` blocks, as a cell gives it to Python too:
    `await g` there gives its `result()`, the event loop running meanwhile, as `await f`
    of one future does."""

    def __init__(self, futures):
        self.futures = futures

    def __repr__(self):
        return f"{self.name}({len(self.futures)} futures)"

    def cancel(self, why: str = ""):
        for f in self.futures:
            f.cancel(why)

    def __await__(self):
        import asyncio

        return asyncio.get_running_loop().run_in_executor(None, self.result).__await__()


class _Gather(_Futures):
    """`all(futures)`: every result, in order."""
    name = "all"

    def done(self):
        return all(f.done() for f in self.futures)

    def result(self, timeout=None):
        done, pending = cf.wait([f.inner for f in self.futures], timeout=timeout)
        if pending:
            raise cf.TimeoutError()
        return [f.result() for f in self.futures]


class _FirstOf(_Futures):
    """`any(futures)`: (result, index) of the first to finish without an error (of those
    found finished at once, the lowest index); where every one fails, the lowest index's
    error. A failure is kept while another may still succeed, so which comes first in time
    does not decide between an error and a value."""
    name = "any"

    def done(self):
        return any(f.done() for f in self.futures)

    def result(self, timeout=None):
        inner = [f.inner for f in self.futures]
        deadline = None if timeout is None else time.monotonic() + timeout
        pending, failed = set(inner), []
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = cf.wait(pending, timeout=left, return_when=cf.FIRST_COMPLETED)
            if not done:
                raise cf.TimeoutError()
            ok = [f for f in done if not f.cancelled() and f.exception() is None]
            if ok or not pending:
                first = min(inner.index(f) for f in (ok or failed + list(done)))
                return (inner[first].result(), first)       # (the error, where all failed)
            failed += done


def _same_memory(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors are, or view, one array (a sharded tensor only itself)."""
    if a is b:
        return True
    if isinstance(a, ShardedTensor) or isinstance(b, ShardedTensor):
        return False
    if a.data is b.data:
        return True
    return isinstance(a.data, np.ndarray) and isinstance(b.data, np.ndarray) and \
        np.may_share_memory(a.data, b.data)


def _memory_message(err: MemoryError) -> str:
    """What a failed allocation asked for, in words (numpy says its shape and dtype)."""
    shape, dtype = getattr(err, "shape", None), getattr(err, "dtype", None)
    if shape is not None and dtype is not None:
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        return (f"out of memory: this line asked for {_size_text(nbytes)} (an array of shape "
                f"{list(shape)} of {np.dtype(dtype).name}), more than the device can give")
    detail = str(err).strip()
    return "out of memory on this line" + (f": {detail}" if detail else "")


def _size_text(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _dim_text(d) -> str:
    return d.id if isinstance(d, A.Name) else "?"
