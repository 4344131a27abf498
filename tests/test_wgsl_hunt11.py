"""WebGPU (llvmpipe's `vulkan:0`) against numpy, next to the reference and the C++ device:
reduce kernels of 64-bit integers held in two 32-bit words, reduce kernels whose yields
sit behind a running value in the kept loops, u64 arithmetic held in 32 bits, 64-bit
integers beside integers of the other signedness, host ints past i32 beside unsigned data."""
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


_PRODUCTS = {
    "small": np.array([3, -7, 11], np.int64),
    "smallest_i32": np.array([-65536, 32768], np.int64),
    "u64_largest": np.array([65535, 65537], np.uint64),
    # a 0 after the product passed 32 bits (and 64): 0
    "zero_after_it_passed": np.concatenate([np.full(70, 2, np.int64), [0], np.ones(3000, np.int64)]),
    "ones_and_minus_ones": RNG.choice([-1, 1, 1, 1], 5001).astype(np.int64),
    "nothing": np.zeros(0, np.int64),
    # past 32 bits (on WebGPU a runtime error at the yield's line)
    "past": np.array([65536, 32768], np.int64),
    "past_by_minus_one": np.array([-2 ** 31, -1], np.int64),
    "u64_past": np.array([65536, 65536], np.uint64),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("data", sorted(_PRODUCTS))
def test_a_reduce_kernel_multiplying_64_bit_integers(data, device):
    """Refused on WebGPU ("a reduce(*) of 64-bit integers"): the product of the values not
    0 is held in 32 bits there with a state (passed them, a 0 seen), so that a 0 after a
    product past 32 bits gives 0 whatever order the threads combine in."""
    a = _PRODUCTS[data]
    src = _WHOLE.format(op="*")
    exact = int(np.prod(a.astype(object))) if a.size else 1
    held = (-2 ** 31, 2 ** 31 - 1) if a.dtype == np.int64 else (0, 2 ** 32 - 1)
    if _webgpu(device) and not held[0] <= exact <= held[1]:
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, a=a)
        assert e.value.line == 4
        return
    assert_equals_numpy(_run(device, src, a=a), a.prod(), 0)


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
    # a product: past 32 bits, then a 0
    p = _PRODUCTS["zero_after_it_passed"]
    k, arrays, sz, sc = lower_block(_WHOLE.format(op="*"), {"a": p})
    assert_equals_numpy(emulate_kernel(schedules.build(k, webgpu_target(), sz), k, arrays, sz, sc),
                        np.array(0, np.int64), 0)


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


# ------------------------------------ u64 arithmetic, held in 32 bits on WebGPU

def _block(body: str, names: str = "a, b") -> str:
    return f"let y = compute({names}) {{\n    for k in 0..n:\n        {body}\n}}\ny\n"


_U64 = np.array([7, 5, 100000, 65535, 2 ** 31 + 3, 0, 1, 65536, 3, 2 ** 32 - 1], np.uint64)
_V64 = np.array([3, 7, 3, 65537, 1, 9, 2 ** 31, 1, 65535, 0], np.uint64)

