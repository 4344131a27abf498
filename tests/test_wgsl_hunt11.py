"""WebGPU (llvmpipe's `vulkan:0`) against numpy, next to the reference and the C++ device:
reduce kernels of 64-bit integers held in two 32-bit words, reduce kernels whose yields
sit behind a running value in the kept loops."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(1111)
_WEBGPU = ("vulkan", "gl", "webgpu", "browser")


def _run(device, src, /, **inputs):
    out = zynbook.run(src, device=device, **inputs)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


def _webgpu(device) -> bool:
    return device.startswith(_WEBGPU)


# ------------------------------------ reduce(+), reduce(max), reduce(min) of i64 and u64

_NP_OPS = {"+": np.sum, "max": np.max, "min": np.min}

_WHOLE = """let y = compute(a) {{
    @kernel reduce({op})
    for j in 0..n:
        yield a[j]
}}
y"""

_ROWS = """let y = compute(m) {{
    @kernel reduce({op}, axis={axis})
    for i in 0..r, j in 0..c:
        yield m[i, j] {extra}
}}
y"""

_WIDE_DATA = {
    "i64_small": RNG.integers(-1000, 1000, 70001).astype(np.int64),
    "i64_near_the_ends": np.array([2 ** 31 - 1, -2 ** 31, 5, -7, 2 ** 30], np.int64),
    "u64": RNG.integers(0, 2 ** 22, 2001).astype(np.uint64),
    "u64_near_the_top": np.array([2 ** 32 - 1, 3, 2 ** 31, 0], np.uint64)[::3].copy(),
    # partial sums pass 32 bits where the total does not: the words hold them
    "i64_partials_past_32_bits": np.array([2 * 10 ** 9] * 700 + [-2 * 10 ** 9] * 700 + [5, -2 ** 31],
                                          np.int64),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("data", sorted(_WIDE_DATA))
@pytest.mark.parametrize("op", sorted(_NP_OPS))
def test_a_reduce_kernel_of_64_bit_integers(op, data, device):
    """Refused on WebGPU ("a reduce(+) of 64-bit integers"): each thread's value, the
    block's and the partials are held in two 32-bit words there, and the result where it
    fits the 32 bits its buffer holds is numpy's."""
    a = _WIDE_DATA[data]
    assert_equals_numpy(_run(device, _WHOLE.format(op=op), a=a), _NP_OPS[op](a), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("op", sorted(_NP_OPS))
def test_a_reduce_kernel_of_i64_rows(op, axis, device):
    m = RNG.integers(-2 ** 20, 2 ** 20, (37, 1001)).astype(np.int64)
    got = _run(device, _ROWS.format(op=op, axis=axis, extra=""), m=m)
    assert_equals_numpy(got, _NP_OPS[op](m, axis=axis), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_count_of_bools(device):
    """`yield m[i, j] > 0` under reduce(+) counts (an i32, docs/language.md), in i64 words:
    refused on WebGPU likewise."""
    m = RNG.integers(-5, 5, (9, 130)).astype(np.int32)
    got = _run(device, _ROWS.format(op="+", axis=1, extra="> 0"), m=m)
    assert_equals_numpy(got, (m > 0).sum(1).astype(np.int32), 0)


_PAST = {
    "sum_of_i64": ("+", np.array([2 ** 31 - 1, 1], np.int64)),
    "negative_sum_of_i64": ("+", np.array([-2 ** 31, -1], np.int64)),
    "sum_of_u64": ("+", np.array([2 ** 32 - 1, 1], np.uint64)),
    "max_of_nothing": ("max", np.zeros(0, np.int64)),
    "min_of_nothing": ("min", np.zeros(0, np.uint64)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_PAST))
def test_a_reduce_kernel_of_64_bit_integers_past_32_bits(name, device):
    """numpy's sum where 64-bit integers exist; on WebGPU a runtime error naming the
    yield's line (the buffer holds 32 bits), never a wrapped value. (The maximum of no
    values is its identity, -2^63, on the others.)"""
    op, a = _PAST[name]
    src = _WHOLE.format(op=op)
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, a=a)
        assert e.value.line == 4
        return
    if not a.size:
        info = np.iinfo(a.dtype)
        assert_equals_numpy(_run(device, src, a=a), info.min if op == "max" else info.max, 0)
        return
    assert_equals_numpy(_run(device, src, a=a), int(a.astype(object).sum()), 0)


def test_a_wide_sum_on_the_emulator():
    """The launch IR WebGPU's program is built from (two words a value) on the emulator."""
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import webgpu_target
    a = np.array([2 * 10 ** 9, 2 * 10 ** 9, -2 * 10 ** 9, -2 * 10 ** 9 + 3], np.int64)
    k, arrays, sz, sc = lower_block(_WHOLE.format(op="+"), {"a": a})
    assert_equals_numpy(emulate_kernel(schedules.build(k, webgpu_target(), sz), k, arrays, sz, sc),
                        np.array(3, np.int64), 0)
    k, arrays, sz, sc = lower_block(_WHOLE.format(op="+"), {"a": a[:2]})
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits"):
        emulate_kernel(schedules.build(k, webgpu_target(), sz), k, arrays, sz, sc)


# ------------------------------------ a running value in the kept loop

_RUNNING = {
    "sum": ("""let r = compute(x) {
    @kernel reduce(+, axis=0)
    for i in 0..rows:
        var run = 0.0
        for j in 0..cols:
            run = run + x[i, j]
            yield run
}
r""", lambda run: run.sum(0), 1e-3),
    "argmax": ("""let r = compute(x) {
    @kernel reduce(argmax, axis=0)
    for i in 0..rows:
        var run = 0.0
        for j in 0..cols:
            run += x[i, j]
            yield (run, i)
}
r""", lambda run: run.argmax(0), 0),
    "min_of_two_kept_loops": ("""let r = compute(x) {
    @kernel reduce(min, axis=0)
    for i in 0..rows:
        var run = 0.0
        for j in 0..a:
            for k in 0..b:
                run = run + x[i, j * b + k]
                yield run
}
r""", lambda run: run.min(0).reshape(50, -1), 1e-3),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_RUNNING))
def test_a_running_value_in_the_kept_loop_at_many_outputs(name, device):
    """One thread per output ran the whole body for every output (rows x cols^2 steps:
    100,000 columns took 20 s on vulkan:0, and cpu:native slowed likewise); each thread now
    owns a range of outputs and runs the body once."""
    src, want, tol = _RUNNING[name]
    # (integers: sums exact in f32, so that argmax ties are numpy's)
    x = RNG.integers(-4, 5, (3, 6000)).astype(np.float32)
    got = _run(device, src, x=x, a=50, b=120)
    assert_equals_numpy(got, want(np.cumsum(x.astype(np.float64), 1)), tol)


def test_a_running_value_in_the_kept_loop_compiles_with_nvcc():
    import nvcc_runs
    from zynbook.compiler.codegen import cuda
    if nvcc_runs.NVCC is None:
        pytest.skip("nvcc not installed")
    k, arrays, sz, sc = lower_block(_RUNNING["argmax"][0], {"x": np.zeros((3, 7000), np.float32)})
    prog = cuda.render_cuda(k, sz)
    assert "a range of outputs a thread" in prog.schedule, prog.schedule
    res = nvcc_runs.run(prog.source, ("--ptx", "-arch=sm_90"))
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.parametrize("device", DEVICES)
def test_a_running_value_in_the_kept_loop_with_no_outputs(device):
    src = _RUNNING["sum"][0]
    assert_equals_numpy(_run(device, src, x=np.zeros((3, 0), np.float32)), np.zeros(0, np.float32), 0)

