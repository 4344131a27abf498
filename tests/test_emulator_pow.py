"""The launch-IR emulator's pow is C's, as the devices' and numpy's power of arrays: numpy's
power of two scalars takes an exponent of 0.5 as sqrt, so the emulator gave NaN for
(-inf) ** 0.5 where CUDA, Metal and numpy give inf."""
import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block

SRC = "let y = compute(x, p) {\n    for i in 0..n:\n        out[i] = x[i] ** p[i]\n}\ny\n"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_cuda_and_metal_launch_ir_power_is_c_pow(dtype):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    x = np.array([-np.inf, -0.0, -np.inf, -0.0, 8.0, -8.0, 2.0, np.inf], dtype)
    p = np.array([0.5, 0.5, 1.5, 1.5, 1 / 3, 3.0, -1.5, -0.5], dtype)
    with np.errstate(all="ignore"):
        want = np.power(x, p)
    k, ins, sizes, scalars = lower_block(SRC, dict(x=x, p=p))
    for tgt in (cuda_target(),) + ((metal_target(),) if dtype == np.float32 else ()):
        got = emulate_kernel(schedules.build(k, tgt, sizes), k, ins, sizes, scalars)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
