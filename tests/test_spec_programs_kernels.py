"""Kernel programs written from the spec's text, each run on every device present (the CPU
reference included) and compared with numpy written here, not with another device: a
device that agrees with the reference but not with numpy fails too."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(2718)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _strided_partial_sums(a, parts):
    # part[t] = a[r, t::parts] summed, then the parts summed: the row sum
    return np.stack([a[:, t::parts].sum(1) for t in range(parts)], 1).sum(1)


def _f16(x):
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def _f16_running_sum(row):
    acc = np.float16(0)
    for v in row:
        acc = np.float16(np.float32(acc) + v)
    return float(acc)


def _i32_running_sum(row):
    acc = 0
    for v in row:
        acc = int(np.float32(acc) + v)      # truncated toward zero at every step
    return float(acc)


def _saturated(x, lo, hi):
    """numpy's float-to-integer conversion, saturating, NaN as 0 (in float64)."""
    x = np.asarray(x, np.float64)
    return np.where(np.isnan(x), 0.0, np.clip(np.trunc(np.nan_to_num(x, nan=0.0)), lo, hi))


# name: (source, inputs, numpy's answer, tolerance)
CASES = {
    # an inner loop whose start is the outer loop's variable, with a step: each lane takes
    # the values its own start gives (the reference masked the lanes off their step wrongly)
    "shared_partial_sums_stepped_from_lane": ("""
let C = 53
let y = compute(a) {
    @workgroup(32)
    for r in 0..R:
        shared var part[16]
        for t in 0..16:
            var s = 0.0
            for c in t..C step 16:
                s += a[r, c]
            part[t] = s
        barrier()
        var tot = 0.0
        for t in 0..16:
            tot += part[t]
        out[r] = tot
}
y
""", {"a": (a := _f32(6, 53))}, _strided_partial_sums(a.astype(np.float64), 16), 1e-4),
    "stepped_inner_loop_from_outer_variable": ("""
let n = len(x)
let y = compute(x) {
    for i in 0..n:
        var s = 0.0
        for j in i..n step 3:
            s += x[j]
        out[i] = s
}
y
""", {"x": (x := _f32(17))}, np.array([x[i::3].sum() for i in range(17)]), 1e-5),
    # booleans summed count as i32 (it gave `True`, or a refusal); max and min of booleans
    # are or and and on every device; bools stored beside bools stay bool (they became i32)
    "reduce_sum_of_comparisons_counts": ("""
let y = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i] > 0.0
}
y
""", {"x": (x := _f32(257))}, np.int32((x > 0).sum()), 0),
    "reduce_max_of_bools_along_axis": ("""
let y = compute(x) {
    @kernel reduce(max, axis=1)
    for i in 0..R, j in 0..C:
        yield x[i, j] > 1.0
}
y
""", {"x": (x := _f32(5, 7))}, (x > 1).any(1), 0),
    "tile_reductions_of_bools": ("""
let y = compute(x) {
    for b in 0..B:
        out[b, 0] = sum(x[b] > 0.0)
        out[b, 1] = reduce(*, x[b] > -2.0)
        out[b, 2] = reduce(+, x[b, 1:2] > 0.5)
}
y
""", {"x": (x := _f32(4, 3, 5))}, np.stack([(x > 0).sum((1, 2)), (x > -2).all((1, 2)),
                                            (x[:, 1:2] > 0.5).sum((1, 2))], 1).astype(np.int32),
        0),
    "bool_tile_max_min_stored_as_bool": ("""
let y = compute(x) {
    for b in 0..B:
        out[b, 0] = reduce(max, x[b] > 1.0)
        out[b, 1] = reduce(min, x[b] > -1.0)
}
y
""", {"x": (x := _f32(6, 3, 5))}, np.stack([(x > 1).any((1, 2)), (x > -1).all((1, 2))], 1), 0),
    # argmax of comparisons orders false before true (WebGPU's WGSL did not compile)
    "argmax_of_comparisons": ("""
let y = compute(x) {
    @kernel reduce(argmax, axis=1)
    for i in 0..R, j in 0..C:
        yield (x[i, j] > 0.5, j)
}
y
""", {"x": (x := RNG.random((6, 9)).astype(np.float32) * np.float32([[1], [1], [0.4], [1], [0.1], [1]]))},
        np.argmax(x > 0.5, 1), 0),
    # casts from a float to an integer saturate and take NaN to 0 on every device (C++ gave
    # x86's -2147483648, WGSL 2147483520, the reference wrapped unsigned values)
    "float_to_integer_casts_saturate": ("""
let y = compute(x) {
    for i in 0..n:
        out[i, 0] = f32(u32(x[i]) / 2)
        out[i, 1] = f32(int(x[i]) / 2)
        out[i, 2] = f32(int(f16(x[i])) / 2)
        out[i, 3] = f32(int(3e9) / 2 + int(-1e10) / 2)
}
y
""", {"x": (x := np.float32([-1.5, -0.5, 0.7, 4e9, 5e9, np.nan, np.inf, -np.inf, -3e9,
                             2147483520.0, 3e19, -2.5, 70000.0]))},
        np.stack([np.floor(_saturated(x, 0, 2 ** 32 - 1) / 2),
                  np.trunc(_saturated(x, -2 ** 31, 2 ** 31 - 1) / 2),
                  np.trunc(_saturated(_f16(x), -2 ** 31, 2 ** 31 - 1) / 2),
                  np.full(13, -1)], 1).astype(np.float32), 0),
    # a reduce along a loop whose bounds follow the kept loop (a triangle): the reduce
    # schedule runs it as written, one thread per output (cpu:native and WebGPU refused it)
    "reduce_along_triangular_loop": ("""
let y = compute(x) {
    @kernel reduce(+, axis=1)
    for i in 0..n, j in i..n:
        yield x[j] * x[i]
}
y
""", {"x": (x := _f32(33))}, np.array([x[i] * x[i:].sum() for i in range(33)]), 1e-4),
    "argmax_along_triangular_loop_with_a_mask": ("""
let n = 17
let y = compute(x) {
    @kernel reduce(argmax, axis=-1)
    for b in 0..B, i in 0..n, j in 0..i + 1:
        if j != 2:
            yield (x[b, j] * float(i + 1), j)
}
y
""", {"x": (x := _f32(3, 17)), "B": 3},
        np.array([[np.argmax(np.where(np.arange(i + 1) == 2, -np.inf, x[b, :i + 1]))
                   for i in range(17)] for b in range(3)], np.int64), 0),
    # out indexed through a let: out's size comes from the let's value (it raised KeyError),
    # and the loop is parallel, so `elementwise` accepts it (a type error before)
    "out_indexed_through_a_let": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        let k = n - 1 - i
        out[k] = x[i] * 2.0
}
y
""", {"x": (x := _f32(17))}, x[::-1] * 2, 0),
    # two iterations writing one element: the loop runs in order, the last write stays
    "out_written_twice_by_a_loop": ("""
