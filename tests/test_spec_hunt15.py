"""Programs written from the spec and docs/language.md, run on every device present and
compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLTypeError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


# --------------------------------------------------------------- arange(..., dtype=)

_ARANGES = [
    ("0, 5, 1.5, dtype=i32", lambda: np.arange(0, 5, 1.5, dtype=np.int32)),
    ("5, 0, -1.5, dtype=i32", lambda: np.arange(5, 0, -1.5, dtype=np.int32)),
    ("-2.5, 3, 1.5, dtype=i64", lambda: np.arange(-2.5, 3, 1.5, dtype=np.int64)),
    ("0.5, 3, dtype=u8", lambda: np.arange(0.5, 3, dtype=np.uint8)),
    ("0, 1, 0.1, dtype=f16", lambda: np.arange(0, 1, 0.1, dtype=np.float16)),
    ("0, 1, 0.1, dtype=f32", lambda: np.arange(0, 1, 0.1, dtype=np.float32)),
    ("1, 2, 0.125, dtype=f64", lambda: np.arange(1, 2, 0.125, dtype=np.float64)),
    ("0.5, 2, dtype=bool", lambda: np.arange(0.5, 2, dtype=bool)),
    ("250, 256, dtype=u8", lambda: np.arange(250, 256, dtype=np.uint8)),
    ("0, 10, inf", lambda: np.arange(0, 10, np.inf).astype(np.float32)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("args, want", _ARANGES, ids=[a for a, _ in _ARANGES])
def test_arange_with_a_dtype_equals_numpy(device, args, want):
    """arange(0, 5, 1.5, dtype=i32) was [0, 1, 3, 4], the f64 values truncated; numpy's (and
    torch's) is [0, 1, 2, 3]: the values are stepped in the dtype by the difference of the
    first two. arange(0, 1, 0.1, dtype=f16) was 0.3 where numpy has 0.2998."""
    got = zynbook.run(f"arange({args})", device=device)
    assert_equals_numpy(_host(got), want(), 0)
    assert _host(got).dtype == want().dtype


@pytest.mark.parametrize("args, msg, col", [
    ("5, 0, -1.5, dtype=u8", "-1 does not fit u8", 26),
    ("3, dtype=bool", "a bool arange has at most 2 values", 17),
    ("0, 1e30, 1e29, dtype=i64", "1e+29 does not fit i64", 29),
    ("0, inf, 1, dtype=i32", "inf is not a finite number", 11),
    ("-inf", "-inf is not a finite number", 8),
    ("0, 5, nan", "nan is not a finite number", 14),
])
def test_arange_values_its_dtype_cannot_hold_are_refused_at_the_dtype(args, msg, col):
    """numpy's arange(5, 0, -1.5, dtype=np.uint8) wraps its last value -1 to 255, and
    arange(3, dtype=bool) is numpy's TypeError; both were silently a tensor here. An
    infinite bound or a NaN was Python's 'cannot convert float infinity to integer'."""
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.run(f"arange({args})")
    assert msg in info.value.message
    assert (info.value.line, info.value.column) == (1, col)
    assert "^" in info.value.render()


# ------------------------------------------------- annotations a user gets slightly wrong

_ROW = """let y = compute(m, v) HEAD{
    BODY
    for i in 0..rows, j in 0..cols:
        out[i, j] = m[i, j] * v[j]
}
y
"""


def test_a_broadcast_axis_below_zero_says_0_or_more_under_the_axis():
    """@broadcast(v, axis=-1) said 'must be positive' (axis 0 is the default and allowed),
    with the caret under the whole annotation."""
    from zynbook.errors import ZynMLError
    src = _ROW.replace("HEAD", "").replace("BODY", "@broadcast(v, axis=-1)")
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, m=np.ones((3, 4), np.float32), v=np.ones(4, np.float32))
    err = info.value
    assert err.kind == "type" and "must be 0 or more, not -1" in err.message, err
    assert (err.line, err.column) == (2, 24)


