"""What a launch does, so that its time means something: floating-point operations and bytes
from the kernel's loop nest and the launch's sizes, and the peak of the device it ran on.

`kernel_cost(kernel, sizes)` walks the CIR: every arithmetic operation on floats counts once
per element it produces (a tile operation once per element of the tile, `dot` of two
length-n vectors 2n, `a @ b` of (m, k) and (k, n) tiles 2mkn, `reduce` and `row_sum` one per
element reduced, math functions such as `exp` one each), times the trip counts of the loops
around it; a `yield` counts the combine of a reduction. Integer index arithmetic is not
counted. Bytes are the inputs' and the output's sizes: what the kernel must move at least
once. Where a count depends on data (a branch) both sides are counted and the cost is marked
`exact=False`; a loop bound that depends on an outer loop variable is taken at the middle of
that variable's range.

`device_peak(info)` gives (FP32 FLOP/s, bytes/s, where they came from) for a device: a table
of known GPUs (non-tensor-core FP32, memory bandwidth from the vendors' data sheets), and for
CPUs (and software GPU drivers running on them) a one-off measurement with numpy (a float32
matrix product and a large copy), cached for the process; (None, None, "unknown") otherwise.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from ..compiler import cir

DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
               "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1}
FLOAT_DTYPES = {"f16", "bf16", "f32", "f64"}
ARITH = {"+", "-", "*", "/", "%", "**"}
ONE_FLOP_CALLS = {"sin", "cos", "tan", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs",
                  "floor", "ceil", "round", "tanh", "sinh", "cosh", "sigmoid", "relu", "silu",
                  "gelu", "erf", "pow", "min", "max", "clamp"}


@dataclass
class Cost:
    """Work of one launch: FLOPs and bytes moved (inputs read once, output written once)."""
    flops: float
    bytes: float
    exact: bool = True

    @property
    def intensity(self) -> float:
        """FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else math.inf


class _Unknown(Exception):
    pass


def _eval(e, env: dict) -> float:
    if isinstance(e, int):
        return e
    if isinstance(e, str):
        if e in env:
            return env[e]
        raise _Unknown(e)
    if isinstance(e, cir.Const):
        return float(e.value) if not isinstance(e.value, bool) else int(e.value)
    if isinstance(e, cir.Var):
        if e.name in env:
            return env[e.name]
        raise _Unknown(e.name)
    if isinstance(e, cir.Unary) and e.op == "neg":
        return -_eval(e.operand, env)
    if isinstance(e, cir.Cast):
        return _eval(e.operand, env)
    if isinstance(e, cir.Bin) and e.op in ("+", "-", "*", "/", "%", "//"):
        a, b = _eval(e.left, env), _eval(e.right, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op in ("/", "//"):
            return a // b if b and float(a).is_integer() and float(b).is_integer() else (
                a / b if b else 0)
        return a % b if b else 0
    if isinstance(e, cir.Call) and e.fn in ("min", "max"):
        vals = [_eval(a, env) for a in e.args]
        return min(vals) if e.fn == "min" else max(vals)
    raise _Unknown(type(e).__name__)


