"""The attention schedule (compiler/schedules/attention.py) on the launch-IR emulator against
the reference executor: every recognised form (three passes, online statistics, one pass,
flash with blocks of 16 and 48 and min(...) tiles), masks (a bool input, a causal condition,
a threshold on a float input), scales, rows without keys, f32 and f16, odd sizes and head
dims, on the CUDA, Metal, C++ and WebGPU (no subgroups, subgroups of 4) targets, several
parameter choices, rows held as vectors of four where the target has them (and scalars where
head_dim is not a multiple of four), and the bodies it must not take."""
from __future__ import annotations

import re
import shutil
from dataclasses import replace

import numpy as np
import pytest

from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import schedules
from zynbook.compiler.codegen.cuda import render_cuda
from zynbook.compiler.schedules.attention import PRODUCT_VARIANTS, PRODUCTS, Attention, AttentionParams
from zynbook.compiler.schedules.base import Choice
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target
from zynbook.errors import ZynMLError

import attention_sources as A
import nvcc_runs
from compute_testing import emulate_kernel, lower_block
from tolerances import assert_within

TARGETS = {
    "cuda": (cuda_target(), 32),
    "metal": (metal_target(), 32),
    "cpp": (cpu_target(), 1),
    "webgpu": (webgpu_target(["shader-f16"]), 1),
    "webgpu_sg4": (webgpu_target(["shader-f16", "subgroup"], subgroup=4), 4),
}
TOL = {"f32": (2e-4, 2e-5), "f16": (2e-2, 2e-2)}
SCHED = Attention()


def _inputs(text, seq, d, dtype="f32", batch=1, heads=2):
    """(kernel, inputs, sizes, scalars) of `text` over random tensors; a mask input admits
    about 70% of the keys, every key of the first query and none of the middle one."""
    rng = np.random.default_rng(seq * 100 + d)
    np_dtype = {"f32": np.float32, "f16": np.float16}[dtype]
    arrays = {n: rng.standard_normal((batch, heads, seq, d)).astype(np_dtype) for n in "QKV"}
    if "allowed" in text:
        m = rng.random((seq, seq)) < 0.7
        m[0, :] = True
        m[seq // 2, :] = False
        arrays["allowed"] = m if "allowed[i, j]:" in text or "allowed[row, col]:" in text \
            else m.astype(np.float32)
    scalars = {"temp": 0.3} if "temp" in text else {}
    return lower_block(text, arrays, scalars, {})


CASES = {
    "three_pass_bool_sqrt_s7_d8": (A.three_pass("bool"), 7, 8),
    "three_pass_causal_const_s33_d24": (A.three_pass("causal", "const"), 33, 24),
    "three_pass_threshold_s1_d8": (A.three_pass("float"), 1, 8),
    "online_stats_bool_nan_s7_d8": (A.online_stats("bool"), 7, 8),
    "one_pass_causal_s7_d8": (A.one_pass("causal"), 7, 8),
    "flash_16_min_s33_d8": (A.flash(16, tile="min"), 33, 8),
    "flash_48_s65_d8": (A.flash(48, scale="const"), 65, 8),
    "three_pass_bool_f16_s7_d8": (A.three_pass("bool"), 7, 8, "f16"),
    "three_pass_bool_s9_d5": (A.three_pass("bool"), 9, 5),
    "flash_16_s20_d12": (A.flash(16), 20, 12),
}


def _check(prog, k, ins, sz, sc, warp, dtype="f32"):
    got = emulate_kernel(prog, k, ins, sz, sc, warp=warp)
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert_within(got.astype(np.float64), want.astype(np.float64), *TOL[dtype])


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_default_equals_the_reference(case, target):
    text, seq, d, *dt = CASES[case]
    dtype = dt[0] if dt else "f32"
    k, ins, sz, sc = _inputs(text, seq, d, dtype)
    t, warp = TARGETS[target]
    assert SCHED.why_not(k, t, sz) is None
    prog = schedules.build(k, t, sz, only="attention")
    assert "(attention: " in prog.schedule
    _check(prog, k, ins, sz, sc, warp, dtype)


@pytest.mark.parametrize("case,seq,d", [("causal", 33, 16), ("bool", 7, 64), ("none", 20, 32)])
def test_register_tiled_products(case, seq, d):
    k, ins, sz, sc = _inputs(A.three_pass(case, "const"), seq, d)
    t = cuda_target()
    assert SCHED.default(k, t, sz) == PRODUCTS           # CUDA's choice where head_dim allows
    prog = SCHED.build(k, t, sz, PRODUCTS)
    assert "register-tiled" in prog.schedule
    _check(prog, k, ins, sz, sc, 32)
    # 16-byte loads of Q, K and V; buffers not so aligned run the fallback, element by element
    assert prog.aligned == ("u_K", "u_Q", "u_V") and prog.fallback is not None
    if case == "causal":
        _check(prog.fallback, k, ins, sz, sc, 32)


def test_register_tiled_products_nan():
    """A NaN score is left out of the running maximum but reaches l and o through its exp:
    the rows it touches are NaN where the reference's are, the others as the reference."""
    k, ins, sz, sc = _inputs(A.three_pass("causal", "const"), 33, 16)
    ins = [np.array(a) for a in ins]
    ins[0][0, 1, 5, 3] = np.nan                 # Q: one query row
    ins[1][0, 0, 20, 7] = np.nan                # K: a key that later queries see
    prog = SCHED.build(k, cuda_target(), sz, PRODUCTS)
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    want = np.asarray(run_kernel(k, ins, sz, sc)).astype(np.float64)
    assert np.isnan(want).any() and (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], *TOL["f32"])


