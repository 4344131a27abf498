"""Programs written from the spec's and docs/language.md's text (slices of out, shared
arrays, histograms, scans, gathers and scatters, casts, reductions at odd sizes) on every
device present, compared with numpy written here; user mistakes at run time (an index out of
range, an integer division by zero) are ZynML runtime errors at their line on every device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices
from zynbook.errors import ZynMLError

DEVICES = wanted_devices()
RNG = np.random.default_rng(1212)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


def _runtime_error(device, src, line, /, **inputs):
    with pytest.raises(ZynMLError) as info:
        _run(device, src, **inputs)
    assert (info.value.kind, info.value.line) == ("runtime", line), info.value
    return info.value


# ------------------------------------ a number stored across a slice of out

_X = RNG.standard_normal(29).astype(np.float32)


def _windows(x, length, acc):
    want = np.zeros(len(x) + length - 1, np.float32)
    for i, v in enumerate(x):
        if acc:
            want[i:i + length] += v
        else:
            want[i:i + length] = v
    return want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("acc", [False, True])
def test_a_number_stored_across_overlapping_windows_of_out(device, acc):
    """`out[i:i + 3] = x[i]` (a number across a window, numpy's broadcasting) gave out no axis
    (the slice's axis was taken for the tile's, and a number has none): the reference failed
    with Python's "tuple index out of range" at line 1, every device with it. The window's
    axis is out's; the windows overlap, so the loop runs in order and the last write stays."""
    op = "+=" if acc else "="
    src = f"""let r = compute(x) {{
    for i in 0..n:
        out[i:i + 3] {op} x[i] * 2.0
}}
r"""
    assert_equals_numpy(_run(device, src, x=_X), _windows(_X * 2, 3, acc), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_number_stored_across_a_slice_of_a_row_and_blocks(device):
    """The same in a row of a 2-D out beside an element write, and across blocks of 12 of a
    host bound that is no multiple of 12 (the last block clipped)."""
    m = _X[:28].reshape(4, 7)
    want = np.zeros((4, 7), np.float32)
    want[:, 1:4] = m[:, :1]
    src = """let r = compute(m) {
    @kernel elementwise
    for i in 0..a:
        out[i, 1:4] = m[i, 0]
        out[i, 6] = 0.0
}
r"""
    assert_equals_numpy(_run(device, src, m=m), want, 0)
    want = np.repeat(_X[::12], 12)[:29]
    src = """let r = compute(x) {
    @workgroup(3)
    for b in 0..n step 12:
        out[b:b + 12] = x[b]
}
r"""
    assert_equals_numpy(_run(device, src, x=_X, n=29), want, 0)


# ------------------------------------ a loop bound read from data

_LENS = np.array([0, 3, 7, -2, 1], np.int32)
_RAGGED = """let r = compute(v, lens) {
    for i in 0..n:
        var s = 0.0
        for j in 0..lens[i]:
            s += v[i, j]
        out[i] = s
}
r"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_bound_read_from_data_ties_no_size(device):
    """`for j in 0..lens[i]` reading `v[i, j]` (ragged rows): the loop was taken to cover
    v's axis, `lens[i]` an equation with it, and every device refused the program with a
    shape error ("no value of `i` makes the loop cover the axis's 7 positions"). A bound read
    from data reaches as far as the data says (a negative one runs no iteration)."""
    v = RNG.standard_normal((5, 7)).astype(np.float32)
    want = np.array([row[:k].astype(np.float64).sum() if k > 0 else 0.0
                     for row, k in zip(v, _LENS)], np.float32)
    assert_equals_numpy(_run(device, _RAGGED, v=v, lens=_LENS), want, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_bound_read_from_data_past_the_axis_is_a_runtime_error(device):
    """A length past the row is an index out of range at the read's line on every device."""
    v = np.ones((5, 7), np.float32)
    err = _runtime_error(device, _RAGGED, 5, v=v, lens=np.array([0, 3, 8, 1, 1], np.int32))
    assert "index 7 is out of range" in err.message, err


_M = RNG.standard_normal((4, 7)).astype(np.float32)
_TRIANGLE = """let r = compute(m) {
    for i in 0..a:
        var s = 0.0
        for j in 0..%s:
            s += m[i, j]
        out[i] = s
}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bound, stop", [("2 * i", lambda i: 2 * i), ("i + 1", lambda i: i + 1)])
def test_a_loop_bound_of_an_outer_loop_variable_ties_no_size(device, bound, stop):
    """`for j in 0..2 * i` reading `m[i, j]` (a triangle): the bound was an equation with
    the axis, `2 * i = 7`, which no `i` solves: a shape error on every device (and `i + 1`
    ran only because `i = 6` solved it). It is a bound, the reads checked as they run."""
    want = np.array([_M[i, :stop(i)].astype(np.float64).sum() for i in range(4)], np.float32)
    assert_equals_numpy(_run(device, _TRIANGLE % bound, m=_M), want, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_triangle_past_the_axis_is_a_runtime_error(device):
    """`0..3 * i` reaches past the row's 7 at i = 3: a runtime error at the read's line."""
    err = _runtime_error(device, _TRIANGLE % "3 * i", 5, m=_M)
    assert "index 7 is out of range" in err.message, err


# ------------------------------------ what the language does not have, said so

@pytest.mark.parametrize("src, line, column, words", [
    ("let x = zeros([3])\nlet y = compute(x) {\n    for i in 0..n:\n        var k = 0\n"
     "        while k < 3:\n            k += 1\n        out[i] = x[i] + k\n}\n", 5, 15,
     "there is no `while` loop"),
    ("let x = zeros([3])\nlet y = compute(x) {\n    for i in 0..n:\n        if i > 1:\n"
     "            break\n        out[i] = x[i]\n}\n", 5, 13, "there is no `break`"),
    ("let l = [1, 2]\nfor v in l:\n    continue\n", 3, 5, "there is no `continue`"),
    ("fn sq(a) { return a * a }\n", 1, 4, "there is no `fn`"),
    ("def sq(a):\n    return a * a\n", 1, 5, "there is no `def`"),
])
def test_while_break_continue_and_functions_are_syntax_errors_that_say_so(src, line, column,
                                                                          words):
    """The spec's readers write Python's loops and functions; ZynML has none of them (docs:
    not implemented). `break` and `continue` were a type error, "this expression's value is
    unused", and `while k < 3:` and `fn f(x)` "unexpected 'k'" with a list of tokens; each
    is a syntax error at its place that names what ZynML has instead."""
    with pytest.raises(ZynMLError) as info:
        zynbook.compile(src)
    err = info.value
    assert (err.kind, err.line, err.column) == ("syntax", line, column), err
    assert words in err.message and "^" in err.render(), err


# ------------------------------------ recurrences over a `var` that a narrower value types

def _ema(x, dtype):
    a, out = dtype(0), np.zeros(len(x), dtype)
    for i, v in enumerate(x.astype(dtype)):
        a = dtype(dtype(dtype(0.9) * a) + dtype(dtype(0.1) * v))
        out[i] = a
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, tol", [(np.float16, 2e-3), (np.float64, 1e-12),
                                        (np.float32, 1e-6)])
def test_a_moving_average_of_a_weak_var_runs_in_the_data_s_dtype(device, dtype, tol):
    """`var a = 0.0` then `a = 0.9 * a + 0.1 * x[c]` over f16 x: `a` is f16 (a literal is
    weak), but `0.9 * a` stayed typed f32 from before `a` took f16, and every device failed
    with an internal compiler error ("the CIR ... after pass `widen` is broken"). The
    product is f16 arithmetic, as numpy's f16 EMA. Over f64 x the weak `0.9 * a` is f64
    arithmetic on `a` still f32 when lowered, which the CIR's checker refused the same way."""
    if dtype is np.float64 and device == "gl:0":
        pytest.skip("the OpenGL adapter has no shader-f64")
    x = RNG.standard_normal(37).astype(dtype)
    src = """let s = compute(x) {
    var a = 0.0
    for c in 0..n:
        a = 0.9 * a + 0.1 * x[c]
        out[c] = a
}
s"""
    assert_equals_numpy(_run(device, src, x=x), _ema(x, dtype), tol)


# ------------------------------------ a slice of out open at its end

@pytest.mark.parametrize("device", DEVICES)
def test_a_slice_of_out_open_at_its_end_is_as_long_as_its_tile(device):
    """`out[i, 2:] = x[i, 2:] + 1.0` and `out[i, 0:] = x[i] * 2.0`: a slice of out without
    an end was "cannot tell the size of out from this index" on every device (no axis of
    out is known to end it); it ends where the tile written into it does, as numpy's
    `out[i, 2:] = t` fills the rest of a row as long as t."""
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    src = """let r = compute(x) {
    for i in 0..a:
        out[i, 2:] = x[i, 2:] + 1.0
        out[i, 0:2] = x[i, 0:2] * 0.0
}
r"""
    want = x + 1
    want[:, :2] = 0
    assert_equals_numpy(_run(device, src, x=x), want, 1e-6)
    src = """let r = compute(x) {
    @kernel elementwise
    for i in 0..a:
        out[i, 0:] = x[i] * 2.0
}
r"""
    assert_equals_numpy(_run(device, src, x=x), x * 2, 1e-6)


# ------------------------------------ run-time mistakes: an error at the line, every device

_I = np.array([0, 2, 7], np.int32)
_MISTAKES = {
    "division_by_zero_in_a_scan": ("""let r = compute(x) {
    var acc = 0
    for i in 0..n:
        acc += 100 / x[i]
        out[i] = acc
}
r""", 4, {"x": np.array([1, 2, 0, 4], np.int32)}, "division by zero"),
    "smallest_i32_over_minus_one": ("""let y = compute(x, d) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] / d[i]
}
y""", 4, {"x": np.array([3, -2 ** 31], np.int32), "d": np.array([1, -1], np.int32)},
        "-2147483648 / -1"),
    "u8_remainder_by_zero_in_a_reduce": ("""let y = compute(x) {
    @kernel reduce(+, axis=0)
    for i in 0..a, j in 0..b:
        yield x[i, j] % x[j, i]
}
y""", 4, {"x": np.array([[1, 2], [0, 3]], np.uint8)}, "remainder by zero"),
    "gathered_row_of_a_matmul": ("""let C = compute(A, B, idx) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s += A[idx[i], k] * B[k, j]
        out[i, j] = s
}
C""", 6, {"A": np.ones((7, 5), np.float32), "B": np.ones((5, 3), np.float32), "idx": _I},
        "index 7 is out of range"),
    "shared_array_read_by_data": ("""let r = compute(x, idx) {
    for z in 0..1:
        shared var t[4]
        for k in 0..4:
            t[k] = x[k]
        barrier()
        for k in 0..m:
            out[k] = t[idx[k]]
}
r""", 8, {"x": np.ones(4, np.float32), "idx": _I}, "index 7 is out of range"),
    "negative_scatter_into_out": ("""let y = compute(v, idx) {
    for i in 0..n:
        if idx[i] < 3:
            out[idx[i]] += v[i]
}
y""", 4, {"v": np.ones(2, np.float32), "idx": np.array([0, -2], np.int32)},
        "index -2 is out of range"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_MISTAKES))
def test_run_time_mistakes_are_errors_at_their_line(device, name):
    """An integer division by zero, the smallest integer over -1 and indices read from data
    past an input, a shared array or out: a ZynML runtime error naming the line on every
    device, never a crash or a value."""
    src, line, inputs, words = _MISTAKES[name]
    err = _runtime_error(device, src, line, **inputs)
    assert words in err.message, err
