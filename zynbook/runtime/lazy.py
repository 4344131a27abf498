"""The lazy kernel graph: compute blocks recorded as they are met and run at a boundary.

A compute block is lowered, planned and checked where the program meets it (so its errors
name its line at once), but its launch waits: the interpreter hands back a `Lazy`, a Tensor
whose data is computed when first read. A boundary runs everything recorded, in program
order: a lazy value's data read (printed, displayed, a host builtin, a condition, a block
that is not deferred), a host builtin call other than the pure constructors, an element
assignment into a tensor, `await`, `config`, binding a top-level name (a later cell may read
it, and a statement that fails binds nothing), the end of a top-level statement and a
pipeline's return to Python. So the graph spans what one statement runs: its `|>` chains,
its nested expressions and the pipelines it calls, across their statements.

When the graph runs, each block whose result only one later block reads, and no top-level
name holds (a later cell may read those), is offered to `compiler.fusion.fuse` with that
block: fused, the intermediate is never written and the two are one launch. A fused-away
result that is read after all (a pipeline's local read again later) is computed on its own
then, from the inputs it kept; before an element assignment and at the end of the program
every such result still held (by a name, a pipeline's local, or a value the statement is
still building, such as a list a pipeline returned) is computed, so none ever reads changed
inputs.

A reduction to one value bound to a pipeline's local (`let t = compute(x) { @kernel
reduce(+) ... }`) is held there as a `LazyScalar`: a block reading `t` by name records it
as a scalar argument still to come (`fusion.Block.scalar_args`), so the two may fuse (the
one-value epilogue), and any other read of the name computes it (interp.lookup): the host
sees the float it always did, the type the language gives it.

A run of the graph on one CUDA device that repeats is replayed as a CUDA graph
(runtime/replay.py), and a straight-line pipeline's call as its trace (runtime/traces.py).
"""
from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from ..compiler import cir, fission, fusion
from ..compiler.lower import LoweredKernel
from ..compiler.passes.pipeline import run_pipeline
from ..errors import ZynMLError, ZynMLMemoryError, ZynMLRuntimeError
from .plans import BlockPlan
from .replay import Replays
from .traces import Traces
from .tensor import Tensor
from .values import Record

# builtins that only make new values: calling them is no boundary (`split` and `reshape` of a
# result not yet computed make LazyViews; of any other tensor, views)
PURE_BUILTINS = frozenset(("zeros", "ones", "randn", "rand", "arange", "range", "len", "shape",
                           "tensor", "compute_devices", "split", "reshape"))
# recorded blocks before the graph runs without waiting for a boundary (a long host loop)
MAX_PENDING = 32
# fused kernels kept with their plans (a loop over growing shapes keeps this many)
MAX_FUSED = 64
# host arithmetic recorded as an elementwise block: the operators, the dtypes and the devices
# where it computes what numpy there computes, and leaves the result where numpy leaves it
HOST_OPS = ("+", "-", "*", "/")
HOST_DTYPES = ("f32", "f64")


class Lazy(Tensor):
    """A compute block's result, computed when its data is first read."""

    __slots__ = ("graph", "node", "lowered", "plan", "inputs", "scalars", "source", "result",
                 "runs_on", "notes", "calls", "__weakref__")

    def __init__(self, graph, node, lowered, plan, inputs, scalars, device, commit, source):
        Tensor.__init__(self, None, device.id, plan.out_shape, lowered.kernel.output.dtype,
                        committed=commit)
        self.runs_on = device       # the device object (no registry look-up at the launch)
        self.graph, self.node, self.lowered, self.plan = graph, node, lowered, plan
        self.inputs, self.scalars, self.source = list(inputs), dict(scalars), source
        self.result = _NOT_YET
        self.notes = ()             # what the inspector tells of a phase of a split block
        self.calls = tuple(graph.interp.call_frames)    # the pipeline calls it was made in

    @property
    def data(self):
        return _value_data(self.graph.force(self))

    @data.setter
    def data(self, value):
        Tensor.data.__set__(self, value)

    @property
    def done(self) -> bool:
        return self.result is not _NOT_YET

    def settle(self, result):
        self.result = result
        if isinstance(result, Tensor):
            Tensor.data.__set__(self, result.data)
        self.inputs = None          # what it was computed from may be freed now
        if any(type(v) is LazyScalar for v in self.scalars.values()):
            # (and a one value fused into it: held, it would be computed at the boundary)
            self.scalars = {n: v for n, v in self.scalars.items() if type(v) is not LazyScalar}

    def block(self) -> fusion.Block:
        k = self.lowered.kernel
        return fusion.Block(k, dict(self.plan.sizes), dict(self.scalars),
                            tuple(id(t) for t in self.inputs), ((k.name, k.first_line),),
                            scalar_args={n: id(v.lazy) for n, v in self.scalars.items()
                                         if type(v) is LazyScalar})

    def one_values(self) -> list:
        """The recorded blocks whose one value a scalar argument of this block is."""
        return list({id(v.lazy): v.lazy for v in self.scalars.values()
                     if type(v) is LazyScalar}.values())

    def __repr__(self):
        return repr(self.graph.force(self))


