"""The compute-device interface as a user writes it from the trait's text, at the edges the
other training tests leave, on every device: references are torch (autograd,
torch.optim.AdamW) or numpy written here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from zynbook.nn import expr as E

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "gl:"))]
RNG = np.random.default_rng(20261130)


def _f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------------------------------------ elementwise

@pytest.mark.parametrize("device", DEVICES)
def test_comparisons_are_ones_and_zeros_in_traced_arithmetic(device):
    # the trait's expressions are all f32: `g * (x > 0)` (ReLU's gradient) and a number
    # as where's condition; both were ZynML type errors on the generated source
    x = np.array([-2.0, -0.0, 0.0, 1.5, 3.0, 0.5, -1.0], np.float32)
    y = np.array([1.0, 0.0, 0.0, 1.5, -3.0, 2.0, 0.0], np.float32)
    dev = zynbook.device(device)
    bx, by = dev.upload(x), dev.upload(y)
    got = dev.elementwise([bx, by], 7, lambda v: E.equal(v[0], v[1]) + (v[0] >= 0.0) * 2.0
                          - (v[1] < v[0]) + E.exp(-(v[0] > 0.0)))
    f = lambda b: b.astype(np.float64)      # noqa: E731
    want = f(x == y) + f(x >= 0) * 2 - f(y < x) + np.exp(-f(x > 0))
    np.testing.assert_allclose(dev.download(got), want, rtol=1e-6)
    got = dev.elementwise([bx, by], 7, lambda v: E.where(v[1], v[0], -1.0)
                          + E.where(v[0] > 0.0, v[0] > 1.0, 7.0) + ((v[0] > 0.0) < 0.5))
    want = np.where(y != 0, x, -1.0) + np.where(x > 0, f(x > 1), 7.0) + f(f(x > 0) < 0.5)
    np.testing.assert_allclose(dev.download(got), want, rtol=1e-6)


CLIP_PROGRAM = """pipeline clip(xs):
    return xs[0] * scale
let g = upload(G)
let sq = elementwise([g, g], n, square)
let norm = sqrt(download(reduce_sum(sq, [n], 0))[0])
var scale = 1.0
if norm > max_norm:
    scale = max_norm / norm
