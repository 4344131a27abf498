"""The CUDA backend: `cuda:N` devices through CuPy (NVRTC, streams, events, memory pools).

Importing this package never needs CuPy; `discover()` returns [] without CuPy or a GPU.
"""
from __future__ import annotations

import ctypes
import sys
import threading

# the CUDA driver library, by platform (elsewhere there is none to start)
_DRIVER = {"linux": "libcuda.so.1", "win32": "nvcuda.dll"}


def discover() -> list:
    _start_driver()
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


def _start_driver():
    """Start the CUDA driver (`cuInit`) on a thread while `import cupy` runs on this one:
    both take 0.1-0.2 s in a new process on an H100 host, and a ctypes call runs without
    the GIL, so they overlap. CuPy's first call then finds the driver started (cuInit is
    safe to call from several threads and again); where there is no driver, nothing
    happens."""
    name = _DRIVER.get(sys.platform)
    if name is None or "cupy" in sys.modules:       # imported already: nothing to overlap
        return

    def init():
        try:
            ctypes.CDLL(name).cuInit(0)
        except Exception:       # no driver library, or no GPU: discovery finds no device
            pass

    threading.Thread(target=init, name="zynbook-cuInit", daemon=True).start()


def available() -> bool:
    return bool(discover())