_NOT_YET = object()


class LazyScalar:
    """A reduction to one value recorded and not run yet, as the pipeline's local it is
    bound to holds it. A block reading the local by name takes it as a scalar argument (its
    value filled in at the launch, or the two blocks fused); any other read of the name
    computes it (`value`) and the local holds the number from then on."""

    __slots__ = ("lazy",)

    def __init__(self, lz: Lazy):
        self.lazy = lz

    @property
    def done(self) -> bool:
        return self.lazy.done

    def value(self):
        """The number (a float: a reduction of floats)."""
        return self.lazy.graph.force(self.lazy)

    def __repr__(self):
        return repr(self.value())


def numbers(scalars: dict) -> dict:
    """`scalars` (a launch's scalar arguments) with every one-value result computed."""
    if not any(type(v) is LazyScalar for v in scalars.values()):
        return scalars
    return {n: v.value() if type(v) is LazyScalar else v for n, v in scalars.items()}


@dataclasses.dataclass(frozen=True)
class ViewOf:
    """A chain of views of a result: ("part", axis, start, stop), a slice of one axis (a
    part of `split`), and ("reshape", shape), a reshape that copies nothing. Called on the
    result's array (numpy or CuPy), it makes the view."""
    ops: tuple
    shape: tuple

    def __call__(self, array):
        for op in self.ops:
            if op[0] == "part":
                array = array[(slice(None),) * op[1] + (slice(op[2], op[3]),)]
            else:
                array = array.reshape(op[1])
        return array

    def then(self, op) -> "ViewOf":
        return ViewOf(self.ops + (op,), ())

    @staticmethod
    def checked(root_shape: tuple, chain: "ViewOf") -> "ViewOf | None":
        """`chain` with its shape, or None where a reshape of it would copy. Checked on a
        stand-in holding no elements (one byte with the strides of the whole), so only
        stride arithmetic reads it."""
        try:
            a = chain.on_stand_in(root_shape, 1)
        except ValueError:
            return None
        return ViewOf(chain.ops, tuple(map(int, a.shape)))

    def on_stand_in(self, root_shape: tuple, itemsize: int) -> np.ndarray:
        """The view of a C-contiguous result of `root_shape` made on a stand-in of one
        element of `itemsize` bytes: its shape and byte strides are the view's (ValueError
        where a reshape would copy)."""
        strides = [itemsize] * len(root_shape)
        for k in range(len(root_shape) - 2, -1, -1):
            strides[k] = strides[k + 1] * root_shape[k + 1]
        a = np.lib.stride_tricks.as_strided(np.zeros(1, f"V{itemsize}"), root_shape, strides,
                                            writeable=False)
        for op in self.ops:
            a = a[(slice(None),) * op[1] + (slice(op[2], op[3]),)] if op[0] == "part" \
                else a.reshape(op[1], copy=False)
        return a


