"""argmin/argmax of nothing has no index, as numpy's argmax of an empty sequence is an error:
where the yields sit under an `if` that never passes (for an output), the kernel is a
runtime error at the yield, on every device and on the launch IR of the CUDA and Metal
targets; outputs a yield reaches give numpy's answer over the values yielded."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()
TARGETS = ["sm_90", "sm_80", "metal"]

WHOLE = """let r = compute(x) {
    @kernel reduce(OP)
    for i in 0..len:
        if x[i] > 100.0:
            yield (x[i], i)
}
r
"""

ROWS = """let r = compute(x) {
    @kernel reduce(OP, axis=AXIS)
    for a in 0..rows, b in 0..cols:
        let v = x[a, b]
        if v > 100.0:
            yield (v, IDX)
}
r
"""


def _arg(op):
    return np.argmax if op == "argmax" else np.argmin


def _whole_want(op, x):
    """numpy's argmax (argmin) of the values above 100, as their positions in x."""
    kept = np.flatnonzero(x > 100)
    return kept[_arg(op)(x[kept])]


def _rows_want(op, x, axis):
    m = x if axis == 1 else x.T
    return np.array([np.flatnonzero(r > 100)[_arg(op)(r[r > 100])] for r in m])


def _rows_src(op, axis):
    return ROWS.replace("OP", op).replace("AXIS", str(axis)).replace("IDX", "b" if axis == 1 else "a")


def _data(shape, seed):
    return np.random.default_rng(seed).uniform(0, 200, shape).astype(np.float32)


