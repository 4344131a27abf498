"""What C++, CUDA C and the Metal Shading Language spell alike."""
from __future__ import annotations

from functools import reduce

from ...launch import ir
from ...launch.scalar import compute_dtype

C_TYPES = {"f32": "float", "f64": "double", "i8": "signed char", "i16": "short", "i32": "int",
           "i64": "long long", "u8": "unsigned char", "u16": "unsigned short",
           "u32": "unsigned int", "u64": "unsigned long long", "bool": "bool"}

C_OPS = {"and": "&&", "or": "||"}
NARROW_INTS = ("i8", "i16", "u8", "u16")

def gelu_helper(recip: str, bits: str, ibits: str, f: str = "f", double: bool = True,
                exp2: str = "exp2F({})", needs: tuple = ()) -> tuple:
    """The GELU helper, `recip` ("...{}...") spelling the f32 reciprocal of a number of at
    least 1 and `exp2` 2^x of an x in [-4, 1]: each dialect its cheapest within an ulp or two
    (`needs`: the helpers those spellings call); `bits` the float whose bits are an int,
    `ibits` the int whose bits are a float; `f` the suffix of C's float math functions
    (Metal's overloads have none), `double` whether an f64 one goes with it.

    x * Phi(x) through q = Phi(-|x|) = erfc(|x| / sqrt(2)) / 2 (1 + erf cancelled for a
    negative x: gelu(-6) kept no digit). q is Numerical Recipes' erfcc, t 2^(P(t) - x^2
    log2(e) / 2), its exponent summed exactly but for the last rounding; a rational and one
    exp2, where erfcf's two divisions and split exp made bias + GELU compute-bound on a GPU.
    The exponent's whole part k is taken out first (rounding an exponent near -100 was 40 ulp)
    and 2^-k put on last as two factors 2^-k1 2^-k2 of at most 2^-81 built from their bits, a
    subnormal result rounded once (-14 * q underflowed through q); ldexpf there, a library
    call on CUDA, made bias + GELU compute-bound. k = r is h log2(e) / 2 rounded by adding
    1.5 * 2^23 (no fraction bits left; k is the sum's low bits), where rintf and a
    float-to-int conversion ran at a quarter of the FMA rate; whether the compiler fuses that
    product and sum or not, r is a whole number within an ulp of a half of it, and the
    exponent's part h log2(e) / 2 - r is one fma, exact but for its rounding (a rounded m - r
    that the compiler fused into h * c - r counted h * c's rounding twice). Both signs go one
    way to selects: a branch on x's sign split every warp of mixed signs in two."""
    pow2 = [bits.format(f"(127 - {n}) << 23") for n in ("k1", "(k - k1)")]
    text = (
        "{q}float zyn_gelu(float x) {{\n"
        "    const float a = fabsF(x), t = " + recip.format("1.0f + a * 0.353553391f") + ";\n"
        "    if (!(a < 15.0f)) return x * (x < 0.0f ? 0.0f : 1.0f);\n"
        "    const float p = -2.825748205f + t * (1.442729235f + t * (0.5397006273f + t * (0.1396300495f +\n"
        "                    t * (-0.2687568665f + t * (0.4023215771f + t * (-1.637753129f + t * (2.147474527f +\n"
        "                    t * (-1.186114907f + t * 0.2465173006f))))))));\n"
        "    const float h = a * a, l = fmaF(a, a, -h), s = h * 0.7213475108f + 12582912.0f;\n"
        "    const float r = s - 12582912.0f, e = fmaF(h, 9.629815168e-09f, l * 0.7213475108f);\n"
        "    const float g = t * " + exp2.format("(p - e) - fmaF(h, 0.7213475108f, -r)") + ";\n"
        "    const int k = " + ibits.format("s") + " - 0x4B400000, k1 = k >> 1;    // k <= 162\n"
        f"    const float v = (x < 0.0f ? x : 1.0f) * g * {pow2[0]} * {pow2[1]};\n"
        "    return x < 0.0f ? v : x * (1.0f - v); }}")
    text = text.replace("F(", f + "(")
    if double:
        # -x / sqrt(2) in two parts (the reference's, cpu/reference.py): its rounding, times
        # erfc's slope 2 |x|, was some 1,500 ulp near -37
        text += (
            "\n{q}double zyn_gelu(double x) {{\n"
            "    const double z = x * -0.7071067811865476;\n"
            "    const double l = fabs(z) < 40.0 ? fma(x, -0.7071067811865476, -z) + "
            "x * 4.833646656726457e-17 : 0.0;\n"
            "    return 0.5 * x * (erfc(z) - l * 1.1283791670955126 * exp(-z * z)); }}")
    return text, needs