class LazyView(Tensor):
    """A view (a part of `split`, a `reshape`) of a recorded result not yet computed: a
    block reading it is recorded in the same run of the graph as the block it views (no
    boundary at the view); its data is the view of the root's once that is computed."""

    __slots__ = ("root", "view", "__weakref__")

    def __init__(self, root: Lazy, view: ViewOf):
        Tensor.__init__(self, None, root.device, view.shape, root.dtype,
                        committed=root.committed)
        self.root, self.view = root, view
        from .builtins import viewed
        viewed(self)        # a tensor of its own: writing into it or its root copies first

    @property
    def data(self):
        own = Tensor.data.__get__(self)
        if own is not None:         # host code wrote into it: a copy of its own
            return own
        result = self.root.graph.force(self.root)
        data = _value_data(result)
        if not isinstance(data, np.ndarray) and type(data).__module__.split(".")[0] != "cupy":
            data = result.numpy()   # a device's own buffer: viewed on the host, as split does
        return self.view(data)

    @data.setter
    def data(self, value):
        Tensor.data.__set__(self, value)

    @property
    def done(self) -> bool:
        return self.root.done

    @property
    def runs_on(self):
        return self.root.runs_on

    def plain(self) -> Tensor:
        return Tensor(self.data, self.device, self.shape, self.dtype, self.committed)

    def __repr__(self):
        return repr(self.plain())


def _value_data(value):
    return value.data if isinstance(value, Tensor) else value


@dataclasses.dataclass
class Fusion:
    """What the inspector shows of a launch the graph made: the blocks it came from and why
    adjacent blocks were not fused."""
    origins: tuple              # (kernel name, first line, ZynML text) per block, in order
    notes: list                 # "kernel_l3 -> kernel_l9 (line 9): not fused: why", ...

    def text(self) -> str:
        lines = []
        if len(self.origins) > 1:
            lines.append("fused from " + ", ".join(f"{n} (line {ln})"
                                                    for n, ln, _ in self.origins))
        lines += self.notes
        return "\n".join(lines)


def _with_calls(err, site: Lazy, interp):
    """`err`, of a block recorded inside pipeline calls that have returned since, with
    those calls' frames (the calls still running add theirs as the error leaves them)."""
    now, then = interp.call_frames, site.calls
    k = 0
    while k < min(len(now), len(then)) and now[k] is then[k]:
        k += 1
    err.calls += tuple(f for f in reversed(then[k:]) if f is not None)
    return err


class _Group:
    """Blocks that will be one launch: their fused block and the lazy value it computes."""

    def __init__(self, lz: Lazy):
        self.result, self.members, self.block = lz, [lz], lz.block()
        self.notes: list = list(lz.notes)

    @property
    def site(self) -> Lazy:
        """The member whose statements the launch keeps: its errors are this block's (its
        line in its own source, which may be another cell's than the result's)."""
        return self.members[self.block.host]


