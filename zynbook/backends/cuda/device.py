"""`cuda:N`: runs CIR kernels as CUDA C compiled by NVRTC, through CuPy.

* Compilation: `render_cuda` bakes the sizes into the source; NVRTC turns it into a cubin
  (machine code) for the device's real arch (sm_XY, sm_90a for wgmma programs), so loading
  it runs no compiler: the driver assembles a PTX module in every new process where its own
  JIT cache misses (a GEMM candidate's PTX took 0.11 s to load, median of 32, up to 0.25 s,
  on an H100 with that cache off; a cubin under 1 ms). Cache (`zynbook/cache.py`): the module
  is kept in memory by (CIR hash, sizes, options, arch, NVRTC options, NVRTC, CuPy and
  driver versions), the cubin on disk under `$ZYNBOOK_CACHE_DIR/cuda` (default
  `~/.cache/zynbook/cuda`) by that key plus the source, checksummed; an entry that is bad or
  that the driver does not load is rebuilt. The PTX the inspector shows is made by NVRTC
  when first asked for (`CompiledCuda.ptx`).
* Errors: NVRTC and launch failures become ZynML errors that show the generated CUDA line
  and point at the ZynML line it came from.
* Memory: CuPy's device memory pool and pinned-memory pool (`allocate`, `memory_pool`).
* Streams (`CudaPlan`): a launch from the host program is queued on the caller's current
  CuPy stream and does not wait for its kernel unless the kernel can fail at run time;
  `@async` launches (on worker threads) and direct `launch` calls run on their thread's own
  non-blocking stream and wait, so `@async` blocks overlap. CUDA events time each launch,
  read when first asked for.
* DLPack: inputs may be CuPy arrays, torch tensors or anything with `__dlpack__` /
  `__cuda_array_interface__`; they are used in place (no copy) when their dtype and layout
  fit. `to_torch` / `from_dlpack` exchange without copies.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
import time

import numpy as np

from ... import cache as kcache
from ...compiler import cir, errflag
from ...compiler.codegen import cuda as cuda_codegen
from ...compiler.types import NUMPY_NAMES
from ...errors import Span, ZynMLDeviceError, ZynMLError, ZynMLMemoryError, ZynMLRuntimeError
from ...runtime.tensor import Tensor
from ...runtime.values import MemoryPool
from ..base import DeferredKernelTime, Device, Launch, LaunchPlan

# event pairs a plan keeps for timing its launches (more launches whose times are not read
# yet get pairs of their own)
EVENT_POOL = 4

_SCALAR_NP = {"f16": np.float32, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
              "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
              "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}


def _cp():
    cp = sys.modules.get("cupy")        # a launch asks several times: skip the import machinery
    if cp is None:
        import cupy as cp
    return cp


def storage_dtype(dtype: str):
    """numpy dtype of a buffer on the device (bf16 is kept as its 16 raw bits)."""
    if dtype == "bf16":
        return np.dtype(np.uint16)
    return np.dtype(NUMPY_NAMES[dtype])


def _include_dirs() -> list:
    """Directories holding cuda_fp16.h / cuda_bf16.h for NVRTC."""
    cands = []
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "include"))
    cands += ["/usr/local/cuda/include", "/usr/cuda/include"]
    try:
        import cupy._environment as env_
        p = env_.get_cuda_path()
        if p:
            cands.append(os.path.join(p, "include"))
    except Exception:
        pass
    try:
        import importlib.util
        for pkg in ("nvidia.cuda_runtime", "nvidia.cuda_nvrtc", "nvidia.cu13", "nvidia.cu12"):
            spec = importlib.util.find_spec(pkg)
            if spec and spec.submodule_search_locations:
                for loc in spec.submodule_search_locations:
                    cands.append(os.path.join(loc, "include"))
    except Exception:
        pass
    out = []
    for c in cands:
        if os.path.exists(os.path.join(c, "cuda_fp16.h")) and c not in out:
            out.append(c)
    return out


class CompiledCuda:
    """One rendered program loaded on one device: launch it on CuPy arrays."""

    def __init__(self, device: "CudaDevice", kernel: cir.Kernel, program, module, cubin: bytes,
                 compile_seconds: float):
        self.device = device
        self.kernel = kernel
        self.program = program
        self.module = module
        self.cubin = cubin
        self.compile_seconds = compile_seconds
        self.functions = {}
        self._ptx = None

    @property
    def ptx(self) -> str:
        """NVRTC's PTX of the program, for the inspector (what runs is the cubin): made when
        first asked for, so a warm start never runs NVRTC."""
        if self._ptx is None:
            self._ptx = self.device._nvrtc(self.program, self.kernel, binary=False).decode()
        return self._ptx

    def function(self, name, dynamic_shared: int = 0):
        f = self.functions.get(name)
        if f is None:
            f = self.module.get_function(name)
            if dynamic_shared > 48 * 1024:      # more than the default needs the opt-in
                from cupy.cuda import driver
                driver.funcSetAttribute(
                    f.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_shared)
            self.functions[name] = f
        return f

    def steps_for(self, buffers):
        """The program's steps for these buffers: those reading 16 bytes at a time where
        every buffer they need so is aligned, else the element-by-element fallback."""
        prog = self.program
        if prog.unaligned_steps is not None:
            aligned = self.__dict__.get("_aligned")
            if aligned is None:
                names = [b.name for b in list(self.kernel.inputs) + [self.kernel.output]]
                aligned = self._aligned = tuple(i for i, n in enumerate(names)
                                                if n in prog.aligned_buffers)
            for i in aligned:
                if buffers[i].data.ptr % 16:
                    return prog.unaligned_steps
        return prog.steps

    def scratch(self):
        cp = _cp()
        return {name: cp.empty(max(1, n), dtype=storage_dtype(dt))
                for name, (dt, n) in self.program.scratch.items()}

    def error_flag(self):
        """The flag buffer for one launch (compiler/errflag.py): a fresh zeroed one when
        the program can fail, else one shared buffer that no kernel writes."""
        cp = _cp()
        if self.program.error_sites:
            return cp.zeros(errflag.WORDS, dtype=np.int32)
        if getattr(self, "_no_err", None) is None:
            self._no_err = cp.zeros(errflag.WORDS, dtype=np.int32)
        return self._no_err

    def scalar_args(self, scalars: dict) -> tuple:
        """The scalars the kernels take at launch (sizes are compiled in), as C values."""
        passed = self.__dict__.get("_passed")
        if passed is None:          # (name, C type) of each, found once
            passed = self._passed = tuple((s.name, _SCALAR_NP[s.dtype])
                                          for s in self.kernel.scalars
                                          if s.name not in self.program_sizes)
        if not passed:
            return ()
        with np.errstate(over="ignore"):    # a host float past f32 is its infinity, as numpy
            return tuple([c_type(scalars[name]) for name, c_type in passed])    # casts it

    def bound_steps(self, steps, scratch: dict, err) -> tuple:
        """`steps` with their functions found and their fixed arguments (scratch buffers,
        the error flag `err`, which every kernel takes last) in place: per step
        (function, grid, block, shared bytes, name, parts), a part being "buffers",
        "scalars" or a tuple of fixed arguments."""
        bound = []
        for step in steps:
            parts = []
            for a in step.args:
                if a in ("buffers", "scalars"):
                    parts.append(a)
                elif a.startswith("scratch:"):
                    parts.append((scratch[a.split(":", 1)[1]],))
                elif a.startswith("tmap:"):         # made from the buffers at each launch
                    parts.append(self.tensor_map(a[5:]))
            parts.append((err,))
            bound.append((self.function(step.func, step.smem), step.grid, step.block, step.smem,
                          step.func, tuple(parts)))
        return tuple(bound)

    def tensor_map(self, name: str):
        maps = self.__dict__.setdefault("_maps", {})
        if name not in maps:
            from .tma import TensorMapArg
            maps[name] = TensorMapArg(self.program.tensor_maps[name])
        return maps[name]

    @staticmethod
    def run_bound(bound, buffers: tuple, scalar_args: tuple, stream=None):
        """Queue the steps of `bound_steps` on `stream` for these buffers and scalars."""
        for f, grid, block, smem, name, parts in bound:
            if not all(grid):       # no block to run (no queries, rows or elements): the
                continue            # driver refuses an empty grid, or worse
            args = ()
            try:
                for p in parts:     # (a tensor map is made here: the driver may refuse it)
                    args += buffers if p == "buffers" else scalar_args if p == "scalars" else \
                        p(buffers) if callable(p) else p
                f(grid, block, args, smem, stream)      # (shared_mem, stream)
            except Exception as err:
                raise ZynMLRuntimeError(f"CUDA launch of `{name}` failed: {err}") from None

    def launch_raw(self, buffers, scalars: dict, stream=None, scratch=None, err=None):
        """Launch every step on `buffers` (inputs then output, CuPy arrays in storage dtype);
        every kernel takes the error flag `err` last."""
        scratch = scratch if scratch is not None else self.scratch()
        err = err if err is not None else self.error_flag()
        bound = self.bound_steps(self.steps_for(buffers), scratch, err)
        self.run_bound(bound, tuple(buffers), self.scalar_args(scalars), stream)
        return scratch


class CudaDevice(Device):
    kind = "gpu"
    backend = "cuda"

    def __init__(self, index: int = 0):
        cp = _cp()
        self.index = index
        self.id = f"cuda:{index}"
        props = cp.cuda.runtime.getDeviceProperties(index)
        name = props.get("name", b"CUDA GPU")
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.cc = (int(props.get("major", 0)), int(props.get("minor", 0)))
        self.memory = int(props.get("totalGlobalMem", 0))
        self.multiprocessors = int(props.get("multiProcessorCount", 0))
        self.l2_bytes = int(props.get("l2CacheSize", 0))
        self.cache = kcache.KernelCache("cuda", suffix=".cubin")
        self._sources: dict = {}
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._includes = None
        try:
            from cupy_backends.cuda.libs import nvrtc
            self._nvrtc_version = ".".join(str(x) for x in nvrtc.getVersion())
        except Exception:
            self._nvrtc_version = "?"
        self._cupy_version = str(getattr(cp, "__version__", "?"))
        try:
            self.driver_version = str(cp.cuda.runtime.driverGetVersion())
        except Exception:       # no driver query on this build: the arch and NVRTC still key it
            self.driver_version = ""

    @property
    def bulk_copy(self) -> bool:
        """Whether kernels may be fed by the copy engine: sm_90 on, with a driver that makes
        tensor maps."""
        from .tma import available
        return self.cc >= (9, 0) and available()

    # ------------------------------------------------------------------- info
    def info(self) -> dict:
        d = super().info()
        d.update(compute_capability=f"{self.cc[0]}.{self.cc[1]}", memory=self.memory,
                 memory_gb=round(self.memory / 2 ** 30, 1), multiprocessors=self.multiprocessors,
                 arch=f"sm_{self.cc[0]}{self.cc[1]}")
        return d

    @property
    def cupy_device(self):
        return _cp().cuda.Device(self.index)

    def stream(self):
        """This thread's stream on this device (non-blocking, created on first use)."""
        s = getattr(self._tls, "stream", None)
        if s is None:
            with self.cupy_device:
                s = _cp().cuda.Stream(non_blocking=True)
            self._tls.stream = s
        return s

    # ------------------------------------------------------------- compilation
    def _options(self, arch_specific: bool = False, binary: bool = True):
        """NVRTC's options: for the device's real architecture (a cubin, `binary`) or its
        virtual one (PTX, for the inspector); `arch_specific`: for a program that uses
        instructions of this architecture only (sm_90a's wgmma), its specific variant."""
        kind, suffix = ("sm" if binary else "compute"), ("a" if arch_specific else "")
        arch = f"{kind}_{self.cc[0]}{self.cc[1]}{suffix}"
        # no --use_fast_math: exp, division and sqrt keep IEEE results; multiply-adds contract
        opts = ["--std=c++17", f"--gpu-architecture={arch}", "--fmad=true", "-default-device"]
        if self._includes is None:
            self._includes = _include_dirs()
        opts += [f"-I{p}" for p in self._includes]
        return opts

    def cache_key(self, kernel: cir.Kernel, sizes: dict, options: dict | None = None):
        """The key of a kernel's module, without its source (which the disk layer adds)."""
        return kcache.CacheKey(
            "cuda", kernel.stable_hash(),
            params=kcache.parts(sizes=sizes, options=options or {}),
            # the source (part of the disk key) says which of the two option sets compiles it
            target=kcache.parts(arch=f"sm_{self.cc[0]}{self.cc[1]}", nvrtc_options=self._options(),
                                arch_specific_options=self._options(True)),
            versions=kcache.parts(nvrtc=self._nvrtc_version, cupy=self._cupy_version,
                                  driver=self.driver_version))

    def compile(self, kernel: cir.Kernel, sizes: dict, options: dict | None = None) -> CompiledCuda:
        sizes = {d: int(sizes[d]) for d in kernel.dims if d in sizes}
        key = self.cache_key(kernel, sizes, options)
        compiled = self.cache.memo(key, lambda: self._compile(kernel, sizes, options, key))
        self._sources[kernel.stable_hash()] = compiled
        return compiled

    def _compile(self, kernel, sizes, options, key) -> CompiledCuda:
        t0 = time.perf_counter()
        program = cuda_codegen.render_cuda(kernel, sizes, self.cc, options, self.multiprocessors,
                                           self.bulk_copy)
        errors = []

        def use(cubin: bytes):
            try:
                return cubin, self._load(cubin, program, kernel)
            except ZynMLDeviceError as err:
                errors.append(err)
                raise kcache.EntryUnusable(str(err)) from None

        try:
            (cubin, module), _ = self.cache.fetch(key.with_source(program.source),
                                                  lambda: self._nvrtc(program, kernel), use)
        except kcache.EntryUnusable:
            raise errors[-1] from None
        compiled = CompiledCuda(self, kernel, program, module, cubin, time.perf_counter() - t0)
        compiled.program_sizes = sizes
        return compiled

    def _nvrtc(self, program, kernel, binary: bool = True) -> bytes:
        """NVRTC's cubin for the program (`binary`), else its PTX."""
        opts = self._options(getattr(program, "arch_specific", False), binary)
        from cupy_backends.cuda.libs import nvrtc
        prog = nvrtc.createProgram(program.source, f"{program.name}.cu", (), ())
        try:
            try:
                nvrtc.compileProgram(prog, opts)
            except Exception:
                log = nvrtc.getProgramLog(prog)
                log = log.decode() if isinstance(log, bytes) else str(log)
                raise self._compile_error(program, kernel, log) from None
            out = nvrtc.getCUBIN(prog) if binary else nvrtc.getPTX(prog)
        finally:
            try:
                nvrtc.destroyProgram(prog)
            except Exception:
                pass
        return out if binary else out.rstrip(b"\0")

    def _load(self, cubin: bytes, program, kernel):
        cp = _cp()
        with self.cupy_device:
            mod = cp.cuda.function.Module()
            try:
                mod.load(cubin)
            except Exception as err:
                raise ZynMLDeviceError(f"the CUDA driver could not load the cubin of kernel "
                                       f"`{kernel.name}`: {err}") from None
        return mod

    def _compile_error(self, program, kernel, log: str) -> ZynMLError:
        lines = program.source.splitlines()
        first = None
        for m in re.finditer(r"\((\d+)\): (?:catastrophic )?error: (.*)", log):
            first = (int(m.group(1)), m.group(2))
            break
        if first is None:
            return ZynMLDeviceError(f"NVRTC could not compile kernel `{kernel.name}`:\n{log.strip()}")
        n, msg = first
        gen = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        zline = program.line_map.get(n, 0)
        text = (f"NVRTC could not compile kernel `{kernel.name}`: {msg}\n"
                f"  generated line {n}: {gen}")
        return ZynMLDeviceError(text, Span(zline, 1) if zline else None)

    # ----------------------------------------------------------------- arrays
    def _as_device_array(self, a, dtype: str):
        """A CuPy array on this device in the buffer's storage dtype (no copy when it fits)."""
        cp = _cp()
        want = storage_dtype(dtype)
        if dtype == "bf16":
            arr = self._as_cupy(a, None)
            if arr.dtype == np.uint16:
                return contiguous(arr)
            return f32_to_bf16_bits(cp.ascontiguousarray(arr, dtype=np.float32))
        arr = self._as_cupy(a, want)
        if arr.dtype != want:
            arr = arr.astype(want)
        return contiguous(arr)

    def _as_cupy(self, a, want):
        cp = _cp()
        if isinstance(a, cp.ndarray):
            if a.device.id != self.index:
                with self.cupy_device:
                    return cp.asarray(a)
            return a
        if _is_torch(a):
            import torch
            if a.dtype == torch.bfloat16:
                a = a.contiguous().view(torch.int16)
                return cp.from_dlpack(a).view(np.uint16) if a.is_cuda else cp.asarray(a.cpu().numpy()).view(np.uint16)
            if a.is_cuda:
                return cp.from_dlpack(a)
            a = a.numpy()
        if hasattr(a, "__cuda_array_interface__"):
            return cp.asarray(a)
        if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__") and not isinstance(a, np.ndarray):
            try:
                if a.__dlpack_device__()[0] == 2:       # kDLCUDA
                    return cp.from_dlpack(a)
            except Exception:
                pass
        with self.cupy_device:
            return cp.asarray(np.asarray(a))

    def from_host(self, array):
        cp = _cp()
        if isinstance(array, cp.ndarray):
            return array
        with self.cupy_device:
            out = cp.asarray(np.ascontiguousarray(array))
            # a copy from pageable memory returns before its DMA ends, and launches run on
            # non-blocking streams that do not wait for this one: wait here
            cp.cuda.get_current_stream().synchronize()
            return out

    def to_host(self, array):
        cp = _cp()
        if isinstance(array, cp.ndarray):
            return cp.asnumpy(array)
        return np.asarray(array)

    def from_dlpack(self, obj):
        return _cp().from_dlpack(obj)

    def to_torch(self, array):
        import torch
        return torch.from_dlpack(array)

    def synchronize(self):
        with self.cupy_device:
            _cp().cuda.runtime.deviceSynchronize()

    # ------------------------------------------------------------------ memory
    def allocate(self, shape, dtype: str = "f32", pinned: bool = False):
        """Zeroed memory: on the GPU from CuPy's pool, or pinned host memory (`pinned=true`)."""
        cp = _cp()
        shape = tuple(int(s) for s in shape)
        if pinned:
            import cupyx
            arr = cupyx.zeros_pinned(shape, dtype=np.dtype(NUMPY_NAMES[dtype]))
            return arr
        try:
            with self.cupy_device:
                return cp.zeros(shape, dtype=np.dtype(NUMPY_NAMES[dtype]))
        except cp.cuda.memory.OutOfMemoryError as err:
            raise ZynMLMemoryError(f"out of GPU memory on {self.id}: {err}") from None

    def memory_pool(self, size: int | None = None) -> "CudaMemoryPool":
        return CudaMemoryPool(self, size)

    # ------------------------------------------------------------------ launch
    def prepare(self, kernel: cir.Kernel, sizes: dict, params=None) -> "CudaPlan":
        """The launch plan; `params` (a schedules.Choice) compiles with those parameters."""
        return CudaPlan(self, kernel, sizes, params)

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        """Compile (or find) and launch on this thread's stream; returns once it finished."""
        return self.prepare(kernel, sizes).launch(inputs, scalars, background=True)

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        """CUDA C and PTX. Sizes are compiled in: without `sizes`, the last launch's."""
        hit = None
        if sizes is not None:
            hit = self.compile(kernel, sizes)
        else:
            hit = self._sources.get(kernel.stable_hash())
        if hit is None:
            return {"cuda": f"// kernel `{kernel.name}`: CUDA C is generated at the first launch, "
                            "with the sizes of that launch compiled in"}
        return {"cuda": hit.program.source, "ptx": hit.ptx}