_VARIANT_CASES = [("causal", 33, 16), ("bool", 7, 64), ("none", 128, 32)]


@pytest.mark.parametrize("params,case,seq,d", [
    (p, *c) for p in PRODUCT_VARIANTS if not p.occupancy           # (occupancy: the same IR)
    for c in (_VARIANT_CASES if not p.exp2 else _VARIANT_CASES[:1])],
    ids=lambda x: x.describe().split("products=True, ")[-1] if isinstance(x, AttentionParams) else str(x))
def test_products_variants(params, case, seq, d):
    """8 x 4 or 4 x 8 scores a thread (128 threads), the tile read at its start instead of
    prefetched, exp2 with log2(e) in the scale: each equals the reference on odd sizes and on
    keys that fill whole tiles (no key bound then), masked or not, empty rows included."""
    k, ins, sz, sc = _inputs(A.three_pass(case, "const"), seq, d)
    t = cuda_target()
    assert params in SCHED.space(k, t, sz)
    prog = SCHED.build(k, t, sz, params)
    assert "register-tiled" in prog.schedule and prog.kernels[0].block == 64 * 64 // (params.rows * params.cols)
    _check(prog, k, ins, sz, sc, 32)
    if seq == 7:
        _check(prog.fallback, k, ins, sz, sc, 32)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_products_variants_compile_with_nvcc():
    """The CUDA C of every variant (and its fallback kernel) compiles for sm_90: a causal
    mask, head_dim 48 (three 16-byte groups a row), 77 queries and keys (a partial tile)."""
    k, _, sz, _ = _inputs(A.three_pass("causal"), 77, 48)
    compiles = [(p, nvcc_runs.queue(render_cuda(k, sz, options={"params": Choice("attention", p)}).source,
                                    ("-arch=sm_90", "-cubin")))
                for p in (PRODUCTS,) + PRODUCT_VARIANTS]       # queued at once: side by side
    for p, fut in compiles:
        res = fut.result()
        assert res.returncode == 0, (p.describe(), res.stderr[-3000:])


def test_products_occupancy_is_the_register_cap():
    k, _, sz, _ = _inputs(A.three_pass("causal"), 33, 16)
    for p in PRODUCT_VARIANTS:
        prog = SCHED.build(k, cuda_target(), sz, p)
        same = SCHED.build(k, cuda_target(), sz, replace(p, occupancy=0))
        assert prog.kernels[0].body == same.kernels[0].body
        assert prog.kernels[0].min_blocks == (p.occupancy or same.kernels[0].min_blocks)


