"""The launch-IR emulator: a `Program` run on the CPU, thread by thread, as a device would.

`run(program, buffers, scalars, sizes)` runs the launches in order, every block of each grid
and every thread of each block, and returns the two error-flag words (compiler/errflag.py;
`(0, 0)` when no site failed). Buffers are modified in place; scratch buffers are allocated
here from `Scratch.count`.

How threads are modelled:

* each kernel is translated once into a Python generator function (one call = one thread);
  a thread yields at every `Barrier` and every `Collective`, so a block scheduler can run all
  threads of a block up to the next synchronisation point and check that they all reached
  the same one. A barrier or block collective reached by only some threads (divergent
  control flow), or a warp collective reached by only part of a warp, is a schedule bug and
  raises `EmulatorError`;
* warp collectives combine the threads of each group of `warp` threads (32 on CUDA, the
  subgroup size on WebGPU) in the butterfly order of shuffle-xor reductions; block
  collectives combine the warps' results the same way;
* shared arrays are per block, local arrays per thread; both, scratch buffers and locals
  declared without a value start poisoned (NaN, or 0x5A bytes) as uninitialised memory does;
* vector values (dtype "f32x4") are numpy arrays of their lanes, an array of vectors one
  row per element; a vector load copies its row;
* arithmetic is done in the dtype with numpy scalars: integers wrap at their width, f16 is
  numpy's float16, bf16 is held as float32 and rounded to bfloat16 (nearest even) on every
  store to a bf16 array and on every cast to bf16; a float cast to an integer truncates and
  saturates (NaN gives 0), as CUDA and WGSL conversions do; a size parameter holds the
  size's own value, as the printers that compile sizes in write it (never wrapped);
* asynchronous copies (`AsyncCopy`) read their source when issued and land in shared memory
  when an `AsyncWait` of the thread completes their group, never sooner (a read before the
  wait sees the old contents); at the issue the elements count as written for the race
  check too, as the device may land them at once;
* mbarriers and the copy engine's box copies (`Mbarrier`, `TensorLoad`) follow
  backends/tma_model.py: a box lands when the phase counting its bytes completes, a thread
  waiting on an mbarrier yields until its phase did, and threads that all wait on phases
  that can no longer complete are reported as a deadlock; a named barrier orders the shared
  memory accesses of the threads that meet at it;
* `Checked` and `CheckedDiv` record the first failure (site and value) and give 0; a guarded
  or checked store or atomic that fails is skipped. A load or store outside its array that
  no `Checked` covers is a schedule bug and raises `EmulatorError`, as do integer divisions
  by zero outside `CheckedDiv` and ill-typed nodes;
* data races (optional, on by default): within one block and between two barriers, a shared
  element written by one thread and read or written by another (an array declared over
  another's memory, `alias`, is tracked at the same bytes); within one launch, an
  element of a global buffer written by one thread and read, or written with another value,
  by a thread of another block, or of the same block without a barrier in between. Atomics
  are exempt. Sequential emulation would hide these; the device would not.
"""
from __future__ import annotations

import linecache
import math
import struct
from fractions import Fraction

import numpy as np

from ..compiler.launch import ir
from ..compiler.launch.ir import (Array, Atomic, Barrier, Bin, Cast, Checked, CheckedDiv,
                                  Collective, Decl, For, If, InRange, Lit, Load, Math, Ref,
                                  Select, Set, Store, Thread, Un)
from . import tma_model, wgmma_model
from .cpu.reference import bf16_rounded


class EmulatorError(RuntimeError):
    """The program is wrong (a schedule or lowering bug), not the ZynML code it runs."""


# --------------------------------------------------------------------------- dtypes

_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
       "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
       "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
       "bool": np.bool_}
_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
_INT = frozenset(ir.INT_DTYPES)
_FLOAT = frozenset(ir.FLOAT_DTYPES)


def numpy_dtype(dtype: str):
    """The numpy dtype that holds a buffer of `dtype` (bf16: float32, rounded on store)."""
    try:
        return np.dtype(_NP[dtype])
    except KeyError:
        raise EmulatorError(f"unknown dtype {dtype!r}") from None


def _bytes(dtype: str) -> int:
    """Bytes of one element of `dtype` on the device (bf16: 2, though held as a float32)."""
    return {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "bool": 1}.get(dtype) or _BITS[dtype] // 8


def tf32_round(x) -> np.float32:
    """`x` rounded to TF32 (a 10-bit mantissa; nearest, ties away from zero, as
    `cvt.rna.tf32.f32`), held as a float32."""
    u = int(np.float32(x).view(np.uint32))
    if (u & 0x7F800000) != 0x7F800000:                      # infinities and NaNs stay
        u = (u + 0x1000) & 0xFFFFE000
    return np.uint32(u).view(np.float32)


def _int_range(dtype: str) -> tuple[int, int]:
    bits = _BITS[dtype]
    if dtype[0] == "u":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _wrap(v: int, dtype: str):
    """Python int `v` as `dtype`, wrapped at its width."""
    bits = _BITS[dtype]
    v &= (1 << bits) - 1
    if dtype[0] == "i" and v >> (bits - 1):
        v -= 1 << bits
    return _NP[dtype](v)


def bf16_round(x) -> np.float32:
    """`x` rounded to the nearest bfloat16 (ties to even), held as a float32: the
    reference's rounding (cpu/reference.bf16_rounded) of one value."""
    return bf16_rounded(np.float32(x))[()]


def typed(value, dtype: str):
    """A Python number as the emulator holds a value of `dtype`."""
    if dtype == "bool":
        return bool(value)
    if dtype in _INT:
        if isinstance(value, float) or isinstance(value, np.floating):
            return _float_to_int(value, dtype)
        return _wrap(int(value), dtype)
    if dtype == "bf16":
        return bf16_round(np.float32(value))
    if dtype in _FLOAT:
        return _NP[dtype](value)
    raise EmulatorError(f"unknown dtype {dtype!r}")


