"""Sharded tensors and device groups: what `@device([...]) @parallel(...)` leaves behind.

A `ShardedTensor` is one logical tensor cut along one axis into contiguous shards, each
living on one device of a group (`cuda:0` holds rows 0..32, `cuda:1` rows 32..64). It is a
`Tensor`, so host code can use it anywhere a tensor goes: it is then gathered on demand
(once) onto its first device. A following `@parallel` block over the same devices that cuts
the same axis the same way takes the shards as they are, with no copy and no host round
trip; any other use gathers or re-slices on the devices (peer copies between GPUs).

A `DeviceGroup` combines per-device partial results: `all_reduce`, `reduce_scatter`,
`all_gather`, and `move` (one array to another device). Groups of CUDA devices use NCCL
(zynbook/backends/cuda/nccl.py); any other group (`cpu` + `cpu`, `cpu` + `cpu:native`,
`cpu` + `vulkan:0`, or GPUs without NCCL) combines through the host or with peer copies,
with the same results, so the logic above it is the same everywhere.
"""
from __future__ import annotations

import html
import threading

import numpy as np

from ..backends.registry import get_device
from ..errors import ZynMLDeviceError
from .tensor import Tensor

HOST_BACKENDS = ("cpu", "c")

_NP_REDUCE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum,
              "and": np.logical_and, "or": np.logical_or}


def is_host(device) -> bool:
    return getattr(device, "backend", "") in HOST_BACKENDS or device.id in ("cpu", "cpu:native")


def is_cuda(device) -> bool:
    return getattr(device, "backend", "") == "cuda"


