"""Language front end: shapes inferred from loops and slices, typing of weak values, and
user mistakes reported as ZynML errors with kind, line, column and caret; every device
present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9009)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------- out[i] under a loop that steps by s > 1

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,start,step", [(10, 0, 2), (11, 0, 3), (7, 1, 4), (1, 0, 5)])
def test_stepped_loop_out_axis_is_the_loop_bound(device, n, start, step):
    # out[i] with i a loop's own variable: the loop's range start..n is out's axis (the
    # positions it steps over stay 0), as docs/language.md's `evens` shows
    x = RNG.standard_normal(n).astype(np.float32)
    got = _run(device, f"let y = compute(x) {{\n    for i in {start}..n step {step}:\n"
                       f"        out[i] = x[i] * 2.0\n}}\ny\n", x=x, n=n)
    want = np.zeros(n, np.float32)
    want[start::step] = x[start::step] * 2
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_stepped_loop_shifted_index_reaches_its_last_value(device):
    # out[i + 1] is an affine index: the largest value written plus one (i in 0..9 step 4
    # takes 0, 4, 8: out is 10 long)
    x = np.arange(9, dtype=np.float32)
    got = _run(device, "let y = compute(x) {\n    for i in 0..9 step 4:\n"
                       "        out[i + 1] = x[i]\n}\ny\n", x=x)
    want = np.zeros(10, np.float32)
    want[1::4] = x[0::4]
    assert_equals_numpy(got, want, 0)


# ------------------------------------------- a stencil's window read as a slice of an input

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [3, 4, 17])
def test_stencil_slice_ties_the_loop_bound(device, n):
    # x[i - 2:i + 1] with i in 2..n reads x[i - 2] .. x[i]: n = len(x), as the three reads
    # written out do (it was a name error: `n` bounds no loop that indexes an input)
    x = RNG.standard_normal(n).astype(np.float32)
    got = _run(device, "let y = compute(x) {\n    for i in 2..n:\n"
                       "        out[i - 2] = sum(x[i - 2:i + 1])\n}\ny\n", x=x)
    want = x[:-2].astype(np.float64) + x[1:-1] + x[2:]
    assert_equals_numpy(got, want.astype(np.float32), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_centred_stencil_slice_of_rows(device):
    # rows r - 1 .. r + 1 of a matrix, r in 1..rows - 1: rows = len(m)
    m = RNG.standard_normal((9, 5)).astype(np.float32)
    got = _run(device, "let y = compute(m) {\n    for r in 1..rows - 1, c in 0..cols:\n"
                       "        out[r - 1, c] = sum(m[r - 1:r + 2, c])\n}\ny\n", m=m)
    want = m[:-2].astype(np.float64) + m[1:-1] + m[2:]
    assert_equals_numpy(got, want.astype(np.float32), 1e-6)


# ----------------------------------------------------- a loop whose bound is read from data

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("count", [0, 2, 3, 7])
def test_loop_bound_read_from_data_under_a_size_guard(device, count):
    # `for i in 0..i32(x[0])` with `if i < n`: out is n long (a Python TypeError, "not a
    # static size expression", on every device)
    x = np.float32([count, 5, -1, 2.5])
    got = _run(device, "let y = compute(x) {\n    for i in 0..i32(x[0]):\n        if i < n:\n"
                       "            out[i] = x[i] + 1.0\n}\ny\n", x=x, n=4)
    want = np.zeros(4, np.float32)
    want[:min(count, 4)] = x[:min(count, 4)] + 1
    assert_equals_numpy(got, want, 0)


def test_loop_bound_read_from_data_without_a_guard_is_a_shape_error():
    err = raises("shape", "let y = compute(x) {\n    for i in 0..i32(x[0]):\n        out[i] = x[i]\n}\ny",
                 3, 9, x=np.float32([2, 1, 0]))
    assert "if" in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_guard_against_data_leaves_the_size_guard(device):
    # `if i < i32(x[1])` limits nothing the launch knows: the loop's range 0..n is out's axis
    x = np.float32([3, 2, 0, 2])
    got = _run(device, "let y = compute(x) {\n    for i in 0..n:\n        if i < i32(x[1]):\n"
                       "            out[i] = x[i]\n}\ny\n", x=x, n=4)
    assert_equals_numpy(got, np.float32([3, 2, 0, 0]), 0)


# --------------------------------------------------- 64-bit unsigned sums past 2^63 (wrapping)

_NO_INT64 = ("vulkan", "gl", "webgpu")     # WebGPU has no 64-bit integers: a device error


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", ["out[j % 3] += v[j]",
                                  "if ids[j] < 3:\n            out[ids[j]] += v[j]"])
def test_u64_accumulation_wraps_exactly(device, body):
    # the reference summed a u64 past 2^63 beside a Python int 0 through float64 ([1, 2, 3]
    # for the values below; numpy wraps, as cpu:native does)
    v = (np.arange(6) - 2).astype(np.uint64)
    ids = np.int32([0, 1, 2, 0, 1, 2])
    src = f"let y = compute(v, ids) {{\n    for j in 0..m:\n        {body}\n}}\ny\n"
    if device.startswith(_NO_INT64):
        raises("device", src, device=device, v=v, ids=ids)
        return
    want = np.zeros(3, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(6):
            want[j % 3] += v[j]
    assert_equals_numpy(_run(device, src, v=v, ids=ids), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_u64_serial_var_sum_wraps_exactly(device):
    v = np.array([2**64 - 2, 1, 2**63, 2**63 + 5], np.uint64)
    src = ("let y = compute(v) {\n    for i in 0..1:\n        var s = v[0]\n        for j in 1..m:\n"
           "            s = s + v[j] * v[j]\n        out[i] = s\n}\ny\n")
    if device.startswith(_NO_INT64):
        raises("device", src, device=device, v=v, m=4)
        return
    with np.errstate(over="ignore"):
        want = np.array([v[0] + (v[1:] * v[1:]).sum(dtype=np.uint64)], np.uint64)
    assert_equals_numpy(_run(device, src, v=v, m=4), want, 0)


# ------------------------------------------------ a power by 0.5 is numpy's: sqrt of the base

_BASES = np.array([-np.inf, -0.0, 0.0, 4.0, np.inf, -4.0, 2.25, np.nan])


def _f64_ok(device, dtype):
    return dtype != "float64" or not device.startswith(_NO_INT64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("expr, env", [
    ("x[i] ** 0.5", {}), ("pow(x[i], 0.5)", {}), ("x[i] ** (0.25 * 2.0)", {}),
    ("x[i] ** k", {"k": 0.5}),      # a host float: the compiled devices took C's pow of it
])
def test_power_by_one_half_is_numpys(device, dtype, expr, env):
    # numpy's power by a scalar 0.5 is sqrt: -inf ** 0.5 is NaN and -0.0 ** 0.5 is -0.0;
    # the compiled devices took C's pow (inf, 0.0) while the reference took numpy's
    if not _f64_ok(device, dtype):
        pytest.skip("f64 needs the adapter's shader-f64")
    x = _BASES.astype(dtype)
    src = f"let h = 0.5\nlet y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    # a host float is an f32 argument (docs/language.md, Inputs): f16 data meets it in f32
    host = " k" in expr or " h" in expr
    with np.errstate(invalid="ignore"):
        want = x.astype(np.result_type(x, np.float32) if host else x.dtype) ** 0.5
    got = np.asarray(_run(device, src, x=x, **env))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # the zeros' signs (a NaN's sign is the hardware's: x86's default NaN is negative, GPUs' not)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


@pytest.mark.parametrize("device", DEVICES)
def test_power_by_an_exponent_read_per_element_is_pow(device):
    # numpy's power by an array of exponents is C's pow, 0.5 among them: -inf ** 0.5 is inf
    x = np.float32([-np.inf, -0.0, -np.inf, -0.0, 8.0, -8.0])
    p = np.float32([0.5, 0.5, 1.5, 1.5, 1 / 3, 3.0])
    src = "let y = compute(x, p) {\n    for i in 0..n:\n        out[i] = x[i] ** p[i]\n}\ny\n"
    with np.errstate(invalid="ignore"):
        want = np.power(x, p)
    got = np.asarray(_run(device, src, x=x, p=p))
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ------------------------------- a weak value known only as the kernel runs, beside f16 data

_H = (np.random.default_rng(99).standard_normal(400) * 8).astype(np.float16)
_S3 = 0.1 * 3.0         # the var below: Python's f64 arithmetic, as the reference computes it


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, want", [
    ("x[i] * s", lambda h, s: h * s),
    ("s - x[i]", lambda h, s: s - h),
    ("x[i] < s", lambda h, s: h < s),
    ("pow(abs(x[i]), s)", lambda h, s: np.power(np.abs(h), s)),
    ("abs(x[i]) ** s", lambda h, s: np.abs(h) ** s),
    ("max(x[i], s)", lambda h, s: np.maximum(h, s)),
])
def test_weak_var_beside_f16_is_rounded_to_f16_first(device, expr, want):
    # `var s = 0.1` then `s = s * 3.0` is weak (f16 beside f16 data) and numpy rounds the
    # Python float to f16 before the operation: the compiled devices used its f32 value
    # (x[i] * s 1 ulp off numpy in a third of the values)
    src = ("let y = compute(x) {\n    for i in 0..n:\n        var s = 0.1\n        s = s * 3.0\n"
           f"        out[i] = {expr}\n}}\ny\n")
    with np.errstate(all="ignore"):
        w = want(_H, _S3)
    got = np.asarray(_run(device, src, x=_H))
    assert got.dtype == w.dtype
    np.testing.assert_array_equal(got, w)


# ---------------------------------- a host int past i32 beside u32 or u64 data (numpy: weak)

_U32 = np.array([1, 2, 3, 4_000_000_000, 0], np.uint32)
_U64 = np.array([1, 2**64 - 1, 2**63, 7, 0], np.uint64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("data", ["u32", "u64"])
@pytest.mark.parametrize("k", [2**31, 3_000_000_000, 2**32 - 1, 5_000_000_000])
@pytest.mark.parametrize("expr, want", [
    ("x[i] + k", lambda x, k: x + k), ("x[i] * k", lambda x, k: x * k),
    ("x[i] - k", lambda x, k: x - k), ("max(x[i], k)", lambda x, k: np.maximum(x, k)),
    ("x[i] < k", lambda x, k: x < k), ("where(x[i] > 2, k, x[i])", lambda x, k: np.where(x > 2, k, x)),
])
def test_host_int_past_i32_beside_unsigned_data(device, data, k, expr, want):
    # numpy reads the Python int as the array's dtype (u32 + 3000000000 wraps in u32); it
    # was an i64 result on every device
    x = _U32 if data == "u32" else _U64
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    if data == "u32" and k >= 2**32:       # numpy: OverflowError
        err = raises("type", src, 3, 18 + expr.index("k"), device=device, x=x, k=k)
        assert f"`k` is {k} here" in str(err) and "u32" in str(err)
        return
    if device.startswith(_NO_INT64) and data == "u64":
        # WebGPU holds u64 data in 32 bits: 2^64 - 1 cannot be placed there
        raises("device", src, device=device, x=x, k=k)
        return
    # (on WebGPU too: a k that fits u32 is passed as one)
    with np.errstate(over="ignore"):
        w = want(x, k)
    assert_equals_numpy(_run(device, src, x=x, k=k), w, 0)


# ------------------------------------------- where cpu:native's refusals of a kernel point

@pytest.mark.skipif("cpu:native" not in DEVICES, reason="no C++ compiler")
def test_a_native_refusal_points_at_the_statement(monkeypatch):
    # no schedule building the kernel was a device error at the block's line, column 1
    # (line 1, column 1 for a block on the first line); a statement that none can lower is
    # where it points now, with what the schedule met
    from zynbook.compiler.launch import scalar
    call = scalar.ScalarLowering.call

    def refuse_exp(self, e, dt):
        if e.fn == "exp":
            raise scalar.NotScalar("exp() refused here")
        return call(self, e, dt)

    monkeypatch.setattr(scalar.ScalarLowering, "call", refuse_exp)
    src = ("let y = compute(x) {\n    for i in 0..n:\n        let a = x[i] * 2.0\n"
           "        let b = exp(a) + 1.0\n        out[i] = b\n}\ny\n")
    err = raises("device", src, 4, 9, device="cpu:native", x=np.float32([1, 2, 3]))
    assert "exp() refused here" in str(err)


# ------------------------- an expression of a var that becomes a row of a tile (flash attention)

_FLASH = """let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 4:
            var m = -inf
            var l = 0.0
            var o = zeros(4, head_dim)
            for kv_block in 0..q_block + 4 step 4:
                let S = Q[b, h, q_block:q_block+4] @ transpose(K[b, h, kv_block:kv_block+4]) / sqrt(head_dim)
                let m_new = max(MM, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V[b, h, kv_block:kv_block+4]
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+4] = o / l
}
attn
"""


def _block_causal_attention(q, k, v, block):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    out = np.zeros_like(q)
    seq, d = q.shape[2], q.shape[3]
    for qb in range(0, seq, block):
        keys = min(seq, qb + block)
        s = q[:, :, qb:qb + block] @ np.swapaxes(k[:, :, :keys], 2, 3) / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        out[:, :, qb:qb + block] = p / p.sum(-1, keepdims=True) @ v[:, :, :keys]
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("mm", ["f32(m)", "m * 1.0"])
def test_flash_attention_reading_the_running_max_through_an_expression(device, dtype, mm):
    # `max(f32(m), row_max(S))` of `var m = -inf`: the cast was typed as the number m
    # started as, so the block schedule left it a scalar of a name it had made a row
    # ("unknown name `m`", refused on cpu:native at line 1, column 1)
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 10, 8)).astype(dtype) for _ in range(3))
    got = _run(device, _FLASH.replace("MM", mm), Q=q, K=k, V=v)
    want = _block_causal_attention(q, k, v, 4)
    tol = 2e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


# ------------------------------------- Python expressions ZynML has not: what to write instead

@pytest.mark.parametrize("src, line, column, says", [
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = 0.0 < x[i] < 3.0\n}\ny", 3, 29,
     "comparisons do not chain"),
    ("let b = 1 < 2 <= 3", 1, 15, "comparisons do not chain"),
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] if x[i] > 0.0 else 0.0\n}\ny",
     3, 23, "where(c, a, b)"),
    ("let a = 1 if true else 2", 1, 11, "no conditional expression"),
])
def test_chained_comparison_and_conditional_expression_say_what_to_write(src, line, column, says):
    err = raises("syntax", src, line, column, x=np.float32([1, 2]))
    assert says in str(err)


def test_a_missing_operand_is_not_called_a_chain():
    err = raises("syntax", "let e = 2 < < 3", 1, 13)
    assert "chain" not in str(err) and "expected" in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_the_written_forms_equal_numpy(device):
    x = np.float32([-1, 0.5, 1, 2.5, 3, 4, np.nan])
    src = ("let y = compute(x) {\n    for i in 0..n:\n        out[i, 0] = where(x[i] > 0.0, x[i], 0.0)\n"
           "        out[i, 1] = f32(0.0 < x[i] and x[i] < 3.0)\n}\ny\n")
    want = np.stack([np.where(x > 0, x, 0), ((0 < x) & (x < 3)).astype(np.float32)], 1)
    assert_equals_numpy(_run(device, src, x=x), want, 0)


# -------------------------------------------- a kernel type's parameters are the ones it takes

@pytest.mark.parametrize("ann, column, says", [
    ("@kernel conv2d(strides=2)", 20, "it takes stride=, padding="),
    ("@kernel elementwise(x=1)", 25, "it takes none"),
    ("@kernel reduce(+, axes=1)", 23, "only axis="),
])
def test_an_unknown_kernel_parameter_is_a_type_error(ann, column, says):
    # a misspelt `strides=` ran with the default stride of 1, silently
    src = f"let y = compute(x) {{\n    {ann}\n    for i in 0..n:\n        out[i] = x[i]\n}}\ny\n"
    err = raises("type", src, 2, column, x=np.float32([1, 2]))
    assert says in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_a_custom_kernel_type_keeps_its_parameters(device):
    x = np.float32([1, -2, 3])
    src = "let y = compute(x) {\n    @kernel expensive(cost=3)\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny\n"
    assert_equals_numpy(_run(device, src, x=x), x * 2, 0)


def test_python_true_in_a_kernel_suggests_true():
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = where(x[i] > 0.0, True, False)\n}\ny\n"
    err = raises("name", src, 3, 36, x=np.float32([1, -1]))
    assert "did you mean `true`" in str(err)


@pytest.mark.parametrize("src, column, says", [
    ("let y = compute(x) {\n    for i in 0..n step 2.0:\n        out[i] = x[i]\n}\ny", 24, "a loop step must be an integer"),
    ("let y = compute(x) {\n    for i in 0.0..n:\n        out[i] = x[i]\n}\ny", 14, "a range bound must be an integer"),
    ("let y = compute(x) {\n    for i in 0..n:\n        shared var t[2.5]\n        out[i] = x[i]\n}\ny", 0,
     "a shared array's size must be an integer"),
])
def test_a_float_loop_step_or_shared_size_is_named_as_such(src, column, says):
    # the step and a shared array's size were called "a range bound"
    err = raises("type", src, x=np.float32([1, 2]))
    assert says in str(err) and (not column or err.column == column)


# ------------------------------------------------ Python's floor division is a ZynML comment

def test_floor_division_written_as_in_python_warns():
    from zynbook.errors import ZynMLWarning
    x = np.float32([3, 5])
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] // 2\n}\ny\n"
    with pytest.warns(ZynMLWarning, match="floor division") as got:
        y = zynbook.Session("cpu").run(src, x=x)
    assert (got[0].message.span.line, got[0].message.span.column) == (3, 23)
    np.testing.assert_array_equal(np.asarray(y), x)     # the line is x[i]: // starts a comment


def test_a_comment_of_words_does_not_warn():
    import warnings
    from zynbook.errors import ZynMLWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZynMLWarning)
        assert zynbook.Session("cpu").run("let a = 7 // 2 heads\nlet b = 1 // 3.5x\na + b") == 8
