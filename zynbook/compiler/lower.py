"""Lower one checked `compute()` block to a CIR kernel.

Lowering resolves every name of the body (inputs, loop variables, locals, shared arrays,
size names, scalar arguments), gives every expression its type, works out the output's
shape from the stores (or the reduction), and records the *dimension constraints* that tie
the inputs' axes to the loop ranges that index them. `dims.solve` checks those constraints
against real shapes. Lowering only translates: the loop nest comes out as written, and the
pass pipeline (`passes/pipeline.py`: widening `var`s, marking parallel loops, checking the
kernel type, ...) makes the CIR the devices run.
"""
from __future__ import annotations

from functools import reduce

import math
import re
import struct
from dataclasses import dataclass, field, fields, is_dataclass, replace

from ..errors import NO_SPAN, Span, ZynMLNameError, ZynMLShapeError, ZynMLTypeError
from . import affine, cir
from . import ast as A
from .passes.tiles import substitute
from .types import (CONSTANTS, arithmetic_dtype, canonical_dtype, holds, int_dtype, is_float,
                    is_int, is_weak, promote)

BOOL = cir.Ty("bool")
I32 = affine.I32
F32 = cir.Ty("f32")

KERNEL_TYPES = ("elementwise", "reduce", "matmul", "batched_matmul", "conv2d",
                "conv2d_depthwise", "attention", "flash_attention", "fused")
ANNOTATIONS = ("kernel", "device", "async", "parallel", "workgroup", "shared", "broadcast",
               "tile", "autotune", "nofuse")
CAST_NAMES = {"float": "f32", "int": "i32", "f16": "f16", "bf16": "bf16", "f32": "f32",
              "f64": "f64", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8",
              "u16": "u16", "u32": "u32", "u64": "u64", "bool": "bool"}
KERNEL_BUILTINS = (set(cir.MATH_FUNCTIONS) | set(cir.TILE_FUNCTIONS) | set(CAST_NAMES)
                   | {"dot", "reduce", "barrier", "where"})


@dataclass
class InputSig:
    """What lowering knows of one input: how the body names it and its element type/rank."""
    label: str                 # as written: "x", "weights.qkv_proj"
    dtype: str
    rank: int
    span: Span = NO_SPAN
    shape: tuple | None = None  # where bound (run()): its sizes, for messages only


@dataclass
class Constraint:
    """`left` (a size name) must equal the size expression `right` (`what` says why)."""
    left: str
    right: cir.Expr
    span: Span
    what: str
    loop: bool = False         # a loop covering the axis `left` (0..right indexes it)
    guarded: bool = False      # the index sits under an `if` (see dims.solve)
    # axes combined elementwise: equal, or either of them 1; "store": a tile's axis
    # (`left`) stored into a slice as long as `right`: equal, or the tile's 1
    broadcast: bool | str = False


@dataclass
class BoundCheck:
    """Index expression whose largest value `high` must stay below axis size `dim`."""
    dim: str
    low: cir.Expr
    high: cir.Expr
    span: Span
    what: str
    # (start, stop) of the loops the index reads: where one runs no iteration at a launch's
    # sizes, the index is never computed (its `high` is then no bound at all)
    loops: tuple = ()


@dataclass
class ArgExtent:
    """An extent start..stop that an argmin/argmax reduces over, met where the loops `outer`
    (start, stop) all run."""
    op: str
    start: cir.Expr
    stop: cir.Expr
    span: Span
    what: str                  # what is empty: "this loop runs no iteration"
    outer: tuple = ()


@dataclass
class WeakCheck:
    """A weak integer (literals, sizes, host ints) meeting an integer of the narrower `dtype`:
    its value must be one of that dtype's, as numpy refuses a Python int out of an array's
    bounds (`u8 + 256`, `i8 + 200`: OverflowError) rather than wrap it."""
    value: cir.Expr
    dtype: str
    span: Span

    def refuse_outside(self, sizes: dict) -> None:
        """A type error where the value at these sizes is outside `dtype` (none where it
        reads a name they do not give)."""
        try:
            v = cir.eval_expr_static(self.value, sizes)
        except (KeyError, TypeError, ZeroDivisionError):
            return
        if not isinstance(v, int) or isinstance(v, bool):
            return
        if self.value.ty.dtype == "i32":
            v = (v + 2 ** 31) % 2 ** 32 - 2 ** 31    # weak integers are i32's
        if holds(self.dtype, v):
            return
        value = self.value.operand if isinstance(self.value, cir.Cast) else self.value
        text = cir.format_expr(value)           # (a host int past i32 as its name, not i64(k))
        what = f"`{text}` is {v} here," if text != str(v) else f"the integer {v} is"
        wider = "i64" if self.dtype in ("u32", "u64") else "i32"
        raise ZynMLTypeError(f"{what} out of bounds for {self.dtype}, the type it meets (numpy "
                             f"refuses it too); convert the {self.dtype} operand to a wider "
                             f"type, as {wider}(...), to compute in that type", self.span)


@dataclass
class LoweredKernel:
    kernel: cir.Kernel
    constraints: list
    bound_checks: list
    size_spans: dict           # size name -> span of its first use (for "cannot infer")
    labels: dict               # buffer name -> label as written
    defaults: dict             # size name -> CIR expr used when nothing else binds it
    annotations: dict          # annotation name -> A.Annotation (device, async, ...)
    placeholders: dict = field(default_factory=dict)   # buffer name -> axis size names
    scalar_labels: dict = field(default_factory=dict)  # scalar argument -> label as written
    notes: list = field(default_factory=list)          # (message, span): told, not refused
    # the CIR as lowered, once the pass pipeline (passes/pipeline.py) has made `kernel`
    before_passes: cir.Kernel | None = None
    weak_checks: list = field(default_factory=list)    # WeakChecks of sizes (dims.solve)
    # ArgExtents of the reduce(argmin/argmax)s: one over nothing at a launch's sizes is an
    # error there (dims.solve), as numpy's argmax of an empty sequence is (it gave -1)
    arg_loops: list = field(default_factory=list)
    bound_spans: dict = field(default_factory=dict)    # loop var -> span of its stop


def identifier(label: str) -> str:
    """A label's CIR name: the label itself (`w.a` keeps its dot, so that it never meets a
    local or host name `w_a`; the printers spell it apart: launch/scalar.user_name)."""
    return label


def dotted(e) -> str | None:
    """`weights.ln1_weight` for an attribute chain on a name, else None."""
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.Attr):
        base = dotted(e.base)
        return None if base is None else f"{base}.{e.name}"
    return None


def _shared_declared(body, name: str):
    """The line of a `shared var name[...]` somewhere in `body`, else None."""
    for st in body:
        if isinstance(st, A.SharedVar) and st.name == name:
            return st.span.line
        for v in vars(st).values():
            if isinstance(v, list) and v and isinstance(v[0], A.Stmt):
                line = _shared_declared(v, name)
                if line is not None:
                    return line
    return None


def _simple_text(e) -> str:
    """`x[i, 0]` for a name or an element read by names and numbers, else `...` (for a
    message that shows what to write)."""
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.Number):
        return repr(e.value)
    if isinstance(e, A.Index) and isinstance(e.base, A.Name):
        return f"{e.base.id}[{', '.join(_simple_text(it) for it in e.items)}]"
    return "..."


def _refuse_chained_index(e: "A.Index"):
    """`m[i][j]`, Python's and C's way, is a type error that says to write `m[i, j]`."""
    inner = e.base
    if not isinstance(inner, A.Index) or dotted(inner.base) is None:
        return
    items = [it.id if isinstance(it, A.Name) else "..." for it in inner.items + e.items]
    raise ZynMLTypeError(f"`{dotted(inner.base)}[...][...]` indexes twice: write every index in "
                         f"one pair of brackets, `{dotted(inner.base)}[{', '.join(items)}]`",
                         e.span)


def _item_spans(e: "A.Index") -> tuple:
    """Where each index entry of `e` is written (an out-of-range one is pointed at)."""
    return tuple(item.span for item in e.items)


def _names_in(node):
    """The A.Name nodes inside an AST expression."""
    if isinstance(node, A.Name):
        yield node
    elif is_dataclass(node):
        for f in fields(node):
            yield from _names_in(getattr(node, f.name))
    elif isinstance(node, (list, tuple)):
        for x in node:
            yield from _names_in(x)


@dataclass
class _Binding:
    kind: str                  # input | loop | local | size | scalar | shared
    ty: cir.Ty
    name: str                  # the CIR name
    mutable: bool = False
    line: int = 0
    shadowed_loop: "_Binding | None" = None
    pinned: bool = False       # `var v: f16 = ...`: assignments convert to the declared type


