"""`@device([...]) @parallel(data|model)`: one compute block split across several devices.

A kernel is split along one of its loops, cut into contiguous, nearly equal chunks (sizes
that do not divide evenly give chunks one apart), one per device:

* `data` takes the outermost loop of the outer parallel nest that can be split (the batch);
  `model` the innermost one (the output features of a matmul, the heads of attention, the
  output channels of a convolution), or, under `config { model_split: "contraction" }`,
  the contraction loop of a kernel that accumulates `acc += ...` into `out` (a matmul's
  `k`).
* Every input axis the loop indexes is cut, inputs it does not index go whole to every
  device; each device runs the same kernel on its chunk, its sizes solved again from the
  chunk's shapes.
* Results: a loop that indexes `out` leaves the output *sharded* (runtime/sharded.py): its
  parts stay on their devices as one `ShardedTensor`, which the next `@parallel` block over
  the same devices takes without a copy. A loop that is reduced (the reduced loop of a
  `reduce` kernel, a contraction) leaves partial results that a collective combines on the
  devices: an all-reduce for reductions, a reduce-scatter (the result sharded by rows) for
  contractions. On CUDA devices these are NCCL collectives; on any other group they sum
  through the host, with the same results. A sum or product of halves (f16, bf16) keeps
  its partial results in f32 and is rounded once, after they are combined, as one device
  rounds its f32 sum once.

Kernels whose loop is used in any other way cannot be split and say why (a device error).
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses as dc
import threading
from dataclasses import dataclass

import numpy as np

from ..backends.registry import get_device
from ..compiler import cir
from ..errors import ZynMLDeviceError
from .sharded import (_NP_REDUCE, ShardedTensor, chunk_bounds, group_for, is_cuda, is_host,
                      move, recording, take)
from .tensor import Tensor

MODEL_SPLITS = ("features", "contraction")

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    """Threads that launch the chunks, kept between blocks (a GPU launch thread keeps its
    stream on each device)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = cf.ThreadPoolExecutor(max_workers=16, thread_name_prefix="zynml-parallel")
        return _POOL


@dataclass
class SplitPlan:
    var: str                    # the loop variable that is split
    stop: str                   # the size name the loop runs to
    axes: dict                  # {input name: axis that loop indexes}
    combine: str                # "concat" (out is sharded) or "reduce" (partials combined)
    out_axis: int | None        # concat: the axis of out the loop indexes
    op: str | None = None       # reduce: how partial results combine (+, max, ...)
    contraction: bool = False


def _outer_nest(kernel):
    nest = []
    body = kernel.body
    while len(body) == 1 and isinstance(body[0], cir.Loop) and body[0].parallel:
        nest.append(body[0])
        body = body[0].body
    if not nest:
        first = next((s for s in kernel.body if isinstance(s, cir.Loop) and s.parallel), None)
        nest = [first] if first is not None else []
    return nest


def _contraction_loop(nest):
    """The `k` loop of `var acc = 0; for k: acc = acc + term; out[...] = acc` at the bottom
    of the nest, or None."""
    if not nest:
        return None
    body = nest[-1].body
    if len(body) != 3:
        return None
    init, loop, store = body
    if not (isinstance(init, cir.Let) and init.mutable and isinstance(init.value, cir.Const)
            and init.value.value == 0):
        return None
    if not (isinstance(loop, cir.Loop) and not loop.parallel and len(loop.body) == 1):
        return None
    acc = init.name
    step = loop.body[0]
    if not (isinstance(step, cir.Assign) and step.name == acc and isinstance(step.value, cir.Bin)
            and step.value.op == "+" and isinstance(step.value.left, cir.Var)
            and step.value.left.name == acc):
        return None
    if any(isinstance(n, cir.Var) and n.name == acc for n in cir.walk(step.value.right)):
        return None
    if not (isinstance(store, cir.Store) and store.buffer == "out"
            and isinstance(store.value, cir.Var) and store.value.name == acc):
        return None
    return loop


_PLANS: dict = {}


