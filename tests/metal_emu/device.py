"""A ZynBook device that runs every kernel as MSL on the Metal model (emulator.py) and checks
each launch against the CPU reference executor."""
from __future__ import annotations

import time

import numpy as np

from zynbook.backends.base import Device, Launch, LaunchTimes
from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import cir
from zynbook.compiler.codegen import msl

from . import emulator

TOL = {"f16": (1e-2, 1e-2), "bf16": (2e-2, 2e-2), "f32": (2e-4, 2e-5)}


class EmulatedMetalDevice(Device):
    id = "metal-emu"
    kind = "gpu"
    backend = "metal"
    name = "Metal model on the CPU (g++)"

    def __init__(self):
        self.launches: list = []        # (kernel name, schedule)
        self.mismatches: list = []      # (kernel name, message)

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        arrays = [np.asarray(a) for a in inputs]
        t0 = time.perf_counter()
        prog = msl.render_program(kernel, sizes)
        shape = cir.output_shape(kernel, sizes)
        out = emulator.run(prog, arrays, shape, scalars, kernel=kernel, sizes=sizes)
        elapsed = time.perf_counter() - t0
        want = np.asarray(run_kernel(kernel, arrays, sizes, scalars))
        self.launches.append((kernel.name, prog.schedule))
        rtol, atol = TOL.get(kernel.output.dtype, (0, 0))
        try:
            np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64),
                                       rtol=rtol, atol=atol)
        except AssertionError as err:
            self.mismatches.append((kernel.name, str(err)))
        times = LaunchTimes(kernel=elapsed, source="host-clock")
        geometry = {"dispatches": [(d.entry, d.grid, d.threadgroup) for d in prog.dispatches],
                    "schedule": prog.schedule}
        return out, Launch(kernel.name, self.id, times, geometry)

    def generated_source(self, kernel):
        return {"msl": msl.render(kernel)}

    def to_host(self, array):
        return np.asarray(array)

    def from_host(self, array):
        return np.asarray(array)
