"""The interface every backend's device implements.

A device runs one CIR kernel at a time. The host (runtime/interp.py) binds the kernel's
inputs and sizes and calls `launch`; the device returns the output and what it measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..compiler import cir


@dataclass
class LaunchTimes:
    """Seconds spent per phase of one launch; None where the device cannot tell."""
    compile: float | None = None
    upload: float | None = None
    kernel: float | None = None
    download: float | None = None
    source: str = ""            # "gpu-events", "gpu-timestamps" or "host-clock"


class DeferredKernelTime(LaunchTimes):
    """LaunchTimes whose kernel time is read when first asked for: `read()` waits for the
    kernel then, so a launch itself need not wait for its kernel to finish."""

    def __init__(self, read, compile=None, upload=None, source=""):   # noqa: A002
        # the fields set directly: a launch makes one of these every time
        self._read, self._kernel = read, None
        self.compile, self.upload, self.download, self.source = compile, upload, None, source

    @property
    def kernel(self):
        if self._read is not None:
            self._kernel, self._read = self._read(), None
        return self._kernel

    @kernel.setter
    def kernel(self, value):
        self._kernel = value


@dataclass
class Launch:
    kernel: str
    device: str
    times: LaunchTimes = field(default_factory=LaunchTimes)
    geometry: dict = field(default_factory=dict)   # grid/block or workgroups, where known


class LaunchPlan:
    """One kernel with its sizes bound, to be launched on one device again and again (the
    host keeps one per compute block and input signature). This plan calls
    `device.launch` every time; devices with work to do once per kernel and sizes (compile
    lookups, argument layouts) return their own from `Device.prepare`."""

    def __init__(self, device, kernel: cir.Kernel, sizes: dict):
        self.device = device
        self.kernel = kernel
        self.sizes = dict(sizes)

    def launch(self, inputs: list, scalars: dict, background: bool = False):
        """(output, Launch) as `Device.launch` gives them. `background`: the launch runs in
        a job of its own (an `@async` block), and its output must be complete when it
        returns; otherwise the device may return as soon as the kernel is queued, ordered
        before whatever the caller does next with the output."""
        return self.device.launch(self.kernel, inputs, self.sizes, scalars)


class ChosenPlan(LaunchPlan):
    """A plan for devices that compile at launch: `device.launch(..., params=)` builds with
    `params` (a schedules.Choice; None: the device's own choice), and the launches carry
    `geometry`'s entries (how the parameters were chosen)."""

    def __init__(self, device, kernel: cir.Kernel, sizes: dict, params=None):
        super().__init__(device, kernel, sizes)
        self.params = params
        self.geometry: dict = {}

    def launch(self, inputs: list, scalars: dict, background: bool = False):
        out, launch = self.device.launch(self.kernel, inputs, self.sizes, scalars,
                                         params=self.params)
        launch.geometry.update(self.geometry)
        return out, launch


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

    def prepare(self, kernel: cir.Kernel, sizes: dict) -> LaunchPlan:
        """A plan to launch `kernel` with `sizes` bound, as often as wanted."""
        return LaunchPlan(self, kernel, sizes)

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


class HostMemory:
    """Arrays of a device that computes in the host's memory (the CPU devices, Metal's
    stand-in): numpy arrays, a CuPy array brought over."""

    def to_host(self, array):
        return np.asarray(array)

    def from_host(self, array):
        if isinstance(array, np.ndarray):
            return array
        if hasattr(array, "get"):            # CuPy
            return array.get()
        return np.asarray(array)
