"""CUDA C: NVRTC compiles it; blocks and threads are CUDA's own."""
from __future__ import annotations

from ...launch import ir
from ...launch.scalar import DTYPE_BYTES as _BYTES
from .cfamily import C_TYPES, HELPERS, CFamily, banner, gelu_helper, vector_helpers

_THREAD = {"thread": "(int)threadIdx.x", "block": "(int)blockIdx.x", "threads": "(int)blockDim.x",
           "blocks": "(int)gridDim.x", "lane": "((int)threadIdx.x & 31)", "warp": "((int)threadIdx.x >> 5)"}
_FUNCTOR = {"+": "ZynAdd", "*": "ZynMul", "max": "ZynMax", "min": "ZynMin", "and": "ZynAnd", "or": "ZynOr",
            "fmax": "ZynFmax"}

CUDA_HELPERS = dict(HELPERS, **{
    "zyn_warp_allreduce": (
        "// (T): a shuffle of a narrow integer gives an int\n"
        "template <typename T, typename Op> {q}T zyn_warp_allreduce(T v, Op op) {{\n"
        "    for (int o = 16; o > 0; o >>= 1) v = op(v, (T)__shfl_xor_sync(0xffffffffu, v, o));\n"
        "    return v; }}", ()),
    # over each group of W consecutive lanes
    "zyn_lanes_allreduce": (
        "template <int W, typename T, typename Op> {q}T zyn_lanes_allreduce(T v, Op op) {{\n"
        "    for (int o = W / 2; o > 0; o >>= 1) v = op(v, (T)__shfl_xor_sync(0xffffffffu, v, o));\n"
        "    return v; }}", ()),
    "zyn_block_allreduce": (
        "// every thread of the block gets the reduction of `v` over the block\n"
        "template <typename T, typename Op> {q}T zyn_block_allreduce(T v, Op op, T identity) {{\n"
        "    __shared__ T zyn_red[32];\n"
        "    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;\n"
        "    v = zyn_warp_allreduce(v, op);\n"
        "    __syncthreads();\n"
        "    if (lane == 0) zyn_red[wid] = v;\n"
        "    __syncthreads();\n"
        "    T r = lane < nw ? zyn_red[lane] : identity;\n"
        "    return zyn_warp_allreduce(r, op); }}", ("zyn_warp_allreduce",)),
})
for _op, _stop in (("max", ">="), ("min", "<=")):     # (stops where the value already wins)
    CUDA_HELPERS["zyn_atomic_" + _op] = (
        "{q}void zyn_atomic_" + _op + "(float* p, float v) {{\n"
        "    int* ip = (int*)p; int old = *ip, assumed;\n"
        "    do {{ assumed = old; if (__int_as_float(assumed) " + _stop + " v) break;\n"
        "         old = atomicCAS(ip, assumed, __float_as_int(v)); }} while (assumed != old); }}", ())

# tensor cores: one m16n8k16 step of a warp, each lane's A (8) and B (4) halves and C (4
# floats) in its registers; ldmatrix: a warp's 8 x 8 tiles of 16-bit elements from shared
# memory into them (the arrays are 16-byte aligned and the offsets even: pairs are words)
for _t in ("f16", "bf16"):
    CUDA_HELPERS["zyn_mma_" + _t] = (
        "template <typename T> {q}void zyn_mma_" + _t + "(float* c, const T* a, const T* b) {{\n"
        "    const unsigned* A = reinterpret_cast<const unsigned*>(a);\n"
        "    const unsigned* B = reinterpret_cast<const unsigned*>(b);\n"
        "    asm(\"mma.sync.aligned.m16n8k16.row.col.f32." + _t + "." + _t + ".f32 \"\n"
        "        \"{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"\n"
        "        : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
        "        : \"r\"(A[0]), \"r\"(A[1]), \"r\"(A[2]), \"r\"(A[3]), \"r\"(B[0]), \"r\"(B[1])); }}", ())
CUDA_HELPERS["zyn_ex2_ftz"] = (
    "{q}float zyn_ex2_ftz(float x) {{\n"
    "    float r; asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }}", ())
