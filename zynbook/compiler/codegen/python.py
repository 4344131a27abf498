"""CIR -> plain sequential Python over numpy arrays.

This is the loop nest exactly as written, one iteration at a time: what the inspector's
CPU tab shows, and, executed, a second and independent reading of a kernel's meaning that
tests compare the vectorised reference executor with (on small sizes: it is slow).
"""
from __future__ import annotations

from functools import reduce

from .. import cir

_FN = {
    "rsqrt": "(1.0 / np.sqrt({0}))", "sigmoid": "(1.0 / (1.0 + np.exp(-({0}))))",
    "relu": "np.maximum({0}, 0)", "silu": "(({0}) / (1.0 + np.exp(-({0}))))",
    "round": "np.rint({0})", "erf": "_erf({0})",
    "gelu": "(0.5 * ({0}) * _erfc(-({0}) / np.sqrt(2.0)))",
    "transpose": "np.swapaxes({0}, -1, -2)",
    "row_max": "np.max({0}, axis=-1, keepdims=True)",
    "row_sum": "np.sum({0}, axis=-1, keepdims=True)",
    "clamp": "np.minimum(np.maximum({0}, {1}), {2})", "pow": "np.power({0}, {1})",
}
_REDUCE = {"+": "np.sum", "*": "np.prod", "max": "np.max", "min": "np.min", "and": "np.all",
           "or": "np.any", "argmax": "np.argmax", "argmin": "np.argmin"}


def _name(n: str) -> str:
    if "." not in n:
        return f"v_{n}"
    from ..launch.scalar import user_name       # a record's field: spelled apart
    return "v" + user_name(n)


