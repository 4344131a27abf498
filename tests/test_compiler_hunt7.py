"""The front and middle of the compiler (checker, typing, the size solver, lowering and the
CIR passes) against numpy written here, on every device present: weak integer typing of
loop variables and sizes, windows whose size is solved from their reads, guarded taps of a
padded convolution, and small programs of the language reference at odd sizes."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(707)


def _run(device, src, /, **inputs):
    got = zynbook.Session(device).run(src, **inputs)
    return np.asarray(got.numpy() if hasattr(got, "numpy") else got)


def _block(body, inputs="h", loop="for i in 0..n:"):
    return f"let y = compute({inputs}) {{\n    {loop}\n        {body}\n}}\ny\n"


# ------------------------------------------------ a loop variable is i32, not a literal

_H8 = np.int8([-128, -5, 0, 7, 100, 127, 64])
_I = np.arange(len(_H8), dtype=np.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("i + h[i]", lambda: _I + _H8.astype(np.int32)),
    ("i * 2 + h[i]", lambda: _I * 2 + _H8.astype(np.int32)),
    ("h[i] + i * 2", lambda: _H8.astype(np.int32) + _I * 2),
    ("(i + 1) + h[i]", lambda: (_I + 1) + _H8.astype(np.int32)),
    ("h[i] * 2 - i", lambda: (_H8 * np.int8(2)).astype(np.int32) - _I),
    # a literal and a size are weak, as numpy's Python ints: i8 arithmetic that wraps
    ("h[i] + 100", lambda: _H8 + np.int8(100)),
    ("h[i] + n", lambda: _H8 + np.int8(len(_H8))),
    ("h[i] + n * 10", lambda: _H8 + np.int8(len(_H8) * 10)),
])
def test_a_loop_variable_is_an_i32_value_beside_i8(device, body, want):
    """`i * 2 + h[i]` on i8 `h` was i8 (wrapping) while `i + h[i]` was i32: arithmetic of a
    loop variable and literals counted as weak. The reference says a loop variable is i32
    and only literals and sizes are weak, as numpy's Python ints beside an int8 array."""
    with np.errstate(over="ignore"):
        w = want()
    assert_equals_numpy(_run(device, _block(f"out[i] = {body}"), h=_H8), w, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_let_of_loop_variable_arithmetic_is_i32(device):
    """A `let` holding `i * 3` is as strong as the expression: beside u8 it gives i32."""
    u = np.uint8([250, 3, 255, 0, 17])
    src = _block("let k = i * 3\n        out[i] = u[i] + k", inputs="u")
    want = u.astype(np.int32) + np.arange(5, dtype=np.int32) * 3
    assert_equals_numpy(_run(device, src, u=u), want, 0)
