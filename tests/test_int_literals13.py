"""Integer constants past 32 bits: i64(3000000000) beside data is numpy's sum on the CPU
devices and, on WebGPU (no 64-bit integers: i64 values are held in 32 bits), an error
naming 64-bit integers, never a refusal of an "i32 constant"."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_X = np.array([1, -5, 7, 2147483647, -2147483648], dtype=np.int32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _kernel(body: str) -> str:
    return f"""let y = compute(x) {{
    for i in 0..n:
        {body}
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("body", ["out[i] = i64(3000000000) + x[i]",
                                  "out[i] = x[i] - i64(3000000000)"])
def test_i64_of_a_wide_literal_beside_data(device, dtype, body):
    x = _X.astype(dtype)
    big = np.int64(3000000000)
    want = big + x.astype(np.int64) if "+" in body else x.astype(np.int64) - big
    try:
        got = zynbook.run(_kernel(body), device=device, x=x)
    except ZynMLError as err:
        # WebGPU holds i64 in 32 bits: 3000000000 cannot be held, and the error says so
        assert device.startswith(("vulkan", "gl")), err
        assert "64-bit integer" in str(err) and "i32 constant" not in str(err), err
        assert "line 3" in str(err), err
        return
    assert_equals_numpy(_host(got), want, 0)
    assert str(got.dtype) in ("i64", "int64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("init, exact", [("2 ** 31", 2 ** 31), ("2147483647 + 1", 2 ** 31),
                                         ("-(2 ** 31) - 1", -2 ** 31 - 1),
                                         ("3 * 1000000000", 3 * 10 ** 9), ("7 * 3", 21)])
def test_var_of_literals_holds_their_exact_value(device, init, exact):
    """`var c = 2 ** 31` wrapped c to -2147483648 in i32, where `let c = 2 ** 31` is exact."""
    src = _kernel(f"var c = {init}\n        c += x[i]\n        out[i] = c")
    want = np.int64(exact) + _X.astype(np.int64) if exact != 21 else np.int32(21) + _X
    try:
        got = zynbook.run(src, device=device, x=_X)
    except ZynMLError as err:
        assert device.startswith(("vulkan", "gl")) and exact != 21, err
        # WebGPU holds i64 in 32 bits: these sums leave them
        assert "64-bit integer" in str(err), err
        return
    assert_equals_numpy(_host(got), want, 0)
    assert str(got.dtype) in (str(want.dtype), {"int64": "i64", "int32": "i32"}[str(want.dtype)])


@pytest.mark.parametrize("device", DEVICES)
def test_var_of_literals_past_64_bits_is_a_type_error(device):
    with pytest.raises(ZynMLError, match=r"does not fit 64 bits") as err:
        zynbook.run(_kernel("var c = 2 ** 64\n        out[i] = x[i] + c"), device=device, x=_X)
    assert "line 3" in str(err.value) and "^" in str(err.value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("i64(2 ** 31) + i64(x[i])", lambda: np.int64(2 ** 31) + _X.astype(np.int64)),
    ("f32(2 ** 31) + f32(x[i] % 3)", lambda: np.float32(2 ** 31) + np.fmod(_X, 3).astype(np.float32)),
    ("u8(2 ** 8 + 3) + u8(x[i] % 4)", lambda: np.uint8(3) + np.fmod(_X, 4).astype(np.uint8)),
])
def test_conversion_of_literals_converts_their_exact_value(device, body, want):
    """i64(2 ** 31) was i64 of i32's wrapped -2147483648; numpy's np.int64(2 ** 31) is exact."""
    w = want()
    try:
        got = zynbook.run(_kernel(f"out[i] = {body}"), device=device, x=_X)
    except ZynMLError as err:
        assert device.startswith(("vulkan", "gl")) and w.dtype == np.int64, err
        assert "64-bit integer" in str(err), err
        return
    assert_equals_numpy(_host(got), w, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("decl, want", [
    ("let c: i64 = 2 ** 31", lambda: np.int64(2 ** 31) + _X.astype(np.int64)),
    ("var c: i64 = 2147483647 + 1", lambda: np.int64(2 ** 31) + _X.astype(np.int64)),
    ("let c: f64 = 2 ** 31", lambda: np.float64(2 ** 31) + _X.astype(np.float64)),
    ("var c: f32 = -(2 ** 31) - 1", lambda: np.float32(-2 ** 31 - 1) + _X.astype(np.float32)),
])
def test_declared_type_converts_the_exact_value_of_literals(device, decl, want):
    """`let c: i64 = 2 ** 31` converted i32's wrapped -2147483648."""
    w = want()
    src = _kernel(f"{decl}\n        out[i] = {w.dtype.name[0]}{w.dtype.itemsize * 8}(x[i]) + c")
    try:
        got = zynbook.run(src, device=device, x=_X)
    except ZynMLError as err:
        assert device.startswith(("vulkan", "gl")) and w.dtype.kind == "i" or \
            device.startswith("gl") and w.dtype == np.float64, err
        return
    assert_equals_numpy(_host(got), w, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("min(x[i], 2 ** 31)", lambda: np.minimum(_X, np.int64(2 ** 31))),
    ("max(i64(x[i]), 2 ** 31)", lambda: np.maximum(_X.astype(np.int64), np.int64(2 ** 31))),
    ("where(x[i] > 0, x[i], 2 ** 31)", lambda: np.where(_X > 0, _X, np.int64(2 ** 31))),
    ("where(x[i] > 0, -(2 ** 31) - 1, x[i])", lambda: np.where(_X > 0, np.int64(-2 ** 31 - 1), _X)),
    ("clamp(i64(x[i]), 0, 2 ** 32)", lambda: np.clip(_X.astype(np.int64), 0, np.int64(2 ** 32))),
])
def test_literals_beside_data_in_calls_are_exact(device, body, want):
    """min(x[i], 2 ** 31) was min(x[i], -2147483648): i32 wrapped the literals silently."""
    w = want()
    assert w.dtype == np.int64
    try:
        got = zynbook.run(_kernel(f"out[i] = {body}"), device=device, x=_X)
    except ZynMLError as err:
        assert device.startswith(("vulkan", "gl")) and "64-bit integer" in str(err), err
        return
    assert_equals_numpy(_host(got), w, 0)
    assert str(got.dtype) in ("i64", "int64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("added", ["2 ** 31", "2147483647 + 1", "3000000000"])
def test_compound_store_of_literals_into_out_adds_their_exact_value(device, added):
    """out[i] += 2 ** 31 added -2147483648 to i32 out, where out[i] += 3000000000 widened out."""
    want = _X.astype(np.int64) + np.int64(eval(added))
    try:
        got = zynbook.run(_kernel(f"out[i] = x[i]\n        out[i] += {added}"), device=device, x=_X)
    except ZynMLError as err:
        assert device.startswith(("vulkan", "gl")) and "64-bit integer" in str(err), err
        return
    assert_equals_numpy(_host(got), want, 0)
    assert str(got.dtype) in ("i64", "int64")
