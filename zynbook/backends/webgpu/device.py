"""The WebGPU device: every wgpu adapter (Vulkan, Metal, DX12, GL; a real GPU or Mesa's
lavapipe on a CPU) runs CIR kernels through the WGSL renderer.

Ids: each adapter is `webgpu:N` (N in discovery order, best adapter first) and also
`<backend>:M` with M counted per backend (`vulkan:0`, `metal:0`, `dx12:0`, `gl:0`); both ids
name the same `WebGPUDevice` object, whose `.id` is the backend id and `.aliases` holds both.
"""
from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from concurrent.futures import Future

import numpy as np

from ... import cache as kcache
from ...compiler import cir, errflag
from ...compiler.codegen import wgsl
from ...compiler.launch.scalar import size_pattern
from ...errors import ZynMLDeviceError, ZynMLError
from ...runtime.cancel import call_native
from ..base import ChosenPlan, Device, Launch, LaunchTimes
from . import runtime as rt

# wgpu-py's name of WebGPU's `subgroups` feature
SUBGROUP_FEATURE = "subgroup"


def _bound_buffer(kernel, role: str):
    """(what the program calls buffer `role` of a launch, where it is written): an input or
    out by its name; the scratch memory holding shared arrays past a workgroup's memory
    (`@scratch:_spill_f32`) by those arrays, at the first one's declaration."""
    from ...errors import Span
    spill = re.fullmatch(r"@scratch:_spill_(\w+)", role)
    arrays = [s for s in cir.walk(kernel.body) if isinstance(s, cir.SharedAlloc)
              and spill is not None and s.dtype == spill.group(1)]
    if not arrays:
        return f"`{role}`", None
    names = ", ".join(f"`{s.name}`" for s in arrays)
    lines = (kernel.source or "").splitlines()
    rel = arrays[0].line - kernel.first_line
    col = lines[rel].find("shared") + 1 if 0 <= rel < len(lines) else 0
    return (f"the shared arra{'ys' if len(arrays) > 1 else 'y'} {names} (more than a "
            f"workgroup's memory, so held in device memory for each workgroup running at "
            f"once)", Span(arrays[0].line, col) if arrays[0].line and col > 0 else None)

class WebGPUArray:
    """A tensor held in a device buffer: `.shape`, `.dtype` (CIR dtype), `numpy()`."""

    def __init__(self, device: "WebGPUDevice", buffer, shape: tuple, dtype: str, storage: str):
        self.device = device
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.storage = storage

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    def numpy(self) -> np.ndarray:
        return self.device.to_host(self)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"WebGPUArray(shape={self.shape}, dtype={self.dtype}, device={self.device.id})"