def chunk_bounds(length: int, parts: int) -> list:
    """Contiguous, nearly equal chunks of 0..length: [(lo, hi), ...] (some may be empty)."""
    edges = [length * k // parts for k in range(parts + 1)]
    return [(edges[k], edges[k + 1]) for k in range(parts)]


# ------------------------------------------------------------------ moving arrays
def move(array, src, dst):
    """`array` (in `src`'s array type) as an array of device `dst` (a copy where the
    memories differ; between CUDA devices a peer copy that never touches the host)."""
    if src is dst or src.id == dst.id:
        return array
    if is_host(src) and is_host(dst):
        return array
    if is_cuda(src) and is_cuda(dst):
        from ..backends.cuda.nccl import peer_copy
        return peer_copy(array, dst.index)
    host = src.to_host(array) if not is_host(src) else np.asarray(array)
    if is_host(dst):
        return host
    return dst.from_host(np.ascontiguousarray(host))


def _xp(device):
    if is_cuda(device):
        import cupy
        return cupy
    return np


def concat(arrays, axis: int, device):
    """Concatenate arrays that are all on `device`."""
    if is_cuda(device):
        import cupy
        with cupy.cuda.Device(device.index):
            return cupy.concatenate(arrays, axis=axis)
    if is_host(device):
        return np.concatenate([np.asarray(a) for a in arrays], axis=axis)
    host = np.concatenate([device.to_host(a) for a in arrays], axis=axis)
    return device.from_host(host)


def take(array, axis: int, lo: int, hi: int, device):
    """array[..., lo:hi, ...] along `axis`, contiguous, on `device`."""
    if not (is_host(device) or is_cuda(device)):
        host = device.to_host(array)
        return device.from_host(np.ascontiguousarray(_slice(host, axis, lo, hi)))
    xp = _xp(device)
    if xp is np:
        return np.ascontiguousarray(_slice(np.asarray(array), axis, lo, hi))
    with xp.cuda.Device(device.index):
        return xp.ascontiguousarray(_slice(array, axis, lo, hi))


def _slice(a, axis, lo, hi):
    sl = [slice(None)] * a.ndim
    sl[axis] = slice(lo, hi)
    return a[tuple(sl)]


def _on_device(device_id: str, fn):
    """fn(array module) run with `device_id` current (numpy on the host, CuPy on a CUDA
    device); None for a device whose arrays neither module reads."""
    dev = get_device(device_id)
    if is_cuda(dev):
        import cupy
        with cupy.cuda.Device(dev.index):
            return fn(cupy)
    return fn(np) if is_host(dev) else None


# ------------------------------------------------------------------ device groups
class DeviceGroup:
    """Collectives over a list of devices, combining through the host (or, for CUDA devices
    without NCCL, with peer copies onto the first device). `arrays[k]` lives on
    `devices[k]`; every collective returns one array per device, on that device."""

    kind = "host"

    def __init__(self, devices):
        self.devices = list(devices)
        if all(is_cuda(d) for d in self.devices):
            self.kind = "peer"

    def _combine(self, arrays, op):
        """The elementwise reduction of `arrays` on the first device."""
        first = self.devices[0]
        fn = _NP_REDUCE.get(op)
        if fn is None:
            raise ZynMLDeviceError(f"no collective combines partial results with `{op}`")
        if is_cuda(first):
            import cupy
            with cupy.cuda.Device(first.index):
                parts = [move(a, d, first) for a, d in zip(arrays, self.devices)]
                acc = parts[0].copy()
                for p in parts[1:]:
                    acc = getattr(cupy, fn.__name__)(acc, p)
                return acc, first
        parts = [np.asarray(a if is_host(d) else d.to_host(a))
                 for a, d in zip(arrays, self.devices)]
        acc = parts[0].copy()
        for p in parts[1:]:
            acc = fn(acc, p)
        return acc, _HOST

    def all_reduce(self, arrays, op: str = "+") -> list:
        acc, where = self._combine(arrays, op)
        return [move(acc, where, d) for d in self.devices]

    def reduce_scatter(self, arrays, op: str, axis: int, bounds) -> list:
        acc, where = self._combine(arrays, op)
        return [move(take(acc, axis, lo, hi, where), where, d)
                for d, (lo, hi) in zip(self.devices, bounds)]

    def all_gather(self, shards, axis: int) -> list:
        first = self.devices[0]
        full = concat([move(s, d, first) for s, d in zip(shards, self.devices)], axis, first)
        return [move(full, first, d) for d in self.devices]


class _HostDevice:
    id = "cpu"
    backend = "cpu"

    def to_host(self, a):
        return np.asarray(a)

    def from_host(self, a):
        return a


_HOST = _HostDevice()

_groups: dict = {}
_groups_lock = threading.Lock()


def group_for(devices) -> DeviceGroup:
    """The collectives of `devices` (Device objects): NCCL for distinct CUDA devices where
    CuPy has it, else host / peer-copy collectives. Made once per device list."""
    key = tuple(d.id for d in devices)
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = None
            ids = [getattr(d, "index", None) for d in devices]
            if len(devices) > 1 and all(is_cuda(d) for d in devices) and len(set(ids)) == len(ids):
                try:
                    from ..backends.cuda.nccl import NcclGroup
                    group = NcclGroup(devices)
                except Exception:       # no NCCL in this CuPy, or it cannot start
                    group = None
            if group is None:
                group = DeviceGroup(devices)
            _groups[key] = group
        return group


# ------------------------------------------------------------------ recording
# A traced pipeline call (runtime/traces.py) logs, on its thread, each block split over a
# device group (runtime/parallel.py) and each view made of a sharded result, so that its
# launches can be captured per device and replayed without running the body again.
_recording = threading.local()


class RecordingLog(list):
    """What a traced call logs; live while the call's frame is on the interpreter's stack
    `frames` (a call that failed leaves it behind: nothing after it is logged or held)."""

    def __init__(self, frames: list):
        super().__init__()
        self.frames, self.depth = frames, len(frames) + 1

    def live(self) -> bool:
        return len(self.frames) >= self.depth


def recording() -> "RecordingLog | None":
    """The log of the traced call running on this thread, or None."""
    log = getattr(_recording, "log", None)
    if log is not None and not log.live():
        log = _recording.log = None
    return log


def set_recording(log: "RecordingLog | None"):
    _recording.log = log


class ViewMade:
    """`out` made of `base` shard by shard: shard k of `out` is views[k](xp, shard k of
    `base`) (xp: the shard's array module)."""
    __slots__ = ("base", "out", "views")

    def __init__(self, base, out, views):
        self.base, self.out, self.views = base, out, views


def reshape_view(shape):
    return lambda xp, a: xp.reshape(a, shape)


def split_view(parts: int, axis: int, k: int):
    """Part k of `split(a, parts, axis)` (what split_parts takes from one xp.split)."""
    return lambda xp, a: xp.split(a, parts, axis=axis)[k]


def _note_view(base, out, views):
    log = recording()
    if log is not None:
        log.append(ViewMade(base, out, views))


# ------------------------------------------------------------------ sharded tensors
class ShardedTensor(Tensor):
    """A tensor cut along `axis` into shards on several devices.

    `shards`: [(device id, device array, (lo, hi))] in order along `axis`, covering 0..n.
    `data` (what host code and single-device blocks read) is the whole tensor gathered onto
    the first shard's device, made on first use; `numpy()` gathers onto the host.
    """

    __slots__ = ("shards", "axis", "group", "_gathered", "_replicas")
    remote = False              # shards held elsewhere (Dask workers), not on local devices

    def __init__(self, shards, axis: int, shape, dtype: str, group: DeviceGroup | None = None):
        self.shards = list(shards)
        self.axis = int(axis)
        self.group = group
        self._gathered = None
        self._replicas = {}
        self.device = self.shards[0][0]
        self.committed = True
        self._shape = tuple(int(s) for s in shape)
        self._dtype = dtype

    @property
    def data(self):
        if self._gathered is None:
            self._gathered = self.gather_array(self.device)
        return self._gathered

    @data.setter
    def data(self, value):
        self._gathered = value

    # ---------------------------------------------------------------- placement
    @property
    def devices(self) -> list:
        return [d for d, _, _ in self.shards]

    @property
    def bounds(self) -> list:
        return [b for _, _, b in self.shards]

    @property
    def placement(self) -> list:
        """[{device, axis, start, stop, shape}] of every shard."""
        out = []
        for dev, _, (lo, hi) in self.shards:
            shape = list(self._shape)
            shape[self.axis] = hi - lo
            out.append({"device": dev, "axis": self.axis, "start": lo, "stop": hi,
                        "shape": shape})
        return out

    def shard(self, k: int) -> Tensor:
        dev, arr, (lo, hi) = self.shards[k]
        shape = list(self._shape)
        shape[self.axis] = hi - lo
        return Tensor(arr, dev, shape, self._dtype, committed=True)

    def matches(self, axis: int, devices, bounds) -> bool:
        """Whether the shards are exactly `bounds` along `axis` on `devices` (ids)."""
        return self.axis == axis and self.devices == list(devices) and \
            self.bounds == list(bounds)

    # ---------------------------------------------------------------- gathering
    def gather_array(self, device_id: str):
        """The whole tensor as an array of `device_id` (peer copies between GPUs)."""
        dst = get_device(device_id)
        parts = [move(arr, get_device(dev), dst) for dev, arr, _ in self.shards]
        if len(parts) == 1:
            return parts[0]
        return concat(parts, self.axis, dst)

    def gather(self, device_id: str | None = None) -> Tensor:
        """The whole tensor on one device (the first shard's by default)."""
        device_id = device_id or self.device
        arr = self.data if device_id == self.device else self.gather_array(device_id)
        return Tensor(arr, get_device(device_id).id, self._shape, self._dtype, committed=True)

    def numpy(self) -> np.ndarray:
        if self._gathered is not None:
            g = self._gathered
            return g if isinstance(g, np.ndarray) else get_device(self.device).to_host(g)
        parts = []
        for dev, arr, _ in self.shards:
            parts.append(arr if isinstance(arr, np.ndarray) else get_device(dev).to_host(arr))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=self.axis)

    def replicas(self, device_ids) -> list:
        """The whole tensor on each of `device_ids`: an all-gather when they are the shards'
        own devices, else peer copies of the gathered tensor. Made once per device list (a
        sharded tensor never changes), so weights sharded once serve every later block."""
        key = tuple(device_ids)
        hit = self._replicas.get(key)
        if hit is not None:
            return hit
        if list(device_ids) == self.devices and self.group is not None and len(self.shards) > 1:
            out = self.group.all_gather([a for _, a, _ in self.shards], self.axis)
        else:
            first = get_device(self.device)
            out = [move(self.data, first, get_device(d)) for d in device_ids]
        self._replicas[key] = out
        return out

    def written(self):
        """Host code wrote into the gathered tensor (`t[i] = v`): the shards are made again
        from it, so that a block taking them as they are reads the new values, and the
        replicas are dropped."""
        full = self.data
        first = get_device(self.device)
        self.shards = [(dev, move(take(full, self.axis, lo, hi, first), first, get_device(dev)),
                        (lo, hi)) for dev, _, (lo, hi) in self.shards]
        self._replicas = {}

    # ---------------------------------------------------------------- shape changes
    def reshaped(self, shape) -> "ShardedTensor | None":
        """`reshape(t, shape)` shard by shard, on the devices, when `shape` (a -1 allowed)
        keeps every axis up to the sharded one; None when it does not (the caller gathers)."""
        shape = list(shape)
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = self.size // known if known else 0
        a = self.axis
        if self.remote or tuple(shape[:a + 1]) != self._shape[:a + 1]:
            return None
        shards, views = [], []
        for dev, arr, (lo, hi) in self.shards:
            view = reshape_view(tuple(shape[:a]) + (hi - lo,) + tuple(shape[a + 1:]))
            out = _on_device(dev, lambda xp, arr=arr, view=view: view(xp, arr))
            if out is None:
                return None
            shards.append((dev, out, (lo, hi)))
            views.append(view)
        out = ShardedTensor(shards, a, shape, self._dtype, self.group)
        _note_view(self, out, views)
        return out

    def split_parts(self, parts: int, axis: int) -> "tuple | None":
        """`split(t, parts, axis=axis)` shard by shard, each part sharded as `t` is, when
        `axis` is not the sharded axis; None when it is (the caller gathers)."""
        axis = axis % len(self._shape)
        if self.remote or axis == self.axis:
            return None
        pieces = []
        for dev, arr, _ in self.shards:
            got = _on_device(dev, lambda xp, arr=arr: xp.split(arr, parts, axis=axis))
            if got is None:
                return None
            pieces.append(got)
        shape = list(self._shape)
        shape[axis] //= parts
        outs = tuple(ShardedTensor([(dev, got[k], b) for (dev, _, b), got
                                    in zip(self.shards, pieces)],
                                   self.axis, shape, self._dtype, self.group)
                     for k in range(parts))
        for k, out in enumerate(outs):
            _note_view(self, out, [split_view(parts, axis, k)] * len(self.shards))
        return outs

    # ---------------------------------------------------------------- display
    def placement_text(self) -> str:
        rows = ", ".join(f"{dev}[{lo}:{hi}]" for dev, _, (lo, hi) in self.shards)
        return f"axis {self.axis} over {rows}"

    def summary(self) -> str:
        return (f"tensor[{', '.join(map(str, self.shape))}] {self.dtype} sharded along "
                f"{self.placement_text()}")

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), precision=4, threshold=64, edgeitems=3,
                               separator=", ", suppress_small=True)
        return (f"{type(self).__name__}(shape={list(self.shape)}, dtype={self.dtype}, "
                f"sharded={self.placement_text()!r},\n"
                f"       {body.replace(chr(10), chr(10) + '       ')})")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td><code>{html.escape(p['device'])}</code></td>"
                       f"<td>{p['start']}:{p['stop']}</td><td>{p['shape']}</td></tr>"
                       for p in self.placement)
        head = (f"<div class='zynbook-tensor'><b>{type(self).__name__}</b> "
                f"<code>[{', '.join(map(str, self.shape))}]</code> <code>{self.dtype}</code>, "
                f"sharded along axis {self.axis}"
                f"<table class='zynbook-tensor-table'><tr><th>device</th><th>range</th>"
                f"<th>shape</th></tr>{rows}</table>")
        preview = np.array2string(self.numpy(), precision=4, threshold=64, edgeitems=3,
                                  separator=", ")
        return head + f"<pre>{html.escape(preview)}</pre></div>"