@pytest.mark.parametrize("device", DEVICES)
def test_a_broadcast_axis_of_0_runs_and_equals_numpy(device):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.arange(4, dtype=np.float32)
    src = _ROW.replace("HEAD", "").replace("BODY", "@broadcast(v, axis=0)")
    assert_equals_numpy(_host(zynbook.run(src, device=device, m=m, v=v)), m * v, 0)


@pytest.mark.parametrize("kernel", ["elementwise", "reduce(+)"])
def test_kernel_written_after_compute_says_it_goes_in_the_body(kernel):
    """compute(m, v) @kernel elementwise { was 'unexpected elementwise; expected (, {, an
    annotation, end of line'."""
    from zynbook.errors import ZynMLSyntaxError
    src = _ROW.replace("HEAD", f"@kernel {kernel} ").replace("BODY\n", "")
    with pytest.raises(ZynMLSyntaxError) as info:
        zynbook.compile(src)
    err = info.value
    assert "`@kernel type` is written in the body" in err.message, err
    assert (err.line, err.column) == (1, 31)
    assert "^" in err.render()


# ------------------------------------------------------ C and Python habits in a kernel

_CHAINED = """let y = compute(m) {
    for i in 0..r, j in 0..c:
        BODY
}
y
"""


@pytest.mark.parametrize("body, col, name, fix", [
    ("out[i, j] = m[i][j]", 21, "m", "m[i, j]"),
    ("out[i][j] = m[i, j]", 9, "out", "out[i, j]"),
    ("out[i, j] = m[i][j + 1]", 21, "m", "m[i, ...]"),
])
def test_an_index_written_twice_says_to_write_one_pair_of_brackets(body, col, name, fix):
    """out[i][j] = ... said '`this` is not out, a shared array or an input' and m[i][j]
    'only inputs and shared arrays can be indexed'."""
    from zynbook.errors import ZynMLError
    with pytest.raises(ZynMLError) as info:
        zynbook.run(_CHAINED.replace("BODY", body), m=np.ones((3, 4), np.float32))
    err = info.value
    assert err.kind == "type", err
    assert err.message == (f"`{name}[...][...]` indexes twice: write every index in one pair "
                           f"of brackets, `{fix}`"), err.message
    assert (err.line, err.column) == (3, col)
    assert "this" not in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_the_index_the_message_suggests_equals_numpy(device):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = zynbook.run(_CHAINED.replace("BODY", "out[i, j] = m[i, j] * 2.0"), device=device, m=m)
    assert_equals_numpy(_host(got), m * 2, 0)


@pytest.mark.parametrize("src, line, col", [
    ("let y = compute(x) {\n    for i in 0..n:\n        if x[i] > 0.0:\n            out[i] = 1.0\n"
     "        else if x[i] < 0.0:\n            out[i] = 2.0\n}\ny\n", 5, 14),
    ("var a = 0\nif a > 1:\n    a = 2\nelse if a < 0:\n    a = 3\na\n", 4, 6),
])
def test_else_if_says_elif(src, line, col):
    """`else if` was 'there is no conditional expression (a if c else b)'."""
    from zynbook.errors import ZynMLSyntaxError
    with pytest.raises(ZynMLSyntaxError) as info:
        zynbook.compile(src)
    assert "ZynML writes `else if` as `elif`" in info.value.message
    assert (info.value.line, info.value.column) == (line, col)


@pytest.mark.parametrize("header, col, hint", [
    ("for i in 0:n:", 17, "a range is written `start..stop`: `for i in 0..n:`"),
    ("for j in 0..1, i in 0:n:", 28, "a range is written `start..stop`: `for i in 0..n:`"),
    ("for i in 0...n:", 17, "a range is `start..stop`, the stop left out"),
    ("for i in 0..=n:", 17, "a range is `start..stop`, the stop left out"),
])
def test_python_and_rust_ranges_say_how_zynml_writes_one(header, col, hint):
    """Each was 'unexpected :' (or '.', '=') and a list of tokens."""
    from zynbook.errors import ZynMLSyntaxError
    src = f"let y = compute(x) {{\n    {header}\n        out[i] = x[i]\n}}\ny\n"
    with pytest.raises(ZynMLSyntaxError) as info:
        zynbook.compile(src)
    assert hint in info.value.message, info.value.message
    assert (info.value.line, info.value.column) == (2, col)


