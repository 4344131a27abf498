"""`cpu:native`: runs CIR kernels as C++ compiled by the system compiler, loaded with ctypes.

* Compiler: `$CXX`, else `$CC`, else the first of c++, g++, clang++, cc, gcc, clang on the
  PATH; the source is compiled as C++17 (`-x c++`), with `-O3 -march=native -fPIC -shared`
  (with AVX-512, `-mprefer-vector-width=512`: WIDE_VECTORS) and `-fopenmp` where the
  compiler takes them (probed once), and `-fwrapv` (signed integers
  wrap, as on every other device). `-ffp-contract=off`: no product and sum is fused into
  an fma the source does not ask for (the GEMM micro-kernel's are asked for), so elementwise
  arithmetic rounds as numpy's. `-fno-math-errno` (no kernel
  reads errno) lets loops of math functions vectorise, and where glibc's vector math library
  links (a probe) the kernels call it (`ZYN_LIBMVEC`: codegen/dialects/cpp.py). No
  -ffast-math: a loop that only updates sums, maxima or minima (ir.For.reduce) keeps a
  partial one per vector lane, combined in an order fixed at compile time (the same result
  at every launch, whatever the number of threads); nothing else is reassociated; NaN
  propagates.
* Probes: what the compiler takes (the flags above, its version, its expansion of
  `-march=native`) is found by running it (about a second) and kept in the cache's
  `probes` folder, keyed by the compiler's command, its executables' resolved paths, sizes
  and modification times, and this machine's CPU model and features: a new process reads it
  instead of running the compiler; an upgraded compiler (or another CPU) is probed again.
* Cache (`zynbook/cache.py`): `codegen/c.py` bakes the sizes into the source; the mapped
  library is kept in memory by (CIR hash, sizes, compiler, resolved flags, versions) and its
  bytes on disk under `$ZYNBOOK_CACHE_DIR/cpu` (default `~/.cache/zynbook/cpu`) by that key
  plus the source. The key holds what `-march=native` resolves to on this machine (the
  compiler's own expansion), so a cache folder shared between machines never hands one a
  library built for another CPU. Entries are checksummed; the verified bytes are what ctypes
  maps; a bad entry is rebuilt.
* Errors: compiler failures become ZynML errors that show the generated line and point at
  the ZynML line it came from.
* Memory: numpy arrays on the host; inputs are used in place when C-contiguous and of the
  buffer's dtype. Outputs come from the device's pool (buffers.py): the memory of an earlier
  output nothing references any more is handed out again, warm, instead of a fresh array
  whose pages fault in during the kernel; it is zeroed first only where the kernel may leave
  an element unstored.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ... import cache as kcache
from ...runtime.cancel import call_native
from ...compiler import cir, errflag
from ...compiler.codegen import c as c_codegen
from ...compiler.codegen.dialects.cpp import (LIBMVEC_MACRO, SERIAL_WORD, VECTOR_MATH,
                                              vector_math_declarations)
from ...compiler.targets import host_simd_bytes
from ...compiler.types import NUMPY_NAMES
from ...errors import Span, ZynMLDeviceError
from ..base import Device, HostMemory, Launch, LaunchPlan, LaunchTimes
from .buffers import BufferPool

_CANDIDATES = ("c++", "g++", "clang++", "cc", "gcc", "clang")


def find_compiler() -> list | None:
    """The compiler command ($CXX, $CC, or one found on the PATH), or None."""
    for env in ("CXX", "CC"):
        value = os.environ.get(env, "").strip()
        if value:
            parts = shlex.split(value)
            path = shutil.which(parts[0])
            if path:
                return [path] + parts[1:]
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return [path]
    return None


def resolve_target_flags(compiler: list, flags: list) -> tuple:
    """What the compiler makes of `flags` on this machine: the driver's expansion of
    `-march=native` (GCC: `-march=<cpu>` and every `-m<feature>`, `--param` cache sizes;
    Clang: `-target-cpu`, `-target-feature`), read from `-###`. Empty when it says nothing."""
    try:
        res = subprocess.run(compiler + [f for f in flags if f not in ("-shared",)]
                             + ["-###", "-c", os.devnull, "-o", os.devnull],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    out = []
    for line in (res.stderr + res.stdout).splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if not words or "-###" in words:
            continue
        for i, w in enumerate(words):
            if w in ("--param", "-target-cpu", "-target-feature", "-tune-cpu") and i + 1 < len(words):
                out.append(f"{w} {words[i + 1]}")
            elif (w.startswith("-march=") or w.startswith("-mtune=") or w.startswith("-mcpu=")
                  or (w.startswith("-m") and w[2:3].isalnum() and "=" not in w
                      and not w.startswith("-mllvm"))):
                out.append(w)
    return tuple(dict.fromkeys(out))


def compiler_version(compiler: list) -> str:
    """The first line of the compiler's `--version`, or "unknown"."""
    try:
        res = subprocess.run(compiler + ["--version"], capture_output=True, text=True,
                             timeout=60)
        return (res.stdout or res.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _executable_identity(word: str):
    """(resolved path, size, mtime in ns) of the executable `word` names, or None for a
    word that names none (an option)."""
    if word.startswith("-"):
        return None
    path = shutil.which(word)
    if path is None:
        return None
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_size, st.st_mtime_ns)


