"""Attention whose score has an added term: a relative-position bias, ALiBi's slope times the
distance, a float mask of 0 and -inf (a padding mask as additive masks are written), with or
without a key condition beside it. The three-pass, online-statistics and one-pass forms are
recognised with the term; each equals numpy written here on every local device with the
attention schedule chosen, and on the launch-IR emulator for CUDA (one thread a query and
the register-tiled products and the tensor-core kernels), Metal, C++ and WebGPU with several
parameter choices. A term that reads the running values or the output is not attention and
still equals numpy."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import zynbook

from compute_testing import emulate_kernel, lower_block, wanted_devices
from tolerances import assert_within
from zynbook.backends.registry import get_device
from zynbook.compiler import schedules
from zynbook.compiler.passes import recognise
from zynbook.compiler.schedules import attention_mma
from zynbook.compiler.schedules.attention import PRODUCTS, Attention, match
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target

SCHED = Attention()
SCORE = "dot(Q[b, h, i], K[b, h, j]) * scale"

# name -> (the added term, its inputs' maker (rng, B, H, S) -> dict, numpy of the term)
TERMS = {
    "relative": ("rel[h, i, j]",
                 lambda r, B, H, S: {"rel": r.standard_normal((H, S, S)).astype(np.float32)},
                 lambda a, B, H, S: a["rel"][None]),
    "alibi": ("0.0 - slope[h] * (i - j)",
              lambda r, B, H, S: {"slope": np.linspace(0.1, 0.8, H).astype(np.float32)},
              lambda a, B, H, S: -a["slope"][None, :, None, None]
              * (np.arange(S)[:, None] - np.arange(S)[None, :])[None, None]),
    "padding": ("pad[b, j]",
                lambda r, B, H, S: {"pad": np.where(np.arange(S)[None, :] < np.array([[S - 5], [S // 2]])[:B],
                                                    0.0, -np.inf).astype(np.float32)},
                lambda a, B, H, S: a["pad"][:, None, None, :]),
}


def source(form: str, term: str, extra: list, causal: bool = False) -> str:
    s = f"{SCORE} + {term}"
    def guarded(lines, n):
        """`lines` at indent n, under the causal condition where there is one."""
        if not causal:
            return "\n".join(" " * n + x for x in lines)
        return " " * n + "if j <= i:\n" + "\n".join(" " * (n + 4) + x for x in lines)
    if form == "three_pass":
        body = f"""        var m = -inf
        for j in 0..S:
{guarded([f"m = max(m, {s})"], 12)}
        var l = 0.0
        for j in 0..S:
{guarded([f"l += exp({s} - m)"], 12)}
        for d in 0..D:
            var acc = 0.0
            for j in 0..S:
{guarded([f"acc += exp({s} - m) * V[b, h, j, d]"], 16)}
            out[b, h, i, d] = acc / l"""
    elif form == "online":
        body = f"""        var m = -inf
        var l = 0.0
        for j in 0..S:
{guarded([f"let s = {s}", "let mn = max(m, s)", "l = l * exp(m - mn) + exp(s - mn)", "m = mn"], 12)}
        for d in 0..D:
            var acc = 0.0
            for j in 0..S:
{guarded([f"acc += exp({s} - m) * V[b, h, j, d]"], 16)}
            out[b, h, i, d] = acc / l"""
    else:
        step = [f"let s = {s}", "let mx = max(m, s)", "let a = exp(m - mx)", "let p = exp(s - mx)",
                "l = a * l + p", "acc = acc * a + p * V[b, h, j, d]", "m = mx"]
        body = f"""        for d in 0..D:
            var m = -inf
            var l = 0.0
            var acc = 0.0
            for j in 0..S:
{guarded(step, 16)}
            out[b, h, i, d] = acc / l"""
    names = ", ".join(["Q", "K", "V", *extra])
    return f"""let y = compute({names}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..S:
{body}
}}
y"""


def case(form, term, causal=False, B=2, H=3, S=37, D=24, seed=0, dtype=np.float32):
    """(kernel, inputs, sizes, scalars, numpy's answer) over Q, K, V of `dtype` (the term f32)."""
    r = np.random.default_rng(seed)
    text, make, ref = TERMS[term]
    a = {n: r.standard_normal((B, H, S, D)).astype(dtype) for n in "QKV"}
    made = make(r, B, H, S)
    a.update(made)
    scale = float(np.float32(D ** -0.5))
    s = np.einsum("bhid,bhjd->bhij", a["Q"].astype(np.float64), a["K"]) * scale \
        + ref(a, B, H, S)
    if causal:
        s = np.where(np.arange(S)[None, :] <= np.arange(S)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), a["V"])
    k, ins, sz, sc = lower_block(source(form, text, list(made), causal), a, {"scale": scale})
    return k, ins, sz, sc, want


