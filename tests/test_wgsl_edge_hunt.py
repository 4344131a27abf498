"""Edges on every device present (WebGPU on llvmpipe, the C++ device, the reference),
compared with numpy written here: expressions of constants that overflow next to values
that are infinite or NaN, f16 activations where exp leaves the half range, and thread
loops longer than llvmpipe's budget of 65,535 loop iterations."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
_F = np.array([1.0, -1.5, 0.0, np.inf, -np.inf, np.nan], np.float32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr):
    return f"""let y = compute(f) {{
    @kernel elementwise
    for k in 0..n:
        out[k] = {expr}
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, numpy_expr", [
    ("f[k] + 3e38 * 3.0", "f + np.float32(3e38) * np.float32(3.0)"),
    ("f[k] - 3e38 * 3.0", "f - np.float32(3e38) * np.float32(3.0)"),
    ("2e38 * 2.0 + f[k]", "np.float32(2e38) * np.float32(2.0) + f"),
])
def test_a_product_of_constants_past_f32_added_to_a_value(device, expr, numpy_expr):
    """3e38 * 3.0 is f32's infinity, so -inf + 3e38 * 3.0 is NaN as numpy has it: the C++
    device compiled x + 3e38f * 3.0f into one fma, whose product is not rounded (9e38), and
    gave -inf."""
    with np.errstate(all="ignore"):
        want = eval(numpy_expr, {"np": np, "f": _F}).astype(np.float32)
    got = _host(zynbook.run(_elementwise(expr), device=device, f=_F))
    assert_equals_numpy(got, want, 1e-6)


_HALF = np.array([-17.0, -15.0, -12.0, -11.5, -10.0, -3.0, 0.0, 2.0, 11.5, 17.0], np.float16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, numpy_fn", [
    ("silu", lambda x: x / (1 + np.exp(-x))),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
])
def test_half_activations_past_where_exp_leaves_the_half_range(device, fn, numpy_fn):
    """silu and sigmoid of f16 values below -11.1, where exp(-x) is past f16's range: the
    reference computed them in f16 steps and gave 0 (silu(-12) for -7.4e-5, a normal half),
    in compute blocks and on tensors outside them, where the compiled devices compute in f32
    and round once; computed in float64 here and rounded to f16."""
    want = numpy_fn(_HALF.astype(np.float64)).astype(np.float16).astype(np.float64)
    got = zynbook.run(_elementwise(f"{fn}(f[k])"), device=device, f=_HALF)
    assert got.dtype == "f16"
    np.testing.assert_allclose(_host(got).astype(np.float64), want, rtol=1e-3, atol=6e-8)
    got = zynbook.run(f"{fn}(f)", device=device, f=_HALF)
    assert got.dtype == "f16"
    np.testing.assert_allclose(_host(got).astype(np.float64), want, rtol=1e-3, atol=6e-8)


# ---------------------------------------------------------------- llvmpipe's loop budget