def test_c_conditional_operator_says_where():
    from zynbook.errors import ZynMLSyntaxError
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] > 0.0 ? 1.0 : 0.0\n}\n"
    with pytest.raises(ZynMLSyntaxError) as info:
        zynbook.compile(src)
    assert "write `where(c, a, b)`" in info.value.message
    assert (info.value.line, info.value.column) == (3, 29)


def test_a_parameter_reduce_has_not_is_named_before_its_value_is_read():
    """@kernel reduce(+, axis=0, keepdims=true) said 'kernel parameter `keepdims` must be
    a number', as if reduce took one."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    src = ("let s = compute(x) {\n    @kernel reduce(+, axis=0, keepdims=true)\n"
           "    for i in 0..n:\n        yield x[i]\n}\ns\n")
    with pytest.raises(TypeErr) as info:
        zynbook.run(src, x=np.ones(7, np.float32))
    assert info.value.message == "reduce has no parameter `keepdims` (only axis=)"
    assert (info.value.line, info.value.column) == (2, 31)


@pytest.mark.parametrize("src, name, line, col", [
    ("barrier()\n", "barrier", 1, 1),
    ("let a = 2.0\nrow_max(a)\n", "row_max", 2, 1),
    ("let p = pow(2.0, 3.0)\np\n", "pow", 1, 9),
    ("pipeline f(x):\n    return clamp(x, 0, 1)\nf(3)\n", "clamp", 2, 12),
])
def test_a_kernel_function_called_on_the_host_says_where_it_belongs(src, name, line, col):
    """barrier() on the host was 'unknown name `barrier`', the message of a misspelling
    (and compile() took it as an input of the program)."""
    from zynbook.errors import ZynMLNameError
    for run in (zynbook.compile, zynbook.run):
        with pytest.raises(ZynMLNameError) as info:
            run(src)
        assert info.value.message == (f"{name}() is a function of compute bodies: it belongs "
                                      "inside compute(...) { ... }"), info.value.message
        assert (info.value.line, info.value.column) == (line, col)


@pytest.mark.parametrize("device", DEVICES)
def test_pow_and_clamp_inside_a_body_equal_numpy(device):
    x = np.array([-2.0, -0.5, 0.0, 0.5, 1.5, 3.0, 7.0], np.float32)
    src = ("let y = compute(x) {\n    for i in 0..n:\n"
           "        out[i] = clamp(pow(x[i], 2.0), 0.25, 9.0)\n}\ny\n")
    got = zynbook.run(src, device=device, x=x)
    assert_equals_numpy(_host(got), np.clip(x ** 2, 0.25, 9.0), 1e-6)


@pytest.mark.parametrize("src, line, col, tab", [
    ("let y = compute(x) {\n\tfor i in 0..n:\n        out[i] = x[i]\n}\ny\n", 3, 9, True),
    ("let y = compute(x) {\n    for i in 0..n:\n    out[i] = x[i]\n}\ny\n", 3, 5, False),
    ("for i in 0..3:\n// a comment\n\nprint(i)\n", 4, 1, False),
])
def test_a_block_not_indented_past_its_colon_says_so(src, line, col, tab):
    """It was "unexpected 'out'; expected end of line, indented block"; a tab before `for`
    (8 columns) and eight spaces before its body are one level."""
    from zynbook.errors import ZynMLSyntaxError
    with pytest.raises(ZynMLSyntaxError) as info:
        zynbook.compile(src)
    msg = info.value.message
    opener = 1 if line == 4 else 2
    assert f"the block after the `:` on line {opener} must be indented past that line" in msg
    assert ("a tab counts as 8 columns" in msg) == tab
    assert (info.value.line, info.value.column) == (line, col)


@pytest.mark.parametrize("call, fix", [
    ("x[i].abs()", "abs(x[i])"),
    ("math.exp(x[i])", "exp(x[i])"),
    ("np.maximum(x[i], 0.0)", "max(x[i], 0.0)"),
    ("torch.clip(x[i], 0, 1)", "clamp(x[i], 0, 1)"),
    ("np.sqrt(x[i] * 2.0)", "sqrt(...)"),
])
def test_a_builtin_called_as_a_method_or_through_a_module_says_how_to_call_it(call, fix):
    """Each said only 'only builtin functions can be called inside a kernel'."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {call}\n}}\ny\n"
    with pytest.raises(TypeErr) as info:
        zynbook.run(src, x=np.ones(3, np.float32))
    assert info.value.message == f"a kernel calls its builtins by name: write `{fix}`"
    assert (info.value.line, info.value.column) == (3, 18)


