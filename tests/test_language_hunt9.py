"""Language front end: shapes inferred from loops and slices, typing of weak values, and
user mistakes reported as ZynML errors with kind, line, column and caret; every device
present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9009)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------- out[i] under a loop that steps by s > 1

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,start,step", [(10, 0, 2), (11, 0, 3), (7, 1, 4), (1, 0, 5)])
def test_stepped_loop_out_axis_is_the_loop_bound(device, n, start, step):
    # out[i] with i a loop's own variable: the loop's range start..n is out's axis (the
    # positions it steps over stay 0), as docs/language.md's `evens` shows
    x = RNG.standard_normal(n).astype(np.float32)
    got = _run(device, f"let y = compute(x) {{\n    for i in {start}..n step {step}:\n"
                       f"        out[i] = x[i] * 2.0\n}}\ny\n", x=x, n=n)
    want = np.zeros(n, np.float32)
    want[start::step] = x[start::step] * 2
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_stepped_loop_shifted_index_reaches_its_last_value(device):
    # out[i + 1] is an affine index: the largest value written plus one (i in 0..9 step 4
    # takes 0, 4, 8: out is 10 long)
    x = np.arange(9, dtype=np.float32)
    got = _run(device, "let y = compute(x) {\n    for i in 0..9 step 4:\n"
                       "        out[i + 1] = x[i]\n}\ny\n", x=x)
    want = np.zeros(10, np.float32)
    want[1::4] = x[0::4]
    assert_equals_numpy(got, want, 0)


# ------------------------------------------- a stencil's window read as a slice of an input

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [3, 4, 17])
def test_stencil_slice_ties_the_loop_bound(device, n):
    # x[i - 2:i + 1] with i in 2..n reads x[i - 2] .. x[i]: n = len(x), as the three reads
    # written out do (it was a name error: `n` bounds no loop that indexes an input)
    x = RNG.standard_normal(n).astype(np.float32)
    got = _run(device, "let y = compute(x) {\n    for i in 2..n:\n"
                       "        out[i - 2] = sum(x[i - 2:i + 1])\n}\ny\n", x=x)
    want = x[:-2].astype(np.float64) + x[1:-1] + x[2:]
    assert_equals_numpy(got, want.astype(np.float32), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_centred_stencil_slice_of_rows(device):
    # rows r - 1 .. r + 1 of a matrix, r in 1..rows - 1: rows = len(m)
    m = RNG.standard_normal((9, 5)).astype(np.float32)
    got = _run(device, "let y = compute(m) {\n    for r in 1..rows - 1, c in 0..cols:\n"
                       "        out[r - 1, c] = sum(m[r - 1:r + 2, c])\n}\ny\n", m=m)
    want = m[:-2].astype(np.float64) + m[1:-1] + m[2:]
    assert_equals_numpy(got, want.astype(np.float32), 1e-6)


# ----------------------------------------------------- a loop whose bound is read from data

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("count", [0, 2, 3, 7])
def test_loop_bound_read_from_data_under_a_size_guard(device, count):
    # `for i in 0..i32(x[0])` with `if i < n`: out is n long (a Python TypeError, "not a
    # static size expression", on every device)
    x = np.float32([count, 5, -1, 2.5])
    got = _run(device, "let y = compute(x) {\n    for i in 0..i32(x[0]):\n        if i < n:\n"
                       "            out[i] = x[i] + 1.0\n}\ny\n", x=x, n=4)
    want = np.zeros(4, np.float32)
    want[:min(count, 4)] = x[:min(count, 4)] + 1
    assert_equals_numpy(got, want, 0)


def test_loop_bound_read_from_data_without_a_guard_is_a_shape_error():
    err = raises("shape", "let y = compute(x) {\n    for i in 0..i32(x[0]):\n        out[i] = x[i]\n}\ny",
                 3, 9, x=np.float32([2, 1, 0]))
    assert "if" in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_guard_against_data_leaves_the_size_guard(device):
    # `if i < i32(x[1])` limits nothing the launch knows: the loop's range 0..n is out's axis
    x = np.float32([3, 2, 0, 2])
    got = _run(device, "let y = compute(x) {\n    for i in 0..n:\n        if i < i32(x[1]):\n"
                       "            out[i] = x[i]\n}\ny\n", x=x, n=4)
    assert_equals_numpy(got, np.float32([3, 2, 0, 0]), 0)