class WebGPUDevice(Device):
    """One wgpu adapter. The wgpu device is requested on first use."""

    kind = "gpu"

    def __init__(self, adapter, index: int, backend_index: int):
        self.adapter = adapter
        info = dict(adapter.info)
        self.adapter_info = info
        self.adapter_type = info.get("adapter_type", "Unknown")
        self.backend = rt.BACKEND_IDS.get(info.get("backend_type", ""), "webgpu")
        self.kind = "cpu" if self.adapter_type == "CPU" else "gpu"
        self.name = info.get("device") or info.get("description") or "wgpu adapter"
        self.index = index
        self.id = f"{self.backend}:{backend_index}"
        self.aliases = (f"webgpu:{index}", self.id)
        self.features = set(adapter.features)
        self.limits = dict(adapter.limits)
        self._device = None
        self._device_lock = threading.Lock()
        self._lanes = None
        # shader modules and pipelines cannot be persisted: the memory layer only
        self.cache = kcache.KernelCache("webgpu", disk=False)
        self.wgsl_version = getattr(rt.load_wgpu(), "__version__", "")
        self.last_programs: list = []

    # ------------------------------------------------------------------- description

    def info(self) -> dict:
        lim = self.limits
        return {
            "id": self.id, "ids": list(self.aliases), "type": self.kind, "name": self.name,
            "backend": self.backend, "adapter_type": self.adapter_type,
            "driver": self.adapter_info.get("description", ""),
            "max_buffer_size": lim.get("max-buffer-size"),
            "max_storage_buffer_binding_size": lim.get("max-storage-buffer-binding-size"),
            "max_workgroup_storage": lim.get("max-compute-workgroup-storage-size"),
            "max_invocations_per_workgroup": lim.get("max-compute-invocations-per-workgroup"),
            "features": sorted(f for f in self.features if f in
                               ("shader-f16", "subgroups", SUBGROUP_FEATURE, "timestamp-query",
                                "shader-f64")),
        }

    def preference(self) -> tuple:
        """Sort key for `auto`: smaller is better (discrete GPU first, CPU adapters last)."""
        return rt.adapter_rank(self.adapter_info) + (self.index,)

    # ------------------------------------------------------------------------ device

    @property
    def device(self):
        if self._device is None:
            with self._device_lock:
                if self._device is None:
                    self._request_device()
        return self._device

    def _request_device(self):
        # (under _device_lock: an @async block's thread and the caller's both asking first
        # made two devices, and a buffer one made was written through the other's queue, a
        # wgpu validation error out of upload(); _device is set last, once it is whole)
        # requested whenever offered: whether generated code uses them is options()'s
        wanted = [f for f in ("timestamp-query", "shader-f16", "shader-f64", SUBGROUP_FEATURE)
                  if f in self.features]
        lim = self.limits
        required = {k: lim[k] for k in (
            "max-buffer-size", "max-storage-buffer-binding-size",
            "max-compute-workgroup-storage-size", "max-compute-invocations-per-workgroup",
            "max-compute-workgroup-size-x", "max-storage-buffers-per-shader-stage")
            if k in lim}
        try:
            device = self.adapter.request_device_sync(
                label=f"zynbook {self.id}", required_features=wanted, required_limits=required)
        except Exception as exc:
            raise ZynMLDeviceError(f"{self.id}: the adapter refused a device: {exc}") from None
        self.enabled = set(wanted)
        self._device = device

    def use_feature(self, name: str) -> bool:
        """Whether an adapter feature is used: always, unless ZYNBOOK_WEBGPU_NO_FEATURES
        (a comma-separated list) names it (e.g. `subgroup,shader-f16`). Subgroup reductions
        are checked on lavapipe and NVIDIA's Vulkan driver (an H200)."""
        off = {x.strip() for x in os.environ.get("ZYNBOOK_WEBGPU_NO_FEATURES", "").split(",")}
        return name not in off

    def options(self) -> wgsl.WGSLOptions:
        lim = self.limits
        return wgsl.WGSLOptions(
            workgroup_size=min(256, lim.get("max-compute-invocations-per-workgroup", 256),
                               lim.get("max-compute-workgroup-size-x", 256)),
            f16="shader-f16" in self.features,
            f64="shader-f64" in self.features,
            subgroups=SUBGROUP_FEATURE in self.features and self.use_feature(SUBGROUP_FEATURE),
            subgroups_directive=False,      # Naga refuses `enable subgroups;`
            max_workgroup_storage=lim.get("max-compute-workgroup-storage-size", 16384),
            max_invocations=lim.get("max-compute-invocations-per-workgroup", 256),
            max_storage_buffers=lim.get("max-storage-buffers-per-shader-stage", 8),
            adapter=self.name,
            lane_groups=self.lane_groups(),
        )

    def lane_groups(self) -> int:
        """The widest group of consecutive lanes a collective may span (0: none), probed
        once: where subgroups are used, every subgroup's least width."""
        if self._lanes is None:
            used = SUBGROUP_FEATURE in self.features and self.use_feature(SUBGROUP_FEATURE)
            vendor = self.adapter_info.get("vendor_id", 0)
            self._lanes = rt.subgroup_lanes(self.device, int(vendor or 0)) if used else 0
        return self._lanes

    # --------------------------------------------------------------------- compiling

    def program(self, kernel: cir.Kernel, sizes: dict | None = None) -> wgsl.Program:
        return self.compile(kernel, sizes).program

    def cache_key(self, kernel: cir.Kernel, opts: wgsl.WGSLOptions) -> kcache.CacheKey:
        """The key of a kernel's pipelines: CIR hash, WGSL options, adapter, wgpu version."""
        info = self.adapter_info
        return kcache.CacheKey(
            "webgpu", kernel.stable_hash(),
            # every field of the options, so a field added later is in the key by construction
            params=kcache.parts(name=kernel.name, options={
                f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}),
            target=kcache.parts(device=self.id, adapter=self.name,
                                backend=info.get("backend_type", ""),
                                driver=info.get("description", ""),
                                vendor=info.get("vendor_id", info.get("vendor", "")),
                                features=sorted(self.features)),
            versions=kcache.parts(wgpu=self.wgsl_version))

    def compile(self, kernel: cir.Kernel, sizes: dict | None = None,
                params=None) -> rt.CompiledProgram:
        """The kernel's WGSL compiled into pipelines (kept in the memory cache by
        `cache_key`). Adapter-limit problems raise ZynMLDeviceError here, before anything runs.
        With the launch's `sizes`, the program is specialised on which sizes are equal (so
        the bounds analysis proves the common indices in range and guards only the rest);
        it runs every launch whose sizes are equal (and negative) where these are. `params`
        (a schedules.Choice) builds the program with that schedule's parameters."""
        opts = self.specialised(kernel, sizes)
        if params is not None:
            opts = dataclasses.replace(opts, params=params)
        return self.cache.memo(self.cache_key(kernel, opts), lambda: self._compile(kernel, opts))

    def specialised(self, kernel: cir.Kernel, sizes: dict | None = None) -> wgsl.WGSLOptions:
        """The options of a kernel's program at a launch of `sizes`: this adapter's, with
        the pattern of equal and negative sizes (and the sizes themselves where no program
        serves every size set)."""
        opts = self.options()
        if sizes:
            equal, nonneg = size_pattern(kernel, sizes)
            opts = dataclasses.replace(opts, equal_sizes=equal, negative_sizes=tuple(sorted(
                d for d in kernel.dims if d not in nonneg)))
            opts = wgsl.sized_for(opts, kernel, sizes)
        return opts

    def _compile(self, kernel: cir.Kernel, opts: wgsl.WGSLOptions) -> rt.CompiledProgram:
        t0 = time.perf_counter()
        program = wgsl.render(kernel, opts)
        dev = self.device
        try:
            module = rt.shader_module(dev, kernel.name, program.source)
        except Exception as exc:
            raise ZynMLDeviceError(
                f"{self.id}: the WGSL of kernel {kernel.name} did not compile: "
                f"{_first_lines(str(exc))}") from None
        layout = dev.create_bind_group_layout(entries=[_layout_entry(b) for b in program.bindings])
        playout = dev.create_pipeline_layout(bind_group_layouts=[layout])
        pipelines = {}
        for p in program.passes:
            try:
                pipelines[p.entry] = dev.create_compute_pipeline(
                    label=p.entry, layout=playout, compute={"module": module, "entry_point": p.entry})
            except Exception as exc:
                raise ZynMLDeviceError(
                    f"{self.id}: pipeline {p.entry} was refused: {_first_lines(str(exc))}") from None
        return rt.CompiledProgram(program, module, pipelines, layout, time.perf_counter() - t0)

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        """The WGSL a launch of `sizes` runs (without sizes: the program for sizes none of
        which are known to be equal)."""
        return {"wgsl": wgsl.render(kernel, self.specialised(kernel, sizes)).source}

    # ---------------------------------------------------------------------- buffers

    def _buffer(self, nbytes: int, label: str, usage=None):
        wgpu = rt.load_wgpu()
        usage = usage or (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC |
                          wgpu.BufferUsage.COPY_DST)
        size = max(16, (int(nbytes) + 15) // 16 * 16)
        if size > self.limits.get("max-buffer-size", 1 << 28):
            raise ZynMLDeviceError(f"{self.id}: `{label}` needs {size} bytes; the adapter's "
                                   f"largest buffer is {self.limits.get('max-buffer-size')} bytes")
        return self.device.create_buffer(label=label, size=size, usage=usage)

    def from_host(self, array, dtype: str | None = None) -> WebGPUArray:
        a = np.asarray(array)
        if dtype is None:
            dtype = _cir_dtype(a.dtype)
        storage = wgsl.storage_type(dtype, "shader-f16" in self.features)
        data = rt.to_storage(a, storage)
        buf = self._buffer(data.nbytes, "tensor")
        if data.nbytes:
            self.device.queue.write_buffer(buf, 0, _padded(data))
        return WebGPUArray(self, buf, a.shape, dtype, storage)

    def to_host(self, array) -> np.ndarray:
        if not isinstance(array, WebGPUArray):
            return np.asarray(array)
        n = array.size
        st = rt.STORAGE_NUMPY[array.storage]
        nbytes = n * np.dtype(st).itemsize
        if nbytes == 0:
            return np.zeros(array.shape, rt.NUMPY_OF[array.dtype])
        raw = self.read_buffer(array.buffer, 0, (nbytes + 3) // 4 * 4)
        host = np.frombuffer(raw, dtype=st, count=n).reshape(array.shape)
        return rt.from_storage(host, array.dtype).copy()

    def synchronize(self):
        """Wait for all submitted work: a read-back completes only after the queue drains
        (wgpu-py 0.32's on_submitted_work_done_sync is broken, so it is not used)."""
        if self._device is not None:
            if getattr(self, "_fence", None) is None:
                self._fence = self._buffer(16, "fence")
            self.read_buffer(self._fence, 0, 4)

    def read_buffer(self, buffer, *args) -> memoryview:
        """`buffer`'s bytes once the queue's work before the read is done, waited for where an
        interrupt or a cancelled job stops the wait (the queue's work runs on; a later read
        waits for it)."""
        return call_native(self.device.queue.read_buffer, buffer, *args)

    # ------------------------------------------------------------------------ launch

    def prepare(self, kernel: cir.Kernel, sizes: dict, params=None) -> ChosenPlan:
        """The launch plan; `params` (a schedules.Choice) compiles with those parameters."""
        return ChosenPlan(self, kernel, sizes, params)

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict,
               keep_on_device: bool = False, params=None):
        """Run `kernel`; returns (numpy output, Launch), or a WebGPUArray output with
        keep_on_device=True (for chaining kernels without a round trip)."""
        encoder, finish = self._encode(kernel, inputs, sizes, scalars, params=params)
        self.device.queue.submit([encoder.finish()])
        return finish(keep_on_device)

    def launch_async(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict) -> Future:
        """Submit `kernel` and return a Future of (numpy output, Launch); the output is read
        back through wgpu's asynchronous buffer mapping, so the host is free meanwhile."""
        fut: Future = Future()
        try:
            encoder, finish = self._encode(kernel, inputs, sizes, scalars, staging=True)
            self.device.queue.submit([encoder.finish()])
            promise = finish.staging.map_async(rt.load_wgpu().MapMode.READ)
        except ZynMLError as exc:
            fut.set_exception(exc)
            return fut

        def done(_=None):
            try:
                fut.set_result(finish(False, mapped=True))
            except Exception as exc:   # surfaces through fut.result()
                fut.set_exception(exc)

        def wait(timeout=None):
            if not fut.done():
                promise.sync_wait()
                done()
            return Future.result(fut, timeout)
        fut.result = wait
        return fut

    def _encode(self, kernel, inputs, sizes, scalars, staging=False, params=None):
        wgpu = rt.load_wgpu()
        t0 = time.perf_counter()
        was_cached = len(self.cache)
        compiled = self.compile(kernel, sizes, params)
        t_compile = time.perf_counter() - t0 if len(self.cache) != was_cached else 0.0
        prog = compiled.program
        out_shape = cir.output_shape(kernel, sizes)
        shapes = {}
        for b, a in zip(kernel.inputs, inputs):
            shapes[b.name] = tuple(a.shape)
        shapes[kernel.output.name] = tuple(out_shape)
        env = {"sizes": dict(sizes), "scalars": dict(scalars), "shapes": shapes}
        too_big = prog.check(env) if getattr(prog, "check", None) else None
        if too_big:
            raise ZynMLDeviceError(f"{self.id}: {too_big}")
        max_bind = self.limits.get("max-storage-buffer-binding-size", 1 << 27)

        t1 = time.perf_counter()
        buffers = {}
        for b, a in zip(kernel.inputs, inputs):
            if isinstance(a, WebGPUArray) and a.device is self:
                st = wgsl.storage_type(b.dtype, "shader-f16" in self.features)
                if a.storage != st:
                    a = self.from_host(a.numpy(), b.dtype)
                buffers[b.name] = a.buffer
            else:
                host = np.asarray(a.numpy() if isinstance(a, WebGPUArray) else a)
                buffers[b.name] = self.from_host(host, b.dtype).buffer
        out_b = kernel.output
        out_storage = wgsl.storage_type(out_b.dtype, "shader-f16" in self.features)
        out_n = int(np.prod(out_shape)) if out_shape else 1
        out_bytes = out_n * np.dtype(rt.STORAGE_NUMPY[out_storage]).itemsize
        out_buf = self._buffer(out_bytes, "out")
        buffers[out_b.name] = out_buf
        for role, nbytes in prog.scratch_bytes.items():
            # scratch (partials between launches, spilled shared arrays): one buffer, zeroed
            # when created, named by what it holds where the adapter cannot bind it
            n = max(4, int(nbytes(env)))
            cap = min(max_bind, self.limits.get("max-buffer-size", 1 << 28))
            if n > cap:
                what, span = _bound_buffer(kernel, role)
                raise ZynMLDeviceError(f"{self.id}: {what} needs {n} bytes; the adapter binds "
                                       f"at most {cap} bytes per storage buffer", span)
            buffers[role] = self._buffer(n, role)
        err_buf = None
        if any(b.buffer == "@error" for b in prog.bindings):
            # compiler/errflag.py: zeroed when created, read after the launch
            err_buf = buffers["@error"] = self._buffer(4 * errflag.WORDS, "error flag")
        for b in prog.bindings:
            if b.access != "uniform" and b.buffer in buffers and buffers[b.buffer].size > max_bind:
                what, span = _bound_buffer(kernel, b.buffer)
                raise ZynMLDeviceError(
                    f"{self.id}: {what} needs {buffers[b.buffer].size} bytes; the adapter "
                    f"binds at most {max_bind} bytes per storage buffer", span)
        params = rt.pack_uniform(prog.param_values(env), [f.label for f in prog.params])
        ubuf = self._buffer(len(params), "params",
                            wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self.device.queue.write_buffer(ubuf, 0, params)
        entries = []
        for b in prog.bindings:
            res = ubuf if b.access == "uniform" else buffers[b.buffer]
            entries.append({"binding": b.binding, "resource": {"buffer": res, "offset": 0,
                                                                "size": res.size}})
        group = self.device.create_bind_group(layout=compiled.layout, entries=entries)
        t_upload = time.perf_counter() - t1

        timestamps = "timestamp-query" in getattr(self, "enabled", set())
        encoder = self.device.create_command_encoder()
        # a pass of 0 workgroups is not dispatched; only dispatched passes get timestamp
        # queries, since resolving a query never written waits for it forever on some drivers
        todo = [(p, int(p.workgroups(env))) for p in prog.passes]
        todo = [(p, count) for p, count in todo if count > 0]
        qset = None
        if timestamps and todo:
            qset = self.device.create_query_set(type="timestamp", count=2 * len(todo))
        geometry = []
        for n, (p, count) in enumerate(todo):
            dims = rt.split_workgroups(count, self.limits.get("max-compute-workgroups-per-dimension", 65535))
            tw = None
            if qset is not None:
                tw = {"query_set": qset, "beginning_of_pass_write_index": 2 * n,
                      "end_of_pass_write_index": 2 * n + 1}
            cpass = encoder.begin_compute_pass(label=p.entry, timestamp_writes=tw)
            cpass.set_pipeline(compiled.pipelines[p.entry])
            cpass.set_bind_group(0, group)
            cpass.dispatch_workgroups(*dims)
            cpass.end()
            geometry.append({"entry": p.entry, "workgroups": dims, "workgroup_size": prog.workgroup_size})
        tsbuf = None
        if qset is not None:
            tsbuf = self._buffer(16 * len(todo), "timestamps",
                                 wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            encoder.resolve_query_set(qset, 0, 2 * len(todo), tsbuf, 0)
        stage = None
        if staging:
            stage = self._buffer(out_bytes, "staging",
                                 wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
            encoder.copy_buffer_to_buffer(out_buf, 0, stage, 0, out_buf.size)
        t_submit = time.perf_counter()
        dev = self

        def finish(keep_on_device: bool, mapped: bool = False):
            t2 = time.perf_counter()
            kernel_s, source = None, "host-clock"
            if tsbuf is not None:
                raw = np.frombuffer(dev.read_buffer(tsbuf), dtype=np.uint64)
                spans = [int(raw[2 * i + 1]) - int(raw[2 * i]) for i in range(len(todo))]
                if all(s >= 0 for s in spans):
                    kernel_s = sum(spans) * 1e-9
                    source = "gpu-timestamps"
            else:
                dev.synchronize()
            if kernel_s is None:
                dev.synchronize()
                kernel_s = time.perf_counter() - t_submit
            if err_buf is not None:
                words = np.frombuffer(dev.device.queue.read_buffer(err_buf), dtype=np.int32)
                errflag.raise_if_failed(prog.error_sites, words, kernel, sizes)
            t3 = time.perf_counter()
            result = WebGPUArray(dev, out_buf, out_shape, out_b.dtype, out_storage)
            if mapped:
                raw = stage.read_mapped(0, (out_bytes + 3) // 4 * 4 if out_bytes else None)
                stage.unmap()
                st = rt.STORAGE_NUMPY[out_storage]
                host = np.frombuffer(raw, dtype=st, count=out_n).reshape(out_shape)
                value = rt.from_storage(host, out_b.dtype).copy()
            elif keep_on_device:
                value = result
            else:
                value = dev.to_host(result)
            t_down = time.perf_counter() - t3
            launch = Launch(kernel.name, dev.id, LaunchTimes(
                compile=t_compile, upload=t_upload, kernel=kernel_s, download=t_down, source=source),
                {"schedule": prog.schedule, "passes": geometry, "notes": list(prog.notes)})
            return value, launch
        finish.staging = stage
        self.last_programs = [prog]
        return encoder, finish


# --------------------------------------------------------------------------- helpers


def _equal_sizes(kernel: cir.Kernel, sizes: dict) -> tuple:
    """The kernel's size names grouped by equal value at this launch (groups of two or more)."""
    return size_pattern(kernel, sizes)[0]


def _layout_entry(b) -> dict:
    wgpu = rt.load_wgpu()
    if b.access == "uniform":
        kind = wgpu.BufferBindingType.uniform
    elif b.access == "read":
        kind = wgpu.BufferBindingType.read_only_storage
    else:
        kind = wgpu.BufferBindingType.storage
    return {"binding": b.binding, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}


def _padded(data: np.ndarray) -> bytes:
    raw = data.tobytes()
    pad = (-len(raw)) % 4
    return raw + b"\0" * pad


def _cir_dtype(dt) -> str:
    dt = np.dtype(dt)
    for name, npd in rt.NUMPY_OF.items():
        if name != "bf16" and np.dtype(npd) == dt:
            return name
    raise ZynMLDeviceError(f"numpy dtype {dt} has no ZynML dtype")


def _first_lines(text: str, n: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:n])


# ------------------------------------------------------------------------- discovery

_DEVICES = None


def discover() -> list:
    """Every wgpu adapter as a WebGPUDevice, best first (discrete GPU, integrated GPU, then
    CPU adapters such as lavapipe; native APIs before GL). Each device answers to two ids,
    listed in `.aliases`: `webgpu:N` (its place in this list) and `<backend>:M` (its place
    among adapters of its backend: `vulkan:M`, `metal:M`, `dx12:M`, `gl:M`); `.id` is the
    backend one. The same objects are returned on every call. Empty without wgpu-py or a
    driver."""
    global _DEVICES
    if _DEVICES is None:
        found = [a for a in rt.adapters() if _can_compute(dict(a.info))]
        infos = [dict(a.info) for a in found]
        order = sorted(range(len(found)), key=lambda i: (rt.adapter_rank(infos[i]), i))
        per_backend: dict = {}
        devices = []
        for n, i in enumerate(order):
            backend = rt.BACKEND_IDS.get(infos[i].get("backend_type", ""), "webgpu")
            m = per_backend.get(backend, 0)
            per_backend[backend] = m + 1
            devices.append(WebGPUDevice(found[i], n, m))
        _DEVICES = devices
    return list(_DEVICES)


def _can_compute(info: dict) -> bool:
    """OpenGL adapters run compute shaders from OpenGL 4.3 (ES 3.1) on; an older one (an
    OpenGL 3.3 context, as some drivers give wgpu) cannot run a kernel, so it is no device."""
    if rt.BACKEND_IDS.get(info.get("backend_type", ""), "") != "gl":
        return True
    version = str(info.get("description", ""))     # "3.3.0 NVIDIA ...", "4.5 (Core Profile) Mesa"
    match = re.match(r"\s*(?:OpenGL ES )?(\d+)\.(\d+)", version)
    if match is None:
        return True
    major, minor = int(match.group(1)), int(match.group(2))
    is_es = "ES" in version
    return (major, minor) >= ((3, 1) if is_es else (4, 3))


def device_ids() -> dict:
    """{id: device} for every id of every discovered device."""
    return {alias: d for d in discover() for alias in d.aliases}


def get_device(device_id: str) -> WebGPUDevice:
    ids = device_ids()
    if device_id not in ids:
        known = ", ".join(sorted(ids)) or "none (no wgpu adapter)"
        raise ZynMLDeviceError(f"no WebGPU device `{device_id}`; known: {known}")
    return ids[device_id]