class _Lowering:
    def __init__(self, node: A.Compute, inputs: list, scalars: dict, name: str, source: str,
                 extra_annotations: list, reserved: frozenset = frozenset(),
                 out_dtype: str | None = None):
        self.node = node
        self.reserved = reserved           # names of sizes and scalars no local may take
        self.out_dtype = out_dtype         # out's dtype, which `out[...] += v` reads out in
        self.out_reads: set = set()        # the dtypes `out[...] += v` read out in
        self.weak_out_stores: set = set()  # ids of the values `out[...] += weak` stores
        self.weak_out_floats: list = []    # (value, span) of float literals added so
        self.kernel_name = name
        self.source = source
        self.inputs = inputs
        self.scalar_types = scalars        # free name -> dtype of a host scalar (ints = sizes)
        self.constraints: list = []
        self.bound_checks: list = []
        self.weak_checks: list = []        # weak integers reading sizes, checked at launch
        self.arg_loops: list = []          # LoweredKernel.arg_loops
        self.window_ties: dict = {}        # (axis, loop var) -> its loop constraints (x[i])
        self.window_reach: dict = {}       # (axis, loop var) -> largest c of a read x[i + c]
        self.stencils: dict = {}           # (axis, var of a loop from s > 0) -> its reads' offsets
        self.size_spans: dict = {}
        self.sizes: set = set()
        self.scalar_args: dict = {}        # name -> dtype (non-size scalars)
        self.buffers: dict = {}            # cir name -> (label, dtype, rank, [axis names])
        self.shared: dict = {}             # shared array name -> cir.Ty
        self.out_stores: list = []         # (index tuple, value, span, loops, enclosing ifs)
        self.whole_out: list = []          # values written by `out = ...`
        self.yields: list = []
        self.ranges: dict = {}             # loop var -> (start, stop)
        self.loop_stack: list = []
        self.guard_depth = 0
        self.guards: list = []             # conditions of the `if`s whose then-branch this is
        self.varying_ifs: list = []        # per enclosing if: its span when it may differ per thread
        self.annotations: dict = {}
        self.weak_vars: set = set()        # locals still holding a weakly typed literal
        self.int_lets: dict = {}           # let-bound integer scalars -> their values, for out's size
        self.tile_lets: dict = {}          # immutable tile lets reading no var -> their values
        self.var_names: set = set()        # the cir names of the block's `var`s
        self.weak_lets: dict = {}          # immutable weak float lets of sizes and literals -> values
        self.scalar_labels: dict = {}      # cir name of a scalar argument -> label as written
        self.loop_info: dict = {}          # loop var -> (start, stop, step, RangeIter)
        self.axis_said: dict = {}          # an input axis's size name -> as a message says it
        self.notes: list = []              # (message, span) worth telling, never refusing
        for ann in list(node.annotations) + list(extra_annotations):
            self._annotation(ann)
        self.scopes: list = [{}]
        # an axis's size name is none the block writes: a host int or float `x_d0` (or an
        # input of that name) was read as the length of `x`
        taken = {n.id for n in _names_in(node)} | {identifier(s.label) for s in inputs}
        for sig in inputs:
            if sig.label == "out":
                raise ZynMLNameError("`out` names the kernel's output and cannot be an input",
                                     sig.span)
            cname, n = identifier(sig.label), 1
            while cname in self.buffers:        # `w.a` beside `w_a`: a name of its own
                n += 1
                cname = f"{identifier(sig.label)}_{n}"
            axes = [cir.fresh_name(f"{cname}_d{k}", taken) for k in range(sig.rank)]
            self.buffers[cname] = (sig.label, sig.dtype, sig.rank, axes)
            self.sizes.update(axes)
            for k, axis in enumerate(axes):
                self.axis_said[axis] = str(sig.shape[k]) if sig.shape is not None else \
                    f"{sig.label}.shape[{k}]"

    # ------------------------------------------------------------------ scopes
    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def bind(self, name: str, binding: _Binding):
        self.scopes[-1][name] = binding

    def buffer_for(self, e) -> str | None:
        label = dotted(e)
        if label is None:
            return None
        if isinstance(e, A.Name):
            b = self.lookup(e.id)
            if b is not None and b.kind in ("input", "shared"):
                return b.name
            if b is not None:
                return None
        for cname, info in self.buffers.items():
            if info[0] == label:
                return cname
        cname = identifier(label)
        if cname in self.shared and not isinstance(e, A.Name):
            return cname        # (a shared array's own name is bound while it is in scope)
        return None

    # ----------------------------------------------------------- annotations
    def _annotation(self, ann: A.Annotation):
        check_annotation(ann, self.annotations)
        if ann.name == "broadcast":
            self.annotations.setdefault("broadcast", []).append(ann)
        else:
            self.annotations[ann.name] = ann

    # --------------------------------------------------------------- entry
    def run(self) -> LoweredKernel:
        for stmt in self.node.body:
            if isinstance(stmt, A.AnnotationStmt):
                self._annotation(stmt.annotation)
        kernel_type = self._kernel_type()
        self.kernel_kind = kernel_type.kind
        self.reduce_op = kernel_type.param("op") if kernel_type.kind == "reduce" else None
        for key, value in kernel_type.params:
            if key in ("stride", "padding") and isinstance(value, int):
                self.bind(key, _Binding("size", I32, key))
                self.sizes.add(key)
        body = self.block(self.node.body, top=True)
        output = self._output(kernel_type)
        axis = kernel_type.param("axis") if kernel_type.kind == "reduce" else None
        if self.reduce_op and self.yields:
            op = _bool_op(self.reduce_op, self.yields[0][0].ty.dtype)
            if op != self.reduce_op:
                params = dict(kernel_type.params, op=op)
                kernel_type = replace(kernel_type, params=tuple(sorted(params.items())))
        if axis is not None and axis < 0 and self.yields:   # from the innermost loop: as counted
            params = dict(kernel_type.params, axis=axis % len(self.yields[0][3]))   # from the outer
            kernel_type = replace(kernel_type, params=tuple(sorted(params.items())))
        schedule = self._schedule(max(_nest_depth(body), len(output.shape)))
        dims = tuple(sorted(self.sizes))
        scalars = tuple(cir.Scalar(n, t) for n, t in sorted(self.scalar_args.items()))
        inputs = tuple(cir.Buffer(cname, dtype, tuple(axes))
                       for cname, (label, dtype, rank, axes) in self.buffers.items())
        kernel = cir.Kernel(self.kernel_name, kernel_type, inputs, output, dims, scalars, tuple(body),
                            schedule, _block_text(self.source, self.node.span),
                            self.node.span.line)
        defaults = self._defaults(kernel_type)
        labels = {c: v[0] for c, v in self.buffers.items()}
        placeholders = {c: v[3] for c, v in self.buffers.items()}
        self._reach_windows()
        return LoweredKernel(kernel, self.constraints, self.bound_checks, self.size_spans,
                             labels, defaults, self.annotations, placeholders,
                             dict(self.scalar_labels), list(self.notes),
                             weak_checks=list(self.weak_checks),
                             arg_loops=list(self.arg_loops),
                             bound_spans={v: info[3].stop.span
                                          for v, info in self.loop_info.items()})

    def _kernel_type(self) -> cir.KernelType:
        ann = self.annotations.get("kernel")
        if ann is None:
            return cir.KernelType("custom")
        if not ann.kernel:
            raise ZynMLTypeError("@kernel needs a kernel type, e.g. `@kernel elementwise`",
                                 ann.span)
        kind = ann.kernel
        if kind not in KERNEL_TYPES:
            close = [k for k in KERNEL_TYPES if _similar(k, kind)]
            if close:
                self._note(f"`@kernel {kind}` is not a known kernel type, so this block runs as "
                           f"a custom kernel; did you mean `@kernel {close[0]}`?",
                           ann.kernel_span)
        params = {}
        if kind == "reduce":
            if not ann.kernel_args:
                raise ZynMLTypeError("reduce needs an operator: reduce(+), reduce(max, axis=1)",
                                     ann.kernel_span)
            op = ann.kernel_args[0]
            opname = op.op if isinstance(op, A.OpRef) else (op.id if isinstance(op, A.Name) else None)
            if opname not in cir.REDUCE_OPS:
                raise ZynMLTypeError(
                    f"unknown reduction operator{f' `{opname}`' if opname else ''}; expected "
                    f"one of {', '.join(cir.REDUCE_OPS)}", op.span)
            params["op"] = opname
            if len(ann.kernel_args) > 1:
                raise ZynMLTypeError("reduce takes one operator and an optional axis=",
                                     ann.kernel_args[1].span)
        elif ann.kernel_args:
            raise ZynMLTypeError(f"{kind} takes only keyword parameters", ann.kernel_args[0].span)
        for kw in ann.kernel_kwargs:
            # a parameter the type has not is named first (`keepdims=true` said it must be a
            # number, as if reduce took it)
            if kind == "reduce" and kw.name != "axis":
                raise ZynMLTypeError(f"reduce has no parameter `{kw.name}` (only axis=)", kw.span)
            takes = _KERNEL_PARAMS.get(kind, ())
            if kind in KERNEL_TYPES and kw.name not in takes:
                # (a misspelt `strides=` ran with the default stride, silently)
                raise ZynMLTypeError(
                    f"@kernel {kind} has no parameter `{kw.name}`" + (
                        f"; it takes {', '.join(t + '=' for t in takes)}" if takes else
                        " (it takes none)"), kw.span)
            if not isinstance(kw.value, A.Number) and not (
                    isinstance(kw.value, A.UnaryOp) and isinstance(kw.value.operand, A.Number)):
                raise ZynMLTypeError(f"kernel parameter `{kw.name}` must be a number", kw.value.span)
            value = kw.value.value if isinstance(kw.value, A.Number) else -kw.value.operand.value
            least = _INT_KERNEL_PARAMS.get((kind, kw.name))
            if least is not None and (not isinstance(value, int) or value < least):
                raise ZynMLTypeError(f"{kw.name}= of @kernel {kind} is an integer"
                                     f"{'' if least < -1 else f' at least {least}'}, not {value}",
                                     kw.value.span)
            params[kw.name] = value
        return cir.KernelType(kind, tuple(sorted(params.items())), ann.kernel_span)

    def _note(self, message: str, span: Span):
        """Something worth telling that refuses nothing: kept on the kernel, and warned."""
        import warnings
        from ..errors import ZynMLWarning
        self.notes.append((message, span))
        warnings.warn_explicit(ZynMLWarning(message, span, self.source), ZynMLWarning,
                               "<zynml>", span.line)

    def _schedule(self, depth: int = 0) -> cir.Schedule:
        wg = shared = None
        tile, bcast, parallel = (), (), None
        if "workgroup" in self.annotations:
            ann = self.annotations["workgroup"]
            if not 1 <= len(ann.args) <= 3 or ann.kwargs:
                raise ZynMLTypeError("@workgroup takes one to three sizes: @workgroup(16, 16)",
                                     ann.span)
            wg = tuple(self._positive_const(a, "@workgroup", at=ann) for a in ann.args)
            if _prod(wg) > 1024:
                raise ZynMLTypeError(f"@workgroup({', '.join(map(str, wg))}) has {_prod(wg)} "
                                     f"threads; at most 1024", ann.span)
        if "shared" in self.annotations:
            ann = self.annotations["shared"]
            if ann.kwargs:          # (@shared(16, foo=1) ignored foo=)
                raise ZynMLTypeError(f"@shared has no parameter `{ann.kwargs[0].name}`",
                                     ann.kwargs[0].span)
            if len(ann.args) != 1:
                raise ZynMLTypeError("@shared takes one size in bytes: @shared(16 * 16 * 4)",
                                     ann.span)
            if not _size_expression(ann.args[0]):
                raise ZynMLTypeError("@shared takes one size in bytes: @shared(16 * 16 * 4)",
                                     ann.args[0].span)
            # a size expression over named sizes is a hint we cannot price yet: keep none
            if _const_int(ann.args[0]) is not None:
                shared = self._positive_const(ann.args[0], "@shared", at=ann)
        tile_span = autotune = None
        if "autotune" in self.annotations:
            autotune = True
        if "tile" in self.annotations:
            ann = self.annotations["tile"]
            tile_span = ann.span
            if ann.args or not ann.kwargs:
                raise ZynMLTypeError("@tile takes named sizes: @tile(block_q=64, block_kv=64)",
                                     ann.span)
            tile = tuple(sorted((kw.name, self._positive_const(kw.value, f"@tile {kw.name}", at=ann))
                                for kw in ann.kwargs))
        for ann in self.annotations.get("broadcast", []):
            if not ann.args or len(ann.args) > 1:
                raise ZynMLTypeError("@broadcast takes an input and an axis: @broadcast(v, axis=1)",
                                     ann.span)
            target = self.buffer_for(ann.args[0])
            if target is None:
                raise ZynMLNameError(f"@broadcast names `{dotted(ann.args[0]) or '?'}`, "
                                     "which is not an input of this compute block",
                                     ann.args[0].span)
            axis = 0
            for kw in ann.kwargs:
                if kw.name != "axis":
                    raise ZynMLTypeError(f"@broadcast has no parameter `{kw.name}`", kw.span)
                axis = self._positive_const(kw.value, "@broadcast axis", allow_zero=True)
                if axis >= max(depth, 1):
                    raise ZynMLShapeError(
                        f"@broadcast axis {axis} is out of range: this loop nest has {depth} "
                        f"ax{'i' if depth == 1 else 'e'}s (axis 0"
                        f"{f' to {depth - 1}' if depth > 1 else ''})", kw.value.span)
            bcast += ((target, axis),)
        if "parallel" in self.annotations:
            ann = self.annotations["parallel"]
            if ann.kwargs:
                raise ZynMLTypeError(f"@parallel has no parameter `{ann.kwargs[0].name}`",
                                     ann.kwargs[0].span)
            if len(ann.args) != 1 or not isinstance(ann.args[0], A.Name) or \
                    ann.args[0].id not in ("data", "model"):
                raise ZynMLTypeError("@parallel takes `data` or `model`", ann.span)
            parallel = ann.args[0].id
        return cir.Schedule(wg, shared, tile, bcast, parallel, autotune, tile_span)

    def _positive_const(self, e, what, allow_zero=False, allow_names=False, at=None):
        value = _const_int(e, allow_names)
        span = at.span if at is not None else e.span
        if value is None:
            raise ZynMLTypeError(f"{what} must be a constant integer", span)
        if value < 0 or (value == 0 and not allow_zero):
            # an axis may be 0: "positive" would refuse the value the message suggests
            raise ZynMLTypeError(f"{what} must be {'0 or more' if allow_zero else 'positive'}, "
                                 f"not {value}", span)
        return value

    def _defaults(self, kt: cir.KernelType) -> dict:
        """Sizes a kernel type defines when the program does not: conv2d's geometry."""
        out = {}
        if kt.kind in ("conv2d", "conv2d_depthwise") and self.buffers:
            first = next(iter(self.buffers.values()))
            if first[2] == 4:
                v = affine.var
                stride, padding = kt.param("stride"), kt.param("padding")
                out["stride"] = affine.const(stride if stride is not None else 1)
                out["padding"] = affine.const(padding if padding is not None else 0)
                out["in_h"], out["in_w"] = v(first[3][2]), v(first[3][3])
                for o, i, k in (("out_h", "in_h", "kernel_h"), ("out_w", "in_w", "kernel_w")):
                    num = cir.Bin("-", cir.Bin("+", v(i), cir.Bin("*", affine.const(2), v("padding"), I32), I32), v(k), I32)
                    out[o] = cir.Bin("+", cir.Bin("/", num, v("stride"), I32), affine.const(1), I32)
        return out

    # -------------------------------------------------------------- statements
    def block(self, stmts, top=False) -> list:
        self.scopes.append({})
        out = []
        try:
            for s in stmts:
                lowered = self.stmt(s, top)
                if lowered is not None:
                    out.extend(lowered if isinstance(lowered, list) else [lowered])
        finally:
            self.scopes.pop()
        return out

    def stmt(self, s, top):
        line = s.span.line
        if isinstance(s, A.AnnotationStmt):
            if not top:
                raise ZynMLTypeError("annotations belong at the top of a compute body",
                                     s.span)
            return None
        if isinstance(s, A.Let):
            if s.destructure:
                raise ZynMLTypeError("tuple destructuring is host code; not inside a kernel",
                                     s.span)
            value = self.expr(s.value)
            value = self._annotated(value, s.type, s.value.span)
            name = s.names[0]
            prev = self.lookup(name)
            shadow = prev if prev is not None and prev.kind == "loop" else None
            cname = self._fresh_local(name)
            self.bind(name, _Binding("local", value.ty, cname, False, line, shadow))
            if self._is_weak(value):
                self.weak_vars.add(cname)
                if is_float(value.ty.dtype) and not value.ty.shape and s.type is None and all(
                        n.name in self.sizes or n.name in self.weak_lets or n.name in self.int_lets
                        for n in cir.walk(value) if isinstance(n, cir.Var)):
                    self.weak_lets[cname] = substitute(value, {**self.int_lets, **self.weak_lets})
            if not value.ty.shape and is_int(value.ty.dtype):
                self.int_lets[cname] = substitute(value, self.int_lets)
            if value.ty.shape and not any(isinstance(n, cir.Var) and n.name in self.var_names
                                          for n in cir.walk(value)):
                self.tile_lets[cname] = value
            return cir.Let(cname, value, False, line)
        if isinstance(s, A.VarDecl):
            value = self.expr(s.value)
            if s.type is None:      # `var c = 2 ** 31` holds 2147483648, as `let` reads it
                value = self._exact_int(value, s.value.span)
            value = self._annotated(value, s.type, s.value.span)
            cname = self._fresh_local(s.name)
            self.var_names.add(cname)
            binding = _Binding("local", value.ty, cname, True, line, pinned=s.type is not None)
            self.bind(s.name, binding)
            if self._is_weak(value) and not binding.pinned:
                self.weak_vars.add(cname)
            return cir.Let(cname, value, True, line)
        if isinstance(s, A.Assign):
            return self.assign(s)
        if isinstance(s, A.For):
            return self.loop(s.iters, s.body, line)
        if isinstance(s, A.If):
            cond = self.condition(s.cond)
            self.guard_depth += 1
            # a condition over loop variables, locals or data may differ between threads
            varying = any(isinstance(n, cir.Load) or isinstance(n, cir.Var) and n.name not in
                          self.sizes and n.name not in self.scalar_args for n in cir.walk(cond))
            self.varying_ifs.append(s.cond.span if varying else None)
            try:
                then = self.guarded_block(s.then, cond)
                # the else-branch runs where the condition fails: `if i + 2 >= n: ... else:
                # out[i] = ...` writes out as far as `if i + 2 < n` would
                orelse = self.guarded_block(s.orelse, cir.negated(cond)) if s.orelse else []
            finally:
                self.guard_depth -= 1
                self.varying_ifs.pop()
            return cir.If(cond, tuple(then), tuple(orelse), line)
        if isinstance(s, A.Yield):
            return self.yield_(s)
        if isinstance(s, A.SharedVar):
            for node in s.dims:
                for n in _names_in(node):
                    b = self.lookup(n.id)
                    if b is not None and b.kind in ("loop", "local"):
                        # one allocation serves every iteration: its size cannot vary
                        raise ZynMLTypeError(f"a shared array's size must be fixed for the "
                                             f"kernel, not depend on `{n.id}`", n.span)
            dims = tuple(self.size_expr(d, "a shared array's size") for d in s.dims)
            for d, node in zip(dims, s.dims):
                d = affine.simplify(d) if isinstance(d, cir.Expr) else d
                value = d.value if isinstance(d, cir.Const) else d
                if isinstance(value, int) and value <= 0:
                    raise ZynMLTypeError(f"a shared array's size must be positive, not {value}",
                                         node.span)
            dtype = "f32"
            if s.type is not None:
                dtype = canonical_dtype(s.type.name)
                if dtype is None:
                    raise ZynMLTypeError(f"unknown element type `{s.type.name}`", s.type.span)
            prev = self.lookup(s.name)
            if prev is not None and prev.kind in ("local", "shared", "loop"):
                what = "a loop variable" if prev.kind == "loop" else "declared"
                raise ZynMLNameError(f"`{s.name}` is already {what} at line {prev.line}: a shared "
                                     "array needs a name of its own in the block", s.span)
            # a local declared later must not take the shared array's name
            cname = self._fresh_local(s.name)
            self.shared[cname] = cir.Ty(dtype, dims)
            self.bind(s.name, _Binding("shared", cir.Ty(dtype, dims), cname, True, line))
            return cir.SharedAlloc(cname, dims, dtype, line)
        if isinstance(s, A.ExprStmt):
            e = s.expr
            if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id == "barrier":
                if e.args or e.kwargs:
                    raise ZynMLTypeError("barrier() takes no arguments", e.span)
                if any(self.varying_ifs):
                    # threads that skip it would leave the others waiting (a hang on a GPU)
                    raise ZynMLTypeError("barrier() under an `if` whose condition differs "
                                         "between iterations: every thread of the workgroup "
                                         "must reach it; move it out of the `if`", e.span)
                return cir.Barrier(line)
            if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id == "print":
                raise ZynMLTypeError("print() runs on the host, not in a kernel: store the "
                                     "value into out[...] and print the result", e.func.span)
            raise ZynMLTypeError("this expression's value is unused; assign it or store it "
                                 "into out[...]", s.span)
        if isinstance(s, A.Ellipsis):
            raise ZynMLTypeError("`...` stands for an elided kernel body; write the body out",
                                 s.span)
        if isinstance(s, A.Return):
            raise ZynMLTypeError("`return` is for pipelines; a kernel writes out[...] or yields",
                                 s.span)
        if isinstance(s, (A.Pipeline, A.Config)):
            raise ZynMLTypeError("not allowed inside a compute body", s.span)
        raise ZynMLTypeError(f"unsupported statement in a compute body", s.span)

    def _annotated(self, value, typ, span):
        if typ is None:
            return value
        dtype = canonical_dtype(typ.name)
        if dtype is None:
            raise ZynMLTypeError(f"unknown type `{typ.name}`", typ.span)
        value = self._exact_int(value, span)   # `let c: i64 = 2 ** 31` converts 2147483648
        if value.ty.dtype == dtype and not (is_float(dtype) and self._is_weak(value)):
            return value
        # a float literal given a type is no longer weak: `var acc: f32 = 0.0` summing f16
        # products stays f32 (the checker took it for weak, an internal error) and so does
        # `let s: f32 = 2.0` times f16 (it was f16, overflowing where f32 does not)
        return cir.Cast(value, cir.Ty(dtype, value.ty.shape))

    @staticmethod
    def _dtype_kwarg(k) -> str:
        """The dtype a `dtype=` keyword names (`f16`, `"bfloat16"`, ...)."""
        v = k.value
        name = v.id if isinstance(v, A.Name) else v.value if isinstance(v, A.String) else None
        dtype = canonical_dtype(name) if name is not None else None
        if dtype is None:
            raise ZynMLTypeError("dtype= takes a dtype, such as f16 or f32", v.span)
        return dtype

    def _fresh_local(self, name: str) -> str:
        # renderers see one flat namespace per kernel; rename shadowing locals apart
        used = getattr(self, "_used_locals", None)
        if used is None:
            used = self._used_locals = set(self.buffers) | {"out"} | set(self.reserved)
        return cir.fresh_name(identifier(name), used)

    def assign(self, s: A.Assign):
        line = s.span.line
        target = s.target
        if isinstance(target, A.Name) and target.id == "out":
            if s.op != "=":
                raise ZynMLTypeError("`out` as a whole can only be assigned with =", s.span)
            value = self.expr(s.value)
            self.whole_out.append((value, s.span))
            return cir.Store("out", (), value, line)
        if isinstance(target, A.Name) and getattr(self.lookup(target.id), "kind", None) == "shared":
            # `tile = v` writes the whole shared array, as `tile[0:rows, 0:cols] = v` does
            target = A.Index(target, [], span=target.span)
        if isinstance(target, A.Index) and isinstance(target.base, A.Name) and \
                target.base.id == "out" and self.lookup("out") is None:
            index = tuple(self.index_item(it) for it in target.items)
            value = self._element_stored(index, self.expr(s.value))
            repeated = self._repeated_rows(target, index, value, s)
            if repeated is not None:
                return repeated
            index = _closed_slices(index, value)
            if s.op != "=":
                # beside out's value: out[i] += 2 ** 31 adds 2147483648, as out[i] += 2147483648
                value = added = self._exact_int(value, s.value.span)
                weak = self._is_weak(value)
                # (out[i] += x[i] > 0.0 counts: a bool in arithmetic is i32, as in reduce(+))
                own = "i32" if value.ty.dtype == "bool" else value.ty.dtype
                old = cir.Ty(self.out_dtype or own, value.ty.shape)
                self.out_reads.add(old.dtype)
                value = self._compound(s.op, cir.Load("out", index, old, _item_spans(target)),
                                       value, s.span, s.value.span)
                if weak:        # (out[i] += 1.0 takes out's dtype, as a literal does)
                    self.weak_out_stores.add(id(value))
                    if is_float(added.ty.dtype) and not added.ty.shape:
                        # its value after folding (`2.0 * 0.25`, a let of literals); None
                        # where it is known only as it runs (`n * 0.5`, a var)
                        lit = _literal_value(substitute(added, self.weak_lets))
                        self.weak_out_floats.append(
                            (None if lit is None else float(lit), added, s.value.span))
            for it, item in zip(index, target.items):
                if not isinstance(it, cir.Span) and not is_int(it.ty.dtype):
                    raise ZynMLTypeError(f"an index must be an integer, not {self.shown(it.ty)}",
                                         item.span)
            self._slice_fits(index, value, s.span)
            self.out_stores.append((index, value, s.span, list(self.loop_stack),
                                    list(self.guards)))
            return cir.Store("out", index, value, line, _item_spans(target))
        if isinstance(target, A.Index):
            buf = self.buffer_for(target.base)
            if buf is not None and buf in self.shared:
                rank = len(self.shared[buf].shape)
                if len(target.items) > rank:     # as a read of it says
                    raise ZynMLShapeError(f"`{dotted(target.base)}` has {rank} axes but is "
                                          f"indexed with {len(target.items)}",
                                          target.items[rank].span)
                index = tuple(self.index_item(it) for it in target.items)
                value = self.expr(s.value)
                room = rank - len(index) + sum(isinstance(i, cir.Span) for i in index)
                if not room:
                    value = self._element_stored(index, value)
                if len(value.ty.shape) > room:
                    raise ZynMLShapeError(
                        f"a tile of {len(value.ty.shape)} axes is stored into "
                        f"`{dotted(target.base)}[...]`, which holds " +
                        ("one value" if not room else f"a tile of {room} axes"), s.value.span)
                # `tile[r] = v` writes the whole row, as `tile[r, 0:cols] = v` does: the axes
                # left out are spans, so a number stored across them is a tile store (the
                # block schedules write each element; they took a short index for one element)
                index += tuple(cir.Span(affine.const(0), _dim_expr(d))
                               for d in self.shared[buf].shape[len(index):])
                span_shape = tuple(_dim_value(affine.sub(i.stop, i.start)) for i in index
                                   if isinstance(i, cir.Span))
                old = cir.Load(buf, index, cir.Ty(self.shared[buf].dtype, span_shape),
                               _item_spans(target))
                if s.op != "=":
                    value = self._compound(s.op, old, value, s.span, s.value.span)
                return cir.Store(buf, index, value, line, _item_spans(target))
            if buf is not None:
                raise ZynMLTypeError(f"`{dotted(target.base)}` is an input and cannot be written; "
                                     "write the result into out[...]", target.span)
            _refuse_chained_index(target)
            raise ZynMLNameError(f"`{dotted(target.base) or 'this'}` is not out, a shared array "
                                 "or an input", target.base.span)
        if isinstance(target, A.Name):
            b = self.lookup(target.id)
            if b is None:
                if target.id in [sig.label for sig in self.inputs]:
                    raise ZynMLTypeError(f"`{target.id}` is an input and cannot be assigned",
                                         target.span)
                if target.id in self.scalar_types or target.id in self.sizes:
                    # (it said "not declared; declare it with var": the host declared it)
                    what = "a size (an axis of an input or an int of the host program)" \
                        if target.id in self.sizes or is_int(self.scalar_types[target.id] or "") \
                        else "a number of the host program"
                    raise ZynMLTypeError(
                        f"cannot assign to `{target.id}`: it is {what}, which the block reads "
                        f"but cannot change; declare a var of the block from it "
                        f"(`var {target.id}_ = {target.id}`)", target.span)
                raise ZynMLNameError(f"`{target.id}` is not declared; declare it with "
                                     f"`var {target.id} = ...`", target.span)
            if b.kind != "local" or not b.mutable:
                what = {"local": "declared with let (use var to change it)",
                        "loop": "a loop variable", "input": "an input"}.get(b.kind, "not a variable")
                raise ZynMLTypeError(f"cannot assign to `{target.id}`: it is {what}", target.span)
            value = self.expr(s.value)
            if s.op != "=":
                value = self._compound(s.op, cir.Var(b.name, b.ty), value, s.span,
                                       s.value.span)
            if not b.ty.shape and _one_element(value):
                # a number's var given a tile of one element (`acc += b[0:1, k]`) holds that
                # element, as it would store into out[i, j]
                value = _element_of(value, self.tile_lets) or _reduced_element(value)
            if b.pinned:
                # a declared type stays: the value converts to it, as `let v: f16` does
                if value.ty.shape and value.ty.shape != b.ty.shape:
                    raise ZynMLShapeError(f"`{target.id}` is declared as {self.shown(b.ty)}; this "
                                          f"value is {self.shown(value.ty)}", s.value.span)
                if value.ty.dtype != b.ty.dtype:
                    value = cir.Cast(value, cir.Ty(b.ty.dtype, value.ty.shape))
                return cir.Assign(b.name, value, line)
            if value.ty.shape != b.ty.shape or value.ty.dtype != b.ty.dtype:
                # `var m = -inf` later holding a row of maxima: the variable takes the wider
                # type; `var sum = 0.0` summing f16 products stays f16 (the literal is weak)
                b.ty = cir.Ty(promote(b.ty.dtype, value.ty.dtype, b.name in self.weak_vars,
                                      self._is_weak(value)), value.ty.shape or b.ty.shape)
            if not self._is_weak(value):
                self.weak_vars.discard(b.name)
            return cir.Assign(b.name, value, line)
        raise ZynMLTypeError("cannot assign to this expression", target.span)

    def _element_stored(self, index, value):
        """`value` stored into one element (`out[i, j] = x[i, j] + b[0:1, j]`): a tile of
        one element (each extent a constant 1) is that element, as numpy stores it; out
        does not gain its axes of 1. Another tile is returned as it is (it adds its axes)."""
        if any(isinstance(it, cir.Span) for it in index) or not _one_element(value):
            return value
        return _element_of(value, self.tile_lets) or _reduced_element(value)

    def _compound(self, op, old, value, span, value_span):
        return self.binary(op[0], old, value, span, (span, value_span))

    def loop(self, iters, body, line):
        it, rest = iters[0], iters[1:]
        if isinstance(it, A.EachIter):
            raise ZynMLTypeError("kernel loops run over ranges: `for i in 0..n:`", it.span)
        start = self.size_expr(it.start)
        stop = self.size_expr(it.stop)
        step = self.size_expr(it.step, "a loop step") if it.step is not None else affine.const(1)
        if isinstance(step, cir.Const) and step.value <= 0:
            raise ZynMLTypeError("a loop step must be positive", it.step.span)
        self.scopes.append({})
        self.bind(it.var, _Binding("loop", I32, self._fresh_local(it.var), line=line))
        cname = self.lookup(it.var).name
        self.ranges[cname] = (start, stop)
        self.loop_info[cname] = (start, stop, step, it)
        self.loop_stack.append(cname)
        try:
            inner = [self.loop(rest, body, line)] if rest else self.block(body)
        finally:
            self.loop_stack.pop()
            self.scopes.pop()
        return cir.Loop(cname, start, stop, step, tuple(inner), False, line)

    def yield_(self, s: A.Yield):
        line = s.span.line
        if isinstance(s.value, A.TupleLit):
            if len(s.value.items) != 2:
                raise ZynMLTypeError("yield takes a value or a (value, index) pair", s.value.span)
            value = self.expr(s.value.items[0])
            index = self.expr(s.value.items[1])
            if not is_int(index.ty.dtype):
                raise ZynMLTypeError("the index of a (value, index) pair must be an integer",
                                     s.value.items[1].span)
        else:
            value, index = self.expr(s.value), None
        value = _bool_as_i32(self.reduce_op, value)
        self.yields.append((value, index, s.span, list(self.loop_stack)))
        return cir.Yield(value, index, line)

    # ------------------------------------------------------------- expressions
    def condition(self, e, op=None):
        """`e` as one bool; `op`: the `and`, `or` or `not` it is an operand of."""
        c = self.expr(e)
        if c.ty.shape and op is not None:
            raise ZynMLTypeError(f"`{op}` takes single values, not tiles; for tiles of bools, "
                                 f"element by element, {_TILE_LOGIC[op]}", e.span)
        if c.ty.shape:
            raise ZynMLTypeError("a condition must be one value, not a tile", e.span)
        if c.ty.dtype != "bool":
            c = cir.Bin("!=", c, cir.Const(0, cir.Ty(c.ty.dtype)), BOOL)
        return c

    def size_expr(self, e, what="a range bound"):
        """A loop bound or shared size: an integer expression over sizes and loop vars."""
        v = self.expr(e, size_context=True)
        if not is_int(v.ty.dtype) or v.ty.shape:
            raise ZynMLTypeError(f"{what} must be an integer, not {self._spoken(e, v)}", e.span)
        return affine.simplify(v)

    def shown(self, shape) -> str:
        """A tile's type (a cir.Ty) or shape as a message shows it: an input's axis by the
        size name the body ties it to (`m` of `for i in 0..m` indexing it), else by its size
        where the input is bound, else as `x.shape[k]`; never by its internal name (`x_d1`),
        which the program never wrote."""
        said = dict(self.axis_said)
        for c in self.constraints:
            if c.left in said and isinstance(c.right, cir.Var) and c.right.name not in said:
                said[c.left] = c.right.name
        text = str(shape) if isinstance(shape, cir.Ty) else _shape_text(shape)
        return re.sub(r"[A-Za-z_]\w*", lambda m: said.get(m.group(), m.group()), text)

    def _spoken(self, e, v) -> str:
        """What the value of `e` is, in the user's words (never its axes' internal names),
        with what to write instead where it is a whole integer array."""
        dtype, axes = v.ty.dtype, len(v.ty.shape)
        what = f"{'a' if dtype[0] in 'ub' else 'an'} {dtype}"
        if not axes:
            return f"{what} value"
        what += f" array of {_count(axes, 'axis', 'axes')}"
        label = dotted(e)
        if label is None or self.buffer_for(e) is None:
            return what
        if not is_int(dtype):
            return f"`{label}`, {what}"
        return (f"`{label}`, {what} (an array like np.array([2])); write "
                f"{label}[{', '.join(['0'] * axes)}] for its first element, or pass `{label}` "
                f"as a Python int")

    def expr(self, e, size_context=False, index_context=False) -> cir.Expr:
        if isinstance(e, A.Number):
            if isinstance(e.value, float):
                return cir.Const(e.value, F32)
            if -2 ** 31 <= e.value < 2 ** 31:
                return cir.Const(e.value, I32)
            # a literal past i32 is i64 (u64 past i64), as numpy infers it, and not weak:
            # `a[i] + 3000000000` on i32 `a` wrapped to i32 (WebGPU could not spell it)
            if not -2 ** 63 <= e.value < 2 ** 64:
                raise ZynMLTypeError(f"the integer {e.value} does not fit 64 bits", e.span)
            return cir.Const(e.value, cir.Ty(int_dtype(e.value, e.value)))
        if isinstance(e, A.Bool):
            return cir.Const(e.value, BOOL)
        if isinstance(e, A.Name):
            return self.name(e, size_context, index_context)
        if isinstance(e, A.Attr):
            buf = self.buffer_for(e)
            if buf is not None:
                return self.whole(buf)
            label = dotted(e)
            dtype = self.scalar_types.get(label) if label is not None else None
            if dtype is not None and (is_float(dtype) or dtype == "bool"):
                return self._scalar_arg(label, dtype)
            if dtype is not None:           # an integer field: a size, as an integer name is
                self.sizes.add(label)
                self.size_spans.setdefault(label, e.span)
                return cir.Var(label, I32)
            if dotted(e) and dotted(e).split(".")[0] not in [s.label.split(".")[0] for s in self.inputs]:
                root = dotted(e).split(".")[0]
                raise ZynMLNameError(f"unknown name `{root}`", e.span, unknown=root)
            if dotted(e) is None:           # a field of a computed value: `m[i].T`
                hint = "; a tile's transpose is transpose(t)" if e.name == "T" else ""
                raise ZynMLTypeError(f"`.{e.name}` of a value inside a kernel: fields are read "
                                     f"from inputs' records only{hint}", e.span)
            raise ZynMLNameError(f"`{dotted(e)}` is not an input of this compute "
                                 "block; pass it in compute(...)", e.span)
        if isinstance(e, A.Index):
            return self.index(e)
        if isinstance(e, A.BinOp):
            if e.op in ("and", "or"):
                a = self.condition(e.left, e.op)
                # the right side runs only where the left does not decide (every device's
                # && and ||): its reads are guarded by the left, as under an `if`
                self.guard_depth += 1
                try:
                    b = self.condition(e.right, e.op)
                finally:
                    self.guard_depth -= 1
                return cir.Bin(e.op, a, b, BOOL)
            a = self.expr(e.left, size_context)
            b = self.expr(e.right, size_context)
            return self.binary(e.op, a, b, e.span, (e.left.span, e.right.span))
        if isinstance(e, A.UnaryOp):
            if e.op == "not":
                return cir.Unary("not", self.condition(e.operand, "not"), BOOL)
            v = self.expr(e.operand, size_context)
            if e.op == "pos":
                return v
            if isinstance(v, cir.Const) and not isinstance(v.value, bool):
                return cir.Const(-v.value, v.ty)
            if v.ty.dtype == "bool":        # a bool in arithmetic counts as i32: -true is -1
                v = cir.Cast(v, cir.Ty("i32", v.ty.shape))
            return cir.Unary("neg", v, v.ty)
        if isinstance(e, A.Call):
            return self.call(e)
        if isinstance(e, A.Pipe):
            func = e.func
            if isinstance(func, A.Call):
                call = A.Call(func.func, [e.value] + list(func.args), func.kwargs, span=e.span)
            else:
                call = A.Call(func, [e.value], [], span=e.span)
            return self.call(call)
        if isinstance(e, A.Compute):
            raise ZynMLTypeError("compute blocks do not nest; compute the inner value first",
                                 e.span)
        if isinstance(e, A.OpRef):
            raise ZynMLTypeError(f"`{e.op}` as a value only makes sense in reduce({e.op}, x)",
                                 e.span)
        if isinstance(e, (A.String, A.ListLit, A.TupleLit, A.Await, A.Duration, A.Size)):
            what = {A.String: "a string", A.ListLit: "a list", A.TupleLit: "a tuple"}.get(
                type(e), "this kind of value")
            raise ZynMLTypeError(f"{what} is a value of host code; a kernel computes with "
                                 "numbers, indices of its inputs and its loop variables", e.span)
        raise ZynMLTypeError("unsupported expression in a kernel", e.span)

    def name(self, e: A.Name, size_context=False, index_context=False):
        b = self.lookup(e.id)
        if b is not None and index_context and b.shadowed_loop is not None and \
                not is_int(b.ty.dtype):
            # `let s = sin_cache[s, d]` inside `for s in ...`: as an index, `s` still means
            # the loop position (a float cannot index), in arithmetic it means the new value
            b = b.shadowed_loop
        if b is not None:
            if b.kind == "input":
                return self.whole(b.name)
            if b.kind == "shared":
                return cir.Load(b.name, (), b.ty)
            return cir.Var(b.name, b.ty)
        buf = self.buffer_for(e)
        if buf is not None:
            return self.whole(buf)
        if e.id in CONSTANTS and e.id not in self.scalar_types:    # (unless the host binds it)
            return cir.Const(CONSTANTS[e.id], F32)
        if e.id == "out":
            raise ZynMLTypeError("`out` is written, not read, except as out[...] += ...", e.span)
        if e.id in KERNEL_BUILTINS and e.id not in self.scalar_types:  # (as constants)
            raise ZynMLTypeError(f"`{e.id}` is a function; call it: {e.id}(...)", e.span)
        # a free name: a host scalar argument or a size (given or inferred from shapes)
        dtype = self.scalar_types.get(e.id)
        if dtype is not None and (is_float(dtype) or dtype == "bool"):
            return self._scalar_arg(e.id, dtype)
        if dtype is None and e.id in self.scalar_types:
            raise ZynMLTypeError(f"`{e.id}` is not a number or tensor usable in a kernel", e.span)
        self.sizes.add(e.id)
        self.size_spans.setdefault(e.id, e.span)
        if dtype == "i64" and not size_context and not index_context:
            # a host int past i32 in arithmetic: its value in i64, not wrapped to i32 (as the
            # literal 3000000000 is i64: `a[i] + k` with k = 3000000000 wrapped)
            return cir.Cast(cir.Var(e.id, I32), cir.Ty("i64"))
        return cir.Var(e.id, I32)

    def _scalar_arg(self, label: str, dtype: str) -> cir.Var:
        cname = identifier(label)
        self.scalar_args[cname] = dtype
        self.scalar_labels[cname] = label
        return cir.Var(cname, cir.Ty(dtype))

    def _is_weak(self, e) -> bool:
        """A value typed only by literals and sizes (types.is_weak), given the locals that
        still hold one."""
        return is_weak(e, self.weak_vars | self.sizes)

    def whole(self, buf):
        if buf in self.shared:
            return cir.Load(buf, (), self.shared[buf])
        label, dtype, rank, axes = self.buffers[buf]
        return cir.Load(buf, (), cir.Ty(dtype, tuple(axes)))

    def index_item(self, item):
        if isinstance(item, A.SliceItem) and item.step is not None:
            raise ZynMLShapeError("a kernel slice is a block of consecutive positions "
                                  "(x[a:b]) and takes no step: loop over the positions "
                                  "(for j in a..b step s) and index with the loop's variable",
                                  item.step.span)
        if isinstance(item, A.SliceItem):
            start = self.expr(item.start, index_context=True) if item.start is not None else affine.const(0)
            stop = self.expr(item.stop, index_context=True) if item.stop is not None else None
            for part, node in ((start, item.start), (stop, item.stop)):
                if part is not None and (not is_int(part.ty.dtype) or part.ty.shape):
                    raise ZynMLTypeError(f"a slice bound must be an integer, not "
                                         f"{self._spoken(node, part)}",
                                         node.span)
                negative = _negative_const(part) if node is not None else None
                if negative is not None:
                    # numpy's x[-3:] counts from the end; a kernel's bounds are positions
                    # (clipped to the axis), so it would silently mean x[0:]
                    raise ZynMLShapeError(
                        f"a slice bound of {negative} is before the start of the axis: "
                        f"kernel slices do not count from the end as numpy's do; write the "
                        f"position from the axis's size (`n - {-negative}`)", node.span)
            return cir.Span(start, stop if stop is not None else cir.Var("__end__", I32))
        v = self.expr(item, index_context=True)
        if not is_int(v.ty.dtype) or v.ty.shape:
            raise ZynMLTypeError(f"an index must be an integer, not {self.shown(v.ty)}", item.span)
        return v

    def index(self, e: A.Index):
        buf = self.buffer_for(e.base)
        if buf is None:
            if isinstance(e.base, A.Name) and e.base.id == "out":
                # (a running sum reading out[i - 1] is the usual reason to read it)
                raise ZynMLTypeError("`out` is written, not read: keep a value later iterations "
                                     "need in a var (var acc = 0.0, acc += x[i], out[i] = acc), "
                                     "or add into out with out[...] += v", e.base.span)
            base_name = dotted(e.base)
            if base_name is not None:
                b = self.lookup(base_name) if isinstance(e.base, A.Name) else None
                if b is not None:
                    raise ZynMLTypeError(f"`{base_name}` is a {b.kind} value and cannot be "
                                         "indexed", e.span)
                later = _shared_declared(self.node.body, base_name)
                if later is not None:       # (it said `t` is not an input of the block)
                    raise ZynMLNameError(f"`{base_name}` is read before its `shared var` "
                                         f"on line {later}: declare it first", e.base.span)
                raise ZynMLNameError(f"`{base_name}` is not an input of this compute block",
                                     e.base.span)
            _refuse_chained_index(e)
            raise ZynMLTypeError("only inputs and shared arrays can be indexed", e.span)
        if buf in self.shared:
            ty = self.shared[buf]
            axes = list(ty.shape)
            dtype = ty.dtype
        else:
            label, dtype, rank, axes = self.buffers[buf]
        if len(e.items) > len(axes):
            raise ZynMLShapeError(f"`{dotted(e.base)}` has {_count(len(axes), 'axis', 'axes')} "
                                  f"but is indexed with {len(e.items)}", e.items[len(axes)].span)
        index = []
        shape = []
        for k, item in enumerate(e.items):
            it = self.index_item(item)
            index.append(it)
            if buf not in self.shared:
                self._constrain(buf, k, it, item)
            if isinstance(it, cir.Span):
                if isinstance(it.stop, cir.Var) and it.stop.name == "__end__":
                    it = cir.Span(it.start, affine.var(axes[k]) if isinstance(axes[k], str) else axes[k])
                    index[-1] = it
                shape.append(_dim_value(affine.sub(it.stop, it.start)))
        shape.extend(axes[len(e.items):])
        return cir.Load(buf, tuple(index), cir.Ty(dtype, tuple(shape)), _item_spans(e))

    def _constrain(self, buf, axis, it, item):
        """Tie axis `axis` of input `buf` to the loop range that indexes it."""
        label, dtype, rank, axes = self.buffers[buf]
        dim = axes[axis]
        what = f"axis {axis} of `{label}`"
        if isinstance(it, cir.Span):
            start = it.start
            if isinstance(start, cir.Var) and start.name in self.loop_info:
                lstart, lstop, lstep, node = self.loop_info[start.name]
                if isinstance(lstart, cir.Const) and lstart.value == 0:
                    self.constraints.append(Constraint(
                        dim, lstop, item.span, f"{what}, sliced by `{node.var}` in "
                        f"{cir.format_expr(lstart)}..{cir.format_expr(lstop)}", loop=True))
            elif not self.guard_depth and not (isinstance(it.stop, cir.Var)
                                               and it.stop.name == "__end__"):
                # a stencil's window as a slice (`x[i - 2:i + 1]`, i in 2..n) reads from
                # its start to its stop - 1, as the reads x[i - 2] .. x[i] do
                self._stencil_read(dim, start, item.span, what)
                self._stencil_read(dim, affine.sub(it.stop, affine.const(1)), item.span, what)
            return
        if isinstance(it, cir.Var) and self._covering_loop(it.name):
            lstart, lstop, lstep, node = self.loop_info[it.name]
            tie = Constraint(dim, lstop, item.span,
                             f"{what}, indexed by `{node.var}` in 0..{cir.format_expr(lstop)}",
                             loop=True, guarded=self.guard_depth > 0)
            self.constraints.append(tie)
            self.window_ties.setdefault((dim, it.name), []).append(tie)
            return
        backwards = self._reversed_loop(it) or self._rotated_loop(it)
        if backwards is not None:
            # `x[n - 1 - j]` or `x[(j + 1) % n]`, j in 0..n: the axis's n positions read in
            # another order, as `x[j]` reads them in theirs
            lstart, lstop, lstep, node = self.loop_info[backwards]
            self.constraints.append(Constraint(
                dim, lstop, item.span, f"{what}, indexed by `{cir.format_expr(it)}` with "
                f"`{node.var}` in 0..{cir.format_expr(lstop)}", loop=True,
                guarded=self.guard_depth > 0))
            return
        if self.guard_depth:
            return      # guarded by an `if`: out-of-range values are the program's intent
        self._stencil_read(dim, it, item.span, what)
        window = self._window_read(it)
        if window is not None:
            key = (dim, window[0])
            prev = self.window_reach.get(key)
            self.window_reach[key] = window[1] if prev is None else affine.maximum(prev, window[1])
        b = affine.bounds(it, self.ranges, self._steps())
        if b is not None:
            loops = tuple(self.ranges[n.name] for n in cir.walk(it)
                          if isinstance(n, cir.Var) and n.name in self.ranges)
            self.bound_checks.append(BoundCheck(dim, b[0], b[1], item.span, what, loops))

    def _covering_loop(self, name) -> bool:
        """Whether `name` is the variable of a loop `0..stop` by 1, which covers the axis it
        indexes directly; not one whose bound reads data or another loop's variable
        (`0..k[i]`, `0..2 * i`), which reaches as far as they say, checked as it reads."""
        if name not in self.loop_info:
            return False
        lstart, lstop, lstep, _ = self.loop_info[name]
        return isinstance(lstart, cir.Const) and lstart.value == 0 and \
            isinstance(lstep, cir.Const) and lstep.value == 1 and \
            self._static(substitute(lstop, self.int_lets))

    def _reversed_loop(self, it):
        """The variable `j` of a covering loop `0..S` that index `it` runs backwards over
        the same positions, `S - 1 - j` (`n - j - 1`, `(n - 1) - j`), else None."""
        it = substitute(it, self.int_lets)
        form = affine.linear(it)
        if form is None:
            return None
        loops = [name for name, (_, e) in form[0].items()
                 if isinstance(e, cir.Var) and name in self.loop_info]
        if len(loops) != 1 or form[0][loops[0]][0] != -1 or not self._covering_loop(loops[0]):
            return None
        stop = substitute(self.loop_info[loops[0]][1], self.int_lets)
        last = affine.add(it, affine.var(loops[0]))
        return loops[0] if affine.same(last, affine.sub(stop, affine.const(1))) else None

    def _rotated_loop(self, it):
        """The variable `j` of a covering loop `0..S` that index `it` rotates over the same
        positions, `(j + c) % S` with `j + c` never negative (`c` a constant 0 or more, or
        `k * S + d` with d >= -k: `(j + n - 1) % n`), else None."""
        it = substitute(it, self.int_lets)
        if not (isinstance(it, cir.Bin) and it.op == "%"):
            return None
        form = affine.linear(it.left)
        if form is None:
            return None
        loops = [name for name, (_, e) in form[0].items()
                 if isinstance(e, cir.Var) and name in self.loop_info]
        if len(loops) != 1 or form[0][loops[0]][0] != 1 or not self._covering_loop(loops[0]):
            return None
        stop = substitute(self.loop_info[loops[0]][1], self.int_lets)
        if not affine.same(it.right, stop):
            return None
        # the shift as k * S + d (k = 0, 1 or 2): never negative where d >= -k, S being at
        # least 1 where the loop runs
        shift = affine.sub(it.left, affine.var(loops[0]))
        for k in range(3):
            rest = affine.linear(affine.sub(shift, cir.Bin("*", affine.const(k), stop, I32)))
            if rest is not None and not rest[0]:
                return loops[0] if rest[1] >= -k else None
        return None

    def _window_read(self, it):
        """(loop variable, offset) of an index `i + offset` past a covering loop's variable,
        the offset a positive constant or sizes that cannot make it negative (`x[i + 2]`,
        `m[r, d + half]`, `m[i, j + h]` with `let h = cols / 2`), else None."""
        it = substitute(it, self.int_lets)
        form = affine.linear(it)
        if form is None:
            return None
        loops = [(k, c) for k, (c, e) in form[0].items()
                 if isinstance(e, cir.Var) and self._covering_loop(e.name)]
        if len(loops) != 1 or loops[0][1] != 1:
            return None
        offset = affine.sub(it, affine.var(loops[0][0]))
        for n in cir.walk(offset):
            if isinstance(n, cir.Var) and n.name not in self.sizes or \
                    isinstance(n, cir.Const) and not (isinstance(n.value, int) and n.value >= 0) or \
                    isinstance(n, cir.Bin) and n.op not in ("+", "*", "/") or \
                    not isinstance(n, (cir.Var, cir.Const, cir.Bin)):
                return None
        if isinstance(offset, cir.Const) and offset.value == 0:
            return None
        return loops[0][0], offset

    def _stencil_read(self, dim, it, span, what):
        """Note a read `x[i + c]` (c a constant of any sign) of a loop from a constant start
        s > 0 by 1, for `_reach_windows`."""
        form = affine.linear(it)
        if form is None or len(form[0]) != 1:
            return
        (name, (coef, var)), = form[0].items()
        info = self.loop_info.get(name)
        if coef != 1 or not isinstance(var, cir.Var) or info is None or \
                not (isinstance(info[0], cir.Const) and info[0].value > 0) or \
                not (isinstance(info[2], cir.Const) and info[2].value == 1):
            return
        lo, hi, first = self.stencils.get((dim, name), (form[1], form[1], (span, what)))
        self.stencils[(dim, name)] = (min(lo, form[1]), max(hi, form[1]), first)

    def _reach_windows(self):
        """A loop that indexes an axis directly (`x[i]`) and also reads it further on
        (`x[i + 2]`, not under an `if`) covers the axis with that window: its bound plus 2
        is the axis's size, so `0..n - 2` over x gives n = len(x), as numpy's
        `x[:-2] + x[1:-1] + x[2:]`. (A slice `x[i:i+3]` is clipped to the axis instead.)"""
        for (dim, var), ties in self.window_ties.items():
            reach = self.window_reach.get((dim, var))
            for tie in ties if reach is not None else ():
                tie.right = affine.add(substitute(tie.right, self.int_lets), reach)
                tie.what += f" and read up to `{self.loop_info[var][3].var} + " \
                            f"{cir.format_expr(reach)}`"
        # a stencil `for i in 1..n - 1` reading x[i - 1] .. x[i + 1] covers the axis from 0:
        # its stop plus the largest offset is the axis's size (a constant stop is no size:
        # such a loop may read a part of the axis)
        for (dim, var), (lo, hi, (span, what)) in self.stencils.items():
            start, stop, _, node = self.loop_info[var]
            if lo + start.value == 0 and any(isinstance(n, cir.Var) for n in cir.walk(stop)):
                self.constraints.append(Constraint(
                    dim, affine.add(substitute(stop, self.int_lets), affine.const(hi)), span,
                    f"{what}, read from `{node.var} - {start.value}` to `{node.var} + {hi}` "
                    f"with `{node.var}` in {start.value}..{cir.format_expr(stop)}", loop=True))

    def binary(self, op, a, b, span, spans=None):
        """`a op b`; `spans`: where a and b are written (a weak one out of bounds for the
        other's dtype is pointed at), else `span`."""
        if op == "@":
            if len(a.ty.shape) != 2 or len(b.ty.shape) != 2:
                raise ZynMLShapeError("@ multiplies two 2-D tiles (rows x cols)", span)
            dtype = promote(a.ty.dtype, b.ty.dtype)
            self._same_dim(a.ty.shape[1], b.ty.shape[0], span, "the inner sizes of @")
            return cir.Bin("@", a, b, cir.Ty(dtype, (a.ty.shape[0], b.ty.shape[1])))
        shape = self._broadcast(a.ty.shape, b.ty.shape, span)
        a, b = self._half_literal(a, b), self._half_literal(b, a)
        sa, sb = spans or (span, span)
        a, b = self._exact_literals(a, b, sa), self._exact_literals(b, a, sb)
        a, b = self._held(a, b, sa), self._held(b, a, sb)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return cir.Bin(op, a, b, cir.Ty("bool", shape))
        self._past_i64_beside_signed(a, b, sa)
        self._past_i64_beside_signed(b, a, sb)
        if op not in ("+", "-", "*", "/", "%", "**"):
            raise ZynMLTypeError(f"unsupported operator {op}", span)
        if a.ty.dtype == "bool" and b.ty.dtype == "bool":
            # (numpy's bool + bool is `or`, its bool - bool an error: neither counts)
            raise ZynMLTypeError("arithmetic on two booleans; use `and`/`or`, or convert one "
                                 "to count them (`i32(a) + b`)", span)
        if op == "**" and is_int(b.ty.dtype) and not b.ty.shape and not isinstance(b, cir.Const):
            # an exponent of literals is the constant it computes (x[i] ** 2 ** 2 is x ** 4,
            # an integer power, as x[i] ** 4 is)
            power = _int_literal_value(b)
            b = b if power is None else cir.Const(power, b.ty)
        dtype = arithmetic_dtype(op, a, b, self._is_weak(a), self._is_weak(b))
        self._weak_in_bounds((a, b), dtype, spans or (span, span))
        a, b = self._widen_weak(a, dtype), self._widen_weak(b, dtype)
        return cir.Bin(op, a, b, cir.Ty(dtype, shape), span if op in ("/", "%") else None)

    def _weak_in_bounds(self, args, dtype, spans):
        """A weak integer among `args` (beside one that is not) meeting integer `dtype` must
        be one of its values (WeakCheck): refused here where literals give it, at launch
        where it reads sizes or host ints."""
        if not is_int(dtype) or dtype in ("i32", "i64") or all(self._is_weak(a) for a in args):
            return
        for a, span in zip(args, spans):
            if is_int(a.ty.dtype) and self._is_weak(a):
                check = WeakCheck(substitute(a, self.int_lets), dtype, span)
                if any(isinstance(v, cir.Var) for v in cir.walk(check.value)):
                    self.weak_checks.append(check)
                else:
                    check.refuse_outside({})

    def _saturated(self, bound, dtype):
        """A weak integer clamp bound past integer `dtype` at that end of `dtype`: numpy's
        clip takes any Python int as a bound (`clip(u8, 0, 300)` keeps 255), where the bound
        converted to u8 (44) clamped every value above it. A bound of literals is replaced;
        one of sizes is clamped in i32 (its type) where it runs."""
        if not is_int(bound.ty.dtype) or not self._is_weak(bound):
            return bound
        bits = int(dtype[1:])
        low = 0 if dtype.startswith("u") else -2 ** (bits - 1)
        low, high = max(low, -2 ** 31), min(low + 2 ** bits - 1, 2 ** 31 - 1)
        if (low, high) == (-2 ** 31, 2 ** 31 - 1):
            return bound                    # (a weak value is i32's: it fits)
        try:
            v = cir.eval_expr_static(substitute(bound, self.int_lets), {})
        except (KeyError, TypeError, ZeroDivisionError):
            return cir.Call("clamp", (bound, cir.Const(low, I32), cir.Const(high, I32)), I32)
        return cir.Const(min(max(v, low), high), bound.ty) if isinstance(v, int) else bound

    def _widen_weak(self, e, dtype):
        """A weak value computed from literals (`sqrt(2.0 / pi)`, `1.0 / 3.0`) meeting f64 is
        computed in f64, as the reference computes it: the compiled devices computed it in
        f32 and widened the result, 1e-8 from the reference."""
        if dtype != "f64" or e.ty.dtype == "f64" or e.ty.shape or not self._is_weak(e):
            return e
        return _in_f64(e, self.weak_lets)

    def _exact_literals(self, c, other, span):
        """An integer computed from literals alone (`2 ** 31`, `-(-2147483647 - 1)`) beside a
        value that is not weak is its exact value, as if written out (an integer literal past
        i32 is i64): numpy computes it with Python ints, where i32 arithmetic wrapped it
        silently (`x[i] + 2 ** 31` added -2147483648). Alone it stays i32's, wrapping."""
        if self._is_weak(other):
            return c
        return self._exact_int(c, span)

    def _exact_int(self, c, span):
        """Weak integer scalar `c` of literals alone (and lets of them) as its exact value,
        as if written out (i64 or u64 past i32), else `c`; past 64 bits a type error."""
        if c.ty.shape or not is_int(c.ty.dtype) or c.ty.dtype == "bool" or \
                isinstance(c, cir.Const) or not self._is_weak(c):
            return c
        value = substitute(c, self.int_lets)
        wrapped = _int_literal_value(value)
        if wrapped is None:
            return c
        exact = cir.eval_expr_static(value, {})
        if exact == wrapped:
            return c
        if not -2 ** 63 <= exact < 2 ** 64:
            raise ZynMLTypeError(f"`{cir.format_expr(value)}` is {exact}, which does not fit "
                                 "64 bits", span)
        return cir.Const(exact, cir.Ty(int_dtype(exact, exact)))

    def _past_i64_beside_signed(self, c, other, span):
        """An integer past i64 (a u64) in arithmetic with a signed integer value: no integer
        type holds both, and numpy refuses the Python int (its arrays give f64); i64 or u64
        arithmetic wrapped it silently (`x[i] + 9223372036854775808` on i64 `x`)."""
        if isinstance(c, cir.Const) and type(c.value) is int and c.value >= 2 ** 63 and \
                other.ty.dtype in ("i8", "i16", "i32", "i64") and not self._is_weak(other):
            raise ZynMLTypeError(
                f"the integer {c.value} is past i64, and no integer type holds it and "
                f"{other.ty.dtype} values (numpy refuses it too); convert the {other.ty.dtype} "
                "operand, as u64(...) or f64(...), to compute in that type", span)

    def _host_i64(self, e) -> bool:
        """Whether `e` is a host int past i32, read as i64 (`name`)."""
        return isinstance(e, cir.Cast) and e.ty.dtype == "i64" and not e.ty.shape and \
            isinstance(e.operand, cir.Var) and e.operand.name in self.sizes

    def _held(self, c, other, span):
        """`_held_literal`, and likewise a host int past i32 beside u32 or u64 data: that
        dtype, as numpy reads a Python int (`u[i] + k` with k = 3000000000 is u32, wrapping;
        it was i64), its value checked at launch to be one of the dtype's."""
        if self._host_i64(c) and other.ty.dtype in ("u32", "u64") and not self._is_weak(other):
            self.weak_checks.append(WeakCheck(c, other.ty.dtype, span))
            return cir.Cast(c, cir.Ty(other.ty.dtype))
        return _held_literal(c, other)

    def _half_literal(self, c, other):
        """A float literal meeting an f16 value takes f16's precision (it is weak, so the
        operation is f16's: `h[i] == 0.1` compares with f16(0.1), as numpy does); devices
        that compute f16 in f32 would otherwise use the f32 literal. A weak integer (`h[i] +
        2049`, a size) is converted to f16 likewise, as numpy converts a Python int: 2048."""
        if is_int(c.ty.dtype) and c.ty.dtype != "bool" and not c.ty.shape and \
                other.ty.dtype == "f16" and self._is_weak(c) and not self._is_weak(other):
            v = _int_literal_value(substitute(c, self.int_lets))
            c = cir.Cast(c, cir.Ty("f16")) if v is None else cir.Const(float(v), cir.Ty("f32"))
        if not isinstance(c, cir.Const) and is_float(c.ty.dtype) and other.ty.dtype == "f16" \
                and not c.ty.shape and self._is_weak(c) and not self._is_weak(other):
            # an expression of literals (exp(20.0), 3e5 * 1.0, a let of one) likewise: its
            # value, as the reference computes it, then f16's (past its range an infinity);
            # one known only as it runs is rounded as it runs (launch/scalar.py, `operand`)
            v = _literal_value(substitute(c, self.weak_lets))
            c = c if v is None else cir.Const(float(v), c.ty)
        if isinstance(c, cir.Const) and isinstance(c.value, float) and not c.ty.shape and \
                other.ty.dtype == "f16" and c.ty.dtype != "f16" and self._is_weak(c) and \
                not self._is_weak(other):
            try:
                value = struct.unpack("<e", struct.pack("<e", c.value))[0]
            except OverflowError:                   # past f16's range: an infinity
                value = math.copysign(math.inf, c.value)
            return cir.Const(value, c.ty)
        return c

    def call(self, e: A.Call):
        if not isinstance(e.func, A.Name):
            name = e.func.name if isinstance(e.func, A.Attr) else None
            name = {"maximum": "max", "minimum": "min", "clip": "clamp", "power": "pow"}.get(
                name, name)      # numpy's names of them
            if name in cir.MATH_FUNCTIONS or name in cir.TILE_FUNCTIONS or name == "dot":
                # x[i].abs(), math.exp(x[i]), np.sqrt(v): the builtin is called by its name
                args = ([] if isinstance(e.func.base, A.Name) and e.func.base.id in
                        ("math", "np", "numpy", "torch") else [_simple_text(e.func.base)]) + \
                    [_simple_text(a) for a in e.args]
                raise ZynMLTypeError(f"a kernel calls its builtins by name: write "
                                     f"`{name}({', '.join(args)})`", e.span)
            raise ZynMLTypeError("only builtin functions can be called inside a kernel", e.span)
        fn = e.func.id
        if self.lookup(fn) is not None:
            raise ZynMLTypeError(f"`{fn}` is a value, not a function", e.func.span)
        if fn == "barrier":
            raise ZynMLTypeError("barrier() is a statement of its own; it has no value", e.span)
        _distinct_keywords(e.kwargs)
        if fn == "reduce":
            return self.reduce_call(e)
        if e.kwargs and fn not in ("zeros", "ones"):
            raise ZynMLTypeError(f"{fn}() takes no keyword arguments", e.kwargs[0].span)
        args = [self.expr(a) for a in e.args]
        if fn in CAST_NAMES:
            if len(args) != 1:
                raise ZynMLTypeError(f"{fn}() takes one value", e.span)
            # i64(2 ** 31) is 2147483648, as numpy's np.int64(2 ** 31), not i32's wrapped value
            value = self._exact_int(args[0], e.args[0].span)
            return cir.Cast(value, cir.Ty(CAST_NAMES[fn], value.ty.shape))
        if fn == "dot":
            if len(args) != 2:
                raise ZynMLTypeError("dot(a, b) takes two vectors", e.span)
            for a, node in zip(args, e.args):
                if len(a.ty.shape) != 1:
                    raise ZynMLShapeError(f"dot() takes vectors; this is {self.shown(a.ty)}",
                                          node.span)
            la, lb = args[0].ty.shape[0], args[1].ty.shape[0]
            what = "the lengths of dot()'s vectors"
            if isinstance(la, int) and isinstance(lb, int) and la != lb:
                raise ZynMLShapeError(f"{what} differ: {la} and {lb}", e.args[1].span)
            # a constant tile's length (`ones(3)`) is its own, as numpy's: a vector of another
            # length beside it is refused at the launch, never summed over its own length
            la, lb = (affine.const(d) if isinstance(d, int) else d for d in (la, lb))
            self._same_dim(la, lb, e.args[1].span, what)
            return cir.Dot(args[0], args[1], cir.Ty(promote(args[0].ty.dtype, args[1].ty.dtype)))
        if fn == "where":
            return self.where_call(args, e)
        if fn in cir.MATH_FUNCTIONS:
            arity = cir.MATH_FUNCTIONS[fn]
            if (arity is None and len(args) < 2) or (arity is not None and len(args) != arity):
                want = "two or more" if arity is None else str(arity)
                # max(t) of one tile is numpy's t.max(): reduce(max, t) in a kernel
                whole = f"; the {'largest' if fn == 'max' else 'smallest'} element of a tile " \
                    f"is reduce({fn}, t)" if arity is None and len(args) == 1 and \
                    args[0].ty.shape else ""
                raise ZynMLTypeError(f"{fn}() takes {want} argument{'s' if want != '1' else ''}"
                                     f"{whole}", e.span)
            shape = ()
            if not all(map(self._is_weak, args)):     # min(x[i], 2 ** 31): 2147483648
                args = [self._exact_int(a, node.span) for a, node in zip(args, e.args)]
            held = next((a for a in args if is_int(a.ty.dtype) and not isinstance(a, cir.Const)
                         and not self._host_i64(a)), None)
            args = args if held is None else [self._held(a, held, node.span)
                                              for a, node in zip(args, e.args)]
            dtype = args[0].ty.dtype
            for a, node in zip(args, e.args):
                shape = self._broadcast(shape, a.ty.shape, node.span)
            weak = self._is_weak(args[0])      # `max(0.0, x)` on f16 x stays f16
            for a in args[1:]:
                dtype = promote(dtype, a.ty.dtype, weak, self._is_weak(a))
                weak = weak and self._is_weak(a)
            if fn not in ("min", "max", "abs", "clamp", "relu") and not is_float(dtype):
                dtype = "f32"
            if fn in ("min", "max") and all(a.ty.dtype == "bool" for a in args):
                # of bools: `and`/`or`, bool as numpy's minimum and maximum give (they counted
                # as i32, as bools in arithmetic do: max(m, x > 0) was 1 or 0)
                return reduce(lambda a, b: cir.Bin("and" if fn == "min" else "or", a, b,
                                                   cir.Ty("bool", shape)), args)
            if fn in ("abs", "relu") and dtype == "bool":
                return args[0]              # a bool is its own abs and relu
            if fn in ("min", "max"):
                self._weak_in_bounds(args, dtype, [node.span for node in e.args])
            if fn == "clamp" and is_int(dtype):
                args = [args[0]] + [self._saturated(a, dtype) for a in args[1:]]
            strong = next((a for a in args if not self._is_weak(a)), None)
            if dtype == "f16" and strong is not None:     # pow(h[i], s): s is f16's, as in h[i] ** s
                args = [self._half_literal(a, strong) for a in args]
            args = [self._widen_weak(a, dtype) for a in args]
            return cir.Call(fn, tuple(args), cir.Ty(dtype, shape), span=e.span)
        if fn in cir.TILE_FUNCTIONS:
            return self.tile_call(fn, args, e)
        raise ZynMLNameError(f"unknown function `{fn}`{_did_you_mean(fn, KERNEL_BUILTINS)}",
                             e.func.span)

    def where_call(self, args, e):
        """`where(cond, a, b)`: numpy's where, elementwise on numbers and tiles (they
        broadcast); a number as the condition is true when it is not zero, and the result
        has the promoted dtype of `a` and `b` (bool where both are)."""
        if len(args) != 3:
            raise ZynMLTypeError("where(cond, a, b) takes three values", e.span)
        shape = ()
        for a, node in zip(args, e.args):
            shape = self._broadcast(shape, a.ty.shape, node.span)
        cond, a, b = args
        if cond.ty.dtype != "bool":
            zero = 0.0 if is_float(cond.ty.dtype) else 0
            cond = cir.Bin("!=", cond, cir.Const(zero, cir.Ty(cond.ty.dtype)),
                           cir.Ty("bool", cond.ty.shape))
        if a.ty.dtype == b.ty.dtype == "bool":
            dtype = "bool"
        else:
            a, b = self._half_literal(a, b), self._half_literal(b, a)
            sa, sb = e.args[1].span, e.args[2].span     # where(.., x[i], 2 ** 31): 2147483648
            a, b = self._exact_literals(a, b, sa), self._exact_literals(b, a, sb)
            a, b = self._held(a, b, e.args[1].span), self._held(b, a, e.args[2].span)
            dtype = promote(a.ty.dtype, b.ty.dtype, self._is_weak(a), self._is_weak(b))
            a, b = self._widen_weak(a, dtype), self._widen_weak(b, dtype)
        return cir.Select(cond, a, b, cir.Ty(dtype, shape))

    def tile_call(self, fn, args, e):
        if fn in ("zeros", "ones"):
            if not args or e.kwargs and any(k.name != "dtype" for k in e.kwargs):
                raise ZynMLTypeError(f"{fn}(rows, cols) makes a tile of that shape", e.span)
            for a, node in zip(args, e.args):
                if not is_int(a.ty.dtype) or a.ty.shape:
                    raise ZynMLTypeError(f"{fn}() sizes must be integers", node.span)
                if isinstance(a, cir.Const) and a.value < 0:    # (sizes: at the launch)
                    raise ZynMLShapeError(f"{fn}() makes a tile of sizes 0 or more, not "
                                          f"{a.value}", node.span)
            dims = tuple(affine.simplify(a) for a in args)
            dtype = next((self._dtype_kwarg(k) for k in e.kwargs), None)
            # without dtype= a tile of zeros is weak, as the literal 0.0 is: `var o = zeros(..)`
            # accumulating f16 products stays f16
            return cir.Call(fn, dims, cir.Ty(dtype or "f32", tuple(_dim_value(d) for d in dims)),
                            weak=dtype is None, span=e.span)
        if len(args) != 1:
            raise ZynMLTypeError(f"{fn}() takes one tile", e.span)
        t = args[0]
        if fn == "transpose":
            if len(t.ty.shape) != 2:
                raise ZynMLShapeError(f"transpose() takes a 2-D tile; this is {self.shown(t.ty)}",
                                      e.args[0].span)
            return cir.Call(fn, (t,), cir.Ty(t.ty.dtype, (t.ty.shape[1], t.ty.shape[0])))
        if fn in ("row_max", "row_sum"):
            if len(t.ty.shape) != 2:
                raise ZynMLShapeError(f"{fn}() takes a 2-D tile; this is {self.shown(t.ty)}",
                                      e.args[0].span)
            # bools count as i32 in a row_sum; a row_max of bools (an `or`) is taken on
            # their i32 values, which every device compares, and is bool again
            was_bool = t.ty.dtype == "bool"
            if was_bool:
                t = cir.Cast(t, cir.Ty("i32", t.ty.shape))
            # a column (rows x 1): it broadcasts against the tile's rows
            col = cir.Call(fn, (t,), cir.Ty(t.ty.dtype, (t.ty.shape[0], 1)))
            return cir.Cast(col, cir.Ty("bool", col.ty.shape)) if was_bool and fn == "row_max" \
                else col
        if fn == "sum":
            t = _bool_as_i32("+", t)
            return cir.Reduce("+", t, None, cir.Ty(t.ty.dtype))
        raise ZynMLNameError(f"unknown function `{fn}`", e.func.span)

    def reduce_call(self, e):
        if not e.args:
            raise ZynMLTypeError("reduce(op, x) needs an operator and a value", e.span)
        op = e.args[0]
        opname = op.op if isinstance(op, A.OpRef) else (op.id if isinstance(op, A.Name) else None)
        if opname not in cir.REDUCE_OPS:
            raise ZynMLTypeError(f"unknown reduction operator; expected one of "
                                 f"{', '.join(cir.REDUCE_OPS)}", op.span)
        if len(e.args) != 2:
            raise ZynMLTypeError("reduce(op, x) takes an operator and one value", e.span)
        x = _bool_as_i32(opname, self.expr(e.args[1]))
        opname = _bool_op(opname, x.ty.dtype)
        axis = None
        for kw in e.kwargs:
            if kw.name != "axis":
                raise ZynMLTypeError(f"reduce() has no parameter `{kw.name}`", kw.span)
            axis = _const_int(kw.value)
            if axis is None:
                raise ZynMLTypeError("axis must be a constant integer", kw.value.span)
            if not -len(x.ty.shape) <= axis < len(x.ty.shape):
                raise ZynMLShapeError(f"axis {axis} is out of range for {self.shown(x.ty)}",
                                      kw.value.span)
            axis %= len(x.ty.shape)
        if axis is None:
            shape = ()
        else:
            shape = tuple(d for k, d in enumerate(x.ty.shape) if k != axis)
        dtype = "i64" if opname in ("argmin", "argmax") else \
            ("bool" if opname in ("and", "or") else x.ty.dtype)
        if opname in ("argmin", "argmax") and not self.guards:
            outer = tuple(self.ranges[v] for v in self.loop_stack)
            self.arg_loops += [ArgExtent(opname, affine.const(0), _dim_expr(d), e.span,
                                         "this tile is empty", outer)
                               for k, d in enumerate(x.ty.shape) if axis in (None, k)]
        return cir.Reduce(opname, x, axis, cir.Ty(dtype, shape))

    def _same_dim(self, a, b, span, what):
        if isinstance(a, str) and isinstance(b, str) and a != b:
            self.constraints.append(Constraint(a, affine.var(b), span, what))
        elif isinstance(a, str) and isinstance(b, cir.Expr):
            self.constraints.append(Constraint(a, b, span, what))
        elif isinstance(b, str) and isinstance(a, cir.Expr):
            self.constraints.append(Constraint(b, a, span, what))

    def _broadcast(self, a: tuple, b: tuple, span) -> tuple:
        """numpy broadcasting of two tile shapes; equal-position named sizes are tied."""
        if not a or not b:
            return a or b
        out = []
        for k in range(1, max(len(a), len(b)) + 1):
            da = a[-k] if k <= len(a) else 1
            db = b[-k] if k <= len(b) else 1
            if da == 1 or db == 1:
                out.append(db if da == 1 else da)
                continue
            if isinstance(da, int) and isinstance(db, int) and da != db:
                raise ZynMLShapeError(f"tiles of shapes {self.shown(a)} and {self.shown(b)} "
                                      "do not broadcast", span)
            what = "the sizes of two tiles combined here"
            if da != db and self._named_extent(da) and self._named_extent(db) and \
                    (isinstance(da, str) or isinstance(db, str)):
                # sizes the program names (`m[i, 0:p] + m[i, 0:q]`) broadcast as numpy's
                # extents do, equal or one of them 1: dims.solve checks them at the launch,
                # and the extent is the other where one is 1. An input's whole axis stays
                # tied to the size it meets (the spec's kernels index out by it)
                left, right = (da, db) if isinstance(da, str) else (db, da)
                self.constraints.append(Constraint(left, _dim_expr(right), span, what,
                                                   broadcast=True))
                out.append(_broadcast_dim(da, db))
                continue
            if not (self._named_extent(da) and self._named_extent(db)):
                what += _WHOLE_AXIS
            self._same_dim(da, db, span, what)
            out.append(da)
        return tuple(reversed(out))

    def _named_extent(self, d) -> bool:
        """Whether tile extent `d` is a number or a size the program names, not the size of
        an input's axis (`A_d1`) nor an expression."""
        return isinstance(d, int) or isinstance(d, str) and \
            not any(d in axes for _label, _dtype, _rank, axes in self.buffers.values())

    # ---------------------------------------------------------------- the output
    def _output(self, kt: cir.KernelType) -> cir.Buffer:
        if self.yields and not self.out_stores and not self.whole_out and kt.kind == "custom":
            # nothing says how the yielded values combine (a typed kernel that yields is
            # refused by the kernel-type check, at its type)
            raise ZynMLTypeError("`yield` belongs in a reduce kernel: say how the values "
                                 "combine with `@kernel reduce(op)` (op: + * min max and or "
                                 "argmin argmax)", self.yields[0][2])
        if kt.kind == "reduce" or (self.yields and not self.out_stores and not self.whole_out):
            return self._reduce_output(kt)
        if self.yields:
            raise ZynMLTypeError("`yield` belongs in a reduce kernel; this kernel writes out",
                                 self.yields[0][2])
        if self.whole_out and self.out_stores:
            raise ZynMLShapeError("write out either whole (out = ...) or by element "
                                  "(out[...] = ...), not both", self.out_stores[0][2])
        if self.whole_out:
            value, span = self.whole_out[0]
            dtype = value.ty.dtype
            for v, s in self.whole_out[1:]:
                dtype = _store_dtype(dtype, v.ty.dtype)
            return cir.Buffer("out", dtype, tuple(value.ty.shape), "write")
        if not self.out_stores:
            raise ZynMLTypeError("this kernel never writes out: store results with "
                                 "out[...] = value (or yield them in a reduce kernel)",
                                 self.node.span)
        rank = None
        extents: list = []
        dtype = None
        # (a bool out counts as i32 when a number is added to it, as arithmetic does)
        typed = [v for _, v, *_ in self.out_stores
                 if id(v) not in self.weak_out_stores and v.ty.dtype != "bool"]
        for index, value, span, loops, guards in self.out_stores:
            # a slice's axis is the tile's, or a number's stored across it (`out[i:i+3] = v`)
            width = len(index) + max(0, len(value.ty.shape)
                                     - sum(isinstance(i, cir.Span) for i in index))
            if rank is None:
                rank = width
            elif width != rank:
                raise ZynMLShapeError(f"out is written with {width} axes here but {rank} "
                                      "elsewhere", span)
            if not (typed and id(value) in self.weak_out_stores):   # (that takes out's)
                dtype = value.ty.dtype if dtype is None else \
                    _store_dtype(dtype, value.ty.dtype, self._is_weak(value))
            ext = []
            for k, it in enumerate(index):
                ext.append(self._extent(it, span, guards))
            if len(index) < rank:
                tile = value.ty.shape[len(value.ty.shape) - (rank - len(index)):]
                for d in tile:
                    moving = [v.name for v in cir.walk(d) if isinstance(v, cir.Var)
                              and v.name in self.loop_info] if isinstance(d, cir.Expr) else \
                        [d] if isinstance(d, str) and d in self.loop_info else []   # b[i, :j]
                    if moving:
                        raise ZynMLShapeError(
                            f"the tile written here has a length that changes with the "
                            f"loop variable "
                            f"`{getattr(self.loop_info[moving[0]][3], 'var', moving[0])}`; every "
                            f"element of out holds a tile of one shape", span)
                ext.extend(tile)
            extents.append(ext)
        for lit, added, span in self.weak_out_floats:
            if is_int(dtype) and not (lit is not None and math.isfinite(lit) and lit == int(lit)):
                # out is an integer by its other writes: a float that is not whole would be
                # truncated (numpy refuses out += 1.5 on an integer array); one known only
                # as it runs may not be whole
                what = f"{lit!r}" if lit is not None else \
                    f"`{cir.format_expr(added)}`, a float known only as the kernel runs,"
                cut = "it would" if lit is not None else "it may"
                raise ZynMLTypeError(f"{what} is added into out, which its other writes make "
                                     f"{dtype}: {cut} be cut to a whole number; add a "
                                     f"whole number, or convert a write to a float, as "
                                     f"f32(...)", span)
        shape = []
        for axis in range(rank):
            dim = None
            for ext in extents:
                d = ext[axis]
                d = affine.var(d) if isinstance(d, str) else (affine.const(d) if isinstance(d, int) else d)
                dim = d if dim is None else affine.maximum(dim, d)
            shape.append(_dim_value(dim))
        return cir.Buffer("out", dtype, tuple(shape), "write")

    def _repeated_rows(self, target, index, value, s):
        """`out[i:i + 4, 0:8] = row`, a tile of fewer axes than the slices of out it is
        stored into: numpy repeats it across the leading slices it lacks, as the loop
        `for r in 0..4: out[i + r, 0:8] = row` does, which this lowers instead (None where the
        tile has the slices' axes, or a lacking slice is open at an end)."""
        slices = [k for k, it in enumerate(index) if isinstance(it, cir.Span)]
        missing = len(slices) - len(value.ty.shape)
        if not value.ty.shape or missing <= 0:
            return None
        items, iters = list(target.items), []
        for n, k in enumerate(slices[:missing]):
            item = items[k]
            if item.start is None or item.stop is None:
                return None
            var = f"_row{n}"
            while self.lookup(var) is not None or var in self.scalar_types:
                var += "_"                  # (a name the program does not use)
            length = A.BinOp("-", item.stop, item.start, span=item.span)
            iters.append(A.RangeIter(var, A.Number(0, span=item.span), length, span=item.span))
            items[k] = A.BinOp("+", item.start, A.Name(var, span=item.span), span=item.span)
        row = A.Assign(A.Index(target.base, items, span=target.span), s.op, s.value,
                       span=s.span)
        return self.loop(iters, [row], s.span.line)

    def _slice_fits(self, index, value, span):
        """A tile written into slices of out is as long as each slice (`out[r, 0:2] =
        m[r]` of a row of 4 ran on the CPU reference into numpy's broadcasting error and
        was cut to 2 elsewhere), or 1, which numpy repeats along the slice (`out[i, 0:n] =
        m[i, 0:1]`): constants, or a size the program names held to it at the launch; an
        input's whole axis is tied to the slice's length."""
        slices = [it for it in index if isinstance(it, cir.Span)]
        if 0 < len(value.ty.shape) < len(slices):
            # (a lacking slice open at an end, `out[i:, 0:8] = row`, whose length
            # _repeated_rows cannot tell)
            tile = f"{_axes_text(len(value.ty.shape))} ({self.shown(value.ty.shape)})"
            raise ZynMLShapeError(
                f"a tile of {tile} is stored into {len(slices)} slices of out: a tile is not "
                "repeated across the slices it lacks; store it once per position of them, in a "
                "loop (`for r in 0..4: out[i + r, 0:8] = row`), or index out there (`out[i, "
                "0:8] = row`)", span)
        for it, dim in zip(slices, value.ty.shape):
            if isinstance(it.stop, cir.Var) and it.stop.name == "__end__":
                continue            # out[i, 2:]: as long as the tile makes it
            length = _dim_value(affine.simplify(cir.Bin("-", it.stop, it.start, I32)))
            what = "the length of out's slice and of the tile written into it"
            if isinstance(dim, int) and isinstance(length, int):
                if dim not in (length, 1):
                    raise ZynMLShapeError(f"{what} differ: {length} and {dim} (a tile is "
                                          "stored into a slice as long as it, or of 1)", span)
            elif isinstance(dim, str) and dim != length:
                named = self._named_extent(dim)
                self.constraints.append(Constraint(
                    dim, _dim_expr(length), span, what + ("" if named else _WHOLE_AXIS),
                    broadcast=named and "store"))
            elif isinstance(length, str) and isinstance(dim, int) and dim != 1:
                self.constraints.append(Constraint(length, affine.const(dim), span, what))

    def _steps(self) -> dict:
        """{loop variable: its step} for the loops in scope (bounds of strided loops)."""
        return {v: info[2] for v, info in getattr(self, "loop_info", {}).items()}

    def _extent(self, it, span, guards=()):
        """The smallest out axis size that holds every value of this index."""
        it = substitute(it, self.int_lets)      # out[k] with `let k = n - 1 - i`
        # a loop whose bound is an outer loop's variable (`for j in 0..i`) reaches as far as
        # that variable's range lets it: bounded below, never the variable itself as a size
        own = lambda v: isinstance(v, cir.Var) and v.name in getattr(self, "loop_info", {}) \
            and self._static(self.loop_info[v.name][1])
        if isinstance(it, cir.Span):
            start = it.start
            if own(start):
                lstart, lstop, lstep, node = self.loop_info[start.name]
                # blocks (`out[q:q+64]`, q stepping by 64) are clipped to the loop's bound;
                # windows longer than the step (`out[i:i+3]`, i stepping by 1) reach past
                # it, to the last window's end
                length = affine.linear(affine.sub(it.stop, it.start))
                if isinstance(lstep, cir.Const) and length is not None and not length[0] \
                        and length[1] > lstep.value:
                    last = affine.bounds(start, self.ranges, self._steps())
                    if last is not None:
                        return affine.simplify(affine.add(last[1], affine.const(length[1])))
                return lstop
            b = affine.bounds(it.stop, self.ranges, self._steps())
        elif own(it):
            stop = self.loop_info[it.name][1]     # out[i]: the loop's range is the axis
            top = self._guarded_top(it, affine.sub(stop, affine.const(1)), guards)
            return stop if top is not None and affine.same(top, affine.sub(stop, affine.const(1))) \
                else affine.add(top, affine.const(1))
        else:
            b = affine.bounds(it, self.ranges, self._steps())
        if b is None:
            # an index read from data (`out[ids[j]] += v[j]`) reaches as far as an `if`
            # around the write lets it (`if ids[j] < n`), as a guarded affine index does
            top = self._guarded_top(it, None, guards)
            if top is not None:
                return affine.simplify(cir.Bin("+", top, affine.const(1), I32))
            raise ZynMLShapeError("cannot tell the size of out from this index; index out with "
                                  "loop variables (e.g. out[i, j]) or affine forms of them, or "
                                  "keep it below a size with an `if` around the write", span)
        top = affine.simplify(substitute(b[1], self.int_lets))
        for _ in self.ranges:               # `i - 1` of `j in 0..i`: the largest over i's range
            if not affine.uses_vars(top, self.ranges):
                break
            outer = affine.bounds(top, self.ranges, self._steps())
            if outer is None:
                break
            top = affine.simplify(substitute(outer[1], self.int_lets))
        # a loop bound read from data (`for i in 0..i32(x[0])`) bounds nothing the launch
        # knows: an `if` around the write may (`if i < n`)
        top = self._guarded_top(it, top if self._static(top) else None, guards)
        if top is None or not self._static(top):
            # a bound over a `var`, data or another value the launch does not know
            raise ZynMLShapeError("cannot tell the size of out from this index; index out with "
                                  "loop variables (e.g. out[i, j]) or affine forms of them, or "
                                  "keep it below a size with an `if` around the write", span)
        if isinstance(top, cir.Const) and top.value < 0:
            raise ZynMLShapeError(f"out is indexed at {top.value} at most: out's size comes from "
                                  "its indices, and an index that is never 0 or more leaves it "
                                  "no element (out[-1] does not count from the end)", span)
        return affine.simplify(cir.Bin("+", top, affine.const(0 if isinstance(it, cir.Span) else 1), I32))

    def _static(self, e) -> bool:
        """Whether `e` is computed from sizes alone (no loop variable, local or data read)."""
        return not any(isinstance(n, cir.Load) or isinstance(n, cir.Var) and n.name not in self.sizes
                       for n in cir.walk(e))

    def guarded_block(self, stmts, cond) -> list:
        """`stmts` lowered with `cond` (where known) among the guards of the writes in them."""
        if cond is None:
            return self.block(stmts)
        self.guards.append(cond)
        try:
            return self.block(stmts)
        finally:
            self.guards.pop()

    def _guarded_top(self, it, top, guards):
        """The largest value of index `it` (at most `top`, from the loop ranges) that a
        write under the enclosing `if`s can reach: `if i < M: out[i] = ...` with `i = ib * T
        + ti` reaches M - 1 however far the blocks of T run past it. With `top` None (an
        index the loops do not bound), the guards' limit alone, else None."""
        if isinstance(it, cir.Span):
            return top
        for cond in guards:
            for limit in _upper_limits(cond, it, self.int_lets):
                if not self._static(limit):
                    continue            # a limit over loop variables, locals or data: not a size
                if top is None:
                    top = limit
                    continue
                diff = affine.linear(affine.sub(limit, top))
                if diff is not None and not diff[0]:
                    top = top if diff[1] >= 0 else limit
                else:
                    top = cir.Call("min", (top, limit), I32)
        return top

    def _reduce_output(self, kt) -> cir.Buffer:
        if not self.yields:
            raise ZynMLTypeError("a reduce kernel must `yield` the values it combines",
                                 self.annotations["kernel"].kernel_span)
        if self.out_stores or self.whole_out:
            span = self.out_stores[0][2] if self.out_stores else self.whole_out[0][1]
            raise ZynMLTypeError("a reduce kernel yields its values; it does not write out", span)
        op = kt.param("op")
        first_loops = self.yields[0][3]
        for value, index, span, loops in self.yields:
            if loops != first_loops:
                raise ZynMLShapeError("every yield of a reduce kernel must sit in the same loops",
                                      span)
            if op in ("argmin", "argmax") and index is None:
                raise ZynMLTypeError(f"reduce({op}) yields (value, index) pairs", span)
            if op not in ("argmin", "argmax") and index is not None:
                raise ZynMLTypeError(f"reduce({op}) yields single values; (value, index) pairs "
                                     "are for argmin/argmax", span)
        axis = kt.param("axis")
        value = self.yields[0][0]
        if value.ty.shape:
            raise ZynMLShapeError("yield one value per iteration, not a tile", self.yields[0][2])
        if op in ("argmin", "argmax"):
            dtype = "i64"
            reduced = first_loops if axis is None else first_loops[axis:axis + 1 or None]
            self.arg_loops += [ArgExtent(op, *self.ranges[v], self.loop_info[v][3].span,
                                         "this loop runs no iteration") for v in reduced]
        elif op in ("and", "or"):
            dtype = "bool"
        else:
            dtype = value.ty.dtype
        if axis is None:
            return cir.Buffer("out", dtype, (), "write")
        if not -len(first_loops) <= axis < len(first_loops):
            raise ZynMLShapeError(f"axis={axis}, but the reduction runs over "
                                  f"{len(first_loops)} loop variable(s)",
                                  self.annotations["kernel"].kernel_span)
        axis %= len(first_loops)
        shape = []
        for k, var in enumerate(first_loops):
            if k == axis:
                continue
            start, stop = self.ranges[var]
            step = self.loop_info[var][2]
            if not (isinstance(start, cir.Const) and start.value == 0 and
                    isinstance(step, cir.Const) and step.value == 1):
                raise ZynMLShapeError("the kept axes of a reduction must run 0..n",
                                      self.loop_info[var][3].span)
            outer = [v for v in first_loops if v != var and
                     any(isinstance(n, cir.Var) and n.name == v for n in cir.walk(stop))]
            if outer:
                # the output's axis would be as long as another loop's variable says
                raise ZynMLShapeError(
                    f"the kept axes of a reduction must run 0..n over sizes; this bound "
                    f"depends on the loop variable `{self.loop_info[outer[0]][3].var}`",
                    self.loop_info[var][3].stop.span)
            shape.append(_dim_value(stop))
        return cir.Buffer("out", dtype, tuple(shape), "write")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _one_element(e) -> bool:
    """Whether `e` is a tile whose extents are all the constant 1."""
    return bool(e.ty.shape) and all(_dim_value(d) == 1 for d in e.ty.shape)