@pytest.mark.parametrize("params", [PRODUCTS, PRODUCT_VARIANTS[-1]], ids=["default", "last_variant"])
def test_products_nan_empty_rows(params):
    """A body that divides by the sum inside its key loop gives NaN for a row no key is
    admitted to, as the reference does, in exp2 form too; the other rows as the reference."""
    k, ins, sz, sc = _inputs(A.online_stats("bool"), 64, 16)
    prog = SCHED.build(k, cuda_target(), sz, params)
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    want = np.asarray(run_kernel(k, ins, sz, sc)).astype(np.float64)
    assert np.isnan(want).any() and (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], *TOL["f32"])


def test_products_only_where_head_dim_allows():
    k, _, sz, _ = _inputs(A.three_pass("causal"), 7, 24)
    assert PRODUCTS not in SCHED.space(k, cuda_target(), sz)
    assert not SCHED.default(k, cuda_target(), sz).products
    k, _, sz, _ = _inputs(A.three_pass("causal"), 7, 16)
    assert not SCHED.default(k, metal_target(), sz).products     # no 16-byte vector loads


def test_the_space_has_several_valid_choices():
    k, ins, sz, sc = _inputs(A.three_pass("bool"), 7, 8)
    t, warp = TARGETS["cuda"]
    space = SCHED.space(k, t, sz)
    assert len(space) > 4 and len(set(space)) == len(space)
    assert space[0] == SCHED.default(k, t, sz)
    picked = {p.lanes: p for p in space}                   # one choice per lane count
    for p in picked.values():
        _check(SCHED.build(k, t, sz, p), k, ins, sz, sc, warp)
    cpu = SCHED.space(k, cpu_target(), sz)
    assert len(cpu) > 1 and not any(p.tiles for p in cpu)
    for p in cpu:
        _check(SCHED.build(k, cpu_target(), sz, p), k, ins, sz, sc, 1)


def test_a_chosen_layout_on_webgpu():
    k, ins, sz, sc = _inputs(A.flash(16, tile="min"), 33, 8)
    t, warp = TARGETS["webgpu_sg4"]
    p = AttentionParams(block_q=32, block_kv=32, lanes=2, chunk=8)
    assert p in SCHED.space(k, t, sz)
    _check(SCHED.build(k, t, sz, p), k, ins, sz, sc, warp)


def test_webgpu_has_a_kernel_per_head_dim_class():
    k, ins, sz, sc = _inputs(A.three_pass("causal"), 7, 40)
    t, warp = TARGETS["webgpu"]
    prog = SCHED.build(k, t, sz, SCHED.default(k, t, sz))
    assert [kk.name[-4:] for kk in prog.kernels] == ["_d32", "_d64", "d128"]
    from zynbook.compiler.launch import ir
    from zynbook.compiler.launch.scalar import user_name
    env = {user_name(n): v for n, v in sz.items()}
    assert [ir.evaluate(l.grid, env) > 0 for l in prog.launches] == [False, True, False]
    _check(prog, k, ins, sz, sc, warp)


def test_webgpu_head_dim_past_the_largest_class_is_an_error():
    k, ins, sz, sc = _inputs(A.three_pass("none"), 1, 136, batch=1, heads=1)
    t, warp = TARGETS["webgpu"]
    prog = SCHED.build(k, t, sz, SCHED.default(k, t, sz))
    with pytest.raises(ZynMLError, match="136|135"):
        emulate_kernel(prog, k, ins, sz, sc, warp=warp)


def test_a_flash_body_without_the_rescale_is_not_attention():
    k, ins, sz, sc = _inputs(A.flash(16, rescale=False), 33, 8)
    t = cuda_target()
    why = SCHED.why_not(k, t, sz)
    assert why is not None and "rescaled" in why
    prog = schedules.build(k, t, sz)
    assert prog is None or "(attention: " not in prog.schedule


def test_other_kernel_types_are_not_taken():
    text = A.three_pass("none").replace("@kernel attention", "@kernel fused")
    k, _, sz, _ = _inputs(text, 7, 8)
    assert SCHED.why_not(k, cuda_target(), sz) == "not an attention kernel"


def _vector_arrays(prog) -> set:
    from zynbook.compiler.launch import ir
    return {n.name for n in ir.walk(prog) if isinstance(n, ir.Array) and ir.lanes_of(n.dtype) == 4}