CASES = [(f, t, c) for f in ("three_pass", "online", "one_pass") for t in TERMS for c in (False, True)
         if not (t == "padding" and c)]
IDS = [f"{f}-{t}{'-causal' if c else ''}" for f, t, c in CASES]


@pytest.mark.parametrize("form,term,causal", CASES, ids=IDS)
def test_recognised_with_the_added_term(form, term, causal):
    k, _, _, _, _ = case(form, term, causal, S=7, D=8)
    p = recognise.attention(k)
    assert p, p
    assert p.bias is not None and p.causal == causal


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("form,term,causal", CASES, ids=IDS)
def test_equals_numpy_on_device(device, form, term, causal):
    k, ins, sz, sc, want = case(form, term, causal)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)
    if device != "cpu":
        assert "attention" in str((launch.geometry or {}).get("schedule", "")).lower()


TARGETS = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32), "cpp": (cpu_target(), 1),
           "webgpu": (webgpu_target(["shader-f16"]), 1)}


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("form,term,causal", CASES[::2] + [CASES[1]], ids=IDS[::2] + [IDS[1]])
def test_schedule_equals_numpy_on_the_emulator(target, form, term, causal):
    t, warp = TARGETS[target]
    k, ins, sz, sc, want = case(form, term, causal, B=1, H=2, S=21 if target != "cuda" else 45, D=16)
    space = [p for p in SCHED.space(k, t, sz) if not p.mma]
    for params in dict.fromkeys([space[0], space[-1]]):
        got = emulate_kernel(SCHED.build(k, t, sz, params), k, ins, sz, sc, warp=warp)
        assert_within(got.astype(np.float64), want, 2e-4, 2e-5)
    assert "(attention: " in schedules.build(k, t, sz).schedule


@pytest.mark.parametrize("term", sorted(TERMS))
def test_register_tiled_products_on_the_emulator(term):
    """The CUDA kernel whose scores are in base 2: the term is scaled by log2(e) there."""
    k, ins, sz, sc, want = case("three_pass", term, B=1, H=2, S=70, D=32)
    prog = SCHED.build(k, cuda_target(), sz, PRODUCTS)
    assert "register-tiled" in prog.schedule
    assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64), want, 2e-4, 2e-5)


def half_case(term, causal, B=1, H=2, S=45, D=32):
    """`case` with f16 Q, K and V, the form the tensor-core kernels take."""
    return case("three_pass", term, causal, B, H, S, D, dtype=np.float16)


TC_CASES = [(t, c) for t in TERMS for c in (False, True) if not (t == "padding" and c)]


@pytest.mark.parametrize("arch", [(9, 0), (8, 0)], ids=["sm_90", "sm_80"])
@pytest.mark.parametrize("term,causal", TC_CASES, ids=[f"{t}{'-causal' if c else ''}" for t, c in TC_CASES])
def test_tensor_core_kernels_take_the_term(arch, term, causal):
    """The warpgroup (sm_90) and mma.sync (sm_80) kernels add the term to each score in
    base 2, the scale applied to each score (its maximum is not the raw dot products'):
    their default and their plainest candidate on the emulator, against numpy."""
    target = cuda_target(arch)
    k, ins, sz, sc, want = half_case(term, causal)
    shape, _ = match(k, target, sz)
    space = [p for p in SCHED.space(k, target, sz) if p.mma]
    assert space and not any(p.fold_scale for p in space)
    assert "added term" in attention_mma.why_not(target, shape, replace(space[0], fold_scale=True))
    assert schedules.build(k, target, sz).schedule == SCHED.build(k, target, sz, space[0]).schedule
    for params in dict.fromkeys([space[0], space[-1]]):
        prog = SCHED.build(k, target, sz, params)
        assert "tensor cores" in prog.schedule
        got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
        assert_within(got, want, 2e-2, 2e-2)


