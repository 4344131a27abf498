"""The interface every backend's device implements.

A device runs one CIR kernel at a time. The host (runtime/interp.py) binds the kernel's
inputs and sizes and calls `launch`; the device returns the output and what it measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..compiler import cir


@dataclass
class LaunchTimes:
    """Seconds spent per phase of one launch; None where the device cannot tell."""
    compile: float | None = None
    upload: float | None = None
    kernel: float | None = None
    download: float | None = None
    source: str = ""            # "gpu-events", "gpu-timestamps" or "host-clock"


@dataclass
class Launch:
    kernel: str
    device: str
    times: LaunchTimes = field(default_factory=LaunchTimes)
    geometry: dict = field(default_factory=dict)   # grid/block or workgroups, where known


class Device:
    """A compute device. Subclasses: cpu, cuda, webgpu, metal."""

    id: str = ""
    kind: str = ""              # "cpu", "gpu"
    backend: str = ""           # "cpu", "cuda", "vulkan", "metal", "dx12", ...
    name: str = ""

    def info(self) -> dict:
        """What compute_devices() shows: at least id, type, name, backend."""
        return {"id": self.id, "type": self.kind, "name": self.name, "backend": self.backend}

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        """Run `kernel` on `inputs` (host or device arrays, in kernel.inputs order) with
        every size name of kernel.dims in `sizes` and every kernel.scalars value in
        `scalars`. Returns (output array, Launch). The output has
        cir.output_shape(kernel, sizes) and kernel.output.dtype."""
        raise NotImplementedError

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        """{language: source text} of what this device would run for `kernel` (with `sizes`
        bound, for devices that compile sizes in)."""
        return {}

    def to_host(self, array):
        """A numpy array holding `array`'s data."""
        raise NotImplementedError

    def from_host(self, array):
        """`array` (numpy) on this device, in the device's own array type."""
        raise NotImplementedError

    def synchronize(self):
        pass
