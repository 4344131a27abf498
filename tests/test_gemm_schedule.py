"""The GEMM schedule (compiler/schedules/gemm.py) on the launch-IR emulator against the
reference executor: shared-memory tiles with register blocking (CUDA, Metal, C++, WebGPU),
vector loads with their unaligned fallback, tensor-core warp tiles (CUDA f16/bf16); odd
sizes, a user accumulator, epilogues, a guarded accumulation, batches, transposed operands
and a convolution (implicit GEMM)."""
from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402

from compute_testing import cuda_device, emulate_kernel, lower_block  # noqa: E402
from kernel_sources import BATCHED, EPILOGUE, GUARDED, HALF_EPILOGUE  # noqa: E402
from tolerances import tolerance  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler import schedules  # noqa: E402
from zynbook.compiler.codegen.dialects.msl import MslDialect  # noqa: E402
from zynbook.compiler.codegen.printer import print_program  # noqa: E402
from zynbook.compiler.launch import ir  # noqa: E402
from zynbook.compiler.schedules.gemm import Gemm, GemmParams  # noqa: E402
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target  # noqa: E402

TARGETS = {"cuda": cuda_target(), "metal": metal_target(), "cpp": cpu_target(),
           "webgpu": webgpu_target()}
# small tiles keep the emulator quick; one thread a block on the CPU
PARAMS = {
    "cuda": [GemmParams(16, 16, 8, 4, 4, 1), GemmParams(32, 32, 8, 4, 4, 4),
             GemmParams(32, 16, 16, 8, 4, 4)],
    "metal": [GemmParams(16, 16, 8, 4, 4, 1), GemmParams(32, 16, 4, 8, 4, 1)],
    "cpp": [GemmParams(16, 16, 16, 16, 16, 1), GemmParams(8, 4, 4, 8, 4, 1)],
    "webgpu": [GemmParams(16, 16, 8, 4, 4, 1), GemmParams(16, 32, 8, 4, 8, 1),
               # the wide tiles' thread shapes (WIDE_FMA_TILES), 4-deep slices
               GemmParams(16, 64, 4, 4, 16, 1), GemmParams(64, 16, 4, 16, 4, 1)],
}


def check(kernel, ins, sizes, target, params, scalars=None, dtype="f32"):
    want = np.asarray(run_kernel(kernel, ins, sizes, scalars or {}), np.float64)
    prog = Gemm().build(kernel, target, sizes, params)
    got = emulate_kernel(prog, kernel, ins, sizes, scalars)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, err_msg=params.describe(),
                               **tolerance("f16" if dtype in ("f16", "bf16") else dtype,
                                           "contraction"))
    if prog.fallback is not None:
        got = emulate_kernel(prog.fallback, kernel, ins, sizes, scalars)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, err_msg="fallback",
                                   **tolerance("f16" if dtype in ("f16", "bf16") else dtype,
                                               "contraction"))
    return prog


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("mnk", [(37, 29, 53), (1, 1, 1), (65, 130, 17), (32, 32, 16)])
def test_matmul_every_target_and_size(target, mnk):
    kernel, sizes, make, _ = K.matmul(*mnk)
    ins = make(np.random.default_rng(sum(mnk)))
    for params in PARAMS[target]:
        check(kernel, ins, sizes, TARGETS[target], params)


def test_vector_loads_and_their_fallback():
    kernel, sizes, make, _ = K.matmul(40, 36, 24)
    prog = check(kernel, make(np.random.default_rng(1)), sizes, cuda_target(),
                 GemmParams(32, 32, 8, 4, 4, 4))
    assert prog.aligned == ("u_A", "u_B") and prog.fallback is not None
    assert "u_A in 16-byte loads" not in prog.schedule and "A in 16-byte loads" in prog.schedule
    assert any(isinstance(n, ir.Copy) for n in ir.walk(prog))
    assert not any(isinstance(n, ir.Copy) and n.src == "u_A" for n in ir.walk(prog.fallback))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
def test_tensor_cores_every_operand_layout(dtype, ta, tb):
    kernel, sizes, make, _ = K.matmul_t(40, 48, 32, dtype, ta, tb)
    ins = make(np.random.default_rng(3))
    params = GemmParams(32, 32, 16, 16, 16, 8, True)
    prog = check(kernel, ins, sizes, cuda_target(), params, dtype=dtype)
    assert any(isinstance(n, ir.Mma) for n in ir.walk(prog))
    assert "tensor cores" in prog.schedule
    assert Gemm().default(kernel, cuda_target(), sizes).mma


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_halves_of_odd_sizes_take_the_fma_tiles(dtype):
    kernel, sizes, make, _ = K.matmul(50, 70, 30, dtype)
    p = Gemm().default(kernel, cuda_target(), sizes)
    assert not p.mma and (p.tm, p.tn) == (4, 8)
    check(kernel, make(np.random.default_rng(5)), sizes, cuda_target(),
          GemmParams(16, 32, 8, 4, 8, 4), dtype=dtype)
    assert Gemm().default(kernel, cuda_target((7, 5)), sizes).mma is False


def test_tensor_cores_only_print_in_cuda():
    kernel, sizes, _, _ = K.matmul(32, 32, 32, "f16")
    prog = Gemm().build(kernel, cuda_target(), sizes, GemmParams(32, 32, 16, 16, 16, 8, True))
    with pytest.raises(TypeError, match="has no tensor-core"):
        print_program(MslDialect(), prog, kernel)
    assert not Gemm().default(kernel, metal_target(), sizes).mma