def _check_device(run, fails, op):
    """`run(src, x)` gives the result; `fails(src, line, column, x)` asserts the error."""
    src = WHOLE.replace("OP", op)
    for n in (5, 3000):
        x = np.arange(n, dtype=np.float32) % 100        # no value above 100
        assert f"reduce({op}) of nothing" in str(fails(src, 5, 13, x))
        x = _data(n, n)
        assert_equals_numpy(run(src, x), _whole_want(op, x), 0)
    for axis in (0, 1):
        src = _rows_src(op, axis)
        for shape in [(4, 3), (3, 2500)]:
            x = _data(shape, shape[1])
            x[:, 0] = x[0, :] = 150.0          # every row and column meets a yield
            x[1, 1] = 101.0 if op == "argmin" else 199.0
            assert_equals_numpy(run(src, x), _rows_want(op, x, axis), 0)
            x[:, 2] = x[2, :] = 5.0            # one row (column) meets none
            fails(src, 6, 13, x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_no_yield_reaches(device, op):
    _check_device(lambda src, x: zynbook.run(src, device=device, x=x),
                  lambda src, line, col, x: raises("runtime", src, line, col, device=device, x=x),
                  op)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_no_yield_reaches_on_the_launch_ir(monkeypatch, target, op):
    _on_launch_ir(monkeypatch, target, _check_device, op)


def _on_launch_ir(monkeypatch, target, check, op):
    """`check(run, fails, op)` on the emulated launch IR of `target`, where `fails` sees the
    error from the launch IR's own flag (the reference, which the device compares with, is
    taken away while it runs)."""
    from test_empty_launches import _emulated

    from zynbook.backends.cpu import reference
    from zynbook.errors import ZynMLRuntimeError
    dev = _emulated(target, monkeypatch)

    def fails(src, line, col, x):
        with monkeypatch.context() as m, pytest.raises(ZynMLRuntimeError) as info:
            m.setattr(reference, "run_kernel", None)
            zynbook.Session(device=dev.id).run(src, x=x)
        assert (info.value.line, info.value.column) == (line, col)
        return info.value
    check(lambda src, x: zynbook.Session(device=dev.id).run(src, x=x), fails, op)
    assert dev.launches and not dev.mismatches, dev.mismatches


@pytest.mark.parametrize("device", DEVICES)
def test_every_yield_reached_carries_no_check(device):
    # the loops of sizes alone reach every yield: no error site (and none failing)
    from compute_testing import lower_block

    from zynbook.compiler import errflag, schedules
    from zynbook.compiler.targets import cuda_target
    src = _rows_src("argmax", 1).replace("if v > 100.0:\n            yield", "yield")
    x = _data((3, 7), 1)
    assert_equals_numpy(zynbook.run(src, device=device, x=x), np.argmax(x, axis=1), 0)
    kernel, _, sizes, _ = lower_block(src, {"x": x}, {}, {})
    sites = schedules.build(kernel, cuda_target((9, 0)), sizes).sites
    assert not any(s.kind == errflag.NO_INDEX for s in sites)
    kernel, _, sizes, _ = lower_block(ROWS.replace("OP", "argmax").replace("AXIS", "1")
                                      .replace("IDX", "b"), {"x": x}, {}, {})
    assert any(s.kind == errflag.NO_INDEX for s in schedules.build(kernel, cuda_target((9, 0)), sizes).sites)


@pytest.mark.parametrize("device", DEVICES)
def test_loops_the_data_bounds_run_no_iteration(device):
    # a loop over data's count: known only as the block runs
    src = """let r = compute(x, m) {
    @kernel reduce(argmin)
    for i in 0..len:
        for j in 0..m[i]:
            yield (x[i] + float(j), i)
}
r
"""
    x = np.float32([4, 2, 3, 1])
    raises("runtime", src, 5, 13, device=device, x=x, m=np.zeros(4, np.int32))
    m = np.int32([1, 0, 2, 0])
    assert_equals_numpy(zynbook.run(src, device=device, x=x, m=m), np.argmin(np.where(m > 0, x, np.inf)), 0)


TILE = """let r = compute(x) {
    for a in 0..rows:
        if x[a, 0] > 0.0:
            out[a] = reduce(OP, x[a, 1:])
}
r
"""

TILE_AXIS = """let r = compute(x) {
    for a in 0..rows:
        if x[a, 0, 0] > 0.0:
            out[a, 0:cols] = reduce(OP, x[a, 1:, :], axis=0)
}
r
"""


def _check_tiles(run, fails, op):
    """`reduce(argmax, t)` of a tile under an `if`: an empty one fails at the statement (line
    4, column 13); non-empty ones give numpy's index, rows the if skips 0."""
    arg = _arg(op)
    src = TILE.replace("OP", op)
    assert "the tile is empty" in str(fails(src, 4, 13, np.ones((3, 1), np.float32)))
    run(src, -np.ones((3, 1), np.float32))         # the if passes for none: no error
    for shape in [(3, 1 + 5), (4, 1 + 700)]:
        x = _data(shape, shape[1]) - 100.0
        x[1, 0] = -1.0                             # a row the if skips
        x[2, 3] = np.nan if shape[1] > 6 else x[2, 3]
        want = np.where(x[:, 0] > 0, arg(x[:, 1:], axis=1), 0)
        assert_equals_numpy(run(src, x), want, 0)
    src = TILE_AXIS.replace("OP", op)
    assert "the tile is empty" in str(fails(src, 4, 13, np.ones((2, 1, 3), np.float32)))
    x = _data((2, 5, 3), 7) - 100.0
    x[0, 0, 0] = 1.0
    x[1, 0, 0] = -1.0
    want = np.where(x[:, :1, 0] > 0, arg(x[:, 1:, :], axis=1), 0)
    assert_equals_numpy(run(src, x), want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_of_an_empty_tile_under_an_if(device, op):
    _check_tiles(lambda src, x: zynbook.run(src, device=device, x=x),
                 lambda src, line, col, x: raises("runtime", src, line, col, device=device, x=x),
                 op)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_of_an_empty_tile_on_the_launch_ir(monkeypatch, target, op):
    _on_launch_ir(monkeypatch, target, _check_tiles, op)


def test_tiles_surely_not_empty_carry_no_check():
    # a tile of sizes alone where no if guards it (an empty one is refused at the launch):
    # no error site; one under an if: one
    from compute_testing import lower_block

    from zynbook.compiler import errflag, schedules
    from zynbook.compiler.targets import cuda_target
    x = _data((3, 7), 1)

    def sites(src):
        kernel, _, sizes, _ = lower_block(src, {"x": x}, {}, {})
        return [s for s in schedules.build(kernel, cuda_target((9, 0)), sizes).sites
                if s.kind == errflag.NO_INDEX]
    guarded = TILE.replace("OP", "argmax")
    assert not sites(guarded.replace("        if x[a, 0] > 0.0:\n    ", ""))
    assert [s.line for s in sites(guarded)] == [4]


@pytest.mark.parametrize("device", DEVICES)
def test_a_tile_a_loop_leaves_empty(device):
    # x[r, 0:r] is empty at r = 0 only, known as the block runs
    src = """let y = compute(x) {
    for r in 0..rows:
        out[r] = reduce(argmin, x[r, 0:r + D])
}
y
"""
    x = _data((3, 4), 3)
    raises("runtime", src.replace("D", "0"), 3, 9, device=device, x=x)
    want = [np.argmin(x[r, :r + 1]) for r in range(3)]
    assert_equals_numpy(zynbook.run(src.replace("D", "1"), device=device, x=x), np.array(want), 0)
