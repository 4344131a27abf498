"""Tensor maps for kernels fed by the copy engine (ir.TensorMap, schedules/gemm_tma.py): the
driver's `cuTensorMapEncodeTiled` makes the 128-byte CUtensorMap from a buffer's address,
which a launch passes by value (a one-element numpy array of 128 bytes, as CuPy passes a
struct). Each kernel argument keeps the maps of the addresses it saw: a buffer reused by a
later launch (a CUDA graph's, a cached array's) costs no driver call."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

MAP = np.dtype((np.void, 128))
_DATA_TYPES = {"f16": 6, "f32": 7, "bf16": 9}      # CU_TENSOR_MAP_DATA_TYPE_*
_SWIZZLE_128B, _L2_PROMOTION_256B = 3, 3
_encode_fn = None


def _driver():
    global _encode_fn
    if _encode_fn is None:
        f = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p,
                      u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        f.restype = ctypes.c_int
        _encode_fn = f
    return _encode_fn


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether this process's driver makes tensor maps (CUDA 12's libcuda)."""
    try:
        _driver()
    except (OSError, AttributeError):
        return False
    return True


def encode(dtype: str, address: int, dims: tuple, strides: tuple, box: tuple) -> np.ndarray:
    """The tensor map of a `dtype` tensor at device `address`: `dims` innermost first,
    `strides` in elements between consecutive indices of dims[1:], boxes of `box`; 128-byte
    swizzle, zeros outside the tensor."""
    rank, eb = len(dims), np.dtype(np.uint16 if dtype in ("f16", "bf16") else np.float32).itemsize
    raw = np.zeros(128 + 64, np.uint8)          # the driver writes the map 64-byte aligned
    at = -raw.ctypes.data % 64
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    err = _driver()(raw.ctypes.data + at, _DATA_TYPES[dtype], rank, address,
                    (u64 * rank)(*dims), (u64 * max(1, rank - 1))(*[s * eb for s in strides]),
                    (u32 * rank)(*box), (u32 * rank)(*[1] * rank), 0, _SWIZZLE_128B,
                    _L2_PROMOTION_256B, 0)
    if err:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUDA error {err} "
                           f"({dtype}, dims {dims}, strides {strides}, box {box})")
    return raw[at:at + 128].copy().view(MAP)


class TensorMapArg:
    """A launch's tensor-map argument: the map of buffer `index` (among inputs then out)."""

    def __init__(self, spec: tuple):
        self.index, self.dtype, self.dims, self.strides, self.box = spec
        self.maps: dict = {}

    def __call__(self, buffers) -> tuple:
        ptr = buffers[self.index].data.ptr
        m = self.maps.get(ptr)
        if m is None:
            if len(self.maps) >= 64:
                self.maps.clear()
            m = self.maps[ptr] = encode(self.dtype, ptr, self.dims, self.strides, self.box)
        return (m,)