class _Counter:
    def __init__(self, kernel: cir.Kernel, sizes: dict):
        self.kernel = kernel
        self.env = {k: v for k, v in sizes.items() if isinstance(v, (int, float))}
        self.exact = True
        self.locals: dict = {}           # name -> Ty of let/var (for tile shapes)

    def elements(self, ty) -> float:
        if ty is None or not getattr(ty, "shape", ()):
            return 1.0
        n = 1.0
        for d in ty.shape:
            try:
                n *= max(0.0, float(_eval(d, self.env)))
            except _Unknown:
                self.exact = False
                n *= 64.0                 # a tile of a size known only at launch
        return n

    def is_float(self, ty) -> bool:
        return ty is not None and getattr(ty, "dtype", "") in FLOAT_DTYPES

    def expr(self, e) -> float:
        if e is None or isinstance(e, (cir.Const, cir.Var, int, float, str)):
            return 0.0
        if isinstance(e, cir.Span):
            return self.expr(e.start) + self.expr(e.stop)
        if isinstance(e, cir.Load):
            return sum(self.expr(i) for i in e.index)
        if isinstance(e, cir.Bin):
            own = self.elements(e.ty) if e.op in ARITH and self.is_float(e.ty) else 0.0
            if e.op == "@":
                # (m, k) @ (k, n): 2 m k n
                k = self._inner(e.left)
                own = 2.0 * self.elements(e.ty) * k
            return own + self.expr(e.left) + self.expr(e.right)
        if isinstance(e, cir.Unary):
            own = self.elements(e.ty) if e.op == "neg" and self.is_float(e.ty) else 0.0
            return own + self.expr(e.operand)
        if isinstance(e, cir.Call):
            args = sum(self.expr(a) for a in e.args)
            if e.fn in ("row_sum", "row_max", "sum"):
                return args + sum(self.elements(getattr(a, "ty", None)) for a in e.args[:1])
            if e.fn in ONE_FLOP_CALLS and self.is_float(e.ty):
                per = max(1, len(e.args) - 1) if e.fn in ("min", "max", "clamp") else 1
                return args + per * self.elements(e.ty)
            return args
        if isinstance(e, cir.Dot):
            n = self.elements(getattr(e.a, "ty", None))
            return 2.0 * n + self.expr(e.a) + self.expr(e.b)
        if isinstance(e, cir.Reduce):
            return self.elements(getattr(e.input, "ty", None)) + self.expr(e.input)
        if isinstance(e, cir.Cast):
            return self.expr(e.operand)
        if isinstance(e, cir.Select):
            self.exact = False
            return self.expr(e.cond) + max(self.expr(e.if_true), self.expr(e.if_false))
        return 0.0

    def _inner(self, e) -> float:
        ty = getattr(e, "ty", None)
        shape = getattr(ty, "shape", ()) or ()
        if not shape:
            return 1.0
        try:
            return max(0.0, float(_eval(shape[-1], self.env)))
        except _Unknown:
            self.exact = False
            return 64.0

    def trips(self, loop: cir.Loop, outer: list) -> tuple[float, dict]:
        """(trip count, the value to put for the loop variable when counting inner loops)."""
        env = dict(self.env)
        try:
            start, stop = _eval(loop.start, env), _eval(loop.stop, env)
            step = _eval(loop.step, env) if loop.step is not None else 1
        except _Unknown:
            # bounds that depend on an outer loop variable: take it at the middle of its range
            mid = dict(env)
            for var, lo, hi in outer:
                mid[var] = (lo + hi) / 2.0
            try:
                start, stop = _eval(loop.start, mid), _eval(loop.stop, mid)
                step = _eval(loop.step, mid) if loop.step is not None else 1
                self.exact = False
            except _Unknown:
                self.exact = False
                return 1.0, {}
        step = step or 1
        n = max(0.0, math.ceil((stop - start) / step))
        return float(n), {"range": (start, stop)}

    def block(self, stmts, outer: list) -> float:
        total = 0.0
        for s in stmts:
            total += self.stmt(s, outer)
        return total

    def stmt(self, s, outer: list) -> float:
        if isinstance(s, cir.Loop):
            n, info = self.trips(s, outer)
            lo, hi = info.get("range", (0, 0))
            inner = self.block(s.body, outer + [(s.var, lo, max(lo, hi - 1))])
            return n * inner + self.expr(s.start) + self.expr(s.stop)
        if isinstance(s, (cir.Let, cir.Assign)):
            return self.expr(s.value)
        if isinstance(s, cir.Store):
            return self.expr(s.value) + sum(self.expr(i) for i in s.index)
        if isinstance(s, cir.If):
            self.exact = False
            return self.expr(s.cond) + max(self.block(s.then, outer),
                                           self.block(s.orelse, outer))
        if isinstance(s, cir.Yield):
            combine = self.elements(getattr(s.value, "ty", None)) \
                if self.is_float(getattr(s.value, "ty", None)) else 0.0
            return self.expr(s.value) + combine
        if isinstance(s, cir.Atomic):
            return self.expr(s.value) + 1.0
        return 0.0


def buffer_bytes(buf, sizes: dict) -> float:
    n = 1.0
    for d in buf.shape:
        n *= float(cir.eval_dim(d, sizes))
    return n * DTYPE_BYTES.get(buf.dtype, 4)


def kernel_cost(kernel: cir.Kernel, sizes: dict) -> Cost:
    """FLOPs and bytes of one launch of `kernel` with `sizes` bound (see the module
    docstring)."""
    counter = _Counter(kernel, sizes)
    flops = counter.block(kernel.body, [])
    moved, exact = 0.0, counter.exact
    for buf in list(kernel.inputs) + [kernel.output]:
        try:
            moved += buffer_bytes(buf, sizes)
        except Exception:  # a size the launch did not record
            exact = False
    return Cost(flops, moved, exact)


def launch_cost(compiled) -> Cost | None:
    """The cost of a CompiledKernel's launch (its kernel and sizes), None if unknown."""
    kernel = getattr(compiled, "kernel", None)
    sizes = getattr(compiled, "sizes", None)
    if kernel is None or sizes is None:
        return None
    try:
        return kernel_cost(kernel, sizes)
    except Exception:  # a construct the counter does not know must not break a timing
        return None


# ----------------------------------------------------------------------- device peaks