let y = compute(x) {
    for i in 0..n, j in 0..4:
        out[i / 2, i - i + j] = x[i] * float(j + 1)
}
y
""", {"x": (x := _f32(2001))},
        np.append(x[1::2], x[-1])[:, None] * np.arange(1, 5, dtype=np.float32), 0),
    # a float literal meeting f16 data is f16 (weak), as numpy's: h == 0.1 holds where h is
    # f16(0.1) (the compiled devices compared with the f32 literal)
    "f16_compared_with_a_literal": ("""
let y = compute(h) {
    for i in 0..n:
        out[i, 0] = h[i] == 0.1
        out[i, 1] = h[i] < 0.1
        out[i, 2] = h[i] >= 65519.0
}
y
""", {"h": (h := np.float16([0.1, 0.0999, 0.1001, 65504, -1, np.inf]))},
        np.stack([h == np.float16(0.1), h < np.float16(0.1), h >= np.float16(65504)], 1), 0),
    # an integer cast to bf16 (WebGPU's WGSL did not compile: its rounding takes an f32)
    "integer_to_bf16": ("""
let y = compute(a) {
    @kernel elementwise
    for i in 0..n:
        out[i] = f32(bf16(a[i]))
}
y
""", {"a": np.int32([1, 70000, -65520, 2049, 16777217, -3])},
        np.float32([1, 70144, -65536, 2048, 16777216, -3]), 0),
    # a host float is an f32 scalar argument, not a weak literal: the reference computed
    # h * scale in f16 (a Python float meeting f16 in numpy) where the devices used f32
    "host_float_scalar_with_f16_data": ("""
let scale = 0.1
let y = compute(h) {
    for i in 0..n:
        out[i, 0] = h[i] * scale + 3.0
        out[i, 1] = float(h[i] == scale)
}
y
""", {"h": (h := np.float16([1.0, 1000.0, -7.5, 0.3, 0.1]))},
        np.stack([h.astype(np.float32) * np.float32(0.1) + 3,
                  h.astype(np.float32) == np.float32(0.1)], 1).astype(np.float32), 0),
    # narrow integers wrap at their own width wherever their arithmetic is used (cpu:native
    # computed u8 in int and wrapped only when storing), a value converted to their type
    # wraps too (a bare literal out of their range is a type error, as numpy's OverflowError:
    # test_surface_hunt8), and comparing them with an i32 literal is exact in i32 (WebGPU
    # refused an i64 comparison)
    "narrow_integer_arithmetic_wraps": ("""
