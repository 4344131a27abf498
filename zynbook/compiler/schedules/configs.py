"""The kernel library's tuned configurations (gpu-kernel-library.md): flash attention's
per architecture (`CONFIGS`, `architecture`, `named_config`), the shared memory one needs
and its check against a target's limit (a kernel's `@tile` that does not fit is a
ZynMLDeviceError at the `@tile`; on a target that builds one program for every size set it
is checked where head_dim is a constant of the kernel), and the GEMM schedule's tensor-core
starting points (`gemm_config`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ZynMLDeviceError, ZynMLTypeError


@dataclass(frozen=True)
class FlashConfig:
    name: str
    block_q: int
    block_kv: int
    head_dim: int
    half: bool

    def describe(self) -> str:
        return (f"{self.name} (block_q={self.block_q}, block_kv={self.block_kv}, "
                f"head_dim={self.head_dim}{', half precision' if self.half else ''})")


CONFIGS = {c.name: c for c in (
    FlashConfig("ampere", 128, 128, 64, True),
    FlashConfig("hopper", 128, 256, 128, True),
    FlashConfig("rdna3", 64, 64, 64, True),
    FlashConfig("apple", 64, 64, 64, True),
    FlashConfig("fallback", 32, 32, 64, False),
)}

# WebGPU adapter names by architecture (RDNA3: Radeon RX 7000, gfx11)
_NAMES = {"hopper": ("h100", "h200", "gh200", "rtx 40", "l40", "l4 "),
          "ampere": ("a100", "a10", "a30", "a40", "rtx 30", "rtx a"),
          "rdna3": ("gfx11", "rx 7", "radeon 7", "rdna3", "rdna 3"),
          "apple": ("apple",)}


def architecture(target) -> str:
    """The named configuration's architecture of `target`: CUDA sm_80 to sm_87 is Ampere,
    sm_89 (RTX 40xx, which the library's table groups with Hopper) and sm_90 on are Hopper,
    Metal is Apple, a WebGPU adapter is told by its name (`WGSLOptions.adapter`); anything
    else the fallback."""
    arch = (target.arch or "").lower()
    if target.name == "cuda" and arch.startswith("sm_") and arch[3:].isdigit():
        cc = int(arch[3:])
        return "hopper" if cc >= 89 else ("ampere" if cc >= 80 else "fallback")
    if target.name == "metal":
        return "apple"
    return next((name for name, marks in _NAMES.items() if any(m in arch + " " for m in marks)),
                "fallback")


def required_shared_memory(config: FlashConfig) -> int:
    """Bytes of shared memory a block of `config` uses: the Q, K and V tiles."""
    return (config.block_q + 2 * config.block_kv) * config.head_dim * (2 if config.half else 4)


def fits(config: FlashConfig, target) -> bool:
    return required_shared_memory(config) <= target.shared_bytes


def validate_config(config: FlashConfig, target, span=None, what: str = ""):
    """Raise a ZynMLDeviceError naming both numbers when `config` does not fit `target`: a
    target of `zynbook.compiler.targets`, or the device's shared memory per block in bytes
    (the library's `validateConfig(config, gpu_max_shared_memory)`)."""
    if not isinstance(config, FlashConfig):
        raise ZynMLTypeError(f"validate_config() takes a FlashConfig (configs.CONFIGS[name]), "
                             f"not {type(config).__name__}")
    if isinstance(target, (int, np.integer)) and not isinstance(target, (bool, np.bool_)):
        if target < 0:
            raise ZynMLTypeError(f"validate_config(): the shared memory is a number of bytes "
                                 f"(at least 0), not {target}")
        limit, where = int(target), "the limit given"
    elif hasattr(target, "shared_bytes"):
        limit, where = target.shared_bytes, f"{target.name} {target.arch}".strip()
    else:
        raise ZynMLTypeError(f"validate_config() takes a target or the shared memory per block "
                             f"in bytes, not {target!r}")
    need = required_shared_memory(config)
    if need > limit:
        raise ZynMLDeviceError(
            f"{what or 'the configuration ' + config.describe()} needs {need} bytes of shared "
            f"memory (Q, K and V tiles of {config.block_q}, {config.block_kv} and "
            f"{config.block_kv} rows of {config.head_dim} "
            f"{'half-precision' if config.half else '4-byte'} values); the target ({where}) "
            f"has {limit} bytes per block", span)


def named_config(target) -> FlashConfig | None:
    """The configuration of `target`'s architecture where it fits, else the fallback where
    that fits, else None."""
    for name in (architecture(target), "fallback"):
        if fits(CONFIGS[name], target):
            return CONFIGS[name]
    return None


def hinted_config(kernel, target, sizes: dict) -> FlashConfig | None:
    """The configuration a kernel's `@tile(block_q=, block_kv=)` asks for at these sizes
    (an absent one of the two is the named configuration's), or None without a hint or
    where head_dim is not known."""
    from . import attention
    hint = dict(kernel.schedule.tile)
    if "block_q" not in hint and "block_kv" not in hint:
        return None
    shape, _ = attention.match(kernel, target, sizes)
    if shape is None or (target.symbolic_sizes and not attention.baked(target, shape)):
        return None
    base = named_config(target) or CONFIGS["fallback"]
    half = shape.bufs["q"].dtype in ("f16", "bf16")
    return FlashConfig("@tile", int(hint.get("block_q", base.block_q)),
                       int(hint.get("block_kv", base.block_kv)), max(shape.D, shape.Dv), half)


def check_config(schedule: str, kernel, target, sizes: dict):
    """Refuse a kernel whose `@tile` configuration does not fit `target` (see module doc)."""
    if schedule != "attention":
        return
    config = hinted_config(kernel, target, sizes)
    if config is None:
        return
    what = (f"@tile(block_q={config.block_q}, block_kv={config.block_kv}) at head_dim "
            f"{config.head_dim}")
    validate_config(config, target, getattr(kernel.schedule, "tile_span", None), what)


def attention_params(config: FlashConfig, target):
    """`config` as the attention schedule's parameters on `target` (None where a block of
    `block_q` threads is more than the target runs)."""
    from .attention import AttentionParams
    if target.max_threads == 1:         # the CPU: a query a block, K and V read from memory
        return AttentionParams(1, config.block_kv, 1, min(16, config.block_kv), False)
    if config.block_q > target.max_threads:
        return None
    return AttentionParams(config.block_q, config.block_kv, 1, min(16, config.block_kv), True)


# The GEMM schedule's tensor-core configurations (GemmParams fields besides width and mma),
# by architecture and operand kind: 128 x 128 block tiles of 4 warps of 64 x 64 (a warp's
# fragments reused over 8 x 4 MMAs: shared memory's bandwidth, not the tensor cores, bounds
# smaller warp tiles on Hopper), K slices through a cp.async ring. Half precision: slices of
# 32 in 3 swizzled stages (48 KiB, what a kernel declares statically); TF32 (4-byte
# operands): slices of 16 in 2 padded stages, whose rows keep the element-wise fragment
# reads free of bank conflicts.
_HALF = dict(bm=128, bn=128, bk=32, tm=64, tn=64, stages=3, swizzle=True)
# On Hopper, TF32 slices of 32 in 3 swizzled stages (96 KiB of dynamic shared memory) ran
# 0.97 ms against 1.07 for the 2-stage form (4096^3, H100, bench_cuda.py --gemm-sweep).
_TF32 = dict(bm=128, bn=128, bk=16, tm=64, tn=64, stages=2, swizzle=False)
_TF32_HOPPER = dict(bm=128, bn=128, bk=32, tm=64, tn=64, stages=3, swizzle=True)
# Hopper's warpgroup MMAs (sm_90a, f16/bf16; the schedule offers them on sm_90 only): a
# 128 x 256 tile of two warpgroups of 64 x 256 (128 f32 accumulators a thread), 64-deep
# slices (a 128-byte swizzled row a tile row) through a 4-stage cp.async ring (192 KiB).
_WGMMA = dict(bm=128, bn=256, bk=64, tm=64, tn=256, stages=4, swizzle=True, wgmma=True)
# Fed by the copy engine from a producer warpgroup (schedules/gemm_tma.py): a ring of three
# (144 KiB) leaves room for C's staging tile beside it.
_WGMMA_TMA = dict(_WGMMA, stages=3, tma=True)
GEMM_CONFIGS = {("ampere", "half"): _HALF, ("hopper", "half"): _HALF,
                ("ampere", "tf32"): _TF32, ("hopper", "tf32"): _TF32_HOPPER,
                ("hopper", "wgmma"): _WGMMA, ("hopper", "tma"): _WGMMA_TMA}


def gemm_config(target, kind: str) -> dict | None:
    """The tensor-core GEMM configuration of `target`'s architecture for operands of `kind`
    ("half", "tf32", "wgmma": half operands on warpgroup MMAs, "tma": those fed by the copy engine), or None where the library has none (before Ampere, off CUDA)."""
    if target.name != "cuda":
        return None
    return GEMM_CONFIGS.get((architecture(target), kind))
