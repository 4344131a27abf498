"""Programs written from docs/language.md the way an outside tester writes them: each
construct with odd sizes, dtypes and constants, run on every device present and compared
with numpy written here; and mistakes, each a ZynML error with its kind, line and column."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import raises, wanted_devices

DEVICES = wanted_devices()


def _wrapped_power(values, k, dtype):
    """values ** k in `dtype`, wrapped at its width as numpy's integer power wraps."""
    bits = np.iinfo(dtype).bits
    m = 1 << bits
    r = [pow(int(v) % m, k, m) for v in values]
    if np.iinfo(dtype).min < 0:
        r = [v - m if v >= m // 2 else v for v in r]
    return np.array(r, dtype=dtype)


def _on(device, src, **inputs):
    r = zynbook.run(src, device=device, **inputs)
    return r.numpy() if hasattr(r, "numpy") else r


# ------------------------------------------------------------------ integer powers

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,k", [("int8", 127), ("uint8", 200), ("int16", 30000),
                                     ("int32", 2147483647), ("uint32", 99999)])
def test_integer_power_by_a_constant_past_the_dtype(device, dtype, k):
    """`x ** k` of integers wraps as numpy's power does, whatever k: an exponent past the
    dtype's width took k multiplications (a hang on cpu:native). (One past the dtype's
    range, i8 `x ** 131`, is a type error, as numpy's OverflowError: test_surface_hunt8.)"""
    x = np.array([0, 1, -1, 2, 3, 5, 7, -3, 127], dtype) if dtype[0] == "i" else \
        np.array([0, 1, 2, 3, 5, 7, 255, 254], dtype)
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = x[i] ** {k}\n}}\ny"
    got = _on(device, src, x=x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, _wrapped_power(x, k, dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_integer_power_of_a_loop_variable_wraps_at_32_bits(device):
    """A loop variable is i32: `i ** 20` wraps there before the comparison reads it."""
    src = "let y = compute() {\n    for i in 0..6:\n        out[i] = i ** 20 > 0\n}\ny"
    want = _wrapped_power(np.arange(6), 20, "int32") > 0
    np.testing.assert_array_equal(_on(device, src), want)


# ------------------------------------------------------------------ host mistakes

def test_host_power_too_large_is_a_memory_error_not_a_hang():
    """`10 ** 10 ** 10` of host ints computed for minutes (and gigabytes); past 2^23 bits a
    power is a memory error under the expression; smaller ones stay exact."""
    import time
    started = time.monotonic()
    raises("memory", "let a = 1\nlet x = 10 ** 10 ** 10", 2, 9)
    assert time.monotonic() - started < 30
    assert zynbook.run("3 ** 200") == 3 ** 200
    assert zynbook.run("(-1) ** (10 ** 20)") == 1
    assert zynbook.run("let x = 2 ** 8000000\nx > 2 ** 7999999") is True


def test_looping_over_a_0d_tensor_is_a_type_error():
    """A host `for` over a 0-d tensor raised numpy's TypeError ("iteration over a 0-d
    array"); it is a ZynML type error under the iterable."""
    err = raises("type", "let t = sum(ones([3]))\nlet z = zeros([])\nfor v in z:\n    print(v)",
                 3, 10)
    assert "0-d" in err.message


# ------------------------------------------------------------------ comparisons

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("signed", ["int8", "int16", "int32"])
def test_u32_compared_with_a_signed_integer(device, signed):
    """A u32 against a signed integer of at most 32 bits (an input, a loop variable, a
    literal): no 32-bit type holds both, and they were compared as i64, which the WebGPU
    devices refuse ("cannot spell 64-bit integers") for a program with no 64-bit type in
    it; a negative signed value is below every u32, else both compare as u32."""
    u = np.array([0, 1, 4294967295, 2147483648, 5, 127], np.uint32)
    s = np.array([-1, 0, 127, -128, 5, 127], signed)
    for op in ("<", "<=", ">", ">=", "==", "!="):
        src = (f"let z = compute(u, s) {{\n    for i in 0..n:\n"
               f"        out[i] = u[i] {op} s[i] and not (s[i] {op} u[i])\n}}\nz")
        want = np.array([eval(f"{int(a)} {op} {int(b)} and not ({int(b)} {op} {int(a)})")
                         for a, b in zip(u, s)])
        np.testing.assert_array_equal(_on(device, src, u=u, s=s), want, err_msg=op)
    src = ("let z = compute(u) {\n    for i in 0..n:\n"
           "        out[i] = (u[i] < 5) or (u[i] > -1 and -1 == u[i]) or u[i] > i * 1000\n}\nz")
    want = (u < 5) | np.array([int(a) > k * 1000 for k, a in enumerate(u)])
    np.testing.assert_array_equal(_on(device, src, u=u), want)


@pytest.mark.parametrize("src,line,column", [
    ('let x: int32 = "a"', 1, 8), ('let x: u8 = [1]', 1, 8), ('let x: double = "s"', 1, 8),
    ("let x: bf16 = true", 1, 8), ("let x: u32 = -1", 1, 8), ("let x: i8 = 300", 1, 8),
    ("var x: u16 = 3\nx = 65536", 2, 5), ("pipeline f(k: u32):\n    return k\nf(-1)", 3, 3),
    ("pipeline f(k: int64) -> uint8:\n    return k\nf(256)", 1, 25),
])
def test_types_named_by_any_dtype_are_checked(src, line, column):
    """A `let`, `var` or parameter typed with a dtype other than int/i32/i64/u32 and
    float/f16/f32/f64 (`int32`, `u8`, `double`, `bf16`) took any value (`let x: u8 = "a"`),
    and a sized integer type any int; each is a type error under the value's place."""
    raises("type", src, line, column)


def test_typed_host_ints_in_range_are_kept():
    assert zynbook.run("let x: int = 2 ** 40\nx") == 2 ** 40
    assert zynbook.run("let x: u64 = 2 ** 64 - 1\nx") == 2 ** 64 - 1
    assert zynbook.run("pipeline f(k: i8, d: double) -> float32:\n    return k * d\nf(-128, 0.5)") \
        == -64.0


# ------------------------------------------------------------------ slices in kernels

@pytest.mark.parametrize("device", DEVICES)
def test_negative_constant_slice_bound_is_a_shape_error(device):
    """`x[-3:]` in a kernel meant `x[0:]` (the bound clipped to 0), where numpy counts from
    the end: a silent wrong sum. A constant negative bound is a shape error at the bound,
    as the element index `x[-1]` is; `x[n - 3:]` says what was meant."""
    x = np.arange(6, dtype=np.float32)
    src = "let n = 6\nlet y = compute(x) {{\n    for i in 0..n:\n        out[i] = sum(x[{}])\n}}\ny"
    raises("shape", src.format("-3:"), 4, 24, device=device, x=x)
    raises("shape", src.format("1:-1"), 4, 26, device=device, x=x)
    np.testing.assert_array_equal(_on(device, src.format("n - 3:"), x=x), np.full(6, 12, np.float32))
    # a window whose start is computed below 0 is clipped, as documented
    got = _on(device, src.format("i - 2:i + 1"), x=x)
    np.testing.assert_array_equal(got, np.array([x[max(i - 2, 0):i + 1].sum() for i in range(6)]))


# ------------------------------------------------------------------ the device interface

@pytest.mark.parametrize("call,column", [
    ("rms_norm_backward(x, upload(ones([8])), copy_buffer(x), x, 8, 1e-5)", 65),
    ("matmul(x, x, x, 8, 4)", 22), ("softmax(x, 4, x)", 23),
])
def test_buffer_given_for_a_size_is_a_type_error(call, column):
    """A buffer passed where a size goes: the checker multiplied it into the lengths it
    checks (a Python TypeError out of zynbook.compile); it is the call's type error, under
    the argument, when it runs."""
    src = f"let x = upload(randn([4, 8], seed=6))\nlet y = {call}\n"
    zynbook.compile(src)
    err = raises("type", src, 2, column)
    assert "is a size (an int)" in err.message


# ------------------------------------------------------------------ host builtins

@pytest.mark.parametrize("call", [
    'split(arange(4), 2, axis="a")', "split(arange(4), 2, axis=0.0)",
    "split(arange(4), 2, axis=true)", 'concat([arange(4)], axis="a")',
    "concat([arange(4)], axis=0.0)", "concat([arange(4)], axis=[0])",
    "concat([arange(4)], axis=true)", "concat([arange(4)], axis=rmsnorm)",
    "reshape(arange(4), [true, 4])", "arange(4).reshape([2, 2.0])",
])
def test_axis_and_shape_arguments_that_are_not_integers(call):
    """split()'s and concat()'s axis= and reshape()'s sizes that are not integers (a string,
    a float, a bool, a list, a builtin) raised Python's TypeError out of numpy; each is a
    ZynML type error at the value written (at the call for reshape's sizes)."""
    line = f"let y = {call}"
    column = line.index("axis=") + 6 if "axis=" in line else 9
    err = raises("type", f"let n = 1\n{line}", 2, column)
    assert "integer" in err.message


def test_axis_arguments_that_are_integers_still_work():
    assert zynbook.run("concat([arange(2), arange(3)], axis=-1).shape") == [5]
    np.testing.assert_array_equal(zynbook.run("split(arange(4), 2, axis=-1)[1]").numpy(), [2, 3])
    assert zynbook.run("reshape(arange(6), [-1, 3]).shape") == [2, 3]


# ------------------------------------------------------------------ tiles written into out

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body,line", [
    ("    for i in 0..rows:\n        for j in 0..cols:\n            out[i, j] = m[i, j:]\n", 4),
    ("    for i in 0..rows:\n        out[i] = m[i, i:]\n", 3),
    ("    for i in 0..rows:\n        shared var row[cols]\n        for j in 0..cols:\n"
     "            row[j] = m[i, j]\n        barrier()\n        for j in 0..cols:\n"
     "            out[i, j] = row[cols - 1 - j:]\n", 8),
])
def test_tile_of_a_length_that_changes_with_a_loop_is_a_shape_error(device, body, line):
    """A tile written into out whose length follows a loop variable (`m[i, j:]`) gave out
    an axis of no one size: a KeyError out of the output's shape. It is a shape error at
    the write."""
    m = np.arange(24, dtype=np.float32).reshape(4, 6)
    column = {4: 13, 3: 9, 8: 13}[line]
    err = raises("shape", "let y = compute(m) {\n" + body + "}\ny", line, column,
                 device=device, m=m)
    assert "loop variable" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_tile_of_one_length_written_per_element(device):
    # a tile of one element stored into one element is that element, as numpy stores it
    m = np.arange(24, dtype=np.float32).reshape(4, 6)
    src = "let y = compute(m) {\n    for i in 0..rows, j in 0..cols:\n        out[i, j] = m[i, j:j + 1] * 2.0\n}\ny"
    want = m * 2
    np.testing.assert_array_equal(_on(device, src, m=m), want)