def split_plan(kernel: cir.Kernel, mode: str, model_split: str = "features",
               bound_spans=None) -> SplitPlan:
    """How `@parallel(mode)` splits `kernel`, or a ZynMLDeviceError saying why it cannot
    (worked out once per kernel); `bound_spans`: {loop var: span of its stop}, where the
    lowering kept them, for an error at a loop's bound."""
    key = (id(kernel), mode, model_split)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    plan = _split_plan(kernel, mode, model_split, bound_spans or {})
    if len(_PLANS) > 512:
        _PLANS.clear()
    _PLANS[key] = (kernel, plan)
    return plan


def _split_plan(kernel: cir.Kernel, mode: str, model_split: str, spans) -> SplitPlan:
    nest = _outer_nest(kernel)
    if not nest:
        raise ZynMLDeviceError("@parallel splits a kernel's outer parallel loop across "
                               "devices; this kernel has none to split")
    if mode == "model" and model_split == "contraction" and kernel.kernel_type.kind != "reduce":
        loop = _contraction_loop(nest)
        if loop is None:
            raise ZynMLDeviceError("model_split \"contraction\" splits the loop that sums into "
                                   "`out` (var acc = 0.0; for k ...: acc += ...; out[...] = "
                                   "acc); this kernel has none")
        return _plan_for(kernel, nest, loop, mode, True, spans)
    # data: the outermost loop of the nest that can be split; model: the innermost one
    first_error = None
    for loop in (nest if mode == "data" else list(reversed(nest))):
        try:
            return _plan_for(kernel, nest, loop, mode, False, spans)
        except ZynMLDeviceError as err:
            first_error = first_error or err
    raise first_error


def _plan_for(kernel, nest, loop, mode, contraction, spans) -> SplitPlan:
    var = loop.var
    reduced = False
    if kernel.kernel_type.kind == "reduce":
        params = dict(kernel.kernel_type.params)
        op, red_axis = params.get("op"), params.get("axis")
        pos = next((k for k, n in enumerate(nest) if n is loop), -1)
        reduced = red_axis is None or pos == red_axis
        if reduced and op in ("argmin", "argmax"):
            raise _cannot(mode, var, f"the {op} is a position along it")
    if not (isinstance(loop.start, cir.Const) and loop.start.value == 0 and
            isinstance(loop.step, cir.Const) and loop.step.value == 1):
        raise ZynMLDeviceError(f"@parallel({mode}) splits the loop over `{var}`, which must run "
                               "0..n in steps of 1")
    if isinstance(loop.stop, cir.Const):
        # each device runs the kernel to its part's length, which a number written in it
        # cannot be
        raise _cannot(mode, var, f"it runs to {loop.stop.value}, a number written in the "
                      f"kernel; write a size or a host value there (`for {var} in 0..n`, "
                      "`n` bound by the axis it indexes or given by the host)",
                      spans.get(var))
    if not isinstance(loop.stop, cir.Var):          # (0..n - 2)
        raise _cannot(mode, var, f"it runs to `{cir.format_expr(loop.stop)}`, not to a size",
                      spans.get(var))
    stop = loop.stop.name
    stop_uses = sum(1 for n in cir.walk(kernel.body) if isinstance(n, cir.Var) and n.name == stop)
    if stop_uses != 1:
        raise _cannot(mode, var, f"its size `{stop}` is used elsewhere in the kernel")
    axes: dict = {}
    out_axis = None
    direct = 0
    loads: list = []
    for node in cir.walk(kernel.body):
        if not isinstance(node, (cir.Load, cir.Store)):
            continue
        loads.append(node)
        for k, idx in enumerate(node.index):
            if not (isinstance(idx, cir.Var) and idx.name == var):
                continue
            direct += 1
            if node.buffer == "out":
                if out_axis not in (None, k):
                    raise _cannot(mode, var, "it indexes two axes of out")
                out_axis = k
            elif axes.setdefault(node.buffer, k) != k:
                raise _cannot(mode, var, f"it indexes two axes of `{node.buffer}`")
    # positions restart at 0 in every chunk, so any other use would change the meaning
    uses = sum(1 for n in cir.walk(kernel.body) if isinstance(n, cir.Var) and n.name == var)
    if uses != direct:
        raise _cannot(mode, var, "it is used other than as an index of its own")
    for node in loads:
        axis = out_axis if node.buffer == "out" else axes.get(node.buffer)
        if axis is None:
            continue
        idx = node.index[axis] if axis < len(node.index) else None
        if not (isinstance(idx, cir.Var) and idx.name == var):
            raise _cannot(mode, var, f"`{node.buffer}` is also read along that axis at other "
                                     "positions")
    if not axes:
        raise _cannot(mode, var, "it indexes no input")
    input_names = {b.name for b in kernel.inputs}
    if any(a not in input_names and a != "out" for a in axes):
        raise _cannot(mode, var, "it indexes a shared array")
    if kernel.kernel_type.kind == "reduce":
        if reduced:
            return SplitPlan(var, stop, axes, "reduce", None, op)
        return SplitPlan(var, stop, axes, "concat", pos - (1 if red_axis < pos else 0))
    if contraction:
        if out_axis is not None:
            raise _cannot(mode, var, "it indexes out")
        return SplitPlan(var, stop, axes, "reduce", 0, "+", contraction=True)
    if out_axis is None:
        raise _cannot(mode, var, "it does not index out")
    return SplitPlan(var, stop, axes, "concat", out_axis)


