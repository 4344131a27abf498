"""Attention on CUDA tensor cores (compiler/schedules/attention_mma.py) on the launch-IR
emulator against numpy written here: f16 and bf16; head_dim 16, 48, 64 and 80; query and key
counts that are not multiples of 64 (77 queries over 50 keys, one key); a bool mask, a causal
condition, `* 0.125` and `/ sqrt(head_dim)` scales; the three-pass, online-statistics,
one-pass and flash forms, [batch, seq, heads, head_dim] tensors; the schedule's other block
shapes and its structural variants (128-key tiles, a 3-stage K/V ring, packed conversions,
the scale folded into the exponent, the rescale skipped), its unaligned fallback; where it is
not chosen; the CUDA C compiled by nvcc for sm_80 and sm_90; and, where there is a GPU, the
schedule run on it."""
from __future__ import annotations

import re
import shutil
from dataclasses import replace

import numpy as np
import pytest

import attention_sources as A
import nvcc_runs
from compute_testing import emulate_kernel, lower_signatures
from cuda_cir_kernels import _representable
from tolerances import assert_within
from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import dims
from zynbook.compiler.codegen.cuda import render_cuda
from zynbook.compiler.launch import ir
from zynbook.compiler.schedules import attention_mma
from zynbook.compiler.schedules.attention import Attention, match
from zynbook.compiler.schedules.attention_mma import CHOICES, MMA, variants
from zynbook.compiler.schedules.base import Choice
from zynbook.compiler.targets import cuda_target, metal_target, webgpu_target

SCHED = Attention()
CUDA = cuda_target()
TOL = 2e-2          # P and the output in f16 or bf16: about 3 significant digits


def cross(text: str) -> str:
    """`text` with its keys counted apart from its queries (`kv_len`)."""
    return text.replace("for j in 0..seq_len", "for j in 0..kv_len").replace(
        "for key in 0..seq_len", "for key in 0..kv_len")


def _lower(text, dtype, sq, sk, d, batch=1, heads=2, bshd=False, seed=0):
    """(kernel, inputs, sizes, scalars, numpy answer) of `text` over random tensors of
    `dtype` (bf16 values held as float32); a mask admits about 70% of the keys, none of
    query sq // 2 and every one of query 0."""
    rng = np.random.default_rng(seed)
    shape = lambda s: (batch, s, heads, d) if bshd else (batch, heads, s, d)
    arrays = {n: _representable(rng.standard_normal(shape(s)), dtype)
              for n, s in (("Q", sq), ("K", sk), ("V", sk))}
    if bshd:
        arrays = {n.lower(): a for n, a in arrays.items()}
    types = {n: (dtype, 4) for n in arrays}
    if "allowed" in text:
        m = rng.random((sq, sk)) < 0.7
        m[0, :] = True
        m[sq // 2, :] = False
        arrays["allowed"] = m
        types["allowed"] = ("bool", 2)
    lk = lower_signatures(text, types, {}, "kernel")
    k = lk.kernel
    sz = dims.solve(lk, {b.name: arrays[lk.labels[b.name]].shape for b in k.inputs}, {})
    ins = [arrays[lk.labels[b.name]] for b in k.inputs]
    return k, ins, sz, {}


def answer(text, kernel, ins, sizes):
    """softmax(Q K^T * scale, masked) V in float64 for the source `text`: its scale (a
    constant factor, else 1 / sqrt(head_dim)), its condition (a bool input `allowed`, or a
    causal one, key <= query); a query no key is admitted to gives 0, or NaN where the body
    divides inside its loop (as the recognition found it)."""
    shape, why = match(kernel, CUDA, sizes)
    assert why is None
    named = {b.name: a for b, a in zip(kernel.inputs, ins)}
    order = lambda role: np.moveaxis(np.asarray(named[shape.bufs[role].name], np.float64),
                                     shape.axes[role], (0, 1, 2))
    q, k, v = order("q"), order("k"), order("v")
    factor = re.search(r"\* (0\.\d+)", text)
    scale = float(factor.group(1)) if factor else 1 / np.sqrt(q.shape[-1])
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    ok = np.ones(s.shape[-2:], bool)
    if "allowed" in named:
        ok = named["allowed"].astype(bool)
    elif re.search(r"if (j <= i|i >= j)", text):
        ok = np.arange(s.shape[-1])[None, :] <= np.arange(s.shape[-2])[:, None]
    s = np.where(ok, s, -np.inf)
    m = s.max(-1, keepdims=True)
    w = np.where(ok, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    l = w.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = (w @ v) / l
    p = shape.p
    if not (p.empty_row == "nan" and p.mask is not None):
        o = np.where(l == 0, 0.0, o)
    return np.moveaxis(o, (0, 1, 2), shape.axes["out"])


def mma_sync_default(k, sz):
    """The first mma.sync candidate (Hopper's space starts with the warpgroup kernel's,
    tests/test_attention_wgmma.py)."""
    return next(p for p in SCHED.space(k, CUDA, sz) if p.mma and not p.wgmma)


def _check(text, prog, k, ins, sz, sc):
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    want = answer(text, k, ins, sz)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], TOL, TOL)
    return got


