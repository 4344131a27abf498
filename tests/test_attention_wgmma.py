"""Attention on Hopper's warpgroup MMAs (compiler/schedules/attention_wgmma.py) on the
launch-IR emulator, whose model of wgmma (backends/wgmma_model.py: descriptors, the 128-byte
swizzle, A from registers) is written from the PTX ISA, against numpy written in
tests/test_attention_mma.py: f16 and bf16; head_dim 16 to 256 (chunks of 64 columns, the last
partial); query and key counts that are not multiples of anything; bool, causal and no
masks; every candidate of the space; the default on sm_90 and only there; the CUDA C through
nvcc for sm_90a without spills; and, on an sm_90 GPU, the kernels as the hardware runs them."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

import attention_sources as A
import nvcc_runs
from compute_testing import emulate_kernel
from test_attention_mma import CUDA, SCHED, TOL, _check, _gpu, _lower, answer, cross
from tolerances import assert_within
from zynbook.compiler.codegen.cuda import render_cuda
from zynbook.compiler.launch import ir
from zynbook.compiler.launch.text import format_program
from zynbook.compiler.schedules import attention_mma, attention_wgmma as W
from zynbook.compiler.schedules.attention import match
from zynbook.compiler.schedules.base import Choice
from zynbook.compiler.targets import cuda_target

CASES = {      # text, dtype, queries, keys, head_dim
    "causal_const_f16_s150_d64": (A.three_pass("causal", "const"), "f16", 150, 150, 64),
    "bool_bf16_q77_k50_d48": (cross(A.three_pass("bool")), "bf16", 77, 50, 48),
    "online_stats_bool_nan_f16_s70_d80": (A.online_stats("bool"), "f16", 70, 70, 80),
    "flash_min_bf16_s40_d32": (A.flash(16, tile="min", scale="const"), "bf16", 40, 40, 32),
    "one_pass_none_f16_q77_k1_d16": (cross(A.one_pass("none")), "f16", 77, 1, 16),
    "causal_rev_bf16_s130_d128": (A.three_pass("causal_rev", "const"), "bf16", 130, 130, 128),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_equals_numpy(case):
    """The space's first candidate on sm_90 is the warpgroup kernel's default."""
    text, dtype, sq, sk, d = CASES[case]
    k, ins, sz, sc = _lower(text, dtype, sq, sk, d)
    assert SCHED.default(k, CUDA, sz) == W.default(d)
    prog = SCHED.build(k, CUDA, sz, W.default(d))
    assert prog.arch_specific and "wgmma m64n" in prog.schedule
    mmas = [n for n in ir.walk(prog.kernels) if isinstance(n, ir.WarpgroupMma)]
    assert {m.a_regs for m in mmas} == {False, True}        # S from shared tiles, P V from registers
    _check(text, prog, k, ins, sz, sc)


CHOICES = W.choices(W.default(64), 64)


@pytest.mark.parametrize("params", CHOICES, ids=lambda p: f"{p.block_q}q_{p.block_kv}k_{p.stages}st{'_pingpong' if p.pingpong else ''}")
def test_every_candidate_equals_numpy(params):
    """One and two warpgroups, 64- and 128-key tiles, rings of two and three: a causal
    condition whose keys end inside a tile, and a bool mask over fewer keys than queries."""
    for text, dtype, sq, sk, d in ((A.three_pass("causal", "const"), "f16", 150, 150, 64),
                                   (cross(A.three_pass("bool")), "bf16", 77, 50, 16)):
        k, ins, sz, sc = _lower(text, dtype, sq, sk, d)
        assert params in SCHED.space(k, CUDA, sz)
        _check(text, SCHED.build(k, CUDA, sz, params), k, ins, sz, sc)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_the_space_of_each_head_dim(d):
    """The default first, then one and two warpgroups, with and without turns (two only),
    each a candidate the schedule runs on sm_90 (the shared memory and registers checked)."""
    k, _, sz, _ = _lower(A.three_pass("causal"), "f16", 64, 64, d)
    space = [p for p in SCHED.space(k, CUDA, sz) if p.wgmma]
    every = W.choices(W.default(d), d)
    assert space[0] == W.default(d) and space == [p for p in every if p in space]
    assert {p.warps for p in space if not p.tma} == {4, 8} and {p.pingpong for p in space} == {False, True}
    assert {p.tma for p in space} == {False, True}
    shape, _ = match(k, CUDA, sz)
    for p in set(every) - set(space):       # only what outgrows the shared memory is left out
        assert "outgrow the shared memory" in attention_mma.why_not(CUDA, shape, p)
    assert all(p.warps == 8 for p in space if p.pingpong)


TMA = [(d, p) for d in (64, 128) for p in W.tma_choices(W.default(d), d)]


@pytest.mark.parametrize("d,params", TMA, ids=lambda x: x if isinstance(x, int) else
                         f"{x.warps // 4}wg_{x.block_kv}k_{x.stages}st_{x.occupancy}b{'_pingpong' if x.pingpong else ''}")
def test_tma_candidates_equal_numpy(d, params):
    """The copy engine's kernels (a producer warpgroup, mbarriers): a causal condition whose
    keys end inside a tile (zeros landing past the tensor), a bool mask over fewer keys than
    queries, two batches of heads (one tensor dimension of both)."""
    cases = {64: ((A.three_pass("causal", "const"), "f16", 150, 150, 64, 1),
                  (cross(A.three_pass("bool")), "bf16", 77, 50, 16, 1)),
             128: ((A.flash(64), "f16", 70, 70, 128, 2),
                   (A.three_pass("causal"), "bf16", 130, 130, 96, 1))}[d]
    for text, dtype, sq, sk, dd, b in cases:
        k, ins, sz, sc = _lower(text, dtype, sq, sk, dd, batch=b)
        assert params in SCHED.space(k, CUDA, sz)
        prog = SCHED.build(k, CUDA, sz, params)
        assert "by the copy engine (TMA" in prog.schedule and len(prog.tensor_maps) == 3
        assert {n.op for n in ir.walk(prog.kernels) if isinstance(n, ir.Mbarrier)} == {"init", "arrive", "wait"}
        _check(text, prog, k, ins, sz, sc)


def test_tma_over_other_layouts():
    """[batch, seq, heads, head_dim] (the heads and batches two dimensions of the tensor
    maps) and grouped-query heads (K's and V's boxes at head h / group)."""
    from test_attention_gqa import _lower as gqa_lower, numpy_gqa
    p = next(p for p in W.tma_choices(W.default(32), 32) if p.warps == 8 and p.block_kv == 64)
    k, ins, sz, sc = _lower(A.FLASH_BSHD, "f16", 70, 70, 32, batch=2, heads=3, bshd=True)
    prog = SCHED.build(k, CUDA, sz, p)
    assert all(len(m.dims) == 4 for m in prog.tensor_maps)
    _check(A.FLASH_BSHD, prog, k, ins, sz, sc)
    k, ins, sz, arrays = gqa_lower(A.grouped(A.three_pass("causal"), "4"), "f16", 8, 2, 70, 64, 4, batch=2)
    prog = SCHED.build(k, CUDA, sz, replace(p, pingpong=True, occupancy=1))
    got = emulate_kernel(prog, k, ins, sz, {}, warp=32).astype(np.float64)
    assert_within(got, numpy_gqa(arrays, 4, True), TOL, TOL)


def test_tma_needs_tensor_maps():
    """A target whose driver makes no tensor maps keeps the cp.async kernels."""
    k, _, sz, _ = _lower(A.three_pass("causal"), "f16", 64, 64, 64)
    plain = cuda_target((9, 0), bulk_copy=False)
    assert not any(p.tma for p in SCHED.space(k, plain, sz))
    shape, _ = match(k, plain, sz)
    assert "tensor maps" in W.why_not(plain, shape, TMA[0][1])


def test_head_dim_256_and_two_batches():
    """Past head_dim 128 the key tiles are 64 (the registers); batches and heads apart."""
    text = A.three_pass("causal")
    k, ins, sz, sc = _lower(text, "f16", 70, 70, 256, batch=2, heads=2)
    assert SCHED.default(k, CUDA, sz).block_kv == 64
    _check(text, SCHED.build(k, CUDA, sz, W.default(256)), k, ins, sz, sc)
    shape, _ = match(k, CUDA, sz)
    assert "past 128" in W.why_not(CUDA, shape, replace(W.default(256), block_kv=128))


def test_only_on_hopper():
    """sm_80 has no warpgroup MMAs: its space keeps the mma.sync kernel; Q held in registers
    is not the warpgroup kernel's."""
    k, _, sz, _ = _lower(A.three_pass("causal"), "f16", 64, 64, 64)
    a100 = cuda_target((8, 0))
    assert not any(p.wgmma for p in SCHED.space(k, a100, sz))
    assert SCHED.default(k, a100, sz).mma
    shape, _ = match(k, a100, sz)
    assert "no warpgroup MMAs" in W.why_not(a100, shape, W.default(64))
    assert "64 queries a warpgroup" in W.why_not(CUDA, shape, replace(W.default(64), hold_q=True))


