"""A renderer base for C-like kernel languages (CUDA C, Metal Shading Language, OpenCL C).

It turns CIR into C text: expressions, statements, loops, local tiles and the generic
schedules that map a CIR loop nest onto threads. What differs between languages (type
names, qualifiers, thread indices, barriers, math function names, warp collectives) is a
hook a subclass overrides, as in tinygrad's `renderer/cstyle.py`.

Sizes are baked into the generated text (`constexpr` per size name): a kernel is rendered
for one binding of its sizes, so loop trip counts, strides and tile extents are constants
the compiler can fold. Scalar arguments that are not sizes stay kernel parameters.

Two generic ways of running a loop nest:

* **thread mode**: every iteration of the outermost perfectly nested parallel loops is one
  thread (grid-stride over the flattened space); the body runs sequentially per thread.
* **block mode**: every iteration is one thread block. Scalar code runs redundantly in all
  threads of the block (so every thread holds the same value), inner loops whose
  iterations are independent are spread over the threads, inner loops that only
  accumulate into outer variables become block reductions, stores outside spread loops
  are made by one thread, `shared var` becomes block-shared memory and `barrier()` a
  block barrier. A `__syncthreads`-style barrier follows every spread loop, so results
  never depend on the mapping.

The reduce schedules (grid-stride partials and a block reduction, a second pass over the
partials; `axis=` reductions one warp / SIMD group or block per output row, or one thread
per output for a strided axis) are shared too, spelled through the hooks for the global
thread index and grid stride, the argmin/argmax index type and the warp and block
collectives. Renderers keep launch geometry, kernel signatures and preludes.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from .. import cir
from .. import errflag
from ..passes.bounds import Facts
# loop analyses: other codegen modules import them from here too
from ..passes.loops import (accumulation, assigned_vars, classify_loop, declared_vars,  # noqa: F401
                            free_vars, has_node, has_tiles, is_tile, static_value,
                            stored_buffers, trip_count)
from ..launch.scalar import const_value as _const_value  # noqa: F401 (wgsl.py imports it here)
from .printer import comment_safe
from ..schedules.nest import Nest
from ...errors import ZynMLDeviceError, Span


class Unsupported(Exception):
    """The renderer cannot express this CIR (raised as a ZynML error by the device)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def no_schedule(kernel, target, sizes):
    """Raise the reason no schedule of compiler/schedules/ takes `kernel` on `target`."""
    from .. import schedules
    raise Unsupported(schedules.why_none(kernel, target, sizes))


# ---------------------------------------------------------------------------- text


class Emitter:
    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self.level = indent
        self.src_lines: dict[int, int] = {}    # generated line index -> ZynML line

    def __call__(self, text: str = "", src_line: int = 0):
        for part in text.split("\n"):
            self.lines.append(("    " * self.level + part) if part else "")
            if src_line:
                self.src_lines[len(self.lines) - 1] = src_line

    def extend(self, lines: list[str]):
        for ln in lines:
            self(ln)

    def open(self, header: str, src_line: int = 0):
        self(header + " {", src_line)
        self.level += 1

    def close(self, tail: str = ""):
        self.level -= 1
        self("}" + tail)

    def text(self) -> str:
        return "\n".join(self.lines)


C_RESERVED = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true", "false",
    "class", "template", "typename", "new", "delete", "this", "namespace", "using",
    "operator", "private", "public", "protected", "virtual", "friend", "half", "float4",
    "int2", "int4", "uint", "min", "max", "abs", "exp", "log", "sqrt", "pow", "sin", "cos",
    "tan", "floor", "ceil", "round", "erf", "tanh", "var", "signed", "asm", "export",
    "device", "kernel", "thread", "threadgroup", "constant", "texture", "sampler",
}


# Every name the user chose (buffers, sizes, scalars, locals, loop variables, the kernel)
# is spelled with this prefix in C, CUDA and MSL, and nothing the renderers generate starts
# with it (generated names start with `_`, `zyn_` or `ZYN_`, or are words of a schedule's
# template): so no ZynML name can meet a C keyword, a macro of the headers (INFINITY, NULL,
# NAN, ...), a math function or a name a schedule declares (`acc`, `MM`, ...).
USER_PREFIX = "u_"


def cname(name: str) -> str:
    """The C identifier of a ZynML name: `x` -> `u_x` (see USER_PREFIX). CIR names are
    identifiers already (lowering gives `w.a` a name of its own)."""
    return USER_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", name)


# ----------------------------------------------------------------------- renderer


@dataclass
class BufInfo:
    name: str           # ZynML name
    c: str              # C identifier
    dtype: str
    shape: tuple        # ints
    strides: tuple      # ints (row-major)
    const: bool = True
    shared: bool = False
    local: bool = False


@dataclass
class Scope:
    """What a C name means while rendering one kernel body."""
    vars: dict = field(default_factory=dict)     # ZynML name -> (C name, dtype, shape ints)
    parent: "Scope | None" = None

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.vars:
                return s.vars[name]
            s = s.parent
        return None

    def child(self):
        return Scope(parent=self)


IDENTITY = {"+": "0", "*": "1", "and": "true", "or": "false"}

# the prelude's functor of each reduction operator
OP_FUNCTOR = {"+": "ZynAdd", "*": "ZynMul", "max": "ZynMax", "min": "ZynMin", "and": "ZynAnd",
              "or": "ZynOr"}


def fold_call(fn: str, args: list) -> str:
    """`fn(fn(a, b), c)`: a two-argument function over several arguments."""
    out = args[0]
    for a in args[1:]:
        out = f"{fn}({out}, {a})"
    return out


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pow2_at_least(n: int, lo: int, hi: int) -> int:
    """The smallest power of two times `lo` that is at least n, at most hi."""
    p = lo
    while p < n and p < hi:
        p *= 2
    return p


def prelude_helpers(q: str) -> str:
    """Prelude text shared by the C-like languages; `q` qualifies each function."""
    return "\n".join([
        # NaN propagates, as numpy's minimum/maximum (the reference) do
        f"template <typename T> {q}T zyn_min(T a, T b) {{ return (b < a || b != b) ? b : a; }}",
        f"template <typename T> {q}T zyn_max(T a, T b) {{ return (a < b || b != b) ? b : a; }}",
        # a half or bfloat16 operand beside a float computes in float
        f"{q}float zyn_min(float a, float b) {{ return (b < a || b != b) ? b : a; }}",
        f"{q}float zyn_max(float a, float b) {{ return (a < b || b != b) ? b : a; }}",
        f"template <typename T> {q}T zyn_iabs(T a) {{ return a < 0 ? -a : a; }}",
        f"template <typename T> {q}T zyn_sq(T a) {{ return a * a; }}"]) + "\n"


class _SiteContext(threading.local):
    """The error sites of the program being rendered: every renderer a program's schedule
    creates adds to the same list, so site numbers are unique in the program."""

    def __init__(self):
        self.stack: list = []

    def collect(self) -> "errflag.ErrorSites":
        self.stack.append(errflag.ErrorSites())
        return self.stack[-1]

    def stop(self):
        self.stack.pop()

    @property
    def current(self):
        return self.stack[-1] if self.stack else None


SITES = _SiteContext()


def prelude_guards(q: str, err: str, fail: str, long_t: str = "long long",
                   ulong_t: str = "unsigned long long") -> str:
    """The checks of the error flag (compiler/errflag.py): `fail` is the body of
    `zyn_fail(e, site, v)` (first failure wins); `err` the flag pointer's type."""
    return (f"{q}void zyn_fail({err} e, int site, {long_t} v) {{ {fail} }}\n"
            f"// an index outside 0..n-1 fails the site and reads element 0 instead\n"
            f"template <typename T> {q}T zyn_chk(T i, T n, {err} e, int site) {{\n"
            f"    if (i < 0 || i >= n) {{ zyn_fail(e, site, ({long_t})i); return 0; }} return i; }}\n"
            f"template <typename T> {q}bool zyn_in(T i, T n, {err} e, int site) {{\n"
            f"    if (i < 0 || i >= n) {{ zyn_fail(e, site, ({long_t})i); return false; }} return true; }}\n"
            f"template <typename T> {q}bool zyn_is_tmin(T a) {{\n"
            f"    return (T)-1 < (T)0 && a == (T)(({ulong_t})1 << (sizeof(T) * 8 - 1)); }}\n"
            f"// integer division and remainder as C (truncating); by 0 (and MIN / -1) they fail\n"
            f"template <typename T> {q}T zyn_idiv(T a, T b, {err} e, int s0, int sov) {{\n"
            f"    if (b == 0) {{ zyn_fail(e, s0, ({long_t})a); return 0; }}\n"
            f"    if (b == (T)-1 && zyn_is_tmin(a)) {{ zyn_fail(e, sov, ({long_t})a); return 0; }}\n"
            f"    return a / b; }}\n"
            f"template <typename T> {q}T zyn_irem(T a, T b, {err} e, int s0) {{\n"
            f"    if (b == 0) {{ zyn_fail(e, s0, ({long_t})a); return 0; }}\n"
            f"    if (b == (T)-1 && (T)-1 < (T)0) return 0;\n"
            f"    return a % b; }}\n")


