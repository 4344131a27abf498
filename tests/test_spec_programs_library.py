"""The kernels of the spec's WGSL kernel library and GPU kernel library, written as ZynML
programs (hand-written compute blocks, the library's builtins and the device interface),
each run on every device present (the CPU reference included) and compared with numpy
written here."""
from __future__ import annotations

import math
import re
import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()
# devices that compute f64 (WebGPU refuses f64 math it would do in 32 bits)
F64_DEVICES = [d for d in DEVICES if d.startswith(("cpu", "cuda"))]

RNG = np.random.default_rng(4051)


def _erf(x):
    return np.vectorize(math.erf)(x)


def _check(src, inputs, want, tol, device):
    got = np.asarray(zynbook.Session(device=device).run(src, **inputs))
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


# name: (source, inputs, numpy's answer, tolerance)
F64_CASES = {
    # the tanh GELU with its constant written as `sqrt(2.0 / pi)`: a value of literals
    # meeting f64 is computed in f64 (cpu:native computed it in f32, 1e-8 off)
    "gelu_tanh_f64_constant_from_literals": ("""
let act = compute(feat) {
    @kernel elementwise
    @workgroup(96)
    for p in 0..count:
        let u = feat[p]
        out[p] = 0.5 * u * (1.0 + tanh(sqrt(2.0 / pi) * (u + 0.044715 * u * u * u)))
}
act
""", {"feat": (f := RNG.standard_normal(257) * 2)},
        0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3))), 1e-12),
    "f64_pow_of_literal_fraction": ("""
let y = compute(feat) {
    for p in 0..count:
        out[p] = feat[p] * pow(2.0, 1.0 / 3.0) - exp(1.0) + 7 / 2
}
y
""", {"feat": (f := RNG.standard_normal(33))}, f * 2 ** (1 / 3) - math.e + 3, 1e-13),
    # the exact GELU in f64: the reference's erf was a polynomial 1.5e-7 off
    "gelu_erf_f64": ("""
let act = compute(feat) {
    @kernel elementwise
    for p in 0..count:
        out[p] = 0.5 * feat[p] * (1.0 + erf(feat[p] * 0.7071067811865476))
}
act
""", {"feat": (f := RNG.standard_normal(1000) * 2)}, 0.5 * f * (1 + _erf(f / np.sqrt(2))),
        1e-13),
}


@pytest.mark.parametrize("device", F64_DEVICES)
@pytest.mark.parametrize("name", list(F64_CASES))
def test_f64_library_program_equals_numpy(name, device):
    _check(*F64_CASES[name], device)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


# name: (source, inputs, numpy's answer, tolerance), f32
CASES = {
    # `gelu` in a kernel is the exact (erf) GELU, the host's `gelu(x)` the library's tanh
    # form (the builtin's help said tanh for both)
    "gelu_in_kernel_is_the_erf_form": ("""
let act = compute(feat) {
    @kernel elementwise
    @workgroup(48)
    for p in 0..count:
        out[p] = gelu(feat[p])
}
act
""", {"feat": (f := (RNG.standard_normal(257) * 2).astype(np.float32))},
        0.5 * f.astype(np.float64) * (1 + _erf(f.astype(np.float64) / np.sqrt(2))), 2e-5),
    "gelu_on_the_host_is_the_tanh_form": ("gelu(feat)\n", {"feat": f},
                                          _gelu_tanh(f.astype(np.float64)), 2e-5),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_library_program_equals_numpy(name, device):
    _check(*CASES[name], device)


def test_gelu_help_names_both_forms():
    from zynbook.kernel.builtin_docs import BUILTIN_DOCS
    text = BUILTIN_DOCS["gelu"][1]
    assert "erf" in text and "tanh" in text


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("call", [
    lambda dev, x, w: dev.rope(x, 1, 1, 4, base=0.0),
    lambda dev, x, w: dev.rope(x, 1, 1, 4, base=-2.0),
    lambda dev, x, w: dev.rms_norm_rope(x, w, 1, 1, 4, base=float("nan")),
])
def test_rope_base_must_be_positive(call, device):
    # base^(-2i/d) of a base <= 0 was a Python ValueError from math.log
    dev = zynbook.device(device)
    x, w = dev.upload(np.ones(4, np.float32)), dev.upload(np.ones(4, np.float32))
    with pytest.raises(zynbook.ZynMLError, match="`base` must be a finite number above 0"):
        call(dev, x, w)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", ["rope(x, base=-1.0)", "rope(x, base=[2])",
                                 "rmsnorm(x, w, eps=-1e-5)", "rmsnorm(x, w, eps=true)"])
def test_library_keywords_are_checked(src, device):
    # a negative eps or base gave inf or NaN; a list or a string a Python error
    x, w = np.ones((2, 3, 4), np.float32), np.ones(4, np.float32)
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session(device=device).run(f"let y = {src}\ny\n", x=x, w=w)
    assert info.value.kind == "type" and "takes a finite number" in info.value.message