TRANSPOSED = """let y = compute(A, B) {
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += B[j, k] * A[k, i]
        out[i, j] = acc
}
y
"""

def _arrays(rng, **shapes):
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


CASES = {
    "epilogue": (EPILOGUE, dict(A=(37, 21), B=(21, 29), bias=(29,))),
    "guarded": (GUARDED, dict(A=(33, 40), B=(40, 19))),
    "transposed": (TRANSPOSED, dict(A=(23, 37), B=(29, 23))),
    "batched": (BATCHED, dict(A=(3, 37, 21), B=(3, 21, 29))),
}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_source_kernels(case, target):
    text, shapes = CASES[case]
    kernel, ins, sizes, scalars = lower_block(text, _arrays(np.random.default_rng(7), **shapes))
    tgt = TARGETS[target]
    assert Gemm().why_not(kernel, tgt, sizes) is None
    for params in PARAMS[target]:
        check(kernel, ins, sizes, tgt, params, scalars)


def test_user_names_and_the_epilogue_reach_the_program():
    kernel, ins, sizes, _ = lower_block(EPILOGUE, _arrays(np.random.default_rng(1), A=(37, 21),
                                                          B=(21, 29), bias=(29,)))
    prog = schedules.build(kernel, cuda_target(), sizes, only="gemm")
    assert prog.schedule.startswith("contraction as GEMM: M=37 N=29 K=21")
    names = {n.name for n in ir.walk(prog) if isinstance(n, ir.Decl)}
    assert "u_acc" in names
    assert any(isinstance(n, ir.Math) and n.fn == "gelu" for n in ir.walk(prog))


def test_convolution_is_an_implicit_gemm():
    kernel, sizes, make, _ = K.conv2d(batch=1, cin=3, cout=16, h=6, w=6)
    ins = make(np.random.default_rng(2))
    prog = check(kernel, ins, sizes, cuda_target(), GemmParams(16, 16, 8, 4, 4, 4))
    assert "implicit GEMM" in prog.schedule


def test_webgpu_program_serves_every_size():
    kernel, sizes, _, _ = K.matmul(37, 29, 53)
    tgt = webgpu_target()
    p = Gemm().default(kernel, tgt, sizes)
    assert p.width == 1 and p.threads <= tgt.max_threads
    a = Gemm().build(kernel, tgt, sizes, p)
    b = Gemm().build(kernel, tgt, {"M": 1001, "N": 1002, "K": 1003}, p)
    assert a == b and "every size" in a.schedule


def test_the_wide_tile_is_baked_for_many_tiles_on_threads_that_hold_it():
    from zynbook.compiler.codegen import wgsl
    kernel, _, _, _ = K.matmul(8, 8, 8)
    nvidia = wgsl.launch_target(wgsl.WGSLOptions(adapter="NVIDIA H200"))
    baked = replace(nvidia, symbolic_sizes=False)
    big, mid = {"M": 4096, "N": 4096, "K": 300}, {"M": 2048, "N": 2048, "K": 2048}
    # a program for every size set keeps 128 x 128; the launch's own sizes take the wide tile
    assert Gemm().default(kernel, nvidia, big).tn == 8
    assert not Gemm().wants_launch_sizes(kernel, baked, mid)
    assert Gemm().wants_launch_sizes(kernel, baked, big)
    p = Gemm().default(kernel, baked, big)
    assert (p.bm, p.bn, p.bk, p.tm, p.tn) == (128, 256, 4, 8, 16)
    # threads not known to hold 128 sums (another adapter), or 8-byte sums, keep 8 x 8
    other = replace(webgpu_target(), symbolic_sizes=False)
    assert not Gemm().wants_launch_sizes(kernel, other, big)
    assert Gemm().default(kernel, other, big).tn == 8
    assert Gemm().default(kernel, replace(baked, fma_sums=64), big).tn == 8
    # sizes that are not whole tiles keep 128 x 128 (its bounds tests cost the wide one most)
    assert not Gemm().wants_launch_sizes(kernel, baked, {"M": 4100, "N": 4000, "K": 300})


@pytest.mark.webgpu
def test_the_wide_tile_runs_on_a_webgpu_adapter(monkeypatch):
    from zynbook.backends.webgpu import discover
    devices = discover()
    if not devices:
        pytest.skip("no wgpu adapter")
    dev = devices[0]
    # the adapter taken for one whose threads hold 128 sums (the choice reads its name)
    monkeypatch.setattr(dev, "name", f"{dev.name} (NVIDIA)")
    kernel, sizes, make, want = K.matmul(2048, 4096, 8)
    ins = make(np.random.default_rng(5))
    got, _ = dev.launch(kernel, ins, sizes, {})
    assert "8x16 per thread" in dev.program(kernel, sizes).schedule
    np.testing.assert_allclose(np.asarray(got), want(ins, sizes), rtol=1e-5, atol=1e-5)


def test_hints_set_the_tile():
    kernel, sizes, _, _ = K.matmul(256, 256, 64)
    hinted = replace(kernel, schedule=replace(kernel.schedule, workgroup=None,
                                              tile=(("bk", 16), ("bm", 64), ("tm", 4))))
    p = Gemm().default(hinted, cuda_target(), sizes)
    assert (p.bm, p.bk, p.tm) == (64, 16, 4)
    # @workgroup(16, 16) of the kernel: a tile of 256 threads
    assert Gemm().default(kernel, cuda_target(), sizes).threads == 256
    space = Gemm().space(kernel, cuda_target(), sizes)
    assert len(space) > 3 and len(set(space)) == len(space)
    assert all(p.valid() for p in space)


