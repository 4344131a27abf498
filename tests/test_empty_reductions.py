"""An empty reduction gives its operator's identity, the same on every device (docs/api.md,
"Empty reductions"): 0 for +, 1 for *, the lowest value of the dtype for max (-inf for
floats), the highest for min, true for and, false for or; argmax/argmin of nothing has no
index: a shape error at the loop that runs no iteration, as numpy's argmax of an empty
sequence is an error."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from compute_testing import raises

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if not _WANTED or d["id"] in _WANTED.split(",")]


def identity(op: str, dtype) -> object:
    """The definition, written once, independently of every executor."""
    dtype = np.dtype(dtype)
    if op == "+":
        return 0
    if op == "*":
        return 1
    if dtype.kind == "f":
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if op == "max" else info.max


def _source(op: str, axis: bool) -> str:
    y = "yield (x[i, j], j)" if op.startswith("arg") else "yield x[i, j]"
    if axis:
        return (f"let y = compute(x) {{\n    @kernel reduce({op}, axis=1)\n"
                f"    for i in 0..r, j in 0..c:\n        {y}\n}}\ny\n")
    return (f"let y = compute(x) {{\n    @kernel reduce({op})\n"
            f"    for i in 0..r, j in 0..c:\n        {y}\n}}\ny\n")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("op", ["+", "*", "max", "min", "argmax", "argmin"])
def test_whole_reduction_of_nothing(device, dtype, op):
    for shape, loop_column in [((0, 5), 9), ((3, 0), 20)]:
        if op.startswith("arg"):
            err = raises("shape", _source(op, False), 3, loop_column, device=device,
                         x=np.zeros(shape, dtype))
            assert f"reduce({op}) over nothing" in str(err)
            continue
        got = zynbook.run(_source(op, False), device=device, x=np.zeros(shape, dtype))
        assert got == identity(op, dtype), (shape, got)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["+", "max", "min", "argmax"])
def test_axis_reduction_over_an_empty_axis(device, op):
    if op == "argmax":
        raises("shape", _source(op, True), 3, 20, device=device, x=np.zeros((3, 0), np.float32))
        got = zynbook.run(_source(op, True), device=device, x=np.zeros((0, 3), np.float32))
        assert np.asarray(got).shape == (0,)     # (numpy's argmax along a full axis of none)
        return
    got = np.asarray(zynbook.run(_source(op, True), device=device,
                                 x=np.zeros((3, 0), np.float32)))
    assert got.shape == (3,)
    np.testing.assert_array_equal(got, np.full(3, identity(op, np.float32)))


@pytest.mark.parametrize("device", DEVICES)
def test_one_element_is_not_empty(device):
    x = np.array([[-7.5]], np.float32)
    assert zynbook.run(_source("max", False), device=device, x=x) == -7.5
    assert zynbook.run(_source("argmin", False), device=device, x=x) == 0