@pytest.mark.parametrize("device", DEVICES)
def test_rope_of_odd_start_positions_equals_numpy(device):
    s, h, d, p0 = 7, 3, 8, 99
    x = RNG.standard_normal((s, h * d)).astype(np.float32)
    dev = zynbook.device(device)
    got = dev.download(dev.rope(dev.upload(x), s, h, d, pos0=p0, base=500.0))
    theta = (p0 + np.arange(s))[:, None] * 500.0 ** (-2 * np.arange(d // 2) / d)
    c, sn = np.cos(theta)[:, None], np.sin(theta)[:, None]
    xr = x.astype(np.float64).reshape(s, h, d)
    want = np.empty_like(xr)
    want[..., 0::2] = xr[..., 0::2] * c - xr[..., 1::2] * sn
    want[..., 1::2] = xr[..., 0::2] * sn + xr[..., 1::2] * c
    np.testing.assert_allclose(got, want.ravel(), rtol=2e-4, atol=2e-4)


def _rope(x, base=10000.0):
    seq, hd = x.shape[-2:]
    theta = np.arange(seq)[:, None] * base ** (-2 * np.arange(hd // 2) / hd)
    c, s = np.cos(theta), np.sin(theta)
    x = x.astype(np.float64)
    y = np.empty_like(x)
    y[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    y[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return y


def _sinkhorn(m, iterations):
    p = np.exp(m.astype(np.float64) - m.max())
    for _ in range(iterations):
        p = p / p.sum(1, keepdims=True)
        p = p / p.sum(0, keepdims=True)
    return p


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, make, numpy_answer", [
    ("rope(x, base=500.0)", lambda: RNG.standard_normal((3, 7, 8)), lambda x: _rope(x, 500.0)),
    ("sinkhorn(x, iterations=3)", lambda: RNG.standard_normal((33, 33)),
     lambda x: _sinkhorn(x, 3)),
])
def test_half_precision_library_kernels_give_half_results(src, make, numpy_answer, device):
    # rope() and sinkhorn() of f16 gave f32 (the f32 tables and the f32 scalar max met
    # the f16 input), where the other library kernels give f16
    x = make().astype(np.float16)
    got = zynbook.Session(device=device).run(f"let y = {src}\ny\n", x=x)
    assert got.dtype == "f16"
    np.testing.assert_allclose(got.numpy().astype(np.float64), numpy_answer(x),
                               rtol=1e-2, atol=2e-3)


_FLASH_TOO_BIG = """
let ctx = compute(qq, kk, vv) {
    @kernel flash_attention
    @tile(block_q=64, block_kv=16384)
    for bb in 0..nb, hh in 0..nh:
        for q0 in 0..lq step 16:
            var top = -inf
            var den = 0.0
            var acc = zeros(16, hd)
            for k0 in 0..lk step 16:
                let sc = qq[bb, hh, q0:q0+16] @ transpose(kk[bb, hh, k0:k0+16]) / sqrt(hd)
                let nt = max(top, row_max(sc))
                let nd = exp(top - nt) * den + row_sum(exp(sc - nt))
                acc = exp(top - nt) * acc + exp(sc - nt) @ vv[bb, hh, k0:k0+16]
                top = nt
                den = nd
            out[bb, hh, q0:q0+16] = acc / den
}
ctx
"""


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_flash_tile_past_the_shared_memory_is_refused_naming_both_numbers(device):
    # (64 + 2 * 16384) * 16 * 4 bytes; OpenGL's WebGPU adapter ran it (its program of every
    # size set checked only a head_dim written into the kernel) where Vulkan's refused it
    qkv = np.ones((1, 1, 33, 16), np.float32)
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session(device=device).run(_FLASH_TOO_BIG, qq=qkv, kk=qkv, vv=qkv, hd=16)
    err = info.value
    assert (err.kind, err.line, err.column) == ("device", 4, 5), err.render()
    assert "needs 2101248 bytes of shared memory" in err.message
    assert re.search(r"has \d+ bytes per block", err.message)


@pytest.mark.parametrize("device", [d for d in DEVICES if not d.startswith(("cpu", "cuda"))])
def test_launch_ir_of_a_webgpu_device_is_its_adapters(device):
    # an OpenGL (or DX12) adapter's inspector showed the CUDA target's program
    x = RNG.standard_normal((5, 33)).astype(np.float32)
    session = zynbook.Session(device=device)
    session.run("""
let probs = compute(logits) {
    @kernel softmax
    @workgroup(96)
    for row in 0..nrow:
        var hi = -inf
        for col in 0..ncol:
            hi = max(hi, logits[row, col])
        var tot = 0.0
        for col in 0..ncol:
            tot += exp(logits[row, col] - hi)
        for col in 0..ncol:
            out[row, col] = exp(logits[row, col] - hi) / tot
}
probs
""", logits=x)
    text = session.last_kernels[0].launch_ir_text
    assert text.startswith("// target: webgpu"), text.splitlines()[0]
