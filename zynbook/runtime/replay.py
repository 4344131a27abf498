"""Runs of the lazy graph replayed as CUDA graphs (backends/cuda/graph.py).

When the lazy graph runs (runtime/lazy.py), its launches on one CUDA device have a shape:
which kernel each launch runs (its device plan), with which scalar values, reading which
earlier launch's output or which outside input. A run of the same shape seen again (the
second identical run; `config { cuda_graph: true }`: the first, `false`: never) is
captured as a CUDA graph and replayed from then on: the host work left is the
interpreter's, one graph launch and the checks.

* Inputs: an outside input at the same address as in the run before the capture is read
  in place; one whose address changed is copied into a staging buffer at every replay. A
  graph is replayed only while the inputs captured in place are at their addresses. The
  runs of a traced pipeline call (runtime/traces.py) are shapes of that call alone, so a
  model's layer l, captured after its own earlier call, reads layer l's weights in place.
* Outputs: a launch's output named by the program (a top-level name, a pipeline's local,
  a value handed back) is copied out of the graph's buffer into a fresh one at each replay,
  so a value kept from an earlier run never changes; where the last launch's output is
  named at the capture, that launch runs after the graph into a fresh output of its own
  instead (no copy). The others are handed out as views of
  the graph's buffers; a replay first checks that none of those from the run before is
  still held (else the launches run one by one, and the graph waits for the next run).
* Errors: the error flag of every kernel that can fail is read after the replay, and the
  first failure raised as the launch itself would raise it.
* Views: an input that is a strided view of a CUDA array (a part of `split`) is staged:
  each replay copies it into its contiguous staging buffer, as a launch one by one does.
* Where capture is not possible (another device, a reduction to one number, a bf16
  buffer, an input that needs another conversion, the driver refusing) the launches run one by
  one, as without graphs.

`Replays.last_miss` says why the last run was launched one by one (None where a graph ran
it); a traced call that did not become a trace names the reason of its run's miss.
"""
from __future__ import annotations

import sys

from ..backends.base import Launch, LaunchTimes
from ..errors import NO_SPAN, ZynMLError, ZynMLRuntimeError

AUTO_AFTER = 2          # identical runs before a capture, unless config says otherwise
MIN_LAUNCHES = 2        # a single launch gains nothing from a graph
MAX_SHAPES = 64         # shapes of runs remembered (a loop over growing shapes keeps this many)
MAX_GRAPH_SHAPES = 32   # shapes whose graphs are kept (a graph holds its buffers; a model's
                        # traced layers are a shape each: 24 of BERT-large's)
MAX_GRAPHS = 4          # graphs kept per shape (inputs captured in place at other addresses)
# a launch inside a graph has no time of its own: the whole graph's is on its last launch
IN_GRAPH = LaunchTimes(source="cuda-graph")


