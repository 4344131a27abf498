"""`browser:N`: the WebGPU adapter of a JupyterLab page connected to this kernel.

A launch renders the kernel's WGSL with the WebGPU back end's renderer (the options from
the page's limits), builds the launch plan (plan.py) and sends it with the inputs to the
page (bridge.py); the page compiles the pipelines (cached by source hash), dispatches, reads
back and returns the output, the error flag and its GPU timestamps. Tensors on the device
are numpy arrays held by the kernel: each launch carries its inputs to the page.
"""
from __future__ import annotations

import time

import numpy as np

from ...compiler import cir
from ...compiler.codegen import wgsl
from ...errors import ZynMLDeviceError
from ..base import Device, Launch, LaunchTimes
from . import bridge, plan as plans

# what the page's error kinds mean, for the message
_KINDS = {
    "no-webgpu": "the page has no WebGPU",
    "adapter": "the page's WebGPU adapter failed",
    "lost": "the page's GPU device was lost",
    "compile": "the page's WGSL compiler refused the kernel",
    "pipeline": "the page refused a pipeline",
    "limits": "the kernel exceeds a limit of the page's adapter",
    "validation": "WebGPU refused the launch",
    "out-of-memory": "the page's GPU is out of memory",
    "internal": "the page failed",
}


class BrowserDevice(Device):
    """One connected page's adapter; `auto` never picks it."""

    kind = "gpu"
    backend = "browser"
    auto = False            # registry.best_device_id skips devices with auto = False

    def __init__(self, page: bridge.Page):
        self.page = page
        self.id = page.id
        self.aliases = (page.id,)
        adapter = page.adapter or {}
        self.name = adapter.get("name") or "browser (no WebGPU)"
        self.limits = dict(adapter.get("limits") or {})
        self.features = list(adapter.get("features") or [])
        self.last_programs: list = []
        self._programs: dict = {}

    @property
    def available(self) -> bool:
        return self.page.adapter is not None and not self.page.closed

    def info(self) -> dict:
        adapter = self.page.adapter or {}
        lim = self.limits
        return {
            "id": self.id, "ids": [self.id], "type": self.kind, "name": self.name,
            "backend": self.backend,
            "adapter_type": "CPU" if adapter.get("fallback") else "GPU",
            "vendor": adapter.get("vendor", ""), "architecture": adapter.get("architecture", ""),
            "description": adapter.get("description", ""),
            "max_buffer_size": lim.get("maxBufferSize"),
            "max_storage_buffer_binding_size": lim.get("maxStorageBufferBindingSize"),
            "max_workgroup_storage": lim.get("maxComputeWorkgroupStorageSize"),
            "max_invocations_per_workgroup": lim.get("maxComputeInvocationsPerWorkgroup"),
            "features": sorted(self.features), "limits": dict(lim),
            "user_agent": adapter.get("user_agent", ""), "auto": False,
        }

    # ---------------------------------------------------------------------- code
    def options(self) -> wgsl.WGSLOptions:
        return plans.options(self.limits)

    def program(self, kernel: cir.Kernel, sizes: dict | None = None) -> wgsl.Program:
        opts = self.options()
        if sizes:
            opts = plans.specialised(opts, kernel, sizes)
        key = (kernel.stable_hash(), opts.key())
        prog = self._programs.get(key)
        if prog is None:
            prog = self._programs[key] = wgsl.render(kernel, opts)
        return prog

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        return {"wgsl": plans.browser_source(self.program(kernel, sizes).source)}

    # ------------------------------------------------------------------- memory
    def from_host(self, array):
        return np.array(array, copy=True)

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    # ------------------------------------------------------------------- launch
    def _error(self, message: str) -> ZynMLDeviceError:
        return ZynMLDeviceError(f"{self.id}: {message}")

    def check(self):
        """Raise the device error of a page that cannot run a kernel."""
        if self.page.closed:
            raise self._error(f"the page went away ({self.page.closed_reason})")
        if self.page.adapter is None:
            err = self.page.error or {}
            kind = err.get("kind", "no-webgpu")
            raise self._error(f"{_KINDS.get(kind, kind)}: {err.get('message', 'no adapter')}")

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        self.check()
        t0 = time.perf_counter()
        prog = self.program(kernel, sizes)
        host = [np.asarray(a) for a in inputs]
        plan = plans.build(prog, kernel, host, sizes, scalars, self.limits)
        t_plan = time.perf_counter() - t0
        self.last_programs = [prog]
        t1 = time.perf_counter()
        try:
            reply, buffers = self.page.request({"type": "launch", "plan": plan.spec},
                                               plan.data, what=f"kernel {kernel.name}")
        except bridge.PageGone as gone:
            raise self._error(f"the page went away during the launch of kernel "
                              f"{kernel.name} ({gone})") from None
        except bridge.LostReply as lost:
            raise self._error(f"kernel {kernel.name}: {lost}") from None
        except bridge.DeviceLost as lost:
            raise self._error(f"{_KINDS['lost']} during the launch of kernel {kernel.name}: "
                              f"{lost}") from None
        round_trip = time.perf_counter() - t1
        if reply.get("type") == "error":
            kind = reply.get("kind", "internal")
            raise self._error(f"{_KINDS.get(kind, kind)}: {reply.get('message', '')}")
        t2 = time.perf_counter()
        value = plans.result(plan, kernel, sizes, buffers)
        times = reply.get("times") or {}
        page_s = float(times.get("page") or 0.0)
        launch = Launch(kernel.name, self.id, LaunchTimes(
            compile=float(times.get("compile") or 0.0) + t_plan,
            upload=max(0.0, round_trip - page_s),       # the comm both ways
            kernel=float(times["kernel"]) if times.get("kernel") is not None else None,
            download=time.perf_counter() - t2,
            source=times.get("source", "page-clock")),
            {"schedule": prog.schedule, "passes": plan.geometry, "notes": list(prog.notes),
             "round_trip": round_trip, "bytes_sent": plan.nbytes,
             "bytes_received": sum(len(b) for b in buffers)})
        return value, launch

    def echo(self, payload: bytes, split: bool = False):
        """Send `payload` to the page and back (the comm's transfer rate): (seconds, reply);
        with `split`, (seconds, reply, seconds there, seconds back) as the wall clocks of the
        kernel and the page tell (meaningful where both run on one machine)."""
        self.check()
        t0, w0 = time.perf_counter(), time.time()
        try:
            reply, buffers = self.page.request({"type": "echo"}, [payload], what="echo")
        except (bridge.PageGone, bridge.LostReply, bridge.DeviceLost) as gone:
            raise self._error(f"the echo failed ({gone})") from None
        seconds, w1 = time.perf_counter() - t0, time.time()
        back = buffers[0] if buffers else b""
        if not split:
            return seconds, back
        at = float(reply.get("received_ms") or 0.0) / 1000.0
        return seconds, back, at - w0, w1 - at