# ------------------------------------------------------------------------------ range()

@pytest.mark.parametrize("args", ["7", "2, 9", "2, 10, 3", "5, 0, -2", "3, 3", "-4, 2"])
def test_range_equals_python(args):
    assert zynbook.run(f"range({args})") == list(eval(f"range({args})"))


@pytest.mark.parametrize("src, kind, col, msg", [
    ("range(0, 10, 0)", "type", 14, "range(): the step must not be 0"),
    ("range(3, step=2)", "type", 1, "range() has no parameter `step`"),
    ("range(10 ** 15)", "memory", 1, "range() of 1000000000000000 values asked for"),
])
def test_range_refusals_name_the_mistake(src, kind, col, msg):
    """range(0, 10, 0) was Python's 'range() arg 3 must not be zero' as a runtime error,
    range(3, step=2) ignored the step, and range(10 ** 15) took the machine's memory."""
    from zynbook.errors import ZynMLError
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src)
    assert info.value.kind == kind and msg in info.value.message, info.value
    assert (info.value.line, info.value.column) == (1, col)


# ------------------------------------------------ host builtins given numpy's keywords

@pytest.mark.parametrize("device", DEVICES)
def test_transpose_with_numpys_axes_keyword_equals_numpy(device):
    """transpose(x, axes=[2, 0, 1]) ignored the keyword and swapped the last two axes."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = zynbook.run("transpose(x, axes=[2, 0, 1])", device=device, x=x)
    assert_equals_numpy(_host(got), np.transpose(x, axes=[2, 0, 1]), 0)


@pytest.mark.parametrize("src, name", [
    ("reshape(x, [24], order=\"F\")", "reshape() has no parameter `order`"),
    ("sqrt(x, out=x)", "sqrt() has no parameter `out`"),
    ("exp(x, where=x > 0.0)", "exp() has no parameter `where`"),
    ("where(x > 1.0, x, 0.0, out=x)", "where() has no parameter `out`"),
    ("len(x, axis=1)", "len() has no parameter `axis`"),
    ("shape(x, axis=1)", "shape() has no parameter `axis`"),
    ("compute_devices(kind=\"gpu\")", "compute_devices() has no parameter `kind`"),
    ("transpose(x, [1, 0, 2], axes=[0, 1, 2])", "transpose(): the axes are given twice"),
])
def test_a_keyword_a_host_builtin_has_not_is_refused(src, name):
    """Each was silently ignored: reshape(order="F") reshaped in C order, sqrt(x, out=x)
    left x as it was."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    with pytest.raises(TypeErr) as info:
        zynbook.run(src, x=np.ones((2, 3, 4), np.float32))
    assert info.value.message.startswith(name), info.value.message
    assert "^" in info.value.render()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, want", [
    ("x.sum(1)", lambda x: x.sum(1)), ("x.mean(0)", lambda x: x.mean(0)),
    ("x.max(-1)", lambda x: x.max(-1)), ("x.min(0)", lambda x: x.min(0)),
    ("x.reshape(3, 2)", lambda x: x.reshape(3, 2)), ("x.reshape(-1, 1)", lambda x: x.reshape(-1, 1)),
    ("x.reshape(6)", lambda x: x.reshape(6)),
])
def test_numpys_method_forms_equal_numpy(device, src, want):
    """x.sum(1) said 'sum() is called as sum(x, axis=k)' and x.reshape(3, 2) 'reshape() is
    called as reshape(x, [d0, d1, ...])'."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    got = zynbook.run(src, device=device, x=x)
    assert_equals_numpy(_host(got), want(x), 1e-6)


def test_numpy_method_takes_no_argument():
    """x.numpy(1) ignored the 1."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    with pytest.raises(TypeErr, match=r"numpy\(\) is called as x.numpy\(\)"):
        zynbook.run("x.numpy(1)", x=np.ones(3, np.float32))