_CPU_FIELDS = ("vendor_id", "model name", "cpu family", "model", "stepping", "flags",
               "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part")


def cpu_model() -> dict:
    """This CPU's model and features (what `-march=native` resolves from): the first
    processor's fields of /proc/cpuinfo, else what `platform` says."""
    found = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if found:
                        break
                    continue
                name, _, value = line.partition(":")
                name = name.strip()
                if name in _CPU_FIELDS:
                    found[name] = value.strip()
    except OSError:
        pass
    found.update(machine=platform.machine(), system=platform.system())
    if "model name" not in found and "CPU part" not in found:
        found["release"] = platform.version()
    return found


def storage_dtype(dtype: str):
    return np.dtype(NUMPY_NAMES[dtype])


_PROBE = """#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
extern "C" int zyn_probe(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
"""



def _vector_math_probe() -> str:
    """A library whose loops call every function the kernels may call in vector form."""
    body = []
    for fn in VECTOR_MATH:
        for t, suffix in (("float", "f"), ("double", "")):
            v = t[0]
            args = f"{v}x[i], {v}x[i]" if fn == "pow" else f"{v}x[i]"
            body.append(f"    for (int i = 0; i < n; ++i) {v}y[i] = {fn}{suffix}({args});")
    return ("#include <math.h>\n" + vector_math_declarations() + "\n"
            'extern "C" void zyn_probe_math(const float* __restrict__ fx, float* __restrict__ fy, '
            "const double* __restrict__ dx, double* __restrict__ dy, int n) {\n"
            + "\n".join(body) + "\n}\n"
            'extern "C" int zyn_probe(void) { return 1; }\n')


# -fwrapv: signed integers wrap on overflow, as the reference's and every GPU's do; without
# it an overflowing loop (`s += 2000000000` five times) is undefined, and GCC compiled one
# that never ended
# seconds a compile at -O3 may take before it is made again at -O1: GCC 13.3 (Ubuntu 24.04)
# never finished -O3 of a running max over a row's tiles in steps of 7, where GCC 12 takes
# 0.2 s (every kernel here compiles in seconds)
OPTIMISE_SECONDS = 60

# -ffp-contract=off: each product and sum rounded on its own, as numpy's: GCC fuses a * b + c
# into one fma wherever -march=native has FMA, even under -std=c++17 (x * x - y * y of x == y
# was 1e-8, not 0); the GEMM micro-kernel asks for its fmas by name (schedules/cpu_gemm.py)
BASE_FLAGS = ("-x", "c++", "-std=c++17", "-O3", "-fPIC", "-shared", "-fno-exceptions",
              "-fno-rtti", "-fno-math-errno", "-fwrapv", "-ffp-contract=off", "-w")
