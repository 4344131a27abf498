"""Device ids -> devices. `cpu` always; `cuda:N`, `webgpu:N` / `vulkan:N` / `metal:N` /
`dx12:N` where their backends find hardware; `browser:N` while a JupyterLab page with the
ZynBook extension is connected to the kernel (never picked by `auto`); `auto` is the best
GPU, else the CPU.

A named device discovers only its own family of backends (`cpu:native` never enumerates
WebGPU adapters nor starts CUDA); `auto`, `best_device_id()`, `compute_devices()` and an
unknown id discover every backend. Each backend is asked once per process (until
`refresh()`)."""
from __future__ import annotations

import importlib
import threading

from ..errors import ZynMLDeviceError, ZynMLTypeError
from .cpu.device import CpuDevice

# backend packages that provide `discover() -> list[Device]`, in order of preference for `auto`
_BACKENDS = ("zynbook.backends.cuda", "zynbook.backends.metal", "zynbook.backends.webgpu",
             "zynbook.backends.cpu.native")

# the backends that can answer to an id, by the id's prefix: families share no id, so
# discovering one family (its backends in `_BACKENDS` order) settles its ids for good
_METAL_AND_WEBGPU = ("zynbook.backends.metal", "zynbook.backends.webgpu")
_FAMILIES = {
    "cuda": ("zynbook.backends.cuda",),
    "cpu": ("zynbook.backends.cpu.native",),
    # wgpu's adapters answer to `webgpu:N` and `<its backend>:M`; a native Metal device
    # takes `metal:N` before wgpu's Metal adapter does
    **{prefix: _METAL_AND_WEBGPU for prefix in ("metal", "webgpu", "vulkan", "dx12", "gl",
                                                "browser")},
}

_lock = threading.Lock()
_devices: dict | None = None            # every device found so far, by each of its ids
_asked: set = set()                     # the backends whose discover() has run


def _discover() -> dict:
    """Every backend's devices (and the connected pages')."""
    return _with_pages(_found(_BACKENDS))


def _found(backends) -> dict:
    """The devices found so far, after asking each of `backends` not asked before."""
    global _devices
    with _lock:
        if _devices is None:
            _devices = {"cpu": CpuDevice()}
        for module in _BACKENDS:
            if module in backends and module not in _asked:
                _asked.add(module)
                for dev in _backend_devices(module):
                    for dev_id in [dev.id] + list(getattr(dev, "aliases", ())):
                        _devices.setdefault(dev_id, dev)
        return _devices


def _backend_devices(module: str) -> list:
    try:
        return list(importlib.import_module(module).discover())
    except Exception:       # a backend without its library or hardware is absent
        return []


def _family(device_id: str) -> tuple | None:
    """The backends that can answer to `device_id`; None for an id of no known family."""
    if device_id == "cpu":
        return ()
    return _FAMILIES.get(device_id.split(":", 1)[0])


def _with_pages(found: dict) -> dict:
    """`found` and the devices of the pages connected now (they come and go)."""
    try:
        from .browser import connected
        pages = connected()
    except Exception:
        return found
    if not pages:
        return found
    found = dict(found)
    for dev in pages:
        found.setdefault(dev.id, dev)
    return found


def _listed(dev) -> bool:
    """Whether compute_devices() shows a device (a page without WebGPU is not shown)."""
    return getattr(dev, "available", True)


def refresh():
    """Forget what was found (tests and notebooks call this after plugging a backend)."""
    global _devices
    with _lock:
        _devices = None
        _asked.clear()


def best_device_id() -> str:
    devices = _discover()
    gpus = [d for d in dict.fromkeys(devices.values())
            if d.kind == "gpu" and getattr(d, "auto", True)]
    if not gpus:
        return "cpu"
    order = {"cuda": 0, "metal": 1, "vulkan": 2, "dx12": 3}
    discrete = [d for d in gpus if getattr(d, "discrete", True)]
    pick = min(discrete or gpus, key=lambda d: order.get(d.backend, 9))
    return pick.id


def _plain_id(device_id: str) -> str:
    """An id as typed loosely: lower case, no spaces, no leading zeros in its number."""
    family, _, number = device_id.strip().lower().replace(" ", "").partition(":")
    return f"{family}:{number.lstrip('0') or '0'}" if number.isdigit() else \
        family + (":" + number if number else "")


def _first_of_family(devices: dict, device_id: str) -> str | None:
    """For an id without its index (`vulkan`, `CUDA`), the family's first device here."""
    family = _plain_id(device_id)
    if ":" in family:
        return None
    ids = [d for d in devices if d.startswith(family + ":") and d.split(":", 1)[1].isdigit()]
    return min(ids, key=lambda d: int(d.split(":", 1)[1]), default=None)


def get_device(device_id: str):
    if not isinstance(device_id, str):
        what = repr(device_id) if isinstance(device_id, (int, float, type(None))) \
            else type(device_id).__name__          # (not an array's every value)
        raise ZynMLTypeError(f"a device id is a string like \"cpu\" or \"cuda:0\", "
                             f"not {what}")
    found = _devices
    if found is not None and device_id in found:
        return found[device_id]     # a device found here wins over a page's of that id
    if device_id == "dask" or device_id.startswith("dask:"):      # a Dask cluster
        from .dask import cluster_device
        return cluster_device(device_id)
    if device_id == "auto":
        device_id = best_device_id()
    family = _family(device_id)
    if family is not None:
        found = _found(family)
        if device_id.startswith("browser:"):       # the pages' ids (the bridge loaded then)
            found = _with_pages(found)
        dev = found.get(device_id)
        if dev is not None:
            return dev
    devices = _discover()           # an unknown id: its error lists every device
    dev = devices.get(device_id)
    if dev is None:
        known = ", ".join(sorted(devices)) or "none"
        # ids are lower case without spaces: `CPU`, ` cpu` and `vulkan:01` name a device
        meant = next((d for d in sorted(devices) if _plain_id(d) == _plain_id(device_id)),
                     None) or _first_of_family(devices, device_id)
        bare = _plain_id(device_id)
        hint = f" (did you mean `{meant}`?)" if meant else \
            f" (ids take an index, as `{bare}:0`, and no {bare} device is here)" \
            if bare in _FAMILIES and bare != "cpu" else ""
        raise ZynMLDeviceError(f"no device `{device_id}` here{hint}; available: {known}, auto")
    return dev


def compute_devices() -> list:
    """One entry per device (aliases not repeated), as dicts with at least id, type, name."""
    seen, out = set(), []
    for dev in _discover().values():
        if id(dev) in seen or not _listed(dev):
            continue
        seen.add(id(dev))
        out.append(dev.info())
    return out
