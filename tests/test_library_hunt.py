"""The kernel library and the compute-device interface at the edges: half-precision inputs
whose intermediate values leave f16's range, odd sizes, every device present; compared with
PyTorch (CPU) or numpy written here."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from zynbook import library, nn
from zynbook.errors import ZynMLShapeError, ZynMLTypeError
from zynbook.session import Session

torch = pytest.importorskip("torch")

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if not d["id"].startswith("gl:") and (not _WANTED or d["id"] == "cpu"
                                                 or d["id"] in _WANTED.split(","))]


def host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_half_rmsnorm_of_values_whose_squares_pass_f16_range(device):
    """rmsnorm of f16 values near 300 (squares past f16's 65504): computed in f32 as torch's
    rms_norm does. The reference squared the halves in f16, the sum was inf and every
    output 0."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 70)) * 300).astype(np.float16)
    w = rng.standard_normal(70).astype(np.float16)
    got = library.call("rmsnorm", Session(device), [x, w], {"eps": 1e-5})
    assert got.dtype == "f16"
    want = torch.nn.functional.rms_norm(torch.tensor(x).float(), (70,),
                                        torch.tensor(w).float(), 1e-5).half()
    np.testing.assert_allclose(host(got), want.double().numpy(), rtol=2e-3, atol=2e-3)
    # an f32 weight: the result is f32, the squares of the halves still f32's
    w32 = w.astype(np.float32)
    got = library.call("rmsnorm", Session(device), [x, w32], {"eps": 1e-5})
    assert got.dtype == "f32"
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * w32
    np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 1), (2, 3, 7, 7, 8), (1, 2, 5, 9, 4),
                                   (2, 2, 70, 70, 64)])
def test_attention_causal_equals_torch(device, shape):
    """attention(q, k, v, causal=true), the spec's causal flag (query i sees keys 0..i, as
    torch's is_causal), alone and with a bool mask; it was refused (no parameter `causal`)."""
    B, H, SQ, SK, D = shape
    rng = np.random.default_rng(sum(shape))
    q = rng.standard_normal((B, H, SQ, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, H, SK, D)).astype(np.float32) for _ in range(2))
    tq, tk, tv = (torch.tensor(t).double() for t in (q, k, v))
    F = torch.nn.functional
    s = Session(device)
    got = library.call("attention", s, [q, k, v], {"causal": True})
    np.testing.assert_allclose(host(got), F.scaled_dot_product_attention(tq, tk, tv, is_causal=True),
                               rtol=1e-4, atol=1e-5)
    mask = rng.random((SQ, SK)) > 0.3
    mask[:, 0] = True
    keep = torch.tensor(mask & np.tril(np.ones((SQ, SK), bool)))
    got = library.call("attention", s, [q, k, v], {"causal": True, "mask": mask})
    np.testing.assert_allclose(host(got), F.scaled_dot_product_attention(tq, tk, tv, attn_mask=keep),
                               rtol=1e-4, atol=1e-5)


def test_attention_causal_takes_a_bool():
    q = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ZynMLTypeError, match="causal"):
        library.call("attention", Session("cpu"), [q, q, q], {"causal": 1})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 2, 1, 1, 1, 1, False), (2, 6, 2, 7, 9, 8, False),
                                   (1, 8, 2, 33, 33, 16, True)])
def test_attention_of_grouped_query_heads_equals_torch(device, shape):
    """k and v with fewer heads than q, each shared by a group of query heads (torch's
    enable_gqa), with and without a mask; it was a shape error."""
    B, H, KV, SQ, SK, D, causal = shape
    rng = np.random.default_rng(H * 100 + SQ)
    q = rng.standard_normal((B, H, SQ, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, KV, SK, D)).astype(np.float32) for _ in range(2))
    tq, tk, tv = (torch.tensor(t).double() for t in (q, k, v))
    F = torch.nn.functional
    s = Session(device)
    got = library.call("attention", s, [q, k, v], {"causal": causal})
    want = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=True)
    np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-5)
    mask = rng.random((SQ, SK)) > 0.3
    mask[:, 0] = True
    got = library.call("attention", s, [q, k, v], {"mask": mask})
    want = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask),
                                          enable_gqa=True)
    np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-5)


