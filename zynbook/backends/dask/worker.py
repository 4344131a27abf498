"""What a Dask worker runs: one shard of a compute block, on the worker's own device.

The worker picks its device once: `$ZYNBOOK_WORKER_DEVICE` if set, else `auto` (its best
GPU, else its CPU). It compiles with its own kernel cache (`$ZYNBOOK_CACHE_DIR`, else the
user's cache folder on that host) and returns the shard's output as a numpy array, which
stays on the worker until the host gathers it. A failure is raised as `ShardFailed`,
naming the worker and its device.
"""
from __future__ import annotations

import os

import numpy as np


class ShardFailed(Exception):
    """A shard failed on a worker: (worker address, device id, message)."""

    def __init__(self, worker, device, message):
        super().__init__(worker, device, message)
        self.worker, self.device, self.message = worker, device, message

    def __str__(self):
        return f"on Dask worker {self.worker} ({self.device}): {self.message}"


def worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except Exception:
        return "?"


def worker_device_id() -> str:
    """The device this worker runs shards on: `$ZYNBOOK_WORKER_DEVICE`, else its best one;
    workers of a local cluster (named 0, 1, ...) on a host with several CUDA GPUs take one
    GPU each, in turn."""
    from ..registry import best_device_id, compute_devices, get_device
    pref = os.environ.get("ZYNBOOK_WORKER_DEVICE", "auto")
    if pref != "auto":
        return get_device(pref).id
    best = best_device_id()
    if best.startswith("cuda:"):
        gpus = sorted((d["id"] for d in compute_devices() if d["id"].startswith("cuda:")),
                      key=lambda i: int(i.split(":")[1]))
        try:
            from distributed import get_worker
            name = get_worker().name
        except Exception:
            name = None
        if len(gpus) > 1 and isinstance(name, int):
            return gpus[name % len(gpus)]
    return best


def run_shard(kernel, arrays, sizes: dict, scalars: dict):
    """Run `kernel` on `arrays` (numpy) with `sizes` on this worker's device."""
    from ...errors import ZynMLError
    from ..registry import get_device
    worker, dev_id = worker_address(), os.environ.get("ZYNBOOK_WORKER_DEVICE", "auto")
    try:
        dev_id = worker_device_id()
        dev = get_device(dev_id)
        out, _ = dev.launch(kernel, [np.asarray(a) for a in arrays], sizes, scalars)
        host = np.asarray(dev.to_host(out))
        if kernel.output.shape == ():
            return host.reshape(()).item()
        return host
    except ZynMLError as err:
        raise ShardFailed(worker, dev_id, f"{type(err).__name__}: {err.message}") from None
    except Exception as err:        # anything else a worker can meet (memory, driver)
        raise ShardFailed(worker, dev_id, f"{type(err).__name__}: {err}") from None