def _cannot(mode, var, why, span=None):
    return ZynMLDeviceError(f"cannot split this kernel for @parallel({mode}) along `{var}`: "
                            f"{why}" + ("" if span else "; run it on one device"), span)


# ------------------------------------------------------------------------ inputs
def _shape_with(shape, axis, n):
    shape = list(shape)
    shape[axis] = n
    return tuple(shape)


def input_parts(t: Tensor, axis, work, ids=None) -> list:
    """Tensors of `t` for each (device, (lo, hi)) of `work` (`ids`: their device ids): the
    chunk lo:hi along `axis` (None: the whole tensor on every device). Shards already in
    place are used as they are."""
    ids = ids if ids is not None else [d.id for d, _ in work]
    if axis is None:
        if isinstance(t, ShardedTensor) and not t.remote:
            arrays = t.replicas(ids)
        else:
            src = get_device(t.device)
            arrays = [move(t.data, src, d) for d, _ in work]
        return [Tensor(a, d.id, t.shape, t.dtype) for a, (d, _) in zip(arrays, work)]
    bounds = [b for _, b in work]
    out = []
    if isinstance(t, ShardedTensor) and t.matches(axis, ids, bounds):
        return [t.shard(k) for k in range(len(work))]
    for d, (lo, hi) in work:
        arr = None
        if isinstance(t, ShardedTensor) and not t.remote and t.axis == axis:
            for dev, sarr, (slo, shi) in t.shards:
                if slo <= lo and hi <= shi:         # one shard covers the chunk
                    src = get_device(dev)
                    arr = move(take(sarr, axis, lo - slo, hi - slo, src), src, d)
                    break
        if arr is None:
            src = get_device(t.device)
            arr = move(take(t.data, axis, lo, hi, src), src, d)
        out.append(Tensor(arr, d.id, _shape_with(t.shape, axis, hi - lo), t.dtype))
    return out