def test_attention_heads_that_do_not_group_are_a_shape_error():
    q, k = np.zeros((1, 4, 2, 2), np.float32), np.zeros((1, 3, 2, 2), np.float32)
    with pytest.raises(ZynMLShapeError, match="divides"):
        library.call("attention", Session("cpu"), [q, k, k], {})


def test_validate_config_takes_the_shared_memory_in_bytes():
    """The library's validateConfig(config, gpu_max_shared_memory): a number of bytes as the
    limit (it was Python's AttributeError: 'int' object has no attribute 'shared_bytes')."""
    from zynbook.compiler.schedules import configs
    from zynbook.errors import ZynMLDeviceError
    ampere = configs.CONFIGS["ampere"]
    assert configs.required_shared_memory(ampere) == (128 + 2 * 128) * 64 * 2
    configs.validate_config(ampere, 49152)
    with pytest.raises(ZynMLDeviceError, match="needs 163840 bytes.*has 49152 bytes"):
        configs.validate_config(configs.CONFIGS["hopper"], 49152)
    with pytest.raises(ZynMLTypeError):
        configs.validate_config(ampere, "48KB")
    with pytest.raises(ZynMLTypeError):
        configs.validate_config("ampere", 49152)


@pytest.mark.parametrize("device", DEVICES)
def test_sinkhorn_leaves_a_row_of_no_mass_as_the_spec_does(device):
    """A row whose exp(m - max) underflows to zeros sums to 0: the spec's normalize_rows and
    normalize_cols leave a row or column whose sum is 1e-10 or less as it is. Dividing by
    it made the row NaN, and then every column, so the whole result was NaN."""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((5, 5)).astype(np.float32)
    m[2] -= 200.0
    got = host(library.call("sinkhorn", Session(device), [m], {"iterations": 4}))
    p = np.exp(m.astype(np.float64) - m.max())
    p[p < 1e-30] = 0.0          # f32's exp underflows there
    for _ in range(4):
        for axis in (1, 0):
            s = p.sum(axis, keepdims=True)
            p = np.where(s > 1e-10, p / np.where(s > 1e-10, s, 1.0), p)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, p, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got[2], 0.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 2, 1, 3, 3, 4, False, 0.7), (2, 4, 2, 33, 33, 16, True, 0.05),
                                   (1, 2, 2, 7, 9, 8, False, -1.0)])
def test_attention_of_a_given_scale_equals_torch(device, shape):
    """attention(..., scale=s): the scores scaled by s (the spec's AttentionUniform.scale,
    torch's scale=) instead of 1 / sqrt(head_dim), with and without a mask; it was refused."""
    B, H, KV, SQ, SK, D, causal, scale = shape
    rng = np.random.default_rng(SQ * 7 + H)
    q = rng.standard_normal((B, H, SQ, D)).astype(np.float32)
    k, v = (rng.standard_normal((B, KV, SK, D)).astype(np.float32) for _ in range(2))
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(t).double() for t in (q, k, v)), is_causal=causal, enable_gqa=True,
        scale=scale)
    s = Session(device)
    for extra in ({}, {"mask": np.ones((SQ, SK), bool)}):
        got = library.call("attention", s, [q, k, v], {"causal": causal, "scale": scale, **extra})
        np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ZynMLTypeError, match="scale"):
        library.call("attention", s, [q, k, v], {"scale": float("inf")})


# ---------------------------------------------------------------- the device interface

