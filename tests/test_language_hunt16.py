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


# --------------------- a var, `@` or a reduction of one element stored into one element

_ONE_ELEMENT = {
    "var a = b[0:1, j]\n        out[i, j] = a": lambda x, b: np.broadcast_to(b[0:1], x.shape),
    "var a = b[0:1, j]\n        a = a * 2.0 - x[i, j]\n        out[i, j] = a":
        lambda x, b: b[0:1] * 2 - x,
    "var a = b[i:i+1, j:j+1]\n        out[i, j] += a": lambda x, b: np.zeros_like(b) + b,
    "out[i, j] = x[i:i+1, 0:k] @ b[0:k, j:j+1]": lambda x, b: x @ b,
    "out[i, j] = x[i:i+1, 0:k] @ b[0:k, j:j+1] + 1.0": lambda x, b: x @ b + 1,
    "out[i, j] = row_sum(x[i:i+1, 0:k]) * b[i, j]": lambda x, b: x.sum(1, keepdims=True) * b,
    "out[i, j] = reduce(max, x[i:i+1, j:j+1], axis=0)": lambda x, b: x,
    "var s = 0.0\n        s = x[i:i+1, 0:k] @ b[0:k, j:j+1]\n        out[i, j] = s":
        lambda x, b: x @ b,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", list(_ONE_ELEMENT), ids=range(len(_ONE_ELEMENT)))
def test_a_var_product_or_reduction_of_one_element_stored_into_an_element(device, body):
    """These were refused with a shape error (only elementwise forms were read as their
    element); numpy stores the one element, and out keeps its two axes."""
    rng = np.random.default_rng(len(body))
    x, b = (rng.standard_normal((9, 9)).astype(np.float32) for _ in range(2))
    x[0, 1], b[0, 2], b[0, 3] = np.nan, -0.0, np.inf       # kept as numpy keeps them
    src = f"""let y = compute(x, b) {{
    for i in 0..rows, j in 0..cols:
        {body}
}}
y
"""
    got = _run(device, src, x=x, b=b, rows=9, cols=9, k=9)
    with np.errstate(all="ignore"):
        want = _ONE_ELEMENT[body](x, b)
    assert_equals_numpy(got, want, 1e-5)
    if "@" not in body and "row_sum" not in body:   # the sign of a zero stored as it is
        np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(want))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_a_var_of_one_element_of_integers_or_bools_stored_into_an_element(device, dtype):
    b = (np.arange(-6, 6).reshape(3, 4) % 3).astype(dtype)
    src = """let y = compute(b) {
    for i in 0..rows, j in 0..cols:
        var a = b[i:i+1, j]
        out[i, j] = a
}
y
"""
    assert_equals_numpy(_run(device, src, b=b, rows=3, cols=4), b, 0)


def test_a_var_of_one_element_stored_into_an_element_on_the_launch_ir():
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    from compute_testing import emulate_kernel, lower_block
    rng = np.random.default_rng(5)
    x, b = (rng.standard_normal((6, 5)).astype(np.float32) for _ in range(2))
    x[:, 1], b[0, 1], b[0, 2] = 2.0, -0.0, np.nan
    src = """let y = compute(x, b) {
    for i in 0..rows, j in 0..cols:
        var a = b[0:1, j]
        out[i, j] = a * x[i, j]
}
y
"""
    kernel, arrays, sizes, _ = lower_block(src, {"x": x, "b": b}, sizes={"rows": 6, "cols": 5})
    for tgt in (cuda_target((9, 0)), metal_target()):
        prog = schedules.build(kernel, tgt, sizes)
        got = emulate_kernel(prog, kernel, arrays, sizes).reshape(x.shape)
        assert_equals_numpy(got, b[0:1] * x, 1e-6)      # NaN kept
        np.testing.assert_array_equal(np.signbit(got), np.signbit(b[0:1] * x))


# ------------------------------------------- a reduction of a host list, as tensor() reads it

_LISTS = ["[0.1, 0.2, 0.7]", "[[1.5, -2.25], [1e-8, 3.0]]", "[1, 2, 3]", "[1.0, 2]",
          "[3000000000, 1]"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min", "argmax"])
@pytest.mark.parametrize("lst", _LISTS)
def test_a_reduction_of_a_list_is_that_of_its_tensor(device, fn, lst):
    """sum([1.0, 2.0]) was f64 (numpy's reading of the list) where tensor([1.0, 2.0]) is
    f32: a list is read as tensor() reads it, f32 by content."""
    arr = np.array(eval(lst))
    arr = arr.astype(np.float32) if arr.dtype.kind == "f" else \
        arr.astype(np.int32 if np.abs(arr).max() < 2 ** 31 else np.int64)
    want = getattr(np, fn)(arr)
    got = [zynbook.run(f"{fn}({lst})")]
    if arr.dtype != np.int64 or device.startswith("cpu"):   # (WebGPU has no i64 storage)
        got.append(zynbook.run(f'{fn}(tensor({lst}, device="{device}"))'))
    for value in got:
        assert np.asarray(value).dtype == want.dtype, (np.asarray(value).dtype, want.dtype)
        assert_equals_numpy(value, want, 1e-6)
