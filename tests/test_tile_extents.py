"""Tile extents known only as a kernel runs (slices clipped at a loop variable, `m[0:2] @
m[0:3]` of an input) that do not fit together: the inner sizes of `@`, tiles combined
elementwise, a tile written into a slice of `out`. Every device refuses the statement with a
runtime error at its line, as the reference does (the compiled devices read past a slice and
returned numbers, or named an index of an input the program never wrote); tiles that fit
give numpy's answer on every device. Also on the launch-IR emulator of the CUDA target."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError

from compute_testing import emulate_kernel, lower_block, wanted_devices

from zynbook.compiler import schedules
from zynbook.compiler.targets import cuda_target

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]
M = np.arange(16, dtype=np.float32).reshape(4, 4) - 5.0
FIT = "the tiles of this statement do not fit together at these sizes"

# (source, the ZynML line of the statement that does not fit, what the compiled devices say)
MISFITS = {
    "matmul of an input's slices": ("""let y = compute(m) {
    @kernel fused
    out = m[0:2] @ m[0:3]
}
y
""", 3, "the inner sizes of @ differ (4 columns on the left, 3 rows on the right)"),
    "matmul clipped at a loop variable": ("""let y = compute(m) {
    for i in 0..n:
        out[i, 0:2, 0:4] = m[0:2, i:i+2] @ m[0:2]
}
y
""", 3, "the inner sizes of @ differ (1 columns on the left, 2 rows on the right)"),
    "tiles added": ("""let y = compute(m) {
    for i in 0..n:
        out[i, 0:3] = m[i, i:i+3] + m[i, 0:3]
}
y
""", 3, "an axis 2 long meets one 3 long"),
    "sum of a product": ("""let y = compute(m) {
    for i in 0..n:
        let t = m[i, 0:3]
        out[i] = sum(m[i, i:i+3] * t)
}
y
""", 4, "an axis 2 long meets one 3 long"),
    "dot": ("""let y = compute(m) {
    for i in 0..n:
        out[i] = dot(m[i, i:i+3], m[i, 0:3])
}
y
""", 3, "an axis 2 long meets one 3 long"),
    "store into a longer slice": ("""let y = compute(m) {
    for i in 0..n:
        out[i, 0:3] = m[i, i:i+3] * 2.0
}
y
""", 3, "a tile 2 long on an axis is written into a slice 3 long"),
    "tile variable": ("""let y = compute(m) {
    for i in 0..n:
        var acc = zeros(3)
        for j in 0..n:
            acc = acc + m[i, j:j+3]
        out[i, 0:3] = acc
}
y
""", 5, "an axis 3 long meets one 2 long"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(MISFITS))
def test_tiles_that_do_not_fit_are_a_runtime_error_on_every_device(device, case):
    src, line, said = MISFITS[case]
    session = zynbook.Session(device)
    with pytest.raises(ZynMLError) as info:
        session.run(src, m=M, n=4)
    err = info.value
    assert err.kind == "runtime", err
    text = src.splitlines()[line - 1]
    assert (err.line, err.column) == (line, len(text) - len(text.lstrip()) + 1), err
    assert err.message.startswith(FIT), err
    if device != "cpu":
        assert said in err.message, err
    assert "^" in err.render()
    assert session.run("1 + 1") == 2


def _matmul_clipped_alike():
    out = np.zeros((4, 2, 4), np.float32)
    for i in range(4):
        out[i] = M[0:2, i:i + 2] @ M[i:i + 2]
    return out


def _an_axis_of_one():
    out = np.zeros((4, 4, 3), np.float32)
    for i in range(4):
        for j in range(0, 4, 3):
            out[i, j] = M[i, j:j + 3] + M[i, 1:4]      # 3 and 3, then 1 and 3
    return out


FITS = {
    "matmul clipped alike": ("""let y = compute(m) {
    for i in 0..n:
        out[i, 0:2, 0:4] = m[0:2, i:i+2] @ m[i:i+2]
}
y
""", _matmul_clipped_alike),
    "an axis of 1 broadcasts": ("""let y = compute(m) {
    for i in 0..n:
        for j in 0..n step 3:
            out[i, j, 0:3] = m[i, j:j+3] + m[i, 1:4]
}
y
""", _an_axis_of_one),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(FITS))
def test_tiles_that_fit_give_numpys_answer_on_every_device(device, case):
    src, want = FITS[case]
    got = zynbook.Session(device).run(src, m=M, n=4)
    np.testing.assert_allclose(np.asarray(got), want(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", list(MISFITS))
def test_the_cuda_targets_program_reports_the_misfit(case):
    """The launch IR the CUDA target runs, on the emulator: the check fails first (before
    any read of a tile past its extent)."""
    src, line, said = MISFITS[case]
    kernel, ins, sizes, scalars = lower_block(src, {"m": M}, sizes={"n": 4})
    prog = schedules.build(kernel, cuda_target(), sizes)
    assert prog is not None
    with pytest.raises(ZynMLError) as info:
        emulate_kernel(prog, kernel, ins, sizes, scalars, 32)
    assert info.value.line == line and said in info.value.message


FLASH = """let head_dim = 16
let attn = compute(Q, K, V) {{
    @kernel flash_attention
    @tile(block_q=64, block_kv=64)
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 64:
            var m = -inf
            var l = 0.0
            var o = zeros(64, head_dim)
            for kv_block in 0..seq_len step 64:
                let K_block = K[b, h, kv_block:kv_block+64]
                let V_block = V[b, h, kv_block:kv_block+{rows}]
                let S = Q[b, h, q_block:q_block+64] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+64] = o / l
}}
attn
"""


@pytest.mark.parametrize("device", DEVICES)
def test_flash_attention_with_a_shorter_value_block_is_refused_on_every_device(device):
    """The spec's flash attention with V's block 32 rows where K's is 64: the compiled
    devices multiplied the probabilities by 64 rows of V, past its block (numbers, no
    error); the same program with blocks alike gives numpy's attention."""
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((1, 2, 100, 16)).astype(np.float32) for _ in range(3))
    session = zynbook.Session(device)
    s = np.einsum("bhqd,bhkd->bhqk", Q, K) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), V)
    got = session.run(FLASH.format(rows=64), Q=Q, K=K, V=V)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-5)
    with pytest.raises(ZynMLError) as info:
        session.run(FLASH.format(rows=32), Q=Q, K=K, V=V)
    err = info.value
    if err.kind == "device" and "storage buffers" in err.message:
        # (the block schedule's tile arrays, in scratch buffers, pass this adapter's bindings)
        pytest.skip(f"{device} cannot bind the block schedule's arrays: {err.message}")
    assert (err.kind, err.line, err.column) == ("runtime", 16, 17), err
    assert err.message.startswith(FIT)