class Replays:
    """The shapes of runs one lazy graph has seen, and their captured graphs."""

    def __init__(self, lazy):
        self.lazy = lazy
        self.seen: dict = {}        # shape key -> (runs, input addresses of the last run)
        self.graphs: dict = {}      # shape key -> [GraphRecord]
        self.refused: dict = {}     # shape key -> why its capture failed
        # (record, its inputs, ids of the values it computed, the arrays it gave them) of
        # the last run, if replayed
        self.last = None
        # while a traceable pipeline call runs (runtime/traces.py): `last` of each of its runs,
        # or why it was launched one by one
        self.log = None
        # and that call's trace key: its runs' graphs are its own, so what it looks up (a
        # model's layer l, whose weights are layer l's at every call) is read in place, not
        # staged because the same shapes last ran with another layer's
        self.scope = None
        self.last_miss: str | None = None   # why the last run was launched one by one

    def mode(self):
        return getattr(self.lazy.interp.session, "cuda_graph", "auto")

    def run(self, launches: list, roots) -> bool:
        """Run `launches` ([(group, lazy parts)]) as a CUDA graph where one fits: True when
        done, False when the caller launches them one by one."""
        miss = self._run(launches, roots)
        self.last_miss = miss
        if self.log is not None and len(self.log) < MAX_SHAPES:     # (a call that failed
            self.log.append(self.last or miss)                      # leaves one behind)
        return miss is None

    def _run(self, launches: list, roots) -> str | None:
        """None where a graph ran `launches`, else why they are launched one by one."""
        self.last = None
        mode = self.mode()
        # inside a traced call a single launch is captured too: the call replays as a whole
        if mode is False:
            return "config { cuda_graph: false }"
        if len(launches) < (1 if self.log is not None else MIN_LAUNCHES):
            return "a single launch"
        shape = _Shape.of(self.lazy, launches)
        if isinstance(shape, str):
            return shape
        key = shape.key
        for record in self.graphs.get(key, ()):
            if record.fits(shape.addresses) and record.free():
                given = record.run(self.lazy, launches, shape, roots)
                self.last = (record, shape.inputs, [id(g.result) for g, _ in launches], given)
                return None
        runs, last = self.seen.pop(key, (0, None))
        runs += 1
        self.seen[key] = (runs, shape.addresses)
        if len(self.seen) > MAX_SHAPES:
            self.seen.pop(next(iter(self.seen)))
        if key in self.refused:
            return f"its capture failed before ({self.refused[key]})"
        if runs < (1 if mode is True else AUTO_AFTER):
            return ("seen once: captured at the next identical run" if key not in self.graphs
                    else "an input read in place at another address, or a view of the "
                         "graph's buffers still held: captured again at the next such run")
        staged = {j for j, a in enumerate(shape.addresses)
                  if last is not None and last[j] != a} | shape.views
        from ..backends.cuda.graph import CaptureFailed, capture
        tail = len(launches) >= MIN_LAUNCHES and \
            id(launches[-1][0].result) in self.lazy._named(roots, frames=True)
        try:
            graph = capture(shape.device, shape.stream, shape.plans, shape.wiring,
                            shape.scalars, shape.inputs, staged, tail)
        except CaptureFailed as err:
            self.refused[key] = str(err)
            if len(self.refused) > MAX_SHAPES:
                self.refused.pop(next(iter(self.refused)))
            return str(err)
        record = GraphRecord.of(graph, shape, staged, launches)
        records = self.graphs.setdefault(key, [])
        records.append(record)
        if len(records) > MAX_GRAPHS:
            records.pop(0)
        if len(self.graphs) > MAX_GRAPH_SHAPES:
            self.graphs.pop(next(iter(self.graphs)))
        given = record.run(self.lazy, launches, shape, roots)
        self.last = (record, shape.inputs, [id(g.result) for g, _ in launches], given)
        return None


class _Shape:
    """One run's launches as a graph sees them."""

    __slots__ = ("key", "device", "stream", "plans", "wiring", "scalars", "inputs",
                 "addresses", "views")

    @staticmethod
    def of(lazy, launches) -> "_Shape | str":
        """The run's shape, or why no graph takes it."""
        first = launches[0][0].result
        device_id = first.device
        if not device_id.startswith("cuda:"):
            return f"launches on {device_id}, not a CUDA device"
        device = first.runs_on
        if getattr(device, "backend", "") != "cuda":
            return f"launches on {device_id}, not a CUDA device"
        cp = sys.modules.get("cupy")
        tuning = getattr(lazy.interp.session, "tuning", None)
        made = {}                   # id(group result) -> launch index
        plans, wiring, scalars, inputs, addresses, parts = [], [], [], [], [], []
        outside = {}                # id(array) -> input index
        views = set()               # inputs not contiguous: always staged
        for k, (group, (lowered, plan, ins, values, _)) in enumerate(launches):
            lz = group.result
            name = lowered.kernel.name
            if lz.device != device_id:
                return f"launches on {device_id} and {lz.device}"
            if not plan.out_shape:
                return f"block `{name}` reduces to one number"
            if lowered.kernel.output.dtype == "bf16":
                return f"block `{name}` has a bf16 output"
            prepared = plan.prepared(device, tuning)
            if not hasattr(prepared, "enqueue"):
                return f"block `{name}` has no plan a graph captures"
            wires = []
            for t, (dtype, want) in zip(ins, prepared.dtypes):
                if dtype == "bf16":
                    return f"block `{name}` has a bf16 input"
                root = getattr(t, "root", t)    # a LazyView: a view of its root's output
                k_in = made.get(id(root))
                if k_in is not None:
                    if launches[k_in][0].result.dtype != dtype:
                        return f"block `{name}` converts an earlier launch's output"
                    wires.append(("g", k_in) if root is t else ("v", k_in, t.view))
                    continue
                if getattr(root, "done", True) is False:
                    lazy.force(root)    # fused away in an earlier run, read after all
                if t.device != device_id:
                    return f"block `{name}` reads an input on {t.device}"
                a = t.data
                fits = prepared.fits(a, want, cp)
                if not fits and not staged_view(a, want, device, cp):
                    return f"block `{name}` reads an input that needs a conversion"
                j = outside.get(id(a))
                if j is None:
                    j = outside[id(a)] = len(inputs)
                    inputs.append(a)
                    addresses.append(a.data.ptr)
                if not fits:
                    views.add(j)
                wires.append(("x", j))
            made[id(lz)] = k
            plans.append(prepared)
            wiring.append(tuple(wires))
            scalars.append(values)
            parts.append((id(prepared), tuple(values.items()), tuple(wires)))
        shape = _Shape()
        shape.device, shape.plans, shape.wiring, shape.scalars = device, plans, wiring, scalars
        shape.inputs, shape.addresses, shape.views = inputs, tuple(addresses), views
        shape.stream = cp.cuda.get_current_stream() if cp is not None else None
        shape.key = (device_id, getattr(shape.stream, "ptr", 0), lazy.replays.scope, tuple(parts),
                     tuple((a.shape, str(a.dtype), a.flags.c_contiguous) for a in inputs))
        return shape


