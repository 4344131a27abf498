"""Programs written from the spec's kernel types (zynml-compute-system.md: reduce with an
axis, argmax/argmin, matmul and its epilogues, conv2d, fused rows) and docs/language.md's
annotations, at odd sizes, on every device present, compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(8808)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ reduce(axis=k) along a loop the kept loops sit inside

_X = _f32(7, 33)
_X3 = _f32(4, 6, 5)


def _running(x, op, axis, arg=False):
    """`op` over axis `axis` of the running sums of x's rows along its other axes (flattened
    in order), keeping the other axes; with `arg` the first position of the extreme."""
    run = np.cumsum(x.reshape(x.shape[0], -1).astype(np.float64), 1).reshape(x.shape)
    return (getattr(np, "arg" + op) if arg else getattr(np, op))(run, axis=axis)


_RUNNING = {
    "max_keeping_the_inner_loop": ("""let r = compute(x) {
    @kernel reduce(max, axis=0)
    for i in 0..rows:
        var run = 0.0
        for j in 0..cols:
            run += x[i, j]
            yield run
}
r""", {"x": _X}, _running(_X, "max", 0)),
    "argmin_keeping_two_inner_loops": ("""let r = compute(x) {
    @kernel reduce(argmin, axis=0)
    @workgroup(64)
    for i in 0..p:
        var run = 0.0
        for j in 0..q:
            for k in 0..s:
                run += x[i, j, k]
                yield (run, i)
}
r""", {"x": _X3}, _running(_X3, "min", 0, arg=True)),
    "sum_of_the_middle_loop_under_an_if": ("""let r = compute(x) {
    @kernel reduce(+, axis=-2)
    for i in 0..p:
        var run = 0.0
        for j in 0..q:
            for k in 0..s:
                run += x[i, j, k]
                if k != 2:
                    yield run
}
r""", {"x": _X3}, np.where(np.arange(5) != 2, _running(_X3, "sum", 1), 0.0)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_RUNNING))
def test_reduce_along_an_outer_loop_past_a_var_carried_by_the_kept_loops(name, device):
    """`reduce(op, axis=k)` reducing an outer loop while the kept loops run inside it behind
    a `var` they carry: the reference kept the inner loops as the output's axes; `cpu:native`
    and WebGPU refused the kernel ("a yield inside a loop the nest of loops around it does
    not reach"), pointing at line 1. Each output now runs the body as written and combines
    the yields at its own kept position."""
    src, ins, want = _RUNNING[name]
    assert_equals_numpy(_run(device, src, **ins), want, 1e-4)


@pytest.mark.parametrize("target", ["cuda", "metal"])
def test_reduce_past_a_carried_var_on_the_gpu_targets(target):
    """The same kernel through the CUDA and Metal targets' launch IR, on the emulator."""
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    src, ins, want = _RUNNING["argmin_keeping_two_inner_loops"]
    k, arrays, sz, sc = lower_block(src, ins)
    prog = schedules.build(k, {"cuda": cuda_target, "metal": metal_target}[target](), sz)
    assert prog.schedule.startswith("reduce"), prog.schedule
    assert_equals_numpy(emulate_kernel(prog, k, arrays, sz, sc), want, 0)