# ------------------------------------------------------------------ await

_ASYNC = ("let x = randn([100], seed=1)\nlet f = compute(x) @async {\n    for i in 0..n:\n"
          "        out[i] = x[i] * 2.0\n}\n")


def test_await_timeout_inf_waits_without_limit():
    """`await f timeout inf` (a duration with no limit) raised "timestamp out of range for
    platform time_t" as a runtime error; it waits as `await f` does."""
    x = zynbook.run("let x = randn([100], seed=1)\nx").numpy()
    np.testing.assert_allclose(zynbook.run(_ASYNC + "await f timeout inf").numpy(), x * 2)
    np.testing.assert_allclose(zynbook.run(_ASYNC + "await f timeout 1e300 else 0").numpy(), x * 2)


def test_await_timeout_nan_is_a_type_error():
    """A NaN timeout passed the `timeout < 0` check and became a timeout error "within nan s"."""
    raises("type", _ASYNC + "await f timeout nan", 6, 17)


# ------------------------------------------------------------------ shared arrays

_SHARED = ("let y = compute(x) {{\n    for b in 0..1:\n        shared var s[n]\n"
           "        for i in 0..n:\n            {store}\n            out[i] = x[i]\n}}\ny")


@pytest.mark.parametrize("device", DEVICES)
def test_store_into_a_shared_array_with_too_many_indices(device):
    """`s[i, 0] = v` into a 1-D shared array: numpy's IndexError on cpu (at line 1), no
    schedule on the others; it is the shape error a read `s[i, 0]` gives, at the extra index."""
    x = np.arange(8, dtype=np.float32)
    err = raises("shape", _SHARED.format(store="s[i, 0] = x[i]"), 5, 18, device=device, x=x)
    assert "indexed with 2" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_store_of_a_tile_into_one_shared_element(device):
    """`s[i] = x[i:i + 2]`: a runtime error on cpu and silently accepted elsewhere; a tile
    has no place in one element: a shape error under the value."""
    x = np.arange(8, dtype=np.float32)
    raises("shape", _SHARED.format(store="s[i] = x[i:i + 2]"), 5, 20, device=device, x=x)


