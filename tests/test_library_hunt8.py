"""The kernel library and the compute-device interface read from the spec's text, at edges
the other hunts leave: odd sizes, half precision, strided inputs, extreme values; on every
device, compared with torch (CPU, float64 or autograd) or numpy written here."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import zynbook
from zynbook import library
from zynbook.session import Session

from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "gl:"))]
F = torch.nn.functional


def _rand(seed, *shape, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _host(t):
    return np.asarray(t.numpy(), np.float64)


def _call(name, device, *args, **kwargs):
    return library.call(name, Session(device), list(args), kwargs)


# ------------------------------------------------------------------ library attention

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_float_mask_of_nan_makes_its_row_nan_as_torch(device, causal):
    """A float mask is added to the scores: a NaN there makes that query's row NaN, as
    torch's attn_mask does (the kernel admitted keys whose mask is `> -inf`, so a NaN key
    was dropped as if masked and the row was the softmax of the others)."""
    q, k, v = (_rand(s, 1, 2, 6, 4) for s in (1, 2, 3))
    mask = np.zeros((6, 6), np.float32)
    mask[3, 2] = np.nan         # under the diagonal: a key query 3 sees when causal too
    mask[4, 1] = -np.inf
    got = _host(_call("attention", device, q, k, v, mask=mask, causal=causal))
    want = F.scaled_dot_product_attention(
        *(torch.tensor(t).double() for t in (q, k, v)),
        attn_mask=torch.tensor(mask).double() + (torch.triu(torch.full((6, 6), -math.inf,
                                                  dtype=torch.float64), 1) if causal else 0))
    assert np.isnan(got[:, :, 3]).all()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
