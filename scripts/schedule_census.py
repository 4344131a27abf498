"""Which schedule builds each kernel the examples and the tests use, per target.

Every compute block of examples/*.zyn (run once on the CPU reference for its sizes), every
block written in tests/*.py (lowered with inputs of a small shape, each rank tried in turn)
and the CIR kernels of tests/cuda_cir_kernels.py are built by `schedules.build` for the
CUDA, Metal, C++ and WebGPU (subgroup 32 and none) targets; a kernel no schedule takes is
listed with `schedules.why_none`. GEMM and attention kernels are counted apart.

    .venv/bin/python scripts/schedule_census.py [> census.txt]
"""
from __future__ import annotations

import ast
import contextlib
import io
import itertools
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from zynbook.compiler import schedules                                  # noqa: E402
from zynbook.compiler.passes import recognise                           # noqa: E402
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target  # noqa: E402

TARGETS = {"cuda": cuda_target(), "metal": metal_target(), "cpp": cpu_target(),
           "wgsl-sg": webgpu_target(("subgroup",)), "wgsl": webgpu_target()}
GEMM_OR_ATTENTION = ("matmul", "batched_matmul", "conv2d", "attention", "flash_attention")


def example_kernels():
    from zynbook.session import Session
    for path in sorted((ROOT / "examples").glob("*.zyn")):
        session = Session("cpu")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                session.run(path.read_text())
        except Exception as err:            # an example needing a GPU or files
            yield f"{path.name}", None, f"did not run on cpu: {type(err).__name__}"
            continue
        seen = set()
        for c in session.last_kernels:
            key = (c.kernel.name, tuple(sorted(c.sizes.items())))
            if key not in seen:
                seen.add(key)
                yield f"{path.name}:{c.kernel.name}", (c.kernel, c.sizes), None


def _blocks(path: Path):
    """(name, source) of the strings written in `path` that hold a compute block (a
    module-level one by its name, any other by its line)."""
    tree = ast.parse(path.read_text())
    named = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            named[id(node.value)] = next((t.id for t in node.targets if isinstance(t, ast.Name)), "")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "compute(" in node.value and "{" in node.value:
            yield named.get(id(node)) or f"line {node.lineno}", node.value


def _lower_any_rank(src: str):
    """The kernel and sizes of `src`'s first block, its inputs f32 of shape (7, ...) of the
    first ranks that lower and solve."""
    from compute_testing import find_compute, lower_block
    from zynbook.compiler.parser import parse
    from zynbook.compiler import lower
    try:
        node = find_compute(parse(src).body)
    except Exception as err:            # a template with placeholders
        return None, f"does not parse: {type(err).__name__}"
    names = [lower.dotted(e) for e in node.inputs]
    last = None
    for ranks in itertools.product((1, 2, 3, 4), repeat=len(names)):
        arrays = {n: np.ones((7,) * r, np.float32) for n, r in zip(names, ranks)}
        scalars = {n: 1.0 for n in re.findall(r"\b(eps|scale|alpha|beta|stride)\b", src)}
        try:
            k, _ins, sizes, _sc = lower_block(src, arrays, scalars)
            return (k, sizes), None
        except Exception as err:
            last = err
    return None, f"no input ranks lower: {type(last).__name__}: {str(last)[:80]}"


def test_kernels():
    for path in sorted((ROOT / "tests").glob("*.py")):
        for name, src in _blocks(path):
            got, why = _lower_any_rank(src)
            yield f"{path.name}:{name}", got, why


def cir_kernels():
    import cuda_cir_kernels as C
    for name, make in C.ALL.items():
        k, sizes, *_ = make()
        yield f"cuda_cir_kernels:{name}", (k, sizes), None


def _built(kernel, target, sizes) -> str:
    prog = schedules.build(kernel, target, sizes)
    return prog.schedule.split(":")[0] if prog is not None else \
        "NONE: " + schedules.why_none(kernel, target, sizes)


def _webgpu(kernel, target, sizes) -> str:
    """What the WebGPU device runs: the launch IR printed in WGSL for every size set, else
    for the launch's sizes, else (NONE) no program."""
    import dataclasses
    from zynbook.compiler.codegen import wgsl
    opts = wgsl.WGSLOptions(subgroups=target.collectives, f16=True)
    prog = wgsl.launch_program(kernel, opts)
    if prog is not None:
        return prog.schedule.split(":")[0] + " (every size)"
    prog = wgsl.launch_program(kernel, dataclasses.replace(
        opts, launch_sizes=tuple(sorted((k, int(v)) for k, v in sizes.items()))))
    if prog is not None:
        return prog.schedule.split(":")[0] + " (sizes baked)"
    baked = dataclasses.replace(wgsl.launch_target(opts), symbolic_sizes=False)
    return "NONE: " + (schedules.why_none(kernel, baked, sizes) if schedules.build(
        kernel, baked, sizes) is None else "the WGSL dialect cannot print it")


def census(out=sys.stdout):
    counts: dict = {}
    for source in (example_kernels, test_kernels, cir_kernels):
        for name, got, why in source():
            if got is None:
                out.write(f"{name}\n    skipped: {why}\n")
                continue
            kernel, sizes = got
            kind = kernel.kernel_type.kind
            if kind in GEMM_OR_ATTENTION or recognise.contraction(kernel):
                out.write(f"{name}  [{kind}]\n    ignored: GEMM or attention\n")
                counts["ignored"] = counts.get("ignored", 0) + 1
                continue
            out.write(f"{name}  [{kind}]\n")
            for tname, target in TARGETS.items():
                try:
                    res = (_webgpu if target.lang == "wgsl" else _built)(kernel, target, sizes)
                except Exception as err:
                    res = f"ERROR: {type(err).__name__}: {err}"
                key = "none" if res.startswith(("NONE", "ERROR")) else "built"
                counts[(tname, key)] = counts.get((tname, key), 0) + 1
                out.write(f"    {tname:8} {res[:220]}\n")
    out.write("\ntotals:\n")
    for tname in TARGETS:
        out.write(f"    {tname:8} built {counts.get((tname, 'built'), 0):3}   "
                  f"none {counts.get((tname, 'none'), 0):3}\n")
    out.write(f"    GEMM/attention ignored: {counts.get('ignored', 0)}\n")


if __name__ == "__main__":
    census()