@pytest.mark.parametrize("device", DEVICES)
def test_tiles_stored_into_shared_slices(device):
    x = np.arange(8, dtype=np.float32)
    src = ("let y = compute(x) {\n    for b in 0..1:\n        shared var s[n, 2]\n"
           "        for i in 0..n:\n            s[i, 0:2] = x[i:i + 2]\n        barrier()\n"
           "        for i in 0..n:\n            out[i] = s[i, 0] + s[i, 1]\n}\ny")
    # the last tile is clipped to one element, which broadcasts across the slice
    want = np.array([x[i:i + 2].sum() for i in range(7)] + [2 * x[7]], np.float32)
    np.testing.assert_array_equal(_on(device, src, x=x), want)


def test_free_names_lists_the_host_inputs_and_not_body_names():
    """docs/language.md said every free name is in Program.free_names; one only a compute
    body reads (`scale`) is not (it may be a size), and is looked up when the block runs."""
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * scale\n}\ny"
    assert set(zynbook.compile(src).free_names) == {"x"}
    raises("name", src, 3, 25, x=np.ones(3, np.float32))
    np.testing.assert_array_equal(
        zynbook.run(src, x=np.ones(3, np.float32), scale=2.0).numpy(), [2, 2, 2])


# ------------------------------------------------------------------ pipelines