def test_why_not():
    kernel, sizes, _, _ = K.matmul(8, 64, 64)
    assert "M=8" in Gemm().why_not(kernel, cuda_target(), sizes)
    kernel, sizes, _, _ = K.relu()
    assert Gemm().why_not(kernel, cuda_target(), sizes)
    # an adapter without shader-f16 holds f16 in f32: the GEMM still takes the kernel
    kernel, sizes, _, _ = K.matmul(64, 64, 64, "f16")
    assert Gemm().why_not(kernel, webgpu_target(), sizes) is None
    assert schedules.build(kernel, webgpu_target(), sizes, only="gemm") is not None


INT_OPERAND = """let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[i, k] * B[k, j]
        out[i, j] = acc
}
y
"""


@pytest.mark.parametrize("target", ["cuda", "webgpu"])
def test_integer_and_f64_operands(target):
    rng = np.random.default_rng(11)
    a = rng.integers(-5, 5, (21, 17)).astype(np.int32)
    b = rng.standard_normal((17, 19)).astype(np.float32)
    kernel, ins, sizes, scalars = lower_block(INT_OPERAND, {"A": a, "B": b})
    tgt = TARGETS[target]
    assert Gemm().why_not(kernel, tgt, sizes) is None
    # an integer operand is gathered element by element and converted, whatever the width
    check(kernel, ins, sizes, tgt, GemmParams(16, 16, 8, 4, 4, 4 if target == "cuda" else 1))
    if target == "cuda":
        a64, b64 = (rng.standard_normal(s) for s in ((21, 17), (17, 19)))
        kernel, ins, sizes, scalars = lower_block(INT_OPERAND, {"A": a64, "B": b64})
        prog = check(kernel, ins, sizes, tgt, GemmParams(16, 16, 8, 4, 4, 2), dtype="f64")
        assert {a.dtype for a in ir.walk(prog) if isinstance(a, ir.Array) and a.space == "shared"} == {"f64"}


K_GUARD = """let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            if k < 5:
                s += A[i, k] * B[k, j]
        out[i, j] = s
}
y
"""


def test_a_guard_on_k_alone_skips_non_finite_products():
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((19, 11)).astype(np.float32), rng.standard_normal((11, 18)).astype(np.float32)
    a[:, 7], b[8, :] = np.inf, np.nan           # never read where the guard holds
    kernel, ins, sizes, scalars = lower_block(K_GUARD, {"A": a, "B": b})
    for target in ("cuda", "webgpu"):
        got = check(kernel, ins, sizes, TARGETS[target], GemmParams(16, 16, 8, 4, 4, 1), scalars)
        assert "implicit GEMM" in got.schedule
    np.testing.assert_allclose(run_kernel(kernel, ins, sizes, scalars), a[:, :5] @ b[:5], rtol=1e-5)


def test_a_warp_step_reached_by_part_of_a_warp_is_a_schedule_bug():
    from zynbook.backends import emulator as emulate
    kernel, sizes, make, _ = K.matmul(32, 32, 32, "f16")
    prog = Gemm().build(kernel, cuda_target(), sizes, GemmParams(32, 32, 16, 16, 16, 8, True))
    k = prog.kernels[0]

    def lane_guarded(node):             # the first ldmatrix made by lanes 0-15 only
        if isinstance(node, ir.MatrixLoad):
            return ir.If(ir.Bin("<", ir.Thread("lane"), ir.Lit(16, "i32"), "bool"), (node,))
        if isinstance(node, (ir.For, ir.If)):
            import dataclasses as dc
            fields = {"body": tuple(map(lane_guarded, node.body))} if isinstance(node, ir.For) \
                else {"then": tuple(map(lane_guarded, node.then))}
            return dc.replace(node, **fields)
        return node
    bad = replace(prog, kernels=(replace(k, body=tuple(map(lane_guarded, k.body))),), fallback=None)
    with pytest.raises(emulate.EmulatorError, match="diverge.*ldmatrix"):
        emulate_kernel(bad, kernel, make(np.random.default_rng(0)), sizes)


# ---- the pipelined tensor-core schedule (cp.async stages, swizzled tiles) and TF32 -------

PIPELINED = [GemmParams(32, 32, 16, 16, 16, 8, True, 3, True),     # B fragments by ldmatrix x4
             GemmParams(32, 64, 32, 32, 16, 8, True, 2, False),    # padded rows, 2 stages
             GemmParams(32, 32, 16, 16, 8, 8, True, 4, True)]      # 8 warps, x2 B fragments


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
def test_pipelined_tensor_cores_every_operand_layout(dtype, ta, tb):
    # sizes that no tile divides; a side read in 16-byte vectors along it is a multiple of 8
    M, N, K_ = (40 if ta else 37), (45 if tb else 48), 40
    kernel, sizes, make, _ = K.matmul_t(M, N, K_, dtype, ta, tb)
    ins = make(np.random.default_rng(M + N))
    for params in PIPELINED:
        prog = check(kernel, ins, sizes, cuda_target(), params, dtype=dtype)
        nodes = list(ir.walk(prog.kernels[0]))
        assert any(isinstance(n, ir.AsyncCopy) for n in nodes)
        assert {n.pending for n in nodes if isinstance(n, ir.AsyncWait)} == {params.stages - 2}
        assert f"{params.stages} shared-memory stages by cp.async" in prog.schedule


