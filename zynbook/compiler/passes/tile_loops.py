"""Tile values as loops: a kernel body with tile-valued expressions rewritten into scalar
statements over block arrays, with the reference executor's meaning (numpy's).

A block schedule runs the result: an element loop (parallel) is shared by the block's
threads, a loop that only accumulates is a block all-reduction, an array is block memory
(`SharedAlloc`). The rewriting, for the sizes of one launch:

* immutable tile lets that read no mutable variable are first inlined (tiles.py), so most
  tiles are computed element by element where they are used and need no memory;
* a tile that stays (a `var`, a let reading one, a matmul, a reduction along an axis) is an
  array of its capacity (its largest extents at these sizes) and its extents at run time
  (scalars): a slice is clipped to its axis as numpy clips, `zeros(...)`/`ones(...)` have
  extents 1 and broadcast, an axis of extent 1 broadcasts against any other;
* a reduction of a tile to a scalar (`sum`, `reduce`, `dot`) is an accumulation loop over
  the flattened elements, hoisted before the statement that uses it;
* a store of a tile writes each element of the (clipped) target it names;
* extents that must agree and are known only as the kernel runs (the inner sizes of a
  matmul, the axes of tiles combined elementwise, a tile and the slice it is stored in) are
  checked first (`cir.Check`): where they do not, the kernel reports the error the reference
  gives, never reading past a tile or a slice.

What cannot be written this way (a tile whose extents have no bound at launch, a matmul of
more than two axes) raises `TileRefusal` with the reason.
"""
from __future__ import annotations

from dataclasses import replace
from functools import reduce

from .. import affine, cir
from .loops import identity_value, static_value
from .tiles import inline_tile_lets

I32 = cir.Ty("i32")
BOOL = cir.Ty("bool")


class TileRefusal(Exception):
    """The tile values of a body cannot be written as loops over block arrays."""


def has_tile_values(body) -> bool:
    return any((isinstance(n, cir.Expr) and n.ty.shape) or
               (isinstance(n, cir.Store) and (not n.index or any(isinstance(i, cir.Span)
                                                                  for i in n.index)))
               or isinstance(n, (cir.Dot, cir.Reduce)) for n in cir.walk(body))


def tile_loops(kernel: cir.Kernel, sizes: dict) -> cir.Kernel:
    """`kernel` with every tile value written as scalar loops over block arrays."""
    lines: dict = {}
    body = inline_tile_lets(kernel.body, lines=lines)
    return replace(kernel, body=_Rewriter(kernel, sizes, lines).block(body))


# ------------------------------------------------------------------ small CIR helpers


def _i(v: int) -> cir.Const:
    return cir.Const(int(v), I32)


def _v(name: str) -> cir.Var:
    return cir.Var(name, I32)


def _is(e, value) -> bool:
    return isinstance(e, cir.Const) and not isinstance(e.value, bool) and e.value == value


def _add(a, b):
    return b if _is(a, 0) else a if _is(b, 0) else cir.Bin("+", a, b, I32)


def _mul(a, b):
    return b if _is(a, 1) else a if _is(b, 1) else cir.Bin("*", a, b, I32)


def _call(fn, *args):
    return cir.Call(fn, tuple(args), I32)


def _broadcast_extent(a, b):
    """numpy's extent of two axes that broadcast: the other where one is 1."""
    if _is(a, 1):
        return b
    if _is(b, 1) or a == b:
        return a
    return cir.Select(cir.Bin("==", a, _i(1), BOOL), b, a, I32)


def _axis_index(extent, i):
    """The index along an operand's axis of `extent` for position `i` of the broadcast."""
    if _is(extent, 1):
        return _i(0)
    if isinstance(extent, cir.Const):
        return i
    return cir.Select(cir.Bin("==", extent, _i(1), BOOL), _i(0), i, I32)


def _const(value, dtype: str) -> cir.Const:
    kind = bool if dtype == "bool" else float if dtype in cir.FLOAT_DTYPES else int
    return cir.Const(kind(value), cir.Ty(dtype))


def _identity(op: str, dtype: str) -> cir.Const:
    return _const(identity_value(op, dtype), dtype)


def _best_start(op: str, dtype: str) -> cir.Const:
    """An argmax's (argmin's) running best before its first value, which `_arg_step` always
    takes: the op's identity for floats, 0 for integers (an i64's identity, -2^63, is no
    value a device holding 64-bit integers in 32 bits, WebGPU, can keep)."""
    if dtype in cir.FLOAT_DTYPES:
        return _identity("max" if op == "argmax" else "min", dtype)
    return _const(0 if dtype != "bool" else False, dtype)


