"""The Metal Shading Language: `kernel void` entry points, buffers by `[[buffer(n)]]`, the
scalar arguments in one `constant ZynArgs&` struct, the thread position as builtins, SIMD-group
functions for warp collectives. Metal has no `double`: f64 is refused, never computed in f32."""
from __future__ import annotations

from ...launch import ir
from ...launch.scalar import compute_dtype
from .cfamily import C_TYPES, HELPERS, CFamily, banner, gelu_helper

MSL_TYPES = dict(C_TYPES, f16="half", bf16="bfloat", i8="char", u8="uchar", u16="ushort",
                 u32="uint", i64="long", u64="ulong")
# the type of a scalar argument's field in the argument struct
ARG_TYPES = {"f16": "float", "bf16": "float", "f32": "float", "i8": "int", "i16": "int",
             "i32": "int", "bool": "int", "u8": "uint", "u16": "uint", "u32": "uint",
             "i64": "long", "u64": "ulong"}
BUILTINS = ("uint _tid [[thread_position_in_threadgroup]]",
            "uint _gid [[threadgroup_position_in_grid]]",
            "uint _ngroups [[threadgroups_per_grid]]",
            "uint _ntid [[threads_per_threadgroup]]",
            "uint _lane [[thread_index_in_simdgroup]]",
            "uint _sg [[simdgroup_index_in_threadgroup]]")
_THREAD = {"thread": "(int)_tid", "block": "(int)_gid", "threads": "(int)_ntid",
           "blocks": "(int)_ngroups", "lane": "(int)_lane", "warp": "(int)_sg"}
_SIMD = {"+": "simd_sum", "*": "simd_product", "max": "simd_max", "min": "simd_min"}

MSL_HELPERS = dict(HELPERS, **{
    "zyn_erf": (
        "// erf (Metal has none): Abramowitz-Stegun 7.1.26 refined, |error| < 2e-7 in float\n"
        "{q}float zyn_erf(float x) {{\n"
        "    const float ax = fabs(x);\n"
        "    if (ax < 0.5f) {{\n"
        "        const float x2 = x * x;\n"
        "        return x * (1.1283791671f + x2 * (-0.3761263890f + x2 * (0.1128379167f +\n"
        "               x2 * (-0.0268661707f + x2 * (0.0052239776f - x2 * 0.0008548327f)))));\n"
        "    }}\n"
        "    const float y = zyn_erfc(ax);\n"
        "    return x >= 0.0f ? 1.0f - y : y - 1.0f; }}", ("zyn_erfc",)),
    "zyn_erfc": (
        "// erfc, relative error about 5e-7 in float (Numerical Recipes' erfcc; exp(-x * x)\n"
        "// split at x's multiple of 1/16 below it, whose square is exact, so a large x keeps\n"
        "// its digits)\n"
        "{q}float zyn_erfc(float x) {{\n"
        "    const float ax = fabs(x);\n"
        "    if (ax >= 10.0f) return x > 0.0f ? 0.0f : 2.0f;\n"
        "    const float t = 1.0f / (1.0f + 0.5f * ax);\n"
        "    const float h = floor(ax * 16.0f) * 0.0625f;\n"
        "    const float y = t * exp(-h * h) * exp((h - ax) * (h + ax) - 1.26551223f + t * (1.00002368f +\n"
        "                    t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f +\n"
        "                    t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));\n"
        "    return x >= 0.0f ? y : 2.0f - y; }}", ()),
    "zyn_gelu": gelu_helper("1.0f / ({})", "as_type<float>({})", "as_type<int>({})", f="", double=False),
    "zyn_silu": ("{q}float zyn_silu(float x) {{ return x / (1.0f + exp(-x)); }}", ()),
    "zyn_sigmoid": ("{q}float zyn_sigmoid(float x) {{ return 1.0f / (1.0f + exp(-x)); }}", ()),
    "zyn_pow": (
        "// pow with C semantics for a negative base and an integral exponent\n"
        "{q}float zyn_pow(float a, float b) {{\n"
        "    if (a >= 0.0f || b != floor(b)) return pow(a, b);\n"
        "    const float r = pow(-a, b);\n"
        "    return fmod(b, 2.0f) != 0.0f ? -r : r; }}", ()),
})


for _op in ("max", "min"):
    # max and min propagate NaN (as numpy does): a NaN in any lane is the result
    MSL_HELPERS[f"zyn_simd_{_op}"] = (
        "template <typename T> {q}T zyn_simd_" + _op + "(T v) {{ const T r = simd_" + _op
        + "(v); return simd_max(v != v ? 1 : 0) != 0 ? T(NAN) : r; }}", ())


# over each group of W consecutive lanes of a SIMD group (max and min propagate NaN)
_LANES = {"+": ("sum", "a + b"), "max": ("max", "(a < b || b != b) ? b : a"),
          "min": ("min", "(b < a || b != b) ? b : a")}