def test_the_copy_engines_kernel_takes_the_term():
    """The warpgroup kernel fed by TMA, over 64-key tiles with turns and without."""
    target = cuda_target((9, 0))
    k, ins, sz, sc, want = half_case("alibi", True, S=70, D=64)
    tma = [p for p in SCHED.space(k, target, sz) if p.tma]
    assert tma
    for params in dict.fromkeys([tma[0], tma[-1]]):
        got = emulate_kernel(SCHED.build(k, target, sz, params), k, ins, sz, sc, warp=32)
        assert_within(got.astype(np.float64), want, 2e-2, 2e-2)


def test_tensor_core_source_with_the_term_compiles_with_nvcc():
    import nvcc_runs
    if nvcc_runs.NVCC is None:
        pytest.skip("nvcc is not installed")
    from zynbook.compiler.codegen.cuda import render_cuda
    k, _, sz, _, _ = half_case("relative", True)
    prog = render_cuda(k, sz)
    assert "tensor cores" in prog.schedule
    res = nvcc_runs.run(prog.source, ("--ptx", "-arch=sm_90a" if prog.arch_specific else "-arch=sm_90"))
    assert res.returncode == 0, res.stderr[-4000:]


def test_a_term_reading_the_running_maximum_is_not_attention():
    text = source("three_pass", "rel[h, i, j]", ["rel"]).replace("exp(dot(Q[b, h, i], K[b, h, j]) * scale + rel[h, i, j] - m)",
                                                          "exp(dot(Q[b, h, i], K[b, h, j]) * scale + rel[h, i, j] * m - m)")
    r = np.random.default_rng(1)
    B, H, S, D = 1, 2, 9, 8
    a = {n: r.standard_normal((B, H, S, D)).astype(np.float32) for n in "QKV"}
    a["rel"] = r.standard_normal((H, S, S)).astype(np.float32)
    k, ins, sz, sc = lower_block(text, a, {"scale": 0.5})
    assert not recognise.attention(k)
    dots = np.einsum("bhid,bhjd->bhij", a["Q"].astype(np.float64), a["K"]) * 0.5
    m = (dots + a["rel"][None]).max(-1, keepdims=True)
    w = np.exp(dots + a["rel"][None] * m - m)       # the sum's and the weights' term as written
    want = np.einsum("bhij,bhjd->bhid", w, a["V"]) / w.sum(-1, keepdims=True)
    for device in wanted_devices():
        dev = get_device(device)
        got, _ = dev.launch(k, ins, sz, sc)
        assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_precision_inputs_with_a_term_equal_numpy(device, dtype):
    """f16 and bf16 Q, K, V with an f32 bias (on CUDA the tensor-core kernels), against numpy
    on the rounded inputs."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(5)
    B, H, S, D = 2, 2, 45, 32
    rounded = {n: torch.tensor(r.standard_normal((B, H, S, D)).astype(np.float32)).to(
        torch.float16 if dtype == "f16" else torch.bfloat16) for n in "QKV"}
    rel = r.standard_normal((H, S, S)).astype(np.float32)
    q, kk, v = (rounded[n].float().numpy().astype(np.float64) for n in "QKV")
    s = np.einsum("bhid,bhjd->bhij", q, kk) * 0.25 + rel[None]
    s = np.where(np.arange(S)[None, :] <= np.arange(S)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)
    inputs = {n: (t.numpy() if dtype == "f16" else t) for n, t in rounded.items()}
    got = zynbook.run(source("online", "rel[h, i, j]", ["rel"], causal=True), device=device,
                      rel=rel, scale=0.25, **inputs)
    assert_within(np.asarray(got.numpy(), np.float64), want, 3e-2, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("term,causal", TC_CASES, ids=[f"{t}{'-causal' if c else ''}" for t, c in TC_CASES])
def test_tensor_cores_with_the_term_on_the_gpu(term, causal):
    """On a CUDA GPU the default (on Hopper the warpgroup kernel) with the term, at sizes
    that fill no tile, against numpy."""
    from test_attention_mma import _gpu
    dev = _gpu()
    if dev is None:
        pytest.skip("no CUDA GPU (or no CuPy)")
    k, ins, sz, sc, want = half_case(term, causal, B=2, H=3, S=300, D=64)
    assert "tensor cores" in dev.compile(k, sz).program.schedule
    out, _ = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(out), np.float64), want, 2e-2, 2e-2)
