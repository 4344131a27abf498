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


# ------------------------------------ reduce kernels that yield numbers made from tiles

_A, _B = _f32(33, 7), _f32(33, 7)

_TILE_YIELDS = {
    "sum_of_a_row": ("""let r = compute(a) {
    @kernel reduce(+)
    for i in 0..n:
        let t = a[i] * 2.0
        yield sqrt(sum(t * t))
}
r""", np.sqrt(((2 * _A.astype(np.float64)) ** 2).sum(1)).sum(), 1e-4),
    "argmax_of_row_dots": ("""let r = compute(a, b) {
    @kernel reduce(argmax)
    for i in 0..n:
        yield (dot(a[i], b[i]), i)
}
r""", np.int64((_A.astype(np.float64) * _B).sum(1).argmax()), 0),
    "min_along_an_axis_of_row_maxima": ("""let r = compute(a) {
    @kernel reduce(min, axis=0)
    for i in 0..n, k in 0..3:
        yield reduce(max, a[i]) * k
}
r""", (_A.max(1)[:, None] * np.arange(3)).min(0), 1e-5),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_TILE_YIELDS))
def test_a_reduce_kernel_yields_a_reduction_of_a_tile(name, device):
    """`yield sum(x[i])`, `yield (dot(a[i], b[i]), i)`: one number a yield, as the reduce
    kernel type asks, made from a row. The reference ran them; `cpu:native` and WebGPU
    refused the kernel, listing every schedule's reason (the reduce schedule lowers scalars
    only, and the pass writing tiles as loops refused any yield). The tiles are now loops
    before the yield."""
    src, want, tol = _TILE_YIELDS[name]
    assert_equals_numpy(_run(device, src, a=_A, b=_B), want, tol)


# ------------------------------------ reduce kernels with shared arrays

_S = _f32(7, 33)
_BIG = _f32(3, 5000)

_SHARED_REDUCES = {
    "sum_along_rows_of_a_reversed_row": ("""let r = compute(x) {
    @kernel reduce(+, axis=0)
    for i in 0..rows:
        shared var t[cols]
        for j in 0..cols:
            if j % 3 == 0:
                t[j] = x[i, j] * 2.0
        barrier()
        for j in 0..cols:
            yield t[cols - 1 - j]
}
r""", {"x": _S}, np.where(np.arange(33) % 3 == 0, 2 * _S, 0)[:, ::-1].astype(np.float64).sum(0), 1e-4),
    "argmax_through_an_f16_pair": ("""let r = compute(x) {
    @kernel reduce(argmax, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[2]: f16
        t[0] = x[i, j]
        t[1] = x[i, cols - 1 - j]
        barrier()
        yield (f32(t[0]) + f32(t[1]), j)
}
r""", {"x": _S}, (_S.astype(np.float16).astype(np.float32)
                  + _S[:, ::-1].astype(np.float16).astype(np.float32)).argmax(1), 0),
    "max_of_long_rows": ("""let r = compute(x) {
    @kernel reduce(max, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[3]
        t[0] = x[i, j]
        t[1] = t[0] * 2.0
        yield t[1] - t[2]
}
r""", {"x": _BIG}, _BIG.max(1) * 2, 1e-5),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_SHARED_REDUCES))
def test_a_reduce_kernel_with_a_shared_array(name, device):
    """A reduce kernel that stages values in a `shared var` (zero-filled where it is
    declared) ran on the reference and was refused on `cpu:native` ("shared arrays in a
    reduce kernel"): one thread runs each iteration that declares the array, so it is that
    thread's own array there (and on CUDA, Metal and WebGPU's program for the launch's
    sizes)."""
    src, ins, want, tol = _SHARED_REDUCES[name]
    assert_equals_numpy(_run(device, src, **ins), want, tol)


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("name", ["sum_along_rows_of_a_reversed_row", "max_of_long_rows"])
def test_a_reduce_kernel_with_a_shared_array_on_the_gpu_targets(name, target):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    src, ins, want, tol = _SHARED_REDUCES[name]
    k, arrays, sz, sc = lower_block(src, ins)
    prog = schedules.build(k, {"cuda": cuda_target, "metal": metal_target}[target](), sz)
    assert prog.schedule.startswith("reduce"), prog.schedule
    assert_equals_numpy(emulate_kernel(prog, k, arrays, sz, sc), want, tol)