class LazyGraph:
    """The blocks one interpreter has recorded and not yet run."""

    def __init__(self, interp):
        self.interp = interp
        self.pending: list = []
        self.fused_away = weakref.WeakSet()     # results fused away that may still be held
        self.pairs: dict = {}       # what fusing two blocks gave, by what decides it
        self.fused: dict = {}       # fused and host-arithmetic kernels' (lowered, plan), made once
        self.splits: dict = {}      # what `fission.split` made of a block, by kernel and sizes
        self.replays = Replays(self)    # runs of the graph captured as CUDA graphs
        self.traces = Traces(self)      # pipeline calls replayed without interpreting them

    def defer(self, node, lowered, plan, inputs, scalars, device, commit, source) -> Lazy:
        if any(type(v) is LazyScalar for v in scalars.values()):
            # a one value computed is passed as the number; one fused away in an earlier run
            # of the graph is computed now, from the inputs it kept (a pending one comes
            # with this run)
            scalars = {n: v.value() if type(v) is LazyScalar and (v.done or not any(
                p is v.lazy for p in self.pending)) else v for n, v in scalars.items()}
        phases = self.split(lowered, plan)
        if phases:          # one recorded block per phase, each reading the ones before
            made = {}
            for ph_lowered, ph_plan, reads, writes, note in phases:
                lz = Lazy(self, node, ph_lowered, ph_plan,
                          [made[r] if isinstance(r, str) else inputs[r] for r in reads],
                          scalars, device, commit if ph_lowered is phases[-1][0] else False,
                          source)
                lz.notes = (note,)
                made[writes] = lz
                self.pending.append(lz)
        else:
            lz = Lazy(self, node, lowered, plan, inputs, scalars, device, commit, source)
            self.pending.append(lz)
        if len(self.pending) >= MAX_PENDING:
            self.flush(roots=[lz])
        return lz

    def held(self, lz: Lazy):
        """What a pipeline's local holds of `lz`, a recorded reduction to one value: a
        LazyScalar where it is a float, else its value now (an integer may size a later
        block, which its plan needs before the launch)."""
        if lz.dtype in cir.FLOAT_DTYPES and not lz.done:
            return LazyScalar(lz)
        return self.force(lz)

    def binary(self, op: str, a, b, span, source: str):
        """`a op b` recorded as an elementwise block where one operand is a recorded result
        (so it may fuse with its neighbours), or None where numpy computes it now: both
        operands of one shape and float dtype, or a tensor and a number."""
        lz = next((v for v in (a, b) if isinstance(v, Lazy) and not v.done), None)
        if op not in HOST_OPS or lz is None or lz.dtype not in HOST_DTYPES or \
                not (lz.device == "cpu" or lz.device.startswith("cuda:")):
            return None
        other = b if a is lz else a
        if isinstance(other, Tensor):
            if other.shape != lz.shape or other.dtype != lz.dtype or other.device != lz.device:
                return None
            scalars = {}
        elif isinstance(other, (int, float)) and not isinstance(other, bool):
            scalars = {"s": float(other)}
        else:
            return None
        sides = tuple("t" if isinstance(v, Tensor) else "s" for v in (a, b))
        lowered, plan = self._host_plan(op, sides, lz.dtype, lz.shape, span, source)
        inputs = [v for v in (a, b) if isinstance(v, Tensor)]
        return self.defer(_HostSite(span), lowered, plan, inputs, scalars, lz.runs_on,
                          False, source)

    def view(self, t, op: tuple):
        """The view `op` of `t` (ViewOf's ops), where `t` is a recorded result not yet
        computed or a view of one, as a LazyView; None where `t` is neither or the view
        would copy (the caller then computes `t` and makes it)."""
        root = t.root if isinstance(t, LazyView) else t
        if not isinstance(root, Lazy) or root.done or root.dtype == "bf16" or \
                not root.plan.out_shape:
            return None
        made = ViewOf.checked(root.shape, (t.view if root is not t else ViewOf((), ())).then(op))
        return None if made is None else LazyView(root, made)

    def split(self, lowered, plan) -> list:
        """[(lowered, plan, reads, writes, note)] per phase where `compiler.fission.split` distributes
        the block (worked out once per kernel and sizes), else []."""
        made = getattr(plan, "phases", None)        # kept with the plan: a warm launch
        if made is not None and made[0] is lowered.kernel:
            return made[1]
        # the entry holds the kernel, so no other kernel takes its id while it is kept
        key = (id(lowered.kernel), _items(plan.sizes))
        made = self.splits.get(key)
        if made is None:
            phases = fission.split(lowered.kernel, plan.sizes)
            made = (lowered.kernel, [] if isinstance(phases, str) else [
                _phase_parts(lowered, plan, ph, n, len(phases)) for n, ph in enumerate(phases)])
            if len(self.splits) >= MAX_FUSED:
                self.splits.pop(next(iter(self.splits)))
            self.splits[key] = made
        if isinstance(plan, BlockPlan):
            plan.phases = made
        return made[1]

    def _host_plan(self, op, sides, dtype, shape, span, source):
        key = ("host", op, sides, dtype, shape, span.line, source)
        made = self.fused.get(key)
        if made is None:
            lowered = run_pipeline(_host_kernel(op, sides, dtype, len(shape), span, source))
            sizes = {f"n{k}": d for k, d in enumerate(shape)}
            if len(self.fused) >= MAX_FUSED:
                self.fused.pop(next(iter(self.fused)))
            made = self.fused[key] = (lowered, BlockPlan(lowered, sizes))
        return made

    def force(self, lz: Lazy):
        """The value of `lz` (a Tensor, or a number for a reduction to one value)."""
        if not lz.done:
            if any(p is lz for p in self.pending):
                self.flush(roots=[lz])
            if not lz.done:         # fused away in an earlier run of the graph, read after all
                self._launch(_Group(lz))
        return lz.result

    def settle(self, values):
        """Every lazy value among `values` computed (before a block that is not deferred
        reads them, possibly on another thread)."""
        for v in values:
            if isinstance(v, (Lazy, LazyView)):
                self.force(v.root if isinstance(v, LazyView) else v)

    def drop(self):
        """Forget what is recorded and fused away (after an error: the failed statement
        binds nothing; a value still named is computed alone if it is read)."""
        self.pending = []
        self.fused_away.clear()

    def flush(self, roots=()):
        """Run every recorded block; `roots` are values the caller holds besides the names."""
        if not self.pending:
            return
        with self.interp._lock:
            pending, self.pending = self.pending, []
            launches = [(group, self.parts(group))
                        for group in self._groups(pending, self._named(roots, frames=False))]
            if not self.replays.run(launches, roots):   # a CUDA graph, where one fits
                for group, parts in launches:
                    self._launch(group, parts)

    def finish(self, roots=()):
        """Run every recorded block, then compute every fused-away result still held
        anywhere (a name, a pipeline's local, a list being built): not only the names, since
        a value a statement still builds may be read after an element assignment changed
        the inputs it would be computed from."""
        self.flush(roots)
        for lz in list(self.fused_away):
            self.force(lz)
        self.fused_away.clear()

    def boundary(self, value):
        """`value` with the blocks recorded so far run (`finish`, `value` a root) and made
        `plain`: binding a top-level name is a boundary, since a later cell may read it and
        a failing statement binds nothing, and so is the end of a top-level statement."""
        if self.pending or self.fused_away:     # else `finish` has nothing to do
            self.finish(roots=[value])
        if isinstance(value, (Lazy, LazyView, list, tuple)):
            return self.plain(value)
        return value

    def plain(self, value):
        """`value` with computed lazy values replaced by ordinary tensors (what a program
        hands back and leaves in its names)."""
        if isinstance(value, Lazy):
            return value.result if value.done else value
        if isinstance(value, LazyView):
            return value.plain() if value.done else value
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.plain(v) for v in value)
        return value

    # ------------------------------------------------------------------------ grouping
    def _groups(self, pending: list, live: set) -> list:
        readers: dict = {}
        for lz in pending:
            for t in list({id(t): t for t in lz.inputs}.values()) + lz.one_values():
                t = t.root if isinstance(t, LazyView) else t
                if isinstance(t, Lazy):
                    readers[id(t)] = readers.get(id(t), 0) + 1
        open_: dict = {}            # id(result) -> _Group, in program order
        for lz in pending:
            group = _Group(lz)
            if self.interp.named_results:   # inputs top-level names of this cell computed
                group.notes += self.interp._not_fused(lz.inputs, lz.lowered.kernel)
            for t in {id(t): t for t in lz.inputs + lz.one_values()}.values():
                producer = open_.get(id(t)) if isinstance(t, Lazy) else None
                if producer is None or t.notes and t.node is lz.node:
                    continue        # the phases of a split block stay apart
                why = self._kept(t, lz, readers, live)
                if not why:
                    fused = self._fuse(producer.block, group.block, id(t))
                    if isinstance(fused, fusion.Block):
                        del open_[id(t)]
                        group.members = producer.members + group.members
                        group.notes = producer.notes + group.notes
                        group.block = fused
                        continue
                    why = fused
                group.notes.append(f"{t.lowered.kernel.name} -> {lz.lowered.kernel.name} "
                                   f"(line {lz.node.span.line}): not fused: {why}")
            open_[id(lz)] = group
        return list(open_.values())

    def _fuse(self, producer: fusion.Block, consumer: fusion.Block, key):
        """`fusion.fuse`, worked out once per pair of kernels, sizes and pattern of shared
        inputs: scalar values and input keys stand in as tokens, replaced here by this
        run's."""
        keys = list(dict.fromkeys(producer.args + consumer.args +
                                  tuple(producer.scalar_args.values()) +
                                  tuple(consumer.scalar_args.values())))
        slot = {k: n for n, k in enumerate(keys)}
        sig = (id(producer.kernel), id(consumer.kernel), _items(producer.sizes),
               _items(consumer.sizes), tuple(slot[a] for a in producer.args),
               tuple(slot[a] for a in consumer.args), slot[key], producer.origins,
               consumer.origins,
               tuple((n, slot[k]) for n, k in sorted(producer.scalar_args.items())),
               tuple((n, slot[k]) for n, k in sorted(consumer.scalar_args.items())))
        made = self.pairs.get(sig)
        if made is None:
            def tokens(block, side, args, pending):
                return dataclasses.replace(block, args=args, scalars={
                    n: (side, n) for n in block.scalars}, scalar_args=dict(pending))
            made = (producer.kernel, consumer.kernel,       # held: their ids are in the key
                    fusion.fuse(tokens(producer, "p", sig[4], sig[9]),
                                tokens(consumer, "c", sig[5], sig[10]), sig[6]))
            if len(self.pairs) >= MAX_FUSED:
                self.pairs.pop(next(iter(self.pairs)))
            self.pairs[sig] = made
        fused = made[2]
        if isinstance(fused, str):
            return fused
        values = {"p": producer.scalars, "c": consumer.scalars}
        return dataclasses.replace(
            fused, args=tuple(keys[i] for i in fused.args),
            scalars={n: values[side][name] for n, (side, name) in fused.scalars.items()},
            scalar_args={n: keys[i] for n, i in fused.scalar_args.items()})

    @staticmethod
    def _kept(t: Lazy, lz: Lazy, readers: dict, live: set) -> str:
        if id(t) in live:
            return "its result is read elsewhere (a top-level name, a builtin's argument)"
        if readers.get(id(t), 0) > 1:
            return "its result is read by more than one block"
        if t.device != lz.device:
            return "they run on different devices"
        return ""

    def _named(self, roots, frames: bool) -> dict:
        """{id: lazy value} of those the program's top-level names, `roots` and (where
        `frames`) the locals of the pipelines being called hold."""
        interp = self.interp
        stack = list(roots) + list(interp.globals.values())
        if frames:
            for local, _ in interp.frames:
                stack += list(local.values())
        live, seen = {}, set()
        while stack:
            v = stack.pop()
            if isinstance(v, LazyView):
                v = v.root
            if isinstance(v, Lazy):
                live[id(v)] = v
            elif isinstance(v, (list, tuple)) and id(v) not in seen:
                seen.add(id(v))
                stack.extend(v)
            elif isinstance(v, Record) and id(v) not in seen:
                seen.add(id(v))
                stack.extend(v._fields.values())
        return live

    # ------------------------------------------------------------------------- launching
    def parts(self, group: _Group) -> tuple:
        """(lowered, plan, inputs, scalars, Fusion or None) of the launch `group` makes."""
        lz = group.result
        if len(group.members) == 1:
            lowered, plan, inputs, scalars = lz.lowered, lz.plan, lz.inputs, lz.scalars
        else:
            lowered, plan = self._fused_plan(group.block, lz.lowered)
            self.fused_away.update(m for m in group.members if m is not lz)
            values = {id(t): t for m in group.members for t in m.inputs}
            inputs = [values[key] for key in group.block.args]
            scalars = group.block.scalars
        info = Fusion(tuple((n, ln, _source_of(group.members, n)) for n, ln in
                            group.block.origins), group.notes) \
            if len(group.members) > 1 or group.notes else None
        return lowered, plan, inputs, scalars, info

    def _launch(self, group: _Group, parts=None):
        interp, lz = self.interp, group.result
        lowered, plan, inputs, scalars, info = parts or self.parts(group)
        self.settle(inputs)
        scalars = numbers(scalars)      # the one values it reads, computed before it
        device, site = lz.runs_on, group.site
        saved, interp.source = interp.source, site.source
        try:
            out = interp._launch(device, lowered, inputs, plan.sizes, scalars, site.node,
                                 commit=lz.committed, plan=plan, fusion=info)
        except ZynMLError as err:
            if len(group.members) > 1:      # the names the user wrote, not the fused kernel's
                err.message = fusion.user_names(err.message, group.block.renamed)
                err.args = (err.message,)
            raise _with_calls(err, site, interp)
        except (ValueError, ArithmeticError, IndexError) as err:
            # as a statement's launch fails (Interpreter.exec), named by the block's line
            raise _with_calls(ZynMLRuntimeError(str(err), site.node.span, site.source), site,
                              interp) from None
        except MemoryError as err:
            from .interp import _memory_message
            raise _with_calls(ZynMLMemoryError(_memory_message(err), site.node.span,
                                               site.source), site, interp) from None
        finally:
            interp.source = saved
        lz.settle(out)

    def _fused_plan(self, block: fusion.Block, host_lowered):
        # the entry holds the kernel, so no other kernel takes its id while it is kept
        key = (id(block.kernel), _items(block.sizes))
        made = self.fused.get(key)
        if made is None:
            lowered = dataclasses.replace(
                host_lowered, kernel=block.kernel, before_passes=block.kernel, constraints=[],
                bound_checks=[], labels={b.name: b.name for b in block.kernel.inputs},
                scalar_labels={}, notes=[])
            if len(self.fused) >= MAX_FUSED:
                self.fused.pop(next(iter(self.fused)))
            made = self.fused[key] = (lowered, BlockPlan(lowered, dict(block.sizes)))
        return made


