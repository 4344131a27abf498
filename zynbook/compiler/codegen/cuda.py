"""CIR -> CUDA C, with a real schedule per kernel type.

`render_cuda(kernel, sizes)` returns a `CudaProgram`: the source text (sizes baked in as
constants), the launches to make in order (grid, block, arguments) and the scratch memory
they need. Schedules, tried in this order:

* **attention / flash_attention** whose body the recognition pass (passes/recognise.py)
  finds to be attention in any form (three-pass, online softmax, tiled flash with any block
  size), with any key condition and launch-constant scale: one block per 64 queries of one
  head, K/V tiles in shared memory, online softmax.
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
from .cstyle import attention_pattern, no_schedule
from .cstyle import (OP_FUNCTOR, CStyleRenderer, Emitter, GenericSchedules, Nest, Unsupported,
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
