"""The kernel library (zynbook/library): every kernel equals numpy, on the CPU reference and
on a WebGPU adapter (Mesa's lavapipe where there is no GPU)."""
from __future__ import annotations

import numpy as np
import pytest

from zynbook import library
from zynbook.backends.webgpu import discover
from zynbook.errors import ZynMLShapeError, ZynMLTypeError
from zynbook.session import Session

from test_examples_cpu import np_rope as np_rotate_pairs

WEBGPU = discover()
DEVICES = ["cpu"] + ([pytest.param(WEBGPU[0].aliases[0], marks=pytest.mark.webgpu)]
                     if WEBGPU else [])

RNG = np.random.default_rng(7)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


def np_attention(q, k, v, mask=None):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def np_rope(x, base=10000.0):
    seq, hd = x.shape[-2], x.shape[-1]
    theta = base ** (-2.0 * np.arange(hd // 2) / hd)
    ang = np.arange(seq)[:, None] * theta[None, :]
    return np_rotate_pairs(x, np.cos(ang), np.sin(ang))


def _cases():
    a, b = randn(37, 29), randn(29, 45)
    a3, b3 = randn(2, 9, 13), randn(2, 13, 6)
    x = randn(3, 5, 70)
    w = RNG.random(70).astype(np.float32)
    e = randn(4, 33) * 3
    r = randn(2, 3, 10, 8)
    q, k, v = randn(1, 2, 19, 8), randn(1, 2, 23, 8), randn(1, 2, 23, 8)
    mask = RNG.random((19, 23)) > 0.3
    mask[:, 0] = True
    gx = e.astype(np.float64)
    return {
        "gemm": ("gemm", [a, b], {}, a.astype(np.float64) @ b),
        "gemm_batched": ("gemm", [a3, b3], {}, a3.astype(np.float64) @ b3),
        "softmax": ("softmax", [x], {},
                    np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
        "rmsnorm": ("rmsnorm", [x, w], {"eps": 1e-5},
                    x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * w),
        "silu": ("silu", [e], {}, gx / (1 + np.exp(-gx))),
        "gelu": ("gelu", [e], {}, 0.5 * gx * (1 + np.tanh(0.7978845608 * (gx + 0.044715 * gx ** 3)))),
        "rope": ("rope", [r], {}, np_rope(r)),
        "attention": ("attention", [q, k, v], {}, np_attention(q, k, v)),
        "attention_mask": ("attention", [q, k, v], {"mask": mask}, np_attention(q, k, v, mask)),
    }


CASES = _cases()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_library_kernel_equals_numpy(device, case):
    name, args, kwargs, want = CASES[case]
    got = library.call(name, Session(device), args, kwargs)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(host(got), want, **TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_sinkhorn_is_doubly_stochastic(device):
    m = randn(24, 24)
    p = host(library.call("sinkhorn", Session(device), [m], {"iterations": 30}))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-4)
    np.testing.assert_allclose(p.sum(0), 1.0, atol=1e-5)
    # the same iteration in numpy
    want = np.exp(m.astype(np.float64) - m.max())
    for _ in range(30):
        want = want / want.sum(1, keepdims=True)
        want = want / want.sum(0, keepdims=True)
    np.testing.assert_allclose(p, want, rtol=1e-3, atol=1e-6)


@pytest.mark.skipif(not WEBGPU, reason="no wgpu adapter")
@pytest.mark.webgpu
def test_library_runs_on_the_sessions_device_with_the_fast_schedules():
    dev = WEBGPU[0]
    s = Session(dev.aliases[0])
    y = library.call("softmax", s, [randn(6, 40)], {})
    assert y.device == dev.id
    z = library.call("gemm", s, [y, randn(40, 3)], {})
    assert z.device == dev.id
    kernels = library._session_for(dev.aliases[0]).last_kernels
    assert kernels[-1].launch.geometry["schedule"].startswith("contraction as GEMM")
    q = randn(1, 1, 5, 4)
    library.call("attention", s, [q, q, q], {})
    kernels = library._session_for(dev.aliases[0]).last_kernels
    assert "(attention: " in kernels[-1].launch.geometry["schedule"]


def test_library_errors():
    s = Session("cpu")
    with pytest.raises(ZynMLShapeError):
        library.call("sinkhorn", s, [randn(3, 4)], {})
    with pytest.raises(ZynMLShapeError):
        library.call("gemm", s, [randn(3, 4), randn(5, 2)], {})
    with pytest.raises(ZynMLTypeError):
        library.call("rmsnorm", s, [randn(3, 4), randn(4)], {"epsilon": 1.0})
    with pytest.raises(ZynMLTypeError):
        library.call("no_such_kernel", s, [], {})


def test_call_leaves_the_callers_names_alone():
    s = Session("cpu")
    s.run("let x = 5")
    library.call("silu", s, [randn(4)], {})
    assert s.namespace["x"] == 5 and "y" not in s.namespace


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_whose_values_are_wider_than_the_keys(device, masked):
    """Scores are scaled by q's and k's head_dim, not by v's width (the kernel scaled by
    sqrt of v's last axis when the two differ, a silently wrong softmax)."""
    q, k, v = randn(2, 3, 5, 4), randn(2, 3, 7, 4), randn(2, 3, 7, 6)
    mask = np.tril(np.ones((5, 7), bool)) if masked else None
    got = library.call("attention", Session(device), [q, k, v], {"mask": mask} if masked else {})
    np.testing.assert_allclose(host(got), np_attention(q, k, v, mask), **TOL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_rmsnorm_keeps_the_dtype_of_its_inputs(device, dtype):
    """Half-precision inputs give a half-precision result, computed in f32 as torch's
    rms_norm does (eps, an f32 scalar, made the result f32 while gelu and silu kept f16)."""
    x, w = randn(3, 70).astype(dtype), randn(70).astype(dtype)
    got = library.call("rmsnorm", Session(device), [x, w], {"eps": 1e-5})
    assert got.dtype == {np.float16: "f16", np.float32: "f32"}[dtype]
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * w
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else TOL
    np.testing.assert_allclose(host(got), want, **tol)
