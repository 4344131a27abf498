"""Data-parallel training over a device group: one replica of the model per device, each
running the training step on its shard of the batch, the gradients all-reduced.

    dp = DataParallel(["cuda:0", "cuda:1"], GPTConfig(vocab=80))
    loss = dp.train_step(batch_ids, batch_targets)       # [batch, seq] token ids

Every replica starts from the same weights. The batch's sequences are cut into contiguous,
nearly equal shards (the first devices take one more where it does not divide); each device
sums the gradients of its sequences. On CUDA GPUs, whose launches return as soon as they are
queued, one host thread issues the replicas' sequences in turn (no launch threads contending
for the interpreter); on other distinct devices, whose launches return when done, a host
thread each runs them at the same time. Each replica's gradient sums are packed into one flat
bucket on its device, the buckets all-reduced in one collective per step
(zynbook/runtime/sharded.py: NCCL between CUDA devices, the host for any other group, a
`["cpu", "cpu"]` group included) and scaled by 1 / batch in one launch, and every gradient
is handed back as its span of the bucket. Every replica takes the same AdamW step, so the
replicas stay equal. The result equals `TinyGPT.train_batch` on one device, up to the order
of the gradients' sums.
"""
from __future__ import annotations

from ..errors import ZynMLDeviceError, ZynMLShapeError
from .model import GPTConfig, TinyGPT, _token_array, init_weights, run_interleaved


def _batch(ids, targets):
    ids, targets = _token_array(ids, "ids"), _token_array(targets, "targets")
    if ids.ndim == 1:
        ids, targets = ids[None], targets[None]
    if ids.ndim != 2 or ids.shape != targets.shape or ids.shape[0] == 0:
        raise ZynMLShapeError(f"a batch is [batch, seq] token ids with targets of the same shape, "
                              f"not {list(ids.shape)} and {list(targets.shape)}")
    return ids, targets


class DataParallel:
    """TinyGPT replicas on `device_ids` (a list of ids; an id may repeat, as in
    `["cpu", "cpu"]`), trained data-parallel."""

    def __init__(self, device_ids, config: GPTConfig, weights: dict | None = None):
        from .device import device
        if isinstance(device_ids, str) or not device_ids:
            raise ZynMLDeviceError("DataParallel takes a list of device ids, like "
                                   "[\"cuda:0\", \"cuda:1\"] or [\"cpu\", \"cpu\"]")
        self.device_ids = list(device_ids)
        self.config = config
        host = weights if weights is not None else init_weights(config)
        self.replicas = [TinyGPT(device(d), config, host) for d in self.device_ids]
        self._group = None
        # distinct devices other than CUDA GPUs (whose launches only queue) run their
        # replicas on a host thread each; the others take turns on the calling thread
        distinct = len(set(self.device_ids)) == len(self.device_ids) > 1
        self.threaded = distinct and not all(d.startswith("cuda:") for d in self.device_ids)
        self._executor = None

    def _pool(self):
        if self._executor is None:
            from concurrent.futures import ThreadPoolExecutor
            self._executor = ThreadPoolExecutor(len(self.replicas),
                                                thread_name_prefix="zynml-data-parallel")
        return self._executor

    @property
    def group(self):
        """The collectives of the replicas' devices."""
        if self._group is None:
            from ..runtime.sharded import group_for
            self._group = group_for([r.dev.backend for r in self.replicas])
        return self._group

    def shards(self, batch: int) -> list:
        from ..runtime.sharded import chunk_bounds
        return chunk_bounds(batch, len(self.replicas))

    def loss_and_grads(self, ids, targets):
        """(the batch's mean loss, [{name: gradient} per replica]): every replica holds the
        mean gradient of the whole batch after the all-reduce."""
        ids, targets = _batch(ids, targets)
        batch = ids.shape[0]
        jobs = [(replica, ids[lo:hi], targets[lo:hi])
                for replica, (lo, hi) in zip(self.replicas, self.shards(batch))]
        if self.threaded:
            results = list(self._pool().map(lambda job: job[0].grad_sum(job[1], job[2]), jobs))
        else:
            results = run_interleaved([r.grad_steps(x, y) for r, x, y in jobs])
        losses = [r[0] for r in results]
        sums = [r[1] for r in results]
        self.all_reduce_mean(sums, batch)
        return float(sum(losses)) / batch, sums

    def all_reduce_mean(self, sums: list, batch: int):
        """Every replica's {name: gradient sum} replaced, in place, by the mean over the
        batch of all replicas' sums: one flat bucket per replica, one all-reduce, one scaling
        launch per replica, each gradient a span of its replica's bucket."""
        from ..runtime.sharded import concat, take
        names = list(sums[0])
        spans, offset = [], 0
        for name in names:
            n = len(sums[0][name])
            spans.append((offset, offset + n))
            offset += n
        if offset == 0:
            return
        buckets = []
        for replica, grads in zip(self.replicas, sums):
            arrays = [grads[name].tensor.data for name in names if len(grads[name])]
            flat = arrays[0] if len(arrays) == 1 else concat(arrays, 0, replica.dev.backend)
            buckets.append(flat)
        reduced = self.group.all_reduce(buckets, "+")
        for replica, grads, flat in zip(self.replicas, sums, reduced):
            first = grads[names[0]].tensor
            bucket = {"bucket": replica.dev._wrap(_same_tensor(first, flat, (offset,)))}
            replica.scale_grads(bucket, 1.0 / batch)
            flat = bucket["bucket"].tensor.data
            for name, (lo, hi) in zip(names, spans):
                buf = grads[name]
                if hi > lo:
                    part = take(flat, 0, lo, hi, replica.dev.backend)
                    buf.tensor = _same_tensor(buf.tensor, part)

    def train_step(self, ids, targets, lr: float | None = None) -> float:
        """One data-parallel step: the batch's mean loss (before the update)."""
        loss, grads = self.loss_and_grads(ids, targets)
        for replica, g in zip(self.replicas, grads):
            replica.apply_grads(g, lr)
        return loss

    def sync(self):
        for r in self.replicas:
            r.dev.sync()


def _same_tensor(old, data, shape=None):
    """`data` (an array of `old`'s device) as a tensor like `old` (of `shape` if given)."""
    from ..runtime.tensor import Tensor
    return Tensor(data, old.device, shape or old.shape, old.dtype, committed=True)
