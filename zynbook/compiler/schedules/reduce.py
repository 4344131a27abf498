"""The reduce schedule: `reduce(op)` and `reduce(op, axis=k)` kernels, on every target.

A `yield` combines a value into a per-thread accumulator (argmin/argmax: a (value, index)
pair; NaN wins, then the smaller index on ties); the threads' accumulators then meet:

* **whole**: each thread accumulates a grid-stride slice (GPUs) or a contiguous chunk (the
  CPU: one thread per block, blocks on the host's cores) of the flattened loop nest; the
  block reduces its threads (warp collectives and one shared slot per warp where the target
  has them, else a tree in shared memory), and block 0..B-1 write B partials that a second
  launch of one block combines in order (so the result does not depend on timing);
* **warp_rows** (`axis=` the innermost loop, rows up to 2048): one warp per output, lanes
  stride along the row, a warp collective;
* **block_rows** (longer rows, or argmin/argmax rows): one block per output;
* **thread_rows** (`axis=` an outer loop, or the CPU): one thread per output, in order along
  the axis (neighbouring threads read neighbouring elements);
* **positions** (`axis=` an outer loop whose kept loops run inside it behind statements the
  nest does not reach, a `var` they carry): each thread owns a range of outputs, runs the
  whole body as written once and combines only the yields at its own kept positions (no
  schedule can run one output's yields apart from the others').

On a target without 64-bit integers (WebGPU) a sum, maximum or minimum of i64 (u64) values
is held in two 32-bit words, combined as argmin/argmax's (value, index) pairs are; a product
in one, with a word saying whether it passed 32 bits or met a 0.

Sums of floats on the CPU accumulate in f64: as accurate as a GPU's tree at the speed of an
in-order loop.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import (NotScalar, ScalarLowering, buffer_params, cast, compute_dtype, host_expr,
                              lit, product_expr, user_name)
from ..passes.loops import trip_count
from ..targets import Target
from .base import Builder, Params, Schedule, kernel_name, one_kernel, workgroup_threads
from .collective import block_allreduce, combine_expr, identity, identity_value, tree_rounds
from .nest import (decompose, extents, first_thread, flat_index_dtype, loop_value, spread, thread,
                   without_tiles, yield_nest)

I64_MAX = 2 ** 63 - 1
_ARG = ("argmax", "argmin")
# a 64-bit integer argmin/argmax's values on a target that holds them in 32 bits
_WIDE = {"i64": "i32", "u64": "u32"}
# the threads that run a reduce kernel's body by positions on a GPU (`rows_by_position`)
POSITION_THREADS = 4096
# the reductions of such values kept in two 32-bit words there (`_Builder.wide`)
_WIDE_OPS = ("+", "max", "min", "*")


@dataclass(frozen=True)
class ReduceParams(Params):
    layout: str = "whole"       # whole, warp_rows, block_rows, thread_rows, positions
    threads: int = 256          # per block
    blocks: int = 1             # whole: blocks of the first launch (partials); 0: by the
                                #   size, min(ceil(total / (threads * 4)), 1024), at launch
    chunk: int = 0              # iterations (whole) or outputs (rows) per block; 0: stride
    acc: str = "f32"            # accumulator dtype


def _reduced_as_written(kernel, nest) -> bool:
    """Whether the reduced loop is the one loop around the yields inside the nest (its
    bounds read the kept loops' variables, so the nest stops above it)."""
    axis = kernel.kernel_type.param("axis")
    around = _loops_around_yield(nest.body, tuple(nest.loops))
    return around is not None and axis == len(nest.loops) == len(around) - 1 and \
        all(a is b for a, b in zip(around, nest.loops))


def _by_position(kernel, nest) -> bool:
    """Whether a yield sits under a loop the nest does not reach (`var run` before it), so
    `axis=k` counts loops the nest does not have: each output then runs the body as written
    and takes the yields at its own kept position."""
    axis = kernel.kernel_type.param("axis")
    return axis is not None and not _reduced_as_written(kernel, nest) and any(
        isinstance(n, cir.Loop) and any(isinstance(y, cir.Yield) for y in cir.walk(n))
        for n in cir.walk(nest.body))


def _loops_around_yield(body, outer=()):
    for s in body:
        if isinstance(s, cir.Yield):
            return list(outer)
        if isinstance(s, cir.Loop):
            found = _loops_around_yield(s.body, outer + (s,))
        elif isinstance(s, cir.If):
            found = _loops_around_yield(s.then, outer) or _loops_around_yield(s.orelse, outer)
        else:
            continue
        if found is not None:
            return found
    return None


def _yields_surely(kernel) -> bool:
    """Whether every output of an argmin/argmax kernel surely meets a yield: none sits under
    an `if`, and the loops around them run from bounds over sizes alone (dims.solve refuses
    one of no iteration at the launch)."""
    def sure(body, ok):
        for s in body:
            if isinstance(s, cir.Yield) and not ok:
                return False
            if isinstance(s, cir.If) and not sure(s.then + s.orelse, False):
                return False
            if isinstance(s, cir.Loop) and not sure(s.body, ok and all(
                    isinstance(n, cir.Const) or isinstance(n, cir.Var) and n.name in kernel.dims
                    or not isinstance(n, (cir.Var, cir.Load))
                    for e in (s.start, s.stop, s.step) for n in cir.walk(e))):
                return False
        return True
    return sure(kernel.body, True)


def _private_shared(target) -> bool:
    """Whether a reduce kernel's shared arrays can be the threads' own: the nest of loops
    stops at a `shared var`, so each is declared inside the iterations one thread runs from
    start to end, and one thread runs the loops that share it in order, as the reference
    does (the barriers have nothing left to order); its size must be known when the program
    is built (on WebGPU: its program for the launch's sizes)."""
    return not target.symbolic_sizes


# WGSL's limit on a thread's own (function address space) memory: llvmpipe took minutes to
# run a reduce kernel holding a `shared var t[100000]` there
WGSL_PRIVATE_BYTES = 8192


def _private_bytes(kernel, sizes) -> int:
    """The bytes of the shared arrays a reduce kernel declares (each a thread's own)."""
    return sum(prod(cir.eval_dim(d, sizes) for d in n.shape) * (2 if n.dtype in ("f16", "bf16")
               else 8 if n.dtype in ("f64", "i64", "u64") else 4)
               for n in cir.walk(kernel.body) if isinstance(n, cir.SharedAlloc))


def _scalar(kernel, sizes):
    """`kernel` with its tile values (`yield sum(x[i])`) written as scalar loops, where
    `why_not` found that they can be."""
    return without_tiles(kernel, {k: int(v) for k, v in sizes.items()})[0] or kernel


def pow2_at_least(n: int, lo: int, hi: int) -> int:
    p = lo
    while p < n and p < hi:
        p *= 2
    return p


def _accumulator_dtype(kernel, op: str) -> str:
    ydts = [n.value.ty.dtype for n in cir.walk(kernel.body) if isinstance(n, cir.Yield)]
    ydt = ydts[0]
    if op in ("+", "*") and ydt == "bool":
        ydt = "i64"
    if op not in _ARG and kernel.output.dtype in cir.FLOAT_DTYPES and ydt not in cir.FLOAT_DTYPES:
        ydt = kernel.output.dtype
    if op in ("and", "or"):
        ydt = "bool"
    return compute_dtype(ydt)


class Reduce(Schedule):
    name = "reduce"

    def why_not(self, kernel, target, sizes):
        if kernel.kernel_type.kind != "reduce":
            return "not a reduce kernel"
        if not any(isinstance(n, cir.Yield) for n in cir.walk(kernel.body)):
            return "a reduce kernel needs a `yield`"
        kernel, why = without_tiles(kernel, sizes)
        if why:
            return why
        nest = yield_nest(kernel.body, sizes, target.symbolic_sizes)
        axis = kernel.kernel_type.param("axis")
        around = _loops_around_yield(kernel.body) or ()
        if axis is not None and not 0 <= int(axis) < len(around) \
                and not _reduced_as_written(kernel, nest):
            return f"reduce axis={axis} does not name one of the loops around the yield"
        if any(isinstance(n, (cir.SharedAlloc, cir.Barrier)) for n in cir.walk(kernel.body)) \
                and not _private_shared(target):
            return "shared arrays in a reduce kernel"
        if target.lang == "wgsl" and _private_bytes(kernel, sizes) > WGSL_PRIVATE_BYTES:
            return (f"shared arrays of {_private_bytes(kernel, sizes)} bytes in a reduce kernel, "
                    f"each a thread's own: past the {WGSL_PRIVATE_BYTES} bytes WGSL gives a "
                    "thread; run it on `cpu`, `cpu:native` or a CUDA device")
        op = kernel.kernel_type.param("op", "+")
        if op not in _ARG + _WIDE_OPS and _accumulator_dtype(kernel, op) in _WIDE and \
                not target.int64:
            return (f"a reduce({op}) of 64-bit integers: this device has no 64-bit integers "
                    "(an i64 `var` a loop sums, or `sum(x[i])`, is held in two 32-bit words); "
                    "run it on `cpu`, `cpu:native` or a CUDA device")
        return None

    def default(self, kernel, target, sizes):
        """The layout by shape; a `@workgroup` of a power of two (a whole number of warps)
        sets the threads of a block."""
        kernel = _scalar(kernel, sizes)
        p = self._by_shape(kernel, target, sizes)
        hint = workgroup_threads(kernel)
        if p.threads == 1 or hint < 32 or hint & (hint - 1) or hint > target.max_threads \
                or hint % max(target.warp, 1):
            return p
        if p.layout == "whole" and p.blocks:
            total = max(yield_nest(kernel.body, sizes).total, 1)
            return replace(p, threads=hint, blocks=max(1, min(-(-total // (hint * 4)), 1024)))
        return replace(p, threads=hint)

    def _by_shape(self, kernel, target, sizes):
        op = kernel.kernel_type.param("op", "+")
        axis = kernel.kernel_type.param("axis")
        nest = yield_nest(kernel.body, sizes, target.symbolic_sizes)
        acc = _accumulator_dtype(kernel, op)
        if acc in _WIDE and not target.int64:
            acc = _WIDE[acc]    # (argmin/argmax: the values are held there in 32 bits)
        cpu = target.max_threads == 1 and not target.symbolic_sizes
        if target.wide_sums and op == "+" and acc == "f32":
            acc = "f64"
        if axis is not None and _by_position(kernel, nest):
            if cpu:
                blocks = max(1, min(8 * target.cores, 64))
                return ReduceParams("positions", 1, blocks, 0, acc)
            return ReduceParams("positions", min(256, target.max_threads), 0, 0, acc)
        if axis is not None and int(axis) >= len(nest.loops):
            # the reduced loop's bounds follow the kept loops (`for i, j in i..n`): one
            # thread per output runs it as written
            return ReduceParams("thread_rows", min(256, target.max_threads), 0, 0, acc)
        if target.symbolic_sizes:
            # one program for every size: no choice reads a size
            layout = "whole" if axis is None else \
                "block_rows" if int(axis) == len(nest.loops) - 1 else "thread_rows"
            return ReduceParams(layout, min(256, target.max_threads), 0, 0, acc)
        if axis is None:
            total = max(nest.total if nest.loops else 1, 1)
            if cpu:
                blocks = 1 if total < 32768 else min(64, -(-total // 8192))
                return ReduceParams("whole", 1, blocks, -(-total // blocks), acc)
            threads = min(256, target.max_threads)
            blocks = max(1, min(-(-total // (threads * 4)), 1024))
            return ReduceParams("whole", threads, blocks, 0, acc)
        axis = int(axis)
        ext = nest.extents[axis]
        n_out = nest.total // ext if ext else 0
        innermost = axis == len(nest.loops) - 1
        if cpu:
            blocks = max(1, min(n_out, 8 * target.cores))
            return ReduceParams("thread_rows", 1, blocks, -(-max(n_out, 1) // blocks), acc)
        if not innermost:
            return ReduceParams("thread_rows", min(256, target.max_threads), 0, 0, acc)
        warp_ok = target.collectives and target.warp > 1 and op not in _ARG and \
            (target.int64 or _accumulator_dtype(kernel, op) not in _WIDE)
        if ext <= 2048 and warp_ok:
            return ReduceParams("warp_rows", min(256, target.max_threads), 0, 0, acc)
        threads = min(pow2_at_least(max(ext // 8, 1), 128, 1024), target.max_threads)
        return ReduceParams("block_rows", threads, 0, 0, acc)

    def space(self, kernel, target, sizes):
        kernel = _scalar(kernel, sizes)
        first = self.default(kernel, target, sizes)
        if target.max_threads == 1:
            return [first]
        ts = [t for t in (32, 64, 128, 256, 512, 1024) if t <= target.max_threads]
        sym = target.symbolic_sizes
        if first.layout == "positions":
            return [first]
        if first.layout == "whole" and sym:
            out = [ReduceParams("whole", t, b, 0, first.acc) for t in ts for b in (0, 1, 3)]
        elif first.layout == "whole":
            total = max(yield_nest(kernel.body, sizes).total, 1)
            out = [ReduceParams("whole", t, b, 0, first.acc) for t in ts
                   for b in sorted({1, max(1, min(-(-total // (t * 4)), 1024)), 3})]
        elif kernel.kernel_type.param("axis") >= len(yield_nest(kernel.body, sizes, sym).loops):
            out = [ReduceParams("thread_rows", t, 0, 0, first.acc) for t in ts]
        else:
            layouts = ["thread_rows"]
            if kernel.kernel_type.param("axis") == len(yield_nest(kernel.body, sizes, sym).loops) - 1:
                layouts.append("block_rows")
                if first.layout == "warp_rows":
                    layouts.append("warp_rows")
            out = [ReduceParams(l, t, 0, 0, first.acc) for l in layouts for t in ts
                   if l != "warp_rows" or t % target.warp == 0]
        return [first] + [p for p in out if p != first]

    def build(self, kernel, target, sizes, params: ReduceParams) -> ir.Program:
        return _Builder(_scalar(kernel, sizes), target, sizes, params).program()


class _Lowering(ScalarLowering):
    """A thread's lowering, where a shared array is the thread's own (`_private_shared`):
    declared zero-filled where the body declares it, barriers dropped."""

    def stmt(self, s) -> list:
        if isinstance(s, cir.Barrier):
            return []
        if not isinstance(s, cir.SharedAlloc):
            return super().stmt(s)
        if s.name in self.buffers:
            raise NotScalar(f"shared array `{s.name}` declared twice")
        count = prod(cir.eval_dim(d, self.sizes) for d in s.shape)
        ident = user_name(s.name)
        self.buffers[s.name] = (ident, s.dtype, tuple(s.shape))
        e = ir.Ref(ident + "_e", self.idx)
        zero = lit(False, "bool") if s.dtype == "bool" else lit(0, s.dtype)
        return [ir.Array(ident, s.dtype, count, "local", s.line),
                ir.For(e.name, lit(0, self.idx), lit(count, self.idx), lit(1, self.idx),
                       (ir.Store(ident, e, zero, None, s.line),), self.idx, s.line)]


class _Builder(Builder):
    def __init__(self, kernel: cir.Kernel, target: Target, sizes: dict, params: ReduceParams):
        self.k, self.t, self.p = kernel, target, params
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.op = kernel.kernel_type.param("op", "+")
        self.arg = self.op in _ARG
        axis = kernel.kernel_type.param("axis")
        self.axis = None if axis is None else int(axis)
        # symbolic: one program for every size set (counts over the sizes, i32 indices)
        self.sym = target.symbolic_sizes
        self.nest = yield_nest(kernel.body, self.sizes, self.sym)
        self.idx = flat_index_dtype(kernel, self.sizes, self.sym,
                                    self.nest.total if self.nest.loops else 1)
        # argmin/argmax positions: i32 where every index is (one program for every size, or
        # a target without 64-bit integers, whose sizes fit 32 bits), an index past every
        # position meaning none yet
        self.ai = "i32" if self.sym or not target.int64 else "i64"
        self.no_index = 2 ** 31 - 1 if self.ai == "i32" else I64_MAX
        self.sites = errflag.ErrorSites()
        self.acc = params.acc
        self.ident = identity(self.op, self.acc)
        # a sum, maximum or minimum of i64 (u64) values on a target that holds them in 32
        # bits: in two words, (_acc, _acci) = (the low word, u32; the high word, i32 for
        # i64, u32 for u64), combined as the pairs of argmin/argmax are; the result is a
        # runtime error where it is past the 32 bits it is stored in (a sum's partials may
        # pass them: the words do not)
        wide = _accumulator_dtype(kernel, self.op)
        self.wide = not target.int64 and self.op in _WIDE_OPS and wide in _WIDE
        if self.wide and self.op == "*":
            # a product: (the product of the values not 0, held in 32 bits; its state, the
            # larger of each's: 0, 1 where it passed them, 2 where a value was 0)
            self.acc, self.ai = _WIDE[wide], "i32"
            self.ident, self.no_index = lit(1, self.acc), 0
        elif self.wide:
            self.acc, self.ai = "u32", "i32" if wide == "i64" else "u32"
            v = identity_value(self.op, wide)
            self.ident = lit(v & 0xFFFFFFFF, "u32")
            self.no_index = (v >> 32) & 0xFFFFFFFF if wide == "u64" else v >> 32
        self.pair = self.arg or self.wide
        # whether an argmin/argmax output may meet no yield: a flag, _accr, says whether one
        # did (every index is one a yield may give, so no index can say it; where yields are
        # sure, the starting pair (identity, no_index) loses to every yield or equals it)
        self.reach = self.arg and not _yields_surely(kernel)

    # ---- small pieces -----------------------------------------------------------------

    def counts(self, low, loops, head: list) -> list:
        """The trip counts of `loops`: numbers, or (symbolic) locals declared in `head`."""
        out = self.host_counts(low, loops)
        if not self.sym:
            return out
        if not all(host_expr(e) for e in out):
            raise NotScalar("a loop bound the host cannot compute")
        for k, e in enumerate(out):
            if not isinstance(e, ir.Lit):
                out[k] = ir.Ref(self.new("n"), self.idx)
                head.append(ir.Decl(out[k].name, self.idx, e, False))
        return out

    def host_counts(self, low, loops) -> list:
        """The trip counts of `loops` as host expressions (symbolic) or numbers."""
        if not self.sym:
            return [self.nest.extents[self.nest.loops.index(lp)] for lp in loops]
        return extents(low, loops)

    def product(self, terms) -> ir.Expr | int:
        return prod(terms) if not self.sym else product_expr([self.i(t) for t in terms], self.idx)

    def thread(self, axis: str) -> ir.Expr:
        return thread(axis, self.idx)

    def state(self, stem: str) -> list:
        """[(name, dtype)] of the words the accumulator is kept in, named from `stem`: the
        value; the index (argmin/argmax) or high word; the reached flag (`reach`)."""
        return [(stem, self.acc)] + ([(stem + "i", self.ai)] if self.pair else []) + \
            ([(stem + "r", "i32")] if self.reach else [])

    def combine(self, acc: str, acci: str | None, v: ir.Expr, vi: ir.Expr | None, line=0,
                vr: ir.Expr | None = None) -> list:
        """Statements that combine (v, vi) into the locals (acc, acci); where `reach`, the
        flag `acc`r takes `vr` (another's flag; a yield: 1) where it is 0."""
        if self.reach:
            r = ir.Ref(acc + "r", "i32")
            flag = [ir.Set(r.name, ir.Math("max", (r, vr if vr is not None else lit(1, "i32")),
                                           "i32"), line)]
            return self._combine(acc, acci, v, vi, line) + flag
        return self._combine(acc, acci, v, vi, line)

    def _combine(self, acc: str, acci: str | None, v: ir.Expr, vi: ir.Expr | None, line=0) -> list:
        a = ir.Ref(acc, self.acc)
        if self.wide:
            return self.combine_words(acc, acci, v, vi, line)
        if not self.arg:
            value = cast(v, self.acc)
            if any(isinstance(n, (ir.Checked, ir.InRange, ir.CheckedDiv)) for n in ir.walk(value)):
                # the value is computed before it is combined: `acc || v` (reduce(or)) would
                # skip its checks once acc holds, where every yielded value is evaluated
                tv = self.new("v")
                return [ir.Decl(tv, self.acc, value, False, line),
                        ir.Set(acc, combine_expr(self.op, a, ir.Ref(tv, self.acc), self.acc), line)]
            return [ir.Set(acc, combine_expr(self.op, a, value, self.acc), line)]
        tv, ti = self.new("v"), self.new("i")
        out = [ir.Decl(tv, self.acc, cast(v, self.acc), False, line),
               ir.Decl(ti, self.ai, cast(vi, self.ai), False, line)]
        x, xi = ir.Ref(tv, self.acc), ir.Ref(ti, self.ai)
        ai = ir.Ref(acci, self.ai)
        n1, n2 = ir.Bin("!=", a, a, "bool"), ir.Bin("!=", x, x, "bool")
        cmp = ir.Bin(">" if self.op == "argmax" else "<", x, a, "bool")
        not_n1 = ir.Un("not", n1, "bool")
        better = ir.Select(n2, not_n1, ir.Bin("and", not_n1, cmp, "bool"), "bool")
        tie = ir.Bin("and", ir.Bin("or", ir.Bin("==", x, a, "bool"), ir.Bin("and", n1, n2, "bool"), "bool"),
                     ir.Bin("<", xi, ai, "bool"), "bool")
        out.append(ir.If(ir.Bin("or", better, tie, "bool"),
                         (ir.Set(acc, x, line), ir.Set(acci, xi, line)), (), line))
        return out

    def combine_words(self, acc: str, acci: str, v: ir.Expr, vi: ir.Expr | None, line) -> list:
        """Statements that combine the two words (v, vi) of a wide value (`wide`) into the
        locals (acc, acci); a yielded value `v` (vi None) is one held in 32 bits, its high
        word its sign (0 for u64). A sum adds the words, the low words' carry into the high
        word; a maximum (minimum) takes the other words where they are larger (smaller),
        high words compared as their type, low words unsigned."""
        if self.op == "*":
            return self.combine_product(acc, acci, v, vi, line)
        u32, hdt = "u32", self.ai
        x, xi = self.new("v"), self.new("i")
        if vi is None:
            held = "i32" if hdt == "i32" else "u32"
            v32 = self.new("y")
            out = [ir.Decl(v32, held, cast(v, held), False, line)]
            hi = ir.Bin(">>", ir.Ref(v32, held), lit(31, held), held) if held == "i32" \
                else lit(0, u32)
            v, vi = cast(ir.Ref(v32, held), u32), hi
        else:
            out = []
        out += [ir.Decl(x, u32, cast(v, u32), False, line),
                ir.Decl(xi, hdt, cast(vi, hdt), False, line)]
        L, H, X, XI = ir.Ref(acc, u32), ir.Ref(acci, hdt), ir.Ref(x, u32), ir.Ref(xi, hdt)
        if self.op == "+":
            carry = ir.Select(ir.Bin("<", ir.Bin("+", L, X, u32), X, "bool"), lit(1, hdt),
                              lit(0, hdt), hdt)
            return out + [ir.Set(acci, ir.Bin("+", ir.Bin("+", H, XI, hdt), carry, hdt), line),
                          ir.Set(acc, ir.Bin("+", L, X, u32), line)]
        more = ">" if self.op == "max" else "<"
        takes = ir.Bin("or", ir.Bin(more, XI, H, "bool"), ir.Bin(
            "and", ir.Bin("==", XI, H, "bool"), ir.Bin(more, X, L, "bool"), "bool"), "bool")
        return out + [ir.If(takes, (ir.Set(acc, X, line), ir.Set(acci, XI, line)), (), line)]

    def combine_product(self, acc: str, acci: str, v: ir.Expr, vi: ir.Expr | None, line) -> list:
        """Statements that combine (v, vi) into a wide product (`wide`): a yielded value
        (vi None) is itself and state 0, or 1 and state 2 where it is 0; the values
        multiply (wrapping) and the states take the larger, 1 where the product passed 32
        bits: a product of values not 0 only grows, so the whole one is past them too,
        unless a 0 (state 2) comes."""
        held, i32 = self.acc, "i32"
        out = []
        if vi is None:
            y = self.new("y")
            out.append(ir.Decl(y, held, cast(v, held), False, line))
            zero = ir.Bin("==", ir.Ref(y, held), lit(0, held), "bool")
            v = ir.Select(zero, lit(1, held), ir.Ref(y, held), held)
            vi = ir.Select(zero, lit(2, i32), lit(0, i32), i32)
        x, xi, r = self.new("v"), self.new("i"), self.new("p")
        L, X, R = ir.Ref(acc, held), ir.Ref(x, held), ir.Ref(r, held)
        out += [ir.Decl(x, held, cast(v, held), False, line),
                ir.Decl(xi, i32, cast(vi, i32), False, line),
                ir.Decl(r, held, ir.Bin("*", L, X, held), False, line)]
        # (no value is 0: the product divides back to L unless it wrapped, or is
        # -2^31 * -1, which wraps to itself)
        past = ir.Bin("!=", ir.Bin("/", R, X, held), L, "bool")
        if held == i32:
            past = ir.Bin("or", past, ir.Bin("and", ir.Bin("==", X, lit(-1, i32), "bool"),
                                              ir.Bin("==", L, lit(-2 ** 31, i32), "bool"), "bool"), "bool")
        state = ir.Math("max", (ir.Math("max", (ir.Ref(acci, i32), ir.Ref(xi, i32)), i32),
                                ir.Select(past, lit(1, i32), lit(0, i32), i32)), i32)
        # (past them or at 0 the value says nothing: 1, never a wrapped 0 to divide by)
        return out + [ir.Set(acci, state, line), ir.Set(acc, ir.Select(
            ir.Bin("==", ir.Ref(acci, i32), lit(0, i32), "bool"), R, lit(1, held), held), line)]

    def declare_acc(self) -> list:
        out = [ir.Decl("_acc", self.acc, self.ident, True)]
        if self.pair:
            out.append(ir.Decl("_acci", self.ai, lit(self.no_index, self.ai), True))
        if self.reach:
            out.append(ir.Decl("_accr", "i32", lit(0, "i32"), True))
        return out

    def result(self) -> ir.Expr:
        out_dt = self.k.output.dtype
        line = next((n.line for n in cir.walk(self.k.body) if isinstance(n, cir.Yield)), 0)
        if self.wide and self.op == "*":
            # 0 where a value was 0; else the product, the site failing where it passed 32 bits
            held, S = self.acc, ir.Ref("_acci", "i32")
            site = self.sites.add(errflag.PAST32, line)
            fails = cast(ir.Checked(ir.Select(ir.Bin("==", S, lit(1, "i32"), "bool"), lit(1, "i32"),
                                              lit(0, "i32"), "i32"), lit(1, "i32"), site, "i32"), held)
            v = ir.Select(ir.Bin("==", S, lit(2, "i32"), "bool"), lit(0, held),
                          ir.Bin("+", ir.Ref("_acc", held), fails, held), held)
            return cast(v, out_dt)
        if self.wide:
            # the 32 bits it is stored in, where the high word is the low word's sign (0);
            # else the site fails
            L, H = ir.Ref("_acc", "u32"), ir.Ref("_acci", self.ai)
            if self.ai == "i32":
                low = cast(L, "i32")
                past = ir.Bin("-", H, ir.Bin(">>", low, lit(31, "i32"), "i32"), "i32")
            else:
                low, past = L, cast(H, "i32")
            site = self.sites.add(errflag.WIDE, line)     # (the first yield's line)
            fails = cast(ir.Checked(past, lit(1, "i32"), site, "i32"), low.dtype)
            return cast(ir.Bin("+", low, fails, low.dtype), out_dt)
        if self.arg:
            v = ir.Ref("_acci", self.ai)
            if self.reach:
                # no yield reached: no index, the site fails (as numpy's argmax of nothing)
                site = self.sites.add(errflag.NO_INDEX, line, self.op)
                none = ir.Bin("==", ir.Ref("_accr", "i32"), lit(0, "i32"), "bool")
                fails = ir.Checked(ir.Select(none, lit(1, "i32"), lit(0, "i32"), "i32"),
                                   lit(1, "i32"), site, "i32")
                v = ir.Bin("+", v, cast(fails, self.ai), self.ai)
            return cast(v, out_dt)
        return cast(cast(ir.Ref("_acc", self.acc), compute_dtype(out_dt)), out_dt)

    def block_reduce(self, threads: int, tag: str = "") -> list:
        """Every thread of the block ends with the block's reduction in (_acc, _acci); `tag`
        names its shared arrays apart from those of another block size in the same module
        (WGSL's workgroup arrays are the module's)."""
        if threads == 1:
            return []
        if not self.pair:
            return block_allreduce(self.t, self.op, "_acc", self.acc, threads, tag)
        # (value, index) pairs (and reached flags): a tree in shared memory, an array a word
        th = ir.Thread("thread")
        words = [(local, arr + tag, dt)
                 for (local, dt), arr in zip(self.state("_acc"), ("_rv", "_ri", "_rr"))]

        def step(th, other):
            x = [(local.replace("_acc", "_x"), arr, dt) for local, arr, dt in words]
            return [*(ir.Decl(name, dt, ir.Load(arr, th, dt), True) for name, arr, dt in x),
                    *self.combine("_x", "_xi", *(ir.Load(arr, other, dt) for _, arr, dt in x[:2]),
                                  0, ir.Load(x[2][1], other, "i32") if self.reach else None),
                    *(ir.Store(arr, th, ir.Ref(name, dt)) for name, arr, dt in x)]
        return [*(s for local, arr, dt in words for s in (
                    ir.Array(arr, dt, threads, "shared"), ir.Store(arr, th, ir.Ref(local, dt)))),
                ir.Barrier(),
                *tree_rounds(threads, step),
                *(ir.Set(local, ir.Load(arr, lit(0, "i32"), dt)) for local, arr, dt in words)]

    def lowering(self, flat: str) -> ScalarLowering:
        """One thread's lowering; `yield` combines into (_acc, _acci), the default index of
        argmin/argmax being the flat position `flat`."""
        low = _Lowering(self.k, self.sizes, self.sites, self.idx, symbolic=self.sym,
                        target=self.t)

        def on_yield(value, index, line):
            if index is None and self.arg:
                index = cast(ir.Ref(flat, self.idx), self.ai)
            return self.combine("_acc", "_acci" if self.pair else None, value, index, line)
        low.on_yield = on_yield
        return low

    def decompose(self, low: ScalarLowering, loops, extents, flat: ir.Expr) -> list:
        return decompose(low, loops, extents, flat, self.idx, lambda k: self.new("r"))

    def out_ident(self) -> str:
        return user_name(self.k.output.name)

    # ---- layouts ----------------------------------------------------------------------

    def program(self) -> ir.Program:
        p = self.p
        name = kernel_name(self.k)
        params = buffer_params(self.k, self.sizes, self.idx)
        line = self.nest.loops[0].line if self.nest.loops else 0
        if p.layout == "whole":
            return self.whole(name, params, line)
        return self.rows(params, line)

    def whole(self, name, params, line) -> ir.Program:
        p = self.p
        low = self.lowering("_g")
        head: list = []
        loops = self.nest.loops
        counts = self.counts(low, loops, head)
        total = self.local("_total", self.product(counts), head) if loops else 1
        host_total = self.product(self.host_counts(low, loops)) if loops else 1
        body = list(low.stmts(self.nest.prologue)) + head + self.declare_acc()
        inner = self.decompose(low, loops, counts, ir.Ref("_g", self.idx)) \
            + list(low.stmts(self.nest.body))
        body.append(spread("_g", total, p.threads, p.chunk, inner, self.idx, line))
        body += self.block_reduce(p.threads)
        two = p.blocks != 1
        if p.blocks == 0:
            # as many partials as the size asks for: a host expression, also spelled in the
            # kernel that combines them
            t4 = p.threads * 4
            parts = ir.Math("max", (ir.Math("min", (ir.Bin("/", ir.Bin(
                "+", self.i(host_total), self.i(t4 - 1), self.idx), self.i(t4), self.idx),
                self.i(1024)), self.idx), self.i(1)), self.idx)
        else:
            parts = lit(p.blocks, self.idx)
        first = first_thread()
        # the partials: (scratch buffer, dtype, the local it keeps), the index's too for arg
        partials = [("_part" + local[4:], dt, local) for local, dt in self.state("_acc")]
        if two:
            keep = [ir.Store(buf, ir.Thread("block"), ir.Ref(local, dt))
                    for buf, dt, local in partials]
        else:
            keep = [ir.Store(self.out_ident(), lit(0, self.idx), self.result())]
        body.append(ir.If(first, tuple(keep)))
        kparams = params + (tuple(ir.Param(buf, "scratch", dt, True) for buf, dt, _ in partials)
                            if two else ())
        kernels = [ir.Kernel(name, kparams, tuple(body), p.threads, self.idx,
                             f"reduce({self.op}): a partial per thread, then per block")]
        count = parts if p.blocks == 0 else lit(p.blocks, "i64")
        launches = [ir.Launch(name, count, p.threads)]
        scratch = ()
        if two:
            t2 = min(1024, self.t.max_threads)
            b = "_b"
            fin = self.declare_acc()
            bound = parts if p.blocks == 0 else lit(p.blocks, "i32")
            fin.append(ir.For(b, ir.Thread("thread"), bound, ir.Thread("threads"), tuple(
                self.combine("_acc", "_acci" if self.pair else None, ir.Load("_part", ir.Ref(b, "i32"), self.acc),
                             ir.Load("_parti", ir.Ref(b, "i32"), self.ai) if self.pair else None, 0,
                             ir.Load("_partr", ir.Ref(b, "i32"), "i32") if self.reach else None)),
                "i32"))
            fin += self.block_reduce(t2, "" if t2 == p.threads else f"_{t2}")
            fin.append(ir.If(first, (ir.Store(self.out_ident(), lit(0, self.idx), self.result()),)))
            kernels.append(ir.Kernel(name + "_final", kparams, tuple(fin), t2, self.idx,
                                     "the block partials, combined in order"))
            launches.append(ir.Launch(name + "_final", lit(1, "i64"), t2))
            scratch = tuple(ir.Scratch(buf, dt, count) for buf, dt, _ in partials)
        nblocks = "min(ceil(total / %d), 1024)" % (p.threads * 4) if p.blocks == 0 else p.blocks
        what = (f"reduce({self.op}): {nblocks} block(s) of {p.threads} thread(s)"
                + (", partials combined in order by a second launch" if two else ""))
        return ir.Program(self.k.name, tuple(kernels), tuple(launches), scratch,
                          self.sites.as_tuple(), f"{what} (reduce: {p.describe()})")

    def rows_as_written(self, params, line) -> ir.Program:
        """One thread per output (the kept loops, flattened), running the body inside them,
        the reduced loop with it, as written."""
        p, nest = self.p, self.nest
        low = self.lowering("_row")
        head: list = []
        outer_ext = self.counts(low, nest.loops, head)
        n_out = self.local("_nout", self.product(outer_ext), head)
        host_n_out = self.product(self.host_counts(low, nest.loops))
        row = ir.Ref("_row", self.idx)
        inner = self.declare_acc() + self.decompose(low, nest.loops, outer_ext, row) \
            + list(low.stmts(nest.body)) + [ir.Store(self.out_ident(), row, self.result())]
        body = list(low.stmts(nest.prologue)) + head
        body.append(spread("_row", n_out, p.threads, p.chunk, inner, self.idx, line))
        grid = ir.Math("max", (ir.Math("min", (ir.ceildiv(self.i(host_n_out), p.chunk or p.threads),
                                               lit(self.t.max_blocks, self.idx)), self.idx),
                               lit(1, self.idx)), self.idx)
        what = (f"reduce({self.op}, axis={self.axis}): one thread per output, the reduced loop "
                "as written")
        return one_kernel(self.k, params, body, p.threads, self.idx, what, grid,
                          self.sites.as_tuple(), f"{what} (reduce: {p.describe()})", self.sym)

    def rows_by_position(self, params, line) -> ir.Program:
        """The kept loops around the yields sit behind statements the nest does not reach
        (a `var` carried along them), so no output's yields can be run apart from the
        others': each thread owns a contiguous range of outputs (the kept loops around the
        yields, flattened), their accumulators in scratch arrays, runs the whole body as
        written once and combines the yields at its own positions. At most
        POSITION_THREADS threads (on the CPU, `blocks`; on llvmpipe, one block) run it: one
        thread per output reran the body for every output (100,000 columns of a running sum
        took 20 s)."""
        p, idx = self.p, self.idx
        around = _loops_around_yield(self.k.body)
        kept = [lp for k, lp in enumerate(around) if k != self.axis]
        low = self.lowering("_row")
        head: list = []
        exts = extents(low, kept) if self.sym else \
            [self.i(trip_count(lp, self.sizes)) for lp in kept]
        n_out = self.local("_nout", self.product(exts) if self.sym else
                           prod(trip_count(lp, self.sizes) for lp in kept), head)
        host_n = self.product(self.host_counts(low, kept)) if self.sym else n_out
        # (llvmpipe runs a few threads at once on the host's cores: one block of them)
        workers = p.blocks * p.threads if p.blocks else \
            p.threads if self.t.loop_steps else POSITION_THREADS

        def div_up(a, b):
            return ir.Bin("/", ir.Bin("+", self.i(a), ir.Bin("-", self.i(b), self.i(1), idx), idx),
                          self.i(b), idx)

        def owned(n):       # the outputs a thread owns: ceil(n / workers), at least 1
            return ir.Math("max", (div_up(n, workers), self.i(1)), idx)
        chunk = self.local("_chunk", owned(n_out), head)
        me = ir.Bin("+", ir.Bin("*", self.thread("block"), self.i(p.threads), idx),
                    self.thread("thread"), idx)
        lo = self.local("_lo", ir.Bin("*", me, chunk, idx), head)
        hi = self.local("_hi", ir.Math("min", (ir.Bin("+", lo, chunk, idx), self.i(n_out)), idx), head)
        accs = [("_p" + local[1:], dt, local) for local, dt in self.state("_acc")]
        at = ir.Ref("_row", idx)
        load = [ir.Set(local, ir.Load(buf, at, dt)) for buf, dt, local in accs]
        keep = [ir.Store(buf, at, ir.Ref(local, dt)) for buf, dt, local in accs]
        combine = low.on_yield

        def on_yield(value, index, ln):
            pos = self.i(0)
            for lp, e in zip(kept, exts):
                var = ir.Ref(*low.lookup(lp.var))
                pos = ir.Bin("+", ir.Bin("*", pos, e, idx), cast(var, idx), idx)
            mine = ir.Bin("and", ir.Bin(">=", pos, lo, "bool"), ir.Bin("<", pos, hi, "bool"), "bool")
            return [ir.If(mine, (ir.Decl("_row", idx, pos, False, ln), *load,
                                 *combine(value, index, ln), *keep), (), ln)]
        low.on_yield = on_yield
        each = lambda body: ir.For("_row", lo, hi, self.i(1), tuple(body), idx, line)  # noqa: E731
        start = self.declare_acc()
        inner = start + [each(keep)] + list(low.stmts(self.k.body)) + [
            each(load + [ir.Store(self.out_ident(), at, self.result())])]
        head.append(ir.If(ir.Bin("<", lo, self.i(n_out), "bool"), tuple(inner), (), line))
        # the threads that own outputs, in blocks
        users = div_up(host_n, owned(host_n))
        grid = ir.Math("max", (ir.Math("min", (div_up(users, p.threads),
                                               lit(self.t.max_blocks, idx)), idx), lit(1, idx)), idx)
        scratch = tuple(ir.Scratch(buf, dt, cast(ir.Math("max", (self.i(host_n), self.i(1)), idx), "i64"))
                        for buf, dt, _ in accs)
        params = params + tuple(ir.Param(buf, "scratch", dt, True) for buf, dt, _ in accs)
        what = (f"reduce({self.op}, axis={self.axis}): a range of outputs a thread, the whole "
                "body as written once, its own yields combined")
        return one_kernel(self.k, params, head, p.threads, idx, what, grid,
                          self.sites.as_tuple(), f"{what} (reduce: {p.describe()})", self.sym,
                          scratch=scratch)

    def local(self, name: str, value, head: list):
        """`value` (a number, or an expression declared once in `head` as `name`)."""
        if not isinstance(value, ir.Expr) or isinstance(value, (ir.Lit, ir.Ref)):
            return value
        head.append(ir.Decl(name, self.idx, value, False))
        return ir.Ref(name, self.idx)

    def rows(self, params, line) -> ir.Program:
        p, nest, ax = self.p, self.nest, self.axis
        if p.layout == "positions":
            return self.rows_by_position(params, line)
        if ax >= len(nest.loops):
            return self.rows_as_written(params, line)
        keep = [k for k in range(len(nest.loops)) if k != ax]
        outer = [nest.loops[k] for k in keep]
        red = nest.loops[ax]
        low = self.lowering("_flat")
        head: list = []
        outer_ext = self.counts(low, outer, head)
        ext = self.counts(low, [red], head)[0]
        n_out = self.local("_nout", self.product(outer_ext), head)
        host_n_out = self.product(self.host_counts(low, outer))
        row = ir.Ref("_row", self.idx)

        def per_row(first: ir.Expr, stride: int) -> list:
            body = self.decompose(low, outer, outer_ext, row)
            t = "_t"
            low.scopes.append({})
            var = low.bind(red.var, self.idx)
            at = loop_value(low, red, ir.Ref(t, self.idx), self.idx)
            it = [ir.Decl(var, self.idx, at, False, red.line),
                  ir.Decl("_flat", self.idx, ir.Bin("+", ir.Bin("*", row, self.i(ext), self.idx),
                                                    ir.Ref(t, self.idx), self.idx), False)]
            it += list(low.stmts(nest.body))
            low.scopes.pop()
            body.append(ir.For(t, first, self.i(ext), self.i(stride), tuple(it), self.idx, red.line))
            return body

        store = ir.Store(self.out_ident(), row, self.result())
        body = list(low.stmts(nest.prologue)) + head
        in_range = ir.Bin("<", row, self.i(n_out), "bool")
        idx = self.idx
        if p.layout == "thread_rows":
            inner = self.declare_acc() + per_row(self.i(0), 1) + [store]
            body.append(spread("_row", n_out, p.threads, p.chunk, inner, self.idx, line))
            grid = ir.Math("min", (ir.ceildiv(self.i(host_n_out), p.chunk or p.threads),
                                   lit(self.t.max_blocks, idx)), idx)
            what = f"reduce({self.op}, axis={ax}): one thread per output, in order along the axis"
        elif p.layout == "warp_rows":
            warp = self.t.warp
            rows = p.threads // warp
            body.append(ir.Decl("_row", self.idx, ir.Bin("+", ir.Bin(
                "*", self.thread("block"), self.i(rows), self.idx), self.thread("warp"), self.idx)))
            body += self.declare_acc()
            lane = self.thread("lane")
            body.append(ir.If(in_range, tuple(per_row(lane, warp) + [
                ir.Set("_acc", ir.Collective(self.op, ir.Ref("_acc", self.acc), "warp", self.acc)),
                ir.If(first_thread("lane"), (store,))])))
            grid = ir.ceildiv(self.i(host_n_out), rows)
            what = f"reduce({self.op}, axis={ax}): one warp per output, a warp collective"
        else:
            # a block per output; symbolic (a grid past one dimension's limit is the device's
            # to split), a block past the last output (a split dispatch may run more than
            # asked for) computes the last one again and does not store it
            row_at, mine = self.thread("block"), first_thread()
            if self.sym:
                row_at = ir.Math("min", (row_at, ir.Bin("-", self.i(n_out), self.i(1), idx)), idx)
                mine = ir.Bin("and", mine, ir.Bin("<", self.thread("block"), self.i(n_out), "bool"),
                              "bool")
            body.append(ir.Decl("_row", idx, row_at))
            # no output (rows of none, sizes baked in): the one block launched reads nothing
            empty = not self.sym and host_n_out == 0
            body += self.declare_acc() + ([] if empty else per_row(self.thread("thread"), p.threads))
            body += self.block_reduce(p.threads)
            body += [] if empty else [ir.If(mine, (store,))]
            grid = self.i(host_n_out)
            what = f"reduce({self.op}, axis={ax}): one block per output"
        if p.layout != "block_rows" or not self.sym:    # (symbolic: no output, no block)
            grid = ir.Math("max", (grid, lit(1, idx)), idx)
        return one_kernel(self.k, params, body, p.threads, self.idx, what, grid, self.sites.as_tuple(),
                          f"{what} (reduce: {p.describe()})", self.sym)