# with AVX-512, its 64-byte vectors, which the schedules size their register tiles for
# (Target.simd_bytes): GCC's -march=native on Intel server CPUs prefers 32-byte ones, so the
# GEMM micro-kernel's 8 x 32 sums took 32 registers of 32 bytes and spilled (a 16-core
# Sapphire Rapids, f32 1024^3: 7.6 ms, 2.5 ms with 64-byte vectors)
WIDE_VECTORS = "-mprefer-vector-width=512"


def probe_key(compiler: list) -> kcache.CacheKey:
    """The probe cache's key of `compiler` on this machine: its command, each executable's
    resolved path, size and mtime (a `ccache g++` command names both), the probes'
    sources and the CPU."""
    sources = _PROBE + _vector_math_probe() + " ".join(BASE_FLAGS + (WIDE_VECTORS,))
    return kcache.CacheKey(
        "probe", hashlib.sha256(sources.encode()).hexdigest(),
        params=kcache.parts(command=compiler),
        target=kcache.parts(cpu=cpu_model()),
        versions=kcache.parts(executables=[_executable_identity(w) for w in compiler]))


def _valid_probe(record: dict) -> bool:
    """Whether a cached probe record has every field with its type."""
    def strings(v):
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    return (strings(record.get("flags")) and isinstance(record.get("openmp"), bool)
            and strings(record.get("libs")) and strings(record.get("resolved"))
            and isinstance(record.get("version"), str))


class CompiledC:
    """A mapped library: `path` is its disk cache entry (None when kept in memory only)."""

    def __init__(self, program, lib, fn, path, compile_s):
        self.program = program
        self.lib = lib
        self.fn = fn
        self.path = path
        self.compile_s = compile_s


