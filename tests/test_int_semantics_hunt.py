"""Integer, index and size semantics agree on every device, and as numpy's fixed-width
integers have them: arithmetic in a kernel happens in the expression's type (an integer
literal, a size, a host int and a loop variable are i32, docs/language.md), wrapping past
it; `/` truncates and `%` takes the dividend's sign (C's, as the language doc says); an
index that arithmetic took out of range is a runtime error at its line on every device,
never a read of other memory. Checked on every local device, and for the CUDA and Metal
targets on the launch-IR emulator."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import emulate_kernel, lower_block, raises, wanted_devices
from zynbook.compiler import schedules
from zynbook.compiler.codegen.dialects.cuda import CudaDialect
from zynbook.compiler.codegen.dialects.msl import MslDialect
from zynbook.compiler.codegen.printer import print_program
from zynbook.compiler.targets import cuda_target, metal_target

DEVICES = wanted_devices()
TARGETS = [cuda_target(), metal_target()]


def _wrapped32(v):
    """numpy's int32 value of the exact integer v."""
    return int(np.array(v, np.int64).astype(np.int32))


# ---- an index whose arithmetic wraps is checked, not proved in range with exact numbers

# index: the multiplier m of i * m / m, which wraps in i32 (3 * 10^9 is -1294967296)
WRAPPING_INDICES = {"product_divided": 1000000000, "power_of_two": 1073741824}


def _c_div(a, b) -> int:
    """C's truncating quotient."""
    q = abs(int(a)) // abs(int(b))
    return q if (a >= 0) == (b >= 0) else -q


def _numpy_index(i, m) -> int:
    with np.errstate(over="ignore"):
        return _c_div(np.int32(i) * np.int32(m), m)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(WRAPPING_INDICES))
def test_an_index_whose_arithmetic_wraps_is_out_of_range_on_every_device(device, case):
    m = WRAPPING_INDICES[case]
    x = np.arange(10, 14, dtype=np.int32)
    bad = next(v for v in (_numpy_index(i, m) for i in range(4)) if not 0 <= v < 4)
    src = f"let n = 4\nlet y = compute(x) {{\n    for i in 0..n:\n        out[i] = x[i * {m} / {m}]\n}}\ny\n"
    err = raises("runtime", src, 4, 20, device=device, x=x)
    assert f"index {bad} is out of range" in str(err), err


@pytest.mark.parametrize("target", TARGETS, ids=["cuda", "metal"])
@pytest.mark.parametrize("case", list(WRAPPING_INDICES))
def test_an_index_whose_arithmetic_wraps_is_checked_on_the_cuda_and_metal_targets(target, case):
    m = WRAPPING_INDICES[case]
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = x[i * {m} / {m}]\n}}\n"
    x = np.arange(10, 14, dtype=np.int32)
    kernel, ins, sizes, scalars = lower_block(src, {"x": x}, sizes={"n": 4})
    prog = schedules.build(kernel, target, sizes)
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="out of range"):
        emulate_kernel(prog, kernel, ins, sizes, scalars, 32)
    # and the product is written wrapping: a signed overflow CUDA C++ and MSL may assume
    # away would fold i * m / m to i, in range
    dialect = CudaDialect if target.name == "cuda" else MslDialect
    source = print_program(dialect(), prog, kernel).source
    assert f"(unsigned int)u_i * (unsigned int){m}" in source or \
        f"(uint)u_i * (uint){m}" in source, source


@pytest.mark.parametrize("device", DEVICES)
def test_an_index_that_wraps_back_into_range_reads_as_numpy(device):
    # + - * wrap modulo 2^32, so (i + 2147483647) - 2147483647 is i again, as numpy's int32
    x = np.arange(10, 14, dtype=np.int32)
    src = "let n = 4\nlet y = compute(x) {\n    for i in 0..n:\n        out[i] = x[(i + 2147483647) - 2147483647]\n}\ny\n"
    with np.errstate(over="ignore"):
        idx = (np.arange(4, dtype=np.int32) + np.int32(2147483647)) - np.int32(2147483647)
    np.testing.assert_array_equal(np.asarray(zynbook.Session(device).run(src, x=x)), x[idx])


# ---- i32 arithmetic of sizes, literals and host ints wraps on the reference as well