def _phase_parts(lowered, plan, phase, n: int, count: int) -> tuple:
    """(lowered, plan, reads, writes, note) of phase `n` of a split block."""
    k = lowered.kernel
    ph_lowered = dataclasses.replace(
        lowered, kernel=phase.kernel, before_passes=phase.kernel, constraints=[],
        bound_checks=[], labels={b.name: lowered.labels.get(b.name, b.name)
                                 for b in phase.kernel.inputs}, notes=[])
    note = f"split from {k.name} (line {k.first_line}): phase {n + 1} of {count}, " + \
        (f"writes {phase.stages}" if phase.stages != "out" else "writes out") + \
        "".join(f", reads {r}" for r in phase.reads if isinstance(r, str))
    return ph_lowered, BlockPlan(ph_lowered, dict(plan.sizes)), phase.reads, phase.writes, note


class _HostSite:
    """Where a recorded host operation is written (for its errors)."""

    def __init__(self, span):
        self.span = span


def _host_kernel(op, sides, dtype, rank, span, source) -> LoweredKernel:
    """`out[i0, ..] = a[i0, ..] op b[i0, ..]` (a number operand is the scalar `s`)."""
    ty = cir.Ty(dtype)
    dims = tuple(f"n{k}" for k in range(rank))
    index = tuple(cir.Var(f"i{k}", cir.Ty("i32")) for k in range(rank))
    names = iter(("a", "b"))
    operands, inputs = [], []
    for side in sides:
        if side == "t":
            inputs.append(cir.Buffer(next(names), dtype, dims))
            operands.append(cir.Load(inputs[-1].name, index, ty))
        else:
            operands.append(cir.Var("s", ty))
    body = (cir.Store("out", index, cir.Bin(op, operands[0], operands[1], ty), span.line),)
    for k in reversed(range(rank)):
        body = (cir.Loop(f"i{k}", cir.Const(0, cir.Ty("i32")), cir.Var(dims[k], cir.Ty("i32")),
                         cir.Const(1, cir.Ty("i32")), body, True, span.line),)
    lines = source.splitlines()
    text = lines[span.line - 1] if 0 < span.line <= len(lines) else ""
    kernel = cir.Kernel(f"host_l{span.line}", cir.KernelType("elementwise"), tuple(inputs),
                        cir.Buffer("out", dtype, dims), dims,
                        (cir.Scalar("s", dtype),) if "s" in sides else (), body,
                        source=text.strip(), first_line=span.line)
    return LoweredKernel(kernel, [], [], {}, {b.name: b.name for b in inputs}, {}, {})


def _items(d: dict) -> tuple:
    return tuple(sorted(d.items()))


def _source_of(members, name: str) -> str:
    for m in members:
        if m.lowered.kernel.name == name:
            return m.lowered.kernel.source
    return ""