@pytest.mark.parametrize("case", ["epilogue", "batched"])
def test_pipelined_tensor_cores_epilogue_and_batches(case):
    rng = np.random.default_rng(4)
    text, shapes = {"epilogue": (HALF_EPILOGUE, dict(A=(37, 24), B=(24, 40), bias=(40,))),
                    "batched": (BATCHED, dict(A=(2, 37, 24), B=(2, 24, 40)))}[case]
    arrays = {n: rng.standard_normal(s).astype(np.float16) for n, s in shapes.items()}
    kernel, ins, sizes, scalars = lower_block(text, arrays)
    auto = Gemm().default(kernel, cuda_target((8, 0)), sizes)
    assert auto.mma and auto.stages == 3 and auto.swizzle      # configs.GEMM_CONFIGS
    for params in PIPELINED[:2]:
        check(kernel, ins, sizes, cuda_target(), params, scalars, dtype="f16")


def _staged(prog) -> bool:
    """Whether C leaves through the shared tile `_shc`, in 16-byte copies to the output."""
    nodes = list(ir.walk(prog.kernels[0]))
    return any(isinstance(n, ir.Array) and n.name == "_shc" for n in nodes) and \
        any(isinstance(n, ir.Copy) and n.src == "_shc" for n in nodes)


@pytest.mark.parametrize("dtype,mnk,staged", [("f16", (37, 40, 24), True),    # partial rows
                                              ("f32", (45, 36, 20), True),    # 4-byte C
                                              ("f16", (37, 43, 24), False)])  # rows not whole vectors
def test_c_leaves_through_a_shared_tile_in_whole_rows(dtype, mnk, staged):
    kernel, sizes, make, _ = K.matmul_t(*mnk, "f16", False, not staged,
                                        b_dtype=None if dtype == "f16" else "bf16")
    kernel = _allow_tf32(kernel) if dtype == "f32" else kernel
    params = GemmParams(32, 32, 16, 16, 16, 8 if dtype == "f16" else 1, True,
                        3 if dtype == "f16" else 0, dtype == "f16")
    prog = Gemm().build(kernel, cuda_target(), sizes, params)
    assert _staged(prog) == staged
    assert ("u_out" in prog.aligned) == staged       # else the unaligned fallback runs
    ins = make(np.random.default_rng(sum(mnk)))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    got = emulate_kernel(prog, kernel, ins, sizes, {})
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **tolerance("f16", "contraction"))


def _without_barrier_before_staging(node):
    """`node` with the barrier dropped that comes right before the statement writing the
    staged C tile `_shc` (the epilogue's first stores)."""
    if isinstance(node, tuple):
        out = []
        for k, s in enumerate(node):
            nxt = node[k + 1] if k + 1 < len(node) else None
            if isinstance(s, ir.Barrier) and nxt is not None and any(
                    isinstance(n, ir.Store) and n.array == "_shc" for n in ir.walk(nxt)):
                continue
            out.append(_without_barrier_before_staging(s))
        return tuple(out)
    if not isinstance(node, (ir.Stmt, ir.Kernel)):
        return node
    return replace(node, **{f: _without_barrier_before_staging(getattr(node, f))
                            for f in node.__dataclass_fields__
                            if isinstance(getattr(node, f), tuple)})


@pytest.mark.parametrize("stages", [2, 3])
def test_c_staged_over_the_operand_tiles_waits_for_every_warp(stages):
    """C is staged over the operand tiles (`_shc` aliases `_shm`): the epilogue's first
    store waits at a barrier for every warp's last reads of those tiles. The emulator
    tracks an aliased array's elements at their bytes, so without that barrier it reports
    the race the device had (wrong products from tiles a faster warp's C overwrote)."""
    kernel, sizes, make, _ = K.matmul_t(96, 64, 80, "f32", False, False)
    kernel = _allow_tf32(kernel)
    params = GemmParams(64, 64, 16, 32, 32, 4, True, stages, True)
    prog = Gemm().build(kernel, cuda_target(), sizes, params)
    assert _staged(prog)
    ins = make(np.random.default_rng(stages))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    got = emulate_kernel(prog, kernel, ins, sizes, {})
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-2, atol=1e-2)
    k = prog.kernels[0]
    racy = replace(prog, kernels=(replace(k, body=_without_barrier_before_staging(k.body)),))
    assert sum(isinstance(n, ir.Barrier) for n in ir.walk(racy)) == \
        sum(isinstance(n, ir.Barrier) for n in ir.walk(prog)) - 1
    with pytest.raises(Exception, match="data race on shared `_shc`"):
        emulate_kernel(racy, kernel, ins, sizes, {})


def test_the_pipelined_configuration_is_the_default_on_ampere_and_hopper():
    kernel, sizes, _, _ = K.matmul_t(4096, 4096, 4096, "bf16", False, False)
    # (sm_90 starts with warpgroup MMAs: tests/test_gemm_wgmma.py; sm_89 has none)
    for cc in ((8, 0), (8, 9)):
        p = Gemm().default(kernel, cuda_target(cc), sizes)
        assert (p.bm, p.bn, p.bk, p.stages, p.swizzle, p.mma, p.wgmma) == (128, 128, 32, 3, True, True, False)
    space = Gemm().space(kernel, cuda_target(), sizes)
    assert any(q.mma and not q.stages for q in space)          # the two-buffer tiles stay
    assert any(q.stages == 2 for q in space) and any(not q.mma for q in space)
    tgt = cuda_target()
    assert all(q.shared_bytes(2, 4, (True, False)) <= tgt.shared_bytes for q in space)
    assert p.shared_bytes(2, 4, (True, False)) <= tgt.static_shared_bytes     # the default
    # before Ampere there is no cp.async: the tensor-core tiles (if any) are staged
    assert not any(q.stages for q in Gemm().space(kernel, cuda_target((7, 5)), sizes))