def _element_of(e, lets: dict):
    """The one element of `e`, a tile whose extents are all 1, as a scalar expression:
    each slice read at its start, elementwise operations on those elements, tile lets in
    `lets` read through; None for what is not elementwise (`@`, reductions, a `var`)."""
    if not e.ty.shape:
        return e
    scalar = replace(e.ty, shape=())
    at = lambda x: _element_of(x, lets)   # noqa: E731
    if isinstance(e, cir.Var):
        return at(lets[e.name]) if e.name in lets else None
    if isinstance(e, cir.Load):
        index = tuple(it.start if isinstance(it, cir.Span) else it for it in e.index)
        index += (affine.const(0),) * (len(e.ty.shape) - sum(isinstance(it, cir.Span) for it in e.index))
        return cir.Load(e.buffer, index, scalar, e.spans)
    parts = []
    if isinstance(e, cir.Bin) and e.op != "@":
        parts = [e.left, e.right]
    elif isinstance(e, (cir.Unary, cir.Cast)):
        parts = [e.operand]
    elif isinstance(e, cir.Select):
        parts = [e.cond, e.if_true, e.if_false]
    elif isinstance(e, cir.Call) and (e.fn in cir.MATH_FUNCTIONS or e.fn == "transpose"):
        parts = list(e.args)
    elif isinstance(e, cir.Call) and e.fn in ("zeros", "ones"):
        return cir.Const(0 if e.fn == "zeros" else 1, scalar) if is_int(scalar.dtype) else \
            cir.Const(0.0 if e.fn == "zeros" else 1.0, scalar)
    else:
        return None
    elements = [at(p) for p in parts]
    if any(x is None for x in elements):
        return None
    if isinstance(e, cir.Call) and e.fn == "transpose":
        return elements[0]
    names = {cir.Bin: ("left", "right"), cir.Unary: ("operand",), cir.Cast: ("operand",),
             cir.Select: ("cond", "if_true", "if_false")}.get(type(e))
    if names is None:
        return replace(e, args=tuple(elements), ty=scalar)
    return replace(e, ty=scalar, **dict(zip(names, elements)))