@pytest.mark.parametrize("head, body, msg, col", [
    ("", "@shared(16, foo=1)", "@shared has no parameter `foo`", (2, 17)),
    ("@parallel(data, foo=1) ", "", "@parallel has no parameter `foo`", (1, 36)),
])
def test_an_annotation_keyword_it_has_not_is_refused(head, body, msg, col):
    """Both were accepted and the keyword ignored, as no other annotation does."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    src = (f"let y = compute(x) {head}{{\n    {body}\n    for i in 0..n:\n        "
           "out[i] = x[i]\n}\ny\n")
    with pytest.raises(TypeErr) as info:
        zynbook.run(src, x=np.ones(3, np.float32))
    assert info.value.message == msg
    assert (info.value.line, info.value.column) == col


# ------------------------------------------------ a float literal added into integer out

_ADD_INTO = """let y = compute(x) {
    for i in 0..n:
        out[i] += LIT
        out[i] += x[i]
}
y
"""


@pytest.mark.parametrize("lit", ["1.5", "inf", "-0.25"])
def test_a_fractional_literal_added_into_integer_out_is_refused(lit):
    """out[i] += 1.5 beside out[i] += x[i] of i32 x added 1 (the literal took out's i32
    silently); numpy refuses out += 1.5 on an integer array."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    with pytest.raises(TypeErr) as info:
        zynbook.run(_ADD_INTO.replace("LIT", lit), x=np.arange(7, dtype=np.int32))
    assert "which its other writes make i32: it would be cut to a whole number" in \
        info.value.message
    assert (info.value.line, info.value.column) == (3, 19)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, lit", [(np.int32, "1.0"), (np.float16, "1.5"),
                                        (np.float32, "1.5")])
def test_a_literal_added_into_out_that_holds_it_equals_numpy(device, dtype, lit):
    x = np.arange(7).astype(dtype)
    got = zynbook.run(_ADD_INTO.replace("LIT", lit), device=device, x=x)
    want = np.zeros(7, dtype)
    want += dtype(float(lit))
    want += x
    assert_equals_numpy(_host(got), want, 0)


@pytest.mark.parametrize("params, args, name", [
    ("k: tensor[2 * q]", "zeros([6])", "q"),
    ("k: tensor[n, m * 2], j: tensor[m]", "zeros([2, 4]), zeros([2])", "m"),
])
def test_a_parameter_size_of_a_name_not_bound_before_it_says_so(params, args, name):
    """It said only 'unknown name `q`'."""
    from zynbook.errors import ZynMLNameError
    src = f"pipeline f({params}):\n    return 1\nf({args})\n"
    with pytest.raises(ZynMLNameError) as info:
        zynbook.run(src)
    assert info.value.message.startswith(f"`{name}` in a size of `k` is not bound before it")
    assert info.value.line == 3 and "^" in info.value.render()


def test_a_parameter_size_of_names_bound_before_it_checks_the_shape():
    src = "pipeline f(k: tensor[n, 2 * n]):\n    return k.shape\nf(zeros([2, 4]))\n"
    assert zynbook.run(src) == [2, 4]


# ------------------------------------------- compile() of inputs not bound yet

_UNBOUND = [
    ("let s = compute(a) {\n    @kernel fused\n    out = reduce(min, a, axis=1)\n}\ns\n",
     {"a": np.arange(12, dtype=np.float32).reshape(3, 4)}, lambda a: a.min(1)),
    ("let s = compute(a, b) {\n    @kernel fused\n    out = a @ transpose(b)\n}\ns\n",
     {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
      "b": np.arange(12, dtype=np.float32).reshape(4, 3)}, lambda a, b: a @ b.T),
    ("let y = compute(m) {\n    @kernel fused\n    out = m - row_max(m)\n}\ny\n",
     {"m": np.arange(6, dtype=np.float32).reshape(2, 3)}, lambda m: m - m.max(1, keepdims=True)),
    ("let y = compute(u) {\n    for i in 0..n: out[i] = max(u[i], s[i])\n}\ny\n",
     {"u": np.arange(5, dtype=np.float32), "s": np.full(5, 2.0, np.float32)},
     lambda u, s: np.maximum(u, s)),
]