def _zero_size_cases(d):
    """(call, expected values of each result) for sizes of 0, as torch gives them."""
    z = lambda n: d.upload(np.zeros(n, np.float32))     # noqa: E731
    ones = lambda n: d.upload(np.ones(n, np.float32))   # noqa: E731
    none = d.upload_u32([])
    return {
        "matmul k = 0": (lambda: d.matmul(z(0), z(0), 3, 0, 2), [np.zeros(6)]),
        "matmul m = 0": (lambda: d.matmul(z(0), ones(6), 0, 3, 2), [np.zeros(0)]),
        "softmax no rows": (lambda: d.softmax(z(0), 0, 5), [np.zeros(0)]),
        "softmax rows of nothing": (lambda: d.softmax(z(0), 3, 0), [np.zeros(0)]),
        "rms_norm no rows": (lambda: d.rms_norm(z(0), ones(4), 0, 4, 1e-5), [np.zeros(0)]),
        "embedding no positions": (lambda: d.embedding(ones(8), none, 0, 4), [np.zeros(0)]),
        "reduce_sum over an axis of 0": (lambda: d.reduce_sum(z(0), [0, 3], 0), [np.zeros(3)]),
        "reduce_sum keeping an axis of 0": (lambda: d.reduce_sum(z(0), [0, 3], 1), [np.zeros(0)]),
        "transpose_2d of no rows": (lambda: d.transpose_2d(z(0), 0, 3), [np.zeros(0)]),
        "causal_attention of no positions": (
            lambda: d.causal_attention(z(0), z(0), z(0), 0, 2, 1, 4), [np.zeros(0)]),
        "kv_attention of no new positions": (
            lambda: d.kv_attention(z(0), z(12), z(12), 3, 0, 2, 1, 4), [np.zeros(0)]),
        "softmax_backward": (lambda: d.softmax_backward(z(0), z(0), 0, 4), [np.zeros(0)]),
        "rms_norm_backward": (lambda: d.rms_norm_backward(z(0), ones(4), z(0), 0, 4, 1e-5),
                              [np.zeros(0), np.zeros(4)]),
        "embedding_backward of no positions": (
            lambda: d.embedding_backward(z(0), none, 5, 0, 3), [np.zeros(15)]),
        "causal_attention_backward": (
            lambda: d.causal_attention_backward(z(0), z(0), z(0), z(0), 0, 2, 1, 4),
            [np.zeros(0)] * 3),
        "cross_entropy of no positions": (
            lambda: d.cross_entropy_forward_backward(z(0), none, 0, 5, 0), [0.0, np.zeros(0)]),
        "cross_entropy of a vocabulary of 0, every target the pad": (
            lambda: d.cross_entropy_forward_backward(z(0), d.upload_u32([7, 7]), 2, 0, 7),
            [0.0, np.zeros(0)]),
        "elementwise of no elements": (
            lambda: d.elementwise([z(0)], 0, lambda xs: xs[0] * 2.0), [np.zeros(0)]),
        "bias_add of no elements": (lambda: d.bias_add(z(0), ones(3), 0, 3), [np.zeros(0)]),
    }


ZERO_CASES = list(_zero_size_cases(nn.device("cpu")))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ZERO_CASES)
def test_interface_operations_of_sizes_of_zero(device, case):
    """The trait's sizes are usize: a size of 0 gives what torch gives (an empty result, or
    zeros where a sum runs over nothing: matmul with k = 0, reduce_sum over an axis of 0, the
    embedding gradient of no positions). Every one was a shape error (`m` must be at least
    1), and embedding_backward of no ids numpy's ValueError."""
    d = nn.device(device)
    call, want = _zero_size_cases(d)[case]
    got = call()
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, float):
            assert g == w
        else:
            np.testing.assert_array_equal(d.download(g), w)


def test_sizes_an_operation_cannot_take_as_zero_are_still_refused():
    d = nn.device("cpu")
    a = d.upload(np.zeros(0, np.float32))
    with pytest.raises(ZynMLShapeError, match="head_dim"):
        d.causal_attention(a, a, a, 0, 2, 1, 0)
    with pytest.raises(ZynMLShapeError, match="dim"):
        d.bias_add(a, a, 0, 0)
    with pytest.raises(ZynMLShapeError, match="step_t"):
        d.adamw_step(a, a, d.upload([]), d.upload([]), 0.1, 0.9, 0.99, 1e-8, 0.0, 0)


# ---------------------------------------------------------------- half precision