CASES = {      # text, dtype, queries, keys, head_dim (sizes: batch 1, 2 heads)
    "three_pass_causal_const_f16_s77_d64": (A.three_pass("causal", "const"), "f16", 77, 77, 64),
    "three_pass_bool_bf16_q77_k50_d48": (cross(A.three_pass("bool")), "bf16", 77, 50, 48),
    "three_pass_causal_rev_bf16_s130_d16": (A.three_pass("causal_rev", "const"), "bf16", 130, 130, 16),
    "online_stats_bool_nan_f16_s64_d80": (A.online_stats("bool"), "f16", 64, 64, 80),
    "one_pass_none_bf16_q77_k1_d16": (cross(A.one_pass("none")), "bf16", 77, 1, 16),
    "flash_64_f16_s77_d16": (A.flash(64), "f16", 77, 77, 16),
    "flash_32_bf16_s128_d64": (A.flash(32), "bf16", 128, 128, 64),
    "three_pass_causal_f16_s20_d256": (A.three_pass("causal"), "f16", 20, 20, 256),
    "flash_16_min_bf16_s40_d32": (A.flash(16, tile="min", scale="const"), "bf16", 40, 40, 32),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tensor_cores_equal_numpy(case):
    text, dtype, sq, sk, d = CASES[case]
    k, ins, sz, sc = _lower(text, dtype, sq, sk, d)
    # FlashAttention-2's 4 warps of 32 queries, Q held in registers up to head_dim 64; 4
    # warps of 16 where the queries fit 64
    want = MMA if sq <= 64 else replace(MMA, block_q=128, hold_q=d <= 64)
    if d > 128:             # the registers: 16 queries a warp, Q read at each tile
        want = replace(MMA, hold_q=False)
    if d <= 128:            # every variant over a ring of three (measured at 64 and 128)
        want = replace(want, stages=3, **attention_mma.EVERY)
    assert mma_sync_default(k, sz) == want
    prog = SCHED.build(k, CUDA, sz, want)
    assert "tensor cores (mma.sync m16n8k16 " + dtype in prog.schedule
    assert any(isinstance(n, ir.Mma) for n in ir.walk(prog.kernels))
    _check(text, prog, k, ins, sz, sc)


def test_axis_order_bshd():
    """Tutorial 05's flash attention over [batch, seq, heads, head_dim], min(...) tiles, and
    a causal three-pass form over the same layout."""
    for text, dtype in ((A.FLASH_BSHD, "f16"), (A.ATTENTION_BSHD, "bf16")):
        k, ins, sz, sc = _lower(text, dtype, 70, 70, 32, bshd=True)
        _check(text, SCHED.build(k, CUDA, sz, MMA), k, ins, sz, sc)


@pytest.mark.parametrize("params", CHOICES, ids=lambda p: f"{p.block_q}q_{p.warps}w_{'hold' if p.hold_q else 'read'}_q")
def test_every_block_shape(params):
    """4 warps of 16 or 32 queries (one or two m16 tiles a warp), 8 warps of 16, Q held in
    registers or read at each tile: a causal condition over three key tiles (the last
    partial; tiles below the diagonal without the test) and a bool mask over keys fewer than
    queries."""
    for text, dtype, sq, sk, d in ((A.three_pass("causal", "const"), "f16", 150, 150, 32),
                                   (cross(A.three_pass("bool")), "bf16", 77, 50, 16)):
        k, ins, sz, sc = _lower(text, dtype, sq, sk, d)
        assert params in SCHED.space(k, CUDA, sz)
        _check(text, SCHED.build(k, CUDA, sz, params), k, ins, sz, sc)


VARIANTS = variants(MMA) + variants(replace(MMA, block_q=128))


def _variant_id(p) -> str:
    flags = ("packed", "fold_scale", "skip_rescale", "fast_math")
    on = [f"{p.block_kv}k", f"{p.stages}st"] + [n for n in flags if getattr(p, n)] + (
        [f"occupancy{p.occupancy}"] if p.occupancy else [])
    return f"{p.block_q}q_{p.warps}w_{'hold' if p.hold_q else 'read'}_" + "_".join(on)


@pytest.mark.parametrize("params", VARIANTS, ids=_variant_id)
def test_every_variant(params):
    """Each structural variant of 4 warps of 16 and of 32 queries (the fast exp2 flushing
    weights below 2^-126 to 0 within the tolerance): a causal condition over
    keys that end inside a tile (150: two 128-key tiles, three of 64; the diagonal's tiles
    tested, those below it not), and a bool mask over keys fewer than queries (a partial
    first tile)."""
    cases = ((A.three_pass("causal", "const"), "f16", 150, 150, 32),
             (cross(A.three_pass("bool")), "bf16", 77, 50, 16))
    for text, dtype, sq, sk, d in cases:
        k, ins, sz, sc = _lower(text, dtype, sq, sk, d)
        prog = SCHED.build(k, CUDA, sz, params)
        assert any(isinstance(n, ir.Convert) for n in ir.walk(prog.kernels)) == params.packed
        assert ("u_out" in prog.aligned) == params.packed
        shared = {n.name for n in ir.walk(prog.kernels) if isinstance(n, ir.Array) and n.space == "shared"}
        assert ("_qs" in shared) != attention_mma.q_in_ring(params)     # Q in the ring's last buffer
        fns = {n.fn for n in ir.walk(prog.kernels) if isinstance(n, ir.Math)}
        assert ({"fast_exp2", "fmax"} <= fns) == params.fast_math and ("exp2" in fns) != params.fast_math
        _check(text, prog, k, ins, sz, sc)


def test_variants_in_the_space():
    """The tuner's candidates: the default, every block shape, then the variants of the
    default's shape; up to head_dim 128 the default is its shape with every variant over a
    ring of three 64-key tiles, past it the plain kernel (64-key tiles in two buffers)."""
    for d, first in ((64, replace(MMA, block_q=128)), (128, MMA)):
        k, _, sz, _ = _lower(A.three_pass("causal", "const"), "f16", 150, 150, d)
        space = [p for p in SCHED.space(k, CUDA, sz) if p.mma and not p.wgmma]
        tuned = replace(first, stages=3, **attention_mma.EVERY)
        assert space[0] == tuned and space[1:1 + len(CHOICES)] == list(CHOICES)
        assert space[1 + len(CHOICES):] == [p for p in variants(first) if p != tuned]
    k, _, sz, _ = _lower(A.three_pass("causal", "const"), "f16", 150, 150, 192)
    space = [p for p in SCHED.space(k, CUDA, sz) if p.mma and not p.wgmma]
    first = replace(MMA, hold_q=False)         # the shapes and variants that fit its registers
    assert space[0] == first and set(space[1:]) <= set(CHOICES) | set(variants(first))


def test_folded_scale_needs_its_sign():
    """The raw scores' maximum is the scaled ones' only for a scale not negative: a negative
    constant refuses `fold_scale` (the other variants run)."""
    text = A.three_pass("causal", "const").replace("* 0.125", "* -0.125")
    k, _, sz, _ = _lower(text, "f16", 20, 20, 16)
    shape, _ = match(k, CUDA, sz)
    assert "sign" in attention_mma.why_not(CUDA, shape, replace(MMA, fold_scale=True))
    assert attention_mma.why_not(CUDA, shape, replace(MMA, packed=True)) is None
    assert not any(p.fold_scale for p in SCHED.space(k, CUDA, sz))
    for scale in ("const", "sqrt"):
        k, _, sz, _ = _lower(A.three_pass("causal", scale), "f16", 20, 20, 16)
        assert attention_mma.why_not(CUDA, match(k, CUDA, sz)[0], replace(MMA, fold_scale=True)) is None


def test_packed_conversion_and_fast_math_on_the_emulator():
    """The launch IR the variants add, against numpy: `Convert` (pairs of f32 into f16 or
    bf16, rounded to nearest even, at even offsets), `fmax` (a NaN yields the other) and
    `fast_exp2` (a result below the smallest normal is 0)."""
    from zynbook.backends import emulator
    from zynbook.backends.emulator import bf16_round
    from zynbook.compiler.launch.text import format_program
    x = np.array([1.0, -130.0, np.nan, 2.5, 1 / 3, -126.5, 0.0, 70000.0] * 4, np.float32)
    y = np.array([2.0, 1.0, 3.0, np.nan, -1.0, 0.0, -0.0, 1.0] * 4, np.float32)
    i32, t = "i32", ir.Thread("thread")
    two_t = ir.Bin("*", t, ir.Lit(2, i32), i32)
    at = lambda k: ir.Bin("+", two_t, ir.Lit(k, i32), i32)
    for dtype in ("f16", "bf16"):
        body = (ir.Array("_v", "f32", 2),
                ir.Store("_v", ir.Lit(0, i32), ir.Math("fmax", (ir.Load("x", at(0), "f32"),
                                                                 ir.Load("y", at(0), "f32")), "f32")),
                ir.Store("_v", ir.Lit(1, i32), ir.Math("fast_exp2", (ir.Load("x", at(1), "f32"),), "f32")),
                ir.Convert("out", two_t, "_v", ir.Lit(0, i32), 2, dtype),
                ir.Store("raw", t, ir.Load("_v", ir.Lit(1, i32), "f32")))
        params = (ir.Param("x", "buffer", "f32"), ir.Param("y", "buffer", "f32"),
                  ir.Param("raw", "buffer", "f32", True), ir.Param("out", "buffer", dtype, True))
        prog = ir.Program("pairs", (ir.Kernel("pairs", params, body, 16),), (ir.Launch("pairs", ir.Lit(1, i32), 16),))
        assert "convert out[" in format_program(prog)
        out, raw = np.zeros(32, emulator.numpy_dtype(dtype)), np.zeros(16, np.float32)
        emulator.run(prog, {"x": x, "y": y, "raw": raw, "out": out}, {}, {})
        with np.errstate(over="ignore"):
            e = np.exp2(x[1::2].astype(np.float64))
        want_raw = np.where(e < np.finfo(np.float32).tiny, 0.0, e).astype(np.float32)
        np.testing.assert_array_equal(raw, want_raw)
        rnd = (lambda v: np.float32(v).astype(np.float16).astype(np.float32)) if dtype == "f16" else \
            (lambda v: np.array([bf16_round(a) for a in np.float32(v)], np.float32))
        out = out.astype(np.float32)
        np.testing.assert_array_equal(out[0::2], rnd(np.fmax(x[0::2], y[0::2])))
        np.testing.assert_array_equal(out[1::2], rnd(want_raw))


@pytest.mark.parametrize("text", [cross(A.three_pass("bool")), cross(A.online_stats("bool"))],
                         ids=["zero_empty_rows", "nan_empty_rows"])
def test_equals_the_reference_executor(text):
    """The CPU reference executor's answer (f16 inputs), its empty rows included (0, or NaN
    where the body divides by the sum inside its key loop)."""
    k, ins, sz, sc = _lower(text, "f16", 77, 50, 16)
    got = emulate_kernel(SCHED.build(k, CUDA, sz, MMA), k, ins, sz, sc, warp=32).astype(np.float64)
    want = np.asarray(run_kernel(k, ins, sz, sc)).astype(np.float64)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], TOL, TOL)