CUDA_HELPERS["zyn_rcp_ftz"] = (
    "{q}float zyn_rcp_ftz(float x) {{\n"
    "    float r; asm(\"rcp.approx.ftz.f32 %0, %1;\" : \"=f\"(r) : \"f\"(x)); return r; }}", ())
# gelu's reciprocal (of at least 1) and exp2 (of [-4, 1]) by the hardware's approximations,
# within an ulp and two: IEEE division's refinement made bias + GELU compute-bound at 87% of
# the copy bandwidth, and __fdividef and exp2f each kept a subnormal guard they never take
CUDA_HELPERS["zyn_gelu"] = gelu_helper("zyn_rcp_ftz({})", "__int_as_float({})", "__float_as_int({})",
                                       exp2="zyn_ex2_ftz({})", needs=("zyn_rcp_ftz", "zyn_ex2_ftz"))
# f64 a^b of a whole 0 < |b| < 2^31 (a finite, not 0) by squaring in two parts, each
# product exact to 2^-100 or so and the result rounded once (a subnormal one twice), so that a
# whole power f64 holds is exact, as numpy's; CUDA's pow is not correctly rounded (9^16 was an
# ulp off). Values (h + l) 2^e with h in [0.5, 1): no square overflows
CUDA_HELPERS["zyn_pow_f64"] = (
    "{q}void zyn_ddmul(double& h, double& l, int& e, double bh, double bl, int be) {{\n"
    "    const double p = h * bh, x = fma(h, bh, -p) + (h * bl + l * bh), s = p + x;\n"
    "    int k; h = frexp(s, &k); l = ldexp(x - (s - p), -k); e += be + k; }}\n"
    "{q}double zyn_pow_f64(double a, double b) {{\n"
    "    if (!(b == floor(b) && fabs(b) < 2147483648.0 && b != 0.0 && a != 0.0 && isfinite(a)))\n"
    "        return pow(a, b);\n"
    "    int pe; double ph = frexp(fabs(a), &pe), pl = 0.0;\n"
    "    if (b < 0.0) {{   // 1 / m in two parts: the residual 1 - q m is exact\n"
    "        const double q = 1.0 / ph; pl = fma(-q, ph, 1.0) * q; ph = q; pe = -pe;\n"
    "        int k; ph = frexp(ph, &k); pl = ldexp(pl, -k); pe += k; }}\n"
    "    double rh = 0.5, rl = 0.0; int re = 1;\n"
    "    for (unsigned k = (unsigned)fabs(b);; ) {{\n"
    "        if (k & 1u) zyn_ddmul(rh, rl, re, ph, pl, pe);\n"
    "        k >>= 1;\n"
    "        if (k == 0u) break;\n"
    "        // past 2^+-1100 with factors to come: an infinity or 0 as the base is above 1 or below\n"
    "        if (abs(re) > 1100 || abs(pe) > 1100) {{ re = pe > 0 ? 4096 : -4096; break; }}\n"
    "        zyn_ddmul(ph, pl, pe, ph, pl, pe); }}\n"
    "    const double r = ldexp(rh + rl, max(-4096, min(4096, re)));\n"
    "    return a < 0.0 && fmod(b, 2.0) != 0.0 ? -r : r; }}", ())
# a value rounded to TF32 (nearest, ties away), as the tensor cores take it
CUDA_HELPERS["zyn_tf32"] = (
    "{q}unsigned zyn_tf32(float x) {{\n"
    "    unsigned r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x)); return r; }}", ())
CUDA_HELPERS["zyn_mma_tf32"] = (
    "{q}void zyn_mma_tf32(float* c, const float* a, const float* b) {{\n"
    "    asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \"\n"
    "        \"{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"\n"
    "        : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "        : \"r\"(zyn_tf32(a[0])), \"r\"(zyn_tf32(a[1])), \"r\"(zyn_tf32(a[2])), \"r\"(zyn_tf32(a[3])),\n"
    "          \"r\"(zyn_tf32(b[0])), \"r\"(zyn_tf32(b[1]))); }}", ("zyn_tf32",))
