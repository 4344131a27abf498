"""Attention whose V (and so the output) has a head_dim other than Q's and K's (multi-head
latent attention: Q and K of 192, V of 128; any Dqk != Dv): the attention schedule's kernel
scores over Q's and K's head_dim and accumulates over V's, in the three-pass,
online-statistics, one-pass and flash forms, causal or not. Each equals numpy written here
on every local device with the attention schedule chosen, and on the launch-IR emulator
for the CUDA, Metal, C++ and WebGPU schedules (one kernel per class of head_dim there) with
several parameter choices; the mma.sync tensor-core kernel takes both too (f16, bf16); the
register-tiled products and the warpgroup kernels, cut for one head_dim, say so and leave it
to the kernels that take both."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import nvcc_runs
from compute_testing import emulate_kernel, lower_block, lower_signatures, wanted_devices
from cuda_cir_kernels import _representable
from tolerances import assert_within
from zynbook.backends.registry import get_device
from zynbook.compiler import dims, schedules
from zynbook.compiler.codegen.cuda import render_cuda
from zynbook.compiler.launch.scalar import NotScalar
from zynbook.compiler.schedules import attention_mma, attention_wgmma
from zynbook.compiler.schedules.attention import (PRODUCTS, Attention, match, products_fit,
                                                  products_why_not)
from zynbook.compiler.schedules.base import Choice
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target

SCHED = Attention()
SCALE = 0.17


def _row(layout, s):
    return ", ".join(s if r == "s" else r for r in layout)


def source(form, layout, loops, causal):
    """Attention over [layout..., head_dim] tensors, the output's loop over V's `dv`."""
    q, kv = _row(layout, "i"), _row(layout, "j")
    rng = {"b": "batch", "h": "heads", "i": "seq_q", "d": "dv"}
    header = ", ".join(f"{v} in 0..{rng[v]}" for v in loops)
    score = f"dot(Q[{q}], K[{kv}]) * scale"
    pad = lambda lines, n: "\n".join(" " * n + x for x in lines)
    guard = lambda lines, n: pad((["if j <= i:"] + ["    " + x for x in lines]) if causal else lines, n)
    if form == "three_pass":
        body = f"""        var m = -inf
        for j in 0..seq_k:
{guard([f"m = max(m, {score})"], 12)}
        var l = 0.0
        for j in 0..seq_k:
{guard([f"l += exp({score} - m)"], 12)}
        for d in 0..dv:
            var acc = 0.0
            for j in 0..seq_k:
{guard([f"acc += exp({score} - m) * V[{kv}, d]"], 16)}
            out[{q}, d] = acc / l"""
    elif form == "online":
        body = f"""        var m = -inf
        var l = 0.0
        for j in 0..seq_k:
{guard([f"let s = {score}", "let mn = max(m, s)", "l = l * exp(m - mn) + exp(s - mn)", "m = mn"], 12)}
        for d in 0..dv:
            var acc = 0.0
            for j in 0..seq_k:
{guard([f"acc += exp({score} - m) * V[{kv}, d]"], 16)}
            out[{q}, d] = acc / l"""
    elif form == "one_pass":
        step = [f"let s = {score}", "let mx = max(m, s)", "let a = exp(m - mx)", "let p = exp(s - mx)",
                "l = a * l + p", f"acc = acc * a + p * V[{kv}, d]", "m = mx"]
        body = pad(["var m = -inf", "var l = 0.0", "var acc = 0.0", "for j in 0..seq_k:"], 8) + "\n" \
            + guard(step, 12) + "\n" + pad([f"out[{q}, d] = acc / l"], 8)
        if "d" not in loops:        # the loop over V's head_dim inside the query's
            body = "        for d in 0..dv:\n" + "\n".join("    " + x for x in body.split("\n"))
    else:
        assert form == "flash" and not causal
        qt, kt = _row(layout, "qb:qb+8"), _row(layout, "kb:kb+8")
        header = ", ".join("qb in 0..seq_q step 8" if v == "i" else f"{v} in 0..{rng[v]}" for v in loops)
        body = f"""        var m = -inf
        var l = 0.0
        var o = zeros(min(8, seq_q - qb), dv)
        for kb in 0..seq_k step 8:
            let S = Q[{qt}] @ transpose(K[{kt}]) * scale
            let m_new = max(m, row_max(S))
            l = exp(m - m_new) * l + row_sum(exp(S - m_new))
            o = exp(m - m_new) * o + exp(S - m_new) @ V[{kt}]
            m = m_new
        out[{qt}] = o / l"""
    kind = "flash_attention" if form == "flash" else "attention"
    return f"let attn = compute(Q, K, V) {{\n    @kernel {kind}\n    for {header}:\n{body}\n}}\nattn\n"


def arrays(layout, seq, dqk, dv, batch=2, heads=3, seed=0):
    rng = np.random.default_rng(seed)
    size = lambda d: tuple({"b": batch, "h": heads, "s": seq}[r] for r in layout) + (d,)
    return {"Q": rng.standard_normal(size(dqk)).astype(np.float32),
            "K": rng.standard_normal(size(dqk)).astype(np.float32),
            "V": rng.standard_normal(size(dv)).astype(np.float32)}


def numpy_attention(a, layout, causal):
    """softmax(Q K^T * SCALE, causal) V in f64 on [b, h, s, d] views (V's own width)."""
    full = [r for r in "bhs" if r not in layout] + list(layout)

    def bhsd(x):
        x = np.asarray(x, np.float64).reshape((1,) * (3 - len(layout)) + x.shape)
        return np.moveaxis(x, [full.index(r) for r in "bhs"], [0, 1, 2])
    q, k, v = bhsd(a["Q"]), bhsd(a["K"]), bhsd(a["V"])
    s = np.einsum("bhid,bhjd->bhij", q, k) * SCALE
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    out = np.moveaxis((w / w.sum(-1, keepdims=True)) @ v, [0, 1, 2], [full.index(r) for r in "bhs"])
    return out.reshape(out.shape[3 - len(layout):])


# name: (form, layout, loops, causal, Dqk, Dv)
CASES = {
    "three_pass_causal_40_24": ("three_pass", "sh", "ih", True, 40, 24),
    "three_pass_4d_24_56": ("three_pass", "bhs", "bhi", False, 24, 56),
    "online_40_24": ("online", "sh", "hi", False, 40, 24),
    "online_2d_causal_24_56": ("online", "s", "i", True, 24, 56),
    "one_pass_per_value_causal_40_24": ("one_pass", "sh", "ihd", True, 40, 24),
    "one_pass_inner_d_24_56": ("one_pass", "sh", "ih", False, 24, 56),
    "one_pass_odd_causal_13_6": ("one_pass", "sh", "ih", True, 13, 6),
    "three_pass_odd_6_13": ("three_pass", "sh", "ih", False, 6, 13),
    "flash_40_24": ("flash", "sh", "ih", False, 40, 24),
    "flash_24_56": ("flash", "bhs", "hib", False, 24, 56),
}


def case(name, seq=37, **kw):
    form, layout, loops, causal, dqk, dv = {**CASES, **MLA}[name]
    a = arrays(layout, seq, dqk, dv, **kw)
    k, ins, sz, sc = lower_block(source(form, layout, loops, causal), a, {"scale": SCALE})
    return k, ins, sz, sc, numpy_attention(a, layout, causal)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matched_with_both_head_dims(name):
    k, _, sz, _, _ = case(name, seq=9)
    for t in (cuda_target(), metal_target(), cpu_target(), webgpu_target(["shader-f16"])):
        shape, why = match(k, t, sz)
        assert why is None, why
        assert (shape.D, shape.Dv) == CASES[name][4:]
        assert SCHED.why_not(k, t, sz) is None


# ------------------------------------------------------------------ the local devices

@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_numpy_on_device(device, name):
    k, ins, sz, sc, want = case(name)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)
    if device != "cpu":
        schedule = str((launch.geometry or {}).get("schedule", ""))
        assert "(attention: " in schedule, schedule