class NativeCpuDevice(HostMemory, Device):
    id = "cpu:native"
    kind = "cpu"
    backend = "c"

    def __init__(self, compiler: list):
        self.compiler = list(compiler)
        self.name = f"{platform.processor() or platform.machine() or 'CPU'} (compiled C++)"
        self._lock = threading.Lock()
        self.cache = kcache.KernelCache("cpu", suffix=".so")
        self._flags: list | None = None
        self._resolved: tuple | None = None
        self._target: tuple | None = None          # the key's target and versions parts
        self._openmp = False
        self._libs: list = []                      # libraries the kernels link
        self._version: str | None = None
        self._probed: dict | None = None           # what the compiler's probes found
        self.buffers = BufferPool()                # outputs' memory, reused (buffers.py)

    # ----------------------------------------------------------------- compiler
    def info(self) -> dict:
        d = super().info()
        d["cores"] = os.cpu_count()
        d["compiler"] = os.path.basename(self.compiler[0])
        return d

    def version(self) -> str:
        if self._version is None:
            try:
                self._version = self._toolchain()["version"]
            except ZynMLDeviceError:        # a compiler that builds no library has a version
                self._version = compiler_version(self.compiler)
        return self._version

    def flags(self) -> list:
        """Compiler flags: the base ones, plus -march=native and -fopenmp where they work."""
        if self._flags is None:
            probed = self._toolchain()
            self._openmp, self._libs = probed["openmp"], list(probed["libs"])
            self._flags = list(probed["flags"])         # set last: the others are ready
        return self._flags

    def resolved_flags(self) -> tuple:
        """The flags as this machine's compiler resolves them (see resolve_target_flags)."""
        if self._resolved is None:
            self._resolved = tuple(self._toolchain()["resolved"])
        return self._resolved

    def _toolchain(self) -> dict:
        """What probing the compiler finds (flags, openmp, libs, resolved, version): read
        from the probe cache where this compiler was probed on this CPU before, else probed
        and stored. A failed probe raises and stores nothing."""
        with self._lock:
            if self._probed is None:
                key = probe_key(self.compiler)
                probed = kcache.load_json(kcache.PROBES, key, _valid_probe)
                if probed is None:
                    probed = self._run_probes()
                    kcache.store_json(kcache.PROBES, key, probed)
                self._probed = probed
            return self._probed

    def _run_probes(self) -> dict:
        flags, openmp, libs = list(BASE_FLAGS), False, []
        if self._probe(flags + ["-march=native"]):
            flags.append("-march=native")
            if host_simd_bytes() == 64 and self._probe(flags + [WIDE_VECTORS]):
                flags.append(WIDE_VECTORS)
        if self._probe(flags + ["-fopenmp"]):
            flags.append("-fopenmp")
            openmp = True
        elif not self._probe(flags):
            raise ZynMLDeviceError(f"the C++ compiler `{' '.join(self.compiler)}` cannot "
                                   "build a shared library")
        mvec = [f"-D{LIBMVEC_MACRO}"]
        if self._probe(flags + mvec, _vector_math_probe(), ["-lmvec", "-Wl,--no-undefined"]):
            flags += mvec
            libs = ["-lmvec"]
        return {"flags": flags, "openmp": openmp, "libs": libs,
                "resolved": list(resolve_target_flags(self.compiler, flags)),
                "version": compiler_version(self.compiler)}

    def cache_key(self, kernel: cir.Kernel, sizes: dict, params=None) -> kcache.CacheKey:
        """The key of a kernel's library, without its source (which the disk layer adds);
        `params` (a schedules.Choice) where the schedule's parameters are given."""
        if self._target is None:
            flags = self.flags()
            self._target = (kcache.parts(machine=platform.machine(), system=platform.system(),
                                         compiler=self.compiler, flags=flags,
                                         resolved=self.resolved_flags()),
                            kcache.parts(compiler=self.version()))
        target, versions = self._target
        return kcache.CacheKey("cpu", kernel.stable_hash(),
                               params=kcache.parts(sizes=sizes, openmp=self._openmp,
                                                   **({"choice": params} if params else {})),
                               target=target, versions=versions)

    def _probe(self, flags, source: str = _PROBE, libs=()) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.cpp"
            src.write_text(source)
            out = Path(tmp) / "probe.so"
            try:
                res = subprocess.run(self.compiler + flags + ["-o", str(out), str(src), *libs, "-lm"],
                                     capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError):
                return False
            if res.returncode != 0:
                return False
            try:
                lib = ctypes.CDLL(str(out))
                return lib.zyn_probe() >= 1
            except (OSError, AttributeError):
                return False

    # ------------------------------------------------------------------ compile
    def compile(self, kernel: cir.Kernel, sizes: dict, params=None) -> CompiledC:
        sizes = {d: int(sizes[d]) for d in kernel.dims if d in sizes}
        key = self.cache_key(kernel, sizes, params)
        return self.cache.memo(key, lambda: self._compile(kernel, sizes, key, params))

    def _compile(self, kernel: cir.Kernel, sizes: dict, key: kcache.CacheKey, params=None) -> CompiledC:
        flags = self.flags()
        t0 = time.perf_counter()
        program = c_codegen.render_program(kernel, sizes, openmp=self._openmp, params=params)
        full = key.with_source(program.source)
        try:
            lib, path = self.cache.fetch(full, lambda: self._build(program, kernel, flags),
                                         self._use)
        except kcache.EntryUnusable as err:
            raise ZynMLDeviceError(f"the compiled library of kernel `{kernel.name}` does not "
                                   f"load: {err}") from None
        fn = lib.zyn_kernel
        fn.restype = None
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double),
                       ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_int)]
        return CompiledC(program, lib, fn, path, time.perf_counter() - t0)

    def _use(self, payload: bytes):
        """Map verified library bytes; EntryUnusable when they do not load as a kernel."""
        lib = kcache.load_library(payload, self.cache.folder(), ".so")
        if not hasattr(lib, "zyn_kernel"):
            raise kcache.EntryUnusable("the library has no zyn_kernel")
        return lib

    def _build(self, program, kernel, flags) -> bytes:
        """Compile the program; the shared library's bytes."""
        tmp_dir = Path(tempfile.mkdtemp(prefix="zynbook-c-"))
        try:
            src = tmp_dir / "kernel.cpp"
            src.write_text(program.source)
            out = tmp_dir / "kernel.so"

            def compile_with(fl, seconds):
                return subprocess.run(self.compiler + fl + ["-o", str(out), str(src), *self._libs, "-lm"],
                                      capture_output=True, text=True, timeout=seconds)
            try:
                try:
                    res = compile_with(flags, OPTIMISE_SECONDS)
                except subprocess.TimeoutExpired:
                    res = compile_with([f if f != "-O3" else "-O1" for f in flags], 600)
            except (OSError, subprocess.SubprocessError) as err:
                raise ZynMLDeviceError(f"the C++ compiler did not run for kernel "
                                       f"`{kernel.name}`: {err}") from None
            if res.returncode != 0:
                raise self._compile_error(program, kernel, res.stderr or res.stdout)
            try:
                return out.read_bytes()
            except OSError as err:
                raise ZynMLDeviceError(f"the compiled library of kernel `{kernel.name}` "
                                       f"cannot be read: {err}") from None
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)

    def _compile_error(self, program, kernel, log: str) -> ZynMLDeviceError:
        lines = program.source.splitlines()
        m = re.search(r"kernel\.cpp:(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)", log)
        if m is None:
            return ZynMLDeviceError(f"the C++ compiler could not compile kernel "
                                    f"`{kernel.name}`:\n{log.strip()[:4000]}")
        n, msg = int(m.group(1)), m.group(2).strip()
        gen = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        zline = program.line_map.get(n, 0)
        text = (f"the C++ compiler could not compile kernel `{kernel.name}`: {msg}\n"
                f"  generated line {n}: {gen}")
        return ZynMLDeviceError(text, Span(zline, 1) if zline else None)

    # ------------------------------------------------------------------- launch
    def prepare(self, kernel: cir.Kernel, sizes: dict, params=None) -> "NativePlan":
        """The launch plan; `params` (a schedules.Choice) compiles with those parameters."""
        return NativePlan(self, kernel, sizes, params)

    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        return self.prepare(kernel, sizes).launch(inputs, scalars)

    def generated_source(self, kernel: cir.Kernel, sizes: dict | None = None) -> dict:
        if sizes is None:
            return {"c": c_codegen.render(kernel, None)}
        return {"c": c_codegen.render_program(kernel, sizes, openmp=self._openmp_guess()).source}

    def _openmp_guess(self) -> bool:
        try:
            self.flags()
        except ZynMLDeviceError:
            return False
        return self._openmp