def _poison(dtype: str):
    if dtype in _FLOAT:
        return typed(float("nan"), dtype)
    if dtype == "bool":
        return False
    return _wrap(int.from_bytes(b"\x5a" * (_BITS[dtype] // 8), "little"), dtype)


def _poisoned(dtype: str, count: int, poison: bool) -> np.ndarray:
    lanes = ir.lanes_of(dtype)
    shape = (count, lanes) if lanes > 1 else count
    dtype = ir.element_of(dtype)
    if not poison:
        return np.zeros(shape, numpy_dtype(dtype))
    return np.full(shape, _poison(dtype), numpy_dtype(dtype))


# ------------------------------------------------------------------ value operations


def _float_to_int(x, dtype):
    f = float(x)
    if f != f:
        return _NP[dtype](0)
    lo, hi = _int_range(dtype)
    if f <= lo:
        return _NP[dtype](lo)
    if f >= hi:
        return _NP[dtype](hi)
    return _NP[dtype](int(f))


def _cast(x, src: str, dst: str):
    if dst == "bool":
        return bool(x != 0) if src != "bool" else x
    if dst in _INT:
        if src in _FLOAT:
            return _float_to_int(x, dst)
        return _wrap(int(x), dst)
    if dst == "bf16":
        return bf16_round(x)
    return _NP[dst](x)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _tdiv(a, b, dtype):
    a, b = int(a), int(b)
    if b == 0:
        raise EmulatorError("integer division by zero outside a CheckedDiv")
    return _wrap(_trunc_div(a, b), dtype)


def _trem(a, b, dtype):
    a, b = int(a), int(b)
    if b == 0:
        raise EmulatorError("integer remainder by zero outside a CheckedDiv")
    return _wrap(a - b * _trunc_div(a, b), dtype)


def _floordiv(a, b, dtype):
    a, b = int(a), int(b)
    if b == 0:
        raise EmulatorError("floordiv by zero")
    return _wrap(a // b, dtype)


def _ceildiv(a, b, dtype):
    a, b = int(a), int(b)
    if b == 0:
        raise EmulatorError("ceildiv by zero")
    return _wrap(-(-a // b), dtype)


def _ipow(a, b, dtype):
    if dtype in _FLOAT:
        return np.power(a, b)
    b = int(b)
    if b <= 0:
        return _wrap(1, dtype)
    return _wrap(pow(int(a), b, 1 << _BITS[dtype]), dtype)


def _extreme(beats):
    """numpy's maximum (beats: >) or minimum (<) folded over its arguments: NaN wins, and of
    equal values the second."""
    def fold(*xs):
        r = xs[0]
        for x in xs[1:]:
            if r != r:
                return r
            if x != x or not beats(r, x):
                r = x
        return r
    return fold


_max = _extreme(lambda a, b: a > b)
_min = _extreme(lambda a, b: a < b)


def _clamp(x, lo, hi):
    return _min(hi, _max(lo, x))      # numpy's clip: x itself where it equals a bound


def _pow(a, b):
    """C's pow, as the devices' and numpy's power of arrays: numpy's power of two scalars
    takes an exponent of 0.5 as sqrt, so (-inf) ** 0.5 was NaN, not inf."""
    r = np.power(np.atleast_1d(a), np.atleast_1d(b))
    return r[0] if np.ndim(a) == 0 and np.ndim(b) == 0 else r


def _gelu(x, dtype):
    f = float(x)
    return _NP[dtype](0.5 * f * math.erfc(-f * 0.7071067811865476))


def _erf(x, dtype):
    return _NP[dtype](math.erf(float(x)))


def _ftz(x):
    """`x` with a subnormal value flushed to a zero of its sign (fast_exp2)."""
    return x if not 0 < abs(x) < np.finfo(x.dtype).tiny else x * 0


def _fmod(a, b, dtype):
    if dtype in _INT:
        return _trem(a, b, dtype)
    return np.fmod(a, b)


def _fma(a, b, c):
    """a * b + c rounded once to their dtype. Narrower than f64: the product is exact in f64
    and the sum rounded to odd there (TwoSum's error breaks an even result's tie), which
    rounds to the nearest in the narrower type exactly; f64: as a fraction."""
    t = type(a)
    p, z = float(a) * float(b), float(c)
    if not (math.isfinite(p) and math.isfinite(z)):
        return a * b + c
    if t is not np.float64:
        s = p + z
        back = s - p
        err = (p - (s - back)) + (z - back)
        if err != 0 and _F64_BITS.unpack(_F64.pack(s))[0] % 2 == 0:
            s = math.nextafter(s, math.copysign(math.inf, err))
        return t(s)
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(z)
    if exact == 0:      # a * b is -c exactly: the product and sum give the zero's sign
        return a * b + c
    try:
        return t(float(exact))      # (int / int: rounded to the nearest f64)
    except OverflowError:           # past the largest f64
        return a * b + c


_F64, _F64_BITS = struct.Struct("<d"), struct.Struct("<Q")


def _differ(a, b) -> bool:
    """Whether two values (scalars or vectors) differ (NaN differs from everything)."""
    return bool(np.any(a != b))


def _dot(a, b):
    """The scalar product of two vectors, summed lane by lane in their dtype."""
    r = a[0] * b[0]
    for k in range(1, a.shape[0]):
        r = r + a[k] * b[k]
    return r


def _combine(op: str):
    if op == "+":
        return lambda a, b: a + b
    if op == "*":
        return lambda a, b: a * b
    if op == "max":
        return _max
    if op == "min":
        return _min
    if op == "fmax":
        return np.fmax
    if op == "and":
        return lambda a, b: bool(a) and bool(b)
    if op == "or":
        return lambda a, b: bool(a) or bool(b)
    raise EmulatorError(f"unknown reduction {op!r}")


def _identity(op: str, dtype: str):
    if op in ("and", "or"):
        return op == "and"
    if op == "+":
        return typed(0, dtype)
    if op == "*":
        return typed(1, dtype)
    if dtype in _FLOAT:
        return typed(float("-inf") if op in ("max", "fmax") else float("inf"), dtype)
    lo, hi = _int_range(dtype)
    return typed(lo if op == "max" else hi, dtype)


def _butterfly(values: list, width: int, fn, identity):
    """The all-reduction of `values` (at most `width`) in shuffle-xor order."""
    v = list(values) + [identity] * (width - len(values))
    o = width // 2
    while o:
        v = [fn(v[i], v[i ^ o]) for i in range(width)]
        o //= 2
    return v[0]


# -------------------------------------------------------------------- the translator

_MAX_DEPTH = 48                     # deeper expressions are outlined into lambdas

_BAR, _BLOCK, _WARP, _MMA, _LDSM, _WGMMA, _NAMED, _MBWAIT = 0, 1, 2, 3, 4, 5, 6, 7  # what a thread yields: (kind, point, value)
_WARP_STEPS = (_WARP, _MMA, _LDSM)                  # what every lane of a warp reaches together

_UNARY_NP = {"sin", "cos", "tan", "exp", "exp2", "log", "log2", "sqrt", "floor", "ceil",
             "tanh", "sinh", "cosh"}
_ARITH = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


class _Var:
    __slots__ = ("py", "dtype", "mutable", "kind", "count", "space", "name", "writable")

    def __init__(self, py, dtype, kind, mutable=False, count=0, space="", name="",
                 writable=False):
        self.py, self.dtype, self.kind, self.mutable = py, dtype, kind, mutable
        self.count, self.space, self.name, self.writable = count, space, name, writable


class _Translator:
    """One kernel as the source of a generator function `_thread(_t, _b, _sh, _B)`."""

    def __init__(self, kernel: ir.Kernel, races: bool, poison: bool):
        self.kernel = kernel
        self.races = races
        self.poison = poison
        self.ns: dict = {}              # constants the source refers to
        self.lines: list[str] = []
        self.scopes: list[dict] = [{}]
        self.n = 0
        self.points: list[tuple] = []   # yield points: (kind, op, dtype, line, what)
        self.shared: list[tuple] = []   # (dtype, count, name) per shared Array
        # (base byte, bytes, dtype) per shared Array: its place in the block's shared memory,
        # in declaration order, each start aligned as the Array says (warpgroup MMAs address it)
        self.shared_layout: list[tuple] = []
        self.axes: dict = {}            # (axis, dtype) -> py name
        self.params: dict = {}          # name -> Param
        self.line = 0
        self.uses_global = False

    # ---- names and constants
    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"_{stem}{self.n}"

    def const(self, value, stem="k") -> str:
        name = self.fresh(stem)
        self.ns[name] = value
        return name

    def fail(self, msg: str):
        where = f" (line {self.line})" if self.line else ""
        raise EmulatorError(f"kernel `{self.kernel.name}`{where}: {msg}")

    def lookup(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # ---- entry
    def translate(self, param_values: dict) -> str:
        for p in self.kernel.params:
            self.params[p.name] = p
            if p.kind in ("buffer", "scratch"):
                arr = param_values[p.name]
                py = self.const(arr, "a")
                var = _Var(py, p.dtype, "array", count=len(arr), space="global", name=p.name,
                           writable=p.writable or p.kind == "scratch")
                if self.races and var.writable:
                    self.uses_global = True
                    self.ns[py + "_w"] = None        # set per launch: the writer tracker
                self.scopes[0][p.name] = var
            elif p.kind in ("scalar", "size"):
                self.scopes[0][p.name] = _Var(None, p.dtype, "param", name=p.name)
                self.ns.setdefault("_pv", {})[p.name] = param_values[p.name]
                if p.kind == "size":
                    self.ns.setdefault("_sizes", set()).add(p.name)
            elif p.kind == "tensormap":
                self.scopes[0][p.name] = _Var(self.const(param_values[p.name], "m"), p.dtype,
                                              "tensormap", name=p.name)
            else:
                self.fail(f"parameter `{p.name}` has an unknown kind {p.kind!r}")
        body: list[str] = []
        self.lines = body
        # registers a warpgroup MMA reads as A: the thread may not write them while it is in flight
        self.a_regs = {n.a for n in ir.walk(self.kernel.body) if isinstance(n, ir.WarpgroupMma) and n.a_regs}
        self.block(self.kernel.body, 1)
        head = ["def _thread(_t, _b, _sh, _B):", "    if 0:", "        yield",
                "    _P = _AsyncCopies()", "    _W = _WgmmaInFlight()"]
        head += [f"    {py} = {expr}" for expr, py in self.axes.values()]
        if self.uses_global:
            head.append("    _g = _b * _B.threads + _t")
        return "\n".join(head + body + ["    return"]) + "\n"

    # ---- statements
    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def block(self, stmts, depth: int):
        start = len(self.lines)
        self.scopes.append({})
        for s in stmts:
            self.stmt(s, depth)
        self.scopes.pop()
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def stmt(self, s, depth: int):
        self.line = getattr(s, "line", 0) or self.line
        pre: list[str] = []
        if isinstance(s, Decl):
            if s.value is not None:
                self.check(s.value.dtype == s.dtype,
                           f"`{s.name}` of {s.dtype} declared with a {s.value.dtype} value")
                value = self.expr(s.value, pre)
            else:
                value = self.const(_poisoned(s.dtype, 1, self.poison)[0]) if ir.lanes_of(s.dtype) > 1 \
                    else self.const(_poison(s.dtype) if self.poison else typed(0, s.dtype))
            py = self.fresh("v")
            self.scopes[-1][s.name] = _Var(py, s.dtype, "local", mutable=s.mutable, name=s.name)
            self.flush(pre, depth)
            self.emit(depth, f"{py} = {value}")
        elif isinstance(s, Set):
            var = self.lookup(s.name)
            if var is None or var.kind != "local":
                self.fail(f"assignment to `{s.name}`, which is not a local")
            self.check(var.mutable, f"assignment to `{s.name}`, declared immutable")
            self.check(s.value.dtype == var.dtype,
                       f"`{s.name}` of {var.dtype} assigned a {s.value.dtype} value")
            value = self.expr(s.value, pre)
            self.flush(pre, depth)
            self.emit(depth, f"{var.py} = {value}")
        elif isinstance(s, (Store, Atomic)):
            self.store(s, depth)
        elif isinstance(s, For):
            var = _Var(self.fresh("i"), s.dtype, "loop", name=s.var)
            for part, e in (("start", s.start), ("stop", s.stop), ("step", s.step)):
                self.check(e.dtype == s.dtype,
                           f"loop `{s.var}` of {s.dtype} has a {e.dtype} {part}")
            start = self.expr(s.start, pre)
            self.flush(pre, depth)
            self.emit(depth, f"{var.py} = {start}")
            stop = self.expr(s.stop, pre)
            step = self.expr(s.step, pre)
            self.flush(pre, depth)
            st = self.fresh("s")
            self.emit(depth, f"{st} = {step}")
            self.emit(depth, f"if not {st} > 0: _bad('loop `{s.var}` has a step of ' + str({st}))")
            self.emit(depth, f"while {var.py} < {stop}:")
            self.scopes.append({s.var: var})
            self.block(s.body, depth + 1)
            step = self.expr(s.step, pre)
            self.flush(pre, depth + 1)
            self.emit(depth + 1, f"{var.py} = {var.py} + {step}")
            self.scopes.pop()
        elif isinstance(s, If):
            self.check(s.cond.dtype == "bool", f"an if on a {s.cond.dtype} condition")
            cond = self.expr(s.cond, pre)
            self.flush(pre, depth)
            self.emit(depth, f"if {cond}:")
            self.block(s.then, depth + 1)
            if s.orelse:
                self.emit(depth, "else:")
                self.block(s.orelse, depth + 1)
        elif isinstance(s, Barrier):
            point = len(self.points)
            self.points.append((_BAR, None, None, self.line, "a barrier", 0))
            self.emit(depth, f"yield ({_BAR}, {point}, None)")
        elif isinstance(s, ir.NamedBarrier):
            self.check(s.threads % 32 == 0 and s.threads > 0,
                       f"a named barrier of {s.threads} threads, not whole warps of 32")
            bid = self.expr(s.id, pre)
            self.flush(pre, depth)
            point = len(self.points)
            self.points.append((_NAMED, None, None, self.line, "a named barrier", 0))
            self.emit(depth, f"yield ({_NAMED}, {point}, (int({bid}), {int(s.threads)}, {bool(s.arrive)}))")
        elif isinstance(s, ir.Copy):
            # element by element (each access checked); the offsets must be multiples of
            # the count, as the vector access of a device needs
            for e in (s.dst_index, s.src_index):
                off = self.expr(e, pre)
                self.flush(pre, depth)
                self.emit(depth, f"if ({off}) % {s.count}: _bad('a vector copy of {s.count} at an "
                                 f"offset that is not a multiple of it: ' + str({off}))")
            for w in range(s.count):
                i = ir.Lit(w, s.dst_index.dtype)
                j = ir.Lit(w, s.src_index.dtype)
                self.stmt(Store(s.dst, Bin("+", s.dst_index, i, i.dtype),
                                Load(s.src, Bin("+", s.src_index, j, j.dtype), s.dtype),
                                None, s.line), depth)
        elif isinstance(s, ir.Convert):
            # a pair rounded element by element (cvt.rn: nearest, ties to even, as Cast)
            self.check(s.dtype in ("f16", "bf16") and self.array(s.src, False).dtype == "f32"
                       and self.array(s.dst, True).dtype == s.dtype,
                       f"a conversion of `{s.src}` into `{s.dst}`: f32 into f16 or bf16")
            for e in (s.dst_index, s.src_index):
                off = self.expr(e, pre)
                self.flush(pre, depth)
                self.emit(depth, f"if ({off}) % {s.count}: _bad('a packed conversion of {s.count} at "
                                 f"an offset that is not a multiple of it: ' + str({off}))")
            for w in range(s.count):
                i, j = ir.Lit(w, s.dst_index.dtype), ir.Lit(w, s.src_index.dtype)
                self.stmt(Store(s.dst, Bin("+", s.dst_index, i, i.dtype),
                                Cast(Load(s.src, Bin("+", s.src_index, j, j.dtype), "f32"), s.dtype),
                                None, s.line), depth)
        elif isinstance(s, ir.AsyncCopy):
            self.async_copy(s, depth)
        elif isinstance(s, ir.AsyncCommit):
            self.emit(depth, "_P.commit()")
        elif isinstance(s, ir.AsyncWait):
            self.check(s.pending >= 0, f"an async wait for {s.pending} pending groups")
            self.emit(depth, f"_P.wait({int(s.pending)})")
        elif isinstance(s, ir.Mma):
            self.mma(s, depth)
        elif isinstance(s, ir.MatrixLoad):
            self.matrix_load(s, depth)
        elif isinstance(s, ir.WarpgroupMma):
            self.wgmma(s, depth)
        elif isinstance(s, ir.WarpgroupCommit):
            self.emit(depth, "_W.commit()")
        elif isinstance(s, ir.WarpgroupWait):
            self.check(s.pending >= 0, f"a warpgroup wait for {s.pending} pending groups")
            self.emit(depth, f"_W.wait({int(s.pending)})")
        elif isinstance(s, ir.ProxyFence):     # this thread's writes become the MMAs' to read
            self.emit(depth, "for _u in _B.tracks: _u[3][_u[3] == _t] = -1" if self.races else "pass")
        elif isinstance(s, ir.WarpgroupFence):
            pass                        # an ordering the emulator's sequential threads keep
        elif isinstance(s, (ir.Mbarrier, ir.TensorLoad)):
            self.mbarrier(s, depth)
        elif isinstance(s, ir.SetMaxRegisters):
            self.check(0 < s.count <= 255 and s.count % 8 == 0, f"setmaxnreg {s.count}")
        elif isinstance(s, Array):
            if s.name in self.scopes[-1]:
                self.fail(f"array `{s.name}` declared twice")
            py = self.fresh("a")
            if s.space == "shared":
                self.emit(depth, f"{py} = _sh[{len(self.shared)}]")
                if self.races:
                    self.emit(depth, f"{py}_r = _B.tracks[{len(self.shared)}]")
                self.shared.append((s.dtype, int(s.count), s.name))
                end = self.shared_layout[-1][0] + self.shared_layout[-1][1] if self.shared_layout else 0
                self.check(s.align >= 1 and s.align & (s.align - 1) == 0, f"shared `{s.name}` aligned to {s.align}")
                base = -(-end // max(16, s.align)) * max(16, s.align)
                if s.alias:         # its own storage here, at the other array's place
                    base = next(b for (_, _, n), (b, _, _) in zip(self.shared, self.shared_layout)
                                if n == s.alias)
                size = int(s.count) * _bytes(ir.element_of(s.dtype)) * ir.lanes_of(s.dtype)
                self.shared_layout.append((base, size, s.dtype))
                self.ns[py + "_base"] = base
            elif s.space == "local":
                self.emit(depth, f"{py} = _local({s.dtype!r}, {int(s.count)})")
            else:
                self.fail(f"array `{s.name}` in an unknown space {s.space!r}")
            self.scopes[-1][s.name] = _Var(py, s.dtype, "array", count=int(s.count),
                                           space=s.space, name=s.name, writable=True)
        else:
            self.fail(f"unknown statement {type(s).__name__}")

    def mma(self, s: ir.Mma, depth: int):
        """A warp step: each lane yields its A, B and C elements; the block scheduler
        multiplies the warp's tiles (`_mma_tiles`) and sends each lane its C back."""
        tf32 = s.dtype == "tf32"
        self.check((tuple(s.shape), s.dtype) in (((16, 8, 16), "f16"), ((16, 8, 16), "bf16"),
                                                 ((16, 8, 8), "tf32")),
                   f"an MMA of {s.dtype} m{s.shape[0]}n{s.shape[1]}k{s.shape[2]}")
        pre: list[str] = []
        parts = []
        ab = "f32" if tf32 else s.dtype
        for name, index, count, dtype in ((s.a, s.a_index, 4 if tf32 else 8, ab),
                                          (s.b, s.b_index, 2 if tf32 else 4, ab),
                                          (s.c, s.c_index, 4, "f32")):
            self.check(self.array(name, False).dtype == dtype,
                       f"an MMA operand `{name}` that is not {dtype}")
            parts.append("(" + ", ".join(
                self.expr(Load(name, Bin("+", index, Lit(w, index.dtype), index.dtype), dtype), pre)
                for w in range(count)) + ",)")
        point = len(self.points)
        self.points.append((_MMA, None, s.dtype, self.line, "a warp MMA", 0))
        got = self.fresh("m")
        self.flush(pre, depth)
        self.emit(depth, f"{got} = yield ({_MMA}, {point}, ({', '.join(parts)}))")
        c = self.array(s.c, True)
        for w in range(4):
            off = self.expr(Bin("+", s.c_index, Lit(w, s.c_index.dtype), s.c_index.dtype), pre)
            self.flush(pre, depth)
            self.emit(depth, f"{self.access(c, True)}{off}, {got}[{w}])")

    def wgmma(self, s: ir.WarpgroupMma, depth: int):
        """A warpgroup step: each thread yields its accumulators (those of steps in flight as
        they will land) and the two descriptors; the block scheduler multiplies
        (wgmma_model.multiply) and the results land at a `WarpgroupWait`."""
        self.check(s.n in ir.WGMMA_ANY_N and s.dtype in ir.WGMMA_K and
                   (s.dtype != "tf32" or ((s.a_regs or s.a_kmajor) and s.b_kmajor)),
                   f"a warpgroup MMA m64n{s.n}k{ir.WGMMA_K.get(s.dtype)} of {s.dtype}")
        held = "f32" if s.dtype == "tf32" else s.dtype      # the element type of its operands
        pre: list[str] = []
        descs, reads = [], "None"
        if s.a_regs:            # A's fragment: the thread's 8 (tf32: 4) elements, as an MMA's
            reads = f"({self.array(s.a, False).py}, int({self.expr(s.a_index, pre)}), {8 if held != 'f32' else 4})"
            self.check(self.array(s.a, False).space == "local" and self.array(s.a, False).dtype == held,
                       f"a warpgroup MMA's A `{s.a}` in registers that is not a local {held} array")
            descs.append("(" + ", ".join(
                self.expr(Load(s.a, Bin("+", s.a_index, Lit(w, s.a_index.dtype), s.a_index.dtype), held), pre)
                for w in range(8 if held != "f32" else 4)) + ",)")
        for name, index, lbo, sbo in ((s.a, s.a_index, s.a_lbo, s.a_sbo), (s.b, s.b_index, s.b_lbo, s.b_sbo))[s.a_regs:]:
            arr = self.array(name, False)
            self.check(arr.space == "shared" and arr.dtype == held,
                       f"a warpgroup MMA operand `{name}` that is not a shared {held} array")
            off = self.expr(index, pre)
            descs.append(f"_wgdesc({arr.py}_base + ({off}) * {_bytes(held)}, {int(lbo)}, {int(sbo)})")
        descs.append("False" if s.fresh is None else f"bool({self.expr(s.fresh, pre)})")
        c = self.array(s.c, True)
        self.check(c.space == "local" and c.dtype == "f32", f"warpgroup MMA accumulators `{s.c}` not local f32")
        at, got = self.fresh("x"), self.fresh("m")
        ci = self.expr(s.c_index, pre)
        self.flush(pre, depth)
        self.emit(depth, f"{at} = int({ci})")
        point = len(self.points)
        a_major = None if s.a_regs else s.a_kmajor        # None: A in registers
        self.points.append((_WGMMA, (s.n, a_major, s.b_kmajor), s.dtype, self.line, "a warpgroup MMA", 0))
        self.emit(depth, f"{got} = yield ({_WGMMA}, {point}, (_W.values({c.py}, {at}, {s.n // 2}), "
                         f"{', '.join(descs)}))")
        self.emit(depth, f"_W.issue({c.py}, {at}, {got}, {reads})")

    def mbarrier(self, s, depth: int):
        """mbarrier operations and box copies (backends/tma_model.py): a wait yields until the
        block scheduler finds its phase completed."""
        pre: list[str] = []
        bar, at = (s.array, s.index) if isinstance(s, ir.Mbarrier) else (s.bar, s.bar_index)
        arr = self.array(bar, True)
        self.check(arr.space == "shared" and arr.dtype == "u64", f"an mbarrier in `{bar}`, not a shared u64 array")
        i = self.expr(at, pre)
        self.flush(pre, depth)
        key = self.fresh("x")
        self.emit(depth, f"{key} = ({bar!r}, int({i}))")
        self.emit(depth, f"if not 0 <= {key}[1] < {arr.count}: _bad('mbarrier ' + str({key}) + ' outside its array')")
        if isinstance(s, ir.TensorLoad):
            m = self.lookup(s.map)
            self.check(m is not None and m.kind == "tensormap", f"`{s.map}` is not a tensor map parameter")
            dst = self.array(s.dst, True)
            self.check(dst.space == "shared" and dst.dtype == m.dtype,
                       f"a box copy of {m.dtype} into `{s.dst}`, not a shared array of it")
            coords = ", ".join(f"int({self.expr(c, pre)})" for c in s.coords)
            di = self.expr(s.dst_index, pre)
            self.flush(pre, depth)
            tracks = f"{dst.py}_r" if self.races else "None"
            self.emit(depth, f"_B.mbar.load({key}, {m.py}, ({coords},), {dst.py}, {dst.py}_base, int({di}), {tracks})")
        elif s.op == "init":
            self.emit(depth, f"_B.mbar.init({key}, {int(s.count)})")
        elif s.op == "arrive":
            self.emit(depth, f"_B.mbar.arrive({key}, {int(s.tx)})")
        elif s.op == "wait":
            parity = self.expr(s.parity, pre)
            self.flush(pre, depth)
            point = len(self.points)
            self.points.append((_MBWAIT, None, None, self.line, "an mbarrier wait", 0))
            self.emit(depth, f"yield ({_MBWAIT}, {point}, ({key}, int({parity}) % 2))")
        else:
            self.fail(f"an mbarrier {s.op!r}")

    def async_copy(self, s: ir.AsyncCopy, depth: int):
        """The source read now (zeros where the guard is false), the shared elements checked
        for races as written now, the stores queued in the thread's open group."""
        dst, src = self.array(s.dst, True), self.array(s.src, False)
        self.check(dst.space == "shared" and src.space == "global" and dst.dtype == src.dtype == s.dtype,
                   f"an async copy into `{s.dst}` from `{s.src}`: a global {s.dtype} buffer into "
                   "a shared array of it")
        self.check(s.count * _bytes(s.dtype) in (4, 8, 16),
                   f"an async copy of {s.count} {s.dtype} elements (4, 8 or 16 bytes)")
        pre: list[str] = []
        d_off, s_off, vals = self.fresh("x"), self.fresh("x"), self.fresh("v")
        d = self.expr(s.dst_index, pre)
        self.flush(pre, depth)
        self.emit(depth, f"{d_off} = {d}")
        self.emit(depth, f"if {d_off} % {s.count}: _bad('an async copy of {s.count} at an offset "
                         f"that is not a multiple of it: ' + str({d_off}))")
        zero = self.const(typed(0, s.dtype))
        self.emit(depth, f"{vals} = ({zero},) * {s.count}")
        depth_in = depth
        if s.guard is not None:
            self.check(s.guard.dtype == "bool", f"an async copy guarded by a {s.guard.dtype}")
            g = self.expr(s.guard, pre)
            self.flush(pre, depth)
            self.emit(depth, f"if {g}:")
            depth_in = depth + 1
        so = self.expr(s.src_index, pre)
        self.flush(pre, depth_in)
        self.emit(depth_in, f"{s_off} = {so}")
        self.emit(depth_in, f"if {s_off} % {s.count}: _bad('an async copy of {s.count} from an "
                            f"offset that is not a multiple of it: ' + str({s_off}))")
        self.scopes[-1][s_off] = _Var(s_off, s.src_index.dtype, "local", name=s_off)
        reads = ", ".join(self.expr(Load(s.src, Bin("+", ir.Ref(s_off, s.src_index.dtype),
                                                      Lit(w, s.src_index.dtype), s.src_index.dtype),
                                         s.dtype), pre) for w in range(s.count))
        self.flush(pre, depth_in)
        self.emit(depth_in, f"{vals} = ({reads},)")
        if self.races:
            self.emit(depth, f"for _w in range({s.count}): _chks({dst.py}_r, {dst.name!r}, _t, "
                             f"{d_off} + _w)")
        store = self.access(dst, True)
        self.emit(depth, f"_P.copy(lambda _o={d_off}, _v={vals}: [{store}_o + _w, _v[_w]) "
                         f"for _w in range({s.count})])")

    def matrix_load(self, s: ir.MatrixLoad, depth: int):
        """A warp step: each lane yields the row it points at; the block scheduler gives
        each lane its elements of the tiles (`_matrix_rows`)."""
        wide = s.dtype == "f32"         # TF32 fragments: rows of 4 32-bit elements
        self.check(s.count in (1, 2, 4) and s.dtype in ("f16", "bf16", "f32") and not (wide and s.trans),
                   f"an ldmatrix of {s.count} {s.dtype} tiles" + (" transposed" if s.trans else ""))
        src = self.array(s.src, False)
        self.check(src.dtype == s.dtype and src.space == "shared",
                   f"an ldmatrix from `{s.src}`, not a shared {s.dtype} array")
        self.check(self.array(s.dst, True).dtype == s.dtype, f"an ldmatrix into `{s.dst}` of another type")
        pre: list[str] = []
        off = self.fresh("x")
        first = self.expr(s.src_index, pre)
        self.flush(pre, depth)
        self.emit(depth, f"{off} = {first}")
        per = 4 if wide else 8          # elements of a row: 16 bytes
        self.emit(depth, f"if {off} % {per}: _bad('an ldmatrix row at ' + str({off}) + ', not 16-byte aligned')")
        i = ir.Ref(off, s.src_index.dtype)
        self.scopes[-1][off] = _Var(off, s.src_index.dtype, "local", name=off)
        row = ", ".join(self.expr(Load(s.src, Bin("+", i, Lit(w, i.dtype), i.dtype), s.dtype), pre)
                        for w in range(per))
        point = len(self.points)
        self.points.append((_LDSM, s.count, s.trans, self.line, "a warp ldmatrix", 0))
        got = self.fresh("m")
        self.flush(pre, depth)
        self.emit(depth, f"{got} = yield ({_LDSM}, {point}, ({row},))")
        dst = self.array(s.dst, True)
        for w in range(s.count * per // 4):
            at = self.expr(Bin("+", s.dst_index, Lit(w, s.dst_index.dtype), s.dst_index.dtype), pre)
            self.flush(pre, depth)
            self.emit(depth, f"{self.access(dst, True)}{at}, {got}[{w}])")

    def flush(self, pre: list, depth: int):
        for text in pre:
            self.emit(depth, text)
        pre.clear()

    def check(self, ok: bool, msg: str):
        if not ok:
            self.fail(msg)

    def array(self, name: str, write: bool) -> _Var:
        var = self.lookup(name)
        if var is None or var.kind != "array":
            self.fail(f"`{name}` is not a buffer, scratch buffer or array")
        if write and not var.writable:
            self.fail(f"a store to `{name}`, a read-only buffer")
        return var

    def access(self, var: _Var, write: bool) -> str:
        """The helper call prefix that loads or stores `var`, with its race tracker."""
        name = repr(var.name)
        if self.races and var.space == "shared":
            return f"_{'st' if write else 'ld'}s({var.py}, {var.py}_r, {name}, _t, "
        if self.races and var.space == "global" and var.writable:
            return f"_{'st' if write else 'ld'}g({var.py}, {var.py}_w, {name}, _g, _B, "
        return f"_{'st' if write else 'ld'}({var.py}, {name}, "

    def store(self, s, depth: int):
        var = self.array(s.array, True)
        what = "store" if isinstance(s, Store) else "atomic"
        self.check(s.value.dtype == var.dtype,
                   f"a {what} of a {s.value.dtype} value to `{s.array}` of {var.dtype}")
        if isinstance(s, Atomic) and s.op not in ("+", "max", "min"):
            self.fail(f"an atomic {s.op!r}")
        pre: list[str] = []
        if s.guard is not None:
            self.check(s.guard.dtype == "bool", f"a {what} guarded by a {s.guard.dtype}")
            guard = self.expr(s.guard, pre)
            self.flush(pre, depth)
            self.emit(depth, f"if {guard}:")
            depth += 1
        if isinstance(s.index, Checked):
            idx = self.fresh("x")
            index = self.expr(s.index.index, pre)
            extent = self.expr(s.index.extent, pre)
            self.flush(pre, depth)
            self.emit(depth, f"{idx} = {index}")
            self.emit(depth, f"if _inside({idx}, {extent}, {int(s.index.site)}):")
            depth += 1
        else:
            idx = self.expr(s.index, pre)
        value = self.expr(s.value, pre)
        if var.dtype == "bf16":
            value = f"_bf16({value})"
        self.flush(pre, depth)
        if var.name in self.a_regs and var.space == "local":
            self.emit(depth, f"_W.written({var.py}, {idx})")
        if isinstance(s, Store):
            self.emit(depth, f"{self.access(var, True)}{idx}, {value})")
        else:
            fn = {"+": "_add", "max": "_max", "min": "_min"}[s.op]
            self.emit(depth, f"_atomic({var.py}, {var.name!r}, {idx}, {value}, {fn}, "
                             f"{var.dtype == 'bf16'})")

    # ---- expressions: (text, depth)
    def expr(self, e, pre: list) -> str:
        text, _ = self.x(e, pre)
        return text

    def x(self, e, pre: list) -> tuple[str, int]:
        text, depth, _ = self._x(e, pre)
        if depth > _MAX_DEPTH and not any(isinstance(n, Collective) for n in ir.walk(e)):
            name = self.fresh("f")
            pre.append(f"{name} = lambda: {text}")
            return f"{name}()", 1
        return text, depth

    def _x(self, e, pre) -> tuple[str, int, bool]:
        if isinstance(e, Lit):
            return self.const(typed(e.value, e.dtype)), 0, True
        if isinstance(e, Ref):
            var = self.lookup(e.name)
            if var is None:
                self.fail(f"`{e.name}` is neither a local nor a parameter")
            if var.kind == "array":
                self.fail(f"`{e.name}` is an array, used as a value")
            if var.kind == "param":
                # a half scalar arrives in its compute type, f32
                self.check(var.dtype == e.dtype or (var.dtype in ("f16", "bf16")
                                                    and e.dtype == "f32"),
                           f"`{e.name}` of {var.dtype} read as {e.dtype}")
                value = self.ns["_pv"][e.name]
                # a size is compiled in as a literal of its own value, 64-bit where it
                # passes the index type (sizes are 64-bit; a program for every size set
                # refuses such a launch), so it is not wrapped to the parameter's dtype
                value = int(value) if e.name in self.ns.get("_sizes", ()) else typed(value, var.dtype)
                return self.const(typed(float(value), e.dtype) if var.dtype != e.dtype
                                  else value), 0, True
            self.check(var.dtype == e.dtype, f"`{e.name}` of {var.dtype} read as {e.dtype}")
            return var.py, 0, True
        if isinstance(e, Thread):
            if e.axis not in ir.THREAD_AXES:
                self.fail(f"unknown thread axis {e.axis!r}")
            key = (e.axis, e.dtype)
            if key not in self.axes:
                src = {"thread": "_t", "block": "_b", "threads": "_B.threads",
                       "blocks": "_B.blocks", "lane": "_t % _B.warp", "warp": "_t // _B.warp"}
                self.axes[key] = (f"_typed({src[e.axis]}, {e.dtype!r})",
                                  self.fresh("ax"))
            return self.axes[key][1], 0, True
        if isinstance(e, Load):
            var = self.array(e.array, False)
            self.check(e.dtype == var.dtype, f"a {e.dtype} load from `{e.array}` of {var.dtype}")
            wrap = "bool(" if e.dtype == "bool" else "("
            if isinstance(e.index, Checked):
                i, di = self.x(e.index.index, pre)
                n, dn = self.x(e.index.extent, pre)
                zero = self.const(typed(0, e.dtype))
                tmp = self.fresh("x")
                # the index is bound once (an assignment expression), then checked
                text = (f"{wrap}{self.access(var, False)}{tmp}) "
                        f"if _inside(({tmp} := {i}), {n}, {int(e.index.site)}) else {zero})")
                return text, max(di, dn) + 2, False
            i, di = self.x(e.index, pre)
            if ir.lanes_of(e.dtype) > 1:
                wrap = "_np.array("
            return f"{wrap}{self.access(var, False)}{i}))", di + 2, True
        if isinstance(e, Bin):
            return self.bin(e, pre)
        if isinstance(e, Un):
            a, d = self.x(e.a, pre)
            if e.op == "neg":
                self.check(e.a.dtype == e.dtype, f"neg of {e.a.dtype} as {e.dtype}")
                return f"(-{a})", d + 1, True
            if e.op == "not":
                self.check(e.a.dtype == "bool" and e.dtype == "bool", "`not` of a non-bool")
                return f"(not {a})", d + 1, True
            if e.op in ("bitnot", "~"):
                return f"(~{a})", d + 1, True
            self.fail(f"unknown unary op {e.op!r}")
        if isinstance(e, Math):
            return self.math(e, pre)
        if isinstance(e, Cast):
            a, d = self.x(e.a, pre)
            if e.a.dtype == e.dtype and e.dtype != "bf16":
                return a, d, True
            return f"_cast({a}, {e.a.dtype!r}, {e.dtype!r})", d + 1, True
        if isinstance(e, Select):
            self.check(e.cond.dtype == "bool", f"a select on a {e.cond.dtype}")
            self.check(e.a.dtype == e.b.dtype == e.dtype,
                       f"a {e.dtype} select of {e.a.dtype} and {e.b.dtype}")
            c, dc = self.x(e.cond, pre)
            a, da = self.x(e.a, pre)
            b, db = self.x(e.b, pre)
            return f"({a} if {c} else {b})", max(dc, da, db) + 1, True
        if isinstance(e, Checked):
            i, di = self.x(e.index, pre)
            n, dn = self.x(e.extent, pre)
            self.check(e.index.dtype == e.dtype, f"a {e.dtype} Checked of a {e.index.dtype} index")
            zero = self.const(typed(0, e.dtype))
            return (f"_checked({i}, {n}, {int(e.site)}, {zero})", max(di, dn) + 1, False)
        if isinstance(e, InRange):
            self.check(e.dtype == "bool", f"an InRange of {e.dtype}")
            i, di = self.x(e.index, pre)
            n, dn = self.x(e.extent, pre)
            return f"_inside({i}, {n}, {int(e.site)})", max(di, dn) + 1, True
        if isinstance(e, CheckedDiv):
            self.check(e.dtype in _INT and e.a.dtype == e.b.dtype == e.dtype,
                       f"a {e.dtype} CheckedDiv of {e.a.dtype} and {e.b.dtype}")
            self.check(e.op in ("/", "%") or e.op in ("+", "-", "*", "**") and e.dtype in ("i32", "u32")
                       and not e.site_zero, f"a CheckedDiv {e.op!r}")
            a, da = self.x(e.a, pre)
            b, db = self.x(e.b, pre)
            return (f"_cdiv({e.op!r}, {a}, {b}, {int(e.site_zero)}, {int(e.site_overflow)}, "
                    f"{e.dtype!r})", max(da, db) + 1, False)
        if isinstance(e, ir.Vector):
            lanes, el = ir.lanes_of(e.dtype), ir.element_of(e.dtype)
            self.check(lanes > 1 and len(e.parts) in (1, lanes)
                       and all(p.dtype == el for p in e.parts),
                       f"a {e.dtype} vector of {len(e.parts)} parts")
            parts = [self.x(p, pre) for p in e.parts * (lanes // len(e.parts))]
            return (f"_np.array(({', '.join(t for t, _ in parts)},), _np.{numpy_dtype(el)})",
                    max(d for _, d in parts) + 1, True)
        if isinstance(e, ir.Lane):
            self.check(e.dtype == ir.element_of(e.a.dtype) and 0 <= e.lane < ir.lanes_of(e.a.dtype),
                       f"lane {e.lane} of a {e.a.dtype} as {e.dtype}")
            a, d = self.x(e.a, pre)
            return f"{a}[{int(e.lane)}]", d + 1, True
        if isinstance(e, Collective):
            if e.op not in ir.COLLECTIVE_OPS:
                self.fail(f"unknown collective {e.op!r}")
            self.check(e.value.dtype == e.dtype, f"a {e.dtype} collective of {e.value.dtype}")
            kind = {"warp": _WARP, "block": _BLOCK}.get(e.scope)
            if kind is None:
                self.fail(f"a collective over an unknown scope {e.scope!r}")
            v, d = self.x(e.value, pre)
            point = len(self.points)
            if e.width:
                self.check(e.scope == "warp" and e.width & (e.width - 1) == 0,
                           f"a {e.scope} collective over groups of {e.width} lanes")
            self.points.append((kind, e.op, e.dtype, self.line,
                                f"a {e.scope} collective ({e.op})", e.width))
            return f"(yield ({kind}, {point}, {v}))", d + 1, False
        self.fail(f"unknown expression {type(e).__name__}")

    def bin(self, e: Bin, pre):
        a, da = self.x(e.a, pre)
        b, db = self.x(e.b, pre)
        d = max(da, db) + 1
        if e.op in ("and", "or"):
            self.check(e.a.dtype == e.b.dtype == e.dtype == "bool", f"`{e.op}` of non-bools")
            return f"({a} {e.op} {b})", d, True
        if e.op in _COMPARE:
            self.check(e.a.dtype == e.b.dtype and e.dtype == "bool",
                       f"{e.a.dtype} {e.op} {e.b.dtype} as {e.dtype}")
            return f"bool({a} {e.op} {b})", d + 1, True
        if e.op not in _ARITH:
            self.fail(f"unknown binary op {e.op!r}")
        self.check(e.a.dtype == e.b.dtype == e.dtype,
                   f"{e.a.dtype} {e.op} {e.b.dtype} as {e.dtype}")
        if e.op in ("/", "%") and e.dtype in _INT:
            fn = "_tdiv" if e.op == "/" else "_trem"
            return f"{fn}({a}, {b}, {e.dtype!r})", d, True
        if e.op == "%":
            return f"_np.fmod({a}, {b})", d, True
        if e.dtype == "bool" and e.op in ("+", "*"):
            return f"({a} {'or' if e.op == '+' else 'and'} {b})", d, True
        return f"({a} {e.op} {b})", d, True

    def math(self, e: Math, pre):
        fn, dt = e.fn, e.dtype
        if fn not in ir.MATH and fn != "floordiv":
            self.fail(f"unknown math function {fn!r}")
        args = [self.x(a, pre) for a in e.args]
        if fn == "dot":
            self.check(len(e.args) == 2 and e.args[0].dtype == e.args[1].dtype
                       and ir.element_of(e.args[0].dtype) == dt and ir.lanes_of(e.args[0].dtype) > 1,
                       f"a {dt} dot of {', '.join(a.dtype for a in e.args)}")
            return f"_dot({args[0][0]}, {args[1][0]})", max(args[0][1], args[1][1]) + 1, True
        for a in e.args:
            self.check(a.dtype == dt, f"{fn} of a {a.dtype} argument as {dt}")
        d = max((x[1] for x in args), default=0) + 1
        t = [x[0] for x in args]
        one, zero = (self.const(typed(v, dt)) for v in (1, 0))
        is_int = dt in _INT

        def out(text):
            return text, d, True
        if fn in ("min", "max"):
            return out(f"_{fn}({', '.join(t)})")
        if fn == "clamp":
            return out(f"_clamp({t[0]}, {t[1]}, {t[2]})")
        if fn == "relu":
            return out(f"_max({t[0]}, {zero})")
        if fn == "abs":
            return out(f"_np.abs({t[0]})")
        if fn == "ipow":
            return out(f"_ipow({t[0]}, {t[1]}, {dt!r})")
        if fn in ir.WRAPPING:
            return out(f"_wrap(int({t[0]}) {ir.WRAPPING[fn]} int({t[1]}), {dt!r})")
        if fn == ir.WRAPPING_NEG:
            return out(f"_wrap(-int({t[0]}), {dt!r})")
        if fn == "floordiv":
            return out(f"_floordiv({t[0]}, {t[1]}, {dt!r})")
        if fn == "ceildiv":
            return out(f"_ceildiv({t[0]}, {t[1]}, {dt!r})")
        if fn == "fmod":
            return out(f"_fmod({t[0]}, {t[1]}, {dt!r})")
        if fn == "pow2":
            return out(f"({t[0]} * {t[0]})")
        if fn == "fma":
            return out(f"_fma({t[0]}, {t[1]}, {t[2]})")
        if fn == "fmax":
            return out(f"_np.fmax({t[0]}, {t[1]})")
        if fn == "fast_exp2":
            return out(f"_ftz(_np.exp2({t[0]}))")
        if fn == "tf32":
            return out(f"_tf32({t[0]})")
        if is_int and fn in ("floor", "ceil", "round"):
            return out(t[0])
        if is_int and fn == "pow":
            return out(f"_ipow({t[0]}, {t[1]}, {dt!r})")
        if dt not in _FLOAT:
            self.fail(f"{fn} on {dt}")
        if fn in _UNARY_NP:
            return out(f"_np.{fn}({t[0]})")
        if fn == "round":
            return out(f"_np.rint({t[0]})")
        if fn == "rsqrt":
            return out(f"({one} / _np.sqrt({t[0]}))")
        if fn == "sigmoid":
            return out(f"({one} / ({one} + _np.exp(-{t[0]})))")
        if fn == "silu":
            return out(f"({t[0]} / ({one} + _np.exp(-{t[0]})))")
        if fn == "gelu":
            return out(f"_gelu({t[0]}, {dt!r})")
        if fn == "erf":
            return out(f"_erf({t[0]}, {dt!r})")
        if fn == "pow":
            return out(f"_pow({t[0]}, {t[1]})")
        self.fail(f"{fn} on {dt}")


# ------------------------------------------------------------------- runtime helpers


class _Flag:
    __slots__ = ("site", "value")

    def __init__(self):
        self.site = 0
        self.value = 0

    def fail(self, site: int, value):
        if site <= 0:
            raise EmulatorError(f"a check without an error site failed (value {int(value)})")
        if self.site == 0:
            self.site = int(site)
            self.value = int(_wrap(int(value), "i32"))


class _Block:
    """What the threads of one block share: sizes, the barrier epoch, race trackers, the
    threads arrived at each named barrier (id -> [count, threads waiting there])."""
    __slots__ = ("threads", "blocks", "warp", "ep", "tracks", "named", "mbar")

    def __init__(self, threads, blocks, warp):
        self.threads, self.blocks, self.warp = threads, blocks, warp
        self.ep = 0
        self.tracks = []
        self.named = {}


class _AsyncCopies:
    """A thread's asynchronous copies: those since the last commit and the committed groups
    not yet waited for, oldest first; each copy is a function that makes its stores."""
    __slots__ = ("open", "groups")

    def __init__(self):
        self.open, self.groups = [], []

    def copy(self, stores):
        self.open.append(stores)

    def commit(self):
        self.groups.append(self.open)
        self.open = []

    def wait(self, pending: int):
        while len(self.groups) > pending:
            for stores in self.groups.pop(0):
                stores()


class _Race:
    """Race tracking of a launch: the epoch counter and the writers of global buffers."""

    def __init__(self):
        self.epoch = 0

    def next_epoch(self) -> int:
        self.epoch += 1
        return self.epoch


def _shared_tracks(arrays: list, layout: list) -> list:
    """The race trackers of a block's shared arrays, per element: views of one tracker a
    byte of the block's shared memory, each element tracked at its first byte, so an array
    declared over another (`alias`: a staged C over the operand tiles) meets the other's
    accesses where their elements start at the same bytes."""
    def trackers(n):
        return (np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int32),
                np.full(n, -1, np.int64))
    spans = sorted((base, base + size) for base, size, _ in layout)
    if all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])):
        return [trackers(count) for _, count, _ in arrays]      # (no array over another)
    slots = trackers(max(end for _, end in spans))
    out = []
    for (_, count, _), (base, size, _) in zip(arrays, layout):
        step = max(1, size // max(1, count))
        out.append(tuple(a[base:base + count * step:step] for a in slots))
    return out


def _helpers(flag: _Flag, poison: bool, kernel_name: str) -> dict:
    def bad(msg):
        raise EmulatorError(f"kernel `{kernel_name}`: {msg}")

    def outside(name, i, n, what):
        bad(f"{what} `{name}`[{int(i)}] outside its {n} elements, and no Checked covers it")

    def ld(arr, name, i):
        if 0 <= i < arr.shape[0]:
            return arr[int(i)]
        outside(name, i, arr.shape[0], "a load of")

    def st(arr, name, i, v):
        if 0 <= i < arr.shape[0]:
            arr[int(i)] = v
            return
        outside(name, i, arr.shape[0], "a store to")

    def lds(arr, tr, name, t, i):
        if not 0 <= i < arr.shape[0]:
            outside(name, i, arr.shape[0], "a load of")
        i = int(i)
        w, r = tr[0], tr[1]
        if w[i] != -1 and w[i] != t:
            bad(f"data race on shared `{name}`[{i}]: thread {t} reads what thread {w[i]} "
                "wrote with no barrier in between")
        if r[i] == -1:
            r[i] = t
        elif r[i] != t:
            r[i] = -2
        return arr[i]

    def sts(arr, tr, name, t, i, v):
        if not 0 <= i < arr.shape[0]:
            outside(name, i, arr.shape[0], "a store to")
        i = int(i)
        w, r, busy, unfenced = tr
        if busy[i]:
            bad(f"data race on shared `{name}`[{i}]: thread {t} writes what a warpgroup MMA "
                "still reads (before a wgmma.wait_group finds it complete)")
        if w[i] != -1 and w[i] != t and _differ(arr[i], v):
            bad(f"data race on shared `{name}`[{i}]: threads {w[i]} and {t} write it "
                "with no barrier in between")
        if r[i] != -1 and r[i] != t:
            who = "other threads" if r[i] == -2 else f"thread {r[i]}"
            bad(f"data race on shared `{name}`[{i}]: thread {t} writes what {who} read "
                "with no barrier in between")
        w[i] = t
        unfenced[i] = t
        arr[i] = v

    def chks(tr, name, t, i):
        """A shared element thread `t` may write from now on: no other thread of the block
        has read or written it since the last barrier, and none may until the next (it
        counts as written by `t`, whose copy may land at once)."""
        i = int(i)
        w, r, busy, _ = tr
        if busy[i]:
            bad(f"data race on shared `{name}`[{i}]: thread {t} starts an async copy into "
                "what a warpgroup MMA still reads (before a wgmma.wait_group finds it complete)")
        if (w[i] != -1 and w[i] != t) or (r[i] != -1 and r[i] != t):
            who = f"thread {w[i]} wrote" if w[i] != -1 and w[i] != t else (
                "other threads read" if r[i] == -2 else f"thread {r[i]} read")
            bad(f"data race on shared `{name}`[{i}]: thread {t} starts an async copy into "
                f"what {who} with no barrier in between")
        w[i] = t

    def conflict(tr, i, g, B):
        w = tr[0][i]
        return w != -1 and w != g and (w // B.threads != g // B.threads or tr[1][i] == B.ep)

    def ldg(arr, tr, name, g, B, i):
        if not 0 <= i < arr.shape[0]:
            outside(name, i, arr.shape[0], "a load of")
        i = int(i)
        if conflict(tr, i, g, B):
            bad(f"data race on `{name}`[{i}]: global thread {g} reads what global thread "
                f"{tr[0][i]} wrote in the same launch, with no barrier in between")
        return arr[i]

    def stg(arr, tr, name, g, B, i, v):
        if not 0 <= i < arr.shape[0]:
            outside(name, i, arr.shape[0], "a store to")
        i = int(i)
        if conflict(tr, i, g, B) and _differ(arr[i], v):
            bad(f"data race on `{name}`[{i}]: global threads {tr[0][i]} and {g} write "
                "different values in the same launch")
        tr[0][i] = g
        tr[1][i] = B.ep
        arr[i] = v

    def atomic(arr, name, i, v, fn, bf16):
        if not 0 <= i < arr.shape[0]:
            outside(name, i, arr.shape[0], "an atomic on")
        i = int(i)
        r = fn(arr[i], v)
        arr[i] = bf16_round(r) if bf16 else r

    def inside(i, n, site):
        if 0 <= i < n:
            return True
        flag.fail(site, i)
        return False

    def checked(i, n, site, zero):
        if 0 <= i < n:
            return i
        flag.fail(site, i)
        return zero

    def cdiv(op, a, b, site_zero, site_overflow, dtype):
        ai, bi = int(a), int(b)
        if op in ("+", "-", "*", "**"):     # i64 (u64) arithmetic held in i32 (u32): past it, the site fails
            exact = ai + bi if op == "+" else ai - bi if op == "-" else ai * bi if op == "*" \
                else ai ** bi
            if _wrap(exact, dtype) != exact:
                flag.fail(site_overflow, 0)
            return _wrap(exact, dtype)
        if bi == 0:
            flag.fail(site_zero, ai)
            return _NP[dtype](0)
        if bi == -1 and dtype[0] == "i" and ai == _int_range(dtype)[0] and (site_overflow
                                                                           or op == "/"):
            flag.fail(site_overflow, ai)        # MIN % -1 without a site is 0, as in C on GPUs
            return _NP[dtype](0)
        q = _trunc_div(ai, bi)
        return _wrap(q if op == "/" else ai - bi * q, dtype)

    def local(dtype, count):
        return _poisoned(dtype, count, poison)

    return {"_np": np, "_bad": bad, "_ld": ld, "_st": st, "_lds": lds, "_sts": sts,
            "_ldg": ldg, "_stg": stg, "_atomic": atomic, "_inside": inside,
            "_checked": checked, "_cdiv": cdiv, "_local": local, "_typed": typed,
            "_cast": _cast, "_bf16": bf16_round, "_tdiv": _tdiv, "_trem": _trem,
            "_floordiv": _floordiv, "_ceildiv": _ceildiv, "_ipow": _ipow, "_wrap": _wrap, "_max": _max,
            "_min": _min, "_clamp": _clamp, "_gelu": _gelu, "_pow": _pow, "_erf": _erf, "_ftz": _ftz, "_tf32": tf32_round, "_fmod": _fmod, "_fma": _fma,
            "_add": lambda a, b: a + b, "_chks": chks, "_AsyncCopies": _AsyncCopies, "_dot": _dot,
            "_WgmmaInFlight": wgmma_model.InFlight, "_wgdesc": wgmma_model.descriptor}


# ---------------------------------------------------------------------- the emulator

_DONE = None


class Emulator:
    """Runs launch-IR programs on the CPU.

    warp: the threads a warp collective combines (32 for CUDA, a subgroup size for WebGPU);
    races: report data races on shared and global memory; poison: uninitialised memory
    (shared, local and scratch arrays, locals declared without a value) starts as NaN or
    0x5A bytes instead of zeros.
    """

    def __init__(self, warp: int = 32, races: bool = True, poison: bool = True):
        if warp < 1 or warp & (warp - 1):
            raise ValueError(f"the warp size must be a power of two, not {warp}")
        self.warp = warp
        self.races = races
        self.poison = poison

    def run(self, program: ir.Program, buffers: dict, scalars: dict | None = None,
            sizes: dict | None = None) -> tuple[int, int]:
        scalars, sizes = dict(scalars or {}), dict(sizes or {})
        env = {**scalars, **sizes}
        env.update({_user_name(k): v for k, v in env.items() if _user_name(k) not in env})
        self._check_sites(program)
        flat = {}
        kernels = {k.name: k for k in program.kernels}
        for k in program.kernels:
            for p in k.params:
                if p.kind == "buffer":
                    flat[p.name] = self._buffer(p, buffers)
        for s in program.scratch:
            count = _host(s.count, env, f"the size of scratch `{s.name}`")
            if count < 0:
                raise EmulatorError(f"scratch `{s.name}` of {count} elements")
            flat[s.name] = _poisoned(s.dtype, count, self.poison)
        for m in program.tensor_maps:
            where = f"tensor map `{m.name}`"
            flat[m.name] = tma_model.TensorMap(flat[m.buffer], m.dtype, [_host(d, env, where) for d in m.dims],
                                               [_host(d, env, where) for d in m.strides], m.box)
        flag = _Flag()
        with np.errstate(all="ignore"):
            for launch in program.launches:
                kernel = kernels.get(launch.kernel)
                if kernel is None:
                    raise EmulatorError(f"a launch of `{launch.kernel}`, which is no kernel "
                                        f"of `{program.name}`")
                self._launch(kernel, launch, flat, scalars, sizes, env, flag)
        return flag.site, flag.value

    @staticmethod
    def _check_sites(program: ir.Program):
        n = len(program.sites)
        for k in program.kernels:
            for e in ir.walk(k.body):
                if isinstance(e, (Checked, InRange)):
                    used = [e.site]
                elif isinstance(e, CheckedDiv):
                    used = [s for s in (e.site_zero, e.site_overflow) if s]
                else:
                    continue
                for site in used:
                    if not 0 < site <= n:
                        raise EmulatorError(f"kernel `{k.name}` checks against error site "
                                            f"{site}; the program has {n} sites")

    def _buffer(self, p: ir.Param, buffers: dict) -> np.ndarray:
        arr = _given(buffers, p.name)
        if arr is _MISSING:
            raise EmulatorError(f"no buffer given for `{p.name}`")
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"buffer `{p.name}` must be a numpy array, not {type(arr).__name__}")
        want = numpy_dtype(p.dtype)
        if arr.dtype != want:
            raise TypeError(f"buffer `{p.name}` of {p.dtype} must be a {want} array, "
                            f"not {arr.dtype}")
        if p.writable and not arr.flags.c_contiguous:
            raise TypeError(f"writable buffer `{p.name}` must be C-contiguous")
        return arr.reshape(-1)

    def _launch(self, kernel, launch, flat, scalars, sizes, env, flag):
        if launch.block != kernel.block:
            raise EmulatorError(f"kernel `{kernel.name}` is written for blocks of "
                                f"{kernel.block} threads, launched with {launch.block}")
        grid = _host(launch.grid, env, f"the grid of `{kernel.name}`")
        if grid < 0:
            raise EmulatorError(f"kernel `{kernel.name}` launched on {grid} blocks")
        values = {}
        for p in kernel.params:
            if p.kind in ("buffer", "scratch"):
                if p.name not in flat:
                    raise EmulatorError(f"kernel `{kernel.name}` takes scratch `{p.name}`, "
                                        "which the program does not allocate")
                values[p.name] = flat[p.name]
            elif p.kind == "tensormap":
                values[p.name] = flat[p.name]
            elif p.kind in ("scalar", "size"):
                v = _given(sizes, p.name)
                if v is _MISSING and p.kind == "scalar":
                    v = _given(scalars, p.name)
                if v is _MISSING:
                    raise EmulatorError(f"no value given for {p.kind} `{p.name}`")
                values[p.name] = v
        tr = _Translator(kernel, self.races, self.poison)
        source = tr.translate(values)
        ns = dict(_helpers(flag, self.poison, kernel.name))
        ns.update(tr.ns)
        if tr.uses_global:
            for name, var in self._globals(tr):
                ns[var.py + "_w"] = (np.full(len(values[name]), -1, np.int64),
                                     np.zeros(len(values[name]), np.int64))
        filename = f"<launch-IR kernel {kernel.name}>"
        # tracebacks through the translated kernel show its Python lines
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            code = compile(source, filename, "exec")
        except (SyntaxError, RecursionError) as exc:      # pragma: no cover - a translator bug
            raise EmulatorError(f"kernel `{kernel.name}` could not be translated: {exc}")
        exec(code, ns)
        fn = ns["_thread"]
        race = _Race()
        for b in range(grid):
            self._block(fn, tr, kernel, b, grid, race)

    @staticmethod
    def _globals(tr):
        for name, var in tr.scopes[0].items():
            if var.kind == "array" and var.space == "global" and var.writable:
                yield name, var

    def _block(self, fn, tr: _Translator, kernel, b: int, grid: int, race: _Race):
        n = kernel.block
        B = _Block(n, grid, self.warp)
        B.mbar = tma_model.Mbarriers(kernel.name)
        B.ep = race.next_epoch()
        shared = [_poisoned(dt, count, self.poison) for dt, count, _ in tr.shared]
        if self.races:
            # (writer, reader) since the last barrier, the warpgroup MMAs in flight that read
            # the element (wgmma_model.multiply), and its writer since that thread's last
            # fence.proxy.async (what a warpgroup MMA may not read yet)
            B.tracks = _shared_tracks(tr.shared, tr.shared_layout)
        gens = [fn(t, b, shared, B) for t in range(n)]
        ev = [self._step(g, None) for g in gens]
        W = self.warp
        points = tr.points
        while True:
            # warp collectives: each warp whose threads all wait at the same one goes on
            progress = True
            while progress:
                progress = False
                for lo in range(0, n, W):
                    hi = min(n, lo + W)
                    e0 = ev[lo]
                    if e0 is _DONE or e0[0] not in _WARP_STEPS:
                        continue
                    if not all(ev[t] is not _DONE and ev[t][0] == e0[0] and ev[t][1] == e0[1]
                               for t in range(lo, hi)):
                        continue
                    if e0[0] == _MMA:
                        rs = _mma_tiles([ev[t][2] for t in range(lo, hi)], kernel.name,
                                        points[e0[1]][2] == "tf32")
                    elif e0[0] == _LDSM:
                        _, count, trans, _, _, _ = points[e0[1]]
                        rs = _matrix_rows([ev[t][2] for t in range(lo, hi)], count, trans,
                                          kernel.name)
                    else:
                        _, op, dt, _, _, width = points[e0[1]]
                        g = min(width or W, W)      # lanes reduced together
                        rs = [_butterfly([ev[t][2] for t in range(at, min(hi, at + g))], g,
                                         _combine(op), _identity(op, dt))
                              for at in range(lo, hi, g) for _ in range(at, min(hi, at + g))]
                    for t in range(lo, hi):
                        ev[t] = self._step(gens[t], rs[t - lo])
                    progress = True
                progress = self._warpgroups(gens, ev, tr, kernel, shared, B) or progress
                progress = self._named(gens, ev, B) or progress
                progress = self._mbarrier_waits(gens, ev, B) or progress
            stuck = [t for t, e in enumerate(ev) if e is not _DONE and e[0] == _MBWAIT]
            if stuck:
                raise EmulatorError(f"kernel `{kernel.name}`: {_ranges(stuck)} of block {b} "
                                    "wait on mbarriers whose phase never completes (a deadlock)")
            for lo in range(0, n, 4 * W):       # a warpgroup MMA no more threads can reach
                hi = min(n, lo + 4 * W)
                if any(ev[t] is not _DONE and ev[t][0] == _WGMMA for t in range(lo, hi)):
                    self._diverged(kernel, b, ev, range(lo, hi), points,
                                   f"warpgroup {lo // (4 * W)} of block {b}")
            for lo in range(0, n, W):
                hi = min(n, lo + W)
                if any(ev[t] is not _DONE and ev[t][0] in _WARP_STEPS for t in range(lo, hi)):
                    self._diverged(kernel, b, ev, range(lo, hi), points,
                                   f"warp {lo // W} of block {b}")
            if all(e is _DONE for e in ev):
                return
            e0 = ev[0]
            if e0 is _DONE or any(e is _DONE or e[1] != e0[1] for e in ev):
                self._diverged(kernel, b, ev, range(n), points, f"block {b}")
            kind, point, _ = e0
            if kind == _BAR:
                r = None
            else:
                _, op, dt, _, _, _ = points[point]
                fn2, ident = _combine(op), _identity(op, dt)
                partial = [_butterfly([e[2] for e in ev[lo:lo + W]], W, fn2, ident)
                           for lo in range(0, n, W)]
                while len(partial) > 1:
                    partial = [_butterfly(partial[lo:lo + W], W, fn2, ident)
                               for lo in range(0, len(partial), W)]
                r = partial[0]
            # a barrier (block collectives hold barriers) starts a new epoch
            B.ep = race.next_epoch()
            for w, rd, *_ in B.tracks:
                w.fill(-1)
                rd.fill(-1)
            for t in range(n):
                ev[t] = self._step(gens[t], r)

    def _named(self, gens, ev, B) -> bool:
        """Threads at a named barrier count towards it once (`ir.NamedBarrier`): one that only
        arrives goes on, one that waits goes on once the barrier's count of threads arrived
        (the count then starts again). What its threads accessed before is ordered before
        what they access after (PTX bar.sync): their entries leave the race trackers (an
        element several threads read leaves too, as the trackers keep no list of them)."""
        moved = False
        for t, e in enumerate(ev):
            if e is _DONE or e[0] != _NAMED or e[2] is None:
                continue
            bid, count, arrive = e[2]
            if not 1 <= bid <= 15:
                raise EmulatorError(f"named barrier {bid}: the hardware has 1 to 15 beside barrier 0")
            arrived = B.named.setdefault(bid, [0, [], count, []])
            if arrived[2] != count:
                raise EmulatorError(f"named barrier {bid} used with {arrived[2]} and {count} threads")
            arrived[0] += 1
            arrived[3].append(t)
            if arrive:
                ev[t] = self._step(gens[t], None)
            else:
                ev[t] = (_NAMED, e[1], None)        # counted, waiting
                arrived[1].append(t)
            moved = True
            if arrived[0] == count:
                waiting, met, arrived[0], arrived[1], arrived[3] = arrived[1], arrived[3], 0, [], []
                for w_, r_, *_ in B.tracks:
                    w_[np.isin(w_, met)] = -1
                    r_[np.isin(r_, met + [-2])] = -1
                for w in waiting:
                    ev[w] = self._step(gens[w], None)
        return moved

    def _mbarrier_waits(self, gens, ev, B) -> bool:
        """Threads waiting on an mbarrier go on once the phase they wait for completed."""
        moved = False
        # the last threads first: a block's warps run in no set order, and a protocol that
        # holds only where the first ones (a producer) run ahead must fail here
        for t in reversed(range(len(ev))):
            e = ev[t]
            while e is not _DONE and e[0] == _MBWAIT and B.mbar.passed(*e[2]):
                e = ev[t] = self._step(gens[t], None)
                moved = True
        return moved

    def _warpgroups(self, gens, ev, tr, kernel, shared, B) -> bool:
        """Each warpgroup (four warps) whose threads all wait at the same warpgroup MMA goes
        on with its results (one that no more of its threads can reach: `_block` reports)."""
        n, G, moved = len(ev), 4 * self.warp, False
        for lo in range(0, n, G):
            hi = min(n, lo + G)
            at = [ev[t] for t in range(lo, hi) if ev[t] is not _DONE and ev[t][0] == _WGMMA]
            if not at:
                continue
            if len(at) < G or any(e[1] != at[0][1] for e in at):
                continue            # other warps still on their way (or stuck: _block says)
            (wn, a_k, b_k), dtype = tr.points[at[0][1]][1], tr.points[at[0][1]][2]
            try:
                rs = wgmma_model.multiply([e[2] for e in at], wn, (a_k, b_k), dtype, shared,
                                          tr.shared_layout, B.tracks if self.races else None,
                                          kernel.name)
            except wgmma_model.WgmmaError as err:
                raise EmulatorError(str(err)) from None
            for t in range(lo, hi):
                ev[t] = self._step(gens[t], rs[t - lo])
            moved = True
        return moved

    @staticmethod
    def _step(gen, value):
        try:
            return gen.send(value)
        except StopIteration:
            return _DONE
        except tma_model.TmaError as err:
            raise EmulatorError(str(err)) from None

    @staticmethod
    def _diverged(kernel, b, ev, threads, points, group):
        where: dict = {}
        for t in threads:
            e = ev[t]
            if e is _DONE:
                key = "finished"
            else:
                _, _, _, line, what, _ = points[e[1]]
                key = what + (f" at line {line}" if line else "") + f" (point {e[1]})"
            where.setdefault(key, []).append(t)
        parts = [f"{_ranges(ts)} {key}" if key == "finished" else f"{_ranges(ts)} at {key}"
                 for key, ts in where.items()]
        raise EmulatorError(f"kernel `{kernel.name}`: the threads of {group} diverge at a "
                            f"synchronisation point: " + "; ".join(parts))


_MISSING = object()


def _matrix_rows(rows: list, count: int, trans: bool, kernel_name: str) -> list:
    """What each of a warp's 32 lanes receives from an ldmatrix of `count` tiles, given the
    row each lane pointed at (`ir.MatrixLoad`); rows of 4 elements are 32-bit ones."""
    if len(rows) != 32:
        raise EmulatorError(f"kernel `{kernel_name}`: an ldmatrix over a warp of {len(rows)} lanes, not 32")
    tiles = [[rows[8 * i + j] for j in range(8)] for i in range(count)]
    if len(rows[0]) == 4:
        return [tuple(t[lane // 4][lane % 4] for t in tiles) for lane in range(32)]
    out = []
    for lane in range(32):
        r, c = lane // 4, 2 * (lane % 4)
        got = []
        for t in tiles:
            got += [t[c][r], t[c + 1][r]] if trans else [t[r][c], t[r][c + 1]]
        out.append(tuple(got))
    return out


def _mma_tiles(lanes: list, kernel_name: str, tf32: bool = False) -> list:
    """The C elements each of a warp's 32 lanes gets back from an m16n8k16 MMA (m16n8k8 of
    TF32-rounded operands with `tf32`), given each lane's (A, B, C) elements in the layout
    `ir.Mma` describes; products exact, sums in f32."""
    if len(lanes) != 32:
        raise EmulatorError(f"kernel `{kernel_name}`: an MMA over a warp of {len(lanes)} lanes, not 32")
    kd = 8 if tf32 else 16
    a, b = np.zeros((16, kd), np.float64), np.zeros((kd, 8), np.float64)
    c = np.zeros((16, 8), np.float32)
    for lane, (av, bv, cv) in enumerate(lanes):
        g, t = lane // 4, lane % 4
        if tf32:
            for p in range(4):
                a[g + 8 * (p % 2), t + 4 * (p // 2)] = tf32_round(av[p])
            for p in range(2):
                b[t + 4 * p, g] = tf32_round(bv[p])
        else:
            for p in range(4):
                for h in range(2):
                    a[g + 8 * (p % 2), 2 * t + h + 8 * (p // 2)] = av[2 * p + h]
            for p in range(2):
                for h in range(2):
                    b[2 * t + h + 8 * p, g] = bv[2 * p + h]
        for e in range(4):
            c[g + 8 * (e // 2), 2 * t + e % 2] = cv[e]
    d = (a @ b).astype(np.float32) + c
    return [tuple(d[lane // 4 + 8 * (e // 2), 2 * (lane % 4) + e % 2] for e in range(4))
            for lane in range(32)]


def _user_name(name: str) -> str:
    from ..compiler.launch.scalar import user_name
    return user_name(name)


def _given(values: dict, name: str):
    """`values[name]`, where the program names a ZynML `x` as `u_x` (launch/scalar.py) the
    value given for `x`, else _MISSING."""
    if name in values:
        return values[name]
    for k, v in values.items():
        if _user_name(k) == name:
            return v
    return _MISSING


def _host(e, env: dict, what: str) -> int:
    try:
        return int(ir.evaluate(e, env))
    except KeyError as exc:
        raise EmulatorError(f"{what} needs a value for {exc.args[0]!r}") from None


def _ranges(ts: list) -> str:
    """Thread numbers as 'threads 0-3, 7'."""
    out, start, prev = [], ts[0], ts[0]
    for t in ts[1:] + [None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ("threads " if len(ts) > 1 else "thread ") + ", ".join(out)


def run(program: ir.Program, buffers: dict, scalars: dict | None = None,
        sizes: dict | None = None, *, warp: int = 32, races: bool = True,
        poison: bool = True) -> tuple[int, int]:
    """Run `program` on `buffers` (every buffer parameter by name, numpy arrays of its dtype,
    bf16 as float32; writable ones are modified in place) with `scalars` and `sizes` (scalar
    and size parameters by name; a parameter `u_x` of launch/scalar.py may be given as `x`)
    and return the error flag's two words: (first failing site, its value), (0, 0) when
    nothing failed."""
    return Emulator(warp, races, poison).run(program, buffers, scalars, sizes)