_GATHERED_RECURRENCE = """let y = compute(x, idx) {
    for i in 0..m:
        var s = 0.0
        for k in 0..n:
            s = s * 0.5 + x[i, idx[k]]
        out[i] = s
}
y
"""


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_a_thread_loop_of_gathered_steps_past_65535(device):
    """A thread's sequential loop of 100,000 steps, each reading through two checked
    indices: llvmpipe quits a thread's loops after 65,535 iterations in all, and a loop in
    a branch not taken counts too (the error flag's compare-exchange loop under every check),
    so such a loop stopped after 21,845 steps (a runtime error). An innermost loop now runs
    8 iterations at a time and the flag is set without a loop there. (The reference takes
    minutes at this length: numpy's recurrence is the truth.)"""
    n = 100_000
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7)).astype(np.float32)
    idx = rng.integers(0, 7, n).astype(np.int32)
    want = np.zeros(2, np.float32)
    for k in idx[-40:]:         # 0.5 ** 40 leaves nothing of the earlier steps in f32
        want = want * np.float32(0.5) + x[:, k]
    got = _host(zynbook.run(_GATHERED_RECURRENCE, device=device, x=x, idx=idx))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_embedding_backward_of_a_long_sequence(device):
    """nn's embedding_backward sums each token's gradient rows in one thread's loop over its
    positions: 150,000 positions of one token stopped short on llvmpipe (a runtime error)."""
    from zynbook import nn
    seq, vocab, dim = 150_000, 3, 2
    rng = np.random.default_rng(5)
    g = rng.standard_normal((seq, dim)).astype(np.float32)
    ids = np.zeros(seq, np.uint32)
    ids[::7] = 2
    want = np.zeros((vocab, dim))
    np.add.at(want, ids, g.astype(np.float64))
    d = nn.device(device)
    got = d.download(d.embedding_backward(d.upload(g), d.upload_u32(ids), vocab, seq, dim))
    np.testing.assert_allclose(np.asarray(got).reshape(vocab, dim), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_run_8_iterations_at_a_time_keeps_its_order_and_locals(device):
    """The loops llvmpipe runs 8 iterations at a time (locals of their own, a step of 3, a
    start that differs between threads, trip counts 0 to 14 leaving every remainder) give
    numpy's sequential recurrence."""
    x = (np.arange(40, dtype=np.float32) * 0.25).astype(np.float32)
    w = np.linspace(-1, 1, 13).astype(np.float32)
    src = """let y = compute(x, w) {
    for i in 0..m:
        var s = w[i]
        for k in i..n step 3:
            let t = x[k] * 2.0
            var u = t + 1.0
            u = u * 0.5
            s = s * 0.9 + u
        out[i] = s
}
y
"""
    n = 40
    want = []
    for i in range(13):
        s = np.float64(w[i])
        for k in range(i, n, 3):
            s = s * 0.9 + (x[k] * 2.0 + 1.0) * 0.5
        want.append(s)
    got = _host(zynbook.run(src, device=device, x=x, w=w, n=n))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    empty = _host(zynbook.run(src, device=device, x=x, w=w, n=0))
    np.testing.assert_array_equal(empty, w)


@pytest.mark.parametrize("device", DEVICES)
def test_whole_powers_that_f32_holds_are_exact(device):
    """pow(a, b) of a whole b whose value f32 holds exactly is that value, as numpy's: WebGPU
    computed it as exp(b log a) and gave 3^4 = 81.000008, 10^3 = 1000.00006, 7^3 =
    342.99997 and 10^-2 two ulps off 0.01. Other powers stay within a few ulps."""
    a = np.array([2, 3, 10, 7, 5, 1.5, -3, 10, -2, 0.5, -0.5, 12, 3, 2], np.float32)
    b = np.array([10, 4, 3, 3, 7, 5, 3, -2, -3, 31, 4, 6, 15, -20], np.float32)
    src = """let y = compute(a, b) {
    @kernel elementwise
    for k in 0..n:
        out[k] = pow(a[k], b[k])
}
y
"""
    got = _host(zynbook.run(src, device=device, a=a, b=b))
    np.testing.assert_array_equal(got, np.power(a, b))
    a = np.array([0.1, 1.1, 1.0001, -1.5, 1e-10, 2.5, 0.3], np.float32)
    b = np.array([3, 7, 31, -31, 3, 2.5, -7], np.float32)
    got = _host(zynbook.run(src, device=device, a=a, b=b))
    np.testing.assert_allclose(got, np.power(a.astype(np.float64), b), rtol=1e-6)


_H = np.array([1.0, -np.inf, 0.0, np.nan, 2.5, -3.0], np.float16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, value", [
    ("h[k] + exp(20.0)", "np.exp(20.0)"),
    ("h[k] + 3e5 * 1.0", "3e5"),
    ("h[k] + 2.0 ** 20.0", "2.0 ** 20"),
    ("h[k] + exp(0.5)", "np.exp(0.5)"),
])
def test_an_expression_of_literals_beside_halves_takes_f16(device, expr, value):
    """An expression of literals is weakly typed, as a literal is: beside f16 values it is
    f16's value (numpy's h + f16(v)), so exp(20.0) is f16's infinity and -inf + exp(20.0)
    is NaN. The compiled devices added its f32 value (-inf + 4.9e8 = -inf) where a single
    literal (70000.0) already took f16's."""
    with np.errstate(all="ignore"):
        want = _H + np.float16(eval(value, {"np": np}))
    got = zynbook.run(_elementwise(expr).replace("compute(f)", "compute(h)"), device=device,
                      h=_H)
    assert got.dtype == "f16"
    np.testing.assert_array_equal(_host(got), want)
