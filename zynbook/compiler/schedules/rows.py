"""The rows schedule: row kernels (softmax, layer norm, RMS norm, residual + norm, ...).

A row kernel is, per iteration of its parallel loops (a row), scalar statements and loops
over the row's `cols` elements that either write the row element by element or only
accumulate into scalars declared before them (`passes/loops.classify_loop`). Each row runs on
one warp (short rows: `rows_per_block` rows a block, no block barrier) or one block; thread
t takes elements t, t + T, ... (`width` consecutive ones each: vector accesses). The row's
elements are read once into the thread's registers (a local array per row the body reads)
and every later loop reads them there: one pass over memory. An accumulation is a partial
per thread, then a warp collective or a block all-reduction, combined with the variable's
value before the loop (so `var s = 1.0` counts its 1 once).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import (DTYPE_BYTES, ScalarLowering, buffer_params, cast, compute_dtype,
                             index_dtype, user_name)
from ..passes.loops import (assigned_vars, classify_loop, counts_from_zero, declared_vars,
                            has_node, has_tiles, stored_buffers, trip_count)
from .base import Builder, Params, Schedule, one_kernel, workgroup_threads
from .collective import fold_partials, partials
from .nest import decompose, parallel_nest, thread
from .vector import contiguous_in

REGISTERS = 64              # cached elements a thread may hold


@dataclass(frozen=True)
class RowsParams(Params):
    threads: int = 256          # threads per row (the warp size: a warp per row)
    rows_per_block: int = 1
    per_thread: int = 1         # vectors of `width` elements each thread holds
    width: int = 1              # consecutive elements a thread reads at once


@dataclass
class RowPlan:
    nest: object
    cols: int
    loops: list                 # the row loops, in order
    kinds: dict                 # id(loop) -> "independent" | ("reduction", {acc: op})
    keys: list                  # cached (buffer, leading index), in first-use order
    first_use: dict             # key -> id(loop) that reads it first


def row_key(e: cir.Load, var: str):
    """(buffer, leading index) when `e` reads element `var` of a contiguous row, else None."""
    return (e.buffer, tuple(e.index[:-1])) if contiguous_in(e, var) else None


def match_rows(kernel, sizes) -> tuple:
    """(RowPlan, None) for a row kernel, else (None, why not)."""
    nest = parallel_nest(kernel.body, sizes)
    if not nest.loops:
        return None, "no parallel loop over rows"
    if has_tiles(nest.body):
        return None, "tile values"
    if has_node(nest.body, (cir.SharedAlloc, cir.Barrier, cir.Yield, cir.Atomic, cir.Dot,
                            cir.Reduce)):
        return None, "shared arrays, barriers, atomics or reductions of tiles"
    written = stored_buffers(nest.body)
    if written != {kernel.output.name}:
        return None, "it writes something other than `out`"
    if any(isinstance(n, cir.Load) and n.buffer in written for n in cir.walk(nest.body)):
        return None, "it reads what it writes"
    cols, loops, kinds, keys, first_use, mutable = None, [], {}, [], {}, set()
    for s in nest.body:
        if isinstance(s, cir.Let):
            if s.mutable:
                mutable.add(s.name)
            continue
        if isinstance(s, cir.Assign):
            continue
        if not isinstance(s, cir.Loop):
            return None, f"a {type(s).__name__} between the row loops"
        n = trip_count(s, sizes)
        if n is None or not counts_from_zero([s]):
            return None, "a row loop that is not 0..n"
        if cols not in (None, n):
            return None, "row loops of different lengths"
        cols = n
        if has_node(s.body, cir.Loop):
            return None, "a loop inside a row loop"
        for t in s.body:
            if isinstance(t, cir.Store):
                if t.value.ty.shape or row_key(cir.Load(t.buffer, t.index, t.value.ty), s.var) is None:
                    return None, "a store that is not element j of a row"
            elif isinstance(t, cir.If):
                if has_node(t, cir.Store):
                    return None, "a store under an if"
            elif not isinstance(t, (cir.Let, cir.Assign)):
                return None, f"a {type(t).__name__} in a row loop"
        if s.parallel and not (assigned_vars(s.body) - declared_vars(s.body)):
            kind = "independent"
        else:
            kind = classify_loop(s, mutable)
        if kind is None:
            return None, "a row loop that neither writes its elements nor only accumulates"
        kinds[id(s)] = kind
        loops.append(s)
        for ld in cir.walk(s.body):
            if isinstance(ld, cir.Load):
                key = row_key(ld, s.var)
                if key is not None and key not in first_use:
                    first_use[key] = id(s)
                    keys.append(key)
    if not loops:
        return None, "no loop over the row"
    if cols < 32:
        return None, f"rows of {cols} elements: a thread per row does better"
    return RowPlan(nest, cols, loops, kinds, keys, first_use), None


def _per_thread(cols: int, width: int, threads: int, nkeys: int):
    """The vectors of `width` each of `threads` threads holds of a row, or None where they
    pass the registers."""
    e = -(-(-(-cols // width)) // threads)
    return e if e * width * max(nkeys, 1) <= REGISTERS else None


def _halvings(width: int) -> list:
    """width, width / 2, ..., 1: a row of 16-byte vectors too long for the registers may
    still fit in 8- or 4-byte ones (f16 rows of 768 with four row inputs)."""
    return [width >> i for i in range(width.bit_length())]


def _layout(cols: int, width: int, nkeys: int, warp: int, max_threads: int):
    """The RowsParams of rows of `cols` read `width` at a time, or None (too many registers)."""
    vecs = -(-cols // width)
    if vecs <= warp * 4:                    # short rows: a warp each, no block barriers
        e = _per_thread(cols, width, warp, nkeys)
        return None if e is None else RowsParams(warp, max(1, 128 // warp), e, width)
    t = 64
    while t < -(-vecs // 4) and t < max_threads:
        t *= 2
    while True:
        e = _per_thread(cols, width, t, nkeys)
        if e is not None:
            return RowsParams(t, 1, e, width)
        if t >= max_threads:
            return None
        t *= 2


class Rows(Schedule):
    name = "rows"

    def why_not(self, kernel, target, sizes):
        if kernel.kernel_type.kind == "reduce":
            return "a reduce kernel"
        if getattr(target, "symbolic_sizes", False):
            return "rows need the sizes of the launch (the row length sets the layout)"
        if target.max_threads == 1 or not target.collectives or target.warp < 2:
            return "the target has no warp collectives"
        plan, why = match_rows(kernel, sizes)
        if plan is None:
            return why
        if plan.nest.total == 0:    # (its one block would read row 0)
            return "no rows"
        if self._fit(kernel, plan, target, sizes) is None:
            return f"rows of {plan.cols} elements are too long to hold in registers"
        return None

    def _fit(self, kernel, plan, target, sizes):
        every = {b.name: b for b in list(kernel.inputs) + [kernel.output]}
        rows = [every[b] for b in {k[0] for k in plan.keys} | {kernel.output.name}]
        widths = [DTYPE_BYTES[b.dtype] for b in rows]
        w = 16 // max(widths)
        # a row of a buffer whose last axis is not a multiple of w starts at an offset that is
        # not (x[b, j] for j in 0..256 of x [B, 257]): its vectors would be misaligned
        if w < 2 or w * min(widths) < 2 or plan.cols % w or any(
                _row_length(b, sizes) is None or _row_length(b, sizes) % w for b in rows):
            w = 1
        return next(filter(None, (_layout(plan.cols, width, len(plan.keys), target.warp, target.max_threads)
                                  for width in _halvings(w))), None)

    def default(self, kernel, target, sizes):
        """The layout by row length; a `@workgroup` of a power of two sets the threads of a
        row's block where the row still fits its registers."""
        plan, _ = match_rows(kernel, sizes)
        p = self._fit(kernel, plan, target, sizes)
        hint = workgroup_threads(kernel)
        if hint >= 64 and not hint & (hint - 1) and hint <= target.max_threads:
            e = _per_thread(plan.cols, p.width, hint, len(plan.keys))
            if e is not None:
                return RowsParams(hint, 1, e, p.width)
        return p

    def space(self, kernel, target, sizes):
        first = self.default(kernel, target, sizes)
        plan, _ = match_rows(kernel, sizes)
        out = [first]
        for width in sorted(_halvings(first.width)):
            for t in (target.warp, 64, 128, 256, 512, 1024):
                if t > target.max_threads:
                    continue
                e = _per_thread(plan.cols, width, t, len(plan.keys))
                if e is not None:
                    p = RowsParams(t, max(1, 128 // t) if t == target.warp else 1, e, width)
                    if p not in out:
                        out.append(p)
        return out

    def build(self, kernel, target, sizes, params: RowsParams) -> ir.Program:
        """The program; with vector accesses, also its `fallback` without them (for buffers
        whose base is not aligned), its error sites numbered with the program's."""
        sites = errflag.ErrorSites()
        prog = _Builder(kernel, target, sizes, params, sites).program()
        if params.width > 1:
            plan, _ = match_rows(kernel, sizes)
            prog.aligned = tuple(sorted(user_name(b) for b in {k[0] for k in plan.keys}
                                        | {kernel.output.name}))
            narrow = _layout(plan.cols, 1, len(plan.keys), target.warp, target.max_threads) or \
                RowsParams(params.threads, params.rows_per_block, params.per_thread * params.width, 1)
            prog.fallback = _Builder(kernel, target, sizes, narrow, sites, "_w1").program()
        prog.sites = sites.as_tuple()
        return prog


def _row_length(b, sizes: dict):
    """The length of the last axis of buffer `b` at these sizes, or None where they do not
    give it."""
    try:
        return cir.eval_dim(b.shape[-1], sizes)
    except (KeyError, TypeError, ValueError):
        return None


class _RowLowering(ScalarLowering):
    """Reads of a cached row element, inside a row loop, read the thread's registers."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.cache: dict = {}       # key -> local array name
        self.ctx = None             # (loop variable, slot expression) inside a row loop

    def load(self, e: cir.Load) -> ir.Expr:
        if self.ctx is not None:
            var, slot = self.ctx
            key = row_key(e, var)
            if key is not None and key in self.cache:
                dtype = self.buffers[e.buffer][1]
                return cast(ir.Load(self.cache[key], slot, dtype), compute_dtype(dtype))
        return super().load(e)


class _Builder(Builder):
    def __init__(self, kernel, target, sizes, params: RowsParams, sites, suffix: str = ""):
        self.k, self.t, self.p = kernel, target, params
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.plan, _ = match_rows(kernel, self.sizes)
        self.idx = index_dtype(kernel, self.sizes)
        self.sites = sites
        self.suffix = suffix
        self.low = _RowLowering(kernel, self.sizes, self.sites, self.idx)

    def chunks(self, body_of) -> ir.For:
        """for _k in 0..E: _c = (lane + _k * T) * W; [if _c < cols:] body_of(_c, _k)."""
        p, C = self.p, self.plan.cols
        c = ir.Ref("_c", self.idx)
        lane = thread("lane" if self.warp else "thread", self.idx)
        col = ir.Bin("*", ir.Bin("+", lane, ir.Bin("*", ir.Ref("_k", self.idx), self.i(p.threads),
                                                   self.idx), self.idx), self.i(p.width), self.idx)
        body = list(body_of(c, ir.Ref("_k", self.idx)))
        exact = (-(-C // p.width)) % p.threads == 0 and C % p.width == 0 and \
            p.per_thread * p.threads * p.width == C
        if not exact:
            body = [ir.If(ir.Bin("<", c, self.i(C), "bool"), tuple(body))]
        return ir.For("_k", self.i(0), self.i(p.per_thread), self.i(1),
                      (ir.Decl("_c", self.idx, col),) + tuple(body), self.idx, unroll=True)

    def program(self) -> ir.Program:
        p, plan, low = self.p, self.plan, self.low
        self.warp = p.threads == self.t.warp
        nest = plan.nest
        rows = nest.total
        idx = self.idx
        row = thread("block", idx)
        if self.warp:
            row = ir.Bin("+", ir.Bin("*", row, self.i(p.rows_per_block), idx),
                         thread("warp", idx), idx)
        body = [ir.Decl("_row", idx, row)]
        inner = list(low.stmts(nest.prologue))
        inner += decompose(low, nest.loops, nest.extents, ir.Ref("_row", idx), idx,
                           lambda k: self.new("r"))
        for s in nest.body:
            if not isinstance(s, cir.Loop):
                inner += low.stmts((s,))
                continue
            inner += self.row_loop(s)
        if self.warp:       # whole warps past the last row leave: no block barrier follows
            body.append(ir.If(ir.Bin("<", ir.Ref("_row", idx), self.i(rows), "bool"), tuple(inner)))
        else:
            body += inner
        threads = p.threads * (p.rows_per_block if self.warp else 1)
        who = (f"one warp per row, {p.rows_per_block} rows per block" if self.warp
               else f"one block of {p.threads} threads per row")
        what = (f"rows: {who} of ({', '.join(l.var for l in nest.loops)}); the row's {plan.cols} "
                f"elements held in registers ({p.per_thread} x {p.width} per thread"
                + (f", {p.width * max(DTYPE_BYTES[low.buffers[b][1]] for b in self.row_bufs())}"
                   "-byte vector loads" if p.width > 1 else "") + "), one pass over memory")
        grid = -(-rows // p.rows_per_block) if self.warp else rows
        return one_kernel(self.k, buffer_params(self.k, self.sizes, idx), body, threads, idx, what,
                          max(1, grid), self.sites.as_tuple(), f"{what} (rows: {p.describe()})",
                          suffix=self.suffix)

    def row_bufs(self):
        return {k[0] for k in self.plan.keys} | {self.k.output.name}

    def offset(self, buffer: str, lead: tuple, var: str):
        """Flat offset of `buffer[lead..., var]` with `var` bound to `_c` (proved in range)."""
        return self.low.flat(buffer, tuple(lead) + (cir.Var(var, cir.Ty("i32")),), store=False)[0]

    def row_loop(self, s: cir.Loop) -> list:
        p, plan, low = self.p, self.plan, self.low
        W, E = p.width, p.per_thread
        out: list = []
        # the thread's registers for the rows this loop reads first
        for key in plan.keys:
            if plan.first_use[key] != id(s):
                continue
            bname, lead = key
            arr = self.new("row")
            low.cache[key] = arr
            dtype = low.buffers[bname][1]
            out.append(ir.Array(arr, dtype, E * W, "local", s.line))
            src_ident = low.buffers[bname][0]

            def fill(c, k, bname=bname, lead=lead, arr=arr, dtype=dtype, src_ident=src_ident):
                return self.low.with_var(s.var, c, lambda: [ir.Copy(
                    arr, ir.Bin("*", k, self.i(W), self.idx), src_ident,
                    self.offset(bname, lead, s.var), W, dtype, s.line)])
            out.append(self.chunks(fill))
        kind = plan.kinds[id(s)]
        decls, parts = partials(low, kind[1] if isinstance(kind, tuple) else {}, self.new)
        out += decls
        stores = [t for t in s.body if isinstance(t, cir.Store)]

        def element(c, k):
            res: list = []
            vouts = {}
            if W > 1:
                for t in stores:
                    a = self.new("vout")
                    res.append(ir.Array(a, low.buffers[t.buffer][1], W, "local", t.line))
                    vouts[id(t)] = a
            for w in range(W):
                col = c if w == 0 else ir.Bin("+", c, self.i(w), self.idx)
                slot = ir.Bin("+", ir.Bin("*", k, self.i(W), self.idx), self.i(w), self.idx) \
                    if W > 1 else k
                low.ctx = (s.var, slot)
                low.scopes.append({acc: (part, dt) for acc, (part, op, dt, _) in parts.items()})

                try:
                    res += low.with_var(s.var, col,
                                        lambda w=w: low.lane_stmts(s.body, vouts, self.i(w)))
                finally:
                    low.scopes.pop()
                    low.ctx = None
            for t in stores if W > 1 else ():
                res += low.with_var(s.var, c, lambda t=t: [
                    low.copy_out(t, vouts[id(t)], self.i(0), W)])
            return res
        out.append(self.chunks(element))
        return out + fold_partials(self.t, parts, p.threads, self.warp)