@pytest.mark.parametrize("target,d,want", [
    ("webgpu", 8, True), ("webgpu", 5, True),     # a class of head_dims: 32, a multiple of 4
    ("metal", 8, True), ("metal", 6, False), ("cpp", 8, False)])
def test_rows_are_vectors_of_four_where_the_target_has_them(target, d, want):
    """q, the output row and the K/V tiles are f32x4 where the target computes with vectors
    and head_dim (its class) is a multiple of four; scalars otherwise, equal all the same."""
    k, ins, sz, sc = _inputs(A.three_pass("causal"), 9, d)
    t, warp = TARGETS[target]
    prog = SCHED.build(k, t, sz, SCHED.default(k, t, sz))
    assert _vector_arrays(prog) == ({"_qr", "_o", "_kv"} if want else set())
    _check(prog, k, ins, sz, sc, warp)
    if want:                                # the inspector's launch-IR text spells them
        from zynbook.compiler.launch.text import format_program
        ir_text = format_program(prog)
        assert "shared _kv: f32x4[" in ir_text and "dot(_qr[_d], _kv[" in ir_text


def test_cuda_per_query_rows_are_vectors():
    k, ins, sz, sc = _inputs(A.three_pass("bool"), 9, 24)
    t, warp = TARGETS["cuda"]
    p = AttentionParams(64, 32, 2, 8)
    prog = SCHED.build(k, t, sz, p)
    assert _vector_arrays(prog) == {"_qr", "_o", "_kv"}
    _check(prog, k, ins, sz, sc, warp)


def test_webgpu_source_is_vectors_and_compact():
    """The WGSL of the benchmark's attention: K/V tiles in workgroup vec4 arrays, scores by
    dot(), and no scalar loop over head_dim written out (a few dozen KiB, not hundreds); q, o
    and the scores as variables of their own, no array local to an invocation (a shader
    compiler may keep one in memory)."""
    from zynbook.compiler.codegen.dialects.wgsl import WgslDialect
    from zynbook.compiler.codegen.printer import print_program
    k, ins, sz, sc = _inputs(A.three_pass("bool"), 64, 64)
    t, _ = TARGETS["webgpu"]
    src = print_program(WgslDialect(), SCHED.build(k, t, sz, SCHED.default(k, t, sz)), k).source
    assert "var<workgroup> _kv: array<vec4<f32>," in src and "dot(_qr_1, " in src
    assert "var _o_15: vec4<f32>;" in src and "var _s_3: f32;" in src
    assert not re.search(r"\bvar _\w+: array<", src)
    assert len(src) < 160_000


@pytest.mark.parametrize("case", ["flash_48_s65_d8", "flash_16_min_s33_d8", "three_pass_bool_sqrt_s7_d8"])
def test_programs_say_they_store_every_element(case):
    """Every attention program stores each element of its output, so a CUDA device skips
    zeroing it, which it would otherwise do for flash bodies (their tile stores are beyond
    the device's own rule). The emulator starts such an output from NaN, so the comparisons
    above fail for an element a program leaves."""
    from zynbook.backends.cuda.device import _may_skip_elements
    text, seq, d, *dt = CASES[case]
    k, ins, sz, sc = _inputs(text, seq, d, *dt)
    target = cuda_target()
    prog = SCHED.build(k, target, sz, SCHED.default(k, target, sz))
    assert prog.covers_output and render_cuda(k, sz).covers_output
    if case.startswith("flash"):
        assert _may_skip_elements(k, sz)
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32)
    assert not np.isnan(got).any()


@pytest.mark.parametrize("target", ["cuda", "metal"])
@pytest.mark.parametrize("form", ["three_pass", "flash"])
def test_past_head_dim_128_four_lanes_share_a_query(target, form):
    """Past head_dim 128 a query's rows are split over four lanes where sizes are baked in
    (one thread holding both rows spilled, and took NVRTC 40 s to compile)."""
    text = A.three_pass("causal") if form == "three_pass" else A.flash(16)
    k, ins, sz, sc = _inputs(text, 19, 136, batch=1, heads=1)
    t, warp = TARGETS[target]
    p = SCHED.default(k, t, sz)
    assert not p.mma and p.lanes == 4
    _check(SCHED.build(k, t, sz, p), k, ins, sz, sc, warp)