_U64_FITS = {
    "sum": ("out[k] = a[k] + b[k]", lambda a, b: a + b),
    "product": ("out[k] = a[k] * b[k]", lambda a, b: a * b),
    "quotient_and_remainder": ("out[k] = a[k] / 7 + a[k] % 7", lambda a, b: a // 7 + a % 7),
    "remainders_multiplied": ("out[k] = a[k] % 1000 * (b[k] % 50)", lambda a, b: a % 1000 * (b % 50)),
    "max_less_min": ("out[k] = max(a[k], b[k]) - min(a[k], b[k])",
                     lambda a, b: np.maximum(a, b) - np.minimum(a, b)),
    "clamp": ("out[k] = clamp(a[k], 5, b[k] + 20)", lambda a, b: np.minimum(np.maximum(a, 5), b + 20)),
    "where": ("out[k] = where(a[k] > b[k], a[k], b[k])", lambda a, b: np.maximum(a, b)),
    "abs": ("out[k] = abs(a[k])", lambda a, b: a),
    "a_local_doubled": ("var s = a[k] / 2\n        s = s * 2 + 1\n        out[k] = s",
                        lambda a, b: a // 2 * 2 + 1),
    "a_local_sum": ("var s: u64 = 0\n        for j in 0..n:\n            s += a[j] % 1000\n"
                    "        out[k] = s + b[k]", lambda a, b: (a % 1000).sum() + b),
    "beside_u32": ("out[k] = a[k] + u32(b[k] % 9)", lambda a, b: a + b % 9),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_U64_FITS))
def test_u64_arithmetic_whose_values_fit_32_bits(name, device):
    """u64 arithmetic was refused on WebGPU ("the WGSL dialect cannot spell 64-bit
    integers"), pointing at line 1: computed in u32 there, as i64's is in i32."""
    body, want = _U64_FITS[name]
    assert_equals_numpy(_run(device, _block(body), a=_U64, b=_V64), want(_U64, _V64), 0)


_U64_EDGES = [(2 ** 32 - 1, 1), (0, 1), (65536, 65536), (65535, 65537), (2 ** 31, 2),
              (2 ** 32 - 1, 0), (5, 5), (1, 2 ** 32 - 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["+", "-", "*"])
def test_u64_arithmetic_past_32_bits(op, device):
    """numpy's value (wrapped at 2^64) where 64-bit integers exist; on WebGPU where it fits
    32 bits, else a runtime error at the line, never a value wrapped at 2^32."""
    src = _block(f"out[k] = a[k] {op} b[k]")
    for x, z in _U64_EDGES:
        a, b = np.array([x], np.uint64), np.array([z], np.uint64)
        with np.errstate(over="ignore"):
            want = {"+": a + b, "-": a - b, "*": a * b}[op]
        exact = {"+": x + z, "-": x - z, "*": x * z}[op]
        if _webgpu(device) and not 0 <= exact < 2 ** 32:
            with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
                _run(device, src, a=a, b=b)
            assert e.value.line == 3
            continue
        assert_equals_numpy(_run(device, src, a=a, b=b), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_u64_negated_and_a_power(device):
    a = np.array([0, 1, 65535, 65536], np.uint64)
    for body, exact in [("-a[k]", lambda x: -x), ("a[k] ** 2", lambda x: x * x)]:
        src = _block(f"out[k] = {body}", "a")
        with np.errstate(over="ignore"):
            want = {"-a[k]": -a, "a[k] ** 2": a * a}[body]
        for at in range(len(a)):
            x = a[at:at + 1]
            if _webgpu(device) and not 0 <= exact(int(x[0])) < 2 ** 32:
                with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits"):
                    _run(device, src, a=x)
                continue
            assert_equals_numpy(_run(device, src, a=x), want[at:at + 1], 0)


_SIGNS = {
    # ZynML's promotion: the wider integer, of equal widths the signed one; (the positions
    # whose values pass 32 bits on WebGPU)
    "i64_plus_u32": ("out[k] = a[k] + u[k]", "a, u", np.array([1, 2, -5], np.int64),
                     np.array([3000000000, 5, 3], np.uint32), lambda a, u: a + u.astype(np.int64),
                     (0,)),
    "u64_plus_i32": ("out[k] = a[k] + u[k]", "a, u", np.array([7, 5, 2 ** 31 + 3], np.uint64),
                     np.array([-7, 3, 0], np.int32),
                     lambda a, u: a + u.astype(np.int64).astype(np.uint64), (0,)),
    "max_of_i64_and_u32": ("out[k] = max(a[k], u[k])", "a, u", np.array([1, 2, -5], np.int64),
                           np.array([3000000000, 5, 3], np.uint32),
                           lambda a, u: np.maximum(a, u.astype(np.int64)), (0,)),
    "u64_of_i32": ("out[k] = u64(u[k]) + a[k]", "a, u", np.array([1, 2, 0], np.uint64),
                   np.array([-1, 5, 2 ** 31 - 1], np.int32),
                   lambda a, u: u.astype(np.int64).astype(np.uint64) + a, (0,)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_SIGNS))
def test_64_bit_integers_beside_the_other_signedness(name, device):
    """A u32 beside i64 (an i32 beside u64) took its bits as the 32 bits of the other
    type on WebGPU: 1 + 3000000000 gave -1294967295 and max(1, 3000000000) 1. Converted
    there as the reference converts it: numpy's value where every value fits 32 bits,
    else a runtime error at the line."""
    body, names, a, u, want, past = _SIGNS[name]
    src = _block(body, names)
    for at in range(3):
        x, y = a[at:at + 1], u[at:at + 1]
        if _webgpu(device) and at in past:
            with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
                _run(device, src, a=x, u=y)
            assert e.value.line == 3
            continue
        with np.errstate(over="ignore"):
            assert_equals_numpy(_run(device, src, a=x, u=y), want(x, y), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_an_i32_stored_to_a_u64_output(device):
    """Refused on WebGPU at line 1 ("cannot spell 64-bit integers"): converted as the
    reference converts it, a negative value past the 32 bits a u64 is held in."""
    src = _block("out[k] = u64(0)\n        out[k] = i[k]", "i")
    i = np.array([5, 0, 2 ** 31 - 1], np.int32)
    assert_equals_numpy(_run(device, src, i=i), i.astype(np.uint64), 0)
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, i=np.array([-5], np.int32))
        assert e.value.line == 4
        return
    assert_equals_numpy(_run(device, src, i=np.array([-5], np.int32)),
                        np.array([-5], np.int64).astype(np.uint64), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_u64_compared_with_i32(device):
    a = np.array([7, 2 ** 31 + 3, 0, 2 ** 32 - 1], np.uint64)
    i = np.array([-7, 3, 0, -1], np.int32)
    want = a.astype(object) > i.astype(object)
    assert_equals_numpy(_run(device, _block("out[k] = a[k] > i[k]", "a, i"), a=a, i=i),
                        want.astype(bool), 0)


_TO_U64 = {
    "f32": (np.array([1.5, -2.5, 3e9, np.nan, -0.0, 65535.9, 7], np.float32),
            np.array([1, 0, 3000000000, 0, 0, 65535, 7], np.uint64)),
    "i32": (np.array([3, 0, 2 ** 31 - 1], np.int32), np.array([3, 0, 2 ** 31 - 1], np.uint64)),
    "i64": (np.array([3, 0, 2 ** 31 - 1], np.int64), np.array([3, 0, 2 ** 31 - 1], np.uint64)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", sorted(_TO_U64))
def test_a_conversion_to_u64(dtype, device):
    """u64(x) of a float or signed x was refused on WebGPU: truncated toward zero, a
    negative float 0 and NaN 0 (docs/language.md: saturating)."""
    x, want = _TO_U64[dtype]
    assert_equals_numpy(_run(device, _block("out[k] = u64(x[k])", "x"), x=x), want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("x", [np.float32([2.0 ** 32]), np.int32([-1]), np.int64([-5])])
def test_a_conversion_to_u64_past_32_bits(x, device):
    src = _block("out[k] = u64(x[k])", "x")
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, x=x)
        assert e.value.line == 3
        return
    want = x.astype(np.int64).astype(np.uint64)
    assert_equals_numpy(_run(device, src, x=x), want, 0)


def test_checked_u64_arithmetic_on_the_emulator():
    """The launch IR WebGPU's program is built from (u64 + - * held in u32, checked) on the
    emulator: numpy's values, and past 32 bits its error at the line."""
    from zynbook.compiler import schedules
    from zynbook.compiler.launch import ir
    from zynbook.compiler.targets import webgpu_target
    src = _block("out[k] = a[k] * b[k] - (a[k] + b[k])")
    a, b = np.array([65535, 3, 40000], np.uint64), np.array([65535, 7, 50000], np.uint64)
    k, arrays, sz, sc = lower_block(src, {"a": a, "b": b})
    prog = schedules.build(k, webgpu_target(), sz)
    assert any(isinstance(n, ir.CheckedDiv) and n.op == "*" and n.dtype == "u32"
               for n in ir.walk(prog))
    assert_equals_numpy(emulate_kernel(prog, k, arrays, sz, sc), a * b - (a + b), 0)
    k, arrays, sz, sc = lower_block(src, {"a": a + 1, "b": b + 1})     # 65536 * 65536
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits"):
        emulate_kernel(schedules.build(k, webgpu_target(), sz), k, arrays, sz, sc)


@pytest.mark.parametrize("device", DEVICES)
def test_what_webgpu_cannot_hold_names_its_line(device):
    """A statement the WGSL dialect cannot spell (i64 arithmetic compared with a constant
    past 32 bits) was reported at line 1, the block's: the statement's line now."""
    src = """let y = compute(a) {
    for k in 0..n:
        let t = a[k] + 1
        out[k] = a[k] * 2 < 5000000000 + t
}
y"""
    a = np.array([7, -5, 2 ** 31 - 1], np.int64)
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLDeviceError, match="64-bit integers") as e:
            _run(device, src, a=a)
        assert e.value.line == 4
        return
    assert_equals_numpy(_run(device, src, a=a), a * 2 < 5000000000 + a + 1, 0)


_PAST_CONSTANTS = {
    "below": ("a[k] < 5000000000", lambda a: a < 5000000000),
    "a_sentinel": ("a[k] != -9223372036854775808", lambda a: a != -2 ** 63),
    "constant_first": ("-5000000000 >= a[k]", lambda a: -5000000000 >= a),
    "in_where": ("where(a[k] == 5000000000, 0, a[k])", lambda a: np.where(a == 5000000000, 0, a)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_PAST_CONSTANTS))
def test_an_i64_compared_with_a_constant_past_32_bits(name, device):
    """Refused on WebGPU ("cannot spell 64-bit integers"), pointing at line 1: every i64
    value there is held in 32 bits, so it lies on one side of the constant."""
    body, want = _PAST_CONSTANTS[name]
    a = np.array([7, -5, 2 ** 31 - 1, -2 ** 31], np.int64)
    assert_equals_numpy(_run(device, _block(f"out[k] = {body}", "a"), a=a), want(a), 0)


_SHARED = {
    "i64_in_a_reduce_kernel": ("""let y = compute(a) {
    @kernel reduce(+)
    for j in 0..n:
        shared var t[2]: i64
        t[0] = a[j]
        t[1] = t[0] * 3
        yield t[1]
}
y""", np.array([7, -5, 100000, -2 ** 20], np.int64), lambda a: (a * 3).sum()),
    "u64_in_a_reduce_kernel": ("""let y = compute(a) {
    @kernel reduce(max)
    for j in 0..n:
        shared var t[2]: u64
        t[0] = a[j]
        t[1] = t[0] / 3
        yield t[1]
}
y""", np.array([7, 5, 100000, 2 ** 32 - 1], np.uint64), lambda a: (a // 3).max()),
    "i64_in_a_block": ("""let y = compute(a) {
    for i in 0..r:
        shared var t[c]: i64
        for j in 0..c:
            t[j] = a[i, j]
        barrier()
        for j in 0..c:
            out[i, j] = t[c - 1 - j] + t[j] * 2
}
y""", np.array([[7, -5, 100000], [1, 2, -2 ** 20]], np.int64), lambda a: a[:, ::-1] + a * 2),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_SHARED))
def test_a_shared_array_of_64_bit_integers(name, device):
    """`shared var t[2]: i64` was refused on WebGPU ("cannot spell 64-bit integers"): held
    in 32 bits there, as the buffers are."""
    src, a, want = _SHARED[name]
    assert_equals_numpy(_run(device, src, a=a), want(a), 0)


# ------------------------------------ a host int past i32 beside unsigned data

_HOST = {
    "u32_sum": ("out[k] = u[k] + k0", np.array([1, 2, 1294967295, 4294967295], np.uint32)),
    "u32_product_less_itself": ("out[k] = u[k] * k0 - k0", np.array([0, 1, 3, 2 ** 31], np.uint32)),
    "u32_max": ("out[k] = max(u[k], k0)", np.array([1, 3000000001, 4294967295], np.uint32)),
    "u32_compared": ("out[k] = u[k] < k0", np.array([1, 3000000000, 4294967295], np.uint32)),
    "u32_quotient": ("out[k] = u[k] / k0 + u[k] % k0", np.array([1, 3000000000, 4294967295],
                                                                np.uint32)),
    "u64_sum": ("out[k] = u[k] + k0", np.array([1, 5, 1000], np.uint64)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_HOST))
def test_a_host_int_past_i32_beside_unsigned_data(name, device):
    """`u[i] + k` with k = 3000000000 is u32 arithmetic (docs/language.md); WebGPU refused
    it ("the host int `k` = 3000000000 is past the 32-bit integers"): k fits a u32, and is
    passed as one."""
    body, u = _HOST[name]
    k0 = np.array(3_000_000_000, u.dtype)
    with np.errstate(over="ignore"):
        want = {"u32_sum": lambda: u + k0, "u32_product_less_itself": lambda: u * k0 - k0,
                "u32_max": lambda: np.maximum(u, k0), "u32_compared": lambda: u < k0,
                "u32_quotient": lambda: u // k0 + u % k0, "u64_sum": lambda: u + k0}[name]()
    assert_equals_numpy(_run(device, _block(body, "u"), u=u, k0=3_000_000_000), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_int_past_u32_beside_u64_data(device):
    u = np.array([1, 5], np.uint64)
    src = _block("out[k] = u[k] + k0", "u")
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLDeviceError, match="`k0` = 5000000000"):
            _run(device, src, u=u, k0=5_000_000_000)
        return
    assert_equals_numpy(_run(device, src, u=u, k0=5_000_000_000), u + np.uint64(5_000_000_000), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_the_smallest_i32_held_as_i64_divided_by_minus_one(device):
    """-2^31 / -1 of i64 is 2^31: on WebGPU past the 32 bits it is held in, where the error
    said "integer overflow: -2147483648 / -1 does not fit its integer type" (i64's does)."""
    src = _block("out[k] = a[k] / b[k]")
    a, b = np.array([-2 ** 31, 7, -9], np.int64), np.array([-1, -2, 2], np.int64)
    if _webgpu(device):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, a=a, b=b)
        assert e.value.line == 3
        assert_equals_numpy(_run(device, src, a=a[1:], b=b[1:]), np.array([-3, -4], np.int64), 0)
    else:
        assert_equals_numpy(_run(device, src, a=a, b=b), np.array([2 ** 31, -3, -4], np.int64), 0)
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="division by zero"):
        _run(device, src, a=a, b=np.array([1, 0, 1], np.int64))
