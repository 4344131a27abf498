"""Programs written from the spec's text (zynml-compute-system.md, compute-device-trait.rs)
and docs/language.md as an outside tester writes them, with names, dtypes and sizes the
existing tests do not use. Each runs on every device present (the CPU reference included)
and is compared with numpy written here; mistakes are ZynML errors with a caret."""
from __future__ import annotations

import math

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(4144)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


_SMALL = np.float32([1e-8, -1e-6, 1e-5, -1e-4, 1e-3, -3e-3, 1e-2, -0.1, 0.3, -0.6, 0.7, -0.99,
                     1.2, -2.5])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, ref", [("tanh", np.tanh), ("sinh", np.sinh),
                                     ("erf", np.vectorize(math.erf))])
def test_odd_functions_keep_their_digits_near_zero(fn, ref, device):
    """tanh, sinh and erf of small values to f32's precision of the value itself: WebGPU's
    tanh and sinh (quotients of exponentials) and its erf (Abramowitz-Stegun, an absolute
    error of 1.5e-7) kept only the absolute error, so tanh(1e-4) was off by 2e-4 of itself,
    erf(1e-4) by 1e-3 and tanh(1e-8) was 3e-8."""
    got = zynbook.Session(device).run(
        f"let y = compute(x) {{\n    for k in 0..n:\n        out[k] = {fn}(x[k])\n}}\ny\n", x=_SMALL)
    want = ref(_SMALL.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-6, atol=0)


_FX = (RNG.standard_normal(400) * 10.0 ** RNG.integers(-3, 9, 400)).astype(np.float32)
_FY = (RNG.standard_normal(400) * 10.0 ** RNG.integers(-3, 3, 400)).astype(np.float32)
_FX[:8] = [5.5, -5.5, -0.0, np.inf, np.nan, 1e30, 7.0, -7.0]
_FY[:8] = [np.inf, -np.inf, 3.0, 2.0, 2.0, 7.0, 0.0, 7.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_remainder_is_exact_as_c_fmod(dtype, device):
    """`x % y` of floats is C's fmod, exact, however many digits the quotient has: WebGPU
    spelt it with WGSL's %, x - y * trunc(x / y), which gave 8216181.5 % 18.093166 as 2.5
    (2.287201) and 1e30 % 7 as 0 (1): over half of these pairs were wrong."""
    x, y = _FX.astype(dtype), _FY.astype(dtype)
    try:
        got = zynbook.Session(device).run(
            "let r = compute(x, y) {\n    for k in 0..n:\n        out[k] = x[k] % y[k]\n}\nr\n",
            x=x, y=y)
    except zynbook.ZynMLError as err:
        if dtype == "float64" and "shader-f64" in err.message:
            pytest.skip(err.message)
        raise
    with np.errstate(invalid="ignore"):
        want = np.fmod(x, y)
    got = np.asarray(got)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]),
                                  np.signbit(want[~np.isnan(want)]))


