"""The WGSL kernels of wgsl-compute-kernels.md and the kernel library of
gpu-kernel-library.md as an outside tester writes them from the spec's text: library calls
and ZynML programs with odd sizes, names and dtypes, masks of every kind, on every device
present, compared with numpy written here (float64, tolerances by dtype)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices
from zynbook import library
from zynbook.session import Session

DEVICES = wanted_devices()
RNG = np.random.default_rng(20261129)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


def _attention(q, k, v, added=None, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if added is not None:
        s = s + added
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


# ---------------------------------------------------------------- library attention masks


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["minus_inf", "finite_bias", "f16_bias"])
def test_attention_float_mask_is_added_to_the_scores(device, causal, kind):
    """A float mask is additive, as torch's attn_mask of a float dtype: 0 keeps a key,
    -inf drops it, other values bias the scores. It was read as a bool mask (a key kept
    where the mask is not 0), so a mask of 0 and -inf kept exactly the keys it dropped."""
    q, k, v = _f32(2, 3, 7, 5), _f32(2, 3, 9, 5), _f32(2, 3, 9, 4)
    if kind == "minus_inf":
        mask = np.where(RNG.random((7, 9)) > 0.4, 0.0, -np.inf).astype(np.float32)
        mask[:, 0] = 0.0
    else:
        mask = _f32(7, 9)
    if kind == "f16_bias":
        mask = mask.astype(np.float16)
    added = mask.astype(np.float64)
    if causal:
        added = added + np.where(np.tril(np.ones((7, 9), bool)), 0.0, -np.inf)
    got = library.call("attention", Session(device), [q, k, v], {"mask": mask, "causal": causal})
    assert_equals_numpy(_host(got), _attention(q, k, v, added), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_query_whose_float_mask_is_all_minus_inf_gives_zeros(device):
    """A query whose additive mask is -inf at every key attends to nothing: zeros, as
    torch's scaled_dot_product_attention gives and as a bool mask of no key gives (the
    softmax of only -inf scores was NaN)."""
    q, k, v = _f32(1, 2, 4, 3), _f32(1, 2, 4, 3), _f32(1, 2, 4, 3)
    mask = np.zeros((4, 4), np.float32)
    mask[1, :] = -np.inf
    mask[2, 1:] = -np.inf
    for causal in (False, True):
        got = _host(library.call("attention", Session(device), [q, k, v],
                                 {"mask": mask, "causal": causal}))
        added = mask + (np.where(np.tril(np.ones((4, 4), bool)), 0.0, -np.inf) if causal else 0)
        want = _attention(q, k, v, np.where(np.isinf(added).all(-1, keepdims=True), 0.0, added))
        want[:, :, 1] = 0.0
        assert_equals_numpy(got, want, 1e-5)


# ---------------------------------------------------------------- math in kernels


def _unary(fn):
    return f"""let y = compute(x) {{
    @kernel elementwise
    for i in 0..n:
        out[i] = {fn}(x[i])
}}
y
"""


@pytest.mark.parametrize("device", DEVICES)
def test_exact_gelu_of_negative_values_keeps_its_digits(device):
    """gelu(x) = x / 2 * (1 + erf(x / sqrt(2))), the exact form: for a negative x the sum
    cancels, so in f32 gelu(-5) was 4% off (9% on cpu:native) and gelu(-6) 0 or double
    the value, on every device, the reference included. Computed as x / 2 * erfc(-x /
    sqrt(2)) it keeps f32's digits (torch's gelu does the same)."""
    import math
    x = np.concatenate([np.linspace(-9.0, 3.0, 97), [-3.0, -4.2, -5.0, -6.0]]).astype(np.float32)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    got = zynbook.run(_unary("gelu"), device=device, x=x)
    np.testing.assert_allclose(_host(got), want, rtol=1e-5, atol=0)
    # erf itself, and gelu of f16 values
    got = zynbook.run(_unary("erf"), device=device, x=x)
    np.testing.assert_allclose(_host(got), [math.erf(v) for v in x.astype(np.float64)],
                               rtol=1e-6, atol=2e-7)
    h = np.array([-3.5, -2.0, -0.5, 0.0, 1.0, 2.5], np.float16)
    got = zynbook.run(_unary("gelu"), device=device, x=h)
    assert got.dtype == "f16"
    want = [0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in h.astype(np.float64)]
    np.testing.assert_allclose(_host(got), want, rtol=1e-3, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_exact_gelu_across_the_f32_range(device):
    """GELU over every binade that matters, to where gelu(x) underflows, and its special
    values: within 1e-5 of x / 2 * erfc(-x / sqrt(2)) computed in f64 (the C++ and CUDA
    form computes erfc(|x| / sqrt(2)) by a rational and one exp2, its exponent summed
    exactly: its rounding of x * x cost 5e-6 at x = -9)."""
    import math
    x = np.concatenate([np.linspace(-13.0, 10.0, 4603), -np.geomspace(1e-30, 13.0, 300),
                        np.geomspace(1e-30, 1e6, 300)]).astype(np.float32)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    got = _host(zynbook.run(_unary("gelu"), device=device, x=x)).astype(np.float64)
    big, tail = np.abs(want) > 1e-20, np.abs(want) > 1e-30    # near FLT_MIN fewer digits stay
    np.testing.assert_allclose(got[big], want[big], rtol=1e-5, atol=0)
    np.testing.assert_allclose(got[tail], want[tail], rtol=5e-5, atol=0)
    assert np.all(np.abs(got[~tail]) <= 2e-30)
    s = np.array([np.inf, -np.inf, np.nan, -14.5, -20.0, -1e30, 1e30, 0.0], np.float32)
    with np.errstate(invalid="ignore"):
        want = [0.5 * v * math.erfc(-v / math.sqrt(2.0)) if np.isfinite(v) else
                (v if v > 0 else np.nan) for v in s.astype(np.float64)]
    np.testing.assert_array_equal(_host(zynbook.run(_unary("gelu"), device=device, x=s)),
                                  np.array(want, np.float32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sinh", "cosh"])
def test_sinh_and_cosh_past_where_exp_overflows(device, fn):
    """sinh(89) and cosh(89) are 2.24e38, within f32's range, though exp(89) is not: WebGPU's
    builtins, (exp(x) -+ exp(-x)) / 2, gave infinity from 88.7 on."""
    x = np.array([-89.4, -89.0, -88.9, -30.0, -9.5, 9.5, 50.0, 88.8, 89.0, 89.4, 89.5,
                  np.inf, -np.inf, np.nan], np.float32)
    with np.errstate(over="ignore"):
        want = getattr(np, fn)(x.astype(np.float64)).astype(np.float32)
    got = zynbook.run(_unary(fn), device=device, x=x)
    assert_equals_numpy(_host(got), want.astype(np.float64), 1e-5)


_F = np.array([0.0, -1.5, 2.0, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, numpy_expr", [
    ("f[k] + exp(1000.0)", "f + np.exp(np.float32(1000.0))"),
    ("min(f[k], 1e38 * -10.0)", "np.minimum(f, np.float32(1e38) * np.float32(-10.0))"),
    ("f[k] + sqrt(-1.0)", "f + np.sqrt(np.float32(-1.0))"),
    ("f[k] - log(0.0)", "f - np.log(np.float32(0.0))"),
    ("f[k] * (1.0 / 0.0)", "f * (np.float32(1.0) / np.float32(0.0))"),
    ("f[k] + inf * 0.0", "f + np.float32(np.inf) * np.float32(0.0)"),
    ("max(f[k], pow(10.0, 50.0))", "np.maximum(f, np.float32(10.0) ** np.float32(50.0))"),
    ("f[k] / 0.0", "f / np.float32(0.0)"),
    ("f[k] / -0.0", "f / np.float32(-0.0)"),
    ("f[k] / (2.0 - 2.0)", "f / np.float32(0.0)"),
])
def test_constant_expressions_past_f32_and_divisions_by_constant_zero(device, expr, numpy_expr):
    """An expression of literals whose value is not finite (exp(1000.0), 1e38 * 10.0,
    sqrt(-1.0), log(0.0), 1.0 / 0.0) is the reference's infinity or NaN: WGSL evaluates
    constant expressions as it makes the shader and refused these ("Float literal is
    infinite", "exp operation overflowed"), a device error. x / 0.0 gave 0 on llvmpipe
    (a driver that assumes finite values folded it): it is x times the infinity of the
    zero's sign, the same value."""
    src = f"""let y = compute(f) {{
    @kernel elementwise
    for k in 0..n:
        out[k] = {expr}
}}
y
"""
    with np.errstate(all="ignore"):
        want = eval(numpy_expr, {"np": np, "f": _F}).astype(np.float32)
    got = zynbook.run(src, device=device, f=_F)
    assert_equals_numpy(_host(got), want.astype(np.float64), 1e-6)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("device", DEVICES)
def test_inputs_named_self_and_source(device):
    """A program's inputs may be named `self` or `source` (a tensor of source terms):
    zynbook.run, Session.run, run_cell and Program.run took them for their own parameters
    (Python's TypeError: got multiple values for argument 'self')."""
    src = """let y = compute(self, source) {
    @kernel elementwise
    for i in 0..n:
        out[i] = self[i] * 2.0 + source[i]
}
y
"""
    a, b = _f32(7), _f32(7)
    want = a.astype(np.float64) * 2 + b
    assert_equals_numpy(_host(zynbook.run(src, device=device, self=a, source=b)), want, 1e-6)
    s = Session(device)
    assert_equals_numpy(_host(s.run(src, self=a, source=b)), want, 1e-6)
    assert_equals_numpy(_host(s.run_cell(src, self=a, source=b)[0]), want, 1e-6)
    assert_equals_numpy(_host(zynbook.compile(src).run(device, self=a, source=b)), want, 1e-6)


# ---------------------------------------------------------------- fused ops


@pytest.mark.parametrize("device", DEVICES)
def test_geglu_of_negative_gates_keeps_its_digits(device):
    """GeGLU (gpu-kernel-library.md's fused ops): gelu(x w_gate) * (x w_up) with gates down
    to -6, compared with erfc in float64. 0.5 * g * (1 + erf(g / sqrt(2))) cancelled for a
    negative gate: 1e-4 off at -3.8 on cpu and cpu:native, 6e-4 on WebGPU."""
    import math
    from zynbook import nn
    rows, dim, hidden = 3, 7, 5
    rng = np.random.default_rng(14)
    x, wg, wu = (rng.standard_normal(s).astype(np.float32)
                 for s in ((rows, dim), (dim, hidden), (dim, hidden)))
    g = x.astype(np.float64) @ wg
    wg = (wg * np.float32(6.0 / np.abs(g).max())).astype(np.float32)
    g = x.astype(np.float64) @ wg
    want = 0.5 * g * np.vectorize(math.erfc)(-g / np.sqrt(2.0)) * (x.astype(np.float64) @ wu)
    d = nn.device(device)
    got = d.download(d.geglu(d.upload(x), d.upload(wg), d.upload(wu), rows, dim, hidden))
    np.testing.assert_allclose(got.reshape(rows, hidden), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_sinkhorn_takes_a_numpy_integer_count(device):
    """sinkhorn(m, iterations=np.int64(3)) (a count read from an array) runs 3 iterations;
    it was refused as not a positive integer. A bool is still refused."""
    m = _f32(7, 7)
    got = _host(library.call("sinkhorn", Session(device), [m], {"iterations": np.int64(3)}))
    p = np.exp(m.astype(np.float64) - m.max())
    for _ in range(3):
        p = p / p.sum(1, keepdims=True)
        p = p / p.sum(0, keepdims=True)
    np.testing.assert_allclose(got, p, rtol=1e-4, atol=1e-6)
    from zynbook.errors import ZynMLTypeError
    for bad in (np.bool_(True), True, np.int32(0), 2.0):
        with pytest.raises(ZynMLTypeError, match="iterations"):
            library.call("sinkhorn", Session(device), [m], {"iterations": bad})


# ---------------------------------------------------------------- the spec's kernels

_SPEC_SOFTMAX = """let y = compute(x) {
    @kernel softmax
    @workgroup(256)
    for r in 0..rows:
        var local_max = -3.402823e+38
        for i in 0..n:
            local_max = max(local_max, x[r, i])
        var s = 0.0
        for i in 0..n:
            s += exp(x[r, i] - local_max)
        let inv_sum = 1.0 / s
        for i in 0..n:
            out[r, i] = exp(x[r, i] - local_max) * inv_sum
}
y
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, n, tol", [(np.float32, 1, 1e-6), (np.float32, 1000, 1e-5),
                                           (np.float16, 7, 5e-3), (np.float16, 100, 5e-3)])
def test_spec_softmax_starting_from_minus_flt_max(device, dtype, n, tol):
    """The spec's softmax starts its running max at -3.402823e+38 (-FLT_MAX): beside f16
    values that literal is f16's -inf, and the reference printed numpy's RuntimeWarning
    (overflow encountered in cast) into the cell's output at every run."""
    import warnings
    x = (np.random.default_rng(n).standard_normal((3, n)) * 3).astype(dtype)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = zynbook.run(_SPEC_SOFTMAX, device=device, x=x)
    assert_equals_numpy(_host(got), e / e.sum(1, keepdims=True), tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["+", "*", "max"])
def test_reductions_of_infinities_give_nan_without_warnings(device, op):
    """A row reduction meeting inf and -inf (or 0 and inf) is NaN, as numpy's: the
    reference gave it with numpy's RuntimeWarning (invalid value encountered in reduce)
    printed into the cell's output."""
    import warnings
    x = np.array([[0.0, -1.5, 2.0, np.inf, -np.inf, np.nan, 60000.0],
                  [1.0, np.inf, -np.inf, 2.0, 3.0, 0.0, 1.0],
                  [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]], np.float32)
    src = f"""let y = compute(x) {{
    @kernel reduce({op}, axis=1)
    for r in 0..R, c in 0..C:
        yield x[r, c]
}}
let t = compute(x) {{
    for r in 0..R:
        out[r] = sum(x[r]) + reduce(*, x[r])
}}
(y, t)
"""
    with np.errstate(all="ignore"):
        want = {"+": np.sum, "*": np.prod, "max": np.max}[op](x.astype(np.float64), axis=1)
        want_t = x.astype(np.float64).sum(1) + x.astype(np.float64).prod(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, got_t = zynbook.run(src, device=device, x=x)
    assert_equals_numpy(_host(got), want, 1e-6)
    assert_equals_numpy(_host(got_t), want_t, 1e-6)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, column, words", [
    ("x[k] + 1 / 0", 25, "division by zero"),
    ("x[k] + (5 % 0)", 26, "remainder by zero"),
    ("x[k] + n / (n - n)", 25, "division by zero"),
])
def test_integer_division_of_constants_by_zero_points_at_the_division(device, expr, column, words):
    """An integer division by zero of constants (and sizes) is a runtime error whose caret
    is under the division on every device: the reference pointed at the statement's start
    (column 9) where the compiled devices point at `1 / 0`."""
    src = f"""let y = compute(x) {{
    @kernel elementwise
    for k in 0..n:
        out[k] = {expr}
}}
y
"""
    err = raises("runtime", src, 4, column, device=device, x=np.arange(3, dtype=np.int32))
    assert words in err.message