# ------------------------------------------------------------------ the emulator

TARGETS = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32), "cpp": (cpu_target(), 1),
           "webgpu": (webgpu_target(["shader-f16"]), 1),
           "webgpu_sg4": (webgpu_target(["shader-f16", "subgroup"], subgroup=4), 4)}


def _params(k, target, sz):
    """The default, one from the middle and the last of the schedule's space (lanes, tiles
    or blocks apart)."""
    space = SCHED.space(k, target, sz)
    assert not any(p.mma or p.products for p in space)
    return list(dict.fromkeys([space[0], space[len(space) // 2], space[-1]]))


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_equals_numpy_on_the_emulator(name, target):
    t, warp = TARGETS[target]
    k, ins, sz, sc, want = case(name, seq=37 if target in ("cuda", "metal") else 19, batch=1, heads=2)
    for params in _params(k, t, sz):
        prog = SCHED.build(k, t, sz, params)
        assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=warp).astype(np.float64), want, 2e-4, 2e-5)
    prog = schedules.build(k, t, sz)
    assert "(attention: " in prog.schedule, prog.schedule


# ------------------------------------------------------- multi-head latent attention's sizes

# Q and K of 192, V of 128 (DeepSeek's); V past the largest head_dim class (128) alone
MLA = {"mla_192_128": ("three_pass", "bhs", "bhi", True, 192, 128),
       "v_past_the_classes_64_160": ("online", "sh", "ih", False, 64, 160)}


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("name", sorted(MLA))
def test_past_the_head_dim_classes_on_device(device, name):
    """Where one head_dim is past the classes of WebGPU's program of every size set, the
    launch gets one built for its sizes (the limit is looked up under that head_dim's size)."""
    k, ins, sz, sc, want = case(name, seq=21, batch=1, heads=2)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)
    if device != "cpu":
        assert "(attention: " in str((launch.geometry or {}).get("schedule", ""))


@pytest.mark.parametrize("target", ["cuda", "metal", "cpp"])
@pytest.mark.parametrize("name", sorted(MLA))
def test_past_the_head_dim_classes_on_the_emulator(name, target):
    t, warp = TARGETS[target]
    k, ins, sz, sc, want = case(name, seq=21, batch=1, heads=2)
    for params in _params(k, t, sz):
        prog = SCHED.build(k, t, sz, params)
        assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=warp).astype(np.float64), want, 2e-4, 2e-5)