def _reduced_element(e):
    """The one element of tile `e` that is not elementwise (`@`, a reduction, a `var`), as
    the max of its elements: the element itself, NaN and -0.0 kept (a sum would make -0.0
    0.0)."""
    return cir.Reduce(_bool_op("max", e.ty.dtype), e, None, cir.Ty(e.ty.dtype))


def _closed_slices(index, value):
    """A store's index with each slice open at its end (`out[i, 2:] = x[i, 2:]`) ending
    where the tile written into it does: out's size comes from its indices, and no axis of
    out is known to end it."""
    axes = iter(value.ty.shape)         # the tile's axes, one for each slice in order
    closed = []
    for it in index:
        axis = next(axes, None) if isinstance(it, cir.Span) else None
        if axis is not None and isinstance(it.stop, cir.Var) and it.stop.name == "__end__":
            length = affine.const(axis) if isinstance(axis, int) else \
                affine.var(axis) if isinstance(axis, str) else axis
            it = cir.Span(it.start, affine.simplify(affine.add(it.start, length)))
        closed.append(it)
    return tuple(closed)


def _in_f64(e, lets=None):
    """`e`, a weak scalar expression, with its float literals and float arithmetic in f64
    (integer parts, `7 / 2`, keep their own type and meaning); `lets`: the weak float lets
    it may read (`let c = 0.1 * 3.0`), computed in f64 where it reads them. An expression of
    literals alone is its value (`sqrt(2.0)`: WGSL's constant evaluation has no 64-bit
    math)."""
    if not is_float(e.ty.dtype) or e.ty.shape:
        return e
    ty = cir.Ty("f64", ())
    lets = lets or {}
    if isinstance(e, cir.Var) and e.name in lets:
        return _in_f64(lets[e.name], lets)
    value = _literal_value(e)
    if value is not None:
        return cir.Const(float(value), ty)
    if isinstance(e, cir.Bin) and e.op in ("+", "-", "*", "/", "**", "%"):
        return cir.Bin(e.op, _in_f64(e.left, lets), _in_f64(e.right, lets), ty)
    if isinstance(e, cir.Unary) and e.op == "neg":
        return cir.Unary("neg", _in_f64(e.operand, lets), ty)
    if isinstance(e, cir.Call) and not e.weak and e.fn in cir.MATH_FUNCTIONS:
        return cir.Call(e.fn, tuple(_in_f64(a, lets) for a in e.args), ty)
    return e


