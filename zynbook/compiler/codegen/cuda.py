"""CIR -> CUDA C, with a real schedule per kernel type.

`render_cuda(kernel, sizes)` returns a `CudaProgram`: the source text (sizes baked in as
constants), the launches to make in order (grid, block, arguments) and the scratch memory
they need. Schedules, tried in this order:

* **attention / flash_attention** whose body the recognition pass (passes/recognise.py)
  finds to be attention in any form (three-pass, online softmax, tiled flash with any block
  size), with any key condition and launch-constant scale: one block per 64 queries of one
  head, K/V tiles in shared memory, online softmax.
* **contractions** (matmul, batched_matmul, conv2d and any kernel of that shape):
  `out[P] = epilogue(init + sum_R A(P, R) * B(P, R))` becomes a tiled GEMM: 128x128x8 tiles
  (64 where a side is small) in double-buffered shared memory, 8x8 (or 4x4) outputs per
  thread in registers; a convolution is the same GEMM with the input gathered on the fly
  (implicit im2col); f16/bf16 inputs load and convert, accumulation is f32.
* **reduce**, **rows** and the **generic thread** schedule: compiler/schedules/ builds their
  launch IR and the CUDA dialect (codegen/dialects/cuda.py) prints it; the launches, scratch
  and error sites come with it.
* what those do not take yet: thread mode with 16-byte vector loads and stores when the
  innermost loop is contiguous and aligned, and block mode (tiles, `shared var` and
  `barrier()` -> `__syncthreads()`), see cstyle.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import cir, schedules
from ..launch import ir
from ..launch.scalar import user_name
from ..targets import cuda_target
from .dialects.cuda import CudaDialect
from .printer import print_program
from .cstyle import SITES as _SITES
from ..passes.tiles import inline_tile_lets
from .cstyle import attention_pattern, no_schedule
from .cstyle import (OP_FUNCTOR, CStyleRenderer, Emitter, GenericSchedules, Nest, Unsupported,
                     ceil_div, cname, find_nest, free_vars, prelude_functors, prelude_guards,
                     prelude_helpers, prelude_span_len, raise_unsupported, trip_count)

DEVICE_FN = "__device__ __forceinline__ "      # qualifies every prelude function
PRELUDE = (
    r"""
#define ZYN_INF_F __int_as_float(0x7f800000)
#define ZYN_NAN_F __int_as_float(0x7fc00000)
#define ZYN_INF_D __longlong_as_double(0x7ff0000000000000LL)
#define ZYN_NAN_D __longlong_as_double(0x7ff8000000000000LL)
"""
    + prelude_helpers(DEVICE_FN)
    + r"""template <typename T> __device__ __forceinline__ T zyn_floordiv(T a, T b) {
    T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) --q; return q; }