for _name, _body in _LANES.values():
    MSL_HELPERS[f"zyn_lanes_{_name}"] = (
        "template <int W, typename T> {q}T zyn_lanes_" + _name + "(T v) {{\n"
        "    for (ushort o = W / 2; o > 0; o >>= 1) {{ const T a = v, b = simd_shuffle_xor(v, o); v = "
        + _body + "; }}\n    return v; }}", ())


class Refused(Exception):
    """What the language cannot express (f64 on Metal)."""


class MslDialect(CFamily):
    name = "msl"
    q = "inline "
    err = "device atomic_int*"
    LONG = "long"
    CHECKED_TYPE = "long"
    TYPES = MSL_TYPES
    INF = {"f32": "INFINITY"}
    NAN = {"f32": "NAN"}
    HELPERS = MSL_HELPERS
    FAIL = ("int z = 0; while (!atomic_compare_exchange_weak_explicit(e, &z, site, "
            "memory_order_relaxed, memory_order_relaxed)) { if (z != 0) return; } "
            "atomic_store_explicit(e + 1, (int)(v > 2147483647 ? 2147483647 : v < -2147483647 - 1 ? -2147483647 - 1 : v), memory_order_relaxed);")

    def type(self, dtype):
        if dtype == "f64":
            raise Refused("Metal has no 64-bit floats (f64)")
        if ir.lanes_of(dtype) > 1:            # float4 and its arithmetic are Metal's own
            return f"{self.type(ir.element_of(dtype))}{ir.lanes_of(dtype)}"
        return self.TYPES[dtype]

    def vector(self, parts, dtype):
        return f"{self.type(dtype)}({', '.join(parts)})"

    def lane(self, text, lane, dtype):
        return f"{text}[{lane}]"

    def lit(self, value, dtype):
        if dtype in ("i64", "u64"):
            return f"{self.type(dtype)}({int(value)})"
        return super().lit(value, dtype)

    def cast(self, text, src, dst):
        return f"{self.type(dst)}({text})"

    def fn(self, name, dtype):
        return name

    def math(self, fn, args, dtype):
        if dtype == "f32" and fn in ("erf", "pow"):
            return f"{self.need('zyn_' + fn)}({', '.join(args)})"
        if fn == "dot":
            return f"dot({args[0]}, {args[1]})"
        if dtype == "f32" and fn == "rsqrt":
            return f"rsqrt({args[0]})"
        return super().math(fn, args, dtype)

    def thread(self, axis):
        return _THREAD[axis]

    def collective(self, op, value, scope, dtype, width=0):
        if scope != "warp":
            raise Refused("block collectives are built by the schedules from warp ones")
        if width:
            if op not in _LANES:
                raise Refused(f"a {op} collective over groups of lanes")
            return f"{self.need('zyn_lanes_' + _LANES[op][0])}<{width}>({value})"
        if op in ("and", "or"):
            return f"({'simd_min' if op == 'and' else 'simd_max'}(({value}) ? 1 : 0) != 0)"
        if op in ("max", "min") and dtype in ir.FLOAT_DTYPES:
            return f"{self.need('zyn_simd_' + op)}({value})"
        return f"{_SIMD[op]}({value})"

    def barrier(self, device=False):
        if device:
            return "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);"
        return "threadgroup_barrier(mem_flags::mem_threadgroup);"

    def array(self, name, dtype, count, space):
        q = "threadgroup " if space == "shared" else ""
        return f"{q}{self.type(dtype)} {name}[{max(count, 1)}];"

    def atomic(self, op, array, index, value, dtype):
        raise Refused("atomic updates on Metal are spelled by the block schedules")

    def kernel_open(self, k, params):
        ps, unpack, n = [], [], 0
        for p in params:
            if p.kind in ("buffer", "scratch"):
                const = "" if p.writable or p.kind == "scratch" else "const "
                ps.append(f"device {const}{self.type(p.dtype)}* {p.name} [[buffer({n})]]")
                n += 1
        args = [p for p in params if p.kind in ("scalar", "size")]
        if args:
            ps.append(f"constant ZynArgs& zyn_args [[buffer({n})]]")
            n += 1
            for p in args:
                t = self.type(compute_dtype(p.dtype))
                val = f"(zyn_args.{p.name} != 0)" if p.dtype == "bool" else f"{t}(zyn_args.{p.name})"
                unpack.append(f"    const {t} {p.name} = {val};")
        ps.append(f"device atomic_int* zyn_err [[buffer({n})]]")
        ps.extend(BUILTINS)
        self.arg_fields = [(p.name, ARG_TYPES[p.dtype], p.name) for p in args]
        return ((f"// {k.comment}\n" if k.comment else "") + f"kernel void {k.name}(\n    "
                + ",\n    ".join(ps) + ") {\n" + "\n".join(unpack)).rstrip("\n")

    def program_head(self, program, sizes) -> str:
        head = banner("MSL", program, sizes)
        head += ["#include <metal_stdlib>", "using namespace metal;"]
        fields = getattr(self, "arg_fields", [])
        if fields:
            head.append("struct ZynArgs {")
            head += [f"    {t} {c};" for c, t, _ in fields]
            head.append("};")
        return "\n".join(head) + "\n"