@pytest.mark.parametrize("device", DEVICES)
def test_f16_results_below_the_smallest_normal_are_kept(device):
    """An f16 result between 2^-24 and 2^-14 is a subnormal half, rounded to the nearest
    multiple of 2^-24 as numpy rounds it. WebGPU's quantizeToF16 flushed them to zero on
    llvmpipe (WGSL allows it), so gelu of an f16 -4.2 was 0, not torch's -2.33e-05."""
    x = np.array([1e-4, 6e-5, 1e-7, 2.0, -3e-8, 8.9e-8, -4.5e-6], np.float16)
    got = zynbook.run("""let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 0.5
}
y
""", device=device, x=x)
    want = (x.astype(np.float32) * np.float32(0.5)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(got.numpy()), want)
    h = np.array([-4.223, -3.74, -5.0, 0.75], np.float16)
    got = library.call("gelu", Session(device), [h], {})
    want = torch.nn.functional.gelu(torch.tensor(h).float(), approximate="tanh").half().numpy()
    np.testing.assert_allclose(host(got), want.astype(np.float64), rtol=2e-3, atol=1.2e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_activations_and_softmax_compute_in_f32_as_torch(device, dtype):
    """silu, gelu and softmax of half-precision inputs compute in f32 and round once, when
    they store, as torch's kernels do: the reference rounded every f16 step, so gelu near
    -3 (1 + tanh(inner) of few digits) was 3.5% off and a long softmax row lost its small
    exponentials, where the compiled devices (holding halves in f32) gave torch's answer."""
    rng = np.random.default_rng(21)
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    x = torch.tensor(rng.standard_normal(64) * 6).to(tdt)
    rows = torch.tensor(rng.standard_normal((2, 3000)) * 2).to(tdt)
    F = torch.nn.functional
    s = Session(device)
    # one rounding of the result apart (f32's tanh-form gelu of torch and of the kernel
    # differ in the last digits of f32 where 1 + tanh cancels)
    tol = {"f16": dict(rtol=1.5e-3, atol=1.2e-7), "bf16": dict(rtol=8e-3, atol=1e-6)}[dtype]
    for name, arg, want in (("silu", x, F.silu(x.float())),
                            ("gelu", x, F.gelu(x.float(), approximate="tanh")),
                            ("softmax", rows, torch.softmax(rows.float(), -1))):
        got = library.call(name, s, [arg], {})
        assert got.dtype == dtype
        np.testing.assert_allclose(host(got), want.to(tdt).double().numpy(), **tol,
                                   err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_upload_takes_a_torch_bfloat16_tensor(device):
    """upload(data) of a torch bfloat16 tensor (weights are often kept so): its values, exact
    in f32, as a ZynML program binds it. numpy cannot read the tensor, and upload refused it
    as not an array."""
    d = nn.device(device)
    t = torch.tensor([[0.5, -1.25, 3.0e38], [1.0e-20, 7.0, -0.0]]).to(torch.bfloat16)
    got = d.download(d.upload(t))
    np.testing.assert_array_equal(got, t.float().numpy().ravel())
    w = torch.randn(4, 3, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = d.download(d.matmul(d.upload(x), d.upload(w), 2, 4, 3))
    np.testing.assert_allclose(y, (x @ w.float().numpy()).ravel(), rtol=1e-5, atol=1e-5)


def test_tiny_gpt_takes_torch_bfloat16_weights():
    """TinyGPT(dev, config, weights) with torch bfloat16 tensors (a state dict kept in bf16)
    equals the model of their f32 values; it said the weights had no array `embed`."""
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    c = GPTConfig(vocab=7, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn=6, max_seq=8)
    host32 = init_weights(c)

    def as_bf16(o):
        if isinstance(o, dict):
            return {k: as_bf16(v) for k, v in o.items()}
        if isinstance(o, list):
            return [as_bf16(v) for v in o]
        return torch.tensor(o).to(torch.bfloat16)

    def as_f32(o):
        if isinstance(o, dict):
            return {k: as_f32(v) for k, v in o.items()}
        if isinstance(o, list):
            return [as_f32(v) for v in o]
        return o.float().numpy()

    wb = as_bf16(host32)
    d = nn.device("cpu")
    ids, targets = [1, 2, 3, 4], [2, 3, 4, 5]
    a, b = TinyGPT(d, c, wb), TinyGPT(d, c, as_f32(wb))
    for name in a.params:
        np.testing.assert_array_equal(a.params[name].to_vec(), b.params[name].to_vec())
    assert a.loss(ids, targets) == b.loss(ids, targets)
