"""A Dask cluster (`dask.distributed`) as a ZynML device group: `@device("dask")`.

* `@device("dask")` runs on the scheduler that `config { cluster: "tcp://host:8786" }`
  names (else `$DASK_SCHEDULER_ADDRESS`, else a local cluster); `@device("dask:local")`
  starts a local cluster on demand (`$ZYNBOOK_DASK_WORKERS` worker processes, default 2,
  one thread each); `@device("dask:tcp://host:8786")` names a scheduler directly.
* With `@parallel(data)` (or `model`) the block is split as across local devices
  (runtime/parallel.py), one chunk per worker: each chunk is a Dask task that the worker
  compiles (with its own cache) and runs on its own best device (backends/dask/worker.py);
  a shard already on a worker (the output of an earlier block) is computed where it is.
  Without `@parallel` the block is one task.
* A split output stays on the workers: a `DistributedTensor` (shards as Dask futures),
  gathered when the host needs it, `to_dask_array()` for a Dask array, and taken as it is by
  the next `@parallel` block on the cluster that cuts it the same way. Partial results of a
  reduction are combined on the host.
* A shard that fails is a ZynMLDeviceError naming the worker; a worker lost while it ran a
  shard is run again by Dask on another worker, and a shard that loses workers again and
  again (Dask's `allowed-failures`) is an error naming the last one.
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
import warnings

import numpy as np

from ...compiler import cir
from ...errors import ZynMLDeviceError
from ...runtime.sharded import ShardedTensor, chunk_bounds
from ...runtime.tensor import Tensor
from ..base import Device, Launch, LaunchTimes

_lock = threading.Lock()
_clients: dict = {}         # address -> (Client, LocalCluster or None)
_devices: dict = {}


def cluster_device(device_id: str) -> "DaskCluster":
    with _lock:
        dev = _devices.get(device_id)
        if dev is None:
            dev = _devices[device_id] = DaskCluster(device_id)
        return dev


def _import_distributed():
    try:
        import distributed
        return distributed
    except ImportError:
        raise ZynMLDeviceError("@device(\"dask\") needs Dask: pip install "
                               "\"zynbook[dask]\" (dask[distributed])") from None


def client_for(address: str):
    """A Dask client for `address` ("local": a local cluster started here, once)."""
    distributed = _import_distributed()
    with _lock:
        hit = _clients.get(address)
        if hit is not None and hit[0].status == "running":
            return hit[0]
        cluster = None
        try:
            if address == "local":
                workers = int(os.environ.get("ZYNBOOK_DASK_WORKERS", "2"))
                env = {k: v for k, v in os.environ.items() if k.startswith("ZYNBOOK_")}
                cluster = distributed.LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    dashboard_address=":0", silence_logs=logging.CRITICAL, env=env)
                client = distributed.Client(cluster)
            else:
                timeout = os.environ.get("ZYNBOOK_DASK_TIMEOUT", "10s")
                client = distributed.Client(address, timeout=timeout)
        except Exception as err:
            where = "a local cluster" if address == "local" else f"the scheduler at {address}"
            raise ZynMLDeviceError(f"could not start or reach {where}: "
                                   f"{type(err).__name__}: {err}") from None
        _clients[address] = (client, cluster)
        return client


def _workers(client, address: str) -> list:
    """The cluster's workers. A cluster with none for the moment (still starting, or a worker
    the scheduler dropped under load being restarted by its nanny) is waited for, up to
    ZYNBOOK_DASK_WAIT seconds (60), before that is an error."""
    workers = sorted(client.scheduler_info().get("workers", {}))
    if not workers:
        try:
            client.wait_for_workers(1, timeout=float(os.environ.get("ZYNBOOK_DASK_WAIT", "60")))
        except Exception:       # (a timeout: the error below says so)
            pass
        workers = sorted(client.scheduler_info().get("workers", {}))
    if not workers:
        raise ZynMLDeviceError(f"the Dask cluster at {address} has no workers")
    return workers


def shutdown():
    """Close every client and local cluster this process started."""
    with _lock:
        items = list(_clients.values())
        _clients.clear()
    for client, cluster in items:
        try:
            client.close()
            if cluster is not None:
                cluster.close()
        except Exception:
            pass


class DaskCluster(Device):
    kind = "cluster"
    backend = "dask"

    def __init__(self, device_id: str):
        self.id = device_id
        self.name = "Dask cluster"

    def address(self, options: dict | None = None) -> str:
        if self.id == "dask:local":
            return "local"
        if self.id.startswith("dask:"):
            return self.id[len("dask:"):]
        options = options or {}
        return options.get("cluster") or os.environ.get("DASK_SCHEDULER_ADDRESS") or "local"

    def client(self, options: dict | None = None):
        return client_for(self.address(options))

    def info(self) -> dict:
        d = super().info()
        d["type"] = "cluster"
        return d

    def to_host(self, array):
        return np.asarray(array)

    def from_host(self, array):
        return np.asarray(array)

    def launch(self, kernel, inputs, sizes, scalars):
        """One task on one worker (what a block without @parallel does)."""
        client = self.client()
        fut = client.submit(_run_shard, kernel, [np.asarray(a) for a in inputs], sizes, scalars,
                            pure=False)
        out = _results(client, [fut])[0]
        return out, Launch(kernel.name, self.id, LaunchTimes(source="host-clock"))

    # ---------------------------------------------------------------- running
    def run(self, interp, lowered, inputs, sizes, given, scalars, mode, solve, options):
        """Run a compute block on the cluster (split when `mode` is data or model)."""
        from ...runtime.parallel import f32_partials, split_plan, widened_half
        distributed = _import_distributed()
        kernel = lowered.kernel
        client = self.client(options)
        workers = _workers(client, self.address(options))
        if mode is None:
            plan = None
            work = [(workers[0], None)]
        else:
            plan = split_plan(kernel, mode, options.get("model_split", "features"),
                              lowered.bound_spans)
            length = int(sizes[plan.stop])
            work = [(w, b) for w, b in zip(workers, chunk_bounds(length, len(workers)))
                    if b[1] > b[0]] or [(workers[0], (0, 0))]
        # partial sums of halves are kept in f32 and rounded once (runtime/parallel.py)
        half = widened_half(kernel, plan) if plan is not None else None
        shard_kernel = kernel if half is None else f32_partials(kernel, plan)
        names = [b.name for b in kernel.inputs]
        tag = uuid.uuid4().hex[:8]
        futures, chunk_sizes = [], []
        for k, (worker, bounds) in enumerate(work):
            args, shapes = [], {}
            for t, name in zip(inputs, names):
                axis = plan.axes.get(name) if plan is not None else None
                arg, shape = _input_for(client, t, axis, k, work, worker)
                args.append(arg)
                shapes[name] = shape
            if plan is None:
                csizes = dict(sizes)
            else:
                csizes = solve(shapes, {g: v for g, v in given.items() if g != plan.stop})
            chunk_sizes.append(csizes)
            with warnings.catch_warnings():     # large arrays in the graph are meant
                warnings.simplefilter("ignore")
                futures.append(client.submit(
                    _run_shard, shard_kernel, args, csizes, scalars,
                    key=f"zynml-{kernel.name}-{tag}-{k}", workers=[worker],
                    allow_other_workers=True, pure=False))
        distributed.wait(futures)
        _raise_failures(futures, [w for w, _ in work])
        held = _holders(client, futures)
        with interp._lock:
            for f, (worker, _) in zip(futures, work):
                interp.session.launches.append(
                    Launch(kernel.name, f"{self.id}/{held.get(f.key, worker)}",
                           LaunchTimes(source="host-clock"), {"dask_key": f.key}))
        dtype = kernel.output.dtype
        if plan is None:
            out = _results(client, futures)[0]
            if kernel.output.shape == ():
                return out
            return Tensor(out, "cpu", np.shape(out), dtype)
        if plan.combine == "concat":
            shards, offset = [], 0
            for f, (worker, _), cs in zip(futures, work, chunk_sizes):
                n = cir.output_shape(kernel, cs)[plan.out_axis]
                shards.append((held.get(f.key, worker), f, (offset, offset + n)))
                offset += n
            shape = list(cir.output_shape(kernel, sizes))
            shape[plan.out_axis] = offset
            return DistributedTensor(shards, plan.out_axis, shape, dtype, client, self.id)
        from ...runtime.parallel import combine_scalars, rounded_half
        from ...runtime.sharded import _NP_REDUCE
        parts = _results(client, futures)
        if kernel.output.shape == ():
            value = combine_scalars(plan.op, parts, "f32" if half else dtype)
            return value if half is None else rounded_half(np.float32(value), half).item()
        acc = np.asarray(parts[0]).copy()
        for p in parts[1:]:
            acc = _NP_REDUCE[plan.op](acc, p)
        return Tensor(acc if half is None else rounded_half(acc, half), "cpu", acc.shape, dtype)


def _run_shard(kernel, arrays, sizes, scalars):
    from .worker import run_shard
    return run_shard(kernel, arrays, sizes, scalars)


def _take(a, axis, lo, hi):
    sl = [slice(None)] * a.ndim
    sl[axis] = slice(lo, hi)
    return np.ascontiguousarray(a[tuple(sl)])


def _input_for(client, t, axis, k, work, worker):
    """(task argument, shape) of input `t` for chunk `k` of `work`: a shard already on the
    cluster as it is, else the host's slice scattered to the worker."""
    bounds = [b for _, b in work]
    if isinstance(t, DistributedTensor) and axis is not None and t.client is client and \
            t.axis == axis and t.bounds == bounds:
        _, fut, (lo, hi) = t.shards[k]
        return fut, tuple(t.shape[:axis]) + (hi - lo,) + tuple(t.shape[axis + 1:])
    host = t.numpy()
    if axis is not None:
        lo, hi = work[k][1]
        host = _take(host, axis, lo, hi)
    # the array travels inside the task (not scattered to one worker), so that the scheduler
    # can run the task again elsewhere when its worker is lost
    return host, host.shape