def prelude_span_len(q: str) -> str:
    return (f"template <typename T> {q}T zyn_span_len(T start, T stop, T dim) {{\n"
            "    T s = start < 0 ? 0 : start; T e = stop < dim ? stop : dim; return e > s ? e - s : 0; }\n")


def prelude_functors(q: str) -> str:
    """The reduction functors (OP_FUNCTOR) of the prelude."""
    ops = (("ZynAdd", "a + b"), ("ZynMul", "a * b"), ("ZynMax", "(a < b || b != b) ? b : a"),
           ("ZynMin", "(b < a || b != b) ? b : a"), ("ZynAnd", "a && b"), ("ZynOr", "a || b"))
    return "".join(f"struct {name} {{ template <typename T> {q}T operator()(T a, T b) const "
                   f"{{ return {body}; }} }};\n" for name, body in ops)


class CStyleRenderer:
    """Shared C-like rendering. Subclasses fill in the language hooks below."""

    lang = "c"
    # ---- language hooks ------------------------------------------------------
    kernel_prefix = "void"
    buffer_qualifier = ""           # address-space qualifier of global pointers
    shared_qualifier = "static"     # block-shared arrays
    restrict = "restrict"
    barrier_stmt = "/* barrier */"
    index_type = "int"
    long_index_type = "long long"
    storage_types = {
        "f16": "half", "bf16": "bfloat16", "f32": "float", "f64": "double",
        "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
        "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int",
        "u64": "unsigned long long", "bool": "bool",
    }

    # the thread's index in its block, the block's index in the grid, the number of blocks
    thread_builtin = "threadIdx.x"
    block_builtin = "blockIdx.x"
    grid_builtin = "gridDim.x"
    # (value, index) reductions: the index's C type and CIR dtype, and "no index yet"
    arg_index_type = "long long"
    arg_index_dtype = "i64"
    arg_index_none = "0x7fffffffffffffffLL"

    def thread_id(self) -> str:
        return f"(int){self.thread_builtin}"

    def block_id(self) -> str:
        return self.block_builtin

    def block_size(self) -> str:
        return str(self.nt)

    def grid_size(self) -> str:
        return self.grid_builtin

    def global_thread_index(self, nt: int) -> str:
        """The first flat iteration of this thread in a grid-stride loop over blocks of nt."""
        raise NotImplementedError

    def grid_stride(self, nt: int) -> str:
        """How far a grid-stride loop over blocks of nt threads steps."""
        raise NotImplementedError

    def arg_flat(self, row: str | None, extent: int) -> str:
        """The flat index (arg_index_type) of `_t` in row `row` of `extent` (no row: `_t`)."""
        raise NotImplementedError

    def compute_type(self, dtype: str) -> str:
        """The C type arithmetic on `dtype` is done in (halves compute in float)."""
        if dtype in ("f16", "bf16"):
            return "float"
        return self.storage_types[dtype]

    def load_value(self, text: str, dtype: str) -> str:
        return text

    def store_value(self, text: str, dtype: str) -> str:
        return text

    def float_literal(self, v: float, dtype: str) -> str:
        if v != v:
            return "NAN"
        if v in (float("inf"), float("-inf")):
            return ("-" if v < 0 else "") + "INFINITY"
        text = repr(float(v))
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("" if dtype == "f64" else "f")

    def math_call(self, fn: str, args: list, dtype: str) -> str:
        f = "" if dtype == "f64" else "f"
        if fn == "relu":
            return f"zyn_max({args[0]}, {self.float_literal(0.0, dtype)})"
        if fn == "sigmoid":
            return f"(1.0{f} / (1.0{f} + exp{f}(-({args[0]}))))"
        if fn == "silu":
            return f"zyn_silu({args[0]})"
        if fn == "gelu":
            return f"zyn_gelu({args[0]})"
        if fn == "rsqrt":
            return f"(1.0{f} / sqrt{f}({args[0]}))"
        if fn == "round":
            return f"rint{f}({args[0]})"
        if fn == "abs":
            return f"fabs{f}({args[0]})"
        if fn in ("min", "max"):
            return fold_call(f"zyn_{fn}", args)
        if fn == "clamp":
            return f"zyn_min(zyn_max({args[0]}, {args[1]}), {args[2]})"
        if fn == "pow":
            return f"pow{f}({args[0]}, {args[1]})"
        return f"{fn}{f}({', '.join(args)})"

    def int_math_call(self, fn: str, args: list, dtype: str) -> str:
        if fn in ("min", "max"):
            return fold_call(f"zyn_{fn}", args)
        if fn == "abs":
            return f"zyn_iabs({args[0]})"
        if fn == "clamp":
            return f"zyn_min(zyn_max({args[0]}, {args[1]}), {args[2]})"
        if fn == "relu":
            return f"zyn_max({args[0]}, ({self.compute_type(dtype)})0)"
        if fn in ("floor", "ceil", "round"):
            return args[0]
        raise Unsupported(f"{fn}() on integers is not supported by the {self.lang} renderer")

    # block collectives (CUDA: warp shuffles; Metal: simdgroup functions)
    def block_reduce(self, op: str, value: str, ctype: str) -> str:
        """Every thread of the block gets the reduction of `value` (of C type ctype)."""
        ident = self.identity(op, {"float": "f32", "double": "f64"}.get(ctype, "i32"))
        if op in ("and", "or"):
            ident = "1" if op == "and" else "0"
        return self.block_allreduce(OP_FUNCTOR[op], value, ctype, ident)

    def block_allreduce(self, functor: str, value: str, ctype: str, ident: str) -> str:
        raise Unsupported(f"block reductions are not available in {self.lang}")

    def simd_allreduce(self, op: str, value: str) -> str:
        """Every lane of the warp / SIMD group gets the reduction of `value`."""
        raise Unsupported(f"warp reductions are not available in {self.lang}")


    # ---- setup per kernel -----------------------------------------------------

    def setup(self, kernel: cir.Kernel, sizes: dict, scalar_dtypes: dict | None = None):
        self.kernel = kernel
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.tmp_counter = 0
        self.buffers: dict[str, BufInfo] = {}
        big = False
        stored = stored_buffers(kernel.body)
        for b in list(kernel.inputs) + [kernel.output]:
            shape = tuple(cir.eval_dim(d, self.sizes) for d in b.shape)
            strides = _strides(shape)
            n = 1
            for d in shape:
                n *= d
            big = big or n >= 2 ** 31 - 1
            const = b is not kernel.output and b.name not in stored and b.access == "read"
            self.buffers[b.name] = BufInfo(b.name, cname(b.name), b.dtype, shape, strides,
                                           const=const)
        # a loop over 2^31 iterations or more counts in 64 bits too
        for lp in (n for n in cir.walk(kernel.body) if isinstance(n, cir.Loop)):
            for bound in (lp.start, lp.stop):
                v = static_value(bound, self.sizes)
                big = big or (isinstance(v, int) and not -2 ** 31 < v < 2 ** 31 - 1)
        self.idx = self.long_index_type if big else self.index_type
        self.scalars = {s.name: s for s in kernel.scalars}
        self.shared_decls: list[str] = []
        self.uses_half = any(b.dtype == "f16" for b in self.buffers.values())
        self.uses_bf16 = any(b.dtype == "bf16" for b in self.buffers.values())
        self.root = Scope()
        self.taken_names = set(cname(n) for n in self.buffers) | set(cname(d) for d in self.sizes)
        for s in kernel.scalars:
            self.root.vars[s.name] = (cname(s.name), s.dtype, ())
        # what may fail at run time (compiler/errflag.py) and what is provably safe
        self.errs = SITES.current if SITES.current is not None else errflag.ErrorSites()
        self.facts = Facts(kernel.body, self.sizes, kernel.dims)
        self.cur_line = kernel.first_line

    def new_tmp(self, stem="t") -> str:
        self.tmp_counter += 1
        return f"_{stem}{self.tmp_counter}"

    def size_constants(self) -> list[str]:
        out = []
        for name in self.kernel.dims:
            if name in self.sizes:
                v = self.sizes[name]
                t = self.idx if -2 ** 31 <= v < 2 ** 31 else self.long_index_type
                out.append(f"constexpr {t} {cname(name)} = {self.literal(v, 'i64' if t != 'int' else 'i32')};")
        return out

    # ---- guards (compiler/errflag.py; what needs one: compiler/passes/bounds.py) ----------

    err_ref = "zyn_err"             # the flag pointer inside a kernel body
    check_type = "long long"        # indices are checked in this type (no truncation first)

    def guarded_index(self, buf: "BufInfo", index, texts: list) -> tuple:
        """(index texts, conditions): entries the analysis cannot prove in range are
        checked; for a load the text itself checks (`zyn_chk`), for a store the caller
        tests the conditions (`zyn_in`) and skips the store."""
        out, conds = [], []
        for k, (ix, t) in enumerate(zip(index, texts)):
            t2, cond = self.guard_one(buf, k, ix, t)
            out.append(t2)
            if cond:
                conds.append(cond)
        return out, conds

    def guard_one(self, buf: "BufInfo", k: int, ix, t: str) -> tuple:
        """(checked text, condition or None) of index entry k of `buf`."""
        if k >= len(buf.shape) or isinstance(ix, (cir.Span, _Text)) \
                or self.facts.index_in_range(ix, buf.shape[k]):
            return t, None
        site = self.errs.add(errflag.INDEX, self.cur_line, buf.name, buf.shape[k])
        ct = self.check_type
        return (f"zyn_chk<{ct}>({t}, ({ct}){buf.shape[k]}, {self.err_ref}, {site})",
                f"zyn_in<{ct}>({t}, ({ct}){buf.shape[k]}, {self.err_ref}, {site})")

    def checked_load(self, buf: "BufInfo", idx: list, conds: list) -> str:
        """`buf[idx]`; where `conds` check indices, a failed check reads nothing (the load
        is skipped for a zero, the error flag is set and the launch raises)."""
        text = self.load_value(f"{buf.c}[{self.offset(buf, idx)}]", buf.dtype)
        if not conds:
            return text
        zero = "false" if buf.dtype == "bool" else f"({self.compute_type(buf.dtype)})0"
        return f"(({' && '.join(conds)}) ? {text} : {zero})"

    def int_divide(self, op: str, a: str, b: str, divisor, dtype: str) -> str:
        """`a / b` or `a % b` on integers, checked unless the divisor is provably safe."""
        nonzero, not_minus_one = self.facts.divisor_safe(divisor) if divisor is not None \
            else (False, False)
        signed = not dtype.startswith("u") and dtype != "bool"
        if nonzero and (not_minus_one or not signed):
            return f"({a} {op} {b})"
        ct = self.compute_type(dtype)
        if op == "/":
            s0 = self.errs.add(errflag.DIV_ZERO, self.cur_line)
            sov = self.errs.add(errflag.DIV_OVERFLOW, self.cur_line)
            return f"zyn_idiv<{ct}>({a}, {b}, {self.err_ref}, {s0}, {sov})"
        s0 = self.errs.add(errflag.REM_ZERO, self.cur_line)
        return f"zyn_irem<{ct}>({a}, {b}, {self.err_ref}, {s0})"

    def operand(self, e, dtype: str, scope, pre) -> str:
        """`e` as a value of `dtype`: a number is written in that type (an exact double for
        f64, never a float literal widened), anything else converted."""
        c = _const_value(e, self.facts.consts)
        if c is not None and dtype in cir.FLOAT_DTYPES and not isinstance(c, bool):
            return self.literal(c, dtype)
        return self.cast_to(self.expr(e, scope, pre), e.ty.dtype, dtype)

    def kernel_params(self, extra: list[str] = ()) -> list[str]:
        ps = []
        for b in list(self.kernel.inputs) + [self.kernel.output]:
            info = self.buffers[b.name]
            const = "const " if info.const else ""
            q = (self.buffer_qualifier + " ") if self.buffer_qualifier else ""
            ps.append(f"{q}{const}{self.storage_types[info.dtype]}* {self.restrict} {info.c}".replace("  ", " "))
        ps.extend(extra)
        for s in self.kernel.scalars:
            if s.name not in self.sizes:
                ps.append(f"{self.compute_type(s.dtype)} {cname(s.name)}")
        return ps

    # ---- expressions -----------------------------------------------------------

    def literal(self, value, dtype: str) -> str:
        if dtype == "bool" or isinstance(value, bool):
            if dtype == "bool":
                return "true" if value else "false"
            value = int(value)
        if dtype in cir.FLOAT_DTYPES:
            return self.float_literal(float(value), dtype)
        v = int(value)
        if dtype in ("i64",) or abs(v) >= 2 ** 31:
            return f"{v}LL"
        if dtype in ("u64",):
            return f"{v}ULL"
        if dtype.startswith("u"):
            return f"{v}u"
        return str(v)

    def var_ref(self, e: cir.Var, scope: Scope) -> str:
        hit = scope.lookup(e.name)
        if hit is not None:
            return hit[0]
        if e.name in self.sizes:
            return cname(e.name)
        if e.name in self.buffers:
            raise Unsupported(f"buffer `{e.name}` used as a value")
        raise Unsupported(f"unknown name `{e.name}` in the kernel body")

    def offset(self, buf: BufInfo, index_c: list[str]) -> str:
        terms = []
        for ic, st in zip(index_c, buf.strides):
            if st == 0:
                continue
            terms.append(ic if st == 1 else f"({ic}) * {st}")
        return " + ".join(terms) if terms else "0"

    def buffer_of(self, name: str, scope: Scope) -> BufInfo:
        hit = scope.lookup("@buf:" + name)
        if hit is not None:
            return hit
        if name in self.buffers:
            return self.buffers[name]
        raise Unsupported(f"unknown buffer `{name}`")

    def cast_to(self, text: str, from_dtype: str, to_dtype: str) -> str:
        if from_dtype == to_dtype:
            return text
        ct = self.compute_type(to_dtype)
        if self.compute_type(from_dtype) == ct:
            return text
        return f"(({ct})({text}))"

    def expr(self, e, scope: Scope, pre: list) -> str:
        """C text of a scalar CIR expression; statements it needs first go to `pre`."""
        if isinstance(e, _Text):
            return e.text
        if is_tile(e):
            raise Unsupported(f"a tile value ({e.ty}) where a scalar is needed: "
                              f"{cir.format_expr(e)}")
        if isinstance(e, cir.Const):
            return self.literal(e.value, e.ty.dtype)
        if isinstance(e, cir.Var):
            return self.var_ref(e, scope)
        if isinstance(e, cir.Load):
            buf = self.buffer_of(e.buffer, scope)
            if any(isinstance(i, cir.Span) for i in e.index) or len(e.index) < len(buf.shape):
                # a one-element tile (e.g. a 0-d buffer read whole)
                if all(d == 1 for d in buf.shape[len(e.index):]) and not any(
                        isinstance(i, cir.Span) for i in e.index):
                    idx = [self.index_expr(i, scope, pre) for i in e.index]
                    conds = self.guarded_index(buf, e.index, idx)[1]
                    idx += ["0"] * (len(buf.shape) - len(idx))
                    return self.checked_load(buf, idx, conds)
                raise Unsupported(f"slice `{cir.format_expr(e)}` used as a scalar")
            idx = [self.index_expr(i, scope, pre) for i in e.index]
            conds = self.guarded_index(buf, e.index, idx)[1]
            return self.checked_load(buf, idx, conds)
        if isinstance(e, cir.Bin):
            return self.bin_expr(e, scope, pre)
        if isinstance(e, cir.Unary):
            x = self.expr(e.operand, scope, pre)
            if e.op == "neg":
                return f"(-{x})"
            return f"(!{x})"
        if isinstance(e, cir.Cast):
            c = _const_value(e.operand, self.facts.consts)
            if c is not None and e.ty.dtype in cir.FLOAT_DTYPES and not isinstance(c, bool):
                return self.literal(c, e.ty.dtype)
            x = self.expr(e.operand, scope, pre)
            if e.ty.dtype == "bool":
                return f"(({x}) != 0)"
            return f"(({self.compute_type(e.ty.dtype)})({x}))"
        if isinstance(e, cir.Select):
            c = self.expr(e.cond, scope, pre)
            a = self.operand(e.if_true, e.ty.dtype, scope, pre)
            b = self.operand(e.if_false, e.ty.dtype, scope, pre)
            return f"(({c}) ? {a} : {b})"
        if isinstance(e, cir.Call):
            return self.call_expr(e, scope, pre)
        if isinstance(e, cir.Dot):
            return self.dot_expr(e, scope, pre)
        if isinstance(e, cir.Reduce):
            return self.reduce_expr(e, scope, pre)
        raise Unsupported(f"cannot render {type(e).__name__}")

    def index_expr(self, e, scope, pre) -> str:
        text = self.expr(e, scope, pre)
        if e.ty.dtype in cir.FLOAT_DTYPES:
            return f"(({self.idx})({text}))"
        return text

    def bin_expr(self, e: cir.Bin, scope, pre, divisor=None) -> str:
        op = e.op
        lt, rt = e.left.ty.dtype, e.right.ty.dtype
        dt = e.ty.dtype
        if op in ("<", "<=", ">", ">=", "==", "!="):
            # a number compared with a float is written in that float's type
            fl = [t for t in (lt, rt) if t in cir.FLOAT_DTYPES]
            ct = ("f64" if "f64" in fl else fl[0]) if fl else None
        else:
            ct = dt if dt in cir.FLOAT_DTYPES else None

        def side(x):
            c = _const_value(x, self.facts.consts)
            if ct and c is not None and not isinstance(c, bool):
                return self.literal(c, ct)
            return self.expr(x, scope, pre)
        a, b = side(e.left), side(e.right)
        if ct and _const_value(e.left, self.facts.consts) is not None:
            lt = ct
        if ct and _const_value(e.right, self.facts.consts) is not None:
            rt = ct
        if op in ("and", "or"):
            return f"({a} {'&&' if op == 'and' else '||'} {b})"
        if op in ("<", "<=", ">", ">=", "==", "!="):
            if (lt in cir.FLOAT_DTYPES) != (rt in cir.FLOAT_DTYPES):
                ft = lt if lt in cir.FLOAT_DTYPES else rt
                a, b = self.cast_to(a, lt, ft), self.cast_to(b, rt, ft)
            return f"({a} {op} {b})"
        a, b = self.cast_to(a, lt, dt), self.cast_to(b, rt, dt)
        if dt in cir.FLOAT_DTYPES:
            if op == "%":
                return self.math_call("fmod", [a, b], dt)
            if op == "**":
                if isinstance(e.right, cir.Const) and e.right.value == 2:
                    return f"zyn_sq({a})"
                return self.math_call("pow", [a, b], dt)
            return f"({a} {op} {b})"
        # integers divide and take remainders as C does (truncating), like the reference
        if op == "**":
            return f"zyn_ipow({a}, {b})"
        if dt == "bool" and op in ("+", "*"):
            return f"({a} {'||' if op == '+' else '&&'} {b})"
        if op in ("/", "%"):
            return self.int_divide(op, a, b, e.right if divisor is None else divisor, dt)
        return f"({a} {op} {b})"

    def call_expr(self, e: cir.Call, scope, pre) -> str:
        if e.fn in ("zeros", "ones"):
            return self.literal(0 if e.fn == "zeros" else 1, e.ty.dtype)
        if e.fn in cir.TILE_FUNCTIONS:
            if e.fn == "sum":
                return self.reduce_expr(cir.Reduce("+", e.args[0], None, e.ty), scope, pre)
            raise Unsupported(f"{e.fn}() of a tile used as a scalar")
        dt = e.ty.dtype
        args = [self.operand(a, dt, scope, pre) for a in e.args]
        if dt in cir.FLOAT_DTYPES:
            return self.math_call(e.fn, args, dt)
        if e.fn in ("min", "max", "abs", "clamp", "relu", "floor", "ceil", "round"):
            return self.int_math_call(e.fn, args, dt)
        # math on integers: the result type says float elsewhere; compute in float
        return self.math_call(e.fn, [f"(float)({a})" for a in args], "f32")

    # ---- tiles (rendered element by element) ------------------------------------

    def tile_shape(self, e, scope, pre) -> list[str]:
        """C expressions for the extents of a tile value (clipped slices included)."""
        if isinstance(e, cir.Load):
            buf = self.buffer_of(e.buffer, scope)
            shape = []
            for k, ix in enumerate(e.index):
                if isinstance(ix, cir.Span):
                    st = self.index_expr(ix.start, scope, pre)
                    sp = self.index_expr(ix.stop, scope, pre)
                    shape.append(f"zyn_span_len({st}, {sp}, ({self.idx}){buf.shape[k]})")
            shape += [str(d) for d in buf.shape[len(e.index):]]
            return shape
        if isinstance(e, cir.Var):
            hit = scope.lookup(e.name)
            if hit is None or not hit[2]:
                return []
            return [str(d) for d in hit[2]]
        if isinstance(e, (cir.Const,)) or not e.ty.shape:
            return []
        if isinstance(e, cir.Bin) and e.op == "@":
            a = self.tile_shape(e.left, scope, pre)
            b = self.tile_shape(e.right, scope, pre)
            return a[:-1] + b[1:]
        if isinstance(e, cir.Bin):
            return self._broadcast_shape(e, [e.left, e.right], scope, pre)
        if isinstance(e, (cir.Unary, cir.Cast)):
            return self.tile_shape(e.operand, scope, pre)
        if isinstance(e, cir.Select):
            return self._broadcast_shape(e, [e.cond, e.if_true, e.if_false], scope, pre)
        if isinstance(e, cir.Call):
            if e.fn in ("zeros", "ones"):
                return [self.index_expr(a, scope, pre) for a in e.args]
            if e.fn == "transpose":
                s = self.tile_shape(e.args[0], scope, pre)
                return s[::-1]
            if e.fn in ("row_max", "row_sum"):
                s = self.tile_shape(e.args[0], scope, pre)
                return s[:-1] + (["1"] if len(e.ty.shape) == len(s) else [])
            return self._broadcast_shape(e, list(e.args), scope, pre)
        if isinstance(e, cir.Reduce):
            s = self.tile_shape(e.input, scope, pre)
            if e.axis is None:
                return []
            ax = e.axis % len(s)
            if len(e.ty.shape) == len(s):
                return s[:ax] + ["1"] + s[ax + 1:]
            return s[:ax] + s[ax + 1:]
        raise Unsupported(f"cannot take the shape of {cir.format_expr(e)}")

    def _broadcast_shape(self, e, operands, scope, pre):
        rank = len(e.ty.shape)
        out = [None] * rank
        for op in operands:
            s = self.tile_shape(op, scope, pre)
            static = list(op.ty.shape) if op.ty.shape else []
            for k in range(len(s)):
                pos = rank - len(s) + k
                if pos < 0:
                    continue
                st = static[k] if k < len(static) else None
                if st == 1 or s[k] == "1":
                    if out[pos] is None:
                        out[pos] = "1"
                    continue
                if out[pos] in (None, "1"):
                    out[pos] = s[k]
        return [x if x is not None else "1" for x in out]

    def tile_elem(self, e, idx: list, scope, pre) -> str:
        """C text of the element of tile `e` at tile position `idx` (C expressions)."""
        if not e.ty.shape and not (isinstance(e, cir.Load) and self._load_is_tile(e, scope)):
            return self.expr(e, scope, pre)
        if isinstance(e, cir.Load):
            buf = self.buffer_of(e.buffer, scope)
            full = []
            k = 0
            axes = self._tile_axes(e, scope)
            for pos, ix in enumerate(e.index):
                if isinstance(ix, cir.Span):
                    st = self.index_expr(ix.start, scope, pre)
                    full.append(f"zyn_max(({self.idx})({st}), ({self.idx})0) + {idx[len(idx) - axes + k]}")
                    k += 1
                else:
                    full.append(self.guard_one(buf, pos, ix, self.index_expr(ix, scope, pre))[0])
            for d in range(len(e.index), len(buf.shape)):
                full.append(idx[len(idx) - axes + k])
                k += 1
            return self.load_value(f"{buf.c}[{self.offset(buf, full)}]", buf.dtype)
        if isinstance(e, cir.Var):
            hit = scope.lookup(e.name)
            if hit is None:
                return self.var_ref(e, scope)
            c, dt, shape = hit
            if not shape:
                return c
            sub = idx[len(idx) - len(shape):]
            strides = _strides(shape)
            terms = [(i if shape[n] != 1 else "0") + ("" if strides[n] == 1 else f" * {strides[n]}")
                     for n, i in enumerate(sub)]
            return f"{c}[{' + '.join(terms) if terms else '0'}]"
        if isinstance(e, cir.Const):
            return self.literal(e.value, e.ty.dtype)
        if isinstance(e, cir.Bin) and e.op == "@":
            return self._tile_matmul_elem(e, idx, scope, pre)
        if isinstance(e, cir.Bin):
            a = self._operand_elem(e.left, e, idx, scope, pre)
            b = self._operand_elem(e.right, e, idx, scope, pre)
            fake = cir.Bin(e.op, _Text(a, e.left.ty.dtype), _Text(b, e.right.ty.dtype),
                           cir.Ty(e.ty.dtype))
            return self.bin_expr(fake, scope, pre,
                                 divisor=e.right if not e.right.ty.shape else None)
        if isinstance(e, cir.Unary):
            x = self._operand_elem(e.operand, e, idx, scope, pre)
            return f"(-{x})" if e.op == "neg" else f"(!{x})"
        if isinstance(e, cir.Cast):
            x = self._operand_elem(e.operand, e, idx, scope, pre)
            return f"(({self.compute_type(e.ty.dtype)})({x}))"
        if isinstance(e, cir.Select):
            c = self._operand_elem(e.cond, e, idx, scope, pre)
            a = self._operand_elem(e.if_true, e, idx, scope, pre)
            b = self._operand_elem(e.if_false, e, idx, scope, pre)
            return f"(({c}) ? {a} : {b})"
        if isinstance(e, cir.Call):
            if e.fn in ("zeros", "ones"):
                return self.literal(0 if e.fn == "zeros" else 1, e.ty.dtype)
            if e.fn == "transpose":
                return self.tile_elem(e.args[0], list(reversed(idx)), scope, pre)
            if e.fn in ("row_max", "row_sum"):
                op = "max" if e.fn == "row_max" else "+"
                src = e.args[0]
                shape = self.tile_shape(src, scope, pre)
                lead = idx[:len(shape) - 1] if len(e.ty.shape) < len(shape) else idx[:-1]
                return self._hoist_reduce(op, src, lead, [shape[-1]], e.ty.dtype, scope, pre)
            if e.fn == "sum":
                return self._hoist_reduce("+", e.args[0], [], None, e.ty.dtype, scope, pre)
            dt = e.ty.dtype
            args = [self.cast_to(self._operand_elem(a, e, idx, scope, pre), a.ty.dtype, dt)
                    for a in e.args]
            if dt in cir.FLOAT_DTYPES:
                return self.math_call(e.fn, args, dt)
            return self.int_math_call(e.fn, args, dt)
        if isinstance(e, cir.Reduce):
            src = e.input
            shape = self.tile_shape(src, scope, pre)
            if e.axis is None:
                return self._hoist_reduce(e.op, src, [], None, e.ty.dtype, scope, pre)
            ax = e.axis % len(shape)
            keep = len(e.ty.shape) == len(shape)
            outer = idx[:ax]
            inner = idx[ax + 1:] if keep else idx[ax:]
            return self._hoist_reduce_axis(e.op, src, outer, inner, shape[ax], e.ty.dtype,
                                           scope, pre)
        if isinstance(e, cir.Dot):
            return self.dot_expr(e, scope, pre)
        raise Unsupported(f"cannot render tile expression {cir.format_expr(e)}")

    def _load_is_tile(self, e: cir.Load, scope) -> bool:
        buf = self.buffer_of(e.buffer, scope)
        return any(isinstance(i, cir.Span) for i in e.index) or len(e.index) < len(buf.shape)

    def _tile_axes(self, e: cir.Load, scope) -> int:
        buf = self.buffer_of(e.buffer, scope)
        return sum(isinstance(i, cir.Span) for i in e.index) + len(buf.shape) - len(e.index)

    def _operand_elem(self, operand, parent, idx, scope, pre):
        """Element of a broadcast operand: align trailing axes; size-1 axes read index 0."""
        if not operand.ty.shape and not (isinstance(operand, cir.Load)
                                         and self._load_is_tile(operand, scope)):
            return self.expr(operand, scope, pre)
        rank = len(operand.ty.shape) if operand.ty.shape else self._tile_axes(operand, scope)
        sub = list(idx[len(idx) - rank:]) if rank else []
        for k, d in enumerate(operand.ty.shape):
            if d == 1 and (k >= len(parent.ty.shape) or True):
                pos = len(parent.ty.shape) - rank + k
                if pos >= 0 and parent.ty.shape[pos] != 1:
                    sub[k] = "0"
        return self.tile_elem(operand, sub, scope, pre)

    def _tile_matmul_elem(self, e, idx, scope, pre):
        a_shape = self.tile_shape(e.left, scope, pre)
        acc = self.new_tmp("mm")
        k = self.new_tmp("k")
        ct = self.compute_type(e.ty.dtype)
        inner: list = []
        lead = idx[:-2]
        av = self.tile_elem(e.left, lead + [idx[-2], k], scope, inner)
        bv = self.tile_elem(e.right, lead + [k, idx[-1]], scope, inner)
        pre.append(f"{ct} {acc} = 0;")
        pre.append(f"for ({self.idx} {k} = 0; {k} < {a_shape[-1]}; ++{k}) {{")
        pre.extend("    " + ln for ln in inner)
        pre.append(f"    {acc} += ({ct})({av}) * ({ct})({bv});")
        pre.append("}")
        return acc

    def _combine(self, op: str, acc: str, v: str, dtype: str) -> str:
        if op in ("+", "*"):
            return f"{acc} = {acc} {op} {v};"
        if op in ("max", "min"):
            return f"{acc} = zyn_{op}({acc}, {v});"
        if op == "and":
            return f"{acc} = {acc} && {v};"
        if op == "or":
            return f"{acc} = {acc} || {v};"
        raise Unsupported(f"reduction `{op}` inside an expression")

    def identity(self, op: str, dtype: str) -> str:
        if op in IDENTITY:
            return IDENTITY[op] if dtype not in cir.FLOAT_DTYPES else \
                self.float_literal(float(IDENTITY[op] == "1"), dtype)
        if op in ("max", "argmax"):
            return self.lowest(dtype)
        if op in ("min", "argmin"):
            return self.highest(dtype)
        raise Unsupported(f"no identity for reduction `{op}`")

    def lowest(self, dtype):
        if dtype in cir.FLOAT_DTYPES:
            return self.float_literal(float("-inf"), dtype)
        return {"i8": "-128", "i16": "-32768", "i32": "(-2147483647 - 1)",
                "i64": "(-9223372036854775807LL - 1)", "bool": "false"}.get(dtype, "0")

    def highest(self, dtype):
        if dtype in cir.FLOAT_DTYPES:
            return self.float_literal(float("inf"), dtype)
        return {"i8": "127", "i16": "32767", "i32": "2147483647",
                "i64": "9223372036854775807LL", "u8": "255u", "u16": "65535u",
                "u32": "4294967295u", "u64": "18446744073709551615ULL",
                "bool": "true"}[dtype]

    def _hoist_reduce(self, op, src, lead, last_extent, dtype, scope, pre):
        """Reduce tile `src` over all axes after `lead` (fixed indices) to a scalar."""
        shape = self.tile_shape(src, scope, pre)
        rest = shape[len(lead):]
        acc = self.new_tmp("r")
        ct = self.compute_type(dtype)
        pre.append(f"{ct} {acc} = {self.identity(op, dtype)};")
        loops = []
        for ext in rest:
            v = self.new_tmp("i")
            loops.append(v)
            pre.append("    " * (len(loops) - 1) + f"for ({self.idx} {v} = 0; {v} < {ext}; ++{v}) {{")
        inner: list = []
        val = self.tile_elem(src, list(lead) + loops, scope, inner)
        pad = "    " * len(loops)
        pre.extend(pad + ln for ln in inner)
        pre.append(pad + self._combine(op, acc, f"({ct})({val})", dtype))
        for n in range(len(loops)):
            pre.append("    " * (len(loops) - 1 - n) + "}")
        return acc

    def _hoist_reduce_axis(self, op, src, outer, inner_idx, extent, dtype, scope, pre):
        acc = self.new_tmp("r")
        v = self.new_tmp("i")
        ct = self.compute_type(dtype)
        pre.append(f"{ct} {acc} = {self.identity(op, dtype)};")
        pre.append(f"for ({self.idx} {v} = 0; {v} < {extent}; ++{v}) {{")
        body: list = []
        val = self.tile_elem(src, list(outer) + [v] + list(inner_idx), scope, body)
        pre.extend("    " + ln for ln in body)
        pre.append("    " + self._combine(op, acc, f"({ct})({val})", dtype))
        pre.append("}")
        return acc

    def dot_expr(self, e: cir.Dot, scope, pre) -> str:
        sa = self.tile_shape(e.a, scope, pre)
        if len(sa) != 1:
            raise Unsupported(f"dot() of a tile with {len(sa)} axes")
        acc = self.new_tmp("dot")
        k = self.new_tmp("k")
        ct = self.compute_type(e.ty.dtype)
        inner: list = []
        a = self.tile_elem(e.a, [k], scope, inner)
        b = self.tile_elem(e.b, [k], scope, inner)
        pre.append(f"{ct} {acc} = 0;")
        pre.append(f"for ({self.idx} {k} = 0; {k} < {sa[0]}; ++{k}) {{")
        pre.extend("    " + ln for ln in inner)
        pre.append(f"    {acc} += ({ct})({a}) * ({ct})({b});")
        pre.append("}")
        return acc

    def reduce_expr(self, e: cir.Reduce, scope, pre) -> str:
        if e.op in ("argmax", "argmin"):
            raise Unsupported("argmax/argmin of a tile inside a kernel body")
        if e.axis is not None and e.ty.shape:
            raise Unsupported("reduce(..., axis=) of a tile used as a scalar")
        return self._hoist_reduce(e.op, e.input, [], None, e.ty.dtype, scope, pre)

    # ---- statements (sequential, one thread) ------------------------------------

    def emit_pre(self, em: Emitter, pre: list, line=0):
        for ln in pre:
            em(ln, line)

    def comment(self, em: Emitter, s: cir.Stmt):
        line = getattr(s, "line", 0)
        self.cur_line = line or self.cur_line
        text = self.source_line(line)
        if text:
            em(f"// line {line}: {text.strip()}", line)

    def source_line(self, line: int) -> str:
        """ZynML line `line`, safe inside a `//` comment (comment_safe)."""
        k = self.kernel
        if not line or not k.source:
            return ""
        rel = line - k.first_line if k.first_line else line - 1
        lines = k.source.splitlines()
        if 0 <= rel < len(lines):
            return comment_safe(lines[rel])
        return ""

    def declare_local(self, em: Emitter, s: cir.Let, scope: Scope):
        pre: list = []
        line = s.line
        if is_tile(s.value) or s.value.ty.shape:
            shape_c = self.tile_shape(s.value, scope, pre)
            static = []
            for d in s.value.ty.shape:
                v = d if isinstance(d, int) else (self.sizes.get(d) if isinstance(d, str) else
                                                  static_value(d, self.sizes))
                if v is None:
                    raise Unsupported(f"tile `{s.name}` has a size not known before launch "
                                      f"({s.value.ty})", line)
                static.append(int(v))
            if not s.mutable and not isinstance(s.value, (cir.Bin,)) and False:
                pass
            c = cname(s.name) + "_" + str(self.tmp_counter)
            self.tmp_counter += 1
            n = 1
            for d in static:
                n *= d
            ct = self.compute_type(s.value.ty.dtype)
            self.emit_pre(em, pre, line)
            em(f"{ct} {c}[{n}];", line)
            scope.vars[s.name] = (c, s.value.ty.dtype, tuple(static))
            self.assign_tile(em, c, tuple(static), s.value, scope, line)
            return
        v = self.expr(s.value, scope, pre)
        self.emit_pre(em, pre, line)
        c = self.unique_name(cname(s.name), scope.lookup(s.name) is not None)
        ct = self.compute_type(s.value.ty.dtype)
        q = "" if s.mutable else "const "
        em(f"{q}{ct} {c} = {v};", line)
        scope.vars[s.name] = (c, s.value.ty.dtype, ())

    def assign_tile(self, em, c, static, value, scope, line):
        """Write tile `value` into local array `c` (through a temporary when it reads c)."""
        n = 1
        for d in static:
            n *= d
        ct = "float"
        reads_self = any(isinstance(x, cir.Var) and scope.lookup(x.name) and
                         scope.lookup(x.name)[0] == c for x in cir.walk(value))
        target = c
        if reads_self:
            target = self.new_tmp("tile")
            em(f"{ct} {target}[{n}];", line)
        ivs = [self.new_tmp("e") for _ in static]
        for v, d in zip(ivs, static):
            em.open(f"for ({self.idx} {v} = 0; {v} < {d}; ++{v})", line)
        pre: list = []
        if value.ty.shape or (isinstance(value, cir.Load) and self._load_is_tile(value, scope)):
            val = self.tile_elem(value, ivs, scope, pre)
        else:
            val = self.expr(value, scope, pre)
        self.emit_pre(em, pre, line)
        strides = _strides(static)
        off = " + ".join(f"{v} * {s}" if s != 1 else v for v, s in zip(ivs, strides)) or "0"
        em(f"{target}[{off}] = {val};", line)
        for _ in static:
            em.close()
        if reads_self:
            em(f"for (int _c = 0; _c < {n}; ++_c) {c}[_c] = {target}[_c];", line)

    def store_stmt(self, em, s: cir.Store, scope: Scope):
        buf = self.buffer_of(s.buffer, scope)
        pre: list = []
        tile_target = (not s.index) or any(isinstance(i, cir.Span) for i in s.index) or \
            len(s.index) < len(buf.shape)
        if not tile_target:
            idx = [self.index_expr(i, scope, pre) for i in s.index]
            _, conds = self.guarded_index(buf, s.index, idx)
            if s.value.ty.shape:
                val = self.tile_elem(s.value, ["0"] * len(s.value.ty.shape), scope, pre)
                val = self.cast_to(val, s.value.ty.dtype, buf.dtype)
            else:
                val = self.operand(s.value, buf.dtype, scope, pre)
            self.emit_pre(em, pre, s.line)
            guard = f"if ({' && '.join(conds)}) " if conds else ""
            em(f"{guard}{buf.c}[{self.offset(buf, idx)}] = {self.store_value(val, buf.dtype)};", s.line)
            return
        target = cir.Load(s.buffer, s.index, cir.Ty(buf.dtype, ("?",)))
        shape = self.tile_shape(target, scope, pre)
        self.emit_pre(em, pre, s.line)
        ivs = [self.new_tmp("e") for _ in shape]
        for v, d in zip(ivs, shape):
            em.open(f"for ({self.idx} {v} = 0; {v} < {d}; ++{v})", s.line)
        self.store_tile_elem(em, s, buf, target, ivs, scope)
        for _ in shape:
            em.close()

    def store_tile_elem(self, em, s, buf, target, ivs, scope):
        pre: list = []
        addr = self.tile_elem(target, ivs, scope, pre)
        addr = _strip_load(addr)
        val = self.value_at(s.value, ivs, scope, pre)
        val = self.cast_to(val, s.value.ty.dtype, buf.dtype)
        self.emit_pre(em, pre, s.line)
        em(f"{addr} = {self.store_value(val, buf.dtype)};", s.line)

    def value_at(self, value, ivs, scope, pre):
        if value.ty.shape or (isinstance(value, cir.Load) and self._load_is_tile(value, scope)):
            rank = len(value.ty.shape) if value.ty.shape else self._tile_axes(value, scope)
            sub = list(ivs[len(ivs) - rank:]) if rank else []
            for k, d in enumerate(value.ty.shape):
                if d == 1:
                    sub[k] = "0"
            return self.tile_elem(value, sub, scope, pre)
        return self.expr(value, scope, pre)

    def atomic_stmt(self, em, s: cir.Atomic, scope):
        raise Unsupported(f"atomics are not available in {self.lang}")

    def atomic_operands(self, em, s: cir.Atomic, scope):
        """(buffer, element offset, value) of an atomic update; what they need is emitted."""
        buf = self.buffer_of(s.buffer, scope)
        pre: list = []
        self.cur_line = s.line or self.cur_line
        idx = [self.index_expr(i, scope, pre) for i in s.index]
        idx = self.guarded_index(buf, s.index, idx)[0]
        v = self.operand(s.value, buf.dtype, scope, pre)
        self.emit_pre(em, pre, s.line)
        return buf, self.offset(buf, idx), v


    def loop_header(self, s: cir.Loop, c: str, scope, pre) -> str:
        a = self.index_expr(s.start, scope, pre)
        b = self.index_expr(s.stop, scope, pre)
        st = self.index_expr(s.step, scope, pre)
        inc = f"++{c}" if st == "1" else f"{c} += {st}"
        return f"for ({self.idx} {c} = {a}; {c} < {b}; {inc})"

    def stmts(self, em: Emitter, body, scope: Scope):
        """Render statements sequentially (one thread's view)."""
        for s in body:
            self.stmt(em, s, scope)

    def stmt(self, em: Emitter, s, scope: Scope):
        self.cur_line = getattr(s, "line", 0) or self.cur_line
        if isinstance(s, cir.Let):
            self.comment(em, s)
            self.declare_local(em, s, scope)
        elif isinstance(s, cir.Assign):
            self.comment(em, s)
            hit = scope.lookup(s.name)
            if hit is None:
                raise Unsupported(f"assignment to unknown variable `{s.name}`", s.line)
            c, dt, shape = hit
            if shape:
                self.assign_tile(em, c, shape, s.value, scope, s.line)
                return
            pre: list = []
            v = self.operand(s.value, dt, scope, pre)
            self.emit_pre(em, pre, s.line)
            em(f"{c} = {v};", s.line)
        elif isinstance(s, cir.Store):
            self.comment(em, s)
            self.store_stmt(em, s, scope)
        elif isinstance(s, cir.Loop):
            self.comment(em, s)
            pre: list = []
            c = self.loop_var_name(s.var)
            header = self.loop_header(s, c, scope, pre)
            self.emit_pre(em, pre, s.line)
            inner = scope.child()
            inner.vars[s.var] = (c, "i64" if self.idx != "int" else "i32", ())
            em.open(header, s.line)
            self.stmts(em, s.body, inner)
            em.close()
        elif isinstance(s, cir.If):
            pre: list = []
            c = self.expr(s.cond, scope, pre)
            self.emit_pre(em, pre, s.line)
            em.open(f"if ({c})", s.line)
            with self.facts.assuming(s.cond):
                self.stmts(em, s.then, scope.child())
            if s.orelse:
                em.close(" else {")
                em.level += 1
                self.stmts(em, s.orelse, scope.child())
            em.close()
        elif isinstance(s, cir.Yield):
            raise Unsupported("`yield` outside a reduce kernel", s.line)
        elif isinstance(s, cir.Atomic):
            self.atomic_stmt(em, s, scope)
        elif isinstance(s, cir.SharedAlloc):
            self.shared_alloc(em, s, scope)
        elif isinstance(s, cir.Barrier):
            em(self.barrier_stmt, s.line)
        else:
            raise Unsupported(f"cannot render statement {type(s).__name__}")

    def loop_var_name(self, name: str) -> str:
        return self.unique_name(cname(name))

    def unique_name(self, c: str, force: bool = False) -> str:
        """`c`, or `c_N` when taken (or when `force`), never a name already given."""
        if c in self.taken_names or force:
            base = c
            while c in self.taken_names or c == base:
                c = f"{base}_{self.tmp_counter}"
                self.tmp_counter += 1
        self.taken_names.add(c)
        return c

    def shared_alloc(self, em, s: cir.SharedAlloc, scope):
        dims = []
        for d in s.shape:
            v = d if isinstance(d, int) else (self.sizes.get(d) if isinstance(d, str)
                                              else static_value(d, self.sizes))
            if v is None:
                raise Unsupported(f"shared array `{s.name}` needs sizes known at launch", s.line)
            dims.append(int(v))
        n = 1
        for d in dims:
            n *= d
        c = cname(s.name)
        self.shared_decls.append(f"{self.shared_qualifier} {self.storage_types[s.dtype]} {c}[{n}];")
        info = BufInfo(s.name, c, s.dtype, tuple(dims), _strides(tuple(dims)), const=False,
                       shared=True)
        scope.vars["@buf:" + s.name] = info


