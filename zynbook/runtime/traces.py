"""Pipeline calls replayed without interpreting them again.

A pipeline whose body is straight-line compute blocks (`let name = compute(...) {...}`
statements, then `return name`) launches, for given argument shapes, dtypes and devices
and given values of the outside names its blocks read, the same kernels with the same
scalars every time: nothing in it depends on anything else. Called when nothing is
recorded in the lazy graph, such a call runs its launches as one run of the graph, at its
return (runtime/lazy.py); once that run is replayed as a CUDA graph (runtime/replay.py), the
call's trace is kept: where each of the graph's outside inputs comes from (an argument, an
outside name) and which launch the result is. A later call with the same key replays the
graph on the inputs it finds there and returns a fresh copy of the result, without
evaluating the body; the launches are listed for the inspector as the recorded run listed
them. Whatever does not fit (another key, an input captured in place now at another
address, a buffer of the graph still held) runs the body as usual.
"""
from __future__ import annotations

import sys

from ..compiler import ast as A
from .tensor import Tensor

MAX_TRACES = 16         # calls whose traces are kept (each holds its graph and buffers)


class Traces:
    """The traces of one interpreter's pipeline calls."""

    def __init__(self, lazy):
        self.lazy = lazy
        self.forms: dict = {}       # id(pipeline node) -> (node, _Form or None)
        self.entries: dict = {}     # call key -> _Trace

    def enter(self, p, args: list):
        """(the result of replaying this call, None) when its trace replays, else (None,
        a recorder to `leave` with the result, or None where the call cannot be traced)."""
        lazy = self.lazy
        if lazy.pending or lazy.replays.mode() is False or not _on_cuda(lazy.interp, args):
            return None, None
        form = self._form(p.node)
        if form is None:
            return None, None
        key = form.key(lazy.interp, p, args)
        if key is None:
            return None, None
        trace = self.entries.get(key)
        if trace is not None and trace.node is p.node:     # (the key holds the node's id)
            value = trace.replay(lazy.interp, args)
            if value is not None:
                return value, None
        return None, _Recorder(self, key, p.node, form, args)

    def _form(self, node):
        hit = self.forms.get(id(node))
        if hit is None or hit[0] is not node:
            hit = self.forms[id(node)] = (node, _Form.of(node))
        return hit[1]


class _Form:
    """A straight-line pipeline: its parameters, and the outside labels its blocks read."""

    def __init__(self, outside: tuple):
        self.outside = outside      # labels ("n", "model.w") whose root is no local name

    @staticmethod
    def of(node) -> "_Form | None":
        from ..compiler.freenames import compute_free_names
        from ..compiler.lower import dotted
        local = {q.name for q in node.params}
        for q in node.params:
            for d in (q.type.dims or []) if q.type is not None else []:
                if isinstance(d, A.Name):
                    local.add(d.id)
        outside = []
        body = node.body
        if not body or not isinstance(body[-1], A.Return) or \
                not isinstance(body[-1].value, A.Name):
            return None
        for s in body[:-1]:
            if not (isinstance(s, A.Let) and not s.destructure and s.type is None and
                    len(s.names) == 1 and isinstance(s.value, A.Compute) and
                    _fixed_annotations(s.value)):
                return None
            labels = [dotted(e) for e in s.value.inputs]
            if any(label is None for label in labels):
                return None
            for label in labels + list(compute_free_names(s.value)):
                if label.split(".")[0] not in local and label not in outside:
                    outside.append(label)
            local.add(s.names[0])
        if body[-1].value.id not in local:
            return None
        return _Form(tuple(outside))

    def key(self, interp, p, args: list):
        """What decides the call's launches: the session's settings that choose kernels and
        devices, the arguments' kinds, shapes, dtypes and devices (a number's value), and
        the same of the outside values read; None where a value is neither a computed
        tensor nor a number."""
        session = interp.session
        parts = [id(p.node), interp.extra_key, session.default_device,
                 getattr(session, "fuse", True), getattr(session, "tuning", None)]
        for v in list(args) + [self.value(interp, label) for label in self.outside]:
            if isinstance(v, Tensor):
                if getattr(v, "done", True) is False:
                    return None
                parts.append((v.dtype, v.shape, v.device, v.committed))
            elif isinstance(v, (bool, int, float, str)) or v is _ABSENT:
                parts.append((type(v), v))
            else:
                return None
        return tuple(parts)

    @staticmethod
    def value(interp, label: str):
        root, *fields = label.split(".")
        if root not in interp.globals:
            return _ABSENT          # a size the block infers from its inputs' shapes
        value = interp.globals[root]
        for f in fields:
            value = interp.attr(value, f, None)
        return value


_ABSENT = "<absent>"


