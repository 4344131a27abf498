"""Language: host slices take numpy's step (x[::2], x[::-1], x[7:1:-2]), a kernel's slices
refuse one with a ZynML error under it. Every device present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------------------ host slices with numpy's step

_X = np.arange(10, dtype=np.float32) * 1.5 - 4.0
_M = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.0

_STEPPED = {
    "x[::-1]": lambda x, m: x[::-1],
    "x[::2]": lambda x, m: x[::2],
    "x[1:8:3]": lambda x, m: x[1:8:3],
    "x[7:1:-2]": lambda x, m: x[7:1:-2],
    "x[-2::-3]": lambda x, m: x[-2::-3],
    "x[2:5:]": lambda x, m: x[2:5],
    "x[5:2:1]": lambda x, m: x[5:2:1],              # empty, as numpy's
    "x[100:-100:-4]": lambda x, m: x[100:-100:-4],  # clipped, as numpy clips
    "x[::k]": lambda x, m: x[::3],
    "m[::-1, 1::2]": lambda x, m: m[::-1, 1::2],
    "m[:, ::-1] @ m[::-1].T": lambda x, m: m[:, ::-1] @ m[::-1].T,
    "sum(m[1:, ::2], axis=0)": lambda x, m: m[1:, ::2].sum(0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr", list(_STEPPED))
def test_a_host_slice_with_a_step_equals_numpy(device, expr):
    """These were a syntax error (`unexpected ':'`) under the second colon."""
    got = _run(device, expr, x=_X, m=_M, k=3)
    assert_equals_numpy(got, _STEPPED[expr](_X, _M), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_assigning_into_a_stepped_slice_equals_numpy(device):
    want = _M.copy()
    want[::-2, 1::3] = -1.0
    got = _run(device, "let y = m\ny[::-2, 1::3] = -1.0\ny", m=_M)
    assert_equals_numpy(got, want, 0)


def test_a_list_slice_with_a_step_is_pythons():
    assert zynbook.run("[1, 2, 3, 4, 5][::-2]") == [5, 3, 1]


@pytest.mark.parametrize("src, col, said", [
    ("x[::0]", 5, "a slice step cannot be 0"),
    ("x[1:5:0.5]", 7, "a slice step is an integer, not a float"),
])
def test_a_slice_step_of_0_or_a_float_is_a_type_error_under_it(src, col, said):
    err = raises("type", src, 1, col, x=_X)
    assert said in err.message


@pytest.mark.parametrize("body, line, col", [
    ("    for i in 0..1:\n        out[0:5] = x[0:10:2]", 3, 27),
    ("    out = x[::-1]", 2, 15),
    ("    for i in 0..1:\n        out[0:10:1] = x", 3, 18),
])
def test_a_kernel_slice_with_a_step_is_a_shape_error_under_it(body, line, col):
    err = raises("shape", f"let y = compute(x) {{\n{body}\n}}\ny", line, col, x=_X)
    assert "takes no step: loop over the positions" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_the_loop_the_kernel_slice_message_suggests_equals_numpy(device):
    src = """let y = compute(x) {
    for j in 0..n step 2:
        out[j / 2] = x[j]
}
y"""
    assert_equals_numpy(_run(device, src, x=_X, n=10), _X[0:10:2], 0)
