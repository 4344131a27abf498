"""A stand-in for CuPy where there is no GPU: arrays are numpy arrays, streams and events
record what was asked of them, and a loaded module's kernels run the CPU reference
executor (an index out of range sets the error flag as a generated kernel would). A stream
capture records the kernels and copies queued on the capturing stream and a graph runs them
again at each launch. Enough to drive the CUDA device's host logic (launch plans, streams,
waits, the error flag, CUDA graphs), nothing of the GPU itself. Install with
`install(monkeypatch)`."""
from __future__ import annotations

import hashlib
import re
import sys
import threading
import types

import numpy as np

from zynbook.backends.cpu.reference import run_kernel
from zynbook.errors import ZynMLRuntimeError


class _Memory:
    """An array's memory: its address (that of the numpy data) and device-to-device copies
    (recorded instead of made on a capturing stream)."""
    device_id = 0

    def __init__(self, array: "ndarray"):
        self.array = array

    @property
    def ptr(self) -> int:
        # found once per array (an array's numpy data never moves): CuPy's is an attribute,
        # and the host work the stand-in is timed for should not be numpy's
        array = self.array
        ptr = array.__dict__.get("_ptr")
        if ptr is None:
            ptr = array._ptr = array.host.__array_interface__["data"][0]
        return ptr

    def copy_from_device_async(self, src: "_Memory", size: int, stream=None):
        if stream is not None and not hasattr(stream, "ptr"):      # as CuPy, a Stream only
            raise TypeError(f"stream must be a cupy.cuda.Stream, not {type(stream).__name__}")
        dst = self.array.host.reshape(-1).view(np.uint8)
        copy = lambda: np.copyto(dst[:size], src.array.host.reshape(-1).view(np.uint8)[:size])  # noqa: E731
        if not _recorded(stream, copy):
            copy()


class _Device:
    def __init__(self, index: int = 0):
        self.id = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class ndarray:      # noqa: N801 - CuPy's name
    """Device memory, held as a numpy array (not a numpy subclass: ZynBook must take it for
    a GPU array, as it does CuPy's)."""

    def __init__(self, array: np.ndarray):
        self.host = array

    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)
    flags = property(lambda self: self.host.flags)
    size = property(lambda self: self.host.size)
    ndim = property(lambda self: self.host.ndim)
    nbytes = property(lambda self: self.host.nbytes)
    strides = property(lambda self: self.host.strides)
    itemsize = property(lambda self: self.host.itemsize)
    data = property(lambda self: _Memory(self))
    device = property(lambda self: _Device(0))

    def __array__(self, dtype=None, copy=None):
        return self.host if dtype is None else self.host.astype(dtype)

    def __getitem__(self, key):
        return _wrap(self.host[key])

    def __setitem__(self, key, value):
        self.host[key] = np.asarray(value)

    def get(self, stream=None):
        return self.host.copy()

    def fill(self, value):
        self.host.fill(value)

    def astype(self, dtype):
        return _wrap(self.host.astype(dtype))

    def reshape(self, *shape):
        return _wrap(self.host.reshape(*shape))

    def view(self):
        return ndarray(self.host.view())


ndarray.__module__ = "cupy"      # what zynbook.runtime.tensor.to_tensor looks for


def _wrap(a) -> ndarray:
    return ndarray(np.asarray(a))


class Log:
    """What the device asked for: waits (event or stream synchronisations), the stream
    of every kernel launched one by one, the kernels recorded by stream captures and the
    graphs launched."""

    def __init__(self):
        self.waits = 0
        self.streams: list = []
        self.captured = 0
        self.graph_launches: list = []     # the stream of each
        self.dlpack = 0                    # DLPack imports
        self.nvrtc: list = []              # NVRTC runs: "cubin" or "ptx" each
        self.loaded: list = []             # the binaries modules were loaded from


log = Log()
_local = threading.local()


class Stream:
    _count = 0

    def __init__(self, non_blocking: bool = False):
        Stream._count += 1
        self.ptr = Stream._count

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False

    def synchronize(self):
        if getattr(self, "recording", None) is not None:
            raise RuntimeError("a capturing stream cannot be synchronized")
        log.waits += 1

    # a model of stream capture: what is queued on a capturing stream is recorded, not run
    def begin_capture(self, mode=None):
        if getattr(self, "recording", None) is not None or self.ptr == 0:
            raise RuntimeError("the stream cannot begin a capture")
        self.recording = []

    def is_capturing(self) -> bool:
        return getattr(self, "recording", None) is not None

    def end_capture(self) -> "Graph":
        if getattr(self, "recording", None) is None:
            raise RuntimeError("the stream is not capturing")
        graph, self.recording = Graph(self.recording), None
        return graph


class Graph:
    """A captured graph: its recorded operations, run again at each launch."""

    def __init__(self, operations: list):
        self.operations = operations

    def launch(self, stream=None):
        log.graph_launches.append(stream)
        for op in self.operations:
            op()


def _recorded(stream, operation) -> bool:
    """Record `operation` if `stream` is capturing (True), else leave it to the caller."""
    recording = getattr(stream, "recording", None)
    if recording is None:
        return False
    recording.append(operation)
    log.captured += 1
    return True


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class _NullStream(Stream):
    def __init__(self):
        self.ptr = 0


_NULL = _NullStream()


class Event:
    def record(self, stream=None):
        self.stream = stream

    def synchronize(self):
        log.waits += 1


class OutOfMemoryError(Exception):
    pass