# ------------------------------------------------------------------------ running
class SplitLayout:
    """How one block, with one set of solved sizes, is cut over one device list: the split
    plan, each device's chunk (bounds, solved sizes, BlockPlan), the output's shards or the
    partial results' rows, and the group that combines them. Worked out at the first run
    and kept: a block run again with the same shapes launches its chunks straight away,
    with no re-splitting of shapes, no re-solving and no plan look-ups."""

    __slots__ = ("lowered", "plan", "work", "ids", "chunk_sizes", "chunk_plans", "out_bounds",
                 "shape", "rows", "group", "queued", "half")

    def __init__(self, devices, lowered, inputs, sizes, given, mode, solve, model_split):
        kernel = lowered.kernel
        self.lowered = lowered
        self.plan = plan = split_plan(kernel, mode, model_split, lowered.bound_spans)
        length = int(sizes[plan.stop])
        work = [(d, b) for d, b in zip(devices, chunk_bounds(length, len(devices)))
                if b[1] > b[0]]
        self.work = work or [(devices[0], (0, 0))]
        self.ids = [d.id for d, _ in self.work]
        names = [b.name for b in kernel.inputs]
        chunk_given = {g: v for g, v in given.items() if g != plan.stop}
        self.chunk_sizes = []
        for _, (lo, hi) in self.work:
            shapes = {n: (t.shape if plan.axes.get(n) is None else
                          _shape_with(t.shape, plan.axes[n], hi - lo))
                      for n, t in zip(names, inputs)}
            self.chunk_sizes.append(_solve_once(kernel, solve, shapes, chunk_given))
        # the dtype partial results are rounded to once combined (None: they are not widened)
        self.half = widened_half(kernel, plan)
        chunks = lowered if self.half is None else \
            dc.replace(lowered, kernel=f32_partials(kernel, plan))
        self.chunk_plans = [chunk_plan(chunks, s) for s in self.chunk_sizes]
        self.group = group_for([d for d, _ in self.work])
        self.shape = cir.output_shape(kernel, sizes)
        self.out_bounds, self.rows = None, None
        if plan.combine == "concat":
            self.out_bounds, offset = [], 0
            for chunk in self.chunk_plans:
                n = chunk.out_shape[plan.out_axis]
                self.out_bounds.append((offset, offset + n))
                offset += n
            self.shape = _shape_with(self.shape, plan.out_axis, offset)
        elif plan.contraction and len(self.shape) >= 1 and len(self.work) > 1:
            self.rows = chunk_bounds(self.shape[0], len(self.work))
        self.queued = None          # unknown until every chunk's device plan is made

    def queues_without_waiting(self) -> bool:
        """Whether every chunk's launch returns as soon as its kernel is queued: each chunk's
        device is a CUDA GPU (a warm launch queues on the caller's stream) whose launch plan
        for the chunk, made on an earlier run, does not wait (a kernel that can fail at run
        time waits for itself and reads its error flag). The first run, which compiles, and
        every other device run the chunks on threads of their own."""
        if self.queued is not None:
            return self.queued
        for (dev, _), plan in zip(self.work, self.chunk_plans):
            if not is_cuda(dev):
                self.queued = False
                return False
            made = [p for p in plan.prepared_plans() if getattr(p, "device", None) is dev]
            if not made:
                return False                # not prepared yet: asked again next run
            if any(getattr(p, "checked", True) for p in made):
                self.queued = False
                return False
        self.queued = True
        return True


_LAYOUTS: dict = {}


def split_layout(devices, lowered, inputs, sizes, given, mode, solve, model_split):
    """The SplitLayout of this block, sizes and devices, made once (sizes and given are
    the block plan's own dicts, the same objects at every run with these shapes)."""
    key = (id(lowered), tuple(sizes.items()), tuple(given.items()),
           tuple(d.id for d in devices), mode, model_split)
    hit = _LAYOUTS.get(key)
    if hit is not None and hit.lowered is lowered:
        return hit
    layout = SplitLayout(devices, lowered, inputs, sizes, given, mode, solve, model_split)
    if len(_LAYOUTS) > 512:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout
    return layout


def run_split(devices, lowered, inputs, sizes, given, mode, launch, solve,
              model_split: str = "features", scalars=None, site=None):
    """Run `lowered` split across `devices` (Device objects).

    `inputs`: Tensors in kernel input order; `sizes`: the whole kernel's solved sizes;
    `given`: sizes the host gave; `launch(device, tensors, sizes, plan)` runs one chunk (its
    BlockPlan given) and returns its output (a device array, or a Python scalar for a scalar
    output); `solve(shapes, given)` solves a chunk's sizes. Returns a ShardedTensor, a
    Tensor or a scalar. Inside a traced pipeline call the run is logged (a `SplitRun`, with
    the kernel's `scalars` and the block's `site` (span, source) for its errors)."""
    layout = split_layout(devices, lowered, inputs, sizes, given, mode, solve, model_split)
    plan, work = layout.plan, layout.work
    names = [b.name for b in lowered.kernel.inputs]
    per_input = [input_parts(t, plan.axes.get(n), work, layout.ids)
                 for t, n in zip(inputs, names)]
    chunks = [(dev, [p[k] for p in per_input], layout.chunk_sizes[k], layout.chunk_plans[k])
              for k, (dev, _) in enumerate(work)]
    if layout.queues_without_waiting():
        # each launch returns once its kernel is queued: the devices run at the same time
        # with no hand-off between host threads
        outs = [launch(*c) for c in chunks]
    else:
        # the first chunk runs on this thread, the others at the same time on kept threads
        rest = [_pool().submit(launch, *c) for c in chunks[1:]]
        try:
            first = launch(*chunks[0])
        finally:
            cf.wait(rest)
        outs = [first] + [f.result() for f in rest]
    result = _combined(layout, outs)
    log = recording()
    if log is not None:
        log.append(SplitRun(layout, inputs, per_input, result, scalars, site))
    return result


