"""A stand-in for CuPy over several GPUs and for its NCCL bindings, for machines without a
GPU: enough to drive the collective layer of a CUDA device group (zynbook/backends/cuda/
nccl.py, zynbook/runtime/sharded.py) and `@parallel` blocks split over CUDA devices.

* Arrays are numpy arrays that remember the GPU they live on: the current device when they
  were made (`with cupy.cuda.Device(i)`), a view keeping its base's. An operation on arrays of
  another GPU than the current one is an error, as CuPy's kernels are without peer access
  (the code under test must enter each array's device).
* NCCL keeps its contract: the collectives of one `groupStart()` / `groupEnd()` run at
  `groupEnd()`, and there every rank of the communicator has called the same collective
  once, with the same count, datatype and operation, from its own device, on buffers of its
  device as large as the count says; the sums, maxima and gathers are then numpy's.
* `StandinGpu` is a `cuda:N` device whose kernels run on the CPU reference executor, on
  inputs that must already be on its GPU; it counts its host transfers.

`install(monkeypatch, n)` puts the modules in place and `cuda:0 .. cuda:n-1` in the device
registry, and returns the log of what was asked (communicators made, collectives, peer copies).
"""
from __future__ import annotations

import itertools
import sys
import threading
import types

import numpy as np

from zynbook.backends.base import Device, Launch, LaunchPlan


class Log:
    def __init__(self):
        self.communicators = 0          # NcclCommunicator.initAll calls
        self.collectives: list = []     # (kind, ranks) per group that ran one
        self.peer_copies = 0


log = Log()
_local = threading.local()
_ptrs = itertools.count(1 << 20)
_by_ptr: dict = {}


def current() -> int:
    return (getattr(_local, "stack", None) or [0])[-1]


class _Device:
    def __init__(self, index: int = 0):
        self.id = int(index)

    def __enter__(self):
        if not hasattr(_local, "stack"):
            _local.stack = []
        _local.stack.append(self.id)
        return self

    def __exit__(self, *exc):
        _local.stack.pop()
        return False


class _Memory:
    def __init__(self, array):
        self.array = array
        self.ptr = getattr(array, "_ptr", None) or next(_ptrs)
        array._ptr = self.ptr
        _by_ptr[self.ptr] = array
        self.device_id = array.dev


class ndarray:      # noqa: N801 - CuPy's name
    """Memory of GPU `dev`, held as a numpy array."""

    def __init__(self, host: np.ndarray, dev: int):
        self.host = host
        self.dev = int(dev)
        self._ptr = None

    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)
    size = property(lambda self: self.host.size)
    ndim = property(lambda self: self.host.ndim)
    nbytes = property(lambda self: self.host.nbytes)
    strides = property(lambda self: self.host.strides)
    itemsize = property(lambda self: self.host.itemsize)
    flags = property(lambda self: self.host.flags)
    device = property(lambda self: _Device(self.dev))

    @property
    def data(self):
        if not self.host.flags.c_contiguous:
            raise ValueError("a pointer to a non-contiguous array")
        return _Memory(self)

    def __array__(self, dtype=None, copy=None):
        return self.host if dtype is None else self.host.astype(dtype)

    def __len__(self):
        return len(self.host)

    def __getitem__(self, key):
        return ndarray(self.host[key], self.dev)

    def __setitem__(self, key, value):
        _here(self, value)
        self.host[key] = value.host if isinstance(value, ndarray) else value

    def copy(self):
        _here(self)
        return ndarray(self.host.copy(), self.dev)

    def astype(self, dtype):
        _here(self)
        return ndarray(self.host.astype(dtype), self.dev)

    def get(self, stream=None):
        return self.host.copy()

    def reshape(self, *shape):
        return ndarray(self.host.reshape(*shape), self.dev)


ndarray.__module__ = "cupy"      # what zynbook.runtime.tensor.to_tensor looks for


def _here(*arrays):
    """Every CuPy array among `arrays` lives on the current device."""
    for a in arrays:
        if isinstance(a, ndarray) and a.dev != current():
            raise RuntimeError(f"an array of GPU {a.dev} used while GPU {current()} is current")


def _new(host) -> ndarray:
    return ndarray(np.asarray(host), current())


def _host(a):
    return a.host if isinstance(a, ndarray) else np.asarray(a)


def ascontiguousarray(a, dtype=None):
    _here(a)
    if isinstance(a, ndarray) and a.host.flags.c_contiguous and dtype in (None, a.dtype):
        return a
    return _new(np.ascontiguousarray(_host(a), dtype=dtype))


def asarray(a, dtype=None):
    if isinstance(a, ndarray) and a.dev == current() and dtype in (None, a.dtype):
        return a
    return _new(np.array(_host(a), dtype=dtype))


def empty(shape, dtype=np.float32):
    return _new(np.empty(shape, dtype))


def zeros(shape, dtype=np.float32):
    return _new(np.zeros(shape, dtype))


def empty_like(a):
    _here(a)
    return _new(np.empty_like(a.host))


