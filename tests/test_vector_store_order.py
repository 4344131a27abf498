"""The vector schedule loads a thread's rows before its body runs: a body that reads a row
after storing into it (`out[i] += a` then `out[i] += b`) gets the scalar thread schedule,
where the vector one read the row as it was and lost the first write (CUDA and Metal).
Every device present, and the CUDA and Metal launch IR on the emulator, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices

DEVICES = wanted_devices()
X = np.arange(-5, 15, dtype=np.int32)           # 20: a multiple of every vector width
W = (np.arange(20, dtype=np.float32) * 0.75 - 3).astype(np.float32)

# body -> numpy of (x, w); out's dtype is what numpy's result would be
BODIES = {
    "out[i] += 2\n        out[i] += x[i]": lambda x, w: np.int32(2) + x,
    "out[i] = x[i] * 3\n        out[i] -= x[i]": lambda x, w: x * 3 - x,
    "out[i] = w[i] + 1.0\n        out[i] += w[i] * w[i]":
        lambda x, w: (w + np.float32(1)) + w * w,
    "out[i] += w[i]\n        out[i] += w[i] * 0.5\n        out[i] -= x[i]":
        lambda x, w: (w + w * np.float32(0.5)) - x.astype(np.float32),
    "out[i] = w[i]\n        out[i] -= 2.0 * w[i]": lambda x, w: w - np.float32(2) * w,
}


def _src(body):
    return f"let y = compute(x, w) {{\n    for i in 0..n:\n        {body}\n}}\ny\n"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", list(BODIES), ids=range(len(BODIES)))
def test_a_row_read_after_a_store_sees_the_store(device, body):
    got = zynbook.Session(device).run(_src(body), x=X, w=W)
    assert_equals_numpy(got, BODIES[body](X, W), 0)


@pytest.mark.parametrize("body", list(BODIES), ids=range(len(BODIES)))
def test_the_cuda_and_metal_launch_ir_reads_the_store(body):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    k, ins, sizes, scalars = lower_block(_src(body), dict(x=X, w=W))
    for tgt in (cuda_target(), metal_target()):
        prog = schedules.build(k, tgt, sizes)
        got = emulate_kernel(prog, k, ins, sizes, scalars)
        assert_equals_numpy(got, BODIES[body](X, W), 0)


def test_a_body_that_only_reads_before_storing_keeps_vector_accesses():
    """out[i] = out-free arithmetic of the rows, then a second store of another value:
    the rows are all read before any store, so the vector schedule still applies."""
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target
    k, ins, sizes, scalars = lower_block(_src("let a = w[i] * 2.0\n        out[i] = a + w[i]"),
                                         dict(x=X, w=W))
    prog = schedules.build(k, cuda_target(), sizes)
    assert "vector" in prog.schedule
    assert_equals_numpy(emulate_kernel(prog, k, ins, sizes, scalars), W * np.float32(2) + W, 0)