# helper name -> (text with {q} for the function qualifier, helpers it needs)
HELPERS = {
    # NaN propagates, as numpy's minimum/maximum (the reference) do
    # numpy's maximum and minimum: NaN propagates, and of equal values the second (-0.0 and
    # 0.0: max(0.0, -0.0) is -0.0, max(-0.0, 0.0) is 0.0)
    "zyn_min": ("template <typename T> {q}T zyn_min(T a, T b) {{ return (a < b || a != a) ? a : b; }}", ()),
    "zyn_max": ("template <typename T> {q}T zyn_max(T a, T b) {{ return (a > b || a != a) ? a : b; }}", ()),
    # negated in unsigned arithmetic: abs(INT_MIN) is INT_MIN, as numpy's; GCC took `a < 0 ? -a
    # : a` for its abs, undefined there even under -fwrapv, and folded abs(x) < 1 to x == 0
    "zyn_iabs": ("template <typename T> {q}T zyn_iabs(T a) {{ "
                 "return a < 0 ? (T)(0 - (unsigned {long})a) : a; }}", ()),
    "zyn_sq": ("template <typename T> {q}T zyn_sq(T a) {{ return a * a; }}", ()),
    # by squaring: an exponent of 2^30 takes 31 steps, not 2^30 multiplications; in 64-bit
    # unsigned arithmetic, whose low bits are the wrapped product (a signed product that
    # overflows is undefined in C++: NVRTC took i ** 20 of a positive i to be positive)
    "zyn_ipow": ("template <typename T> {q}T zyn_ipow(T a, T b) {{ unsigned {long} r = 1, "
                 "x = (unsigned {long})a; for (; b > 0; b /= 2) {{ if (b % 2 == 1) r *= x; x *= x; }} "
                 "return (T)r; }}", ()),
    "zyn_gelu": gelu_helper("1.0f / ({})", "__builtin_bit_cast(float, {})", "__builtin_bit_cast(int, {})"),
    "zyn_silu": ("{q}float zyn_silu(float x) {{ return x / (1.0f + expf(-x)); }}\n"
                 "{q}double zyn_silu(double x) {{ return x / (1.0 + exp(-x)); }}", ()),
    "zyn_sigmoid": ("{q}float zyn_sigmoid(float x) {{ return 1.0f / (1.0f + expf(-x)); }}\n"
                    "{q}double zyn_sigmoid(double x) {{ return 1.0 / (1.0 + exp(-x)); }}", ()),
    # a select whose sides are both evaluated (the arguments of a call are)
    "zyn_sel": ("template <typename T> {q}T zyn_sel(bool c, T a, T b) {{ return c ? a : b; }}", ()),
    # the error flag (compiler/errflag.py): the first failing site wins
    "zyn_chk": ("// an index outside 0..n-1 fails the site and reads element 0 instead\n"
                "template <typename T> {q}T zyn_chk(T i, T n, {err} e, int site) {{\n"
                "    if (i < 0 || i >= n) {{ zyn_fail(e, site, ({long})i); return 0; }} return i; }}",
                ("zyn_fail",)),
    "zyn_in": ("template <typename T> {q}bool zyn_in(T i, T n, {err} e, int site) {{\n"
               "    if (i < 0 || i >= n) {{ zyn_fail(e, site, ({long})i); return false; }} return true; }}",
               ("zyn_fail",)),
    "zyn_idiv": ("// integer division and remainder as C (truncating); by 0 (and MIN / -1) they fail\n"
                 "template <typename T> {q}T zyn_idiv(T a, T b, {err} e, int s0, int sov) {{\n"
                 "    if (b == 0) {{ zyn_fail(e, s0, ({long})a); return 0; }}\n"
                 "    if (b == (T)-1 && (T)-1 < (T)0 && a == (T)((unsigned {long})1 << (sizeof(T) * 8 - 1))) {{\n"
                 "        zyn_fail(e, sov, ({long})a); return 0; }}\n"
                 "    return a / b; }}", ("zyn_fail",)),
    "zyn_irem": ("template <typename T> {q}T zyn_irem(T a, T b, {err} e, int s0) {{\n"
                 "    if (b == 0) {{ zyn_fail(e, s0, ({long})a); return 0; }}\n"
                 "    if (b == (T)-1 && (T)-1 < (T)0) return 0;\n"
                 "    return a % b; }}", ("zyn_fail",)),
}


