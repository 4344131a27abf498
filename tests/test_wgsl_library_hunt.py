"""The WGSL kernels of wgsl-compute-kernels.md and the kernel library of
gpu-kernel-library.md as an outside tester writes them from the spec's text: library calls
and ZynML programs with odd sizes, names and dtypes, masks of every kind, on every device
present, compared with numpy written here (float64, tolerances by dtype)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices
from zynbook import library
from zynbook.session import Session

DEVICES = wanted_devices()
RNG = np.random.default_rng(20261129)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v, np.float64)


def _attention(q, k, v, added=None, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if added is not None:
        s = s + added
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v


# ---------------------------------------------------------------- library attention masks


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kind", ["minus_inf", "finite_bias", "f16_bias"])
def test_attention_float_mask_is_added_to_the_scores(device, causal, kind):
    """A float mask is additive, as torch's attn_mask of a float dtype: 0 keeps a key,
    -inf drops it, other values bias the scores. It was read as a bool mask (a key kept
    where the mask is not 0), so a mask of 0 and -inf kept exactly the keys it dropped."""
    q, k, v = _f32(2, 3, 7, 5), _f32(2, 3, 9, 5), _f32(2, 3, 9, 4)
    if kind == "minus_inf":
        mask = np.where(RNG.random((7, 9)) > 0.4, 0.0, -np.inf).astype(np.float32)
        mask[:, 0] = 0.0
    else:
        mask = _f32(7, 9)
    if kind == "f16_bias":
        mask = mask.astype(np.float16)
    added = mask.astype(np.float64)
    if causal:
        added = added + np.where(np.tril(np.ones((7, 9), bool)), 0.0, -np.inf)
    got = library.call("attention", Session(device), [q, k, v], {"mask": mask, "causal": causal})
    assert_equals_numpy(_host(got), _attention(q, k, v, added), 1e-5)
