"""CUDA graphs: a run of launches captured once on a stream and replayed as one.

`capture` records the kernels of a list of launch plans (`CudaPlan.enqueue`) with CuPy's
stream capture (`Stream.begin_capture` / `end_capture`): nothing runs while it records,
and the graph keeps every buffer the kernels use (outputs, scratch, error flags, inputs
staged by copying). `CapturedGraph.replay` queues the graph on the caller's stream, with
the inputs that are not captured in place first copied into their staging buffers, then
reads the error flags of the kernels that can fail (waiting for the graph only then).
A strided input (a view) is staged: copied elementwise into its contiguous buffer.

With `tail`, the last launch is left out of the graph and queued after it at every replay
into a fresh output: the run's value handed to the caller (a named result) is then that
launch's own output, not a copy of the graph's buffer (a copy is a read and a write of the
whole result, and a launch, at every replay).

Captures of graphs replayed on one stream are made on one private stream of their own:
a plan's scratch buffers and error flag are per stream, so every graph replayed on a
stream shares them, and replays on one stream run one after another."""
from __future__ import annotations

import threading

import numpy as np

from ...errors import ZynMLDeviceError
from ..base import DeferredKernelTime
from .device import _cp, event_pair, view_strides

_lock = threading.Lock()


class CaptureFailed(ZynMLDeviceError):
    """The driver (or CuPy) refused to capture: the launches run one by one instead."""


def capture_stream(device, stream):
    """The private stream graphs replayed on `stream` are captured on."""
    with _lock:
        streams = device.__dict__.setdefault("_capture_streams", {})
        s = streams.get(stream.ptr)
        if s is None:
            with device.cupy_device:
                s = streams[stream.ptr] = _cp().cuda.Stream(non_blocking=True)
        return s


class CapturedGraph:
    """A captured run: the graph, each launch's output and error flag, the staging
    buffers of inputs copied in at every replay, and what the capture allocated."""

    def __init__(self, graph, outs, flags, staging, held, tail=None):
        self.graph, self.outs, self.flags = graph, outs, flags
        self.staging, self.held = staging, held
        self.tail = tail            # (plan, wires, scalars) of the launch queued after the graph
        self.events: list = []      # event pairs timing replays, reused once read or dropped

    def fresh(self, k: int) -> bool:
        """Whether launch k's output is a new array at every replay (the tail's)."""
        return self.tail is not None and k == len(self.outs) - 1

    def handed(self):
        """The tail's output was handed out: not kept here (so that the caller dropping it
        frees it for the next replay's output, which then lies where it did)."""
        if self.tail is not None:
            self.outs[-1] = None

    def replay(self, inputs: list, stream) -> DeferredKernelTime:
        """Queue the graph on `stream` after copying the staged `inputs` in; the time of
        the whole graph, read when asked for."""
        cp = _cp()
        for j, buf in self.staging:
            a = inputs[j]
            if a.flags.c_contiguous:
                buf.data.copy_from_device_async(a.data, buf.nbytes, stream)
            else:               # a strided view: an elementwise copy on the current stream
                with self.device.cupy_device:
                    buf[...] = a
        pair = event_pair(self.events, cp)
        pair[0].record(stream)
        self.graph.launch(stream)
        if self.tail is not None:
            plan, wires, values = self.tail
            source = list(inputs)
            for j, buf in self.staging:
                source[j] = buf
            # (its buffers not held: the pool reuses memory in the stream's order)
            _, self.outs[-1], self.flags[-1] = plan.enqueue(
                cp, stream, [_wired(w, self.outs, source) for w in wires], values)
        pair[1].record(stream)
        self.end = pair[1]
        return DeferredKernelTime(lambda: _elapsed(*pair), None, None, "gpu-events")

    def check(self, plans: list) -> int | None:
        """The index of the first launch whose error flag reports a failure (the graph
        waited for first, where some launch can fail), or None."""
        checked = self.__dict__.get("checked")
        if checked is None:
            checked = self.checked = [k for k, p in enumerate(plans) if p.checked]
        if not checked:
            return None
        self.end.synchronize()
        for k in checked:
            if self.flags[k].get().any():
                return k
        return None


def capture(device, stream, plans: list, wiring: list, scalars: list, inputs: list,
            staged: set, tail: bool = False) -> CapturedGraph:
    """Capture the launches of `plans` in order: launch k reads, per input, ("g", i) the
    output of launch i, ("v", i, view) the array `view(output of launch i)` (a reshape or
    part of it, made once here; a strided one is copied contiguous inside the graph, as a
    launch one by one copies it) or ("x", j) input j (`inputs`: CuPy arrays; those in
    `staged` are read from copies made at each replay), with `scalars[k]`. With `tail`
    the last launch is not captured but queued after the graph at each replay."""
    cp = _cp()
    private = capture_stream(device, stream)
    _plan_views(plans, wiring)
    with device.cupy_device, private:
        staging = [(j, cp.empty(inputs[j].shape, dtype=inputs[j].dtype)) for j in sorted(staged)]
        source = list(inputs)
        for j, buf in staging:
            source[j] = buf
        outs, flags, held = [], [], []
        try:
            private.begin_capture()
        except Exception as err:
            raise CaptureFailed(f"CUDA stream capture could not begin: {err}") from None
        captured = len(plans) - 1 if tail else len(plans)
        try:
            for plan, wires, values in zip(plans[:captured], wiring, scalars):
                arrays = [_wired(w, outs, source) for w in wires]
                bufs, out, flag = plan.enqueue(cp, private, arrays, values)
                outs.append(out)
                flags.append(flag)
                held.append(bufs)
        except BaseException as err:
            try:
                private.end_capture()
            except Exception:
                pass
            if isinstance(err, Exception):     # launched one by one, a real error recurs
                raise CaptureFailed(f"CUDA stream capture failed: {err}") from None
            raise
        try:
            graph = private.end_capture()
        except Exception as err:
            raise CaptureFailed(f"CUDA stream capture failed: {err}") from None
    last = None
    if tail:        # its output, flag and buffers are set by each replay
        last = (plans[-1], wiring[-1], scalars[-1])
        outs.append(None), flags.append(None)
    record = CapturedGraph(graph, outs, flags, staging, held, last)
    record.device = device
    return record


def _plan_views(plans: list, wiring: list):
    """Make, before the capture begins (a module loaded while capturing could end it), the
    plans that read views of earlier outputs where they lie (CudaPlan.plan_for), each view's
    strides found on a stand-in of the output (a view that can make one: `on_stand_in`)."""
    for plan, wires in zip(plans, wiring):
        views = []
        for j in getattr(plan, "strided_ok", ()):
            wire = wires[j]
            made = getattr(wire[2], "on_stand_in", None) if wire[0] == "v" else None
            out = plans[wire[1]]
            if made is None or np.dtype(out.out_dtype) != plan.dtypes[j][1]:
                continue
            a = made(tuple(out.out_shape), np.dtype(out.out_dtype).itemsize)
            found = None if a.flags.c_contiguous else view_strides(a.shape, a.strides, a.itemsize)
            if found is not None:
                views.append((j, found))
        if views:
            plan.plan_for(tuple(views))


def _wired(wire, outs: list, source: list):
    kind, i = wire[0], wire[1]
    if kind == "g":
        return outs[i]
    if kind == "v":
        return wire[2](outs[i])
    return source[i]


def _elapsed(start, end) -> float:
    end.synchronize()
    return _cp().cuda.get_elapsed_time(start, end) / 1000.0