def _fixed_annotations(node: A.Compute) -> bool:
    """Whether every argument of the block's annotations is a literal (one reading a name,
    `@device(dev)`, may differ from call to call)."""
    anns = list(node.annotations) + [s.annotation for s in node.body
                                     if isinstance(s, A.AnnotationStmt)]
    return all(_literal(e) for ann in anns for e in
               list(ann.args) + list(ann.kernel_args) +
               [kw.value for kw in list(ann.kwargs) + list(ann.kernel_kwargs)])


def _literal(e) -> bool:
    if isinstance(e, A.ListLit):
        return all(_literal(x) for x in e.items)
    return isinstance(e, (A.Number, A.String, A.Bool))


def _on_cuda(interp, args) -> bool:
    """Whether the call may launch on a CUDA device (elsewhere there is no graph to replay,
    and its return stays no boundary of the lazy graph)."""
    return interp.default_device.startswith("cuda") or any(
        isinstance(a, Tensor) and a.device.startswith("cuda") for a in args)


class _Recorder:
    """A call being run as usual; its launches become a trace where a CUDA graph ran them."""

    def __init__(self, traces: Traces, key, node, form: _Form, args: list):
        self.traces, self.key, self.node, self.form, self.args = traces, key, node, form, args
        # launches listed before the call: a trace is made only where all of the call's
        # launches ran in the one graph (not a block launched where it is met, nor a run
        # of the lazy graph made before the return)
        self.before = len(traces.lazy.interp.session.launches)

    def leave(self, result):
        """Run the call's launches (its return is their boundary) and keep the trace."""
        lazy = self.traces.lazy
        session = lazy.interp.session
        before = self.before
        lazy.flush(roots=[result])
        ran, lazy.replays.last = lazy.replays.last, None
        if ran is None or getattr(result, "done", False) is False:
            return lazy.plain(result)
        trace = _Trace.of(self, ran, result, session, before)
        if trace is not None:
            entries = self.traces.entries
            entries[self.key] = trace
            if len(entries) > MAX_TRACES:
                entries.pop(next(iter(entries)))
        return lazy.plain(result)


class _Trace:
    """A call's CUDA graph, where its inputs come from and which launch is its result."""

    def __init__(self, node, record, sources, result_index, result_meta, listed):
        self.node, self.record, self.sources = node, record, sources
        self.result_index, self.result_meta = result_index, result_meta
        self.listed = listed        # (CompiledKernel, Launch) per launch, as first listed

    @staticmethod
    def of(recorder: _Recorder, ran, result, session, before: int) -> "_Trace | None":
        """The trace of a call whose launches `ran` (the record replayed, its inputs, the
        ids of the lazy values it computed) ran."""
        record, inputs, results = ran
        interp = recorder.traces.lazy.interp
        where = {}
        values = [(("arg", i), a) for i, a in enumerate(recorder.args)] + \
            [(("label", label), _Form.value(interp, label)) for label in recorder.form.outside]
        for src, v in values:
            if isinstance(v, Tensor):
                if id(v.data) in where:     # one array for two names: a later call may differ
                    return None
                where[id(v.data)] = src
        sources = []
        for a in inputs:
            src = where.get(id(a))
            if src is None:
                return None
            sources.append(src)
        if not isinstance(getattr(result, "result", None), Tensor) or id(result) not in results:
            return None
        k = results.index(id(result))
        listed = list(zip(session.last_kernels[before:], session.launches[before:]))
        if len(listed) != len(record.plans):
            return None
        meta = (result.shape, result.dtype, result.device, result.committed)
        return _Trace(recorder.node, record, tuple(sources), k, meta, listed)

    def replay(self, interp, args: list):
        """The call's result from a replay of its graph, or None where it cannot replay."""
        arrays = []
        for kind, where in self.sources:
            v = args[where] if kind == "arg" else _Form.value(interp, where)
            arrays.append(v.data)
        record = self.record
        cp = sys.modules.get("cupy")
        stream = cp.cuda.get_current_stream() if cp is not None else None
        if getattr(stream, "ptr", None) != record.stream.ptr or \
                not record.fits(tuple(a.data.ptr for a in arrays)) or not record.free():
            return None
        from ..backends.base import Launch
        from .interp import CompiledKernel
        interp.session.activity = (record.plans[0].kernel.name, record.device.id)
        times = record.replay(arrays)
        record.handed = []
        out = record.graph.outs[self.result_index]
        data = cp.empty(out.shape, dtype=out.dtype)
        data.data.copy_from_device_async(out.data, out.nbytes, stream)
        *listed, (compiled, launch) = self.listed
        launch = Launch(launch.kernel, launch.device, times, launch.geometry)
        compiled = CompiledKernel(compiled.lowered, compiled.device, launch, compiled.sizes,
                                  compiled.fusion)
        with interp._lock:
            interp.session.last_kernels.extend(c for c, _ in listed)
            interp.session.launches.extend(ln for _, ln in listed)
            interp.session.last_kernels.append(compiled)
            interp.session.launches.append(launch)
        shape, dtype, device, committed = self.result_meta
        return Tensor(data, device, shape, dtype, committed=committed)
