"""NCCL collectives between the CUDA devices of one host, through CuPy's `cupy.cuda.nccl`.

One process drives every GPU: `NcclCommunicator.initAll` makes one communicator per
device, and each collective issues one call per device inside `groupStart()`/`groupEnd()`
on a stream of its own per device, then waits for them. NCCL's reduce-scatter and
all-gather take equal parts; shards of uneven sizes travel padded to the largest part.
`peer_copy` moves one array to another GPU without the host (peer access where the
hardware allows it, else the driver stages the copy).
"""
from __future__ import annotations

import threading

import numpy as np

from ...errors import ZynMLDeviceError
from ...runtime.sharded import DeviceGroup

_peer_lock = threading.Lock()
_peer_enabled: set = set()


def _cp():
    import cupy
    return cupy


def _enable_peer(src: int, dst: int):
    cp = _cp()
    key = (src, dst)
    with _peer_lock:
        if key in _peer_enabled:
            return
        _peer_enabled.add(key)
        try:
            if cp.cuda.runtime.deviceCanAccessPeer(dst, src):
                with cp.cuda.Device(dst):
                    cp.cuda.runtime.deviceEnablePeerAccess(src)
        except Exception:       # already enabled, or not possible: the copy still works
            pass


def peer_copy(array, dst_index: int):
    """`array` (a CuPy array on any GPU) copied to GPU `dst_index`, contiguous."""
    cp = _cp()
    src_index = array.device.id
    with cp.cuda.Device(src_index):
        src = cp.ascontiguousarray(array)
    if src_index == dst_index:
        return src
    _enable_peer(src_index, dst_index)
    with cp.cuda.Device(dst_index):
        dst = cp.empty(src.shape, dtype=src.dtype)
        if src.nbytes:
            # a synchronous copy on the legacy default stream orders after both devices'
            # finished work (every launch waits for its kernel before it returns)
            peer = getattr(cp.cuda.runtime, "memcpyPeer", None)
            if peer is not None:
                peer(dst.data.ptr, dst_index, src.data.ptr, src_index, src.nbytes)
            else:
                dst.data.copy_from_device(src.data, src.nbytes)
    return dst


def _nccl_dtype(dtype):
    """NCCL's datatype for a numpy dtype, or None where this NCCL has none."""
    from cupy.cuda import nccl
    names = {"float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "float16": "NCCL_FLOAT16",
             "int32": "NCCL_INT32", "int64": "NCCL_INT64", "uint8": "NCCL_UINT8",
             "int8": "NCCL_INT8", "uint32": "NCCL_UINT32", "uint64": "NCCL_UINT64",
             "bool": "NCCL_UINT8"}
    name = names.get(np.dtype(dtype).name)
    return getattr(nccl, name, None) if name else None


def _nccl_op(op):
    from cupy.cuda import nccl
    name = {"+": "NCCL_SUM", "*": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN",
            "and": "NCCL_MIN", "or": "NCCL_MAX"}.get(op)
    return getattr(nccl, name, None) if name else None