def test_unaligned_buffers_run_the_fallback():
    """Q, K and V are copied 16 bytes at a time: buffers not so aligned run the first choice
    without tensor cores, which equals numpy too."""
    k, ins, sz, sc = _lower(A.three_pass("causal", "const"), "f16", 77, 77, 16)
    prog = SCHED.build(k, CUDA, sz, MMA)
    assert prog.aligned == ("u_K", "u_Q", "u_V") and prog.fallback is not None
    assert not any(isinstance(n, (ir.Mma, ir.AsyncCopy)) for n in ir.walk(prog.fallback))
    assert {kk.name for kk in prog.kernels}.isdisjoint(kk.name for kk in prog.fallback.kernels)
    _check(A.three_pass("causal", "const"), prog.fallback, k, ins, sz, sc)


@pytest.mark.parametrize("mask,stops", [("causal", True), ("causal_rev", True), ("bool", False)])
def test_causal_key_loop_ends_at_the_block(mask, stops):
    """A causal condition: the key loop of a block stops at its last query's tile."""
    k, _, sz, _ = _lower(A.three_pass(mask), "f16", 77, 77, 16)
    kernel = SCHED.build(k, CUDA, sz, MMA).kernels[0]
    nk = next(n for n in ir.walk(kernel) if isinstance(n, ir.Decl) and n.name == "_nk")
    assert any(isinstance(e, ir.Math) and e.fn == "min" for e in ir.walk(nk.value)) == stops