let y = compute(p, q) {
    for i in 0..n:
        out[i, 0] = i32(p[i] + u8(300))
        out[i, 1] = i32(p[i] < 300)
        out[i, 2] = i32(p[i] * 2)
        out[i, 3] = i32(p[i] + p[i]) / 2
        out[i, 4] = i32(p[i] - 1)
        out[i, 5] = i32(q[i] * 3)
        out[i, 6] = i32(-q[i]) + i32(q[i] + i16(40000))
}
y
""", {"p": (p := np.uint8([0, 1, 44, 200, 255])), "q": (q := np.int16([0, 1, -32768, 32767, 12000]))},
        np.stack([(p.astype(np.int64) + 300) % 256, np.ones(5), (p.astype(np.int64) * 2) % 256,
                  (p.astype(np.int64) * 2 % 256) // 2, (p.astype(np.int64) - 1) % 256,
                  (q.astype(np.int64) * 3).astype(np.int16), (-q).astype(np.int16).astype(np.int64)
                  + (q.astype(np.int64) + 40000).astype(np.int16)], 1).astype(np.int32), 0),
    # signed overflow wraps everywhere (cpu:native's C++ left it undefined, and GCC compiled
    # the first loop into one that never ended)
    "signed_overflow_in_a_loop_wraps": ("""
let n = len(x)
let y = compute(x) {
    for i in 0..1:
        var s = 0
        for j in 0..n:
            s += 2000000000
        var t = 1
        for j in 0..40:
            t *= 3
        out[i, 0] = s
        out[i, 1] = t
        out[i, 2] = n * 1000000000
}
y
""", {"x": np.zeros(5, np.float32)},
        np.array([[(v + 2 ** 31) % 2 ** 32 - 2 ** 31 for v in (10 ** 10, 3 ** 40, 5 * 10 ** 9)]],
                 np.int64).astype(np.int32), 0),
    # slices placed by a let of the loop variable, and ragged ones: the reference refused
    # them ("a slice's bounds must be the same in every lane"), the devices ran them
    "tiles_placed_through_a_let": ("""
let y = compute(x) {
    for b in 0..B, c in 0..2:
        let k = (b + c) % 3
        let t = x[b, 0:2, k:k+3] * 2.0
        out[b, c] = sum(t * t) + reduce(max, x[b, c + 1, k:])
}
y
""", {"x": (x := _f32(4, 3, 6))},
        np.array([[(4 * x[b, 0:2, (b + c) % 3:(b + c) % 3 + 3] ** 2).sum()
                   + x[b, c + 1, (b + c) % 3:].max() for c in range(2)] for b in range(4)]),
        1e-4),
    # a var declared with a type keeps it (it widened to the values assigned: `var acc: f16`
    # summed in f32, `var n: i32` became f32)
    "typed_vars_keep_their_type": ("""
let y = compute(x) {
    for r in 0..R:
        var acc: f16 = 0.0
        var n: i32 = 0
        for c in 0..C:
            acc += x[r, c]
            n += x[r, c]
        out[r, 0] = f32(acc)
        out[r, 1] = float(n)
}
y
""", {"x": (x := (RNG.standard_normal((4, 300)) + 3).astype(np.float32))},
        np.array([[_f16_running_sum(row), _i32_running_sum(row)] for row in x], np.float32), 0),
    # row_sum of a bool tile counts (cpu:native and WebGPU summed into a bool: 1), row_max
    # of one is bool (WebGPU refused it), integer tiles multiply exactly
    "row_sum_and_row_max_of_bool_and_int_tiles": ("""
let y = compute(A, B) {
    for i0 in 0..M step 4:
        let t = A[i0:i0+4]
        out[i0:i0+4] = t @ B + row_max(t) - row_sum(t > 0) + i32(row_max(t > 3))
}
y
""", {"A": (a := RNG.integers(-5, 5, (10, 3)).astype(np.int32)),
      "B": (b := RNG.integers(-5, 5, (3, 6)).astype(np.int32))},
        (a @ b + a.max(1, keepdims=True) - (a > 0).sum(1, keepdims=True)
         + (a > 3).any(1, keepdims=True)).astype(np.int32), 0),
    # tiles of bools multiply as i32 counts (the reference took numpy's boolean @, an or)
    "matmul_of_bool_tiles_counts": ("""