def _literal_value(e):
    """The value of CIR scalar `e` made only of literals and math on them, computed in
    float64 as the reference computes weak values (infinities and NaN where they arise),
    else None."""
    import numpy as np
    from ..backends.cpu.reference import _UNARY
    ops = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power,
           "%": np.fmod, "min": np.minimum, "max": np.maximum, "pow": np.power}
    if isinstance(e, cir.Const):
        ok = isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        return np.float64(e.value) if ok else None
    if is_int(e.ty.dtype) and not e.ty.shape:
        # integer literal arithmetic is the kernel's: C's `/` and `%`, wrapping in its type
        # (`7 / 2 * 1.0` is 3.0, not 3.5)
        v = _int_literal_value(e)
        return None if v is None else np.float64(v)
    if isinstance(e, cir.Unary) and e.op == "neg":
        v = _literal_value(e.operand)
        return None if v is None else -v
    args = (e.left, e.right) if isinstance(e, cir.Bin) else \
        e.args if isinstance(e, cir.Call) and not e.weak else ()
    fn = e.op if isinstance(e, cir.Bin) else getattr(e, "fn", None)
    vals = [_literal_value(a) for a in args]
    if not vals or any(v is None for v in vals):
        return None
    with np.errstate(all="ignore"):
        if fn in ops and len(vals) == 2:
            return np.float64(ops[fn](*vals))
        if fn in _UNARY and len(vals) == 1:
            return np.float64(_UNARY[fn](vals[0]))
        if fn == "clamp" and len(vals) == 3:
            return np.float64(np.minimum(np.maximum(vals[0], vals[1]), vals[2]))
    return None


