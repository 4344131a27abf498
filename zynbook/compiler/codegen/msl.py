"""CIR -> Metal Shading Language, with a schedule per kernel type.

`render_program(kernel, sizes)` returns an `MSLProgram`: the source text, the dispatches to
make in order (entry point, threadgroups in the grid, threads per threadgroup), the buffer
table (`[[buffer(n)]]` index -> input, output, scratch or the argument struct) and the
layout of the constant argument struct. `render(kernel, sizes)` is its source text and
`geometry(kernel, sizes)` the `(grid, threadgroup)` of its main dispatch.

The renderer shares the C-like base (cstyle.py) with the CUDA renderer: expressions, tiles,
statements, the generic thread/block schedules and the reductions are the same code
(attention is recognised by passes/recognise.py); what differs is a
hook here (address spaces `device` / `threadgroup` / `constant`, `threadgroup_barrier`,
SIMD-group collectives, MSL math names, `half`, `long`). As in the CUDA renderer, sizes are
compiled in as constants for one binding of the kernel's sizes (trip counts, strides and
tile extents fold); the scalar arguments that are not sizes (`eps`, ...) travel in one
`constant ZynArgs&` struct bound after the buffers.

Schedules:

* **generic / thread**: one thread per iteration of the leading parallel loops, grid-stride
  over the flattened space (elementwise kernels, matmuls, convolutions).
* **rows / block**: one threadgroup per iteration of the parallel loops; the serial loops
  inside are spread over the threadgroup's threads and accumulations become SIMD-group
  reductions (`simd_sum`, `simd_max`, ...) followed by a threadgroup tree; `shared var` is
  `threadgroup` memory and `barrier()` is `threadgroup_barrier` (softmax, layer norm,
  attention, fused kernels).
* **reduce**: grid-stride partials per thread, SIMD-group + threadgroup reduction, a
  second dispatch over the per-threadgroup partials for a whole-input reduction; `axis=`
  reductions one SIMD group per output row (or one threadgroup for long rows, or one thread
  per output for a strided axis); argmin/argmax keep the first index on ties.
* **flash**: attention in any form the recognition pass finds (three-pass, online softmax,
  tiled flash; any key condition and scale; any axis order): the attention schedule
  (compiler/schedules/attention.py) printed by the MSL dialect.

Metal has no `double`: f64 kernels are refused with a ZynML error, never computed in f32.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .. import cir, schedules
from ..launch import ir
from ..launch.scalar import user_name
from ..targets import metal_target
from .dialects.msl import ARG_TYPES as MSL_ARG_TYPES
from .dialects.msl import MslDialect, Refused
from .printer import print_program
from ..passes.tiles import inline_tile_lets
from .cstyle import (OP_FUNCTOR, CStyleRenderer, Emitter, GenericSchedules, Unsupported,
                     ceil_div, cname, fold_call, pow2_at_least, prelude_functors,
                     prelude_guards, prelude_helpers, prelude_span_len, raise_unsupported)
from .cstyle import SITES as _SITES
from .cstyle import no_schedule

PRELUDE = (
    "\n"
    + prelude_helpers("inline ")
    + r"""template <typename T> inline T zyn_ipow(T a, T b) { T r = 1; for (T i = 0; i < b; ++i) r *= a; return r; }
"""
    + prelude_span_len("inline ")
    + prelude_guards("inline ", "device atomic_int*",
                     "int z = 0; while (!atomic_compare_exchange_weak_explicit(e, &z, site, "
                     "memory_order_relaxed, memory_order_relaxed)) { if (z != 0) return; } "
                     "atomic_store_explicit(e + 1, (int)v, memory_order_relaxed);",
                     "long", "ulong")
    + r"""// pow with C semantics for a negative base and an integral exponent
