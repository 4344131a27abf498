"""The GEMM schedule on warpgroup MMAs fed by the copy engine from a producer warpgroup
(schedules/gemm_tma.py): the emulator's model of mbarriers and box copies
(backends/tma_model.py) against the CPU reference in every operand layout, odd sizes, rings
that wrap over several tiles a block, batches and an epilogue; protocol mistakes the model
catches; where the schedule is offered; the printed CUDA through nvcc for sm_90a; and, on a
Hopper GPU, the programs as the hardware runs them."""
from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
import nvcc_runs  # noqa: E402

from compute_testing import emulate_kernel, lower_block  # noqa: E402
from test_gemm_wgmma import (NVCC, ON_HOPPER, _rewritten, compiles_for_sm_90a, queue_for_sm_90a,  # noqa: E402
                             epilogue_or_batches, runs_on_the_gpu)
from tolerances import tolerance  # noqa: E402
from zynbook.backends import emulator as emulate  # noqa: E402
from zynbook.backends import tma_model  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler.codegen.cuda import render_cuda  # noqa: E402
from zynbook.compiler.launch import ir  # noqa: E402
from zynbook.compiler.schedules.base import Choice  # noqa: E402
from zynbook.compiler.schedules.gemm import Gemm, GemmParams  # noqa: E402
from zynbook.compiler.targets import cuda_target  # noqa: E402

LAYOUTS = [(False, False), (True, True), (True, False), (False, True)]
# one consumer warpgroup of 64 x 64 through a ring of two; two along M through three
SMALL = GemmParams(64, 64, 64, 64, 64, 8, True, 2, True, True, True)
TWO_M = GemmParams(128, 64, 64, 64, 64, 8, True, 3, True, True, True)


def check(kernel, ins, sizes, params, scalars=None):
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars or {}), np.float64)
    prog = Gemm().build(kernel, cuda_target(), sizes, params)
    assert prog.tensor_maps and any(isinstance(n, ir.TensorLoad) for n in ir.walk(prog.kernels[0]))
    got = emulate_kernel(prog, kernel, ins, sizes, scalars)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, err_msg=params.describe(),
                               **tolerance("f16", "contraction"))
    return prog