# cp.async: 16 bytes bypass L1 (.cg), smaller copies go through it (.ca); a copy whose guard
# is false writes zeros (a source size of 0) and reads nothing
for _b in (4, 8, 16):
    CUDA_HELPERS[f"zyn_cp_async{_b}"] = (
        "{q}void zyn_cp_async" + str(_b) + "(void* d, const void* s, bool full) {{\n"
        "    const unsigned a = (unsigned)__cvta_generic_to_shared(d);\n"
        f"    asm volatile(\"cp.async.{'cg' if _b == 16 else 'ca'}.shared.global [%0], [%1], {_b}, %2;\\n\" "
        ":: \"r\"(a), \"l\"(s), \"r\"(full ? " + str(_b) + " : 0)); }}", ())
for _n in (1, 2, 4):
    for _trans in (False, True):
        _regs = ", ".join(f"%{i}" for i in range(_n))
        _outs = ", ".join(f'"=r"(r[{i}])' for i in range(_n))
        CUDA_HELPERS[f"zyn_ldsm_x{_n}{'_t' if _trans else ''}"] = (
            "template <typename T> {q}void zyn_ldsm_x" + f"{_n}{'_t' if _trans else ''}"
            + "(T* d, const T* s) {{\n"
            "    unsigned* r = reinterpret_cast<unsigned*>(d);\n"
            "    const unsigned a = (unsigned)__cvta_generic_to_shared(s);\n"
            f"    asm volatile(\"ldmatrix.sync.aligned.m8n8.x{_n}{'.trans' if _trans else ''}.shared.b16 "
            + "{{" + _regs + "}}" + f", [%{_n}];\" : {_outs} : \"r\"(a)); " + "}}", ())

# warpgroup MMA (sm_90a): a shared-memory matrix descriptor (start address, leading and
# stride byte offsets, each >> 4; 128-byte swizzle), the m64nNkK step on a thread's N / 2
# accumulators (scale-d `d`: 1, D = A B + D, or 0, D = A B; tnspA / tnspB: an operand
# running along M or N, 16-bit types only), and
# an empty asm on the accumulators that keeps the compiler from moving their reads and
# writes across the fence and the wait
# of element `at` of a shared array: the array's descriptor (the same for every step, so
# computed once) plus the element's byte offset >> 4, in the low word (shared addresses stay
# below 2^18: no carry into the leading byte offset)
CUDA_HELPERS["zyn_wgmma_desc"] = (
    "template <typename T> {q}unsigned long long zyn_wgmma_desc(const T* base, int at, unsigned lbo, unsigned sbo) {{\n"
    "    const unsigned a = (unsigned)__cvta_generic_to_shared(base);\n"
    "    const unsigned lo = ((a & 0x3FFFFu) >> 4 | ((lbo >> 4) & 0x3FFFu) << 16) + ((unsigned)at * (unsigned)sizeof(T) >> 4);\n"
    "    return (unsigned long long)(((sbo >> 4) & 0x3FFFu) | 1u << 30) << 32 | lo; }}", ())
CUDA_HELPERS["zyn_wgmma_regs"] = (
    "template <int R> {q}void zyn_wgmma_regs(float* c) {{\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < R; ++i) asm volatile(\"\" : \"+f\"(c[i]) :: \"memory\"); }}", ())
# the same for A fragments in registers (R elements, 16-bit ones by pairs): written before
# the fence
CUDA_HELPERS["zyn_wgmma_aregs"] = (
    "template <int R, typename T> {q}void zyn_wgmma_aregs(T* a) {{\n"
    "    unsigned* r = reinterpret_cast<unsigned*>(a);\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < R * (int)sizeof(T) / 4; ++i) asm volatile(\"\" : \"+r\"(r[i]) :: \"memory\"); }}", ())