def test_the_launch_ir_says_where_a_comes_from():
    k, _, sz, _ = _lower(A.three_pass("causal"), "f16", 64, 64, 64)
    text = format_program(SCHED.build(k, CUDA, sz, W.default(64)))
    assert "(registers) x _vs[" in text and "(K-major, lbo 16, sbo 1024) x _ks[" in text
    assert "wgmma fence _o[..32], _pa[..64]" in text


NVCC = nvcc_runs.NVCC


NVCC_CASES = [(64, "f16", None), (128, "bf16", None), (256, "f16", None), (80, "bf16", None),
              (64, "f16", CHOICES[-1])]
SM_90A = ("-gencode", "arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v")


def _program_for_sm_90a(d, dtype, params):
    k, _, sz, _ = _lower(A.three_pass("causal"), dtype, 4096, 4096, d, heads=16)
    return render_cuda(k, sz, (9, 0), {"params": Choice("attention", params or W.default(d))})


@pytest.fixture(scope="module")
def queued_compiles():
    """Every case's nvcc compile queued at once (nvcc_runs.py): they run beside one another
    and the tests, each test then waits for its own."""
    futures = []
    for case in NVCC_CASES:
        try:
            futures.append(nvcc_runs.queue(_program_for_sm_90a(*case).source, SM_90A))
        except Exception:       # noqa: BLE001 (the test itself says what went wrong)
            continue
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("d,dtype,params", NVCC_CASES)
def test_nvcc_compiles_for_sm_90a_without_spills(d, dtype, params, queued_compiles):
    prog = _program_for_sm_90a(d, dtype, params)
    assert prog.arch_specific and "_rs<1>" in prog.source          # P V: A from registers
    res = nvcc_runs.run(prog.source, SM_90A)
    assert res.returncode == 0, res.stderr[-3000:]
    tc = res.stderr.split("Function properties for zyn_k_kernel_mma")[1][:400]
    assert re.search(r"\b0 bytes spill stores", tc), tc
    assert "Performance Loss" not in res.stderr, res.stderr[-3000:]