def test_webgpu_limit_sites_name_each_head_dim():
    """The class kernels' limit sites name Q's and V's sizes (what wgsl.past_limits looks
    up): a launch past the classes in either is built for its own sizes."""
    from zynbook.compiler.codegen.wgsl import past_limits
    k, _, sz, _, _ = case("v_past_the_classes_64_160", seq=9)
    shape, _ = match(k, TARGETS["webgpu"][0], sz)
    prog = SCHED.build(k, TARGETS["webgpu"][0], sz, SCHED.default(k, TARGETS["webgpu"][0], sz))
    names = {s.buffer for s in prog.sites if s.kind == "limit"}
    assert names == {shape.head_dim, shape.head_dim_v} and "dv" in names
    assert past_limits(prog.sites, sz)
    assert not past_limits(prog.sites, {**sz, "dv": 128})
    assert past_limits(prog.sites, {**sz, "dv": 128, shape.head_dim: 129})


# ------------------------------------------------- the kernels cut for one head_dim say so

def test_register_tiled_products_refuse_two_head_dims():
    """f32 on CUDA with Q and K of 32 and V of 64 (each a head_dim the products take): the
    products say why not, and the kernel that takes both runs it."""
    a = arrays("sh", 70, 32, 64)
    k, ins, sz, sc = lower_block(source("three_pass", "sh", "ih", True), a, {"scale": SCALE})
    cuda = cuda_target()
    shape, _ = match(k, cuda, sz)
    why = products_why_not(cuda, shape)
    assert why and "V's head_dim 64" in why and "32" in why and not products_fit(cuda, shape)
    with pytest.raises(NotScalar, match="V's head_dim 64"):
        SCHED.build(k, cuda, sz, PRODUCTS)
    assert not SCHED.wants_launch_sizes(k, cuda, sz)
    prog = schedules.build(k, cuda, sz)
    assert "(attention: " in prog.schedule and "register-tiled" not in prog.schedule
    assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64),
                  numpy_attention(a, "sh", True), 2e-4, 2e-5)