class NcclGroup(DeviceGroup):
    """Collectives over distinct CUDA devices with NCCL; what NCCL cannot carry (a dtype it
    lacks) goes through peer copies, as the base group does."""

    kind = "nccl"

    def __init__(self, devices):
        super().__init__(devices)
        self.kind = "nccl"
        from cupy.cuda import nccl
        self.nccl = nccl
        self.indices = [d.index for d in self.devices]
        if len(set(self.indices)) != len(self.indices):
            raise ZynMLDeviceError("NCCL needs distinct GPUs")
        self.comms = nccl.NcclCommunicator.initAll(self.indices)
        cp = _cp()
        self.streams = []
        for i in self.indices:
            with cp.cuda.Device(i):
                self.streams.append(cp.cuda.Stream(non_blocking=True))
        self.lock = threading.Lock()

    def _run(self, calls):
        """calls[k](comm, stream) issues device k's part; all inside one NCCL group."""
        cp = _cp()
        with self.lock:
            for i in self.indices:          # the partial results are complete on every GPU
                with cp.cuda.Device(i):
                    cp.cuda.Stream.null.synchronize()
            self.nccl.groupStart()
            try:
                for k, call in enumerate(calls):
                    with cp.cuda.Device(self.indices[k]):
                        call(self.comms[k], self.streams[k])
            finally:
                self.nccl.groupEnd()
            for s in self.streams:
                s.synchronize()

    def _contiguous(self, arrays):
        cp = _cp()
        out = []
        for i, a in zip(self.indices, arrays):
            with cp.cuda.Device(i):
                out.append(cp.ascontiguousarray(a))
        return out

    def all_reduce(self, arrays, op: str = "+") -> list:
        cp = _cp()
        arrays = self._contiguous(arrays)
        dtype, nop = _nccl_dtype(arrays[0].dtype), _nccl_op(op)
        if dtype is None or nop is None:
            return super().all_reduce(arrays, op)
        outs = []
        for i, a in zip(self.indices, arrays):
            with cp.cuda.Device(i):
                outs.append(cp.empty_like(a))
        calls = [lambda comm, s, a=a, o=o: comm.allReduce(a.data.ptr, o.data.ptr, a.size, dtype,
                                                          nop, s.ptr)
                 for a, o in zip(arrays, outs)]
        self._run(calls)
        return outs

    def reduce_scatter(self, arrays, op: str, axis: int, bounds) -> list:
        cp = _cp()
        dtype, nop = _nccl_dtype(arrays[0].dtype), _nccl_op(op)
        if dtype is None or nop is None or len(bounds) != len(self.devices):
            return super().reduce_scatter(arrays, op, axis, bounds)
        rows = max(hi - lo for lo, hi in bounds)
        sends, recvs, shape = [], [], None
        for i, a in zip(self.indices, arrays):
            with cp.cuda.Device(i):
                a = cp.moveaxis(a, axis, 0)
                shape = a.shape[1:]
                padded = cp.zeros((len(bounds) * rows,) + shape, dtype=a.dtype)
                for r, (lo, hi) in enumerate(bounds):
                    padded[r * rows:r * rows + (hi - lo)] = a[lo:hi]
                sends.append(padded)
                recvs.append(cp.empty((rows,) + shape, dtype=a.dtype))
        count = recvs[0].size
        calls = [lambda comm, s, a=a, o=o: comm.reduceScatter(a.data.ptr, o.data.ptr, count,
                                                              dtype, nop, s.ptr)
                 for a, o in zip(sends, recvs)]
        self._run(calls)
        outs = []
        for i, o, (lo, hi) in zip(self.indices, recvs, bounds):
            with cp.cuda.Device(i):
                outs.append(cp.ascontiguousarray(cp.moveaxis(o[:hi - lo], 0, axis)))
        return outs

    def all_gather(self, shards, axis: int) -> list:
        cp = _cp()
        dtype = _nccl_dtype(shards[0].dtype)
        if dtype is None:
            return super().all_gather(shards, axis)
        sizes = [s.shape[axis] for s in shards]
        rows = max(sizes)
        sends, recvs, shape = [], [], None
        for i, s in zip(self.indices, shards):
            with cp.cuda.Device(i):
                s = cp.moveaxis(s, axis, 0)
                shape = s.shape[1:]
                padded = cp.zeros((rows,) + shape, dtype=s.dtype)
                padded[:s.shape[0]] = s
                sends.append(padded)
                recvs.append(cp.empty((len(shards) * rows,) + shape, dtype=s.dtype))
        count = sends[0].size
        calls = [lambda comm, st, a=a, o=o: comm.allGather(a.data.ptr, o.data.ptr, count, dtype,
                                                           st.ptr)
                 for a, o in zip(sends, recvs)]
        self._run(calls)
        outs = []
        for i, o in zip(self.indices, recvs):
            with cp.cuda.Device(i):
                parts = [o[r * rows:r * rows + n] for r, n in enumerate(sizes)]
                full = cp.concatenate(parts, axis=0) if rows * len(sizes) != sum(sizes) else o
                outs.append(cp.ascontiguousarray(cp.moveaxis(full, 0, axis)))
        return outs