# ---------------------------------------------------------------------- on a GPU

GPU_CASES = [
    ("bert_f16", A.flash(64), "f16", 512, 512, 64, 8, 12, None),
    ("bool_bf16_d64", A.three_pass("bool"), "bf16", 300, 300, 64, 1, 2, None),
    ("causal_bf16_d128", A.three_pass("causal", "const"), "bf16", 300, 300, 128, 1, 4, None),
    ("bool_f16_cross_d80", cross(A.three_pass("bool")), "f16", 200, 77, 80, 2, 3, None),
    ("causal_f16_d256", A.three_pass("causal"), "f16", 200, 200, 256, 1, 2, None),
] + [(f"causal_f16_d64_{p.block_q}q_{p.block_kv}k_{p.stages}st{'_pingpong' if p.pingpong else ''}",
       A.three_pass("causal", "const"), "f16", 333, 333, 64, 2, 3, p) for p in (
    replace(W.default(64), block_kv=64, stages=3), replace(W.WGMMA, block_kv=128),
    replace(W.WGMMA, block_kv=64, stages=3, pingpong=True))] + [
    (f"causal_bf16_d128_{p.block_q}q_{p.block_kv}k_{p.stages}st{'_pingpong' if p.pingpong else ''}",
     A.three_pass("causal"), "bf16", 300, 300, 128, 1, 4, p) for p in (
         replace(W.copied(128), pingpong=False), W.copied(128), replace(W.WGMMA, block_kv=64),
         replace(W.WGMMA, block_q=64, warps=4, block_kv=128, stages=3))] + [
    (f"tma_{name}_{p.warps // 4}wg_{p.block_kv}k_{p.stages}st_{p.occupancy}b{'_pingpong' if p.pingpong else ''}",
     text, dtype, sq, sk, d, b, h, p)
    for name, text, dtype, sq, sk, d, b, h, which in (
        ("bert_f16", A.flash(64), "f16", 512, 512, 64, 8, 12, (0, 2, 6)),
        ("causal_bf16_d128", A.three_pass("causal", "const"), "bf16", 300, 300, 128, 1, 4, (1, 2, 4)),
        ("bool_f16_cross_d80", cross(A.three_pass("bool")), "f16", 200, 77, 80, 2, 3, (0,)))
    for i, p in enumerate(W.tma_choices(W.default(d), d)) if i in which]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c[0])
def test_on_the_gpu(case):
    dev = _gpu()
    if dev is None or tuple(getattr(dev, "cc", (0, 0))) != (9, 0):
        pytest.skip("no sm_90 CUDA GPU (or no CuPy)")
    _, text, dtype, sq, sk, d, batch, heads, params = case
    k, ins, sz, sc = _lower(text, dtype, sq, sk, d, batch, heads)
    # the plan hands a bf16 output out as f32 (on the device it is kept as its 16 bits)
    plan = dev.prepare(k, sz, params=Choice("attention", params) if params else None)
    out, _ = plan.launch(ins, sc)
    assert "warpgroup tensor cores" in plan.compiled.program.schedule
    want = answer(text, k, ins, sz)
    got = np.asarray(dev.to_host(out), np.float64)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], TOL, TOL)