def test_a_box_lands_swizzled_with_zeros_outside_the_tensor():
    buf = np.arange(10 * 70, dtype=np.float32)          # a 10 x 70 tensor, rows of 70
    m = tma_model.TensorMap(buf, "f16", (70, 10), (70,), (64, 8))
    box = m.read((32, 4))                                # columns 32..95, rows 4..11
    grid = box.reshape(8, 64)
    assert grid[0, 0] == 4 * 70 + 32 and grid[5, 37] == 699 and grid[5, 38] == 0 and grid[6, 0] == 0     # col 70, row 10: outside
    bars, dst = tma_model.Mbarriers("k"), np.full(512, np.nan, np.float32)
    bars.init(("b", 0), 1)
    assert bars.passed(("b", 0), 1) and not bars.passed(("b", 0), 0)
    bars.arrive(("b", 0), 8 * 64 * 2)
    bars.load(("b", 0), m, (32, 4), dst, 1024, 0, None)
    assert bars.passed(("b", 0), 0)
    for r in range(8):          # unit u of row r at u ^ r
        for c in (0, 9, 63):
            assert dst[r * 64 + ((c // 8) ^ r) * 8 + c % 8] == grid[r, c]


def test_a_box_waits_for_its_phase_and_its_bytes():
    m = tma_model.TensorMap(np.ones(64 * 8, np.float32), "f16", (64, 8), (64,), (64, 8))
    bars, dst = tma_model.Mbarriers("k"), np.zeros(512, np.float32)
    bars.init(("b", 0), 2)
    bars.arrive(("b", 0), 1024)
    bars.load(("b", 0), m, (0, 0), dst, 0, 0, None)
    assert not dst.any() and not bars.passed(("b", 0), 0)       # one arrival still to come
    bars.arrive(("b", 0))
    assert dst.all() and bars.passed(("b", 0), 0)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_every_operand_layout(dtype, ta, tb):
    kernel, sizes, make, _ = K.matmul_t(64, 64, 192, dtype, ta, tb)
    prog = check(kernel, make(np.random.default_rng(5)), sizes, SMALL)
    loads = [n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.TensorLoad)]
    assert {n.map for n in loads} == {"_mapm", "_mapn"}
    assert "TMA producer warpgroup" in prog.schedule and prog.arch_specific


# odd extents where the layout allows them (a row of a 16-byte multiple): the copy engine's
# zeros fill partial tiles and K's tail; several tiles a block run the ring over their slices
@pytest.mark.parametrize("mnk,ta,tb,params", [((77, 136, 72), False, False, SMALL),
                                              ((72, 130, 200), True, True, TWO_M),
                                              ((200, 72, 72), False, True, TWO_M),
                                              ((136, 200, 136), False, False, SMALL)])
def test_odd_sizes_and_rings_that_wrap(mnk, ta, tb, params):
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f16", ta, tb)
    check(kernel, make(np.random.default_rng(sum(mnk))), sizes, params)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_tiles_192_wide(ta, tb):
    kernel, sizes, make, _ = K.matmul_t(72, 200, 136, "f16", ta, tb)
    check(kernel, make(np.random.default_rng(4)), sizes, GemmParams(64, 192, 64, 64, 192, 8, True, 2, True, True, True))


def test_a_tile_192_wide_where_256_leaves_a_wave_short():
    # 132 multiprocessors: N = 768 makes 96 tiles of 256 (3/4 of a wave) or 128 of 192
    sms = cuda_target((9, 0), 132)
    for mnk, bn in (((4096, 768, 768), 192), ((4096, 2304, 768), 192), ((4096, 3072, 768), 192),
                    ((4096, 4096, 4096), 256),
                    ((8192, 8192, 8192), 256)):
        kernel, sizes, _, _ = K.matmul_t(*mnk, "f16", False, False)
        p = Gemm().default(kernel, sms, sizes)
        assert (p.bn, p.tn) == (bn, bn), mnk
        assert Gemm().default(kernel, cuda_target(), sizes).bn == 256      # no count: no guess


def test_many_tiles_a_block():
    # the grid is capped at 2 blocks: each walks three tiles, the producer running ahead
    kernel, sizes, make, _ = K.matmul_t(192, 128, 128, "bf16", False, False)
    prog = Gemm().build(kernel, replace(cuda_target(), max_blocks=2), sizes, SMALL)
    want = np.asarray(run_kernel(kernel, make(np.random.default_rng(3)), sizes, {}), np.float64)
    got = emulate_kernel(prog, kernel, make(np.random.default_rng(3)), sizes)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **tolerance("f16", "contraction"))


# two warpgroups each multiplying whole tiles of their own, in turn (ping-pong): blocks of
# one, two and three tiles (the second warpgroup idle, even, odd), K's tail, transposes
PING = GemmParams(64, 64, 64, 64, 64, 8, True, 2, True, True, True, True)
PING_3 = GemmParams(64, 128, 64, 64, 128, 8, True, 3, True, True, True, True)
# a ping-pong warpgroup holding 128 rows: two m64 steps a slice step
PING_2M = GemmParams(128, 64, 64, 64, 64, 8, True, 3, True, True, True, True)


@pytest.mark.parametrize("mnk,ta,tb,params,blocks", [((64, 64, 200), False, False, PING, 4),
                                                     ((128, 64, 136), True, False, PING, 1),
                                                     ((192, 130, 72), False, True, PING_3, 2),
                                                     ((136, 200, 136), True, True, PING, 3),
                                                     ((300, 72, 200), False, False, PING_2M, 2),
                                                     ((136, 130, 72), True, True, PING_2M, 1),
                                                     ((520, 64, 64), False, True, PING_2M, 3)])
def test_ping_pong_warpgroups_take_tiles_in_turn(mnk, ta, tb, params, blocks):
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f16", ta, tb)
    assert params.valid() and params.threads == 384 and "pingpong=True" in params.describe()
    prog = Gemm().build(kernel, replace(cuda_target(), max_blocks=blocks), sizes, params)
    assert "ping-pong" in prog.schedule
    want = np.asarray(run_kernel(kernel, make(np.random.default_rng(7)), sizes, {}), np.float64)
    got = emulate_kernel(prog, kernel, make(np.random.default_rng(7)), sizes)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **tolerance("f16", "contraction"))