class Function:
    """A kernel of a loaded module: runs the whole CIR kernel on the reference executor."""

    ptr = 0                 # no driver handle (funcSetAttribute's first argument)

    def __init__(self, kernel, module=None):
        self.kernel, self.module = kernel, module

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        if _recorded(stream, lambda: self.run(args)):
            return
        log.streams.append(stream)
        self.run(args)

    def run(self, args):
        k = self.kernel
        count = len(k.inputs) + 1
        arrays, err = list(args[:count]), args[-1]
        names = [s.name for s in k.scalars if s.name not in k.dims]
        scalars = {n: v.item() for n, v in zip(names, args[count:-1])}
        sizes = dict(getattr(self.module, "sizes", {}))      # those compiled in
        sizes.update({d: int(n) for b, a in zip(list(k.inputs) + [k.output], arrays)
                      for d, n in zip(b.shape, a.shape) if isinstance(d, str)})
        try:
            out = run_kernel(k, [np.asarray(a) for a in arrays[:-1]], sizes, scalars)
        except ZynMLRuntimeError as e:       # the first site reports, as the kernel would
            found = re.search(r"index (-?\d+)", str(e))
            err[0], err[1] = 1, int(found.group(1)) if found else 0
            return
        arrays[-1][...] = np.asarray(out).reshape(arrays[-1].shape)


class Module:
    def __init__(self, kernel):
        self.kernel = kernel
        self.sizes: dict = {}       # the sizes the program was compiled for

    def get_function(self, name):
        return Function(self.kernel, self)


def _from_dlpack(obj) -> ndarray:
    """An array sharing the memory of `obj` (anything numpy takes); counted in the log."""
    log.dlpack += 1
    return ndarray(np.asarray(obj))


def _properties(index):
    return {"name": b"CuPy stand-in", "major": 9, "minor": 0, "totalGlobalMem": 1 << 30,
            "multiProcessorCount": 1, "l2CacheSize": 0}


def _ascontiguousarray(a, dtype=None) -> ndarray:
    """A copy kernel: recorded on a capturing stream (its output's elements are written at
    each launch of the graph), else run now."""
    src = a.host if isinstance(a, ndarray) else np.asarray(a)
    out = _wrap(np.empty(src.shape, dtype or src.dtype))
    copy = lambda: np.copyto(out.host, src, casting="unsafe")     # noqa: E731
    stream = _stack()[-1] if _stack() else _NULL
    if not _recorded(stream, copy):
        copy()
    return out


def module() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.__version__ = "stand-in"
    cp.ndarray = ndarray
    cp.zeros = lambda shape, dtype=np.float32: _wrap(np.zeros(shape, dtype))
    cp.empty = lambda shape, dtype=np.float32: _wrap(np.empty(shape, dtype))
    cp.asarray = lambda a, dtype=None: _wrap(np.asarray(a, dtype))
    cp.ascontiguousarray = _ascontiguousarray
    cp.asnumpy = lambda a: np.array(a, copy=True)
    # views, sharing the memory of `a` as CuPy's do
    cp.split = lambda a, parts, axis=0: [ndarray(p) for p in np.split(a.host, parts, axis)]
    cp.reshape = lambda a, shape: ndarray(a.host.reshape(shape))
    cp.from_dlpack = _from_dlpack
    cp.cuda = types.SimpleNamespace(
        Stream=Stream, Event=Event, Device=_Device,
        get_current_stream=lambda: _stack()[-1] if _stack() else _NULL,
        get_elapsed_time=lambda start, end: 0.25,
        memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
        runtime=types.SimpleNamespace(getDeviceProperties=_properties,
                                      getDeviceCount=lambda: 1, getDevice=lambda: 0,
                                      deviceSynchronize=lambda: None),
        # a kernel's opt-in to more than 48 KiB of dynamic shared memory
        driver=types.SimpleNamespace(funcSetAttribute=lambda *args: None,
                                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES=8))
    return cp


def _nvrtc(self, program, kernel, binary=True) -> bytes:
    """A stand-in for NVRTC's cubin (or PTX) of `program`: bytes naming its source."""
    log.nvrtc.append("cubin" if binary else "ptx")
    digest = hashlib.sha256(program.source.encode()).hexdigest()[:16]
    return f"// stand-in {'cubin' if binary else 'PTX'} of {program.name} {digest}".encode()


def _load(self, cubin, program, kernel) -> Module:
    log.loaded.append(cubin)
    return Module(kernel)


def install(monkeypatch):
    """CuPy replaced by the stand-in, and a fresh `log`; the CUDA device's NVRTC and module
    loading replaced by modules of `Function`s (both recorded in the log)."""
    from zynbook.backends.cuda.device import CudaDevice
    cp = module()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)      # `from cupy.cuda import driver`
    monkeypatch.setattr(CudaDevice, "_nvrtc", _nvrtc)
    monkeypatch.setattr(CudaDevice, "_load", _load)
    from zynbook.backends.cuda import tma       # no driver: a map of zeros (the kernels run the
    monkeypatch.setattr(tma, "encode", lambda *a: np.zeros(1, tma.MAP))    # reference anyway)
    monkeypatch.setattr(tma, "available", lambda: True)
    real_compile = CudaDevice.compile

    def compile(self, kernel, sizes, options=None):
        compiled = real_compile(self, kernel, sizes, options)
        compiled.module.sizes = dict(compiled.program_sizes)
        return compiled

    monkeypatch.setattr(CudaDevice, "compile", compile)
    log.__init__()
    return log


def install_cuda0(monkeypatch, cache_dir):
    """The stand-in installed and `cuda:0` a CUDA device on it, its kernels cached under
    `cache_dir`; the log."""
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(cache_dir))
    got = install(monkeypatch)
    registry.get_device("cpu")
    monkeypatch.setitem(registry._devices, "cuda:0", CudaDevice(0))
    return got
