"""A contraction whose products are negated (`acc += -A[i, k] * B[k, j]`, `A * -B`,
`acc = -(a * b) + acc`, `acc -= ...`) or whose accumulator starts from a bias (`var acc =
bias[j]`) runs as a GEMM, the sign a factor -1 on the sum: on every device against numpy in
f64, and on the launch IR of the CUDA (sm_90: the split into three TF32 products; sm_80) and
Metal targets. A negated factor was not an element load, so those fell back to a schedule
of one block per output."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import emulate_kernel, lower_block, wanted_devices

DEVICES = wanted_devices()

SRC = """let y = compute(A, B, bias) {
    for i in 0..M, j in 0..N:
        var acc = INIT
        for k in 0..K:
            UPDATE
        out[i, j] = acc
}
y
"""

# (start, update, sign of the products, whether the bias starts the sum)
FORMS = {
    "neg_left": ("0.0", "acc += -A[i, k] * B[k, j]", -1, 0),
    "neg_right": ("0.0", "acc += A[i, k] * -B[k, j]", -1, 0),
    "neg_product_first": ("0.0", "acc = -(A[i, k] * B[k, j]) + acc", -1, 0),
    "minus_negated": ("bias[j]", "acc -= -A[i, k] * B[k, j]", 1, 1),
    "bias_minus": ("bias[j]", "acc = acc - A[i, k] * B[k, j]", -1, 1),
    "neg_bias": ("-bias[j]", "acc -= A[i, k] * B[k, j] * 0.5", -0.5, -1),
}


def _case(form, m=128, k=96, n=128, seed=0):
    init, update, sign, with_bias = FORMS[form]
    rng = np.random.default_rng(seed)
    ins = {"A": rng.standard_normal((m, k)).astype(np.float32),
           "B": rng.standard_normal((k, n)).astype(np.float32),
           "bias": rng.standard_normal(n).astype(np.float32)}
    want = with_bias * ins["bias"].astype(np.float64) + sign * (ins["A"].astype(np.float64) @ ins["B"])
    return SRC.replace("INIT", init).replace("UPDATE", update), ins, want


def _error(got, want):
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_signed_and_biased_contractions_on_the_devices(device, form):
    src, ins, want = _case(form, 70, 40, 66)
    session = zynbook.Session(device=device)
    assert _error(session.run(src, **ins), want) < 1e-5
    schedule = session.launches[-1].geometry.get("schedule")
    assert schedule is None or "GEMM" in schedule, schedule     # (cpu: the reference)


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "metal"])
@pytest.mark.parametrize("form", ["neg_left", "neg_product_first", "bias_minus"])
def test_signed_and_biased_contractions_on_the_launch_ir(target, form):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    tgt = {"sm_90": cuda_target((9, 0)), "sm_80": cuda_target((8, 0)), "metal": metal_target()}[target]
    src, ins, want = _case(form)
    kernel, arrays, sizes, _ = lower_block(src, ins)
    prog = schedules.build(kernel, tgt, sizes)
    assert "GEMM" in prog.schedule, prog.schedule
    if target == "sm_90":
        assert "three TF32 products" in prog.schedule, prog.schedule
    assert _error(emulate_kernel(prog, kernel, arrays, sizes).reshape(want.shape), want) < 2e-6


def test_negated_half_products_are_a_contraction():
    # -a * b of halves is exact: not a scale that rounds with each product
    from zynbook.compiler.passes.recognise import contraction
    src, ins, _ = _case("neg_right", 8, 8, 8)
    kernel, *_ = lower_block(src, {k: v.astype(np.float16) for k, v in ins.items()})
    assert contraction(kernel)
    kernel, *_ = lower_block(src.replace("-B[k, j]", "B[k, j] * 0.5"),
                             {k: v.astype(np.float16) for k, v in ins.items()})
    assert not contraction(kernel)
