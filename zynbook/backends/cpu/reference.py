"""The CPU reference executor: runs any CIR kernel with numpy, exactly as its loop nest says.

It is the definition every other backend is tested against, so it favours being obviously
right; it is vectorised the way a GPU runs a kernel, which also makes it fast enough:

* A parallel loop becomes a *lane* axis: its variable is an index vector, and every value
  computed below it is an array with one leading axis per open lane (size 1 where it does
  not vary), followed by the value's own axes (tiles: rows, cols).
* Divergent `if`s run both ways under a lane mask; locals assigned under a mask keep their
  old value in inactive lanes; stores write only active lanes.
* A serial loop whose body only accumulates (`acc += e`, `m = max(m, e)`) is evaluated as
  one more, temporary lane axis and reduced along it (in chunks, to bound memory).
* Loads and stores whose indices are affine in the lane variables use numpy views; other
  indices gather and scatter, with bounds checked in the active lanes.
"""
from __future__ import annotations

import math

import numpy as np

from ...compiler import cir
from ...compiler.errflag import column_of, no_index_message, tiles_message
from ...compiler.types import NUMPY_NAMES, int_pow_exponent, is_float
from ...errors import Span, ZynMLRuntimeError

_CHUNK_ELEMENTS = 1 << 23      # temporary-lane evaluation works on at most this many values


def np_dtype(dtype: str):
    return np.dtype(NUMPY_NAMES[dtype])


