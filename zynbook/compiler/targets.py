"""What a device can do, as data: the only facts schedules and printers ask of a target.

A device describes itself with a `Target` (`cuda_target(cc)`, `cpu_target()`,
`webgpu_target(features, limits)`, `metal_target()`); schedules read it to say whether they
apply and to bound their parameter spaces; printers read the language from it. Nothing else
about a device reaches the compiler.
"""
from __future__ import annotations

import os
from functools import lru_cache
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    name: str                   # "cuda", "cpp", "msl", "wgsl"
    lang: str                   # the printer's dialect
    warp: int                   # threads of a warp / SIMD group / subgroup (1: none)
    max_threads: int            # threads per block
    shared_bytes: int           # shared (workgroup / threadgroup) memory per block
    dtypes: frozenset           # element types it computes in and stores
    tensor_cores: tuple = ()    # MMA instruction families: ("mma.sync",), ("wgmma", "mma.sync")
    async_copy: bool = False    # global -> shared copies in the background (cp.async, sm_80 on)
    # the tensor memory accelerator (TMA, sm_90 on): boxes of a tensor copied into shared
    # memory by a copy engine, their bytes counted on mbarriers
    bulk_copy: bool = False
    collectives: bool = True    # warp / subgroup reductions
    atomics: frozenset = frozenset({"+", "max", "min"})
    arch: str = ""              # "sm_90", "apple", "x86-64-v3", an adapter's name
    cores: int = 1              # parallel blocks the host runs at once (CPU)
    multiprocessors: int = 0    # blocks a GPU runs side by side, one a multiprocessor (0: unknown)
    simd_bytes: int = 0         # the width of the host's vector registers (CPU; 0: unknown)
    max_blocks: int = 2 ** 31 - 1   # blocks in a 1-D grid
    # one program for every size set (WebGPU compiles a kernel once): loop counts, grids
    # and scratch counts are expressions over the sizes, bounds proven symbolically, no
    # decision reads a size's value and indices are i32; else (CUDA, C++, Metal compile
    # per launch) the sizes of the launch are baked in
    symbolic_sizes: bool = False
    vector_bytes: int = 0       # the widest load or store one thread makes at once (0: none)
    # dtypes whose + max min all-reduction over a block the dialect spells itself (WebGPU:
    # rounds of subgroup operations of the width the adapter runs, which no schedule knows)
    block_collectives: tuple = ()
    static_shared_bytes: int = 0    # shared arrays of fixed size a kernel declares (0: all)
    # f32 lanes of the vector values the language computes with (vec4, float4; launch IR
    # vector dtypes, ir.vector_dtype): 0 where a schedule keeps to scalars
    vector_lanes: int = 0
    # where whole-warp collectives are off (WebGPU: a subgroup's width is the adapter's to
    # choose per pipeline): the widest group of consecutive lanes a warp-scope Collective of
    # a `width` may still span, every subgroup the adapter makes being at least that wide
    lane_groups: int = 0
    # loop iterations one thread runs before the device quits its loops without an error
    # (Mesa's llvmpipe: 65,535, all loops together): every loop's count is then checked
    # (launch/steps.py); 0: no such limit
    loop_steps: int = 0
    # whether signed integer + - * wrap in the target's language, as ZynML's do (C++ built
    # with -fwrapv, WGSL); where overflow is undefined (CUDA C++, MSL: NVRTC took
    # x * 1000000 > 0 of a positive x to be true) the kernel's arithmetic is written as
    # wrapping operations (ir.WRAPPING)
    signed_wraps: bool = True
    # the 4-byte sums one thread of an FMA GEMM tile may hold: 128 (half of the 255 registers
    # an NVIDIA thread may have) measured on WebGPU on an NVIDIA adapter; 64 elsewhere
    fma_sums: int = 64
    # whether i64 and u64 values are 64 bits wide (WebGPU: its buffers of them hold 32 bits
    # and only values that fit are computed with; compiler/codegen/dialects/wgsl.py)
    int64: bool = True
    notes: tuple = field(default=())

    def has(self, dtype: str) -> bool:
        return dtype in self.dtypes

    @property
    def wide_sums(self) -> bool:
        """Whether long sums of f32 are kept accurate in f64 (the CPU: one thread runs a
        block's or a row's sum in order, where a GPU's tree keeps the error small): a
        reduction's partials, and the chunks of a long summing loop (launch/wide_sums.py)."""
        return self.max_threads == 1 and not self.symbolic_sizes


_BASE = frozenset({"f32", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"})


def cuda_target(cc: tuple = (9, 0), multiprocessors: int = 0, bulk_copy: bool = True) -> Target:
    """`bulk_copy`: the driver can make tensor maps (sm_90 on)."""
    # warpgroup MMAs are sm_90a's own (later architectures have others)
    mma = ("wgmma", "mma.sync") if cc == (9, 0) else (("mma.sync",) if cc >= (8, 0) else ())
    shared = 227 * 1024 if cc >= (9, 0) else (163 * 1024 if cc >= (8, 0) else 48 * 1024)
    return Target("cuda", "cuda", 32, 1024, shared, _BASE | {"f16", "bf16", "f64"}, mma,
                  async_copy=cc >= (8, 0), bulk_copy=bulk_copy and cc >= (9, 0),
                  arch=f"sm_{cc[0]}{cc[1]}", vector_bytes=16, vector_lanes=4,
                  static_shared_bytes=48 * 1024,      # more is dynamic, on request
                  multiprocessors=multiprocessors, signed_wraps=False)


def cpu_target(arch: str = "") -> Target:
    return Target("cpu", "cpp", 1, 1, 1 << 20, _BASE | {"f16", "bf16", "f64"},
                  collectives=False, arch=arch, cores=os.cpu_count() or 1,
                  simd_bytes=host_simd_bytes())


@lru_cache(maxsize=None)
def host_simd_bytes() -> int:
    """The vector register width `-march=native` compiles for on this machine: 64 with
    AVX-512, 32 with AVX, else 16 (SSE2, NEON)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    return 64 if "avx512f" in flags else 32 if "avx" in flags else 16


def metal_target() -> Target:
    return Target("metal", "msl", 32, 1024, 32 * 1024, _BASE | {"f16", "bf16"},
                  arch="apple", max_blocks=65535, vector_lanes=4, signed_wraps=False)


# llvmpipe's budget of loop iterations per shader invocation (gallivm's loop limiter)
LLVMPIPE_LOOP_STEPS = 65535


def webgpu_target(features=(), limits: dict | None = None, subgroup: int = 32) -> Target:
    limits = limits or {}
    # f16 is held in f32 (rounded where converted to it) without `shader-f16`
    dtypes = frozenset({"f32", "f16", "i32", "u32", "bool", "i8", "u8", "i16", "u16", "i64", "u64"})
    if "shader-f64" in features:
        dtypes |= {"f64"}
    return Target("webgpu", "wgsl", subgroup if "subgroup" in features else 1,
                  int(limits.get("max_compute_invocations_per_workgroup", 256)),
                  int(limits.get("max_compute_workgroup_storage_size", 16384)), dtypes,
                  collectives="subgroup" in features,
                  max_blocks=int(limits.get("max_compute_workgroups_per_dimension", 65535)),
                  symbolic_sizes=True, vector_lanes=4, int64=False,
                  block_collectives=("f32", "i32", "u32") if "subgroup" in features else ())
