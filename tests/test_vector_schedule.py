"""The generic thread schedule with vector accesses (compiler/schedules/vector.py) on the
launch-IR emulator against the reference executor, for several block sizes, with its
aligned fallback; where it does not apply it says why."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402

from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.backends import emulator as emulate  # noqa: E402
from zynbook.compiler.schedules.vector import VectorThread  # noqa: E402
from zynbook.compiler.targets import cuda_target, metal_target  # noqa: E402


CASES = dict(K.ALL, gelu_odd=lambda: K.gelu_tanh(4 * 301))     # 301 vectors: a last partial block


@pytest.mark.parametrize("name", ["relu", "mul_add", "broadcast", "gelu", "relu_f16", "gelu_odd"])
def test_vector_schedule_every_choice(name):
    """The default, and one and two vectors a thread over blocks of 64 and 256 threads."""
    kernel, sizes, make, _ = CASES[name]()
    ins = make(np.random.default_rng(1))
    scalars = {s.name: 0.5 for s in kernel.scalars}
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars)).astype(np.float64)
    sched = VectorThread()
    assert sched.why_not(kernel, cuda_target(), sizes) is None
    space = sched.space(kernel, cuda_target(), sizes)
    assert {p.per_thread for p in space} == {1, 2}
    for params in [space[0]] + [p for p in space[1:] if p.threads in (64, 256)]:
        prog = sched.build(kernel, cuda_target(), sizes, params)
        assert prog.aligned and prog.fallback is not None
        for p in (prog, prog.fallback):
            out = np.zeros(want.shape, emulate.numpy_dtype(kernel.output.dtype))
            buffers = {b.name: a for b, a in zip(kernel.inputs, ins)}
            buffers[kernel.output.name] = out
            assert emulate.run(p, buffers, scalars, sizes) == (0, 0)
            tol = 2e-3 if kernel.output.dtype == "f16" else 1e-6
            np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol,
                                       err_msg=f"{name} {params}")


def test_two_vectors_a_thread_where_the_body_calls_a_costly_function():
    target = cuda_target()
    for name, want in (("gelu", 2), ("relu", 1), ("mul_add", 1)):
        kernel, sizes, _, _ = K.ALL[name]()
        assert VectorThread().default(kernel, target, sizes).per_thread == want, name


def test_vector_schedule_says_why_not():
    kernel, sizes, _, _ = K.relu(1001)
    assert "multiple of 4" in VectorThread().why_not(kernel, cuda_target(), sizes)
    kernel, sizes, _, _ = K.relu(4096)
    assert "no vector accesses" in VectorThread().why_not(kernel, metal_target(), sizes)


def test_a_check_in_a_lane_names_its_own_line():
    from compute_testing import lower_block
    from zynbook.compiler import errflag
    src = """let y = compute(a, b) {
    @kernel elementwise
    for i in 0..n:
        let q = a[i] * 2
        out[i] = q / b[i]
}
y
"""
    a = np.arange(8, dtype=np.int32)
    b = np.ones(8, dtype=np.int32)
    b[5] = 0
    kernel, ins, sizes, scalars = lower_block(src, {"a": a, "b": b})
    prog = VectorThread().build(kernel, cuda_target(), sizes,
                                VectorThread().default(kernel, cuda_target(), sizes))
    out = np.zeros(8, np.int32)
    words = emulate.run(prog, {"a": a, "b": b, "out": out}, scalars, sizes)
    err = errflag.error(prog.sites, words, kernel, sizes)
    assert err.message == "integer division by zero" and err.span.line == 5
