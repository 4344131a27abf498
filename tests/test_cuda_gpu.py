"""CUDA kernels on a real GPU, compared with numpy written here and with the CPU executor.

Skipped where CuPy or a GPU is missing; scripts/gpu_tests.sh runs them on a GPU machine."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402

from zynbook.backends import cuda as backend  # noqa: E402

pytestmark = pytest.mark.gpu
DEVICES = backend.discover()
if not DEVICES:
    pytest.skip("no CUDA GPU (or no CuPy)", allow_module_level=True)
DEV = DEVICES[0]

TOL = {"f32": 2e-4, "f16": 2e-2, "bf16": 3e-2}
SCALARS = {"layer_norm": {"eps": 1e-5}, "layer_norm_odd": {"eps": 1e-5}}


def close(got, ref, dtype="f32"):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape or got.size == ref.size, (got.shape, ref.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=tol,
                               atol=tol * max(1.0, float(np.abs(ref).max(initial=0))))


@pytest.mark.parametrize("name", sorted(K.ALL))
def test_kernel_matches_numpy(name):
    kernel, sizes, make, ref = K.ALL[name]()
    ins = make(np.random.default_rng(0))
    out, launch = DEV.launch(kernel, ins, sizes, SCALARS.get(name, {}))
    got = DEV.to_host(out)
    expect = ref(ins, sizes)
    if kernel.output.dtype in ("i64", "i32"):
        assert np.array_equal(got.reshape(-1), np.asarray(expect).reshape(-1))
    else:
        close(got, expect, kernel.output.dtype)
    assert launch.times.kernel is not None and launch.times.kernel >= 0
    assert launch.device == DEV.id


@pytest.mark.parametrize("name", sorted(K.ALL))
def test_kernel_matches_cpu_executor(name):
    from zynbook.backends.cpu.reference import run_kernel
    kernel, sizes, make, _ = K.ALL[name]()
    ins = make(np.random.default_rng(1))
    try:
        expect = run_kernel(kernel, ins, sizes, SCALARS.get(name, {}))
    except Exception as err:        # a hand-written CIR form the executor does not take
        pytest.skip(f"CPU executor: {err}")
    out, _ = DEV.launch(kernel, ins, sizes, SCALARS.get(name, {}))
    got = DEV.to_host(out)
    if kernel.output.dtype in ("i64", "i32"):
        assert np.array_equal(got.reshape(-1), np.asarray(expect).reshape(-1))
    else:
        close(got, expect, kernel.output.dtype)


# ------------------------------------------------------------ through zynbook.run

import zynbook  # noqa: E402
from kernel_sources import (MATMUL, SPEC_ARGMAX, SPEC_BATCHED_MATMUL, SPEC_CONV2D,  # noqa: E402
                            SPEC_GELU, SPEC_LAYER_NORM, SPEC_NORM, SPEC_ROW_SUMS, SPEC_SOFTMAX,
                            program, unannotated)

PROGRAMS = {
    "matmul": (
        program(MATMUL),
        lambda r: dict(A=r.standard_normal((200, 130)).astype(np.float32),
                       B=r.standard_normal((130, 90)).astype(np.float32)),
        lambda e: e["A"].astype(np.float64) @ e["B"]),
    "bmm": (
        program(unannotated(SPEC_BATCHED_MATMUL)),
        lambda r: dict(A=r.standard_normal((3, 64, 40)).astype(np.float32),
                       B=r.standard_normal((3, 40, 50)).astype(np.float32)),
        lambda e: np.matmul(e["A"].astype(np.float64), e["B"])),
    "sum": (
        SPEC_NORM,
        lambda r: dict(data=r.standard_normal(100_003).astype(np.float32)),
        lambda e: np.sqrt(np.sum(e["data"].astype(np.float64) ** 2))),
    "argmax": (
        SPEC_ARGMAX,
        lambda r: dict(data=r.standard_normal(77_777).astype(np.float32)),
        lambda e: np.argmax(e["data"])),
    "row_sums": (
        SPEC_ROW_SUMS,
        lambda r: dict(matrix=r.standard_normal((129, 3001)).astype(np.float32)),
        lambda e: e["matrix"].astype(np.float64).sum(1)),
    "gelu": (
        SPEC_GELU,
        lambda r: dict(x=r.standard_normal(10_000).astype(np.float32)),
        lambda e: (lambda x: x * 0.5 * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))))(e["x"].astype(np.float64))),
    "layer_norm": (
        SPEC_LAYER_NORM,
        lambda r: dict(x=r.standard_normal((33, 700)).astype(np.float32), gamma=r.standard_normal(700).astype(np.float32),
                       beta=r.standard_normal(700).astype(np.float32), eps=1e-5),
        lambda e: (lambda x: (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * e["gamma"] + e["beta"])(e["x"].astype(np.float64))),
    "softmax": (
        SPEC_SOFTMAX,
        lambda r: dict(logits=r.standard_normal((16, 300)).astype(np.float32)),
        lambda e: (lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum())(e["logits"].astype(np.float64))),
    "conv2d": (
        program(unannotated(SPEC_CONV2D)),
        lambda r: dict(input=r.standard_normal((2, 8, 14, 14)).astype(np.float32),
                       kernel=r.standard_normal((32, 8, 3, 3)).astype(np.float32),
                       bias=r.standard_normal(32).astype(np.float32), stride=1, padding=1,
                       out_h=14, out_w=14),
        None),
}
import kernel_sources as _cg  # noqa: E402 (the spec's attention texts)

PROGRAMS["flash_attention"] = (
    _cg.FLASH_TEMPLATE.replace("BLOCK", "64") + "attn\n",
    lambda r: dict(Q=r.standard_normal((2, 3, 128, 64)).astype(np.float32),
                   K=r.standard_normal((2, 3, 128, 64)).astype(np.float32),
                   V=r.standard_normal((2, 3, 128, 64)).astype(np.float32)),
    lambda e: _sdpa(e["Q"], e["K"], e["V"], None))
PROGRAMS["attention"] = (
    _cg.ATTENTION_TEMPLATE + "attn\n",
    lambda r: dict(Q=r.standard_normal((2, 2, 96, 32)).astype(np.float32),
                   K=r.standard_normal((2, 2, 96, 32)).astype(np.float32),
                   V=r.standard_normal((2, 2, 96, 32)).astype(np.float32),
                   mask=np.tril(np.ones((96, 96), dtype=bool))),
    lambda e: _sdpa(e["Q"], e["K"], e["V"], e["mask"]))


PROGRAMS["flash_attention_odd"] = (      # 100 queries: a partial 64-query block and key tile; D=48
    _cg.FLASH_TEMPLATE.replace("BLOCK", "64") + "attn\n",
    lambda r: dict(Q=r.standard_normal((1, 2, 100, 48)).astype(np.float32),
                   K=r.standard_normal((1, 2, 100, 48)).astype(np.float32),
                   V=r.standard_normal((1, 2, 100, 48)).astype(np.float32)),
    lambda e: _sdpa(e["Q"], e["K"], e["V"], None))
PROGRAMS["attention_random_mask"] = (
    _cg.ATTENTION_TEMPLATE + "attn\n",
    lambda r: dict(Q=r.standard_normal((2, 1, 70, 16)).astype(np.float32),
                   K=r.standard_normal((2, 1, 70, 16)).astype(np.float32),
                   V=r.standard_normal((2, 1, 70, 16)).astype(np.float32),
                   mask=(r.random((70, 70)) < 0.3) | np.eye(70, dtype=bool)),
    lambda e: _sdpa(e["Q"], e["K"], e["V"], e["mask"]))


def _sdpa(q, k, v, mask):
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask[None, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p, v.astype(np.float64))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_on_cuda_equals_cpu_and_numpy(name):
    src, make, ref = PROGRAMS[name]
    env = make(np.random.default_rng(2))
    got = zynbook.run(src, device=DEV.id, **env)
    cpu = zynbook.run(src, device="cpu", **env)
    close(np.asarray(got, dtype=np.float64), np.asarray(cpu, dtype=np.float64))
    if ref is not None:
        close(np.asarray(got, dtype=np.float64), ref(env))


def test_generated_source_and_ptx_after_launch():
    kernel, sizes, make, _ = K.matmul()
    DEV.launch(kernel, make(np.random.default_rng(0)), sizes, {})
    src = DEV.generated_source(kernel)
    assert "__global__" in src["cuda"] and ".entry" in src["ptx"]


def test_dlpack_torch_in_and_out():
    torch = pytest.importorskip("torch")
    kernel, sizes, _, ref = K.axpb(4096)
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    out, _ = DEV.launch(kernel, [x, y], sizes, {})
    t = DEV.to_torch(out)
    assert t.is_cuda
    np.testing.assert_allclose(t.cpu().numpy(), (x * y + 1).cpu().numpy(), rtol=1e-6, atol=1e-6)


def test_memory_pool_and_pinned():
    pool = DEV.memory_pool(64 << 20)
    a = pool.allocate((512, 512))
    assert pool.used_bytes() >= 512 * 512 * 4
    pool.free(a)
    del a
    pool.reset()
    p = DEV.allocate((1024,), "f32", pinned=True)
    assert p.shape == (1024,) and float(p.sum()) == 0.0


def test_bf16_buffers():
    kernel, sizes, make, _ = K.relu(4096, "f32")
    import dataclasses
    from zynbook.compiler import cir
    k2 = dataclasses.replace(kernel, inputs=(dataclasses.replace(kernel.inputs[0], dtype="bf16"),),
                             output=dataclasses.replace(kernel.output, dtype="bf16"))
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    out, _ = DEV.launch(k2, [x], sizes, {})
    close(DEV.to_host(out), np.maximum(x, 0), "bf16")


def test_sigmoid_silu_and_tanh_gelu_on_cuda_to_a_few_ulp_with_limits_and_nan():
    """The f32 sigmoid and SiLU from the hardware's exp2 and reciprocal, and the tanh form of
    GELU computed as a sigmoid (passes/activations.py): numpy's values over a wide range, at
    +-inf, and NaN where numpy has NaN."""
    src = """let y = compute(x) {
    for i in 0..n:
        let v = x[i]
        let g = v * 0.5 * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
        out[i] = sigmoid(v) + 10.0 * silu(v) + 100.0 * g
}
y
"""
    x = np.concatenate([np.linspace(-120, 120, 4801), [0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    got = np.asarray(zynbook.run(src, device=DEV.id, x=x), np.float64)
    d = x.astype(np.float64)
    with np.errstate(all="ignore"):
        sig = 1 / (1 + np.exp(-d))
        want = sig + 10 * d * sig + 100 * d * 0.5 * (1 + np.tanh(0.7978845608 * (d + 0.044715 * d ** 3)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)     # f32 elementwise