def _int_literal_value(e):
    """The value of integer CIR scalar `e` made only of literals, as the kernel computes it
    (wrapped to its dtype), else None."""
    if any(isinstance(n, cir.Var) for n in cir.walk(e)):
        return None
    try:
        v = cir.eval_expr_static(e, {})
    except (KeyError, TypeError, ZeroDivisionError, OverflowError):
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    bits = int(e.ty.dtype[1:])
    low = 0 if e.ty.dtype.startswith("u") else -2 ** (bits - 1)
    return (v - low) % 2 ** bits + low


def _held_literal(c, other):
    """An integer literal past i32 (i64 or u64, not weak) beside an integer value whose dtype
    holds it takes that dtype, as numpy reads a Python int beside an array: `u[i] >
    3000000000` and `u[i] + 3000000000` on u32 `u` are u32's (the sum wraps), not i64's."""
    if isinstance(c, cir.Const) and type(c.value) is int and not is_weak(c) and \
            is_int(other.ty.dtype) and other.ty.dtype != c.ty.dtype and \
            holds(other.ty.dtype, c.value):
        return cir.Const(c.value, cir.Ty(other.ty.dtype, c.ty.shape))
    return c


def _store_dtype(a, b, weak_b=False):
    """The dtype of out written with values of dtypes a and b: bools stored beside bools
    stay bool (promote() counts a bool as i32, as arithmetic does)."""
    return a if a == b else promote(a, b, False, weak_b)


