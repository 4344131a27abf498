"""The CIR verifier: what every pass may assume of its input and must keep in its output.

`verify(kernel, after)` checks:

* names: every `Var` is a size (`Kernel.dims`), a scalar argument, a loop variable of an
  enclosing loop or a local declared before it in an enclosing block; `Assign` targets a
  `var` (a mutable local) in scope; loads read an input, `out` or a shared array declared in
  scope, stores write `out` or such a shared array; a local is declared once per kernel and
  never takes a buffer's name;
* types: `Bin` results follow the rules lowering types them by (`compiler/types.py`:
  comparisons and `and`/`or` give bool, arithmetic promotes with weak literals, followed in
  program order; integer `+ - *` rebuilt by `affine.simplify` is i32); conditions are one bool; loop bounds, steps and scalar indices are
  integers; a constant step is positive;
* `Yield` only in kernels whose output is a reduction (kind `reduce`, or a body that never
  writes out), and every `Yield` in the same loops;
* parallel loops (once marked): none assigns a variable declared outside it, writes a shared
  array declared outside it, or holds a `barrier` with no shared array of its own.

A failure is an internal error (`CIRVerifyError`) that names the pass whose output broke it.
"""
from __future__ import annotations

from .. import cir
from ..types import WeakLocals, arithmetic_dtype, is_float, is_int, promote
from .loops import has_node, names_of

COMPARE = ("<", "<=", ">", ">=", "==", "!=")
ARITH = ("+", "-", "*", "/", "%", "**")


class CIRVerifyError(AssertionError):
    """Internal compiler error: a pass produced CIR that breaks the CIR's rules."""

    def __init__(self, after: str, kernel: cir.Kernel, problem: str):
        self.after = after
        super().__init__(f"internal compiler error: the CIR of kernel {kernel.name} after "
                         f"pass `{after}` is broken: {problem}")


def verify(kernel: cir.Kernel, after: str = "lower") -> cir.Kernel:
    """Check `kernel` (see the module docstring); returns it, raises CIRVerifyError."""
    _Verifier(kernel, after).run()
    return kernel


