"""`cpu:native`: runs CIR kernels as C++ compiled by the system compiler, loaded with ctypes.

* Compiler: `$CXX`, else `$CC`, else the first of c++, g++, clang++, cc, gcc, clang on the
  PATH; the source is compiled as C++17 (`-x c++`), with `-O3 -march=native -fPIC -shared`
  and `-fopenmp` where the compiler takes them (probed once).
* Cache: `codegen/c.py` bakes the sizes into the source; the shared library is cached in
  memory by (CIR hash, sizes) and on disk under `$ZYNBOOK_CACHE_DIR/cpu` (default
  `~/.cache/zynbook/cpu`) by a hash of (source, compiler version, flags). Every library
  carries its own key; an entry that does not load or carries another key is rebuilt.
* Errors: compiler failures become ZynML errors that show the generated line and point at
  the ZynML line it came from.
* Memory: numpy arrays on the host; inputs are used in place when C-contiguous and of the
  buffer's dtype.
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

from ...compiler import cir
from ...compiler.codegen import c as c_codegen
from ...compiler.types import NUMPY_NAMES
from ...errors import Span, ZynMLDeviceError
from ..base import Device, Launch, LaunchTimes

# libraries this process has mapped: path -> (device, inode) of the file then
_LOADED: dict = {}
_LOADED_LOCK = threading.Lock()

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


def cache_dir() -> Path:
    base = os.environ.get("ZYNBOOK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "zynbook")
    p = Path(base) / "cpu"
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    return p


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


class CompiledC:
    def __init__(self, program, lib, fn, path, compile_s):
        self.program = program
        self.lib = lib
        self.fn = fn
        self.path = path
        self.compile_s = compile_s


class NativeCpuDevice(Device):
    id = "cpu:native"
    kind = "cpu"
    backend = "c"

    def __init__(self, compiler: list):
        self.compiler = list(compiler)
        self.name = f"{platform.processor() or platform.machine() or 'CPU'} (compiled C++)"
        self._lock = threading.Lock()
        self._compiled: dict = {}
        self._key_locks: dict = {}
        self._flags: list | None = None
        self._openmp = False
        self._version: str | None = None

    # ----------------------------------------------------------------- compiler
    def info(self) -> dict:
        d = super().info()
        d["cores"] = os.cpu_count()
        d["compiler"] = os.path.basename(self.compiler[0])
        return d

    def version(self) -> str:
        if self._version is None:
            try:
                res = subprocess.run(self.compiler + ["--version"], capture_output=True,
                                     text=True, timeout=60)
                self._version = (res.stdout or res.stderr).strip().splitlines()[0]
            except (OSError, subprocess.SubprocessError, IndexError):
                self._version = "unknown"
        return self._version

    def flags(self) -> list:
        """Compiler flags: the base ones, plus -march=native and -fopenmp where they work."""
        with self._lock:
            if self._flags is not None:
                return self._flags
            base = ["-x", "c++", "-std=c++17", "-O3", "-fPIC", "-shared", "-fno-exceptions",
                    "-fno-rtti", "-w"]
            flags = list(base)
            if self._probe(flags + ["-march=native"]):
                flags.append("-march=native")
            if self._probe(flags + ["-fopenmp"]):
                flags.append("-fopenmp")
                self._openmp = True
            elif not self._probe(flags):
                raise ZynMLDeviceError(f"the C++ compiler `{' '.join(self.compiler)}` cannot "
                                       "build a shared library")
            self._flags = flags
            return flags

    def _probe(self, flags) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.cpp"
            src.write_text(_PROBE)
            out = Path(tmp) / "probe.so"
            try:
                res = subprocess.run(self.compiler + flags + ["-o", str(out), str(src), "-lm"],
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
    def compile(self, kernel: cir.Kernel, sizes: dict) -> CompiledC:
        sizes = {d: int(sizes[d]) for d in kernel.dims if d in sizes}
        key = (kernel.stable_hash(), tuple(sorted(sizes.items())))
        hit = self._compiled.get(key)
        if hit is not None:
            return hit
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self._compiled.get(key)
            if hit is not None:
                return hit
            flags = self.flags()
            t0 = time.perf_counter()
            program = c_codegen.render_program(kernel, sizes, openmp=self._openmp)
            lib, path = self._library(program, kernel, flags)
            fn = lib.zyn_kernel
            fn.restype = None
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double),
                           ctypes.POINTER(ctypes.c_longlong)]
            compiled = CompiledC(program, lib, fn, path, time.perf_counter() - t0)
            self._compiled[key] = compiled
            return compiled

    def _library(self, program, kernel, flags):
        digest = hashlib.sha256("\0".join([program.source, " ".join(self.compiler), " ".join(flags),
                                           self.version()]).encode()).hexdigest()[:32]
        stamped = (program.source + f'\nextern "C" const char* zyn_cache_key(void) '
                   f'{{ return "{digest}"; }}\n')
        path = cache_dir() / f"{digest}.so"
        if path.exists():
            lib = self._load(path, digest)
            if lib is not None:
                return lib, path
            try:
                path.unlink()
            except OSError:
                pass
        self._build(stamped, path, program, kernel, flags)
        lib = self._load(path, digest)
        if lib is None:
            raise ZynMLDeviceError(f"the compiled library of kernel `{kernel.name}` does not "
                                   f"load: {path}")
        return lib, path

    def _load(self, path: Path, digest: str):
        """The library at `path` if it loads and carries `digest`, else None."""
        try:
            st = path.stat()
        except OSError:
            return None
        ident = (st.st_dev, st.st_ino)
        target = path
        with _LOADED_LOCK:
            seen = _LOADED.get(str(path))
        if seen is not None and seen != ident:
            # this process mapped another file under that name (dlopen would return it):
            # load this one under a name of its own
            target = path.with_name(f"{path.stem}.{os.getpid()}.{time.monotonic_ns()}.so")
            try:
                shutil.copyfile(path, target)
            except OSError:
                return None
        lib = None
        try:
            lib = ctypes.CDLL(str(target))
            if target == path:
                with _LOADED_LOCK:
                    _LOADED[str(path)] = ident
            key_fn = lib.zyn_cache_key
            key_fn.restype = ctypes.c_char_p
            ok = key_fn() == digest.encode() and hasattr(lib, "zyn_kernel")
        except (OSError, AttributeError):
            ok = False
        finally:
            if target != path:
                try:
                    target.unlink()
                except OSError:
                    pass
        return lib if ok else None

    def _build(self, source: str, path: Path, program, kernel, flags):
        tmp_dir = Path(tempfile.mkdtemp(prefix="zynbook-c-"))
        try:
            src = tmp_dir / "kernel.cpp"
            src.write_text(source)
            out = tmp_dir / "kernel.so"
            try:
                res = subprocess.run(self.compiler + flags + ["-o", str(out), str(src), "-lm"],
                                     capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as err:
                raise ZynMLDeviceError(f"the C++ compiler did not run for kernel "
                                       f"`{kernel.name}`: {err}") from None
            if res.returncode != 0:
                raise self._compile_error(program, kernel, res.stderr or res.stdout)
            tmp_final = path.with_name(f"{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
            shutil.copyfile(out, tmp_final)
            os.replace(tmp_final, path)
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
    def launch(self, kernel: cir.Kernel, inputs: list, sizes: dict, scalars: dict):
        t0 = time.perf_counter()
        had = (kernel.stable_hash(), tuple(sorted((d, int(sizes[d])) for d in kernel.dims
                                                  if d in sizes))) in self._compiled
        compiled = self.compile(kernel, sizes)
        t1 = time.perf_counter()
        bound = {k: int(v) for k, v in sizes.items()}
        arrays = []
        for a, b in zip(inputs, kernel.inputs):
            arr = np.ascontiguousarray(self.from_host(a), dtype=storage_dtype(b.dtype))
            shape = tuple(cir.eval_dim(d, bound) for d in b.shape)
            if arr.size != int(np.prod(shape, dtype=np.int64)):
                raise ZynMLDeviceError(f"input `{b.name}` of kernel `{kernel.name}` has shape "
                                       f"{arr.shape}, the kernel expects {shape}")
            arrays.append(arr)
        out = np.zeros(cir.output_shape(kernel, bound), dtype=storage_dtype(kernel.output.dtype))
        ptrs = (ctypes.c_void_p * (len(arrays) + 1))(*[a.ctypes.data for a in arrays],
                                                     out.ctypes.data)
        fvals = [float(scalars[n]) for n, kind, _ in compiled.program.args if kind == "f"]
        ivals = [int(scalars[n]) for n, kind, _ in compiled.program.args if kind == "i"]
        fargs = (ctypes.c_double * max(1, len(fvals)))(*fvals)
        iargs = (ctypes.c_longlong * max(1, len(ivals)))(*ivals)
        t2 = time.perf_counter()
        compiled.fn(ptrs, fargs, iargs)
        t3 = time.perf_counter()
        times = LaunchTimes(compile=0.0 if had else t1 - t0, upload=t2 - t1, kernel=t3 - t2,
                            download=0.0, source="host-clock")
        geometry = {"executor": "compiled C++", "schedule": compiled.program.schedule,
                    "openmp": compiled.program.openmp}
        return out, Launch(kernel.name, self.id, times, geometry)

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

    def to_host(self, array):
        return np.asarray(array)

    def from_host(self, array):
        if isinstance(array, np.ndarray):
            return array
        if hasattr(array, "get"):            # CuPy
            return array.get()
        return np.asarray(array)


def discover() -> list:
    compiler = find_compiler()
    if compiler is None:
        return []
    return [NativeCpuDevice(compiler)]