K = 70000          # k * k = 4900000000 is 605032704 in i32
# body -> numpy of (x: int32 [4], n = 4, k = K), every operand int32 as the language types it
SCALAR_WRAPS = {
    "host_int_squared_widened": ("i64(k * k) + i64(x[i])",
                                 lambda x, n, k: (k * k).astype(np.int64) + x.astype(np.int64)),
    "host_int_squared_to_float": ("float(k * k) + float(x[i])",
                                  lambda x, n, k: np.float32(k * k) + x.astype(np.float32)),
    "size_product_compared": ("where(n * 1000000000 > 0, 1, 0) + x[i]",
                              lambda x, n, k: np.where(n * np.int32(1000000000) > 0, 1, 0).astype(np.int32) + x),
    "literal_sum_compared": ("where(2147483647 + 1 > 0, 1, 0) + x[i]",
                             lambda x, n, k: np.where(np.int32(2147483647) + np.int32(1) > 0, 1, 0).astype(np.int32) + x),
    # converted, literals alone are their exact value, as numpy's np.int64(2147483647 + 1)
    "literal_sum_widened": ("i64(2147483647 + 1) + i64(x[i])",
                            lambda x, n, k: np.int64(2147483647 + 1) + x.astype(np.int64)),
    "loop_variable_product_widened": ("i64(i * 1000000000) + i64(x[i])",
                                      lambda x, n, k: (np.arange(4, dtype=np.int32) * np.int32(1000000000)).astype(np.int64) + x.astype(np.int64)),
    "abs_of_smallest_literal_compared": ("where(abs(-2147483647 - 1) < 0, 1, 0) + x[i]",
                                         lambda x, n, k: np.where(np.abs(np.int32(-2147483647) - np.int32(1)) < 0, 1, 0).astype(np.int32) + x),
    "negated_smallest_literal_compared": ("where(-(-2147483647 - 1) < 0, 1, 0) + x[i]",
                                          lambda x, n, k: np.where(-(np.int32(-2147483647) - np.int32(1)) < 0, 1, 0).astype(np.int32) + x),
}


@pytest.mark.parametrize("device", [d for d in DEVICES])
@pytest.mark.parametrize("case", list(SCALAR_WRAPS))
def test_i32_arithmetic_of_sizes_literals_and_host_ints_wraps_as_numpy(device, case):
    body, fn = SCALAR_WRAPS[case]
    if device.startswith(("vulkan", "gl", "webgpu", "metal")) and "i64(" in body:
        pytest.skip("WebGPU holds no 64-bit integers")
    x = np.arange(4, dtype=np.int32)
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {body}\n}}\ny\n"
    with np.errstate(over="ignore"):
        want = fn(x, np.int32(4), np.int32(K))
    got = np.asarray(zynbook.Session(device).run(src, x=x, k=K))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# ---- the smallest i32 divided by -1 is an error wherever its operands come from

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, host, column", [
    # literals only, in i32 where no data meets them (beside data they are exact: 2147483648)
    ("where((-2147483647 - 1) / -1 > 0, 1, 0) + x[i]", {}, 24),
    ("x[i] * 0 + k / -1", {"k": -2 ** 31}, 29),             # a host int
    ("x[i] * 0 + (k - 1) / -1", {"k": -2 ** 31 + 1}, 29),   # a host int's arithmetic
], ids=["literals", "host_int", "host_int_arithmetic"])
def test_the_smallest_i32_divided_by_minus_one_is_an_overflow_error(device, body, host, column):
    with pytest.raises(FloatingPointError):      # numpy's int32 overflows too
        with np.errstate(over="raise"):
            np.int32(-2 ** 31) // np.int32(-1)
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {body}\n}}\ny\n"
    err = raises("runtime", src, 3, column, device=device, x=np.arange(4, dtype=np.int32),
                 **host)
    assert "integer overflow: -2147483648 / -1" in str(err), err


# ---- a row gathered by data out of range points at its index on every device

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, column", [
    ("        out[i] = sum(x2[idx[i], :])\n", 25),
    ("        out[i] = sum(x2[idx[i]] * 2.0)\n", 25),
    ("        let r = x2[idx[i], :]\n        out[i] = sum(r * r)\n", 20),
], ids=["sum_of_row", "sum_of_row_expression", "row_bound_to_a_name"])
def test_a_row_gathered_out_of_range_is_an_error_at_its_index(device, body, column):
    x2 = np.arange(32, dtype=np.float32).reshape(8, 4)
    idx = np.array([0, 3, -1, 2, 1, 2, 3, 4], np.int32)
    bad = idx[(idx < 0) | (idx >= len(x2))][0]
    src = f"let y = compute(x2, idx) {{\n    for i in 0..n:\n{body}}}\ny\n"
    err = raises("runtime", src, 3, column, device=device, x2=x2, idx=idx)
    assert f"index {bad} is out of range for an axis of size 8 of `x2`" in str(err), err


# ---- a divisor whose arithmetic wraps to 0 is checked, not proved nonzero with exact numbers

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, what", [("/", "division"), ("%", "remainder")])
def test_a_divisor_that_wraps_to_zero_is_a_division_by_zero(device, op, what):
    # (i + 1) * 2^30 is 2^32 at i = 3: 0 in numpy's int32 (cpu:native died of SIGFPE)
    with np.errstate(over="ignore"):
        divisors = np.arange(4, dtype=np.int32) * np.int32(1073741824) + np.int32(1073741824)
    assert divisors[3] == 0 and np.all(divisors[:3] != 0)
    src = (f"let n = 4\nlet y = compute(x) {{\n    for i in 0..n:\n"
           f"        out[i] = x[i] + 100 {op} (i * 1073741824 + 1073741824)\n}}\ny\n")
    err = raises("runtime", src, 4, 25, device=device, x=np.arange(4, dtype=np.int32))
    assert f"integer {what} by zero" in str(err), err


