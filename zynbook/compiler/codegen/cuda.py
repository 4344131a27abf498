"""CIR -> CUDA C, with a real schedule per kernel type.

`render_cuda(kernel, sizes)` returns a `CudaProgram`: the source text (sizes baked in as
constants), the launches to make in order (grid, block, arguments) and the scratch memory
they need. Schedules, tried in this order:

* **attention / flash_attention** whose body the recognition pass (passes/recognise.py)
  finds to be attention in any form (three-pass, online softmax, tiled flash with any block
  size), with any key condition and launch-constant scale: the attention schedule
  (compiler/schedules/attention.py) printed by the CUDA dialect.
* **contractions** (matmul, batched_matmul, conv2d and any kernel of that shape):
  `out[P] = epilogue(init + sum_R A(P, R) * B(P, R))` goes through the GEMM schedule
  (compiler/schedules/gemm.py): shared-memory tiles with register blocking and 16-byte
  loads, f16/bf16 on the tensor cores (mma.sync), a convolution as an implicit GEMM.
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
from .cstyle import no_schedule
from .cstyle import (OP_FUNCTOR, CStyleRenderer, GenericSchedules, Nest, Unsupported,
                     ceil_div, cname, prelude_functors, prelude_guards, prelude_helpers,
                     prelude_span_len, raise_unsupported)

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
        return out

    def assemble(self, kernels: list[str], banner: str) -> tuple[str, dict]:
        """Join kernel texts under the prelude; returns (source, generated line -> ZynML line)."""
        self._body_text = "\n".join(kernels)
        head = [f"// ZynBook CUDA C for kernel `{self.kernel.name}` ({banner})",
                "// sizes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.sizes.items()))]
        head += self.headers()
        text = "\n".join(head) + PRELUDE + "\n" + "\n\n".join(kernels) + "\n"
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