def test_parameter_sizes_given_as_expressions_of_size_names():
    """`tensor[n, n * 2]` (and `u: tensor[n + 1]` after `t: tensor[n]`) was an unknown name
    `n`: the sizes bound in the signature were not visible to its expressions."""
    sig = "pipeline f(t: tensor[n, n * 2], u: tensor[n + 1]) -> int:\n    return n\n"
    assert zynbook.run(sig + "f(zeros([3, 6]), zeros([4]))") == 3
    err = raises("shape", sig + "f(zeros([3, 5]), zeros([4]))", 3, 3)
    assert "size 6" in err.message
    raises("shape", sig + "f(zeros([3, 6]), zeros([3]))", 3, 18)


@pytest.mark.parametrize("view", ["x[1:3]", "x.T", "x.reshape([2, 2])", "reshape(x, [4])"])
def test_assigning_into_a_slice_or_reshape_leaves_the_tensor(view):
    """What docs/language.md now says: slices, `.T` and reshapes bound to a name are not
    numpy views; an assignment into one leaves `x`, and the caller's array, as they were."""
    a = np.arange(4, dtype=np.float32)
    index = "[0, 0]" if "2, 2" in view else "[0]"
    got = zynbook.run(f"let v = {view}\nv{index} = 9.0\n[x, v]", x=a)
    np.testing.assert_array_equal(got[0].numpy(), np.arange(4))
    assert got[1].numpy().ravel()[0] == 9.0
    np.testing.assert_array_equal(a, np.arange(4))
    same = zynbook.run("let v = x\nv[0] = 9.0\nx", x=a)
    assert same.numpy()[0] == 9.0 and a[0] == 0.0


# ------------------------------------------------------------------ casts of constants

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,want,dtype", [
    ("i32(3000000000)", -1294967296, "int32"), ("u8(300) + 0", 44, "uint8"),
    ("i8(-129)", 127, "int8"), ("u8(-3)", 253, "uint8"), ("int(3e9)", 2147483647, "int32"),
    ("u32(-1.5)", 0, "uint32"), ("i8(-1000.0)", -128, "int8"), ("int(-inf)", -2147483648, "int32"),
])
def test_casts_of_constants_convert_as_casts_of_values(device, expr, want, dtype):
    """A cast of a constant: an integer wraps and a float saturates, as a cast of a value
    does on every device; the constant was written unconverted (i32(3000000000) could not be
    spelt in WGSL: a device error on vulkan and gl)."""
    x = np.zeros(3, np.float32)
    src = f"let n = 3\nlet y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny"
    got = _on(device, src, x=x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.full(3, want, dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_typed_let_of_an_integer_constant_past_i32(device):
    x = np.zeros(3, np.float32)
    src = "let n = 3\nlet y = compute(x) {\n    for i in 0..n:\n        let k: i32 = 3000000000\n        out[i] = k\n}\ny"
    np.testing.assert_array_equal(_on(device, src, x=x), np.full(3, -1294967296, np.int32))


# ------------------------------------------------------------------ weak integers meeting unsigned

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr,numpy_op,weak", [
    ("max(u[i], -1)", lambda u: np.maximum(u, -1), "-1"),
    ("min(u[i], -1)", lambda u: np.minimum(u, -1), "-1"),
    ("u[i] + -1", lambda u: u + -1, "-1"),
    ("max(u[i], n - 4)", lambda u: np.maximum(u, len(u) - 4), "n - 4"),
])
def test_weak_negative_integers_meeting_u32_are_type_errors(device, expr, numpy_op, weak):
    """A weak integer (a literal, arithmetic of sizes) out of the u32 it meets is refused,
    as numpy 2 refuses it ("Python integer -1 out of bounds for uint32"), at its place: it
    wrapped to 4294967295 (a literal at compile time, `n - 4` at launch)."""
    u = np.array([0, 5, 4294967295], np.uint32)
    with pytest.raises(OverflowError, match="out of bounds"):
        numpy_op(u)
    src = f"let y = compute(u) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny"
    err = raises("type", src, 3, src.splitlines()[2].index(weak) + 1, device=device, u=u)
    assert "out of bounds for u32" in str(err), err


@pytest.mark.parametrize("device", DEVICES)
def test_a_clamp_bound_past_u32_clips_as_numpy(device):
    """numpy's clip takes any Python int as a bound; the bound -1 wrapped to 4294967295."""
    u = np.array([0, 5, 4294967295], np.uint32)
    src = "let y = compute(u) {\n    for i in 0..n:\n        out[i] = clamp(u[i], -1, 5)\n}\ny"
    got = _on(device, src, u=u)
    want = np.clip(u, -1, 5)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
