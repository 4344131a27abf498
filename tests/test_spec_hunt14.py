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