# a kernel that finished within this the last time runs on the calling thread: an interrupt
# waits for it at most about this long, which no one notices, while waiting for it in a
# worker (so an interrupt can stop the wait) costs two hand-offs between threads: tens of
# microseconds on an idle machine, up to a millisecond where the cores are idle vCPUs of a
# virtual machine that must be woken (a layer norm of 4096x1024 took 1.0 ms on the calling
# thread and 1.5 ms through a worker, between numpy calls, on a 2-core VM). Longer kernels
# keep the worker: the hand-off is a small part of them, and a 1024 matmul between numpy's
# (whose BLAS threads spin on) took 8 to 12 ms through it, 11 ms on the calling thread.
_DIRECT_CALL_SECONDS = 5e-3
# a launch whose buffers hold fewer elements than this in all runs its blocks on the calling
# thread (SERIAL_WORD): waking the other cores' threads and joining them costs more than the
# work (tens of microseconds, milliseconds where other processes hold the cores)
_SERIAL_WORK = 1 << 15
# contention: other processes' or libraries' threads may hold the cores (a BLAS's workers
# spin for a while after each call). A launch on every core then waits, at the fork-join of
# its blocks, for a thread of ours that gets no core, and can take many times as long as on
# the calling thread alone. So a plan that runs on every core also learns how long it takes
# alone: its third launch runs alone (unless the tuner times it), and so does the one after
# a launch that took more than _CONTENDED times the fastest on every core and
# _CONTENDED_LOSS seconds more. After a launch on every core that took more than _SLOWER
# times the last one alone, the next launches run alone: 1, then 2, 4, ... up to _MAX_ALONE
# while every core stays that slow, before it tries every core again. The blocks and their
# order are the same on any number of threads, and so are the results.
_CONTENDED = 2.0
_SLOWER = 1.5
_CONTENDED_LOSS = 50e-6
_MAX_ALONE = 16