def _bool_op(op, dtype):
    """max and min of bools are `or` and `and`, which every device spells."""
    return {"max": "or", "min": "and"}.get(op, op) if dtype == "bool" else op


def _bool_as_i32(op, value):
    """Booleans summed or multiplied count as i32, as bools in arithmetic do (a reduce(+)
    of comparisons counts them), and argmin/argmax order them as 0 and 1; `and`, `or`,
    `min` and `max` keep them bool."""
    if op in ("+", "*", "argmin", "argmax") and value.ty.dtype == "bool":
        return cir.Cast(value, cir.Ty("i32", value.ty.shape))
    return value


def _upper_limits(cond, index, lets: dict):
    """The largest values `index` may take where `cond` holds, as size expressions: one per
    comparison of the index with a bound in the conjunction (`i < M and j < N`, `not (i >=
    M)`)."""
    if isinstance(cond, cir.Unary) and cond.op == "not":
        neg = cir.negated(cond.operand)
        return [] if neg is None else _upper_limits(neg, index, lets)
    if isinstance(cond, cir.Bin) and cond.op == "and":
        return _upper_limits(cond.left, index, lets) + _upper_limits(cond.right, index, lets)
    if not isinstance(cond, cir.Bin) or cond.op not in ("<", "<=", ">", ">="):
        return []
    left, right = substitute(cond.left, lets), substitute(cond.right, lets)
    op = cond.op
    if op in (">", ">="):               # M > i is i < M
        left, right, op = right, left, "<" if op == ">" else "<="
    if not (affine.cir_is_int(left) and affine.cir_is_int(right)):
        return []
    offset = affine.linear(affine.sub(left, index))
    if offset is not None and not any(c for c, _ in offset[0].values()):
        right = affine.sub(right, affine.const(offset[1]))  # `i + 2 < n`: i < n - 2
    elif not affine.same(left, index):
        return []
    return [affine.sub(right, affine.const(1)) if op == "<" else affine.simplify(right)]


