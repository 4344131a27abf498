"""The rows schedule (compiler/schedules/rows.py) on the launch-IR emulator against the
reference executor: a warp or a block per row, rows held in registers, vector widths 1 and
4, odd row lengths and counts, for several parameter choices on CUDA and Metal targets."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
from compute_testing import emulate_kernel  # noqa: E402

from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler import schedules  # noqa: E402
from zynbook.compiler.schedules.rows import Rows, match_rows  # noqa: E402
from zynbook.compiler.targets import cuda_target, metal_target  # noqa: E402

CASES = {
    "softmax_odd": lambda: K.softmax_rows(3, 1001),
    "softmax_short": lambda: K.softmax_rows(6, 100),
    "softmax_vec": lambda: K.softmax_rows(2, 1024),
    "layer_norm_odd": lambda: K.layer_norm(3, 333),
    "rms_norm": lambda: K.rms_norm(2, 200),
    "residual_ln": lambda: K.residual_layer_norm(1, 3, 96),
}


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_schedule_every_choice(case, target):
    kernel, sizes, make, _ = CASES[case]()
    ins = make(np.random.default_rng(3))
    scalars = {s.name: 1e-5 for s in kernel.scalars}
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    tgt = {"cuda": cuda_target(), "metal": metal_target()}[target]
    sched = Rows()
    assert sched.why_not(kernel, tgt, sizes) is None
    for params in sched.space(kernel, tgt, sizes)[:3]:
        prog = sched.build(kernel, tgt, sizes, params)
        for p in (prog, prog.fallback) if prog.fallback else (prog,):
            got = emulate_kernel(p, kernel, ins, sizes, scalars, tgt.warp)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"{case} {params}")


def test_rows_schedule_is_chosen_and_says_why_not():
    kernel, sizes, _, _ = K.softmax_rows(4, 700)
    prog = schedules.build(kernel, cuda_target(), sizes)
    assert prog.schedule.startswith("rows: one block of")
    short, ssizes, _, _ = K.softmax_rows(4, 20)
    assert match_rows(short, ssizes)[1].startswith("rows of 20 elements")
    ffn, fsizes, _, _ = K.ffn_shared()
    assert "shared arrays" in Rows().why_not(ffn, cuda_target(), fsizes)


def test_workgroup_hint_sets_the_threads_and_changes_no_result():
    from dataclasses import replace
    from zynbook.compiler import cir
    kernel, sizes, make, _ = K.softmax_rows(3, 700)
    hinted = replace(kernel, schedule=cir.Schedule(workgroup=(512,)))
    tgt = cuda_target()
    assert Rows().default(kernel, tgt, sizes).threads != 512
    p = Rows().default(hinted, tgt, sizes)
    assert p.threads == 512
    ins = make(np.random.default_rng(5))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}))
    got = emulate_kernel(Rows().build(hinted, tgt, sizes, p), hinted, ins, sizes)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    from zynbook.compiler.schedules.reduce import Reduce
    rk, rsizes, rmake, _ = K.row_sums(5, 300)
    assert Reduce().default(replace(rk, schedule=cir.Schedule(workgroup=(64,))), tgt, rsizes).threads == 64


# ----------------------------------------------------------------------------- WebGPU
# Subgroups have the width the adapter chooses, so a row is a workgroup: the block schedule
# built for the sizes of the launch (wgsl.sized_for), its all-reductions a block collective
# of subgroup rounds (emulated here at width 4) or a tree in workgroup memory.

@pytest.mark.parametrize("subgroups", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_webgpu_rows_through_the_launch_ir(case, subgroups):
    import dataclasses
    from zynbook.compiler.codegen import wgsl
    kernel, sizes, make, _ = CASES[case]()
    ins = make(np.random.default_rng(3))
    scalars = {s.name: 1e-5 for s in kernel.scalars}
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    opts = wgsl.WGSLOptions(subgroups=subgroups)
    assert wgsl.launch_program(kernel, opts) is None          # no program for every size
    sized = wgsl.sized_for(opts, kernel, sizes)
    program = wgsl.launch_program(kernel, sized)
    assert program is not None and program.schedule.startswith("block: one block of")
    assert ("subgroupAdd" in program.source) == subgroups
    target, baked = wgsl._launch_targets(kernel, sized)[-1]
    assert baked and not target.symbolic_sizes
    prog = schedules.build(kernel, target, sizes)
    got = emulate_kernel(prog, kernel, ins, sizes, scalars, 4 if subgroups else 1)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=prog.schedule)
    assert dataclasses.replace(sized, launch_sizes=()) == opts


F16_RESIDUAL_LN = """let normed = compute(x, projected, g, bb) {
    @kernel fused
    for b in 0..batch, s in 0..seq:
        var sum = 0.0
        var sq_sum = 0.0
        for h in 0..hidden:
            let val = x[b, s, h] + projected[b, s, h]
            sum += val
            sq_sum += val * val
        let mean = sum / hidden
        let var = sq_sum / hidden - mean * mean
        let inv_std = rsqrt(var + 1e-6)
        for h in 0..hidden:
            let val = x[b, s, h] + projected[b, s, h]
            out[b, s, h] = (val - mean) * inv_std * g[h] + bb[h]
}"""


def test_half_rows_too_long_for_16_byte_vectors_take_8_byte_ones():
    """Four f16 row inputs of 768 outgrow the registers in 16-byte vectors; the schedule
    takes 8-byte ones (64 threads, 3 x 4 a thread) rather than scalars, and matches the
    reference (and its scalar fallback does)."""
    from compute_testing import lower_block
    rng = np.random.default_rng(5)
    arrays = {"x": rng.standard_normal((2, 3, 768)).astype(np.float16),
              "projected": rng.standard_normal((2, 3, 768)).astype(np.float16),
              "g": rng.standard_normal(768).astype(np.float16),
              "bb": rng.standard_normal(768).astype(np.float16)}
    kernel, ins, sizes, scalars = lower_block(F16_RESIDUAL_LN, arrays)
    tgt = cuda_target()
    params = Rows().default(kernel, tgt, sizes)
    assert (params.width, params.threads) == (4, 64)
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars), np.float64)
    prog = Rows().build(kernel, tgt, sizes, params)
    for p in (prog, prog.fallback):
        got = emulate_kernel(p, kernel, ins, sizes, scalars, tgt.warp)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-2, atol=1e-2)