download(elementwise([g], n, clip))
"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_scale_computed_on_the_device_is_a_constant_of_a_traced_expression(device):
    # clipping a gradient to a global norm: the norm, a 0-d tensor (or array), was refused
    # ("combines expressions and numbers, not Tensor")
    g = _f32(13, scale=3.0)
    want = g * min(1.0, 2.0 / np.linalg.norm(g.astype(np.float64)))
    square = "pipeline square(xs):\n    return xs[0] * xs[1]\n"
    got = zynbook.run(square + CLIP_PROGRAM, device=device, G=g, n=13, max_norm=2.0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    dev = zynbook.device(device)
    b = dev.upload(g)
    for s in (np.array(0.25), torch.tensor(0.25)):
        for f in (lambda v: v[0] * s, lambda v: s * v[0]):
            np.testing.assert_allclose(dev.download(dev.elementwise([b], 13, f)), g * 0.25,
                                       rtol=1e-6)



@pytest.mark.parametrize("device", DEVICES)
def test_a_function_returning_a_numpy_number_fills_every_element(device):
    # a Python number did; np.float32(2.5) and a 0-d array were "must return an expression"
    dev = zynbook.device(device)
    b = dev.upload(_f32(5))
    for value in (np.float32(2.5), np.array(2.5), torch.tensor(2.5),
                  torch.nn.Parameter(torch.tensor(2.5))):      # numpy refuses a parameter
        np.testing.assert_array_equal(dev.download(dev.elementwise([b], 5, lambda v: value)),
                                      np.full(5, 2.5, np.float32))


# ------------------------------------------------------------------ upload

@pytest.mark.parametrize("device", DEVICES)
def test_upload_takes_a_torch_parameter_that_requires_grad(device):
    # torch's numpy() refuses such a tensor: a RuntimeError reached the caller
    w = torch.nn.Parameter(torch.tensor(_f32(3, 5)))
    dev = zynbook.device(device)
    np.testing.assert_array_equal(dev.download(dev.upload(w)), w.detach().numpy().ravel())
    ids = torch.tensor([3, 1, 4], dtype=torch.float32, requires_grad=True).long()
    np.testing.assert_array_equal(dev.download(dev.upload_u32(ids)), [3, 1, 4])


@pytest.mark.parametrize("device", DEVICES)
def test_a_long_traced_chain_is_one_kernel(device):
    # y = y * a + b step after step (an unrolled recurrence): 300 steps nested past what the
    # parser takes (a syntax error telling the user to split what they never wrote), 1200
    # past Python's stack (RecursionError)
    x = _f32(7)
    want = x.astype(np.float64)

    def chain(v, steps):
        y = v[0]
        for s in range(steps):
            y = E.tanh(y) * 0.9 + 0.01 * (s % 7) if s % 100 == 0 else y * 0.999 + 0.001
        return y
    for s in range(1200):
        want = np.tanh(want) * 0.9 + 0.01 * (s % 7) if s % 100 == 0 else want * 0.999 + 0.001
    dev = zynbook.device(device)
    got = dev.elementwise([dev.upload(x)], 7, lambda v: chain(v, 1200))
    np.testing.assert_allclose(dev.download(got), want, rtol=1e-4)


# ------------------------------------------------------------------ sizes of zero

def _zero_row_cases(d):
    """(call, each result's values) for no rows (positions, elements), as torch gives them:
    empty results and zero weight gradients (a sum over no rows)."""
    z = lambda n: d.upload(np.zeros(n, np.float32))     # noqa: E731
    ones = lambda n: d.upload(np.ones(n, np.float32))   # noqa: E731
    e = np.zeros(0)
    return {
        "philox_uniform": (lambda: d.philox_uniform(0, 1), [e]),
        "softmax_dropout": (lambda: d.softmax_dropout(z(0), 0, 3, 0.1, 1), [e]),
        "softmax_dropout_backward": (
            lambda: d.softmax_dropout_backward(z(0), z(0), 0, 3, 0.1, 1), [e]),
        "layernorm_linear_backward": (
            lambda: d.layernorm_linear_backward(z(0), ones(3), ones(3), ones(6), z(0), 0, 3, 2),
            [e, np.zeros(3), np.zeros(3), np.zeros(6)]),
        "residual_layernorm": (lambda: d.residual_layernorm(z(0), z(0), ones(3), ones(3), 0, 3),
                               [e]),
        "rms_norm_rope_backward": (lambda: d.rms_norm_rope_backward(z(0), ones(4), z(0), 0, 2, 2),
                                   [e, np.zeros(4)]),
        "swiglu_backward": (lambda: d.swiglu_backward(z(0), ones(6), ones(6), z(0), 0, 3, 2),
                            [e, np.zeros(6), np.zeros(6)]),
        "geglu": (lambda: d.geglu(z(0), ones(6), ones(6), 0, 3, 2), [e]),
        "rope": (lambda: d.rope(z(0), 0, 1, 6), [e]),
        "append_rows of no new rows": (lambda: d.append_rows(ones(6), z(0), 2, 0, 3),
                                       [np.ones(6)]),
        "write_rows of no rows": (lambda: d.write_rows(ones(6), z(0), 1, 2, 0, 3), [np.ones(6)]),
        "kv_attention_fixed of no queries": (
            lambda: d.kv_attention_fixed(z(0), ones(40), ones(40), 3, 0, 5, 2, 2, 4), [e]),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_zero_row_cases(zynbook.device("cpu"))))
def test_fused_ops_of_no_rows(device, case):
    # the interface's own operations take sizes of 0; the fused ops, RoPE and the cache's
    # rows refused them (`rows` must be at least 1)
    d = zynbook.device(device)
    call, want = _zero_row_cases(d)[case]
    got = call()
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(d.download(g), w)


def test_an_empty_prompt_or_sequence_is_named_as_having_no_tokens():
    # [] is numpy's float64: it was "the prompt are integer token ids"
    from zynbook.errors import ZynMLShapeError
    from zynbook.nn.model import GPTConfig, TinyGPT
    model = TinyGPT(zynbook.device("cpu"), GPTConfig(vocab=11, dim=8, n_layers=1, n_heads=2,
                                                     n_kv_heads=1, ffn=16, max_seq=8))
    with pytest.raises(ZynMLShapeError, match="the prompt holds 0 tokens"):
        model.generate([], 2)
    with pytest.raises(ZynMLShapeError, match="ids holds 0 tokens"):
        model.train_step([], [])