def _dim_value(d):
    if isinstance(d, cir.Var):
        return d.name
    if isinstance(d, cir.Const):
        return d.value
    return d


_WHOLE_AXIS = (" (an input's whole axis must equal the size it meets; a slice of 1 "
               "broadcasts: `m[0:1]`, `m[i, 0:1]`)")


def _dim_expr(d) -> cir.Expr:
    """A size name, a number or a size expression as a CIR size expression."""
    return affine.var(d) if isinstance(d, str) else affine.const(d) if isinstance(d, int) else d


def _broadcast_dim(a, b) -> cir.Expr:
    """numpy's extent of two axes of sizes `a` and `b` (names or numbers) combined
    elementwise: the other where one is 1."""
    ea, eb = _dim_expr(a), _dim_expr(b)
    return cir.Select(cir.Bin("==", ea, affine.const(1), cir.Ty("bool")), eb, ea, I32)


# what `a and b`, `a or b`, `not a` are written as where a and b are tiles of bools
_TILE_LOGIC = {"and": "write `where(a, b, false)` for `a and b`",
               "or": "write `where(a, true, b)` for `a or b`",
               "not": "write `where(a, false, true)` for `not a`"}


def _axes_text(n: int) -> str:
    return "one axis" if n == 1 else f"{n} axes"


def _shape_text(shape) -> str:
    return "[" + ", ".join(cir.format_expr(d) if isinstance(d, cir.Expr) else str(d)
                           for d in shape) + "]"


# kernel parameters that are integers, with their least value (axis counts from the end
# when negative)
_KERNEL_PARAMS = {"reduce": ("axis",), "conv2d": ("stride", "padding"),
                  "conv2d_depthwise": ("stride", "padding")}
_INT_KERNEL_PARAMS = {("reduce", "axis"): -2**31, ("conv2d", "stride"): 1,
                      ("conv2d", "padding"): 0, ("conv2d_depthwise", "stride"): 1,
                      ("conv2d_depthwise", "padding"): 0}


def check_annotation(ann: A.Annotation, given) -> None:
    """Refuse `ann` where its name is unknown, it follows one of its name in `given` (the
    names before it; only @broadcast repeats) or it takes no arguments and has some."""
    if ann.name not in ANNOTATIONS:
        close = [a for a in ANNOTATIONS if _similar(a, ann.name)]
        hint = f" (did you mean @{close[0]}?)" if close else \
            f"; known annotations: {', '.join('@' + a for a in ANNOTATIONS)}"
        raise ZynMLNameError(f"unknown annotation @{ann.name}{hint}", ann.span)
    if ann.name in given and ann.name != "broadcast":
        raise ZynMLTypeError(f"@{ann.name} is given twice", ann.span)
    if ann.name in ("async", "autotune", "nofuse") and (ann.args or ann.kwargs):
        raise ZynMLTypeError(f"@{ann.name} takes no arguments", ann.span)
    _distinct_keywords(list(ann.kwargs) + list(ann.kernel_kwargs or ()))


def _distinct_keywords(kwargs) -> None:
    seen = set()
    for kw in kwargs:
        if kw.name in seen:
            raise ZynMLTypeError(f"`{kw.name}` is given twice", kw.span)
        seen.add(kw.name)


def _size_expression(e) -> bool:
    """Integers, size literals and names combined by + - * / % (a number of bytes)."""
    if isinstance(e, A.Number):
        return isinstance(e.value, int)
    if isinstance(e, (A.Name, A.Size, A.Attr)):
        return True
    if isinstance(e, A.UnaryOp):
        return e.op == "neg" and _size_expression(e.operand)
    if isinstance(e, A.BinOp):
        return e.op in ("+", "-", "*", "/", "%") and _size_expression(e.left) and \
            _size_expression(e.right)
    return False


def _const_int(e, allow_names=False):
    if isinstance(e, A.Number) and isinstance(e.value, int):
        return e.value
    if isinstance(e, A.UnaryOp) and e.op == "neg":
        v = _const_int(e.operand, allow_names)
        return None if v is None else -v
    if isinstance(e, A.BinOp) and e.op in ("+", "-", "*", "/"):
        a, b = _const_int(e.left, allow_names), _const_int(e.right, allow_names)
        if a is None or b is None:
            return None
        if e.op == "/":
            return a // b if b else None
        return {"+": a + b, "-": a - b, "*": a * b}[e.op]
    return None


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _nest_depth(body) -> int:
    """The deepest nest of loops in a CIR body."""
    best = 0
    for st in body:
        if isinstance(st, cir.Loop):
            best = max(best, 1 + _nest_depth(st.body))
        elif isinstance(st, cir.If):
            best = max(best, _nest_depth(st.then), _nest_depth(st.orelse))
    return best


def _did_you_mean(name: str, known) -> str:
    import difflib
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def _similar(a: str, b: str) -> bool:
    import difflib
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _block_text(source: str, span: Span) -> str:
    if not source or span.line <= 0:
        return ""
    lines = source.splitlines()
    return "\n".join(lines[span.line - 1: span.end_line])


def lower_compute(node: A.Compute, inputs: list, scalars: dict, name: str = "kernel",
                  source: str = "", extra_annotations: list = ()) -> LoweredKernel:
    """Lower a compute block given its inputs' signatures and the dtypes of host scalars
    its body may name (free names absent from `scalars` are sizes to infer)."""
    reserved, out_dtype = frozenset(), None
    while True:
        lowering = _Lowering(node, inputs, scalars, name, source, list(extra_annotations),
                             reserved, out_dtype)
        lowered = lowering.run()
        # `out[i] += v` reads out in its dtype, which every write gives (out[i] += x[i] then
        # out[i] += 1 on f32 x added 1 to out truncated to i32): lowered again with it
        final = lowered.kernel.output.dtype
        if lowering.out_reads - {final}:
            out_dtype = final
            continue
        # a local or loop variable named as a size or scalar the body also reads (`for K in
        # 0..K`, a size met only after a local took its name): renderers see one flat
        # namespace, so the locals are renamed apart and the block lowered again
        locals_ = getattr(lowering, "_used_locals", set()) - set(lowering.buffers) - {"out"}
        clash = locals_ & (lowering.sizes | set(lowering.scalar_args)) - reserved
        if not clash:
            return lowered
        reserved = reserved | clash


def _negative_const(e):
    """The value of `e` where it is a negative integer constant (`-3`), else None."""
    if isinstance(e, cir.Unary) and e.op == "neg" and isinstance(e.operand, cir.Const):
        v = -e.operand.value
    elif isinstance(e, cir.Const):
        v = e.value
    else:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) and v < 0 else None
