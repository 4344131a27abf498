"""Exact f32 GEMM as three TF32 products on Hopper's warpgroup MMAs (schedules/gemm_split.py):
on the emulator (its TF32 steps cut each operand's low 13 bits, as the hardware reads them)
against numpy in f64, to f32's accuracy rather than TF32's, in every operand layout that has
a side along K, odd sizes, rings that wrap and several tiles; where it is chosen; the printed
CUDA through nvcc for sm_90a; and, where there is a Hopper GPU, as the hardware runs it."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
import nvcc_runs  # noqa: E402

from compute_testing import emulate_kernel, lower_block  # noqa: E402
from kernel_sources import BATCHED, EPILOGUE  # noqa: E402
from test_gemm_schedule import _tf32  # noqa: E402
from test_gemm_wgmma import (GPU, NVCC, ON_HOPPER, _rewritten, compiles_for_sm_90a,  # noqa: E402
                             queue_for_sm_90a)
from zynbook import tuning  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler.launch import ir  # noqa: E402
from zynbook.compiler.schedules import gemm  # noqa: E402
from zynbook.compiler.schedules.base import Choice  # noqa: E402
from zynbook.compiler.schedules.gemm import Gemm  # noqa: E402
from zynbook.compiler.schedules.gemm_split import SPLIT_CONV_TILE, oriented  # noqa: E402
from zynbook.compiler.targets import cuda_target  # noqa: E402

# f32's own error over these depths is about 1e-7 of the largest output; one TF32 product
# (10-bit mantissas) is about 1e-3 off, so this bound tells the split from a plain TF32 step
EXACT = 2e-6


def product(ins, ta, tb):
    a, b = (np.asarray(x, np.float64) for x in ins)
    return (a.T if ta else a) @ (b.T if tb else b)


def error(got, want) -> float:
    return float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max() / np.abs(want).max())


def emulated(mnk, ta, tb, tile=None, seed=3):
    """(program, error against f64) of this f32 matmul with the split tile given along its
    (r, s) sides (`tile`: r extent, s extent, warpgroup s extent, stages), or the default."""
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f32", ta, tb)
    ins = make(np.random.default_rng(seed))
    form, _ = gemm.match(kernel, sizes)
    p = oriented(form, *tile) if tile else Gemm().default(kernel, cuda_target(), sizes)
    prog = Gemm().build(kernel, cuda_target(), sizes, p)
    got = emulate_kernel(prog, kernel, ins, sizes, None)
    return prog, error(got, product(ins, ta, tb))


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, True)],
                         ids=["B-along-N", "both-along-K", "A-along-M"])
def test_every_layout_with_a_side_along_k(ta, tb):
    prog, err = emulated((64, 64, 96), ta, tb, (64, 64, 64, 2))
    assert err < EXACT, err
    mmas = [n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.WarpgroupMma)]
    assert {(m.dtype, m.a_regs, m.b_kmajor) for m in mmas} == {("tf32", True, True)}
    # three products a k8 step, the slice's first overwriting the partial sums
    assert len(mmas) == 3 and sum(m.fresh is not None for m in mmas) == 1
    assert "three TF32 products" in prog.schedule and prog.arch_specific


@pytest.mark.parametrize("mnk,ta,tb,tile", [
    ((136, 200, 320), False, False, (128, 128, 128, 4)),    # two warpgroups, ring of 4 wraps
    ((130, 66, 100), False, True, (64, 128, 128, 4)),       # K not a multiple of the slice
    ((77, 130, 72), True, True, (128, 128, 64, 3)),         # M odd: A by 4-byte copies
    ((72, 136, 200), False, False, (128, 64, 64, 2))])      # two along the s side
def test_odd_sizes_and_other_tiles(mnk, ta, tb, tile):
    _, err = emulated(mnk, ta, tb, tile, seed=sum(mnk))
    assert err < EXACT, err


@pytest.mark.parametrize("case", ["epilogue", "batched"])
def test_an_epilogue_and_batches(case):
    # gelu(relu(acc) + bias / 2) from a bias start, per element of C wherever the
    # accumulators hold it (C transposed here); three batches of products
    rng = np.random.default_rng(11)
    text, shapes = {"epilogue": (EPILOGUE, dict(A=(70, 64), B=(64, 72), bias=(72,))),
                    "batched": (BATCHED, dict(A=(3, 65, 64), B=(3, 64, 72)))}[case]
    arrays = {n: rng.standard_normal(sh).astype(np.float32) for n, sh in shapes.items()}
    kernel, ins, sizes, scalars = lower_block(text, arrays)
    form, _ = gemm.match(kernel, sizes)
    prog = Gemm().build(kernel, cuda_target(), sizes, oriented(form, 128, 64, 64, 3))
    assert "three TF32 products" in prog.schedule
    got = np.asarray(emulate_kernel(prog, kernel, ins, sizes, scalars), np.float64)
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars), np.float64)
    assert error(got, want) < EXACT


def test_tf32_one_product_a_step():
    # TF32 where the program allows it: each operand rounded to TF32 (nearest), the sums the
    # tensor cores' own
    kernel, sizes, make, _ = K.matmul_t(136, 200, 320, "f32", False, False)
    kernel = tuning.allowing_tf32(kernel, tuning.Settings(allow_tf32=True))
    ins = make(np.random.default_rng(7))
    form, _ = gemm.match(kernel, sizes)
    prog = Gemm().build(kernel, cuda_target(), sizes, oriented(form, 128, 64, 64, 3, 1))
    mmas = [n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.WarpgroupMma)]
    assert len(mmas) == 1 and mmas[0].fresh is None and "operands rounded to TF32" in prog.schedule
    got = emulate_kernel(prog, kernel, ins, sizes, None)
    want = product([_tf32(x) for x in ins], False, False)
    assert error(got, want) < EXACT
    assert error(got, product(ins, False, False)) > 50 * EXACT       # it is TF32's product


@pytest.mark.parametrize("terms,cin", [(3, 8), (1, 8), (3, 32)])
def test_a_convolution_with_its_gathered_input_in_registers(terms, cin):
    # the filters (along K) stay in shared memory, the im2col input comes by 4-byte copies
    # whose zero fill is the padding; with 32 channels K is walked tap by tap (k_order)
    exact, sizes, make, ref = K.conv2d(batch=2, cin=cin, cout=16, h=9, w=7)
    kernel = tuning.allowing_tf32(exact, tuning.Settings(allow_tf32=terms == 1))
    ins = make(np.random.default_rng(8))
    form, _ = gemm.match(kernel, sizes)
    assert gemm._gathered(form)
    prog = Gemm().build(kernel, cuda_target(), sizes, oriented(form, 64, 64, 64, 3, terms))
    assert "implicit GEMM" in prog.schedule
    got = np.asarray(emulate_kernel(prog, kernel, ins, sizes, None), np.float64)
    x, w, bias = ins
    want = np.asarray(ref([_tf32(x), _tf32(w), bias] if terms == 1 else ins, sizes), np.float64)
    assert error(got, want) < EXACT


def test_without_the_small_halves_it_is_only_tf32():
    # the test can fail: the same program with its small-half products taken out is off by
    # TF32's error
    kernel, sizes, make, _ = K.matmul_t(64, 64, 96, "f32", False, True)
    ins = make(np.random.default_rng(4))
    form, _ = gemm.match(kernel, sizes)
    prog = Gemm().build(kernel, cuda_target(), sizes, oriented(form, 64, 64, 64, 2))
    drop = lambda n: isinstance(n, ir.WarpgroupMma) and n.fresh is None
    prog = _rewritten(prog, lambda n: () if drop(n) else n)
    err = error(emulate_kernel(prog, kernel, ins, sizes, None), product(ins, False, True))
    assert err > 50 * EXACT, err


def test_chosen_for_exact_f32_on_hopper_only():
    kernel, sizes, _, _ = K.matmul_t(4096, 4096, 4096, "f32", False, False)
    assert Gemm().default(kernel, cuda_target(), sizes).terms == 3
    # Ampere has no warpgroup MMAs: the FMA tiles
    assert not Gemm().default(kernel, cuda_target((8, 0)), sizes).mma
    # TF32 where the program allows it: mma.sync by default, one product a step on warpgroup
    # MMAs a candidate of the tuner
    tf32 = tuning.allowing_tf32(kernel, tuning.Settings(allow_tf32=True))
    p = Gemm().default(tf32, cuda_target(), sizes)
    assert p.mma and not p.wgmma
    assert any(q.terms == 1 for q in Gemm().space(tf32, cuda_target(), sizes))
    # neither operand along K: no K-major side for the shared operand
    kernel, sizes, _, _ = K.matmul_t(4096, 4096, 4096, "f32", True, False)
    assert not Gemm().default(kernel, cuda_target(), sizes).mma
    # the tuner's space starts with the split tiles
    kernel, sizes, _, _ = K.matmul_t(1024, 1024, 1024, "f32", False, False)
    space = Gemm().space(kernel, cuda_target(), sizes)
    assert sum(p.terms == 3 for p in space) >= 4 and space[0].terms == 3


def test_a_convolution_in_tf32_takes_one_product_a_step_on_hopper():
    # a convolution's few filters in TF32: the split builder's conv tile with one product a
    # step (faster there than mma.sync); exact f32 keeps three; Ampere keeps mma.sync
    exact, sizes, _, _ = K.conv2d(batch=32, cin=64, cout=64, h=56, w=56)
    tf32 = tuning.allowing_tf32(exact, tuning.Settings(allow_tf32=True))
    form, _ = gemm.match(tf32, sizes)
    p = Gemm().default(tf32, cuda_target(), sizes)
    assert p == oriented(form, *SPLIT_CONV_TILE, terms=1)
    assert Gemm().default(exact, cuda_target(), sizes) == oriented(form, *SPLIT_CONV_TILE)
    p = Gemm().default(tf32, cuda_target((8, 0)), sizes)
    assert p.mma and not p.wgmma


NVCC_CASES = [((4096, 4096, 4096), False, False), ((301, 296, 200), False, True)]


@pytest.fixture(scope="module")
def queued_compiles():
    futures = queue_for_sm_90a([("f32", mnk, ta, tb, None) for mnk, ta, tb in NVCC_CASES])
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("mnk,ta,tb", NVCC_CASES)
def test_nvcc_compiles_for_sm_90a(mnk, ta, tb, queued_compiles):
    prog = compiles_for_sm_90a("f32", mnk, ta, tb, None)
    assert "k8.f32.tf32.tf32" in prog.source and "cvt.rna.tf32.f32" in prog.source


@pytest.mark.gpu
@pytest.mark.skipif(not ON_HOPPER, reason="no sm_90 CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("mnk,ta,tb,tile", [
    ((4096, 4096, 4096), False, False, None),               # the default
    ((1024, 1024, 1024), False, True, None),
    ((301, 296, 200), False, False, None),
    ((264, 280, 203), True, True, (128, 128, 64, 3)),
    ((520, 264, 192), False, False, (64, 128, 128, 2))])
def test_split_on_the_gpu(mnk, ta, tb, tile):
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f32", ta, tb)
    ins = make(np.random.default_rng(13))
    form, _ = gemm.match(kernel, sizes)
    plan = GPU.prepare(kernel, sizes) if tile is None else \
        GPU.prepare(kernel, sizes, params=Choice("gemm", oriented(form, *tile)))
    assert "three TF32 products" in plan.compiled.program.schedule
    out, _ = plan.launch(ins, {})
    err = error(GPU.to_host(out), product(ins, ta, tb))
    assert err < EXACT, err
