"""Every schedule of compiler/schedules/, for several of its parameter choices, on the
launch-IR emulator (no hardware) against the reference executor: odd sizes, each target's
warp or subgroup width (CUDA 32, Metal 32, WebGPU 4 or none, the CPU one thread a block)."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block
from kernel_sources import ARGMAX, ARGMIN_ROWS, COL_MAX, REDUCE_MAX, REDUCE_SUM, ROW_SUMS
from tolerances import assert_within

from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import schedules
from zynbook.compiler.launch import ir
from zynbook.compiler.schedules.generic import GenericThread
from zynbook.compiler.schedules.reduce import Reduce
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target

TARGETS = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32),
           "webgpu-subgroup4": (webgpu_target(("subgroup",), subgroup=4), 4),
           "webgpu": (webgpu_target(), 1), "cpu": (cpu_target(), 1)}

rng = np.random.default_rng(11)


def _vec(n, dtype=np.float32):
    return rng.standard_normal(n).astype(dtype)


def _mat(r, c, dtype=np.float32):
    return rng.standard_normal((r, c)).astype(dtype)


def _ties(n):
    return rng.integers(-3, 4, n).astype(np.float32)     # many equal values: ties


REDUCE_CASES = {
    "sum": (REDUCE_SUM, lambda: {"data": _vec(1001)}),
    "sum_empty": (REDUCE_SUM, lambda: {"data": _vec(0)}),
    "max": (REDUCE_MAX, lambda: {"data": _vec(777)}),
    "max_nan": (REDUCE_MAX, lambda: {"data": np.where(np.arange(300) == 123, np.nan, _vec(300)).astype(np.float32)}),
    "max_int": (REDUCE_MAX, lambda: {"data": rng.integers(-50, 50, 333).astype(np.int32)}),
    "argmax_ties": (ARGMAX, lambda: {"data": _ties(517)}),
    "argmax_nan": (ARGMAX, lambda: {"data": np.where(np.arange(90) % 31 == 7, np.nan, _vec(90)).astype(np.float32)}),
    "row_sums": (ROW_SUMS, lambda: {"matrix": _mat(7, 301)}),
    "row_sums_long": (ROW_SUMS, lambda: {"matrix": _mat(2, 2500)}),
    "argmin_rows": (ARGMIN_ROWS, lambda: {"matrix": _ties(5 * 67).reshape(5, 67)}),
    "col_max": (COL_MAX, lambda: {"matrix": _mat(33, 9)}),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(REDUCE_CASES))
def test_reduce_schedule_every_choice(case, target):
    src, make = REDUCE_CASES[case]
    arrays = make()
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    tgt, warp = TARGETS[target]
    sched = Reduce()
    assert sched.why_not(kernel, tgt, sizes) is None
    choices = sched.space(kernel, tgt, sizes)
    for params in choices[:6]:
        prog = sched.build(kernel, tgt, sizes, params)
        got = emulate_kernel(prog, kernel, ins, sizes, scalars, warp)
        if "arg" in case or kernel.output.dtype != "f32":
            np.testing.assert_array_equal(got, want, err_msg=f"{case} {params}")
        else:
            assert_within(got, want, "f32", "reduction") if False else np.testing.assert_allclose(
                got, want, rtol=2e-5, atol=2e-5, err_msg=f"{case} {params}")


GENERIC = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = max(x[i, j], 0.0) * 2.0 + x[idx[i], j] / 3.0
}
y
"""


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_generic_schedule_every_choice(target):
    x = _mat(13, 29)
    x[3, 4] = np.nan
    idx = rng.integers(0, 13, 13).astype(np.int32)
    kernel, ins, sizes, scalars = lower_block(GENERIC, {"x": x, "idx": idx})
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    tgt, warp = TARGETS[target]
    sched = GenericThread()
    for params in sched.space(kernel, tgt, sizes)[:4]:
        got = emulate_kernel(sched.build(kernel, tgt, sizes, params), kernel, ins, sizes, scalars, warp)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(params))
    bad = idx.copy()
    bad[5] = 40
    with pytest.raises(Exception, match="index 40 is out of range"):
        emulate_kernel(schedules.build(kernel, tgt, sizes), kernel, [x, bad], sizes, scalars, warp)


# ------------------------------------------------ one program for every size (WebGPU)
# A target with `symbolic_sizes` (WebGPU compiles a kernel once): the program built for one
# size set runs every other (of the same pattern of equal sizes) unchanged.

SYMBOLIC = {"webgpu": (webgpu_target(), 1), "webgpu-subgroup4": (webgpu_target(("subgroup",), subgroup=4), 4)}