def vector_helpers(v: str) -> dict:
    """Helpers for four-float vectors of the C type `v` (its lanes x, y, z, w): lane-by-lane
    + - * /, a splat and the dot product, for languages without vector arithmetic."""
    q = "@Q@"
    ops = "\n".join(f"{q}{v} operator{o}({v} a, {v} b) {{ return {v}{{a.x {o} b.x, a.y {o} b.y, "
                    f"a.z {o} b.z, a.w {o} b.w}}; }}" for o in "+-*/")
    ops += (f"\n{q}{v} zyn_splat4(float s) {{ return {v}{{s, s, s, s}}; }}"
            f"\n{q}float zyn_dot4({v} a, {v} b) {{ return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }}")
    esc = lambda t: t.replace("{", "{{").replace("}", "}}").replace(q, "{q}")
    out = {"zyn_vec4_ops": (esc(ops), ("zyn_vec4",) if v == "zyn_f32x4" else ())}
    if v == "zyn_f32x4":
        out["zyn_vec4"] = (esc("struct alignas(16) zyn_f32x4 { float x, y, z, w; };"), ())
    return out


HELPERS.update(vector_helpers("zyn_f32x4"))


def banner(lang: str, program, sizes, how: str = "") -> list:
    """The first lines of a program's text (every dialect's): the language, the kernel, `how`
    it runs and its schedule, then the sizes compiled in."""
    head = [f"// ZynBook {lang} for kernel `{program.name}` ({how}{program.schedule})"]
    if sizes:
        head.append("// sizes: " + ", ".join(f"{k[2:]}={v}" for k, v in sorted(sizes.items())))
    return head


class Helpers:
    """The helper functions a program's text calls, emitted before it in first-use order,
    each after those it calls (`deps`)."""

    def need(self, name: str) -> str:
        if name not in self.needed:
            for dep in self.deps(name):
                self.need(dep)
            self.needed.append(name)
        return name