@pytest.mark.parametrize("src, inputs, want", _UNBOUND, ids=["reduce_axis", "matmul_transpose",
                                                              "row_max", "body_only_tensor"])
def test_compile_takes_a_program_whose_inputs_are_bound_later(src, inputs, want):
    """compile() refused these programs that run: an input used whole was taken as 1-D
    ('axis 1 is out of range for f32[a_d0]', 'transpose() takes a 2-D tile'), and a tensor
    only the body indexes was 'not an input of this compute block'."""
    zynbook.compile(src)
    for device in DEVICES:
        got = zynbook.run(src, device=device, **inputs)
        assert_equals_numpy(_host(got), want(*inputs.values()), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_takes_an_unbound_input_that_indexes_and_the_run_equals_numpy(device):
    """out[ids[j]] += v[j] and t[ids[i], d] with ids bound later were refused by compile()
    ('an index must be an integer, not f32': an unbound input was taken as f32)."""
    src = ("let y = compute(t, ids) {\n    for i in 0..n, d in 0..D:\n"
           "        out[i, d] = t[ids[i], d] * 0.5\n}\ny\n")
    scatter = ("let k = 5\nlet y = compute(ids, v) {\n    for j in 0..n:\n"
               "        if ids[j] < k:\n            out[ids[j]] += v[j]\n}\ny\n")
    zynbook.compile(src)
    zynbook.compile(scatter)
    t = np.arange(15, dtype=np.float32).reshape(5, 3)
    ids = np.array([4, 0, 2, 2, 1, 4, 3], np.int32)
    v = np.arange(7, dtype=np.float32)
    assert_equals_numpy(_host(zynbook.run(src, device=device, t=t, ids=ids)), t[ids] * 0.5, 0)
    want = np.zeros(5, np.float32)
    np.add.at(want, ids, v)
    assert_equals_numpy(_host(zynbook.run(scatter, device=device, ids=ids, v=v)), want, 0)


# ------------------------------------------------- a future used as the tensor it gives

_ASYNC = "let f = compute(x) @async {\n    for i in 0..n: out[i] = x[i] * 2.0\n}\n"


@pytest.mark.parametrize("use, col", [("f + 1.0", 1), ("f.shape", 1), ("sum(f)", 1),
                                      ("f[0]", 1),
                                      ("compute(f) {\n    for i in 0..n: out[i] = f[i]\n}", 9)])
def test_a_future_used_as_a_tensor_says_to_await_it(use, col):
    """Each said only that a future cannot be used so ('cannot apply + to a future and a
    float', 'a future has no attribute shape')."""
    from zynbook.errors import ZynMLError
    with pytest.raises(ZynMLError) as info:
        zynbook.run(_ASYNC + use, x=np.ones(3, np.float32))
    assert "`await` an @async block's future for its tensor (await f)" in info.value.message
    assert (info.value.line, info.value.column) == (4, col)


@pytest.mark.parametrize("device", DEVICES)
def test_the_awaited_future_equals_numpy(device):
    x = np.arange(5, dtype=np.float32)
    got = zynbook.run(_ASYNC + "(await f) + 1.0", device=device, x=x)
    assert_equals_numpy(_host(got), x * 2 + 1, 0)


@pytest.mark.parametrize("fn, word", [("max", "largest"), ("min", "smallest")])
def test_max_of_one_tile_names_reduce(fn, word):
    """max(m[i]) (numpy's m[i].max()) said only 'max() takes two or more arguments'."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    src = f"let y = compute(m) {{\n    for i in 0..r:\n        out[i] = {fn}(m[i])\n}}\ny\n"
    with pytest.raises(TypeErr) as info:
        zynbook.run(src, m=np.ones((3, 4), np.float32))
    assert info.value.message.endswith(f"the {word} element of a tile is reduce({fn}, t)")
    assert (info.value.line, info.value.column) == (3, 18)


@pytest.mark.parametrize("device", DEVICES)
def test_reduce_of_a_row_equals_numpy(device):
    m = np.random.default_rng(3).standard_normal((5, 33)).astype(np.float32)
    src = "let y = compute(m) {\n    for i in 0..r:\n        out[i] = reduce(max, m[i])\n}\ny\n"
    assert_equals_numpy(_host(zynbook.run(src, device=device, m=m)), m.max(1), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared, tile", [("t[4]", "m[i, 0:k]"), ("t[2, 4]", "m[0:2, 0:k]")])
def test_a_tile_stored_into_a_longer_shared_array_says_the_same_on_every_device(device, shared,
                                                                                 tile):
    """The reference said 'an axis 3 long meets one 4 long (they broadcast only where one of
    them is 1)', the compiled devices 'a tile 3 long on an axis is written into a slice 4
    long' (numpy's broadcast_to refusal was read as arithmetic's)."""
    from zynbook.errors import ZynMLRuntimeError
    src = (f"let y = compute(m) {{\n    for i in 0..r:\n        shared var {shared}\n"
           f"        t = {tile}\n        barrier()\n        out[i] = 1.0\n}}\ny\n")
    with pytest.raises(ZynMLRuntimeError) as info:
        zynbook.run(src, device=device, m=np.ones((3, 4), np.float32), k=3, r=3)
    assert info.value.message == ("the tiles of this statement do not fit together at these "
                                  "sizes: a tile 3 long on an axis is written into a slice 4 "
                                  "long")
    assert (info.value.line, info.value.column) == (4, 9)


