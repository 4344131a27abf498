"""Errors that name what the user wrote: the f64 refusal of WebGPU after `1 + tanh(z)` is a
sigmoid, `to_device(id=...)` as documented, and Python comparisons of traced values."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
WEBGPU = [d for d in DEVICES if d == "vulkan:0"]


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


_TANH_GELU = """let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 0.5 * (1.0 + tanh(0.79 * x[i]))
}
y
"""


def _has_f64(device) -> bool:
    return "shader-f64" in next(d for d in zynbook.compute_devices() if d["id"] == device).get(
        "features", ())


@pytest.mark.parametrize("device", DEVICES)
def test_f64_tanh_refusal_names_tanh_where_written(device):
    """`1 + tanh(z)` is computed as a sigmoid (passes/activations.py); WebGPU's f64 refusal
    said "it needs sigmoid()" at the block's `compute`, a function the user never wrote. An
    adapter with `shader-f64` computes it."""
    x = np.linspace(-3.0, 3.0, 7)
    want = x * 0.5 * (1.0 + np.tanh(0.79 * x))
    if device.startswith(("vulkan", "gl")) and not _has_f64(device):
        with pytest.raises(ZynMLError) as info:
            zynbook.run(_TANH_GELU, device=device, x=x)
        if device == "gl:0":
            return
        assert "tanh()" in info.value.message and "sigmoid" not in info.value.message
        assert (info.value.span.line, info.value.span.column) == (3, 38)
        return
    assert_equals_numpy(_host(zynbook.run(_TANH_GELU, device=device, x=x)), want, 1e-12)


@pytest.mark.parametrize("device", WEBGPU)
def test_f64_library_gelu_refusal_names_gelu(device):
    """The library's gelu (written with tanh) on f64: the refusal names gelu() at the
    user's call, and the tanh it needs, not a sigmoid. An adapter with `shader-f64` computes
    it, to numpy's tanh form."""
    src = "let y = x * 1.0\ngelu(y)\n"
    x = np.linspace(-3.0, 3.0, 7)
    if _has_f64(device):
        want = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
        assert_equals_numpy(_host(zynbook.run(src, device=device, x=x)), want, 1e-12)
        return
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, device=device, x=x)
    msg = info.value.message
    assert msg.startswith("gelu():") and "tanh()" in msg and "sigmoid" not in msg
    assert info.value.span.line == 2


@pytest.mark.parametrize("target", [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0")])
@pytest.mark.parametrize("copy", ["", ", copy=false", ", copy=true"])
def test_to_device_takes_id_by_keyword(target, copy):
    """The docs write `x.to_device(id, copy=true)`; `to_device(id="cpu")` was refused with
    "has no parameter `id`; it takes copy"."""
    x = np.array([1.5, -0.0, np.nan, np.inf, -3.25])
    got = zynbook.run(f'x.to_device(id="{target}"{copy})', x=x)
    assert got.device == target
    assert_equals_numpy(_host(got), x, 0)


def test_to_device_id_given_twice_is_refused():
    with pytest.raises(ZynMLError, match="`id` is given twice"):
        zynbook.run('x.to_device("cpu", id="cpu")', x=np.ones(3))


_TRACED = [d for d in DEVICES if not d.startswith(("browser", "gl:"))]


@pytest.mark.parametrize("device", _TRACED)
@pytest.mark.parametrize("fn", [lambda xs: xs[0] != xs[0], lambda xs: xs[0] * (xs[0] == 2.0)],
                         ids=["ne", "eq_in_product"])
def test_python_equality_of_traced_values_names_equal_and_not_equal(device, fn):
    """Python's `!=` of traced values is their identity, a bool: the message said only
    "combines expressions and numbers, not bool"; it says why and what to write, and what
    it names computes numpy's x != x."""
    from zynbook.nn import expr as E
    x = np.array([1.0, np.nan, -np.inf, -0.0, 2.0], np.float32)
    dev = zynbook.device(device)
    b = dev.upload(x)
    with pytest.raises(ZynMLError) as info:
        dev.elementwise([b], 5, fn)
    msg = info.value.message
    assert "`!=`" in msg and "not traced" in msg and "not_equal(a, b)" in msg
    got = dev.download(dev.elementwise([b], 5, lambda xs: E.not_equal(xs[0], xs[0])))
    assert_equals_numpy(_host(got), (x != x).astype(np.float32), 0)