def _arg_step(op: str, best: str, at: str, vty: cir.Ty, v, pos, line: int) -> cir.If:
    """One step of an argmax (argmin): `v` at `pos` becomes the running best where it is
    the first value, the first NaN, or beyond the best, as numpy's."""
    bool_, b = cir.Ty("bool"), cir.Var(best, vty)
    better = cir.Bin("or", cir.Bin("and", cir.Bin("!=", v, v, bool_), cir.Bin("==", b, b, bool_),
                                   bool_),
                     cir.Bin(">" if op == "argmax" else "<", v, b, bool_), bool_)
    first = cir.Bin("==", cir.Var(at, I32), cir.Const(-1, I32), bool_)
    return cir.If(cir.Bin("or", first, better, bool_),
                  (cir.Assign(best, v, line), cir.Assign(at, pos, line)), (), line)


def _combine(op: str, acc: cir.Expr, v: cir.Expr) -> cir.Expr:
    return cir.Call(op, (acc, v), acc.ty) if op in ("max", "min") else cir.Bin(op, acc, v, acc.ty)


# the operand fields of the elementwise expressions: a tile of them broadcasts its operands
_ELEMENTWISE = {cir.Bin: ("left", "right"), cir.Unary: ("operand",), cir.Cast: ("operand",),
                cir.Select: ("cond", "if_true", "if_false"), cir.Call: ("args",)}


def _operands(e) -> list:
    return [o for f in _ELEMENTWISE[type(e)] for o in (e.args if f == "args" else (getattr(e, f),))]


def _with_operands(e, fn):
    """Elementwise expression `e` with `fn` applied to each of its operands."""
    return replace(e, **{f: tuple(map(fn, e.args)) if f == "args" else fn(getattr(e, f))
                         for f in _ELEMENTWISE[type(e)]})


class _Tile:
    """A tile held in a block array: its name, dtype, capacity (ints) and extents."""

    def __init__(self, array: str, dtype: str, cap: tuple, exts: tuple):
        self.array, self.dtype, self.cap, self.exts = array, dtype, cap, exts


# --------------------------------------------------------------------- the rewriting