# name pattern -> (FP32 FLOP/s without tensor cores, memory bytes/s), vendors' data sheets
KNOWN_PEAKS = (
    (r"GH200", 67e12, 4.0e12),
    (r"H200", 67e12, 4.8e12),
    (r"H100.*PCIe", 51e12, 2.0e12),
    (r"H100.*NVL", 60e12, 3.9e12),
    (r"H100", 67e12, 3.35e12),
    (r"A100.*80", 19.5e12, 2.039e12),
    (r"A100", 19.5e12, 1.555e12),
    (r"L40S", 91.6e12, 0.864e12),
    (r"L40", 90.5e12, 0.864e12),
    (r"L4\b", 30.3e12, 0.300e12),
    (r"A10G", 31.2e12, 0.600e12),
    (r"A10\b", 31.2e12, 0.600e12),
    (r"V100", 15.7e12, 0.900e12),
    (r"T4\b", 8.1e12, 0.320e12),
    (r"RTX 4090", 82.6e12, 1.008e12),
    (r"RTX 3090", 35.6e12, 0.936e12),
    (r"Apple M1", 2.6e12, 0.068e12),
    (r"Apple M2", 3.6e12, 0.100e12),
    (r"Apple M3", 4.1e12, 0.100e12),
)

_measured: dict = {}


def _measure_cpu() -> tuple[float, float]:
    """(FLOP/s of a float32 matrix product, bytes/s of a large copy) with numpy, once."""
    if "cpu" in _measured:
        return _measured["cpu"]
    import numpy as np

    flops = 0.0
    for n in (64, 128, 256, 512):                 # the best of several: a busy machine
        a = np.ones((n, n), np.float32)           # slows some runs, never speeds one up
        a @ a
        for _ in range(5):
            t0 = time.perf_counter()
            a @ a
            flops = max(flops, 2.0 * n ** 3 / (time.perf_counter() - t0))
    src = np.ones(8 * 2**20, np.float32)          # 32 MiB, beyond most caches
    dst = np.empty_like(src)
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    bandwidth = 2.0 * src.nbytes / best           # read and write
    _measured["cpu"] = (flops, bandwidth)
    return _measured["cpu"]


def device_peak(info: dict) -> tuple[float | None, float | None, str]:
    """(peak FP32 FLOP/s, peak bytes/s, source) of a device given its compute_devices()
    record; source is "table: <name>", "measured (numpy)" or "unknown"."""
    name = str(info.get("name", "") or "")
    for pattern, flops, bandwidth in KNOWN_PEAKS:
        if re.search(pattern, name, re.I):
            return flops, bandwidth, f"table: {pattern.replace(chr(92) + 'b', '')}"
    kind = str(info.get("type", "") or "")
    soft = re.search(r"llvmpipe|lavapipe|swiftshader|software", name, re.I)
    if kind == "cpu" or soft or str(info.get("id", "")).startswith("cpu"):
        flops, bandwidth = _measure_cpu()
        return flops, bandwidth, "measured (numpy)"
    return None, None, "unknown"


def device_info(device_id: str) -> dict:
    """The compute_devices() record of a device id, or of another id the device answers to
    (`webgpu:0` is `vulkan:0`): {'id': id} if not listed."""
    try:
        from .. import compute_devices

        devices = compute_devices()
        for d in devices:
            if d.get("id") == device_id:
                return d
        for d in devices:
            if device_id in (d.get("ids") or ()):
                return d
    except Exception:
        pass
    return {"id": device_id, "type": "cpu" if device_id.startswith("cpu") else ""}


@dataclass
class Rates:
    """A launch's rates against its device's peak."""
    gflops: float | None
    gbytes: float | None
    peak_share: float | None      # of the bound resource (roofline), 0..1
    bound: str = ""               # "compute" or "memory"
    peak_source: str = ""


def rates(cost: Cost | None, seconds: float | None, info: dict) -> Rates:
    """GFLOP/s, GB/s and the share of the roofline: achieved FLOP/s over
    min(peak FLOP/s, intensity x peak bandwidth), that is the larger of the two shares.
    None for a launch that did no work (empty inputs): no rate, rather than 0."""
    if cost is None or not (cost.flops or cost.bytes) or not seconds or seconds <= 0:
        return Rates(None, None, None)
    fps, bps = cost.flops / seconds, cost.bytes / seconds
    pf, pb, source = device_peak(info)
    share, bound = None, ""
    if pf and pb:
        f_share, b_share = fps / pf, bps / pb
        share, bound = (f_share, "compute") if f_share >= b_share else (b_share, "memory")
    return Rates(fps / 1e9, bps / 1e9, share, bound, source)


def format_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f} {unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def format_share(share: float | None) -> str:
    if share is None:
        return "-"
    return f"{share * 100:.3g}%"
