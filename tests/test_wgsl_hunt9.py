"""WebGPU (llvmpipe's `vulkan:0` and `gl:0`) against numpy, next to the reference and the
C++ device: reduce kernels with a thread's own `shared var`, 64-bit integers held in 32
bits."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9909)


def _run(device, src, /, **inputs):
    out = zynbook.run(src, device=device, **inputs)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


# ------------------------------------ reduce kernels with a thread's own shared array

_ROWS = RNG.standard_normal((5, 257)).astype(np.float32)
_TIES = RNG.integers(-3, 4, (9, 33)).astype(np.float32)

_SHARED = {
    # the row's loop runs 8 iterations at a time on llvmpipe: each copy declared `t` again
    "min_of_rows_unrolled": ("""let r = compute(x) {
    @kernel reduce(min, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[4]
        t[1] = x[i, j]
        t[3] = t[1] + t[1]
        yield t[3] + t[0]
}
r""", {"x": _ROWS}, _ROWS.min(1) * 2, 1e-6),
    "sum_of_everything": ("""let r = compute(x) {
    @kernel reduce(+)
    for i in 0..rows, j in 0..cols:
        shared var t[2]
        t[j % 2] = x[i, j]
        yield t[0] - t[1]
}
r""", {"x": _ROWS}, np.where(np.arange(257) % 2 == 0, _ROWS, -_ROWS).astype(np.float64).sum(), 1e-4),
    # the positions were i64 in the program for the launch's sizes: WGSL has none
    "argmax_with_ties": ("""let r = compute(x) {
    @kernel reduce(argmax, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[1]
        t[0] = x[i, j]
        yield (t[0], j)
}
r""", {"x": _TIES}, _TIES.argmax(1), 0),
    "argmin_along_the_outer_loop": ("""let r = compute(x) {
    @kernel reduce(argmin, axis=0)
    for i in 0..rows:
        shared var t[cols]
        for j in 0..cols:
            t[j] = x[i, j]
        barrier()
        for j in 0..cols:
            yield (t[cols - 1 - j], i)
}
r""", {"x": _TIES}, _TIES[:, ::-1].argmin(0), 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_SHARED))
def test_a_reduce_kernel_with_a_threads_own_shared_array(name, device):
    """WebGPU refused a reduce kernel with a `shared var` ("shared arrays in a reduce
    kernel"); its program for the launch's sizes holds it as the thread's own array, as
    C++, CUDA and Metal do."""
    src, ins, want, tol = _SHARED[name]
    assert_equals_numpy(_run(device, src, **ins), want, tol)


# ------------------------------------ 64-bit integers, held in 32 bits on WebGPU

_WEBGPU = ("vulkan", "gl", "webgpu", "browser")
_I64 = np.array([7, -5, 100000, -46341, 2 ** 29 + 3, 0, -1, 65535, 3], np.int64)
_J64 = np.array([3, -7, -3, 46341, 1, 9, -2 ** 31 + 2, 1, 65537], np.int64)
_AT = np.array([8, 0, 3, 1, 2, 4, 7, 6, 5], np.int64)


def _i64_block(body: str, names: str = "a, b") -> str:
    return f"let y = compute({names}) {{\n    for k in 0..n:\n        {body}\n}}\ny\n"


def _trunc_div(a, b):
    return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))


_I64_FITS = {
    "sum_and_difference": ("out[k] = a[k] + b[k] - 1", lambda a, b: a + b - 1),
    "negated": ("out[k] = -a[k] + 0", lambda a, b: -a),
    "product_of_small_values": ("out[k] = a[k] % 1000 * (b[k] % 50)",
                                lambda a, b: np.fmod(a, 1000) * np.fmod(b, 50)),
    "quotient_and_remainder": ("out[k] = a[k] / 7 + a[k] % 7",
                               lambda a, b: _trunc_div(a, 7) + np.fmod(a, 7)),
    "min_and_max": ("out[k] = max(a[k], b[k]) - min(a[k], 0)",
                    lambda a, b: np.maximum(a, b) - np.minimum(a, 0)),
    "a_local_and_a_running_value": (
        "let v = a[k] * 2\n        var s = v\n        for j in 0..n:\n"
        "            s = max(s, a[j] - 1)\n        out[k] = s - v",
        lambda a, b: np.maximum(2 * a, (a - 1).max()) - 2 * a),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_I64_FITS))
def test_i64_arithmetic_on_data_whose_values_fit_32_bits(name, device):
    """i64 arithmetic on i64 data was refused on WebGPU ("64-bit integer arithmetic whose
    values may not fit 32 bits"): numpy's answer where every value fits 32 bits, as the
    buffers holding it there do."""
    body, want = _I64_FITS[name]
    got = _run(device, _i64_block(body), a=_I64, b=_J64)
    assert_equals_numpy(got, want(_I64, _J64), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_an_index_computed_in_i64(device):
    x = RNG.standard_normal(9).astype(np.float32)
    got = _run(device, _i64_block("out[k] = x[n - 1 - at[k]] + x[at[k] * 2 % n]", "x, at"),
               x=x, at=_AT)
    assert_equals_numpy(got, x[8 - _AT] + x[_AT * 2 % 9], 0)


_EDGES = [(-2 ** 31, -1), (-1, -2 ** 31), (-2 ** 31, 1), (46341, 46341), (46340, 46340),
          (-46341, 46341), (65536, 32768), (-65536, 32768), (2 ** 31 - 1, -1), (0, -2 ** 31),
          (3, 715827882), (3, 715827883), (-3, 715827883), (-2, 2 ** 30), (2, 2 ** 30),
          (2 ** 31 - 1, 1), (-2 ** 31, -1 + 0)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["+", "-", "*"])
def test_i64_arithmetic_past_32_bits(op, device):
    """numpy's value where 64-bit integers exist, and on WebGPU where it fits 32 bits; past
    them a runtime error at the line there, never a wrapped value."""
    src = _i64_block(f"out[k] = a[k] {op} b[k]")
    for x, z in _EDGES:
        want = {"+": x + z, "-": x - z, "*": x * z}[op]
        a, b = np.array([x], np.int64), np.array([z], np.int64)
        if device.startswith(_WEBGPU) and not -2 ** 31 <= want < 2 ** 31:
            with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
                _run(device, src, a=a, b=b)
            assert e.value.line == 3
            continue
        assert_equals_numpy(_run(device, src, a=a, b=b), np.array([want], np.int64), 0)


_TO_I64 = {
    "f32": np.array([1.5, -2.75, 3e5, np.nan, -2 ** 31, 2147483520.0, -0.0, 1e-40, -1.9],
                    np.float32),
    "u32": np.array([0, 1, 2 ** 31 - 2, 77], np.uint32),
    "f16": np.array([65504, -65504, np.nan, 0.5, -7.9], np.float16),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", sorted(_TO_I64))
def test_a_conversion_to_i64(dtype, device):
    """i64(x) of a float or u32 x was refused on WebGPU ("cannot spell 64-bit integers"):
    truncated toward zero, NaN 0, as numpy's where it fits 32 bits."""
    x = _TO_I64[dtype]
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(x.astype(np.float64)), 0, np.trunc(x.astype(np.float64)))
    got = _run(device, _i64_block("out[k] = i64(x[k]) + 1", "x"), x=x)
    assert_equals_numpy(got, want.astype(np.int64) + 1, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("x", [np.float32([2.0 ** 31]), np.float32([-2.0 ** 31 - 256]),
                               np.float32([np.inf]), np.uint32([2 ** 31])])
def test_a_conversion_to_i64_past_32_bits(x, device):
    src = _i64_block("out[k] = i64(x[k])", "x")
    if device.startswith(_WEBGPU):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
            _run(device, src, x=x)
        assert e.value.line == 3
        return
    with np.errstate(invalid="ignore"):
        want = np.clip(x.astype(np.float64), -2.0 ** 63, 2.0 ** 63 - 1024).astype(np.int64)
    want[np.isinf(x.astype(np.float64)) & (x > 0)] = 2 ** 63 - 1
    assert_equals_numpy(_run(device, src, x=x), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_i64_arithmetic_with_a_constant_past_32_bits(device):
    """Refused on WebGPU at its line (the constant cannot be held there)."""
    src = _i64_block("out[k] = a[k] + 3000000000 - 3000000000", "a")
    if device.startswith(_WEBGPU):
        with pytest.raises(zynbook.errors.ZynMLDeviceError, match="constant past 32 bits") as e:
            _run(device, src, a=_I64)
        assert e.value.line == 3
        return
    assert_equals_numpy(_run(device, src, a=_I64), _I64, 0)


def test_checked_i64_arithmetic_on_the_emulator():
    """The launch IR WebGPU's program is built from (+ - * of i64 values held in i32,
    checked) on the emulator: numpy's values, and past 32 bits its error at the line."""
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler import schedules
    from zynbook.compiler.launch import ir
    from zynbook.compiler.targets import webgpu_target
    src = _i64_block("out[k] = a[k] * b[k] - (a[k] + -b[k])")
    a, b = np.array([46340, -3, 2 ** 31 - 1], np.int64), np.array([46340, 7, 1], np.int64)
    k, arrays, sz, sc = lower_block(src, {"a": a, "b": b})
    prog = schedules.build(k, webgpu_target(), sz)
    assert any(isinstance(n, ir.CheckedDiv) and n.op == "*" for n in ir.walk(prog))
    assert_equals_numpy(emulate_kernel(prog, k, arrays, sz, sc), a * b - (a - b), 0)
    k, arrays, sz, sc = lower_block(src, {"a": a, "b": b + 1})
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits"):
        emulate_kernel(schedules.build(k, webgpu_target(), sz), k, arrays, sz, sc)


_I64_ROWS = np.array([[5, -7, 100000, 2 ** 29, 5], [-2 ** 30, 3, 3, 1, -2 ** 31 + 2],
                      [0, 0, 0, 0, 0]], np.int64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmin_and_argmax_of_i64_values_in_a_reduce_kernel(op, device):
    """Refused on WebGPU ("cannot spell 64-bit integers"): the values are held in 32 bits
    there, and so is the best of them."""
    src = f"""let y = compute(m) {{
    @kernel reduce({op}, axis=1)
    for i in 0..r, j in 0..c:
        yield (m[i, j] * 2 - 1, j)
}}
y"""
    assert_equals_numpy(_run(device, src, m=_I64_ROWS // 2),
                        getattr(np, op)(_I64_ROWS // 2 * 2 - 1, axis=1), 0)


_I64_ELEMENTWISE = {
    "where": ("out[k] = where(a[k] > 0, a[k], b[k])", lambda a, b: np.where(a > 0, a, b)),
    "abs": ("out[k] = abs(a[k]) - 1", lambda a, b: np.abs(a) - 1),
    "clamp": ("out[k] = clamp(a[k], -10, b[k] + 20)", lambda a, b: np.minimum(np.maximum(a, -10), b + 20)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_I64_ELEMENTWISE))
def test_where_abs_and_clamp_of_i64(name, device):
    """Refused on WebGPU ("cannot spell 64-bit integers") though each value is one held in
    32 bits (abs(-2^31) excepted: past them, an error at the line)."""
    body, want = _I64_ELEMENTWISE[name]
    assert_equals_numpy(_run(device, _i64_block(body), a=_I64, b=_J64 // 4), want(_I64, _J64 // 4), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_abs_of_the_smallest_i32_held_as_i64(device):
    a = np.array([3, -2 ** 31], np.int64)
    src = _i64_block("out[k] = abs(a[k])", "a")
    if device.startswith(_WEBGPU):
        with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits"):
            _run(device, src, a=a)
        return
    assert_equals_numpy(_run(device, src, a=a), np.abs(a), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_reduce_kernel_multiplying_i64(device):
    """(Refused on WebGPU once; sums, maxima, minima and products there:
    tests/test_wgsl_hunt11.py.)"""
    src = """let y = compute(a) {
    @kernel reduce(*)
    for j in 0..n:
        yield a[j]
}
y"""
    assert_equals_numpy(_run(device, src, a=_I64), _I64.prod(), 0)


_POWERS = [(-2, 31), (2, 31), (46340, 2), (46341, 2), (-1, 33), (-1, 40), (0, 40), (1, 99),
           (3, 19), (3, 20), (-7, 11), (-7, 12), (5, 0)]


@pytest.mark.parametrize("device", DEVICES)
def test_an_i64_power(device):
    """`x ** k` of i64 x was refused on WebGPU ("cannot spell 64-bit integers"): numpy's
    value where it fits 32 bits, else a runtime error at the line there."""
    for base, k in _POWERS:
        src = _i64_block(f"out[k] = a[k] ** {k}", "a")
        a = np.array([base], np.int64)
        want = a ** k
        if device.startswith(_WEBGPU) and not -2 ** 31 <= int(want[0]) < 2 ** 31:
            with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="past the 32 bits") as e:
                _run(device, src, a=a)
            assert e.value.line == 3
            continue
        assert_equals_numpy(_run(device, src, a=a), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_reduce_kernels_shared_array_past_what_wgsl_gives_a_thread(device):
    """Each thread's own there: WGSL gives a thread 8192 bytes (llvmpipe ran a `shared var
    t[100000]` for minutes); past them a device error that says so."""
    src = """let y = compute(x) {
    @kernel reduce(+, axis=0)
    for i in 0..r:
        shared var t[3000]
        for j in 0..c:
            t[j] = x[i, j]
        for j in 0..c:
            yield t[j]
}
y"""
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    if device.startswith(_WEBGPU):
        with pytest.raises(zynbook.errors.ZynMLDeviceError, match="12000 bytes .* 8192 bytes"):
            _run(device, src, x=x)
        return
    assert_equals_numpy(_run(device, src, x=x), x.astype(np.float64).sum(0), 1e-5)
