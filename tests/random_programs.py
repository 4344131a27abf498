"""Random ZynML loop nests for differential testing (tests/test_differential.py).

`random_program(rng)` builds one compute block from a seeded `random.Random`: an
elementwise nest, a nest with an inner reduction loop (sums, maxima, contractions such as a
matmul), or a `@kernel reduce(...)` over a whole nest; inputs of random dtypes indexed by
random affine expressions of the loop variables (`x[i]`, `x[j, i]`, `x[2 * i + 1]`,
`x[i + j]`, `x[6 - i]`), odd sizes, loop bounds either inferred from the shapes (free size
names) or given by the host (then inputs may be longer than the loop). Every program is
valid by construction: each index stays inside its axis.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

ODD_SIZES = (1, 2, 3, 5, 7, 8, 13, 17, 31, 33, 64, 65, 100, 127)
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32}


@dataclass
class RandomProgram:
    source: str
    inputs: dict                       # name -> numpy array or host int
    kind: str                          # elementwise | reduction | contraction | reduce
    dtype: str                         # the dtype the result is compared in
    features: set = field(default_factory=set)
    spec: dict = field(default_factory=dict)   # what `oracle` needs: loops, sizes, terms

    def __repr__(self):
        shapes = {k: (v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else v
                  for k, v in self.inputs.items()}
        return f"RandomProgram({self.kind}, {self.dtype}, {shapes})\n{self.source}"


class _Builder:
    def __init__(self, rng: random.Random, dtype: str):
        self.rng = rng
        self.dtype = dtype
        self.inputs: list = []         # [name, [(index text, max value, direct loop or None)]]
        self.features: set = set()

    def index(self, loops: list, sizes: dict) -> tuple:
        """(text, largest value, loop var when it is the var itself) of one random affine
        index of the loop variables."""
        r = self.rng
        v = r.choice(loops)
        form = r.choice(["direct", "direct", "direct", "offset", "scaled", "sum", "reverse"])
        if form == "offset":
            c = r.randint(1, 3)
            self.features.add("offset index")
            return f"{v} + {c}", sizes[v] - 1 + c, None
        if form == "scaled":
            a, c = r.randint(2, 3), r.randint(0, 2)
            self.features.add("scaled index")
            return (f"{a} * {v} + {c}" if c else f"{a} * {v}"), a * (sizes[v] - 1) + c, None
        if form == "sum" and len(loops) > 1:
            w = r.choice([x for x in loops if x != v])
            self.features.add("sum of loop variables")
            return f"{v} + {w}", sizes[v] + sizes[w] - 2, None
        if form == "reverse":
            top = sizes[v] - 1 + r.randint(0, 2)
            self.features.add("reversed index")
            return f"{top} - {v}", top, None
        return v, sizes[v] - 1, v

    def load(self, loops: list, sizes: dict, reuse: float = 0.5) -> str:
        r = self.rng
        if self.inputs and r.random() < reuse:
            name, axes = r.choice(self.inputs)
            return f"{name}[{', '.join(a[0] for a in axes)}]"
        name = "abcdeg"[len(self.inputs)] if len(self.inputs) < 6 else None
        if name is None:
            name, axes = r.choice(self.inputs)
            return f"{name}[{', '.join(a[0] for a in axes)}]"
        rank = r.randint(1, min(3, len(loops) + 1))
        axes = [self.index(loops, sizes) for _ in range(rank)]
        self.inputs.append([name, axes])
        return f"{name}[{', '.join(a[0] for a in axes)}]"

    def expr(self, loops: list, sizes: dict, depth: int) -> str:
        r = self.rng
        is_float = self.dtype != "i32"
        if depth <= 0 or r.random() < 0.3:
            pick = r.random()
            if pick < 0.75:
                return self.load(loops, sizes)
            if pick < 0.9:
                if is_float:
                    return r.choice(["0.5", "1.25", "2.0", "3.0", "0.75"])
                return str(r.randint(1, 4))
            self.features.add("loop variable as a value")
            v = r.choice(loops)
            return f"float({v})" if is_float else v
        a = self.expr(loops, sizes, depth - 1)
        op = r.random()
        if op < 0.55:
            b = self.expr(loops, sizes, depth - 1)
            return f"({a} {r.choice(['+', '-', '*'])} {b})"
        if op < 0.75:
            b = self.expr(loops, sizes, depth - 1)
            self.features.add("min/max")
            return f"{r.choice(['min', 'max'])}({a}, {b})"
        if is_float:
            fn = r.choice(["abs", "sqrt_abs", "exp_neg", "tanh", "relu"])
            self.features.add(fn)
            if fn == "sqrt_abs":
                return f"sqrt(abs({a}))"
            if fn == "exp_neg":
                return f"exp(-abs({a}))"
            return f"{fn}({a})"
        self.features.add("abs")
        return f"abs({a})"


def _sizes(rng: random.Random, loops: list, budget: int) -> dict:
    while True:
        sizes = {v: rng.choice(ODD_SIZES) for v in loops}
        if int(np.prod(list(sizes.values()))) <= budget:
            return sizes


def _bounds(rng, b: _Builder, loops: list, sizes: dict, free_names: dict) -> tuple:
    """Loop bound texts and host ints: a loop indexing some input axis directly may take a
    free size name (inferred from that axis, whose size must then be exact)."""
    direct = {a[2] for _, axes in b.inputs for a in axes if a[2] is not None}
    bounds, host = {}, {}
    for v in loops:
        name = free_names[v]
        if v in direct and rng.random() < 0.5:
            bounds[v] = name                  # inferred
        else:
            bounds[v] = name
            host[name] = sizes[v]             # given by the host
    return bounds, host


def _arrays(rng: random.Random, b: _Builder, bounds: dict, host: dict, sizes: dict,
            dtype: str) -> dict:
    np_rng = np.random.default_rng(rng.randrange(2**32))
    inferred = {v for v, name in bounds.items() if name not in host}
    arrays = {}
    for name, axes in b.inputs:
        shape = []
        for text, top, var in axes:
            exact = var is not None and var in inferred
            shape.append(top + 1 + (0 if exact else rng.choice([0, 0, 1, 2])))
        if dtype == "i32" or (dtype == "mixed" and rng.random() < 0.5):
            arr = np_rng.integers(-5, 6, size=shape).astype(np.int32)
        else:
            arr = np_rng.uniform(-2.0, 2.0, size=shape).astype(NP.get(dtype, np.float32))
        arrays[name] = arr
    return arrays


def random_program(rng: random.Random) -> RandomProgram:
    kind = rng.choice(["elementwise", "elementwise", "reduction", "contraction", "reduce"])
    dtype = rng.choice(["f32", "f32", "f32", "i32", "f64", "f16", "mixed"])
    if kind != "elementwise" and dtype == "f16":
        dtype = "f32"           # f16 sums differ by device in their rounding, by design
    b = _Builder(rng, "f32" if dtype == "mixed" else dtype)
    ranks = {"elementwise": (1, 3), "reduction": (1, 2), "contraction": (2, 2), "reduce": (1, 2)}
    lo, hi = ranks[kind]
    par = ["i", "j", "l"][:rng.randint(lo, hi)]
    free_names = {"i": "n0", "j": "n1", "l": "n2", "k": "nk"}
    if kind in ("reduction", "contraction"):
        loops = par + ["k"]
        sizes = _sizes(rng, loops, 4096)
    else:
        loops = par
        sizes = _sizes(rng, loops, 4096)
    float_like = b.dtype != "i32"
    zero = "0.0" if float_like else "0"

    if kind == "elementwise":
        body_expr = b.expr(loops, sizes, rng.randint(1, 3))
        bounds, host = _bounds(rng, b, loops, sizes, free_names)
        header = ", ".join(f"{v} in 0..{bounds[v]}" for v in loops)
        body = (f"    @kernel elementwise\n    for {header}:\n"
                f"        out[{', '.join(loops)}] = {body_expr}\n")
        spec = {"par": loops, "term": body_expr}
    elif kind == "contraction":
        i, j = par
        b.inputs.append(["a", [("i", sizes["i"] - 1, "i"), ("k", sizes["k"] - 1, "k")]])
        b.inputs.append(["b", [("k", sizes["k"] - 1, "k"), ("j", sizes["j"] - 1, "j")]])
        extra = ""
        if rng.random() < 0.5:
            extra = f" * {b.expr(loops, sizes, 1)}"
        bounds, host = _bounds(rng, b, loops, sizes, free_names)
        body = (f"    for i in 0..{bounds['i']}, j in 0..{bounds['j']}:\n"
                f"        var acc = {zero}\n"
                f"        for k in 0..{bounds['k']}:\n"
                f"            acc += a[i, k] * b[k, j]{extra}\n"
                f"        out[i, j] = acc\n")
        spec = {"par": par, "red": "sum", "term": f"a[i, k] * b[k, j]{extra}"}
        b.features.add("contraction")
    elif kind == "reduction":
        red = rng.choice(["sum", "max"])
        term = b.expr(loops, sizes, rng.randint(0, 2))
        bounds, host = _bounds(rng, b, loops, sizes, free_names)
        header = ", ".join(f"{v} in 0..{bounds[v]}" for v in par)
        if red == "sum":
            init, step = zero, f"acc += {term}"
        else:
            init = "-inf" if float_like else "-1000000"
            step = f"acc = max(acc, {term})"
        body = (f"    for {header}:\n"
                f"        var acc = {init}\n"
                f"        for k in 0..{bounds['k']}:\n"
                f"            {step}\n"
                f"        out[{', '.join(par)}] = acc\n")
        spec = {"par": par, "red": red, "term": term, "init": init}
        b.features.add(f"inner {red}")
    else:
        op = rng.choice(["+", "max", "min"])
        term = b.expr(loops, sizes, rng.randint(0, 2))
        bounds, host = _bounds(rng, b, loops, sizes, free_names)
        header = ", ".join(f"{v} in 0..{bounds[v]}" for v in loops)
        body = (f"    @kernel reduce({op})\n    for {header}:\n"
                f"        yield {term}\n")
        spec = {"par": [], "whole": loops, "red": {"+": "sum"}.get(op, op), "term": term}
        b.features.add(f"reduce({op})")
    arrays = _arrays(rng, b, bounds, host, sizes, dtype)
    names = ", ".join(name for name, _ in b.inputs)
    source = f"let y = compute({names}) {{\n{body}}}\ny\n"
    inputs = dict(arrays)
    inputs.update(host)
    if host:
        b.features.add("host bounds")
    if len(host) < len(loops):
        b.features.add("inferred bounds")
    spec["sizes"] = dict(sizes)
    return RandomProgram(source, inputs, kind, dtype, b.features, spec)


def oracle(p: RandomProgram):
    """The program's value computed independently of ZynBook: plain Python over the loop
    nest, in float64 (or exact Python ints for integer programs)."""
    spec, sizes = p.spec, p.spec["sizes"]
    ints = p.dtype == "i32"
    env = {name: v for name, v in p.inputs.items() if isinstance(v, np.ndarray)}
    env.update({"min": min, "max": max, "abs": abs, "sqrt": math.sqrt, "exp": math.exp,
                "tanh": math.tanh, "relu": lambda v: max(v, 0.0), "float": float})
    arrays = {k: (v.astype(np.int64) if ints else v.astype(np.float64)).tolist()
              for k, v in env.items() if isinstance(v, np.ndarray)}
    code = compile(_python_indexing(spec["term"]), "<term>", "eval")

    def term(values):
        scope = dict(env)
        scope.update(arrays)
        scope.update(values)
        return eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - our own text

    def reduce(red, items, start):
        acc = start
        for v in items:
            acc = acc + v if red == "sum" else (max(acc, v) if red == "max" else min(acc, v))
        return acc

    if "whole" in spec:
        loops = spec["whole"]
        items = [term(dict(zip(loops, idx))) for idx in np.ndindex(*[sizes[v] for v in loops])]
        red = spec["red"]
        start = 0 if red == "sum" else None
        if start is None:
            start = items[0] if items else 0
        return reduce(red, items, start)
    par = spec["par"]
    out = np.zeros([sizes[v] for v in par], dtype=np.float64)
    for idx in np.ndindex(*out.shape):
        values = dict(zip(par, idx))
        if "red" not in spec:
            out[idx] = term(values)
            continue
        start = 0 if spec["red"] == "sum" else \
            (-math.inf if spec.get("init") == "-inf" else int(spec.get("init", 0)))
        out[idx] = reduce(spec["red"], (term({**values, "k": k}) for k in range(sizes["k"])),
                          start)
    return out


def _python_indexing(text: str) -> str:
    """`a[i, j]` -> `a[i][j]` (nested lists index one axis at a time)."""
    import re
    return re.sub(r"\[([^\[\]]*)\]",
                  lambda m: "".join(f"[{part.strip()}]" for part in m.group(1).split(",")), text)
