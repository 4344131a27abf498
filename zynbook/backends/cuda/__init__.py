"""The CUDA backend: `cuda:N` devices through CuPy (NVRTC, streams, events, memory pools).

Importing this package never needs CuPy; `discover()` returns [] without CuPy or a GPU.
"""
from __future__ import annotations


def discover() -> list:
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return []
    from .device import CudaDevice
    out = []
    for i in range(n):
        try:
            out.append(CudaDevice(i))
        except Exception:
            continue
    return out


def available() -> bool:
    return bool(discover())
