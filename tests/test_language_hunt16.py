"""Language: a float added into out that its other writes make an integer is refused unless
it folds to a whole number (`2.0 * 0.25` as `1.5` is); a float stored into out makes it a
float, as numpy's result would be. Every device present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices
from zynbook.errors import ZynMLTypeError

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------ a folded float added into out that its other writes make i32

_ADD_INTO = """let y = compute(x) {
    let c = 0.5 * 3.0
    for i in 0..n:
        out[i] += EXPR
        out[i] += x[i]
}
y
"""


@pytest.mark.parametrize("expr, value", [("2.0 * 0.25", "0.5"), ("1.0 / 4.0", "0.25"),
                                         ("0.5 + 1.0", "1.5"), ("c", "1.5"),
                                         ("sqrt(2.0)", "1.4142135623730951")])
def test_a_float_that_folds_to_a_fraction_added_into_integer_out_is_refused(expr, value):
    """out[i] += 2.0 * 0.25 beside out[i] += x[i] of i32 x added 0 (the sum took out's i32
    silently), where out[i] += 0.5 is refused; numpy refuses out += 0.5 on an integer array."""
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.run(_ADD_INTO.replace("EXPR", expr), x=np.arange(7, dtype=np.int32))
    assert info.value.message.startswith(
        f"{value} is added into out, which its other writes make i32: it would be cut")
    assert (info.value.line, info.value.column) == (4, 19)


@pytest.mark.parametrize("expr", ["n * 0.5", "n * 1.0"])
def test_a_float_known_only_as_it_runs_added_into_integer_out_is_refused(expr):
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.run(_ADD_INTO.replace("EXPR", expr), x=np.arange(7, dtype=np.int32))
    assert f"`{expr}`, a float known only as the kernel runs, is added into out, which its " \
        "other writes make i32: it may be cut" in info.value.message
    assert (info.value.line, info.value.column) == (4, 19)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, value", [("2.0 * 0.5", 1), ("0.75 + 1.25", 2),
                                         ("c * 2.0", 3), ("-(4.0 / 2.0)", -2)])
def test_a_float_that_folds_to_a_whole_number_adds_it_into_integer_out(device, expr, value):
    # as out[i] += 1.0 does: the whole number, in out's i32
    x = np.arange(-3, 9, dtype=np.int32)
    got = _run(device, _ADD_INTO.replace("EXPR", expr), x=x)
    want = np.zeros(12, np.int32)
    want += np.int32(value)
    want += x
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_folded_fraction_added_into_float_out(device, dtype):
    x = np.arange(-3, 9).astype(dtype)
    got = _run(device, _ADD_INTO.replace("EXPR", "2.0 * 0.25"), x=x)
    want = np.zeros(12, dtype)
    want += dtype(0.5)
    want += x
    assert_equals_numpy(got, want, 0)


# ------------------------------------- a float stored into out another write makes integer

_STORES = {
    # numpy: the float value's array is a float, so out (the writes' common type) is one
    "out[i] = x[i] + 0.5\n        out[i] += x[i]":
        lambda x: (x + np.float32(0.5)) + x,
    "out[i] += where(x[i] > 2, 1.5, x[i])\n        out[i] += x[i]":
        lambda x: np.where(x > 2, np.float32(1.5), x.astype(np.float32)) + x,
    "out[i] = where(x[i] > 2, 1.5, x[i])":
        lambda x: np.where(x > 2, np.float32(1.5), x.astype(np.float32)),
    "out[i] = 2.0 * 0.25\n        out[i] += x[i]":
        lambda x: np.float32(0.5) + x.astype(np.float32),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", list(_STORES), ids=range(len(_STORES)))
def test_a_float_stored_beside_an_integer_write_makes_out_float(device, body):
    x = np.arange(-3, 9, dtype=np.int32)
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        {body}\n}}\ny\n"
    got = _run(device, src, x=x)
    want = _STORES[body](x)
    assert np.asarray(got).dtype == np.float32
    assert_equals_numpy(got, want.astype(np.float32), 0)
