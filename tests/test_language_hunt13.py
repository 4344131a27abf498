"""Language front end: compound assignment, booleans in arithmetic, integer literals beside
fixed-width data, empty arg-reductions and tiles stored into slices; every device present,
against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


def _kernel(body, inputs="x"):
    return f"let y = compute({inputs}) {{\n    for i in 0..n:\n        {body}\n}}\ny\n"


# ---------------------------------------------------------------- %= as the other compound ops

_K = np.array([7, -7, 9, -1, 0, 2**31 - 1], np.int32)
_F = np.float32([5.5, -7.25, 2.0, 3.0, -0.0, 1e-3])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, data, want", [
    ("var c = x[i]\n        c %= -3\n        out[i] = c", _K, lambda x: np.fmod(x, -3)),
    ("var c = x[i]\n        c %= 2.0\n        out[i] = c", _F, lambda x: np.fmod(x, np.float32(2))),
    ("out[i] = x[i]\n        out[i] %= 4", _K, lambda x: np.fmod(x, 4)),
])
def test_remainder_assignment_in_a_kernel(device, body, data, want):
    # `%` is an operator, and `x %= k` is `x = x % k` as `+=` is (C's remainder: the sign of
    # the dividend, as docs/language.md has `%`); it was a syntax error at the `=`
    assert_equals_numpy(_run(device, _kernel(body), x=data), want(data), 0)


@pytest.mark.parametrize("src, want", [
    ("var a = -7\na %= 3\na", -1),
    ("var a = 7.5\na %= 2\na", 1.5),
    ("var t = tensor([5, -7, 9])\nt[1] %= 4\nt", np.array([5, -3, 9], np.int32)),
])
def test_remainder_assignment_on_the_host(src, want):
    assert_equals_numpy(_run("cpu", src), np.asarray(want), 0)


# ------------------------------------------------------------ out[...] += a comparison counts

_IDS = np.array([0, 1, 1, 2, 4, 4, 4, 3, 9], np.int32)
_W = np.float32([1, -1, 2, 3, 5, 6, -7, 0, 1])


@pytest.mark.parametrize("device", DEVICES)
def test_out_accumulates_a_comparison_as_a_count(device):
    # a bool in arithmetic counts as i32 (docs/language.md), as reduce(+) of bools does and
    # numpy's True is 1: out, written only so, was bool and `out + bool` arithmetic on booleans
    src = ("let y = compute(ids, w) {\n    for j in 0..m:\n        if ids[j] < n:\n"
           "            out[ids[j]] += w[j] > 0.0\n}\ny\n")
    want = np.zeros(6, np.int32)
    keep = _IDS < 6
    np.add.at(want, _IDS[keep], (_W > 0)[keep])
    assert_equals_numpy(_run(device, src, ids=_IDS, w=_W, n=6), want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, want", [
    ("out[i] -= x[i] > 0.0", lambda x: 0 - (x > 0).astype(np.int32)),
    ("out[i] = x[i]\n        out[i] += x[i] > 0.0", lambda x: x + (x > 0)),
])
def test_out_compound_with_a_comparison(device, body, want):
    assert_equals_numpy(_run(device, _kernel(body), x=_W), want(_W), 0)


# ------------------------------------- an integer of literals beside data is its exact value

_I32 = np.array([1, -5, 2**31 - 1, -2**31], np.int32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, data, want", [
    # past i32: as the literal written out, i64 (WebGPU has none: a device error)
    ("x[i] + 2 ** 31", _I32, lambda x: x.astype(np.int64) + 2**31),
    ("x[i] * (2147483647 + 1)", _I32.astype(np.int64), lambda x: x * 2**31),
    ("x[i] - -(-2147483647 - 1)", _I32.astype(np.int64), lambda x: x - 2**31),
    ("x[i] + 2 ** 2 ** 5", _I32.astype(np.int64), lambda x: x + 2**32),
    # a type that holds it: that type's arithmetic (numpy's too)
    ("x[i] + 2 ** 31", np.array([1, 4_000_000_000], np.uint32),
     lambda x: x + np.uint32(2**31)),
    ("x[i] < 2 ** 31", _I32, lambda x: x < 2**31),
    ("x[i] + 2 ** 31", np.float32([1.5, -2.0]), lambda x: x + np.float32(2**31)),
])
def test_literal_arithmetic_beside_data_is_exact(device, expr, data, want):
    # i32 arithmetic of the literals wrapped 2 ** 31 to -2147483648 silently: x[i] + 2 ** 31
    # subtracted 2^31, and x[i] < 2 ** 31 was false everywhere
    src = _kernel(f"out[i] = {expr}")
    w = want(data)
    if w.dtype == np.int64 and device.startswith(("vulkan", "gl", "webgpu")):
        raises("device", src, device=device, x=data)
        return
    with np.errstate(over="ignore"):
        assert_equals_numpy(_run(device, src, x=data), w, 0)


def test_literal_arithmetic_past_64_bits_is_a_type_error_at_it():
    raises("type", _kernel("out[i] = x[i] + 2 ** 64"), 3, 25, x=_I32)


@pytest.mark.parametrize("device", DEVICES)
def test_literal_arithmetic_alone_still_wraps_in_i32(device):
    # where no data meets them, literals are i32's (docs/language.md: 2147483647 + 1)
    src = _kernel("out[i] = where(2147483647 + 1 < 0, 1, 0) + x[i]")
    assert_equals_numpy(_run(device, src, x=_I32[:2]), _I32[:2] + 1, 0)


# ------------------------------------------------------ argmin/argmax of nothing has no index

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_of_nothing_is_an_error_at_the_empty_loop(device, op):
    # numpy: "attempt to get argmax of an empty sequence"; every device gave the index -1
    src = (f"let y = compute(x) {{\n    @kernel reduce({op})\n    for i in 2..n:\n"
           f"        yield (x[i], i)\n}}\ny\n")
    err = raises("shape", src, 3, 9, device=device, x=np.float32([3, 1]), n=2)
    assert f"{op} of an empty sequence" in str(err)
    x = np.float32([3, 1, 5, -2])
    want = (np.argmax if op == "argmax" else np.argmin)(x[2:]) + 2
    assert_equals_numpy(_run(device, src, x=x, n=4), want, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_arg_reduction_of_an_empty_tile(device):
    src = ("let y = compute(x) {\n    for r in 0..rows:\n"
           "        out[r] = reduce(argmin, x[r, 1:])\n}\ny\n")
    raises("shape", src, 3, 18, device=device, x=np.zeros((3, 1), np.float32))
    # no row: no argmin is taken (numpy's argmin along a full axis of no rows is empty too)
    got = _run(device, src, x=np.zeros((0, 1), np.float32))
    assert np.asarray(got).shape == (0,)
    x = np.float32([[0, 4, -1, 2], [9, 8, 7, 7]])
    assert_equals_numpy(_run(device, src, x=x), np.argmin(x[:, 1:], axis=1), 0)


# ------------------------------- a tile stored at an index computed per iteration, and into
# more slices than it has axes

_X8 = np.arange(64, dtype=np.float32).reshape(8, 8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, x, want", [
    # rows repeated: what numpy's broadcast of a row into out[i0:i0+4, 0:8] gives
    ("for i0 in 0..8 step 4:\n        for r in 0..4:\n            out[i0 + r, 0:8] = x[i0, 0:8]",
     _X8, lambda x: np.repeat(x[0::4], 4, axis=0)),
    ("for i in 0..3:\n        out[2 * i + 1, 0:4] = x[i, 0:4] * 2.0",
     _X8[:3, :4].copy(), lambda x: np.insert(x * 2, [0, 1, 2], 0, axis=0)),
    ("for i in 0..3:\n        out[5 - i, 1:3] = x[i, 0:2]",
     _X8[:3, :2].copy(), lambda x: np.pad(x[::-1], ((3, 0), (1, 0)))),
])
def test_tile_stored_at_an_index_computed_per_iteration(device, body, x, want):
    # the CPU reference refused `out[i0 + r, 0:8] = row` ("a store of a tile needs indices
    # that are the loop variables themselves") where the compiled devices ran it
    src = f"let y = compute(x) {{\n    {body}\n}}\ny\n"
    assert_equals_numpy(_run(device, src, x=x), want(x), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loop, store, want", [
    ("for i0 in 0..8 step 4:", "out[i0:i0+4, 0:8] = x[i0, 0:8]",
     lambda x: np.repeat(x[0::4], 4, axis=0)),
    ("for i0 in 0..8 step 4:", "out[i0:i0+4, 0:8] += x[i0, 0:8] * 2.0",
     lambda x: np.repeat(x[0::4] * 2, 4, axis=0)),
    ("for i in 0..8:", "out[0:2, i, 0:8] = x[i, 0:8]",
     lambda x: np.broadcast_to(x, (2, 8, 8))),
    ("for i in 0..8:", "out[i, 0:2, 0:3, 0:8] = x[i, 0:8]",
     lambda x: np.broadcast_to(x[:, None, None, :], (8, 2, 3, 8))),
])
def test_tile_into_more_slices_than_its_axes_is_repeated_as_numpy(device, loop, store, want):
    # numpy broadcasts the row across the leading slices it lacks; it was "the length of
    # out's slice and of the tile written into it differ: 4 and 8" (the row's length set
    # against the rows')
    src = f"let y = compute(x) {{\n    {loop}\n        {store}\n}}\ny\n"
    assert_equals_numpy(_run(device, src, x=_X8), want(_X8), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_tile_into_a_lacking_slice_open_at_its_end_says_how_to_repeat_it(device):
    src = ("let y = compute(x) {\n    for i0 in 0..8 step 4:\n"
           "        out[i0:, 0:8] = x[i0, 0:8]\n}\ny\n")
    err = raises("shape", src, 3, 9, device=device, x=_X8)
    assert "a tile of one axis ([8]) is stored into 2 slices of out" in str(err)
    assert "for r in 0..4: out[i + r, 0:8] = row" in str(err)


# -------------------------------------------- Python number literals ZynML does not read

@pytest.mark.parametrize("src, column, literal, value", [
    ("let a = 2 + 0xFF\na", 14, "0xFF", "255"),
    ("let a = 1_000\na", 10, "1_000", "1000"),
    ("let a = 1_000.5\na", 10, "1_000.5", "1000.5"),
    ("let a = 0b101\na", 10, "0b101", "5"),
    ("let a = 0o17\na", 10, "0o17", "15"),
])
def test_python_number_literal_says_what_to_write(src, column, literal, value):
    # docs/language.md: no `_` separators, no hex; it was "unexpected 'xFF'; expected '!=',
    # '%', ..." with no word of what to write
    err = raises("syntax", src, 1, column)
    assert f"`{literal}` is not a ZynML number" in str(err) and f"write {value}" in str(err)
    python = float(literal) if "." in literal else int(literal, 0)     # Python's reading
    assert python == float(value)


def test_python_number_literal_in_a_kernel():
    src = _kernel("out[i] = x[i] * 1_000")
    err = raises("syntax", src, 3, 26, x=np.float32([1, 2]))
    assert "write 1000" in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_two_booleans_in_arithmetic_say_how_to_count_them(device):
    # numpy's bool + bool is `or` (not a count) and bool - bool an error: refused, and the
    # message now says how to count as well as `and`/`or`
    src = _kernel("out[i] = (x[i] > 0.0) + (x[i] > 1.0)")
    err = raises("type", src, 3, 18, device=device, x=_W)
    assert "convert one to count them (`i32(a) + b`)" in str(err)
    counted = _run(device, _kernel("out[i] = i32(x[i] > 0.0) + (x[i] > 1.0)"), x=_W)
    assert_equals_numpy(counted, (_W > 0).astype(np.int32) + (_W > 1), 0)


# ------------------------------------------------ Python's floor division is a ZynML comment

def test_floor_division_with_more_arithmetic_warns():
    from zynbook.errors import ZynMLWarning
    x = np.int32([7, -7, -3, 4, 0])
    with pytest.warns(ZynMLWarning, match=r"floor\(a / 2\.0\)") as got:
        y = _run("cpu", _kernel("out[i] = x[i] // 2 + 1"), x=x)
    assert (got[0].message.span.line, got[0].message.span.column) == (3, 23)
    assert_equals_numpy(y, x, 0)        # (the line is x[i])


@pytest.mark.parametrize("device", DEVICES)
def test_the_floor_division_advice_floors_as_numpy(device):
    # floor(x[i] / 2), the advice before, is an integer / (truncating): -1 for -3
    x = np.int32([7, -7, -3, 4, 0])
    advised = _run(device, _kernel("out[i] = i32(floor(x[i] / 2.0)) + 1"), x=x)
    assert_equals_numpy(advised, x // 2 + 1, 0)


# --------------------------------------------- a bool in arithmetic takes the number's type

_B8 = np.uint8([1, 255, 0, 128])
_I8 = np.int8([127, -128, 0, 5])
_H16 = np.float16([1.5, -2.0, 0.0, 65504])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, data, want", [
    ("x[i] + (x[i] > 1)", _B8, lambda x: x + (x > 1)),
    ("x[i] - (x[i] > 1)", _I8, lambda x: x - (x > 1)),
    ("(x[i] == 0) * x[i]", _I8, lambda x: (x == 0) * x),
    ("x[i] + (x[i] > 1.0)", _H16, lambda x: x + (x > 1)),
])
def test_bool_with_a_narrow_number_keeps_the_number_type(device, expr, data, want):
    # numpy's bool is the lowest type: u8 + bool is u8 (255 + True wraps to 0); a bool
    # counted as i32 made it i32 (256)
    with np.errstate(over="ignore"):
        w = want(data)
    assert_equals_numpy(_run(device, _kernel(f"out[i] = {expr}"), x=data), w, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_host_bool_beside_u8_data(device):
    got = _run(device, _kernel("out[i] = x[i] + flag"), x=_B8, flag=True)
    assert_equals_numpy(got, _B8 + True, 0)


# ------------------------------------------------- and / or / not of tiles say what to write

_XT = np.float32([[1, -2, 0, 3], [7, 5, -1, 0]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad, column, advice, good, want", [
    ("x[i, 0:4] > 0.0 and x[i, 0:4] < 4.0", 23, "where(a, b, false)",
     "where(x[i, 0:4] > 0.0, x[i, 0:4] < 4.0, false)", lambda x: (x > 0) & (x < 4)),
    ("x[i, 0:4] > 0.0 or x[i, 0:4] < -1.5", 23, "where(a, true, b)",
     "where(x[i, 0:4] > 0.0, true, x[i, 0:4] < -1.5)", lambda x: (x > 0) | (x < -1.5)),
    ("not (x[i, 0:4] > 0.0)", 28, "where(a, false, true)",
     "where(x[i, 0:4] > 0.0, false, true)", lambda x: ~(x > 0)),
])
def test_logic_of_tiles_says_how_to_write_it(device, bad, column, advice, good, want):
    # it was "a condition must be one value, not a tile": there is no `&` to turn to
    src = "let y = compute(x) {{\n    for i in 0..2:\n        out[i, 0:4] = {}\n}}\ny\n"
    err = raises("type", src.format(bad), 3, column, device=device, x=_XT)
    assert f"write `{advice}`" in str(err)
    assert_equals_numpy(_run(device, src.format(good), x=_XT), want(_XT), 0)


# ------------------------------------------------ C and Python operators ZynML has not

@pytest.mark.parametrize("expr, column, says", [
    ("x[i] & 1", 23, "no `&` or `&&` (no bitwise operators): `and` combines bools"),
    ("x[i] > 0 && x[i] < 5", 27, "no `&` or `&&`"),
    ("x[i] | 1", 23, "`or` combines bools"),
    ("~x[i]", 18, "`not` negates a bool"),
    ("!(x[i] > 0)", 18, "ZynML writes `not x`"),
    ("x[i] << 2", 24, "no `<<` (no bitwise operators): `x * 2 ** k` shifts an integer left"),
    ("x[i] >> 2", 24, "no `>>`"),
])
def test_operators_zynml_has_not_say_what_to_write(expr, column, says):
    # they were "unexpected character '&'" and "unexpected '<'; expected '(', '+', ..."
    err = raises("syntax", _kernel(f"out[i] = {expr}"), 3, column, x=_K)
    assert says in str(err)


@pytest.mark.parametrize("device", DEVICES)
def test_the_shift_written_as_the_advice_says(device):
    x = np.int32([1, -3, 5, 0])
    assert_equals_numpy(_run(device, _kernel("out[i] = x[i] * 2 ** 3"), x=x), x << 3, 0)


# ------------------------------------------- compound assignments ZynML has not (//= **= ^=)

@pytest.mark.parametrize("src, line, column, says", [
    # `a //= 2` was `a` and a comment: on the host a statement doing nothing, silently
    ("var a = 7\na //= 2\na", 2, 3, "write `a = floor(a / 2.0)`"),
    (_kernel("var c = x[i]\n        c //= 2\n        out[i] = c"), 4, 11,
     "write `c = floor(c / 2.0)`"),
    ("var t = tensor([5])\nt[0] //= 2\nt", 2, 6, "write `t[0] = floor(t[0] / 2.0)`"),
    ("var a = 2\na **= 3\na", 2, 5, "ZynML has no `**=`; write `a = a ** b`"),
    ("var a = 2\na ^= 3\na", 2, 4, "ZynML has no `^=`"),
])
def test_compound_assignment_zynml_has_not(src, line, column, says):
    err = raises("syntax", src, line, column, x=_K)
    assert says in str(err) and "= += -= *= /= %=" in str(err)


def test_a_comment_of_equals_signs_is_a_comment():
    assert _run("cpu", "let x = 1 // === header ===\nlet s = \"a //= b\"\nx") == 1


# ------------------------------------ an integer past i64 beside signed data has no type

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, data", [
    ("x[i] + 9223372036854775808", np.int64([1, -5])),
    ("x[i] - 2 ** 63", np.int64([1, -5])),
    ("x[i] * 18446744073709551615", np.int32([1, -5])),
])
def test_integer_past_i64_beside_signed_data_is_a_type_error(device, expr, data):
    # numpy: OverflowError; i64 (or u64) arithmetic wrapped it silently (-5 + 2^63 gave
    # 9223372036854775803)
    err = raises("type", _kernel(f"out[i] = {expr}"), 3, 25, device=device, x=data)
    assert "is past i64, and no integer type holds it" in str(err)


@pytest.mark.parametrize("device", [d for d in DEVICES if not d.startswith(("vulkan", "gl"))])
def test_integer_past_i64_beside_u64_data_and_in_comparisons(device):
    u = np.uint64([1, 2**63 - 1])
    got = _run(device, _kernel("out[i] = x[i] + 9223372036854775808"), x=u)
    assert_equals_numpy(got, u + np.uint64(2**63), 0)
    s = np.int64([1, -5])
    got = _run(device, _kernel("out[i] = x[i] < 9223372036854775808"), x=s)
    assert_equals_numpy(got, s < 2**63, 0)
