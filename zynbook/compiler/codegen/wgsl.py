"""CIR -> WGSL: one WebGPU compute program per ZynML kernel.

The renderer is pure text: it needs no adapter and its output is what the WebGPU device
compiles. Each kernel gets a *schedule*, chosen from its kernel type and checked against the
shape of its loop nest (a schedule that does not fit falls back to the generic one, with a
note in the generated code, never to a wrong result):

* ``generic``  every kernel: the leading chain of parallel loops is flattened and mapped to
  invocations (one per iteration, bounds-checked, any number of workgroups through a 2-D/3-D
  dispatch); everything inside runs as written. Tile values (slices, ``A @ B``, ``zeros``)
  are computed element by element; tile locals and ``shared var`` arrays live in a scratch
  storage buffer, one slot per invocation.
* ``reduce``   ``reduce(op[, axis])`` kernels: a workgroup tree reduction; without an axis a
  first pass writes one partial per workgroup and a second pass combines them, so inputs of
  any length work; with an axis one workgroup per kept index; argmin/argmax carry the index
  and keep the first one on ties, as numpy does.
* ``gemm``     contractions (matmul, batched_matmul and any body of that shape): the GEMM
  schedule of compiler/schedules/gemm.py (block tiles in workgroup memory, sums in
  registers) printed by the WGSL dialect, one program for every size set.
* ``rows``     one workgroup per iteration of the parallel loops (softmax, layer/RMS norm,
  attention, fused kernels): the serial loops inside are split over the workgroup's
  invocations; accumulations (``acc += ...``, ``m = max(m, ...)``) become tree reductions.
* ``attention`` every attention the recognition pass finds (three-pass, online softmax,
  flash; any key condition): the attention schedule of compiler/schedules/attention.py
  printed by the WGSL dialect (``launch_program``), whatever the options.

With the adapter's `subgroups` feature, workgroup reductions (+, min, max) run as rounds of
subgroup operations; with `shader-f16`, f16 tensors are stored and computed as f16.

Conventions of the generated code: sizes, buffer dimensions and scalar arguments come from
one uniform struct ``P`` (every field a 4-byte scalar, so the layout is the field order);
integer indices are ``i32``; buffers of dtypes WGSL cannot store (bool, 8/16/64-bit ints,
f64) are stored widened or narrowed as ``ProgramBinding.storage`` says, and the device
converts on upload and download.

With ``WGSLOptions.launch_ir`` (the WebGPU device's default) or the sizes of a launch
(``launch_sizes``), ``render`` first builds the kernel's launch IR with compiler/schedules/
(a WebGPU target has ``symbolic_sizes``: one program for every size set of the pattern of
equal and negative sizes, sizes as uniforms) and prints it with the WGSL dialect of the one
printer (codegen/dialects/wgsl.py; ``launch_program``); where no schedule applies or the
dialect refuses what one built (64-bit integers, f16 without ``shader-f16``,
collectives...), the schedules above run as before, as they do for the browser device.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

from .. import cir, errflag
from ...errors import ZynMLDeviceError
from ..passes.bounds import Facts
from .cstyle import _const_value, comment_safe

# ----------------------------------------------------------------------------- options


@dataclass(frozen=True)
class WGSLOptions:
    """What the target adapter offers; part of the pipeline cache key."""
    workgroup_size: int = 256
    f16: bool = False                      # the adapter has `shader-f16`
    subgroups: bool = False                # the adapter has `subgroups`
    # standard WGSL declares `enable subgroups;`; Naga (wgpu-native) takes subgroup
    # operations from the device's feature and refuses the directive
    subgroups_directive: bool = True
    max_workgroup_storage: int = 16384     # bytes (WebGPU's guaranteed minimum)
    max_invocations: int = 256
    max_storage_buffers: int = 8
    # groups of size names equal at the launch this program is for: the bounds analysis
    # (passes/bounds.py) then proves `x[i]`, i in 0..len, in range of an axis `x_d0`
    equal_sizes: tuple = ()
    # size names negative at that launch (a host int can be): not assumed >= 0
    negative_sizes: tuple = ()
    f64: bool = False                      # the adapter has `shader-f64`
    # the kernel goes through compiler/schedules/ and the WGSL dialect first (one program
    # for every size set of the pattern equal_sizes, negative_sizes; see launch_program)
    launch_ir: bool = False
    # sizes ((name, value) pairs) of one launch: given, the launch-IR path is taken too,
    # with the pattern of equal and negative sizes read from them (the values themselves
    # are not compiled in)
    launch_sizes: tuple = ()

    def key(self) -> tuple:
        return (self.workgroup_size, self.f16, self.subgroups, self.subgroups_directive,
                self.max_workgroup_storage,
                self.max_invocations, self.max_storage_buffers, self.equal_sizes,
                self.negative_sizes, self.f64, self.launch_ir, self.launch_sizes)


# ----------------------------------------------------------------------------- program


@dataclass
class ProgramBinding:
    binding: int
    name: str           # WGSL variable name
    buffer: str         # CIR buffer name, or a runtime role: "@params", "@scratch_f32", ...
    access: str         # "read", "read_write", "uniform"
    storage: str        # WGSL element type stored: f32, f16, i32, u32
    dtype: str = ""     # CIR dtype of the buffer (inputs and output)


@dataclass
class ProgramPass:
    entry: str
    workgroups: Callable    # env -> number of workgroups (linear; the device splits it 2-D/3-D)
    label: str = ""


@dataclass
class ParamField:
    name: str
    wgsl_type: str          # i32 | u32 | f32
    value: Callable         # env -> number


@dataclass
class Program:
    """Everything the device needs to run one kernel."""
    kernel: str
    schedule: str
    source: str
    bindings: list
    passes: list
    params: list            # of ParamField, in struct order
    scratch: dict           # storage type -> env -> number of elements
    workgroup_storage: int  # bytes of var<workgroup> the module declares
    workgroup_size: tuple
    notes: list = field(default_factory=list)
    uses_f16: bool = False
    error_sites: tuple = ()     # compiler/errflag.py; the flag is the binding of "@error"
    # launch-IR programs: scratch buffers by binding role ("@scratch:<name>") -> env -> bytes,
    # one buffer per launch (not per invocation, as `scratch` above)
    scratch_bytes: dict = field(default_factory=dict)
    # launch-IR programs: env -> why a launch cannot run (its indices would pass i32), or None
    check: Callable | None = None

    def scratch_slots(self, env) -> int:
        """How many scratch slots a launch needs: one per invocation (generic) or per
        workgroup."""
        total = 0
        for p in self.passes:
            total = max(total, int(p.workgroups(env)))
        if self.schedule == "generic":
            return total * self.workgroup_size[0]
        return max(1, total)

    def param_values(self, env) -> list:
        return [(f.wgsl_type, f.value(env)) for f in self.params]


# The env passed to the host-side callables:
#   env["sizes"]   {size name: int}, env["scalars"] {name: number},
#   env["shapes"]  {CIR buffer name: tuple of ints} (inputs and output)

# ----------------------------------------------------------------------------- dtypes

_STORAGE = {"f32": "f32", "f16": "f16", "bf16": "f32", "f64": "f32", "i32": "i32", "u32": "u32",
            "i8": "i32", "i16": "i32", "i64": "i32", "u8": "u32", "u16": "u32", "u64": "u32",
            "bool": "u32"}

WGSL_RESERVED = set("""
alias break case const const_assert continue continuing default diagnostic discard else enable
false fn for if let loop override requires return struct switch true var while
NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto await become
binding_array cast catch class co_await co_return co_yield coherent column_major common compile
compile_fragment concept const_cast consteval constexpr constinit crate debugger decltype delete
demote demote_to_helper do dynamic_cast enum explicit export extends extern external fallthrough
filter final finally friend from fxgroup get goto groupshared highp impl implements import
inline instanceof interface layout lowp macro macro_rules match mediump meta mod module move mut
mutable namespace new nil noexcept noinline nointerpolation noperspective null nullptr of
operator package packoffset partition pass patch pixelfragment precise precision premerge priv
protected pub public readonly ref regardless register reinterpret_cast require resource restrict
self set shared sizeof smooth snorm static static_assert static_cast std subroutine super target
template this thread_local throw trait try type typedef typeid typename typeof union unless
unorm unsafe unsized use using varying virtual volatile wgsl where with writeonly yield
f32 f16 i32 u32 bool vec2 vec3 vec4 mat2x2 mat3x3 mat4x4 array atomic ptr sampler texture_2d
abs acos asin atan atan2 ceil clamp cos cosh cross degrees determinant distance dot exp exp2
floor fma fract frexp inverseSqrt ldexp length log log2 max min mix modf normalize pow radians
reflect refract round saturate select sign sin sinh smoothstep sqrt step tan tanh transpose
trunc all any arrayLength bitcast storageBarrier workgroupBarrier P
""".split())


def storage_type(dtype: str, f16: bool = True, f64: bool = False) -> str:
    """The WGSL element type a buffer of `dtype` is stored as (f64 only with the adapter's
    `shader-f64`; without it f64 kernels are refused, see _refuse_f64)."""
    if dtype == "f64" and f64:
        return "f64"
    s = _STORAGE.get(dtype)
    if s is None:
        raise ZynMLDeviceError(f"dtype {dtype} has no WGSL storage type")
    if s == "f16" and not f16:
        return "f32"
    return s


def _is_float(dtype: str) -> bool:
    return dtype in cir.FLOAT_DTYPES


def _is_unsigned(dtype: str) -> bool:
    return dtype.startswith("u")


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def ident(name: str) -> str:
    """A WGSL identifier for a ZynML name (`weights.qkv_proj` -> `weights_qkv_proj`)."""
    s = _IDENT.sub("_", name)
    if not s or s[0].isdigit():
        s = "v_" + s
    if s.startswith("__"):
        s = "u" + s
    if s in WGSL_RESERVED or s.startswith("z_"):
        s = s + "_"
    return s


# ------------------------------------------------------------------- host-side sizes


def host_eval(e, env):
    """Evaluate a CIR expression of sizes and scalar arguments on the host."""
    if isinstance(e, int):
        return e
    if isinstance(e, str):
        return int(env["sizes"][e])
    if isinstance(e, cir.Const):
        return e.value
    if isinstance(e, cir.Var):
        if e.name in env["sizes"]:
            return env["sizes"][e.name]
        if e.name in env["scalars"]:
            return env["scalars"][e.name]
        raise KeyError(e.name)
    if isinstance(e, cir.Unary) and e.op == "neg":
        return -host_eval(e.operand, env)
    if isinstance(e, cir.Cast):
        v = host_eval(e.operand, env)
        return float(v) if _is_float(e.ty.dtype) else int(v)
    if isinstance(e, cir.Bin):
        a, b = host_eval(e.left, env), host_eval(e.right, env)
        if e.op == "/":
            if isinstance(a, int) and isinstance(b, int):
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b >= 0) else -q
            return a / b
        if e.op == "%":
            return int(math.fmod(a, b)) if isinstance(a, int) and isinstance(b, int) else math.fmod(a, b)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "**": lambda: a ** b}[e.op]()
    if isinstance(e, cir.Call) and e.fn in ("min", "max"):
        vals = [host_eval(a, env) for a in e.args]
        return min(vals) if e.fn == "min" else max(vals)
    raise KeyError(cir.format_expr(e))


def host_interval(e, env, ranges: dict) -> tuple:
    """(low, high) of a CIR integer expression when loop variables take any value of their
    ranges (`ranges`: var -> (start, stop) expressions) and sizes their launch values."""
    if isinstance(e, cir.Var) and e.name in ranges and e.name not in env["sizes"]:
        lo = host_interval(ranges[e.name][0], env, ranges)[0]
        hi = host_interval(ranges[e.name][1], env, ranges)[1] - 1
        return lo, max(lo, hi)
    if isinstance(e, (cir.Const, cir.Var)):
        v = host_eval(e, env)
        return v, v
    if isinstance(e, cir.Unary) and e.op == "neg":
        lo, hi = host_interval(e.operand, env, ranges)
        return -hi, -lo
    if isinstance(e, cir.Bin) and e.op in ("+", "-", "*"):
        a, b = host_interval(e.left, env, ranges), host_interval(e.right, env, ranges)
        if e.op == "+":
            return a[0] + b[0], a[1] + b[1]
        if e.op == "-":
            return a[0] - b[1], a[1] - b[0]
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if isinstance(e, cir.Call) and e.fn in ("min", "max"):
        parts = [host_interval(a, env, ranges) for a in e.args]
        f = min if e.fn == "min" else max
        return f(p[0] for p in parts), f(p[1] for p in parts)
    v = host_eval(e, env)
    return v, v


def _free_vars(e) -> set:
    return {n.name for n in cir.walk(e) if isinstance(n, cir.Var)}


def trip_count(start, stop, step) -> int:
    if step > 0:
        return max(0, -(-(stop - start) // step))
    if step < 0:
        return max(0, -(-(start - stop) // -step))
    raise ZynMLDeviceError("loop step is 0")


# ------------------------------------------------------------------------ the writer


class _Writer:
    def __init__(self):
        self.lines: list = []
        self.level = 0

    def line(self, text: str = ""):
        self.lines.append(("    " * self.level + text) if text else "")

    def open(self, text: str):
        self.line(f"{text} {{" if text else "{")
        self.level += 1

    def close(self, text: str = "}"):
        self.level -= 1
        self.line(text)

    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class _Sym:
    kind: str                 # scalar | param | tile | alias | loop
    wgsl: str = ""            # name (scalar/loop/param expression)
    dtype: str = "f32"
    rank: int = 0
    extents: list = field(default_factory=list)     # WGSL names of runtime extents (tile)
    base: str = ""            # WGSL expression of the element offset in scratch (tile)
    store: str = ""           # scratch array name (tile)
    expr: object = None       # aliased CIR expression (alias)
    mutable: bool = False


class RenderError(Exception):
    """The kernel does not fit the schedule being tried (internal; leads to a fallback)."""


_IDENTITY = {"+": "0", "*": "1", "min": "+inf", "max": "-inf", "and": "true", "or": "false",
             "argmax": "-inf", "argmin": "+inf"}


# ---------------------------------------------------------------------------- renderer


class KernelRenderer:
    """Renders one kernel with one schedule. `render()` returns a Program."""

    def __init__(self, kernel: cir.Kernel, options: WGSLOptions):
        self.k = kernel
        self.o = options
        self.w = _Writer()
        self.scopes: list = [{}]
        self.used_names: set = set()
        self.tmp = 0
        self.params: dict = {}          # field -> ParamField
        self.scratch_fields: list = []  # (storage type, field name, capacity fn)
        self.scratch_slot: dict = {}    # storage -> slot-stride field name
        self.helpers: set = set()
        self.notes: list = []
        self.uses_f16 = False
        self.wg_decls: list = []        # var<workgroup> declarations
        self.wg_bytes = 0
        self.atomic_buffers: set = set()
        self.bufs = {b.name: b for b in list(kernel.inputs) + [kernel.output]}
        self.buf_ident = {}
        for b in list(kernel.inputs) + [kernel.output]:
            self.buf_ident[b.name] = self._unique(ident(b.name))
        self.shared_allocs: dict = {}   # SharedAlloc name -> _Sym (tile)
        self.reduce_ctx = None          # set while rendering a reduce kernel's body
        self.coop = None                # set while rendering a rows schedule
        self.slot_expr = "z_slot"       # WGSL expression of this invocation's scratch slot
        self.ranges: dict = {}          # loop variable -> (start, stop) CIR expressions
        # run-time checks (compiler/errflag.py) where the analysis cannot prove safety
        self.errs = errflag.ErrorSites()
        self.facts = Facts(kernel.body, None,
                           [d for d in kernel.dims if d not in options.negative_sizes],
                           options.equal_sizes)
        self.cur_line = kernel.first_line
        self.shared_shapes: dict = {}   # SharedAlloc name -> its CIR shape
        self._store_conds = None        # set by store(): bounds conditions to test
        for a in kernel.dims:
            self.params.setdefault(ident(a), ParamField(ident(a), "i32",
                                                        (lambda env, a=a: int(env["sizes"][a]))))
        for s in kernel.scalars:
            t = "f32" if _is_float(s.dtype) else ("u32" if _is_unsigned(s.dtype) else "i32")
            if s.dtype == "bool":
                t = "u32"
            self.params.setdefault(ident(s.name), ParamField(
                ident(s.name), t, (lambda env, n=s.name, t=t: float(env["scalars"][n]) if t == "f32"
                                   else int(env["scalars"][n]))))
        for b in list(kernel.inputs) + [kernel.output]:
            for ax in range(len(b.shape)):
                f = f"{self.buf_ident[b.name]}_d{ax}"
                self.params[f] = ParamField(f, "i32", (lambda env, n=b.name, ax=ax: int(env["shapes"][n][ax])))

    # ------------------------------------------------------------------ names and types

    def _unique(self, base: str) -> str:
        name = base
        n = 1
        while name in self.used_names:
            n += 1
            name = f"{base}_{n}"
        self.used_names.add(name)
        return name

    def fresh(self, hint: str = "t") -> str:
        self.tmp += 1
        return self._unique(f"z_{hint}{self.tmp}")

    def declare(self, cir_name: str, sym: _Sym):
        self.scopes[-1][cir_name] = sym

    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def push(self):
        self.scopes.append({})

    def pop(self):
        self.scopes.pop()

    def cty(self, dtype: str) -> str:
        """The WGSL type a value of `dtype` is computed in."""
        if dtype in ("f16",):
            if self.o.f16:
                self.uses_f16 = True
                return "f16"
            return "f32"
        if dtype == "f64" and self.o.f64:
            self.uses_f64 = True
            return "f64"
        if _is_float(dtype):
            return "f32"
        if dtype == "bool":
            return "bool"
        return "u32" if _is_unsigned(dtype) else "i32"

    def param(self, name: str, wgsl_type: str, value) -> str:
        f = ident(name) if not name.startswith("z_") else name
        if f not in self.params:
            self.params[f] = ParamField(f, wgsl_type, value)
        return f"P.{f}"

    def convert(self, text: str, src: str, dst: str) -> str:
        """Convert a WGSL value of CIR dtype `src` to the compute type of `dst`."""
        a, b = self.cty(src), self.cty(dst)
        if a == b:
            return text
        if b == "bool":
            return f"({text} != {self.zero(src)})"
        if a == "bool":
            return f"select({self.zero(dst)}, {self.one(dst)}, {text})"
        return f"{b}({text})"

    def zero(self, dtype):
        return self.const(0, dtype)

    def one(self, dtype):
        return self.const(1, dtype)

    def const(self, v, dtype: str) -> str:
        t = self.cty(dtype)
        if t == "bool":
            return "true" if v else "false"
        if t == "f64":
            # an abstract float converted to f64: the literal is exact in double precision
            v = float(v)
            if math.isinf(v) or math.isnan(v):
                pick = "7f800000" if v > 0 else ("ff800000" if v < 0 else "7fc00000")
                return f"f64(bitcast<f32>(0x{pick}u))"
            text = repr(v)
            if "e" not in text and "." not in text and "inf" not in text:
                text += ".0"
            return f"f64({text})"
        if t in ("f32", "f16"):
            v = float(v)
            if math.isinf(v) or math.isnan(v):
                bits = {"f32": ("7f800000", "ff800000", "7fc00000"),
                        "f16": ("7c00", "fc00", "7e00")}[t]
                if t == "f16":
                    # no f16 bitcast from a scalar u32: go through f32
                    pattern = bits_f32 = ("7f800000", "ff800000", "7fc00000")
                    pick = pattern[0] if v > 0 else (pattern[1] if v < 0 else pattern[2])
                    return f"f16(bitcast<f32>(0x{pick}u))"
                pick = bits[0] if v > 0 else (bits[1] if v < 0 else bits[2])
                return f"bitcast<f32>(0x{pick}u)"
            text = repr(v)
            if "e" in text or "E" in text:
                mant, exp_ = text.lower().split("e")
                if "." not in mant:
                    mant += ".0"
                text = f"{mant}e{exp_}"
            elif "." not in text:
                text += ".0"
            return text + ("h" if t == "f16" else "f")
        v = int(v)
        if t == "u32":
            if v < 0 or v > 0xFFFFFFFF:
                raise ZynMLDeviceError(f"integer constant {v} does not fit u32")
            return f"{v}u"
        if v < -2**31 or v >= 2**31:
            raise ZynMLDeviceError(f"integer constant {v} does not fit WGSL's i32")
        if v == -2**31:
            return "i32(-2147483647 - 1)"
        return f"{v}i" if v >= 0 else f"({v}i)"

    def identity(self, op: str, dtype: str) -> str:
        v = _IDENTITY[op]
        t = self.cty(dtype)
        if v in ("+inf", "-inf"):
            if t in ("f32", "f16", "f64"):
                return self.const(float(v), dtype)
            if t == "i32":
                return "i32(2147483647)" if v == "+inf" else "i32(-2147483647 - 1)"
            return "4294967295u" if v == "+inf" else "0u"
        if v in ("true", "false"):
            return v if t == "bool" else (self.one(dtype) if v == "true" else self.zero(dtype))
        return self.const(int(v), dtype)

    # ------------------------------------------------------------------------ buffers

    def dims_of(self, buf: str) -> list:
        b = self.bufs[buf]
        return [f"P.{self.buf_ident[buf]}_d{ax}" for ax in range(len(b.shape))]

    def flat(self, positions: list, extents: list) -> str:
        if not positions:
            return "0"
        text = positions[0]
        for p, ext in zip(positions[1:], extents[1:]):
            text = f"({text}) * {ext} + {p}"
        return text

    def buf_load(self, buf: str, flat: str) -> str:
        b = self.bufs[buf]
        name = self.buf_ident[buf]
        st = storage_type(b.dtype, self.o.f16, self.o.f64)
        if buf in self.atomic_buffers:
            raw = f"atomicLoad(&{name}[{flat}])"
            if _is_float(b.dtype):
                raw = f"bitcast<f32>({raw})"
            return self.convert(raw, "f32" if st == "f32" else ("u32" if st == "u32" else "i32"), b.dtype)
        raw = f"{name}[{flat}]"
        if b.dtype == "bool":
            return f"({raw} != 0u)"
        src = {"f32": "f32", "f16": "f16", "i32": "i32", "u32": "u32", "f64": "f64"}[st]
        return self.convert(raw, src, b.dtype)

    def buf_store(self, buf: str, flat: str, value: str, vdtype: str) -> str:
        b = self.bufs[buf]
        name = self.buf_ident[buf]
        st = storage_type(b.dtype, self.o.f16, self.o.f64)
        if b.dtype == "bool":
            v = self.convert(value, vdtype, "bool")
            return f"{name}[{flat}] = select(0u, 1u, {v});"
        v = self.convert(value, vdtype, b.dtype)
        if self.cty(b.dtype) != st:
            v = f"{st}({v})"
        if buf in self.atomic_buffers:
            if _is_float(b.dtype):
                v = f"bitcast<u32>({v})"
            return f"atomicStore(&{name}[{flat}], {v});"
        return f"{name}[{flat}] = {v};"

    # ------------------------------------------------------------------ tile structure

    def rank(self, e) -> int:
        if isinstance(e, cir.Const):
            return 0
        if isinstance(e, cir.Var):
            s = self.lookup(e.name)
            if s is None:
                return 0
            if s.kind == "alias":
                return self.rank(s.expr)
            return s.rank
        if isinstance(e, cir.Load):
            if e.buffer in self.bufs:
                r = len(self.bufs[e.buffer].shape)
            else:
                s = self.lookup(e.buffer) or self.shared_allocs.get(e.buffer)
                if s is None:
                    raise ZynMLDeviceError(f"unknown buffer {e.buffer}")
                r = s.rank
            spans = sum(1 for i in e.index if isinstance(i, cir.Span))
            return spans + r - len(e.index)
        if isinstance(e, cir.Bin):
            ra, rb = self.rank(e.left), self.rank(e.right)
            if e.op == "@":
                if ra == 2 and rb == 2:
                    return 2
                if ra + rb == 3:
                    return 1
                return 0
            return max(ra, rb)
        if isinstance(e, (cir.Unary, cir.Cast)):
            return self.rank(e.operand)
        if isinstance(e, cir.Select):
            return max(self.rank(e.cond), self.rank(e.if_true), self.rank(e.if_false))
        if isinstance(e, cir.Call):
            if e.fn == "transpose":
                return self.rank(e.args[0])
            if e.fn in ("row_max", "row_sum"):
                return self.rank(e.args[0])     # keeps the reduced axis with extent 1
            if e.fn in ("zeros", "ones"):
                return len(e.args)
            if e.fn == "sum":
                return 0
            return max((self.rank(a) for a in e.args), default=0)
        if isinstance(e, cir.Dot):
            return 0
        if isinstance(e, cir.Reduce):
            return 0 if e.axis is None else max(0, self.rank(e.input) - 1)
        raise ZynMLDeviceError(f"cannot render {type(e).__name__} in WGSL")

    def _load_parts(self, e: cir.Load):
        """(positions template, extents) of a Load: positions holds for each buffer axis
        either ('at', wgsl) or ('span', start_wgsl) / ('all',)."""
        if e.buffer in self.bufs:
            dims = self.dims_of(e.buffer)
        else:
            s = self.lookup(e.buffer) or self.shared_allocs.get(e.buffer)
            dims = list(s.extents)
        parts, extents = [], []
        for ax, d in enumerate(dims):
            if ax < len(e.index):
                it = e.index[ax]
                if isinstance(it, cir.Span):
                    start = self.scalar_int(it.start)
                    stop = self.scalar_int(it.stop)
                    st = self.hoist_let(f"clamp({start}, 0i, {d})", "i32", "lo")
                    ext = self.hoist_let(f"max(0i, min({stop}, {d}) - {st})", "i32", "n")
                    parts.append(("span", st))
                    extents.append(ext)
                else:
                    parts.append(("at", self.guard_index(e.buffer, ax, it, self.scalar_int(it), d)))
            else:
                parts.append(("all",))
                extents.append(d)
        return parts, dims, extents

    def guard_index(self, buffer: str, ax: int, ix, text: str, dim: str) -> str:
        """`text` (index entry ax of `buffer`), checked when the bounds analysis cannot
        prove it in range: a load reads element 0 instead, a store (`_store_conds`) is
        skipped, and the error flag names the ZynML line."""
        if buffer in self.bufs:
            shape = self.bufs[buffer].shape
        else:
            shape = self.shared_shapes.get(buffer)
        if shape is None or ax >= len(shape) or self.facts.index_in_range(ix, shape[ax]):
            return text
        ext = shape[ax] if isinstance(shape[ax], (int, str)) else cir.format_expr(shape[ax])
        site = self.errs.add(errflag.INDEX, self.cur_line, buffer, ext)
        self.helpers.add("guards")
        if self._store_conds is not None:
            self._store_conds.append(f"z_in({text}, {dim}, {site}i)")
            return text
        return f"z_chk({text}, {dim}, {site}i)"

    def scalar_int(self, e) -> str:
        text, dt = self.ex(e, [])
        return self.convert(text, dt, "i32")

    def hoist_let(self, text: str, ty: str, hint: str) -> str:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*|\(?-?\d+i\)?", text):
            return text
        name = self.fresh(hint)
        self.w.line(f"let {name}: {ty} = {text};")
        return name

    def shape(self, e) -> list:
        """WGSL expressions of the runtime extents of a tile expression (emits lets)."""
        if isinstance(e, cir.Const):
            return []
        if isinstance(e, cir.Var):
            s = self.lookup(e.name)
            if s is None:
                return []
            if s.kind == "alias":
                return self.shape(s.expr)
            return list(s.extents)
        if isinstance(e, cir.Load):
            parts, dims, extents = self._load_parts(e)
            return extents
        if isinstance(e, cir.Bin):
            a, b = self.shape(e.left), self.shape(e.right)
            if e.op == "@":
                if len(a) == 2 and len(b) == 2:
                    return [a[0], b[1]]
                if len(a) == 1 and len(b) == 2:
                    return [b[1]]
                if len(a) == 2 and len(b) == 1:
                    return [a[0]]
                return []
            return self._broadcast(a, b)
        if isinstance(e, (cir.Unary, cir.Cast)):
            return self.shape(e.operand)
        if isinstance(e, cir.Select):
            return self._broadcast(self._broadcast(self.shape(e.cond), self.shape(e.if_true)),
                                   self.shape(e.if_false))
        if isinstance(e, cir.Call):
            if e.fn == "transpose":
                return list(reversed(self.shape(e.args[0])))
            if e.fn in ("row_max", "row_sum"):
                return self.shape(e.args[0])[:-1] + ["1i"]
            if e.fn in ("zeros", "ones"):
                return [self.hoist_let(self.scalar_int(a), "i32", "n") for a in e.args]
            if e.fn == "sum":
                return []
            out: list = []
            for a in e.args:
                out = self._broadcast(out, self.shape(a))
            return out
        if isinstance(e, cir.Reduce):
            if e.axis is None:
                return []
            s = self.shape(e.input)
            return s[:e.axis] + s[e.axis + 1:]
        return []

    def _broadcast(self, a: list, b: list) -> list:
        # Row statistics (one value per row of a 2-D tile) scale rows: a vector of the
        # tile's first extent broadcasts as a column; otherwise numpy's right alignment.
        if len(a) < len(b):
            a, b = b, a
        out = list(a)
        off = len(a) - len(b)
        for i, d in enumerate(b):
            x = out[off + i]
            if x != d:
                out[off + i] = f"max({x}, {d})"
        return out

    def _column_vector(self, big, small) -> bool:
        """A rank-1 operand beside a rank-2 one is a row statistic (one entry per row, so it
        broadcasts down the columns) when the CIR types say its length is the row count and
        not the column count; otherwise numpy's right alignment applies."""
        ts, tb = getattr(small, "ty", None), getattr(big, "ty", None)
        if ts is None or tb is None or len(ts.shape) != 1 or len(tb.shape) != 2:
            return False
        return ts.shape[0] == tb.shape[0] and ts.shape[0] != tb.shape[1]

    def _sub_index(self, parent, child, idx: list) -> list:
        """numpy broadcasting: the child's axes align right; axes of extent 1 read index 0."""
        rc = self.rank(child)
        if rc == 0:
            return []
        sub = list(idx[len(idx) - rc:])
        ty = getattr(child, "ty", None)
        if ty is not None and len(ty.shape) == rc:
            for k, d in enumerate(ty.shape):
                if isinstance(d, int) and d == 1:
                    sub[k] = "0i"
        return sub

    # ------------------------------------------------------------------- expressions

    def ex(self, e, idx: list):
        """(WGSL text, CIR dtype) of element `idx` of e (idx empty for scalars). May emit
        statements (loops for dot products, matmuls and reductions) before the caller's."""
        if isinstance(e, cir.Const):
            return self.const(e.value, e.ty.dtype), e.ty.dtype
        if isinstance(e, cir.Var):
            s = self.lookup(e.name)
            if s is None:
                if e.name in self.k.dims or e.name in {x.name for x in self.k.scalars}:
                    f = ident(e.name)
                    p = self.params[f]
                    src = {"i32": "i32", "u32": "u32", "f32": "f32"}[p.wgsl_type]
                    if any(x.name == e.name and x.dtype == "bool" for x in self.k.scalars):
                        return f"(P.{f} != 0u)", "bool"
                    return self.convert(f"P.{f}", src, e.ty.dtype), e.ty.dtype
                raise ZynMLDeviceError(f"unknown name {e.name} in kernel {self.k.name}")
            if s.kind == "alias":
                return self.ex(s.expr, idx)
            if s.kind == "tile":
                if s.rank == 0:
                    return f"{s.store}[{s.base}]", s.dtype
                sub = idx[len(idx) - s.rank:]
                return self.tile_elem(s, sub), s.dtype
            return s.wgsl, s.dtype
        if isinstance(e, cir.Load):
            return self.load(e, idx)
        if isinstance(e, cir.Bin):
            return self.binary(e, idx)
        if isinstance(e, cir.Unary):
            t, dt = self.ex(e.operand, self._sub_index(e, e.operand, idx))
            if e.op == "neg":
                return f"-({self.convert(t, dt, e.ty.dtype)})", e.ty.dtype
            return f"!({self.convert(t, dt, 'bool')})", "bool"
        if isinstance(e, cir.Cast):
            t, dt = self.ex(e.operand, self._sub_index(e, e.operand, idx))
            return self.convert(t, dt, e.ty.dtype), e.ty.dtype
        if isinstance(e, cir.Select):
            c, cd = self.ex(e.cond, self._sub_index(e, e.cond, idx))
            a, ad = self.ex(e.if_true, self._sub_index(e, e.if_true, idx))
            b, bd = self.ex(e.if_false, self._sub_index(e, e.if_false, idx))
            dt = e.ty.dtype
            return (f"select({self.convert(b, bd, dt)}, {self.convert(a, ad, dt)}, "
                    f"{self.convert(c, cd, 'bool')})"), dt
        if isinstance(e, cir.Call):
            return self.call(e, idx)
        if isinstance(e, cir.Dot):
            n = self.shape(e.a)
            if len(n) != 1:
                raise ZynMLDeviceError("dot() of tiles that are not vectors")
            dt = e.ty.dtype
            acc = self.fresh("dot")
            self.w.line(f"var {acc}: {self.cty(dt)} = {self.zero(dt)};")
            t = self.fresh("d")
            self.w.open(f"for (var {t}: i32 = 0i; {t} < {n[0]}; {t} = {t} + 1i)")
            a, ad = self.ex(e.a, [t])
            b, bd = self.ex(e.b, [t])
            self.w.line(f"{acc} = {acc} + {self.convert(a, ad, dt)} * {self.convert(b, bd, dt)};")
            self.w.close()
            return acc, dt
        if isinstance(e, cir.Reduce):
            return self.reduce_expr(e.op, e.input, e.axis, e.ty.dtype, idx)
        raise ZynMLDeviceError(f"cannot render {type(e).__name__} in WGSL")

    def tile_elem(self, s: _Sym, sub: list, exact: bool = False) -> str:
        if not exact:
            # an axis of runtime extent 1 broadcasts (min(i, n - 1) is then 0)
            sub = [x if x == "0i" else f"min({x}, {n} - 1i)" for x, n in zip(sub, s.extents)]
        return f"{s.store}[{s.base} + {self.flat(sub, s.extents)}]"

    def load(self, e: cir.Load, idx: list):
        if e.buffer in self.bufs:
            dtype = self.bufs[e.buffer].dtype
        else:
            s = self.lookup(e.buffer) or self.shared_allocs.get(e.buffer)
            dtype = s.dtype
        parts, dims, _ = self._load_parts(e)
        positions = []
        k = 0
        rank = sum(1 for p in parts if p[0] != "at")
        sub = idx[len(idx) - rank:] if rank else []
        for p in parts:
            if p[0] == "at":
                positions.append(p[1])
            elif p[0] == "span":
                positions.append(f"{p[1]} + {sub[k]}")
                k += 1
            else:
                positions.append(sub[k])
                k += 1
        flat = self.flat(positions, dims)
        if e.buffer in self.bufs:
            return self.buf_load(e.buffer, flat), dtype
        s = self.lookup(e.buffer) or self.shared_allocs.get(e.buffer)
        return f"{s.store}[{s.base} + {flat}]", dtype

    def binary(self, e: cir.Bin, idx: list):
        op, dt = e.op, e.ty.dtype
        if op == "@":
            ra, rb = self.rank(e.left), self.rank(e.right)
            sa = self.shape(e.left)
            kext = sa[-1]
            t = self.fresh("k")
            acc = self.fresh("mm")
            self.w.line(f"var {acc}: {self.cty(dt)} = {self.zero(dt)};")
            self.w.open(f"for (var {t}: i32 = 0i; {t} < {kext}; {t} = {t} + 1i)")
            ia = ([idx[0], t] if ra == 2 else [t]) if rb == 2 or ra == 2 else [t]
            if ra == 2 and rb == 1:
                ia = [idx[0], t]
            ib = ([t, idx[-1]] if rb == 2 else [t])
            a, ad = self.ex(e.left, ia)
            b, bd = self.ex(e.right, ib)
            self.w.line(f"{acc} = {acc} + {self.convert(a, ad, dt)} * {self.convert(b, bd, dt)};")
            self.w.close()
            return acc, dt
        a, ad = self.operand(e.left, self._sub_index(e, e.left, idx), e, dt)
        b, bd = self.operand(e.right, self._sub_index(e, e.right, idx), e, dt)
        if op in ("and", "or"):
            sym = "&&" if op == "and" else "||"
            return f"({self.convert(a, ad, 'bool')} {sym} {self.convert(b, bd, 'bool')})", "bool"
        if op in ("<", "<=", ">", ">=", "==", "!="):
            common = self._common(ad, bd)
            return f"({self.convert(a, ad, common)} {op} {self.convert(b, bd, common)})", "bool"
        if dt == "bool":
            dt = "i32"
        a, b = self.convert(a, ad, dt), self.convert(b, bd, dt)
        if op == "**":
            if self.cty(dt) in ("f32", "f16", "f64"):
                if isinstance(e.right, cir.Const) and e.right.value == 2:
                    return f"({a} * {a})", dt
                self.helpers.add("pow")
                return f"z_pow({a}, {b})", dt
            return f"{self.cty(dt)}(round(pow(f32({a}), f32({b}))))", dt
        if op == "%" and self.cty(dt) in ("f32", "f16", "f64"):
            self.helpers.add("fmod")
            return f"z_fmod_{self.cty(dt)}({a}, {b})", dt
        if op in ("/", "%") and self.cty(dt) in ("i32", "u32"):
            nonzero, not_m1 = self.facts.divisor_safe(e.right)
            if self.cty(dt) == "i32" and nonzero and not_m1:
                # truncating on every backend (GLSL leaves negative operands undefined)
                self.helpers.add("tdiv")
                return f"z_t{'div' if op == '/' else 'rem'}_i32({a}, {b})", dt
            if not (nonzero and (not_m1 or self.cty(dt) == "u32")):
                self.helpers.add("guards")
                t = self.cty(dt)
                if op == "/":
                    s0 = self.errs.add(errflag.DIV_ZERO, self.cur_line)
                    sov = self.errs.add(errflag.DIV_OVERFLOW, self.cur_line)
                    return f"z_idiv_{t}({a}, {b}, {s0}i, {sov}i)", dt
                s0 = self.errs.add(errflag.REM_ZERO, self.cur_line)
                return f"z_irem_{t}({a}, {b}, {s0}i)", dt
        return f"({a} {op} {b})", dt

    def operand(self, e, idx, parent, dt):
        """(text, dtype) of an operand of `parent`: a number meeting a float is written in
        that float's type (exact in f64, never an f32 literal widened)."""
        c = _const_value(e, self.facts.consts)
        if c is not None and not isinstance(c, bool):
            ft = dt
            if parent is not None and isinstance(parent, cir.Bin) and parent.op in (
                    "<", "<=", ">", ">=", "==", "!="):
                other = parent.right if e is parent.left else parent.left
                ft = other.ty.dtype
            if ft in cir.FLOAT_DTYPES and self.cty(ft) in ("f32", "f16", "f64"):
                return self.const(c, ft), ft
        return self.ex(e, idx)

    def _common(self, a: str, b: str) -> str:
        if a == b:
            return a
        if _is_float(a) or _is_float(b):
            fl = [d for d in (a, b) if _is_float(d)]
            return "f32" if "f32" in fl or "f64" in fl or len(fl) == 1 and fl[0] != "f16" else fl[0]
        if a == "bool":
            return b
        if b == "bool":
            return a
        return "i32"

    def call(self, e: cir.Call, idx: list):
        fn, dt = e.fn, e.ty.dtype
        if fn in ("zeros", "ones"):
            return (self.zero(dt) if fn == "zeros" else self.one(dt)), dt
        if fn == "transpose":
            return self.ex(e.args[0], list(reversed(idx)))
        if fn in ("row_max", "row_sum"):
            return self.reduce_expr("max" if fn == "row_max" else "+", e.args[0],
                                    self.rank(e.args[0]) - 1, dt, idx[:-1])
        if fn == "sum":
            return self.reduce_expr("+", e.args[0], None, dt, idx)
        args = []
        for a in e.args:
            t, adt = self.operand(a, self._sub_index(e, a, idx), e, dt)
            args.append(self.convert(t, adt, dt) if fn not in ("abs",) or True else t)
        ct = self.cty(dt)
        isf = ct in ("f32", "f16", "f64")
        x = args[0]
        simple = {"sin": "sin", "cos": "cos", "tan": "tan", "exp": "exp", "exp2": "exp2",
                  "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "inverseSqrt",
                  "floor": "floor", "ceil": "ceil", "round": "round", "sinh": "sinh",
                  "cosh": "cosh"}
        if fn in simple:
            if not isf:
                x = f"f32({x})"
                return self.convert(f"{simple[fn]}({x})", "f32", dt), dt
            return f"{simple[fn]}({x})", dt
        if fn == "abs":
            return f"abs({x})", dt
        if fn == "tanh":
            self.helpers.add("tanh")
            return f"z_tanh_{ct}({x})", dt
        if fn == "sigmoid":
            return f"({self.one(dt)} / ({self.one(dt)} + exp(-({x}))))", dt
        if fn == "relu":
            if isf:
                self.helpers.add("nan")
                return f"z_max_{ct}({x}, {self.zero(dt)})", dt
            return f"max({x}, {self.zero(dt)})", dt
        if fn == "silu":
            return f"({x} / ({self.one(dt)} + exp(-({x}))))", dt
        if fn == "gelu":
            self.helpers.add("erf")
            return f"z_gelu_{ct}({x})", dt
        if fn == "erf":
            self.helpers.add("erf")
            return f"z_erf_{ct}({x})", dt
        if fn == "pow":
            self.helpers.add("pow")
            if isf:
                return f"z_pow({args[0]}, {args[1]})", dt
            return f"{ct}(round(pow(f32({args[0]}), f32({args[1]}))))", dt
        if fn in ("min", "max"):
            f = fn
            if isf:                 # NaN propagates, as numpy's minimum/maximum do
                self.helpers.add("nan")
                f = f"z_{fn}_{ct}"
            text = args[0]
            for a in args[1:]:
                text = f"{f}({text}, {a})"
            return text, dt
        if fn == "clamp":
            if isf:
                self.helpers.add("nan")
                return f"z_min_{ct}(z_max_{ct}({args[0]}, {args[1]}), {args[2]})", dt
            return f"clamp({args[0]}, {args[1]}, {args[2]})", dt
        raise ZynMLDeviceError(f"function {fn}() has no WGSL rendering")

    def arg_better(self, op: str, y: str, acc: str, yi: str, acc_i: str, wtype: str) -> str:
        """(y, yi) replaces (acc, acc_i) in argmax/argmin: a better value, or an equal one
        with a smaller index; NaN is better than any number (numpy's first NaN)."""
        better = ">" if op == "argmax" else "<"
        if wtype not in ("f32", "f16", "f64"):
            return f"{y} {better} {acc} || ({y} == {acc} && {yi} < {acc_i})"
        self.helpers.add("nan")
        ny, na = f"z_isnan_{wtype}({y})", f"z_isnan_{wtype}({acc})"
        return (f"({ny} && !{na}) || (!{ny} && !{na} && {y} {better} {acc}) || "
                f"(({y} == {acc} || ({ny} && {na})) && {yi} < {acc_i})")

    def combine(self, op: str, a: str, b: str, dtype: str) -> str:
        if op == "+":
            return f"{a} + {b}"
        if op == "*":
            return f"{a} * {b}"
        if op in ("min", "max"):
            if self.cty(dtype) in ("f32", "f16", "f64"):
                self.helpers.add("nan")
                return f"z_{op}_{self.cty(dtype)}({a}, {b})"
            return f"{op}({a}, {b})"
        if op == "and":
            return f"{a} && {b}"
        if op == "or":
            return f"{a} || {b}"
        raise ZynMLDeviceError(f"reduction operator {op}")

    def reduce_expr(self, op, tile, axis, dtype, idx):
        """A reduction over a tile inside an expression: a loop in the invocation."""
        shp = self.shape(tile)
        r = len(shp)
        if op in ("argmax", "argmin"):
            raise ZynMLDeviceError(f"reduce({op}, ...) inside an expression has no WGSL rendering")
        dt = dtype if op not in ("and", "or") else "bool"
        src_dt = getattr(tile, "ty", cir.Ty(dtype)).dtype
        cdt = dt if _is_float(dt) or dt == "bool" else src_dt
        acc = self.fresh("red")
        self.w.line(f"var {acc}: {self.cty(cdt)} = {self.identity(op, cdt)};")
        axes = list(range(r)) if axis is None else [axis]
        loopv = {}
        for ax in axes:
            v = self.fresh("r")
            loopv[ax] = v
            self.w.open(f"for (var {v}: i32 = 0i; {v} < {shp[ax]}; {v} = {v} + 1i)")
        full, k = [], 0
        for ax in range(r):
            if ax in loopv:
                full.append(loopv[ax])
            else:
                full.append(idx[len(idx) - (r - 1) + k])
                k += 1
        val, vdt = self.ex(tile, full)
        val = self.convert(val, vdt, cdt)
        self.w.line(f"{acc} = {self.combine(op, acc, val, cdt)};")
        for _ in axes:
            self.w.close()
        return acc, cdt

    # -------------------------------------------------------------------- statements

    def comment_line(self, line: int):
        if not line:
            return
        src = self.k.source.splitlines() if self.k.source else []
        off = line - self.k.first_line if self.k.first_line else line - 1
        text = comment_safe(src[off].strip()) if 0 <= off < len(src) else ""
        self.cur_line = line
        self.w.line(f"// line {line}: {text}" if text else f"// line {line}")

    def stmts(self, body):
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        if isinstance(s, cir.Let):
            self.comment_line(s.line)
            self.let(s.name, s.value, s.mutable)
        elif isinstance(s, cir.Assign):
            self.comment_line(s.line)
            self.assign(s.name, s.value)
        elif isinstance(s, cir.Store):
            self.comment_line(s.line)
            self.store(s.buffer, s.index, s.value)
        elif isinstance(s, cir.Loop):
            self.comment_line(s.line)
            self.loop(s)
        elif isinstance(s, cir.If):
            self.comment_line(s.line)
            c, cd = self.ex(s.cond, [])
            self.w.open(f"if ({self.convert(c, cd, 'bool')})")
            self.push()
            with self.facts.assuming(s.cond):
                self.stmts(s.then)
            self.pop()
            if s.orelse:
                self.w.close("} else {")
                self.w.level += 1
                self.push()
                self.stmts(s.orelse)
                self.pop()
            self.w.close()
        elif isinstance(s, cir.Yield):
            self.comment_line(s.line)
            if self.reduce_ctx is None:
                raise ZynMLDeviceError("yield outside a reduce kernel")
            self.reduce_ctx(s)
        elif isinstance(s, cir.SharedAlloc):
            self.comment_line(s.line)
            self.shared_alloc(s)
        elif isinstance(s, cir.Barrier):
            self.comment_line(s.line)
            if self.coop is not None:
                self.w.line("storageBarrier();")
                self.w.line("workgroupBarrier();")
            else:
                self.w.line("// barrier(): this iteration runs in one invocation, in order")
        elif isinstance(s, cir.Atomic):
            self.comment_line(s.line)
            self.atomic(s)
        else:
            raise ZynMLDeviceError(f"cannot render {type(s).__name__} in WGSL")

    def loop(self, s: cir.Loop):
        start = self.hoist_let(self.scalar_int(s.start), "i32", "lo")
        stop = self.hoist_let(self.scalar_int(s.stop), "i32", "hi")
        step = self.scalar_int(s.step)
        v = self._unique(ident(s.var))
        neg = isinstance(s.step, cir.Const) and s.step.value < 0
        cmp = ">" if neg else "<"
        self.w.open(f"for (var {v}: i32 = {start}; {v} {cmp} {stop}; {v} = {v} + {step})")
        self.ranges[s.var] = (s.start, s.stop)
        self.push()
        self.declare(s.var, _Sym("loop", v, "i32"))
        self.stmts(s.body)
        self.pop()
        self.w.close()

    def _tile_capacity(self, e):
        """Host-side capacity (elements per axis) of a tile expression, from CIR types."""
        ty = getattr(e, "ty", None)
        dims = list(ty.shape) if ty is not None else []
        r = self.rank(e) if not (isinstance(e, cir.Var) and self.lookup(e.name) is None) else len(dims)
        if len(dims) != r or any(isinstance(d, str) and d == "?" for d in dims):
            dims = self._cap_from_expr(e)
        return dims

    def _cap_from_expr(self, e):
        if isinstance(e, cir.Load) and e.buffer in self.bufs:
            b = self.bufs[e.buffer]
            out = []
            for ax in range(len(b.shape)):
                if ax < len(e.index) and not isinstance(e.index[ax], cir.Span):
                    continue
                out.append(("buf", e.buffer, ax))
            return out
        if isinstance(e, cir.Var):
            s = self.lookup(e.name)
            if s and s.kind == "tile":
                return list(s.cap)
            if s and s.kind == "alias":
                return self._cap_from_expr(s.expr)
        raise ZynMLDeviceError(f"the size of tile `{cir.format_expr(e)}` is not known before launch")

    def host_dim(self, d, env):
        """The largest value of a tile dimension over the loop ranges it depends on."""
        if isinstance(d, tuple) and d and d[0] == "buf":
            return int(env["shapes"][d[1]][d[2]])
        if isinstance(d, str) and d == "?":
            raise KeyError("?")
        if isinstance(d, (int, str)):
            return int(host_eval(d, env))
        return int(math.ceil(host_interval(d, env, self.ranges)[1]))

    def new_tile(self, name: str, dtype: str, rank: int, cap: list, extents: list) -> _Sym:
        """A tile local in this invocation's scratch slot."""
        st = "f32" if _is_float(dtype) else ("u32" if _is_unsigned(dtype) else "i32")
        store = f"z_scratch_{st}"
        field_off = self._unique(f"z_off_{ident(name)}")

        def capacity(env, cap=tuple(cap)):
            n = 1
            for d in cap:
                try:
                    n *= max(1, self.host_dim(d, env))
                except KeyError:
                    raise ZynMLDeviceError(
                        f"the size of tile `{name}` is not known before launch") from None
            return n

        self.scratch_fields.append((st, field_off, capacity))
        self.params[field_off] = ParamField(field_off, "i32", None)   # filled in by finish()
        base = f"({self.slot_base(st)} + P.{field_off})"
        ext_names = []
        for i, x in enumerate(extents):
            en = self.fresh(f"{ident(name)}_n")
            self.w.line(f"var {en}: i32 = {x};")
            ext_names.append(en)
        sym = _Sym("tile", "", dtype, rank, ext_names, base, store)
        sym.cap = cap
        return sym

    def slot_base(self, st: str) -> str:
        f = self.scratch_slot.get(st)
        if f is None:
            f = f"z_slot_{st}"
            self.scratch_slot[st] = f
            self.params[f] = ParamField(f, "i32", None)
        return f"{self.slot_expr} * P.{f}"

    def fill_tile(self, sym: _Sym, value, extents: list):
        """Write every element of `value` into tile `sym` (of `extents`)."""
        loops = [self.fresh("e") for _ in extents]
        for v, n in zip(loops, extents):
            self.w.open(f"for (var {v}: i32 = 0i; {v} < {n}; {v} = {v} + 1i)")
        t, dt = self.ex(value, loops)
        st = sym.store.rsplit("_", 1)[1]
        self.w.line(f"{self.tile_elem(sym, loops, True)} = {st}({self.convert(t, dt, sym.dtype)});")
        for _ in loops:
            self.w.close()

    def _later_tile(self, name):
        """The first tile value assigned to `name` anywhere in the kernel, if any."""
        for n in cir.walk(self.k.body):
            if isinstance(n, cir.Assign) and n.name == name and n.value.ty.shape:
                return n.value
        return None

    def let(self, name, value, mutable):
        r = self.rank(value)
        later = self._later_tile(name) if mutable and r == 0 else None
        if later is not None:
            # a running value that starts as a scalar and later holds a tile (`var m = -inf`,
            # then `m = m_new`): a tile of extent 1 on every axis until its first assignment
            cap = self._tile_capacity(later)
            sym = self.new_tile(name, later.ty.dtype, len(cap), cap, ["1i"] * len(cap))
            self.fill_tile(sym, value, sym.extents)
            self.declare(name, sym)
            return
        if r == 0:
            t, dt = self.ex(value, [])
            dt = value.ty.dtype if value.ty.dtype != "bool" or dt == "bool" else dt
            t = self.convert(t, self.ex_dtype_hint(value, dt), dt)
            wname = self._unique(ident(name))
            kw = "var" if mutable else "let"
            self.w.line(f"{kw} {wname}: {self.cty(dt)} = {t};")
            self.declare(name, _Sym("scalar", wname, dt, mutable=mutable))
            return
        if not mutable and isinstance(value, cir.Load):
            ext = self.shape(value)
            self.declare(name, _Sym("alias", expr=value, rank=r, extents=ext, dtype=value.ty.dtype))
            return
        ext = self.shape(value)
        cap = self._tile_capacity(value)
        sym = self.new_tile(name, value.ty.dtype, r, cap, ext)
        self.fill_tile(sym, value, sym.extents)
        self.declare(name, sym)

    def ex_dtype_hint(self, value, dt):
        return dt

    def assign(self, name, value):
        s = self.lookup(name)
        if s is None:
            raise ZynMLDeviceError(f"assignment to unknown name {name}")
        if s.kind == "scalar":
            if self.rank(value) != 0:
                raise ZynMLDeviceError(f"`{name}` is a scalar but is assigned a tile")
            t, dt = self.ex(value, [])
            self.w.line(f"{s.wgsl} = {self.convert(t, dt, s.dtype)};")
            return
        if s.kind != "tile":
            raise ZynMLDeviceError(f"`{name}` cannot be assigned")
        ext = self.shape(value)
        if len(ext) != s.rank:
            # a scalar-initialised running value that becomes a tile (e.g. `var m = -inf`
            # later holding one value per row): broadcast it
            ext = ext + [] if len(ext) == s.rank else ext
        reads_self = any(isinstance(n, cir.Var) and n.name == name for n in cir.walk(value))
        if reads_self:
            tmp = self.new_tile(name + "_next", s.dtype, s.rank, s.cap, ext)
            self.fill_tile(tmp, value, tmp.extents)
            for mine, n in zip(s.extents, tmp.extents):
                self.w.line(f"{mine} = {n};")
            loops = [self.fresh("e") for _ in s.extents]
            for v, n in zip(loops, s.extents):
                self.w.open(f"for (var {v}: i32 = 0i; {v} < {n}; {v} = {v} + 1i)")
            self.w.line(f"{self.tile_elem(s, loops, True)} = {self.tile_elem(tmp, loops, True)};")
            for _ in loops:
                self.w.close()
        else:
            for mine, n in zip(s.extents, ext):
                self.w.line(f"{mine} = {n};")
            self.fill_tile(s, value, s.extents)

    def store(self, buffer, index, value):
        if buffer not in self.bufs:
            s = self.lookup(buffer) or self.shared_allocs.get(buffer)
            if s is None:
                raise ZynMLDeviceError(f"store to unknown buffer {buffer}")
            target = cir.Load(buffer, tuple(index), cir.Ty(s.dtype))
        else:
            target = cir.Load(buffer, tuple(index), cir.Ty(self.bufs[buffer].dtype))
        self._store_conds = []
        try:
            parts, dims, extents = self._load_parts(target)
        finally:
            conds, self._store_conds = self._store_conds, None
        if conds:
            self.w.open(f"if ({' && '.join(conds)})")
        r = len(extents)
        loops = [self.fresh("e") for _ in range(r)]
        for v, n in zip(loops, extents):
            self.w.open(f"for (var {v}: i32 = 0i; {v} < {n}; {v} = {v} + 1i)")
        positions, k = [], 0
        for p in parts:
            if p[0] == "at":
                positions.append(p[1])
            elif p[0] == "span":
                positions.append(f"{p[1]} + {loops[k]}")
                k += 1
            else:
                positions.append(loops[k])
                k += 1
        rv = self.rank(value)
        t, dt = self.ex(value, loops[r - rv:] if rv else [])
        flat = self.flat(positions, dims)
        if buffer in self.bufs:
            self.w.line(self.buf_store(buffer, flat, t, dt))
        else:
            s = self.lookup(buffer) or self.shared_allocs.get(buffer)
            st = s.store.rsplit("_", 1)[1]
            self.w.line(f"{s.store}[{s.base} + {flat}] = {st}({self.convert(t, dt, s.dtype)});")
        for _ in loops:
            self.w.close()
        if conds:
            self.w.close()

    def shared_alloc(self, s: cir.SharedAlloc):
        ext = []
        for d in s.shape:
            if isinstance(d, cir.Expr):
                ext.append(self.hoist_let(self.scalar_int(d), "i32", "n"))
            elif isinstance(d, int):
                ext.append(f"{d}i")
            else:
                ext.append(f"P.{ident(d)}")
        sym = self.new_tile(s.name, s.dtype, len(s.shape), list(s.shape), ext)
        self.declare(s.name, sym)
        self.shared_allocs[s.name] = sym
        self.shared_shapes[s.name] = tuple(s.shape)

    def atomic(self, s: cir.Atomic):
        buf = s.buffer
        if buf not in self.bufs:
            raise ZynMLDeviceError(f"atomic on {buf}: only buffers support atomics")
        b = self.bufs[buf]
        parts, dims, extents = self._load_parts(cir.Load(buf, tuple(s.index), cir.Ty(b.dtype)))
        if extents:
            raise ZynMLDeviceError("atomic update of a slice")
        flat = self.flat([p[1] for p in parts], dims)
        t, dt = self.ex(s.value, [])
        name = self.buf_ident[buf]
        ct = self.cty(b.dtype)
        v = self.convert(t, dt, b.dtype)
        if ct in ("i32", "u32"):
            fn = {"+": "atomicAdd", "min": "atomicMin", "max": "atomicMax"}[s.op]
            self.w.line(f"{fn}(&{name}[{flat}], {v});")
            return
        if ct != "f32":
            raise ZynMLDeviceError(f"atomic {s.op}= on {b.dtype} has no WGSL rendering")
        # float atomics through compare-exchange on the bits
        old = self.fresh("old")
        val = self.fresh("val")
        self.w.line(f"let {val}: f32 = {v};")
        self.w.line(f"var {old}: u32 = atomicLoad(&{name}[{flat}]);")
        self.w.open("loop")
        new = self.combine(s.op, f"bitcast<f32>({old})", val, "f32")
        res = self.fresh("cas")
        self.w.line(f"let {res} = atomicCompareExchangeWeak(&{name}[{flat}], {old}, bitcast<u32>({new}));")
        self.w.line(f"if ({res}.exchanged) {{ break; }}")
        self.w.line(f"{old} = {res}.old_value;")
        self.w.close()

    # ------------------------------------------------------------------ loop chains

    def chain(self, body, parallel_only=True) -> list:
        """The leading perfectly nested loops whose bounds are known before launch."""
        out = []
        names: set = set()
        while len(body) == 1 and isinstance(body[0], cir.Loop):
            lp = body[0]
            if parallel_only and not lp.parallel:
                break
            fv = _free_vars(lp.start) | _free_vars(lp.stop) | _free_vars(lp.step)
            known = set(self.k.dims) | {s.name for s in self.k.scalars}
            if not fv <= known or fv & names:
                break
            if not isinstance(lp.step, cir.Const):
                break
            out.append(lp)
            names.add(lp.var)
            body = lp.body
        return out

    def chain_params(self, loops) -> list:
        """Params of the trip counts of `loops`; returns their WGSL names."""
        names = []
        for n, lp in enumerate(loops):
            def count(env, lp=lp):
                return trip_count(int(host_eval(lp.start, env)), int(host_eval(lp.stop, env)),
                                  int(host_eval(lp.step, env)))
            f = self._unique(f"z_n_{ident(lp.var)}")
            self.params[f] = ParamField(f, "i32", count)
            names.append(f"P.{f}")
        return names

    def bind_chain(self, loops, counts, linear: str, hint: str = "r") -> list:
        """Emit lets for each loop variable of `loops` from the linear index `linear`
        (last loop fastest); returns the WGSL names of the iteration numbers."""
        its = []
        rem = self.fresh(hint)
        self.w.line(f"var {rem}: i32 = {linear};")
        decl = []
        for lp, n in reversed(list(zip(loops, counts))):
            it = self.fresh(f"{ident(lp.var)}_it")
            self.w.line(f"let {it}: i32 = {rem} % {n};")
            self.w.line(f"{rem} = {rem} / {n};")
            decl.append((lp, it))
            its.insert(0, it)
        for lp, it in reversed(decl):
            v = self._unique(ident(lp.var))
            start = self.scalar_int(lp.start)
            step = self.scalar_int(lp.step)
            self.comment_line(lp.line)
            self.w.line(f"let {v}: i32 = {start} + {it} * {step};")
            self.declare(lp.var, _Sym("loop", v, "i32"))
            self.ranges[lp.var] = (lp.start, lp.stop)
        return its

    def product(self, terms: list) -> str:
        return " * ".join(terms) if terms else "1i"

    # -------------------------------------------------------------- module assembly

    ENTRY_ARGS = ("@builtin(workgroup_id) z_wg: vec3<u32>, "
                  "@builtin(num_workgroups) z_nwg: vec3<u32>, "
                  "@builtin(local_invocation_id) z_lid: vec3<u32>")
    WID = "i32(z_wg.x + z_wg.y * z_nwg.x + z_wg.z * z_nwg.x * z_nwg.y)"

    def header_comment(self, schedule: str) -> list:
        kt = self.k.kernel_type
        params = ", ".join(f"{a}={b}" for a, b in kt.params)
        lines = [f"// {self.k.name}: @kernel {kt.kind}{'(' + params + ')' if params else ''}"
                 f" -- WGSL schedule `{schedule}`"]
        if self.k.first_line:
            lines[0] += f", ZynML line {self.k.first_line}"
        for n in self.notes:
            lines.append(f"// note: {n}")
        return lines

    def finish(self, schedule: str, entries_text: str, passes: list, wg_size: tuple) -> Program:
        # scratch offsets: cumulative capacities per storage type
        per_type: dict = {}
        for st, fname, cap in self.scratch_fields:
            per_type.setdefault(st, []).append((fname, cap))
        for st, items in per_type.items():
            for i, (fname, cap) in enumerate(items):
                def off(env, prior=tuple(c for _, c in items[:i])):
                    return sum(c(env) for c in prior)
                self.params[fname] = ParamField(fname, "i32", off)
            self.params[f"z_slot_{st}"] = ParamField(
                f"z_slot_{st}", "i32", (lambda env, caps=tuple(c for _, c in items): sum(c(env) for c in caps)))
        bindings = []
        n = 0
        for b in self.k.inputs:
            st = storage_type(b.dtype, self.o.f16, self.o.f64)
            bindings.append(ProgramBinding(n, self.buf_ident[b.name], b.name, "read", st, b.dtype))
            n += 1
        ob = self.k.output
        bindings.append(ProgramBinding(n, self.buf_ident[ob.name], ob.name, "read_write",
                                       storage_type(ob.dtype, self.o.f16, self.o.f64), ob.dtype))
        n += 1
        for st in sorted(self.scratch_slot):
            bindings.append(ProgramBinding(n, f"z_scratch_{st}", f"@scratch_{st}", "read_write", st))
            n += 1
        for extra in getattr(self, "extra_bindings", []):
            bindings.append(ProgramBinding(n, extra[0], extra[1], "read_write", extra[2]))
            n += 1
        if "guards" in self.helpers:
            self.atomic_buffers.add("@error")
            bindings.append(ProgramBinding(n, "z_err", "@error", "read_write", "i32"))
            n += 1
        storage_count = sum(1 for b in bindings if b.access != "uniform")
        if storage_count > self.o.max_storage_buffers:
            raise ZynMLDeviceError(
                f"kernel {self.k.name} needs {storage_count} storage buffers; this adapter "
                f"allows {self.o.max_storage_buffers} per shader stage")
        bindings.append(ProgramBinding(n, "P", "@params", "uniform", ""))
        scratch = {}
        for st, items in per_type.items():
            scratch[st] = (lambda env, caps=tuple(c for _, c in items): sum(c(env) for c in caps))
        out = []
        enables = []
        if self.uses_f16 or any(b.storage == "f16" for b in bindings):
            enables.append("enable f16;")
        if getattr(self, "uses_subgroups", False) and self.o.subgroups_directive:
            enables.append("enable subgroups;")
        if enables:
            out += enables + [""]
        out += self.header_comment(schedule)
        out.append("")
        out.append("struct Params {")
        fields = list(self.params.values())
        for f in fields:
            out.append(f"    {f.name}: {f.wgsl_type},")
        if not fields:
            out.append("    z_unused: i32,")
        out.append("}")
        out.append("")
        for b in bindings:
            if b.access == "uniform":
                out.append(f"@group(0) @binding({b.binding}) var<uniform> P: Params;")
                continue
            elem = b.storage
            if b.buffer in self.atomic_buffers:
                elem = "atomic<u32>" if b.storage == "f32" else f"atomic<{b.storage}>"
            acc = "read" if b.access == "read" else "read_write"
            note = f"  // {b.buffer}: {b.dtype}" if b.dtype and not b.buffer.startswith("@") else ""
            out.append(f"@group(0) @binding({b.binding}) var<storage, {acc}> {b.name}: array<{elem}>;{note}")
        if self.wg_decls:
            out.append("")
            out += self.wg_decls
        helpers = self.helper_text()
        if helpers:
            out.append("")
            out += helpers
        out.append("")
        out.append(entries_text)
        if not fields:
            self.params["z_unused"] = ParamField("z_unused", "i32", lambda env: 0)
        if self.wg_bytes > self.o.max_workgroup_storage:
            raise ZynMLDeviceError(
                f"kernel {self.k.name} needs {self.wg_bytes} bytes of workgroup memory; this "
                f"adapter offers {self.o.max_workgroup_storage}")
        return Program(self.k.name, schedule, "\n".join(out).rstrip() + "\n", bindings, passes,
                       list(self.params.values()), scratch, self.wg_bytes, wg_size,
                       list(self.notes), self.uses_f16, self.errs.as_tuple())

    def helper_text(self) -> list:
        out = []
        types = ["f32"] + (["f16"] if self.uses_f16 else []) + \
            (["f64"] if getattr(self, "uses_f64", False) else [])
        if "tanh" in self.helpers:
            for t in types:
                out += [f"fn z_tanh_{t}(x: {t}) -> {t} {{",
                        f"    // tanh saturates to +-1 well before |x| = 15; clamping keeps exp() finite",
                        f"    return tanh(clamp(x, {t}(-15.0), {t}(15.0)));", "}"]
        if "erf" in self.helpers:
            for t in types:
                out += [f"fn z_erf_{t}(x0: {t}) -> {t} {{",
                        "    // Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7",
                        "    let x = f32(x0);",
                        "    let a = abs(x);",
                        "    let t = 1.0 / (1.0 + 0.3275911 * a);",
                        "    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t"
                        " - 0.284496736) * t + 0.254829592) * t * exp(-a * a);",
                        f"    return {t}(sign(x) * y);", "}",
                        f"fn z_gelu_{t}(x: {t}) -> {t} {{",
                        f"    return {t}(0.5) * x * ({t}(1.0) + z_erf_{t}(x * {t}(0.7071067811865476)));", "}"]
        if "pow" in self.helpers:
            out += ["fn z_pow(a: f32, b: f32) -> f32 {",
                    "    // numpy's power: negative bases with whole exponents are defined",
                    "    if (a < 0.0 && b == floor(b)) {",
                    "        let r = pow(-a, b);",
                    "        return select(r, -r, (i32(b) & 1) == 1);",
                    "    }",
                    "    return pow(a, b);", "}"]
        if "nan" in self.helpers:
            for t in types:
                bits, mask, inf = ("u32", "0x7fffffffu", "0x7f800000u")
                test = (f"(bitcast<u32>(x) & {mask}) > {inf}" if t == "f32" else
                        "x != x" if t == "f64" else
                        f"(bitcast<u32>(f32(x)) & {mask}) > {inf}")
                out += [f"fn z_isnan_{t}(x: {t}) -> bool {{ return {test}; }}",
                        "// max and min propagate NaN, as numpy's maximum and minimum do",
                        f"fn z_max_{t}(a: {t}, b: {t}) -> {t} {{",
                        f"    if (z_isnan_{t}(a) || z_isnan_{t}(b)) {{ return a + b; }} return max(a, b); }}",
                        f"fn z_min_{t}(a: {t}, b: {t}) -> {t} {{",
                        f"    if (z_isnan_{t}(a) || z_isnan_{t}(b)) {{ return a + b; }} return min(a, b); }}"]
        if "guards" in self.helpers or "tdiv" in self.helpers:
            out += ["// integer division and remainder truncate, whatever the backend does with signs",
                    "fn z_tdiv_i32(a: i32, b: i32) -> i32 {",
                    "    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));",
                    "    return select(q, -q, (a < 0i) != (b < 0i)); }",
                    "fn z_trem_i32(a: i32, b: i32) -> i32 {",
                    "    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));",
                    "    return select(r, -r, a < 0i); }"]
        if "guards" in self.helpers:
            out += ["// the error flag (zynbook/compiler/errflag.py): the first failing site and its value",
                    "fn z_fail(site: i32, v: i32) {",
                    "    loop {",
                    "        let r = atomicCompareExchangeWeak(&z_err[0], 0i, site);",
                    "        if (r.exchanged) { atomicStore(&z_err[1], v); break; }",
                    "        if (r.old_value != 0i) { break; }",
                    "    }",
                    "}",
                    "fn z_chk(i: i32, n: i32, site: i32) -> i32 {",
                    "    if (i < 0i || i >= n) { z_fail(site, i); return 0i; } return i; }",
                    "fn z_in(i: i32, n: i32, site: i32) -> bool {",
                    "    if (i < 0i || i >= n) { z_fail(site, i); return false; } return true; }",
                    "fn z_idiv_i32(a: i32, b: i32, s0: i32, sov: i32) -> i32 {",
                    "    if (b == 0i) { z_fail(s0, a); return 0i; }",
                    "    if (b == -1i && a == i32(-2147483647 - 1)) { z_fail(sov, a); return 0i; }",
                    "    return z_tdiv_i32(a, b); }",
                    "fn z_irem_i32(a: i32, b: i32, s0: i32) -> i32 {",
                    "    if (b == 0i) { z_fail(s0, a); return 0i; } if (b == -1i) { return 0i; }",
                    "    return z_trem_i32(a, b); }",
                    "fn z_idiv_u32(a: u32, b: u32, s0: i32, sov: i32) -> u32 {",
                    "    if (b == 0u) { z_fail(s0, bitcast<i32>(a)); return 0u; } return a / b; }",
                    "fn z_irem_u32(a: u32, b: u32, s0: i32) -> u32 {",
                    "    if (b == 0u) { z_fail(s0, bitcast<i32>(a)); return 0u; } return a % b; }"]
        if "fmod" in self.helpers:
            for t in types:
                out += [f"fn z_fmod_{t}(a: {t}, b: {t}) -> {t} {{",
                        "    // numpy's remainder: the result takes the sign of the divisor",
                        "    return a - floor(a / b) * b;", "}"]
        return out

    def entry_open(self, name: str, wg: tuple):
        sz = ", ".join(str(x) for x in wg)
        self.w.line(f"@compute @workgroup_size({sz})")
        args = self.ENTRY_ARGS
        if self.o.subgroups:
            args += (", @builtin(subgroup_invocation_id) z_sg_lid: u32, "
                     "@builtin(subgroup_size) z_sg_size: u32")
        self.w.open(f"fn {name}({args})")

    # --------------------------------------------------------------------- generic

    def render_generic(self) -> Program:
        WG = self.o.workgroup_size
        loops = self.chain(self.k.body)
        counts = self.chain_params(loops)
        total_field = "z_total"
        self.params[total_field] = ParamField(
            total_field, "i32", lambda env, c=[self.params[x[2:]] for x in counts]:
            int(math.prod(p.value(env) for p in c)))
        name = ident(self.k.name)
        self.entry_open(name, (WG, 1, 1))
        self.w.line(f"let z_slot: i32 = {self.WID} * {WG}i + i32(z_lid.x);")
        self.w.line(f"if (z_slot >= P.{total_field}) {{ return; }}")
        if loops:
            self.w.line("// one invocation per iteration of the parallel loops "
                        + ", ".join(lp.var for lp in loops))
            self.bind_chain(loops, counts, "z_slot")
            body = loops[-1].body
        else:
            self.w.line("// no parallel loop: one invocation runs the whole block")
            body = self.k.body
        self.stmts(body)
        self.w.close()
        passes = [ProgramPass(name, lambda env: -(-int(self.params[total_field].value(env)) // WG)
                              if self.params[total_field].value(env) > 0 else 0, name)]
        return self.finish("generic", self.w.text(), passes, (WG, 1, 1))

    # ---------------------------------------------------------------------- reduce

    def workgroup_array(self, name: str, wgsl_type: str, n: int):
        size = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "bool": 4, "vec4<f32>": 16, "f64": 8}[wgsl_type]
        t = "u32" if wgsl_type == "bool" else wgsl_type
        self.wg_decls.append(f"var<workgroup> {name}: array<{t}, {n}>;")
        self.wg_bytes += size * n

    def subgroup_tree(self, op: str, arr: str, n: int, dtype: str):
        """arr[0..n) (one entry per invocation) combined into arr[0] with subgroup
        operations: each round a subgroup combines its values in registers and its first
        invocation writes the partial; rounds repeat over the partials until one is left
        (two barriers a round, against two per halving in the tree). Subgroups are taken to
        be consecutive local invocation ids, as on every Vulkan, Metal and D3D12 driver for a
        1-D workgroup."""
        fn = {"+": "subgroupAdd", "min": "subgroupMin", "max": "subgroupMax"}[op]
        ident_ = self.identity(op, dtype)
        self.uses_subgroups = True
        w = self.w
        w.line("workgroupBarrier();")
        w.open("")
        w.line(f"var z_sv = select({ident_}, {arr}[min(z_lid.x, {n - 1}u)], z_lid.x < {n}u);")
        w.line(f"var z_cnt: u32 = {n}u;")
        w.open("loop")
        if op in ("min", "max") and self.cty(dtype) == "f32":
            # subgroupMin/Max leave NaN undefined: a NaN in any invocation is the result
            self.helpers.add("nan")
            w.line(f"let z_sr = select({fn}(z_sv), z_sv + bitcast<f32>(0x7fc00000u), "
                   f"subgroupAny(z_isnan_f32(z_sv)));")
        else:
            w.line(f"let z_sr = {fn}(z_sv);")
        w.line("workgroupBarrier();")
        w.line(f"if (z_sg_lid == 0u) {{ {arr}[z_lid.x / z_sg_size] = z_sr; }}")
        w.line("workgroupBarrier();")
        w.line("z_cnt = (z_cnt + z_sg_size - 1u) / z_sg_size;")
        w.line("if (z_cnt <= 1u) { break; }")
        w.line(f"z_sv = select({ident_}, {arr}[min(z_lid.x, {n - 1}u)], z_lid.x < z_cnt);")
        w.close()
        w.close()

    def _strided_tree(self, acc, acc_i, ct, init, bigi, arg, loop_header, red, rcounts, body,
                      to_st, op, WG, vdt):
        """Each invocation folds the reduction iterations `loop_header` gives it into `acc`
        (and `acc_i` for argmin/argmax), then the workgroup combines them in a tree."""
        self.w.line(f"var {acc}: {ct} = {init};")
        if arg:
            self.w.line(f"var {acc_i}: i32 = {bigi};")
        self.w.open(loop_header)
        self.push()
        self.bind_chain(red, rcounts, "z_t")
        self.stmts(body)
        self.pop()
        self.w.close()
        self.w.line(f"z_red[z_lid.x] = {to_st(acc)};")
        if arg:
            self.w.line(f"z_red_i[z_lid.x] = {acc_i};")
        self.tree(op, "z_red", "z_red_i", WG, vdt)

    def tree(self, op: str, arr: str, idx_arr: str | None, n: int, dtype: str):
        """Combine arr[0..n) (and its index array for argmin/argmax) into arr[0]."""
        if self.o.subgroups and op in ("+", "min", "max") and \
                self.cty(dtype) in ("f32", "i32", "u32"):
            self.subgroup_tree(op, arr, n, dtype)
            return
        self.w.line("workgroupBarrier();")
        self.w.open(f"for (var z_s: u32 = {n // 2}u; z_s > 0u; z_s = z_s >> 1u)")
        self.w.open("if (z_lid.x < z_s)")
        a, b = f"{arr}[z_lid.x]", f"{arr}[z_lid.x + z_s]"
        if op in ("argmax", "argmin"):
            ia, ib = f"{idx_arr}[z_lid.x]", f"{idx_arr}[z_lid.x + z_s]"
            self.w.open(f"if ({self.arg_better(op, b, a, ib, ia, self.cty(dtype))})")
            self.w.line(f"{a} = {b};")
            self.w.line(f"{ia} = {ib};")
            self.w.close()
        else:
            if self.cty(dtype) == "bool":
                self.w.line(f"{a} = select(0u, 1u, ({a} != 0u) {'&&' if op == 'and' else '||'} ({b} != 0u));")
            else:
                self.w.line(f"{a} = {self.combine(op, a, b, dtype)};")
        self.w.close()
        self.w.line("workgroupBarrier();")
        self.w.close()

    def render_reduce(self) -> Program:
        WG = self.o.workgroup_size
        op = self.k.kernel_type.param("op", "+")
        axis = self.k.kernel_type.param("axis")
        loops = self.chain(self.k.body, parallel_only=False)
        yields = [s for s in cir.walk(self.k.body) if isinstance(s, cir.Yield)]
        if not yields:
            raise RenderError("reduce kernel without yield")
        vdt = yields[0].value.ty.dtype
        if op in ("and", "or"):
            vdt = "bool"
        arg = op in ("argmax", "argmin")
        if axis is not None and (not loops or axis >= len(loops)):
            raise ZynMLDeviceError(f"reduce axis {axis} is not one of the loop variables")
        kept = [lp for n, lp in enumerate(loops) if axis is not None and n != axis]
        red = [loops[axis]] if axis is not None else loops
        kcounts = self.chain_params(kept)
        rcounts = self.chain_params(red)
        ct = self.cty(vdt)
        st = "u32" if ct == "bool" else ct
        self.workgroup_array("z_red", st, WG)
        if arg:
            self.workgroup_array("z_red_i", "i32", WG)
        out_name = ident(self.k.name)
        body = loops[-1].body if loops else self.k.body
        acc, acc_i = "z_acc", "z_acc_i"

        def on_yield(s: cir.Yield):
            t, dt = self.ex(s.value, [])
            t = self.convert(t, dt, vdt)
            if arg:
                it, idt = self.ex(s.index, [])
                it = self.convert(it, idt, "i32")
                y, yi = self.fresh("y"), self.fresh("yi")
                self.w.line(f"let {y}: {ct} = {t};")
                self.w.line(f"let {yi}: i32 = {it};")
                self.w.open(f"if ({self.arg_better(op, y, acc, yi, acc_i, ct)})")
                self.w.line(f"{acc} = {y};")
                self.w.line(f"{acc_i} = {yi};")
                self.w.close()
            else:
                self.w.line(f"{acc} = {self.combine(op, acc, t, vdt)};")

        self.reduce_ctx = on_yield
        rtotal = self.product(rcounts)
        init = self.identity(op, vdt)
        bigi = "i32(2147483647)"

        def to_st(x):
            return f"select(0u, 1u, {x})" if ct == "bool" else x

        def from_st(x):
            return f"({x} != 0u)" if ct == "bool" else x

        def final_store(value, index):
            # an argmin/argmax of nothing is -1 on every device (docs/language.md)
            res = f"select({index}, -1i, {index} == {bigi})" if arg else value
            rdt = "i32" if arg else vdt
            if axis is None:
                flat = "0"
            else:
                flat = self.flat(kits, [f"{c}" for c in kcounts])
            self.w.line(self.buf_store(self.k.output.name, flat, res, rdt))

        passes = []
        if axis is not None:
            # one workgroup per kept index
            self.entry_open(out_name, (WG, 1, 1))
            self.w.line(f"let z_wid: i32 = {self.WID};")
            self.w.line(f"if (z_wid >= {self.product(kcounts)}) {{ return; }}")
            self.w.line(f"// one workgroup per output; its invocations share the "
                        f"{', '.join(lp.var for lp in red)} loop")
            kits = self.bind_chain(kept, kcounts, "z_wid", "k")
            self._strided_tree(acc, acc_i, ct, init, bigi, arg,
                               f"for (var z_t: i32 = i32(z_lid.x); z_t < {rtotal}; "
                               f"z_t = z_t + {WG}i)", red, rcounts, body, to_st, op, WG, vdt)
            self.w.open("if (z_lid.x == 0u)")
            final_store(from_st("z_red[0]"), "z_red_i[0]")
            self.w.close()
            self.w.close()

            def nwg(env, c=[self.params[x[2:]] for x in kcounts]):
                return int(math.prod(p.value(env) for p in c))
            passes.append(ProgramPass(out_name, nwg, out_name))
            return self.finish("reduce", self.w.text(), passes, (WG, 1, 1))

        # whole reduction: pass 1 leaves one partial per workgroup, pass 2 combines them
        rt = [self.params[x[2:]] for x in rcounts]

        def groups(env):
            total = int(math.prod(p.value(env) for p in rt))
            return max(1, min(1024, -(-total // (WG * 4))))
        self.params["z_groups"] = ParamField("z_groups", "i32", groups)
        self.extra_bindings = [("z_part", "@partials", st)]
        if arg:
            self.extra_bindings.append(("z_part_i", "@partials_i", "i32"))
        self.entry_open(f"{out_name}_partials", (WG, 1, 1))
        self.w.line(f"let z_wid: i32 = {self.WID};")
        self.w.line(f"// pass 1 of 2: workgroup z_wid combines every P.z_groups-th block of {WG}")
        self._strided_tree(acc, acc_i, ct, init, bigi, arg,
                           f"for (var z_t: i32 = z_wid * {WG}i + i32(z_lid.x); z_t < {rtotal}; "
                           f"z_t = z_t + P.z_groups * {WG}i)", red, rcounts, body, to_st, op,
                           WG, vdt)
        self.w.open("if (z_lid.x == 0u)")
        self.w.line("z_part[z_wid] = z_red[0];")
        if arg:
            self.w.line("z_part_i[z_wid] = z_red_i[0];")
        self.w.close()
        self.w.close()
        self.w.line("")
        self.entry_open(f"{out_name}_final", (WG, 1, 1))
        self.w.line("// pass 2 of 2: one workgroup combines the partials")
        self.w.line(f"var {acc}: {ct} = {init};")
        if arg:
            self.w.line(f"var {acc_i}: i32 = {bigi};")
        self.w.open(f"for (var z_t: i32 = i32(z_lid.x); z_t < P.z_groups; z_t = z_t + {WG}i)")
        if arg:
            self.w.open(f"if ({self.arg_better(op, 'z_part[z_t]', acc, 'z_part_i[z_t]', acc_i, ct)})")
            self.w.line(f"{acc} = z_part[z_t];")
            self.w.line(f"{acc_i} = z_part_i[z_t];")
            self.w.close()
        else:
            self.w.line(f"{acc} = {self.combine(op, acc, from_st('z_part[z_t]'), vdt)};")
        self.w.close()
        self.w.line(f"z_red[z_lid.x] = {to_st(acc)};")
        if arg:
            self.w.line(f"z_red_i[z_lid.x] = {acc_i};")
        self.tree(op, "z_red", "z_red_i", WG, vdt)
        self.w.open("if (z_lid.x == 0u)")
        kits = []
        final_store(from_st("z_red[0]"), "z_red_i[0]")
        self.w.close()
        self.w.close()
        passes = [ProgramPass(f"{out_name}_partials", groups, "partials"),
                  ProgramPass(f"{out_name}_final", lambda env: 1, "final")]
        self.partials = groups
        return self.finish("reduce", self.w.text(), passes, (WG, 1, 1))


    # ------------------------------------------------------------------------ rows

    def _accumulation(self, st, name):
        """The reduction operator of `name = name op e` (or min/max(name, e)), else None."""
        v = st.value
        isx = lambda e: isinstance(e, cir.Var) and e.name == name
        uses = lambda e: any(isinstance(n, cir.Var) and n.name == name for n in cir.walk(e))
        if isinstance(v, cir.Bin) and v.op in ("+", "*", "-"):
            if isx(v.left) and not uses(v.right):
                return "+" if v.op == "-" else v.op
            if v.op != "-" and isx(v.right) and not uses(v.left):
                return v.op
        if isinstance(v, cir.Call) and v.fn in ("min", "max") and len(v.args) == 2:
            a, b = v.args
            if (isx(a) and not uses(b)) or (isx(b) and not uses(a)):
                return v.fn
        return None

    def _distributable(self, lp: cir.Loop):
        """{accumulated outer name: op} when the iterations of `lp` may be split over the
        workgroup's invocations, else None."""
        if not isinstance(lp.step, cir.Const) or lp.step.value <= 0:
            return None
        inner = {n.name for n in cir.walk(lp.body) if isinstance(n, cir.Let)}
        accs, stores = {}, False
        for n in cir.walk(lp.body):
            if isinstance(n, (cir.Yield, cir.Barrier, cir.SharedAlloc, cir.Atomic)):
                return None
            if isinstance(n, (cir.Let, cir.Assign)) and n.value.ty.shape:
                return None
            if isinstance(n, cir.Assign) and n.name not in inner:
                op = self._accumulation(n, n.name)
                if op is None or accs.get(n.name, op) != op:
                    return None
                accs[n.name] = op
            if isinstance(n, cir.Store):
                stores = True
                if not any(isinstance(i, cir.Var) and i.name == lp.var for i in n.index):
                    return None
            if isinstance(n, cir.Load) and n.buffer == self.k.output.name:
                return None
            if isinstance(n, cir.Load) and n.buffer in self.shared_allocs:
                if any(isinstance(m, cir.Store) and m.buffer == n.buffer for m in cir.walk(lp.body)):
                    return None
        for name in accs:
            count = sum(1 for n in cir.walk(lp.body) if isinstance(n, cir.Var) and n.name == name)
            writes = sum(1 for n in cir.walk(lp.body) if isinstance(n, cir.Assign) and n.name == name)
            if count != writes:
                return None     # read elsewhere in the loop: not a pure accumulation
        if not accs and not stores:
            return None
        return accs

    def row_stmts(self, body):
        for s in body:
            if isinstance(s, cir.Loop):
                accs = self._distributable(s)
                if accs is not None:
                    self.comment_line(s.line)
                    self.distributed_loop(s, accs)
                    continue
            if isinstance(s, cir.SharedAlloc):
                self.comment_line(s.line)
                self.shared_alloc(s)
                continue
            if isinstance(s, cir.Barrier):
                self.comment_line(s.line)
                self.w.line("storageBarrier();")
                self.w.line("workgroupBarrier();")
                continue
            self.stmt(s)
            if isinstance(s, (cir.Loop, cir.If)) and any(
                    isinstance(n, cir.Store) for n in cir.walk(s)):
                self.w.line("storageBarrier();")
                self.w.line("workgroupBarrier();")

    def distributed_loop(self, lp: cir.Loop, accs: dict):
        WG = self.o.workgroup_size
        start = self.hoist_let(self.scalar_int(lp.start), "i32", "lo")
        stop = self.hoist_let(self.scalar_int(lp.stop), "i32", "hi")
        step = lp.step.value
        partial = {}
        self.push()
        for name, op in accs.items():
            sym = self.lookup(name)
            if sym is None or sym.kind != "scalar":
                raise RenderError(f"`{name}` is not a scalar")
            p = self.fresh(f"{ident(name)}_part")
            self.w.line(f"var {p}: {self.cty(sym.dtype)} = {self.identity(op, sym.dtype)};")
            partial[name] = (p, op, sym)
            self.declare(name, _Sym("scalar", p, sym.dtype, mutable=True))
        v = self._unique(ident(lp.var))
        self.w.line(f"// the {lp.var} loop is split over the workgroup's {WG} invocations")
        self.w.open(f"for (var {v}: i32 = {start} + i32(z_lid.x) * {step}i; {v} < {stop}; "
                    f"{v} = {v} + {WG * step}i)")
        self.ranges[lp.var] = (lp.start, lp.stop)
        self.push()
        self.declare(lp.var, _Sym("loop", v, "i32"))
        self.stmts(lp.body)
        self.pop()
        self.w.close()
        self.pop()
        for name, (p, op, sym) in partial.items():
            arr = self.red_array(sym.dtype)
            self.w.line(f"{arr}[z_lid.x] = {p};")
            self.tree(op, arr, None, WG, sym.dtype)
            self.w.line(f"{sym.wgsl} = {self.combine(op, sym.wgsl, arr + '[0]', sym.dtype)};")
            self.w.line("workgroupBarrier();")
        if any(isinstance(n, cir.Store) for n in cir.walk(lp.body)):
            self.w.line("storageBarrier();")
            self.w.line("workgroupBarrier();")

    def red_array(self, dtype: str) -> str:
        t = self.cty(dtype)
        if t == "bool":
            raise RenderError("boolean accumulation")
        name = f"z_red_{t}"
        if name not in self._red_arrays:
            self._red_arrays.add(name)
            self.workgroup_array(name, t, self.o.workgroup_size)
        return name

    def render_rows(self) -> Program:
        WG = self.o.workgroup_size
        self._red_arrays = set()
        loops = self.chain(self.k.body)
        if not loops:
            raise RenderError("no parallel loop to give one workgroup per iteration")
        body = loops[-1].body
        for n in cir.walk(body):
            if isinstance(n, (cir.Let, cir.Assign)) and n.value.ty.shape:
                raise RenderError("tile values inside the rows")
            if isinstance(n, cir.Atomic):
                raise RenderError("atomics")
        if not any(isinstance(s, cir.Loop) and self._distributable(s) is not None for s in body):
            raise RenderError("no loop inside the rows can be split over a workgroup")
        counts = self.chain_params(loops)
        total = [self.params[x[2:]] for x in counts]
        name = ident(self.k.name)
        self.slot_expr = "z_wid"
        self.entry_open(name, (WG, 1, 1))
        self.w.line(f"let z_wid: i32 = {self.WID};")
        self.w.line(f"if (z_wid >= {self.product(counts)}) {{ return; }}")
        self.w.line("// one workgroup per iteration of the parallel loops "
                    + ", ".join(lp.var for lp in loops))
        self.bind_chain(loops, counts, "z_wid")
        self.row_stmts(body)
        self.w.close()

        def nwg(env):
            return int(math.prod(p.value(env) for p in total))
        return self.finish("rows", self.w.text(), [ProgramPass(name, nwg, name)], (WG, 1, 1))


# ------------------------------------------------------------------------- entry point

SCHEDULES = ("generic", "reduce", "gemm", "rows", "attention")


def schedule_for(kernel: cir.Kernel) -> list:
    """Schedules to try for `kernel`, best first; `generic` always last."""
    kind = kernel.kernel_type.kind
    if kind == "reduce":
        return ["reduce", "generic"]
    if kind in ("matmul", "batched_matmul"):
        return ["gemm", "generic"]
    if kind in ("attention", "flash_attention"):
        return ["attention", "rows", "generic"]
    if kind in ("fused", "softmax", "layernorm", "layer_norm", "rmsnorm",
                "rms_norm", "custom"):
        return ["rows", "generic"]
    if kind in ("elementwise", "conv2d", "conv2d_depthwise"):
        return ["generic"]
    return ["rows", "generic"]


def render(kernel: cir.Kernel, options: WGSLOptions | None = None,
           schedule: str | None = None) -> Program:
    """The WGSL program of `kernel`. With `options.launch_ir` or `options.launch_sizes`, a
    schedule of compiler/schedules/ printed by the WGSL dialect comes first
    (`schedule="launch"` forces it). Otherwise, and where that path does not apply,
    `schedule` forces one of the renderer's own (tests), or the kernel type's schedule is
    tried first and the generic one is the fallback."""
    options = options or WGSLOptions()
    if (options.launch_ir or options.launch_sizes) and schedule in (None, "launch"):
        prog = launch_program(kernel, options)
        if prog is not None:
            return prog
        if schedule == "launch":
            raise ZynMLDeviceError(f"kernel {kernel.name} has no launch-IR schedule on WebGPU")
    f64 = _refuse_f64(kernel, options)
    order = [schedule] if schedule else schedule_for(kernel)
    if f64 and not schedule:
        # f64 runs on the schedules written over the compute type (no vec4<f32> tiles)
        order = [s for s in order if s in ("reduce", "generic")]
    notes = []
    for sched in order:
        if sched in ("attention", "gemm"):     # compiler/schedules/, the WGSL dialect
            prog = launch_program(kernel, options, only=sched)
            if prog is not None:
                prog.notes[:0] = notes
                return prog
            if schedule:
                raise ZynMLDeviceError(f"schedule {sched} does not fit kernel {kernel.name}")
            notes.append(f"the {sched} schedule does not take it ({_why_not_launch(kernel, options, sched)}); "
                         "using the next one")
            continue
        r = KernelRenderer(kernel, options)
        r.notes.extend(notes)
        fn = getattr(r, f"render_{sched}", None)
        if fn is None:
            continue
        try:
            return fn()
        except RenderError as exc:
            if schedule:
                raise ZynMLDeviceError(f"schedule {sched} does not fit kernel {kernel.name}: {exc}")
            notes.append(f"the {sched} schedule does not fit ({exc}); using the next one")
    raise ZynMLDeviceError(f"no WGSL schedule fits kernel {kernel.name}")


# what 64-bit floats can do in a shader (Vulkan's GLSL.std.450 has no 64-bit exp, log or
# trigonometry): anything else in an f64 kernel is refused
_F64_FUNCTIONS = {"sqrt", "abs", "floor", "ceil", "round", "min", "max", "clamp", "relu",
                  "zeros", "ones", "sum", "row_max", "row_sum", "transpose"}


def _refuse_f64(kernel: cir.Kernel, options: WGSLOptions) -> bool:
    """True when the kernel computes in f64, which needs the adapter's `shader-f64`; an f64
    kernel is refused where there is none, or where it needs what f64 shaders lack, never
    computed in f32 and reported as f64."""
    from ...errors import Span
    where = [f"`{b.name}`" for b in list(kernel.inputs) + [kernel.output] if b.dtype == "f64"]
    scal = [f"`{s.name}`" for s in kernel.scalars if s.dtype == "f64"]
    if not where and not scal and not any(isinstance(n, cir.Expr) and n.ty.dtype == "f64"
                                          for n in cir.walk(kernel.body)):
        return False
    span = Span(kernel.first_line, 1) if kernel.first_line else None
    what = ", ".join(where + scal) or "a value"
    if not options.f64:
        raise ZynMLDeviceError(
            f"this WebGPU adapter has no `shader-f64`: kernel `{kernel.name}` uses f64 ({what} "
            "is f64), which it would compute in 32 bits; run it on `cpu`, `cpu:native` or a "
            "CUDA device, or make it f32", span)
    why = ""
    if scal:
        why = f"f64 scalar arguments ({', '.join(scal)})"
    for n in cir.walk(kernel.body):
        if isinstance(n, cir.Call) and n.ty.dtype == "f64" and n.fn not in _F64_FUNCTIONS:
            why = why or f"{n.fn}() in 64 bits"
        if isinstance(n, cir.Bin) and n.ty.dtype == "f64" and n.op == "**" and not (
                isinstance(n.right, cir.Const) and n.right.value == 2):
            why = why or "** in 64 bits"
        if isinstance(n, cir.Atomic):
            why = why or "atomics"
    if why:
        raise ZynMLDeviceError(
            f"WebGPU's f64 shaders cannot run kernel `{kernel.name}`: it needs {why}; run it "
            "on `cpu`, `cpu:native` or a CUDA device", span)
    return True


def render_source(kernel: cir.Kernel, options: WGSLOptions | None = None) -> str:
    return render(kernel, options).source


# ----------------------------------------------------------- the launch-IR path


def launch_target(options: WGSLOptions):
    """The adapter these options describe, as a compiler/targets.py Target."""
    from ..targets import webgpu_target
    features = [f for f, on in (("shader-f16", options.f16), ("shader-f64", options.f64),
                                ("subgroup", options.subgroups)) if on]
    return webgpu_target(features, {
        "max_compute_invocations_per_workgroup": min(options.workgroup_size, options.max_invocations),
        "max_compute_workgroup_storage_size": options.max_workgroup_storage})


def _why_not_launch(kernel: cir.Kernel, options: WGSLOptions, only: str) -> str:
    """Why schedule `only` of compiler/schedules/ does not take `kernel` on this adapter."""
    from .. import schedules
    from ..launch.scalar import pattern_sizes
    sizes = pattern_sizes(kernel.dims, options.equal_sizes, options.negative_sizes)
    sched = next(s for s in schedules.SCHEDULES if s.name == only)
    return sched.why_not(kernel, launch_target(options), sizes) or \
        "the WGSL dialect cannot spell the program it built"


def launch_program(kernel: cir.Kernel, options: WGSLOptions, only: str | None = None) -> Program | None:
    """`kernel` through compiler/schedules/ and the WGSL dialect of the one printer, as the
    Program the WebGPU device runs: one program for every size set of the pattern of equal
    and negative sizes the options give (sizes are uniforms, grids and scratch counts host
    expressions over them), else, given `options.launch_sizes`, one laid out for those sizes
    (`_launch_targets`). None where no schedule applies or the dialect cannot spell what
    it built (the reason is a ZynMLDeviceError of the dialect: 64-bit integers, f64, f16
    without `shader-f16`...)."""
    from ..launch import ir as lir
    from ..launch.scalar import pattern_sizes, user_name
    if options.launch_sizes:
        sizes = {k: int(v) for k, v in options.launch_sizes}
        if any(d not in sizes for d in kernel.dims):
            return None
    else:
        sizes = pattern_sizes(kernel.dims, options.equal_sizes, options.negative_sizes)
    _refuse_f64(kernel, options)        # f64 refused as the renderer below refuses it
    got = None
    for target, baked in _launch_targets(options):
        got = _printed(kernel, target, sizes, only, baked, options)
        if got is not None:
            break
    if got is None:
        return None
    prog, dialect, out, bindings = got
    names = {user_name(b.name): b.name for b in list(kernel.inputs) + [kernel.output]}
    scalars = {user_name(s.name): s.name for s in kernel.scalars}
    dims = {user_name(d): d for d in kernel.dims}
    params = []
    for field_name, wgsl_type, p in dialect.uniforms:
        if p.kind == "size":
            value = (lambda env, n=dims[p.name]: int(env["sizes"][n]))
        elif wgsl_type == "f32":
            value = (lambda env, n=scalars[p.name]: float(env["scalars"][n]))
        else:
            value = (lambda env, n=scalars[p.name]: int(env["scalars"][n]))
        params.append(ParamField(field_name, wgsl_type, value))
    program_bindings = [ProgramBinding(n, name, names.get(role, role), access, elem,
                                       dtype if role in names else "")
                        for n, name, role, access, elem, dtype in bindings]
    env_sizes = (lambda env: {user_name(k): int(v) for k, v in env["sizes"].items()})
    passes = [ProgramPass(launch.kernel,
                          (lambda env, g=launch.grid: int(lir.evaluate(g, env_sizes(env)))),
                          launch.kernel)
              for launch in prog.launches]
    scratch_bytes = {"@scratch:" + sc.name: (
        lambda env, sc=sc: int(lir.evaluate(sc.count, env_sizes(env))) * (
            8 if sc.dtype == "f64" else 4)) for sc in prog.scratch}
    if dialect.workgroup_bytes > options.max_workgroup_storage:
        return None
    first = prog.kernels[0]
    source = out.source
    if dialect.block_fns and options.subgroups_directive:
        source = "enable subgroups;\n" + source
    return Program(kernel.name, prog.schedule, source, program_bindings, passes, params,
                   {}, dialect.workgroup_bytes, (first.block, 1, 1), list(prog.notes),
                   dialect.uses_f16, prog.sites, scratch_bytes,
                   _i32_check(kernel, prog, env_sizes))


def _launch_targets(options: WGSLOptions):
    """(target, sizes baked) to build for, best first: one program for every size set, then
    (given the launch's sizes) one for these sizes, which a schedule that lays work out by
    a size (rows, block arrays) needs."""
    import dataclasses as dc
    # subgroups are not warps of a width a schedule knows: block all-reductions only
    target = dc.replace(launch_target(options), warp=1, collectives=False)
    every = [(target, False)]
    if options.launch_sizes:
        every.append((dc.replace(target, symbolic_sizes=False), True))
    return every


def _printed(kernel: cir.Kernel, target, sizes: dict, only, baked: bool, options: WGSLOptions):
    """(launch IR, dialect, printed program, bindings) of `kernel` on `target`, or None where
    no schedule builds it or the WGSL dialect cannot spell what one built. Not `baked`: the
    program must be the one of every size set of the pattern of `sizes`."""
    from .. import schedules
    from ..launch.scalar import pattern_sizes, size_pattern
    from .dialects.wgsl import WgslDialect
    from .printer import print_program
    prog = schedules.build(kernel, target, sizes, only=only)
    if prog is None:
        return None
    if not baked:
        # a schedule that read a size's value would build another program for other values
        equal, negative = size_pattern(kernel, sizes)
        other = pattern_sizes(kernel.dims, equal,
                              tuple(d for d in kernel.dims if d not in negative), base=7919)
        if schedules.build(kernel, target, other, only=only) != prog:
            return None
    dialect = WgslDialect(f16=options.f16, max_storage_buffers=options.max_storage_buffers,
                          f64=options.f64)
    try:
        return prog, dialect, print_program(dialect, prog, kernel), dialect.bindings(prog)
    except ZynMLDeviceError:
        return None


def needs_launch_sizes(kernel: cir.Kernel, options: WGSLOptions) -> bool:
    """Whether the launch IR of `kernel` is built for the sizes of each launch (no program
    serves every size set): the device then compiles one per size set."""
    key = (kernel.stable_hash(), options.key())
    if key not in _NEEDS_SIZES:
        _NEEDS_SIZES[key] = options.launch_ir and not options.launch_sizes and \
            launch_program(kernel, options) is None
    return _NEEDS_SIZES[key]


_NEEDS_SIZES: dict = {}


def sized_for(options: WGSLOptions, kernel: cir.Kernel, sizes: dict) -> WGSLOptions:
    """`options` for a launch of `sizes`: with those sizes where no program of `kernel`
    serves every size set (a program per size set, `needs_launch_sizes`)."""
    import dataclasses as dc
    if not needs_launch_sizes(kernel, options):
        return options
    return dc.replace(options, launch_sizes=tuple(sorted(
        (k, int(v)) for k, v in sizes.items() if k in kernel.dims)))


I32_LIMIT = 2 ** 31 - 1


def _i32_check(kernel: cir.Kernel, prog, env_sizes) -> Callable:
    """env -> why this launch cannot run with i32 indices (a size, a buffer or a loop of
    the program reaching 2^31), else None: the program is compiled once for every size,
    with i32 indices, so a launch that would pass them is refused before it runs."""
    import dataclasses as dc
    from ..launch import ir as lir

    def on_host(e):
        """`e` with the thread axes as names the host gives values (`@blocks`, ...)."""
        if isinstance(e, lir.Thread):
            return lir.Ref("@" + e.axis, e.dtype)
        if not isinstance(e, lir.Expr):
            return e
        changes = {}
        for f in dc.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, lir.Expr):
                changes[f.name] = on_host(v)
            elif isinstance(v, tuple):
                changes[f.name] = tuple(on_host(x) for x in v)
        return dc.replace(e, **changes)

    def largest(k, env):
        """The largest start, and end plus step, of the loops of kernel `k` the host can
        compute at this launch."""
        local, most = dict(env), 0
        for s in k.body:
            if isinstance(s, lir.Decl) and not s.mutable and s.value is not None:
                try:
                    local[s.name] = lir.evaluate(on_host(s.value), local)
                except (TypeError, KeyError):
                    pass
        for n in lir.walk(k.body):
            if isinstance(n, lir.For):
                for e in ((n.start,), (n.stop, n.step)):
                    try:
                        most = max(most, sum(int(lir.evaluate(on_host(x), local)) for x in e))
                    except (TypeError, KeyError):
                        pass
        return most

    def check(env):
        for name, v in env["sizes"].items():
            if abs(int(v)) > I32_LIMIT:
                return f"the size {name} = {v}"
        for b, shape in env.get("shapes", {}).items():
            n = 1
            for d in shape:
                n *= int(d)
            if n > I32_LIMIT:
                return f"`{b}` of {n} elements"
        sizes = env_sizes(env)
        for launch in prog.launches:
            grid = int(lir.evaluate(launch.grid, sizes))
            # a dispatch split over dimensions may run up to twice the blocks asked for
            threads = {"@blocks": 2 * grid, "@block": 2 * grid, "@threads": launch.block,
                       "@thread": launch.block}
            most = largest(prog.kernel(launch.kernel), {**sizes, **threads})
            if most > I32_LIMIT:
                return f"an index of {most}"
        return None
    return check