inline float zyn_pow(float a, float b) {
    if (a >= 0.0f || b != floor(b)) return pow(a, b);
    const float r = pow(-a, b);
    return fmod(b, 2.0f) != 0.0f ? -r : r;
}
// erf (Metal has none): Abramowitz-Stegun 7.1.26 refined, |error| < 2e-7 in float
inline float zyn_erf(float x) {
    const float ax = fabs(x);
    if (ax < 0.5f) {
        const float x2 = x * x;
        return x * (1.1283791671f + x2 * (-0.3761263890f + x2 * (0.1128379167f +
               x2 * (-0.0268661707f + x2 * (0.0052239776f - x2 * 0.0008548327f)))));
    }
    const float t = 1.0f / (1.0f + 0.5f * ax);
    const float y = t * exp(-ax * ax - 1.26551223f + t * (1.00002368f + t * (0.37409196f +
                    t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f +
                    t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
    return x >= 0.0f ? 1.0f - y : y - 1.0f;
}
inline float zyn_gelu(float x) { return 0.5f * x * (1.0f + zyn_erf(x * 0.7071067811865476f)); }
inline float zyn_silu(float x) { return x / (1.0f + exp(-x)); }
"""
    + prelude_functors("")
    + r"""// SIMD-group reductions: every lane gets the result
template <typename T> inline T zyn_simd_allreduce(T v, ZynAdd) { return simd_sum(v); }
template <typename T> inline T zyn_simd_allreduce(T v, ZynMul) { return simd_product(v); }
// max and min propagate NaN (as numpy does): a NaN in any lane is the result
template <typename T> inline T zyn_simd_allreduce(T v, ZynMax) {
    const T r = simd_max(v); return simd_max(v != v ? 1 : 0) != 0 ? T(NAN) : r; }
template <typename T> inline T zyn_simd_allreduce(T v, ZynMin) {
    const T r = simd_min(v); return simd_max(v != v ? 1 : 0) != 0 ? T(NAN) : r; }
template <typename T> inline T zyn_simd_allreduce(T v, ZynAnd) { return simd_min(v != 0 ? 1 : 0); }
template <typename T> inline T zyn_simd_allreduce(T v, ZynOr) { return simd_max(v != 0 ? 1 : 0); }
// Every thread of the threadgroup gets the reduction of `v`: SIMD groups first, then one
// SIMD group over the per-group partials in threadgroup memory `red` (one slot per group).
template <typename T, typename Op> inline T zyn_group_allreduce(T v, Op op, T identity,
        threadgroup T* red, uint lane, uint sg, uint nsg) {
    v = zyn_simd_allreduce(v, op);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) red[sg] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T r = lane < nsg ? red[lane] : identity;
    return zyn_simd_allreduce(r, op);
}
""")

# the builtins every entry point receives (1-D grids)
BUILTINS = ("uint _tid [[thread_position_in_threadgroup]]",
            "uint _gid [[threadgroup_position_in_grid]]",
            "uint _ngroups [[threadgroups_per_grid]]",
            "uint _lane [[thread_index_in_simdgroup]]",
            "uint _sg [[simdgroup_index_in_threadgroup]]",
            "uint _nsg [[simdgroups_per_threadgroup]]")

ARG_TYPES = {"f16": "float", "bf16": "float", "f32": "float", "i8": "int", "i16": "int",
             "i32": "int", "bool": "int", "u8": "uint", "u16": "uint", "u32": "uint",
             "i64": "long", "u64": "ulong"}


@dataclass
class Dispatch:
    entry: str
    grid: int               # threadgroups (1-D)
    threadgroup: int        # threads per threadgroup


@dataclass
class BufferSlot:
    index: int              # [[buffer(index)]]
    role: str               # "input", "output", "scratch", "args", "error" (the error flag)
    name: str               # CIR buffer name, scratch name, or "zyn_args"
    dtype: str = ""         # element dtype (inputs, output, scratch)
    count: int = 0          # elements (scratch) or bytes (args)


@dataclass
class MSLProgram:
    name: str
    source: str
    dispatches: list
    slots: list             # of BufferSlot, by index
    args: list              # (field name, MSL type, CIR scalar name) in struct order
    schedule: str = ""
    notes: list = field(default_factory=list)
    threadgroup_bytes: int = 0
    error_sites: tuple = ()     # compiler/errflag.py; the flag is the last buffer slot

    def pack_args(self, scalars: dict) -> bytes:
        """The bytes of the `constant ZynArgs&` struct (natural C alignment)."""
        out = b""
        for _, ty, name in self.args:
            fmt, size = {"float": ("<f", 4), "int": ("<i", 4), "uint": ("<I", 4),
                         "long": ("<q", 8), "ulong": ("<Q", 8)}[ty]
            out += b"\0" * (-len(out) % size)
            v = scalars[name]
            out += struct.pack(fmt, float(v) if ty == "float" else int(v))
        out += b"\0" * (-len(out) % 8)
        return out or b"\0" * 8


class MSLRenderer(CStyleRenderer, GenericSchedules):
    lang = "msl"
    kernel_prefix = "kernel void"
    buffer_qualifier = "device"
    shared_qualifier = "threadgroup"
    restrict = ""
    barrier_stmt = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    index_type = "int"
    long_index_type = "long"
    check_type = "long"
    thread_builtin = "_tid"
    block_builtin = "_gid"
    grid_builtin = "_ngroups"
    arg_index_type = "int"
    arg_index_dtype = "i32"
    arg_index_none = "2147483647"
    storage_types = {
        "f16": "half", "bf16": "bfloat", "f32": "float",
        "i8": "char", "i16": "short", "i32": "int", "i64": "long",
        "u8": "uchar", "u16": "ushort", "u32": "uint", "u64": "ulong", "bool": "bool",
    }

    def __init__(self):
        self.nt = 256
        self.red_scratch: dict = {}         # C type -> threadgroup array name

    def setup(self, kernel, sizes, scalar_dtypes=None):
        for b in list(kernel.inputs) + [kernel.output]:
            if b.dtype == "f64":
                raise Unsupported(f"Metal has no 64-bit floats (`{b.name}` is f64)")
        for s in kernel.scalars:
            if s.dtype == "f64":
                raise Unsupported(f"Metal has no 64-bit floats (scalar `{s.name}` is f64)")
        super().setup(kernel, sizes, scalar_dtypes)
        self.red_scratch = {}
        self.arg_fields = []
        for s in kernel.scalars:
            if s.name in self.sizes:
                self.root.vars[s.name] = (cname(s.name), s.dtype, ())
                continue
            c = cname(s.name)
            self.arg_fields.append((c, ARG_TYPES[s.dtype], s.name))
            ref = f"zyn_args.{c}"
            if s.dtype == "bool":
                ref = f"(zyn_args.{c} != 0)"
            self.root.vars[s.name] = (ref, s.dtype, ())

    # ---- language hooks -----------------------------------------------------------

    def global_thread_index(self, nt):
        return f"({self.idx})_gid * {nt} + ({self.idx})_tid"

    def grid_stride(self, nt):
        return f"({self.idx})_ngroups * {nt}"

    def arg_flat(self, row, extent):
        return f"(int)({row} * {extent} + _t)" if row else "(int)_t"

    def group_threads(self, wg):
        return min(1024, pow2_at_least(wg, 32, 1024))

    def compute_type(self, dtype):
        if dtype == "f64":
            raise Unsupported("Metal has no 64-bit floats (f64)")
        if dtype in ("f16", "bf16"):
            return "float"
        return self.storage_types[dtype]

    def load_value(self, text, dtype):
        if dtype in ("f16", "bf16"):
            return f"float({text})"
        return text

    def store_value(self, text, dtype):
        if dtype == "f16":
            return f"half({text})"
        if dtype == "bf16":
            return f"bfloat({text})"
        return text

    def literal(self, value, dtype):
        if dtype in ("i64", "u64") or (dtype not in cir.FLOAT_DTYPES and dtype != "bool"
                                       and not isinstance(value, bool) and abs(int(value)) >= 2 ** 31):
            return f"{'long' if dtype != 'u64' else 'ulong'}({int(value)})"
        return super().literal(value, dtype)

    def float_literal(self, v, dtype):
        if dtype == "f64":
            raise Unsupported("Metal has no 64-bit floats (f64)")
        if v != v:
            return "NAN"
        if v == float("inf"):
            return "INFINITY"
        if v == float("-inf"):
            return "(-INFINITY)"
        return super().float_literal(v, "f32")

    def lowest(self, dtype):
        if dtype == "i64":
            return "long(-9223372036854775807 - 1)"
        return super().lowest(dtype)

    def highest(self, dtype):
        if dtype == "i64":
            return "long(9223372036854775807)"
        if dtype == "u64":
            return "ulong(18446744073709551615ul)"
        return super().highest(dtype)

    def cast_to(self, text, from_dtype, to_dtype):
        if from_dtype == to_dtype:
            return text
        ct = self.compute_type(to_dtype)
        if self.compute_type(from_dtype) == ct:
            return text
        return f"{ct}({text})"

    def math_call(self, fn, args, dtype):
        if dtype == "f64":
            raise Unsupported("Metal has no 64-bit floats (f64)")
        a = args
        if fn == "relu":
            return f"zyn_max({a[0]}, 0.0f)"
        if fn == "sigmoid":
            return f"(1.0f / (1.0f + exp(-({a[0]}))))"
        if fn == "silu":
            return f"zyn_silu({a[0]})"
        if fn == "gelu":
            return f"zyn_gelu({a[0]})"
        if fn == "erf":
            return f"zyn_erf({a[0]})"
        if fn == "rsqrt":
            return f"rsqrt({a[0]})"
        if fn == "round":
            return f"rint({a[0]})"
        if fn == "abs":
            return f"fabs({a[0]})"
        if fn in ("min", "max"):
            return fold_call(f"zyn_{fn}", a)
        if fn == "clamp":
            return f"zyn_min(zyn_max({a[0]}, {a[1]}), {a[2]})"
        if fn == "pow":
            return f"zyn_pow({a[0]}, {a[1]})"
        return f"{fn}({', '.join(a)})"

    def _combine(self, op, acc, v, dtype):
        return super()._combine(op, acc, v, dtype)

    def red_array(self, ctype: str) -> str:
        if ctype not in self.red_scratch:
            self.red_scratch[ctype] = f"zyn_red_{ctype}"
        return self.red_scratch[ctype]

    def block_allreduce(self, functor, value, ctype, ident):
        return (f"zyn_group_allreduce<{ctype}>({value}, {functor}(), ({ctype})({ident}), "
                f"{self.red_array(ctype)}, _lane, _sg, _nsg)")

    def simd_allreduce(self, op, value):
        return f"zyn_simd_allreduce({value}, {OP_FUNCTOR[op]}())"


    def atomic_stmt(self, em, s: cir.Atomic, scope):
        buf, off, v = self.atomic_operands(em, s, scope)
        at = {"f32": "atomic_float", "i32": "atomic_int", "u32": "atomic_uint"}.get(buf.dtype)
        if at is None or (s.op != "+" and buf.dtype == "f32"):
            raise Unsupported(f"atomic {s.op}= on {buf.dtype} is not available in Metal", s.line)
        fn = {"+": "add", "min": "min", "max": "max"}[s.op]
        em(f"atomic_fetch_{fn}_explicit((device {at}*)&{buf.c}[{off}], {v}, "
           "memory_order_relaxed);", s.line)

    # ---- assembly ---------------------------------------------------------------------

    def signature(self, name: str, scratch: list = ()) -> str:
        """Parameters: buffers (inputs, output) then scratch by [[buffer(n)]], the argument
        struct, then the thread-position builtins."""
        ps = []
        n = 0
        for b in list(self.kernel.inputs) + [self.kernel.output]:
            info = self.buffers[b.name]
            const = "const " if info.const else ""
            ps.append(f"device {const}{self.storage_types[info.dtype]}* {info.c} [[buffer({n})]]")
            n += 1
        for sname, ctype in scratch:
            ps.append(f"device {ctype}* {sname} [[buffer({n})]]")
            n += 1
        if self.arg_fields:
            ps.append(f"constant ZynArgs& zyn_args [[buffer({n})]]")
            n += 1
        ps.append(f"device atomic_int* {self.err_ref} [[buffer({n})]]")
        ps.extend(BUILTINS)
        return f"{self.kernel_prefix} {name}(\n    " + ",\n    ".join(ps) + ")"

    def kernel_text(self, name: str, body: Emitter, scratch: list = ()) -> str:
        decls = list(self.shared_decls)
        for ctype, arr in self.red_scratch.items():
            decls.append(f"threadgroup {ctype} {arr}[32];")
        text = self.signature(name, scratch) + " {\n"
        text += "".join("    " + d + "\n" for d in decls)
        text += body.text() + "\n}"
        self.shared_decls = []
        self.red_scratch = {}
        return text

    def assemble(self, kernels: list, banner: str) -> str:
        head = [f"// ZynBook MSL for kernel `{self.kernel.name}` ({banner})",
                "// sizes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.sizes.items())),
                "#include <metal_stdlib>", "using namespace metal;"]
        text = "\n".join(head) + "\n" + PRELUDE
        if self.arg_fields:
            text += "\nstruct ZynArgs {\n" + "".join(f"    {t} {c};\n" for c, t, _ in self.arg_fields) + "};\n"
        return text + "\n" + "\n\n".join(kernels) + "\n"


# ======================================================================== schedules


_TG_BYTES = {"float": 4, "int": 4, "uint": 4, "half": 2, "bfloat": 2, "char": 1, "uchar": 1,
             "short": 2, "ushort": 2, "long": 8, "ulong": 8, "bool": 1}


def _threadgroup_bytes(source: str) -> int:
    """Bytes of `threadgroup` arrays declared by the largest entry point."""
    import re
    best = cur = 0
    for ln in source.splitlines():
        if ln.startswith("kernel void"):
            best, cur = max(best, cur), 0
        m = re.match(r"\s+threadgroup (\w+) \w+((?:\[\d+\])+);", ln)
        if m:
            n = 1
            for d in re.findall(r"\[(\d+)\]", m.group(2)):
                n *= int(d)
            cur += n * _TG_BYTES.get(m.group(1), 4)
    return max(best, cur)


def _slots(r: MSLRenderer, kernel, scratch: list) -> list:
    slots = []
    n = 0
    for b in kernel.inputs:
        slots.append(BufferSlot(n, "input", b.name, b.dtype))
        n += 1
    slots.append(BufferSlot(n, "output", kernel.output.name, kernel.output.dtype))
    n += 1
    for sname, dtype, count in scratch:
        slots.append(BufferSlot(n, "scratch", sname, dtype, count))
        n += 1
    if r.arg_fields:
        slots.append(BufferSlot(n, "args", "zyn_args"))
        n += 1
    slots.append(BufferSlot(n, "error", "zyn_err", "i32", 2))
    return slots


def _program(r, kernel, kernels, dispatches, banner, notes, scratch=()) -> MSLProgram:
    src = r.assemble(kernels, banner)
    return MSLProgram(cname(kernel.name), src, dispatches, _slots(r, kernel, list(scratch)),
                      list(r.arg_fields), banner, list(notes), _threadgroup_bytes(src),
                      tuple(r.errs.sites))


def render_program(kernel: cir.Kernel, sizes: dict, options: dict | None = None) -> MSLProgram:
    """Render `kernel` for one binding of its sizes. Raises ZynMLDeviceError if impossible."""
    options = dict(options or {})
    sizes = {k: int(v) for k, v in sizes.items()}
    try:
        missing = [d for d in kernel.dims if d not in sizes]
        if missing:
            raise Unsupported(f"sizes not bound: {', '.join(missing)}")
        _SITES.collect()
        try:
            return _render(kernel, sizes, options)
        finally:
            _SITES.stop()
    except Unsupported as err:
        raise_unsupported(kernel, err, "MSL")


def render(kernel: cir.Kernel, sizes: dict | None = None, options: dict | None = None) -> str:
    """MSL source of `kernel`. Sizes are compiled in: without `sizes`, only a kernel whose
    sizes are all fixed renders; otherwise the text says so."""
    if sizes is None:
        if kernel.dims:
            return (f"// kernel `{kernel.name}`: MSL is generated at launch, with the sizes "
                    f"({', '.join(kernel.dims)}) of that launch compiled in")
        sizes = {}
    return render_program(kernel, sizes, options).source


def geometry(kernel: cir.Kernel, sizes: dict, options: dict | None = None) -> tuple:
    """(threadgroups in the grid, threads per threadgroup) of the main dispatch; the full
    list, with the second pass of a whole-input reduction, is `render_program(...).dispatches`."""
    d = render_program(kernel, sizes, options).dispatches[0]
    return d.grid, d.threadgroup


def schedule_name(prog: MSLProgram) -> str:
    s = prog.schedule
    for key, name in (("flash", "flash"), ("attention", "flash"), ("reduce", "reduce"),
                      ("rows:", "rows"), ("block:", "rows"), ("threadgroup of", "rows"),
                      ("whole body", "rows")):
        if key in s:
            return name
    return "generic"


def _render(kernel, sizes, options) -> MSLProgram:
    kind = kernel.kernel_type.kind
    notes: list = []
    body = inline_tile_lets(kernel.body)
    if kind in ("attention", "flash_attention") and not options.get("generic"):
        prog = _launch_program(kernel, sizes, notes, only="attention")
        if prog is not None:
            return prog
    if kind == "reduce":
        return _launch_program(kernel, sizes, notes) or no_schedule(kernel, metal_target(), sizes)
    return render_generic(kernel, body, sizes, notes, options)


# ---------------------------------------------------------------------- generic


def render_generic(kernel, body, sizes, notes, options=None) -> MSLProgram:
    r = MSLRenderer()
    r.setup(kernel, sizes)
    plan = r.plan_generic(kernel, body, sizes, options or {})
    if plan.mode == "thread" or not (options or {}).get("mode"):
        prog = _launch_program(kernel, sizes, notes)
        if prog is not None:
            return prog
    if plan.mode == "thread":
        return _thread_program(r, kernel, plan.nest, notes)
    banner = "rows: one threadgroup runs the whole body" if plan.mode == "whole" else (
        f"rows: one threadgroup of {plan.nt} threads per iteration of "
        f"({', '.join(l.var for l in plan.nest.loops)}), SIMD-group reductions")
    return _block_program(r, kernel, plan.nest, plan.nest.total, notes, banner)


def _launch_program(kernel, sizes, notes, only=None) -> MSLProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the MSL dialect (whose copies
    are element by element: a program's aligned fallback is not needed)."""
    prog = schedules.build(kernel, metal_target(), sizes, only=only)
    if prog is None:
        return None
    try:
        out = print_program(MslDialect(), prog, kernel, {user_name(d): sizes[d] for d in kernel.dims})
    except Refused as err:
        raise Unsupported(str(err)) from None
    args = [(user_name(s.name), MSL_ARG_TYPES[s.dtype], s.name) for s in kernel.scalars
            if s.name not in sizes]
    slots = [BufferSlot(n, "input", b.name, b.dtype) for n, b in enumerate(kernel.inputs)]
    slots.append(BufferSlot(len(slots), "output", kernel.output.name, kernel.output.dtype))
    for sc in prog.scratch:
        slots.append(BufferSlot(len(slots), "scratch", sc.name, sc.dtype, int(ir.evaluate(sc.count, sizes))))
    if args:
        slots.append(BufferSlot(len(slots), "args", "zyn_args"))
    slots.append(BufferSlot(len(slots), "error", "zyn_err", "i32", 2))
    dispatches = [Dispatch(l.kernel, int(ir.evaluate(l.grid, sizes)), l.block) for l in prog.launches]
    return MSLProgram(prog.kernels[0].name, out.source, dispatches, slots, args, prog.schedule,
                      notes + prog.notes, 0, prog.sites)


def _block_program(r: MSLRenderer, kernel, nest, groups: int, notes, banner):
    em = r.block_mode_body(nest)
    name = cname(kernel.name)
    text = r.kernel_text(name, em)
    return _program(r, kernel, [text], [Dispatch(name, max(groups, 1), r.nt)], banner, notes)


def _thread_program(r: MSLRenderer, kernel, nest, notes):
    nt = r.nt
    name = cname(kernel.name)
    em = r.thread_mode_body(nest, nt)
    text = r.kernel_text(name, em)
    groups = max(1, min(ceil_div(nest.total, nt), 65535))
    banner = f"generic: one thread per iteration of ({', '.join(l.var for l in nest.loops)})"
    return _program(r, kernel, [text], [Dispatch(name, groups, nt)], banner, notes)


# ----------------------------------------------------------------------- reduce