class CudaPlan(LaunchPlan):
    """A compiled program with its sizes bound, launched again and again: the module,
    output shape and dtype, whether the output must start zeroed, and per stream the
    scratch buffers, error flag and kernel argument layout are found once, so a warm launch
    converts nothing it need not, allocates only the output (uninitialised where every
    element is stored) and queues the kernels.

    Streams and waiting: a launch from the host program runs on the caller's current CuPy
    stream (the default stream unless the caller picked one), so it is ordered after the
    work that made its inputs and before whatever reads its output there (CuPy, torch on
    the default stream, `to_host`), and it returns without waiting for the kernel. A program
    that can fail at run time (it has error sites, compiler/errflag.py) is waited for and its
    flag read before the launch returns, so an out-of-range index is still a
    ZynMLRuntimeError naming the ZynML line, raised by the statement that made it. The flag
    is zeroed once per stream and again only after it reported a failure. A background
    launch (an `@async` block, a direct `CudaDevice.launch`) runs on its thread's own stream
    and waits. Driver faults of a launch that did not wait (an illegal address) surface at
    the next synchronisation. Kernel times come from CUDA events, read when first asked for
    (`DeferredKernelTime`). `enqueue` is the launch without events or waiting: what a CUDA
    graph captures (backends/cuda/graph.py)."""

    def __init__(self, device: CudaDevice, kernel: cir.Kernel, sizes: dict, params=None):
        super().__init__(device, kernel, sizes)
        self.params = params
        t0 = time.perf_counter()
        with device.cupy_device:
            self.compiled = device.compile(kernel, sizes, {"params": params} if params else None)
        self.compile_s = time.perf_counter() - t0
        self.out_shape = cir.output_shape(kernel, sizes)
        self.out_dtype = storage_dtype(kernel.output.dtype)
        self.bf16_out = kernel.output.dtype == "bf16"       # kept as bits, handed out as f32
        # an output some element of which may not be stored starts at zero, as on every device
        self.zeroed = not getattr(self.compiled.program, "covers_output", False) and \
            _may_skip_elements(kernel, sizes)
        self.dtypes = tuple((b.dtype, storage_dtype(b.dtype)) for b in kernel.inputs)
        self.checked = bool(self.compiled.program.error_sites)
        # inputs the program reads where a strided view lies (ir.Program.strided_ok), and
        # the plans made for the strides met: {((input, strides), ...): CudaPlan or None}
        ok = self.compiled.program.strided_ok
        self.strided_ok = tuple(j for j, b in enumerate(kernel.inputs) if b.name in ok)
        self._strided: dict = {}
        self.views: frozenset = frozenset()     # inputs taken as views (a plan of for_views)
        self._streams: dict = {}        # stream pointer -> (scratch, flag, {steps id: bound})
        self._events: list = []         # (start, end) event pairs, reused once read
        prog = self.compiled.program
        self.geometry = {"steps": [{"kernel": s.func, "grid": s.grid, "block": s.block}
                                   for s in prog.steps], "schedule": prog.schedule}
        if prog.notes:
            self.geometry["notes"] = list(prog.notes)

    def launch(self, inputs: list, scalars: dict, background: bool = False):
        cp = _cp()
        dev = self.device
        if not background and _current_device(cp) == dev.index:    # no device to switch to
            return self._launch_on(cp, cp.cuda.get_current_stream(), inputs, scalars,
                                   self.checked, True)
        with cp.cuda.Device(dev.index):
            if not background:
                return self._launch_on(cp, cp.cuda.get_current_stream(), inputs, scalars,
                                       self.checked, True)
            stream = dev.stream()
            with stream:
                return self._launch_on(cp, stream, inputs, scalars, True)

    def fits(self, a, want, cp=None) -> bool:
        """Whether input `a` is taken as it is (a CuPy array of the storage dtype, contiguous,
        on this device): the usual case of a warm run."""
        return type(a) is (cp or _cp()).ndarray and a.dtype == want and \
            a.flags.c_contiguous and a.data.device_id == self.device.index

    def _bound(self, stream, bufs):
        """(the kernels bound to `stream`'s scratch buffers and error flag, the flag):
        launches on one stream run one after another, so they share them."""
        held = self._streams.get(stream.ptr)
        if held is None:
            held = self._streams[stream.ptr] = (self.compiled.scratch(),
                                                self.compiled.error_flag(), {})
        steps = self.compiled.steps_for(bufs)
        bound = held[2].get(id(steps))
        if bound is None:
            bound = held[2][id(steps)] = self.compiled.bound_steps(steps, held[0], held[1])
        return bound, held[1]

    def enqueue(self, cp, stream, inputs, scalars, start=None):
        """Queue the kernels on `stream`, nothing waited for: (the inputs as the kernels take
        them, the output in storage dtype, the error flag). `start`, an event, is recorded
        just before the kernels: their time leaves out the copies that made inputs
        contiguous and the output's allocation."""
        if self.strided_ok:
            strided = self.for_views(cp, inputs)
            if strided is not None:
                queued = strided.enqueue(cp, stream, inputs, scalars, start)
                self.upload_s = strided.upload_s
                return queued
        t0 = time.perf_counter()
        bufs = []
        views = self.views
        for j, (a, (dtype, want)) in enumerate(zip(inputs, self.dtypes)):
            bufs.append(a if self.fits(a, want, cp) or j in views else
                        self.device._as_device_array(a, dtype))
        self.upload_s = time.perf_counter() - t0
        try:
            out = (cp.zeros if self.zeroed else cp.empty)(self.out_shape, self.out_dtype)
        except cp.cuda.memory.OutOfMemoryError as err:
            raise ZynMLMemoryError(f"out of GPU memory on {self.device.id}: {err}") from None
        bufs.append(out)
        bufs = tuple(bufs)
        bound, flag = self._bound(stream, bufs)
        compiled = self.compiled
        args = compiled.scalar_args(scalars)
        if start is not None:
            start.record(stream)
        compiled.run_bound(bound, bufs, args, stream)
        return bufs, out, flag

    def for_views(self, cp, inputs):
        """The plan of this kernel compiled to read the strided views among `inputs` where
        they lie (the heads split from a QKV projection); None where no input is such a
        view, or the program for them would read one contiguous."""
        views = []
        for j in self.strided_ok:
            a = inputs[j]
            if type(a) is cp.ndarray and a.dtype == self.dtypes[j][1] and \
                    not a.flags.c_contiguous and a.data.device_id == self.device.index:
                strides = view_strides(a.shape, a.strides, a.itemsize)
                if strides is not None:
                    views.append((j, strides))
        return self.plan_for(tuple(views)) if views else None

    def plan_for(self, views: tuple):
        """The plan reading inputs `views` ((input, element strides), ...) where they lie,
        made once per set of strides (a CUDA graph's capture makes it before it begins:
        graph.capture), or None where its program would not read them so."""
        if views not in self._strided:
            given = dict(views)
            kernel = self.kernel
            kernel = dataclasses.replace(kernel, inputs=tuple(
                dataclasses.replace(b, strides=given[j]) if j in given else b
                for j, b in enumerate(kernel.inputs)))
            plan = CudaPlan(self.device, kernel, self.sizes, self.params)
            # the same checks (its errors are raised by this plan), every view read in place
            same = plan.compiled.program.error_sites == self.compiled.program.error_sites
            self._strided[views] = plan if same and set(given) <= set(plan.strided_ok) else None
            plan.strided_ok, plan.views = (), frozenset(given)
        return self._strided[views]

    def _launch_on(self, cp, stream, inputs, scalars, wait: bool, pooled: bool = False):
        dev = self.device
        # the events timing the launch (`event_pair`): only launches of the host program,
        # one at a time, take pooled pairs
        pair = event_pair(self._events, cp) if pooled else (cp.cuda.Event(), cp.cuda.Event())
        _, out, flag = self.enqueue(cp, stream, inputs, scalars, start=pair[0])
        pair[1].record(stream)
        if self.bf16_out:
            # (queued on `stream` after the kernel, and waited for with it: a background
            # launch's stream does not order the default stream's reads, which copied the
            # output before it was converted: zeros, or the raw bits)
            out = bf16_bits_to_f32(out)
        if wait:
            self._wait(pair[1])
            if self.bf16_out:
                stream.synchronize()
            self.check(flag)
        times = DeferredKernelTime(lambda: self._elapsed(pair), self.compile_s, self.upload_s,
                                   "gpu-events")       # (a class called with keywords is slower)
        self.compile_s = 0.0            # the first launch reports the build
        return out, Launch(self.kernel.name, dev.id, times, self.geometry)

    def _wait(self, end):
        try:
            end.synchronize()
        except Exception as err:
            raise ZynMLRuntimeError(f"kernel `{self.kernel.name}` failed on "
                                    f"{self.device.id}: {err}") from None

    def check(self, flag):
        """Raise the ZynML error a finished launch reported in `flag` (cleared for the next)."""
        if not self.checked:
            return
        words = flag.get()
        if words.any():
            flag.fill(0)
            errflag.raise_if_failed(self.compiled.program.error_sites, words, self.kernel,
                                    self.sizes)

    def _elapsed(self, pair) -> float:
        self._wait(pair[1])
        return _cp().cuda.get_elapsed_time(pair[0], pair[1]) / 1000.0