def staged_view(a, want, device, cp) -> bool:
    """Whether input `a` is a view the kernel takes once copied contiguous (a CuPy array
    of the storage dtype on the device, strided): staged, a replay copies it in."""
    return type(a) is cp.ndarray and a.dtype == want and \
        a.data.device_id == device.index and not a.flags.c_contiguous


class GraphRecord:
    """A captured graph with what replaying it needs: its launch plans, the device and
    stream it replays on, each launch's site (the block's span and source, for its errors)
    and the inputs read in place ((index, address))."""

    def __init__(self, graph, plans: list, device, stream, sites: list, in_place: tuple):
        self.graph = graph
        self.plans = plans                  # held: their ids are in the shape's key
        self.device, self.stream = device, stream
        self.sites = sites
        self.in_place = in_place
        self.handed: list = []              # views of the graph's buffers given out last run
        self.seen_labels = None             # a traced call's looked-up inputs at its last
                                            # replay (traces._Trace.replay)
        self.launches = None                # per launch, the Launch the inspector shows

    @staticmethod
    def of(graph, shape: _Shape, staged: set, launches: list) -> "GraphRecord":
        return GraphRecord(graph, shape.plans, shape.device, shape.stream,
                       [(g.site.node.span, g.site.source) for g, _ in launches],
                       tuple((j, a) for j, a in enumerate(shape.addresses) if j not in staged))

    def fits(self, addresses) -> bool:
        return all(addresses[j] == a for j, a in self.in_place)

    def free(self) -> bool:
        """Whether no view of the graph's buffers handed out by the last run is still held
        (a reference from the list, the loop and the call's argument: 3)."""
        return all(sys.getrefcount(v) <= 3 for v in self.handed)

    def run(self, lazy, launches, shape: _Shape, roots) -> list:
        """Replay on the caller's stream and settle every launch's lazy value; the array
        given to each."""
        cp = sys.modules["cupy"]
        interp, device, stream = lazy.interp, shape.device, shape.stream
        interp.session.activity = (self.plans[0].kernel.name, device.id)
        times = self.replay(shape.inputs)
        named = lazy._named(roots, frames=True)
        if self.launches is None:
            self.launches = [Launch(p.kernel.name, device.id, IN_GRAPH,
                                    dict(p.geometry, graph=f"replayed in a CUDA graph of "
                                                           f"{len(self.plans)} launches (the "
                                                           f"last one's time is the graph's)"))
                             for p in self.plans]
        self.handed, given = [], []
        last = len(launches) - 1
        for k, ((group, (lowered, plan, _, _, info)), out) in \
                enumerate(zip(launches, self.graph.outs)):
            lz = group.result
            if self.graph.fresh(k):     # a new array at each replay: handed out as it is
                data = out
            elif id(lz) in named:
                data = cp.empty(out.shape, dtype=out.dtype)
                data.data.copy_from_device_async(out.data, out.nbytes, stream)
            else:
                data = out.view()
                self.handed.append(data)
            launch = self.launches[k]
            if k == last:
                launch = Launch(launch.kernel, launch.device, times, launch.geometry)
            lz.settle(interp.launched(device, lowered, plan, data, launch, lz.committed, info))
            given.append(data)
        self.graph.handed()
        return given

    def replay(self, inputs: list):
        """Replay the graph on the stream it was captured for and raise the first failure
        a launch reports, as that launch raises it; the graph's time."""
        times = self.launch(inputs)
        self.check()
        return times

    def launch(self, inputs: list):
        """Queue the graph on its stream (its staged inputs copied in first); its time."""
        return self.graph.replay(inputs, self.stream)

    def check(self):
        """Raise the first failure a launch of the last replay reported, as it raises it."""
        failed = self.graph.check(self.plans)
        if failed is not None:
            span, source = self.sites[failed]
            try:
                self.plans[failed].check(self.graph.flags[failed])
            except ZynMLError as err:
                if err.span is NO_SPAN or err.span.line <= 0:
                    err.span = span
                raise err.with_source(source)
            raise ZynMLRuntimeError("a kernel of a CUDA graph reported a failure it does not "
                                    "name", span, source)
