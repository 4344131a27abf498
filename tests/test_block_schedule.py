"""The block schedule (compiler/schedules/block.py) on the launch-IR emulator against the
reference executor: shared arrays zero-filled per iteration, barriers, loops split over the
block, accumulations as block all-reductions, stores by one thread; CUDA and Metal targets,
several block sizes, a warp of 32 and of 4."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402

from compute_testing import emulate_kernel, lower_block  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler import schedules  # noqa: E402
from zynbook.compiler.schedules.block import Block  # noqa: E402
from zynbook.compiler.targets import cuda_target, metal_target, webgpu_target  # noqa: E402

# a fused kernel with a shared array it accumulates into and reads back, a sequential loop
# with a split loop inside, and a store made once per iteration
SHARED_HIST = """let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        shared var acc[8]
        for step in 0..3:
            for j in 0..8:
                acc[j] = acc[j] + x[r, j] * f32(step + 1)
            barrier()
        var total = 0.0
        for j in 0..8:
            total += acc[j]
        out[r] = total
}
y
"""


@pytest.mark.parametrize("target", ["cuda", "metal", "cuda-warp4"])
def test_ffn_with_shared_memory_every_choice(target):
    kernel, sizes, make, _ = K.ffn_shared(2, 3, 24, 40)
    ins = make(np.random.default_rng(2))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}))
    tgt, warp = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32),
                 "cuda-warp4": (cuda_target(), 4)}[target]
    if warp == 4:
        from dataclasses import replace
        tgt = replace(tgt, warp=4)
    sched = Block()
    assert sched.why_not(kernel, tgt, sizes) is None
    for params in sched.space(kernel, tgt, sizes)[:3]:
        got = emulate_kernel(sched.build(kernel, tgt, sizes, params), kernel, ins, sizes, {}, warp)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(params))


def test_shared_array_is_zero_filled_each_iteration_and_stored_once():
    x = np.random.default_rng(4).standard_normal((5, 8)).astype(np.float32)
    kernel, ins, sizes, scalars = lower_block(SHARED_HIST, {"x": x})
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    prog = schedules.build(kernel, cuda_target(), sizes)
    assert prog.schedule.startswith("block: one block of")
    got = emulate_kernel(prog, kernel, ins, sizes, scalars, 32)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got, 6.0 * x.sum(axis=1), rtol=1e-5)


def test_block_schedule_says_why_not():
    kernel, sizes, _, _ = K.ffn_shared()
    assert "sizes of the launch" in Block().why_not(kernel, webgpu_target(), sizes)
    kernel, sizes, _, _ = K.softmax_whole()         # one block runs the whole body
    assert Block().why_not(kernel, cuda_target(), sizes) is None


BIG_SHARED = """let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        shared var buf[8192]
        for j in 0..8192:
            buf[j] = x[r, j % 16] * 2.0
        barrier()
        var total = 0.0
        for j in 0..8192:
            total += buf[j]
        out[r] = total
}
y
"""


def test_a_large_shared_array_on_the_cpu_is_on_the_heap():
    """32 KB of block memory per iteration, iterations on several cores at once: the C++
    keeps it on the heap, and the result equals the reference."""
    import shutil
    import zynbook
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        pytest.skip("no C++ compiler")
    x = np.random.default_rng(6).standard_normal((7, 16)).astype(np.float32)
    kernel, ins, sizes, scalars = lower_block(BIG_SHARED, {"x": x})
    from zynbook.compiler.codegen import c as cgen
    assert "std::unique_ptr<float[]>" in cgen.render_program(kernel, sizes).source
    got = np.asarray(zynbook.run(BIG_SHARED, device="cpu:native", x=x))
    np.testing.assert_allclose(got, 2.0 * 512 * x.sum(axis=1), rtol=1e-4)


@pytest.mark.parametrize("target", ["cuda", "metal", "webgpu"])
def test_shared_arrays_past_the_targets_memory_live_in_scratch(target):
    """32 KB of shared array per iteration: past a WebGPU workgroup's 16 KB (and with a
    larger one, past CUDA's and Metal's): a slice of a scratch buffer per block."""
    from dataclasses import replace
    x = np.random.default_rng(5).standard_normal((37, 16)).astype(np.float32)
    src = BIG_SHARED if target == "webgpu" else BIG_SHARED.replace("8192", "16384")
    kernel, ins, sizes, scalars = lower_block(src, {"x": x})
    tgt = {"cuda": cuda_target(), "metal": metal_target(),
           "webgpu": replace(webgpu_target(), symbolic_sizes=False)}[target]
    prog = schedules.build(kernel, tgt, sizes)
    assert "shared arrays in scratch memory" in prog.schedule and prog.scratch
    got = emulate_kernel(prog, kernel, ins, sizes, scalars, tgt.warp)
    np.testing.assert_allclose(got, np.asarray(run_kernel(kernel, ins, sizes, scalars)), rtol=1e-4)