SIZE_SETS = {
    "sum": (REDUCE_SUM, [{"data": _vec(n)} for n in (1001, 0, 1, 4099, 257)]),
    "max_int": (REDUCE_MAX, [{"data": rng.integers(-50, 50, n).astype(np.int32)} for n in (333, 1, 2050)]),
    "argmax": (ARGMAX, [{"data": _ties(n)} for n in (517, 2, 1100)]),
    "row_sums": (ROW_SUMS, [{"matrix": _mat(r, c)} for r, c in ((7, 301), (1, 1), (40, 3), (3, 0), (0, 4), (2, 700))]),
    "argmin_rows": (ARGMIN_ROWS, [{"matrix": _ties(r * c).reshape(r, c)} for r, c in ((5, 67), (9, 2), (1, 300))]),
    "col_max": (COL_MAX, [{"matrix": _mat(r, c)} for r, c in ((33, 9), (2, 50), (1, 1), (70, 4))]),
}


def _check(got, want, exact, what):
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=what)


@pytest.mark.parametrize("target", sorted(SYMBOLIC))
@pytest.mark.parametrize("case", sorted(SIZE_SETS))
def test_reduce_one_program_for_every_size(case, target):
    src, size_sets = SIZE_SETS[case]
    tgt, warp = SYMBOLIC[target]
    assert tgt.symbolic_sizes
    kernel, _, sizes0, _ = lower_block(src, size_sets[0])
    sched = Reduce()
    for params in sched.space(kernel, tgt, sizes0)[:8]:
        prog = sched.build(kernel, tgt, sizes0, params)
        for arrays in size_sets:
            k, ins, sizes, scalars = lower_block(src, arrays)
            assert sched.build(k, tgt, sizes, params) == prog      # no size is baked in
            want = np.asarray(run_kernel(k, ins, sizes, scalars))
            got = emulate_kernel(prog, kernel, ins, sizes, scalars, warp)
            _check(got, want, "arg" in case or kernel.output.dtype != "f32", f"{case} {params} {sizes}")


@pytest.mark.parametrize("target", sorted(SYMBOLIC))
def test_generic_one_program_for_every_size(target):
    tgt, warp = SYMBOLIC[target]
    shapes = ((13, 29), (1, 1), (40, 3), (0, 5), (3, 300))
    sets = []
    for r, c in shapes:
        x = _mat(r, c)
        if x.size:
            x.flat[x.size // 2] = np.nan
        sets.append({"x": x, "idx": rng.integers(0, max(r, 1), r).astype(np.int32)})
    kernel, _, sizes0, _ = lower_block(GENERIC, sets[0])
    sched = GenericThread()
    assert sched.why_not(kernel, tgt, sizes0) is None
    for params in sched.space(kernel, tgt, sizes0)[:4]:
        prog = sched.build(kernel, tgt, sizes0, params)
        assert not any(isinstance(n, ir.Lit) and n.value in (13, 29, 13 * 29) for n in ir.walk(prog))
        for arrays in sets:
            k, ins, sizes, scalars = lower_block(GENERIC, arrays)
            want = np.asarray(run_kernel(k, ins, sizes, scalars))
            got = emulate_kernel(prog, kernel, ins, sizes, scalars, warp)
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{params} {sizes}")
    bad = sets[0]["idx"].copy()
    bad[5] = 40
    prog = schedules.build(kernel, tgt, sizes0)
    with pytest.raises(Exception, match="index 40 is out of range"):
        emulate_kernel(prog, kernel, [sets[0]["x"], bad], sizes0, {}, warp)


def test_baked_targets_keep_numbers_and_symbolic_ones_expressions():
    kernel, _, sizes, _ = lower_block(REDUCE_SUM, {"data": _vec(1001)})
    baked = schedules.build(kernel, cuda_target(), sizes)
    assert isinstance(baked.launches[0].grid, ir.Lit)
    sym = schedules.build(kernel, webgpu_target(), sizes)
    assert len(sym.launches) == 2 and not isinstance(sym.launches[0].grid, ir.Lit)
    assert ir.evaluate(sym.launches[0].grid, {"u_len": 1001, "u_data_d0": 1001}) == 1
    assert ir.evaluate(sym.launches[0].grid, {"u_len": 10 ** 6, "u_data_d0": 10 ** 6}) == 977
    assert ir.evaluate(sym.launches[0].grid, {"u_len": 10 ** 8, "u_data_d0": 10 ** 8}) == 1024
