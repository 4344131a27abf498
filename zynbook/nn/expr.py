"""Expressions traced from a Python callable into one fused ZynML elementwise kernel.

`Device.elementwise(inputs, numel, f)` calls `f` with one `Expr` per input (a list, as the
device interface passes a slice of expression ids); arithmetic on them and the functions
here (`exp`, `tanh`, `maximum`, `where`, ...) build a graph, and the graph becomes the body of
one compute block, with every value used more than once bound once by a `let`.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import ZynMLTypeError

_UNARY = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu", "abs",
          "sin", "cos", "erf", "floor", "ceil")


_NOT_TRACED = ("Python's `==` and `!=` of traced values are not traced (they compare the "
               "Python objects); use zynbook.nn.expr's equal(a, b) and not_equal(a, b)")


class Expr:
    """A node of a traced elementwise expression."""

    __slots__ = ("op", "args", "value", "id")
    _ids = itertools.count(1)      # next() on it is atomic: threads trace at the same time

    def __init__(self, op: str, args=(), value=None):
        self.op, self.args, self.value = op, tuple(args), value
        self.id = next(Expr._ids)

    # arithmetic -----------------------------------------------------------------
    def __add__(self, o): return Expr("+", (self, lift(o)))
    def __radd__(self, o): return Expr("+", (lift(o), self))
    def __sub__(self, o): return Expr("-", (self, lift(o)))
    def __rsub__(self, o): return Expr("-", (lift(o), self))
    def __mul__(self, o): return Expr("*", (self, lift(o)))
    def __rmul__(self, o): return Expr("*", (lift(o), self))
    def __truediv__(self, o): return Expr("/", (self, lift(o)))
    def __rtruediv__(self, o): return Expr("/", (lift(o), self))
    def __pow__(self, o): return Expr("pow", (self, lift(o)))
    def __rpow__(self, o): return Expr("pow", (lift(o), self))
    def __neg__(self): return Expr("neg", (self,))
    def __pos__(self): return self
    def __lt__(self, o): return Expr("<", (self, lift(o)))
    def __le__(self, o): return Expr("<=", (self, lift(o)))
    def __gt__(self, o): return Expr(">", (self, lift(o)))
    def __ge__(self, o): return Expr(">=", (self, lift(o)))

    def __abs__(self): return Expr("abs", (self,))

    def _no_meaning(self, *_):
        raise ZynMLTypeError("an elementwise expression has no `%`, `//` or `@`")

    __mod__ = __rmod__ = __floordiv__ = __rfloordiv__ = __matmul__ = __rmatmul__ = _no_meaning

    def _no_logic(self, *_):
        raise ZynMLTypeError("an elementwise expression has no `&`, `|`, `^`, `~` or shifts: "
                             "combine conditions with where(a, b, 0.0), negate one with "
                             "where(a, 0.0, 1.0)")

    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = __invert__ = _no_logic
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = _no_logic

    def __round__(self, *_):
        raise ZynMLTypeError("an elementwise expression is not a number while it is traced: "
                             "round(x) has no traced form; use zynbook.nn.expr's functions")

    __trunc__ = __floor__ = __ceil__ = __round__

    def __float__(self):
        # math.exp(x) and float(x) ask for a number the traced x does not have yet
        raise ZynMLTypeError("an elementwise expression is not a number while it is traced; "
                             "use zynbook.nn.expr's functions (expr.exp(x), ...), not math's")

    __int__ = __index__ = __float__

    def __bool__(self):
        raise ZynMLTypeError("an elementwise expression has no truth value while it is "
                             "traced; use where(cond, a, b) instead of `if`, and "
                             "zynbook.nn.expr's maximum(a, b) and minimum(a, b) instead of "
                             "Python's max() and min(), which compare")

    # Python's `==` and `!=` would compare the Python objects: a bool that Python arithmetic
    # then takes as a number ((x != 0.0) * 3.0 was 3.0 everywhere), so they refuse at once
    def _no_equality(self, _other):
        raise ZynMLTypeError(_NOT_TRACED)

    __eq__ = __ne__ = _no_equality
    __hash__ = object.__hash__

    # methods: x.exp(), x.tanh(), ...
    def __getattr__(self, name):
        if name in _UNARY:
            return lambda: Expr(name, (self,))
        raise AttributeError(name)


def lift(v) -> Expr:
    if isinstance(v, Expr):
        return v
    # a 0-d array or tensor (a scale computed on the device, `download(total)[0]` in ZynML)
    # is the number it holds
    from .device import _held_number
    v = _held_number(v)
    # numpy's numbers too (np.float32(2.5) was refused), never a truth value: the usual one
    # is Python's `==` or `!=` of a traced value, which compares the Python objects
    if isinstance(v, (bool, np.bool_)):
        raise ZynMLTypeError("an elementwise expression combines expressions and numbers, not "
                             "bool: " + _NOT_TRACED)
    if not isinstance(v, (int, float, np.integer, np.floating)):
        raise ZynMLTypeError(f"an elementwise expression combines expressions and numbers, "
                             f"not {type(v).__name__}")
    try:
        return Expr("const", (), float(v))
    except OverflowError:       # an int past every float (10**400)
        raise ZynMLTypeError(f"the number {v} is too large for a float") from None


def _unary(name):
    def f(x):
        return Expr(name, (lift(x),))
    f.__name__ = name
    f.__doc__ = f"`{name}(x)` inside the fused kernel."
    return f


for _name in _UNARY:
    globals()[_name] = _unary(_name)


def maximum(a, b) -> Expr:
    return Expr("max", (lift(a), lift(b)))


def minimum(a, b) -> Expr:
    return Expr("min", (lift(a), lift(b)))


def pow(a, b) -> Expr:      # noqa: A001 - the ZynML name
    return Expr("pow", (lift(a), lift(b)))


def equal(a, b) -> Expr:
    """`a == b` inside the fused kernel (Python's `==` of two expressions is their identity)."""
    return Expr("==", (lift(a), lift(b)))


def not_equal(a, b) -> Expr:
    """`a != b` inside the fused kernel."""
    return Expr("!=", (lift(a), lift(b)))


def where(cond, a, b) -> Expr:
    """`a` where `cond` holds, else `b` (a comparison such as `x > 0.0`)."""
    return Expr("where", (lift(cond), lift(a), lift(b)))


def _const(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "(-inf)"
    if math.isnan(v):
        raise ZynMLTypeError("an elementwise expression cannot hold a NaN constant")
    text = repr(float(v))
    if "e" in text or "E" in text:
        text = f"{v:.9e}"
    return f"({text})" if v < 0 else text


_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_INFIX = {"+", "-", "*", "/"} | _COMPARE
_MAX_NESTING = 16


def _post_order(out: Expr) -> list:
    """Every node of the graph once, each after its arguments (without recursion: a chain
    of thousands of steps is deeper than Python's stack)."""
    order, seen, stack = [], set(), [(out, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
        elif e.id not in seen:
            seen.add(e.id)
            stack.append((e, True))
            stack.extend((a, False) for a in reversed(e.args))
    return order


def render(out: Expr, names: list) -> tuple[list, str]:
    """(let lines, the final expression) for `out` over inputs `names[k][i]`."""
    order = _post_order(out)
    uses = {out.id: 1}
    for e in order:
        for a in e.args:
            uses[a.id] = uses.get(a.id, 0) + 1
    lets, texts = [], {}
    depth: dict = {}        # how deeply each expression's text nests (0: a name)

    def bind(e, kind: str, value: str) -> str:
        name = f"t{len(lets)}"
        lets.append(f"{kind} {name} = {value}")
        depth[e.id] = 0
        return name

    for e in order:
        if e.op == "input":
            texts[e.id], depth[e.id] = f"{names[e.value]}[i]", 0
            continue
        if e.op == "const":
            texts[e.id], depth[e.id] = _const(e.value), 0
            continue
        # a comparison is a number, 1 or 0, wherever it is an operand (`g * (x > 0.0)`, as
        # the interface's f32 expressions are); where's condition is a truth value, which
        # a number is where it is not 0
        args = []
        for k, a in enumerate(e.args):
            t = texts[a.id]
            if e.op == "where" and k == 0:
                t = t if a.op in _COMPARE else f"({t} != 0.0)"
            elif a.op in _COMPARE:
                t = f"float({t})"
            args.append(t)
        if e.op == "where":
            # ZynML has no conditional expression: a var and an `if`
            texts[e.id] = bind(e, "var", args[2])
            lets.append(f"if {args[0]}:\n    {texts[e.id]} = {args[1]}")
            continue
        if e.op in _INFIX:
            s = f"({args[0]} {e.op} {args[1]})"
        elif e.op == "neg":
            s = f"(-{args[0]})"
        else:
            s = f"{e.op}({', '.join(args)})"
        depth[e.id] = 1 + max(depth[a.id] for a in e.args)
        # a long chain (y = y * a + b, step after step) is bound a few levels at a time: the
        # parser refuses a program that nests too deeply
        if (uses[e.id] > 1 or depth[e.id] >= _MAX_NESTING) and e is not out:
            s = bind(e, "let", s)
        texts[e.id] = s
    return lets, texts[out.id]