template <typename T> __device__ __forceinline__ T zyn_mod(T a, T b) {
    T r = a % b; if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
template <typename T> __device__ __forceinline__ T zyn_ipow(T a, T b) {
    T r = 1; for (T i = 0; i < b; ++i) r *= a; return r; }
__device__ __forceinline__ float zyn_fmod(float a, float b) { return a - floorf(a / b) * b; }
__device__ __forceinline__ double zyn_fmod(double a, double b) { return a - floor(a / b) * b; }
__device__ __forceinline__ float zyn_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
__device__ __forceinline__ double zyn_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }
__device__ __forceinline__ float zyn_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ double zyn_silu(double x) { return x / (1.0 + exp(-x)); }
"""
    + prelude_span_len(DEVICE_FN)
    + prelude_guards(DEVICE_FN, "int*",
                     "if (atomicCAS(e, 0, site) == 0) atomicExch(e + 1, (int)v);")
    + prelude_functors(DEVICE_FN)
    + r"""template <typename T, typename Op> __device__ __forceinline__ T zyn_warp_allreduce(T v, Op op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Every thread of the block gets the reduction of `v` over the block.
template <typename T, typename Op> __device__ __forceinline__ T zyn_block_allreduce(T v, Op op, T identity) {
    __shared__ T zyn_red[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = zyn_warp_allreduce(v, op);
    __syncthreads();
    if (lane == 0) zyn_red[wid] = v;
    __syncthreads();
    T r = lane < nw ? zyn_red[lane] : identity;
    return zyn_warp_allreduce(r, op);
}
__device__ __forceinline__ void zyn_atomic_max(float* p, float v) {
    int* ip = (int*)p; int old = *ip, assumed;
    do { assumed = old; if (__int_as_float(assumed) >= v) break;
         old = atomicCAS(ip, assumed, __float_as_int(v)); } while (assumed != old);
}
__device__ __forceinline__ void zyn_atomic_min(float* p, float v) {
    int* ip = (int*)p; int old = *ip, assumed;
    do { assumed = old; if (__int_as_float(assumed) <= v) break;
         old = atomicCAS(ip, assumed, __float_as_int(v)); } while (assumed != old);
}
""")

@dataclass
class Step:
    func: str
    grid: tuple
    block: tuple
    args: tuple             # "buffers" (inputs then out), "scratch:<name>", "scalars"
    smem: int = 0           # dynamic shared memory bytes


@dataclass
class CudaProgram:
    name: str
    source: str
    steps: list
    scratch: dict = field(default_factory=dict)      # name -> (dtype, count)
    schedule: str = ""
    notes: list = field(default_factory=list)
    line_map: dict = field(default_factory=dict)     # generated line (1-based) -> ZynML line
    unaligned_steps: list | None = None              # used when a pointer is not 16-byte aligned
    aligned_buffers: tuple = ()                      # buffers whose alignment the vector path needs
    # compiler/errflag.py: what the kernels may report. Every kernel takes the flag pointer
    # `int* zyn_err` as its last parameter (after the step's arguments)
    error_sites: tuple = ()


class CUDARenderer(CStyleRenderer, GenericSchedules):
    lang = "cuda"
    kernel_prefix = 'extern "C" __global__ void'
    shared_qualifier = "__shared__"
    restrict = "__restrict__"
    barrier_stmt = "__syncthreads();"
    storage_types = dict(CStyleRenderer.storage_types, f16="__half", bf16="__nv_bfloat16")

    def __init__(self):
        self.nt = 256

    def global_thread_index(self, nt):
        return f"({self.idx})blockIdx.x * {nt} + threadIdx.x"

    def grid_stride(self, nt):
        return f"({self.idx})gridDim.x * {nt}"

    def arg_flat(self, row, extent):
        return f"(long long){row} * {extent} + _t" if row else "(long long)_t"

    def load_value(self, text, dtype):
        if dtype == "f16":
            return f"__half2float({text})"
        if dtype == "bf16":
            return f"__bfloat162float({text})"
        return text

    def store_value(self, text, dtype):
        if dtype == "f16":
            return f"__float2half_rn({text})"
        if dtype == "bf16":
            return f"__float2bfloat16_rn({text})"
        return text

    def float_literal(self, v, dtype):
        d = dtype == "f64"
        if v != v:
            return "ZYN_NAN_D" if d else "ZYN_NAN_F"
        if v == float("inf"):
            return "ZYN_INF_D" if d else "ZYN_INF_F"
        if v == float("-inf"):
            return "(-ZYN_INF_D)" if d else "(-ZYN_INF_F)"
        return super().float_literal(v, dtype)

    def block_allreduce(self, functor, value, ctype, ident):
        return f"zyn_block_allreduce<{ctype}>({value}, {functor}(), ({ctype})({ident}))"

    def simd_allreduce(self, op, value):
        return f"zyn_warp_allreduce({value}, {OP_FUNCTOR[op]}())"


    def atomic_stmt(self, em, s: cir.Atomic, scope):
        buf, off, v = self.atomic_operands(em, s, scope)
        addr = f"&{buf.c}[{off}]"
        if s.op == "+":
            em(f"atomicAdd({addr}, {v});", s.line)
        elif buf.dtype == "f32":
            em(f"zyn_atomic_{s.op}({addr}, {v});", s.line)
        elif buf.dtype in ("i32", "u32", "i64", "u64"):
            em(f"atomic{s.op.capitalize()}({addr}, {v});", s.line)
        else:
            raise Unsupported(f"atomic {s.op}= on {buf.dtype}", s.line)

    # ---- assembly -------------------------------------------------------------------

    def headers(self) -> list[str]:
        out = []
        if self.uses_half or "__half" in self._body_text:
            out.append("#include <cuda_fp16.h>")
        if self.uses_bf16 or "__nv_bfloat16" in self._body_text:
            out.append("#include <cuda_bf16.h>")
        if "wmma::" in self._body_text:
            out += ["#include <mma.h>", "using namespace nvcuda;"]
        return out

    def assemble(self, kernels: list[str], banner: str) -> tuple[str, dict]:
        """Join kernel texts under the prelude; returns (source, generated line -> ZynML line)."""
        self._body_text = "\n".join(kernels)
        head = [f"// ZynBook CUDA C for kernel `{self.kernel.name}` ({banner})",
                "// sizes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.sizes.items()))]
        head += self.headers()
        extra = GEMM_PRELUDE if "zyn_cp_async" in self._body_text else ""
        text = "\n".join(head) + PRELUDE + extra + "\n" + "\n\n".join(kernels) + "\n"
        line_map = {}
        for n, ln in enumerate(text.splitlines(), 1):
            if "// line " in ln:
                try:
                    line_map[n] = int(ln.split("// line ", 1)[1].split(":", 1)[0])
                except ValueError:
                    pass
        # lines below a "// line N" comment belong to that ZynML line until the next one
        cur = 0
        for n in range(1, len(text.splitlines()) + 1):
            if n in line_map:
                cur = line_map[n]
            elif cur:
                line_map[n] = cur
        return text, line_map

    def signature(self, name: str, extra: list[str] = (), bounds: int | None = None) -> str:
        lb = f" __launch_bounds__({bounds})" if bounds else ""
        params = self.kernel_params(list(extra)) + [f"int* __restrict__ {self.err_ref}"]
        return f"{self.kernel_prefix}{lb} {name}(\n    " + ",\n    ".join(params) + ")"


# ======================================================================== schedules


def render_cuda(kernel: cir.Kernel, sizes: dict, arch: tuple = (9, 0), options: dict | None = None) -> CudaProgram:
    """Render `kernel` for one binding of its sizes. Raises ZynMLDeviceError if impossible."""
    options = dict(options or {})
    sizes = {k: int(v) for k, v in sizes.items()}
    missing = [d for d in kernel.dims if d not in sizes]
    if missing:
        raise Unsupported(f"sizes not bound: {', '.join(missing)}")
    sites = _SITES.collect()
    try:
        prog = _render(kernel, sizes, arch, options)
    except Unsupported as err:
        raise_unsupported(kernel, err, "CUDA")
    finally:
        _SITES.stop()
    prog.error_sites = prog.error_sites or tuple(sites.sites)
    return prog


def _render(kernel, sizes, arch, options) -> CudaProgram:
    kind = kernel.kernel_type.kind
    notes = []
    body = inline_tile_lets(kernel.body)
    if kind in ("attention", "flash_attention") and not options.get("generic"):
        prog = _launch_program(kernel, sizes, notes, arch, only="attention")
        if prog is not None:
            return prog
    if kind != "reduce" and not options.get("generic"):
        prog = _launch_program(kernel, sizes, notes, arch, only="gemm")
        if prog is not None:
            return prog
        if kind in ("matmul", "batched_matmul", "conv2d"):
            why = schedules.Gemm().why_not(kernel, cuda_target(arch), sizes)
            notes.append(f"the body of this `{kind}` kernel is not a plain contraction "
                         f"(out = init + sum of products) the GEMM schedule takes ({why}); "
                         "it runs on the generic schedule")
    if kind == "reduce":
        return _launch_program(kernel, sizes, notes, arch) or no_schedule(kernel, cuda_target(arch), sizes)
    if not options.get("generic") and not options.get("mode"):
        prog = _launch_program(kernel, sizes, notes, arch, only="rows")
        if prog is not None:
            return prog
    return render_generic(kernel, body, sizes, notes, options, arch)


# ---------------------------------------------------------------------- generic


def render_generic(kernel, body, sizes, notes, options=None, arch=(9, 0)) -> CudaProgram:
    r = CUDARenderer()
    r.setup(kernel, sizes)
    plan = r.plan_generic(kernel, body, sizes, options or {})
    if plan.mode == "thread" or not (options or {}).get("mode"):
        prog = _launch_program(kernel, sizes, notes, arch,
                               exclude=("attention",) if (options or {}).get("generic") else ())
        if prog is not None:
            return prog
    if plan.mode == "thread":
        return _thread_program(r, kernel, plan.nest, notes)
    banner = "block: one block runs the whole body" if plan.mode == "whole" else (
        f"block: one block of {plan.nt} threads per iteration of "
        f"({', '.join(l.var for l in plan.nest.loops)})")
    return _block_program(r, kernel, plan.nest, plan.nest.total, notes, banner)


def _launch_program(kernel, sizes, notes, arch, only=None, exclude=()) -> CudaProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the CUDA dialect; a program
    with vector accesses carries its fallback for buffers that are not 16-byte aligned."""
    prog = schedules.build(kernel, cuda_target(arch), sizes, only=only, exclude=exclude)
    if prog is None:
        return None
    both = prog if prog.fallback is None else ir.Program(
        prog.name, prog.kernels + prog.fallback.kernels, prog.launches, prog.scratch, prog.sites,
        prog.schedule)
    out = print_program(CudaDialect(), both, kernel, {user_name(d): sizes[d] for d in kernel.dims})

    def steps(p):
        return [Step(l.kernel, (int(ir.evaluate(l.grid, sizes)), 1, 1), (l.block, 1, 1),
                     _step_args(p.kernel(l.kernel))) for l in p.launches]
    scratch = {s.name: (s.dtype, int(ir.evaluate(s.count, sizes))) for s in prog.scratch}
    names = {user_name(b.name): b.name for b in list(kernel.inputs) + [kernel.output]}
    return CudaProgram(prog.kernels[0].name, out.source, steps(prog), scratch, schedule=prog.schedule,
                       notes=notes + prog.notes, line_map=out.line_map,
                       unaligned_steps=steps(prog.fallback) if prog.fallback else None,
                       aligned_buffers=tuple(names[a] for a in prog.aligned),
                       error_sites=prog.sites)


def _step_args(k) -> tuple:
    """A launch's arguments in its kernel's parameter order (sizes are compiled in)."""
    out = []
    for p in k.params:
        a = {"buffer": "buffers", "scalar": "scalars"}.get(p.kind, f"scratch:{p.name}")
        if p.kind != "size" and (a.startswith("scratch:") or a not in out):
            out.append(a)
    return tuple(out)


def _block_program(r: CUDARenderer, kernel, nest: Nest, blocks: int, notes, banner):
    em = r.block_mode_body(nest)
    name = cname(kernel.name)
    text = r.signature(name, bounds=r.nt) + " {\n"
    text += "\n".join("    " + d for d in r.shared_decls) + ("\n" if r.shared_decls else "")
    text += em.text() + "\n}"
    src, lm = r.assemble([text], banner)
    return CudaProgram(name, src, [Step(name, (max(blocks, 1), 1, 1), (r.nt, 1, 1), ("buffers", "scalars"))],
                       schedule=banner, notes=notes, line_map=lm)


def _thread_program(r: CUDARenderer, kernel, nest: Nest, notes):
    """Thread mode for what the generic thread schedule's lowering does not take yet."""
    nt = r.nt
    name = cname(kernel.name)
    em = r.thread_mode_body(nest, nt)
    text = r.signature(name, bounds=nt) + " {\n" + em.text() + "\n}"
    steps = [Step(name, (max(1, ceil_div(nest.total, nt)), 1, 1), (nt, 1, 1), ("buffers", "scalars"))]
    banner = f"thread: one thread per iteration of ({', '.join(l.var for l in nest.loops)})"
    src, lm = r.assemble([text], banner)
    return CudaProgram(name, src, steps, schedule=banner, notes=notes, line_map=lm)


ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
              "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1}


# ------------------------------------------------------------------ contractions


@dataclass
class Contraction:
    ploops: list            # parallel loops (outer first)
    pext: list
    rloops: list            # reduction loops (outer first)
    rext: list
    acc: str
    init: cir.Expr
    a: cir.Expr             # M side factor
    b: cir.Expr             # N side factor
    cond_a: cir.Expr | None
    cond_b: cir.Expr | None
    mvars: list
    nvars: list
    bvars: list
    store: cir.Store
    a_kcontig: bool
    b_kcontig: bool


def _match_contraction(kernel, body, sizes):
    """The recognised contraction (passes/recognise.py) of `body` (the kernel's body with
    tile lets inlined), laid out for the GEMM schedules: static trip counts, the guard
    given to the side it depends on, the side holding the output's innermost index as N."""
    import dataclasses
    from ..passes import recognise
    rc = recognise.contraction(dataclasses.replace(kernel, body=tuple(body)))
    if not rc:
        return None
    nest = find_nest(body, sizes)
    if nest.prologue or [lp.var for lp in nest.loops] != list(rc.out_vars):
        return None
    rloops, rext = list(rc.rloops), [trip_count(lp, sizes) for lp in rc.rloops]
    if None in rext:
        return None
    x, y, cond, store = rc.a_load, rc.b_load, rc.cond, rc.store
    let = cir.Let(rc.acc, rc.init, True)
    acc = rc.acc
    if (free_vars(x) | free_vars(y)) - {lp.var for lp in nest.loops} - set(rc.red_vars) - \
            set(sizes) - {s_.name for s_ in kernel.scalars}:
        return None
    bvars, xs, ys = list(rc.bvars), list(rc.mvars), list(rc.nvars)
    cond_x = cond_y = None
    if cond is not None:
        cv = free_vars(cond) & {lp.var for lp in nest.loops}
        if cv <= set(xs) | set(bvars):
            cond_x = cond
        elif cv <= set(ys) | set(bvars):
            cond_y = cond
        else:
            return None
    # the side holding the output's innermost index is N (stores and loads coalesce)
    last = store.index[-1]
    lastv = free_vars(last)
    if lastv & set(xs):
        xs, ys, x, y, cond_x, cond_y = ys, xs, y, x, cond_y, cond_x

    def kcontig(load, side_vars):
        lv = free_vars(load.index[-1]) if load.index else set()
        return not (lv & set(side_vars))

    M = 1
    for p, e in zip(nest.loops, nest.extents):
        if p.var in xs:
            M *= e
    N = 1
    for p, e in zip(nest.loops, nest.extents):
        if p.var in ys:
            N *= e
    if M < 16 or N < 16:
        return None
    return Contraction(nest.loops, nest.extents, rloops, rext, acc, let.value, x, y, cond_x, cond_y,
                       xs, ys, bvars, store, kcontig(x, xs), kcontig(y, ys))


def try_contraction(kernel, body, sizes, notes, options, arch=(9, 0)):
    c = _match_contraction(kernel, body, sizes)
    if c is None:
        return None
    return render_contraction(kernel, c, sizes, notes, options, arch)


GEMM_PRELUDE = r"""
// cp.async: 16 bytes global -> shared without a register round trip; zero-filled when !ok
__device__ __forceinline__ void zyn_cp_async16(void* smem, const void* gmem, bool ok) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void zyn_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void zyn_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
"""


class _Gemm:
    """What every GEMM schedule of one contraction shares: sizes, index binding, epilogue."""

    def __init__(self, kernel, c: Contraction, sizes, options=None):
        self.kernel, self.c, self.sizes = kernel, c, sizes
        self.options = dict(options or {})
        self.ext = dict(zip([l.var for l in c.ploops], c.pext))
        self.ploop = {l.var: l for l in c.ploops}
        prod = lambda vs: _prod(self.ext[v] for v in vs)
        self.M, self.N, self.Bt = prod(c.mvars), prod(c.nvars), prod(c.bvars)
        self.K = _prod(c.rext)

    def renderer(self):
        r = CUDARenderer()
        r.setup(self.kernel, self.sizes)
        return r

    def head(self, r, em):
        """Size constants, the batch variables (blockIdx.z); returns the base scope."""
        for s in r.size_constants():
            em(s)
        em(f"constexpr {r.idx} MM = {self.M}, NN = {self.N}, KK = {self.K};")
        base = r.root.child()
        if self.c.bvars:
            bn = Nest([self.ploop[v] for v in self.c.bvars], [self.ext[v] for v in self.c.bvars], [], ())
            em(f"const {r.idx} _bz = blockIdx.z;")
            r.decompose(em, "_bz", bn, base)
        return base

    def bind(self, r, flat, vars_, scope, out):
        """C expressions for `vars_` from a flat index over them (in loop order)."""
        sc = scope.child()
        order = [v for v in [l.var for l in self.c.ploops] if v in vars_]
        exprs, div = {}, 1
        for v in reversed(order):
            e, lp = self.ext[v], self.ploop[v]
            part = f"((({flat}) / {div}) % {e})" if div > 1 else f"(({flat}) % {e})"
            if v == order[0]:
                part = f"(({flat}) / {div})" if div > 1 else f"({flat})"
            pre: list = []
            a = r.index_expr(lp.start, scope, pre)
            st = r.index_expr(lp.step, scope, pre)
            exprs[v] = part if (a == "0" and st == "1") else f"({a} + {part} * {st})"
            div *= e
        for v, val in exprs.items():
            tmp = r.new_tmp(cname(v))
            out.append(f"const {r.idx} {tmp} = {val};")
            sc.vars[v] = (tmp, "i32", ())
        return sc

    def bind_r(self, r, flat, scope, out):
        c = self.c
        sc, div = scope.child(), 1
        for k in range(len(c.rloops) - 1, -1, -1):
            lp, e = c.rloops[k], c.rext[k]
            part = f"((({flat}) / {div}) % {e})" if div > 1 else f"(({flat}) % {e})"
            if k == 0:
                part = f"(({flat}) / {div})" if div > 1 else f"({flat})"
            pre: list = []
            a = r.index_expr(lp.start, scope, pre)
            st = r.index_expr(lp.step, scope, pre)
            tmp = r.new_tmp(cname(lp.var))
            out.append(f"const {r.idx} {tmp} = {part if (a == '0' and st == '1') else f'({a} + {part} * {st})'};")
            sc.vars[lp.var] = (tmp, "i32", ())
            div *= e
        return sc

    def side(self, which):
        c = self.c
        if which == "A":
            return c.a, c.cond_a, c.mvars, c.a_kcontig, self.M
        return c.b, c.cond_b, c.nvars, c.b_kcontig, self.N

    def vector_ok(self, r, which, width):
        """True when `width` consecutive elements of this side's contiguous index are
        `width` consecutive, aligned addresses that are all in or all out of bounds."""
        c = self.c
        load, cond, svars, kcontig, X = self.side(which)
        if cond is not None or load.buffer not in r.buffers:
            return False
        buf = r.buffers[load.buffer]
        if ELEM_BYTES[buf.dtype] * width > 16 or buf.dtype not in ("f32", "f16", "bf16"):
            return False
        last = load.index[-1]
        if kcontig:
            if len(c.rloops) != 1:
                return False
            lp, n = c.rloops[0], c.rext[0]
        else:
            if len(svars) != 1:
                return False
            lp, n = self.ploop[svars[0]], self.ext[svars[0]]
        if not (isinstance(last, cir.Var) and last.name == lp.var):
            return False
        if any(lp.var in free_vars(i) for i in load.index[:-1]):
            return False
        if not (isinstance(lp.start, cir.Const) and lp.start.value == 0
                and isinstance(lp.step, cir.Const) and lp.step.value == 1):
            return False
        return n % width == 0 and buf.shape[-1] % width == 0

    def address(self, r, which, gx, gk, scope, out):
        """C address of this side's element (x = gx, k = gk); binding lines go to `out`."""
        load, _, svars, _, _ = self.side(which)
        sc = self.bind(r, gx, svars, scope, out)
        sc = self.bind_r(r, gk, sc, out)
        pre: list = []
        buf = r.buffers[load.buffer]
        idx = [r.index_expr(i, sc, pre) for i in load.index]
        out.extend(pre)
        return buf, f"&{buf.c}[{r.offset(buf, idx)}]"

    def value(self, r, which, gx, gk, scope, out):
        """(C value, condition or None) of this side's element for the scalar gather."""
        load, cond, svars, _, _ = self.side(which)
        sc = self.bind(r, gx, svars, scope, out)
        sc = self.bind_r(r, gk, sc, out)
        pre: list = []
        if cond is not None:
            with r.facts.assuming(cond):        # the gather reads only where cond holds
                val = r.expr(load, sc, pre)
        else:
            val = r.expr(load, sc, pre)
        cnd = r.expr(cond, sc, pre) if cond is not None else None
        out.extend(pre)
        return val, cnd

    def epilogue(self, r, em, gm, gn, accv, scope):
        """out[P] = value(init + acc) at output row gm, column gn (bounds checked by the caller)."""
        c = self.c
        lines: list = []
        sc = self.bind(r, gm, c.mvars, scope, lines)
        sc = self.bind(r, gn, c.nvars, sc, lines)
        for ln in lines:
            em(ln)
        pre: list = []
        acc_dt = c.init.ty.dtype if c.init.ty.dtype in cir.FLOAT_DTYPES else "f32"
        init = r.expr(c.init, sc, pre)
        for ln in pre:
            em(ln)
        em(f"const {r.compute_type(acc_dt)} {cname(c.acc)} = ({init}) + {accv};")
        sc.vars[c.acc] = (cname(c.acc), acc_dt, ())
        r.store_stmt(em, c.store, sc)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _load4(buf, addr):
    """Four consecutive elements at `addr` as a float4 (f16/bf16 converted)."""
    if buf.dtype == "f32":
        return f"*reinterpret_cast<const float4*>({addr})"
    cvt = "__half22float2" if buf.dtype == "f16" else "__bfloat1622float2"
    h2 = "__half2" if buf.dtype == "f16" else "__nv_bfloat162"
    return (f"[&] {{ const uint2 _raw = *reinterpret_cast<const uint2*>({addr}); "
            f"const float2 _lo = {cvt}(*reinterpret_cast<const {h2}*>(&_raw.x)); "
            f"const float2 _hi = {cvt}(*reinterpret_cast<const {h2}*>(&_raw.y)); "
            f"return make_float4(_lo.x, _lo.y, _hi.x, _hi.y); }}()")


def render_contraction(kernel, c: Contraction, sizes, notes, options, arch=(9, 0)) -> CudaProgram:
    g = _Gemm(kernel, c, sizes, options)
    r = g.renderer()
    name = cname(kernel.name)
    da, db = r.buffers[c.a.buffer].dtype if c.a.buffer in r.buffers else "", \
        r.buffers[c.b.buffer].dtype if c.b.buffer in r.buffers else ""
    if (da, db) in (("f16", "f16"), ("bf16", "bf16")) and tuple(arch) >= (8, 0) \
            and not options.get("no_tensor_cores") and g.vector_ok(r, "A", 8) and g.vector_ok(r, "B", 8):
        return render_mma_gemm(g, name, notes)
    vec = (g.vector_ok(r, "A", 4), g.vector_ok(r, "B", 4))
    text, banner, grid, nt, vec = _sgemm_kernel(g, r, name, vec)
    texts = [text]
    unaligned, aligned = None, ()
    if any(vec):
        r1 = g.renderer()
        t1, _, grid1, _, _ = _sgemm_kernel(g, r1, name + "_scalar", (False, False))
        texts.append(t1)
        unaligned = [Step(name + "_scalar", grid1, (nt, 1, 1), ("buffers", "scalars"))]
        aligned = tuple(sorted({(c.a, c.b)[k].buffer for k in (0, 1) if vec[k]}))
    src, lm = r.assemble(texts, banner)
    return CudaProgram(name, src, [Step(name, grid, (nt, 1, 1), ("buffers", "scalars"))],
                       schedule=banner, notes=notes, line_map=lm, unaligned_steps=unaligned,
                       aligned_buffers=aligned)


def _sgemm_kernel(g: _Gemm, r: CUDARenderer, name, vec):
    """FMA GEMM: BMxBN block tiles over BK-deep slices of K, staged through registers into
    double-buffered shared memory (the next slice's global loads are in flight while the
    current one is multiplied), TMxTN outputs per thread. A side whose contiguous index
    allows it moves 4 elements per load (`vec`); the scalar gather handles any index
    (implicit im2col for convolutions) with bounds checks on every element."""
    c = g.c
    M, N, K, Bt = g.M, g.N, g.K, g.Bt
    BM = 128 if M > 64 else 64
    BN = 128 if N > 64 else 64
    TM = 8 if BM == 128 else 4
    TN = 8 if BN == 128 else 4
    # 8-deep slices keep the 128x128 kernel inside 128 registers (measured faster than 16);
    # a 64-wide side needs 16-deep slices to give every thread a whole float4 to load
    BK = 8 if (BM == 128 and BN == 128) or not any(vec) or K < 64 else 16
    BK = int(g.options.get("gemm_bk", BK))
    NT = (BM // TM) * (BN // TN)
    r.nt = NT
    per = {"A": BM * BK // NT, "B": BN * BK // NT}
    vec = (vec[0] and per["A"] % 4 == 0, vec[1] and per["B"] % 4 == 0)
    em = Emitter(1)
    base = g.head(r, em)
    em(f"constexpr int BM = {BM}, BN = {BN}, BK = {BK}, TM = {TM}, TN = {TN};")
    # As is k-major (As[k][m]) so that a thread's TM rows are one float4 read
    em("__shared__ __align__(16) float As[2][BK][BM];")
    em("__shared__ __align__(16) float Bs[2][BK][BN];")
    em("const int tid = threadIdx.x;")
    em("const int tx = tid % (BN / TN), ty = tid / (BN / TN);")
    em(f"const {r.idx} m0 = ({r.idx})blockIdx.y * BM, n0 = ({r.idx})blockIdx.x * BN;")
    sides = {"A": ("As", "m0", "MM", BM, vec[0]), "B": ("Bs", "n0", "NN", BN, vec[1])}

    def emit_load(which):
        arr, x0, lim, BX, v = sides[which]
        _, _, _, kcontig, _ = g.side(which)
        n = per[which] // 4 if v else per[which]
        regs = f"r{which.lower()}"
        em.open(f"for (int _r = 0; _r < {n}; ++_r)")
        em(f"const int _e = tid + _r * {NT};")
        if v and kcontig:       # 4 consecutive k of one row x; a warp covers 32 rows
            em(f"const int _x = _e % {BX}, _k = (_e / {BX}) * 4;")
        elif v:                 # 4 consecutive x of one k
            em(f"const int _k = _e / {BX // 4}, _x = (_e % {BX // 4}) * 4;")
        elif kcontig:
            em(f"const int _x = _e / BK, _k = _e % BK;")
        else:
            em(f"const int _k = _e / {BX}, _x = _e % {BX};")
        em(f"const {r.idx} _gx = {x0} + _x, _gk = _k0 + _k;")
        if v:
            em(f"float4 _v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);")
            em.open(f"if (_gx < {lim} && _gk < KK)")
            lines: list = []
            buf, addr = g.address(r, which, "_gx", "_gk", base, lines)
            for ln in lines:
                em(ln)
            em(f"_v = {_load4(buf, addr)};")
        else:
            em("float _v = 0.0f;")
            em.open(f"if (_gx < {lim} && _gk < KK)")
            lines = []
            val, cnd = g.value(r, which, "_gx", "_gk", base, lines)
            for ln in lines:
                em(ln)
            em(f"if ({cnd}) _v = (float)({val});" if cnd is not None else f"_v = (float)({val});")
        em.close()
        em(f"{regs}[_r] = _v;")
        em.close()

    def emit_store(which):
        arr, _, _, BX, v = sides[which]
        _, _, _, kcontig, _ = g.side(which)
        n = per[which] // 4 if v else per[which]
        regs = f"r{which.lower()}"
        em.open(f"for (int _r = 0; _r < {n}; ++_r)")
        em(f"const int _e = tid + _r * {NT};")
        if v and kcontig:       # transpose into k-major rows: 32 different x per warp, no conflicts
            em(f"const int _x = _e % {BX}, _k = (_e / {BX}) * 4;")
            em(f"{arr}[_buf][_k][_x] = {regs}[_r].x; {arr}[_buf][_k + 1][_x] = {regs}[_r].y;")
            em(f"{arr}[_buf][_k + 2][_x] = {regs}[_r].z; {arr}[_buf][_k + 3][_x] = {regs}[_r].w;")
        elif v:
            em(f"const int _k = _e / {BX // 4}, _x = (_e % {BX // 4}) * 4;")
            em(f"*reinterpret_cast<float4*>(&{arr}[_buf][_k][_x]) = {regs}[_r];")
        else:
            if kcontig:
                em(f"const int _x = _e / BK, _k = _e % BK;")
            else:
                em(f"const int _k = _e / {BX}, _x = _e % {BX};")
            em(f"{arr}[_buf][_k][_x] = {regs}[_r];")
        em.close()

    ta = "float4" if vec[0] else "float"
    tb = "float4" if vec[1] else "float"
    em(f"{ta} ra[{per['A'] // 4 if vec[0] else per['A']}];")
    em(f"{tb} rb[{per['B'] // 4 if vec[1] else per['B']}];")
    em("float acc[TM][TN];")
    em("#pragma unroll")
    em("for (int i = 0; i < TM; ++i) for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;")
    em(f"{r.idx} _k0 = 0;")
    em("int _buf = 0;")
    if c.store.line:
        em(f"// line {c.store.line}: " + r.source_line(c.store.line).strip())
    emit_load("A")
    emit_load("B")
    emit_store("A")
    emit_store("B")
    em("__syncthreads();")
    em.open("for (_k0 = BK; ; _k0 += BK)")
    em("const bool _more = _k0 < KK;")
    em.open("if (_more)")
    emit_load("A")
    emit_load("B")
    em.close()
    em("#pragma unroll")
    em.open("for (int kk = 0; kk < BK; ++kk)")
    em("float a[TM], b[TN];")
    em("*reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(&As[_buf][kk][ty * 4]);")
    if TM == 8:
        em("*reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(&As[_buf][kk][BM / 2 + ty * 4]);")
    em("*reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(&Bs[_buf][kk][tx * 4]);")
    if TN == 8:
        em("*reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(&Bs[_buf][kk][BN / 2 + tx * 4]);")
    em("#pragma unroll")
    em("for (int i = 0; i < TM; ++i)")
    em("#pragma unroll")
    em("    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);")
    em.close()
    em("if (!_more) break;")
    em("_buf ^= 1;")
    emit_store("A")
    emit_store("B")
    em("__syncthreads();")
    em.close()
    em("#pragma unroll")
    em.open("for (int i = 0; i < TM; ++i)")
    if TM == 8:
        em(f"const {r.idx} _gm = m0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);")
    else:
        em(f"const {r.idx} _gm = m0 + ty * 4 + i;")
    em("if (_gm >= MM) continue;")
    em("#pragma unroll")
    em.open("for (int j = 0; j < TN; ++j)")
    if TN == 8:
        em(f"const {r.idx} _gn = n0 + (j < 4 ? tx * 4 + j : BN / 2 + tx * 4 + j - 4);")
    else:
        em(f"const {r.idx} _gn = n0 + tx * 4 + j;")
    em("if (_gn >= NN) continue;")
    g.epilogue(r, em, "_gm", "_gn", "acc[i][j]", base)
    em.close()
    em.close()
    # vector loads: two blocks per multiprocessor (128 registers per thread, 64 accumulators)
    text = r.signature(name, bounds=NT) + " {\n" + em.text() + "\n}"
    if any(vec):
        text = text.replace(f"__launch_bounds__({NT})", f"__launch_bounds__({NT}, 2)", 1)
    grid = (ceil_div(N, BN), ceil_div(M, BM), Bt)
    kind = "implicit GEMM (gathered operand)" if (len(c.rloops) > 1 or c.cond_a or c.cond_b) else "GEMM"
    loads = " and ".join(f"{s} in 16-byte loads" for s, v in zip("AB", vec) if v)
    banner = (f"contraction as {kind}: M={M} N={N} K={K}" + (f" batch={Bt}" if Bt > 1 else "")
              + f"; {BM}x{BN}x{BK} tiles in double-buffered shared memory, {TM}x{TN} per thread"
              + (f"; {loads}" if loads else ""))
    return text, banner, grid, NT, vec


def render_mma_gemm(g: _Gemm, name, notes) -> CudaProgram:
    """f16/bf16 GEMM on the tensor cores (WMMA 16x16x16 fragments, f32 accumulation).

    Block tile BMxBN over BK=32 slices of K, 8 warps as 2 (M) x 4 (N), each warp a
    (BM/2)x(BN/4) piece of fragments. Tiles keep the operands' own layout in shared memory
    (row- or column-major fragments follow it), so cp.async copies 16-byte chunks straight
    from global memory, zero-filled out of bounds; two stages: the next slice is copied
    while the tensor cores work on the current one. Rows are padded by 8 elements against
    bank conflicts. The epilogue goes through a per-warp 16x16 staging tile in shared memory
    (fragment element order is opaque), then init + acc and the kernel's own store."""
    c = g.c
    r = g.renderer()
    M, N, K, Bt = g.M, g.N, g.K, g.Bt
    BM = 128 if M > 64 else 64
    BN = 128 if N > 64 else 64
    BK, PAD, NT = 32, 8, 256
    WM, WN = BM // 2, BN // 4
    FM, FN = WM // 16, WN // 16
    r.nt = NT
    ta = r.storage_types[r.buffers[c.a.buffer].dtype]
    tb = r.storage_types[r.buffers[c.b.buffer].dtype]
    em = Emitter(1)
    base = g.head(r, em)
    em(f"constexpr int BM = {BM}, BN = {BN}, BK = {BK}, PAD = {PAD}, WM = {WM}, WN = {WN}, "
       f"FM = {FM}, FN = {FN};")
    # A: m-major rows when k is contiguous in memory (row-major fragment), else k-major rows
    a_shape = "[BM][BK + PAD]" if c.a_kcontig else "[BK][BM + PAD]"
    b_shape = "[BN][BK + PAD]" if c.b_kcontig else "[BK][BN + PAD]"
    em(f"__shared__ __align__(128) {ta} As[2]{a_shape};")
    em(f"__shared__ __align__(128) {tb} Bs[2]{b_shape};")
    em("const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;")
    em("const int wm = warp >> 2, wn = warp & 3;")
    em(f"const {r.idx} m0 = ({r.idx})blockIdx.y * BM, n0 = ({r.idx})blockIdx.x * BN;")
    em(f"wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];")
    em("#pragma unroll")
    em("for (int i = 0; i < FM; ++i)")
    em("#pragma unroll")
    em("    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);")

    def emit_copy(which):
        arr, x0, lim, BX = ("As", "m0", "MM", BM) if which == "A" else ("Bs", "n0", "NN", BN)
        kcontig = c.a_kcontig if which == "A" else c.b_kcontig
        chunks = BX * BK // 8
        em("#pragma unroll")
        em.open(f"for (int _r = 0; _r < {ceil_div(chunks, NT)}; ++_r)")
        em(f"const int _e = tid + _r * {NT};")
        if chunks % NT:
            em(f"if (_e >= {chunks}) break;")
        if kcontig:
            em(f"const int _x = _e / {BK // 8}, _k = (_e % {BK // 8}) * 8;")
            dst = f"&{arr}[_s][_x][_k]"
        else:
            em(f"const int _k = _e / {BX // 8}, _x = (_e % {BX // 8}) * 8;")
            dst = f"&{arr}[_s][_k][_x]"
        em(f"const {r.idx} _gx = {x0} + _x, _gk = _k0 + _k;")
        em(f"const bool _ok = _gx < {lim} && _gk < KK;")
        lines: list = []
        gx = f"(_ok ? _gx : 0)"
        gk = f"(_ok ? _gk : 0)"
        buf, addr = g.address(r, which, gx, gk, base, lines)
        for ln in lines:
            em(ln)
        em(f"zyn_cp_async16({dst}, {addr}, _ok);")
        em.close()

    em(f"// line {c.store.line}: " + r.source_line(c.store.line).strip() if c.store.line else "")
    em.open("auto load_slice = [&](int _s, int _k0)")
    emit_copy("A")
    emit_copy("B")
    em.close(";")
    em(f"constexpr int NK = (KK + BK - 1) / BK;")
    em("load_slice(0, 0);")
    em("zyn_cp_async_commit();")
    em.open("for (int kt = 0; kt < NK; ++kt)")
    em("if (kt + 1 < NK) load_slice((kt + 1) & 1, (kt + 1) * BK);")
    em("zyn_cp_async_commit();")
    em("zyn_cp_async_wait<1>();     // slice kt has landed (only the newest copy may be pending)")
    em("__syncthreads();")
    em("const int s = kt & 1;")
    em("#pragma unroll")
    em.open("for (int kk = 0; kk < BK; kk += 16)")
    la = "row_major" if c.a_kcontig else "col_major"
    lb = "col_major" if c.b_kcontig else "row_major"
    em(f"wmma::fragment<wmma::matrix_a, 16, 16, 16, {ta}, wmma::{la}> fa[FM];")
    em(f"wmma::fragment<wmma::matrix_b, 16, 16, 16, {tb}, wmma::{lb}> fb[FN];")
    em("#pragma unroll")
    if c.a_kcontig:
        em("for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], &As[s][wm * WM + i * 16][kk], BK + PAD);")
    else:
        em("for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], &As[s][kk][wm * WM + i * 16], BM + PAD);")
    em("#pragma unroll")
    if c.b_kcontig:
        em("for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], &Bs[s][wn * WN + j * 16][kk], BK + PAD);")
    else:
        em("for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], &Bs[s][kk][wn * WN + j * 16], BN + PAD);")
    em("#pragma unroll")
    em("for (int i = 0; i < FM; ++i)")
    em("#pragma unroll")
    em("    for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);")
    em.close()
    em("__syncthreads();            // everyone is done with stage s before it is refilled")
    em.close()
    # epilogue: the A tiles' memory (no longer needed) holds one 16x16 f32 tile per warp
    em("float* Cs = reinterpret_cast<float*>(&As[0][0][0]) + warp * 256;")
    em("#pragma unroll")
    em.open("for (int i = 0; i < FM; ++i)")
    em("#pragma unroll")
    em.open("for (int j = 0; j < FN; ++j)")
    em("wmma::store_matrix_sync(Cs, acc[i][j], 16, wmma::mem_row_major);")
    em("__syncwarp();")
    em.open("for (int _e = lane; _e < 256; _e += 32)")
    em(f"const {r.idx} _gm = m0 + wm * WM + i * 16 + (_e >> 4);")
    em(f"const {r.idx} _gn = n0 + wn * WN + j * 16 + (_e & 15);")
    em("if (_gm >= MM || _gn >= NN) continue;")
    g.epilogue(r, em, "_gm", "_gn", "Cs[_e]", base)
    em.close()
    em("__syncwarp();")
    em.close()
    em.close()
    text = r.signature(name, bounds=NT) + " {\n" + em.text() + "\n}"
    grid = (ceil_div(N, BN), ceil_div(M, BM), Bt)
    banner = (f"contraction as GEMM on tensor cores (WMMA {ta}, f32 accumulate): M={M} N={N} K={K}"
              + (f" batch={Bt}" if Bt > 1 else "")
              + f"; {BM}x{BN}x{BK} tiles, 8 warps of {WM}x{WN}, cp.async into 2 shared-memory stages")
    # the FMA schedule serves buffers that are not 16-byte aligned
    r1 = g.renderer()
    t1, _, grid1, nt1, _ = _sgemm_kernel(g, r1, name + "_scalar", (False, False))
    src2, lm = r.assemble([text, t1], banner)
    return CudaProgram(name, src2, [Step(name, grid, (NT, 1, 1), ("buffers", "scalars"))],
                       schedule=banner, notes=notes, line_map=lm,
                       unaligned_steps=[Step(name + "_scalar", grid1, (nt1, 1, 1), ("buffers", "scalars"))],
                       aligned_buffers=tuple(sorted({c.a.buffer, c.b.buffer})))


# -------------------------------------------------------------------- attention

def try_attention(kernel, sizes, notes):
    """The attention schedules for a recognised attention (recognise.py: any form, key
    condition, scale and block size), else None with a note."""
    p = attention_pattern(kernel, notes)
    if p is None:
        return None
    try:
        D = cir.eval_dim(kernel.output.shape[3], sizes)
        if D % 16 == 0 and 16 <= D <= 64:
            return render_flash_tiled(kernel, sizes, p)
        return render_flash(kernel, sizes, p)
    except Unsupported as err:
        notes.append(f"the attention schedules do not fit ({err}); the generic schedule runs it")
        return None


def render_flash_tiled(kernel, sizes, p) -> CudaProgram:
    """Attention as two register-tiled products per K/V tile, FMA in f32.

    One block of 256 threads (16 x 16) per 64 queries of one head. Per 64-key tile:
    S = Q K^T, each thread a 4x4 piece (queries ty*4.., keys tx*4..) from d-major Q and K
    tiles in shared memory (one float4 of each per 16 FMAs); the online softmax runs on
    those registers, a row's maximum and sum reduced over the 16 threads that share it
    (shuffles inside a half warp); P goes to shared memory (over the K tile, which is done
    by then; chunks XOR-swizzled so that the transposed float4 stores hit distinct banks) and
    O += P V gives each thread a 4 x D/16 piece of the output. The next tile's K and V are
    loaded into registers while this one is computed."""
    r = CUDARenderer()
    r.setup(kernel, sizes)
    q, k_, v_, out, (B, H, S, D), SK = r.attention_operands(p)
    masked = p.mask is not None
    BQ, BKV, NT, TD = 64, 64, 256, D // 16
    r.nt = NT
    name = cname(kernel.name)
    em = Emitter(1)
    em(f"constexpr int B = {B}, H = {H}, S = {S}, SK = {SK}, D = {D}, BQ = {BQ}, BKV = {BKV}, "
       f"TD = {TD}, D4 = D / 4;")
    em("__shared__ __align__(16) float Qs[D * BQ];            // Qs[d][q], times the score's scale")
    em("__shared__ __align__(16) float KPs[D * BKV > BKV * BQ ? D * BKV : BKV * BQ];  // Ks[d][j], then P[j][q]")
    em("__shared__ __align__(16) float Vs[BKV * D];           // Vs[j][d]")
    em("const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;")
    em("const int q0 = blockIdx.x * BQ, h = blockIdx.y, b = blockIdx.z;")
    r.attention_bases(em, "long long")
    em(f"const float scale = {r.attention_scale(p)};")

    def load4(buf, addr):
        if buf.dtype == "f32":
            return f"*reinterpret_cast<const float4*>(&{buf.c}[{addr}])"
        lv = lambda k: r.load_value(f"{buf.c}[{addr} + {k}]", buf.dtype)
        return f"make_float4({lv(0)}, {lv(1)}, {lv(2)}, {lv(3)})"

    # Q tile, transposed to d-major (consecutive threads: consecutive queries, distinct banks)
    em("#pragma unroll")
    em.open("for (int _r = 0; _r < TD; ++_r)")
    em("const int e = tid + _r * 256, qi = e % BQ, d4 = e / BQ;")
    em("float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);")
    em(f"if (q0 + qi < S) v = {load4(q, 'qbase + (long long)(q0 + qi) * QSS + d4 * 4')};")
    em("Qs[(d4 * 4 + 0) * BQ + qi] = v.x * scale; Qs[(d4 * 4 + 1) * BQ + qi] = v.y * scale;")
    em("Qs[(d4 * 4 + 2) * BQ + qi] = v.z * scale; Qs[(d4 * 4 + 3) * BQ + qi] = v.w * scale;")
    em.close()
    em("float4 kr[TD], vr[TD];")
    em.open("auto load_kv = [&](int kv0)")
    em("#pragma unroll")
    em.open("for (int _r = 0; _r < TD; ++_r)")
    em("const int e = tid + _r * 256;")
    em("const int kj = e % BKV, kd4 = e / BKV;      // K: consecutive threads, consecutive keys")
    em("const int vj = e / D4, vd4 = e % D4;        // V: consecutive threads, consecutive d")
    em("kr[_r] = make_float4(0.0f, 0.0f, 0.0f, 0.0f); vr[_r] = kr[_r];")
    em(f"if (kv0 + kj < SK) kr[_r] = {load4(k_, 'kbase + (long long)(kv0 + kj) * KSS + kd4 * 4')};")
    em(f"if (kv0 + vj < SK) vr[_r] = {load4(v_, 'vbase + (long long)(kv0 + vj) * VSS + vd4 * 4')};")
    em.close()
    em.close(";")
    em("float o[4][TD], m[4], l[4];")
    em("#pragma unroll")
    em("for (int i = 0; i < 4; ++i) { m[i] = -ZYN_INF_F; l[i] = 0.0f; for (int dd = 0; dd < TD; ++dd) o[i][dd] = 0.0f; }")
    em("load_kv(0);")
    em.open("for (int kv0 = 0; kv0 < SK; kv0 += BKV)")
    em("__syncthreads();                  // the previous tile's P and V are no longer read")
    em("#pragma unroll")
    em.open("for (int _r = 0; _r < TD; ++_r)")
    em("const int e = tid + _r * 256;")
    em("const int kj = e % BKV, kd4 = e / BKV, vj = e / D4, vd4 = e % D4;")
    em("KPs[(kd4 * 4 + 0) * BKV + kj] = kr[_r].x; KPs[(kd4 * 4 + 1) * BKV + kj] = kr[_r].y;")
    em("KPs[(kd4 * 4 + 2) * BKV + kj] = kr[_r].z; KPs[(kd4 * 4 + 3) * BKV + kj] = kr[_r].w;")
    em("*reinterpret_cast<float4*>(&Vs[vj * D + vd4 * 4]) = vr[_r];")
    em.close()
    em("__syncthreads();")
    em("if (kv0 + BKV < SK) load_kv(kv0 + BKV);   // next tile in flight during this one")
    em("float s[4][4];")
    em("#pragma unroll")
    em("for (int i = 0; i < 4; ++i) for (int jj = 0; jj < 4; ++jj) s[i][jj] = 0.0f;")
    em("#pragma unroll 8")
    em.open("for (int d = 0; d < D; ++d)")
    em("const float4 a4 = *reinterpret_cast<const float4*>(&Qs[d * BQ + ty * 4]);")
    em("const float4 b4 = *reinterpret_cast<const float4*>(&KPs[d * BKV + tx * 4]);")
    em("const float a[4] = {a4.x, a4.y, a4.z, a4.w}, bb[4] = {b4.x, b4.y, b4.z, b4.w};")
    em("#pragma unroll")
    em("for (int i = 0; i < 4; ++i)")
    em("#pragma unroll")
    em("    for (int jj = 0; jj < 4; ++jj) s[i][jj] = fmaf(a[i], bb[jj], s[i][jj]);")
    em.close()
    em("#pragma unroll")
    em.open("for (int i = 0; i < 4; ++i)")
    em("const int qi = q0 + ty * 4 + i;")
    em("float mx = -ZYN_INF_F;")
    em("#pragma unroll")
    em.open("for (int jj = 0; jj < 4; ++jj)")
    em("const int kj = kv0 + tx * 4 + jj;")
    cond = "kj < SK"
    if masked:
        cond += " && qi < S && " + r.attention_mask(p, {p.batch_var: "b", p.head_var: "h",
                                                         p.query_var: "qi", p.key_var: "kj"})
    em(f"if (!({cond})) s[i][jj] = -ZYN_INF_F;")
    em("mx = fmaxf(mx, s[i][jj]);")
    em.close()
    em("#pragma unroll")
    em("for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));")
    em("const float mn = fmaxf(m[i], mx);")
    em("const float alpha = mn == -ZYN_INF_F ? 1.0f : expf(m[i] - mn);")
    em("float rs = 0.0f;")
    em("#pragma unroll")
    em("for (int jj = 0; jj < 4; ++jj) { s[i][jj] = s[i][jj] == -ZYN_INF_F ? 0.0f : expf(s[i][jj] - mn); rs += s[i][jj]; }")
    em("#pragma unroll")
    em("for (int off = 8; off > 0; off >>= 1) rs += __shfl_xor_sync(0xffffffffu, rs, off);")
    em("l[i] = l[i] * alpha + rs;")
    em("m[i] = mn;")
    em("#pragma unroll")
    em("for (int dd = 0; dd < TD; ++dd) o[i][dd] *= alpha;")
    em.close()
    em("__syncthreads();                  // everyone is done with the K tile; P goes over it")
    em("#pragma unroll")
    em.open("for (int jj = 0; jj < 4; ++jj)")
    em("const int j = tx * 4 + jj;")
    em("*reinterpret_cast<float4*>(&KPs[j * BQ + ((ty ^ ((j >> 2) & 15)) * 4)]) = "
       "make_float4(s[0][jj], s[1][jj], s[2][jj], s[3][jj]);")
    em.close()
    em("__syncthreads();")
    em("#pragma unroll 4")
    em.open("for (int j = 0; j < BKV; ++j)")
    em("const float4 p4 = *reinterpret_cast<const float4*>(&KPs[j * BQ + ((ty ^ ((j >> 2) & 15)) * 4)]);")
    em("const float p[4] = {p4.x, p4.y, p4.z, p4.w};")
    em("float vv[TD];")
    if TD == 4:
        em("*reinterpret_cast<float4*>(vv) = *reinterpret_cast<const float4*>(&Vs[j * D + tx * 4]);")
    else:
        em("#pragma unroll")
        em("for (int dd = 0; dd < TD; ++dd) vv[dd] = Vs[j * D + tx * TD + dd];")
    em("#pragma unroll")
    em("for (int i = 0; i < 4; ++i)")
    em("#pragma unroll")
    em("    for (int dd = 0; dd < TD; ++dd) o[i][dd] = fmaf(p[i], vv[dd], o[i][dd]);")
    em.close()
    em.close()
    em("#pragma unroll")
    em.open("for (int i = 0; i < 4; ++i)")
    em("const int qi = q0 + ty * 4 + i;")
    em("if (qi >= S) continue;")
    em(f"const float inv = {r.attention_inverse(p, 'l[i]')};")
    em("#pragma unroll")
    em(f"for (int dd = 0; dd < TD; ++dd) {out.c}[obase + (long long)qi * OSS + tx * TD + dd] = "
       f"{r.store_value('o[i][dd] * inv', out.dtype)};")
    em.close()
    text = r.signature(name, bounds=NT) + " {\n" + em.text() + "\n}"
    text = text.replace(f"__launch_bounds__({NT})", f"__launch_bounds__({NT}, 2)", 1)
    banner = (f"{'masked attention' if masked else 'flash attention'}: {BQ} queries x {BKV} keys per step, "
              f"Q K^T and P V as register-tiled products (4x4 and 4x{TD} per thread), online softmax "
              "with half-warp shuffles, K/V tiles in shared memory, the next tile prefetched")
    src, lm = r.assemble([text], banner)
    return CudaProgram(name, src, [Step(name, (ceil_div(S, BQ), H, B), (NT, 1, 1), ("buffers", "scalars"))],
                       schedule=banner, notes=[], line_map=lm)


def render_flash(kernel, sizes, p) -> CudaProgram:
    r = CUDARenderer()
    r.setup(kernel, sizes)
    q, k_, v_, out, (B, H, S, D), SK = r.attention_operands(p)
    masked = p.mask is not None
    BQ, BKV, CH = 64, 64, 16
    r.nt = BQ
    name = cname(kernel.name)
    lq = lambda x: r.load_value(x, q.dtype)
    lk = lambda x: r.load_value(x, k_.dtype)
    lv = lambda x: r.load_value(x, v_.dtype)
    em = Emitter(1)
    em(f"constexpr int B = {B}, H = {H}, S = {S}, SK = {SK}, D = {D}, BQ = {BQ}, BKV = {BKV}, CH = {CH};")
    em("__shared__ __align__(16) float Ks[BKV][D];")
    em("__shared__ __align__(16) float Vs[BKV][D];")
    em("const int tid = threadIdx.x;")
    em("const int qi = blockIdx.x * BQ + tid;")
    em("const int h = blockIdx.y, b = blockIdx.z;")
    r.attention_bases(em, "long long")
    em("const bool active = qi < S;")
    em(f"const float scale = {r.attention_scale(p)};")
    em("float qr[D], o[D];")
    em("#pragma unroll")
    em(f"for (int d = 0; d < D; ++d) {{ qr[d] = active ? {lq(q.c + '[qbase + (long long)qi * QSS + d]')} * scale : 0.0f; o[d] = 0.0f; }}")
    em("float m = -ZYN_INF_F, l = 0.0f;")
    em.open("for (int kv0 = 0; kv0 < SK; kv0 += BKV)")
    em("__syncthreads();")
    em.open("for (int e = tid; e < BKV * D; e += BQ)")
    em("const int rr = e / D, cc = e % D;")
    em("const bool ok = kv0 + rr < SK;")
    em(f"Ks[rr][cc] = ok ? {lk(k_.c + '[kbase + (long long)(kv0 + rr) * KSS + cc]')} : 0.0f;")
    em(f"Vs[rr][cc] = ok ? {lv(v_.c + '[vbase + (long long)(kv0 + rr) * VSS + cc]')} : 0.0f;")
    em.close()
    em("__syncthreads();")
    em.open("for (int j0 = 0; j0 < BKV; j0 += CH)")
    em("float s[CH];")
    em("float mt = m;")
    em("#pragma unroll")
    em.open("for (int jj = 0; jj < CH; ++jj)")
    em("const int j = j0 + jj;")
    em("float acc = 0.0f;")
    if D % 4 == 0:
        em("#pragma unroll")
        em.open("for (int d = 0; d < D; d += 4)")
        em("const float4 kv = *reinterpret_cast<const float4*>(&Ks[j][d]);")
        em("acc = fmaf(qr[d], kv.x, fmaf(qr[d + 1], kv.y, fmaf(qr[d + 2], kv.z, fmaf(qr[d + 3], kv.w, acc))));")
        em.close()
    else:
        em("#pragma unroll")
        em("for (int d = 0; d < D; ++d) acc = fmaf(qr[d], Ks[j][d], acc);")
    cond = "kv0 + j < SK"
    if masked:
        cond += " && active && " + r.attention_mask(p, {p.batch_var: "b", p.head_var: "h",
                                                          p.query_var: "qi", p.key_var: "kv0 + j"})
    em(f"s[jj] = ({cond}) ? acc : -ZYN_INF_F;")
    em("mt = fmaxf(mt, s[jj]);")
    em.close()
    em("if (mt == -ZYN_INF_F) continue;")
    em("const float alpha = expf(m - mt);")
    em("l *= alpha;")
    em("#pragma unroll")
    em("for (int d = 0; d < D; ++d) o[d] *= alpha;")
    em("#pragma unroll")
    em.open("for (int jj = 0; jj < CH; ++jj)")
    em("const float p = s[jj] == -ZYN_INF_F ? 0.0f : expf(s[jj] - mt);")
    em("l += p;")
    em("const int j = j0 + jj;")
    if D % 4 == 0:
        em("#pragma unroll")
        em.open("for (int d = 0; d < D; d += 4)")
        em("const float4 vv = *reinterpret_cast<const float4*>(&Vs[j][d]);")
        em("o[d] = fmaf(p, vv.x, o[d]); o[d + 1] = fmaf(p, vv.y, o[d + 1]);")
        em("o[d + 2] = fmaf(p, vv.z, o[d + 2]); o[d + 3] = fmaf(p, vv.w, o[d + 3]);")
        em.close()
    else:
        em("#pragma unroll")
        em("for (int d = 0; d < D; ++d) o[d] = fmaf(p, Vs[j][d], o[d]);")
    em.close()
    em("m = mt;")
    em.close()
    em.close()
    em.open("if (active)")
    em(f"const float inv = {r.attention_inverse(p, 'l')};")
    em("#pragma unroll")
    em(f"for (int d = 0; d < D; ++d) {out.c}[obase + (long long)qi * OSS + d] = "
       f"{r.store_value('o[d] * inv', out.dtype)};")
    em.close()
    text = r.signature(name, bounds=BQ) + " {\n" + em.text() + "\n}"
    banner = (f"{'masked attention' if masked else 'flash attention'}: one thread per query, "
              f"{BQ} queries per block, K/V tiles of {BKV} in shared memory, online softmax")
    src, lm = r.assemble([text], banner)
    return CudaProgram(name, src, [Step(name, (ceil_div(S, BQ), H, B), (BQ, 1, 1), ("buffers", "scalars"))],
                       schedule=banner, notes=[], line_map=lm)