def _wgmma_helper(n: int, t: str, a_regs: bool) -> tuple:
    """The m64nNkK step of `t` on a thread's N / 2 accumulators: A by descriptor or (a_regs)
    from four 32-bit registers (16-bit pairs, or tf32); f16 and bf16 take the operands'
    transposes as template arguments (tnspA for A in shared memory only), tf32 none (its
    operands are K-major)."""
    r, half = n // 2, t != "tf32"
    a_op = "{{" + ", ".join(f"%{r + i}" for i in range(4)) + "}}" if a_regs else f"%{r}"
    a_in = ", ".join(f'"r"(A[{i}])' for i in range(4)) if a_regs else '"l"(da)'
    d = r + (5 if a_regs else 2)            # operand number of the scale-d flag
    trans = ["TB"] if a_regs else ["TA", "TB"]
    tail = "".join(f", %{d + 1 + i}" for i in range(len(trans))) if half else ""
    temp = [f"int {x}" for x in trans] * half + ["typename T"] * a_regs
    return ((f"template <{', '.join(temp)}> " if temp else "") + "{q}void " +
            f"zyn_wgmma_m64n{n}_{t}{'_rs' if a_regs else ''}(float* c, " +
            ("const T* a" if a_regs else "unsigned long long da") + ", unsigned long long db, int d) {{\n" +
            ("    const unsigned* A = reinterpret_cast<const unsigned*>(a);\n" if a_regs else "") +
            f'    asm volatile("{{{{ .reg .pred p; setp.ne.b32 p, %{d}, 0; '
            f"wgmma.mma_async.sync.aligned.m64n{n}k{ir.WGMMA_K[t]}.f32.{t}.{t} "
            "{{" + ", ".join(f"%{i}" for i in range(r)) + "}}, " +
            f'{a_op}, %{d - 1}, p, 1, 1{tail}; }}}}"\n' +
            "        : " + ", ".join(f'"+f"(c[{i}])' for i in range(r)) + "\n" +
            f'        : {a_in}, "l"(db), "r"(d)' +
            "".join(f', "n"({x})' for x in trans) * half + "); }}", ())


for _n in ir.WGMMA_ANY_N:
    for _t in ("f16", "bf16", "tf32"):
        for _regs in (False, True):
            CUDA_HELPERS[f"zyn_wgmma_m64n{_n}_{_t}{'_rs' if _regs else ''}"] = _wgmma_helper(_n, _t, _regs)

# mbarriers and TMA (sm_90): a tensor map is a 128-byte kernel parameter (CUtensorMap's
# layout), addressed generically; a box lands with its bytes counted on an mbarrier
CUDA_HELPERS["ZynTensorMap"] = ("struct __align__(64) ZynTensorMap {{ unsigned long long v[16]; }};", ())
CUDA_HELPERS["zyn_mbar"] = (
    "{q}unsigned zyn_smem_addr(const void* p) {{ return (unsigned)__cvta_generic_to_shared(p); }}\n"
    "{q}void zyn_mbar_init(unsigned long long* b, unsigned count) {{\n"
    "    asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1; fence.mbarrier_init.release.cluster;\"\n"
    "                 :: \"r\"(zyn_smem_addr(b)), \"r\"(count) : \"memory\"); }}\n"
    "{q}void zyn_mbar_arrive(unsigned long long* b, unsigned tx) {{\n"
    "    if (tx) asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\"\n"
    "                         :: \"r\"(zyn_smem_addr(b)), \"r\"(tx) : \"memory\");\n"
    "    else asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(zyn_smem_addr(b)) : \"memory\"); }}\n"
    "{q}void zyn_mbar_wait(unsigned long long* b, unsigned parity) {{\n"
    "    unsigned done = 0;\n"
    "    while (!done) asm volatile(\"{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; \"\n"
    "                               \"selp.u32 %0, 1, 0, p; }}\" : \"=r\"(done) : \"r\"(zyn_smem_addr(b)), \"r\"(parity) : \"memory\"); }}", ())
for _d in (2, 3, 4, 5):
    _cs = ", ".join(f"%{3 + i}" for i in range(_d))
    _args = ", ".join(f"int c{i}" for i in range(_d))
    _ins = ", ".join(f'\"r\"(c{i})' for i in range(_d))
    CUDA_HELPERS[f"zyn_tma_load{_d}"] = (
        "{q}void zyn_tma_load" + str(_d) + "(void* d, const ZynTensorMap& m, unsigned long long* b, " + _args + ") {{\n"
        f"    asm volatile(\"cp.async.bulk.tensor.{_d}d.shared::cluster.global.mbarrier::complete_tx::bytes \"\n"
        "                 \"[%0], [%1, {{" + _cs + "}}], [%2];\"\n"
        "                 :: \"r\"(zyn_smem_addr(d)), \"l\"(&m), \"r\"(zyn_smem_addr(b)), " + _ins + " : \"memory\"); }}",
        ("ZynTensorMap", "zyn_mbar"))

