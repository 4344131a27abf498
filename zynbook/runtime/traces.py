"""Pipeline calls replayed without interpreting them again.

A pipeline whose body is compute blocks (`let name = compute(...) {...}`), host look-ups of
bound values (`let weights = model.layers[layer]`: names, fields, indices), views (`let (q,
k, v) = split(qkv, 3, axis=-1)`, `let q = reshape(q, [...])`), then `return name`,
launches, for given argument shapes, dtypes and devices, given values looked up (records
and lists by identity, tensors by shape, dtype and device) and given values of the outside
names it reads, the same kernels with the same scalars every time, reading views at the same
offsets and strides of the same outputs: nothing in it depends on anything else. Called
when nothing is recorded in the lazy graph, such a call runs its launches as runs of the
graph (one at each boundary its views make, one at its return: runtime/lazy.py); once every
run is replayed as a CUDA graph (runtime/replay.py), the call's trace is kept: where each
graph's inputs come from (an argument, an outside name, a field of a looked-up value, a view
of an earlier graph's output) and which launch the result is. A later call with the same key
replays the graphs in order on the inputs it finds there (the views of earlier outputs are
the recorded call's own views, refreshed by a copy where that call copied the output out)
and returns a fresh copy of the result, without evaluating the body; the launches are
listed for the inspector as the recorded run listed them. Whatever does not fit (another
key, an input captured in place now at another address, a buffer of a graph still held)
runs the body as usual.
"""
from __future__ import annotations

import sys

from ..compiler import ast as A
from .tensor import Tensor
from .values import Record

MAX_TRACES = 16         # calls whose traces are kept (each holds its graphs and buffers)
VIEWS = ("split", "reshape")    # builtins whose results are views of their first argument


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
        lazy.replays.log = None     # (one left by a call that failed)
        if lazy.pending or lazy.replays.mode() is False or not _on_cuda(lazy.interp, args):
            return None, None
        form = self._form(p.node)
        if form is None:
            return None, None
        host = form.look_up(lazy.interp, p, args)
        if host is None:
            return None, None
        key = form.key(lazy.interp, p, args, host)
        if key is None:
            return None, None
        trace = self.entries.get(key)
        if trace is not None and trace.node is p.node:     # (the key holds the node's id)
            value = trace.replay(lazy.interp, args, host)
            if value is not None:
                return value, None
        return None, _Recorder(self, key, p.node, form, args, host)

    def _form(self, node):
        hit = self.forms.get(id(node))
        if hit is None or hit[0] is not node:
            hit = self.forms[id(node)] = (node, _Form.of(node))
        return hit[1]


