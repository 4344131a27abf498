"""Launch plans: what launching a compute block needs, worked out once per input signature.

A block run again (a cell re-run, a pipeline called in a loop) finds its work done:

* `BlockSite` (per syntax node): the labels of its inputs and the free names its body reads.
* `LoweredBlock` (per node, input dtypes and ranks, scalar types and the annotations a
  magic line adds): the checked, lowered kernel after the pass pipeline.
* `BlockPlan` (per input shapes and the values of the sizes the program gives): the solved
  sizes, the output shape, where each scalar comes from, and per device (and the session's
  tuning settings) the device's `LaunchPlan` (for `cpu:native` and `cuda:N`: the compiled
  program and argument layout).

Reuse is decided by the keys alone, built from everything that can change the result: the
syntax node (a redefined pipeline or a new cell text is a new node), input dtypes, ranks and
shapes, the values of sizes baked into compiled code, the device ids the block runs on and
the device objects themselves (a device found again after `registry.refresh()` is another).
Scalars that are not sizes are passed at every launch, so their values are not part of any
key. A failure (a shape mismatch, an impossible allocation) is raised before anything is
stored, so a later run checks again."""
from __future__ import annotations

from ..compiler import ast as A
from ..compiler import cir
from ..compiler.dims import solve
from ..compiler.freenames import compute_free_names
from ..compiler.lower import dotted
from ..errors import ZynMLTypeError
from .. import tuning as tuned
from . import builtins as B

# shapes seen by one lowered block before the oldest plan is dropped (a loop over growing
# shapes keeps this many, not all)
MAX_PLANS = 64


class BlockCache:
    """The blocks one interpreter has seen: sites by node, lowered blocks by signature (a
    `zynbook.compile` program shares one across its runs)."""

    def __init__(self):
        self.sites: dict = {}           # id(node) -> BlockSite
        self.lowered: dict = {}         # (id(node), signature, scalar types, annotations)

    def site(self, node: A.Compute) -> "BlockSite":
        site = self.sites.get(id(node))
        if site is None or site.node is not node:
            site = self.sites[id(node)] = BlockSite(node)
        return site


class BlockSite:
    """What a compute block's syntax fixes: its input labels and spans, and the free names
    it reads."""

    __slots__ = ("node", "labels", "spans", "free")

    def __init__(self, node: A.Compute):
        labels = []
        for expr in node.inputs:
            label = dotted(expr)
            if label is None:
                raise ZynMLTypeError("compute() inputs are names (x) or fields (weights.w)",
                                     expr.span)
            labels.append(label)
        self.node = node
        self.labels = tuple(labels)
        self.spans = tuple(expr.span for expr in node.inputs)
        self.free = tuple(compute_free_names(node).items())


class LoweredBlock:
    """A block lowered for one signature, and its plans by shapes and given sizes."""

    __slots__ = ("node", "lowered", "dims", "plans")

    def __init__(self, node: A.Compute, lowered):
        self.node = node
        self.lowered = lowered
        self.dims = frozenset(lowered.kernel.dims)
        self.plans: dict = {}

    def plan(self, inputs: list, given: dict) -> "BlockPlan":
        if given:
            sizes_given = given_sizes(given, self.dims)
            key = (tuple([t._shape for t in inputs]), tuple(sizes_given.items()))
        else:
            sizes_given = {}
            key = (tuple([t._shape for t in inputs]), ())
        plan = self.plans.get(key)
        if plan is None:
            kernel = self.lowered.kernel
            shapes = {b.name: t.shape for b, t in zip(kernel.inputs, inputs)}
            plan = BlockPlan(self.lowered, solve(self.lowered, shapes, sizes_given), sizes_given)
            if len(self.plans) >= MAX_PLANS:
                self.plans.pop(next(iter(self.plans)))
            self.plans[key] = plan
        return plan


def given_sizes(given: dict, dims) -> dict:
    """The values in `given` of sizes among `dims` (those baked into compiled code)."""
    return {k: v for k, v in given.items() if k in dims}


class BlockPlan:
    """A lowered block with its sizes solved; `prepared(device)` is the device's plan."""

    __slots__ = ("lowered", "sizes", "sizes_given", "scalar_labels", "out_shape", "_prepared",
                 "_last", "phases")

    def __init__(self, lowered, sizes: dict, sizes_given: dict | None = None):
        kernel = lowered.kernel
        self.lowered = lowered
        self.sizes = sizes
        self.sizes_given = sizes_given or {}
        self.scalar_labels = tuple((s.name, lowered.scalar_labels.get(s.name, s.name))
                                   for s in kernel.scalars)
        cir.check_loop_steps(kernel, sizes)
        cir.check_loop_bounds(kernel, sizes)
        # (before the passes, which write a sum of a constant tile as a count)
        cir.check_tile_sizes(getattr(lowered, "before_passes", None) or kernel, sizes)
        self.out_shape = cir.output_shape(kernel, sizes)
        self._prepared: dict = {}
        self._last = None           # (device, tuning, plan) of the last `prepared`
        self.phases = None          # what runtime/lazy.py's `split` made of it

    def scalar_values(self, given: dict) -> dict:
        if not self.scalar_labels:
            return {}
        return {name: given[label] for name, label in self.scalar_labels}

    def prepared_plans(self) -> list:
        """The device plans made so far (every device and tuning)."""
        return list(self._prepared.values())

    def prepared(self, device, tuning=None):
        """The device's LaunchPlan for this kernel and these sizes (made on first use; tuned
        where the kernel or the session's `tuning` settings ask, zynbook/tuning.py)."""
        last = self._last           # a warm launch: the device and settings of the one before
        if last is not None and last[0] is device and last[1] is tuning:
            return last[2]
        key = (device.id, tuning)       # `config { autotune }` may pick another program
        plan = self._prepared.get(key)
        if plan is None or plan.device is not device:
            if getattr(device, "backend", "") in ("cpu", "c"):
                out = self.lowered.kernel.output
                B.check_host_memory(self.out_shape, out.dtype)
            plan = self._prepared[key] = tuned.prepare(device, self.lowered.kernel,
                                                       self.sizes, tuning)
        searching = isinstance(plan, tuned.TuningPlan)
        if searching and plan.plan is not None:     # searched: its winner from now on (a
            plan, searching = plan.plan, False      # plan a CUDA graph captures)
            self._prepared[key] = plan
        if not searching:
            self._last = (device, tuning, plan)
        return plan