_X7 = np.arange(7, dtype=np.float32)
_BLOCK = "compute(x) {\n        for i in 0..n: out[i] = x[i] * 2.0\n    }"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, want", [
    # writing into the tensor a slice, .T or reshape was taken of leaves the view
    ("var t = x + 1.0\nlet v = t[0:3]\nt[0] = -5.0\nv\n", _X7[:3] + 1),
    ("var t = x + 1.0\nlet v = t.T\nt[1] = -5.0\nv\n", _X7 + 1),
    ("pipeline p(x: tensor[n]):\n    var t = zeros([7])\n    let v = t[0:3]\n    t[0] = -5.0\n"
     "    return v\np(x)\n", np.zeros(3)),
    # and writing into the view leaves the tensor
    ("var t = x + 1.0\nvar v = t[0:3]\nv[0] = -5.0\nt\n", _X7 + 1),
    ("pipeline p(x: tensor[n]):\n    var t = x + 1.0\n    var v = t.reshape([7, 1])\n"
     "    v[0, 0] = -5.0\n    return t\np(x)\n", _X7 + 1),
    # reshapes and split parts of a compute block's result, computed or still recorded
    (f"let y = {_BLOCK}\nvar r = reshape(y, [7, 1])\nr[0, 0] = 50.0\ny\n", _X7 * 2),
    (f"pipeline p(x: tensor[n]):\n    let y = {_BLOCK}\n    var r = reshape(y, [7, 1])\n"
     "    r[0, 0] = 50.0\n    return y\np(x)\n", _X7 * 2),
    (f"pipeline p(x: tensor[n]):\n    var y = {_BLOCK}\n    let (a, b) = split(y[0:6], 2)\n"
     "    y[0] = 50.0\n    return a\np(x)\n", _X7[:3] * 2),
    (f"pipeline p(x: tensor[n]):\n    var y = {_BLOCK}\n    let r = reshape(y, [7, 1])\n"
     "    y[0] = 50.0\n    return r\np(x)\n", (_X7 * 2).reshape(7, 1)),
])
def test_views_bound_to_names_are_tensors_of_their_own(src, want, device):
    """docs/language.md: "a slice, `x.T` and `reshape(...)` bound to a name are tensors of
    their own, not views". They were numpy views of a tensor the program made (only a
    caller's array was copied before a write), so `t[0] = -5.0` changed `v = t[0:3]`,
    `v[0] = -5.0` changed `t`, and `r[0, 0] = 50.0` changed the block's result `y`."""
    got = zynbook.Session(device).run(src, x=_X7.copy())
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("made", ["t.numpy()", "transpose(t)", "t.T", "reshape(t, [7])"])
def test_a_copy_or_transpose_of_a_vector_is_its_own(made, device):
    """`numpy()` is "a copy on the host" (docs/language.md) and `transpose(x)` of a vector
    a tensor of its own as `x.T` is: both held the CPU tensor's own array, so writing into
    them changed `t`."""
    src = f"var t = x * 1.0\nvar y = {made}\ny[0] = 99.0\n[t, y]\n"
    t, y = zynbook.Session(device).run(src, x=_X7.copy())
    assert_equals_numpy(t, _X7, 0)
    assert_equals_numpy(y, np.r_[99.0, _X7[1:]].astype(np.float32), 0)


_NEAR_ONE = np.float32([1.0, 0.9999767, 1.0000001, 0.9999999, 1.001, 0.999, 1.03, 0.97, 1.06,
                        0.94, 1.2, 0.5, 7.0, 1e-30])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, ref", [("log", np.log), ("log2", np.log2)])
def test_logarithms_near_one_keep_their_digits(fn, ref, device):
    """log and log2 of values near 1 to f32's precision of the result: WebGPU's builtins
    kept only an absolute error there, so log(0.9999767) was off by 2.5e-3 of itself (half
    of a set of values within 1e-3 of 1 were off by more than 3e-6)."""
    got = zynbook.Session(device).run(
        f"let y = compute(x) {{\n    for k in 0..n:\n        out[k] = {fn}(x[k])\n}}\ny\n",
        x=_NEAR_ONE)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref(_NEAR_ONE.astype(np.float64)),
                               rtol=1e-6, atol=0)


_WIDE = np.float32(np.r_[np.linspace(-86.9, 88.7, 301), [0.0, -0.0, 1e-8]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, ref", [
    ("exp", np.exp), ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
    ("silu", lambda v: v / (1 + np.exp(-v))), ("sinh", np.sinh), ("cosh", np.cosh)])