@pytest.mark.parametrize("why,dtype,d,target", [
    ("all f16 or all bf16", "f32", 64, CUDA),
    ("multiples of 16", "f16", 24, CUDA),
    ("multiples of 16", "f16", 272, CUDA),
    ("no mma.sync", "f16", 64, cuda_target((7, 5))),
    ("no mma.sync", "f16", 64, metal_target()),
    ("sizes known when compiled", "f16", 64, webgpu_target(["shader-f16"]))])
def test_not_where_it_does_not_apply(why, dtype, d, target):
    k, _, sz, _ = _lower(A.three_pass("causal"), dtype, 9, 9, d)
    shape, _ = match(k, target, sz)
    assert why in attention_mma.why_not(target, shape)
    assert not any(p.mma for p in SCHED.space(k, target, sz))
    assert not SCHED.default(k, target, sz).mma


def _sources():
    """(name, CUDA C, archs): every block shape over a bool mask, bf16 at head_dim 48 (for
    sm_80 and sm_90 in turn), then the default at head_dim 128 and 256 under a causal
    condition (both archs)."""
    bool48 = (cross(A.three_pass("bool")), "bf16", 77, 50, 48)
    causal = [(A.three_pass("causal", "const"), "f16", 130, 130, d) for d in (128, 256)]
    cases = [(bool48, p, (("sm_80", "sm_90")[n % 2],)) for n, p in enumerate(CHOICES)]
    cases += [(c, None, ("sm_80", "sm_90")) for c in causal]
    # the variants of the benchmarks' defaults with every change but the tile size and ring
    # (each alone is a part of those): causal bf16 at head_dim 128 (4 warps of 16) and f16 at
    # 64 (4 warps of 32), for sm_80 and sm_90 in turn
    combined = [p for p in variants(MMA) + variants(replace(MMA, block_q=128)) if p.packed]
    for n, p in enumerate(combined):
        d = 128 if p.block_q == 64 else 64
        cases.append(((A.three_pass("causal"), "bf16" if d == 128 else "f16", 130, 130, d), p,
                      (("sm_90", "sm_80")[n % 2],)))
    for (text, dtype, sq, sk, d), p, archs in cases:
        k, _, sz, _ = _lower(text, dtype, sq, sk, d)
        p = p or mma_sync_default(k, sz)
        yield f"{dtype}_d{d}_{_variant_id(p)}", render_cuda(
            k, sz, options={"params": Choice("attention", p)}).source, archs


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_source_compiles_with_nvcc():
    """The CUDA C (with its fallback kernel) for sm_80 and sm_90: every block shape, head_dim
    128 and 256, whose tiles are dynamic shared memory, and the structural variants combined."""
    compiles = []
    for name, src, archs in _sources():
        assert "zyn_mma_" in src and "ldmatrix" in src and "cp.async" in src
        compiles += [(name, arch, nvcc_runs.queue(src, (f"-arch={arch}", "-cubin"))) for arch in archs]
    for name, arch, fut in compiles:        # (queued at once: the nvcc processes run side by side)
        res = fut.result()
        assert res.returncode == 0, (name, arch, res.stderr[-3000:])


