"""Tile values through the schedules (tiles as loops over block arrays, passes/tile_loops.py):
slices (clipped at odd sizes), broadcasting, reductions of tiles, matmuls and transposes of
tiles, `zeros(min(...))`, tile variables, whole-body kernels, on the launch-IR emulator for
every target against the reference executor, in f32, f16 and i32; some printed and run:
MSL on the C++ model of Metal, C++ on `cpu:native`, WGSL on a wgpu adapter."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block

from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import schedules
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target

BAKED = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32), "cpu": (cpu_target(), 1)}


def _baked(target):
    """A WebGPU target whose programs are built for the sizes of one launch."""
    from dataclasses import replace
    return replace(target, symbolic_sizes=False)


TARGETS = dict(BAKED, **{
    "webgpu-subgroup4": (_baked(webgpu_target(("subgroup", "shader-f16"), subgroup=4)), 4),
    "webgpu": (_baked(webgpu_target(("shader-f16",))), 1)})

rng = np.random.default_rng(5)

ROW_SLICE = """let y = compute(x) {
    @kernel fused
    for i in 0..rows:
        out[i, 0:64] = x[i, 0:64] * 2.0 + 1.0
}"""

ROW_SLICE_SUM = """let y = compute(x) {
    @kernel fused
    for i in 0..rows:
        let t = x[i, 0:64] * 2.0
        out[i] = sum(t) + reduce(max, t)
}"""

ROW_STATS = """let y = compute(x, w) {
    @kernel fused
    for i in 0..rows:
        let r = x[i, :]
        let m = reduce(max, r)
        let e = exp(r - m)
        out[i, 0:cols] = e / sum(e) * w[:]
}"""

ROW_SUM_KEEP = """let y = compute(x) {
    @kernel fused
    for i in 0..rows step 4:
        let s = row_sum(x[i:i+4, :])
        let mx = row_max(x[i:i+4, :])
        out[i:i+4, 0:7] = x[i:i+4, :] - s / mx
}"""

TILE_MATMUL = """let y = compute(a, b) {
    @kernel fused
    for i in 0..m step 8:
        let p = a[i:i+8, :] @ transpose(b[0:5, :])
        out[i:i+8, 0:5] = p + 1.0
}"""

TILE_VAR = """let y = compute(x) {
    @kernel fused
    for i in 0..rows:
        var acc = zeros(min(16, cols))
        for k in 0..cols step 16:
            acc = acc + x[i, k:k+16]
        out[i] = sum(acc) + reduce(min, acc)
}"""

WHOLE_SOFTMAX = """let y = compute(x) {
    @kernel fused
    let m = reduce(max, x)
    let e = exp(x - m)
    out = e / sum(e)
}"""

WHOLE_SUM_INT = """let y = compute(x) {
    @kernel fused
    let s = sum(x)
    out = x * 2 + s
}"""

BROADCAST_COL = """let y = compute(x, c) {
    @kernel fused
    for i in 0..rows step 8:
        out[i:i+8, 0:9] = x[i:i+8, :] * row_max(x[i:i+8, :]) + zeros(8, 1) + c[0:9]
}"""

MATVEC_DOT = """let y = compute(a, v) {
    @kernel fused
    for i in 0..rows:
        out[i] = dot(a[i], v) + sum(a[i, 0:3])
}"""


def _f(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


CASES = {
    "row_slice_sum_37": (ROW_SLICE_SUM, lambda: {"x": _f(5, 37)}),
    "row_slice_130": (ROW_SLICE, lambda: {"x": _f(3, 130)}),
    "row_stats_odd": (ROW_STATS, lambda: {"x": _f(7, 37), "w": _f(37)}, {"cols": 37}),
    "row_stats_one": (ROW_STATS, lambda: {"x": _f(1, 1), "w": _f(1)}, {"cols": 1}),
    "row_stats_f16": (ROW_STATS, lambda: {"x": _f(3, 130, dtype=np.float16),
                                          "w": _f(130, dtype=np.float16)}, {"cols": 130}),
    "row_sum_keep": (ROW_SUM_KEEP, lambda: {"x": _f(10, 7)}),
    "tile_matmul": (TILE_MATMUL, lambda: {"a": _f(13, 6), "b": _f(5, 6)}),
    "tile_var_min": (TILE_VAR, lambda: {"x": _f(3, 32)}),
    "tile_var_short": (TILE_VAR, lambda: {"x": _f(2, 5)}),
    "whole_softmax": (WHOLE_SOFTMAX, lambda: {"x": _f(1001)}),
    "whole_softmax_one": (WHOLE_SOFTMAX, lambda: {"x": _f(1)}),
    "whole_sum_i32": (WHOLE_SUM_INT, lambda: {"x": rng.integers(-9, 9, 130).astype(np.int32)}),
    "broadcast_col": (BROADCAST_COL, lambda: {"x": _f(13, 9), "c": _f(9)}),
    "matvec_dot": (MATVEC_DOT, lambda: {"a": _f(9, 37), "v": _f(37)}),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_tile_kernel_every_target(case, target):
    src, make, *given = CASES[case]
    kernel, ins, sizes, scalars = lower_block(src, make(), sizes=given[0] if given else None)
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    tgt, warp = TARGETS[target]
    if not all(tgt.has(b.dtype) for b in list(kernel.inputs) + [kernel.output]):
        pytest.skip(f"{target} has no {kernel.output.dtype}")
    prog = schedules.build(kernel, tgt, sizes)
    assert prog is not None, schedules.why_none(kernel, tgt, sizes)
    got = emulate_kernel(prog, kernel, ins, sizes, scalars, warp)
    tol = 2e-3 if kernel.output.dtype == "f16" else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol, err_msg=prog.schedule)


def test_tile_out_of_range_is_an_error():
    src = """let y = compute(x, idx) {
    @kernel fused
    for i in 0..rows:
        out[i, 0:9] = x[idx[i], :] * 2.0
}"""
    x, idx = _f(4, 9), np.array([0, 3, 7, 1], np.int32)
    kernel, ins, sizes, scalars = lower_block(src, {"x": x, "idx": idx})
    prog = schedules.build(kernel, cuda_target(), sizes)
    with pytest.raises(Exception, match="index 7 is out of range"):
        emulate_kernel(prog, kernel, ins, sizes, scalars, 32)


def test_unbounded_tile_is_refused_with_the_reason():
    src = """let y = compute(x, n) {
    @kernel fused
    for i in 0..rows:
        var t = zeros(n[i], 4)
        t = t + 1.0
        out[i] = sum(t)
}"""
    kernel, ins, sizes, _ = lower_block(src, {"x": _f(3, 4), "n": np.ones(3, np.int32)})
    why = schedules.why_none(kernel, cuda_target(), sizes)
    assert schedules.build(kernel, cuda_target(), sizes) is None and "no bound" in why


@pytest.mark.parametrize("template,block,seq", [("FLASH_TEMPLATE", 16, 32),
                                                ("CLIPPED_FLASH_TEMPLATE", 16, 37)])
def test_flash_attention_body_on_the_block_schedule(template, block, seq):
    """The spec's flash attention as written (tile variables, row maxima, tile matmuls,
    transposes, a clipped last block) through tile loops on the block schedule."""
    import kernel_sources
    from zynbook.compiler.schedules.block import Block
    kernel = kernel_sources.lower_template(
        getattr(kernel_sources, template).replace("BLOCK", str(block)), [4, 4, 4])
    ins = [_f(1, 2, seq, 8) for _ in range(3)]
    sizes = {"batch": 1, "heads": 2, "seq_len": seq, "head_dim": 8}
    sizes.update({f"{b}_d{j}": v for b in "QKV" for j, v in enumerate((1, 2, seq, 8))})
    want = np.asarray(run_kernel(kernel, ins, sizes, {}))
    for name, (tgt, warp) in sorted(BAKED.items()):
        sched = Block()
        assert sched.why_not(kernel, tgt, sizes) is None
        prog = sched.build(kernel, tgt, sizes, sched.default(kernel, tgt, sizes))
        got = emulate_kernel(prog, kernel, ins, sizes, {}, warp)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=name)


def test_a_tile_kernel_without_arrays_has_one_webgpu_program_for_every_size():
    """Inlined tiles need no block arrays: the thread schedule's program serves every size
    set; a whole-body kernel's arrays need the sizes of the launch."""
    from zynbook.compiler.codegen import wgsl
    kernel, ins, sizes, _ = lower_block(ROW_SLICE.replace("fused", "elementwise"),
                                        {"x": _f(3, 130)})
    prog = wgsl.launch_program(kernel, wgsl.WGSLOptions())
    assert prog is not None and prog.schedule.startswith("thread:")
    kernel, ins, sizes, _ = lower_block(WHOLE_SOFTMAX, {"x": _f(1001)})
    opts = wgsl.WGSLOptions(subgroups=True)
    assert wgsl.launch_program(kernel, opts) is None
    prog = wgsl.launch_program(kernel, wgsl.sized_for(opts, kernel, sizes))
    assert prog.schedule.startswith("block: one block runs the whole body")
    assert "subgroupMax" in prog.source and "subgroupAdd" in prog.source


