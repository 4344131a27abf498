"""Flash attention whose blocks are written with their end clipped by hand,
`Q[b, h, q:min(q + B, n)]`, against numpy on every local device and on the CUDA kernels
(the launch-IR emulator): the same blocks as `q:q + B`, since a slice stops at its axis.
Such a kernel was refused on cpu:native and WebGPU (its tiles' sizes `min(q + B, n) - q`
had no bound, and the attention schedule did not see the blocks)."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block
from test_attention_hunt7 import check, dots, qkv
from test_attention_hunt13 import DEVICES
from zynbook.compiler.schedules.attention import Attention
from zynbook.compiler.targets import cuda_target


def flash(block: int, end: str = "seq_len", inputs: str = "Q, K, V") -> str:
    """The spec's flash body, every block ending at min(start + block, `end`)."""
    stop = lambda v: f"min({v} + {block}, {end})"
    return f"""let attn = compute({inputs}) {{
    @kernel flash_attention
    @tile(block_q={block}, block_kv={block})
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step {block}:
            var m = -inf
            var l = 0.0
            var o = zeros(min({block}, seq_len - q_block), head_dim)
            for kv_block in 0..seq_len step {block}:
                let K_block = K[b, h, kv_block:{stop("kv_block")}]
                let V_block = V[b, h, kv_block:{stop("kv_block")}]
                let S = Q[b, h, q_block:{stop("q_block")}] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, h, q_block:{stop("q_block")}] = o / l
}}
attn"""


def softmax_v(a, keys=None):
    """softmax(Q K^T / sqrt(D)) V in float64, over the first `keys` keys where given."""
    s = dots(a["Q"], a["K"]) / np.sqrt(a["Q"].shape[-1])
    if keys is not None:
        s[..., keys:] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    return p @ a["V"].astype(np.float64) / p.sum(-1, keepdims=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("S,D,block", [(7, 16, 16), (100, 16, 32), (130, 40, 48), (33, 8, 64)])
def test_flash_with_clipped_block_ends(device, S, D, block):
    a = qkv(S + block, 1, 2, S, D)
    check(device, flash(block), a, softmax_v(a))


@pytest.mark.parametrize("device", DEVICES)
def test_flash_with_clipped_ends_over_f16(device):
    a = qkv(3, 2, 1, 77, 24, np.float16)
    check(device, flash(32), a, softmax_v(a), tol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_a_block_clipped_short_of_the_axis_is_not_the_flash_block(device):
    """Blocks ending at min(q + 16, seq_len - 1) of 70 rows: row 69 is never stored (0) and
    key 69 never read. Not the attention blocks; the loops' answer."""
    a = qkv(11, 1, 1, 70, 8)
    want = softmax_v(a, keys=69)
    want[..., 69:, :] = 0.0
    check(device, flash(16, end="seq_len - 1"), a, want, attention=False)


@pytest.mark.parametrize("block", [16, 48])
def test_flash_with_clipped_ends_on_the_cuda_kernels(block):
    """Recognised as attention for CUDA, and each kernel of its space (a few) runs it."""
    a = qkv(5, 1, 2, 75, 32)
    k, ins, sz, sc = lower_block(flash(block), a)
    sched, target = Attention(), cuda_target((9, 0))
    assert sched.why_not(k, target, sz) is None, sched.why_not(k, target, sz)
    for p in sched.space(k, target, sz)[:4]:
        got = emulate_kernel(sched.build(k, target, sz, p), k, ins, sz, sc, warp=32)
        np.testing.assert_allclose(got, softmax_v(a), rtol=2e-4, atol=2e-4, err_msg=p.describe())