def test_ping_pong_epilogue_and_batches():
    for case in ("epilogue", "batched"):
        kernel, ins, sizes, scalars = epilogue_or_batches(case, 3)
        check(kernel, ins, sizes, PING, scalars)
        check(kernel, ins, sizes, PING_2M, scalars)


def test_a_ping_pong_tile_is_the_warpgroup_s_own():
    assert not GemmParams(256, 64, 64, 64, 64, 8, True, 2, True, True, True, True).valid()
    assert PING_2M.valid() and PING_2M.threads == 384
    assert not GemmParams(64, 128, 64, 64, 64, 8, True, 2, True, True, True, True).valid()
    assert not GemmParams(64, 64, 64, 64, 64, 8, True, 2, True, True, False, True).valid()
    assert "pingpong" not in SMALL.describe()


@pytest.mark.parametrize("mnk,tested", [((128, 128, 64), set()), ((128, 104, 64), {"n"}),
                                         ((72, 128, 64), {"m"}), ((72, 104, 64), {"m", "n"})])
def test_the_epilogue_tests_only_the_sides_the_tile_does_not_divide(mnk, tested):
    # (straight-line epilogues let the compiler interleave the elements' math)
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f16", False, False)
    prog = check(kernel, make(np.random.default_rng(11)), sizes, TWO_M)
    stores = [n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.If) and any(
        isinstance(m, (ir.Store, ir.Copy)) and "out" in (getattr(m, "array", "") + getattr(m, "dst", ""))
        for m in n.then)]
    sides = {s for n in stores for s, name in (("m", "_m0"), ("n", "_n0")) if name in repr(n.cond)}
    assert sides == tested


def test_a_block_a_multiprocessor_walks_the_tiles():
    kernel, sizes, _, _ = K.matmul_t(4096, 3072, 768, "f16", False, False)
    prog = Gemm().build(kernel, cuda_target((9, 0), 132), sizes, TWO_M)
    assert ir.evaluate(prog.launches[0].grid, {}) == 132


@pytest.mark.parametrize("case", ["epilogue", "batched"])
def test_epilogue_and_batches(case):
    kernel, ins, sizes, scalars = epilogue_or_batches(case, 3)
    prog = check(kernel, ins, sizes, SMALL, scalars)
    if case == "batched":
        assert all(len(m.dims) == 3 for m in prog.tensor_maps)


def test_a_consumer_that_does_not_wait_is_caught():
    kernel, sizes, make, _ = K.matmul_t(64, 64, 256, "f16", False, False)
    prog = Gemm().build(kernel, cuda_target(), sizes, SMALL)
    eager = _rewritten(prog, lambda n: () if isinstance(n, ir.Mbarrier) and n.op == "wait"
                       and n.array == "_full" else n)
    with pytest.raises((emulate.EmulatorError, AssertionError)):
        check_prog(eager, kernel, make, sizes)


def test_a_buffer_released_before_its_mmas_completed_is_caught():
    # releasing the slice just issued lets the producer refill a buffer the MMAs still read
    kernel, sizes, make, _ = K.matmul_t(64, 64, 512, "f16", False, False)
    prog = Gemm().build(kernel, cuda_target(), sizes, SMALL)
    early = _rewritten(prog, lambda n: replace(n, pending=0) if isinstance(n, ir.WarpgroupWait) else n)
    check_prog(early, kernel, make, sizes)          # waiting for all: still right
    now = ir.Bin("%", ir.Ref("_ks", "i32"), ir.Lit(SMALL.stages, "i32"), "i32")
    late = _rewritten(prog, lambda n: replace(n, index=now)
                      if isinstance(n, ir.Mbarrier) and n.op == "arrive" and n.array == "_empty" else n)
    with pytest.raises(emulate.EmulatorError):
        check_prog(late, kernel, make, sizes)