def test_exponentials_keep_their_digits_far_from_zero(fn, ref, device):
    """exp, and the functions made of it, to f32's precision across its range: WebGPU's
    builtin exp has an error of 3 + 2|x| ulp, so exp(-79.3) was off by 3.7e-6 of itself,
    and so were sigmoid, silu, sinh and cosh far from 0 (hundreds of these values past
    1e-6)."""
    got = zynbook.Session(device).run(
        f"let y = compute(x) {{\n    for k in 0..n:\n        out[k] = {fn}(x[k])\n}}\ny\n", x=_WIDE)
    want = ref(_WIDE.astype(np.float64))
    normal = np.abs(want) > 1.2e-38
    np.testing.assert_allclose(np.asarray(got, np.float64)[normal], want[normal], rtol=1e-6,
                               atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_exp_at_the_ends_of_its_range(device):
    x = np.float32([np.nan, np.inf, -np.inf, 88.8, 89.0, -104.0, 0.0])
    got = zynbook.Session(device).run(
        "let y = compute(x) {\n    for k in 0..n:\n        out[k] = exp(x[k])\n}\ny\n", x=x)
    np.testing.assert_array_equal(np.asarray(got), np.float32([np.nan, np.inf, 0, np.inf, np.inf,
                                                                0, 1]))


_A23 = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_a_shared_array_read_past_its_loop_is_a_name_error(device):
    """A shared array is one per iteration of the loop it is declared in: read after that
    loop it names nothing (an internal compiler error: "`s` is neither a buffer nor a
    shared array in scope")."""
    src = ("let z = compute(a) {\n    for i in 0..2, j in 0..3:\n        shared var s[3]\n"
           "        s[j] = a[i, j]\n        barrier()\n    out[0, 0] = s[2]\n}\nz\n")
    err = raises("name", src, 6, 17, device, a=_A23)
    assert "`s`" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_variable_used_past_its_loop_suggests_no_internal_name(device):
    """`i` read after its loop is an unknown name; it suggested `i_2`, the name the
    compiler gave the loop's variable, which the program never wrote."""
    src = ("let z = compute(a) {\n    for i in 0..2, j in 0..3:\n        let t = a[i, j]\n"
           "    out[i, 0] = 1.0\n}\nz\n")
    err = raises("name", src, 4, 9, device, a=_A23)
    assert err.message == "unknown name `i`", err.message


@pytest.mark.parametrize("device", DEVICES)
def test_a_tile_as_long_as_the_loop_variable_is_a_shape_error(device):
    """`out[i, j] = b[i, :j]` writes a tile whose length changes with `j`: a shape error
    at the store, as for `b[i, 0:j]` (the slice without its start made the output's size
    depend on `j`: a KeyError)."""
    src = "let z = compute(b) {\n    for i in 0..2, j in 0..3:\n        out[i, j] = b[i, :j]\n}\nz\n"
    err = raises("shape", src, 3, 9, device, b=_A23)
    assert "loop variable `j`" in err.message
    got = zynbook.Session(device).run(
        "let z = compute(b) {\n    for i in 0..2, j in 0..3:\n        out[i, j] = sum(b[i, :j])\n}\nz\n",
        b=_A23)
    assert_equals_numpy(got, np.cumsum(np.c_[np.zeros(2), _A23[:, :2]], 1), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("made", ["+t", "tensor(t)", "tensor(t, dtype=f32)"])
def test_unary_plus_and_tensor_of_a_tensor_are_their_own(made, device):
    """`+t` is numpy's +t and `tensor(t)` a new tensor, as numpy's array(t): both held
    `t`'s own array, so writing into them changed `t`."""
    src = f"var t = x * 1.0\nvar y = {made}\ny[0] = 99.0\n[t, y]\n"
    t, y = zynbook.Session(device).run(src, x=_X7.copy())
    assert_equals_numpy(t, _X7, 0)
    assert_equals_numpy(y, np.r_[99.0, _X7[1:]].astype(np.float32), 0)


def test_var_does_not_unpack_and_says_so():
    """`var (a, b) = pair` reads as an assignment to a call of a name `var` (which is also
    a name): the error said only "cannot assign to this expression"; it names `let`."""
    err = raises("type", "var (a, b) = [1, 2]\na\n", 1, 1)
    assert "let (a, b) = pair" in err.message
    assert raises("type", "f(1) = 2\n", 1, 1).message == "cannot assign to this expression"