class _Text(cir.Expr):
    """Already rendered C text standing in for a CIR expression."""

    def __init__(self, text, dtype):
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "ty", cir.Ty(dtype))


def _strip_load(text: str) -> str:
    """`load(x[i])` -> `x[i]`: the address of an element for a store."""
    m = re.match(r"^[A-Za-z_0-9]+\((.*)\)$", text)
    if m and "[" in m.group(1) and m.group(1).endswith("]"):
        return m.group(1)
    return text


def _strides(shape: tuple) -> tuple:
    out = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def raise_unsupported(kernel: cir.Kernel, err: Unsupported, lang: str):
    line = err.line or kernel.first_line
    raise ZynMLDeviceError(f"the {lang} renderer cannot compile kernel `{kernel.name}`: {err}",
                           Span(line, 1) if line else None)


# ------------------------------------------------------------------ loop nests


def _scalar_prologue(body, keep_one: bool):
    """(leading immutable scalar lets, the rest); keep_one: never the whole body."""
    prologue = []
    rest = list(body)
    while rest and isinstance(rest[0], cir.Let) and not rest[0].mutable \
            and not rest[0].value.ty.shape and (len(rest) > 1 or not keep_one):
        prologue.append(rest.pop(0))
    return prologue, tuple(rest)


def _leading_loops(cur, sizes, parallel_only: bool) -> Nest:
    loops, extents = [], []
    while len(cur) == 1 and isinstance(cur[0], cir.Loop) and (cur[0].parallel or not parallel_only):
        lp = cur[0]
        n = trip_count(lp, sizes)
        if n is None or free_vars((lp.start, lp.stop, lp.step)) & {l.var for l in loops}:
            break
        loops.append(lp)
        extents.append(n)
        cur = lp.body
    return Nest(loops, extents, [], cur)


