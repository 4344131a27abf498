"""Attention past the largest head_dim class of a program built for every size (WebGPU's):
the launch gets a program built for its own sizes whatever the head_dim's size is called
(the limit was looked up under the name `head_dim`, so a `D` or `dh` of 160 was refused).
Against numpy written here, on every local device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices
from tolerances import assert_within

SOURCE = """let y = compute(Q, K, V) {
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S:
        var m = -inf
        for j in 0..S:
            m = max(m, dot(Q[b, h, i], K[b, h, j]) * scale)
        var l = 0.0
        for j in 0..S:
            l += exp(dot(Q[b, h, i], K[b, h, j]) * scale - m)
        for d in 0..HD:
            var acc = 0.0
            for j in 0..S:
                acc += exp(dot(Q[b, h, i], K[b, h, j]) * scale - m) * V[b, h, j, d]
            out[b, h, i, d] = acc / l
}
y"""


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("name,head_dim", [("D", 160), ("dh", 129), ("head_dim", 200), ("width", 300)])
def test_head_dim_past_the_classes_under_any_name(device, name, head_dim):
    r = np.random.default_rng(head_dim)
    B, H, S = 1, 2, 19
    Q, K, V = (r.standard_normal((B, H, S, head_dim)).astype(np.float32) for _ in range(3))
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K) * 0.05
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), V)
    got = zynbook.run(SOURCE.replace("HD", name), device=device, Q=Q, K=K, V=V, scale=0.05)
    assert_within(np.asarray(got.numpy(), np.float64), want, 2e-4, 2e-5)
