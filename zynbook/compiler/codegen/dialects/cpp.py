"""C++ for the CPU: each block of a launch is one call of the kernel function, the blocks
of a launch run on the host's cores (OpenMP), one thread per block, handed out as threads
come free (a core another process holds does not hold back the launch); the entry point
`zyn_kernel(bufs, fargs, iargs, err)` unpacks the arguments and makes the launches."""
from __future__ import annotations

from ...launch import ir
from ...launch.scalar import DTYPE_BYTES, compute_dtype
from .cfamily import C_TYPES, HELPERS, CFamily, banner

ENTRY = "zyn_kernel"
_REDUCTIONS = {
    f"zyn_{op}_{dt}_reduction": (
        f"#pragma omp declare reduction(zyn_{op}_{dt}_reduction : {t} : omp_out = zyn_{op}(omp_out, "
        "omp_in)) initializer(omp_priv = omp_orig)", (f"zyn_{op}",))
    for op in ("max", "min") for dt, t in (("f32", "float"), ("f64", "double"))}
CANCEL_WORD = 2         # the word past the error flag that asks a running kernel to stop
SERIAL_WORD = 3         # the next: the caller asks for the blocks on its own thread (a small
                        # launch, where forking over the cores costs more than it saves)

CPP_HELPERS = dict(HELPERS, **{
    **_REDUCTIONS,
    # bf16 is held as a float rounded to bfloat16 (ties to even, NaN kept), as the reference
    "zyn_bf16": ("{q}float zyn_bf16(float x) {{ unsigned u; __builtin_memcpy(&u, &x, 4);\n"
                 "    u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x400000u) & 0xffff0000u\n"
                 "        : (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;\n"
                 "    __builtin_memcpy(&x, &u, 4); return x; }}", ()),
    # a * b + c rounded once where the CPU has fused multiply-adds (the GEMM micro-kernel's
    # accumulation, as a GPU's), else as a product and a sum (fmaf is then a libm call many
    # times slower); nothing else is fused (-ffp-contract=off: backends/cpu/native.py)
    "zyn_fma": ("#if defined(__FMA__) || defined(__aarch64__)\n"
                "{q}float zyn_fma(float a, float b, float c) {{ return fmaf(a, b, c); }}\n"
                "{q}double zyn_fma(double a, double b, double c) {{ return fma(a, b, c); }}\n"
                "#else\n"
                "template <typename T> {q}T zyn_fma(T a, T b, T c) {{ return a * b + c; }}\n"
                "#endif", ()),
    "zyn_cancelled": (
        "// the device sets the word after the error flag when the caller gave up on the launch:\n"
        "// the remaining blocks are skipped (zynbook/runtime/cancel.py)\n"
        "{q}bool zyn_cancelled(const int* e) {{ return __atomic_load_n(&e[" + str(CANCEL_WORD)
        + "], __ATOMIC_RELAXED) != 0; }}", ()),
})

# glibc's vector math (libmvec): declared `simd`, these let GCC call a vector variant
# (_ZGVeN16v_expf, ...) where it vectorises a loop of them, as math.h does only under
# -ffast-math. The device defines LIBMVEC_MACRO where a probe links them
# (backends/cpu/native.py); their results are within a few ulp of the scalar functions', a
# NaN argument gives NaN, and no -ffast-math rewrites anything else.
VECTOR_MATH = ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "sinh", "cosh",
               "erf", "pow")
LIBMVEC_MACRO = "ZYN_LIBMVEC"


def vector_math_declarations() -> str:
    lines = [f"#if defined({LIBMVEC_MACRO}) && defined(__GNUC__) && !defined(__clang__)",
             'extern "C" {']
    for fn in VECTOR_MATH:
        for t, suffix in (("float", "f"), ("double", "")):
            args = f"{t}, {t}" if fn == "pow" else t
            lines.append(f'__attribute__((__simd__("notinbranch"))) {t} {fn}{suffix}({args}) noexcept;')
    return "\n".join(lines + ["}", "#endif"])


_BYTES = dict(DTYPE_BYTES, bf16=4)     # bf16 held as f32
_THREAD = {"thread": "0", "threads": "1", "block": "(int)zyn_block", "blocks": "(int)zyn_blocks",
           "lane": "0", "warp": "0"}