def moveaxis(a, source, destination):
    _here(a)
    return ndarray(np.moveaxis(a.host, source, destination), a.dev)


def reshape(a, shape):
    _here(a)
    return ndarray(np.reshape(a.host, shape), a.dev)


def split(a, parts, axis=0):
    _here(a)
    return [ndarray(p, a.dev) for p in np.split(a.host, parts, axis=axis)]


def concatenate(arrays, axis=0):
    _here(*arrays)
    return _new(np.concatenate([a.host for a in arrays], axis=axis))


def _elementwise(fn):
    def run(a, b):
        _here(a, b)
        return _new(fn(_host(a), _host(b)))
    return run


add, multiply = _elementwise(np.add), _elementwise(np.multiply)
maximum, minimum = _elementwise(np.maximum), _elementwise(np.minimum)
logical_and, logical_or = _elementwise(np.logical_and), _elementwise(np.logical_or)


class Stream:
    _count = itertools.count(1)

    def __init__(self, non_blocking: bool = False):
        self.ptr = next(Stream._count)
        self.device = current()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


Stream.null = Stream()


class Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


# ------------------------------------------------------------------ runtime
def _runtime() -> types.ModuleType:
    rt = types.ModuleType("cupy.cuda.runtime")
    rt.deviceCanAccessPeer = lambda device, peer: 1
    rt.deviceEnablePeerAccess = lambda peer: None
    rt.deviceSynchronize = lambda: None
    rt.getDevice = current

    def memcpyPeer(dst, dst_device, src, src_device, nbytes):  # noqa: N802 - CUDA's name
        d, s = _by_ptr[dst], _by_ptr[src]
        if (d.dev, s.dev) != (dst_device, src_device) or d.nbytes != nbytes or \
                s.nbytes != nbytes:
            raise RuntimeError("memcpyPeer: the pointers, devices and size disagree")
        d.host.reshape(-1).view(np.uint8)[:] = s.host.reshape(-1).view(np.uint8)
        log.peer_copies += 1
    rt.memcpyPeer = memcpyPeer
    return rt


# ------------------------------------------------------------------ NCCL
_DTYPES = {"NCCL_FLOAT32": np.float32, "NCCL_FLOAT64": np.float64, "NCCL_FLOAT16": np.float16,
           "NCCL_INT32": np.int32, "NCCL_INT64": np.int64, "NCCL_UINT8": np.uint8,
           "NCCL_INT8": np.int8, "NCCL_UINT32": np.uint32, "NCCL_UINT64": np.uint64}
_OPS = {"NCCL_SUM": np.add, "NCCL_PROD": np.multiply, "NCCL_MAX": np.maximum,
        "NCCL_MIN": np.minimum}


class _Clique:
    """The communicators made by one initAll: the ranks that must meet in a collective."""

    def __init__(self, devices):
        self.devices = list(devices)


_pending: list = []
_depth = [0]


class NcclCommunicator:
    def __init__(self, clique, rank):
        self.clique, self.rank = clique, rank
        self.device = clique.devices[rank]

    @staticmethod
    def initAll(devices):  # noqa: N802 - CuPy's name
        devices = list(range(devices)) if isinstance(devices, int) else list(devices)
        clique = _Clique(devices)
        log.communicators += 1
        return [NcclCommunicator(clique, r) for r in range(len(devices))]

    def _call(self, kind, send, recv, count, dtype, op, stream):
        if current() != self.device:
            raise RuntimeError(f"rank {self.rank} called from GPU {current()}, not its GPU "
                               f"{self.device}")
        _pending.append((self, kind, _by_ptr[send], _by_ptr[recv], count, dtype, op))
        if _depth[0] == 0:
            _run_group()

    def allReduce(self, send, recv, count, dtype, op, stream):  # noqa: N802
        self._call("allReduce", send, recv, count, dtype, op, stream)

    def reduceScatter(self, send, recv, count, dtype, op, stream):  # noqa: N802
        self._call("reduceScatter", send, recv, count, dtype, op, stream)

    def allGather(self, send, recv, count, dtype, stream):  # noqa: N802
        self._call("allGather", send, recv, count, dtype, None, stream)


def groupStart():  # noqa: N802
    _depth[0] += 1


def groupEnd():  # noqa: N802
    _depth[0] -= 1
    if _depth[0] == 0:
        _run_group()


