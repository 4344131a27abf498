"""Fusion of compute blocks: a producer and a consumer that reads its result, as one kernel.

The host interpreter records compute blocks lazily (runtime/lazy.py) and offers each producer
whose result only one later block reads; `fuse` returns the CIR kernel computing the
consumer's result without writing the intermediate, or the reason it will not. Four forms,
all exact in the CIR: every element is computed by the same operations in the same order as
unfused (a rounding to the intermediate's dtype is kept as a cast), and no reduction is
reordered (a device may still schedule the fused kernel's reductions in another order than
the unfused one's: the result is then equal within the dtype's tolerance).

* inline: an elementwise producer (a loop nest storing `out[loop vars] = f(...)`) is
  substituted for every element read of its result in the consumer, whatever the consumer
  is (elementwise, reduce, a row kernel). The consumer's structure, kernel type and
  schedule stay, so every device's schedules see the kernel they saw before.
* epilogue: an elementwise consumer reading the result at its own position is applied where
  the producer stores each element (a row kernel such as softmax, or a matmul, whose GEMM
  schedule takes it as its epilogue: `recognise.contraction` must still accept the body).
* row epilogue: an elementwise consumer over more axes, reading the result at some of its
  loop positions (`out[i, j] = x[i, j] - mean[i]`), is applied where the producer stores
  each element: the stored value kept in a local, the consumer's other axes a loop there,
  so a per-row statistic and its use are one row kernel.
* one-value epilogue: the row epilogue with no row axes. A reduction to one value that an
  elementwise consumer reads by name (a scalar argument still to be computed: `x[i] / t`,
  `Block.scalar_args`) runs first in the consumer's kernel: the loops it yields in, in the
  same order, accumulate into a local (a `yield` becomes `acc = acc op value`), the value
  rounded to the result's dtype as its store would be and to the scalar's as its argument
  would be, then the consumer's loop nest reads it. One block of a GPU runs the whole
  kernel, so past SMALL elements (reduced or written) the two launch apart.

Sizes are concrete here (the blocks' plans solved them), so the two blocks' size names are
joined by value: equal names with equal values are one size, others are renamed.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from math import prod

from . import cir
from .passes.bounds import Facts
from .passes.loops import trip_count
from .passes.pipeline import run_passes
from .passes.recognise import NoMatch, contraction, free_vars, loads, substitute

_I32 = cir.Ty("i32")
# a row epilogue runs the second block's elements over one block (GPU) or chunk (CPU) per
# row of the first: with fewer rows than a GPU has multiprocessors, and more elements than
# one launch's overhead costs, they run faster launched apart (a one-value epilogue is one
# row: past SMALL elements, launched apart)
FEW_ROWS, SMALL = 128, 1 << 17
# reductions whose one value a one-value epilogue computes as a local: op -> its identity
_ACCUMULATED = {"+": 0.0, "max": float("-inf"), "min": float("inf")}


@dataclass(frozen=True)
class Block:
    """A kernel with everything one launch of it needs, fused or not."""
    kernel: cir.Kernel
    sizes: dict            # every size name the kernel uses -> its value
    scalars: dict          # scalar argument name -> value
    args: tuple            # per kernel input: a key for the value it reads (equal keys, equal values)
    origins: tuple         # (kernel name, first line) of the blocks it is made of, in order
    # the position in `origins` of the block whose statements the kernel keeps: code moved
    # in cannot fail, so every error the kernel reports is that block's (its line, its text)
    host: int = 0
    # a name the fused kernel gave an input, scalar or size of a block (`x_2`, the moved
    # block's own `x`) -> (its name in that block, the block's line), for errors (user_names)
    renamed: dict = field(default_factory=dict, compare=False)
    # scalar argument name -> a key for the block whose one value it is, where that value is
    # not computed yet (a reduction's, read by name: `x[i] / t`); the one-value epilogue
    # fuses that block in
    scalar_args: dict = field(default_factory=dict)


def user_names(message: str, renamed: dict) -> str:
    """`message`, about a fused kernel, with the names fusion gave (`x_2`) written as the
    user did, with the line of their block: "`x` of line 3"."""
    def named(m):
        if m[1] not in renamed:
            return m[0]
        name, line = renamed[m[1]]
        return f"`{name}` of line {line}"
    return re.sub(r"`([^`]+)`", named, message) if renamed else message


def fuse(producer: Block, consumer: Block, key) -> Block | str:
    """The block computing `consumer` (whose inputs with arg `key` are `producer`'s result)
    with `producer` fused in, or why not (a sentence)."""
    if key in consumer.scalar_args.values():
        return _value_epilogue(producer, consumer, key)
    if key not in consumer.args:
        return "the second block does not read the first one's result"
    inline = _inline(producer, consumer, key)
    if isinstance(inline, Block):
        return inline
    epilogue = _epilogue(producer, consumer, key)
    if isinstance(epilogue, Block):
        return epilogue
    across = _row_epilogue(producer, consumer, key)
    if isinstance(across, Block):
        return across
    return f"{inline}; {epilogue}; {across}"


# ------------------------------------------------------------------------ the forms


def _inline(producer: Block, consumer: Block, key) -> Block | str:
    nest = _elementwise_nest(producer.kernel)
    if isinstance(nest, str):
        return f"the first block is not inlined: {nest}"
    if _hinted(producer.kernel):
        return "the first block is not inlined: its annotations would be dropped"
    loop_vars, value = nest
    if not _cannot_fail(producer, value):
        return "the first block is not inlined: it could fail, and its error must name its line"
    bufs = {b.name for b, a in zip(consumer.kernel.inputs, consumer.args) if a == key}
    rank = len(producer.kernel.output.shape)
    for ld in loads(consumer.kernel.body):
        if ld.buffer in bufs and (ld.ty.shape or len(ld.index) != rank or
                                  any(isinstance(i, cir.Span) for i in ld.index)):
            return "the first block is not inlined: the second reads rows or tiles of its result"
    if not _reads_in_range(consumer.kernel, bufs, _shape_of(producer.kernel.output,
                                                             producer.sizes), consumer.sizes):
        return "the first block is not inlined: the second reads its result where no loop " \
               "keeps the position in range"
    names = _Names(consumer, producer)
    moved = names.expr(value)
    out_dtype = producer.kernel.output.dtype

    def replace(e):
        if isinstance(e, cir.Load) and e.buffer in bufs:
            return _stored(substitute(moved, dict(zip(loop_vars, e.index))), out_dtype)
        return None

    body = _map(consumer.kernel.body, replace)
    host = consumer.kernel
    keep = [(b, a) for b, a in zip(host.inputs, consumer.args) if a != key]
    return _finish(consumer, names, body, keep, host.output, "inlined")


def _movable(consumer: Block, form: str):
    """(loop variables, stored value) of an elementwise consumer whose code may move into
    the producer as `form`, or why not (a sentence)."""
    nest = _elementwise_nest(consumer.kernel)
    if isinstance(nest, str):
        return f"the second block is no {form}: {nest}"
    if _hinted(consumer.kernel):
        return f"the second block is no {form}: its annotations would be dropped"
    if not _cannot_fail(consumer, nest[1]):
        return f"the second block is no {form}: it could fail, and its error must name its line"
    return nest


def _epilogue(producer: Block, consumer: Block, key) -> Block | str:
    nest = _movable(consumer, "epilogue")
    if isinstance(nest, str):
        return nest
    loop_vars, value = nest
    pk, ck = producer.kernel, consumer.kernel
    if _shape_of(pk.output, producer.sizes) != _shape_of(ck.output, consumer.sizes):
        return "the second block is no epilogue: its output's shape is not the first one's"
    bufs = {b.name for b, a in zip(ck.inputs, consumer.args) if a == key}
    for ld in loads(value):
        if ld.buffer in bufs and tuple(_var_name(i) for i in ld.index) != loop_vars:
            return "the second block is no epilogue: it reads the first one's result " \
                   "away from its own position"
    problem = _stores_once(pk, producer.sizes)
    if problem:
        return f"the second block is no epilogue: {problem}"
    names = _Names(producer, consumer, skip=bufs)
    moved = names.expr(value)

    def replace(s):
        if isinstance(s, cir.Store) and s.buffer == pk.output.name:
            stored = _stored(s.value, pk.output.dtype)
            env = dict(zip(loop_vars, s.index))
            applied = _map(substitute(moved, env), lambda e: stored if isinstance(e, cir.Load)
                           and e.buffer in bufs else None)
            return dataclasses.replace(s, value=_cast(applied, ck.output.dtype))
        return None

    body = _map(pk.body, replace)
    output = dataclasses.replace(pk.output, dtype=ck.output.dtype)
    return _finish(producer, names, body, list(zip(pk.inputs, producer.args)), output,
                   "epilogue")


def _row_epilogue(producer: Block, consumer: Block, key) -> Block | str:
    """An elementwise consumer over more axes than the producer's result, reading it at
    some of its loop positions (a row's sum or maximum used along the row: `out[i, j] =
    x[i, j] / s[i]`), applied where the producer stores each element: the stored value is
    kept in a local and the consumer's other axes are a loop there (a row kernel)."""
    nest = _movable(consumer, "row epilogue")
    if isinstance(nest, str):
        return nest
    loop_vars, value = nest
    pk, ck = producer.kernel, consumer.kernel
    bufs = {b.name for b, a in zip(ck.inputs, consumer.args) if a == key}
    at = {tuple(_var_name(i) for i in ld.index) for ld in loads(value) if ld.buffer in bufs}
    if len(at) != 1 or None in next(iter(at)) or len(set(next(iter(at)))) != len(next(iter(at))):
        return "the second block is no row epilogue: it reads the first one's result other " \
               "than at one set of its own loop positions"
    at = at.pop()
    rest = [v for v in loop_vars if v not in at]
    out_extents = dict(zip(loop_vars, _shape_of(ck.output, consumer.sizes)))
    if not rest or [out_extents[v] for v in at] != list(_shape_of(pk.output, producer.sizes)):
        return "the second block is no row epilogue: it does not read the first one's result " \
               "along whole axes of its own"
    rows, elements = prod(_shape_of(pk.output, producer.sizes)), prod(out_extents.values())
    if rows < FEW_ROWS and elements > SMALL:
        return (f"the second block is no row epilogue: its {elements} elements would be spread "
                f"over the first one's {rows} rows (apart, they spread over the whole device)")
    problem = _stores_once(pk, producer.sizes)
    if problem:
        return f"the second block is no row epilogue: {problem}"
    names = _Names(producer, consumer, skip=bufs)
    moved = names.expr(value)
    taken = _all_names(pk) | set(names.map.values()) | {b.name for b in names.new_inputs}
    fresh = {v: _fresh(v, taken) for v in rest}
    stops = {lp.var: names.expr(lp.stop) for lp in _nest_loops(ck)}
    held = _fresh("row", taken)

    def replace(st):
        if not (isinstance(st, cir.Store) and st.buffer == pk.output.name):
            return None
        row = cir.Let(held, _stored(st.value, pk.output.dtype), False, st.line)
        env = {**dict(zip(at, st.index)), **{v: cir.Var(fresh[v], _I32) for v in rest}}
        applied = _map(substitute(moved, env), lambda e: cir.Var(held, row.value.ty) if
                       isinstance(e, cir.Load) and e.buffer in bufs else None)
        inner = cir.Store(pk.output.name, tuple(env[v] for v in loop_vars),
                          _cast(applied, ck.output.dtype), st.line)
        for v in reversed(rest):
            inner = cir.Loop(fresh[v], cir.Const(0, _I32), stops[v], cir.Const(1, _I32), (inner,),
                             line=st.line)
        return [row, inner]

    body = _splice(pk.body, replace)
    output = dataclasses.replace(pk.output, dtype=ck.output.dtype,
                                 shape=tuple(names.dim(d) for d in ck.output.shape))
    return _finish(producer, names, body, list(zip(pk.inputs, producer.args)), output,
                   "epilogue")


def _value_epilogue(producer: Block, consumer: Block, key) -> Block | str:
    """The row epilogue with no row axes: a reduction to one value (`@kernel reduce(+)`,
    `max`, `min` of floats) that an elementwise consumer reads by name, computed first in
    the consumer's kernel. The reduction's loops accumulate into a local in the order they
    yield; the consumer's scalar becomes a `let` of that local, rounded to the reduction's
    dtype (its store) and to the scalar's (its argument); the consumer's loop nest follows.
    The consumer's statements stay as they were, so its errors are its own."""
    form = "one-value epilogue"
    pk, ck = producer.kernel, consumer.kernel
    op = pk.kernel_type.param("op", "+")
    yields = [n for n in cir.walk(pk.body) if isinstance(n, cir.Yield)]
    if pk.kernel_type.kind != "reduce" or pk.output.shape or not yields:
        return f"the second block is no {form}: the first one's value is not a reduction's"
    dtypes = {y.value.ty.dtype for y in yields}
    if op not in _ACCUMULATED or len(dtypes) != 1 or any(y.index is not None for y in yields) \
            or not dtypes <= set(cir.FLOAT_DTYPES) or pk.output.dtype not in cir.FLOAT_DTYPES:
        return f"the second block is no {form}: the first one reduces by {op} other than " \
               "a sum, maximum or minimum of floats"
    if any(isinstance(n, (cir.Store, cir.Atomic, cir.SharedAlloc, cir.Barrier)) or
           isinstance(n, cir.Expr) and n.ty.shape for n in cir.walk(pk.body)):
        return f"the second block is no {form}: the first one does more than yield numbers"
    if _hinted(pk):
        return f"the second block is no {form}: the first one's annotations would be dropped"
    if not _cannot_fail(producer, pk.body):
        return f"the second block is no {form}: the first one could fail, and its error " \
               "must name its line"
    # the consumer's loop nest, after what computes its other one values where they are
    # fused in already (statements that write nothing: `(x[i] - lo) / (hi - lo)`)
    lead = 0
    while lead < len(ck.body) - 1 and not any(
            isinstance(n, (cir.Store, cir.Atomic, cir.Yield, cir.SharedAlloc, cir.Barrier))
            for n in cir.walk(ck.body[lead])):
        lead += 1
    nest = _elementwise_nest(dataclasses.replace(ck, body=ck.body[lead:]))
    if isinstance(nest, str):
        return f"the second block is no {form}: {nest}"
    if _hinted(ck):
        return f"the second block is no {form}: its annotations would be dropped"
    reduced = _iterations(pk.body, producer.sizes)
    before = _iterations(ck.body[:lead], consumer.sizes)
    if reduced is None or before is None:
        return f"the second block is no {form}: the first one's loops are not of fixed lengths"
    elements = prod(_shape_of(ck.output, consumer.sizes))
    if max(reduced + before, elements) > SMALL:
        return (f"the second block is no {form}: {reduced + before} values reduced and "
                f"{elements} elements written would run on one block (apart, they spread "
                "over the whole device)")
    which = {n for n, k in consumer.scalar_args.items() if k == key}
    host = dataclasses.replace(
        consumer, kernel=dataclasses.replace(
            ck, kernel_type=cir.KernelType("custom"),
            scalars=tuple(s for s in ck.scalars if s.name not in which)),
        scalars={n: v for n, v in consumer.scalars.items() if n not in which},
        scalar_args={n: k for n, k in consumer.scalar_args.items() if n not in which})
    names = _Names(host, producer)
    taken = _all_names(ck) | set(names.map.values()) | {b.name for b in names.new_inputs}
    rename = dict(names.map)
    for n in cir.walk(pk.body):
        if isinstance(n, (cir.Loop, cir.Let)):
            bound = n.var if isinstance(n, cir.Loop) else n.name
            if bound not in rename:
                rename[bound] = _fresh(bound, taken)
    acc = _fresh("acc", taken)
    (ydt,) = dtypes
    acc_ty = cir.Ty("f32" if ydt in ("f16", "bf16") else ydt)
    line = yields[0].line

    def accumulate(s):
        if not isinstance(s, cir.Yield):
            return None
        value = _cast(s.value, acc_ty.dtype)
        total = cir.Bin(op, cir.Var(acc, acc_ty), value, acc_ty) if op == "+" else \
            cir.Call(op, (cir.Var(acc, acc_ty), value), acc_ty)
        return cir.Assign(acc, total, s.line)

    def read(e):
        if isinstance(e, cir.Load) and e.buffer in names.buffers:
            return dataclasses.replace(e, buffer=names.buffers[e.buffer], index=_map(e.index, read))
        return None

    moved = _serial(_map(_map(_renamed(pk.body, rename), accumulate), read))
    value = _stored(cir.Var(acc, acc_ty), pk.output.dtype)
    lets = tuple(cir.Let(s.name, _cast(value, s.dtype), False, line)
                 for s in ck.scalars if s.name in which)
    body = (cir.Let(acc, cir.Const(_ACCUMULATED[op], acc_ty), True, line),) + moved + lets + \
        ck.body
    return _finish(host, names, body, list(zip(host.kernel.inputs, host.args)), ck.output,
                   "one-value epilogue")


def _iterations(body, sizes: dict):
    """The most times the innermost statements of `body` run (its loops' iterations, the
    values a reduction's body yields), or None where a loop's length is not fixed by the
    sizes."""
    total = 0
    for s in body:
        if isinstance(s, cir.If):
            inner = [_iterations(s.then, sizes), _iterations(s.orelse, sizes)]
            if None in inner:
                return None
            total += max(inner)
        elif isinstance(s, cir.Loop):
            n, inner = trip_count(s, sizes), _iterations(s.body, sizes)
            if n is None or inner is None:
                return None
            total += n * max(inner, 1)
    return total


def _finish(host: Block, names: "_Names", body, keep: list, output: cir.Buffer,
            form: str) -> Block | str:
    """The fused block: the host's kernel with `body`, its kept inputs and the moved ones."""
    k = host.kernel
    inputs = [b for b, _ in keep] + names.new_inputs
    args = tuple(a for _, a in keep) + tuple(names.new_args)
    scalars = tuple(k.scalars) + tuple(names.new_scalars)
    sizes = {**host.sizes, **names.new_sizes}
    # the host's sizes stay (types of its tile values name them); the moved block's only where used
    used = (_size_names(body, inputs, output) | set(k.dims)) & set(sizes)
    origins = host.origins + names.other.origins if form == "epilogue" else \
        names.other.origins + host.origins
    kept = host.host if form == "epilogue" else len(names.other.origins) + host.host
    kernel = dataclasses.replace(
        k, name="fused_" + "_".join(f"l{line}" for _, line in origins),
        inputs=tuple(inputs), output=output, dims=tuple(sorted(used)), scalars=scalars,
        body=body)
    try:
        kernel = run_passes(kernel)
    except Exception as exc:        # the fused body breaks a rule the host's kind needs
        return f"the fused body is refused ({exc})"
    if not isinstance(contraction(k), NoMatch) and isinstance(contraction(kernel), NoMatch):
        return "the GEMM schedule would not take the fused body"
    values = {**host.scalars, **names.new_scalar_values}
    pending = {**{names.map.get(n, n): k for n, k in names.other.scalar_args.items()},
               **host.scalar_args}
    return Block(kernel, {n: sizes[n] for n in used},
                 {s.name: values[s.name] for s in scalars}, args, origins, kept,
                 {**host.renamed, **names.renamed},
                 {s.name: pending[s.name] for s in scalars if s.name in pending})


# ------------------------------------------------------------------- names of two blocks


class _Names:
    """The moved block's size, scalar and input names, renamed into the host's namespace:
    a name the host has with the same value (an input: the same key) is shared."""

    def __init__(self, host: Block, other: Block, skip=()):
        self.other = other
        hk, ok = host.kernel, other.kernel
        taken = _all_names(hk)
        self.map: dict = {}
        self.renamed: dict = {}     # Block.renamed of the names given here
        self.new_sizes, self.new_scalars, self.new_scalar_values = {}, [], {}
        self.new_inputs, self.new_args = [], []
        for d in ok.dims:
            if d in hk.dims and host.sizes.get(d) == other.sizes.get(d):
                continue
            self.map[d] = new = self._fresh(d, taken)
            self.new_sizes[new] = other.sizes[d]
        host_scalars = {s.name: s for s in hk.scalars}
        for s in ok.scalars:
            mine = host_scalars.get(s.name)
            if mine is not None and mine.dtype == s.dtype and \
                    host.scalars.get(s.name) == other.scalars.get(s.name):
                continue
            new = self.map[s.name] = self._fresh(s.name, taken)
            self.new_scalars.append(cir.Scalar(new, s.dtype))
            self.new_scalar_values[new] = other.scalars[s.name]
        self.buffers: dict = {}
        host_by_key = {(a, b.dtype): b.name for b, a in zip(hk.inputs, host.args)}
        for b, a in zip(ok.inputs, other.args):
            if b.name in skip:
                continue
            shared = host_by_key.get((a, b.dtype))
            if shared is not None:
                self.buffers[b.name] = shared
                continue
            new = self.buffers[b.name] = self._fresh(b.name, taken, b.name.replace(".", "_"))
            host_by_key[(a, b.dtype)] = new
            self.new_inputs.append(dataclasses.replace(
                b, name=new, shape=tuple(self.dim(d) for d in b.shape)))
            self.new_args.append(a)

    def _fresh(self, name: str, taken: set, base: str | None = None) -> str:
        """A new name (from `base`, else `name`) for the moved block's `name`, remembered
        with the user's name."""
        new = _fresh(base or name, taken)
        other = self.other
        self.renamed[new] = other.renamed.get(name, (name, other.kernel.first_line))
        return new

    def dim(self, d):
        if isinstance(d, str):
            return self.map.get(d, d)
        return self.expr(d) if isinstance(d, cir.Expr) else d

    def expr(self, e):
        e = substitute(e, {old: _retyped(e, old, new) for old, new in self.map.items()})
        return _map(e, lambda n: dataclasses.replace(
            n, buffer=self.buffers[n.buffer], index=self._index(n.index))
            if isinstance(n, cir.Load) and n.buffer in self.buffers else None)

    def _index(self, index):
        return tuple(self.expr(i) for i in index)


def _retyped(e, old: str, new: str):
    """A Var named `new` with the type the moved expression gives `old`."""
    for n in cir.walk(e):
        if isinstance(n, cir.Var) and n.name == old:
            return cir.Var(new, n.ty)
    return cir.Var(new, cir.Ty("i32"))


# ---------------------------------------------------------------------------- analyses


def _elementwise_nest(k: cir.Kernel):
    """(loop variables, stored value) of `for i0..: for i1..: out[i0, i1, ..] = value`
    (lets inlined), or why the kernel is not of that form."""
    loops = _nest_loops(k)
    body = loops[-1].body if loops else ()
    if not body:
        return "it is not one loop nest"
    env: dict = {}
    *lets, store = body
    for s in lets:
        if not (isinstance(s, cir.Let) and not s.mutable and not s.value.ty.shape):
            return "its loop nest does more than store one value"
        env[s.name] = substitute(s.value, env)
    names = tuple(lp.var for lp in loops)
    if not (isinstance(store, cir.Store) and store.buffer == k.output.name and
            tuple(_var_name(i) for i in store.index) == names and
            len(names) == len(k.output.shape)):
        return "it does not store each output element at its loop position"
    for lp, d in zip(loops, k.output.shape):
        if not (_is_int(lp.start, 0) and _is_int(lp.step, 1) and _same_dim(lp.stop, d)):
            return "its loops do not run over the output's axes"
    value = substitute(store.value, env)
    if value.ty.shape or any(isinstance(n, (cir.Dot, cir.Reduce, cir.Span)) for n in
                             cir.walk(value)) or \
            any(ld.buffer == k.output.name or ld.ty.shape for ld in loads(value)):
        return "its stored value is not a function of input elements"
    return names, value


def _cannot_fail(block: Block, value) -> bool:
    """Whether `value` (of the block's loop nest) provably reads only in range and divides
    no integer: moved into another block, a failure would be reported at that one's line."""
    k = block.kernel
    facts = Facts(k.body, block.sizes, k.dims)
    shapes = {b.name: b.shape for b in k.inputs}
    for n in cir.walk(value):
        if isinstance(n, cir.Load) and not all(
                facts.index_in_range(i, d) for i, d in zip(n.index, shapes[n.buffer])):
            return False
        if isinstance(n, cir.Bin) and n.op in ("/", "%") and n.ty.dtype not in cir.FLOAT_DTYPES:
            return False
    return True


def _stores_once(k: cir.Kernel, sizes: dict) -> str:
    """Why the kernel's output is not written, every element, by plain stores at loop
    positions outside any condition (so an epilogue at the stores sees the final values)."""
    out = k.output.name
    for n in cir.walk(k.body):
        if isinstance(n, cir.Yield):
            return "the first block's result is a reduction's"
        if isinstance(n, cir.Atomic) and n.buffer == out or \
                isinstance(n, cir.Load) and n.buffer == out:
            return "the first block reads or accumulates into its output"
    extents = [cir.eval_dim(d, sizes) for d in k.output.shape]
    found = [_covers(s, loops, extents, sizes) and not guarded
             for s, loops, guarded in cir.stores_into(k.body, out)]
    if not found or not all(found):
        return "the first block does not store every output element once, unconditionally"
    return ""


def _covers(s: cir.Store, loops: dict, extents: list, sizes: dict) -> bool:
    """Whether `s`, inside `loops`, stores every element: its index is loops over the whole
    axes, and every other loop around it runs at least once (`for t in 0..k` with k = 0
    stores nothing)."""
    names = [_var_name(i) for i in s.index]
    if len(names) != len(extents) or len(set(names)) != len(names):
        return False
    return all(_loop_stop(loops.get(name), sizes) == extent and _is_int(loops[name].step, 1)
               for name, extent in zip(names, extents)) and \
        all(_runs(lp, sizes) for name, lp in loops.items() if name not in names)


def _runs(lp, sizes: dict) -> bool:
    """Whether loop `lp` runs at least once wherever it is met (its bounds fixed by sizes)."""
    try:
        return cir.eval_expr_static(lp.start, sizes) < cir.eval_expr_static(lp.stop, sizes)
    except (TypeError, KeyError, ArithmeticError):
        return False


def _reads_in_range(k: cir.Kernel, bufs: set, extents: tuple, sizes: dict) -> bool:
    """Whether every read of `bufs` in `k` is at loop variables whose loops stay within
    `extents`: the inlined producer then reads its inputs only where it would have (an
    out-of-range read stays the error it was)."""
    def reads_ok(node, loops) -> bool:
        return all(len(ld.index) == len(extents) and all(
            (_loop_stop(loops.get(_var_name(i)), sizes) or extent + 1) <= extent
            for i, extent in zip(ld.index, extents))
            for ld in loads(node) if ld.buffer in bufs)

    def visit(body, loops) -> bool:
        for s in body:
            if isinstance(s, cir.Loop):
                ok = reads_ok((s.start, s.stop, s.step), loops) and \
                    visit(s.body, {**loops, s.var: s})
            elif isinstance(s, cir.If):
                ok = reads_ok(s.cond, loops) and visit(s.then, loops) and \
                    visit(s.orelse, loops)
            else:
                ok = reads_ok(s, loops)
            if not ok:
                return False
        return True
    return visit(k.body, {})


def _loop_stop(lp, sizes: dict):
    """The stop of a loop from 0 with a positive constant step, when sizes fix it (else None)."""
    if lp is None or not _is_int(lp.start, 0) or not (
            isinstance(lp.step, cir.Const) and isinstance(lp.step.value, int) and lp.step.value > 0):
        return None
    try:
        return cir.eval_expr_static(lp.stop, sizes)
    except (TypeError, KeyError):
        return None


# ----------------------------------------------------------------------------- helpers


def _map(node, fn):
    """`node` with every statement or expression n for which fn(n) is not None replaced by
    it (top-down: a replacement is not visited again)."""
    if isinstance(node, tuple):
        return tuple(_map(n, fn) for n in node)
    if not isinstance(node, (cir.Expr, cir.Stmt, cir.Span)):
        return node
    new = fn(node)
    if new is not None:
        return new
    changes = {f.name: _map(getattr(node, f.name), fn) for f in dataclasses.fields(node)
               if f.name != "ty"}
    return dataclasses.replace(node, **changes)


def _renamed(node, names: dict):
    """`node` (statements or expressions) with the variables, loop variables and locals
    named in `names` renamed (each variable keeps its type)."""
    if isinstance(node, tuple):
        return tuple(_renamed(n, names) for n in node)
    if isinstance(node, cir.Var):
        return cir.Var(names[node.name], node.ty) if node.name in names else node
    if not isinstance(node, (cir.Expr, cir.Stmt, cir.Span)):
        return node
    changes = {f.name: _renamed(getattr(node, f.name), names)
               for f in dataclasses.fields(node) if f.name != "ty"}
    if isinstance(node, cir.Loop):
        changes["var"] = names.get(node.var, node.var)
    elif isinstance(node, (cir.Let, cir.Assign)):
        changes["name"] = names.get(node.name, node.name)
    return dataclasses.replace(node, **changes)


def _serial(body: tuple) -> tuple:
    """`body` with no loop marked parallel (its loops assign a variable now: the passes
    mark them again)."""
    def serial(st):
        if isinstance(st, cir.Loop):
            return [dataclasses.replace(st, parallel=False, body=_serial(st.body))]
        return None
    return _splice(body, serial)


def _splice(body: tuple, fn) -> tuple:
    """`body` with every statement s (in loops and ifs too) for which fn(s) gives a list
    replaced by that list's statements."""
    out = []
    for st in body:
        new = fn(st)
        if new is not None:
            out += new
        elif isinstance(st, cir.Loop):
            out.append(dataclasses.replace(st, body=_splice(st.body, fn)))
        elif isinstance(st, cir.If):
            out.append(dataclasses.replace(st, then=_splice(st.then, fn),
                                           orelse=_splice(st.orelse, fn)))
        else:
            out.append(st)
    return tuple(out)


def _nest_loops(k: cir.Kernel) -> list:
    """The loops of the kernel's outer nest (one loop in each body), outermost first."""
    body, loops = k.body, []
    while len(body) == 1 and isinstance(body[0], cir.Loop):
        loops.append(body[0])
        body = body[0].body
    return loops


def _cast(e, dtype: str):
    return e if e.ty.dtype == dtype else cir.Cast(e, cir.Ty(dtype, e.ty.shape))


def _stored(e, dtype: str):
    """`e` as the store of a `dtype` output leaves it for the next block to read: a half
    is rounded to it there, though the devices compute halves wider (an f16 value of
    x * 1000 overflows to inf when stored, fused or not). Arithmetic only: a variable or
    a load holds its dtype already."""
    if dtype in ("f16", "bf16") and isinstance(e, (cir.Bin, cir.Unary, cir.Call, cir.Select)):
        return cir.Cast(e, cir.Ty(dtype, e.ty.shape))
    return _cast(e, dtype)


def _hinted(k: cir.Kernel) -> bool:
    return k.schedule != cir.Schedule()


def _var_name(e):
    return e.name if isinstance(e, cir.Var) else None


def _is_int(e, value) -> bool:
    return isinstance(e, cir.Const) and e.value == value and not isinstance(e.value, bool)


def _same_dim(stop, d) -> bool:
    return stop == d or isinstance(stop, cir.Var) and stop.name == d


def _shape_of(buf: cir.Buffer, sizes: dict) -> tuple:
    return tuple(cir.eval_dim(d, sizes) for d in buf.shape)


def _all_names(k: cir.Kernel) -> set:
    names = set(k.dims) | {s.name for s in k.scalars} | {b.name for b in k.inputs} | \
        {k.output.name}
    for n in cir.walk(k.body):
        if isinstance(n, cir.Var):
            names.add(n.name)
        elif isinstance(n, (cir.Let, cir.Loop, cir.SharedAlloc)):
            names.add(getattr(n, "name", None) or getattr(n, "var", None))
    return names


def _fresh(base: str, taken: set) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _size_names(body, inputs, output) -> set:
    names = set(free_vars(body))
    for b in list(inputs) + [output]:
        for d in b.shape:
            if isinstance(d, str):
                names.add(d)
            elif isinstance(d, cir.Expr):
                names |= free_vars(d)
    for n in cir.walk(body):
        if isinstance(n, cir.Loop):
            names |= free_vars((n.start, n.stop, n.step))
    return names
