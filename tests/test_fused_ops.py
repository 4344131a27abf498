"""The fused-op library (zynbook/nn/fused.py): LayerNorm + Linear, RMSNorm + RoPE, SwiGLU,
GeGLU, Residual + LayerNorm and Softmax + Dropout, forward and backward, equal PyTorch
autograd on the CPU; every other device present gives the CPU's result. Dropout's Philox
generator equals Philox-4x32-10 written here in Python and its published test vectors, and
draws the same mask on every device."""
from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pytest

import zynbook
from zynbook import nn
from zynbook.errors import ZynMLShapeError, ZynMLTypeError
from zynbook.nn.fused import philox_reference

from tolerances import assert_within

torch = pytest.importorskip("torch")

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
OTHER_DEVICES = [d["id"] for d in zynbook.compute_devices()
                 if d["id"] != "cpu" and not d["id"].startswith("gl:")
                 and (not _WANTED or d["id"] in _WANTED.split(","))]
TOL = {"rtol": 2e-4, "atol": 3e-5}
F = torch.nn.functional


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def T(a, grad=False):
    return torch.tensor(np.asarray(a, np.float32), requires_grad=grad)


def philox_u(n, seed, offset):
    """The uniforms of philox_uniform, from the Python Philox."""
    key = [seed & 0xFFFFFFFF, seed >> 32]
    return np.array([(philox_reference([i, offset, 0, 0], key)[0] >> 8) * 2.0 ** -24
                     for i in range(n)], np.float32)