class CppDialect(CFamily):
    name = "cpp"
    TYPES = dict(C_TYPES, f16="_Float16", bf16="float")     # bf16 held as f32, as the reference
    HELPERS = CPP_HELPERS
    FAIL = ("int z = 0; if (__atomic_compare_exchange_n(e, &z, site, false, __ATOMIC_RELAXED, "
            "__ATOMIC_RELAXED)) __atomic_store_n(e + 1, (int)(v > 2147483647 ? 2147483647 : v < -2147483647 - 1 ? -2147483647 - 1 : v), __ATOMIC_RELAXED);")

    def __init__(self, openmp: bool = True):
        super().__init__()
        self.openmp = openmp

    def thread(self, axis):
        return _THREAD[axis]

    def cast(self, text, src, dst):
        if dst == "bf16" and src != "bf16":       # held as a float, rounded to bfloat16
            return f"{self.need('zyn_bf16')}({super().cast(text, src, 'f32')})"
        src, dst = ("f32" if t == "bf16" else t for t in (src, dst))
        return text if src == dst else super().cast(text, src, dst)

    def math(self, fn, args, dtype):
        if fn == "fma":
            return f"{self.need('zyn_fma')}({', '.join(args)})"
        return super().math(fn, args, dtype)

    def collective(self, op, value, scope, dtype, width=0):
        return value                # one thread per block: the group is the thread itself

    def barrier(self, device=False):
        return "/* barrier: one thread per block */"

    STACK_BYTES = 16 * 1024     # larger arrays go on the heap (a thread's stack is small)

    def array(self, name, dtype, count, space):
        t, n = self.type(dtype), max(count, 1)
        if n * _BYTES[ir.element_of(dtype)] * ir.lanes_of(dtype) <= self.STACK_BYTES:
            return f"{t} {name}[{n}] = {{}};"
        self.heap = True
        return (f"std::unique_ptr<{t}[]> {name}_heap(new {t}[{n}]()); "
                f"{t}* const {name} = {name}_heap.get();")

    def reduction_loop(self, reductions) -> str:
        """A loop whose iterations only update sums, maxima and minima (ir.For.reduce):
        vector lanes with a partial one each, combined in an order fixed when the kernel is
        compiled; a float max or min is the NaN-propagating helper, declared as an OpenMP
        reduction of its own."""
        clauses = []
        for name, op, dtype in reductions:
            if op in ("max", "min") and dtype in ir.FLOAT_DTYPES:
                op = self.need(f"zyn_{op}_{dtype}_reduction")
            clauses.append(f"reduction({op}:{name})")
        return "#pragma omp simd " + " ".join(clauses)

    def atomic(self, op, array, index, value, dtype):
        if op == "+":
            return f"__atomic_fetch_add(&{array}[{index}], {value}, __ATOMIC_RELAXED);" \
                if dtype in ir.INT_DTYPES else \
                f"{{ _Pragma(\"omp atomic\") {array}[{index}] += {value}; }}"
        return (f"{{ _Pragma(\"omp critical(zyn_atomic)\") {array}[{index}] = "
                f"{self.need('zyn_' + op)}({array}[{index}], ({self.type(dtype)})({value})); }}")

    def kernel_open(self, k, params):
        ps = ["const long long zyn_block", "const long long zyn_blocks"] + \
             [self.param(p, "__restrict__ ") for p in params] + ["int* zyn_err"]
        return (f"// {k.comment}\n" if k.comment else "") + \
            f"static void {k.name}(" + ", ".join(ps) + ") {\n    (void)zyn_blocks; (void)zyn_err;"

    def program_head(self, program, sizes) -> str:
        head = banner("C++", program, sizes, f"CPU, {'OpenMP' if self.openmp else 'serial'}; ")
        head += ["#include <math.h>", "#include <stdint.h>", "#include <stdlib.h>"]
        head.append(vector_math_declarations())
        if getattr(self, "heap", False):
            head.append("#include <memory>")
        if any(p.dtype == "f16" for k in program.kernels for p in k.params) or any(
                isinstance(n, ir.Cast) and n.dtype == "f16" for n in ir.walk(program)):
            head += ["#ifndef __FLT16_MAX__",
                     '#error "this C++ compiler has no _Float16, which f16 buffers need"', "#endif"]
        self.need("zyn_cancelled")
        return "\n".join(head) + "\n"

    def program_tail(self, program, sizes) -> str:
        """The entry point: unpack buffers and scalars, then make the launches in order."""
        first = program.kernels[0]
        lines = [f'extern "C" void {ENTRY}(void* const* zyn_bufs, const double* zyn_fargs, '
                 'const long long* zyn_iargs, int* zyn_err) {',
                 "    (void)zyn_fargs; (void)zyn_iargs;"]
        nb = nf = ni = 0
        names = []
        for p in first.params:
            if (p.kind == "size" and sizes is not None and p.name in sizes) or p.kind == "scratch":
                continue
            names.append(p.name)
            if p.kind == "buffer":
                t = self.type(p.dtype)
                const = "" if p.writable else "const "
                lines.append(f"    {const}{t}* {p.name} = ({const}{t}*)zyn_bufs[{nb}];")
                nb += 1
            elif p.dtype in ir.FLOAT_DTYPES:
                t = self.type(compute_dtype(p.dtype))
                lines.append(f"    const {t} {p.name} = ({t})zyn_fargs[{nf}];")
                nf += 1
            else:
                val = f"zyn_iargs[{ni}] != 0" if p.dtype == "bool" else f"({self.type(p.dtype)})zyn_iargs[{ni}]"
                lines.append(f"    const {self.type(p.dtype)} {p.name} = {val};")
                ni += 1
        env = {k: v for k, v in (sizes or {}).items()}
        for sc in program.scratch:
            t = self.type(sc.dtype)
            lines.append(f"    {t}* {sc.name} = ({t}*)calloc({max(1, ir.evaluate(sc.count, env))}, sizeof({t}));")
        for launch in program.launches:
            k = program.kernel(launch.kernel)
            args = [p.name for p in k.params if not (p.kind == "size" and sizes is not None
                                                     and p.name in sizes)]
            grid = ir.evaluate(launch.grid, env)
            if self.openmp and grid > 1:
                lines.append(f"    #pragma omp parallel for schedule(dynamic) if(zyn_err[{SERIAL_WORD}] == 0)")
            lines.append(f"    for (long long zyn_b = 0; zyn_b < {grid}LL; ++zyn_b) {{")
            lines.append("        if (zyn_cancelled(zyn_err)) continue;")
            lines.append(f"        {launch.kernel}(zyn_b, {grid}LL, {', '.join(args + ['zyn_err'])});")
            lines.append("    }")
        for sc in program.scratch:
            lines.append(f"    free({sc.name});")
        lines.append("}")
        return "\n".join(lines) + "\n"
