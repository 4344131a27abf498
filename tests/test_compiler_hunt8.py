"""The compiler and language against numpy written here, on every device present: programs
of the language reference at odd sizes, with names, dtypes and conditions that earlier tests
did not vary."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()
# (an adapter without `shader-f64`, gl:0 here, refuses f64 kernels: test_wgsl_hunt7)
F64_DEVICES = [d for d in DEVICES if d != "gl:0"]


def _run(device, src, /, **inputs):
    got = zynbook.Session(device).run(src, **inputs)
    return np.asarray(got.numpy() if hasattr(got, "numpy") else got)


def _block(body, inputs="x", loop="for i in 0..n:", head=""):
    return f"{head}let y = compute({inputs}) {{\n    {loop}\n        {body}\n}}\ny\n"


# ------------------------------------------------ `and` / `or` guard their right side

_X7 = np.float32([np.nan, -0.0, 0.0, 2.0, -1.0, np.inf, 0.5])


def _short_circuit(cond):
    return lambda x, n: np.array([1.0 if cond(x, i, n) else -5.0 for i in range(n)], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cond, want", [
    ("i < n - 1 and x[i + 1] > 0.0", _short_circuit(lambda x, i, n: i < n - 1 and x[i + 1] > 0)),
    ("i == 0 or x[i - 1] > 0.0", _short_circuit(lambda x, i, n: i == 0 or x[i - 1] > 0)),
    ("not (i < 1 or x[i - 1] >= 0.0)", _short_circuit(lambda x, i, n: not (i < 1 or x[i - 1] >= 0))),
    ("i > 1 and i < n - 2 and x[i - 2] + x[i + 2] != 0.0",
     _short_circuit(lambda x, i, n: 1 < i < n - 2 and x[i - 2] + x[i + 2] != 0)),
])
def test_the_right_side_of_and_or_reads_only_where_the_left_lets_it(device, cond, want):
    """`if i < n - 1 and x[i + 1] > 0.0` was a shape error before the launch ("index 7 is
    outside axis 0 of `x`"): the read was checked as if it always ran, though every device
    (the reference too) evaluates the right side of `and`/`or` only where the left does not
    decide, as an `if` around it would."""
    src = _block(f"if {cond}:\n            out[i] = 1.0\n        else:\n            out[i] = -5.0",
                 head="let n = 7\n")
    assert_equals_numpy(_run(device, src, x=_X7), want(_X7, 7), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_let_of_a_short_circuit_condition(device):
    src = _block("let ok = i > 0 and x[i - 1] < 1.0\n        out[i] = where(ok, 1.0, 0.0)",
                 head="let n = 7\n")
    want = np.float32([1.0 if i > 0 and _X7[i - 1] < 1 else 0.0 for i in range(7)])
    assert_equals_numpy(_run(device, src, x=_X7), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_short_circuit_condition_over_columns_of_odd_rows(device):
    m = (np.arange(33 * 7, dtype=np.float32).reshape(33, 7) * 7.0) % 13.0
    src = ("let y = compute(m) {\n    for r in 0..rows, c in 0..cols:\n"
           "        if c + 1 < cols and m[r, c + 1] > 8.0:\n            out[r, c] = m[r, c + 1]\n"
           "        else:\n            out[r, c] = m[r, c]\n}\ny\n")
    want = m.copy()
    want[:, :-1] = np.where(m[:, 1:] > 8, m[:, 1:], m[:, :-1])
    assert_equals_numpy(_run(device, src, m=m), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_right_side_that_does_read_past_the_axis_is_a_runtime_error(device):
    """Guarded, the read is checked where it happens: `i >= 0` lets x[7] be read."""
    src = _block("if i >= 0 and x[i + 1] > 0.0:\n            out[i] = 1.0", head="let n = 7\n")
    err = raises("runtime", src, 4, 25, device=device, x=_X7)
    assert "index 7" in err.message


# ------------------------------------------------ weak integers and lets beside f16 and f64

_H4 = np.float16([1.0, 2.0, 3.0, -1.0])
_D4 = np.float64([1.0, -3.0, 1e-300, 7.0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    # C's integer division and remainder, then the float: 3.0, not 3.5
    ("x[i] + 7 / 2 * 1.0", lambda h: h + np.float16(3.0)),
    ("x[i] + (-7) / 2 * 1.0", lambda h: h + np.float16(-3.0)),
    ("x[i] + 7 % -2 * 1.0", lambda h: h + np.float16(1.0)),
    # an integer literal or a size meeting f16 is converted to f16 first, as numpy converts a
    # Python int: f16(2049) is 2048
    ("x[i] + 2049", lambda h: h + np.float16(2049)),
    ("x[i] + (2000 + 49)", lambda h: h + np.float16(2049)),
    ("x[i] + k", lambda h: h + np.float16(2049)),
    ("x[i] * 2049", lambda h: h * np.float16(2049)),
    ("x[i] + 2048.0 == 2049", lambda h: (h + np.float16(2048)) == np.float16(2049)),
    # a float expression of literals: its value, then f16's
    ("x[i] + 2049.0 % 4096.0", lambda h: h + np.float16(2049)),
    ("x[i] + clamp(2049.0, 0.0, 5000.0)", lambda h: h + np.float16(2049)),
])
def test_weak_integers_beside_halves(device, body, want):
    """`h[i] + 2049` added 2049 on the compiled devices (2050 where the reference, as numpy,
    gives 2048), and `7 / 2 * 1.0` beside f16 was 3.5 everywhere: the literal folded to f16
    divided as Python does."""
    got = _run(device, _block(f"out[i] = {body}", head="let k = 2049\n"), x=_H4)
    assert_equals_numpy(got, want(_H4), 0)


_H5 = np.float16([0.1, 2.0, 3.0, -1.0, 1024.0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("let c = 0.1\n        out[i] = x[i] == c", lambda h: h == np.float16(0.1)),
    ("let c = 2049.0\n        out[i] = x[i] + c", lambda h: h + np.float16(2049)),
    ("let a = 0.1\n        let c = a * 1.0\n        out[i] = x[i] == c",
     lambda h: h == np.float16(0.1)),
    ("let k = 7 / 2\n        let c = k * 1.0 + 2046.0\n        out[i] = x[i] + c",
     lambda h: h + np.float16(2049)),
])
def test_a_let_of_literals_beside_halves_is_the_literal(device, body, want):
    """`let c = 0.1` then `h[i] == c` compared with f32(0.1) on the compiled devices (never
    equal), where `h[i] == 0.1` and the reference compare with f16(0.1)."""
    assert_equals_numpy(_run(device, _block(body), x=_H5), want(_H5), 0)

@pytest.mark.parametrize("device", F64_DEVICES)
@pytest.mark.parametrize("body, want", [
    ("out[i] = x[i] + 7 / 2 * 1.0", lambda d: d + 3.0),
    ("out[i] = x[i] * sqrt(2.0)", lambda d: d * np.sqrt(2.0)),
    ("out[i] = x[i] * exp(1.0)", lambda d: d * np.e),
    ("let c = 0.1 * 3.0\n        out[i] = x[i] + c", lambda d: d + 0.1 * 3.0),
    ("let a = 0.1\n        let c = a / 3.0\n        out[i] = x[i] + c", lambda d: d + 0.1 / 3.0),
    ("let c = sqrt(2.0) / n\n        out[i] = x[i] * c", lambda d: d * (np.sqrt(2.0) / 4)),
    ("var c = 0.1 * 3.0\n        out[i] = x[i] + c", lambda d: d + 0.1 * 3.0),
    ("var c = 0.1\n        for k in 0..2:\n            c = c * 3.0\n        out[i] = x[i] + c",
     lambda d: d + 0.1 * 3.0 * 3.0),
    ("var c = 0.1\n        c = c / 3.0\n        c += x[i]\n        out[i] = c", lambda d: 0.1 / 3.0 + d),
])
def test_weak_values_meeting_f64_are_computed_in_f64(device, body, want):
    """The reference computes literals, and lets and vars of them, in f64 where they meet
    f64, as numpy's Python floats: the compiled devices computed `let c = 0.1 * 3.0`, a
    `var` scaled by literals before it summed f64 values, in f32 (1e-8 off), and WebGPU
    refused `sqrt(2.0)` in 64 bits (its constant evaluation has no 64-bit math)."""
    assert_equals_numpy(_run(device, _block(body), x=_D4), want(_D4), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("x[i] ** 2 ** 2", lambda a: a ** 4),
    ("x[i] ** (1 + 2)", lambda a: a ** 3),
    ("x[i] ** (7 / 2)", lambda a: a ** 3),
    ("x[i] ** (2 - 3)", lambda a: a.astype(np.float32) ** -1),
])
def test_an_integer_power_by_literal_arithmetic(device, body, want):
    """An exponent of literals is the constant it computes: `x ** 2 ** 2` on i32 was f32
    (an exponent that is not a constant gives f32), where `x ** 4` is i32."""
    a = np.int32([1, -2, 3, 5, 0, -7, 33])
    with np.errstate(divide="ignore"):
        w = want(a)
    assert_equals_numpy(_run(device, _block(f"out[i] = {body}"), x=a), w, 1e-6)


# ------------------------------------------------ names that look like generated ones

_X7B = np.float32([1.5, -2.0, 3.25, 0.0, 7.0, 9.0, -1.0])
_M34 = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, inputs, want", [
    ("let x_d0 = 2.5\n" + _block("out[i] = x[i] * x_d0"), {"x": _X7B}, _X7B * 2.5),
    ("let x_d0 = 3\n" + _block("out[i] = x[i] * x_d0 + i"), {"x": _X7B},
     _X7B * 3 + np.arange(7)),
    ("let x_d0 = 2.5\nlet x_d0_2 = 1.0\n" + _block("out[i] = x[i] * x_d0 + x_d0_2"),
     {"x": _X7B}, _X7B * 2.5 + 1),
    (_block("out[i] = x_d0[i] + x[i]", inputs="x_d0, x"), {"x": _X7B, "x_d0": _X7B[::-1].copy()},
     _X7B + _X7B[::-1]),
    ("let y = compute(m_d1, m) {\n    for r in 0..rows, c in 0..cols:\n"
     "        out[r, c] = m_d1[c] + m[r, c]\n}\ny\n",
     {"m": _M34, "m_d1": np.float32([5, 6, 7, 8])}, _M34 + np.float32([5, 6, 7, 8])),
    ("let m_d1 = 2\nlet y = compute(m) {\n    for r in 0..rows, c in 0..m_d1:\n"
     "        out[r, c] = m[r, c]\n}\ny\n", {"m": _M34}, _M34[:, :2]),
])
def test_a_name_like_an_axis_size_is_the_program_s_own(device, src, inputs, want):
    """The size of an input's axis was named `x_d0` in the one namespace of the block: a host
    float or int `x_d0` read there was x's length (7, on every device for an int, on the
    compiled ones for a float) and an input named `x_d0` beside `x` did not compile on
    WebGPU."""
    assert_equals_numpy(_run(device, src, **inputs), want, 0)


# ------------------------------------------------ out[...] += reads out in out's dtype

_X5 = np.float32([1.5, -2.0, 3.25, 0.0, 7.0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, inputs, want", [
    ("out[i] += x[i]\n        out[i] += 1", {"x": _X5}, _X5 + 1),
    ("out[i] += x[i]\n        out[i] -= 2\n        out[i] *= 3", {"x": _X5}, (_X5 - 2) * 3),
    ("out[i] += x[i]\n        out[i] += 2049", {"x": _X5.astype(np.float16)},
     _X5.astype(np.float16) + np.float16(2049)),
    ("out[i] = k[i]\n        out[i] += x[i]",
     {"x": _X5, "k": np.int32([1, 2, 3, 4, 5])}, np.float32([1, 2, 3, 4, 5]) + _X5),
    ("if x[i] > 0.0:\n            out[i] += x[i] * 0.5\n        out[i] += 1",
     {"x": _X5}, np.where(_X5 > 0, _X5 * 0.5, 0).astype(np.float32) + 1),
])
def test_an_accumulation_into_out_reads_out_in_its_dtype(device, body, inputs, want):
    """`out[i] += 1` read out as an i32 (the type of the value added), so after `out[i] +=
    x[i]` of f32 values 1.5 + 1 was 2 on every device: out is read in its own dtype, the
    promoted dtype of everything written to it."""
    names = ", ".join(inputs)
    assert_equals_numpy(_run(device, _block(body, inputs=names), **inputs), want, 0)


_H5B = np.float16([1.0, 2.0, 3.0, -1.0, 2048.0])
_A5 = np.int8([1, -128, 127, 5, 0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, inputs, want", [
    ("out[i] = x[i]\n        out[i] += 1.0", {"x": _H5B}, _H5B + np.float16(1)),
    ("out[i] += x[i]\n        out[i] += 1.0", {"x": _H5B}, _H5B + np.float16(1)),
    ("out[i] = x[i]\n        out[i] += 1", {"x": _A5}, _A5 + np.int8(1)),
    ("out[i] += x[i]\n        out[i] *= 2", {"x": _A5}, _A5 * np.int8(2)),
    ("out[i] = x[i] > 0\n        out[i] += 1", {"x": _A5}, (_A5 > 0).astype(np.int32) + 1),
])
def test_a_literal_added_to_out_takes_out_s_dtype(device, body, inputs, want):
    """`out[i] += 1.0` after f16 writes made out f32 (and `out[i] += 1` after i8 ones i32):
    the literal is weak, so out keeps the dtype of its other writes and the sum wraps or
    rounds there, as numpy's `out += 1.0` on an f16 array does; a bool out counts as i32."""
    assert_equals_numpy(_run(device, _block(body), **inputs), want, 0)