def _turns_kernel(arrive_first: bool) -> ir.Program:
    """Two warps: warp 1 (unless `arrive_first` is off) hands warp 0 the turn at named barrier
    1 before warp 0 waits there; then each thread stores its number plus one."""
    i32, t = "i32", ir.Thread("thread")
    warp1 = ir.Bin("==", ir.Thread("warp"), ir.Lit(1, i32), "bool")
    body = (ir.If(warp1, (ir.NamedBarrier(ir.Lit(1, i32), 64, arrive=True),) if arrive_first else ()),
            ir.If(ir.Bin("==", ir.Thread("warp"), ir.Lit(0, i32), "bool"), (ir.NamedBarrier(ir.Lit(1, i32), 64),)),
            ir.Store("out", t, ir.Bin("+", t, ir.Lit(1, i32), i32)))
    k = ir.Kernel("turns", (ir.Param("out", "buffer", "i32", True),), body, 64)
    return ir.Program("turns", (k,), (ir.Launch("turns", ir.Lit(1, i32), 64),))


def test_named_barriers_on_the_emulator():
    """A thread waiting at a named barrier goes on once its count of threads arrived (those
    that only arrive go on at once); a barrier whose count never arrives is a deadlock the
    emulator reports, as the hardware would hang."""
    from zynbook.backends import emulator
    out = np.zeros(64, np.int32)
    emulator.run(_turns_kernel(True), {"out": out}, {}, {})
    np.testing.assert_array_equal(out, np.arange(1, 65))
    assert "wait at barrier 1 of 64 threads" in format_program(_turns_kernel(True))
    assert 'asm volatile("bar.arrive %0, 64;"' in render_kernel_source(_turns_kernel(True))
    with pytest.raises(emulator.EmulatorError, match="named barrier"):
        emulator.run(_turns_kernel(False), {"out": np.zeros(64, np.int32)}, {}, {})


def render_kernel_source(prog) -> str:
    from zynbook.compiler.codegen.dialects.cuda import CudaDialect
    from zynbook.compiler.codegen.printer import print_program
    return print_program(CudaDialect(), prog).source


def _a_from_registers(write_before_wait: bool) -> ir.Program:
    """One warpgroup: a m64n16k16 step with A from the registers `_pa` (all ones) and B a
    shared tile of ones; thread t then writes `_pa[0]`, before or after the step's wait, and
    stores its first accumulator (16: the row of A times B's column)."""
    i32, f16, t = "i32", "f16", ir.Thread("thread")
    lit = lambda v, d=i32: ir.Lit(v, d)
    write = ir.Store("_pa", lit(0), lit(2.0, f16))
    wait = ir.WarpgroupWait(0, "_c", 8)
    body = (ir.Array("_b", f16, 16 * 64, "shared", align=ir.WGMMA_SWIZZLE * 8),
            ir.Array("_pa", f16, 8), ir.Array("_c", "f32", 8),
            ir.For("_i", lit(0), lit(8), lit(1), (ir.Store("_b", ir.Bin("+", ir.Bin("*", t, lit(8), i32),
                                                                      ir.Ref("_i", i32), i32), lit(1.0, f16)),), i32),
            ir.For("_i", lit(0), lit(8), lit(1), (ir.Store("_pa", ir.Ref("_i", i32), lit(1.0, f16)),), i32),
            ir.Barrier(), ir.ProxyFence(), ir.Barrier(),
            ir.WarpgroupFence("_c", 8, a="_pa", a_count=8),
            ir.WarpgroupMma("_pa", lit(0), True, 0, 0, "_b", lit(0), True, 16, 1024, "_c", lit(0), 16, f16,
                            a_regs=True, fresh=lit(True, "bool")),
            ir.WarpgroupCommit(),
            *((write, wait) if write_before_wait else (wait, write)),
            ir.Store("out", t, ir.Load("_c", lit(0), "f32")))
    k = ir.Kernel("a_regs", (ir.Param("out", "buffer", "f32", True),), body, 128)
    return ir.Program("a_regs", (k,), (ir.Launch("a_regs", lit(1), 128),))


def test_a_registers_are_read_until_the_wait():
    """The hardware reads a warpgroup MMA's A registers until its group completes, so the
    emulator refuses a write to them before the wait (a kernel that packs the next P while
    P V is in flight) and takes the same write after it."""
    from zynbook.backends import emulator, wgmma_model
    out = np.zeros(128, np.float32)
    emulator.run(_a_from_registers(False), {"out": out}, {}, {})
    np.testing.assert_array_equal(out, 16)
    with pytest.raises(wgmma_model.WgmmaError, match="A written while the MMA is in flight"):
        emulator.run(_a_from_registers(True), {"out": np.zeros(128, np.float32)}, {}, {})