class SplitRun:
    """One run of a split block inside a traced pipeline call (runtime/traces.py): its
    layout, its input tensors and the per-device tensors each became, and its result."""
    __slots__ = ("layout", "inputs", "per_input", "result", "scalars", "site")

    def __init__(self, layout, inputs, per_input, result, scalars, site):
        self.layout, self.inputs, self.per_input = layout, list(inputs), per_input
        self.result, self.scalars, self.site = result, scalars, site


def widened_half(kernel, plan):
    """The half dtype (f16, bf16) of a kernel whose partial results are sums or products of
    halves, else None. Such partials are kept in f32 and rounded once combined: one device
    sums halves in f32 and rounds once, where partials rounded first made an f16 sum past
    65504 inf, and a bf16 sum of bf16 partials a value no bf16 holds."""
    dtype = kernel.output.dtype
    if plan.combine == "reduce" and plan.op in ("+", "*") and dtype in ("f16", "bf16"):
        return dtype
    return None


def f32_partials(kernel, plan):
    """`kernel` storing its partial result in f32: each value it yields widened to f32, or
    a contraction's accumulator (`var acc = 0; for k: acc = acc + term; out[...] = acc`, a
    half `var` rounded where it is stored) an f32 one. A term that multiplies two halves
    multiplies their f32 values, exact, as one device takes such a product; any other term
    is its half value widened, as one device adds it."""
    from ..compiler.passes.simplify import map_stmts
    acc = _outer_nest(kernel)[-1].body[0].name if plan.contraction else None

    def widened(s):
        if isinstance(s, cir.Yield):
            return dc.replace(s, value=cir.Cast(s.value, _F32))
        if isinstance(s, cir.Let) and s.name == acc:
            return dc.replace(s, value=cir.Const(0.0, _F32), ty=_F32)
        if isinstance(s, cir.Assign) and s.name == acc:
            term = s.value.right
            term = cir.Bin("*", cir.Cast(term.left, _F32), cir.Cast(term.right, _F32), _F32) \
                if isinstance(term, cir.Bin) and term.op == "*" else cir.Cast(term, _F32)
            return dc.replace(s, value=cir.Bin("+", cir.Var(acc, _F32), term, _F32))
        if isinstance(s, cir.Store) and isinstance(s.value, cir.Var) and s.value.name == acc:
            return dc.replace(s, value=cir.Var(acc, _F32))
        return s
    return dc.replace(kernel, body=map_stmts(kernel.body, widened),
                      output=dc.replace(kernel.output, dtype="f32"))


_F32 = cir.Ty("f32")


def rounded_half(array, dtype):
    """An f32 array (numpy or CuPy) rounded to `dtype` (f16; or bf16, held as f32)."""
    from .bf16 import rounded
    with np.errstate(over="ignore"):       # (past 65504 is inf, as on one device)
        return rounded(array) if dtype == "bf16" else array.astype("float16")


def _rounded(array, device, dtype):
    """An f32 array of `device` rounded to `dtype` there."""
    if is_cuda(device):
        import cupy
        with cupy.cuda.Device(device.index):
            return rounded_half(array, dtype)
    if is_host(device):
        return rounded_half(np.asarray(array), dtype)
    return device.from_host(np.ascontiguousarray(rounded_half(device.to_host(array), dtype)))