def _current_device(cp):
    """The index of this thread's current CUDA device (None where CuPy cannot tell)."""
    get = getattr(cp.cuda.runtime, "getDevice", None)
    return get() if get is not None else None


def event_pair(pool: list, cp) -> tuple:
    """(start, end) CUDA events for timing one launch: a pair of `pool` that no earlier
    launch's unread time holds (held by the list, the loop and the call's argument: 3),
    else a new one (kept in `pool` for later launches while it is small). A time holds its
    pair itself (not only its events) until it is read or dropped."""
    for pair in pool:
        if sys.getrefcount(pair) <= 3:
            return pair
    pair = (cp.cuda.Event(), cp.cuda.Event())
    if len(pool) < EVENT_POOL:
        pool.append(pair)
    return pair


class CudaMemoryPool(MemoryPool):
    """`device.memory_pool(size)`: tensors from a CuPy MemoryPool of their own, within `size`
    bytes (the device's memory without one). As the language's memory_pool: a tensor that
    `free` or `reset` released is refused at any later use (its views made before too), and
    its memory goes back to the device; it stayed usable, its memory held."""

    def __init__(self, device: CudaDevice, size: int | None):
        cp = _cp()
        self.pool = cp.cuda.MemoryPool()
        if size:
            self.pool.set_limit(size=int(size))
        else:
            with device.cupy_device:
                size = cp.cuda.runtime.memGetInfo()[1]
        super().__init__(device, size, self._zeros)

    def _zeros(self, shape, dtype: str, device_id: str) -> Tensor:
        cp = _cp()
        shape = tuple(int(s) for s in shape)
        with self.device.cupy_device, cp.cuda.using_allocator(self.pool.malloc):
            try:
                arr = cp.zeros(shape, dtype=np.dtype(NUMPY_NAMES[dtype]))
            except cp.cuda.memory.OutOfMemoryError as err:
                raise ZynMLMemoryError(f"the memory pool is full: {err}") from None
        return Tensor(arr, device_id, shape, dtype)

    def free(self, tensor):
        super().free(tensor)
        self.pool.free_all_blocks()

    def reset(self):
        super().reset()
        self.pool.free_all_blocks()

    def used_bytes(self) -> int:
        return int(self.pool.used_bytes())