def test_async_copies_only_print_in_cuda():
    kernel, sizes, _, _ = K.matmul(32, 32, 32, "f16")
    prog = Gemm().build(kernel, cuda_target(), sizes, PIPELINED[0])
    text = print_program(schedules_cuda_dialect(), prog, kernel).source
    assert "cp.async.cg.shared.global" in text and "cp.async.wait_group 1" in text
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" in text
    with pytest.raises(TypeError, match="no asynchronous copies"):
        print_program(MslDialect(), prog, kernel)
    assert not any(p.stages for p in Gemm().space(kernel, metal_target(), sizes))


def schedules_cuda_dialect():
    from zynbook.compiler.codegen.dialects.cuda import CudaDialect
    return CudaDialect()


def _with_waits(prog, pending: int):
    """`prog` with every AsyncWait asking for `pending` groups instead."""
    def fix(node):
        if isinstance(node, ir.AsyncWait):
            return replace(node, pending=pending)
        if isinstance(node, ir.For):
            return replace(node, body=tuple(map(fix, node.body)))
        if isinstance(node, ir.If):
            return replace(node, then=tuple(map(fix, node.then)), orelse=tuple(map(fix, node.orelse)))
        return node
    k = prog.kernels[0]
    return replace(prog, kernels=(replace(k, body=tuple(map(fix, k.body))),), fallback=None)


def test_a_slice_read_before_its_copies_are_waited_for_is_caught():
    from zynbook.backends import emulator as emulate
    kernel, sizes, make, _ = K.matmul_t(32, 32, 64, "f16", False, False)
    ins = make(np.random.default_rng(6))
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    prog = Gemm().build(kernel, cuda_target(), sizes, PIPELINED[0])
    # waiting for one group fewer reads a stage whose copies have not landed: the poisoned
    # (NaN) contents, or a race with the copies landing at a later wait
    try:
        got = emulate_kernel(_with_waits(prog, 2), kernel, ins, sizes)
    except emulate.EmulatorError as err:
        assert "data race" in str(err)
    else:
        assert not np.allclose(np.asarray(got, np.float64), want, rtol=0.1, atol=0.1)
    # without the barrier after the wait, copies into a stage meet other warps' reads of it
    k = prog.kernels[0]

    def unsynced(node):
        if isinstance(node, ir.For):
            body = [n for n in node.body if not isinstance(n, ir.Barrier)] if node.var == "_kt" \
                else node.body
            return replace(node, body=tuple(map(unsynced, body)))
        return node
    bad = replace(prog, kernels=(replace(k, body=tuple(map(unsynced, k.body))),), fallback=None)
    with pytest.raises(emulate.EmulatorError, match="data race on shared"):
        emulate_kernel(bad, kernel, ins, sizes)