class CFamily(Helpers):
    """The C spelling; subclasses set `q` (function qualifier), `err` (the flag's type),
    TYPES and the hooks marked below."""
    q = "static inline "
    err = "int*"
    TYPES = C_TYPES
    INF = {"f32": "INFINITY", "f64": "((double)INFINITY)"}
    NAN = {"f32": "NAN", "f64": "((double)NAN)"}
    HELPERS = HELPERS
    FAIL = ""                   # body of zyn_fail(e, site, v)
    LONG = "long long"          # the 64-bit integer the checks report values in

    def __init__(self):
        self.needed: list = []

    def deps(self, name: str) -> tuple:
        return self.HELPERS[name][1] if name in self.HELPERS else ()

    def helpers_text(self) -> str:
        out = []
        for name in self.needed:
            if name == "zyn_fail":
                out.append(f"{self.q}void zyn_fail({self.err} e, int site, {self.LONG} v) {{ {self.FAIL} }}")
            else:
                out.append(self.HELPERS[name][0].format(q=self.q, err=self.err, long=self.LONG))
        return "\n".join(out) + ("\n" if out else "")

    # ---- types and values -------------------------------------------------------------

    VEC4 = "zyn_f32x4"          # the C type of an f32x4 (a dialect with vectors: its own)

    def type(self, dtype: str) -> str:
        if ir.lanes_of(dtype) > 1:
            if dtype != "f32x4":
                raise TypeError(f"the {self.name} dialect has no {dtype} vectors")
            self.need("zyn_vec4_ops")
            return self.VEC4
        return self.TYPES[dtype]

    def vector(self, parts, dtype):
        if len(parts) == 1:
            self.need("zyn_vec4_ops")
            return f"zyn_splat4({parts[0]})"
        return f"{self.type(dtype)}{{{', '.join(parts)}}}"

    def lane(self, text, lane, dtype):
        return f"{text}.{'xyzw'[lane]}"

    def lit(self, value, dtype: str) -> str:
        if dtype == "bool":
            return "true" if value else "false"
        if dtype in ir.FLOAT_DTYPES:
            v = float(value)
            # a 16-bit float's literals are written as f32's (0.5f below), its infinity and
            # NaN too: the dialects spell those for f32 and f64 only
            key = dtype if dtype in self.INF else "f32"
            if v != v:
                return self.NAN[key]
            if v in (float("inf"), float("-inf")):
                return ("(-" + self.INF[key] + ")") if v < 0 else self.INF[key]
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
            text = text + ("" if dtype == "f64" else "f")
            return f"({text})" if v < 0 else text
        v = int(value)
        if dtype == "i32" and v == -2 ** 31:
            return "(-2147483647 - 1)"
        if dtype == "i64" and v == -2 ** 63:
            return "(-9223372036854775807LL - 1)"
        suffix = {"i64": "LL", "u64": "ULL", "u32": "u"}.get(dtype, "")
        text = f"{v}{suffix}"
        if dtype not in ("i32", "i64", "u32", "u64"):
            text = f"(({self.type(dtype)}){v})"
        return f"({text})" if v < 0 else text

    def cast(self, text: str, src: str, dst: str) -> str:
        return f"(({self.type(dst)})({text}))"

    def select(self, c, a, b, dtype):
        return f"({c} ? {a} : {b})"

    def eager_select(self, c, a, b, dtype):
        """`c ? a : b` with both `a` and `b` evaluated (their checks made) whatever `c` is."""
        return f"{self.need('zyn_sel')}<{self.type(dtype)}>({c}, {a}, {b})"

    def binary(self, op, a, b, operand_dtype, dtype):
        if dtype in NARROW_INTS and op in "+-*":
            return self.wrap_narrow(f"((unsigned){a} {op} (unsigned){b})", dtype)
        return f"({a} {C_OPS.get(op, op)} {b})"

    def unary(self, op, a, dtype):
        if op == "neg":
            return self.wrap_narrow(f"(0u - (unsigned){a})", dtype) if dtype in NARROW_INTS else f"(-{a})"
        return f"(!{a})"

    def wrap_narrow(self, unsigned_text: str, dtype: str) -> str:
        """An integer narrower than int, computed in unsigned int (C promotes it to int, where
        overflow is undefined), wrapped to its width. A signed one is sign-extended by shifts:
        NVRTC folded the `(short)` of `0u - (unsigned)q` away, so -(-32768) on an i16 became
        32768 once widened."""
        if dtype.startswith("u"):
            return f"(({self.type(dtype)}){unsigned_text})"
        shift = 32 - int(dtype[1:])
        return f"(({self.type(dtype)})((int)({unsigned_text} << {shift}) >> {shift}))"

    def math(self, fn, args, dtype):
        floats = dtype in ir.FLOAT_DTYPES
        # an integer narrower than int is an int once C computes with it (u8 / 3): the
        # templates take their type explicitly, or zyn_max(unsigned char, int) matches none
        t = f"<{self.type(dtype)}>" if dtype in ("i8", "u8", "i16", "u16") else ""
        if fn in ("min", "max"):
            if not t:
                return self.fold(f"zyn_{fn}", args)
            name = self.need(f"zyn_{fn}") + t
            return reduce(lambda a, b: f"{name}({a}, {b})", args)
        if fn == "clamp":       # numpy's clip: x itself where it equals a bound (-0.0 at 0.0)
            return (f"{self.need('zyn_min')}{t}({args[2]}, {self.need('zyn_max')}{t}({args[1]}, "
                    f"{args[0]}))")
        if fn == "relu":
            zero = self.lit(0.0, dtype) if floats else f"({self.type(dtype)})0"
            return f"{self.need('zyn_max')}{t}({args[0]}, {zero})"
        if not floats:
            if fn in ir.WRAPPING:       # in the unsigned type of its width, whose overflow wraps
                u = self.type("u64" if dtype == "i64" else "u32")
                return f"(({self.type(dtype)})(({u}){args[0]} {ir.WRAPPING[fn]} ({u}){args[1]}))"
            if fn == ir.WRAPPING_NEG:
                u = self.type("u64" if dtype == "i64" else "u32")
                return f"(({self.type(dtype)})(({u})0 - ({u}){args[0]}))"
            if fn == "abs":
                return f"{self.need('zyn_iabs')}({args[0]})"
            if fn == "ipow":
                return f"{self.need('zyn_ipow')}({args[0]}, {args[1]})"
            raise TypeError(f"{fn} on {dtype}")
        if fn == "dot":
            self.need("zyn_vec4_ops")
            return f"zyn_dot4({args[0]}, {args[1]})"
        one = "1.0" + ("" if dtype == "f64" else "f")
        if fn in ("sigmoid", "silu", "gelu"):
            return f"{self.need('zyn_' + fn)}({args[0]})"
        if fn == "rsqrt":
            return f"({one} / {self.fn('sqrt', dtype)}({args[0]}))"
        if fn == "pow2":
            return f"{self.need('zyn_sq')}({args[0]})"
        name = {"round": "rint", "abs": "fabs"}.get(fn, fn)
        return f"{self.fn(name, dtype)}({', '.join(args)})"

    def fn(self, name: str, dtype: str) -> str:
        """The C math function `name` for `dtype` (expf / exp)."""
        return name + ("" if dtype == "f64" else "f")

    def fold(self, fn: str, args: list) -> str:
        self.need(fn)
        return reduce(lambda a, b: f"{fn}({a}, {b})", args)

    # ---- memory and checks ------------------------------------------------------------

    def load(self, array, index, dtype, space):
        return f"{array}[{index}]"

    def store(self, array, index, value, dtype, space):
        return f"{array}[{index}] = {value};"

    CHECKED_TYPE = ""           # the type indices are checked in (default: their own)

    def checked(self, index, extent, site, dtype):
        return f"{self.need('zyn_chk')}<{self.CHECKED_TYPE or self.type(dtype)}>({index}, {extent}, zyn_err, {site})"

    def in_range(self, index, extent, site, dtype):
        return f"{self.need('zyn_in')}<{self.CHECKED_TYPE or self.type(dtype)}>({index}, {extent}, zyn_err, {site})"

    def checked_div(self, op, a, b, s0, sov, dtype):
        t = self.type(dtype)
        if op == "/":
            return f"{self.need('zyn_idiv')}<{t}>({a}, {b}, zyn_err, {s0}, {sov})"
        return f"{self.need('zyn_irem')}<{t}>({a}, {b}, zyn_err, {s0})"

    def copy(self, dst, di, dspace, src, si, sspace, count, dtype):
        """`count` consecutive elements, one by one (a dialect with vector types does better)."""
        return " ".join(f"{dst}[{di} + {w}] = {src}[{si} + {w}];" if w else f"{dst}[{di}] = {src}[{si}];"
                        for w in range(count))

    # ---- statements -------------------------------------------------------------------

    def decl(self, name, dtype, value, mutable):
        q = "" if mutable else "const "
        return f"{q}{self.type(dtype)} {name}" + (f" = {value};" if value is not None else ";")

    def unroll(self) -> str:
        return ""

    def for_header(self, var, dtype, start, stop, step):
        inc = f"++{var}" if step in ("1", "1LL") else f"{var} += {step}"
        return f"for ({self.type(dtype)} {var} = {start}; {var} < {stop}; {inc})"

    def param(self, p: ir.Param, restrict: str = "") -> str:
        if p.kind in ("buffer", "scratch"):
            const = "" if p.writable or p.kind == "scratch" else "const "
            return f"{const}{self.type(p.dtype)}* {restrict}{p.name}".replace("  ", " ")
        return f"{self.type(p.dtype if p.kind == 'size' else compute_dtype(p.dtype))} {p.name}"

    def kernel_close(self, k):
        return "}"

    def program_tail(self, program, sizes) -> str:
        return ""
