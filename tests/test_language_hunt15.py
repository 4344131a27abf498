"""Language front end: a tile of one element stored into one element of out (or of a shared
array, or held in a number's var) is that element, as numpy stores it; every device present,
against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices
from zynbook.errors import ZynMLShapeError

DEVICES = wanted_devices()
SHAPES = [(5, 7), (37, 19)]


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ a tile of one element stored into one element of out

_ONE_ELEMENT = {
    "out[i, j] = x[i, j] + b[0:1, j]": lambda x, b: x + b[0:1],
    "out[i, j] = x[i, j] + b[0:1, j:j+1]": lambda x, b: x + b[0:1],
    "out[i, j] = x[i, j] + b[i:i+1, 0]": lambda x, b: x + b[:, 0:1],
    "out[i, j] = b[i:i + 1, j:j + 1] * 2.0 - x[i, j]": lambda x, b: b * 2 - x,
    "let t = b[0:1, j]\n        out[i, j] = x[i, j] * t": lambda x, b: x * b[0:1],
    "let t = exp(b[i:i+1, j:j+1])\n        out[i, j] += -t": lambda x, b: -np.exp(b),
    "var acc = 0.0\n        acc += b[0:1, j] * x[i, j]\n        out[i, j] = acc":
        lambda x, b: b[0:1] * x,
    "var acc: f32 = 1.0\n        acc = max(acc, b[i:i+1, j])\n        out[i, j] = acc":
        lambda x, b: np.maximum(np.float32(1), b),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("body", list(_ONE_ELEMENT), ids=range(len(_ONE_ELEMENT)))
def test_a_tile_of_one_element_stored_into_an_element_keeps_outs_shape(device, shape, body):
    rng = np.random.default_rng(len(body))
    x, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    src = f"""let y = compute(x, b) {{
    for i in 0..rows, j in 0..cols:
        {body}
}}
y
"""
    got = _run(device, src, x=x, b=b, rows=shape[0], cols=shape[1])
    assert_equals_numpy(got, _ONE_ELEMENT[body](x, b), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_tile_of_one_element_stored_into_a_shared_element(device, shape):
    rng = np.random.default_rng(3)
    x, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    src = """let y = compute(x, b) {
    for i in 0..rows:
        shared var s[cols]
        for j in 0..cols:
            s[j] = b[i:i+1, j] * 2.0
        barrier()
        for j in 0..cols:
            out[i, j] = s[cols - 1 - j] + x[i, j]
}
y
"""
    got = _run(device, src, x=x, b=b, rows=shape[0], cols=shape[1])
    assert_equals_numpy(got, b[:, ::-1] * 2 + x, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_longer_tile_stored_into_an_element_still_adds_its_axis(device):
    b = np.random.default_rng(4).standard_normal((5, 7)).astype(np.float32)
    src = """let y = compute(b) {
    for i in 0..rows, j in 0..cols:
        out[i, j] = b[0:2, j] + b[i:i+1, j]
}
y
"""
    got = _run(device, src, b=b, rows=5, cols=7)
    want = (b[0:2].T[None, :, :] + b[:, :, None])        # out[i, j] holds a tile of 2
    assert_equals_numpy(got, want, 1e-5)


def test_a_var_holding_a_one_element_tile_stored_into_an_element_is_refused_clearly():
    src = """let y = compute(b) {
    for i in 0..4, j in 0..4:
        var a = b[0:1, j]
        out[i, j] = a
}
y
"""
    with pytest.raises(ZynMLShapeError) as err:
        _run("cpu", src, b=np.ones((4, 4), np.float32))
    assert err.value.span.line == 4 and "b[0, j]" in str(err.value)