def _describe(err) -> str:
    from .worker import ShardFailed
    if isinstance(err, ShardFailed):
        return str(err)
    last = getattr(err, "last_worker", None)
    if last is not None:
        name = getattr(last, "address", last)
        return (f"a shard lost its Dask worker too many times (last on {name}): "
                f"{type(err).__name__}: {err}")
    return f"a Dask task failed: {type(err).__name__}: {err}"


def _raise_failures(futures, workers):
    for f, worker in zip(futures, workers):
        if f.status == "error":
            raise ZynMLDeviceError(_describe(f.exception()))
        if f.status == "cancelled":
            raise ZynMLDeviceError(f"the shard {f.key} sent to Dask worker {worker} was "
                                   "cancelled (a worker holding its input or the scheduler "
                                   "went away)")


def _results(client, futures):
    try:
        return client.gather(futures)
    except Exception as err:
        raise ZynMLDeviceError(_describe(err)) from None


def _holders(client, futures) -> dict:
    try:
        who = client.who_has(futures)
        return {k: sorted(v)[0] for k, v in who.items() if v}
    except Exception:
        return {}


class DistributedTensor(ShardedTensor):
    """A tensor whose shards stay on Dask workers (as futures) until the host gathers it."""

    __slots__ = ("client", "cluster_id")
    remote = True

    def __init__(self, shards, axis, shape, dtype, client, cluster_id):
        super().__init__(shards, axis, shape, dtype, None)
        self.client = client
        self.cluster_id = cluster_id
        self.device = "cpu"         # host code sees it gathered in host memory
        self.committed = False

    @property
    def data(self):
        if self._gathered is None:
            parts = _results(self.client, [f for _, f, _ in self.shards])
            self._gathered = parts[0] if len(parts) == 1 else \
                np.concatenate(parts, axis=self.axis)
        return self._gathered

    @data.setter
    def data(self, value):
        self._gathered = value

    def numpy(self) -> np.ndarray:
        return self.data

    def written(self):
        """Host code wrote into the gathered tensor: each worker is sent its new shard."""
        full = self.data
        self.shards = [(w, self.client.scatter(_take(full, self.axis, lo, hi), workers=[w]),
                        (lo, hi)) for w, _, (lo, hi) in self.shards]
        self._replicas = {}

    def gather_array(self, device_id: str):
        from ..registry import get_device
        dev = get_device(device_id)
        return dev.from_host(self.data) if dev.kind != "cpu" else self.data

    def shard(self, k: int) -> Tensor:
        _, fut, (lo, hi) = self.shards[k]
        arr = _results(self.client, [fut])[0]
        return Tensor(arr, "cpu", arr.shape, self._dtype)

    def replicas(self, device_ids) -> list:
        from ..registry import get_device
        return [get_device(d).from_host(self.data) for d in device_ids]

    def matches(self, axis, devices, bounds) -> bool:
        return False        # local device groups take the gathered tensor

    def to_dask_array(self):
        """The tensor as a Dask array whose chunks are the shards, still on the workers."""
        import dask
        import dask.array as da
        parts = []
        for _, fut, (lo, hi) in self.shards:
            shape = list(self._shape)
            shape[self.axis] = hi - lo
            parts.append(da.from_delayed(dask.delayed(fut), tuple(shape), dtype=self.numpy_dtype))
        return da.concatenate(parts, axis=self.axis) if len(parts) > 1 else parts[0]

    @property
    def dashboard_link(self) -> str:
        try:
            return self.client.dashboard_link
        except Exception:
            return ""

    def placement_text(self) -> str:
        rows = ", ".join(f"{w}[{lo}:{hi}]" for w, _, (lo, hi) in self.shards)
        return f"axis {self.axis} over Dask workers {rows}"

    def _repr_html_(self) -> str:
        link = self.dashboard_link
        extra = f" <a href='{link}' target='_blank'>Dask dashboard</a>" if link else ""
        return super()._repr_html_().replace("</table>", "</table>" + extra, 1)