let y = compute(a, b) {
    for i0 in 0..M step 2:
        out[i0:i0+2] = (a[i0:i0+2] > 0.0) @ (b > 0.0)
}
y
""", {"a": (a := _f32(5, 7)), "b": (b := _f32(7, 3))},
        ((a > 0).astype(np.int32) @ (b > 0).astype(np.int32)).astype(np.int32), 0),
    # -bool is -1 as bools in arithmetic count as i32 (the reference raised numpy's
    # TypeError, cpu:native gave true, WebGPU's WGSL did not compile); abs and relu of a
    # bool are the bool (WebGPU refused them)
    "negated_and_abs_bools": ("""
let y = compute(x) {
    for i in 0..n:
        out[i, 0] = -(x[i] > 0.0) * 3 + 1
        out[i, 1] = i32(abs(x[i] > 0.0)) + i32(relu(x[i] < 0.0)) * 10
}
y
""", {"x": (x := np.float32([1, -1, 0, 2, -0.5]))},
        np.stack([-(x > 0).astype(np.int32) * 3 + 1, (x > 0) + (x < 0) * 10], 1).astype(np.int32),
        0),
    # max and min of an empty tile are the identity (the reference leaked numpy's
    # "zero-size array to reduction operation maximum")
    "max_and_min_of_empty_tiles": ("""
let y = compute(m, v) {
    for i in 0..n:
        out[i] = v[i] + reduce(max, m[i, 4:]) - reduce(min, m[i, 2:2])
}
y
""", {"m": np.ones((3, 4), np.float32), "v": np.zeros(3, np.float32)},
        np.full(3, -np.inf, np.float32), 0),
    # a narrow integer var wraps in a loop that runs in order (the reference summed it in
    # Python's or numpy's wider integers: 260 for a u8)
    "narrow_integer_vars_wrap_in_loops": ("""
let y = compute(x) {
    for i in 0..1:
        var s: u8 = 250
        var t: i8 = 120
        for j in 0..10:
            s += 1
            t = t + 2
        out[i, 0] = i32(s)
        out[i, 1] = i32(t)
        out[i, 2] = i32(s * 3)
        out[i, 3] = i32(-t)
}
y
""", {"x": np.zeros(3, np.float32)}, np.int32([[4, -116, 12, 116]]), 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_program_equals_numpy(name, device):
    src, inputs, want, tol = CASES[name]
    assert_equals_numpy(zynbook.Session(device=device).run(src, **inputs), want, tol)


# name: (source, inputs, kind, line, column): the same ZynML error on every device
ERROR_CASES = {
    # a runtime error points at what failed, the index or the division, on the reference
    # too (it said column 1 where the compiled devices said the statement's column)
    "gather_out_of_range": ("""
let y = compute(x, ix) {
    for i in 0..n:
        out[i] = x[ix[i] * 3]
}
y
""", {"x": np.arange(6, dtype=np.float32), "ix": np.array([0, 2, 1], np.int32)},
        "runtime", 4, 20),
    "integer_division_by_zero": ("""
let y = compute(ix) {
    for i in 0..n:
        let d = ix[i] - 2
        out[i] = 10 / d
}
y
""", {"ix": np.array([0, 2, 1], np.int32)}, "runtime", 5, 18),
    # every write below 0 at the launch's sizes: a shape error (numpy's "negative
    # dimensions are not allowed" on the CPU, an index error naming `n - 10` on WebGPU)
    "out_written_only_below_zero_at_these_sizes": ("""
let y = compute(x) {
    for i in 0..n:
        out[i - 10] = x[i]
}
y
""", {"x": np.arange(6, dtype=np.float32)}, "shape", 2, 9),
    # a field of a computed value (it said "`this` is not an input")
    "field_of_a_tile": ("""
let y = compute(m) {
    for i in 0..R:
        out[i] = m[i].T
}
y
""", {"m": np.ones((3, 4), np.float32)}, "type", 4, 18),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_kernel_program_error_is_the_same_everywhere(name, device):
    src, inputs, kind, line, column = ERROR_CASES[name]
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session(device=device).run(src, **inputs)
    err = info.value
    assert (err.kind, err.line, err.column) == (kind, line, column), err.render()


@pytest.mark.parametrize("index, parallel", [
    ("out[i / 2, j]", False),            # i and i + 1 write one element
    ("out[j, i - i]", False),            # every i writes the same element
    ("out[2 * i + 1, j]", True),
    ("out[n - 1 - i, j]", True),
])
def test_a_loop_is_parallel_only_where_its_iterations_write_apart(index, parallel):
    src = f"""