def check_prog(prog, kernel, make, sizes):
    ins = make(np.random.default_rng(2))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    got = emulate_kernel(prog, kernel, ins, sizes)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **tolerance("f16", "contraction"))


def test_a_ping_pong_warpgroup_that_does_not_wait_its_turn_is_caught():
    # without the turn, the second warpgroup's wait on a ring buffer's parity passes on the
    # buffer's phase before its own (parity tells phases one apart): it multiplies stale
    # tiles while the copy engine writes them
    kernel, sizes, make, _ = K.matmul_t(128, 64, 136, "f16", True, False)
    prog = Gemm().build(kernel, replace(cuda_target(), max_blocks=1), sizes, PING)
    check_prog(prog, kernel, make, sizes)
    rushed = _rewritten(prog, lambda n: () if isinstance(n, ir.Mbarrier) and n.op == "wait"
                        and n.array == "_turn" else n)
    with pytest.raises((emulate.EmulatorError, AssertionError)):
        check_prog(rushed, kernel, make, sizes)


def test_where_the_copy_engine_is_offered():
    kernel, sizes, _, _ = K.matmul_t(4096, 4096, 4096, "bf16", False, False)
    assert not GemmParams(256, 128, 64, 64, 128, 8, True, 3, True, True, True).valid()   # 4 consumers
    p = Gemm().default(kernel, cuda_target((9, 0)), sizes)
    assert (p.tma, p.wgmma, p.bm, p.bn, p.threads) == (True, True, 128, 256, 384)
    assert not any(q.tma for cc in ((8, 0), (8, 9)) for q in Gemm().space(kernel, cuda_target(cc), sizes))
    # a row that is not a whole number of 16 bytes (N = 300 for B along N): cp.async's guards
    k2, s2, _, _ = K.matmul_t(256, 300, 256, "f16", False, False)
    assert not any(q.tma for q in Gemm().space(k2, cuda_target(), s2))
    # a gathered operand (an index that is not the loop variable itself) keeps to cp.async
    src = """let y = compute(A, B) {
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[i, K - 1 - k] * B[k, j]
        out[i, j] = acc
}
y
"""
    rng = np.random.default_rng(1)
    arrays = dict(A=rng.standard_normal((128, 128)).astype(np.float16),
                  B=rng.standard_normal((128, 128)).astype(np.float16))
    k3, _, s3, _ = lower_block(src, arrays)
    assert not any(q.tma for q in Gemm().space(k3, cuda_target(), s3))


def test_the_printed_cuda_passes_its_maps_by_value():
    kernel, sizes, _, _ = K.matmul_t(512, 512, 512, "f16", False, False)
    prog = render_cuda(kernel, sizes, (9, 0))
    assert prog.steps[0].args == ("buffers", "tmap:_mapm", "tmap:_mapn") and prog.steps[0].block == (384, 1, 1)
    assert prog.tensor_maps["_mapm"] == (0, "f16", (512, 512), (512,), (64, 128))
    assert prog.tensor_maps["_mapn"] == (1, "f16", (512, 512), (512,), (64, 64))
    assert "const __grid_constant__ ZynTensorMap _mapm" in prog.source
    assert "setmaxnreg.dec" in prog.source and "cp.async.bulk.tensor.2d" in prog.source


