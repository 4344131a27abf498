"""Loops written out: a `For` of constant bounds as its iterations one after another, for
languages with no unroll hint (WGSL), so that register arrays are indexed by constants."""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .scalar import map_nodes


def constant_bounds(loop: ir.For) -> bool:
    return all(isinstance(e, ir.Lit) for e in (loop.start, loop.stop, loop.step))


def indexes_registers(loop: ir.For, registers: set) -> bool:
    """Whether `loop`'s variable is in the index of an access to one of the `registers`
    (local arrays): only such loops need writing out, and writing out the others (a GEMM's
    k step, say) would only multiply the program's size."""
    def uses_var(e) -> bool:
        return any(isinstance(n, ir.Ref) and n.name == loop.var for n in ir.walk(e))
    return any((isinstance(n, (ir.Load, ir.Store)) and n.array in registers and uses_var(n.index))
               or (isinstance(n, ir.Copy) and ((n.dst in registers and uses_var(n.dst_index))
                                               or (n.src in registers and uses_var(n.src_index))))
               for n in ir.walk(loop.body))


def written_out(loop: ir.For, memo: dict | None = None) -> list:
    """`loop` (of constant bounds) as its iterations one after another: the loop variable a
    constant in each, the locals each iteration declares renamed for it. `memo` (a dict the
    caller keeps while it holds the loops) gives the same list for the same loop object, so
    a printer that wrote every loop out to name its registers prints those very iterations,
    nested loops included, without writing them out again."""
    if memo is not None:
        kept = memo.get(id(loop))
        if kept is not None and kept[0] is loop:
            return kept[1]
        out = written_out(loop)
        memo[id(loop)] = (loop, out)
        return out
    declared = {n.name for n in ir.walk(loop.body) if isinstance(n, ir.Decl)}
    trips = range(loop.start.value, loop.stop.value, loop.step.value)
    out = []
    for k in trips:
        rename = {d: f"{d}_{k}" for d in declared} if len(trips) > 1 else {}
        out += [_substitute(st, {loop.var: ir.Lit(k, loop.dtype)}, rename) for st in loop.body]
    return out


def _substitute(node, values: dict, rename: dict):
    """`node` with the Refs named in `values` replaced and the locals in `rename` renamed."""
    def one(n):
        if isinstance(n, ir.Ref) and n.name in values:
            return values[n.name]
        if isinstance(n, (ir.Ref, ir.Decl, ir.Set, ir.Array)) and n.name in rename:
            n = replace(n, name=rename[n.name])
        # (an array's loads, stores and copies name it in these fields)
        moved = {f: rename[getattr(n, f)] for f in ("array", "dst", "src")
                 if isinstance(getattr(n, f, None), str) and getattr(n, f) in rename}
        return _folded(replace(n, **moved) if moved else n)
    return map_nodes(node, one)


_FOLD = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _folded(node):
    """An integer + - * of two constants (an index of a written-out iteration) as its value,
    x + 0, 0 + x, x * 1 and 1 * x as x."""
    if not (isinstance(node, ir.Bin) and node.op in _FOLD and node.dtype in ("i32", "i64")):
        return node
    a, b = node.a, node.b
    if isinstance(a, ir.Lit) and isinstance(b, ir.Lit):
        v = _FOLD[node.op](a.value, b.value)
        return ir.Lit(v, node.dtype) if -2 ** 31 <= v < 2 ** 31 else node
    if isinstance(b, ir.Lit) and b.value == (1 if node.op == "*" else 0):
        return a
    if isinstance(a, ir.Lit) and node.op != "-" and a.value == (1 if node.op == "*" else 0):
        return b
    return node


def writes_out(loop: ir.For, registers: set) -> bool:
    """Whether a printer for a language with no unroll hint writes `loop` out: a loop over
    registers, and a loop of one trip (its variable a constant, no loop left for the shader
    compiler to see through)."""
    if not constant_bounds(loop):
        return False
    trips = len(range(loop.start.value, loop.stop.value, loop.step.value))
    return trips == 1 or (loop.unroll and indexes_registers(loop, registers))


def all_written_out(body: tuple, registers: set, memo: dict | None = None) -> tuple:
    """`body` with every loop that `writes_out` written out, nested ones too (`memo`: as
    `written_out`'s)."""
    def loop(s: ir.For, inner) -> tuple:
        if writes_out(s, registers):
            return inner(written_out(s, memo))
        return (replace(s, body=inner(s.body)),)
    return ir.map_body(body, loop)


def register_name(array: str, k: int) -> str:
    return f"{array}_{k}"


def named_registers(body: tuple) -> set:
    """The local arrays of `body` (its register loops written out) that are only read and
    written element by element at constant indices: a printer declares each element as a
    variable of its own (a shader compiler may keep an array in memory, a variable it keeps
    in a register). An array named in any other way (a copy, an MMA operand) stays one."""
    nodes = list(ir.walk(body))
    arrays = {n.name: n.count for n in nodes if isinstance(n, ir.Array) and n.space == "local"}
    names = {v for n in nodes for v in vars(n).values() if isinstance(v, str)}
    keep = set(arrays)
    for n in nodes:
        if isinstance(n, ir.Array):
            continue
        if isinstance(n, (ir.Load, ir.Store)) and n.array in arrays:
            if not (isinstance(n.index, ir.Lit) and 0 <= n.index.value < arrays[n.array]):
                keep.discard(n.array)
            continue
        keep -= {v for v in vars(n).values() if isinstance(v, str)}
    return {a for a in keep if not any(register_name(a, k) in names for k in range(arrays[a]))}
