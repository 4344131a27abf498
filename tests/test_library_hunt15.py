"""The kernel library as ZynML programs call it, on every device, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError

from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(20261201)


def _gelu(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _rmsnorm(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _sinkhorn(m, iterations=20):
    p = np.exp(m.astype(np.float64))
    for _ in range(iterations):
        p = p / p.sum(1, keepdims=True)
        p = p / p.sum(0, keepdims=True)
    return p


# every library builtin of one placed input: (program, reference)
PLACED = {
    "gelu": ("gelu(X.to_device(D))", lambda x, w: _gelu(x)),
    "silu": ("silu(X.to_device(D))", lambda x, w: x / (1 + np.exp(-x.astype(np.float64)))),
    "rmsnorm": ("rmsnorm(X.to_device(D), W)", lambda x, w: _rmsnorm(x, w)),
    "rmsnorm_weight": ("rmsnorm(X, W.to_device(D), eps=0.5)", lambda x, w: _rmsnorm(x, w, 0.5)),
    "sinkhorn": ("sinkhorn(X[0:3, 0:3].to_device(D), iterations=3)",
                 lambda x, w: _sinkhorn(x[:3, :3], 3)),
}


@pytest.mark.parametrize("name", sorted(PLACED))
@pytest.mark.parametrize("placed", DEVICES)
@pytest.mark.parametrize("session", ["cpu", DEVICES[-1]])
def test_a_library_kernel_runs_where_its_placed_input_lives(name, placed, session):
    # a library kernel is a compute block: it runs on the device its committed inputs
    # share, as sinkhorn did; gelu, silu, rmsnorm and rope viewed their input in another
    # shape, which left it uncommitted, and ran on the session's default device instead
    src, ref = PLACED[name]
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    w = RNG.standard_normal(8).astype(np.float32)
    s = zynbook.Session(session)
    y = s.run(src, X=x, W=w, D=placed)
    assert y.device == placed
    assert_equals_numpy(y.numpy(), ref(x, w), 1e-5)
    # the result stays committed there: joined with another device's placed tensor it is
    # the device error of the placement rule
    other = next((d for d in DEVICES if d != placed and {d, placed} != {"cpu", "cpu:native"}),
                 None)
    if other is not None:
        with pytest.raises(ZynMLError) as info:
            s.run(f"let y = {src}\nconcat([y, zeros([1, shape(y)[1]]).to_device(O)])",
                  X=x, W=w, D=placed, O=other)
        assert info.value.kind == "device"


@pytest.mark.parametrize("placed", DEVICES)
def test_rope_of_a_placed_input_runs_there(placed):
    x = RNG.standard_normal((2, 5, 6)).astype(np.float32)
    seq, hd = 5, 6
    ang = np.arange(seq)[:, None] * 10000.0 ** (-np.arange(0, hd, 2) / hd)
    c, sn = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2].astype(np.float64), x[..., 1::2]
    want = np.empty(x.shape)
    want[..., 0::2], want[..., 1::2] = x0 * c - x1 * sn, x0 * sn + x1 * c
    y = zynbook.Session("cpu").run("rope(X.to_device(D))", X=x, D=placed)
    assert y.device == placed
    assert_equals_numpy(y.numpy(), want, 1e-5)


def test_library_kernel_inputs_placed_on_two_devices_are_a_device_error():
    pair = [d for d in DEVICES if d not in ("cpu", "cpu:native")][:1] + ["cpu"]
    if len(pair) < 2:
        pytest.skip("one memory only")
    s = zynbook.Session("cpu")
    with pytest.raises(ZynMLError) as info:
        s.run("rmsnorm(X.to_device(A), W.to_device(B))", X=np.ones((2, 4), np.float32),
              W=np.ones(4, np.float32), A=pair[0], B=pair[1])
    err = info.value
    assert err.kind == "device" and "^" in err.render()
    assert pair[0] in str(err) and pair[1] in str(err)


@pytest.mark.skipif("cpu:native" not in DEVICES, reason="no cpu:native")
@pytest.mark.parametrize("mine, other", [("cpu", "cpu:native"), ("cpu:native", "cpu")])
def test_interface_operations_run_on_their_device_whatever_host_buffer_they_take(mine, other):
    # the interface shares the library's views of its buffers; those stay uncommitted, so
    # an operation of cpu:native given a buffer of cpu (the same memory) runs on cpu:native
    dev, there = zynbook.device(mine), zynbook.device(other)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    b = there.upload(x)
    y = dev.softmax(b, 3, 5)
    assert y.device == mine
    e = np.exp(x - x.max(1, keepdims=True))
    assert_equals_numpy(dev.download(y), (e / e.sum(1, keepdims=True)).ravel(), 1e-6)
    z = dev.matmul(b, dev.transpose_2d(b, 3, 5), 3, 5, 3)
    assert z.device == mine
    assert_equals_numpy(dev.download(z), (x.astype(np.float64) @ x.T).ravel(), 1e-5)


@pytest.mark.parametrize("source, kind, line, column, message", [
    ("rmsnorm(ones([2, 4]), ones([4]), eps=inf)", "type", 1, 38, "eps= takes a finite"),
    ("rmsnorm(ones([2, 4]), ones([3]))", "shape", 1, 23, "weight [3] does not match"),
    ("rmsnorm(ones([2, 4]), \"w\")", "type", 1, 23, "weight must be a tensor"),
    ("rmsnorm(tensor([1, 2]), ones([2]))", "type", 1, 9, "x must be a float tensor"),
    ("let x = ones([2, 4])\nrope(x, bas=2.0)", "type", 2, 13, "no parameter `bas`"),
    ("rope(ones([2, 4]), base=-1.0)", "type", 1, 25, "base= takes a finite number above 0"),
    ("sinkhorn(ones([2, 2]), iterations=0)", "type", 1, 35, "sinkhorn(): iterations="),
    ("gelu(\"a\")", "type", 1, 6, "gelu(): x must be a tensor"),
    ("silu(ones([2]), alpha=1.0)", "type", 1, 23, "silu() has no parameter `alpha`"),
])
def test_a_library_argument_at_fault_has_the_caret(source, kind, line, column, message):
    # the caret was under the whole call, whichever argument was at fault, where other
    # builtins put it under the argument
    from compute_testing import raises
    err = raises(kind, source, line, column)
    assert message in str(err)