class _Form:
    """A traceable pipeline: its host look-ups, and the labels its statements read."""

    def __init__(self, outside: tuple, lookups: tuple, fields: tuple):
        self.outside = outside      # labels ("n", "model.w") whose root is no local name
        self.lookups = lookups      # (name, expression) of each host look-up, in order
        self.fields = fields        # labels ("weights.w", "w") read from a looked-up value

    @staticmethod
    def of(node) -> "_Form | None":
        from ..compiler.freenames import compute_free_names
        from ..compiler.lower import dotted
        local = {q.name for q in node.params}
        for q in node.params:
            for d in (q.type.dims or []) if q.type is not None else []:
                if isinstance(d, A.Name):
                    local.add(d.id)
        outside, lookups, fields = [], [], []
        looked = set()

        def read(label):
            root = label.split(".")[0]
            if root in looked:
                if label not in fields:
                    fields.append(label)
            elif root not in local and label not in outside:
                outside.append(label)

        body = node.body
        if not body or not isinstance(body[-1], A.Return) or \
                not isinstance(body[-1].value, A.Name):
            return None
        for s in body[:-1]:
            if not (isinstance(s, A.Let) and s.type is None):
                return None
            if any(n in looked for n in s.names):
                return None         # a looked-up name bound again
            v = s.value
            if isinstance(v, A.Compute) and not s.destructure and len(s.names) == 1:
                named = _annotation_names(v)
                labels = [dotted(e) for e in v.inputs]
                if named is None or any(label is None for label in labels):
                    return None
                for label in labels + list(compute_free_names(v)) + named:
                    read(label)
                local.add(s.names[0])
            elif _view(v, local, len(s.names) if s.destructure else 0):
                for name in _names(v.args[1:]) + _names([kw.value for kw in v.kwargs]):
                    read(name)
                local.update(s.names)
            elif not s.destructure and len(s.names) == 1 and _lookup(v, local | looked):
                for name in _names(_indices(v)):
                    read(name)
                lookups.append((s.names[0], v))
                looked.add(s.names[0])
            else:
                return None
        if body[-1].value.id not in local:
            return None
        return _Form(tuple(outside), tuple(lookups), tuple(fields))

    def look_up(self, interp, p, args: list):
        """{name: value} of the host look-ups, made as the body makes them; None where
        one fails (the body then raises its error)."""
        if not self.lookups:
            return {}
        frame = {q.name: v for q, v in zip(p.node.params, args)}
        interp.frames.append((frame, set()))
        try:
            for name, e in self.lookups:
                frame[name] = interp.eval(e)
        except Exception:
            return None
        finally:
            interp.frames.pop()
        return {name: frame[name] for name, _ in self.lookups}

    def key(self, interp, p, args: list, host: dict):
        """What decides the call's launches: the session's settings that choose kernels and
        devices, the arguments' kinds, shapes, dtypes and devices (a number's value), the
        looked-up values (a record or list by identity) and the same of the outside values
        and the fields read; None where a value is none of these."""
        session = interp.session
        if any(name in interp.globals for name in VIEWS):
            return None             # a program's own `split` or `reshape`
        parts = [id(p.node), interp.extra_key, session.default_device,
                 getattr(session, "fuse", True), getattr(session, "tuning", None)]
        looked = [v if isinstance(v, (Tensor, bool, int, float, str)) else _Identity(v)
                  for v in host.values()]
        for v in list(args) + looked + [self.value(interp, label, host)
                                        for label in self.outside + self.fields]:
            if isinstance(v, Tensor):
                if getattr(v, "done", True) is False:
                    return None
                parts.append((v.dtype, v.shape, v.device, v.committed))
            elif isinstance(v, (bool, int, float, str)) or v is _ABSENT:
                parts.append((type(v), v))
            elif isinstance(v, _Identity) and isinstance(v.value, (Record, dict, list, tuple)):
                parts.append(("id", id(v.value)))
            else:
                return None
        return tuple(parts)

    @staticmethod
    def value(interp, label: str, host: dict):
        root, *fields = label.split(".")
        if root in host:
            value = host[root]
        elif root in interp.globals:
            value = interp.globals[root]
        else:
            return _ABSENT          # a size the block infers from its inputs' shapes
        for f in fields:
            value = interp.attr(value, f, None)
        return value


_ABSENT = "<absent>"