class _Renderer:
    def __init__(self, kernel: cir.Kernel):
        self.k = kernel
        self.lines: list = []

    def expr(self, e) -> str:
        if isinstance(e, cir.Const):
            if isinstance(e.value, bool):
                return str(e.value)
            if isinstance(e.value, float):
                return "np.inf" if e.value == float("inf") else (
                    "-np.inf" if e.value == float("-inf") else repr(e.value))
            return str(e.value)
        if isinstance(e, cir.Var):
            return _name(e.name)
        if isinstance(e, cir.Load):
            if not e.index:
                return _name(e.buffer)
            return f"{_name(e.buffer)}[{', '.join(self.index(i) for i in e.index)}]"
        if isinstance(e, cir.Bin):
            a, b = self.expr(e.left), self.expr(e.right)
            if e.op == "/" and not e.ty.dtype.startswith("f") and e.ty.dtype != "bf16":
                return f"_idiv({a}, {b})"
            if e.op == "%":
                return f"np.fmod({a}, {b})"
            op = {"and": "&", "or": "|"}.get(e.op, e.op)
            return f"({a} {op} {b})"
        if isinstance(e, cir.Unary):
            return f"(-{self.expr(e.operand)})" if e.op == "neg" else f"np.logical_not({self.expr(e.operand)})"
        if isinstance(e, cir.Call):
            args = [self.expr(a) for a in e.args]
            if e.fn in ("zeros", "ones"):
                # a constant tile takes the shape of the (possibly clipped) tiles it meets
                return f"np.{e.fn}({(1,) * len(args)}, dtype=np.float32)"
            if e.fn in ("min", "max"):
                fn = "np.maximum" if e.fn == "max" else "np.minimum"
                return reduce(lambda a, b: f"{fn}({a}, {b})", args)
            if e.fn in _FN:
                return _FN[e.fn].format(*args)
            return f"np.{e.fn}({', '.join(args)})"
        if isinstance(e, cir.Dot):
            return f"np.dot({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, cir.Reduce):
            axis = "" if e.axis is None else f", axis={e.axis}"
            return f"{_REDUCE[e.op]}({self.expr(e.input)}{axis})"
        if isinstance(e, cir.Cast):
            return f"np.asarray({self.expr(e.operand)}).astype(_DT[{e.ty.dtype!r}])"
        if isinstance(e, cir.Select):
            return f"np.where({self.expr(e.cond)}, {self.expr(e.if_true)}, {self.expr(e.if_false)})"
        raise TypeError(f"unknown CIR expression {e!r}")

    def index(self, i) -> str:
        if isinstance(i, cir.Span):
            lo = self.expr(i.start)
            hi = "" if isinstance(i.stop, cir.Var) and i.stop.name == "__end__" else self.expr(i.stop)
            return f"max({lo}, 0):{hi}"
        return self.expr(i)

    def emit(self, text: str, depth: int, line: int = 0):
        src = ""
        if line and self.k.source and self.k.first_line:
            rel = line - self.k.first_line
            lines = self.k.source.splitlines()
            if 0 <= rel < len(lines):
                src = f"  # {lines[rel].strip()}"
        self.lines.append("    " * depth + text + src)

    def body(self, stmts, depth):
        if not stmts:
            self.emit("pass", depth)
        for s in stmts:
            if isinstance(s, (cir.Let, cir.Assign)):
                self.emit(f"{_name(s.name)} = {self.expr(s.value)}", depth, s.line)
            elif isinstance(s, cir.Store):
                index = ", ".join(self.index(i) for i in s.index) or "..."
                self.emit(f"{_name(s.buffer)}[{index}] = {self.expr(s.value)}", depth, s.line)
            elif isinstance(s, cir.Loop):
                self.emit(f"for {_name(s.var)} in range({self.expr(s.start)}, {self.expr(s.stop)}, "
                          f"{self.expr(s.step)}):{'  # parallel' if s.parallel else ''}", depth, s.line)
                self.body(s.body, depth + 1)
            elif isinstance(s, cir.If):
                self.emit(f"if {self.expr(s.cond)}:", depth, s.line)
                self.body(s.then, depth + 1)
                if s.orelse:
                    self.emit("else:", depth)
                    self.body(s.orelse, depth + 1)
            elif isinstance(s, cir.Yield):
                index = "" if s.index is None else f", {self.expr(s.index)}"
                self.emit(f"_yield({self.expr(s.value)}{index})", depth, s.line)
            elif isinstance(s, cir.SharedAlloc):
                dims = ", ".join(self.expr(d) if isinstance(d, cir.Expr) else
                                 (_name(d) if isinstance(d, str) else str(d)) for d in s.shape)
                self.emit(f"{_name(s.name)} = np.zeros(({dims},), dtype=_DT[{s.dtype!r}])", depth, s.line)
            elif isinstance(s, cir.Barrier):
                self.emit("pass  # barrier: iterations run one after another here", depth, s.line)
            else:
                raise TypeError(f"unknown CIR statement {s!r}")

    def render(self) -> str:
        k = self.k
        params = [_name(b.name) for b in k.inputs] + [_name("out")] + \
            [_name(d) for d in k.dims] + [_name(s.name) for s in k.scalars]
        self.emit(f"def {k.name}({', '.join(params)}, _yield=None):", 0)
        self.emit(f'"""{k.kernel_type.kind} kernel, generated from ZynML line {k.first_line}."""', 1)
        self.body(k.body, 1)
        return "\n".join(self.lines) + "\n"


PRELUDE = '''import numpy as np
from math import erf as _scalar_erf, erfc as _scalar_erfc

_DT = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
       "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
       "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}
_erf = np.vectorize(_scalar_erf, otypes=[np.float64])
_erfc = np.vectorize(_scalar_erfc, otypes=[np.float64])


def _idiv(a, b):
    q = abs(int(a)) // abs(int(b))
    return q if (a >= 0) == (b >= 0) else -q

'''


def render(kernel: cir.Kernel) -> str:
    """Readable Python source of `kernel` (a function over numpy arrays)."""
    return _Renderer(kernel).render()


def compile_kernel(kernel: cir.Kernel):
    """The rendered function, ready to call (see `run_sequential`)."""
    namespace: dict = {}
    exec(compile(PRELUDE + render(kernel), f"<zynml {kernel.name}>", "exec"), namespace)
    return namespace[kernel.name]