PRINTED = ["whole_softmax", "tile_matmul", "row_stats_f16", "tile_var_min", "broadcast_col"]


@pytest.mark.parametrize("case", PRINTED)
def test_tile_kernels_printed_in_msl_run_on_the_metal_model(case):
    """The printed MSL of tile kernels, compiled against the C++ model of Metal
    (tests/metal_emu) and run, equals the reference."""
    import shutil
    from metal_emu import emulator as emu
    from zynbook.compiler import cir
    from zynbook.compiler.codegen import msl
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler")
    src, make, *given = CASES[case]
    kernel, ins, sizes, scalars = lower_block(src, make(), sizes=given[0] if given else None)
    got = emu.run(msl.render_program(kernel, sizes), ins, cir.output_shape(kernel, sizes), scalars)
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars))
    tol = 2e-3 if kernel.output.dtype == "f16" else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["whole_softmax", "tile_matmul", "tile_var_min"])
def test_tile_kernels_run_on_cpu_native(case):
    """The C++ of tile kernels, compiled by the system compiler and run as `cpu:native`."""
    import shutil
    import zynbook
    from kernel_sources import program
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        pytest.skip("no C++ compiler")
    src, make, *given = CASES[case]
    arrays = make()
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    got = np.asarray(zynbook.run(program(src), device="cpu:native", **arrays))
    np.testing.assert_allclose(got, np.asarray(run_kernel(kernel, ins, sizes, scalars)),
                               rtol=2e-5, atol=2e-5)


@pytest.mark.webgpu
@pytest.mark.parametrize("case", ["whole_softmax", "tile_matmul", "tile_var_min", "row_stats_odd"])
def test_tile_kernels_run_on_webgpu(case):
    """The WGSL of tile kernels on a wgpu adapter (Mesa's lavapipe on a CPU)."""
    import zynbook
    from kernel_sources import program
    from zynbook.backends.webgpu import discover
    devices = discover()
    if not devices:
        pytest.skip("no wgpu adapter")
    src, make, *given = CASES[case]
    arrays = make()
    kernel, ins, sizes, scalars = lower_block(src, arrays, sizes=given[0] if given else None)
    got = np.asarray(zynbook.run(program(src), device=devices[0].id, **arrays,
                                 **(given[0] if given else {})))
    np.testing.assert_allclose(got, np.asarray(run_kernel(kernel, ins, sizes, scalars)),
                               rtol=2e-5, atol=2e-5)