NVCC_CASES = [
    ("bf16", (4096, 4096, 4096), False, False, None),
    ("f16", (4096, 4096, 4096), True, True, GemmParams(128, 256, 64, 64, 256, 8, True, 4, True, True, True)),
    ("f16", (200, 296, 136), False, False, GemmParams(128, 128, 64, 64, 128, 8, True, 3, True, True, True)),
    ("bf16", (4096, 768, 768), False, True, GemmParams(128, 192, 64, 64, 192, 8, True, 4, True, True, True)),
    ("f16", (4096, 3072, 768), False, False, GemmParams(64, 256, 64, 64, 256, 8, True, 3, True, True, True, True)),
    ("bf16", (4096, 3072, 768), False, True, GemmParams(128, 128, 64, 64, 128, 8, True, 4, True, True, True, True))]


@pytest.fixture(scope="module")
def queued_compiles():
    futures = queue_for_sm_90a(NVCC_CASES)         # side by side (nvcc_runs.py)
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype,mnk,ta,tb,params", NVCC_CASES)
def test_nvcc_compiles_for_sm_90a(dtype, mnk, ta, tb, params, queued_compiles):
    assert compiles_for_sm_90a(dtype, mnk, ta, tb, params).tensor_maps


@pytest.mark.gpu
@pytest.mark.skipif(not ON_HOPPER, reason="no sm_90 CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("mnk,ta,tb,params", [
    ((4096, 4096, 4096), False, False, None),
    ((200, 296, 136), False, False, None),
    ((301, 296, 200), False, True, GemmParams(128, 128, 64, 64, 128, 8, True, 4, True, True, True)),
    ((264, 280, 200), True, False, GemmParams(128, 256, 64, 64, 256, 8, True, 3, True, True, True)),
    ((4096, 768, 768), False, False, GemmParams(128, 192, 64, 64, 192, 8, True, 4, True, True, True)),
    ((520, 264, 192), True, True, GemmParams(64, 256, 64, 64, 256, 8, True, 2, True, True, True)),
    ((4096, 3072, 768), False, False, GemmParams(64, 256, 64, 64, 256, 8, True, 3, True, True, True, True)),
    ((1000, 520, 264), True, False, GemmParams(64, 128, 64, 64, 128, 8, True, 4, True, True, True, True)),
    ((4096, 3072, 768), False, False, GemmParams(128, 128, 64, 64, 128, 8, True, 4, True, True, True, True)),
    ((1000, 520, 264), True, True, GemmParams(128, 128, 64, 64, 128, 8, True, 3, True, True, True, True))])
def test_tma_on_the_gpu(dtype, mnk, ta, tb, params):
    # the second launch reuses the tensor maps made for the same buffers
    plan = runs_on_the_gpu(dtype, mnk, ta, tb, params, launches=2)
    assert plan.compiled.program.tensor_maps and "TMA" in plan.compiled.program.schedule


def test_a_map_the_driver_refuses_is_a_zynml_error(monkeypatch):
    import cupy_standin
    from zynbook.backends.cuda import tma
    from zynbook.backends.cuda.device import CudaDevice
    from zynbook.errors import ZynMLRuntimeError
    cupy_standin.install(monkeypatch)

    def refuse(*a):
        raise RuntimeError("cuTensorMapEncodeTiled failed with CUDA error 1")
    monkeypatch.setattr(tma, "encode", refuse)
    kernel, sizes, make, _ = K.matmul_t(64, 64, 64, "f16", False, False)
    plan = CudaDevice(0).prepare(kernel, sizes)
    assert plan.compiled.program.tensor_maps
    with pytest.raises(ZynMLRuntimeError, match="CUDA launch of .* failed: cuTensorMapEncodeTiled"):
        plan.launch(make(np.random.default_rng(1)), {})


def test_without_a_driver_that_makes_maps_the_copies_are_cp_async(monkeypatch):
    import cupy_standin
    from zynbook.backends.cuda import tma
    from zynbook.backends.cuda.device import CudaDevice
    cupy_standin.install(monkeypatch)
    monkeypatch.setattr(tma, "available", lambda: False)
    kernel, sizes, _, _ = K.matmul_t(256, 256, 256, "f16", False, False)
    program = CudaDevice(0).prepare(kernel, sizes).compiled.program
    assert not program.tensor_maps and "wgmma" in program.schedule and "cp.async" in program.schedule