let y = compute(x) {{
    for i in 0..n, j in 0..3:
        {index} = x[i]
}}
y
"""
    loop_i = [line.strip() for line in zynbook.compile(src).cir_text().splitlines()
              if "for i in" in line][0]
    assert loop_i.startswith("parallel for") == parallel, loop_i


def test_argmax_and_argmin_of_tiles_inside_a_kernel():
    """reduce(argmax, tile) in a kernel body: the flat position of the first NaN, else of
    the first extreme, as numpy's (cpu:native and WebGPU refused it)."""
    m = RNG.standard_normal((6, 3, 5)).astype(np.float32)
    m[1, 2, 3] = m[1, 0, 0] = np.nan
    m[2] = -np.inf
    m[3, 1, 1] = m[3, 2, 2] = m[3].max() + 1
    k = RNG.integers(-3, 3, (6, 5)).astype(np.int32)
    k[0] = np.iinfo(np.int32).min
    src = """
let y = compute(m, k) {
    for i in 0..R:
        out[i, 0] = reduce(argmax, m[i])
        out[i, 1] = reduce(argmin, m[i])
        out[i, 2] = reduce(argmax, k[i, 1:4])
        out[i, 3] = reduce(argmin, m[i, 2:3])
}
y
"""
    want = np.stack([np.argmax(m.reshape(6, -1), 1), np.argmin(m.reshape(6, -1), 1),
                     np.argmax(k[:, 1:4], 1), np.argmin(m[:, 2:3].reshape(6, -1), 1)], 1)
    for device in DEVICES:
        got = zynbook.Session(device=device).run(src, m=m, k=k)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=device)


@pytest.mark.parametrize("device", [d for d in DEVICES if d in ("cpu", "cpu:native")])
def test_erf_near_zero_is_accurate(device):
    """erf's relative error near 0 (the reference's approximation had an absolute error of
    1e-7: erf(1e-30) was 1e-9, erf(1e-6) off by 9e-4). WebGPU's WGSL erf, tanh and sinh
    lose relative accuracy there too (their helpers live in the WGSL dialect)."""
    import math
    x = np.float32([1e-30, 1e-6, 1e-4, 0.01, 0.5, 0.99, 1.0, 1.5, 3.0, -2e-5])
    src = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = erf(x[i])
}
y
"""
    got = np.asarray(zynbook.Session(device=device).run(src, x=x), np.float64)
    want = np.array([math.erf(float(v)) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_reductions_of_empty_tiles_give_the_identity():
    """max/min of an empty tile give the identity (docs/api.md, "Empty reductions"): the
    reference leaked numpy's "zero-size array to reduction operation"; argmax of one is a
    shape error, as numpy's (cpu:native's gave 0, then every device -1)."""
    src = """
let y = compute(m, v) {
    for i in 0..n:
        out[i, 0] = v[i] + reduce(max, m[i, 4:])
        out[i, 1] = v[i] + reduce(min, m[i, 2:2])
        out[i, 2] = float(reduce(argmax, m[i, 3:]))
        out[i, 3] = float(reduce(argmax, m[i]))
}
y
"""
    m = np.float32([[-np.inf] * 4, [1, np.nan, 3, np.nan], [2, 2, 1, 1]])
    v = np.zeros(3, np.float32)
    want = np.float32([[-np.inf, np.inf, 0, 0], [-np.inf, np.inf, 0, 1],
                       [-np.inf, np.inf, 0, 0]])
    empty = src.replace("m[i, 3:]", "m[i, 4:]")
    for device in DEVICES:
        got = zynbook.Session(device=device).run(src, m=m, v=v)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=device)
        err = raises("shape", empty, 6, 27, device=device, m=m, v=v)
        assert "reduce(argmax) over nothing" in str(err)


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(("cpu", "cuda"))])
def test_integer_max_and_min_keep_every_bit(device):
    """reduce(max/min) over i64 is exact (the reference held it in f64: max of
    [2**63 - 1, -2**63] gave -2**63, min of 2**62 + 1 lost its low bit). WebGPU has no
    64-bit integers and refuses such data."""
    s = zynbook.Session(device=device)
    hi = s.run("let m = compute(x) {\n    @kernel reduce(max)\n    for i in 0..n:\n"
               "        yield x[i]\n}\nm", x=np.int64([2 ** 63 - 1, -2 ** 63, 7]))
    lo = s.run("let m = compute(y) {\n    @kernel reduce(min)\n    for i in 0..n:\n"
               "        yield y[i]\n}\nm", y=np.int64([2 ** 62 + 3, 2 ** 62 + 1]))
    assert int(np.asarray(hi)) == 2 ** 63 - 1 and int(np.asarray(lo)) == 2 ** 62 + 1