def half_case(dtype, dqk, dv, seq=53):
    """The causal one-pass form over f16 or bf16 tensors (their values representable)."""
    a = {n: _representable(x, dtype) for n, x in arrays("sh", seq, dqk, dv).items()}
    text = source("one_pass", "sh", "ih", True)
    lk = lower_signatures(text, {n: (dtype, x.ndim) for n, x in a.items()}, {"scale": "f32"})
    k = lk.kernel
    sz = dims.solve(lk, {b.name: a[lk.labels[b.name]].shape for b in k.inputs}, {})
    return k, [a[lk.labels[b.name]] for b in k.inputs], sz, numpy_attention(a, "sh", True)


@pytest.mark.parametrize("arch", [(8, 0), (9, 0)], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype,dqk,dv", [("f16", 64, 32), ("bf16", 32, 48), ("f16", 192, 128)])
def test_tensor_cores_take_two_head_dims(arch, dtype, dqk, dv):
    """f16 / bf16 on CUDA: the mma.sync kernel scores over Q's and K's head_dim and
    accumulates O over V's (the shared rows the longer's); the warpgroup kernels, cut for one
    head_dim, say why not. Its default and plainest candidate on the emulator."""
    k, ins, sz, want = half_case(dtype, dqk, dv)
    cuda = cuda_target(arch)
    shape, _ = match(k, cuda, sz)
    why = attention_wgmma.why_not(cuda, shape, attention_wgmma.WGMMA)
    assert why and ("wgmma" in why if arch < (9, 0) else f"V's head_dim {dv} is not Q's and K's {dqk}" in why)
    space = [p for p in SCHED.space(k, cuda, sz) if p.mma]
    assert space and not any(p.wgmma for p in space)
    prog = schedules.build(k, cuda, sz)
    assert "tensor cores" in prog.schedule
    for params in dict.fromkeys([space[0], space[-1]]):
        got = emulate_kernel(SCHED.build(k, cuda, sz, params), k, ins, sz, {"scale": SCALE}, warp=32)
        assert_within(got.astype(np.float64), want, 2e-2, 2e-2)


def test_tensor_cores_refuse_a_v_head_dim_off_sixteen():
    """V's head_dim must be a multiple of 16 as Q's: 24 is left to the scalar kernel."""
    k, ins, sz, want = half_case("f16", 32, 24)
    cuda = cuda_target()
    why = attention_mma.why_not(cuda, match(k, cuda, sz)[0])
    assert why and "V's head_dim 24" in why
    prog = schedules.build(k, cuda, sz)
    assert "(attention: " in prog.schedule and "tensor cores" not in prog.schedule
    got = emulate_kernel(prog, k, ins, sz, {"scale": SCALE}, warp=32).astype(np.float64)
    assert_within(got, want, 2e-2, 2e-2)


@pytest.mark.gpu
def test_tensor_cores_with_two_head_dims_on_the_gpu():
    """Q and K of 192, V of 128 (multi-head latent attention's) in f16 on a CUDA GPU."""
    from test_attention_mma import _gpu
    dev = _gpu()
    if dev is None:
        pytest.skip("no CUDA GPU (or no CuPy)")
    k, ins, sz, want = half_case("f16", 192, 128, seq=300)
    assert "tensor cores" in dev.compile(k, sz).program.schedule
    out, _ = dev.launch(k, ins, sz, {"scale": SCALE})
    assert_within(np.asarray(dev.to_host(out), np.float64), want, 2e-2, 2e-2)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_source_compiles_with_nvcc():
    """The CUDA C of two head_dims (a thread a query; four lanes a query, their merge over
    V's width; the mma.sync kernel in f16) as the CUDA printer renders it."""
    k, _, sz, _, _ = case("three_pass_causal_40_24", seq=70)
    space = SCHED.space(k, cuda_target(), sz)
    runs = [nvcc_runs.queue(render_cuda(k, sz, options={"params": Choice("attention", p)}).source,
                            ("-gencode", "arch=compute_90,code=sm_90", "-cubin"))
            for p in (space[0], next(p for p in space if p.lanes == 4))]
    k, _, sz, _ = half_case("f16", 192, 128)        # and the tensor-core kernel's
    prog = render_cuda(k, sz)
    assert "tensor cores" in prog.schedule
    runs.append(nvcc_runs.queue(prog.source, ("-gencode", "arch=compute_90,code=sm_90", "-cubin")))
    for fut in runs:
        res = fut.result()
        assert res.returncode == 0, res.stderr[-3000:]