def bf16_rounded(x) -> np.ndarray:
    """`x` rounded to the nearest bfloat16 (ties to even; a NaN stays NaN), held as float32
    as bf16 values are."""
    a = np.asarray(x, np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    r = np.where(np.isnan(a), (a.view(np.uint32) | 0x00400000) & 0xFFFF0000, r).astype(np.uint32)
    return r.view(np.float32)


class Val:
    """A per-lane value: `arr` has `lanes` leading lane axes, then the value's own axes."""
    __slots__ = ("arr", "lanes")

    def __init__(self, arr, lanes: int):
        self.arr = arr
        self.lanes = lanes

    @property
    def vrank(self) -> int:
        return np.ndim(self.arr) - self.lanes


class LaneIndex:
    """`a * lane_k + b`: the value of a vectorised loop variable (or an affine form of it)."""
    __slots__ = ("axis", "a", "b", "n")

    def __init__(self, axis, a, b, n):
        self.axis, self.a, self.b, self.n = axis, a, b, n

    def materialize(self) -> Val:
        arr = self.b + self.a * np.arange(self.n, dtype=np.int64)
        return Val(arr.reshape((1,) * self.axis + (self.n,)), self.axis + 1)


def as_val(x) -> Val:
    if isinstance(x, Val):
        return x
    if isinstance(x, LaneIndex):
        return x.materialize()
    return Val(x, 0)


def _align(vals: list[Val]) -> list:
    """Arrays of these values reshaped so numpy broadcasting matches lanes with lanes."""
    lanes = max(v.lanes for v in vals)
    vrank = max(v.vrank for v in vals)
    out = []
    for v in vals:
        arr = v.arr
        if (v.lanes == lanes and v.vrank == vrank) or np.ndim(arr) == 0:
            # (a Python scalar stays one: it is weakly typed, so f32 math stays f32)
            out.append(arr)
            continue
        arr = np.asarray(arr)
        shape = arr.shape
        new = shape[:v.lanes] + (1,) * (lanes - v.lanes) + (1,) * (vrank - v.vrank) + shape[v.lanes:]
        out.append(arr.reshape(new))
    return out


def _span_at(spans, k):
    """Where index `k` of an access is written, where the CIR says (else None: the error
    points at its statement)."""
    return spans[k] if k < len(spans) else None


def _lanes_of(*vals) -> int:
    return max((v.lanes for v in vals if isinstance(v, Val)), default=0)


_ERF = np.frompyfunc(math.erf, 1, 1)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


def _erf(x):
    # the C library's erf, element by element: correctly rounded in f64 (a polynomial
    # approximation, Abramowitz & Stegun 7.1.26, was 1.5e-7 off: an f64 kernel's erf and
    # gelu differed from the compiled devices' in the seventh digit)
    x = np.asarray(x, dtype=np.float64)
    return _ERF(x).astype(np.float64) if x.ndim else np.float64(math.erf(float(x)))


def _erfc(x):
    """1 - erf(x) in f64 without the cancellation: gelu(x) of a negative x is
    x / 2 * erfc(-x / sqrt(2)) (1 + erf(x / sqrt(2)) in f32 kept no digit of gelu(-6))."""
    x = np.asarray(x, dtype=np.float64)
    return _ERFC(x).astype(np.float64) if x.ndim else np.float64(math.erfc(float(x)))


def _int_div(a, b):
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
    return q + fix


_UNARY = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "exp2": np.exp2, "log": np.log,
    "log2": np.log2, "sqrt": np.sqrt, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "round": np.rint, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: _extreme("max", x, np.zeros((), np.asarray(x).dtype)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "erf": lambda x: _erf(x),
    "gelu": lambda x: 0.5 * x * _gelu_erfc(x).astype(np.result_type(x, np.float32)),
}


def _gelu_erfc(x):
    """erfc(-x / sqrt(2)) in f64 with -x / sqrt(2) in two parts, z + l: the rounding of z,
    times erfc's slope 2 |x|, was some 1,500 ulp of gelu near -37. erfc(z + l) is erfc(z)
    less l times the slope 2 / sqrt(pi) e^-z^2; l is z's rounding error (Dekker's product,
    numpy having no fma) and the part of 1 / sqrt(2) past its f64."""
    d = np.asarray(x, np.float64)
    c = -0.7071067811865476
    z = d * c
    split = 134217729.0 * d                 # 2^27 + 1: d = hi + lo, each of 26 bits or less
    hi = split - (split - d)
    lo = d - hi
    c_hi, c_lo = -0.7071067839860916, 2.7995440410322203e-09     # c split alike (c_hi + c_lo == c)
    with np.errstate(invalid="ignore", over="ignore"):
        err = ((hi * c_hi - z) + hi * c_lo + lo * c_hi) + lo * c_lo
        l = np.where(np.abs(z) < 40.0, err + d * 4.833646656726457e-17, 0.0)
    return _erfc(z) - l * 1.1283791670955126 * np.exp(-z * z)

_IDENTITY = {"+": 0, "*": 1, "max": -np.inf, "min": np.inf, "and": True, "or": False,
             "argmax": -np.inf, "argmin": np.inf}


class ReferenceExecutor:
    """Runs one kernel launch. Use `run_kernel` (below) rather than this class directly."""

    def __init__(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        self.kernel = kernel
        self.bf16_buffers = {kernel.output.name} if kernel.output.dtype == "bf16" else set()
        self.buffers = {b.name: np.asarray(a) for b, a in zip(kernel.inputs, inputs)}
        self.sizes = sizes
        shape = cir.output_shape(kernel, sizes) if kernel.output.shape else ()
        self.out_dtype = np_dtype(kernel.output.dtype)
        self.is_reduce = kernel.kernel_type.kind == "reduce" or any(
            isinstance(n, cir.Yield) for n in cir.walk(kernel.body))
        self.out = np.zeros(shape, dtype=self.out_dtype)
        self.buffers["out"] = self.out
        self.env: dict = dict(sizes)
        # loops running, and each local's count at its declaration: an update below more
        # loops than its local's declaration is an accumulator's (cir.unrounded_product)
        self.loop_depth = 0
        self.declared_depth: dict = {}
        # f16 accumulator -> its running sum in f32 (the local holds it rounded), as the
        # devices hold one: `_f32_sum`
        self.f32_sums: dict = {}
        # a scalar argument has its declared dtype (a host float is f32, not a weak Python
        # float: h[i] * scale on f16 h is f32, as on the compiled devices)
        types = {sc.name: sc.dtype for sc in kernel.scalars}
        with np.errstate(over="ignore"):
            self.env.update({k: np_dtype(types[k]).type(v) if k in types and types[k] != "bf16"
                             else v for k, v in scalars.items()})
        self.lanes = 0                     # open lane axes
        self.lane_vars: list = []          # loop variable of each lane
        self.mask = None                   # Val of bool, or None when every lane is active
        self.shared_defs: dict = {}
        self.reduction = None
        if self.is_reduce:
            self._init_reduction()

    # ------------------------------------------------------------------ running
    def run(self):
        self.block(self.kernel.body)
        if self.is_reduce:
            self._finish_reduction()
        return self.out

    def block(self, body):
        for s in body:
            self.stmt(s)

    def error(self, msg, line):
        return ZynMLRuntimeError(msg, self._span(line) if line else None)

    def _span(self, line):
        # the statement's first column, as the compiled devices report it
        k = self.kernel
        return Span(line, column_of(getattr(k, "source", ""), getattr(k, "first_line", 0), line))

    def stmt(self, s):
        try:
            self._stmt(s)
        except ZynMLRuntimeError as err:
            # an error in an expression (an index out of range, ...) points at its statement
            if err.line <= 0 and s.line:
                err.span = self._span(s.line)
            raise
        except ValueError as err:
            # numpy refusing tiles whose sizes disagree at this launch (`m[0:2] @ m[0:2]`):
            # said at the statement, not the host line that launched the block
            raise ZynMLRuntimeError(_tiles_error_text(str(err)),
                                    self._span(s.line) if s.line else None) from None

    def _stmt(self, s):
        if isinstance(s, cir.Let):
            self.env[s.name] = self._masked_value(s.name, self.eval(s.value), declare=True)
            self.declared_depth[s.name] = self.loop_depth
            self.f32_sums.pop(s.name, None)
        elif isinstance(s, cir.Assign):
            self.env[s.name] = self._masked_value(s.name, self._assigned(s))
        elif isinstance(s, cir.Store):
            self.store(s)
        elif isinstance(s, cir.Loop):
            self.loop_depth += 1
            try:
                self.loop(s)
            finally:
                self.loop_depth -= 1
        elif isinstance(s, cir.If):
            self.if_(s)
        elif isinstance(s, cir.Yield):
            self.yield_(s)
        elif isinstance(s, cir.SharedAlloc):
            shape = tuple(int(self.uniform(self.eval(d), s.line)) if isinstance(d, cir.Expr) else
                          (self.sizes[d] if isinstance(d, str) else int(d)) for d in s.shape)
            lane_shape = self._lane_shape()
            from ...runtime.builtins import check_host_memory   # (runtime imports this module)
            check_host_memory(lane_shape + shape, s.dtype)
            self.buffers[s.name] = np.zeros(lane_shape + shape, dtype=np_dtype(s.dtype))
            self.shared_defs[s.name] = len(lane_shape)
            if s.dtype == "bf16":
                self.bf16_buffers.add(s.name)
        elif isinstance(s, cir.Barrier):
            pass    # lanes run in lock step: every write before the barrier is already done
        elif isinstance(s, cir.Atomic):
            raise self.error("atomic operations are not produced by ZynML source", s.line)
        else:
            raise TypeError(f"unknown CIR statement {s!r}")

    def _lane_shape(self) -> tuple:
        return tuple(1 if v is None else v for v in self._lane_sizes())

    def _lane_sizes(self):
        return [n for (_var, n) in self.lane_vars]

    def _assigned(self, s: cir.Assign):
        """The value `s` assigns. An accumulator's update (`acc += x` in a loop its local is
        declared outside) adds a product of f16 values unrounded (cir.unrounded_product),
        and an f16 accumulator sums in f32 (`_f32_sum`)."""
        carried = self.loop_depth > self.declared_depth.get(s.name, 0)
        acc = cir.accumulated(s) if carried else None
        if acc is None or not is_float(s.value.ty.dtype):
            self.f32_sums.pop(s.name, None)
            return self.eval(s.value)
        term = as_val(self.eval(_accumulate_term(s)))
        if s.value.ty.dtype == "f16":
            return self._f32_sum(s, Val(np.asarray(term.arr, np.float32), term.lanes))
        if cir.unrounded_product(s) is None:
            return self.eval(s.value)
        return self._combine(acc[0], as_val(self.env[s.name]), term)

    def _f32_sum(self, st: cir.Assign, red: Val):
        """f16 accumulator `st.name` plus (minus) `red`, a sum of its terms in f32: its
        running sum stays f32 and it holds that rounded to f16, as the devices hold an f16
        accumulator in f32 and round it where it is stored (summing 2048 and forty ones in
        f16 steps gave 2048, 2088 on the devices)."""
        old = self.f32_sums.get(st.name)
        if old is None:
            held = as_val(self.env[st.name])
            old = Val(np.asarray(held.arr, np.float32), held.lanes)
        new = self._under_mask(self._combine(cir.accumulated(st)[0], old, red), old)
        self.f32_sums[st.name] = new
        return Val(np.asarray(new.arr).astype(np.float16), new.lanes)

    def _masked_value(self, name, value, declare=False):
        if declare:
            return value
        return self._under_mask(value, self.env.get(name))

    def _under_mask(self, value, old):
        """`value` in the lanes the mask holds, `old` in the others."""
        if self.mask is None or old is None:
            return value
        a, b, m = _align([as_val(value), as_val(old), self.mask])
        return Val(np.where(m, a, b), _lanes_of(as_val(value), as_val(old), self.mask))

    # ------------------------------------------------------------------ control
    def uniform(self, v, line=0):
        """A Python number for a value that must be the same in every lane."""
        if isinstance(v, LaneIndex):
            raise self.error("this value differs between parallel iterations but must not",
                             line)
        if isinstance(v, Val):
            arr = np.asarray(v.arr)
            if arr.size == 0:
                return 0
            first = arr.flat[0]
            if arr.size > 1 and not np.all(arr == first):
                return None
            return first.item() if hasattr(first, "item") else first
        return v

    def loop(self, s: cir.Loop):
        start, stop, step = (self.eval(e) for e in (s.start, s.stop, s.step))
        if isinstance(step, LaneIndex) or self.uniform(step, s.line) is None:
            # a step that differs between lanes (`for j in 0..n step i + 1`): a serial loop,
            # each lane taking the values its own start and step give
            self._stepped_loop(s, start, stop, step)
            return
        ustep = self.uniform(step, s.line)
        # bounds that differ between lanes (`for j in 0..i`): a serial loop, masked per lane
        ustart, ustop = (None if isinstance(v, LaneIndex) else self.uniform(v, s.line)
                         for v in (start, stop))
        if ustep is None or ustep <= 0:
            raise self.error("a loop step must be positive and the same in every lane", s.line)
        if s.parallel and ustart is not None and ustop is not None and self._vectorizable(s):
            n = max(0, -(-(int(ustop) - int(ustart)) // int(ustep)))
            if n == 0:
                return
            self.lane_vars.append((s.var, n))
            axis = self.lanes
            self.lanes += 1
            saved = dict(self.env)
            self.env[s.var] = LaneIndex(axis, int(ustep), int(ustart), n)
            try:
                self.block(s.body)
            finally:
                self.lanes -= 1
                self.lane_vars.pop()
                self._restore_env(saved)
            return
        # (run as a lane axis only where no slice moves with the loop: `m = max(m,
        # reduce(max, x[r, c:c+7]))` over `c` in steps of 7 takes a tile at each c)
        if self._accumulation(s) and self._vectorizable(s) and ustart is not None \
                and ustop is not None:
            if self._run_accumulation(s, int(ustart), int(ustop), int(ustep)):
                return
        self._serial_loop(s, start, stop, ustart, ustop, int(ustep))

    def _restore_env(self, saved):
        # the parallel pass marks a loop only when it assigns no outer name, so the names
        # bound inside it simply go out of scope
        self.env = saved

    def _serial_loop(self, s, start, stop, ustart, ustop, step):
        lo = ustart if ustart is not None else int(np.min(as_val(start).arr))
        hi = ustop if ustop is not None else int(np.max(as_val(stop).arr))
        saved_mask = self.mask
        # starts that differ between lanes: each lane takes the values its own start and the
        # step give, so every value is visited and the lanes off their step are masked
        for i in range(int(lo), int(hi), step if ustart is not None else 1):
            if ustart is None or ustop is None:
                first = as_val(start).arr
                on = (first <= i) & (i < as_val(stop).arr)
                if ustart is None and step != 1:
                    on = on & ((i - first) % step == 0)
                active = Val(on, _lanes_of(as_val(start), as_val(stop)))
                self.mask = self._and_mask(saved_mask, active)
            self.env[s.var] = i
            self.block(s.body)
        self.mask = saved_mask
        self.env.pop(s.var, None)

    def _stepped_loop(self, s, start, stop, step):
        vals = [as_val(start), as_val(stop), as_val(step)]
        lanes = _lanes_of(*vals)
        first, last, steps = _align(vals)
        live = np.ones(np.shape(steps), bool)
        if self.mask is not None:
            m, st = _align([self.mask, vals[2]])
            live = np.broadcast_to(m, np.broadcast_shapes(np.shape(m), np.shape(st)))
            steps_live = np.broadcast_to(st, live.shape)[live]
        else:
            steps_live = np.asarray(steps)
        if np.any(steps_live <= 0):
            bad = int(np.asarray(steps_live)[np.asarray(steps_live) <= 0].flat[0])
            raise self.error(f"a loop step must be positive, not {bad}", s.line)
        lo, hi = int(np.min(first)), int(np.max(last))
        safe = np.where(np.asarray(steps) > 0, steps, 1)
        saved_mask = self.mask
        for i in range(lo, hi):
            on = (first <= i) & (i < last) & ((i - first) % safe == 0)
            if not np.any(on):
                continue
            self.mask = self._and_mask(saved_mask, Val(on, lanes))
            self.env[s.var] = i
            self.block(s.body)
        self.mask = saved_mask
        self.env.pop(s.var, None)

    def _and_mask(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        x, y = _align([a, b])
        return Val(x & y, _lanes_of(a, b))

    def if_(self, s: cir.If):
        cond = self.eval(s.cond)
        u = self.uniform(cond, s.line) if not isinstance(cond, LaneIndex) else None
        if u is not None and (self.mask is None or not isinstance(cond, Val) or cond.lanes == 0):
            self.block(s.then if u else s.orelse)
            return
        cond = as_val(cond)
        saved = self.mask
        self.mask = self._and_mask(saved, cond)
        if np.any(self.mask.arr):
            self.block(s.then)
        if s.orelse:
            self.mask = self._and_mask(saved, Val(~np.asarray(cond.arr, dtype=bool), cond.lanes))
            if np.any(self.mask.arr):
                self.block(s.orelse)
        self.mask = saved

    def _vectorizable(self, s: cir.Loop) -> bool:
        """A parallel loop runs as a lane unless its variable bounds a slice, directly or
        through lets (`let k = b % 3; x[b, k:k+3]`): the tiles of different iterations
        could then differ in size and place."""
        varying = {s.var}
        for n in cir.walk(s.body):
            if isinstance(n, cir.Let) and any(_uses(n.value, v) for v in varying):
                varying.add(n.name)
        for n in cir.walk(s.body):
            if isinstance(n, cir.Span) and any(_uses(e, v) for e in (n.start, n.stop)
                                               for v in varying):
                return False
        return True

    # ----------------------------------------------------- accumulation loops
    def _accumulation(self, s: cir.Loop) -> bool:
        """The body only accumulates into outer variables: `acc = acc + e` / `max(acc, e)`,
        with pure lets and ifs around them, and nothing else reads the accumulators."""
        accs: set = set()
        lets: set = set()

        def ok(body) -> bool:
            for st in body:
                if isinstance(st, cir.Let):
                    if any(_uses(st.value, a) for a in accs):
                        return False
                    lets.add(st.name)
                elif isinstance(st, cir.Assign):
                    kind = _accumulate_kind(st)
                    if kind is None or st.name in lets:
                        return False
                    accs.add(st.name)
                elif isinstance(st, cir.If):
                    if any(_uses(st.cond, a) for a in accs) or not ok(st.then) or not ok(st.orelse):
                        return False
                else:
                    return False
            return True

        if not ok(s.body) or not accs:
            return False
        # an accumulator may not feed another term, and each is updated once per iteration
        for st in cir.walk(s.body):
            if isinstance(st, cir.Assign):
                term = _accumulate_term(st)
                if any(_uses(term, a) for a in accs):
                    return False
        names = [st.name for st in cir.walk(s.body) if isinstance(st, cir.Assign)]
        return len(names) == len(set(names))

    def _run_accumulation(self, s: cir.Loop, start, stop, step) -> bool:
        n = max(0, -(-(stop - start) // step))
        if n == 0:
            return True
        if self._contract(s, start, step, n):
            return True
        lane_elems = int(np.prod(self._lane_shape(), dtype=np.int64)) if self.lanes else 1
        chunk = max(1, min(n, _CHUNK_ELEMENTS // max(1, lane_elems)))
        if chunk < 8 and n > 8:
            return False        # too wide to be worth it; the serial loop is as good
        assigns = [st for st in cir.walk(s.body) if isinstance(st, cir.Assign)]
        for first in range(0, n, chunk):
            m = min(chunk, n - first)
            axis = self.lanes
            saved_env, saved_mask = dict(self.env), self.mask
            self.lane_vars.append((s.var, m))
            self.lanes += 1
            self.env[s.var] = LaneIndex(axis, step, start + first * step, m)
            terms: dict = {}
            try:
                self._collect_terms(s.body, terms)
            finally:
                self.lanes -= 1
                self.lane_vars.pop()
                self.env, self.mask = saved_env, saved_mask
            for st in assigns:
                if st.name not in terms:
                    continue
                kind = _accumulate_kind(st)
                term, active = terms[st.name]
                probe = Val(np.zeros((1,) * axis + (m,), dtype=bool), axis + 1)
                parts = _align([as_val(term), probe] + ([active] if active is not None else []))
                shape = np.broadcast_shapes(*[np.shape(p) for p in parts])
                arr = np.broadcast_to(parts[0], shape)
                sum_dtype = np_dtype(_summed_in(st))
                if kind in ("+", "-") and st.value.ty.dtype != "bf16" and arr.dtype != sum_dtype:
                    # the terms, each in its own dtype, are summed in the accumulator's (an
                    # i64 sum of i32 products wrapped in i32, an f32 sum of f16 terms was f16)
                    arr = arr.astype(sum_dtype)
                if active is not None:
                    if kind in ("+", "-"):
                        fill = np.zeros((), arr.dtype)
                    elif arr.dtype.kind in "iu" and not is_float(st.value.ty.dtype):
                        # the integer's own extreme: through a float, i64 values past 2^53
                        # came back rounded (a masked max of 2^60 + 3 gave 2^60)
                        info = np.iinfo(arr.dtype)
                        fill = np.asarray(info.min if kind == "max" else info.max, arr.dtype)
                    elif arr.dtype.kind == "b" and st.value.ty.dtype == "bool":
                        fill = np.asarray(kind == "min")
                    else:
                        fill = np.asarray(-np.inf if kind == "max" else np.inf).astype(
                            np.result_type(arr, np.float32))
                    arr = np.where(np.broadcast_to(parts[2], shape), arr, fill)
                red = _reduce({"+": "+", "-": "+", "max": "max", "min": "min"}[kind], arr, (axis,))
                self.env[st.name] = self._masked_value(st.name, self._added(st, Val(red, axis)))
        return True

    def _contract(self, s: cir.Loop, start, step, n) -> bool:
        """`acc += X * Y` summed over the loop, as one einsum over the lane axes (a matmul
        or a convolution's inner product runs as a BLAS contraction). Only for bodies made
        of such sums of products of per-lane scalars; anything else takes the general path."""
        if not s.body or not all(isinstance(st, cir.Assign) and _accumulate_kind(st) in ("+", "-")
                                 and isinstance(_accumulate_term(st), cir.Bin)
                                 and _accumulate_term(st).op == "*" for st in s.body):
            return False
        if any(_accumulate_term(st).ty.dtype != _summed_in(st) for st in s.body):
            # products of one dtype summed into a wider one (`var acc: i64` of i32 products,
            # an f32 acc of f16 ones): einsum would sum them in the products' dtype
            return False
        axis = self.lanes
        saved_env = dict(self.env)
        self.lane_vars.append((s.var, n))
        self.lanes += 1
        self.env[s.var] = LaneIndex(axis, step, start, n)
        try:
            pairs = []
            for st in s.body:
                term = _accumulate_term(st)
                x, y = as_val(self.eval(term.left)), as_val(self.eval(term.right))
                if x.vrank or y.vrank or max(np.size(x.arr), np.size(y.arr)) > _CHUNK_ELEMENTS:
                    return False
                pairs.append((st, x, y))
        finally:
            self.lanes -= 1
            self.lane_vars.pop()
            self.env = saved_env
        for st, x, y in pairs:
            probe = Val(np.zeros((1,) * (axis + 1), dtype=bool), axis + 1)
            a, b, _ = _align([x, y, probe])
            # both factors in the product's dtype: einsum sums one factor along the loop in
            # its own dtype before scaling it by the other (`acc += a * b * 0.5` of u8 a * b
            # summed the u8 products in u8, wrapping at 256)
            dtype = np_dtype(_accumulate_term(st).ty.dtype)
            a, b = np.asarray(a, dtype), np.asarray(b, dtype)
            labels = list(range(axis + 1))
            if all(np.ndim(v) == 0 or v.shape[axis] == 1 for v in (a, b)):
                # the product does not vary along the loop: it is added n times
                prod = np.asarray(a * b)
                red = (prod[(slice(None),) * axis + (0,)] if prod.ndim else prod) * n
            elif a.dtype.kind == "f" and np.prod(np.broadcast_shapes(a.shape, b.shape)) <= \
                    max(a.size, b.size):
                # no product of every pair (a row's dot, a scaled sum): the products summed
                # pairwise, as numpy's sum; einsum's own loop sums in order (2 million
                # products of a row were 6e-4 off)
                red = np.sum(a * b, axis=axis)
            else:       # a matmul's: BLAS
                red = np.einsum(a, labels if a.ndim else [], b, labels if b.ndim else [],
                                labels[:axis], optimize=True)
            self.env[st.name] = self._masked_value(st.name, self._added(st, Val(red, axis)))
        return True

    def _added(self, st: cir.Assign, red: Val):
        """Accumulator `st.name` with `red`, its terms summed (or their max or min), added;
        an f16 sum in f32 (`_f32_sum`)."""
        kind = _accumulate_kind(st)
        if kind in ("+", "-") and st.value.ty.dtype == "f16":
            return self._f32_sum(st, red)
        return _wrapped(self._combine(kind, as_val(self.env[st.name]), red), st.value.ty.dtype)

    def _combine(self, kind, old, red):
        a, b = _align([old, red])
        lanes = _lanes_of(old, red)
        # (a weak literal past the terms' range, -3.402823e+38 beside f16 terms, is their
        # infinity, as on the devices: numpy's warning about it is no news to the user)
        with np.errstate(over="ignore"):
            if kind == "+":
                res = a + b
            elif kind == "-":
                res = a - b
            elif kind == "max":
                res = np.maximum(a, b)
            else:
                res = np.minimum(a, b)
        if not _python_number(old.arr) and np.issubdtype(np.result_type(old.arr), np.floating):
            # (an accumulator still holding its weak initial literal takes the terms' dtype)
            dtype = np.result_type(old.arr, np.asarray(red.arr).dtype)
            res = np.asarray(res).astype(dtype, copy=False)
        return Val(res, lanes)

    def _collect_terms(self, body, terms):
        for st in body:
            if isinstance(st, cir.Let):
                self.env[st.name] = self.eval(st.value)
            elif isinstance(st, cir.Assign):
                terms[st.name] = (self.eval(_accumulate_term(st)), self.mask)
            elif isinstance(st, cir.If):
                cond = as_val(self.eval(st.cond))
                saved = self.mask
                self.mask = self._and_mask(saved, cond)
                self._collect_terms(st.then, terms)
                if st.orelse:
                    self.mask = self._and_mask(saved, Val(~np.asarray(cond.arr, dtype=bool),
                                                          cond.lanes))
                    self._collect_terms(st.orelse, terms)
                self.mask = saved

    # ------------------------------------------------------------------ memory
    def _index_parts(self, index, line):
        return [i if isinstance(i, cir.Span) else self.eval(i) for i in index]

    def load(self, e: cir.Load):
        arr = self.buffers[e.buffer]
        if e.buffer in self.shared_defs:
            return self._shared_load(e, arr)
        parts = self._index_parts(e.index, 0)
        return self._gather(arr, parts, e.buffer, e.spans)

    def _span_bounds(self, span, size, line=0):
        start = self.uniform(self.eval(span.start), line)
        stop = self.uniform(self.eval(span.stop), line) if not (
            isinstance(span.stop, cir.Var) and span.stop.name == "__end__") else size
        if start is None or stop is None:
            raise self.error("a slice's bounds must be the same in every lane", line)
        start, stop = int(start), int(stop)
        start = min(max(start, 0), size)
        stop = min(max(stop, start), size)
        return start, stop

    def _basic_plan(self, arr, parts):
        """numpy basic indexing for these index parts, or None if a gather is needed.
        Returns (index tuple, axis order) where the view's axes are rearranged to lanes
        followed by value axes."""
        idx = []
        lane_axes = {}           # view axis -> lane axis
        value_axes = []
        view_axis = 0
        for k, p in enumerate(parts):
            size = arr.shape[k]
            if isinstance(p, cir.Span):
                start, stop = self._span_bounds(p, size)
                idx.append(slice(start, stop))
                value_axes.append(view_axis)
                view_axis += 1
            elif isinstance(p, LaneIndex):
                # (a lane index that runs backwards, `C - 1 - j`, is a view with a negative
                # step: a tile stored or read there needs no gather)
                last = p.b + p.a * (p.n - 1)
                if p.a == 0 or min(p.b, last) < 0 or max(p.b, last) >= size \
                        or p.axis in lane_axes.values():
                    return None
                stop = last + (1 if p.a > 0 else -1)
                idx.append(slice(p.b, stop if stop >= 0 else None, p.a))
                lane_axes[view_axis] = p.axis
                view_axis += 1
            else:
                u = p
                if isinstance(p, Val):
                    if p.lanes:
                        return None
                    u = p.arr
                u = int(u)
                if not 0 <= u < size:
                    return None
                idx.append(u)
        for k in range(len(parts), arr.ndim):
            value_axes.append(view_axis)
            view_axis += 1
        return tuple(idx), lane_axes, value_axes

    def _gather(self, arr, parts, name, spans=()):
        plan = self._basic_plan(arr, parts)
        if plan is not None:
            idx, lane_axes, value_axes = plan
            view = arr[idx]
            if not lane_axes:
                return Val(view, 0) if np.ndim(view) else view.item() if hasattr(view, "item") else view
            nl = max(lane_axes.values()) + 1
            order = sorted(lane_axes, key=lambda a: lane_axes[a])
            view = np.transpose(view, order + value_axes)
            shape = [1] * nl
            for va in order:
                shape[lane_axes[va]] = view.shape[order.index(va)]
            view = view.reshape(tuple(shape) + view.shape[len(order):])
            return Val(view, nl)
        return self._fancy_gather(arr, parts, name, spans)

    def _fancy_gather(self, arr, parts, name, spans=()):
        points = [k for k, p in enumerate(parts) if not isinstance(p, cir.Span)]
        vals = [as_val(parts[k]) for k in points]
        lanes = _lanes_of(*vals)
        idx_arrays = [np.asarray(a) for a in _align(vals)] if vals else []
        if idx_arrays:
            idx_arrays = list(np.broadcast_arrays(*idx_arrays))
        self._check_bounds(idx_arrays, [arr.shape[k] for k in points], name,
                           [_span_at(spans, k) for k in points])
        idx_arrays = [np.clip(a, 0, arr.shape[k] - 1) for a, k in zip(idx_arrays, points)]
        moved = np.moveaxis(arr, points, list(range(len(points)))) if points else arr
        rest = []
        for k, p in enumerate(parts):
            if isinstance(p, cir.Span):
                rest.append(slice(*self._span_bounds(p, arr.shape[k])))
        out = moved[tuple(idx_arrays) + tuple(rest)]
        return Val(out, lanes)

    def _check_bounds(self, idx_arrays, sizes, name, spans=()):
        """(`spans`: where each index is written, for the error's caret)"""
        for axis, (a, size) in enumerate(zip(idx_arrays, sizes)):
            bad = (a < 0) | (a >= size)
            if self.mask is not None:
                m = _align([Val(bad, self.lanes), self.mask])
                bad = np.logical_and(*np.broadcast_arrays(m[0], m[1]))
            if np.any(bad):
                # (the first index out of range, a lane's or one alone: numpy has no
                # nonzero() of a 0-d array, which made the error a ValueError about tiles)
                at, where = np.broadcast_arrays(np.asarray(a), np.asarray(bad))
                value = int(at[where][0])
                raise ZynMLRuntimeError(f"index {value} is out of range for an axis of size "
                                        f"{size} of `{name}`", _span_at(spans, axis))

    def _check_uniform(self, parts, sizes, name, spans=()):
        """An index the same in every lane (of a shared array) inside its axis, where any
        lane reaches it, as the compiled devices check it (numpy would wrap a negative one
        or fail in its own words)."""
        for axis, (p, size) in enumerate(zip(parts, sizes)):
            if isinstance(p, cir.Span) or 0 <= int(p) < size:
                continue
            if self.mask is None or np.any(self.mask.arr):
                raise ZynMLRuntimeError(f"index {int(p)} is out of range for an axis of size "
                                        f"{size} of `{name}`", _span_at(spans, axis))

    def _shared_load(self, e, arr):
        nl = self.shared_defs[e.buffer]
        raw = [self.eval(i) if not isinstance(i, cir.Span) else i for i in e.index]
        parts = [i if isinstance(i, cir.Span) or isinstance(i, LaneIndex) else self.uniform(i)
                 for i in raw]
        if any(p is None or isinstance(p, LaneIndex) for p in parts):
            return self._shared_gather(e, arr, nl, raw)
        self._check_uniform(parts, arr.shape[nl:], e.buffer, e.spans)
        idx = [slice(None)] * nl + [p if not isinstance(p, cir.Span) else
                                    slice(*self._span_bounds(p, arr.shape[nl + k]))
                                    for k, p in enumerate(parts)]
        return Val(arr[tuple(idx)], nl)

    def _shared_gather(self, e, arr, nl, parts):
        """A shared array read at positions that differ between lanes (a loop over it run
        as a temporary lane axis): every lane reads its own copy at its own position."""
        if len(parts) != arr.ndim - nl or any(isinstance(p, cir.Span) for p in parts):
            raise self.error(f"`{e.buffer}` is read with a slice whose bounds differ between "
                             "parallel iterations", 0)
        lanes = self.lanes
        vals = [as_val(p) for p in parts]
        own = [np.asarray(a) for a in _align(vals + [Val(np.zeros((1,) * lanes, bool), lanes)])]
        own = [a.reshape(a.shape[:lanes]) for a in own[:-1]]
        self._check_bounds(own, arr.shape[nl:], e.buffer, e.spans)
        own = [np.clip(a, 0, size - 1) for a, size in zip(own, arr.shape[nl:])]
        copies = [np.arange(arr.shape[k]).reshape((1,) * k + (-1,) + (1,) * (lanes - k - 1))
                  for k in range(nl)]
        return Val(arr[tuple(copies + own)], lanes)

    def store(self, s: cir.Store):
        value = self.eval(s.value)
        if s.buffer in self.bf16_buffers:       # a bf16 array holds its values rounded
            v = as_val(value)
            value = Val(bf16_rounded(v.arr), v.lanes)
        target = self.buffers[s.buffer]
        if s.buffer in self.shared_defs:
            self._shared_store(s, target, value)
            return
        if not s.index:
            v = as_val(value)
            arr = np.asarray(v.arr)
            if v.lanes:
                arr = arr.reshape(arr.shape[v.lanes:]) if all(d == 1 for d in arr.shape[:v.lanes]) \
                    else arr[(-1,) * v.lanes]
            if self.mask is not None:
                raise self.error("out as a whole cannot be written under a divergent if", s.line)
            try:
                target[...] = np.broadcast_to(arr, target.shape)
            except ValueError:
                raise self.error(f"out has shape {list(target.shape)} but the value written has "
                                 f"shape {list(np.shape(arr))}", s.line) from None
            return
        parts = self._index_parts(s.index, s.line)
        plan = self._basic_plan(target, parts)
        v = as_val(value)
        if plan is not None:
            idx, lane_axes, value_axes = plan
            view = target[idx]
            order = sorted(lane_axes, key=lambda a: lane_axes[a])
            view = np.transpose(view, order + value_axes) if np.ndim(view) else view
            lane_ids = [lane_axes[a] for a in order]
            val = self._value_for(v, lane_ids, view)
            if self.mask is not None:
                m = self._value_for(self.mask, lane_ids, view, is_mask=True)
                np.copyto(view, val, where=np.broadcast_to(m, np.shape(view))) if np.ndim(view) \
                    else self._scalar_store(target, idx, val, m)
            elif np.ndim(view):
                view[...] = val
            else:
                target[idx] = val
            return
        self._scatter(target, parts, v, s)

    def _scalar_store(self, target, idx, val, m):
        if bool(np.asarray(m).any()):
            target[idx] = val

    def _value_for(self, v: Val, lane_ids, view, is_mask=False):
        """`v` laid out like a store's view: the lanes the store indexes (in lane order),
        then the value's axes. Along lanes the store does not index, every iteration writes
        the same place: the last one wins (a mask: the place is written if any is active)."""
        arr = np.asarray(v.arr)
        arr = arr.reshape(arr.shape[:v.lanes] + (1,) * (self.lanes - v.lanes) + arr.shape[v.lanes:])
        other = tuple(k for k in range(self.lanes) if k not in lane_ids)
        if other:
            if is_mask:
                arr = np.any(arr, axis=other)
            else:
                arr = arr[tuple(slice(None) if k in lane_ids else -1 for k in range(self.lanes))]
        nview_values = np.ndim(view) - len(lane_ids)
        nvalues = arr.ndim - len(lane_ids)
        if nvalues < nview_values:
            n = len(lane_ids)
            arr = arr.reshape(arr.shape[:n] + (1,) * (nview_values - nvalues) + arr.shape[n:])
        if is_mask or not hasattr(view, "dtype"):
            return arr
        return arr.astype(view.dtype, copy=False)

    def _scatter(self, target, parts, v, s):
        points = [k for k, p in enumerate(parts) if not isinstance(p, cir.Span)]
        spans = [k for k, p in enumerate(parts) if isinstance(p, cir.Span)]
        vals = [as_val(parts[k]) for k in points]
        lanes = max(_lanes_of(*vals), v.lanes, self.mask.lanes if self.mask is not None else 0)
        idx = [np.asarray(a) for a in _align(vals + [Val(np.zeros((1,) * lanes, bool), lanes)])][:-1]
        lane_shape = np.broadcast_shapes(*[a.shape[:lanes] for a in idx],
                                         np.shape(v.arr)[:v.lanes] + (1,) * (lanes - v.lanes))
        if self.mask is not None:
            lane_shape = np.broadcast_shapes(lane_shape, np.shape(self.mask.arr)[:self.mask.lanes]
                                             + (1,) * (lanes - self.mask.lanes))
        idx = [np.broadcast_to(a.reshape(a.shape[:lanes]), lane_shape) for a in idx]
        active = np.ones(lane_shape, dtype=bool)
        if self.mask is not None:
            m = np.asarray(self.mask.arr)
            m = m.reshape(m.shape[:self.mask.lanes] + (1,) * (lanes - self.mask.lanes))
            active = np.broadcast_to(m, lane_shape)
        self._check_bounds([np.where(active, a, 0) for a in idx], [target.shape[k] for k in points],
                           "out", [_span_at(s.spans, k) for k in points])
        # a tile stored at indices computed per lane (`out[i0 + r, 0:8] = row`): the slices
        # (the same in every lane) and the axes left out follow the points, in order
        rest = tuple(slice(*self._span_bounds(parts[k], target.shape[k], s.line)) for k in spans)
        arr = np.asarray(v.arr)
        arr = arr.reshape(arr.shape[:v.lanes] + (1,) * (lanes - v.lanes) + arr.shape[v.lanes:])
        arr = np.broadcast_to(arr, lane_shape + arr.shape[lanes:])
        sel = tuple(a[active] for a in idx)
        moved = np.moveaxis(target, points, list(range(len(points))))
        place = moved[sel + rest]
        values = arr[active]
        # (fewer axes than the place: they broadcast against its trailing axes)
        values = values.reshape(values.shape[:1] + (1,) * (place.ndim - values.ndim) +
                                values.shape[1:])
        try:
            moved[sel + rest] = values
        except ValueError:
            raise self.error(f"a tile of shape {list(values.shape[1:])} is stored into a "
                             f"place of shape {list(place.shape[1:])}", s.line) from None

    def _shared_store(self, s, target, value):
        nl = self.shared_defs[s.buffer]
        raw = [self.eval(i) if not isinstance(i, cir.Span) else i for i in s.index]
        parts = [i if isinstance(i, (cir.Span, LaneIndex)) else self.uniform(i, s.line)
                 for i in raw]
        if any(p is None or isinstance(p, LaneIndex) for p in parts):
            self._shared_scatter(s, target, nl, raw, value)
            return
        self._check_uniform(parts, target.shape[nl:], s.buffer, s.spans)
        idx = tuple([slice(None)] * nl + [p if not isinstance(p, cir.Span) else
                                          slice(*self._span_bounds(p, target.shape[nl + k]))
                                          for k, p in enumerate(parts)])
        view = target[idx + (Ellipsis,)]    # a view even when idx picks one element
        v = as_val(value)
        arr = np.asarray(v.arr)
        lanes_shape = target.shape[:nl]
        if v.lanes > nl:
            raise self.error("a shared array is written from inside a nested parallel loop",
                             s.line)
        arr = arr.reshape(arr.shape[:v.lanes] + (1,) * (nl - v.lanes) + arr.shape[v.lanes:])
        # a value of fewer axes than the slice it is stored in (a number across a row)
        # broadcasts against the slice's trailing axes, after the lanes
        pad = view.ndim - arr.ndim
        if pad > 0:
            arr = arr.reshape(arr.shape[:nl] + (1,) * pad + arr.shape[nl:])
        arr = np.broadcast_to(arr, lanes_shape + view.shape[nl:]) if arr.ndim else arr
        if self.mask is not None:
            m = np.asarray(self.mask.arr)
            m = m.reshape(m.shape[:self.mask.lanes] + (1,) * (nl - self.mask.lanes))
            m = m.reshape(m.shape + (1,) * (view.ndim - m.ndim))
            np.copyto(view, arr, where=np.broadcast_to(m, view.shape))
        else:
            view[...] = arr

    def _shared_scatter(self, s, target, nl, parts, value):
        """A shared array written at positions that differ between lanes (`cnt[ids[r, c]]
        += 1`, a histogram in each iteration's own array): every active lane writes its own
        copy at its own position, as the store of each thread does on the devices."""
        v = as_val(value)
        if any(isinstance(p, cir.Span) for p in parts) or len(parts) != target.ndim - nl \
                or v.vrank:
            raise self.error(f"`{s.buffer}` is written with a tile at positions that differ "
                             "between parallel iterations", s.line)
        vals = [as_val(p) for p in parts]
        if max(_lanes_of(*vals), v.lanes, self.lanes) > nl:
            raise self.error("a shared array is written from inside a nested parallel loop",
                             s.line)
        lane_shape = target.shape[:nl]
        own = [np.asarray(a) for a in _align(vals + [Val(np.zeros((1,) * nl, bool), nl)])]
        own = [np.broadcast_to(a.reshape(a.shape[:nl]), lane_shape) for a in own[:-1]]
        active = np.ones(lane_shape, bool)
        if self.mask is not None:
            m = np.asarray(self.mask.arr)
            active = np.broadcast_to(
                m.reshape(m.shape[:self.mask.lanes] + (1,) * (nl - self.mask.lanes)),
                lane_shape)
        self._check_bounds(own, target.shape[nl:], s.buffer, s.spans)
        arr = np.asarray(v.arr)
        arr = np.broadcast_to(arr.reshape(arr.shape[:v.lanes] + (1,) * (nl - v.lanes)),
                              lane_shape)
        copies = np.nonzero(active)
        target[copies + tuple(a[active] for a in own)] = arr[active]

    # --------------------------------------------------------------- reductions
    def _init_reduction(self):
        op = self.kernel.kernel_type.param("op", "+")
        self.reduction = {"op": op, "value": None, "index": None}

    def yield_(self, s: cir.Yield):
        op = self.reduction["op"]
        kt = self.kernel.kernel_type
        axis = kt.param("axis")
        loops = [v for v, _n in self.lane_vars]
        value = as_val(self.eval(s.value))
        index = as_val(self.eval(s.index)) if s.index is not None else None
        # every loop around the yield: the lane ones vary along lane axes, the serial ones
        # are at one position now
        enclosing = _enclosing_loops(self.kernel.body, s)
        if axis is not None:
            axis %= len(enclosing)
        kept = [v for k, v in enumerate(enclosing) if axis is not None and k != axis]
        lanes = self.lanes
        lane_shape = tuple(self._lane_shape())
        arrs = _align([value] + ([index] if index is not None else []) +
                      ([self.mask] if self.mask is not None else []) +
                      [Val(np.zeros((1,) * lanes, bool), lanes)])
        val = np.broadcast_to(arrs[0], lane_shape)
        idx = np.broadcast_to(arrs[1], lane_shape) if index is not None else None
        active = np.broadcast_to(arrs[2 if index is not None else 1], lane_shape) \
            if self.mask is not None else None
        ident = _IDENTITY[op]
        if active is not None:
            if op in ("max", "min", "argmax", "argmin") and val.dtype.kind in "iub":
                # an integer's (or bool's) own extreme: through -inf or inf, i64 values past
                # 2^53 were compared in f64 (a masked max of 2^63 + 978 gave 2^63)
                low = op in ("max", "argmax")
                fill = np.asarray(not low, bool) if val.dtype.kind == "b" else np.asarray(
                    np.iinfo(val.dtype).min if low else np.iinfo(val.dtype).max, val.dtype)
            else:
                fill = np.asarray(ident, dtype=np.result_type(val, type(ident))
                                  if op not in ("and", "or") else bool)
            val = np.where(active, val, fill)
            if idx is not None:     # an inactive iteration's index never wins a tie
                idx = np.where(active, idx, -1)
        # lanes of loops that are kept become output axes; the rest are reduced now
        kept_lanes = [loops.index(v) for v in kept if v in loops]
        red_axes = tuple(k for k in range(lanes) if k not in kept_lanes)
        if op in ("argmax", "argmin"):
            part_v, part_i = _arg_reduce(op, val, idx, red_axes)
            # the outputs a yield reached now (one none reaches has no index)
            part_r = np.ones(np.shape(part_v), bool) if active is None else \
                np.any(active, axis=red_axes) if red_axes else np.asarray(active)
        else:
            part_v, part_i, part_r = _reduce(op, val, red_axes), None, None
        # place into the accumulator: kept serial loops index it, kept lanes span it
        out_index = []
        for v in kept:
            if v in loops:
                out_index.append(slice(None))
            else:
                out_index.append(int(self.env[v]))
        order = [loops.index(v) for v in kept if v in loops]
        if order and order != sorted(order):
            part_v = np.moveaxis(part_v, list(range(len(order))), np.argsort(np.argsort(order)))
            if part_i is not None:
                part_i, part_r = (np.moveaxis(a, list(range(len(order))), np.argsort(np.argsort(order)))
                                  for a in (part_i, part_r))
        self._accumulate(op, tuple(out_index), part_v, part_i)
        if part_r is not None:
            where = tuple(out_index)
            self.reduction["reached"][where] |= part_r

    def _accumulate(self, op, where, value, index):
        r = self.reduction
        if r["value"] is None:
            dtype = np.result_type(value) if op not in ("and", "or") else np.bool_
            shape = self.out.shape
            if op in ("max", "min", "argmax", "argmin") and np.issubdtype(dtype, np.integer):
                # integers keep their own type, from its extreme as on the devices (in f64,
                # max of [2**63 - 1, -2**63] and min of 2**62 + 1 lost their low bits; an
                # argmax's best value too: its index -1 says no value is held yet)
                info = np.iinfo(dtype)
                r["value"] = np.full(shape, info.min if op in ("max", "argmax") else info.max,
                                     dtype=dtype)
            else:
                r["value"] = np.full(shape, _IDENTITY[op], dtype=np.float64 if op in ("argmax", "argmin")
                                     else np.result_type(dtype, type(_IDENTITY[op])) if op in ("max", "min")
                                     else dtype)
            if op in ("argmax", "argmin"):
                r["index"] = np.full(shape, -1, dtype=np.int64)
                r["reached"] = np.zeros(shape, bool)
        cur = r["value"][where] if where else r["value"]
        if op == "+":
            new = cur + value
        elif op == "*":
            new = cur * value
        elif op == "max":
            new = np.maximum(cur, value)
        elif op == "min":
            new = np.minimum(cur, value)
        elif op == "and":
            new = np.logical_and(cur, value)
        elif op == "or":
            new = np.logical_or(cur, value)
        else:
            better = value > cur if op == "argmax" else value < cur
            if np.issubdtype(np.result_type(value, cur), np.floating):
                # NaN is better than any number, as in one np.argmax/argmin (its first NaN)
                nan_v, nan_c = np.isnan(value), np.isnan(cur)
                better = (better & ~nan_c) | (nan_v & ~nan_c)
            idx_now = r["index"][where] if where else r["index"]
            same = (value == cur) | (np.isnan(value) & np.isnan(cur)) \
                if np.issubdtype(np.result_type(value, cur), np.floating) else (value == cur)
            # a tie goes to the smaller index (as within one part, _arg_reduce)
            better = better | (idx_now < 0) & (index >= 0) | same & (index >= 0) & (index < idx_now)
            new = np.where(better, value, cur)
            idx_cur = r["index"][where] if where else r["index"]
            new_idx = np.where(better, index, idx_cur)
            if where:
                r["index"][where] = new_idx
            else:
                r["index"][...] = new_idx
        if where:
            r["value"][where] = new
        else:
            r["value"][...] = new

    def _finish_reduction(self):
        r = self.reduction
        if r["op"] in ("argmax", "argmin") and self.out.size and \
                (r["value"] is None or not r["reached"].all()):
            # an output no yield reached has no index, as numpy's argmax of nothing (at the
            # first yield, as the devices say)
            raise self.error(no_index_message(r["op"]), next(
                n.line for n in cir.walk(self.kernel.body) if isinstance(n, cir.Yield)))
        if r["value"] is None:
            # nothing was reduced: the operator's identity (docs/language.md, "Empty
            # reductions"), the dtype's lowest/highest value for an integer max/min
            ident = _IDENTITY[r["op"]]
            if not np.isfinite(ident) and self.out.dtype.kind in "iu":
                info = np.iinfo(self.out.dtype)
                ident = info.min if ident < 0 else info.max
            elif not np.isfinite(ident) and self.out.dtype.kind == "b":
                ident = ident > 0
            self.out[...] = ident
            return
        result = r["index"] if r["op"] in ("argmax", "argmin") else r["value"]
        # a bf16 result is held as f32: rounded once where it is stored, as on the devices
        self.out[...] = bf16_rounded(result) if self.kernel.output.dtype == "bf16" else result

    # -------------------------------------------------------------- expressions
    def eval(self, e):
        if isinstance(e, cir.Const):
            return e.value
        if isinstance(e, cir.Var):
            try:
                return self.env[e.name]
            except KeyError:
                raise ZynMLRuntimeError(f"`{e.name}` has no value") from None
        if isinstance(e, cir.Load):
            return self.load(e)
        if isinstance(e, cir.Bin):
            return self.binary(e)
        if isinstance(e, cir.Unary):
            v = self.eval(e.operand)
            if e.op == "neg":
                if isinstance(v, LaneIndex):
                    return LaneIndex(v.axis, -v.a, -v.b, v.n)
                if isinstance(v, Val):
                    return Val(-np.asarray(v.arr), v.lanes)
                return _wrap_int(-v, e.ty.dtype) if e.ty.dtype in _INT_BITS and \
                    not isinstance(v, bool) else -v
            v = as_val(v)
            return Val(np.logical_not(v.arr), v.lanes)
        if isinstance(e, cir.Call):
            return self.call(e)
        if isinstance(e, cir.Dot):
            a, b = as_val(self.eval(e.a)), as_val(self.eval(e.b))
            x, y = _align([a, b])
            if e.ty.dtype == "f16":     # as numpy's dot: f32 products summed in f32, rounded once
                total = np.sum(np.multiply(x, y, dtype=np.float32), axis=-1)
                return Val(np.asarray(total).astype(np.float16), _lanes_of(a, b))
            return Val(_of_type(np.sum(x * y, axis=-1), e.ty), _lanes_of(a, b))
        if isinstance(e, cir.Reduce):
            v = as_val(self.eval(e.input))
            arr = np.asarray(v.arr)
            axes = tuple(range(v.lanes, arr.ndim)) if e.axis is None else (v.lanes + e.axis,)
            if e.op in ("argmax", "argmin"):
                flat = arr.reshape(arr.shape[:v.lanes] + (-1,)) if e.axis is None else arr
                ax = v.lanes if e.axis is None else v.lanes + e.axis
                if flat.shape[ax] == 0:     # of nothing: no index, as numpy's
                    raise ZynMLRuntimeError(no_index_message(e.op, True))
                return Val((np.argmax if e.op == "argmax" else np.argmin)(flat, axis=ax), v.lanes)
            return Val(_of_type(_reduce(e.op, arr, axes), e.ty), v.lanes)
        if isinstance(e, cir.Cast):
            v = as_val(self.eval(e.operand))
            # out of range: a float overflows to infinity, an integer is picked by the
            # saturating select around its cast (passes/casts.py)
            with np.errstate(invalid="ignore", over="ignore"):
                arr = np.asarray(v.arr).astype(np_dtype(e.ty.dtype))
            return Val(bf16_rounded(arr) if e.ty.dtype == "bf16" else arr, v.lanes)
        if isinstance(e, cir.Select):
            c, a, b = (as_val(self.eval(x)) for x in (e.cond, e.if_true, e.if_false))
            x, y, z = _align([c, a, b])
            if e.ty.dtype in _INT_BITS:
                # both sides in the select's integer type: numpy makes u64 beside the i64 of
                # a Python int f64, which lost the saturated u64(inf) (2^64 - 1 became 0)
                y, z = _in_dtype(y, e.ty.dtype), _in_dtype(z, e.ty.dtype)
            elif is_float(e.ty.dtype):
                # an integer side converted to the float type, not through numpy's f64
                y, z = _float_operand(y, e.ty.dtype), _float_operand(z, e.ty.dtype)
            return Val(np.where(x, y, z), _lanes_of(c, a, b))
        raise TypeError(f"unknown CIR expression {e!r}")

    def binary(self, e: cir.Bin):
        op = e.op
        a = self.eval(e.left)
        if op in ("and", "or"):
            # the right side counts only in the lanes the left does not decide: a failing
            # check there is no error, as the devices' && and || do not evaluate it
            # (x[i] == 0.0 or 10 / n[i] > 0)
            left = as_val(a)
            deciding = np.asarray(left.arr, dtype=bool)
            saved = self.mask
            self.mask = self._and_mask(saved, Val(deciding if op == "and" else ~deciding,
                                                  left.lanes))
            try:
                b = self.eval(e.right)
            finally:
                self.mask = saved
        else:
            b = self.eval(e.right)
        # keep affine index forms symbolic so loads stay views
        if isinstance(a, LaneIndex) or isinstance(b, LaneIndex):
            r = _affine_op(op, a, b)
            if r is not None and _lanes_fit(r, e.ty.dtype):
                return r
        if op in ("and", "or"):
            va, vb = as_val(a), as_val(b)
            x, y = _align([va, vb])
            return Val((np.logical_and if op == "and" else np.logical_or)(x, y), _lanes_of(va, vb))
        cmp = _comparison_float(op, e)
        if not isinstance(a, (Val, LaneIndex)) and not isinstance(b, (Val, LaneIndex)):
            if cmp is not None:
                a, b = (np.asarray(_float_operand(v, cmp)).item() for v in (a, b))
            return _scalar_op(op, a, b, e.ty.dtype, e.span)
        va, vb = as_val(a), as_val(b)
        x, y = _align([va, vb])
        lanes = _lanes_of(va, vb)
        if cmp is not None:
            x, y = _float_operand(x, cmp), _float_operand(y, cmp)
        if op == "@":
            if np.ndim(x) >= 2 and np.ndim(y) >= 2 and np.shape(x)[-1] != np.shape(y)[-2]:
                raise ZynMLRuntimeError(tiles_message("@", np.shape(x)[-1], np.shape(y)[-2]))
            if e.ty.dtype in _INT_BITS:     # bools multiply as i32 (numpy's @ of bools is an or)
                x, y = _in_dtype(x, e.ty.dtype), _in_dtype(y, e.ty.dtype)
            return Val(np.matmul(x, y), lanes)
        if op in ("+", "-", "*", "/", "%", "**") and e.ty.dtype in _INT_BITS:
            # integer arithmetic runs in its result's dtype, a literal wrapped to it as the
            # devices' casts wrap (p[i] + 300 on u8 p: numpy refuses the Python int 300)
            if op == "**" and isinstance(e.right, cir.Const):
                # a constant exponent as one that fits the dtype, with the same result
                y = int_pow_exponent(int(e.right.value), e.ty.dtype)
            x, y = (_in_dtype(v, e.ty.dtype) for v in (x, y))
        if op in ("/", "%") and not is_float(e.ty.dtype):
            self._check_divisor(op, x, y, lanes, e.ty.dtype, e.span)
        return Val(_array_op(op, x, y, e.ty.dtype), lanes)

    def _check_divisor(self, op, x, y, lanes, dtype, span=None):
        """Integer division by zero (and MIN / -1) in an active lane is an error (at `span`,
        where the division is written)."""
        zero = np.asarray(y) == 0
        over = np.zeros((), bool)
        if op == "/" and dtype in _SIGNED_BITS:
            over = (np.asarray(y) == -1) & (np.asarray(x) == -(1 << (_SIGNED_BITS[dtype] - 1)))
        for bad, what in ((zero, "zero"), (over, "overflow")):
            if not np.any(bad):
                continue
            if self.mask is not None:
                m = _align([Val(bad, lanes), self.mask])
                bad = np.logical_and(*np.broadcast_arrays(m[0], m[1]))
                if not np.any(bad):
                    continue
            if what == "zero":
                raise ZynMLRuntimeError("integer division by zero" if op == "/"
                                        else "integer remainder by zero", span)
            value = -(1 << (_SIGNED_BITS[dtype] - 1))
            raise ZynMLRuntimeError(f"integer overflow: {value} / -1 does not fit its integer type", span)

    def call(self, e: cir.Call):
        fn = e.fn
        if fn in ("zeros", "ones"):
            dims = [self.uniform(self.eval(a)) for a in e.args]
            # a constant tile broadcasts: it takes the shape of the (possibly clipped) tiles it
            # meets, e.g. the last query block of a sequence that is not a multiple of 64
            return Val(np.full((1,) * len(dims), 0.0 if fn == "zeros" else 1.0, np.float32), 0)
        args = [self.eval(a) for a in e.args]
        if fn in ("transpose", "row_max", "row_sum"):
            v = as_val(args[0])
            arr = np.asarray(v.arr)
            if fn == "transpose":
                return Val(np.swapaxes(arr, -1, -2), v.lanes)
            if fn == "row_max":
                return Val(np.max(arr, axis=-1, keepdims=True), v.lanes)
            return Val(np.expand_dims(_reduce("+", arr, (arr.ndim - 1,)), -1), v.lanes)
        if fn in _UNARY:
            v = args[0]
            if not isinstance(v, (Val, LaneIndex)):
                return _scalar_unary(fn, v, e.ty.dtype)
            v = as_val(v)
            arr = np.asarray(v.arr)
            if is_float(e.ty.dtype) and not np.issubdtype(arr.dtype, np.floating):
                arr = arr.astype(np_dtype(e.ty.dtype))
            res = _unary(fn, arr)
            if is_float(e.ty.dtype):
                res = np.asarray(res).astype(np_dtype(e.ty.dtype), copy=False)
            return Val(res, v.lanes)
        if fn in ("min", "max", "pow", "clamp"):
            vals = [as_val(a) for a in args]
            arrs = _align(vals)
            lanes = _lanes_of(*vals)
            if fn != "pow" and e.ty.dtype in _INT_BITS:
                # compared in the result's dtype, each value converted to it as the devices
                # convert (max(u[i], -1) on u32: the -1 wraps; numpy refused the Python int)
                arrs = [_in_dtype(a, e.ty.dtype) for a in arrs]
            if fn == "pow":
                with np.errstate(all="ignore"):
                    res = _float_power(np.asarray(arrs[0], dtype=np_dtype(e.ty.dtype)), arrs[1])
            elif fn == "clamp":     # numpy's clip: x itself where it equals a bound
                res = _extreme("min", arrs[2], _extreme("max", arrs[1], arrs[0]))
            else:
                res = arrs[0]
                for x in arrs[1:]:
                    res = _extreme(fn, res, x)
            if lanes == 0 and np.ndim(res) == 0:
                return _cast_scalar(res, e.ty.dtype)
            return Val(np.asarray(res).astype(np_dtype(e.ty.dtype), copy=False)
                       if is_float(e.ty.dtype) else res, lanes)
        raise ZynMLRuntimeError(f"unknown function {fn}")


# ------------------------------------------------------------------------- helpers


def _extreme(fn, a, b):
    """numpy's maximum (or minimum) of f32: NaN propagates, and of equal values the second
    (max(0.0, -0.0) is -0.0), in every dtype (numpy's f16 maximum gives the first)."""
    with np.errstate(invalid="ignore"):
        first = (np.greater(a, b) if fn == "max" else np.less(a, b)) | np.not_equal(a, a)
    return np.where(first, a, b)


def _uses(e, name) -> bool:
    return any(isinstance(n, cir.Var) and n.name == name for n in cir.walk(e))


def _accumulate_kind(st: cir.Assign):
    v = st.value
    acc = cir.accumulated(st)
    if acc is not None:
        return acc[0]
    if isinstance(v, cir.Call) and v.fn in ("max", "min") and len(v.args) == 2 and \
            isinstance(v.args[0], cir.Var) and v.args[0].name == st.name and not v.ty.shape:
        return v.fn
    return None


def _accumulate_term(st: cir.Assign):
    """What `st` adds to, subtracts from or compares with its accumulator; a product of f16
    values added straight in is computed in f32, unrounded (cir.unrounded_product)."""
    prod = cir.unrounded_product(st)
    if prod is not None:
        f32 = cir.Ty("f32")
        return cir.Bin("*", cir.Cast(prod.left, f32), cir.Cast(prod.right, f32), f32)
    acc = cir.accumulated(st)
    return acc[1] if acc else st.value.args[1]


def _summed_in(st: cir.Assign) -> str:
    """The dtype `st`'s terms are summed in: f32 for an f16 accumulator, else the
    accumulator's."""
    return "f32" if st.value.ty.dtype == "f16" else st.value.ty.dtype


def _enclosing_loops(body, target, stack=()):
    for s in body:
        if s is target:
            return list(stack)
        if isinstance(s, cir.Loop):
            r = _enclosing_loops(s.body, target, stack + (s.var,))
            if r is not None:
                return r
        elif isinstance(s, cir.If):
            r = _enclosing_loops(s.then, target, stack) or _enclosing_loops(s.orelse, target, stack)
            if r is not None:
                return r
    return None


def _of_type(arr, ty):
    """A sum or product of integers in the integer type the CIR gives it: numpy sums narrow
    integers (and bools) in 64 bits, where every device wraps in the type (the dot of two
    u8 rows is a u8, as numpy's own `dot` gives it)."""
    dt = np_dtype(ty.dtype)
    a = np.asarray(arr)
    if dt.kind in "iu" and a.dtype != dt:
        with np.errstate(over="ignore"):
            return a.astype(dt)
    return arr


def _reduce(op, arr, axes):
    if not axes:
        return arr
    if op in ("+", "*"):
        ufunc = np.add if op == "+" else np.multiply
        if np.asarray(arr).dtype == np.float16:
            # in f32, rounded once, along every axis as the devices do (numpy's f16 sum is
            # so only along the last: along another it rounds each step to f16)
            return np.asarray(ufunc.reduce(arr, axis=axes, dtype=np.float32)).astype(np.float16)
        return ufunc.reduce(arr, axis=axes)
    if op in ("max", "min"):
        a = np.asarray(arr)
        if any(a.shape[ax] == 0 for ax in axes):
            # nothing to combine: the identity, as every device gives (-inf for max)
            dt = a.dtype
            low = op == "max"
            ident = (-np.inf if low else np.inf) if dt.kind == "f" else \
                (bool(not low) if dt.kind == "b" else
                 (np.iinfo(dt).min if low else np.iinfo(dt).max))
            return (np.max if low else np.min)(a, axis=axes, initial=ident)
        res = (np.max if op == "max" else np.min)(a, axis=axes)
        return _last_zero(a, axes, res) if a.dtype.kind == "f" else res
    if op == "and":
        return np.all(arr, axis=axes)
    if op == "or":
        return np.any(arr, axis=axes)
    raise ValueError(op)


def _last_zero(a, axes, res):
    """A float maximum or minimum `res` of `a` along `axes` that is zero, with the sign of the
    last zero in iteration order, as a fold of numpy's maximum (of equal values the second)
    gives it, and the compiled CPU's loops (numpy's own max takes its SIMD lanes' order)."""
    zero = np.asarray(res == 0)
    if not zero.any():
        return res
    flat = np.moveaxis(a, axes, tuple(range(-len(axes), 0)))
    flat = flat.reshape(flat.shape[:flat.ndim - len(axes)] + (-1,))
    last = flat.shape[-1] - 1 - np.argmax((flat == 0)[..., ::-1], axis=-1)
    signed = np.take_along_axis(flat, last[..., None], -1)[..., 0]
    return np.where(zero, signed, res).astype(a.dtype)


def _arg_reduce(op, val, idx, axes):
    if not axes:
        return val, idx
    keep = [k for k in range(val.ndim) if k not in axes]
    v = np.transpose(val, keep + list(axes)).reshape(tuple(val.shape[k] for k in keep) + (-1,))
    # in i64: the sentinel below is i64's largest (an i32 index, `b * C + c`, wrapped it
    # to -1, which then won every tie)
    i = np.transpose(idx, keep + list(axes)).reshape(v.shape).astype(np.int64)
    pos = (np.argmax if op == "argmax" else np.argmin)(v, axis=-1)
    best_v = np.take_along_axis(v, pos[..., None], axis=-1)[..., 0]
    # among the values equal to the best (or NaN, where it is NaN), the smallest index
    # yielded: what a parallel reduction on any device gives, whatever the iteration order
    b = best_v[..., None]
    tie = (v == b) | (np.isnan(v) & np.isnan(b)) if v.dtype.kind == "f" else (v == b)
    big = np.iinfo(np.int64).max
    best_i = np.min(np.where(tie & (i >= 0), i, big), axis=-1)
    fallback = np.take_along_axis(i, pos[..., None], axis=-1)[..., 0]
    return best_v, np.where(best_i == big, fallback, best_i)


def _affine_op(op, a, b):
    if op in ("+", "-"):
        if isinstance(a, LaneIndex) and _is_int(b):
            return LaneIndex(a.axis, a.a, a.b + b if op == "+" else a.b - b, a.n)
        if isinstance(b, LaneIndex) and _is_int(a):
            return LaneIndex(b.axis, b.a if op == "+" else -b.a, a + b.b if op == "+" else a - b.b, b.n)
    if op == "*":
        if isinstance(a, LaneIndex) and _is_int(b):
            return LaneIndex(a.axis, a.a * b, a.b * b, a.n)
        if isinstance(b, LaneIndex) and _is_int(a):
            return LaneIndex(b.axis, b.a * a, b.b * a, b.n)
    return None


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _cast_scalar(x, dtype):
    if dtype == "bool":
        return bool(x)
    if is_float(dtype):
        return np_dtype(dtype).type(x)
    return int(x)


def _python_number(x) -> bool:
    return type(x) in (int, float)


_SIGNED_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_INT_BITS = dict(_SIGNED_BITS, u8=8, u16=16, u32=32, u64=64)


def _wrapped(v, dtype):
    """An accumulated integer in its own dtype: a sum summed wider wraps as on the devices."""
    if dtype not in _INT_BITS:
        return v
    with np.errstate(all="ignore"):
        return Val(np.asarray(v.arr).astype(np_dtype(dtype)), v.lanes)


def _in_dtype(v, dtype):
    dt = np_dtype(dtype)
    a = np.asarray(v)
    return v if a.dtype == dt else a.astype(dt)


def _scalar_op(op, a, b, dtype, span=None):
    """`a op b` of two scalars; an integer division's error points at `span` (where it is
    written, as on the compiled devices)."""
    if op == "/" and not is_float(dtype):
        if b == 0:
            raise ZynMLRuntimeError("integer division by zero", span)
        if dtype in _SIGNED_BITS and b == -1 and a == -(1 << (_SIGNED_BITS[dtype] - 1)):
            raise ZynMLRuntimeError(f"integer overflow: {int(a)} / -1 does not fit its integer "
                                    f"type", span)
        q = abs(int(a)) // abs(int(b))
        return q if (a >= 0) == (b >= 0) else -q
    if op == "%" and not is_float(dtype):
        if b == 0:
            raise ZynMLRuntimeError("integer remainder by zero", span)
        return int(math.fmod(int(a), int(b)))
    if op == "**" and dtype in _INT_BITS and not (_python_number(a) and _python_number(b)):
        # an integer power wraps at its dtype's width, as numpy's and the devices' do
        bits, v = _INT_BITS[dtype], pow(int(a), int(b), 1 << _INT_BITS[dtype])
        return v - (1 << bits) if dtype in _SIGNED_BITS and v >= 1 << (bits - 1) else v
    if op in ("+", "-", "*") and dtype in _INT_BITS and all(
            isinstance(v, (int, np.integer, np.bool_)) for v in (a, b)):
        # exactly, then wrapped: numpy made u64 past 2^63 beside an i64 0 a float64 (a u64
        # sum of 2^64 - 2 and 1 in `out[0] += v[j]` was 1)
        return _wrap_int({"+": int.__add__, "-": int.__sub__, "*": int.__mul__}[op](
            int(a), int(b)), dtype)
    with np.errstate(all="ignore"):
        res = _array_op(op, np.asarray(a), np.asarray(b), dtype,
                        weak=_python_number(a) and _python_number(b))
    res = res.item() if hasattr(res, "item") else res
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return bool(res)
    if dtype in _INT_BITS and not isinstance(res, bool):
        # an integer wraps at its type's width, as on the devices (`var s: u8 = 250;
        # s += 10` is 4; the i32 of sizes and literals `n * 1000000000` too)
        res = _wrap_int(res, dtype)
    if _python_number(a) and _python_number(b):
        return res      # arithmetic on weak values stays weak (a Python number)
    return _cast_scalar(res, dtype) if is_float(dtype) else res


def _wrap_int(v, dtype):
    """The integer v as a value of integer dtype, wrapped at its width."""
    bits, v = _INT_BITS[dtype], int(v)
    return v % (1 << bits) if dtype.startswith("u") else \
        (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def _lanes_fit(r: LaneIndex, dtype) -> bool:
    """Whether every value of `a * lane + b` is one of the integer dtype (else it wraps)."""
    if dtype not in _INT_BITS:
        return True
    ends = (r.b, r.b + r.a * max(r.n - 1, 0))
    return all(_wrap_int(v, dtype) == v for v in ends)


def _unary(fn, arr):
    """Function `fn` of array `arr`; of halves computed in f32 and rounded once, as on the
    devices (in f16 steps silu(-12) was 0, exp(12) past a half's range, for -7.4e-5)."""
    with np.errstate(all="ignore"):
        if arr.dtype == np.float16:
            return _UNARY[fn](arr.astype(np.float32)).astype(np.float16)
        return _UNARY[fn](arr)


def _scalar_unary(fn, v, dtype):
    if dtype in _INT_BITS and isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        # an integer result in its type, wrapped as on the devices (abs of the smallest
        # integer is itself, as numpy's)
        with np.errstate(all="ignore"):
            return _wrap_int(np.asarray(_UNARY[fn](np.asarray(int(v), np.int64))).item(), dtype)
    if _python_number(v):
        # math on sizes (`sqrt(head_dim)`) is weakly typed: exact, then it meets a dtype
        with np.errstate(all="ignore"):
            return float(np.asarray(_UNARY[fn](np.float64(v))))
    res = _unary(fn, np.asarray(v, dtype=np_dtype(dtype) if is_float(dtype) else None))
    return _cast_scalar(np.asarray(res).item(), dtype) if is_float(dtype) else np.asarray(res).item()


def _tiles_error_text(numpy_text: str) -> str:
    """numpy's refusal of tiles that do not broadcast, said as the compiled devices say it
    (errflag.tiles_message: the two extents of the first axis that disagrees; a tile
    broadcast to the slice a store writes, np.broadcast_to's 'requested shape' or an
    assignment's 'into shape', is said as a store, as the devices say it)."""
    import re
    store = "requested shape" in numpy_text or "into shape" in numpy_text
    shapes = [tuple(int(d) for d in m.split(",") if d.strip())
              for m in re.findall(r"\(([\d,\s]*)\)", numpy_text)]
    if "broadcast" in numpy_text and len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        for x, y in zip(reversed(a), reversed(b)):
            if x != y and x != 1 and y != 1:
                return tiles_message("store" if store else "+", x, y)
    return f"the tiles of this statement do not fit together at these sizes: {numpy_text}"


def _float_operand(v, dtype):
    """An integer or bool operand of float arithmetic converted to the float dtype first, as
    the devices convert it: numpy would compute i32 with f32 in f64 and round once more
    (16777217 + 1.0 gave 16777218, 3.0 / 16777217 was not f32's quotient, and i32 % f32
    the f64 remainder, not f32's)."""
    arr = np.asarray(v)
    # (f16 and bf16 keep numpy's promotion: the compiled devices hold them in f32)
    if arr.dtype.kind in "biu" and dtype in ("f32", "f64"):
        return arr.astype(np_dtype(dtype))
    return v


def _comparison_float(op, e):
    """The float dtype an integer side of a comparison converts to (f32 or f64, the other
    side's), as the devices compare: numpy compared i32 with f32 in f64, so 16777217 ==
    f32(16777216) was false. None where no side converts."""
    if op not in ("<", "<=", ">", ">=", "==", "!="):
        return None
    lt, rt = e.left.ty.dtype, e.right.ty.dtype
    if is_float(lt) == is_float(rt):
        return None
    f = lt if is_float(lt) else rt
    return f if f in ("f32", "f64") else None


def _float_power(x, y):
    """A power of floats, by a scalar 0.5 sqrt, as numpy's `x ** 0.5` is (its np.power is
    too for f32 and f64, not f16): -inf ** 0.5 is NaN and -0.0 ** 0.5 is -0.0, as the
    devices give; by an array of exponents, C's pow, as numpy's."""
    if np.ndim(y) == 0 and y == 0.5:
        return np.sqrt(x)
    return np.power(x, y)


def _array_op(op, x, y, dtype, weak=False):
    if op in ("+", "-", "*", "/", "%") and is_float(dtype) and not weak:
        x, y = _float_operand(x, dtype), _float_operand(y, dtype)
    with np.errstate(all="ignore"):
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if op == "/":
            if is_float(dtype):
                x = np.asarray(x)
                if not np.issubdtype(x.dtype, np.floating):
                    x = x.astype(np_dtype(dtype))
                return np.true_divide(x, y)
            return _int_div(x, y)
        if op == "%":
            return np.fmod(x, y)
        if op == "**":
            if is_float(dtype):         # a float power (the CIR's type), even of integers
                x = np.asarray(x)
                if not np.issubdtype(x.dtype, np.floating):
                    x = x.astype(np_dtype(dtype))
                return _float_power(x, y)
            return np.power(x, y)
        if op == "<":
            return x < y
        if op == "<=":
            return x <= y
        if op == ">":
            return x > y
        if op == ">=":
            return x >= y
        if op == "==":
            return x == y
        if op == "!=":
            return x != y
    raise ZynMLRuntimeError(f"unsupported operator {op}")


def run_kernel(kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict) -> np.ndarray:
    """Run `kernel` on numpy `inputs`; returns the output array. IEEE arithmetic gives its
    infinities and NaN (a sum of inf and -inf, 0 * inf) as the devices do, without numpy's
    RuntimeWarnings, which reached the cell's output."""
    with np.errstate(all="ignore"):
        return ReferenceExecutor(kernel, inputs, sizes, scalars).run()
