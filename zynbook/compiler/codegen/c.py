"""CIR -> C++ for the CPU (compiled by the system compiler into a shared library).

`render_program(kernel, sizes, openmp=True)` returns a `CProgram`: the source text, the
order in which the entry point takes its scalar arguments and a map from generated lines to
ZynML lines; `render(kernel, sizes)` is its source text.

The renderer shares the C-like base (cstyle.py) with the CUDA and Metal renderers:
expressions, tiles and statements are the same code. What the GPUs spread over threads runs
here as plain loops, in the order the CIR writes them:

* **loops**: the body is rendered sequentially (one thread's view of the CIR, which is its
  meaning). The outermost parallel loop (with the parallel loops perfectly nested in it,
  `collapse`d) becomes `#pragma omp parallel for` when the compiler takes `-fopenmp`; a
  parallel loop iterates independently by construction (lowering marks a loop parallel only
  when it assigns no outer name and writes its own part of `out`). Loops inside it, parallel
  or not, are plain loops.
* **shared memory**: `shared var` is an array local to the parallel iteration that
  declares it (zero-filled, as the reference executor fills it; on the heap when large).
* **barriers**: lowering marks a loop parallel only when the shared memory a barrier orders
  belongs to each of its iterations, so every barrier sits in code that runs in order within
  one iteration: every write before it is already done and it is a no-op here.
* **reduce**: a whole-input reduction runs fixed chunks of the flattened loop nest in
  parallel and combines the chunk partials in order (the result does not depend on the
  number of threads); `axis=` reductions run one output per iteration of a parallel loop,
  sequentially over the reduced axis. argmin/argmax keep the first index on ties.

Sizes are compiled in (as for CUDA and Metal), so trip counts, strides and tile extents are
constants. The entry point is
`extern "C" void zyn_kernel(void* const* bufs, const double* fargs, const long long* iargs)`:
the buffers in kernel order (inputs, then the output), the float scalars and the integer and
boolean scalars that are not sizes. f16 buffers are `_Float16` (arithmetic in float); bf16
values are held as f32, as the reference executor holds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import cir, errflag, schedules
from ..launch.scalar import user_name
from ..targets import cpu_target
from .dialects.cpp import CppDialect
from .printer import print_program
from ..passes.tiles import inline_tile_lets
from .cstyle import no_schedule
from .cstyle import (BufInfo, CStyleRenderer, Emitter, GenericSchedules, Unsupported,
                     _strides, assigned_vars, ceil_div, cname, declared_vars, free_vars, has_node,
                     prelude_guards, prelude_helpers, prelude_span_len,
                     raise_unsupported, static_value, trip_count)

ENTRY = "zyn_kernel"
# the word of the error-flag buffer, past the flag itself, that asks a running kernel to stop
CANCEL_WORD = errflag.WORDS
CANCEL_CHECK = "if (zyn_cancelled(zyn_err)) continue;"

PRELUDE = (r"""#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

"""
    + prelude_helpers("static inline ")
    + r"""// the device sets the word after the error flag when the caller gave up on the launch: the
// outer loops then skip their remaining iterations (zynbook/runtime/cancel.py)
static inline bool zyn_cancelled(const int* e) { return __atomic_load_n(&e[ZYN_CANCEL_WORD], __ATOMIC_RELAXED) != 0; }
template <typename T> static inline T zyn_ipow(T a, T b) { T r = 1; for (T i = 0; i < b; ++i) r *= a; return r; }
""".replace("ZYN_CANCEL_WORD", str(CANCEL_WORD))
    + prelude_span_len("static inline ")
    + prelude_guards("static inline ", "int*",
                     "int z = 0; if (__atomic_compare_exchange_n(e, &z, site, false, __ATOMIC_RELAXED, "
                     "__ATOMIC_RELAXED)) __atomic_store_n(e + 1, (int)v, __ATOMIC_RELAXED);")
    + r"""static inline float zyn_silu(float x) { return x / (1.0f + expf(-x)); }