def find_nest(body, sizes, parallel_only=True) -> Nest:
    prologue, rest = _scalar_prologue(body, keep_one=True)
    nest = _leading_loops(rest, sizes, parallel_only)
    if not nest.loops:
        return Nest([], [], [], tuple(body))
    nest.prologue = prologue
    return nest


@dataclass
class GenericPlan:
    nest: Nest
    mode: str               # "thread", "block", or "whole" (no parallel loops)
    nt: int                 # threads per block
    wg: int                 # threads the `@workgroup` hint asks for


@dataclass


class GenericSchedules:
    """Thread mode and block mode (see the module docstring), for a CStyleRenderer."""

    def decompose(self, em: Emitter, flat: str, nest: Nest, scope: Scope, prefix="r"):
        """Bind each nest variable from the flat iteration number `flat`."""
        rem = self.new_tmp(prefix)
        em(f"{self.idx} {rem} = {flat};")
        n = len(nest.loops)
        for k in range(n - 1, -1, -1):
            lp, ext = nest.loops[k], nest.extents[k]
            c = self.loop_var_name(lp.var)
            pre: list = []
            a = self.index_expr(lp.start, scope, pre)
            st = self.index_expr(lp.step, scope, pre)
            self.emit_pre(em, pre)
            part = f"{rem} % {ext}" if k > 0 else rem
            val = part if (a == "0" and st == "1") else f"{a} + ({part}) * {st}"
            em(f"const {self.idx} {c} = {val};", lp.line)
            if k > 0:
                em(f"{rem} /= {ext};")
            scope.vars[lp.var] = (c, "i32", ())

    def body_start(self):
        """(emitter, scope) of a kernel body that begins with the size constants."""
        em = Emitter(1)
        for c in self.size_constants():
            em(c)
        return em, self.root.child()

    def open_grid_stride(self, em: Emitter, var: str, total, nt: int):
        em.open(f"for ({self.idx} {var} = {self.global_thread_index(nt)}; {var} < {total}; "
                f"{var} += {self.grid_stride(nt)})")

    def group_threads(self, wg: int) -> int:
        """Threads per block for a `@workgroup` hint of wg >= 32 threads."""
        return min(1024, wg)

    # ---- thread and block mode kernels ------------------------------------------------

    def plan_generic(self, kernel, body, sizes, options) -> "GenericPlan":
        """Thread or block mode for a loop nest, and the threads per block."""
        nest = find_nest(body, sizes)
        wg = 1
        for w in (kernel.schedule.workgroup or ()):
            wg *= int(w)
        if not nest.loops:
            return GenericPlan(Nest([], [], [], body), "whole", self.nt, wg)
        inner = nest.body
        needs_block = has_node(inner, (cir.SharedAlloc, cir.Barrier))
        coop_trip = 0
        mutable = {n.name for n in cir.walk(inner) if isinstance(n, cir.Let) and n.mutable}
        for s in cir.walk(inner):
            if isinstance(s, cir.Loop):
                kind = classify_loop(s, mutable)
                if kind is not None or s.parallel:
                    coop_trip = max(coop_trip, trip_count(s, sizes) or 0)
        mode = options.get("mode")
        if mode is None:
            if needs_block or has_tiles(inner) or (coop_trip >= 64 and nest.total <= 65536):
                mode = "block"
            else:
                mode = "thread"
        if mode == "block":
            if wg >= 32:
                nt = self.group_threads(wg)
            else:
                nt = pow2_at_least(max(coop_trip // 8, 1), 32, 1024) if coop_trip else 256
        else:
            nt = self.group_threads(wg) if wg >= 32 else 256
        self.nt = nt
        return GenericPlan(nest, mode, nt, wg)

    def block_mode_body(self, nest: Nest) -> Emitter:
        """One block per iteration of the nest (no nest: one block runs the whole body)."""
        if not nest.loops:
            self.nt = 1024 if has_tiles(nest.body) or any(isinstance(s, cir.Loop)
                                                          for s in nest.body) else 32
        em, scope = self.body_start()
        if nest.loops:
            em(f"const {self.idx} _blk = {self.block_id()};")
            self.stmts(em, nest.prologue, scope)
            self.decompose(em, "_blk", nest, scope)
        self.block_stmts(em, nest.body, scope, set())
        return em

    def thread_mode_body(self, nest: Nest, nt: int, total=None, per_iteration=None) -> Emitter:
        """One thread per iteration of the nest, grid-stride over `total` (the nest's
        iterations); `per_iteration(em, scope)` replaces the nest's body when given."""
        em, scope = self.body_start()
        self.stmts(em, nest.prologue, scope)
        self.open_grid_stride(em, "_g", nest.total if total is None else total, nt)
        if per_iteration is None:
            self.decompose(em, "_g", nest, scope)
            self.stmts(em, nest.body, scope)
        else:
            per_iteration(em, scope)
        em.close()
        return em

    # ---- reduce kernels ---------------------------------------------------------------

    # (value, index) reductions of more elements than this are refused (None: no limit)


    # ---- block mode ---------------------------------------------------------------

    def block_stmts(self, em: Emitter, body, scope: Scope, mutable: set):
        body = list(body)
        for n, s in enumerate(body):
            self.block_stmt(em, s, scope, mutable)

    def block_stmt(self, em: Emitter, s, scope: Scope, mutable: set):
        self.cur_line = getattr(s, "line", 0) or self.cur_line
        tid, nt = self.thread_id(), self.block_size()
        if isinstance(s, cir.Let):
            v = s.value
            coop = None
            if isinstance(v, cir.Reduce) and v.axis is None and v.op in ("+", "*", "max", "min",
                                                                         "and", "or"):
                coop = (v.op, v.input)
            elif isinstance(v, cir.Call) and v.fn == "sum" and v.args[0].ty.shape:
                coop = ("+", v.args[0])
            if coop is not None and not v.ty.shape:
                self.comment(em, s)
                self.coop_reduce_let(em, s, coop[0], coop[1], scope)
                if s.mutable:
                    mutable.add(s.name)
                return
            if s.mutable:
                mutable.add(s.name)
            self.stmt(em, s, scope)
            return
        if isinstance(s, cir.Store):
            buf = self.buffer_of(s.buffer, scope)
            tile_target = (not s.index) or any(isinstance(i, cir.Span) for i in s.index) or \
                len(s.index) < len(buf.shape)
            self.comment(em, s)
            if tile_target:
                self.coop_store_tile(em, s, buf, scope)
            else:
                em.open(f"if ({tid} == 0)", s.line)
                self.store_stmt(em, s, scope)
                em.close()
            em(self.barrier_stmt)
            return
        if isinstance(s, cir.Atomic):
            em.open(f"if ({tid} == 0)", s.line)
            self.atomic_stmt(em, s, scope)
            em.close()
            em(self.barrier_stmt)
            return
        if isinstance(s, cir.Loop):
            kind = "independent" if s.parallel and not has_node(
                s.body, (cir.Barrier, cir.SharedAlloc, cir.Yield)) and not (
                assigned_vars(s.body) - declared_vars(s.body)) else classify_loop(s, mutable)
            self.comment(em, s)
            if kind == "independent":
                pre: list = []
                c = self.loop_var_name(s.var)
                a = self.index_expr(s.start, scope, pre)
                b = self.index_expr(s.stop, scope, pre)
                st = self.index_expr(s.step, scope, pre)
                self.emit_pre(em, pre, s.line)
                step = f"{nt}" if st == "1" else f"{nt} * ({st})"
                first = f"{a} + {tid}" if st == "1" else f"{a} + {tid} * ({st})"
                em.open(f"for ({self.idx} {c} = {first}; {c} < {b}; {c} += {step})", s.line)
                inner = scope.child()
                inner.vars[s.var] = (c, "i32", ())
                self.stmts(em, s.body, inner)
                em.close()
                em(self.barrier_stmt)
                return
            if isinstance(kind, tuple):
                self.coop_reduce_loop(em, s, kind[1], scope)
                return
            # sequential, run by every thread; inner loops may still be spread
            pre: list = []
            c = self.loop_var_name(s.var)
            header = self.loop_header(s, c, scope, pre)
            self.emit_pre(em, pre, s.line)
            inner = scope.child()
            inner.vars[s.var] = (c, "i32", ())
            em.open(header, s.line)
            self.block_stmts(em, s.body, inner, set(mutable))
            em.close()
            return
        if isinstance(s, cir.If):
            pre: list = []
            c = self.expr(s.cond, scope, pre)
            self.emit_pre(em, pre, s.line)
            em.open(f"if ({c})", s.line)
            with self.facts.assuming(s.cond):
                self.block_stmts(em, s.then, scope.child(), set(mutable))
            if s.orelse:
                em.close(" else {")
                em.level += 1
                self.block_stmts(em, s.orelse, scope.child(), set(mutable))
            em.close()
            return
        if isinstance(s, cir.Barrier):
            em(self.barrier_stmt, s.line)
            return
        self.stmt(em, s, scope)

    def coop_reduce_loop(self, em: Emitter, s: cir.Loop, accs: dict, scope: Scope):
        """A loop that only accumulates: strided partials per thread, then block reductions."""
        tid, nt = self.thread_id(), self.block_size()
        inner = scope.child()
        parts = {}
        for name, op in accs.items():
            c, dt, shape = scope.lookup(name)
            p = self.new_tmp("part")
            ct = self.compute_type(dt) if dt != "bool" else "int"
            em(f"{ct} {p} = {self.identity(op, dt)};", s.line)
            parts[name] = (p, op, dt, c)
            inner.vars[name] = (p, dt, ())
        pre: list = []
        c = self.loop_var_name(s.var)
        a = self.index_expr(s.start, scope, pre)
        b = self.index_expr(s.stop, scope, pre)
        st = self.index_expr(s.step, scope, pre)
        self.emit_pre(em, pre, s.line)
        step = f"{nt}" if st == "1" else f"{nt} * ({st})"
        first = f"{a} + {tid}" if st == "1" else f"{a} + {tid} * ({st})"
        em.open(f"for ({self.idx} {c} = {first}; {c} < {b}; {c} += {step})", s.line)
        inner.vars[s.var] = (c, "i32", ())
        self.stmts(em, s.body, inner)
        em.close()
        for name, (p, op, dt, c) in parts.items():
            ct = self.compute_type(dt) if dt != "bool" else "int"
            red = self.block_reduce(op, p, ct)
            em(self._combine(op, c, red, dt))

    def coop_reduce_let(self, em, s: cir.Let, op, tile, scope):
        tid, nt = self.thread_id(), self.block_size()
        pre: list = []
        shape = self.tile_shape(tile, scope, pre)
        self.emit_pre(em, pre, s.line)
        dt = s.value.ty.dtype
        ct = self.compute_type(dt) if dt != "bool" else "int"
        total = " * ".join(f"({x})" for x in shape) or "1"
        p = self.new_tmp("part")
        em(f"{ct} {p} = {self.identity(op, dt)};", s.line)
        e = self.new_tmp("e")
        em.open(f"for ({self.idx} {e} = {tid}; {e} < {total}; {e} += {nt})", s.line)
        ivs = self._unflatten(em, e, shape)
        pre = []
        val = self.tile_elem(tile, ivs, scope, pre)
        self.emit_pre(em, pre, s.line)
        em(self._combine(op, p, f"({ct})({val})", dt))
        em.close()
        c = self.loop_var_name(s.name)
        q = "" if s.mutable else "const "
        em(f"{q}{self.compute_type(dt)} {c} = {self.block_reduce(op, p, ct)};", s.line)
        scope.vars[s.name] = (c, dt, ())

    def _unflatten(self, em, flat, shape):
        ivs = [self.new_tmp("e") for _ in shape]
        rem = self.new_tmp("r")
        em(f"{self.idx} {rem} = {flat};")
        for k in range(len(shape) - 1, -1, -1):
            if k > 0:
                em(f"const {self.idx} {ivs[k]} = {rem} % ({shape[k]}); {rem} /= ({shape[k]});")
            else:
                em(f"const {self.idx} {ivs[k]} = {rem};")
        return ivs

    def coop_store_tile(self, em, s: cir.Store, buf, scope):
        tid, nt = self.thread_id(), self.block_size()
        target = cir.Load(s.buffer, s.index, cir.Ty(buf.dtype, ("?",)))
        pre: list = []
        shape = self.tile_shape(target, scope, pre)
        self.emit_pre(em, pre, s.line)
        total = " * ".join(f"({x})" for x in shape) or "1"
        e = self.new_tmp("e")
        em.open(f"for ({self.idx} {e} = {tid}; {e} < {total}; {e} += {nt})", s.line)
        ivs = self._unflatten(em, e, shape)
        self.store_tile_elem(em, s, buf, target, ivs, scope)
        em.close()