class _Rewriter:
    def __init__(self, kernel: cir.Kernel, sizes: dict, lines: dict):
        self.sizes = {k: int(v) for k, v in sizes.items()}
        self.lines = lines              # id(inlined value) -> (value, its let's line)
        self.shapes = {b.name: tuple(b.shape) for b in list(kernel.inputs) + [kernel.output]}
        self.dtypes = {b.name: b.dtype for b in list(kernel.inputs) + [kernel.output]}
        self.tiles: list = [{}]         # scopes: CIR name -> _Tile
        self.n = 0
        self.dims = set(kernel.dims)
        self.guarded = 0                # how many ifs the statement rewritten sits under

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"%{stem}{self.n}"       # no ZynML name can meet it

    def tile(self, name):
        return next((s[name] for s in reversed(self.tiles) if name in s), None)

    # ---- shapes: rank, capacity, extents ------------------------------------------

    def dim(self, d) -> cir.Expr:
        if isinstance(d, int):
            return _i(d)
        if isinstance(d, str):
            return _v(d)
        return d

    def bound(self, d) -> int | None:
        """The largest value of dimension `d` at these sizes (None: no bound)."""
        if isinstance(d, (int, str)):
            return cir.eval_dim(d, self.sizes)
        v = static_value(d, self.sizes)
        if v is not None:
            return int(v)
        if isinstance(d, cir.Call) and d.fn == "min":
            got = [b for b in (self.bound(a) for a in d.args) if b is not None]
            return min(got) if got else None
        return None

    def span_length(self, span: cir.Span) -> int | None:
        """The most elements slice `span` names at these sizes: `a:a+c` and `a:min(a+c, n)`
        name c."""
        return self.bound(affine.sub(span.stop, span.start))

    def is_tile(self, e) -> bool:
        if isinstance(e, cir.Load):
            return e.buffer in self.shapes and (
                len(e.index) < len(self.shapes[e.buffer]) or
                any(isinstance(i, cir.Span) for i in e.index))
        if isinstance(e, cir.Var):
            return self.tile(e.name) is not None
        # an expression of a var typed as the number it started as (`f16(m)` of `var m =
        # -inf`, a row once `m = max(m, row_max(S))`) is a tile where the var is one
        return bool(e.ty.shape) or type(e) in _ELEMENTWISE and \
            not (isinstance(e, cir.Call) and e.fn in cir.TILE_FUNCTIONS) and \
            any(self.is_tile(o) for o in _operands(e))

    def span_parts(self, span: cir.Span, size):
        """(clipped start, extent) of a slice of an axis of `size`, as numpy clips."""
        n = self.dim(size)
        start = _call("min", _call("max", span.start, _i(0)), n)
        stop = _call("min", _call("max", span.stop, start), n)
        return start, cir.Bin("-", stop, start, I32)

    def view(self, buffer: str, index: tuple):
        """(capacity, extents, index builder) of the part of `buffer` that `index` names."""
        shape = self.shapes[buffer]
        cap, exts, parts = [], [], []
        for k, ix in enumerate(index):
            if isinstance(ix, cir.Span):
                start, ext = self.span_parts(ix, shape[k])
                length = self.span_length(ix)
                size = cir.eval_dim(shape[k], self.sizes)
                cap.append(min(size, length) if length is not None else size)
                exts.append(ext)
                parts.append(("span", start))
            else:
                parts.append(("at", ix))
        for d in shape[len(index):]:
            cap.append(cir.eval_dim(d, self.sizes))
            exts.append(self.dim(d))
            parts.append(("span", _i(0)))

        def at(idx):
            it = iter(idx)
            return tuple(_add(p, next(it)) if kind == "span" else p for kind, p in parts)
        return tuple(max(c, 0) for c in cap), tuple(exts), at

    def shape(self, e):
        """(capacity, extents) of tile expression `e`."""
        if isinstance(e, cir.Load):
            cap, exts, _ = self.view(e.buffer, e.index)
            return cap, exts
        if isinstance(e, cir.Var):
            t = self.tile(e.name)
            return ((), ()) if t is None else (t.cap, t.exts)
        if not self.is_tile(e):
            return (), ()
        if isinstance(e, cir.Call) and e.fn in ("zeros", "ones"):
            return (1,) * len(e.args), (_i(1),) * len(e.args)
        if isinstance(e, cir.Call) and e.fn == "transpose":
            cap, exts = self.shape(e.args[0])
            return cap[:-2] + cap[-2:][::-1], exts[:-2] + exts[-2:][::-1]
        if isinstance(e, cir.Call) and e.fn in ("row_max", "row_sum"):
            cap, exts = self.shape(e.args[0])
            return cap[:-1] + (1,), exts[:-1] + (_i(1),)
        if isinstance(e, cir.Reduce):
            cap, exts = self.shape(e.input)
            ax = e.axis % len(cap)
            return cap[:ax] + cap[ax + 1:], exts[:ax] + exts[ax + 1:]
        if isinstance(e, cir.Bin) and e.op == "@":
            (ca, ea), (cb, eb) = self.shape(e.left), self.shape(e.right)
            if len(ca) != 2 or len(cb) != 2:
                raise TileRefusal("a matmul of tiles of other than two axes")
            return (ca[0], cb[1]), (ea[0], eb[1])
        if type(e) not in _ELEMENTWISE:
            raise TileRefusal(f"a tile expression {cir.format_expr(e)}")
        return self.broadcast([self.shape(o) for o in _operands(e)])

    @staticmethod
    def broadcast(shapes):
        rank = max(len(c) for c, _ in shapes)
        cap, exts = [1] * rank, [_i(1)] * rank
        for c, x in shapes:
            for k in range(len(c)):
                pos = rank - len(c) + k
                cap[pos] = max(cap[pos], c[k])
                exts[pos] = _broadcast_extent(exts[pos], x[k])
        return tuple(cap), tuple(exts)

    # ---- checks: extents that must agree ------------------------------------------

    @staticmethod
    def check(kind: str, a, b, out: list, line: int):
        """A cir.Check of extents `a` and `b` appended to `out`, unless they agree whatever
        the sizes (the same expression, numbers that fit, a 1 that broadcasts)."""
        if a == b or (kind != "@" and _is(a, 1)) or (kind == "broadcast" and _is(b, 1)):
            return
        out.append(cir.Check(kind, a, b, line))

    def nonempty(self, op: str, exts, out: list, line: int):
        """Checks, appended to `out`, that an argmin/argmax's extents `exts` are not 0 (of
        nothing there is no index, as numpy's argmax of an empty sequence): unless it is a
        number, or of sizes alone where no `if` guards it (dims.solve refused an empty one at
        the launch). (`sizes` may be a pattern's, not the launch's.)"""
        for ext in exts:
            if isinstance(ext, cir.Const) and ext.value >= 1 or not self.guarded and all(
                    isinstance(n, cir.Const) or isinstance(n, cir.Var) and n.name in self.dims
                    or not isinstance(n, (cir.Var, cir.Load)) for n in cir.walk(ext)):
                continue
            out.append(cir.Check(op, ext, _i(1), line))

    def line_of(self, e, line: int) -> int:
        """The line that wrote `e`: its let's where `e` is an inlined let's value."""
        hit = self.lines.get(id(e))
        return hit[1] if hit is not None and hit[0] is e else line

    def fits(self, e, out: list, line: int):
        """Checks, appended to `out`, that the tiles elementwise expression `e` combines
        broadcast together (tiles computed before and held in arrays were checked where
        they were made)."""
        line = self.line_of(e, line)
        if not self.is_tile(e) or isinstance(e, (cir.Load, cir.Var)) or type(e) not in _ELEMENTWISE:
            if isinstance(e, cir.Call) and e.fn == "transpose":
                self.fits(e.args[0], out, line)
            return
        tiles = [o for o in _operands(e) if self.is_tile(o)]
        for o in tiles:
            self.fits(o, out, line)
        if len(tiles) < 2:
            return
        exts = [self.shape(o)[1] for o in tiles]
        rank = max(len(x) for x in exts)
        acc = [_i(1)] * rank
        for x in exts:
            for k in range(len(x)):
                pos = rank - len(x) + k
                self.check("broadcast", acc[pos], x[k], out, line)
                acc[pos] = _broadcast_extent(acc[pos], x[k])

    # ---- elements ----------------------------------------------------------------

    def operand_at(self, operand, rank: int, idx: tuple, outer: tuple = ()) -> cir.Expr:
        """The element of `operand` (broadcast against a tile of `rank` axes, of extents
        `outer` where known) at `idx`; an axis of the same extent as the outer one takes
        the index as it is (a loop over an operand's own extents passes them: its index
        needs no `extent == 1` select, which bounds.py cannot prove in range)."""
        if not self.is_tile(operand):
            return operand
        _, exts = self.shape(operand)
        pos = rank - len(exts)
        sub = tuple(i if outer and x == outer[pos + k] else _axis_index(x, i)
                    for k, (x, i) in enumerate(zip(exts, idx[pos:])))
        return self.elem(operand, sub)

    def elem(self, e, idx: tuple) -> cir.Expr:
        """The scalar element of elementwise tile expression `e` at position `idx`."""
        if not self.is_tile(e):
            return e
        dt = cir.Ty(e.ty.dtype)
        rank = len(idx)
        exts = self.shape(e)[1]
        at = lambda o: self.operand_at(o, rank, idx, exts)
        if isinstance(e, cir.Load):
            _, _, where = self.view(e.buffer, e.index)
            at_idx = where(idx)     # (where each index is written: an error points there)
            return cir.Load(e.buffer, at_idx, cir.Ty(self.dtypes[e.buffer]),
                            e.spans[:len(at_idx)])
        if isinstance(e, cir.Var):
            t = self.tile(e.name)
            return cir.Load(t.array, idx, cir.Ty(t.dtype))
        if isinstance(e, cir.Call) and e.fn in ("zeros", "ones"):
            return _const(0 if e.fn == "zeros" else 1, e.ty.dtype)
        if isinstance(e, cir.Call) and e.fn == "transpose":
            return self.elem(e.args[0], idx[:-2] + idx[-2:][::-1])
        if type(e) not in _ELEMENTWISE or (isinstance(e, cir.Call) and e.fn in cir.TILE_FUNCTIONS):
            raise TileRefusal(f"a tile expression {cir.format_expr(e)}")
        return replace(_with_operands(e, at), ty=dt)

    # ---- element loops -------------------------------------------------------------

    def over(self, exts: tuple, body_at, line: int, parallel: bool = True) -> list:
        """A loop over the flattened positions of `exts` running `body_at(idx) -> stmts`."""
        flat = self.fresh("e")
        lets, names, rem = [], [], _v(flat)
        for k in range(len(exts) - 1, 0, -1):
            n, q = self.fresh("x"), self.fresh("q")
            lets += [cir.Let(n, cir.Bin("%", rem, exts[k], I32), False, line),
                     cir.Let(q, cir.Bin("/", rem, exts[k], I32), False, line)]
            names.append(_v(n))
            rem = _v(q)
        idx = ((rem,) if exts else ()) + tuple(reversed(names))
        body = tuple(lets) + tuple(body_at(idx))
        return [cir.Loop(flat, _i(0), reduce(_mul, exts, _i(1)), _i(1), body, parallel, line)]

    def extent_lets(self, exts: tuple, line: int, mutable: bool = False):
        """Extents as locals (computed once; `mutable`: a tile variable's, which an
        assignment changes): (statements, the locals)."""
        out, names = [], []
        for x in exts:
            if isinstance(x, cir.Const) and not mutable:
                names.append(x)
                continue
            n = self.fresh("n")
            out.append(cir.Let(n, x, mutable, line))
            names.append(_v(n))
        return out, tuple(names)

    def new_array(self, dtype: str, cap: tuple, exts: tuple, line: int, mutable=False):
        """(statements, _Tile) of a block array of capacity `cap` holding extents `exts`."""
        stmts, names = self.extent_lets(exts, line, mutable)
        arr = self.fresh("tile")
        # bf16 values are held in f32 until stored into a tensor or converted: a tile of
        # them (a flash attention's running output) is not rounded at each step
        held = "f32" if dtype == "bf16" else dtype
        stmts.insert(0, cir.SharedAlloc(arr, tuple(max(c, 1) for c in cap), held, line))
        return stmts, _Tile(arr, held, cap, names)

    def fill(self, t: _Tile, value, line: int) -> list:
        """`t`'s elements (over its extents) set to `value` broadcast."""
        rank = len(t.cap)
        return self.over(t.exts, lambda idx: [cir.Store(t.array, idx, self.operand_at(
            value, rank, idx), line)], line)

    # ---- hoisting: what is not elementwise, computed before the statement -----------

    def hoist(self, e, out: list, line: int):
        """`e` with its reductions, matmuls and dots computed into locals and arrays by
        statements appended to `out`."""
        if isinstance(e, (cir.Const, cir.Var)) or not isinstance(e, cir.Expr):
            return e
        line = self.line_of(e, line)
        if isinstance(e, cir.Load):
            return cir.Load(e.buffer, self.hoist_index(e.index, out, line), e.ty, e.spans)
        if isinstance(e, cir.Dot):
            a, b = self.hoist(e.a, out, line), self.hoist(e.b, out, line)
            # an f16 dot as numpy's: f32 products summed in f32, rounded once
            dt = "f32" if e.ty.dtype == "f16" else e.ty.dtype
            shape = a.ty.shape or b.ty.shape or ("?",)
            if dt != e.ty.dtype:
                a, b = cir.Cast(a, cir.Ty(dt, a.ty.shape)), cir.Cast(b, cir.Ty(dt, b.ty.shape))
            total = self.reduce_all("+", cir.Bin("*", a, b, cir.Ty(dt, shape)), dt, out, line)
            return total if dt == e.ty.dtype else cir.Cast(total, e.ty)
        if isinstance(e, cir.Call) and e.fn == "sum":
            return self.reduce_all("+", self.hoist(e.args[0], out, line), e.ty.dtype, out, line)
        if isinstance(e, cir.Reduce):
            src = self.hoist(e.input, out, line)
            if not self.is_tile(src):
                return cir.Const(0, e.ty) if e.op in ("argmax", "argmin") else src
            if e.op in ("argmax", "argmin"):
                if e.axis is not None and len(self.shape(src)[0]) > 1:
                    return self.arg_axis(e.op, src, e.axis, e.ty.dtype, out, line)
                return self.arg_all(e.op, src, e.ty.dtype, out, line)
            if e.axis is None:
                return self.reduce_all(e.op, src, e.ty.dtype, out, line)
            return self.reduce_axis(e.op, src, e.axis, e.ty.dtype, out, line)
        if isinstance(e, cir.Call) and e.fn in ("row_max", "row_sum"):
            src = self.hoist(e.args[0], out, line)
            return self.reduce_axis("max" if e.fn == "row_max" else "+", src, -1, e.ty.dtype,
                                    out, line, keep=True)
        if isinstance(e, cir.Bin) and e.op == "@":
            return self.matmul(self.hoist(e.left, out, line), self.hoist(e.right, out, line),
                               e.ty.dtype, out, line)
        return _with_operands(e, lambda o: self.hoist(o, out, line))

    def hoist_index(self, index: tuple, out: list, line: int) -> tuple:
        return tuple(cir.Span(self.hoist(i.start, out, line), self.hoist(i.stop, out, line))
                     if isinstance(i, cir.Span) else self.hoist(i, out, line) for i in index)

    def reduce_all(self, op: str, src, dtype: str, out: list, line: int) -> cir.Var:
        """A local holding `op` over every element of tile `src`."""
        self.fits(src, out, line)
        _, own = self.shape(src)
        ex_stmts, exts = self.extent_lets(own, line)
        out += ex_stmts
        acc = self.fresh("acc")
        # an f16 product is taken in f32 and rounded once, as the reference's (numpy's
        # prod of f16); each step rounded to f16 lost digits past the normal range (an f16
        # sum is summed in f32 where it is lowered: `acc += x`)
        ty = cir.Ty("f32" if op == "*" and dtype == "f16" else dtype)
        out.append(cir.Let(acc, _identity(op, ty.dtype), True, line))
        rank = len(exts)
        out += self.over(exts, lambda idx: [cir.Assign(acc, _combine(op, cir.Var(acc, ty), cir.Cast(
            self.operand_at(src, rank, idx, own), ty)), line)], line, parallel=False)
        return cir.Var(acc, ty) if ty.dtype == dtype else cir.Cast(cir.Var(acc, ty), cir.Ty(dtype))

    def arg_all(self, op: str, src, dtype: str, out: list, line: int) -> cir.Var:
        """A local holding the flat (row-major) position of the largest (argmax) or smallest
        element of tile `src`: the first NaN, else the first of equal extremes, as numpy's
        (of an empty tile none: `nonempty` checks first)."""
        self.fits(src, out, line)
        _, own = self.shape(src)
        self.nonempty(op, own, out, line)
        ex_stmts, exts = self.extent_lets(own, line)
        out += ex_stmts
        vty = cir.Ty(src.ty.dtype)
        best, at = self.fresh("best"), self.fresh("at")
        out += [cir.Let(best, _best_start(op, vty.dtype), True, line),
                cir.Let(at, cir.Const(-1, I32), True, line)]     # -1: of nothing
        rank = len(exts)

        def body(idx):
            flat = idx[0]
            for k in range(1, rank):
                flat = cir.Bin("+", cir.Bin("*", flat, exts[k], I32), idx[k], I32)
            return [_arg_step(op, best, at, vty, self.operand_at(src, rank, idx, own), flat,
                              line)]
        out += self.over(exts, body, line, parallel=False)
        # counted in i32 (a tile's positions fit), which every device spells
        return cir.Cast(cir.Var(at, I32), cir.Ty(dtype))

    def arg_axis(self, op, src, axis, dtype, out, line) -> cir.Expr:
        """A tile array holding, for each position of the other axes, the position along
        `axis` of `src`'s largest (argmax) or smallest element, by arg_all's rule."""
        self.fits(src, out, line)
        cap, exts = self.shape(src)
        ax = axis % len(cap)
        self.nonempty(op, exts[ax:ax + 1], out, line)
        stmts, t = self.new_array("i32", cap[:ax] + cap[ax + 1:], exts[:ax] + exts[ax + 1:],
                                  line)
        out += stmts
        vty, rank = cir.Ty(src.ty.dtype), len(cap)

        def body(idx):
            best, at, k = self.fresh("best"), self.fresh("at"), self.fresh("k")
            v = self.operand_at(src, rank, idx[:ax] + (_v(k),) + idx[ax:])
            return [cir.Let(best, _best_start(op, vty.dtype), True, line),
                    cir.Let(at, cir.Const(-1, I32), True, line),
                    cir.Loop(k, _i(0), exts[ax], _i(1), (_arg_step(op, best, at, vty, v, _v(k),
                                                                   line),), False, line),
                    cir.Store(t.array, idx, cir.Var(at, I32), line)]
        out += self.over(t.exts, body, line)
        return cir.Cast(self.hold(t, "i32"), cir.Ty(dtype, tuple(t.cap)))

    def reduce_axis(self, op, src, axis, dtype, out, line, keep=False) -> cir.Var:
        """A tile array holding `op` along `axis` of `src` (kept as extent 1 or dropped)."""
        self.fits(src, out, line)
        cap, exts = self.shape(src)
        ax = axis % len(cap)
        rcap = cap[:ax] + ((1,) if keep else ()) + cap[ax + 1:]
        rexts = exts[:ax] + ((_i(1),) if keep else ()) + exts[ax + 1:]
        ty, rank = cir.Ty(dtype), len(cap)

        def term(idx, k):
            outer = idx[:ax] + (k,) + (idx[ax + 1:] if keep else idx[ax:])
            return cir.Cast(self.operand_at(src, rank, outer, exts), ty)
        return self.accumulated(op, dtype, rcap, rexts, exts[ax], term, out, line)

    def matmul(self, a, b, dtype, out, line) -> cir.Var:
        (ca, ea), (cb, eb) = self.shape(a), self.shape(b)
        if len(ca) != 2 or len(cb) != 2:
            raise TileRefusal("a matmul of tiles of other than two axes")
        self.fits(a, out, line)
        self.fits(b, out, line)
        self.check("@", ea[1], eb[0], out, line)
        # f16 as numpy's matmul: f32 products summed in f32, rounded once where stored
        # (products rounded to f16 were up to 4 ulp off); bf16 is held in f32 already
        ty = cir.Ty("f32" if dtype == "f16" else dtype)

        def term(idx, k):
            # (b's rows are a's columns: checked equal above)
            return cir.Bin("*", cir.Cast(self.operand_at(a, 2, (idx[0], k), ea), ty),
                           cir.Cast(self.operand_at(b, 2, (k, idx[1]), eb), ty), ty)
        return self.accumulated("+", dtype, (ca[0], cb[1]), (ea[0], eb[1]), ea[1], term, out,
                                line, ty.dtype)

    def accumulated(self, op, dtype, cap, exts, length, term, out, line,
                    acc_dtype=None) -> cir.Var:
        """A tile array (capacity `cap`, extents `exts`) whose element at idx is `op` over
        k in 0..length of `term(idx, k)`, combined in `acc_dtype` (default `dtype`)."""
        stmts, t = self.new_array(dtype, cap, exts, line)
        out += stmts
        ty = cir.Ty(acc_dtype or dtype)

        def body(idx):
            acc, k = self.fresh("acc"), self.fresh("k")
            step = _combine(op, cir.Var(acc, ty), term(idx, _v(k)))
            total = cir.Var(acc, ty)
            return [cir.Let(acc, _identity(op, ty.dtype), True, line),
                    cir.Loop(k, _i(0), length, _i(1), (cir.Assign(acc, step, line),), False,
                             line),
                    cir.Store(t.array, idx, total if ty.dtype == dtype else
                              cir.Cast(total, cir.Ty(dtype)), line)]
        out += self.over(t.exts, body, line)
        return self.hold(t, dtype)

    def hold(self, t: _Tile, dtype: str) -> cir.Var:
        """A name for tile array `t` in the current scope."""
        name = self.fresh("t")
        self.tiles[-1][name] = t
        return cir.Var(name, cir.Ty(dtype, tuple(t.cap)))

    # ---- statements ----------------------------------------------------------------

    def block(self, body) -> tuple:
        self.tiles.append({})          # (a refusal ends the rewriting: no pop needed then)
        out: list = []
        for s in body:
            out += self.stmt(s)
        self.tiles.pop()
        return tuple(out)

    def stmt(self, s) -> list:
        line = getattr(s, "line", 0)
        pre: list = []
        if isinstance(s, cir.SharedAlloc) and not s.name.startswith("%"):
            # a shared array of the user's: its slices are tiles as an input's are
            # (`sum(buf[a:a+3])`, `buf[0:C] = x[a, 0] * 3.0`), read and written element
            # by element
            self.shapes[s.name] = tuple(s.shape)
            self.dtypes[s.name] = s.dtype
            return [s]
        if isinstance(s, cir.Let):
            value = self.hoist(s.value, pre, line)
            if not self.is_tile(value) and not s.declared_ty.shape:
                return pre + [replace(s, value=value)]
            return pre + self.let_tile(s, value)
        if isinstance(s, cir.Assign):
            value = self.hoist(s.value, pre, line)
            t = self.tile(s.name)
            if t is None:
                return pre + [replace(s, value=value)]
            return pre + self.assign_tile(t, value, line)
        if isinstance(s, cir.Store):
            value = self.hoist(s.value, pre, line)
            return pre + self.store(s.buffer, self.hoist_index(s.index, pre, line), value, line)
        if isinstance(s, cir.Loop):
            start, stop, step = (self.hoist(x, pre, line) for x in (s.start, s.stop, s.step))
            return pre + [cir.Loop(s.var, start, stop, step, self.block(s.body), s.parallel, line)]
        if isinstance(s, cir.If):
            cond = self.hoist(s.cond, pre, line)
            self.guarded += 1
            then, orelse = self.block(s.then), self.block(s.orelse)
            self.guarded -= 1
            return pre + [cir.If(cond, then, orelse, line)]
        if isinstance(s, cir.Atomic):
            value = self.hoist(s.value, pre, line)
            if self.is_tile(value):
                raise TileRefusal("an atomic update with a tile value")
            return pre + [replace(s, value=value)]
        if isinstance(s, cir.Yield):
            # a number made from tiles (`yield sum(x[i])`) is yielded after its loops
            value = self.hoist(s.value, pre, line)
            index = None if s.index is None else self.hoist(s.index, pre, line)
            if self.is_tile(value) or (index is not None and self.is_tile(index)):
                raise TileRefusal("a yield of a tile")
            return pre + [replace(s, value=value, index=index)]
        return [s]

    def let_tile(self, s: cir.Let, value) -> list:
        checks: list = []
        self.fits(value, checks, s.line)
        cap, exts = self.shape(value)
        declared = tuple(self.bound(d) for d in s.declared_ty.shape)
        if any(d is None for d in declared):
            raise TileRefusal(f"tile `{s.name}` has no bound at these sizes ({s.declared_ty})")
        if len(declared) >= len(cap):   # a `var` later assigned a tile of more axes
            pad = len(declared) - len(cap)
            cap = tuple(max(c, d) for c, d in zip((1,) * pad + cap, declared))
            exts = (_i(1),) * pad + exts
        dtype = s.declared_ty.dtype
        stmts, t = self.new_array(dtype, cap, exts, s.line, s.mutable)
        stmts += self.fill(t, value, s.line)
        self.tiles[-1][s.name] = t
        return checks + stmts

    def assign_tile(self, t: _Tile, value, line: int) -> list:
        """`t = value` through a second array (the value may read `t` anywhere), then the
        extents updated."""
        checks: list = []
        self.fits(value, checks, line)
        cap, exts = self.shape(value)
        pad = len(t.cap) - len(cap)         # a value of fewer axes broadcasts
        cap, exts = (1,) * pad + cap, (_i(1),) * pad + exts
        if pad < 0 or any(c > k for c, k in zip(cap, t.cap)):
            raise TileRefusal("a tile variable assigned a larger tile than it was declared")
        stmts, tmp = self.new_array(t.dtype, t.cap, exts, line)
        stmts += self.fill(tmp, value, line)
        stmts += self.over(tmp.exts, lambda idx: [cir.Store(t.array, idx, cir.Load(
            tmp.array, idx, cir.Ty(t.dtype)), line)], line)
        # a tile variable's extents are locals (`let_tile`): they take the value's
        stmts += [cir.Assign(old.name, new, line) for old, new in zip(t.exts, tmp.exts)]
        return checks + stmts

    def store(self, buffer: str, index: tuple, value, line: int) -> list:
        shape = self.shapes.get(buffer)
        if shape is None:               # a shared array of the user's: element by element
            if self.is_tile(value):
                raise TileRefusal(f"a tile stored into shared array `{buffer}`")
            return [cir.Store(buffer, index, value, line)]
        _, exts, where = self.view(buffer, index)
        if not exts:
            if self.is_tile(value):
                value = self.elem(value, (_i(0),) * len(self.shape(value)[0]))
            return [cir.Store(buffer, index, value, line)]
        rank = len(exts)
        if self.is_tile(value) and len(self.shape(value)[0]) > rank:
            raise TileRefusal(f"a tile of more axes than the part of `{buffer}` it is stored in")
        stmts, names = self.extent_lets(exts, line)
        if self.is_tile(value):
            self.fits(value, stmts, line)
            vexts = self.shape(value)[1]
            for x, n in zip(vexts, exts[rank - len(vexts):]):    # (the expressions: equal
                self.check("store", x, n, stmts, line)            # ones need no check)
        return stmts + self.over(names, lambda idx: [cir.Store(
            buffer, where(idx), self.operand_at(value, rank, idx), line)], line)
