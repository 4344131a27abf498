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


_H9 = np.int8([-128, -5, 0, 7, 100, 127, 64, -1, 33])
_I9 = np.arange(9, dtype=np.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("let k = n * 2\n        out[i] = h[i] + k", lambda: _H9 + np.int8(18)),
    ("let k = n\n        out[i] = h[i] * k", lambda: _H9 * np.int8(9)),
    ("var acc = 0\n        acc += h[i]\n        acc += h[i]\n        out[i] = acc",
     lambda: _H9 + _H9),
    ("var acc = 0\n        for j in 0..i:\n            acc += j\n        out[i] = acc + h[i]",
     lambda: _I9 * (_I9 - 1) // 2 + _H9.astype(np.int32)),
    ("out[i] = max(h[i], n)", lambda: np.maximum(_H9, np.int8(9))),
    ("out[i] = where(h[i] > 0, h[i], n)", lambda: np.where(_H9 > 0, _H9, np.int8(9))),
])
def test_locals_keep_the_weakness_of_what_they_hold(device, body, want):
    """A local of sizes and literals is weak as they are (i8 beside `h`, wrapping as numpy's
    int8 beside a Python int); a `var` that sums loop variables is i32."""
    with np.errstate(over="ignore"):
        w = want()
    assert_equals_numpy(_run(device, _block(body), h=_H9), w, 0)


# ------------------------------------------------ a window's size is solved from its reads

def _taps3(x):
    return x[:-2] + x[1:-1] + x[2:]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [3, 7, 13])