def _run_group():
    calls, _pending[:] = list(_pending), []
    by_clique: dict = {}
    for c in calls:
        by_clique.setdefault(id(c[0].clique), []).append(c)
    for group in by_clique.values():
        clique = group[0][0].clique
        ranks = sorted(c[0].rank for c in group)
        if ranks != list(range(len(clique.devices))):
            raise RuntimeError(f"NCCL: ranks {ranks} of {len(clique.devices)} called; the "
                               "others never did (a real NCCL would hang)")
        kind, count, dtype, op = group[0][1], group[0][4], group[0][5], group[0][6]
        n = len(group)
        group.sort(key=lambda c: c[0].rank)
        for comm, k, send, recv, cnt, dt, o in group:
            if (k, cnt, dt, o) != (kind, count, dtype, op):
                raise RuntimeError("NCCL: the ranks called different collectives")
            if send.dev != comm.device or recv.dev != comm.device:
                raise RuntimeError(f"NCCL: rank {comm.rank} passed a buffer of another GPU")
            if send.dtype.itemsize != np.dtype(dt).itemsize or send.dtype != recv.dtype:
                raise RuntimeError("NCCL: a buffer's dtype is not the datatype given")
            want = {"allReduce": (count, count), "reduceScatter": (count * n, count),
                    "allGather": (count, count * n)}[kind]
            if (send.size, recv.size) != want:
                raise RuntimeError(f"NCCL {kind}: buffers of {send.size} and {recv.size} "
                                   f"elements for a count of {count} over {n} ranks")
        sends = [c[2].host.reshape(-1) for c in group]
        if kind == "allGather":
            total = np.concatenate(sends)
            for c in group:
                c[3].host.reshape(-1)[:] = total
        else:
            total = sends[0].copy()
            for s in sends[1:]:
                total = op(total, s)
            for r, c in enumerate(group):
                part = total if kind == "allReduce" else total[r * count:(r + 1) * count]
                c[3].host.reshape(-1)[:] = part
        log.collectives.append((kind, n))


def _nccl() -> types.ModuleType:
    m = types.ModuleType("cupy.cuda.nccl")
    for name, dt in _DTYPES.items():
        setattr(m, name, dt)
    for name, fn in _OPS.items():
        setattr(m, name, fn)
    m.NcclCommunicator = NcclCommunicator
    m.groupStart, m.groupEnd = groupStart, groupEnd
    m.get_version = lambda: 21903
    return m


def module() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    for name in ("ndarray", "ascontiguousarray", "asarray", "empty", "zeros", "empty_like",
                 "moveaxis", "reshape", "split", "concatenate", "add", "multiply", "maximum",
                 "minimum", "logical_and", "logical_or"):
        setattr(cp, name, globals()[name])
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device, cuda.Stream, cuda.Event = _Device, Stream, Event
    cuda.runtime = _runtime()
    cuda.nccl = _nccl()
    cuda.get_elapsed_time = lambda start, end: 0.0
    cp.cuda = cuda
    return cp


# ------------------------------------------------------------------ devices
class _QueuedPlan(LaunchPlan):
    """A launch plan that, like a CUDA plan of a kernel that cannot fail at run time,
    returns once its kernel is queued (`checked` false)."""

    checked = False


class StandinGpu(Device):
    """`cuda:N` on the stand-in: kernels run on the CPU reference executor, on inputs that
    must already live on this GPU (the host's arrays come through `from_host`, counted)."""

    kind = "gpu"
    backend = "cuda"

    def __init__(self, index: int):
        self.index = index
        self.id = f"cuda:{index}"
        self.name = f"stand-in GPU {index}"
        self.to_host_calls = 0
        self.from_host_calls = 0
        self.threads: list = []         # the host thread of each launch

    def prepare(self, kernel, sizes):
        return _QueuedPlan(self, kernel, sizes)

    def launch(self, kernel, inputs, sizes, scalars):
        from zynbook.backends.registry import get_device
        self.threads.append(threading.current_thread().name)
        for a in inputs:
            if not isinstance(a, ndarray) or a.dev != self.index:
                where = f"GPU {a.dev}" if isinstance(a, ndarray) else type(a).__name__
                raise RuntimeError(f"{self.id} launched on an input from {where}")
        out, launch = get_device("cpu").launch(kernel, [a.host for a in inputs], sizes,
                                               scalars)
        if isinstance(out, np.ndarray) and out.ndim:
            out = ndarray(out, self.index)
        return out, Launch(kernel.name, self.id, launch.times)

    def to_host(self, array):
        self.to_host_calls += 1
        return array.host.copy() if isinstance(array, ndarray) else np.asarray(array)

    def from_host(self, array):
        self.from_host_calls += 1
        return ndarray(np.array(array), self.index)

    @property
    def transfers(self) -> int:
        return self.to_host_calls + self.from_host_calls


def install(monkeypatch, gpus: int = 2):
    """The stand-in CuPy and NCCL in sys.modules and `cuda:0 .. cuda:{gpus-1}` in the device
    registry (the group cache emptied); returns (the log, the devices)."""
    global log
    log = Log()
    cp = module()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", cp.cuda.nccl)
    monkeypatch.setitem(sys.modules, "cupy.cuda.runtime", cp.cuda.runtime)
    from zynbook.backends import registry
    from zynbook.runtime import sharded
    registry.get_device("cpu")          # the registry's devices found
    devices = [StandinGpu(i) for i in range(gpus)]
    for dev in devices:
        monkeypatch.setitem(registry._devices, dev.id, dev)
    monkeypatch.setattr(sharded, "_groups", {})
    return log, devices
