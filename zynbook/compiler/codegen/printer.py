"""One printer for every language: launch IR -> source text, spelled by a dialect.

The printer walks a `launch.ir.Program` and writes C-like text: declarations, loops, ifs,
stores, expressions with their parentheses, a comment with the ZynML line above the code
it came from (made safe: a comment can never splice or end early). Everything that differs
between languages (types, literals, math, thread indices, barriers, collectives, checks,
kernel signatures, the program around the kernels) is asked of a `Dialect`
(codegen/dialects/); the dialect only spells, it never decides. Helper functions a dialect
needs are emitted only when a kernel uses them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import Span, ZynMLDeviceError
from ..errflag import column_of
from ..launch import ir
from ..launch.unroll import (all_written_out, named_registers, register_name, writes_out,
                             written_out)


def comment_safe(text: str) -> str:
    """ZynML text as the body of a `//` comment: one line that cannot splice the next one
    (no trailing backslash), end a block comment or form a trigraph."""
    text = text.replace("\r", " ").replace("\n", " ").replace("*/", "* /").replace("??", "? ?")
    text = text.rstrip()
    if text.endswith("\\"):
        text += " (the line ends with a backslash)"
    return text


_FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "pow": np.power,
           "min": np.minimum, "max": np.maximum, "fmod": np.fmod}


def constant_value(e):
    """The value of launch-IR float expression `e` made only of literals, in its dtype, as
    the reference computes it (numpy), else None."""
    t = _FLOATS.get(e.dtype)
    if t is None:
        return None
    with np.errstate(all="ignore"):
        if isinstance(e, ir.Lit):
            return t(e.value)
        if isinstance(e, ir.Cast):
            if isinstance(e.a, ir.Lit) and not isinstance(e.a.value, bool):
                return t(e.a.value)
            v = constant_value(e.a)
            return None if v is None else t(v)
        if isinstance(e, ir.Un) and e.op == "neg":
            v = constant_value(e.a)
            return None if v is None else t(-v)
        args = (e.a, e.b) if isinstance(e, ir.Bin) else e.args if isinstance(e, ir.Math) else ()
        fn = e.op if isinstance(e, ir.Bin) else e.fn if isinstance(e, ir.Math) else None
        vals = [constant_value(a) for a in args]
        if not vals or any(v is None for v in vals):
            return None
        if fn in _BINARY and len(vals) == 2:
            return t(_BINARY[fn](*vals))
        if fn == "pow2":
            return t(vals[0] * vals[0])
        if fn == "clamp":
            return t(np.minimum(np.maximum(vals[0], vals[1]), vals[2]))
        from ...backends.cpu.reference import _UNARY
        if fn in _UNARY and len(vals) == 1:
            return t(_UNARY[fn](vals[0]))
    return None


@dataclass
class Printed:
    source: str
    line_map: dict = field(default_factory=dict)    # generated line (1-based) -> ZynML line


# statements only some dialects spell: (IR classes, the dialect method, what they are)
_DIALECT_ONLY = (
    (ir.NamedBarrier, "named_barrier", "named barriers"),
    (ir.MatrixLoad, "matrix_load", "tensor-core matrix loads"),
    (ir.Mma, "mma", "tensor-core MMA"),
    ((ir.AsyncCopy, ir.AsyncCommit, ir.AsyncWait), "async_copy", "asynchronous copies (cp.async)"),
    ((ir.WarpgroupMma, ir.WarpgroupFence, ir.WarpgroupCommit, ir.WarpgroupWait, ir.ProxyFence), "wgmma",
     "warpgroup MMA (wgmma)"),
    ((ir.Mbarrier, ir.TensorLoad, ir.SetMaxRegisters), "tensor_load", "mbarriers or tensor memory copies"),
)

class Printer:
    def __init__(self, dialect, program: ir.Program, source: str = "", first_line: int = 1,
                 sizes: dict | None = None):
        self.d = dialect
        self.p = program
        self.src_lines = source.splitlines() if source else []
        self.first_line = first_line or 1
        self.sizes = sizes            # baked in as constants when given
        self.out: list = []
        self.map: dict = {}
        self.level = 0
        self.shown: set = set()
        self.named: set = set()       # local arrays printed as one variable per element
        self.written: dict = {}       # the register loops written out, printed as written

    # ---- text -------------------------------------------------------------------------

    def emit(self, text: str, line: int = 0):
        self.out.append("    " * self.level + text)
        if line:
            self.map[len(self.out)] = line

    def emit_guarded(self, text: str, guard, line: int):
        """`text`, made only where `guard` (an expression or None) holds."""
        self.emit(text if guard is None else f"if ({self.expr(guard)}) {{ {text} }}", line)

    def indented(self, body):
        self.level += 1
        self.stmts(body)
        self.level -= 1

    def comment(self, line: int):
        """`// line N: <ZynML text>` the first time code from ZynML line N appears."""
        if not line or line in self.shown:
            return
        self.shown.add(line)
        rel = line - self.first_line
        if 0 <= rel < len(self.src_lines) and self.src_lines[rel].strip():
            self.emit(f"// line {line}: {comment_safe(self.src_lines[rel].strip())}", line)

    # ---- expressions ------------------------------------------------------------------

    def expr(self, e) -> str:
        d = self.d
        if e.__class__ in (ir.Bin, ir.Un, ir.Math) and e.dtype in _FLOATS:
            # an expression of constants whose value is not finite (exp(1000.0), 1.0 / 0.0,
            # 3e38 * 3.0) is spelled as that value, as the reference has it: WGSL evaluates
            # such expressions as it compiles and refuses these, and a C++ compiler fused
            # x + 3e38f * 3.0f into one fma, finite in its product (-inf + 9e38 for NaN)
            v = constant_value(e)
            if v is not None and not np.isfinite(v):
                return d.lit(float(v), e.dtype)
            # a division by a constant zero is the product with the infinity of its sign,
            # the same value (a driver assuming finite values folded x / 0.0 to 0)
            if getattr(d, "evaluates_constants", False) and isinstance(e, ir.Bin) and e.op == "/":
                z = constant_value(e.b)
                if z is not None and z == 0:
                    inf = ir.Lit(float(np.copysign(np.inf, z)), e.b.dtype)
                    return d.binary("*", self.expr(e.a), d.lit(inf.value, inf.dtype), e.a.dtype,
                                    e.dtype)
        if isinstance(e, ir.Lit):
            return d.lit(e.value, e.dtype)
        if isinstance(e, ir.Ref):
            if self.sizes is not None and e.name in self.size_params:
                return d.lit(self.size_params[e.name], e.dtype)
            return e.name
        if isinstance(e, ir.Thread):
            return d.thread(e.axis)
        if isinstance(e, ir.Load):
            if e.array in self.named:
                return register_name(e.array, e.index.value)
            return d.load(e.array, self.expr(e.index), e.dtype, self.space(e.array))
        if isinstance(e, ir.Bin):
            return d.binary(e.op, self.expr(e.a), self.expr(e.b), e.a.dtype, e.dtype)
        if isinstance(e, ir.Un):
            return d.unary(e.op, self.expr(e.a), e.dtype)
        if isinstance(e, ir.Math):
            return d.math(e.fn, [self.expr(a) for a in e.args], e.dtype)
        if isinstance(e, ir.Cast):
            return d.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, ir.Select):
            args = (self.expr(e.cond), self.expr(e.a), self.expr(e.b), e.dtype)
            if any(isinstance(n, (ir.Checked, ir.InRange, ir.CheckedDiv))
                   for n in ir.walk((e.a, e.b))):
                # both sides are evaluated, as numpy's where and WGSL's select evaluate them:
                # where(x[i] != 0, 10 / x[i], 0) is a division by zero on every device
                return getattr(d, "eager_select", d.select)(*args)
            return d.select(*args)
        if isinstance(e, ir.Checked):
            return d.checked(self.expr(e.index), self.expr(e.extent), e.site, e.dtype)
        if isinstance(e, ir.InRange):
            return d.in_range(self.expr(e.index), self.expr(e.extent), e.site, e.index.dtype)
        if isinstance(e, ir.CheckedDiv):
            return d.checked_div(e.op, self.expr(e.a), self.expr(e.b), e.site_zero,
                                 e.site_overflow, e.dtype)
        if isinstance(e, ir.Vector):
            return d.vector([self.expr(a) for a in e.parts], e.dtype)
        if isinstance(e, ir.Lane):
            return d.lane(self.expr(e.a), e.lane, e.dtype)
        if isinstance(e, ir.Collective):
            return d.collective(e.op, self.expr(e.value), e.scope, e.dtype, e.width)
        raise TypeError(f"not a launch-IR expression: {e!r}")

    def space(self, name: str) -> str:
        return self.spaces.get(name, "global")

    def registers(self) -> set:
        return {name for name, space in self.spaces.items() if space == "local"}

    # ---- statements -------------------------------------------------------------------

    def stmts(self, body):
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        try:
            self._stmt(s)
        except ZynMLDeviceError as e:
            # what the dialect cannot spell (WebGPU's 64-bit integers) at the statement's line
            line = getattr(s, "line", 0)
            if line and not e.span.line:
                e.span = Span(line, column_of("\n".join(self.src_lines), self.first_line, line))
            raise

    def _stmt(self, s):
        d = self.d
        line = getattr(s, "line", 0)
        self.comment(line)
        for kinds, method, what in _DIALECT_ONLY:
            if isinstance(s, kinds) and not hasattr(d, method):
                raise TypeError(f"the {d.name} dialect has no {what}")
        if isinstance(s, ir.Decl):
            self.emit(d.decl(s.name, s.dtype, None if s.value is None else self.expr(s.value),
                             s.mutable), line)
        elif isinstance(s, ir.Set):
            self.emit(f"{s.name} = {self.expr(s.value)};", line)
        elif isinstance(s, ir.Store) and s.array in self.named:
            self.emit_guarded(f"{register_name(s.array, s.index.value)} = {self.expr(s.value)};",
                              s.guard, line)
        elif isinstance(s, ir.Store):
            self.emit_guarded(d.store(s.array, self.expr(s.index), self.expr(s.value), s.value.dtype,
                                      self.space(s.array)), s.guard, line)
        elif isinstance(s, ir.Atomic):
            self.emit_guarded(d.atomic(s.op, s.array, self.expr(s.index), self.expr(s.value),
                                       s.value.dtype), s.guard, line)
        elif isinstance(s, ir.For) and getattr(d, "writes_out_unrolled", False) \
                and writes_out(s, self.registers()):
            self.emit("{", line)              # the iterations' locals stay in their scope
            self.indented(written_out(s, self.written))
            self.emit("}")
        elif isinstance(s, ir.For):
            hint = getattr(d, "unroll", lambda: "")() if s.unroll else ""
            if hint:
                self.emit(hint)
            if s.reduce and hasattr(d, "reduction_loop"):
                self.emit(d.reduction_loop(s.reduce))
            self.emit(d.for_header(s.var, s.dtype, self.expr(s.start), self.expr(s.stop),
                                   self.expr(s.step)) + " {", line)
            self.indented(s.body)
            self.emit("}")
        elif isinstance(s, ir.If):
            self.emit(f"if ({self.expr(s.cond)}) {{", line)
            self.indented(s.then)
            if s.orelse:
                self.emit("} else {")
                self.indented(s.orelse)
            self.emit("}")
        elif isinstance(s, ir.Copy):
            self.emit(d.copy(s.dst, self.expr(s.dst_index), self.space(s.dst), s.src,
                             self.expr(s.src_index), self.space(s.src), s.count, s.dtype), line)
        elif isinstance(s, ir.Convert):
            if not hasattr(d, "convert"):       # element by element
                for w in range(s.count):
                    at = lambda e: ir.Bin("+", e, ir.Lit(w, e.dtype), e.dtype)
                    self.stmt(ir.Store(s.dst, at(s.dst_index), ir.Cast(ir.Load(s.src, at(s.src_index), "f32"),
                                                                         s.dtype), None, line))
            else:
                self.emit(d.convert(s.dst, self.expr(s.dst_index), s.src, self.expr(s.src_index),
                                    s.count, s.dtype), line)
        elif isinstance(s, ir.Barrier):
            self.emit(d.barrier(device=s.device), line)
        elif isinstance(s, ir.NamedBarrier):
            self.emit(d.named_barrier(self.expr(s.id), s.threads, s.arrive), line)
        elif isinstance(s, ir.MatrixLoad):
            self.emit(d.matrix_load(s.dst, self.expr(s.dst_index), s.src, self.expr(s.src_index),
                                    s.count, s.trans, s.dtype), line)
        elif isinstance(s, ir.Mma):
            self.emit(d.mma(s.a, self.expr(s.a_index), s.b, self.expr(s.b_index), s.c,
                            self.expr(s.c_index), s.dtype, s.shape), line)
        elif isinstance(s, (ir.AsyncCopy, ir.AsyncCommit, ir.AsyncWait)):
            if isinstance(s, ir.AsyncCopy):
                guard = None if s.guard is None else self.expr(s.guard)
                self.emit(d.async_copy(s.dst, self.expr(s.dst_index), s.src, self.expr(s.src_index),
                                       s.count, s.dtype, guard), line)
            else:
                self.emit(d.async_commit() if isinstance(s, ir.AsyncCommit)
                          else d.async_wait(s.pending), line)
        elif isinstance(s, (ir.WarpgroupMma, ir.WarpgroupFence, ir.WarpgroupCommit, ir.WarpgroupWait,
                            ir.ProxyFence)):
            if isinstance(s, ir.WarpgroupMma):
                text = d.wgmma(s, self.expr(s.a_index), self.expr(s.b_index), self.expr(s.c_index),
                               None if s.fresh is None else self.expr(s.fresh))
            elif isinstance(s, ir.WarpgroupFence):
                text = d.wgmma_fence(s.c, s.count, s.a, s.a_count)
            elif isinstance(s, ir.WarpgroupWait):
                text = d.wgmma_wait(s.pending, s.c, s.count)
            else:
                text = d.wgmma_commit() if isinstance(s, ir.WarpgroupCommit) else d.proxy_fence()
            self.emit(text, line)
        elif isinstance(s, (ir.Mbarrier, ir.TensorLoad, ir.SetMaxRegisters)):
            if isinstance(s, ir.Mbarrier):
                text = d.mbarrier(s.op, s.array, self.expr(s.index), s.count, s.tx,
                                  None if s.parity is None else self.expr(s.parity))
            elif isinstance(s, ir.TensorLoad):
                text = d.tensor_load(s.map, [self.expr(c) for c in s.coords], s.dst,
                                     self.expr(s.dst_index), s.bar, self.expr(s.bar_index))
            else:
                text = d.set_max_registers(s.count, s.increase)
            self.emit(text, line)
        elif isinstance(s, ir.Array):
            self.spaces[s.name] = s.space
            if s.name in self.named:
                for k in range(s.count):
                    self.emit(d.decl(register_name(s.name, k), s.dtype, None, True), line)
            elif s.space != "shared":         # shared arrays are declared at the kernel's top
                self.emit(d.array(s.name, s.dtype, s.count, s.space), line)
        else:
            raise TypeError(f"not a launch-IR statement: {s!r}")

    # ---- kernels and the program ------------------------------------------------------

    def kernel(self, k: ir.Kernel) -> None:
        self.spaces = {p.name: ("scratch" if p.kind == "scratch" else "global") for p in k.params}
        sizes = self.sizes or {}
        self.size_params = {p.name: sizes[p.name] for p in k.params
                            if p.kind == "size" and p.name in sizes}
        params = [p for p in k.params if not (p.kind == "size" and p.name in self.size_params)]
        self.named = set()
        self.written = {}
        if getattr(self.d, "writes_out_unrolled", False):
            # registers indexed only by constants once written out: one variable per element
            local = {n.name for n in ir.walk(k.body) if isinstance(n, ir.Array) and n.space == "local"}
            self.named = named_registers(all_written_out(k.body, local, self.written))
        for line in d_lines(self.d.kernel_open(k, params)):
            self.emit(line)
        self.level += 1
        # block memory is declared once, at the top of the kernel (Metal and WGSL want it
        # there; the schedules give every shared array a name of its own)
        for a in (n for n in ir.walk(k.body) if isinstance(n, ir.Array) and n.space == "shared"):
            self.spaces[a.name] = "shared"
            wide = {"align": a.align} if a.align > 16 else {}     # only dialects that align more
            if a.alias and getattr(self.d, "shared_aliases", False):
                wide["alias"] = a.alias     # placed over another (elsewhere: memory of its own)
            self.emit(self.d.array(a.name, a.dtype, a.count, "shared", **wide), a.line)
        self.stmts(k.body)
        self.level -= 1
        for line in d_lines(self.d.kernel_close(k)):
            self.emit(line)

    def program(self) -> Printed:
        self.spaces = {}
        for k in self.p.kernels:
            self.kernel(k)
            self.emit("")
        head = self.d.program_head(self.p, self.sizes)
        tail = self.d.program_tail(self.p, self.sizes).splitlines()
        head = (head + self.d.helpers_text()).splitlines()     # the helpers the kernels need
        source = "\n".join(head + self.out + tail) + "\n"
        return Printed(source, {len(head) + n: ln for n, ln in self.map.items()})


def d_lines(text: str) -> list:
    return text.splitlines() if text else []


def print_program(dialect, program: ir.Program, kernel=None, sizes: dict | None = None) -> Printed:
    """`program` in the dialect's language; `kernel` (the CIR kernel) gives the ZynML text
    for the line comments; `sizes` (by size parameter name) are baked in when given."""
    src = getattr(kernel, "source", "") or ""
    first = getattr(kernel, "first_line", 1) or 1
    return Printer(dialect, program, src, first, sizes).program()