static inline double zyn_silu(double x) { return x / (1.0 + exp(-x)); }
static inline float zyn_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static inline double zyn_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }
// scratch too large for the stack, freed when its scope ends
template <typename T> struct ZynHeap {
    T* p;
    explicit ZynHeap(long long n) : p((T*)calloc((size_t)(n > 0 ? n : 1), sizeof(T))) {}
    ~ZynHeap() { free(p); }
    ZynHeap(const ZynHeap&) = delete;
    ZynHeap& operator=(const ZynHeap&) = delete;
};
""")

HALF_PRELUDE = r"""#ifndef __FLT16_MAX__
#error "this C++ compiler has no _Float16, which f16 buffers need"
#endif
static inline float zyn_h2f(_Float16 h) { return (float)h; }
static inline _Float16 zyn_f2h(float f) { return (_Float16)f; }
"""

# stack arrays up to this many bytes; larger shared arrays go on the heap
STACK_BYTES = 64 * 1024

_BYTES = {"f16": 2, "bf16": 4, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
          "u8": 1, "u16": 2, "u32": 4, "u64": 8, "bool": 1}


@dataclass
class CProgram:
    name: str               # the kernel's name
    source: str
    args: list              # (CIR scalar name, "f" or "i", position in fargs / iargs)
    schedule: str = ""
    line_map: dict = field(default_factory=dict)   # generated line (1-based) -> ZynML line
    openmp: bool = True
    error_sites: tuple = ()     # compiler/errflag.py: what the kernel may report


class CRenderer(CStyleRenderer, GenericSchedules):
    lang = "c"
    kernel_prefix = 'extern "C" void'
    restrict = "__restrict__"
    barrier_stmt = "/* barrier: the iteration's statements already ran in order */"
    index_type = "int"
    long_index_type = "long long"
    arg_index_type = "long long"
    arg_index_dtype = "i64"
    arg_index_none = "0x7fffffffffffffffLL"
    storage_types = dict(CStyleRenderer.storage_types, f16="_Float16", bf16="float")

    def __init__(self, openmp: bool = True):
        self.openmp = openmp
        self.nt = 1
        self.par_depth = 0          # > 0 while rendering inside a parallelised loop
        self.schedule_notes: list = []

    def setup(self, kernel, sizes, scalar_dtypes=None):
        super().setup(kernel, sizes, scalar_dtypes)
        self.args = []
        nf = ni = 0
        self.unpack: list = []
        for s in kernel.scalars:
            if s.name in self.sizes:
                self.root.vars[s.name] = (cname(s.name), s.dtype, ())
                continue
            c = cname(s.name)
            ct = self.compute_type(s.dtype)
            if s.dtype in cir.FLOAT_DTYPES:
                self.unpack.append(f"const {ct} {c} = ({ct})zyn_fargs[{nf}];")
                self.args.append((s.name, "f", nf))
                nf += 1
            else:
                val = f"zyn_iargs[{ni}] != 0" if s.dtype == "bool" else f"({ct})zyn_iargs[{ni}]"
                self.unpack.append(f"const {ct} {c} = {val};")
                self.args.append((s.name, "i", ni))
                ni += 1
            self.taken_names.add(c)

    # ---- language hooks -----------------------------------------------------------

    def load_value(self, text, dtype):
        return f"zyn_h2f({text})" if dtype == "f16" else text

    def store_value(self, text, dtype):
        return f"zyn_f2h({text})" if dtype == "f16" else text

    def arg_flat(self, row, extent):
        return f"(long long)({row} * {extent} + _t)" if row else "(long long)_t"

    def atomic_stmt(self, em, s: cir.Atomic, scope):
        buf, off, v = self.atomic_operands(em, s, scope)
        if buf.dtype == "f16":
            raise Unsupported("atomic updates of f16 buffers", s.line)
        if s.op == "+":
            if self.openmp and self.par_depth:
                em("#pragma omp atomic", s.line)
            em(f"{buf.c}[{off}] += {v};", s.line)
            return
        if self.openmp and self.par_depth:
            em("#pragma omp critical(zyn_atomic)", s.line)
        em(f"{{ {buf.c}[{off}] = zyn_{s.op}({buf.c}[{off}], ({self.storage_types[buf.dtype]})({v})); }}",
           s.line)

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
        c = self.loop_var_name(s.name)
        st = self.storage_types[s.dtype]
        if n * _BYTES[s.dtype] <= STACK_BYTES:
            em(f"{st} {c}[{max(n, 1)}] = {{}};", s.line)
        else:
            em(f"ZynHeap<{st}> {c}_heap({n});", s.line)
            em(f"{st}* const {c} = {c}_heap.p;", s.line)
        scope.vars["@buf:" + s.name] = BufInfo(s.name, c, s.dtype, tuple(dims),
                                               _strides(tuple(dims)), const=False, shared=True)

    # ---- loops ----------------------------------------------------------------------

    def stmt(self, em: Emitter, s, scope):
        if isinstance(s, cir.Loop) and s.parallel and self.par_depth == 0 and self._parallelisable(s):
            self.parallel_loop(em, s, scope)
            return
        super().stmt(em, s, scope)

    def _parallelisable(self, s: cir.Loop) -> bool:
        if has_node(s.body, cir.Yield):
            return False            # a reduce kernel's accumulator is one per thread
        if assigned_vars(s.body) - declared_vars(s.body):
            return False
        n = trip_count(s, self.sizes)
        return n is None or n > 1

    def parallel_loop(self, em: Emitter, s: cir.Loop, scope):
        """`s` and the parallel loops perfectly nested in it (bounds independent of the
        outer ones), as one `omp parallel for collapse(n)` (plain loops without OpenMP)."""
        self.comment(em, s)
        chain, headers = [], []
        inner = scope
        cur = s
        bound = set()
        while True:
            pre: list = []
            c = self.loop_var_name(cur.var)
            header = self.loop_header(cur, c, inner, pre)
            if chain and pre:
                break
            self.emit_pre(em, pre, cur.line)
            inner = inner.child()
            inner.vars[cur.var] = (c, "i64" if self.idx != "int" else "i32", ())
            chain.append(cur)
            headers.append(header)
            bound.add(cur.var)
            body = cur.body
            if not (len(body) == 1 and isinstance(body[0], cir.Loop) and body[0].parallel
                    and not (free_vars((body[0].start, body[0].stop, body[0].step)) & bound)):
                break
            cur = body[0]
        if self.openmp:
            collapse = f" collapse({len(chain)})" if len(chain) > 1 else ""
            em(f"#pragma omp parallel for schedule(static){collapse}", s.line)
        for h, lp in zip(headers, chain):
            em.open(h, lp.line)
        if has_node(chain[-1].body, (cir.Loop,)):
            em(CANCEL_CHECK)        # a heavy iteration: one load of the cancel word is free
        self.par_depth += 1
        self.stmts(em, chain[-1].body, inner)
        self.par_depth -= 1
        for _ in chain:
            em.close()
        self.schedule_notes.append(
            f"parallel for over ({', '.join(lp.var for lp in chain)})")

    # ---- reduce kernels -------------------------------------------------------------------


    # ---- assembly ---------------------------------------------------------------------

    def assemble(self, body: Emitter) -> tuple:
        k = self.kernel
        head = [f"// ZynBook C++ for kernel `{k.name}` (CPU"
                + (", OpenMP" if self.openmp else ", serial") + ")",
                "// sizes: " + (", ".join(f"{n}={v}" for n, v in sorted(self.sizes.items())) or "none")]
        for note in self.schedule_notes:
            head.append(f"// {note}")
        text = "\n".join(head) + "\n" + PRELUDE
        if self.uses_half:
            text += HALF_PRELUDE
        text += "\n"
        lines = text.split("\n")[:-1]
        lines.append(f"{self.kernel_prefix} {ENTRY}(void* const* zyn_bufs, const double* zyn_fargs, "
                     "const long long* zyn_iargs, int* zyn_err) {")
        lines.append("    (void)zyn_fargs; (void)zyn_iargs; (void)zyn_err;")
        for n, b in enumerate(list(k.inputs) + [k.output]):
            info = self.buffers[b.name]
            const = "const " if info.const else ""
            st = self.storage_types[info.dtype]
            lines.append(f"    {const}{st}* {self.restrict} {info.c} = ({const}{st}*)zyn_bufs[{n}];")
        lines.extend("    " + u for u in self.unpack)
        offset = len(lines)
        lines.extend(body.text().split("\n"))
        lines.append("}")
        line_map = {offset + i + 1: zl for i, zl in body.src_lines.items()}
        return "\n".join(lines) + "\n", line_map


def render_program(kernel: cir.Kernel, sizes: dict, openmp: bool = True) -> CProgram:
    """Render `kernel` for one binding of its sizes. Raises ZynMLDeviceError if impossible."""
    sizes = {k: int(v) for k, v in sizes.items()}
    try:
        missing = [d for d in kernel.dims if d not in sizes]
        if missing:
            raise Unsupported(f"sizes not bound: {', '.join(missing)}")
        r = CRenderer(openmp)
        r.setup(kernel, sizes)
        body = inline_tile_lets(kernel.body)
        em, scope = r.body_start()
        kind = kernel.kernel_type.kind
        prog = _launch_program(kernel, sizes, openmp)
        if prog is not None:
            return prog
        if kind == "reduce":
            no_schedule(kernel, cpu_target(), sizes)
        else:
            r.stmts(em, body, scope)
        source, line_map = r.assemble(em)
        return CProgram(kernel.name, source, list(r.args), "; ".join(r.schedule_notes) or "serial",
                        line_map, openmp, r.errs.as_tuple())
    except Unsupported as err:
        raise_unsupported(kernel, err, "C")


def _launch_program(kernel: cir.Kernel, sizes: dict, openmp: bool) -> CProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the C++ dialect."""
    prog = schedules.build(kernel, cpu_target(), sizes)
    if prog is None:
        return None
    out = print_program(CppDialect(openmp), prog, kernel, {user_name(d): sizes[d] for d in kernel.dims})
    args, nf, ni = [], 0, 0
    for s in kernel.scalars:
        if s.name in sizes:
            continue
        if s.dtype in cir.FLOAT_DTYPES:
            args.append((s.name, "f", nf))
            nf += 1
        else:
            args.append((s.name, "i", ni))
            ni += 1
    return CProgram(kernel.name, out.source, args, prog.schedule, out.line_map, openmp, prog.sites)


def render(kernel: cir.Kernel, sizes: dict | None = None, openmp: bool = True) -> str:
    """C++ source of `kernel`. Sizes are compiled in: without `sizes`, only a kernel whose
    sizes are all fixed renders; otherwise the text says so."""
    if sizes is None:
        if kernel.dims:
            return (f"// kernel `{kernel.name}`: C++ is generated at launch, with the sizes "
                    f"({', '.join(kernel.dims)}) of that launch compiled in")
        sizes = {}
    return render_program(kernel, sizes, openmp).source
