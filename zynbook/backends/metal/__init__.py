"""Metal backend: ZynBook's own MSL (compiler/codegen/msl.py) run through Apple's Metal API via
PyObjC (`pyobjc-framework-Metal`, macOS only). Elsewhere `discover()` finds nothing and nothing
Metal-specific is imported."""
from __future__ import annotations

import sys


def available() -> bool:
    """True on macOS where PyObjC's Metal bindings import."""
    if sys.platform != "darwin":
        return False
    try:
        import Metal  # noqa: F401
    except ImportError:
        return False
    return True


def discover() -> list:
    """Every Metal GPU as a `MetalDevice` with id `metal:N`; [] off macOS or without PyObjC.
    Listed before the WebGPU backend in the registry, so `metal:N` is this native device
    (wgpu's Metal adapters keep their `webgpu:N` ids)."""
    if not available():
        return []
    from .device import discover_devices
    return discover_devices()
