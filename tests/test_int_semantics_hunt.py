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