def test_a_shared_array_read_before_its_declaration_says_so():
    """It said '`t` is not an input of this compute block'."""
    from zynbook.errors import ZynMLNameError
    src = ("let y = compute(m) {\n    for i in 0..r:\n        if i > 0:\n"
           "            out[i] = t[0]\n        shared var t[4]\n}\ny\n")
    with pytest.raises(ZynMLNameError) as info:
        zynbook.run(src, m=np.ones((3, 4), np.float32))
    assert info.value.message == "`t` is read before its `shared var` on line 5: declare it first"
    assert (info.value.line, info.value.column) == (4, 22)


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "gl:0"])
@pytest.mark.parametrize("dtype, np_dtype", [("f16", np.float16), ("i32", np.int32),
                                             ("f64", np.float64), (None, np.float32)])
def test_a_kernel_tile_of_zeros_takes_its_dtype(device, dtype, np_dtype):
    """docs/language.md listed zeros(...) and ones(...) in kernels as f32 whatever their
    dtype= (under Not implemented), while the builtins table and every device use it."""
    kw = f", dtype={dtype}" if dtype else ""
    src = (f"let y = compute(m) {{\n    for i in 0..r step 2:\n"
           f"        out[i:i+2] = ones(2, 2{kw}) + 1\n}}\ny\n")
    got = zynbook.run(src, device=device, m=np.ones((4, 2), np.float32), r=4)
    assert_equals_numpy(_host(got), np.full((4, 2), 2, np_dtype), 0)
    assert _host(got).dtype == np_dtype


_SCAN_BY_OUT = """let y = compute(x) {
    for i in 1..n:
        out[i] = out[i - 1] + x[i]
}
y
"""

_SCAN_BY_VAR = """let y = compute(x) {
    var acc = 0.0
    for i in 0..n:
        acc += x[i]
        out[i] = acc
}
y
"""


def test_reading_out_for_a_running_sum_says_to_keep_it_in_a_var():
    """It said only '`out` is written, not read'."""
    from zynbook.errors import ZynMLTypeError as TypeErr
    with pytest.raises(TypeErr) as info:
        zynbook.run(_SCAN_BY_OUT, x=np.ones(5, np.float32))
    assert "keep a value later iterations need in a var" in info.value.message
    assert (info.value.line, info.value.column) == (3, 18)


@pytest.mark.parametrize("device", DEVICES)
def test_the_running_sum_the_message_suggests_equals_numpy(device):
    x = np.random.default_rng(15).standard_normal(257).astype(np.float32)
    got = zynbook.run(_SCAN_BY_VAR, device=device, x=x)
    assert_equals_numpy(_host(got), np.cumsum(x, dtype=np.float32), 1e-4)
