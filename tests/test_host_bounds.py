"""Loop bounds the host gives are bounds, not equations: `for i in 0..m` with m = 3 over an
axis of 5 runs over 3 positions; m = 7 is a shape error naming the line, before any data
moves. Only free size names are unified with shapes."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLShapeError

DEVICES = [d["id"] for d in zynbook.compute_devices()]

COPY = """let y = compute(x) {
    @kernel elementwise
    for i in 0..m:
        out[i] = x[i] * 2.0
}
"""

TWO_INPUTS = """let y = compute(a, b) {
    @kernel elementwise
    for i in 0..m, j in 0..k:
        out[i, j] = a[i, j] + b[i]
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_host_bound_shorter_than_the_axis_runs_over_the_bound(device):
    x = np.arange(5, dtype=np.float32)
    for m in (0, 1, 3, 5):
        y = np.asarray(zynbook.run(COPY, device=device, x=x, m=m))
        np.testing.assert_array_equal(y, x[:m] * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_host_bounds_over_two_inputs_of_different_lengths(device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal(11).astype(np.float32)
    y = np.asarray(zynbook.run(TWO_INPUTS, device=device, a=a, b=b, m=4, k=7))
    np.testing.assert_allclose(y, a[:4, :7] + b[:4, None], rtol=1e-6)


@pytest.mark.parametrize("m", [6, 7, 100])
def test_host_bound_past_the_axis_is_a_shape_error(m):
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.run(COPY, x=np.arange(5, dtype=np.float32), m=m)
    err = info.value
    assert err.line == 4 and err.column == 20
    assert f"covers {m} positions" in err.message and "only 5" in err.message
    assert f"`m` = {m}" in err.message
    # one place, told once: no note pointing at the same caret
    assert not err.notes


def test_static_check_sees_a_bound_the_program_fixes():
    bad = "let x = randn([5])\nlet m = 7\n" + COPY
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.compile(bad)
    assert info.value.line == 6 and "only 5" in info.value.message
    good = "let x = randn([5])\nlet m = 3\n" + COPY
    zynbook.compile(good)
    y = zynbook.run(good)
    assert y.shape == (3,)


def test_free_size_names_are_still_unified_with_shapes():
    source = COPY.replace("0..m", "0..n") + "y\n"
    y = zynbook.run(source, x=np.arange(5, dtype=np.float32))
    assert y.shape == (5,)
    mismatch = """let y = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] + b[i]
}
"""
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.run(mismatch, a=np.ones(4, np.float32), b=np.ones(6, np.float32))
    err = info.value
    assert "4" in err.message and "6" in err.message
    # two places, each pointed at once
    assert err.notes and (err.notes[0][1].line, err.notes[0][1].column) != (err.line, err.column)


def test_given_bound_with_an_offset_index_is_checked_where_it_is_used():
    source = """let y = compute(x) {
    @kernel elementwise
    for i in 0..m:
        out[i] = x[i + 1]
}
"""
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(zynbook.run(source, x=x, m=4)), x[1:])
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.run(source, x=x, m=5)
    assert info.value.line == 4


def test_a_size_the_program_computes_is_a_bound_when_checked_too():
    """`let m = len(x) - 2` has no value before the program runs: checking it must not turn
    its loop into an equation between x and y (which the run would accept)."""
    source = """let x = randn([5], seed=1)
let y = randn([7], seed=2)
let m = len(x) - 2
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..m:
        out[i] = x[i] + y[i]
}
z
"""
    zynbook.compile(source)
    z = zynbook.run(source)
    assert z.shape == (3,)
    with pytest.raises(ZynMLShapeError):
        zynbook.run(source.replace("len(x) - 2", "len(y)"))
