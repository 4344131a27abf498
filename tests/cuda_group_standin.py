"""A stand-in for CuPy over several GPUs with CUDA graphs, for machines without a GPU: real
`CudaDevice`s `cuda:0 .. cuda:n-1` (their launch plans, streams, error flags and captured
graphs) over tests/nccl_standin.py's arrays, which remember their GPU (an operation on
another GPU's array than the current one is an error) and its NCCL, with
tests/cupy_standin.py's model of stream capture and its kernels (the CPU reference executor).

* Memory comes from a model of CuPy's pool (`_Pool`): each GPU's arrays have addresses of
  their own, and a block freed is handed to the next allocation of its size on its GPU, so
  an array made afresh at every call (a chunk uploaded from the host, a peer copy) lands
  where the last call's was, unless something still holds that one (a captured graph holds
  the arrays it read). A view's address is its first element's, inside its base's memory.
* A stream capture records what is queued on the capturing stream: kernels, device-to-device
  copies and the elementwise copy that makes a strided view contiguous; a graph runs them
  again at each launch, each kernel checking that its arrays live on the current GPU (a
  graph replayed with another GPU current fails).

`install(monkeypatch, n)` returns (cupy_standin's log: kernels captured, graphs launched;
nccl_standin's log: collectives, peer copies; the devices).
"""
from __future__ import annotations

import sys
import threading
import weakref

import numpy as np

import cupy_standin as cs
import nccl_standin as ns

_local = threading.local()


def _streams() -> list:
    if not hasattr(_local, "streams"):
        _local.streams = []
    return _local.streams


class Stream(ns.Stream):
    """A stream of the current GPU; entering it makes it current, capture as cupy_standin's."""

    def __enter__(self):
        _streams().append(self)
        return self

    def __exit__(self, *exc):
        _streams().pop()
        return False

    def synchronize(self):
        if getattr(self, "recording", None) is not None:
            raise RuntimeError("a capturing stream cannot be synchronized")

    begin_capture = cs.Stream.begin_capture
    is_capturing = cs.Stream.is_capturing
    end_capture = cs.Stream.end_capture


class _Null(Stream):
    def __init__(self):
        self.ptr = 0            # every GPU's legacy default stream


Stream.null = _Null()


def get_current_stream():
    return _streams()[-1] if _streams() else Stream.null


class _Pool:
    """CuPy's memory pool as it matters to code that keeps addresses: per GPU, memory at
    addresses of its own; an array's block is returned when its memory (the numpy array that
    owns it, with every view of it) is gone, and the last block freed of a size is the next
    one handed out for that size on that GPU."""

    ALIGN = 512

    def __init__(self):
        self.top: dict = {}         # GPU -> the next address never handed out
        self.free: dict = {}        # (GPU, bytes) -> [addresses freed], the last one first out
        self.blocks: dict = {}      # id(numpy array owning the memory) -> (address, its data)

    def address(self, array) -> int:
        """The device address of `array` (a view's: its first element's)."""
        host = array.host
        owner = host
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        block = self.blocks.get(id(owner))
        if block is None:
            block = self._allocate(owner, array.dev)
        return block[0] + host.__array_interface__["data"][0] - block[1]

    def _allocate(self, owner, dev: int):
        size = max(owner.nbytes, 1)
        freed = self.free.get((dev, size))
        if freed:
            address = freed.pop()
        else:
            address = self.top.get(dev, (dev + 1) << 40)
            self.top[dev] = address + -(-size // self.ALIGN) * self.ALIGN
        block = self.blocks[id(owner)] = (address, owner.__array_interface__["data"][0])
        weakref.finalize(owner, self._release, id(owner), dev, size, address)
        return block

    def _release(self, ident: int, dev: int, size: int, address: int):
        self.blocks.pop(ident, None)
        self.free.setdefault((dev, size), []).append(address)


_pool = _Pool()


class _Memory:
    """An array's memory: its address in the pool, its GPU, device-to-device copies
    (recorded on a capturing stream)."""

    def __init__(self, array):
        self.array = array
        self.ptr = _pool.address(array)
        self.device_id = array.dev
        ns._by_ptr[self.ptr] = array        # what NCCL and peer copies find at the address

    def copy_from_device_async(self, src, size, stream=None):
        if src.device_id != self.device_id:
            raise RuntimeError("a device-to-device copy between two GPUs")
        dst, source = self.array, src.array

        def copy():
            ns._here(dst)
            np.copyto(dst.host.reshape(-1).view(np.uint8)[:size],
                      source.host.reshape(-1).view(np.uint8)[:size])
        if not cs._recorded(stream, copy):
            copy()


def _ascontiguousarray(a, dtype=None):
    """As nccl_standin's; a copy queued on a capturing stream is recorded, not made."""
    stream = get_current_stream()
    if getattr(stream, "recording", None) is None or not isinstance(a, ns.ndarray) or \
            (a.host.flags.c_contiguous and dtype in (None, a.dtype)):
        return ns.ascontiguousarray(a, dtype)
    ns._here(a)
    out = ns.empty(a.shape, np.dtype(dtype or a.dtype))
    cs._recorded(stream, lambda: (ns._here(out, a), np.copyto(out.host, a.host,
                                                              casting="unsafe")))
    return out


def _made(init):
    """ndarray's constructor, its memory taken from the pool as it is made (CuPy allocates
    when an array is made, not when its address is first asked for)."""
    def made(self, host, dev):
        init(self, host, dev)
        if isinstance(self.host, np.ndarray):
            _pool.address(self)
    return made


def _checked_run(run):
    def checked(self, args):
        ns._here(*args)         # a kernel reads and writes only its own GPU's memory
        return run(self, args)
    return checked


def install(monkeypatch, gpus: int = 2):
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    clog = cs.install(monkeypatch)          # kernels run on the CPU reference executor
    nlog, _ = ns.install(monkeypatch, gpus)
    cp = sys.modules["cupy"]
    global _pool
    _pool = _Pool()
    monkeypatch.setattr(ns.ndarray, "__init__", _made(ns.ndarray.__init__))
    monkeypatch.setattr(ns.ndarray, "data", property(_Memory))
    # the arrays at each address, held no longer than by their users (a freed block returns)
    monkeypatch.setattr(ns, "_by_ptr", weakref.WeakValueDictionary())
    monkeypatch.setattr(ns.ndarray, "view", lambda self: ns.ndarray(self.host.view(), self.dev),
                        raising=False)
    monkeypatch.setattr(ns.ndarray, "fill", lambda self, v: self.host.fill(v), raising=False)
    monkeypatch.setattr(cs.Function, "run", _checked_run(cs.Function.run))
    cp.ascontiguousarray = _ascontiguousarray
    cp.asnumpy = lambda a: np.array(a.host if isinstance(a, ns.ndarray) else a)
    cp.__version__ = "stand-in"
    cuda = cp.cuda
    cuda.Stream, cuda.get_current_stream = Stream, get_current_stream
    cuda.Graph = cs.Graph
    cuda.get_elapsed_time = lambda start, end: 0.25
    cuda.memory = type("memory", (), {"OutOfMemoryError": cs.OutOfMemoryError})
    cuda.runtime.getDeviceProperties = cs._properties
    cuda.runtime.getDeviceCount = lambda: gpus
    cuda.driver = cs.module().cuda.driver       # a kernel's opt-in to more shared memory
    devices = [CudaDevice(i) for i in range(gpus)]
    for dev in devices:
        monkeypatch.setitem(registry._devices, dev.id, dev)
    return clog, nlog, devices