CUDA_HELPERS.update(vector_helpers("float4"))      # CUDA's float4 has no arithmetic


for _name, _body in (("ZynAdd", "a + b"), ("ZynMul", "a * b"), ("ZynMax", "(a < b || b != b) ? b : a"),
                     ("ZynMin", "(b < a || b != b) ? b : a"), ("ZynAnd", "a && b"), ("ZynOr", "a || b"),
                     ("ZynFmax", "fmaxf(a, b)")):
    CUDA_HELPERS[_name] = ("struct " + _name + " {{ template <typename T> {q}T operator()(T a, T b) const {{ return "
                           + _body + "; }} }};", ())


_VECTOR = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}


class CudaDialect(CFamily):
    name = "cuda"
    q = "__device__ __forceinline__ "
    TYPES = dict(C_TYPES, f16="__half", bf16="__nv_bfloat16")
    INF = {"f32": "__int_as_float(0x7f800000)", "f64": "__longlong_as_double(0x7ff0000000000000LL)"}
    NAN = {"f32": "__int_as_float(0x7fc00000)", "f64": "__longlong_as_double(0x7ff8000000000000LL)"}
    HELPERS = CUDA_HELPERS
    VEC4 = "float4"
    _dynamic = None             # the next free byte of zyn_smem while a kernel uses it
    FAIL = "if (atomicCAS(e, 0, site) == 0) atomicExch(e + 1, (int)(v > 2147483647 ? 2147483647 : v < -2147483647 - 1 ? -2147483647 - 1 : v));"
    IDENTITY = {"+": "0", "*": "1", "and": "true", "or": "false"}

    def thread(self, axis):
        return _THREAD[axis]

    def cast(self, text, src, dst):
        if src == "f16":
            return self.cast(f"__half2float({text})", "f32", dst)
        if src == "bf16":
            return self.cast(f"__bfloat162float({text})", "f32", dst)
        if dst == "f16" and src == "f64":       # rounded once, as numpy's (bf16: through
            return f"__double2half({text})"     # f32, as torch's)
        if dst == "f16":
            return f"__float2half_rn((float)({text}))"
        if dst == "bf16":
            return f"__float2bfloat16_rn((float)({text}))"
        return super().cast(text, src, dst)

    def collective(self, op, value, scope, dtype, width=0):
        if dtype == "bool":
            if scope == "warp" and not width and op in ("or", "and"):     # one vote, not five shuffles
                return f"({'__any_sync' if op == 'or' else '__all_sync'}(0xffffffffu, {value}) != 0)"
            # shuffles move ints
            return f"({self.collective(op, f'(int)({value})', scope, 'i32', width)} != 0)"
        f = f"{self.need(_FUNCTOR[op])}()"
        if width:
            return f"{self.need('zyn_lanes_allreduce')}<{width}>({value}, {f})"
        if scope == "warp":
            return f"{self.need('zyn_warp_allreduce')}({value}, {f})"
        ident = {"max": self.lit(float("-inf"), dtype) if dtype in ("f32", "f64") else "0",
                 "min": self.lit(float("inf"), dtype) if dtype in ("f32", "f64") else "0"}.get(
            op, self.IDENTITY.get(op, "0"))
        return f"{self.need('zyn_block_allreduce')}({value}, {f}, ({self.type(dtype)}){ident})"

    def copy(self, dst, di, dspace, src, si, sspace, count, dtype):
        vt = _VECTOR.get(count * _BYTES[dtype])
        if vt is None:
            return super().copy(dst, di, dspace, src, si, sspace, count, dtype)
        return (f"*reinterpret_cast<{vt}*>(&{dst}[{di}]) = "
                f"*reinterpret_cast<const {vt}*>(&{src}[{si}]);")

    def unroll(self):
        return "#pragma unroll"

    def matrix_load(self, dst, di, src, si, count, trans, dtype):
        return f"{self.need(f'zyn_ldsm_x{count}' + ('_t' if trans else ''))}(&{dst}[{di}], &{src}[{si}]);"

    def mma(self, a, ai, b, bi, c, ci, dtype, shape):
        return f"{self.need('zyn_mma_' + dtype)}(&{c}[{ci}], &{a}[{ai}], &{b}[{bi}]);"

    def math(self, fn, args, dtype):
        if fn == "fast_exp2" and dtype == "f32":
            return f"{self.need('zyn_ex2_ftz')}({args[0]})"
        if fn == "fmax" and dtype == "f32":
            return f"fmaxf({args[0]}, {args[1]})"
        if fn == "tf32" and dtype == "f32":
            return f"__uint_as_float({self.need('zyn_tf32')}({args[0]}))"
        if fn == "pow" and dtype == "f64":
            return f"{self.need('zyn_pow_f64')}({args[0]}, {args[1]})"
        return super().math(fn, args, dtype)

    def convert(self, dst, di, src, si, count, dtype):
        """Two f32 into a packed pair (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32), stored as one word."""
        pair, fn = {"f16": ("__half2", "__floats2half2_rn"), "bf16": ("__nv_bfloat162", "__floats2bfloat162_rn")}[dtype]
        assert count == 2, count
        return f"*reinterpret_cast<{pair}*>(&{dst}[{di}]) = {fn}({src}[{si}], {src}[{si} + 1]);"

    def async_copy(self, dst, di, src, si, count, dtype, guard):
        helper = self.need(f"zyn_cp_async{count * _BYTES[dtype]}")
        if guard is None:
            return f"{helper}(&{dst}[{di}], &{src}[{si}], true);"
        # a copy that lands zeros still takes an address: the buffer's own
        return f"{{ const bool _ok = {guard}; {helper}(&{dst}[{di}], _ok ? &{src}[{si}] : {src}, _ok); }}"

    def wgmma(self, s, a_index, b_index, c_index, fresh=None):
        desc = lambda arr, at, lbo, sbo: f"{self.need('zyn_wgmma_desc')}({arr}, {at}, {lbo}u, {sbo}u)"
        b = desc(s.b, b_index, s.b_lbo, s.b_sbo)
        d = "1" if fresh is None else f"!({fresh})"
        if s.a_regs:
            tb = "" if s.dtype == "tf32" else f"<{int(not s.b_kmajor)}>"
            return (f"{self.need(f'zyn_wgmma_m64n{s.n}_{s.dtype}_rs')}{tb}"
                    f"(&{s.c}[{c_index}], &{s.a}[{a_index}], {b}, {d});")
        ts = "" if s.dtype == "tf32" else f"<{int(not s.a_kmajor)}, {int(not s.b_kmajor)}>"
        return (f"{self.need(f'zyn_wgmma_m64n{s.n}_{s.dtype}')}{ts}"
                f"(&{s.c}[{c_index}], {desc(s.a, a_index, s.a_lbo, s.a_sbo)}, {b}, {d});")

    def wgmma_fence(self, c, count, a="", a_count=0):
        held = f"{self.need('zyn_wgmma_aregs')}<{a_count}>({a}); " if a else ""
        return (f"{self.need('zyn_wgmma_regs')}<{count}>({c}); {held}"
                'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");')

    def wgmma_commit(self):
        return 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");'

    def wgmma_wait(self, pending, c, count):
        return (f'asm volatile("wgmma.wait_group.sync.aligned {int(pending)};" ::: "memory"); '
                f"{self.need('zyn_wgmma_regs')}<{count}>({c});")

    def proxy_fence(self):
        return 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'

    def async_commit(self):
        return 'asm volatile("cp.async.commit_group;\\n" ::: "memory");'

    def async_wait(self, pending):
        return f'asm volatile("cp.async.wait_group {int(pending)};\\n" ::: "memory");'

    def barrier(self, device=False):
        return "__syncthreads();"          # orders global memory among the block's threads too

    def named_barrier(self, id_, threads, arrive):
        op = "bar.arrive" if arrive else "bar.sync"
        return f'asm volatile("{op} %0, {int(threads)};" :: "r"((int)({id_})) : "memory");'


    def mbarrier(self, op, array, index, count, tx, parity):
        b = f"&{array}[{index}]"
        call = {"init": f"zyn_mbar_init({b}, {int(count)}u);", "arrive": f"zyn_mbar_arrive({b}, {int(tx)}u);",
                "wait": f"zyn_mbar_wait({b}, (unsigned)({parity}));"}[op]
        self.need("zyn_mbar")
        return call

    def tensor_load(self, map_, coords, dst, di, bar, bi):
        helper = self.need(f"zyn_tma_load{len(coords)}")
        return f"{helper}(&{dst}[{di}], {map_}, &{bar}[{bi}], " + ", ".join(f"(int)({c})" for c in coords) + ");"

    def set_max_registers(self, count, increase):
        return f'asm volatile("setmaxnreg.{"inc" if increase else "dec"}.sync.aligned.u32 {int(count)};");'

    def param(self, p, restrict=""):
        if p.kind == "tensormap":
            return f"const __grid_constant__ {self.need('ZynTensorMap')} {p.name}"
        return super().param(p, restrict)

    shared_aliases = True       # ir.Array.alias

    def array(self, name, dtype, count, space, align=16, alias=""):
        if alias:
            t = self.type(dtype)
            return f"{t}* const {name} = reinterpret_cast<{t}*>({alias});"
        if space == "shared" and self._dynamic is not None:     # a piece of zyn_smem
            at, t = -(-self._dynamic // align) * align, self.type(dtype)
            self._dynamic = at + -(-max(count, 1) * _BYTES[dtype] // 16) * 16
            return f"{t}* const {name} = reinterpret_cast<{t}*>(zyn_smem + {at});"
        # 16-byte aligned at least: a `Copy` may move 16 bytes at once to or from any array
        q = "__shared__ " if space == "shared" else ""
        return f"{q}__align__({max(16, align)}) {self.type(dtype)} {name}[{max(count, 1)}];"

    def atomic(self, op, array, index, value, dtype):
        addr = f"&{array}[{index}]"
        if op == "+":
            return f"atomicAdd({addr}, {value});"
        if dtype == "f32":
            return f"{self.need('zyn_atomic_' + op)}({addr}, {value});"
        return f"atomic{op.capitalize()}({addr}, {value});"

    def kernel_open(self, k, params):
        ps = [self.param(p, "__restrict__ ") for p in params] + ["int* __restrict__ zyn_err"]
        bounds = f"{k.block}, {k.min_blocks}" if k.min_blocks else f"{k.block}"
        head = f'extern "C" __global__ void __launch_bounds__({bounds}) {k.name}(\n    '
        # the shared arrays of a kernel with `dynamic_shared`: pieces of what the launch gives
        self._dynamic = 0 if k.dynamic_shared else None
        dyn = "\n    extern __shared__ __align__(16) unsigned char zyn_smem[];" if k.dynamic_shared else ""
        align = max([a.align for a in ir.walk(k.body) if isinstance(a, ir.Array) and a.space == "shared"] + [16])
        if k.dynamic_shared and align > 16:     # the launch's memory is 16-byte aligned: start later
            dyn = (f"\n    extern __shared__ __align__({align}) unsigned char zyn_smem_raw[];"
                   f"\n    unsigned char* const zyn_smem = zyn_smem_raw + (({align}u - "
                   f"((unsigned)__cvta_generic_to_shared(zyn_smem_raw) & {align - 1}u)) & {align - 1}u);")
        return (f"// {k.comment}\n" if k.comment else "") + head + ",\n    ".join(ps) + ") {" + dyn

    def program_head(self, program, sizes) -> str:
        head = banner("CUDA C", program, sizes)
        types = {p.dtype for k in program.kernels for p in k.params} | {
            n.dtype for n in ir.walk(program) if isinstance(n, ir.Cast)}
        if "f16" in types:
            head.append("#include <cuda_fp16.h>")
        if "bf16" in types:
            head.append("#include <cuda_bf16.h>")
        return "\n".join(head) + "\n"