def rope_ref(x, seq, heads, hd, pos0=0, base=10000.0):
    x = x.reshape(seq, heads, hd // 2, 2)
    freq = base ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
    ang = ((pos0 + torch.arange(seq, dtype=torch.float64))[:, None] * freq[None, :]).float()
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0], x[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(seq, heads * hd)


def grads_of(fn, arrays, dy):
    """(output, gradients of every input) of a PyTorch function, by autograd."""
    ts = [T(a, True) for a in arrays]
    y = fn(*ts)
    y.backward(T(dy))
    return [y.detach().numpy().ravel()] + [t.grad.numpy().ravel() for t in ts]


# each case: run(dev) -> [forward, backward outputs...]; ref() -> the same from PyTorch

def case_layernorm_linear(rng):
    R, D, N = 5, 7, 3
    x, g, b, w, dy = rand(rng, R, D), rand(rng, D), rand(rng, D), rand(rng, D, N), rand(rng, R, N)

    def run(d):
        bufs = [d.upload(a) for a in (x, g, b, w)]
        y = d.layernorm_linear(*bufs, R, D, N, 1e-5)
        back = d.layernorm_linear_backward(*bufs, d.upload(dy), R, D, N, 1e-5)
        return [d.download(y)] + [d.download(t) for t in back]
    return run, lambda: grads_of(
        lambda x, g, b, w: F.layer_norm(x, (D,), g, b, 1e-5) @ w, [x, g, b, w], dy)


def case_residual_layernorm(rng):
    R, D = 4, 9
    x, res, g, b, dy = rand(rng, R, D), rand(rng, R, D), rand(rng, D), rand(rng, D), rand(rng, R, D)

    def run(d):
        bufs = [d.upload(a) for a in (x, res, g, b)]
        y = d.residual_layernorm(*bufs, R, D, 1e-5)
        dx, dg, db = d.residual_layernorm_backward(*bufs, d.upload(dy), R, D, 1e-5)
        return [d.download(t) for t in (y, dx, dx, dg, db)]     # d residual = dx
    return run, lambda: grads_of(
        lambda x, r, g, b: F.layer_norm(x + r, (D,), g, b, 1e-5), [x, res, g, b], dy)


def case_rms_norm_rope(pos0):
    def make(rng):
        S, H, HD = 5, 3, 6
        x, w, dy = rand(rng, S, H * HD), rand(rng, H * HD), rand(rng, S, H * HD)

        def run(d):
            bx, bw = d.upload(x), d.upload(w)
            y = d.rms_norm_rope(bx, bw, S, H, HD, 1e-5, pos0=pos0)
            dx, dw = d.rms_norm_rope_backward(bx, bw, d.upload(dy), S, H, HD, 1e-5, pos0=pos0)
            return [d.download(t) for t in (y, dx, dw)]
        return run, lambda: grads_of(
            lambda x, w: rope_ref(F.rms_norm(x, (H * HD,), w, 1e-5), S, H, HD, pos0), [x, w], dy)
    return make


def case_glu(kind):
    def make(rng):
        R, D, Hd = 4, 5, 7
        x, wg, wu, dy = rand(rng, R, D), rand(rng, D, Hd), rand(rng, D, Hd), rand(rng, R, Hd)
        act = F.silu if kind == "swiglu" else (lambda v: F.gelu(v))

        def run(d):
            bufs = [d.upload(a) for a in (x, wg, wu)]
            y = getattr(d, kind)(*bufs, R, D, Hd)
            back = getattr(d, kind + "_backward")(*bufs, d.upload(dy), R, D, Hd)
            return [d.download(y)] + [d.download(t) for t in back]
        return run, lambda: grads_of(lambda x, wg, wu: act(x @ wg) * (x @ wu), [x, wg, wu], dy)
    return make


def case_softmax_dropout(p, seed, offset):
    def make(rng):
        R, N = 4, 13
        x, dy = rand(rng, R, N, scale=2.0), rand(rng, R, N)
        keep = torch.tensor((philox_u(R * N, seed, offset) >= np.float32(p)).reshape(R, N))

        def run(d):
            bx = d.upload(x)
            y = d.softmax_dropout(bx, R, N, p, seed, offset)
            dx = d.softmax_dropout_backward(bx, d.upload(dy), R, N, p, seed, offset)
            return [d.download(y), d.download(dx)]
        return run, lambda: grads_of(
            lambda x: torch.softmax(x, -1) * keep / (1 - p), [x], dy)
    return make


CASES = {
    "layernorm_linear": case_layernorm_linear,
    "residual_layernorm": case_residual_layernorm,
    "rms_norm_rope pos0 0": case_rms_norm_rope(0),
    "rms_norm_rope pos0 5": case_rms_norm_rope(5),
    "swiglu": case_glu("swiglu"),
    "geglu": case_glu("geglu"),
    "softmax_dropout p 0.3": case_softmax_dropout(0.3, 1234, 0),
    "softmax_dropout p 0.5 wide seed": case_softmax_dropout(0.5, (7 << 32) + 99, 17),
}
ON_EVERY_DEVICE = [n for n in CASES if n not in ("rms_norm_rope pos0 0",
                                                 "softmax_dropout p 0.3")]


def _case(name):
    return CASES[name](np.random.default_rng(zlib.crc32(name.encode())))


@pytest.mark.parametrize("name", list(CASES))
def test_cpu_equals_pytorch_autograd(name):
    run, ref = _case(name)
    got, want = run(nn.device("cpu")), ref()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert_within(g, w, **TOL)


@pytest.mark.parametrize("device_id", OTHER_DEVICES)
@pytest.mark.parametrize("name", ON_EVERY_DEVICE)
def test_every_device_equals_cpu(name, device_id):
    run, _ref = _case(name)
    want, got = run(nn.device("cpu")), run(nn.device(device_id))
    for g, w in zip(got, want):
        assert_within(g, w, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- the generator

def test_python_philox_matches_the_published_test_vectors():
    # Random123's known-answer vectors for philox4x32_10
    assert philox_reference([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C,
                                                      0x9B00DBD8]
    assert philox_reference([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert philox_reference([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                            [0xA4093822, 0x299F31D0]) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420,
                                                          0x24126EA1]


@pytest.mark.parametrize("device_id", ["cpu"] + OTHER_DEVICES)
def test_philox_bits_are_the_same_on_every_device(device_id):
    d = nn.device(device_id)
    for seed, offset in ((0, 0), ((3 << 32) + 0xFFFFFFFF, 4000000000)):
        u = d.download(d.philox_uniform(37, seed, offset))
        np.testing.assert_array_equal(u, philox_u(37, seed, offset))


def test_dropout_keeps_about_one_minus_p_and_depends_on_seed_and_offset():
    d = nn.device("cpu")
    u = d.download(d.philox_uniform(4000, 5, 0))
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs((u >= 0.25).mean() - 0.75) < 0.03
    assert abs(u.mean() - 0.5) < 0.02
    assert not np.array_equal(u[:50], d.download(d.philox_uniform(50, 6, 0)))
    assert not np.array_equal(u[:50], d.download(d.philox_uniform(50, 5, 1)))
    x = d.upload(np.zeros(40))
    y = d.download(d.softmax_dropout(x, 4, 10, 0.0, 1))
    np.testing.assert_allclose(y, np.full(40, 0.1), rtol=1e-6)     # p = 0 drops nothing


def test_fused_op_mistakes_are_zynml_errors():
    d = nn.device("cpu")
    a = d.upload(np.zeros(12))
    with pytest.raises(ZynMLShapeError, match=r"`w` has 12 elements but dim \* n_out = 4 \* 2 = 8"):
        d.layernorm_linear(a, d.upload(np.ones(4)), d.upload(np.zeros(4)), a, 3, 4, 2)
    with pytest.raises(ZynMLShapeError, match="head_dim = 3 must be even"):
        d.rms_norm_rope(a, d.upload(np.ones(6)), 2, 2, 3)
    with pytest.raises(ZynMLTypeError, match="drop probability"):
        d.softmax_dropout(a, 3, 4, 1.5, 0)       # (p = 1 gives zeros)
    with pytest.raises(ZynMLTypeError, match="seed"):
        d.softmax_dropout(a, 3, 4, 0.1, -1)
    with pytest.raises(ZynMLShapeError, match="`grad_output` has 12 elements but rows \\* hidden"):
        d.swiglu_backward(a, a, a, a, 3, 4, 3)
