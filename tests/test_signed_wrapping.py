"""Signed integer + - * wrap as numpy's do, on every device. CUDA C++ and MSL leave a signed
overflow undefined, and NVRTC used that: `x[i] * 1000000 > 0` was true for x = 3000 and
`x[i] + 2147483000 < x[i]` folded to false; on those targets the kernel's arithmetic is
written in unsigned types (ir.WRAPPING). Checked on every device present, and for the CUDA
and Metal targets on the launch-IR emulator and in their source."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import emulate_kernel, lower_block, wanted_devices
from zynbook.compiler import schedules
from zynbook.compiler.codegen.dialects.cuda import CudaDialect
from zynbook.compiler.codegen.dialects.msl import MslDialect
from zynbook.compiler.codegen.printer import print_program
from zynbook.compiler.targets import cuda_target, metal_target

DEVICES = wanted_devices()

X32 = np.array([1, 3000, -5, 2000000, 7, -2147483648, 2147483647], np.int32)
X64 = np.array([1, 3 << 40, -5, -(1 << 62), 7], np.int64)

CASES = {
    "product_compared": ("x[i] * 1000000 > 0", lambda x: x * x.dtype.type(1000000) > 0),
    "sum_below_its_operand": ("x[i] + 2147483000 < x[i]", lambda x: x + x.dtype.type(2147483000) < x),
    "difference": ("x[i] - 2147483000 > 0", lambda x: x - x.dtype.type(2147483000) > 0),
    "square": ("x[i] * x[i]", lambda x: x * x),
    "sum_kept": ("(x[i] + 2147483647) * 3", lambda x: (x + x.dtype.type(2147483647)) * x.dtype.type(3)),
}


def _src(expr: str) -> str:
    return f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\n"


def _want(fn, x):
    with np.errstate(over="ignore"):
        return fn(x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("x", [X32, X64], ids=["i32", "i64"])
def test_signed_arithmetic_wraps_as_numpy_on_every_device(device, case, x):
    expr, fn = CASES[case]
    if x.dtype == np.int64 and device.startswith(("vulkan", "gl", "webgpu", "metal")):
        pytest.skip("WebGPU holds no 64-bit integer arithmetic")
    got = zynbook.Session(device).run(_src(expr) + "y\n", x=x)
    np.testing.assert_array_equal(np.asarray(got), _want(fn, x))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("x", [X32, X64], ids=["i32", "i64"])
def test_the_cuda_targets_program_wraps_on_the_emulator(case, x):
    expr, fn = CASES[case]
    kernel, ins, sizes, scalars = lower_block(_src(expr), {"x": x})
    prog = schedules.build(kernel, cuda_target(), sizes)
    np.testing.assert_array_equal(emulate_kernel(prog, kernel, ins, sizes, scalars, 32), _want(fn, x))


@pytest.mark.parametrize("target, dialect", [(cuda_target(), CudaDialect), (metal_target(), MslDialect)])
def test_cuda_and_msl_write_the_arithmetic_in_unsigned_types_but_not_the_indices(target, dialect):
    kernel, ins, sizes, _ = lower_block(_src("x[i] * 1000000 + x[i + 1 - 1]"), {"x": X32})
    source = print_program(dialect(), schedules.build(kernel, target, sizes), kernel).source
    assert "((int)((unsigned int)" in source or "((int)((uint)" in source, source
    assert "* (unsigned int)1000000" in source or "* (uint)1000000" in source, source
