"""The GEMM schedule on Hopper's warpgroup MMAs (schedules/gemm_wgmma.py): the emulator's
model of wgmma (backends/wgmma_model.py: descriptors, the 128-byte swizzle, asynchronous
completion) against the CPU reference for f16 and bf16 in every operand layout, odd sizes,
an epilogue and batches; the printed CUDA through nvcc for sm_90a; where the schedule is
offered; and, where there is a CUDA GPU, the programs as the hardware runs them."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
import nvcc_runs  # noqa: E402

from compute_testing import cuda_device, emulate_kernel, lower_block  # noqa: E402
from kernel_sources import BATCHED, HALF_EPILOGUE  # noqa: E402
from tolerances import tolerance  # noqa: E402
from zynbook.backends import emulator as emulate  # noqa: E402
from zynbook.backends import wgmma_model  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler.codegen.cuda import render_cuda  # noqa: E402
from zynbook.compiler.launch import ir  # noqa: E402
from zynbook.compiler.launch.text import format_program  # noqa: E402
from zynbook.compiler.schedules.base import Choice  # noqa: E402
from zynbook.compiler.schedules.gemm import Gemm, GemmParams  # noqa: E402
from zynbook.compiler.targets import cuda_target  # noqa: E402

LAYOUTS = [(False, False), (True, True), (True, False), (False, True)]
# small tiles keep the emulator quick: one warpgroup of 64 x 64; two along M; two along N
SMALL = GemmParams(64, 64, 64, 64, 64, 8, True, 3, True, True)
TWO_M = GemmParams(128, 64, 64, 64, 64, 8, True, 4, True, True)
TWO_N = GemmParams(64, 128, 64, 64, 64, 8, True, 3, True, True)


def check(kernel, ins, sizes, params, scalars=None):
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars or {}), np.float64)
    prog = Gemm().build(kernel, cuda_target(), sizes, params)
    assert any(isinstance(n, ir.WarpgroupMma) for n in ir.walk(prog.kernels[0])), prog.schedule
    got = emulate_kernel(prog, kernel, ins, sizes, scalars)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, err_msg=params.describe(),
                               **tolerance("f16", "contraction"))
    return prog


def test_a_descriptor_has_the_documented_bit_fields():
    # start address >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, 128-byte swizzle
    # (1) in 62-63; the start address is taken modulo 2^18
    d = wgmma_model.descriptor(0x3F230 + 0x40000, 8192, 1024)
    assert d == 0x3F23 | (512 << 16) | (64 << 32) | (1 << 62)
    assert wgmma_model.decode(d) == (0x3F230, 8192, 1024, 0, 1)


def test_the_swizzle_moves_each_16_byte_unit_of_a_row_by_the_row():
    # K-major rows of 128 bytes from a 1024-byte aligned start: unit u of row r at u ^ (r % 8)
    addr = wgmma_model.addresses(wgmma_model.descriptor(2048, 16, 1024), 64, True)
    for x in (0, 5, 13, 63):
        for k in (0, 7, 8, 15):
            assert addr[x, k] == 2048 + (x // 8) * 1024 + (x % 8) * 128 + \
                (((k // 8) ^ (x % 8)) * 16) + (k % 8) * 2
    # MN-major: 64 elements of M or N a 128-byte row per k, blocks of 64 LBO apart
    addr = wgmma_model.addresses(wgmma_model.descriptor(4096, 8192, 1024), 128, False)
    for x in (0, 9, 64, 127):
        for k in (0, 3, 9, 15):
            assert addr[x, k] == 4096 + (x // 64) * 8192 + (k // 8) * 1024 + (k % 8) * 128 + \
                ((((x % 64) // 8) ^ (k % 8)) * 16) + (x % 8) * 2


def test_a_landed_step_hands_its_registers_back():
    # after a wait lands the older group, the thread's own writes to its accumulators are
    # what a later step adds to, though a newer group is still in flight
    a, b = np.zeros(2, np.float32), np.zeros(2, np.float32)
    w = wgmma_model.InFlight()
    w.issue(a, 0, ((1.0, 2.0), None))
    w.commit()
    w.issue(b, 0, ((3.0, 4.0), None))
    w.commit()
    assert w.values(a, 0, 2) == (1.0, 2.0)          # the pending values, as the hardware chains
    w.wait(1)
    a[0] = 5.0                                      # e.g. the softmax's rescale of O
    assert w.values(a, 0, 2) == (5.0, 2.0) and w.values(b, 0, 2) == (3.0, 4.0)
    w.wait(0)
    assert list(b) == [3.0, 4.0]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_every_operand_layout(dtype, ta, tb):
    kernel, sizes, make, _ = K.matmul_t(64, 64, 128, dtype, ta, tb)
    prog = check(kernel, make(np.random.default_rng(5)), sizes, SMALL)
    mmas = [n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.WarpgroupMma)]
    assert {(m.a_kmajor, m.b_kmajor) for m in mmas} == {(not ta, tb)}
    assert "wgmma m64n64k16" in prog.schedule and prog.arch_specific
    text = format_program(prog)
    assert f"wgmma m64n64k16 ({dtype}) _acc[0 ..+32] += _shm[" in text and "wgmma wait 1" in text


@pytest.mark.parametrize("params", [TWO_M, TWO_N], ids=["two-along-M", "two-along-N"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_warpgroups_of_a_block_and_a_ring_that_wraps(params, ta, tb):
    # K = 320: five slices through a ring of three or four buffers
    kernel, sizes, make, _ = K.matmul_t(128, 128, 320, "bf16", ta, tb)
    check(kernel, make(np.random.default_rng(6)), sizes, params)


def test_the_default_tile_over_partial_tiles():
    # 128 x 256 of two warpgroups of m64n256k16: four blocks' tiles, three of them partial
    kernel, sizes, make, _ = K.matmul_t(136, 264, 200, "bf16", False, False)
    p = Gemm().default(kernel, cuda_target(), sizes)
    assert (p.wgmma, p.bm, p.bn, p.tn) == (True, 128, 256, 256)
    check(kernel, make(np.random.default_rng(10)), sizes, p)


# odd sizes: a side read in 16-byte vectors along its contiguous axis has that axis a
# multiple of 8; every other extent is odd, so guarded copies fill zeros and stores skip
@pytest.mark.parametrize("mnk,ta,tb", [((77, 130, 72), False, True),      # M, N odd
                                       ((72, 136, 70), True, False),      # K odd
                                       ((77, 136, 72), False, False)])    # M odd, B along N
def test_odd_sizes(mnk, ta, tb):
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f16", ta, tb)
    check(kernel, make(np.random.default_rng(sum(mnk))), sizes, SMALL)


@pytest.mark.parametrize("case", ["epilogue", "batched"])
def test_epilogue_and_batches(case):
    kernel, ins, sizes, scalars = epilogue_or_batches(case, 2)
    check(kernel, ins, sizes, SMALL, scalars)


def epilogue_or_batches(case: str, batch: int):
    """(kernel, inputs, sizes, scalars) of an f16 GEMM with a bias + activation epilogue, or
    of `batch` batched products."""
    rng = np.random.default_rng(7)
    text, shapes = {"epilogue": (HALF_EPILOGUE, dict(A=(70, 64), B=(64, 72), bias=(72,))),
                    "batched": (BATCHED, dict(A=(batch, 37, 64), B=(batch, 64, 40)))}[case]
    arrays = {n: rng.standard_normal(s).astype(np.float16) for n, s in shapes.items()}
    return lower_block(text, arrays)


def _rewritten(prog, fix):
    """`prog`'s kernel with each statement (in loops and ifs too) replaced by fix(it): one
    statement, or a tuple of them (none drops it)."""
    def walk(body):
        out = []
        for node in body:
            if isinstance(node, ir.For):
                node = replace(node, body=walk(node.body))
            elif isinstance(node, ir.If):
                node = replace(node, then=walk(node.then), orelse=walk(node.orelse))
            got = fix(node)
            out += list(got) if isinstance(got, tuple) else [got]
        return tuple(out)
    k = prog.kernels[0]
    return replace(prog, kernels=(replace(k, body=walk(k.body)),), fallback=None)


def test_a_slice_rewritten_while_its_mmas_run_is_caught():
    # with two groups left in flight, the copies into the buffer of slice kt - 2 overwrite
    # what its MMAs, still running, read
    kernel, sizes, make, _ = K.matmul_t(64, 64, 320, "f16", False, False)
    prog = Gemm().build(kernel, cuda_target(), sizes, SMALL)
    two = _rewritten(prog, lambda n: replace(n, pending=2) if isinstance(n, ir.WarpgroupWait) and n.pending else n)
    with pytest.raises(emulate.EmulatorError, match="still reads"):
        emulate_kernel(two, kernel, make(np.random.default_rng(8)), sizes)


def test_copies_the_mmas_read_without_a_proxy_fence_are_caught():
    kernel, sizes, make, _ = K.matmul_t(64, 64, 128, "bf16", True, False)
    prog = Gemm().build(kernel, cuda_target(), sizes, SMALL)
    unfenced = _rewritten(prog, lambda n: () if isinstance(n, ir.ProxyFence) else n)
    with pytest.raises(emulate.EmulatorError, match="no fence.proxy.async"):
        emulate_kernel(unfenced, kernel, make(np.random.default_rng(9)), sizes)


def test_the_default_on_sm_90_and_nowhere_else():
    kernel, sizes, _, _ = K.matmul_t(4096, 4096, 4096, "bf16", False, False)
    p = Gemm().default(kernel, cuda_target((9, 0)), sizes)     # fed by the copy engine
    assert (p.wgmma, p.tma, p.bm, p.bn, p.bk, p.tn, p.stages, p.threads) == (True, True, 128, 256, 64, 256, 3, 384)
    space = Gemm().space(kernel, cuda_target((9, 0)), sizes)
    assert space[0] == p and sum(q.wgmma for q in space) > 4
    assert all(q.shared_bytes(2, 4) + 1024 <= cuda_target().shared_bytes for q in space if q.wgmma)
    for cc in ((8, 0), (8, 6), (8, 9), (10, 0)):
        assert not any(q.wgmma for q in Gemm().space(kernel, cuda_target(cc), sizes))
    # f32 operands take warpgroup MMAs only split into TF32 halves (test_gemm_split.py),
    # mixed types keep to mma.sync
    for dt, db in (("f32", None), ("f16", "bf16")):
        k2, s2, _, _ = K.matmul_t(256, 256, 256, dt, False, False, db)
        assert all(q.terms == 3 for q in Gemm().space(k2, cuda_target(), s2) if q.wgmma)
    k2, s2, _, _ = K.matmul_t(256, 256, 256, "f16", False, False, "bf16")
    assert not any(q.wgmma for q in Gemm().space(k2, cuda_target(), s2))
    # a side of 64 or less: a smaller tile
    k3, s3, _, _ = K.matmul_t(48, 104, 512, "f16", False, False)
    p3 = Gemm().default(k3, cuda_target(), s3)
    assert (p3.wgmma, p3.bm, p3.bn, p3.tn) == (True, 64, 128, 128)


def test_a_tile_hint_reaches_the_warpgroups_or_else_the_warps():
    src = """let y = compute(A, B) {
    @tile(HINT)
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[i, k] * B[k, j]
        out[i, j] = acc
}
y
"""
    rng = np.random.default_rng(11)
    arrays = dict(A=rng.standard_normal((256, 256)).astype(np.float16),
                  B=rng.standard_normal((256, 256)).astype(np.float16))
    for hint, want in (("bm=128, bn=128", (True, 128, 128, 64, 128)),
                       ("bm=64, bn=128, bk=32", (False, 64, 128, 32, 64))):
        kernel, _, sizes, _ = lower_block(src.replace("HINT", hint), arrays)
        p = Gemm().default(kernel, cuda_target(), sizes)
        assert (p.wgmma, p.bm, p.bn, p.bk, p.tn) == want, p.describe()


def test_dynamic_shared_memory_starts_on_a_1024_byte_boundary():
    kernel, sizes, _, _ = K.matmul_t(512, 512, 512, "f16", False, False)
    prog = render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", GemmParams(
        128, 256, 64, 64, 256, 8, True, 4, True, True))})
    assert prog.arch_specific and "wgmma m64n256k16" in prog.schedule
    assert prog.steps[0].smem == 4 * 2 * (128 * 64 + 256 * 64) + 1024 - 16
    assert "extern __shared__ __align__(1024) unsigned char zyn_smem_raw[];" in prog.source
    assert "fence.proxy.async.shared::cta" in prog.source
    assert not render_cuda(kernel, sizes, (8, 0)).arch_specific


def test_the_device_compiles_such_programs_for_sm_90a():
    from zynbook.backends.cuda.device import CudaDevice
    dev = CudaDevice.__new__(CudaDevice)        # the options only: no GPU needed
    dev.cc, dev._includes = (9, 0), []
    assert "--gpu-architecture=sm_90a" in dev._options(True)       # the cubin
    assert "--gpu-architecture=sm_90" in dev._options()
    assert "--gpu-architecture=compute_90a" in dev._options(True, binary=False)     # its PTX
    assert "--gpu-architecture=compute_90" in dev._options(binary=False)


NVCC = nvcc_runs.NVCC


NVCC_CASES = [
    ("bf16", (4096, 4096, 4096), False, False, None),                   # the default
    ("f16", (4096, 4096, 4096), True, True, None),
    ("f16", (301, 296, 200), False, False, GemmParams(128, 128, 64, 64, 128, 8, True, 5, True, True)),
    ("bf16", (256, 512, 512), True, False, GemmParams(128, 256, 64, 64, 128, 8, True, 3, True, True))]


@pytest.fixture(scope="module")
def queued_compiles():
    futures = queue_for_sm_90a(NVCC_CASES)
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype,mnk,ta,tb,params", NVCC_CASES)
def test_nvcc_compiles_for_sm_90a(dtype, mnk, ta, tb, params, queued_compiles):
    compiles_for_sm_90a(dtype, mnk, ta, tb, params)


SM_90A = ("-gencode", "arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v")


def program_for_sm_90a(dtype, mnk, ta, tb, params):
    kernel, sizes, _, _ = K.matmul_t(*mnk, dtype, ta, tb)
    return render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", params)} if params else None)


def queue_for_sm_90a(cases) -> list:
    """The nvcc compiles of `cases` (dtype, mnk, ta, tb, params) queued at once (nvcc_runs.py),
    for a module's fixture: they run beside one another and the tests, each test then waits
    for its own (a case that does not render is left to its test to report)."""
    futures = []
    for case in cases:
        try:
            futures.append(nvcc_runs.queue(program_for_sm_90a(*case).source, SM_90A))
        except Exception:       # noqa: BLE001
            continue
    return futures


def compiles_for_sm_90a(dtype, mnk, ta, tb, params, tmp_path=None):
    """The program of this matmul through nvcc for sm_90a, with no spills and the MMAs kept
    asynchronous (ptxas reports a "Performance Loss" where it serialises them)."""
    prog = program_for_sm_90a(dtype, mnk, ta, tb, params)
    assert prog.arch_specific
    res = nvcc_runs.run(prog.source, SM_90A)
    assert res.returncode == 0, res.stderr[-3000:]
    assert set(re.findall(r"(\d+) bytes spill stores", res.stderr)) == {"0"}, res.stderr[-3000:]
    assert "Performance Loss" not in res.stderr, res.stderr[-3000:]
    return prog


# ---- on a GPU, where there is one: the programs as the hardware runs them


GPU = cuda_device()
ON_HOPPER = GPU is not None and tuple(getattr(GPU, "cc", (0, 0))) == (9, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not ON_HOPPER, reason="no sm_90 CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("mnk,ta,tb,params", [
    ((4096, 4096, 4096), False, False, None),                           # the default
    ((301, 296, 200), False, False, None),
    ((301, 298, 200), False, True, GemmParams(128, 128, 64, 64, 128, 8, True, 4, True, True)),
    ((264, 280, 203), True, False, GemmParams(128, 256, 64, 64, 128, 8, True, 3, True, True)),
    ((520, 264, 192), True, True, GemmParams(64, 256, 64, 64, 256, 8, True, 5, True, True))])
def test_wgmma_on_the_gpu(dtype, mnk, ta, tb, params):
    plan = runs_on_the_gpu(dtype, mnk, ta, tb, params)
    assert plan.compiled.program.arch_specific and "wgmma" in plan.compiled.program.schedule


def runs_on_the_gpu(dtype, mnk, ta, tb, params, launches: int = 1):
    """The plan of this matmul (the default where `params` is None), launched on the GPU and
    checked against numpy."""
    kernel, sizes, make, _ = K.matmul_t(*mnk, dtype, ta, tb)
    ins = make(np.random.default_rng(13))
    a, b = (np.asarray(x, np.float64) for x in ins)
    want = (a.T if ta else a) @ (b.T if tb else b)
    plan = GPU.prepare(kernel, sizes) if params is None else \
        GPU.prepare(kernel, sizes, params=Choice("gemm", params))
    for _ in range(launches):
        out, _ = plan.launch(ins, {})
    got = np.asarray(GPU.to_host(out), np.float64).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max(), err_msg=str(params))
    return plan