def _tf32(x):
    """`x` rounded to TF32 as cvt.rna.tf32.f32 does (nearest, ties away from zero)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _allow_tf32(kernel):
    return replace(kernel, schedule=replace(kernel.schedule, allow_tf32=True))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
@pytest.mark.parametrize("odd", [False, True])
def test_tf32_tensor_cores(ta, tb, odd):
    M, N, K_ = (37, 45, 29) if odd else (40, 36, 44)
    exact, sizes, make, _ = K.matmul_t(M, N, K_, "f32", ta, tb)
    kernel = _allow_tf32(exact)
    ins = make(np.random.default_rng(M * N))
    a, b = (_tf32(x).astype(np.float64) for x in ins)
    want = (a.T if ta else a) @ (b.T if tb else b)
    # element by element through registers (any size), or 16-byte cp.async copies
    choices = [GemmParams(32, 32, 16, 16, 16, 1, True)] if odd else \
        [GemmParams(32, 32, 16, 16, 16, 4, True, 2, False), GemmParams(32, 32, 16, 16, 16, 4, True, 3, True)]
    for params in choices:
        prog = Gemm().build(kernel, cuda_target(), sizes, params)
        assert any(isinstance(n, ir.Mma) and n.dtype == "tf32" for n in ir.walk(prog.kernels[0]))
        got = np.asarray(emulate_kernel(prog, kernel, ins, sizes), np.float64)
        np.testing.assert_allclose(got, want, err_msg=params.describe(), **tolerance("f32", "contraction"))
    # TF32 differs from the exact product, within TF32's precision
    exact_want = np.asarray(run_kernel(exact, ins, sizes, {}), np.float64)
    assert not np.allclose(got, exact_want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, exact_want, rtol=1e-2, atol=1e-2)
    auto = Gemm().default(kernel, cuda_target(), sizes)
    assert auto.mma and (auto.stages > 0) == (not odd)    # cp.async stages where aligned
    # f32 stays exact unless the program allows TF32: no plain TF32 step (the split one of
    # test_gemm_split.py is f32's accuracy)
    p = Gemm().default(exact, cuda_target(), sizes)
    assert not p.mma or p.terms == 3


def test_tf32_convolution_is_an_implicit_gemm_on_tensor_cores():
    exact, sizes, make, ref = K.conv2d(batch=1, cin=3, cout=16, h=6, w=6)
    kernel = _allow_tf32(exact)
    ins = make(np.random.default_rng(8))
    p = Gemm().default(kernel, cuda_target(), sizes)
    assert p.mma and p.stages      # the gathered input by 4-byte cp.async copies
    prog = Gemm().build(kernel, cuda_target(), sizes, GemmParams(16, 16, 16, 16, 8, 1, True))
    assert "implicit GEMM" in prog.schedule and "tf32" in prog.schedule
    got = np.asarray(emulate_kernel(prog, kernel, ins, sizes), np.float64)
    x, w, bias = ins
    want = ref([_tf32(x), _tf32(w), bias], sizes)
    np.testing.assert_allclose(got, want, **tolerance("f32", "contraction"))


def test_config_allow_tf32_reaches_the_schedule(monkeypatch, tmp_path):
    import importlib.util
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the stand-in drives the CUDA device's host logic only")
    import cupy_standin
    import zynbook
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    from zynbook.errors import ZynMLTypeError
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNBOOK_AUTOTUNE", raising=False)
    cupy_standin.install(monkeypatch)
    registry.get_device("cpu")
    monkeypatch.setitem(registry._devices, "cuda:0", CudaDevice(0))
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((48, 40)).astype(np.float32)
    src = INT_OPERAND.replace("compute(A, B)", 'compute(A, B) @device("cuda:0")')
    s = zynbook.Session()
    s.run(src, A=a, B=b)
    assert "m16n8k8 tf32" not in s.launches[-1].geometry["schedule"]       # f32 is exact
    s.run("config { allow_tf32: true }\n" + src, A=a, B=b)
    assert "k8 tf32" in s.launches[-1].geometry["schedule"]
    s.run("config { allow_tf32: false }\n" + src, A=a, B=b)
    assert "m16n8k8 tf32" not in s.launches[-1].geometry["schedule"]
    with pytest.raises(ZynMLTypeError, match="allow_tf32 takes true or false"):
        zynbook.run("config { allow_tf32: 1 }\n1")


def test_tiles_beyond_the_static_limit_take_dynamic_shared_memory():
    from zynbook.compiler.codegen.cuda import render_cuda
    from zynbook.compiler.schedules.base import Choice
    kernel, sizes, _, _ = K.matmul_t(256, 256, 64, "bf16", False, False)
    big = GemmParams(128, 256, 32, 64, 64, 8, True, 3, True)        # 3 x 24 KiB
    assert big in Gemm().space(kernel, cuda_target(), sizes)
    prog = render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", big)})
    assert prog.steps[0].smem == 3 * 2 * (128 * 32 + 32 * 256)
    assert "extern __shared__ __align__(16) unsigned char zyn_smem[];" in prog.source
    assert "__nv_bfloat16* const _shn = reinterpret_cast<__nv_bfloat16*>(zyn_smem + 24576);" in prog.source
    small = render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", PIPELINED[0])})
    assert small.steps[0].smem == 0 and "zyn_smem" not in small.source
    # C staged over A's tiles, where it fits in them (32 rows of 40 against 3 x 32 x 16)
    assert "__nv_bfloat16* const _shc = reinterpret_cast<__nv_bfloat16*>(_shm);" in small.source
    # where it does not (128 rows of 136 against 3 x 128 x 32), over the launch's memory,
    # which keeps the tiles contiguous: the larger of the tiles and C's staged tile
    half = GemmParams(128, 128, 32, 64, 64, 8, True, 3, True)
    kernel, sizes, _, _ = K.matmul_t(256, 256, 64, "bf16", False, False)
    prog = render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", half)})
    assert prog.steps[0].smem == 3 * 2 * (128 * 32 + 32 * 128) and "zyn_smem" in prog.source


# ---- on a GPU, where there is one: the tensor-core configurations as the hardware runs them


GPU = cuda_device()
GPU_PARAMS = [None,                                                     # the default
              GemmParams(128, 256, 32, 64, 64, 8, True, 3, True),       # dynamic shared memory
              GemmParams(128, 128, 32, 64, 64, 8, True, 4, True),
              GemmParams(64, 64, 16, 32, 32, 8, True, 2, False),
              GemmParams(128, 128, 32, 64, 32, 8, True)] + PIPELINED    # two buffers


@pytest.mark.gpu
@pytest.mark.skipif(GPU is None, reason="no CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("dtype", ["f16", "bf16", "tf32"])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
def test_tensor_core_configurations_on_the_gpu(dtype, ta, tb):
    from zynbook.compiler.schedules.base import Choice
    M, N, K_ = (264 if ta else 301), (280 if tb else 296), 200
    kernel, sizes, make, _ = K.matmul_t(M, N, K_, "f32" if dtype == "tf32" else dtype, ta, tb)
    ins = make(np.random.default_rng(13))
    if dtype == "tf32":
        kernel = _allow_tf32(kernel)
        ins_ref = [_tf32(x) for x in ins]
    else:
        ins_ref = ins
    a, b = (np.asarray(x, np.float64) for x in ins_ref)
    want = (a.T if ta else a) @ (b.T if tb else b)
    params = GPU_PARAMS if dtype != "tf32" else [None, GemmParams(128, 128, 16, 64, 32, 4, True, 3, True),
                                                 GemmParams(64, 64, 16, 32, 32, 1, True)]
    for p in params:
        plan = GPU.prepare(kernel, sizes) if p is None else \
            GPU.prepare(kernel, sizes, params=Choice("gemm", p))
        out, _ = plan.launch(ins, {})
        got = np.asarray(GPU.to_host(out), np.float64).reshape(want.shape)
        tol = 1e-4 if dtype == "tf32" else 2e-2
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(),
                                   err_msg=str(p))


TENSOR_CORE_CASES = [
    ("bf16", GemmParams(128, 256, 32, 64, 64, 8, True, 3, True)),     # dynamic shared memory
    ("f16", GemmParams(128, 128, 32, 64, 32, 8, True, 4, True)),
    ("tf32", GemmParams(128, 128, 16, 64, 32, 4, True, 3, True)),
    ("tf32", GemmParams(64, 64, 16, 32, 32, 1, True))]
SM_90_CUBIN = ("-arch=sm_90", "-cubin")


def _tensor_core_source(dtype, params):
    from zynbook.compiler.codegen.cuda import render_cuda
    from zynbook.compiler.schedules.base import Choice
    kernel, sizes, _, _ = K.matmul_t(1024, 1024, 1024 if params.width > 1 else 1023,
                                     "f32" if dtype == "tf32" else dtype, False, True)
    kernel = _allow_tf32(kernel) if dtype == "tf32" else kernel
    return render_cuda(kernel, sizes, (9, 0), {"params": Choice("gemm", params)}).source


@pytest.fixture(scope="module")
def queued_compiles():
    """The nvcc compiles of this file's two tests below queued at once (nvcc_runs.py): they
    run beside one another and the tests, each test then waits for its own."""
    import nvcc_runs
    futures = []
    for make, cases in ((_tensor_core_source, TENSOR_CORE_CASES), (_tf32_mixed_program, TF32_MIXED_CASES)):
        for case in cases:
            try:
                prog = make(*case)
            except Exception:       # noqa: BLE001 (the test itself says what went wrong)
                continue
            futures.append(nvcc_runs.queue(getattr(prog, "source", prog), SM_90_CUBIN))
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype,params", TENSOR_CORE_CASES)
def test_nvcc_compiles_the_tensor_core_configurations(dtype, params, queued_compiles):
    import nvcc_runs
    res = nvcc_runs.run(_tensor_core_source(dtype, params), SM_90_CUBIN)
    assert res.returncode == 0, res.stderr[-3000:]


# ---- TF32 over operands of mixed types (f32 with f16 or bf16): each widened, then rounded ----
# (staged through registers into f32 tiles, or copied by cp.async into tiles of each
# operand's own type, widened as the fragments load)

MIXED = [("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f16")]


@pytest.mark.parametrize("da,db", MIXED)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
@pytest.mark.parametrize("odd", [False, True])
def test_tf32_tensor_cores_over_mixed_operands(da, db, ta, tb, odd):
    M, N, K_ = (37, 45, 29) if odd else (40, 48, 56)
    exact, sizes, make, _ = K.matmul_t(M, N, K_, da, ta, tb, b_dtype=db)
    kernel = _allow_tf32(exact)
    ins = make(np.random.default_rng(M * N + len(da + db)))
    # f16 and bf16 widen exactly to f32: TF32 of the widened operands is the reference
    a, b = (_tf32(np.asarray(x, np.float32)).astype(np.float64) for x in ins)
    want = (a.T if ta else a) @ (b.T if tb else b)
    auto = Gemm().default(kernel, cuda_target(), sizes)
    assert auto.mma and (auto.stages > 0) == (not odd)    # cp.async stages where aligned
    # element by element (any size), in 16-byte loads through registers, or cp.async copies
    # into padded or swizzled tiles of each operand's own type
    choices = [GemmParams(32, 32, 16, 16, 16, 1, True)] + ([] if odd else [
        GemmParams(32, 32, 16, 16, 8, 4, True), GemmParams(32, 32, 16, 16, 16, 4, True, 2, False),
        GemmParams(32, 32, 16, 16, 16, 4, True, 3, True)])
    for params in choices:
        prog = Gemm().build(kernel, cuda_target(), sizes, params)
        nodes = list(ir.walk(prog.kernels[0]))
        assert any(isinstance(n, ir.Mma) and n.dtype == "tf32" for n in nodes)
        tiles = {n.name: n.dtype for n in nodes
                 if isinstance(n, ir.Array) and n.space == "shared" and not n.alias}
        assert tiles == ({"_shm": da, "_shn": db} if params.stages else {"_shm": "f32", "_shn": "f32"})
        assert any(isinstance(n, ir.AsyncCopy) for n in nodes) == bool(params.stages)
        assert "tf32" in prog.schedule and "widened to f32" in prog.schedule
        got = np.asarray(emulate_kernel(prog, kernel, ins, sizes), np.float64)
        np.testing.assert_allclose(got, want, err_msg=params.describe(), **tolerance("f32", "contraction"))
    if "f32" in (da, db):           # TF32 rounds the f32 operand: not the exact product
        exact_want = np.asarray(run_kernel(exact, ins, sizes, {}), np.float64)
        assert not np.allclose(got, exact_want, rtol=1e-6, atol=1e-6)
    # without allow_tf32 the mixed contraction is exact, on the FMA tiles
    assert not Gemm().default(exact, cuda_target(), sizes).mma
    assert any(q.stages for q in Gemm().space(kernel, cuda_target(), sizes)) == (not odd)


MIXED_EPILOGUE = EPILOGUE.replace("gelu(max(acc, 0.0) + bias[j] * 0.5)", "gelu(acc)")


@pytest.mark.parametrize("case", ["epilogue", "batched"])
def test_tf32_mixed_operands_epilogue_and_batches(case):
    rng = np.random.default_rng(21)
    text, shapes = {"epilogue": (MIXED_EPILOGUE, dict(A=(37, 24), B=(24, 40), bias=(40,))),
                    "batched": (BATCHED, dict(A=(2, 37, 24), B=(2, 24, 40)))}[case]
    arrays = _arrays(rng, **shapes)
    arrays["B"] = arrays["B"].astype(np.float16)        # f32 activations x f16 weights
    kernel, ins, sizes, scalars = lower_block(text, arrays)
    kernel = _allow_tf32(kernel)
    # the reference executor on A rounded to TF32 (f16 is exact in TF32: B stays as it is)
    rounded = [_tf32(x) if x is arrays["A"] else x for x in ins]
    assert np.array_equal(_tf32(arrays["B"].astype(np.float32)), arrays["B"].astype(np.float32))
    want = np.asarray(run_kernel(kernel, rounded, sizes, scalars), np.float64)
    assert Gemm().default(kernel, cuda_target(), sizes).mma
    for params in (GemmParams(32, 32, 16, 16, 16, 1, True), GemmParams(32, 32, 16, 16, 8, 4, True),
                   GemmParams(32, 32, 16, 16, 16, 4, True, 3, True)):
        prog = Gemm().build(kernel, cuda_target(), sizes, params)
        got = np.asarray(emulate_kernel(prog, kernel, ins, sizes, scalars), np.float64)
        np.testing.assert_allclose(got, want, err_msg=params.describe(), **tolerance("f32", "contraction"))


TF32_MIXED_CASES = [
    ("f32", "f16", False, None),                                   # the default: cp.async, swizzled
    ("f16", "f32", True, GemmParams(128, 128, 16, 64, 32, 4, True, 2, False)),
    ("bf16", "f32", False, GemmParams(128, 128, 16, 64, 32, 4, True)),     # 16-byte loads
    ("f32", "bf16", True, GemmParams(64, 64, 16, 32, 32, 1, True))]


def _tf32_mixed_program(da, db, tb, params):
    from zynbook.compiler.codegen.cuda import render_cuda
    from zynbook.compiler.schedules.base import Choice
    kernel, sizes, _, _ = K.matmul_t(1024, 1024, 1024 if params is None or params.width > 1 else 1023,
                                     da, False, tb, b_dtype=db)
    choice = {} if params is None else {"params": Choice("gemm", params)}
    return render_cuda(_allow_tf32(kernel), sizes, (9, 0), choice)


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("da,db,tb,params", TF32_MIXED_CASES)
def test_nvcc_compiles_tf32_over_mixed_operands(da, db, tb, params, queued_compiles):
    import nvcc_runs
    prog = _tf32_mixed_program(da, db, tb, params)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in prog.source
    res = nvcc_runs.run(prog.source, SM_90_CUBIN)
    assert res.returncode == 0, res.stderr[-3000:]


def test_both_phases_of_a_split_ffn_block_take_tf32_over_f16_weights(monkeypatch, tmp_path):
    """The FFN block of f32 activations and f16 weights splits in two phases (fission.py),
    each a mixed contraction: `config { allow_tf32: true }` puts both on tensor cores."""
    import importlib.util
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the stand-in drives the CUDA device's host logic only")
    import cupy_standin
    import zynbook
    from test_fission import FFN
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNBOOK_AUTOTUNE", raising=False)
    cupy_standin.install(monkeypatch)
    registry.get_device("cpu")
    monkeypatch.setitem(registry._devices, "cuda:0", CudaDevice(0))
    rng = np.random.default_rng(14)
    env = {"x": rng.standard_normal((2, 32, 64)).astype(np.float32),
           "wu": rng.standard_normal((64, 96)).astype(np.float16),
           "wd": rng.standard_normal((96, 64)).astype(np.float16)}
    s = zynbook.Session("cuda:0")
    s.run(FFN, **env)
    assert len(s.launches) == 2 and not any("tensor cores" in ln.geometry["schedule"] for ln in s.launches)
    s.run("config { allow_tf32: true }\n" + FFN, **env)
    assert len(s.launches) == 2
    for ln in s.launches:
        assert "mma.sync m16n8k8 tf32" in ln.geometry["schedule"] and "f16 widened" in ln.geometry["schedule"]



@pytest.mark.gpu
@pytest.mark.skipif(GPU is None, reason="no CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("da,db", MIXED)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, True), (True, False), (False, True)])
def test_tf32_over_mixed_operands_on_the_gpu(da, db, ta, tb):
    from zynbook.compiler.schedules.base import Choice
    M, N, K_ = (264 if ta else 301), (280 if tb else 296), 200
    kernel, sizes, make, _ = K.matmul_t(M, N, K_, da, ta, tb, b_dtype=db)
    kernel = _allow_tf32(kernel)
    ins = make(np.random.default_rng(16))
    a, b = (_tf32(np.asarray(x, np.float32)).astype(np.float64) for x in ins)
    want = (a.T if ta else a) @ (b.T if tb else b)
    for p in (None, GemmParams(128, 128, 16, 64, 32, 4, True, 2, False),
              GemmParams(128, 128, 16, 64, 32, 4, True), GemmParams(64, 64, 16, 32, 32, 1, True)):
        plan = GPU.prepare(kernel, sizes) if p is None else \
            GPU.prepare(kernel, sizes, params=Choice("gemm", p))
        out, _ = plan.launch(ins, {})
        got = np.asarray(GPU.to_host(out), np.float64).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=str(p))
