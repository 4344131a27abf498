"""Dtypes and the promotion rules the checker and lowering share.

Rules, in order:
* comparisons and `and`/`or`/`not` give bool;
* two integers give the wider integer (signed wins a tie of widths); `/` of two
  integers is integer division, as in C, CUDA and WGSL;
* an integer with a float gives the float;
* two floats give the wider float; a float *literal* is weak: `x * 0.5` keeps x's dtype,
  so f16 code stays f16;
* bool in arithmetic takes the other operand's type (numpy's bool is below every number),
  and counts as i32 beside a weak one (a literal, a size) or another bool.
"""
from __future__ import annotations

from ..errors import ZynMLTypeError

# the language's named numbers, on the host and in a compute block alike
CONSTANTS = {"inf": float("inf"), "pi": 3.141592653589793, "e": 2.718281828459045,
             "nan": float("nan")}

FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
DTYPES = FLOATS + INTS + ("bool",)

_WIDTH = {"bool": 1, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "f16": 16, "bf16": 16,
          "i32": 32, "u32": 32, "f32": 32, "i64": 64, "u64": 64, "f64": 64}

# names a user may write for dtypes (allocate(dtype=float32), tensor[f16, ...])
DTYPE_ALIASES = {
    "f16": "f16", "float16": "f16", "half": "f16", "bf16": "bf16", "bfloat16": "bf16",
    "f32": "f32", "float32": "f32", "float": "f32", "f64": "f64", "float64": "f64",
    "double": "f64", "i8": "i8", "int8": "i8", "i16": "i16", "int16": "i16",
    "i32": "i32", "int32": "i32", "int": "i32", "i64": "i64", "int64": "i64",
    "u8": "u8", "uint8": "u8", "u16": "u16", "uint16": "u16", "u32": "u32",
    "uint32": "u32", "u64": "u64", "uint64": "u64", "bool": "bool",
}

NUMPY_NAMES = {"f16": "float16", "bf16": "float32", "f32": "float32", "f64": "float64",
               "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
               "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool"}


def dtype_list(names=DTYPES) -> str:
    """`names` as a message lists them ("f16, bf16, ... or bool"): messages read the table,
    so none leaves out a dtype the language has."""
    return f"{', '.join(names[:-1])} or {names[-1]}"


# (narrow, wide): every value of the first dtype is one of the second
EXACT_WIDENING = {("f16", "f32"), ("bf16", "f32"), ("f16", "f64"), ("bf16", "f64"), ("f32", "f64")}


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_int(dtype: str) -> bool:
    return dtype in INTS


def promote(a: str, b: str, weak_a: bool = False, weak_b: bool = False) -> str:
    """The dtype of an arithmetic result on operands of dtypes a and b."""
    if (a == "bool") != (b == "bool") and not (weak_a or weak_b):
        # numpy's bool is below every number: u8 + bool is u8, f16 + bool f16
        return b if a == "bool" else a
    a = "i32" if a == "bool" else a
    b = "i32" if b == "bool" else b
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        if weak_a:
            return b
        if weak_b:
            return a
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        return a if _WIDTH[a] >= _WIDTH[b] else b
    if fa:
        return a
    if fb:
        return b
    if weak_a:
        return b
    if weak_b:
        return a
    wa, wb = _WIDTH[a], _WIDTH[b]
    if wa != wb:
        return a if wa > wb else b
    return a if a.startswith("i") else b


def holds(dtype: str, value: int) -> bool:
    """Whether integer dtype `dtype` holds `value`."""
    bits = _WIDTH[dtype]
    if dtype.startswith("u"):
        return 0 <= value < 2 ** bits
    return -2 ** (bits - 1) <= value < 2 ** (bits - 1)


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of `dtype` (bf16 is 2, though the host holds it as f32)."""
    return max(1, _WIDTH[dtype] // 8)


def dtype_from_numpy(np_dtype) -> str:
    name = str(np_dtype)
    for short, long in NUMPY_NAMES.items():
        if long == name and short != "bf16":
            return short
    if name == "bfloat16":
        return "bf16"
    raise ZynMLTypeError(f"unsupported element type {name}")


def int_pow_exponent(k: int, dtype: str) -> int:
    """A constant exponent `k >= 0` of an integer power in `dtype`, as one that fits the
    dtype and gives the same wrapped result: past the width w, an even base's power is 0
    modulo 2^w and an odd base's repeats every 2^(w-2) (the order of the odd residues), so
    `x ** 131` on i8 is `x ** 75`, not the exponent wrapped to i8 (-125)."""
    bits = _WIDTH[dtype]
    return k if k < bits else bits + (k - bits) % (1 << (bits - 2))


def int_dtype(lo: int, hi: int) -> str:
    """The dtype of integers from `lo` to `hi` written in a program (tensor(), arange()):
    i32, or i64 (u64 past it) where one does not fit 32 bits, as numpy infers them
    (3000000000 is not wrapped)."""
    if hi >= 2 ** 63:
        return "u64"
    return "i64" if lo < -2 ** 31 or hi >= 2 ** 31 else "i32"


def canonical_dtype(name: str) -> str | None:
    return DTYPE_ALIASES.get(name)


def is_weak(e, weak_names=frozenset()) -> bool:
    """A CIR value typed only by literals and sizes (`2 * n`, `sqrt(head_dim)`): it takes
    the dtype of what it meets, as numpy's Python numbers do, so f16 and f64 kernels keep
    their precision. `weak_names`: the sizes, and the locals that still hold such a value
    where `e` is read. A loop variable is an i32 value, not a literal: `i * 2 + h[j]` on i8
    `h` is i32, as `i + h[j]` is; so is an integer read from a tensor (`x[i] * 3 - 1` on
    i64 `x` stays i64)."""
    from . import cir

    if isinstance(e, cir.Const):     # an integer past i32 is i64 and not weak (as numpy's)
        return isinstance(e.value, float) or isinstance(e.value, int) and \
            not isinstance(e.value, bool) and -2 ** 31 <= e.value < 2 ** 31
    if isinstance(e, cir.Var):
        return e.name in weak_names
    if isinstance(e, cir.Call) and e.weak:
        return True
    if isinstance(e, cir.Unary):
        return e.op == "neg" and is_weak(e.operand, weak_names)
    if isinstance(e, (cir.Bin, cir.Call)) and not e.ty.shape:
        args = (e.left, e.right) if isinstance(e, cir.Bin) else e.args
        if isinstance(e, cir.Bin) and e.op not in ("+", "-", "*", "/", "**", "%"):
            return False
        return all(is_weak(a, weak_names) for a in args)
    return False


def arithmetic_dtype(op: str, a, b, weak_a: bool, weak_b: bool) -> str:
    """The dtype of `a op b` (CIR operands) for op in + - * / % **."""
    from . import cir

    dtype = promote(a.ty.dtype, b.ty.dtype, weak_a, weak_b)
    if op == "**" and is_int(dtype) and not (isinstance(b, cir.Const) and b.value >= 0):
        dtype = "f32"
    return dtype


class WeakLocals:
    """Which names hold a weakly typed value: the sizes, and the locals followed statement by
    statement in program order (the order lowering types a body in)."""

    def __init__(self, sizes=()):
        self.names: set = set(sizes)

    def declare(self, name: str, value) -> None:
        if is_weak(value, self.names):
            self.names.add(name)
        else:                        # (a local that shadows a size)
            self.names.discard(name)

    def assign(self, name: str, value) -> None:
        if not is_weak(value, self.names):
            self.names.discard(name)

    def weak(self, e) -> bool:
        return is_weak(e, self.names)