# ------------------------------------------------------------------ weights

def _safetensors_entries(path):
    """{name: (dtype code, shape, raw bytes)} of a safetensors file, read here."""
    import json
    import struct
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def test_save_weights_takes_torch_parameters_bf16_tensors_and_scalars(tmp_path):
    # a torch parameter and a bf16 tensor were refused ("`w` is a Tensor, not a tensor"), a
    # ZynML bf16 tensor was written as F32, and a 0-d value with shape [1]
    bf = torch.tensor([[1.5, -3.0e-3, 7.0], [2.0 ** -130, -0.0, 300.0]], dtype=torch.bfloat16)
    zbf = zynbook.run("let y = compute(x) {\n    for i in 0..n:\n        out[i] = bf16(x[i])\n}\n"
                      "y\n", device="cpu", x=np.array([1.1, -2.7, 1e-3], np.float32))
    param = torch.nn.Parameter(torch.tensor(_f32(2, 3)))
    path = tmp_path / "w.safetensors"
    zynbook.save_weights(path, {"bf": bf, "zbf": zbf, "param": param, "scale": np.float32(0.5),
                                "step": 7})
    got = _safetensors_entries(path)
    bits = bf.view(torch.int16).numpy().astype("<i2").tobytes()
    assert got["bf"] == ("BF16", [2, 3], bits)
    want = torch.tensor([1.1, -2.7, 1e-3]).to(torch.bfloat16).view(torch.int16).numpy()
    assert got["zbf"] == ("BF16", [3], want.astype("<i2").tobytes())
    assert got["param"] == ("F32", [2, 3], param.detach().numpy().astype("<f4").tobytes())
    assert got["scale"] == ("F32", [], np.float32(0.5).astype("<f4").tobytes())
    assert got["step"][:2] == ("I64", [])


# ------------------------------------------------------------------ AdamW

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.9999, 0.99999)])
def test_adamw_moments_equal_torch_f32_at_betas_near_one(betas, device):
    # 1 - beta taken in f32 in the kernel: f32(0.999) is not 0.999, so v was off by 1.3e-5
    # of itself at the default betas and by 1.4e-3 at 0.99999 (torch takes 1 - beta2 in
    # f64)
    n, b1, b2 = 37, *betas
    p0, grads = _f32(n), [_f32(n) for _ in range(3)]
    leaf = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.AdamW([leaf], lr=1e-3, betas=betas, eps=1e-8, weight_decay=0.1)
    dev = zynbook.device(device)
    p, m, v = dev.upload(p0), dev.alloc(n), dev.alloc(n)
    for t, g in enumerate(grads, 1):
        leaf.grad = torch.tensor(g)
        opt.step()
        dev.adamw_step(p, dev.upload(g), m, v, 1e-3, b1, b2, 1e-8, 0.1, t)
    state = opt.state[leaf]
    for got, want in ((m, state["exp_avg"]), (v, state["exp_avg_sq"])):
        want = want.numpy()
        np.testing.assert_allclose(dev.download(got), want, rtol=1e-6,
                                   atol=1e-6 * np.abs(want).max())
    # the parameters to a few of their f32 units (compiled code may fuse a multiply-add)
    np.testing.assert_allclose(dev.download(p), leaf.detach().numpy(), rtol=0,
                               atol=4 * np.finfo(np.float32).eps * np.abs(p0).max())


def test_a_torch_parameter_is_a_hyperparameter():
    # a learnable scalar given as lr: np.asarray raised torch's RuntimeError at the caller
    dev = zynbook.device("cpu")
    p, g = dev.upload(np.ones(3)), dev.upload(np.ones(3))
    dev.adamw_step(p, g, dev.alloc(3), dev.alloc(3), torch.nn.Parameter(torch.tensor(0.5)),
                   0.9, 0.999, 1e-8, 0.0, torch.tensor(1))
    leaf = torch.ones(3, requires_grad=True)
    leaf.grad = torch.ones(3)
    torch.optim.AdamW([leaf], lr=0.5, eps=1e-8, weight_decay=0.0).step()
    np.testing.assert_allclose(dev.download(p), leaf.detach().numpy(), rtol=1e-6)