@pytest.mark.parametrize("target", TARGETS, ids=["cuda", "metal"])
def test_a_divisor_that_wraps_to_zero_is_checked_on_the_cuda_and_metal_targets(target):
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + 100 / (i * 1073741824 + 1073741824)\n}\n"
    x = np.arange(4, dtype=np.int32)
    kernel, ins, sizes, scalars = lower_block(src, {"x": x}, sizes={"n": 4})
    prog = schedules.build(kernel, target, sizes)
    with pytest.raises(zynbook.errors.ZynMLRuntimeError, match="integer division by zero"):
        emulate_kernel(prog, kernel, ins, sizes, scalars, 32)


# ---- sizes computed on the host divide as the kernels do (C's truncation)

def _trunc_div(a, b):
    return np.trunc(np.asarray(a) / b).astype(np.int64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bound, want_len", [
    ("(n - 11) / 3 + 5", int(_trunc_div(4 - 11, 3)) + 5),           # -7 / 3 is -2: 3 iterations
    ("(n - 11) % 3 + 5", int(np.fmod(4 - 11, 3)) + 5),               # -7 % 3 is -1: 4
], ids=["quotient", "remainder"])
def test_a_loop_bound_of_negative_size_arithmetic_divides_as_c(device, bound, want_len):
    x = np.arange(10, 14, dtype=np.float32)
    src = f"let n = 4\nlet y = compute(x) {{\n    for i in 0..{bound}:\n        out[i] = x[i]\n}}\ny\n"
    np.testing.assert_array_equal(np.asarray(zynbook.Session(device).run(src, x=x)), x[:want_len])


@pytest.mark.parametrize("device", DEVICES)
def test_out_indexed_by_a_negative_quotient_is_as_long_as_its_largest_index(device):
    # out's length was floor((n - 12) / 3) + 6 = 3 on the host while the kernel's C
    # arithmetic wrote out[3]: past the end of the buffer
    idx = _trunc_div(np.arange(4) - 11, 3) + 5
    want = np.zeros(idx.max() + 1, np.float32)
    want[idx] = 1.0
    src = "let n = 4\nlet y = compute(x) {\n    for i in 0..n:\n        out[(i - 11) / 3 + 5] = 1.0\n}\ny\n"
    got = np.asarray(zynbook.Session(device).run(src, x=np.zeros(4, np.float32)))
    np.testing.assert_array_equal(got, want)


# ---- size arithmetic of a loop bound or of out's length that leaves i32 is refused

@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_bound_whose_size_arithmetic_leaves_i32_is_an_error_at_it(device):
    # the kernels compute the bound in i32, where 4 * 10^9 wraps (numpy's int32 says so);
    # it ran 0 iterations on some devices and 4 on cpu:native
    with np.errstate(over="ignore"):
        assert np.int32(4) * np.int32(1000000000) < 0
    src = "let n = 4\nlet y = compute(x) {\n    for i in 0..n * 1000000000 / 1000000000:\n        out[i] = x[i]\n}\ny\n"
    err = raises("runtime", src, 3, 17, device=device, x=np.arange(4, dtype=np.float32))
    assert "`n * 1000000000` is 4000000000" in str(err), err


@pytest.mark.parametrize("device", DEVICES)
def test_out_whose_length_leaves_i32_is_an_error(device):
    src = ("let n = 4\nlet y = compute(x) {\n    for i in 0..n:\n"
           "        for j in 0..i * 1000000000 / 1000000000:\n            out[i, j] = x[j]\n}\ny\n")
    err = raises("runtime", src, 2, 9, device=device, x=np.arange(4, dtype=np.float32))
    assert "out's axis 1" in str(err) and "leaves i32" in str(err), err


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_bound_computed_in_i64_runs_to_its_value(device):
    # i64(n) * 10^9 / 10^9 is n: numpy's int64 holds 4 * 10^9 (it was a Python TypeError);
    # WebGPU, which has no 64-bit integers, computes a bound of sizes on the host for the
    # launch's sizes (a program for every size set refused it)
    x = np.arange(10, 14, dtype=np.float32)
    n = int(np.int64(4) * np.int64(1000000000) // np.int64(1000000000))
    src = "let n = 4\nlet y = compute(x) {\n    for i in 0..i64(n) * 1000000000 / 1000000000:\n        out[i] = x[i]\n}\ny\n"
    np.testing.assert_array_equal(np.asarray(zynbook.Session(device).run(src, x=x)), x[:n])