# ---------------------------------------------------------------------- on a GPU

def _gpu():
    try:
        from zynbook.backends import cuda as backend
        devices = backend.discover()
    except Exception:
        return None
    return devices[0] if devices else None


GPU_CASES = [
    ("bert_f16", A.flash(64), "f16", 512, 512, 64, 8, 12),          # the transformer's attention
    ("causal_bf16", A.three_pass("causal", "const"), "bf16", 300, 300, 128, 1, 4),
    ("bool_f16_cross", cross(A.three_pass("bool")), "f16", 200, 77, 80, 2, 3),
    ("causal_f16_d256", A.three_pass("causal"), "f16", 200, 200, 256, 1, 2),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: c[0])
def test_on_the_gpu(case):
    dev = _gpu()
    if dev is None:
        pytest.skip("no CUDA GPU (or no CuPy)")
    _, text, dtype, sq, sk, d, batch, heads = case
    k, ins, sz, sc = _lower(text, dtype, sq, sk, d, batch, heads)
    compiled = dev.compile(k, sz)
    assert "tensor cores" in compiled.program.schedule
    out, _ = dev.launch(k, ins, sz, sc)
    got = np.asarray(dev.to_host(out), np.float64)
    want = answer(text, k, ins, sz)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], TOL, TOL)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [p for p in VARIANTS if p.packed], ids=_variant_id)
def test_combined_variants_on_the_gpu(params):
    """The combined variants (each change but the tile size and ring is a part of them)
    under a causal condition over 300 queries in f16: head_dim 128 for 4 warps of 16, 64
    for the shapes of 32 queries a warp."""
    dev = _gpu()
    if dev is None:
        pytest.skip("no CUDA GPU (or no CuPy)")
    text, d = A.three_pass("causal", "const"), 128 if params.block_q // params.warps == 16 else 64
    k, ins, sz, sc = _lower(text, "f16", 300, 300, d, 1, 4)
    compiled = dev.compile(k, sz, {"params": Choice("attention", params)})
    assert "tensor cores" in compiled.program.schedule
    want = answer(text, k, ins, sz)
    out = dev.allocate(want.shape, k.output.dtype)
    compiled.launch_raw([dev._as_device_array(a, b.dtype) for a, b in zip(ins, k.inputs)] + [out], sc)
    got = np.asarray(dev.to_host(out), np.float64)
    assert_within(got, want, TOL, TOL)
