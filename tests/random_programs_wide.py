"""Random ZynML compute blocks over a wider part of the language than tests/random_programs.py,
for differential testing (tests/test_differential_wide.py).

`random_wide_program(rng)` builds one compute block from a seeded `random.Random`, of one of
these kinds:

- `int`: elementwise nests over integer inputs (i32, u32, i64, u8) with `+ - *`, `/` and `%`
  by divisors that are never zero, casts between the integer dtypes, comparisons, `and`/`or`/
  `not`, `where`, `min`/`max`/`abs`/`clamp`;
- `float`: f32 (and some f64) nests mixing integer and float inputs, with `where`, comparisons,
  bool logic, `min`/`max`/`abs`/`clamp` and math builtins on ranges where they are defined
  (`exp` of a clamped value, `log` and `sqrt` of a positive one, `pow` of a positive base);
- `shared`: a block kernel per row that fills a `shared var` array, waits at `barrier()` and
  reads it back in another order;
- `rowreduce`: `@kernel reduce(op, axis=1)` over rows (`+ max min argmax argmin`), with masks;
- `steps`: loops with steps 2 or 3 over odd trip counts, accumulating masked values;
- `tile`: rows and slices of rows (`x[i, a:b]`) combined elementwise, reduced with `sum`.

Every program is valid by construction: indices stay inside their axes, no integer division
by zero, no math builtin outside its domain, integer values small enough not to overflow
i32 (except where wrapping is the point: u8).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

SIZES = (1, 3, 7, 33, 100)
INT_DTYPES = ("i32", "u32", "i64", "u8")
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32,
      "i64": np.int64, "u8": np.uint8}


@dataclass
class WideProgram:
    source: str
    inputs: dict
    kind: str
    dtype: str                  # how results are compared: "int" (exact), "f32", "f64"
    features: set = field(default_factory=set)

    def __repr__(self):
        shapes = {k: (v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else v
                  for k, v in self.inputs.items()}
        return f"WideProgram({self.kind}, {self.dtype}, {shapes})\n{self.source}"


class _Expr:
    """Random expressions over element loads `name[idx]` of the inputs."""

    def __init__(self, rng: random.Random, loads: dict, features: set):
        self.rng = rng
        self.loads = loads            # dtype -> [load text]
        self.features = features

    def leaf(self, kind: str) -> str:
        r = self.rng
        pool = self.loads.get(kind) or [x for v in self.loads.values() for x in v]
        if r.random() < 0.8:
            return r.choice(pool)
        return str(r.randint(1, 5)) if kind != "float" else r.choice(["0.5", "1.5", "2.0"])

    def ints(self, depth: int) -> str:
        """An integer expression with small values (|v| < 2^20)."""
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            return self.leaf(r.choice(["i32", "u32", "i64", "u8"]))
        a = self.ints(depth - 1)
        op = r.random()
        if op < 0.3:
            b = self.ints(depth - 1)
            o = r.choice(["+", "-"])
            self.features.add(f"int {o}")
            return f"({a} {o} {b})"
        if op < 0.4:
            self.features.add("int *")
            # a negative factor negates the product: a negative literal beside an unsigned
            # value is out of its bounds (numpy's OverflowError, a ZynML type error)
            k = r.randint(-3, 3)
            return f"({a} * {k})" if k >= 0 else f"(-({a} * {-k}))"
        if op < 0.55:
            b = self.ints(depth - 1)
            o = r.choice(["/", "%"])
            self.features.add(f"int {o}")
            return f"({a} {o} (abs(i32({b}) % 5) + 1))"
        if op < 0.65:
            t = r.choice(["i32", "i64", "u8", "u32"])
            self.features.add(f"cast {t}")
            if t in ("u8", "u32"):
                # an unsigned cast of a small value, back to signed before it meets others
                return f"i32({t}(abs({a}) % 200))"
            return f"{t}({a})"
        if op < 0.8:
            b = self.ints(depth - 1)
            self.features.add("where")
            return f"where({self.cond('int', depth - 1)}, {a}, {b})"
        if op < 0.9:
            b = self.ints(depth - 1)
            f = r.choice(["min", "max"])
            self.features.add(f)
            return f"{f}({a}, {b})"
        f = r.choice(["abs", "clamp"])
        self.features.add(f)
        return f"abs({a})" if f == "abs" else f"clamp({a}, -7, 9)"

    def cond(self, kind: str, depth: int) -> str:
        r = self.rng
        side = self.ints if kind == "int" else self.floats
        a, b = side(max(depth, 0)), side(max(depth - 1, 0))
        c = f"{a} {r.choice(['<', '<=', '>', '>=', '==', '!='])} {b}"
        self.features.add("comparison")
        pick = r.random()
        if pick < 0.2:
            self.features.add("not")
            return f"(not ({c}))"
        if pick < 0.45:
            d = f"{side(0)} {r.choice(['<', '>'])} {side(0)}"
            self.features.add("and/or")
            return f"({c} {r.choice(['and', 'or'])} {d})"
        return f"({c})"

    def floats(self, depth: int) -> str:
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            pick = r.random()
            if pick < 0.2 and self.loads.get("int"):
                self.features.add("int in float")
                return f"float({r.choice(self.loads['int'])})"
            return self.leaf("float")
        a = self.floats(depth - 1)
        op = r.random()
        if op < 0.3:
            b = self.floats(depth - 1) if r.random() < 0.7 else r.choice(self.loads["int"])
            o = r.choice(["+", "-", "*"])
            if not b[0].isalpha() or b.startswith("float") or "[" not in b:
                pass
            self.features.add(f"float {o}")
            return f"({a} {o} {b})"
        if op < 0.4:
            b = self.floats(depth - 1)
            self.features.add("float /")
            return f"({a} / (abs({b}) + 0.5))"
        if op < 0.55:
            b = self.floats(depth - 1)
            self.features.add("where")
            return f"where({self.cond('float', depth - 1)}, {a}, {b})"
        if op < 0.65:
            b = self.floats(depth - 1)
            f = r.choice(["min", "max"])
            self.features.add(f)
            return f"{f}({a}, {b})"
        if op < 0.72:
            self.features.add("clamp")
            return f"clamp({a}, -1.5, 2.5)"
        f = r.choice(["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow", "abs"])
        self.features.add(f)
        if f == "exp":
            return f"exp(clamp({a}, -6.0, 6.0))"
        if f == "log":
            return f"log(abs({a}) + 0.25)"
        if f == "sqrt":
            return f"sqrt(abs({a}))"
        if f == "pow":
            return f"pow(clamp(abs({a}), 0.25, 4.0), {r.choice(['0.5', '2.0', '1.5', '3.0'])})"
        return f"{f}({a})"


def _int_array(np_rng, dtype: str, shape) -> np.ndarray:
    lo, hi = {"u8": (0, 256), "u32": (0, 1000)}.get(dtype, (-1000, 1000))
    return np_rng.integers(lo, hi, size=shape).astype(NP[dtype])


def _elementwise(rng, np_rng, kind: str) -> tuple:
    features: set = set()
    rank = rng.randint(1, 2)
    loops = ["i", "j"][:rank]
    sizes = [rng.choice(SIZES) for _ in loops]
    inputs, loads = {}, {}
    # integers near 2^24 beside floats near it: where an integer meets a float, it must be
    # rounded to the float's dtype first (16777217 == f32(16777216))
    big = kind == "float" and rng.random() < 0.25
    if big:
        features.add("integers past f32's precision")
    for name in "abcd"[:rng.randint(1, 4)]:
        if kind == "int" or rng.random() < 0.4:
            dt = rng.choice(INT_DTYPES)
            inputs[name] = _int_array(np_rng, dt, sizes)
            if big and dt != "u8":
                inputs[name] = (2**24 + np_rng.integers(-6, 7, size=sizes)).astype(NP[dt])
            loads.setdefault("int", []).append(f"{name}[{', '.join(loops)}]")
            loads.setdefault(dt, []).append(f"{name}[{', '.join(loops)}]")
            features.add(f"input {dt}")
        else:
            dt = "f64" if rng.random() < 0.15 else "f32"
            inputs[name] = np_rng.uniform(-3, 3, size=sizes).astype(NP[dt])
            if big:
                inputs[name] = (2**24 + np_rng.integers(-6, 7, size=sizes)).astype(NP[dt])
            loads.setdefault("float", []).append(f"{name}[{', '.join(loops)}]")
            features.add(f"input {dt}")
    if kind == "float" and "float" not in loads:
        inputs["e"] = np_rng.uniform(-3, 3, size=sizes).astype(np.float32)
        loads["float"] = [f"e[{', '.join(loops)}]"]
    if "int" not in loads:
        loads["int"] = ["i" if rng.random() < 0.5 else loops[-1]]
    ex = _Expr(rng, loads, features)
    depth = rng.randint(1, 3)
    body = ex.ints(depth) if kind == "int" else ex.floats(depth)
    stmts = f"        out[{', '.join(loops)}] = {body}\n"
    if rng.random() < 0.3:
        # a local, and an if/else writing out
        c = ex.cond("int" if kind == "int" else "float", 1)
        other = ex.ints(1) if kind == "int" else ex.floats(1)
        stmts = (f"        let v = {body}\n"
                 f"        if {c}:\n"
                 f"            out[{', '.join(loops)}] = v\n"
                 f"        else:\n"
                 f"            out[{', '.join(loops)}] = {other}\n")
        features.add("if/else")
    header = ", ".join(f"{v} in 0..n{k}" for k, v in enumerate(loops))
    src = (f"let y = compute({', '.join(inputs)}) {{\n    @kernel elementwise\n"
           f"    for {header}:\n{stmts}}}\ny\n")
    if rng.random() < 0.5 or not any(f"{nm}[" in stmts for nm in inputs):
        inputs.update({f"n{k}": sizes[k] for k in range(rank)})     # bounds from the host
        features.add("host bounds")
    is_f64 = kind == "float" and any(getattr(v, "dtype", None) == np.float64 for v in inputs.values())
    return src, inputs, ("int" if kind == "int" else ("f64" if is_f64 else "f32")), features


def _shared(rng, np_rng) -> tuple:
    features = {"shared", "barrier"}
    rows, cols = rng.choice(SIZES), rng.choice(SIZES)
    x = np_rng.uniform(-2, 2, size=(rows, cols)).astype(np.float32)
    m = np_rng.integers(-50, 50, size=(rows, cols)).astype(rng.choice([np.int32, np.int64]))
    ex = _Expr(rng, {"float": ["x[i, j]"], "int": ["m[i, j]"]}, features)
    fill = ex.floats(rng.randint(0, 2))
    s = rng.randint(1, 4)
    read = rng.choice([f"t[{cols - 1} - j]", f"t[(j + {s}) % {cols}]", "t[j] + t[0]",
                       f"t[j / 2] - t[{cols - 1} - j / 2]"])
    dt = rng.choice(["", ": f64", ": i32"]) if rng.random() < 0.3 else ""
    if dt == ": i32":
        fill = f"i32({fill} * 10.0)"
    second = ""
    if rng.random() < 0.4:
        # a second phase: a running value folded from the shared row
        features.add("shared reduction")
        second = ("        var acc = 0.0\n"
                  "        for k in 0..cols step 2:\n"
                  "            acc += float(t[k])\n")
        read = f"{read} + acc"
    src = ("let y = compute(x, m) {\n    @kernel fused\n    for i in 0..rows:\n"
           f"        shared var t[cols]{dt}\n"
           "        for j in 0..cols:\n"
           f"            t[j] = {fill}\n"
           "        barrier()\n" + second +
           "        for j in 0..cols:\n"
           f"            out[i, j] = {read}\n}}\ny\n")
    return src, {"x": x, "m": m, "rows": rows, "cols": cols}, "f32", features


def _rowreduce(rng, np_rng) -> tuple:
    features: set = set()
    rows, cols = rng.choice(SIZES), rng.choice(SIZES)
    dt = rng.choice(["f32", "f32", "i32", "i64", "u8", "u32"])
    if dt == "f32":
        x = np_rng.uniform(-2, 2, size=(rows, cols)).astype(np.float32)
        if rng.random() < 0.3:
            x = np.round(x)            # ties, for argmax's first index
    else:
        x = _int_array(np_rng, dt, (rows, cols))
        if dt in ("u8", "u32"):
            x = x % 50
    mask = np_rng.random((rows, cols)) < 0.6
    op = rng.choice(["+", "max", "min", "argmax", "argmin"])
    features.add(f"reduce({op}, axis=1) {dt}")
    inputs = {"x": x}
    val = "x[r, c]"
    if rng.random() < 0.5:
        inputs["mask"] = mask.astype(np.int32)
        features.add("mask")
        if op == "+":
            val = f"where(mask[r, c] > 0, x[r, c], {'0.0' if dt == 'f32' else '0'})"
        elif op in ("max", "argmax"):
            val = f"where(mask[r, c] != 0, x[r, c], {'-100.0' if dt == 'f32' else 'x[r, 0]'})"
        else:
            val = f"where(mask[r, c] == 0, x[r, 0], x[r, c])"
    axis = rng.choice([", axis=1", ", axis=1", ""])
    if not axis:
        features.add("whole reduce")
    yld = (f"({val}, {'c' if axis else 'r * cols + c'})" if op.startswith("arg") else val)
    wg = ""
    if rng.random() < 0.3:
        wg = f"    @workgroup({rng.choice([32, 64, 128])})\n"   # a hint: never the result
        features.add("workgroup hint")
    src = ("let y = compute(" + ", ".join(inputs) + ") {\n"
           f"    @kernel reduce({op}{axis})\n" + wg +
           "    for r in 0..rows, c in 0..cols:\n"
           f"        yield {yld}\n}}\ny\n")
    return src, inputs, ("int" if dt != "f32" or op.startswith("arg") else "f32"), features


def _steps(rng, np_rng) -> tuple:
    features = {"step loops"}
    n = rng.choice((7, 33, 100, 3, 1))
    step = rng.choice([2, 3])
    start = rng.choice([0, 1])
    kstep = rng.choice([2, 3, 5])
    m = rng.choice((1, 3, 7, 33))
    dt = rng.choice(["f32", "i32", "i64"])
    if dt == "f32":
        x = np_rng.uniform(-2, 2, size=(n, m)).astype(np.float32)
        zero = "0.0"
    else:
        x = _int_array(np_rng, dt, (n, m))
        zero = "0"
    red = rng.choice(["sum", "max", "masked"])
    if red == "sum":
        init, upd = zero, "acc += x[i, k]"
    elif red == "max":
        init = "-inf" if dt == "f32" else "-100000"
        upd = "acc = max(acc, x[i, k])"
    else:
        init = zero
        upd = (f"if x[i, k] > {zero}:\n                acc += x[i, k] * {'2.0' if dt == 'f32' else '2'}"
               f"\n            else:\n                acc -= {'1.0' if dt == 'f32' else '1'}")
        features.add("masked accumulation")
    kstart = rng.choice([0, 1, 2])
    src = ("let y = compute(x) {\n"
           f"    for i in {start}..rows step {step}:\n"
           f"        var acc = {init}\n"
           f"        for k in {kstart}..cols step {kstep}:\n"
           f"            {upd}\n"
           f"        out[i] = acc\n}}\ny\n")
    return src, {"x": x, "rows": n, "cols": m}, ("int" if dt != "f32" else "f32"), features


def _tile(rng, np_rng) -> tuple:
    features = {"tile"}
    rows, cols = rng.choice(SIZES), rng.choice((3, 7, 33, 100))
    x = np_rng.uniform(-2, 2, size=(rows, cols)).astype(np.float32)
    w = np_rng.uniform(-2, 2, size=(cols,)).astype(np.float32)
    a = rng.randint(0, cols - 1)
    b = rng.randint(a + 1, cols)
    form = rng.choice(["row", "slice", "sum", "rowmax"])
    if form == "row":
        body = f"        out[i] = where(x[i] > 0.0, x[i] * w, tanh(w)) + {rng.choice(['1.0', '0.5'])}\n"
    elif form == "slice":
        body = f"        out[i, 0:{b - a}] = x[i, {a}:{b}] * 2.0 - abs(w[{a}:{b}])\n"
        features.add("slice")
    elif form == "sum":
        body = f"        out[i] = sum(x[i, {a}:{b}] * w[{a}:{b}])\n"
        features.add("tile sum")
    else:
        body = f"        out[i] = reduce(max, max(x[i], w))\n"
        features.add("tile reduce")
    src = (f"let y = compute(x, w) {{\n    @kernel fused\n    for i in 0..rows:\n{body}}}\ny\n")
    return src, {"x": x, "w": w}, "f32", features


def random_wide_program(rng: random.Random) -> WideProgram:
    np_rng = np.random.default_rng(rng.randrange(2**32))
    kind = rng.choice(["int", "int", "float", "float", "shared", "rowreduce", "steps", "tile"])
    if kind in ("int", "float"):
        src, inputs, dtype, features = _elementwise(rng, np_rng, kind)
    else:
        src, inputs, dtype, features = {"shared": _shared, "rowreduce": _rowreduce,
                                        "steps": _steps, "tile": _tile}[kind](rng, np_rng)
    return WideProgram(src, inputs, kind, dtype, features)