class _Verifier:
    def __init__(self, kernel: cir.Kernel, after: str):
        self.kernel = kernel
        self.after = after
        self.globals = {d: "size" for d in kernel.dims}
        for s in kernel.scalars:
            self.globals[s.name] = "scalar"
        self.buffers = {b.name: b for b in kernel.inputs}
        self.buffers["out"] = kernel.output
        self.scopes: list = []
        self.declared: set = set()
        self.weak = WeakLocals(kernel.dims)
        self.loops: list = []           # enclosing loops
        self.yield_loops = None
        self._own: dict = {}            # (id of a loop, statement kind) -> names it declares

    def fail(self, problem: str, line: int = 0):
        where = f" (ZynML line {line})" if line else ""
        raise CIRVerifyError(self.after, self.kernel, problem + where)

    # ----------------------------------------------------------------- scopes
    def lookup(self, name):
        return next((s[name] for s in reversed(self.scopes) if name in s), self.globals.get(name))

    def declare(self, name, what, line):
        if name in self.declared:
            self.fail(f"`{name}` is declared twice", line)
        if name in self.buffers:
            self.fail(f"`{name}` is declared but names a buffer", line)
        # a local may shadow a size or scalar name from its declaration on (a mutated
        # program can use a free name as a size before a `let` of the same name)
        self.declared.add(name)
        self.scopes[-1][name] = what

    # ------------------------------------------------------------------ walk
    def run(self):
        k = self.kernel
        kind = k.kernel_type.kind
        writes_out = any(isinstance(n, (cir.Store, cir.Atomic)) and n.buffer == "out"
                         for n in cir.walk(k.body))
        yields = [n for n in cir.walk(k.body) if isinstance(n, cir.Yield)]
        if yields and writes_out:
            self.fail("a kernel both yields and writes out")
        if kind == "reduce" and writes_out:
            self.fail("a reduce kernel writes out")
        self.block(k.body)

    def own(self, loop, kind) -> set:
        """The names of the `kind` statements in `loop`'s body, once per loop (every
        assignment in a parallel loop asks)."""
        key = (id(loop), kind)
        if key not in self._own:
            self._own[key] = names_of(loop.body, kind)
        return self._own[key]

    # (a failure ends the verification, so scopes and loops are popped only on success)
    def block(self, body):
        self.scopes.append({})
        for s in body:
            self.stmt(s)
        self.scopes.pop()

    def stmt(self, s):
        line = getattr(s, "line", 0)
        if isinstance(s, cir.Let):
            self.expr(s.value, line)
            if s.ty is not None and not s.mutable:
                self.fail(f"`let {s.name}` carries a declared type; only a `var` is widened",
                          line)
            self.weak.declare(s.name, s.value)
            self.declare(s.name, "var" if s.mutable else "let", line)
        elif isinstance(s, cir.Assign):
            self.expr(s.value, line)
            what = self.lookup(s.name)
            if what != "var":
                self.fail(f"`{s.name}` is assigned but is "
                          f"{'not declared' if what is None else 'a ' + what}", line)
            for lp in self.loops:
                if lp.parallel and s.name not in self.own(lp, cir.Let):
                    self.fail(f"parallel loop `{lp.var}` assigns `{s.name}`, declared outside it",
                              line)
            self.weak.assign(s.name, s.value)
        elif isinstance(s, (cir.Store, cir.Atomic)):
            self.index(s.buffer, s.index, line, store=True)
            self.expr(s.value, line)
            if isinstance(s, cir.Store) and s.buffer != "out":
                for lp in self.loops:
                    if lp.parallel and s.buffer not in self.own(lp, cir.SharedAlloc):
                        self.fail(f"parallel loop `{lp.var}` writes shared array `{s.buffer}`, "
                                  "declared outside it", line)
        elif isinstance(s, cir.Loop):
            for part in (s.start, s.stop, s.step):
                self.int_scalar(part, "a loop bound or step", line)
            if isinstance(s.step, cir.Const) and s.step.value <= 0:
                self.fail(f"loop `{s.var}` has step {s.step.value}", line)
            if s.parallel and has_node(s.body, cir.Barrier) and not self.own(s, cir.SharedAlloc):
                self.fail(f"parallel loop `{s.var}` holds a barrier but no shared array of "
                          "its own", line)
            self.scopes.append({})
            self.declare(s.var, "loop", line)
            self.loops.append(s)
            self.block(s.body)
            self.loops.pop()
            self.scopes.pop()
        elif isinstance(s, cir.If):
            self.expr(s.cond, line)
            if s.cond.ty != cir.Ty("bool"):
                self.fail(f"an `if` condition is {s.cond.ty}, not bool", line)
            self.block(s.then)
            self.block(s.orelse)
        elif isinstance(s, cir.Yield):
            self.expr(s.value, line)
            if s.index is not None:
                self.expr(s.index, line)
            loops = [lp.var for lp in self.loops]
            if self.yield_loops is None:
                self.yield_loops = loops
            elif loops != self.yield_loops:
                self.fail("yields sit in different loops", line)
        elif isinstance(s, cir.SharedAlloc):
            for d in s.shape:
                if isinstance(d, cir.Expr):
                    self.int_scalar(d, "a shared array size", line)
            if s.name in self.buffers:
                self.fail(f"shared array `{s.name}` has the name of a buffer", line)
            self.declare(s.name, "shared", line)
        elif isinstance(s, cir.Barrier):
            pass
        else:
            self.fail(f"not a CIR statement: {type(s).__name__}", line)

    # ------------------------------------------------------------ expressions
    def int_scalar(self, e, what, line):
        """`e` checked, and an integer scalar."""
        self.expr(e, line)
        if e.ty.shape or not is_int(e.ty.dtype):
            self.fail(f"{what} is {e.ty}, not an integer: {cir.format_expr(e)}", line)

    def index(self, buffer, index, line, store=False):
        if buffer in self.buffers:
            if store and buffer != "out":
                self.fail(f"input `{buffer}` is written", line)
            # out's rank comes from its stores (a slice takes a tile's axes), so only the
            # inputs' ranks are fixed
            rank = len(self.buffers[buffer].shape) if buffer != "out" else None
        elif self.lookup(buffer) == "shared":
            rank = None
        else:
            self.fail(f"`{buffer}` is neither a buffer nor a shared array in scope", line)
        if rank is not None and len(index) > rank:
            self.fail(f"`{buffer}` has {rank} axes but is indexed with {len(index)}", line)
        for it in index:
            if isinstance(it, cir.Span):
                self.int_scalar(it.start, "a slice bound", line)
                if not (store and isinstance(it.stop, cir.Var) and it.stop.name == "__end__"):
                    self.int_scalar(it.stop, "a slice bound", line)
            else:
                self.int_scalar(it, "an index", line)

    def expr(self, e, line):
        if isinstance(e, cir.Const):
            return
        if isinstance(e, cir.Var):
            if self.lookup(e.name) in (None, "shared"):
                self.fail(f"`{e.name}` is used but not defined here", line)
            return
        if isinstance(e, cir.Load):
            self.index(e.buffer, e.index, line)
            return
        if isinstance(e, cir.Bin):
            self.expr(e.left, line)
            self.expr(e.right, line)
            a, b = e.left, e.right
            if e.op in ("and", "or") and (a.ty.dtype != "bool" or b.ty.dtype != "bool"):
                self.fail(f"`{e.op}` of {a.ty} and {b.ty}", line)
            if e.op in COMPARE + ("and", "or"):
                want = "bool"
            elif e.op == "@":
                want = promote(a.ty.dtype, b.ty.dtype)
            elif e.op in ARITH:
                want = arithmetic_dtype(e.op, a, b, self.weak.weak(a), self.weak.weak(b))
            else:
                self.fail(f"unknown operator {e.op}", line)
            if e.ty.dtype != want and not (
                    e.op in ("+", "-", "*") and e.ty.dtype == "i32" and not e.ty.shape
                    and all(is_int(x.ty.dtype) and not x.ty.shape for x in (a, b))) and not (
                    # of two weak floats either dtype is right: `0.5 * c` of a weak `var c`
                    # that meets f64 is computed in f64 (see lower._in_f64)
                    e.ty.dtype in (a.ty.dtype, b.ty.dtype) and is_float(e.ty.dtype)
                    and self.weak.weak(a) and self.weak.weak(b)):
                # sizes, bounds and indices simplified by affine.py are i32 forms
                self.fail(f"`{cir.format_expr(e)}` is typed {e.ty.dtype}; {a.ty.dtype} {e.op} "
                          f"{b.ty.dtype} gives {want}", line)
            return
        if isinstance(e, cir.Unary):
            self.expr(e.operand, line)
            if e.op == "not" and e.operand.ty.dtype != "bool":
                self.fail(f"`not` of {e.operand.ty}", line)
            return
        parts = _OPERANDS.get(type(e))
        if parts is None:
            self.fail(f"not a CIR expression: {e!r}", line)
        for part in parts(e):
            self.expr(part, line)


# the operands of the expressions with no rule of their own
_OPERANDS = {cir.Call: lambda e: e.args, cir.Dot: lambda e: (e.a, e.b),
             cir.Reduce: lambda e: (e.input,), cir.Cast: lambda e: (e.operand,),
             cir.Select: lambda e: (e.cond, e.if_true, e.if_false)}
