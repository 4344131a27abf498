"""The compute-device interface and the kernel library as model-training code uses them
(compute-device-trait.rs, gpu-kernel-library.md), at the edges the other training tests
leave, on every device: references are torch (float64) or numpy written here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from zynbook.nn import kernels as K

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "gl:"))]
RNG = np.random.default_rng(20261130)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _kv_attention_torch(q, k, v, start, s, h, kv, hd):
    """kv_attention's result from torch: query i sees keys 0..start + i, `h // kv` query
    heads a key/value head."""
    total = start + s
    Q = torch.tensor(q, dtype=torch.float64).view(s, h, hd).transpose(0, 1)
    K_, V_ = (torch.tensor(a, dtype=torch.float64).view(total, kv, hd).transpose(0, 1)
              .repeat_interleave(h // kv, 0) for a in (k, v))
    mask = torch.arange(total)[None, :] <= start + torch.arange(s)[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(Q, K_, V_, attn_mask=mask)
    return out.transpose(0, 1).reshape(-1).numpy()


# ------------------------------------------------------------------ wide heads

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(3, 0, 2, 2, 512), (5, 4, 2, 1, 1000), (2, 1, 4, 2, 130)])
def test_attention_of_heads_wider_than_128_equals_torch(device, shape):
    # (seq, cache_start, n_heads, n_kv_heads, head_dim): WebGPU held a query's row and
    # output row as one register per 4 values, written out: llvmpipe compiled head_dim 512
    # for minutes before the first launch (see the next test)
    s, start, h, kv, hd = shape
    q = _f32(s, h * hd)
    k, v = _f32(start + s, kv * hd), _f32(start + s, kv * hd)
    d = zynbook.device(device)
    got = d.download(d.kv_attention(d.upload(q), d.upload(k), d.upload(v), start, s, h, kv, hd))
    np.testing.assert_allclose(got, _kv_attention_torch(q, k, v, start, s, h, kv, hd),
                               rtol=1e-5, atol=1e-5)


def _attention_wgsl(device_id, head_dim):
    """The WGSL a WebGPU device runs for the interface's attention at this head_dim."""
    from zynbook.backends.registry import get_device
    from zynbook.compiler.codegen import available_sources
    session = zynbook.Session("cpu")
    q = np.ones((3, 2, head_dim), np.float32)
    session.run(K.KV_ATTENTION, q=q, k=q, v=q, start=0, group=1, scale=0.1)
    ck = session.last_kernels[0]
    return available_sources(ck.kernel, get_device(device_id), ck.sizes)["wgsl"]


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(("vulkan", "webgpu"))]
                         or [pytest.param("vulkan:0", marks=pytest.mark.skip("no WebGPU"))])
def test_attention_code_past_the_largest_head_dim_class_is_not_written_out(device):
    # past head_dim 128 the rows are arrays a loop indexes: the one kernel of head_dim 512
    # was 266 kB of WGSL (1,280 registers written out), twice the program of the three
    # head_dim classes up to 128 (130 kB); now 31 kB
    classes, at512 = (len(_attention_wgsl(device, hd)) for hd in (128, 512))
    assert at512 < classes / 2
