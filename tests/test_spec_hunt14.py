"""Programs written from the docs' compute-block section: a shared array sized by a name
the program never defines, on every device present, compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLNameError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()

_ROW = """let y = compute(x) {
    for i in 0..rows:
        shared var t[SIZE]
        t = x[i] * 2.0
        barrier()
        out[i] = t
}
y
"""


@pytest.mark.parametrize("size", ["cols", "2 * cols - cols"])
def test_a_shared_array_sized_by_an_undefined_name_says_it_is_a_size(size):
    """`shared var t[cols]` with `cols` defined nowhere: the size named only by a shared
    array was reported as `unknown name`, the message of a misspelt name, where a loop
    bound gets 'cannot tell the size ... define it before the compute block'."""
    with pytest.raises(ZynMLNameError) as info:
        zynbook.run(_ROW.replace("SIZE", size), x=np.ones((3, 7), np.float32))
    msg = info.value.message
    assert msg.startswith("cannot tell the size `cols`: it sizes a shared array"), msg
    assert "let cols = ..." in msg
    span = info.value.span
    assert (span.line, span.column) == (3, 22 + size.index("cols"))


def test_a_misspelt_name_in_a_kernel_is_still_an_unknown_name():
    src = "let y = compute(x) {\n    for i in 0..rows:\n        out[i] = x[i, colz]\n}\ny\n"
    with pytest.raises(ZynMLNameError) as info:
        zynbook.run(src, x=np.ones((3, 7), np.float32))
    assert info.value.message.startswith("unknown name `colz`")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 33)])
def test_a_shared_array_sized_by_a_host_int_equals_numpy(device, shape):
    """The same block with `cols` given as a host int runs, on every device."""
    x = np.random.default_rng(14).standard_normal(shape).astype(np.float32)
    got = zynbook.Session(device).run(_ROW.replace("SIZE", "cols"), x=x, cols=shape[1])
    assert_equals_numpy(got, x * np.float32(2.0), 0)


# ------------------------------------------------- host builtins that say nothing extra

_QUIET = [
    # softmax of a row holding inf: inf - inf is NaN, as torch.softmax gives it
    ("softmax(x)", np.array([np.inf, 1.0, -np.inf], np.float32),
     lambda x: __import__("torch").softmax(__import__("torch").tensor(x), -1).numpy()),
    # upload of f64 values past f32's range: inf, as numpy's cast (and torch's .float())
    ("download(upload(x))", np.array([1e39, -1e39, 2.5], np.float64),
     lambda x: np.array([np.inf, -np.inf, 2.5], np.float32)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, x, want", _QUIET, ids=["softmax_inf", "upload_past_f32"])
def test_host_builtins_at_the_edges_of_f32_equal_numpy_without_a_python_warning(device, src, x,
                                                                               want):
    """numpy's RuntimeWarning ('invalid value encountered in subtract', 'overflow
    encountered in cast') reached the user beside the value, which is the right one."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = zynbook.run(src, device=device, x=x)
    assert_equals_numpy(got, want(x), 0)


# ------------------------------------------ tensor(..., dtype=) of numbers it cannot hold

@pytest.mark.parametrize("src, said, column", [
    ("tensor([1, 300], dtype=u8)", "300 does not fit u8 (0 to 255)", 24),
    ("tensor([-1], dtype=u8)", "-1 does not fit u8 (0 to 255)", 20),
    ("tensor([1.5e10], dtype=i32)", "does not fit i32 (-2147483648 to 2147483647)", 24),
    ("tensor([-1.0], dtype=u16)", "-1.0 does not fit u16", 22),
    ("tensor([2 ** 63], dtype=i64)", "9223372036854775808 does not fit i64", 25),
    ("tensor([1.0, nan], dtype=i32)", "NaN has no i32 value", 26),
    ("tensor([inf], dtype=i8)", "an infinity has no i8 value", 21),
    ("arange(-2, 2, dtype=u32)", "-2 does not fit u32", 21),
    ("arange(200, 400, 100, dtype=u8)", "300 does not fit u8", 0),
])
def test_tensor_of_numbers_its_integer_dtype_cannot_hold_is_refused(src, said, column):
    """numpy refuses np.array([300], dtype=np.uint8) (OverflowError), and `t[i] = 300` into a
    u8 tensor is refused; tensor([300], dtype=u8) was 44, tensor([1.5e10], dtype=i32) and
    tensor([nan], dtype=i32) -2147483648 (with numpy's RuntimeWarning), silently."""
    from zynbook.errors import ZynMLTypeError
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.run(src)
    assert info.value.message.startswith(src[:src.index("(")] + "(): ") and said in info.value.message
    assert (info.value.span.line, info.value.span.column) == (1, column or src.index("u8") + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_of_numbers_its_integer_dtype_holds_equals_numpy(device):
    """Floats that fit are truncated toward zero, as numpy's astype; the extremes of each
    integer type are kept; a bool dtype takes any number."""
    src = ("[tensor([2.7, -2.7, 255.9], dtype=u8 ), tensor([-128, 127], dtype=i8), "
           "tensor([2 ** 64 - 1], dtype=u64), tensor([-1.5, 0.0], dtype=bool), "
           "tensor(x, dtype=i16)]")
    src = src.replace("dtype=u8 ", "dtype=i16").replace("255.9", "32767.9")
    x = np.array([-32768.5, 3.9, 0.0], np.float64)
    got = zynbook.run(src, device=device, x=x)
    want = [np.array([2, -2, 32767], np.int16), np.array([-128, 127], np.int8),
            np.array([2 ** 64 - 1], np.uint64), np.array([True, False]),
            x.astype(np.int16)]
    for g, w in zip(got, want):
        g = np.asarray(g.numpy())
        assert g.dtype == w.dtype and np.array_equal(g, w), (g, w)
