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

A call whose blocks run split over a group of CUDA devices (`@device(devs)
@parallel(data|model)`, runtime/parallel.py; the device list is keyed by its value, a
sharded tensor by its placement) logs each split block and each view made of a sharded
result (runtime/sharded.py). Its trace (`_GroupTrace`) holds, per device, one CUDA graph of
the device's launches in order, the views between them made on the graph's own buffers; a
collective that combines partial results (an all-reduce, a reduce-scatter: NCCL) ends a
stage of graphs and runs between two at each replay. The second call with a key captures
(inputs whose address changed since the first are staged, and so is every array the call
makes afresh: a peer copy of weights to another GPU, a chunk of a host input uploaded);
later calls cut their outside inputs as the recorded call cut them, copy the staged ones
into the graphs' own buffers, replay every stage and return fresh copies of the result's
shards. A copy between the devices inside the call (a result re-cut or gathered
whole), an input from nowhere the trace knows or a launch a graph cannot take leaves the
call untraced.

Every call that could replay and does not says why: `Traces.last_miss` is the reason for
the last call (None where it replayed), and the last launch of a call run as usual carries
it in its geometry (`trace: ...`, shown by the inspector).
"""
from __future__ import annotations

import sys
import weakref

from ..backends.base import Launch as _Launch
from ..compiler import ast as A
from ..errors import NO_SPAN
from .sharded import RecordingLog, ShardedTensor, set_recording
from .tensor import Tensor
from .values import Record

MAX_TRACES = 32         # calls whose traces are kept (each holds its graphs and buffers)
VIEWS = ("split", "reshape")    # builtins whose results are views of their first argument


class Untraced(Exception):
    """Why a call is not traced, captured or replayed (its message: `Traces.last_miss`)."""


class Traces:
    """The traces of one interpreter's pipeline calls."""

    def __init__(self, lazy):
        self.lazy = lazy
        self.forms: dict = {}       # id(pipeline node) -> (node, _Form or None)
        self.entries: dict = {}     # call key -> _Trace or _GroupTrace
        # calls over a device group: key -> their inputs' addresses per device, from the
        # call before the one that captures (an input at another address is staged)
        self.seen: dict = {}
        self.refused: dict = {}     # key -> why its capture failed
        # why the last call was not replayed (None: it was), for the inspector and tests
        self.last_miss: str | None = None

    def enter(self, p, args: list):
        """(the result of replaying this call, None) when its trace replays, else (None,
        a recorder to `leave` with the result, or None where the call cannot be traced);
        `last_miss` says why it does not replay."""
        lazy = self.lazy
        lazy.replays.log = lazy.replays.scope = None    # (left by a call that failed)
        set_recording(None)
        try:
            if lazy.pending:
                raise Untraced("values of earlier statements still pending in the lazy graph")
            if lazy.replays.mode() is False:
                raise Untraced("config { cuda_graph: false }")
            if not _on_cuda(lazy.interp, args):
                raise Untraced("no CUDA device: no graph to replay")
            form = self._form(p.node)
            if form is None:
                raise Untraced("the body is not only compute blocks, look-ups and views "
                               "returning a name")
            host = form.look_up(lazy.interp, p, args)
            if host is None:
                raise Untraced("a host look-up failed (the body raises its error)")
            key = form.key(lazy.interp, p, args, host)
        except Untraced as why:
            self.last_miss = str(why)
            return None, None
        trace = self.entries.get(key)
        miss = "no trace kept for this key"
        if trace is not None and trace.node is p.node:     # (the key holds the node's id)
            try:
                value = trace.replay(lazy.interp, args, host)
                self.last_miss = None
                return value, None
            except Untraced as why:
                miss = f"not replayed: {why}"
        self.last_miss = miss
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
        self.getters = tuple((name, _getter(e)) for name, e in lookups)
        self.fields = fields        # labels ("weights.w", "w") read from a looked-up value
        self.field_roots = tuple(dict.fromkeys(label.split(".")[0] for label in fields))
        # the fields read and their key parts, with weak references to the looked-up
        # records they were read from, per those records' ids (a model's layers: one each;
        # _Form.fields_read)
        self.memo: dict = {}

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
        found = {}
        for name, get in self.getters:
            value = get(frame, interp.globals)
            if value is _SLOW:      # not a plain record, list or number on the way
                return self._looked_up_by_interpreter(interp, frame)
            frame[name] = found[name] = value
        return found

    def _looked_up_by_interpreter(self, interp, frame: dict):
        interp.frames.append((frame, {}))
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
        and the fields read; Untraced where a value is none of these."""
        session, names = interp.session, interp.globals
        if not names.keys().isdisjoint(VIEWS):
            raise Untraced("the program defines its own `split` or `reshape`")
        parts = [id(p.node), interp.extra_key, session.default_device,
                 getattr(session, "fuse", True), getattr(session, "tuning", None),
                 tuple(getattr(session, "parallel_options", {}).items())]
        parts += map(_key_part, args)
        for v in host.values():
            parts.append(("id", id(v)) if type(v) is Record else
                         _key_part(v if isinstance(v, _KEYED_BY_VALUE) else _Identity(v)))
        for label in self.outside:
            v = host[label] = self.value(interp, label, host)     # kept for the replay
            parts.append(_key_part(v))
        parts.append(self.fields_read(interp, host))
        return tuple(parts)

    def fields_read(self, interp, host: dict) -> "_Parts":
        """The key part of the fields read from looked-up values, their values put in
        `host`. A record never changes (nor does a plain tensor's shape, dtype or device),
        so while the values looked up are records read before, those reads stand."""
        roots = [host[name] for name in self.field_roots]
        ids = tuple([id(r) for r in roots])
        memo = self.memo.get(ids)
        if memo is not None and all(ref() is root for ref, root in zip(memo[0], roots)):
            host.update(memo[1])
            return memo[2]
        values = {label: self.value(interp, label, host) for label in self.fields}
        parts = _Parts(_key_part(v) for v in values.values())
        host.update(values)
        if all(type(r) is Record for r in roots) and \
                all(type(v) in (Tensor, bool, int, float, str) for v in values.values()):
            if len(self.memo) >= MAX_TRACES:
                self.memo.pop(next(iter(self.memo)))
            self.memo[ids] = ([weakref.ref(r) for r in roots], values, parts)
        return parts

    @staticmethod
    def value(interp, label: str, host: dict):
        """The value `label` names in this call: a look-up's, an outside name's or a field
        of either (one `key` read already is in `host` under its label)."""
        if label in host:
            return host[label]
        if "." not in label:        # a plain name, the usual case
            return interp.globals.get(label, _ABSENT)
        root, *fields = label.split(".")
        if root in host:
            value = host[root]
        elif root in interp.globals:
            value = interp.globals[root]
        else:
            return _ABSENT          # a size the block infers from its inputs' shapes
        for f in fields:
            # a record's field read straight from it (the usual case: a layer's weights)
            fields_of = value._fields if type(value) is Record else None
            value = fields_of[f] if fields_of is not None and f in fields_of \
                else interp.attr(value, f, None)
        return value


_ABSENT = "<absent>"
_KEYED_BY_VALUE = (Tensor, bool, int, float, str)      # looked-up values; the rest by identity
_SLOW = object()        # a compiled look-up met what only the interpreter reads


def _getter(e):
    """`e`, a look-up (`_lookup`), as a function of (frame, names) that reads it as the
    interpreter would where every step is a name, a record's field or a list's index in
    range, and gives _SLOW anywhere else (the interpreter then reads it and raises its
    errors)."""
    if isinstance(e, A.Name):
        name = e.id

        def read(frame, names):
            value = frame.get(name, _SLOW)
            return names.get(name, _SLOW) if value is _SLOW else value
        return read
    if isinstance(e, A.Attr):
        base, field = _getter(e.base), e.name

        def read(frame, names):
            value = base(frame, names)
            return value._fields.get(field, _SLOW) if type(value) is Record else _SLOW
        return read
    if isinstance(e, A.Index) and len(e.items) == 1:
        base, item = _getter(e.base), e.items[0]
        index = _getter(item) if isinstance(item, A.Name) else \
            (lambda frame, names, k=-item.operand.value if isinstance(item, A.UnaryOp)
             else item.value: k)

        def read(frame, names):
            value, k = base(frame, names), index(frame, names)
            if type(value) is not list or type(k) is not int or not -len(value) <= k < len(value):
                return _SLOW
            return value[k]
        return read
    return lambda frame, names: _SLOW


def _key_part(v):
    """What of value `v` decides a call's launches; Untraced where it keys no trace."""
    kind = type(v)
    if kind is Tensor:          # the usual cases first: a plain tensor, a number
        return (v._dtype, v._shape, v.device, v.committed)
    if kind is int or kind is float or kind is bool or kind is str:
        return (kind, v)
    if isinstance(v, ShardedTensor):
        if v.remote:
            raise Untraced("a tensor sharded over remote workers")
        return ("sharded", v.dtype, v.shape, v.axis, tuple(v.devices), tuple(v.bounds))
    if isinstance(v, Tensor):
        if getattr(v, "done", True) is False:
            raise Untraced("an input still pending in the lazy graph")
        return (v.dtype, v.shape, v.device, v.committed)
    if isinstance(v, (bool, int, float, str)) or v is _ABSENT:
        return (type(v), v)
    if isinstance(v, list) and all(isinstance(d, str) for d in v):
        return ("names", tuple(v))        # a device list
    if isinstance(v, _Identity) and isinstance(v.value, (Record, dict, list, tuple)):
        return ("id", id(v.value))
    raise Untraced(f"an input that keys no trace ({type(v).__name__}: not a tensor, number, "
                   "string, device list or looked-up record)")


class _Parts:
    """Key parts made once and kept (the fields of a model's layer): their hash made once,
    and a key holding the same object found equal at once."""
    __slots__ = ("parts", "hash")

    def __init__(self, parts):
        self.parts = tuple(parts)
        self.hash = hash(self.parts)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self is other or (type(other) is _Parts and self.hash == other.hash and
                                 self.parts == other.parts)


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
    """The names read by the block's annotations (sizes such as `@shared(seq * 4)`, a
    device list such as `@device(devs)`, keyed by their values), or None where one is
    neither a literal nor arithmetic on names."""
    anns = list(node.annotations) + [s.annotation for s in node.body
                                     if isinstance(s, A.AnnotationStmt)]
    names = []
    for ann in anns:
        for e in list(ann.args) + list(ann.kernel_args) + \
                [kw.value for kw in list(ann.kwargs) + list(ann.kernel_kwargs)]:
            if not _literal(e, names):
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
    """A call being run as usual; its launches become a trace where CUDA graphs ran them
    (one device) or can capture them (blocks split over a group of CUDA devices)."""

    def __init__(self, traces: Traces, key, node, form: _Form, args: list, host: dict):
        self.traces, self.key, self.node, self.form, self.args = traces, key, node, form, args
        self.host = host
        # launches listed before the call: a trace is made only where all of the call's
        # launches ran in the graphs of its runs (not a block launched where it is met)
        self.before = len(traces.lazy.interp.session.launches)
        traces.lazy.replays.log = []    # each run of the lazy graph in the call
        traces.lazy.replays.scope = key     # its graphs its own (Replays.scope)
        # each split block and each view of a sharded result (the call's frame is pushed
        # next: the log lives while it is on the stack)
        self.log = RecordingLog(traces.lazy.interp.frames)
        set_recording(self.log)

    def leave(self, result):
        """Run the call's launches (its return is their boundary) and keep the trace."""
        lazy = self.traces.lazy
        session = lazy.interp.session
        lazy.flush(roots=[result])
        steps, lazy.replays.log, lazy.replays.scope = lazy.replays.log, None, None
        split = self.log
        set_recording(None)
        lazy.replays.last = None
        try:
            if split and steps:
                raise Untraced("blocks on one device and blocks split over a device group "
                               "in one call")
            if split:
                if not isinstance(result, Tensor) or getattr(result, "done", True) is False:
                    raise Untraced("the result is not a tensor the call computed")
                trace = _GroupTrace.of(self, split, result, session, self.before)
            elif not steps:
                raise Untraced("no run of the lazy graph: the launches ran where they were met")
            elif getattr(result, "done", False) is False:
                raise Untraced("the result is no value the lazy graph's runs computed")
            else:
                trace = _Trace.of(self, steps, result, session, self.before)
        except Untraced as why:
            self.missed(session, str(why))
            return lazy.plain(result)
        entries = self.traces.entries
        entries[self.key] = trace
        if len(entries) > MAX_TRACES:
            entries.pop(next(iter(entries)))
        self.missed(session, "captured at this call: replays from the next one")
        return lazy.plain(result)

    def missed(self, session, why: str):
        """Say why the call ran as usual: after what `enter` found, in `Traces.last_miss`
        and in the geometry of the call's last launch (the inspector shows it)."""
        traces = self.traces
        miss = traces.last_miss = f"{traces.last_miss}; {why}" if traces.last_miss else why
        if len(session.launches) > self.before:
            from ..backends.base import Launch
            from .interp import CompiledKernel
            compiled, launch = session.last_kernels[-1], session.launches[-1]
            launch = Launch(launch.kernel, launch.device, launch.times,
                            dict(launch.geometry or {}, trace=miss))
            with traces.lazy.interp._lock:
                session.last_kernels[-1] = CompiledKernel(
                    compiled.lowered, compiled.device, launch, compiled.sizes, compiled.fusion)
                session.launches[-1] = launch

    def sources(self) -> dict | None:
        """{id: where a later call finds it} of the call's tensors (arguments, outside
        names, fields of looked-up values): a sharded tensor by its own id, any other by its
        array's; Untraced where one array has two names (a later call may give two)."""
        interp = self.traces.lazy.interp
        values = [(("arg", i), a) for i, a in enumerate(self.args)] + \
            [(("label", label), _Form.value(interp, label, self.host))
             for label in self.form.outside + self.form.fields]
        where = {}
        for src, v in values:
            if isinstance(v, Tensor):
                idents = [id(v)] if isinstance(v, ShardedTensor) else [id(v.data)]
                if isinstance(v, ShardedTensor) and v._gathered is not None:
                    idents.append(id(v._gathered))      # read whole by a one-device block
                for ident in idents:
                    if ident in where:
                        raise Untraced(f"{_named(where[ident])} and {_named(src)} are one "
                                       "array (a later call may give two)")
                    where[ident] = src
        return where


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
        self.plans = None           # per graph, how a replay finds its inputs (_inputs_plan)
        # per graph, what a replay lists: the kernels and launches before its last (listed
        # as they are), and its last (listed anew with the replay's time)
        self.listing = [([c for c, _ in ls[:-1]], [ln for _, ln in ls[:-1]], ls[-1])
                        for ls in listed]

    @staticmethod
    def of(recorder: _Recorder, steps: list, result, session, before: int) -> "_Trace":
        """The trace of a call whose runs were `steps` (per run: the record replayed, its
        inputs, the ids of the lazy values it computed, the arrays it gave them; a string:
        why a run was launched one by one), or Untraced."""
        for step in steps:
            if not isinstance(step, tuple):
                raise Untraced(f"a run of the lazy graph launched one by one ({step})")
        where = recorder.sources()
        made = []                   # (step, launch, array given, whether a copy)
        traced, result_at = [], None
        for s, (record, inputs, results, given) in enumerate(steps):
            sources = []
            for a in inputs:
                src = where.get(id(a))
                if src is None:
                    base = _base_of(a, made)
                    if base is None:
                        raise Untraced("a graph's input is from nowhere the trace knows (not "
                                       "an argument, outside name, field or earlier output)")
                    src = ("view", a)
                sources.append(src)
            traced.append((record, tuple(sources), []))
            for k, g in enumerate(given):      # (a fresh output is as a copy: new at each replay)
                made.append((s, k, g, record.graph.fresh(k) or
                             g.data.ptr != record.graph.outs[k].data.ptr))
            if id(result) in results:
                result_at = (s, results.index(id(result)))
        if result_at is None or not isinstance(getattr(result, "result", None), Tensor):
            raise Untraced("the result is no output of the call's graphs")
        handed = {id(v) for r, _, _ in traced for v in r.handed}
        if any(kind == "view" and id(a) in handed for _, srcs, _ in traced for kind, a in srcs):
            # held here, it would keep its graph from replaying
            raise Untraced("a view of a graph's buffer read by a later graph")
        for s, k, g, copied in made:    # outputs read through views later: refreshed
            if copied and any(_within(a, g) for _, srcs, _ in traced[s + 1:]
                              for kind, a in srcs if kind == "view"):
                if (s, k) == result_at:
                    # the caller holds that copy: a replay must not write it
                    raise Untraced("the result is read through a view by a later graph")
                traced[s][2].append((k, g))
        listed, at = [], before
        for record, _, _ in traced:
            n = len(record.plans)
            listed.append(list(zip(session.last_kernels[at:at + n], session.launches[at:at + n])))
            at += n
        if at != len(session.launches) or any(len(ls) != len(r.plans)
                                               for ls, (r, _, _) in zip(listed, traced)):
            raise Untraced("a launch of the call ran outside its graphs")
        meta = (result.shape, result.dtype, result.device, result.committed)
        return _Trace(recorder.node, [(r, s, tuple(f)) for r, s, f in traced], result_at,
                      meta, listed)

    def replay(self, interp, args: list, host: dict):
        """The call's result from a replay of its graphs, or Untraced where they cannot
        replay (checked before any runs)."""
        cp = sys.modules.get("cupy")
        stream = cp.cuda.get_current_stream() if cp is not None else None
        at = getattr(stream, "ptr", None)
        runs = []
        plans = self.plans
        if plans is None:
            plans = self.plans = [_inputs_plan(sources, record) for record, sources, _ in self.steps]
        for (record, sources, refreshes), (template, from_args, from_labels, at_args, at_labels) \
                in zip(self.steps, plans):
            arrays = list(template)         # views of earlier outputs in place already
            for j, i in from_args:
                arrays[j] = args[i].data
            for j, label in from_labels:    # (`key` left every label's value in `host`)
                v = host.get(label, _ABSENT)
                arrays[j] = (v if v is not _ABSENT else _Form.value(interp, label, host)).data
            if at != record.stream.ptr:
                raise Untraced(f"another current stream on {record.device.id} than at the "
                               "capture")
            # (a looked-up field, the same object as at the last replay, is where it was)
            seen = record.seen_labels
            for j, at in (at_args if seen is not None and len(seen) == len(from_labels) and
                          all(arrays[j] is a for (j, _), a in zip(from_labels, seen))
                          else at_args + at_labels):
                if arrays[j].data.ptr != at:
                    raise Untraced(f"{_named(sources[j])}, read in place by the graph on "
                                   f"{record.device.id}, is at another address than at the "
                                   "capture")
            record.seen_labels = [arrays[j] for j, _ in from_labels]
            if not record.free():
                raise Untraced(f"a view of the graph's buffers on {record.device.id} is still "
                               "held")
            runs.append((record, arrays, refreshes))
        # (no import statement here: one costs more than a replay's other host work)
        Launch, CompiledKernel = _Launch, sys.modules[__package__ + ".interp"].CompiledKernel
        kernels, launched = [], []
        for (record, arrays, refreshes), (kernels_before, launches_before, (compiled, launch)) \
                in zip(runs, self.listing):
            interp.session.activity = (record.plans[0].kernel.name, record.device.id)
            times = record.replay(arrays)
            record.handed = []
            for k, array in refreshes:
                out = record.graph.outs[k]
                array.data.copy_from_device_async(out.data, out.nbytes, stream)
            launch = Launch(launch.kernel, launch.device, times, launch.geometry)
            kernels += kernels_before
            kernels.append(CompiledKernel(compiled.lowered, compiled.device, launch,
                                          compiled.sizes, compiled.fusion))
            launched += launches_before
            launched.append(launch)
        s, k = self.result_at
        graph = self.steps[s][0].graph
        data = out = graph.outs[k]
        if not graph.fresh(k):          # the graph's own buffer: the caller gets a copy
            data = cp.empty(out.shape, dtype=out.dtype)
            data.data.copy_from_device_async(out.data, out.nbytes, stream)
        for record, _, _ in self.steps:
            record.graph.handed()
        with interp._lock:
            interp.session.last_kernels += kernels
            interp.session.launches += launched
        shape, dtype, device, committed = self.result_meta
        return Tensor(data, device, shape, dtype, committed)


def _inputs_plan(sources, record) -> tuple:
    """How a replay finds a graph's inputs, made once: (the input list with the views of
    earlier outputs in place, (index, argument) and (index, label) of the others, the
    in-place checks (index, address) of arguments and of labels)."""
    template = [where if kind == "view" else None for kind, where in sources]
    from_args = [(j, where) for j, (kind, where) in enumerate(sources) if kind == "arg"]
    from_labels = [(j, where) for j, (kind, where) in enumerate(sources)
                   if kind not in ("arg", "view")]
    labelled = {j for j, _ in from_labels}
    return (template, from_args, from_labels,
            [(j, at) for j, at in record.in_place if j not in labelled],
            [(j, at) for j, at in record.in_place if j in labelled])


def _named(src) -> str:
    """An input's source as a reason names it."""
    kind, where = src[0], src[1]
    if kind == "arg":
        return f"argument {where + 1}"
    if kind == "label":
        return f"`{where}`"
    if kind == "view":
        return "a view of an earlier graph's output"
    if kind == "step":
        return f"the collective's result before stage {where}"
    return "an input"


def _within(a, base) -> bool:
    """Whether array `a` lies in the memory of array `base` (a view of it)."""
    start = base.data.ptr
    return start <= a.data.ptr < start + base.nbytes and a.dtype == base.dtype


def _base_of(a, made: list):
    for _, _, g, _ in made:
        if _within(a, g):
            return g
    return None


# ------------------------------------------------------------------ calls over a device group
class _DeviceRun:
    """One device's launches in one stage of a call over a device group, as a CUDA graph
    captures them."""

    def __init__(self, device, stream):
        self.device, self.stream = device, stream
        self.plans, self.wiring, self.scalars, self.sites, self.dtypes = [], [], [], [], []
        self.inputs: list = []      # the recorded call's array of each input
        # per input: ("entry", e, k): place k of outside input e, cut as the call cut it;
        # ("out", s, i, views): launch i's output in the graph of stage s, views applied
        self.sources: list = []
        # inputs always staged: strided views, arrays the call made afresh
        self.staged: set = set()
        self._at: dict = {}

    def input(self, key, source: tuple, array, staged: bool) -> int:
        j = self._at.get(key)
        if j is None:
            j = self._at[key] = len(self.inputs)
            self.inputs.append(array)
            self.sources.append(source)
            if staged:
                self.staged.add(j)
        return j

    def add(self, plan, wires: tuple, scalars: dict, site, dtype: str) -> int:
        self.plans.append(plan)
        self.wiring.append(wires)
        self.scalars.append(scalars)
        self.sites.append(site)
        self.dtypes.append(dtype)
        return len(self.plans) - 1


class _Combine:
    """Partial results combined between two stages of graphs, as runtime/parallel.py
    combines them (a collective: an all-reduce or a reduce-scatter, NCCL between GPUs):
    the split block's layout and, per device, the launch of the stage before that made its
    partial result."""

    def __init__(self, layout, partials: list):
        self.layout, self.partials = layout, partials


class _GroupTrace:
    """A call whose blocks ran split over a group of CUDA devices (runtime/parallel.py),
    in stages: per stage and device one CUDA graph of the device's launches in order, the
    views of sharded results (split, reshape) between them made on the graph's buffers; a
    collective that combines partial results ends a stage and runs between two, as the call
    ran it. The outside inputs (entries: an argument, an outside name, a field, or the
    result of a collective, cut for the devices as the recorded call cut them with
    `input_parts`); the result: shards of graph outputs (copied out) or a collective's."""

    def __init__(self, node, entries, stages, result, listed, last):
        self.node = node
        self.entries = entries      # (source, axis, work, device ids) per outside input
        # per stage: {device id: (GraphRecord, sources)} (a source: ("entry", e, k) or
        # ("fixed", array): an earlier graph's output) or a _Combine
        self.stages = stages
        # ("shards", [(device id, stage, launch, bounds)], (axis, shape, dtype, group)) or
        # ("step", stage index of the _Combine whose value it is)
        self.result = result
        self.listed = listed        # (CompiledKernel, Launch) per launch, in-graph times
        self.last = last            # {index in listed: (stage, device id)}: a graph's last

    @staticmethod
    def of(recorder: _Recorder, log: list, result, session, before: int):
        """The trace of a call whose split blocks and views are `log` (capturing its graphs
        where this key was seen before, or `config { cuda_graph: true }`), or Untraced
        (also where it is only seen now: captured at the next such call)."""
        traces = recorder.traces
        cp = sys.modules.get("cupy")
        if cp is None:
            raise Untraced("no CuPy")
        where = recorder.sources()
        if recorder.key in traces.refused:
            raise Untraced(f"its capture failed before ({traces.refused[recorder.key]})")
        stages, made, produced, entries, count = _stages(log, where, session, cp)
        at, step = made.get(id(result)), produced.get(id(result))
        listed = list(zip(session.last_kernels[before:], session.launches[before:]))
        if step is None and (at is None or any(views for _, _, views in at.values())):
            raise Untraced("the result is no graph's output as it is (a view of one, or made "
                           "outside the graphs)")
        if len(listed) != count or len(session.launches) - before != count:
            raise Untraced(f"{len(session.launches) - before} launches listed for "
                           f"{count} in the graphs")
        listing = _in_graph_listing(listed, stages)
        if listing is None:
            raise Untraced("the launches listed are not the graphs' launches")
        moving = {e for e, (src, _, _, _) in enumerate(entries) if src[0] == "step"}
        addresses = {(s, d): tuple(a.data.ptr if src[0] == "entry" and src[1] not in moving
                                   else None for a, src in zip(run.inputs, run.sources))
                     for s, stage in enumerate(stages) if isinstance(stage, dict)
                     for d, run in stage.items()}
        last = traces.seen.pop(recorder.key, None)
        if last is None and traces.lazy.replays.mode() is not True:
            traces.seen[recorder.key] = addresses      # captured at the next such call
            if len(traces.seen) > MAX_TRACES * 4:
                traces.seen.pop(next(iter(traces.seen)))
            raise Untraced("recorded: captured at the next call with this key")
        try:
            captured = _capture(stages, moving, addresses, last, cp)
        except Untraced as why:
            traces.refused[recorder.key] = str(why)
            if len(traces.refused) > MAX_TRACES * 4:
                traces.refused.pop(next(iter(traces.refused)))
            raise
        if step is not None:
            kept = ("step", step[1])
        else:
            kept = ("shards", [(dev, *at[dev][:2], bounds) for dev, _, bounds in result.shards],
                    (result.axis, result.shape, result.dtype, result.group))
        return _GroupTrace(recorder.node, entries, captured, kept, *listing)

    def replay(self, interp, args: list, host: dict):
        """The call's result from a replay of its stages, or Untraced where they cannot
        replay (another stream, an input captured in place at another address): checked
        before anything runs."""
        from .parallel import _combined, input_parts
        from .tensor import to_tensor
        cp = sys.modules.get("cupy")
        values, parts = {}, {}

        def part(e: int):
            got = parts.get(e)
            if got is None:
                (kind, where), axis, work, ids = self.entries[e]
                v = values[where] if kind == "step" else args[where] if kind == "arg" else \
                    _Form.value(interp, where, host)
                t = v if isinstance(v, Tensor) else to_tensor(v)
                got = parts[e] = input_parts(t, axis, work, ids) if t is not None else None
            return got

        def array(src):
            if src[0] == "fixed":
                return src[1]
            got = part(src[1])
            return None if got is None else got[src[2]].data

        # every graph's stream and inputs read in place checked before anything runs (an
        # input read in place is never a collective's result)
        for stage in self.stages:
            for record, sources in (stage.values() if isinstance(stage, dict) else ()):
                with record.device.cupy_device:
                    stream = cp.cuda.get_current_stream()
                if stream.ptr != record.stream.ptr:
                    raise Untraced(f"another current stream on {record.device.id} than at "
                                   "the capture")
                for j, address in record.in_place:
                    a = array(sources[j])
                    if a is None or a.data.ptr != address:
                        named = _named(self.entries[sources[j][1]][0])
                        raise Untraced(f"{named}, read in place by the graph on "
                                       f"{record.device.id}, is " +
                                       ("no tensor now" if a is None else
                                        "at another address than at the capture"))
        times = {}
        for s, stage in enumerate(self.stages):
            if isinstance(stage, _Combine):
                before = self.stages[s - 1]
                values[s] = _combined(stage.layout, [before[d][0].graph.outs[i]
                                                     for d, i in stage.partials])
                continue
            for d, (record, sources) in stage.items():   # each device's graph queued,
                arrays = [array(src) for src in sources]  # then their flags read
                interp.session.activity = (record.plans[0].kernel.name, d)
                with record.device.cupy_device:
                    times[(s, d)] = record.launch(arrays)
            for record, _ in stage.values():
                record.check()
        if self.result[0] == "step":
            value = values[self.result[1]]
        else:
            shards = []
            for dev, s, k, bounds in self.result[1]:    # fresh: a kept result never changes
                record = self.stages[s][dev][0]
                out = record.graph.outs[k]
                with record.device.cupy_device:
                    data = cp.empty(out.shape, dtype=out.dtype)
                    data.data.copy_from_device_async(out.data, out.nbytes, record.stream)
                shards.append((dev, data, bounds))
            value = ShardedTensor(shards, *self.result[2])
        from ..backends.base import Launch
        from .interp import CompiledKernel
        listed = list(self.listed)
        for n, slot in self.last.items():
            compiled, launch = listed[n]
            launch = Launch(launch.kernel, launch.device, times[slot], launch.geometry)
            listed[n] = (CompiledKernel(compiled.lowered, compiled.device, launch,
                                        compiled.sizes, compiled.fusion), launch)
        with interp._lock:
            interp.session.last_kernels.extend(c for c, _ in listed)
            interp.session.launches.extend(ln for _, ln in listed)
        return value


def _stages(log: list, where: dict, session, cp):
    """(stages: per stage {device id: _DeviceRun} or a _Combine; {id(sharded value made in
    a graph): {device id: (stage, launch, views)}}; {id(a collective's result): ("step",
    stage)}; the outside inputs (source, axis, work, device ids); the number of launches)
    of a logged call, or Untraced where some launch cannot be captured: a copy between
    devices (a result re-cut or gathered whole), an input from nowhere the trace knows, a
    conversion, a partial result left on one device.

    An outside input's array that the call made afresh (a chunk cut from it, a peer copy
    to another GPU, an upload from the host) is always staged: the graph reads a copy made
    into its own buffer at each replay. Only memory the input keeps (its array, a shard in
    place, a replica kept with a sharded tensor) may be read in place: a fresh array lands
    wherever the memory pool has room, and the one read at the capture stays held by the
    graph, so a later call's is never at its address."""
    from .parallel import SplitRun
    from .replay import staged_view
    from .sharded import ViewMade
    tuning = getattr(session, "tuning", None)
    stages: list = [{}]
    made, produced, entries, count = {}, {}, {}, 0
    for item in log:
        if isinstance(item, ViewMade):
            base = made.get(id(item.base))
            if base is None or item.out.devices != item.base.devices:
                raise Untraced("a view of a sharded tensor the call's graphs did not make")
            made[id(item.out)] = {dev: base[dev][:2] + (base[dev][2] + (view,),)
                                  for dev, view in zip(item.base.devices, item.views)}
            continue
        if not isinstance(item, SplitRun) or item.scalars is None:
            raise Untraced("a split block whose scalars are not known")
        layout = item.layout
        kernel = layout.lowered.kernel
        concat = layout.plan.combine == "concat"
        if kernel.output.dtype == "bf16":
            raise Untraced(f"a bf16 output (block `{kernel.name}`)")
        if not isinstance(item.result, Tensor):
            raise Untraced(f"block `{kernel.name}` reduces to a number")
        if not concat and len(layout.work) < 2:     # (it would be a graph's buffer)
            raise Untraced(f"block `{kernel.name}` leaves a partial result on one device")
        if not isinstance(stages[-1], dict):
            stages.append({})
        s, runs = len(stages) - 1, stages[-1]
        names = [b.name for b in kernel.inputs]
        bounds = tuple(b for _, b in layout.work)
        for k, (dev, (lo, hi)) in enumerate(layout.work):
            if hi <= lo:
                raise Untraced(f"block `{kernel.name}` has no work for {dev.id}")
            if getattr(dev, "backend", "") != "cuda":
                raise Untraced(f"block `{kernel.name}` runs on {dev.id}, not a CUDA device")
            prepared = layout.chunk_plans[k].prepared(dev, tuning)
            if not hasattr(prepared, "enqueue"):
                raise Untraced(f"block `{kernel.name}` on {dev.id} has no plan a graph "
                               "captures")
            run = runs.get(dev.id)
            if run is None:
                with dev.cupy_device:
                    run = runs[dev.id] = _DeviceRun(dev, cp.cuda.get_current_stream())
            wires = []
            for t, parts, name, (dtype, want) in zip(item.inputs, item.per_input, names,
                                                    prepared.dtypes):
                a = parts[k].data
                inside = made.get(id(t))
                if dtype == "bf16":
                    raise Untraced(f"input `{name}` of block `{kernel.name}` is bf16")
                if inside is not None:
                    # a result of the call, read where it is (not re-cut, not gathered)
                    if dev.id not in inside or len(t.shards) != len(layout.work) or \
                            t.shards[k][1] is not a:
                        raise Untraced(f"input `{name}` of block `{kernel.name}`, a result "
                                       "of the call, is re-cut or copied between devices")
                    s0, i, views = inside[dev.id]
                    if stages[s0][dev.id].dtypes[i] != dtype:
                        raise Untraced(f"input `{name}` of block `{kernel.name}` is converted "
                                       "from the dtype its block made")
                    if s0 == s:
                        wires.append(("v", i, _viewer(views, cp)) if views else ("g", i))
                    else:       # an earlier stage's graph output, read where it stays
                        wires.append(("x", run.input(("out", id(t)), ("out", s0, i, views),
                                                     a, False)))
                    continue
                src = where.get(id(t) if isinstance(t, ShardedTensor) else id(t.data)) or \
                    produced.get(id(t))
                if src is None:
                    raise Untraced(f"input `{name}` of block `{kernel.name}` is from nowhere "
                                   "the trace knows")
                axis = layout.plan.axes.get(name)
                e = entries.setdefault((src, axis, tuple(layout.ids), bounds),
                                       (len(entries), layout.work))[0]
                fits = prepared.fits(a, want, cp)
                if not fits and not staged_view(a, want, dev, cp):
                    raise Untraced(f"input `{name}` of block `{kernel.name}` needs a "
                                   f"conversion on {dev.id}")
                staged = not fits or not _kept(t, a)
                wires.append(("x", run.input(("entry", e, k), ("entry", e, k), a, staged)))
            run.add(prepared, tuple(wires), item.scalars, item.site or (NO_SPAN, ""),
                    kernel.output.dtype)
            count += 1
        last = {dev.id: (s, len(runs[dev.id].plans) - 1, ()) for dev, _ in layout.work}
        if concat:
            made[id(item.result)] = last
        else:                       # the collective ends the stage
            stages.append(_Combine(layout, [(dev.id, last[dev.id][1])
                                            for dev, _ in layout.work]))
            produced[id(item.result)] = ("step", len(stages) - 1)
    outside = [(src, axis, work, list(ids)) for (src, axis, ids, _), (_, work) in entries.items()]
    return stages, made, produced, outside, count


def _kept(t: Tensor, a) -> bool:
    """Whether `a`, what a device reads of outside input `t`, lies in memory `t` keeps from
    call to call (its array, a shard, a replica kept with a sharded tensor), not in one the
    call made afresh (a chunk cut, a peer copy, an upload from the host)."""
    if isinstance(t, ShardedTensor):
        held = [arr for _, arr, _ in t.shards] + [t._gathered] + \
            [r for replicas in t._replicas.values() for r in replicas]
    else:
        held = [t.data]
    device = a.data.device_id
    return any(type(h) is type(a) and h.data.device_id == device and _within(a, h)
               for h in held if h is not None)


def _capture(stages: list, moving: set, addresses: dict, last, cp) -> list:
    """Every stage's graphs captured in order (an input of a collective's result, one the
    call made afresh, a strided view, or one at another address than in the call `last`
    saw is staged); Untraced where a view does not fit or the driver refuses."""
    from ..backends.cuda.graph import CaptureFailed, capture
    from .replay import GraphRecord
    captured = []
    for s, stage in enumerate(stages):
        if isinstance(stage, _Combine):
            captured.append(stage)
            continue
        graphs = {}
        for d, run in stage.items():
            inputs, sources, staged = [], [], set(run.staged)
            before_at, now = (last or {}).get((s, d)), addresses[(s, d)]
            for j, (a, src) in enumerate(zip(run.inputs, run.sources)):
                if src[0] == "out":
                    _, s0, i, views = src
                    try:
                        with run.device.cupy_device:
                            a = _viewer(views, cp)(captured[s0][d][0].graph.outs[i])
                    except Exception as err:    # a view the graph's buffer does not take
                        raise Untraced(f"a view of a graph's buffer on {d} fails: "
                                       f"{err}") from None
                    src = ("fixed", a)
                elif src[1] in moving or (before_at is not None and (
                        len(before_at) != len(now) or before_at[j] != now[j])):
                    staged.add(j)
                inputs.append(a)
                sources.append(src)
            try:
                graph = capture(run.device, run.stream, run.plans, run.wiring, run.scalars,
                                inputs, staged)
            except CaptureFailed as err:
                raise Untraced(f"capture on {d}: {err}") from None
            in_place = tuple((j, a.data.ptr) for j, a in enumerate(inputs) if j not in staged)
            graphs[d] = (GraphRecord(graph, run.plans, run.device, run.stream, run.sites,
                                     in_place), sources)
        captured.append(graphs)
    return captured


def _viewer(views: tuple, cp):
    """The array a chain of shard views (sharded.ViewMade) makes of an array."""
    def view(a):
        for v in views:
            a = v(cp, a)
        return a
    return view


def _in_graph_listing(listed: list, stages: list) -> tuple | None:
    """(the recorded call's launches as a replay lists them: in a graph, no time of their
    own; {index: (stage, device id)} of each graph's last launch, which takes the graph's
    time), or None where they are not the stages' launches. A device's launches are listed
    in its order (devices may interleave)."""
    from ..backends.base import Launch
    from .interp import CompiledKernel
    from .replay import IN_GRAPH
    order: dict = {}                # device id -> [stage of each of its launches, in order]
    for s, stage in enumerate(stages):
        for d, run in (stage.items() if isinstance(stage, dict) else ()):
            order.setdefault(d, []).extend([s] * len(run.plans))
    out, last, taken = [], {}, {}
    for n, (compiled, launch) in enumerate(listed):
        d = launch.device
        k = taken[d] = taken.get(d, -1) + 1
        if k >= len(order.get(d, ())):
            return None
        s = order[d][k]
        note = (f"replayed in a CUDA graph of {len(stages[s][d].plans)} launches on {d} "
                f"(the last one's time is the graph's)")
        launch = Launch(launch.kernel, d, IN_GRAPH, dict(launch.geometry or {}, graph=note))
        out.append((CompiledKernel(compiled.lowered, compiled.device, launch, compiled.sizes,
                                   compiled.fusion), launch))
        last[(s, d)] = n
    return out, {n: slot for slot, n in last.items()}