@pytest.mark.parametrize("src, want", [
    ("for i in 0..n - 2:\n        out[i] = x[i] + x[i + 1] + x[i + 2]", _taps3),
    ("for i in 0..n - 2:\n        out[i] = x[i + 2] + x[i] + x[i + 1]", _taps3),
    ("for i in 0..n:\n        out[i] = x[i] - x[i + 1]", lambda x: x[:-1] - x[1:]),
    ("for i in 0..n - 1:\n        out[i] = x[i + 1] * 2.0 - x[i]", lambda x: x[1:] * 2 - x[:-1]),
])
def test_a_window_covers_its_axis(device, size, src, want):
    """`x[i] + x[i+1] + x[i+2]` in `0..n - 2` solved `n - 2 = len(x)` from the direct read
    and then read past the end (a shape error, index len(x) outside the axis): the window's
    furthest read bounds the loop."""
    x = (np.arange(1, size + 1, dtype=np.float32) ** 2) % 11
    got = _run(device, f"let y = compute(x) {{\n    {src}\n}}\ny\n", x=x)
    assert_equals_numpy(got, want(x), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_two_dimensional_window(device):
    """Each axis solves its own window: rows - 1 and cols - 2 loops over a 5 x 7 input."""
    m = RNG.standard_normal((5, 7)).astype(np.float32)
    src = ("let y = compute(m) {\n    for r in 0..rows - 1, c in 0..cols - 2:\n"
           "        out[r, c] = m[r, c] + m[r + 1, c + 2]\n}\ny\n")
    assert_equals_numpy(_run(device, src, m=m), m[:-1, :-2] + m[1:, 2:], 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cols", [6, 14])
def test_a_read_a_size_further_on_covers_the_axis(device, cols):
    """RoPE's halves: `m[r, d] * m[r, d + half]` with d in 0..half solves half + half = cols
    (it solved half = cols and read past the end); `x[i] + x[i + n / 2]` in 0..n / 2 gives
    n = len(x)."""
    m = RNG.standard_normal((3, cols)).astype(np.float32)
    h = cols // 2
    src = ("let y = compute(m) {\n    for r in 0..rows, d in 0..half:\n"
           "        out[r, d] = m[r, d] * m[r, d + half] - m[r, d + half - 1]\n}\ny\n")
    assert_equals_numpy(_run(device, src, m=m), m[:, :h] * m[:, h:] - m[:, h - 1:-1], 1e-6)
    src = ("let y = compute(x) {\n    for i in 0..n / 2:\n"
           "        out[i] = x[i] + x[i + n / 2]\n}\ny\n")
    x = m[0]
    assert_equals_numpy(_run(device, src, x=x), x[:h] + x[h:], 1e-6)
    src = ("let y = compute(m) {\n    for r in 0..rows:\n        let h = cols / 2\n"
           "        var s = 0.0\n        for d in 0..h:\n            s += m[r, d] * m[r, d + h]\n"
           "        out[r] = s\n}\ny\n")
    assert_equals_numpy(_run(device, src, m=m), (m[:, :h] * m[:, h:]).sum(1), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, want", [
    ("for i in 1..n - 1:\n        out[i - 1] = x[i - 1] - 2.0 * x[i] + x[i + 1]",
     lambda x: x[:-2] - 2 * x[1:-1] + x[2:]),
    ("for i in 1..n:\n        out[i - 1] = x[i] - x[i - 1]", np.diff),
    ("for i in 2..n - 2:\n        out[i - 2] = x[i - 2] + x[i + 2] - x[i]",
     lambda x: x[:-4] + x[4:] - x[2:-2]),
    # a constant bound reads a part of the axis; a host one is a bound
    ("for i in 1..4:\n        out[i - 1] = x[i - 1] + x[i + 1]", lambda x: x[0:3] + x[2:5]),
    ("for i in 1..k:\n        out[i - 1] = x[i - 1] + x[i + 1]", lambda x: x[0:5] + x[2:7]),
])
def test_a_stencil_from_one_covers_the_axis(device, src, want):
    """A loop from 1 reading x[i - 1] had no size (`cannot tell the size n`): its reads from
    0 to i + 1 cover the axis, as numpy's slices do."""
    x = (np.arange(1, 12, dtype=np.float32) ** 2) % 7
    got = _run(device, f"let k = 6\nlet y = compute(x) {{\n    {src}\n}}\ny\n", x=x)
    assert_equals_numpy(got, want(x), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_laplacian_stencil(device):
    m = RNG.standard_normal((5, 7)).astype(np.float32)
    src = ("let y = compute(m) {\n    for r in 1..rows - 1, c in 1..cols - 1:\n"
           "        out[r - 1, c - 1] = m[r - 1, c] + m[r + 1, c] + m[r, c - 1] + m[r, c + 1]"
           " - 4.0 * m[r, c]\n}\ny\n")
    want = m[:-2, 1:-1] + m[2:, 1:-1] + m[1:-1, :-2] + m[1:-1, 2:] - 4 * m[1:-1, 1:-1]
    assert_equals_numpy(_run(device, src, m=m), want, 1e-5)


def test_a_window_no_size_fits_is_a_shape_error():
    """`x[i] + x[i + n]` in 0..n over 7 elements: no n covers the axis (a shape error at the
    read, not "cannot tell the size")."""
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + x[i + n]\n}\ny\n"
    with pytest.raises(zynbook.ZynMLError) as info:
        _run("cpu", src, x=np.zeros(7, np.float32))
    assert info.value.kind == "shape" and "no value of `n`" in str(info.value)
    got = _run("cpu", src, x=np.arange(8, dtype=np.float32))
    assert_equals_numpy(got, np.arange(4, dtype=np.float32) * 2 + 4, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bound, fits", [("7", True), ("8", False), ("k", True)])
def test_a_window_over_a_given_bound(device, bound, fits):
    """A constant or host bound is held to the axis with its window: `0..7` reading c and
    c + 1 fits an axis of 8, `0..8` does not (a shape error); a host k = 5 reading up to
    c + 1 fits too."""
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    src = (f"let k = 5\nlet y = compute(x) {{\n    for r in 0..rows, c in 0..{bound}:\n"
           "        out[r, c] = x[r, c] + x[r, c + 1]\n}\ny\n")
    if not fits:
        with pytest.raises(zynbook.ZynMLError) as info:
            _run(device, src, x=x)
        assert info.value.kind == "shape"
        return
    n = 5 if bound == "k" else 7
    assert_equals_numpy(_run(device, src, x=x), x[:, :n] + x[:, 1:n + 1], 1e-6)


# ------------------------------------------------ a padded convolution's skipped taps

_CONV = """let y = compute(input, kernel) {
    @kernel conv2d(stride=STRIDE, padding=1)
    for b in 0..batch, oc in 0..out_channels:
        for oh in 0..out_h, ow in 0..out_w:
            var sum = 0.0
            for ic in 0..in_channels:
                for kh in 0..kernel_h, kw in 0..kernel_w:
                    let ih = oh * stride + kh - padding
                    let iw = ow * stride + kw - padding
                    if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:
                        sum += input[b, ic, ih, iw] * kernel[oc, ic, kh, kw]
            out[b, oc, oh, ow] = sum
}
y
"""


def _guarded_conv(x, w, stride):
    """The program's loops in numpy: a tap on the padding is skipped, not multiplied."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = (h + 2 - kh) // stride + 1, (wd + 2 - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow), np.float64)
    for a in range(kh):
        for b in range(kw):
            rows = np.arange(oh) * stride + a - 1
            cols = np.arange(ow) * stride + b - 1
            r_ok, c_ok = (rows >= 0) & (rows < h), (cols >= 0) & (cols < wd)
            patch = x[:, :, rows.clip(0, h - 1)][:, :, :, cols.clip(0, wd - 1)].astype(np.float64)
            term = np.einsum("nchw,oc->nohw", patch, w[:, :, a, b].astype(np.float64))
            with np.errstate(invalid="ignore"):
                out += np.where(r_ok[:, None] & c_ok[None, :], term, 0.0)
    return out.astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stride", [1, 2])
def test_an_inf_filter_tap_on_the_padding_adds_nothing(device, stride):
    """The guard skips a tap that falls on the padding: an inf weight there adds nothing, as
    the reference computes the loops. The implicit GEMM (WebGPU, and cpu:native from 16
    filters) zero-filled the padding and multiplied it by the inf: NaN."""
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float32)
    w = RNG.standard_normal((16, 2, 3, 3)).astype(np.float32)
    w[1, 0, 0, 0], w[5, 1, 2, 2], w[9, 0, 1, 0] = np.inf, -np.inf, np.nan
    want = _guarded_conv(x, w, stride)
    got = _run(device, _CONV.replace("STRIDE", str(stride)), input=x, kernel=w)
    assert np.isnan(want).sum() < want.size // 4        # the NaN filter's outputs only
    assert_equals_numpy(got, want, 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_an_inf_row_a_triangular_guard_skips_adds_nothing(device):
    """`if k <= i: sum += A[i, k] * B[k, j]`: rows i < 15 never read B's inf row 15; the GEMM
    zeroed A past the diagonal and multiplied the zeros by it (NaN)."""
    a = RNG.standard_normal((20, 18)).astype(np.float32)
    b = RNG.standard_normal((18, 24)).astype(np.float32)
    b[15] = np.inf
    want = np.stack([a[i, :i + 1] @ b[:i + 1] for i in range(20)])
    src = ("let y = compute(A, B) {\n    @kernel matmul\n    for i in 0..M, j in 0..N:\n"
           "        var sum = 0.0\n        for k in 0..K:\n            if k <= i:\n"
           "                sum += A[i, k] * B[k, j]\n        out[i, j] = sum\n}\ny\n")
    assert_equals_numpy(_run(device, src, A=a, B=b), want, 1e-4)


# ------------------------------------------------ a literal past i32 beside a type that holds it

_U32 = np.uint32([0, 5, 2147483647, 2147483648, 3000000000, 4294967295])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("out[i] = u[i] > 2147483648", lambda: _U32 > 2147483648),
    ("out[i] = u[i] + 3000000000", lambda: _U32 + np.uint32(3000000000)),
    ("out[i] = where(u[i] > 5, u[i], 4000000000)",
     lambda: np.where(_U32 > 5, _U32, np.uint32(4000000000))),
    ("out[i] = max(u[i], 3000000000)", lambda: np.maximum(_U32, np.uint32(3000000000))),
])
def test_a_wide_literal_beside_u32_is_u32(device, body, want):
    """A literal past i32 was i64 beside u32 data: u[i] + 3000000000 did not wrap as numpy's
    uint32 does, and WebGPU refused the kernel (no 64-bit integers). Beside a type that holds
    it, it takes that type, as numpy reads a Python int beside an array."""
    with np.errstate(over="ignore"):
        w = want()
    assert_equals_numpy(_run(device, _block(body, inputs="u"), u=_U32), w, 0)


@pytest.mark.parametrize("dtype, params", [
    ("f32", "fma"), ("f32", "staged"), ("f32", "pipelined"), ("f16", "half")])
def test_the_cuda_convolution_skips_an_inf_tap_on_the_padding(dtype, params):
    """The CUDA target's implicit GEMM (FMA, tensor cores staged through registers or by
    cp.async, halves) on the launch-IR emulator (no GPU here): an inf filter tap on the
    padding adds nothing, as the reference's loops."""
    import sys
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler.schedules.gemm import Gemm, GemmParams
    from zynbook.compiler.targets import cuda_target
    chosen = {"fma": GemmParams(16, 16, 8, 4, 4, 1),
              "staged": GemmParams(32, 32, 16, 16, 16, 1, True),
              "pipelined": GemmParams(32, 32, 16, 16, 16, 4, True, 2, False),
              "half": GemmParams(32, 32, 16, 16, 16, 8, True)}[params]
    npt = np.float32 if dtype == "f32" else np.float16
    x = RNG.standard_normal((1, 3, 7, 7)).astype(npt)
    w = RNG.standard_normal((16, 3, 3, 3)).astype(npt)
    w[3, 0, 0, 0], w[7, 1, 2, 2] = np.inf, -np.inf
    src = _CONV.replace("STRIDE", "1")
    kernel, ins, sizes, _ = lower_block(src, {"input": x, "kernel": w})
    prog = Gemm().build(kernel, cuda_target(), sizes, chosen)
    assert "implicit GEMM" in prog.schedule
    got = emulate_kernel(prog, kernel, ins, sizes)
    want = _guarded_conv(x.astype(np.float32), w.astype(np.float32), 1)
    assert np.isinf(want).any() and not np.isnan(want).any()
    # (the tensor cores multiply f32 as TF32 here: 10 bits of mantissa)
    assert_equals_numpy(np.asarray(got, np.float32), want, 1e-4 if params == "fma" else 3e-2)
