"""The native Metal device: compile MSL with `newLibraryWithSource`, buffers in shared storage,
dispatch with the renderer's geometry, GPU timestamps from the command buffer.

Imported only on macOS with `pyobjc-framework-Metal` (see `__init__.discover`)."""
from __future__ import annotations

import threading
import time

import numpy as np

import Metal

from ... import cache as kcache
from ...compiler import cir, errflag
from ...compiler.codegen import msl
from ...errors import ZynMLDeviceError, ZynMLRuntimeError
from ..base import ChosenPlan, Device, HostMemory, Launch, LaunchTimes

NP_DTYPES = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "i8": np.int8,
             "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
             "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}
SHARED = Metal.MTLResourceStorageModeShared


def _to_bytes(array, dtype: str) -> bytes:
    a = np.ascontiguousarray(array)
    if dtype == "bf16":            # round to nearest even, keep the top 16 bits
        f = a.astype(np.float32).view(np.uint32)
        f = f + np.uint32(0x7FFF) + ((f >> np.uint32(16)) & np.uint32(1))
        return (f >> np.uint32(16)).astype(np.uint16).tobytes()
    return a.astype(NP_DTYPES[dtype]).tobytes()


def _from_bytes(data: bytes, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":
        bits = np.frombuffer(data, np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data, NP_DTYPES[dtype]).reshape(shape).copy()


class MetalDevice(HostMemory, Device):
    kind = "gpu"
    backend = "metal"

    def __init__(self, mtl_device, index: int):
        self.mtl = mtl_device
        self.index = index
        self.id = f"metal:{index}"
        self.aliases = (self.id,)
        self.name = str(mtl_device.name())
        self.discrete = not bool(mtl_device.isLowPower()) and not bool(
            getattr(mtl_device, "hasUnifiedMemory", lambda: False)())
        self.queue = mtl_device.newCommandQueue()
        # rendered programs and pipeline states, in memory (pipeline states cannot be saved)
        self.cache = kcache.KernelCache("metal", disk=False)
        self._last: dict = {}               # kernel hash -> its last rendered MSLProgram
        self._lock = threading.Lock()

    def info(self) -> dict:
        d = super().info()
        d["memory"] = int(self.mtl.recommendedMaxWorkingSetSize())
        d["max_threads_per_threadgroup"] = int(self.mtl.maxThreadsPerThreadgroup().width)
        return d

    # ---- compile -------------------------------------------------------------------

    def _key(self, cir_hash: str, **params) -> kcache.CacheKey:
        return kcache.CacheKey("metal", cir_hash, params=kcache.parts(**params),
                               target=kcache.parts(device=self.name, index=self.index,
                                                   fast_math=False))

    def _program(self, kernel: cir.Kernel, sizes: dict, params=None) -> msl.MSLProgram:
        h = kernel.stable_hash()
        key = self._key(h, stage="msl", sizes={k: int(v) for k, v in sizes.items()},
                        choice=params)
        prog = self.cache.memo(key, lambda: msl.render_program(
            kernel, sizes, {"params": params} if params else None))
        self._last[h] = prog
        return prog

    def _pipeline(self, prog: msl.MSLProgram, entry: str):
        key = self._key("", stage="pipeline", entry=entry).with_source(prog.source)
        return self.cache.memo(key, lambda: self._build_pipeline(prog, entry))

    def _build_pipeline(self, prog: msl.MSLProgram, entry: str):
        opts = Metal.MTLCompileOptions.new()
        opts.setFastMathEnabled_(False)     # -inf, NaN and exact division as the reference
        lib, err = self.mtl.newLibraryWithSource_options_error_(prog.source, opts, None)
        if lib is None:
            raise ZynMLDeviceError(f"Metal could not compile kernel `{prog.name}`: {err}")
        fn = lib.newFunctionWithName_(entry)
        pso, err = self.mtl.newComputePipelineStateWithFunction_error_(fn, None)
        if pso is None:
            raise ZynMLDeviceError(f"Metal could not build a pipeline for `{entry}`: {err}")
        return pso

    # ---- launch --------------------------------------------------------------------

    def prepare(self, kernel: cir.Kernel, sizes: dict, params=None) -> ChosenPlan:
        """The launch plan; `params` (a schedules.Choice) compiles with those parameters."""
        return ChosenPlan(self, kernel, sizes, params)

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict, params=None):
        times = LaunchTimes(source="gpu-timestamps")
        t0 = time.perf_counter()
        prog = self._program(kernel, sizes, params)
        pipes = [self._pipeline(prog, d.entry) for d in prog.dispatches]
        for d, p in zip(prog.dispatches, pipes):
            if d.threadgroup > int(p.maxTotalThreadsPerThreadgroup()):
                raise ZynMLDeviceError(f"`{d.entry}` needs {d.threadgroup} threads per "
                                       f"threadgroup; {self.name} allows "
                                       f"{int(p.maxTotalThreadsPerThreadgroup())} for it")
        times.compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        shape = cir.output_shape(kernel, sizes)
        n_out = int(np.prod(shape)) if shape else 1
        bufs = {}
        it = iter(inputs)
        for s in prog.slots:
            if s.role == "input":
                data = _to_bytes(self.to_host(next(it)), s.dtype)
                bufs[s.index] = self.mtl.newBufferWithBytes_length_options_(data, max(len(data), 1), SHARED)
            elif s.role == "output":
                nbytes = n_out * np.dtype(NP_DTYPES[s.dtype]).itemsize
                bufs[s.index] = self.mtl.newBufferWithLength_options_(max(nbytes, 1), SHARED)
            elif s.role == "scratch":
                bufs[s.index] = self.mtl.newBufferWithLength_options_(max(s.count, 1) * 8, SHARED)
            elif s.role == "error":         # compiler/errflag.py: zeroed, read after the launch
                bufs[s.index] = self.mtl.newBufferWithBytes_length_options_(
                    bytes(4 * errflag.WORDS), 4 * errflag.WORDS, SHARED)
            else:
                data = prog.pack_args(scalars)
                bufs[s.index] = self.mtl.newBufferWithBytes_length_options_(data, len(data), SHARED)
        times.upload = time.perf_counter() - t0
        with self._lock:
            cb = self.queue.commandBuffer()
            enc = cb.computeCommandEncoder()
            for d, pso in zip(prog.dispatches, pipes):
                enc.setComputePipelineState_(pso)
                for index, buf in bufs.items():
                    enc.setBuffer_offset_atIndex_(buf, 0, index)
                enc.dispatchThreadgroups_threadsPerThreadgroup_(
                    Metal.MTLSizeMake(d.grid, 1, 1), Metal.MTLSizeMake(d.threadgroup, 1, 1))
            enc.endEncoding()
            cb.commit()
            cb.waitUntilCompleted()
            if cb.status() == Metal.MTLCommandBufferStatusError:
                raise ZynMLRuntimeError(f"kernel `{kernel.name}` failed on {self.id}: {cb.error()}")
            times.kernel = float(cb.GPUEndTime() - cb.GPUStartTime())
        for s in prog.slots:
            if s.role == "error" and prog.error_sites:
                words = np.frombuffer(bytes(bufs[s.index].contents().as_buffer(4 * errflag.WORDS)),
                                      np.int32)
                errflag.raise_if_failed(prog.error_sites, words, kernel, sizes)
        t0 = time.perf_counter()
        out_slot = next(s for s in prog.slots if s.role == "output")
        nbytes = n_out * np.dtype(NP_DTYPES[out_slot.dtype]).itemsize
        raw = bytes(bufs[out_slot.index].contents().as_buffer(nbytes))
        out = _from_bytes(raw, out_slot.dtype, shape)
        times.download = time.perf_counter() - t0
        geometry = {"dispatches": [{"entry": d.entry, "grid": (d.grid, 1, 1),
                                    "threadgroup": (d.threadgroup, 1, 1)} for d in prog.dispatches],
                    "schedule": prog.schedule}
        if prog.notes:
            geometry["notes"] = list(prog.notes)
        return out, Launch(kernel.name, self.id, times, geometry)

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        if sizes is None:
            hit = self._last.get(kernel.stable_hash())
            if hit is not None:
                return {"msl": hit.source}
        return {"msl": msl.render(kernel, sizes)}



_DEVICES: list | None = None


def discover_devices() -> list:
    global _DEVICES
    if _DEVICES is None:
        found = list(Metal.MTLCopyAllDevices() or [])
        if not found:
            d = Metal.MTLCreateSystemDefaultDevice()
            found = [d] if d is not None else []
        _DEVICES = [MetalDevice(d, n) for n, d in enumerate(found)]
    return list(_DEVICES)