class NativePlan(LaunchPlan):
    """A compiled kernel with its sizes bound: the library, the buffers' dtypes and shapes
    and the scalar arguments' order, found once; a launch checks and passes pointers."""

    def __init__(self, device: NativeCpuDevice, kernel: cir.Kernel, sizes: dict, params=None):
        super().__init__(device, kernel, sizes)
        t0 = time.perf_counter()
        built = device.cache.misses
        self.compiled = device.compile(kernel, sizes, params)
        self.compile_s = time.perf_counter() - t0 if device.cache.misses != built else 0.0
        bound = {k: int(v) for k, v in sizes.items()}
        self.buffers = []
        for b in kernel.inputs:
            shape = tuple(cir.eval_dim(d, bound) for d in b.shape)
            self.buffers.append((b.name, storage_dtype(b.dtype), shape,
                                 int(np.prod(shape, dtype=np.int64))))
        self.out_shape = cir.output_shape(kernel, bound)
        self.out_dtype = storage_dtype(kernel.output.dtype)
        # an output some element of which the kernel may not store starts at zero
        self.zeroed = _may_skip_elements(kernel, bound)
        self.out_nbytes = int(np.prod(self.out_shape, dtype=np.int64)) * self.out_dtype.itemsize
        args = self.compiled.program.args
        self.float_names = [n for n, kind, _ in args if kind == "f"]
        self.int_names = [n for n, kind, _ in args if kind == "i"]
        self.pointers = ctypes.c_void_p * (len(kernel.inputs) + 1)
        self.geometry = {"executor": "compiled C++", "schedule": self.compiled.program.schedule,
                         "openmp": self.compiled.program.openmp}
        self.quick = False
        elements = sum(b[3] for b in self.buffers) + int(np.prod(self.out_shape, dtype=np.int64))
        self.serial = self.compiled.program.openmp and elements < _SERIAL_WORK
        self.geometry["threads"] = "one" if self.serial or not self.compiled.program.openmp \
            else "every core"
        self.adapts = self.compiled.program.openmp and not self.serial
        self.best_s = float("inf")      # the fastest launch on every core
        self.alone_s = None             # the last launch on the calling thread alone
        self.alone = 0                  # launches to run alone before every core again
        self.backoff = 1
        self.on_every_core = 0          # launches so far on every core
        # a candidate the tuner times (its parameters given) learns its time alone only
        # after a slow launch: the launches it times all run on every core
        self.probes = params is None

    def _array(self, a, name, dtype, shape, size):
        arr = np.ascontiguousarray(self.device.from_host(a), dtype=dtype)
        if arr.size != size:
            raise ZynMLDeviceError(f"input `{name}` of kernel `{self.kernel.name}` has shape "
                                   f"{arr.shape}, the kernel expects {shape}")
        return arr

    def launch(self, inputs: list, scalars: dict, background: bool = False):
        t1 = time.perf_counter()
        arrays = [self._array(a, *spec) for a, spec in zip(inputs, self.buffers)]
        out = self.device.buffers.output(self.out_shape, self.out_dtype, self.zeroed,
                                         self.out_nbytes)
        ptrs = self.pointers(*[a.ctypes.data for a in arrays], out.ctypes.data)
        fvals = [float(scalars[n]) for n in self.float_names]
        ivals = [int(scalars[n]) for n in self.int_names]
        fargs = (ctypes.c_double * max(1, len(fvals)))(*fvals)
        iargs = (ctypes.c_longlong * max(1, len(ivals)))(*ivals)
        self._check_block_memory()
        err = (ctypes.c_int * (SERIAL_WORD + 1))()
        alone = self.serial or self.alone > 0
        err[SERIAL_WORD] = alone
        t2 = time.perf_counter()
        self._call(ptrs, fargs, iargs, err, keep=(arrays, out, self.compiled, err))
        t3 = time.perf_counter()
        self.quick = t3 - t2 < _DIRECT_CALL_SECONDS
        geometry = self.geometry
        if self.adapts:
            self._contention(alone, t3 - t2)
            if alone:
                geometry = dict(geometry, threads="one (the cores were busy)")
        errflag.raise_if_failed(self.compiled.program.error_sites, err, self.kernel, self.sizes)
        times = LaunchTimes(compile=self.compile_s, upload=t2 - t1, kernel=t3 - t2,
                            download=0.0, source="host-clock")
        self.compile_s = 0.0            # the first launch reports the build
        return out, Launch(self.kernel.name, self.device.id, times, geometry)

    def _check_block_memory(self):
        """A ZynMLMemoryError for block memory (shared arrays past the cache, one copy a
        block, allocated by the entry point) past what the machine has available: calloc
        would succeed lazily and the process be killed as the kernel touched it."""
        from ...runtime.builtins import check_host_bytes
        need = self.compiled.program.scratch_bytes
        if need:
            check_host_bytes(need, lambda size: f"kernel `{self.kernel.name}` needs {size} for "
                                                "its shared arrays (a copy for each block)")

    def _contention(self, alone: bool, seconds: float):
        """Whether the next launches run alone (see _CONTENDED), after one that took
        `seconds`, `alone` or on every core."""
        if alone:
            self.alone_s = seconds
            self.alone -= 1
            return
        self.on_every_core += 1
        if seconds < self.best_s:
            self.best_s = seconds
        if self.alone_s is None:
            slower = (self.probes and self.on_every_core == 2) or (
                seconds > _CONTENDED * self.best_s and seconds - self.best_s > _CONTENDED_LOSS)
        else:
            slower = seconds > _SLOWER * self.alone_s
        if slower:
            self.alone = self.backoff
            self.backoff = min(2 * self.backoff, _MAX_ALONE)
        else:
            self.backoff = 1

    def _call(self, ptrs, fargs, iargs, err, keep):
        fn = self.compiled.fn
        if self.quick:
            fn(ptrs, fargs, iargs, err)
            return
        # in a worker an interrupt or a cancelled job can abandon (runtime/cancel.py); then
        # the cancel word tells the kernel's outer loops to skip what is left
        try:
            call_native(fn, ptrs, fargs, iargs, err, keep=keep)
        except BaseException:
            err[c_codegen.CANCEL_WORD] = 1
            raise


def _may_skip_elements(kernel: cir.Kernel, sizes: dict) -> bool:
    """Whether some output element may not be stored (a conditional store, an accumulation,
    a loop not over the whole axis, a reduction's result): such an output starts zeroed.
    The rule is the one fusion uses for epilogues (CUDA zeroes by it too): where the
    kernel stores every element, so does each CPU schedule (tests/test_cpu_buffers.py runs
    every kernel type into poisoned memory)."""
    try:
        from ...compiler.fusion import _stores_once
        return bool(_stores_once(kernel, sizes))
    except Exception:       # a size it cannot evaluate: assume the worst
        return True


def discover() -> list:
    compiler = find_compiler()
    if compiler is None:
        return []
    return [NativeCpuDevice(compiler)]