def _combined(layout, outs):
    """The chunks' outputs as the block's result: sharded, or partial results combined."""
    plan, work = layout.plan, layout.work
    group = layout.group
    dtype = layout.lowered.kernel.output.dtype
    if plan.combine == "concat":
        shards = [(dev.id, out, b) for (dev, _), out, b in zip(work, outs, layout.out_bounds)]
        return ShardedTensor(shards, plan.out_axis, layout.shape, dtype, group)
    # partial results combined by plan.op (in f32 where they are widened halves, then
    # rounded once)
    half = layout.half
    if isinstance(outs[0], (int, float, bool, np.generic)):      # scalar outputs
        value = combine_scalars(plan.op, outs, "f32" if half else dtype)
        return value if half is None else rounded_half(np.float32(value), half).item()
    shape = layout.shape
    if len(outs) == 1:
        parts = outs
    elif layout.rows is not None:
        parts = group.reduce_scatter(outs, plan.op, 0, layout.rows)
    else:
        parts = group.all_reduce(outs, plan.op)[:1]
    devices = [d for d, _ in work]
    if half is not None:
        parts = [_rounded(a, d, half) for a, d in zip(parts, devices)]
    if len(outs) > 1 and layout.rows is not None:
        shards = [(d.id, a, b) for d, a, b in zip(devices, parts, layout.rows) if b[1] > b[0]]
        return ShardedTensor(shards, 0, shape, dtype, group)
    return Tensor(parts[0], work[0][0].id, shape, dtype, committed=True)


_CHUNK_PLANS: dict = {}


def chunk_plan(lowered, sizes: dict):
    """The BlockPlan of a chunk of `lowered` with `sizes`, made once: the devices' launch
    plans (a CUDA chunk's compiled program among them) are kept with it, so a block run
    again launches its chunks as a single-device block does, without preparing anew."""
    from .plans import BlockPlan
    key = (id(lowered), tuple(sorted(sizes.items())))
    hit = _CHUNK_PLANS.get(key)
    if hit is not None and hit[0] is lowered:
        return hit[1]
    plan = BlockPlan(lowered, dict(sizes))
    if len(_CHUNK_PLANS) > 256:
        _CHUNK_PLANS.clear()
    _CHUNK_PLANS[key] = (lowered, plan)
    return plan


_SOLVED: dict = {}


def _solve_once(kernel, solve, shapes, given):
    """The sizes of a chunk, solved once per kernel, shapes and given sizes."""
    key = (id(kernel), tuple(sorted(shapes.items())), tuple(sorted(given.items())))
    hit = _SOLVED.get(key)
    if hit is not None and hit[0] is kernel:
        return dict(hit[1])
    sizes = solve(shapes, given)
    if len(_SOLVED) > 1024:
        _SOLVED.clear()
    _SOLVED[key] = (kernel, dict(sizes))
    return sizes


def combine_scalars(op, values, dtype: str):
    """Partial results of a reduction to one value, combined by `op` in the kernel's output
    dtype, as one device accumulates them: an i32 or u32 sum or product wraps, max and min
    keep NaN. A Python number, as a one-device launch gives."""
    from ..compiler.types import NUMPY_NAMES
    fn = _NP_REDUCE.get(op)
    if fn is None:
        raise ZynMLDeviceError(f"no collective combines partial results with `{op}`")
    acc = np.asarray([values[0]], NUMPY_NAMES[dtype])
    for v in values[1:]:
        acc = fn(acc, np.asarray([v], acc.dtype))
    return acc[0].item()


# ------------------------------------------------------------------------ config
def configure(session, key: str, value, span=None):
    """`config { cluster: "tcp://host:8786" }` (or "local"): the Dask scheduler that
    `@device("dask")` uses; `config { model_split: "contraction" }` (or "features"): which
    loop `@parallel(model)` splits."""
    from ..errors import ZynMLTypeError
    options = getattr(session, "parallel_options", None)
    if options is None:
        options = session.parallel_options = {}
    if key == "model_split":
        if value not in MODEL_SPLITS:
            raise ZynMLTypeError(f"model_split is \"features\" or \"contraction\", not {value!r}",
                                 span)
    elif key == "cluster":
        if not isinstance(value, str) or not value:
            raise ZynMLTypeError("cluster takes a scheduler address such as "
                                 "\"tcp://scheduler:8786\", or \"local\"", span)
    options[key] = value