def view_strides(shape, strides, itemsize: int):
    """The element strides of a view a kernel may read where it lies (cir.Buffer.strides):
    its last axis contiguous, every other stride non-negative and a whole number of 16-byte
    units (so the vector loads of rows stay aligned); an axis of one element strides 0.
    None for any other view."""
    out = []
    for k, (n, st) in enumerate(zip(shape, strides)):
        if n == 1:
            out.append(0)
        elif k == len(shape) - 1:
            if st != itemsize:
                return None
            out.append(1)
        elif st < 0 or st % 16:
            return None
        else:
            out.append(st // itemsize)
    return tuple(out)


def row_runs(shape, strides, itemsize: int):
    """(rows, bytes a row, bytes from a row to the next) of a view whose trailing axes are one
    contiguous run and whose leading axes step evenly from run to run (a slice of the last
    axis, heads split from it, batch and sequence axes over them), or None."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    run, i = itemsize, len(dims)
    while i > 0 and dims[i - 1][1] == run:
        run *= dims[i - 1][0]
        i -= 1
    if i in (0, len(dims)):             # contiguous already, or no contiguous tail
        return None
    count, pitch = dims[i - 1]
    for n, s in reversed(dims[:i - 1]):
        if s != pitch * count:
            return None
        count *= n
    return (count, run, pitch) if pitch > run else None


def contiguous(arr):
    """`arr` C-contiguous: itself, or a copy; a view of contiguous runs (row_runs) by one 2-D
    memcpy (CuPy's general copy works out every element's index: the heads split from a
    QKV projection took 0.032 ms a copy that way, 0.020 by the 2-D memcpy on an H100)."""
    cp = _cp()
    if arr.flags.c_contiguous:
        return arr
    runtime = cp.cuda.runtime
    rows = row_runs(arr.shape, arr.strides, arr.itemsize) if hasattr(runtime, "memcpy2DAsync") else None
    if rows is None:
        return cp.ascontiguousarray(arr)
    count, width, pitch = rows
    out = cp.empty(arr.shape, arr.dtype)
    runtime.memcpy2DAsync(out.data.ptr, width, arr.data.ptr, pitch, width, count,
                          runtime.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr)
    return out


def f32_to_bf16_bits(x):
    """float32 CuPy array -> bf16 bits (uint16), rounded to nearest even."""
    cp = _cp()
    u = x.view(cp.uint32)
    r = (u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16
    nan = cp.isnan(x)
    r = cp.where(nan, cp.uint32(0x7FC0), r)
    return r.astype(cp.uint16)


def bf16_bits_to_f32(b):
    cp = _cp()
    return (b.astype(cp.uint32) << 16).view(cp.float32)


def _may_skip_elements(kernel: cir.Kernel, sizes: dict) -> bool:
    """Whether some output element may not be stored (a conditional store, an accumulation,
    a loop not over the whole axis): such an output is allocated zeroed."""
    try:
        from ...compiler.fusion import _stores_once     # the rule fusion uses for epilogues
        return bool(_stores_once(kernel, sizes))
    except Exception:       # a size it cannot evaluate: assume the worst
        return True


def _is_torch(a) -> bool:
    return type(a).__module__.split(".")[0] == "torch"
