"""A constant tile of any dtype times a literal, summed: the tile's element is typed as the
tile (an i64 `ones(2, 3, dtype=i64) * 3` was an internal compiler error, an i32 product of
two weak literals). Every device present and the CUDA and Metal launch IR, against numpy."""
import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices

DTYPES = {"i32": np.int32, "i64": np.int64, "u8": np.uint8, "f16": np.float16, "f64": np.float64}


def _src(dt):
    return (f"let y = compute(x) {{\n    for i in 0..n:\n"
            f"        out[i] = sum(ones(2, 3, dtype={dt}) * 3) + x[i]\n}}\ny\n")


def _want(dt):
    np_dt = DTYPES[dt]
    x = np.arange(5).astype(np_dt)
    return x, (np.sum(np.ones((2, 3), np_dt) * np_dt(3), dtype=np_dt) + x).astype(np_dt)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("dt", list(DTYPES))
def test_a_sum_of_a_constant_tile_times_a_literal(device, dt):
    x, want = _want(dt)
    try:
        got = zynbook.Session(device).run(_src(dt), x=x)
    except zynbook.ZynMLError as err:     # a WebGPU adapter without 64-bit or f16 types
        assert err.kind == "device" and dt in ("i64", "f64", "f16"), err.render()
        return
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("dt", list(DTYPES))
def test_the_cuda_and_metal_launch_ir(dt):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    x, want = _want(dt)
    k, ins, sizes, scalars = lower_block(_src(dt), dict(x=x))
    for tgt in (cuda_target(),) + ((metal_target(),) if dt != "f64" else ()):
        assert_equals_numpy(emulate_kernel(schedules.build(k, tgt, sizes), k, ins, sizes, scalars),
                            want, 0)
