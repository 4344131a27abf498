"""An integer product of a constant tile counts the tile's own elements: every device held
`ones(2, 5, dtype=i32) * 3` as its one element, so its product was 3, not 3 ** 10. Products
wrap as the dtype's products do (numpy's); a tile whose size is known only at the launch is
refused at the tile. Every device present and the CUDA and Metal launch IR, against numpy."""
import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices

DTYPES = {"i32": np.int32, "i64": np.int64, "u8": np.uint8, "i8": np.int8, "u32": np.uint32}
CASES = [  # (dtype, value, shape, axis): values that overflow, an odd power of -1, one of 0
    ("i32", 3, (2, 5), None), ("i32", -1, (3, 3), None), ("i64", 3, (5, 7), None),
    ("u8", 3, (2, 5), None), ("i8", -2, (3, 3), None), ("u32", 7, (4, 3), 1),
    ("i32", 0, (1, 2), None), ("i8", 3, (30, 10), 0)]


def _src(dt, value, shape, axis):
    tile = f"ones({shape[0]}, {shape[1]}, dtype={dt}) * {value}"
    red = f"reduce(*, {tile})" if axis is None else f"sum(reduce(*, {tile}, axis={axis}))"
    return f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {red} + x[i]\n}}\ny\n"


def _want(dt, value, shape, axis):
    t = DTYPES[dt]
    x = np.arange(6).astype(t)
    with np.errstate(over="ignore"):
        tile = np.full(shape, value).astype(t)
        r = np.prod(tile, dtype=t) if axis is None else \
            np.sum(np.prod(tile, axis=axis, dtype=t), dtype=t)
        return x, (r + x).astype(t)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CASES])
def test_an_integer_product_of_a_constant_tile(device, case):
    x, want = _want(*case)
    try:
        got = zynbook.Session(device).run(_src(*case), x=x)
    except zynbook.ZynMLError as err:
        # WebGPU holds 64-bit integers in 32 bits: a value past them is an error at the line
        assert err.kind in ("device", "runtime") and case[0] == "i64" \
            and device.split(":")[0] in ("vulkan", "gl", "metal", "dx12"), err.render()
        assert "64-bit" in err.message
        return
    assert_equals_numpy(got, want, 0)


@pytest.mark.parametrize("case", CASES[:4], ids=[f"{c[0]}-{c[1]}" for c in CASES[:4]])
def test_the_cuda_and_metal_launch_ir(case):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    x, want = _want(*case)
    k, ins, sizes, scalars = lower_block(_src(*case), dict(x=x))
    for tgt in (cuda_target(), metal_target()):
        assert_equals_numpy(emulate_kernel(schedules.build(k, tgt, sizes), k, ins, sizes, scalars),
                            want, 0)


def test_a_tile_sized_at_the_launch_is_refused_at_the_tile():
    src = ("let y = compute(x) {\n    for i in 0..n:\n"
           "        out[i] = reduce(*, ones(n, 2, dtype=i32) * 2) + x[i]\n}\ny\n")
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session("cpu").run(src, x=np.arange(3, dtype=np.int32))
    err = info.value
    assert err.kind == "shape" and "integer product of a constant tile" in err.message
    assert (err.span.line, err.span.column) == (3, 28)


# -------------------------------------------- dot() of a constant tile of its own length

def _dot_src(expr):
    return f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("expr", ["dot(ones(3), x[i])", "dot(x[i], ones(3) * 2.0)",
                                  "dot(ones(3), ones(4))"])
def test_a_dot_of_a_constant_tile_of_another_length_is_refused(device, expr):
    # numpy's dot of lengths 3 and 5 is an error; the constant tile was taken as long as the
    # other vector and the dot summed all five
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session(device).run(_dot_src(expr), x=np.ones((2, 5), np.float32))
    err = info.value
    assert err.kind == "shape" and "lengths of dot()'s vectors differ" in err.message
    assert err.span.line == 3


@pytest.mark.parametrize("device", wanted_devices())
def test_a_dot_of_a_constant_tile_of_the_same_length_equals_numpy(device):
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    got = zynbook.Session(device).run(_dot_src("dot(ones(5) * 2.0, x[i])"), x=x)
    assert_equals_numpy(got, (x.astype(np.float64) @ np.full(5, 2.0)).astype(np.float32), 1e-6)