class _Identity:
    """A looked-up host value that keys a trace by its identity (a record, a list)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _view(e, local: set, parts: int) -> bool:
    """Whether `e` is `split(name, n, axis=k)` (`parts` names bound) or `reshape(name,
    [sizes])` (one name bound) of a local tensor, its sizes literals or names."""
    if not (isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id in VIEWS and
            e.args and isinstance(e.args[0], A.Name) and e.args[0].id in local):
        return False
    if e.func.id == "split":
        return (parts > 0 and len(e.args) == 2 and isinstance(e.args[1], A.Number) and
                e.args[1].value == parts and all(kw.name == "axis" and _int(kw.value)
                                                 for kw in e.kwargs))
    return (parts == 0 and len(e.args) == 2 and not e.kwargs and
            isinstance(e.args[1], A.ListLit) and
            all(_int(d) or isinstance(d, A.Name) for d in e.args[1].items))


def _lookup(e, local: set) -> bool:
    """Whether `e` looks a host value up: names, fields and indices by names or numbers."""
    if isinstance(e, A.Name):
        return True
    if isinstance(e, A.Attr):
        return _lookup(e.base, local)
    if isinstance(e, A.Index):
        return _lookup(e.base, local) and all(_int(i) or isinstance(i, A.Name)
                                              for i in e.items)
    return False


def _indices(e) -> list:
    """The index expressions of a look-up (its root is keyed by the value looked up)."""
    if isinstance(e, A.Attr):
        return _indices(e.base)
    if isinstance(e, A.Index):
        return _indices(e.base) + list(e.items)
    return []


def _int(e) -> bool:
    if isinstance(e, A.UnaryOp) and e.op == "neg":
        e = e.operand
    return isinstance(e, A.Number) and isinstance(e.value, int)


def _names(exprs) -> list:
    """The names read by size lists, indices and look-ups."""
    out = []
    for e in exprs:
        if isinstance(e, A.Name):
            out.append(e.id)
        elif isinstance(e, A.ListLit):
            out += _names(e.items)
        elif isinstance(e, A.Attr):
            out += _names([e.base])
        elif isinstance(e, A.Index):
            out += _names([e.base] + list(e.items))
    return out


def _annotation_names(node: A.Compute) -> list | None:
    """The names read by the block's annotations (sizes such as `@shared(seq * 4)`, keyed
    by their values), or None where one may pick another device from call to call
    (`@device(dev)`: a device's argument is a literal)."""
    anns = list(node.annotations) + [s.annotation for s in node.body
                                     if isinstance(s, A.AnnotationStmt)]
    names = []
    for ann in anns:
        for e in list(ann.args) + list(ann.kernel_args) + \
                [kw.value for kw in list(ann.kwargs) + list(ann.kernel_kwargs)]:
            if not _literal(e, names if ann.name != "device" else None):
                return None
    return names


def _literal(e, names: list | None) -> bool:
    """Whether `e` is a literal, or (`names` given, the names it reads appended) arithmetic
    on literals and names."""
    if isinstance(e, A.ListLit):
        return all(_literal(x, names) for x in e.items)
    if names is not None:
        if isinstance(e, A.Name):
            names.append(e.id)
            return True
        if isinstance(e, A.BinOp):
            return _literal(e.left, names) and _literal(e.right, names)
        if isinstance(e, A.UnaryOp):
            return _literal(e.operand, names)
    return isinstance(e, (A.Number, A.String, A.Bool))


def _on_cuda(interp, args) -> bool:
    """Whether the call may launch on a CUDA device (elsewhere there is no graph to replay,
    and its return stays no boundary of the lazy graph)."""
    return interp.default_device.startswith("cuda") or any(
        isinstance(a, Tensor) and a.device.startswith("cuda") for a in args)


class _Recorder:
    """A call being run as usual; its launches become a trace where CUDA graphs ran them."""

    def __init__(self, traces: Traces, key, node, form: _Form, args: list, host: dict):
        self.traces, self.key, self.node, self.form, self.args = traces, key, node, form, args
        self.host = host
        # launches listed before the call: a trace is made only where all of the call's
        # launches ran in the graphs of its runs (not a block launched where it is met)
        self.before = len(traces.lazy.interp.session.launches)
        traces.lazy.replays.log = []    # each run of the lazy graph in the call

    def leave(self, result):
        """Run the call's launches (its return is their boundary) and keep the trace."""
        lazy = self.traces.lazy
        session = lazy.interp.session
        lazy.flush(roots=[result])
        steps, lazy.replays.log = lazy.replays.log, None
        lazy.replays.last = None
        if not steps or getattr(result, "done", False) is False:
            return lazy.plain(result)
        trace = _Trace.of(self, steps, result, session, self.before)
        if trace is not None:
            entries = self.traces.entries
            entries[self.key] = trace
            if len(entries) > MAX_TRACES:
                entries.pop(next(iter(entries)))
        return lazy.plain(result)


class _Trace:
    """A call's CUDA graphs in order, where their inputs come from and which launch is its
    result."""

    def __init__(self, node, steps, result_at, result_meta, listed):
        # per graph: (record, sources, refreshes); a source is ("arg", i), ("label", label)
        # or ("view", array): a view held of an earlier output; a refresh (k, array) copies
        # launch k's output into an array the recorded call copied it to, where views of it
        # are read later
        self.node, self.steps = node, steps
        self.result_at, self.result_meta = result_at, result_meta
        self.listed = listed        # per graph, (CompiledKernel, Launch) per launch

    @staticmethod
    def of(recorder: _Recorder, steps: list, result, session, before: int) -> "_Trace | None":
        """The trace of a call whose runs were `steps` (per run: the record replayed, its
        inputs, the ids of the lazy values it computed, the arrays it gave them), or None."""
        if any(step is None for step in steps):
            return None             # a run launched one by one
        interp = recorder.traces.lazy.interp
        where = {}
        values = [(("arg", i), a) for i, a in enumerate(recorder.args)] + \
            [(("label", label), _Form.value(interp, label, recorder.host))
             for label in recorder.form.outside + recorder.form.fields]
        for src, v in values:
            if isinstance(v, Tensor):
                if id(v.data) in where:     # one array for two names: a later call may differ
                    return None
                where[id(v.data)] = src
        made = []                   # (step, launch, array given, whether a copy)
        traced, result_at = [], None
        for s, (record, inputs, results, given) in enumerate(steps):
            sources = []
            for a in inputs:
                src = where.get(id(a))
                if src is None:
                    base = _base_of(a, made)
                    if base is None:
                        return None
                    src = ("view", a)
                sources.append(src)
            traced.append((record, tuple(sources), []))
            for k, g in enumerate(given):
                made.append((s, k, g, g.data.ptr != record.graph.outs[k].data.ptr))
            if id(result) in results:
                result_at = (s, results.index(id(result)))
        if result_at is None or not isinstance(getattr(result, "result", None), Tensor):
            return None
        handed = {id(v) for r, _, _ in traced for v in r.handed}
        if any(kind == "view" and id(a) in handed for _, srcs, _ in traced for kind, a in srcs):
            return None             # held here, it would keep its graph from replaying
        for s, k, g, copied in made:    # outputs read through views later: refreshed
            if copied and any(_within(a, g) for _, srcs, _ in traced[s + 1:]
                              for kind, a in srcs if kind == "view"):
                if (s, k) == result_at:
                    return None     # the caller holds that copy: a replay must not write it
                traced[s][2].append((k, g))
        listed, at = [], before
        for record, _, _ in traced:
            n = len(record.plans)
            listed.append(list(zip(session.last_kernels[at:at + n], session.launches[at:at + n])))
            at += n
        if at != len(session.launches) or any(len(ls) != len(r.plans)
                                               for ls, (r, _, _) in zip(listed, traced)):
            return None
        meta = (result.shape, result.dtype, result.device, result.committed)
        return _Trace(recorder.node, [(r, s, tuple(f)) for r, s, f in traced], result_at,
                      meta, listed)

    def replay(self, interp, args: list, host: dict):
        """The call's result from a replay of its graphs, or None where they cannot replay."""
        cp = sys.modules.get("cupy")
        stream = cp.cuda.get_current_stream() if cp is not None else None
        runs = []
        for record, sources, refreshes in self.steps:
            arrays = []
            for kind, where in sources:
                if kind == "view":
                    arrays.append(where)
                else:
                    v = args[where] if kind == "arg" else _Form.value(interp, where, host)
                    arrays.append(v.data)
            if getattr(stream, "ptr", None) != record.stream.ptr or \
                    not record.fits(tuple(a.data.ptr for a in arrays)) or not record.free():
                return None
            runs.append((record, arrays, refreshes))
        from ..backends.base import Launch
        from .interp import CompiledKernel
        listed = []
        for (record, arrays, refreshes), launches in zip(runs, self.listed):
            interp.session.activity = (record.plans[0].kernel.name, record.device.id)
            times = record.replay(arrays)
            record.handed = []
            for k, array in refreshes:
                out = record.graph.outs[k]
                array.data.copy_from_device_async(out.data, out.nbytes, stream)
            *first, (compiled, launch) = launches
            launch = Launch(launch.kernel, launch.device, times, launch.geometry)
            listed += first + [(CompiledKernel(compiled.lowered, compiled.device, launch,
                                               compiled.sizes, compiled.fusion), launch)]
        s, k = self.result_at
        out = self.steps[s][0].graph.outs[k]
        data = cp.empty(out.shape, dtype=out.dtype)
        data.data.copy_from_device_async(out.data, out.nbytes, stream)
        with interp._lock:
            interp.session.last_kernels.extend(c for c, _ in listed)
            interp.session.launches.extend(ln for _, ln in listed)
        shape, dtype, device, committed = self.result_meta
        return Tensor(data, device, shape, dtype, committed=committed)


def _within(a, base) -> bool:
    """Whether array `a` lies in the memory of array `base` (a view of it)."""
    start = base.data.ptr
    return start <= a.data.ptr < start + base.nbytes and a.dtype == base.dtype


def _base_of(a, made: list):
    for _, _, g, _ in made:
        if _within(a, g):
            return g
    return None
