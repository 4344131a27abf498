"""The `cpu` device: runs kernels with the reference executor."""
from __future__ import annotations

import os
import platform
import time

from ...compiler import cir
from ...compiler.codegen import python as python_codegen
from ..base import Device, HostMemory, Launch, LaunchTimes
from .reference import run_kernel


class CpuDevice(HostMemory, Device):
    id = "cpu"
    kind = "cpu"
    backend = "cpu"

    def __init__(self):
        self.name = platform.processor() or platform.machine() or "CPU"

    def info(self) -> dict:
        d = super().info()
        d["cores"] = os.cpu_count()
        try:
            pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            d["memory"] = pages
        except (ValueError, OSError, AttributeError):
            pass
        return d

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        arrays = [self.from_host(a) for a in inputs]
        start = time.perf_counter()
        out = run_kernel(kernel, arrays, sizes, scalars)
        elapsed = time.perf_counter() - start
        times = LaunchTimes(compile=0.0, upload=0.0, kernel=elapsed, download=0.0,
                            source="host-clock")
        return out, Launch(kernel.name, self.id, times, {"executor": "numpy reference"})

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        return {"python": python_codegen.render(kernel)}

