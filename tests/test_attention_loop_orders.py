"""Attention recognised by structure whatever the order of its parallel loops over batch,
head and query (and head_dim, one output value a thread), and whichever of batch and head
the tensors lack (3-D [seq, heads, d] or [heads, seq, d], 2-D [seq, d]): the three-pass,
online-statistics, one-pass and flash forms, a causal condition, grouped-query heads (the
device interface's kv_attention as first written: `for i, h` over [seq, heads, d]). Each
equals numpy written here on every local device with the attention schedule chosen there,
and on the launch-IR emulator for the CUDA (one thread a query, register-tiled products,
mma.sync, warpgroup MMAs), Metal, C++ and WebGPU schedules with several parameter choices;
a near miss (a loop no tensor indexes) is not attention and still equals numpy, and V
wider than Q and K is attention with two head_dims."""
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
from zynbook.compiler.passes import recognise
from zynbook.compiler.schedules import attention_wgmma as W
from zynbook.compiler.schedules.attention import PRODUCTS, Attention, AttentionParams
from zynbook.compiler.schedules.attention_mma import MMA
from zynbook.compiler.schedules.base import Choice
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target

SCHED = Attention()
RANGE = {"b": "batch", "h": "heads", "i": "seq_q", "d": "head_dim"}


def _row(layout, i):
    """The index of a row: the roles of `layout` ('b', 'h', 's'), the sequence's as `i`."""
    return ", ".join(i if r == "s" else r for r in layout)


def source(form, layout, loops, causal=False, bq=16, group=None):
    """Attention over tensors whose axes are `layout` then head_dim, its parallel loops
    over `loops` in that order (a 'd' among them: one output value a thread); K and V of
    head h / group where `group`."""
    q, o = _row(layout, "i"), _row(layout, "i")
    kv = _row(layout, "j").replace("h", f"h / {group}") if group else _row(layout, "j")
    header = ", ".join(f"{v} in 0..{RANGE[v]}" for v in loops)
    cond = "if j <= i:\n" if causal else ""
    pad = lambda lines, n: "\n".join(" " * n + x for x in lines)
    guard = lambda lines, n: pad(([cond.strip()] + ["    " + x for x in lines]) if causal else lines, n)
    score = f"dot(Q[{q}], K[{kv}]) / sqrt(head_dim)"
    if form == "three_pass":
        body = f"""        var m = -inf
        for j in 0..seq_k:
{guard([f"m = max(m, {score})"], 12)}
        var l = 0.0
        for j in 0..seq_k:
{guard([f"l += exp({score} - m)"], 12)}
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_k:
{guard([f"acc += exp({score} - m) * V[{kv}, d]"], 16)}
            out[{o}, d] = acc / l"""
    elif form == "online":
        body = f"""        var m = -inf
        var l = 0.0
        for j in 0..seq_k:
{guard([f"let s = {score}", "let mn = max(m, s)", "l = l * exp(m - mn) + exp(s - mn)", "m = mn"], 12)}
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_k:
{guard([f"acc += exp({score} - m) * V[{kv}, d]"], 16)}
            out[{o}, d] = acc / l"""
    elif form == "one_pass":
        inner = "d" not in loops
        step = [f"let s = {score}", "let mx = max(m, s)", "let a = exp(m - mx)", "let p = exp(s - mx)",
                "l = a * l + p", f"acc = acc * a + p * V[{kv}, d]", "m = mx"]
        lines = ["var m = -inf", "var l = 0.0", "var acc = 0.0", "for j in 0..seq_k:"]
        body = pad(lines, 8) + "\n" + guard(step, 12) + "\n" + pad([f"out[{o}, d] = acc / l"], 8)
        if inner:
            body = "        for d in 0..head_dim:\n" + "\n".join("    " + x for x in body.split("\n"))
    else:
        assert form == "flash" and not causal
        qt, kt = _row(layout, f"qb:qb+{bq}"), _row(layout, f"kb:kb+{bq}")
        if group:
            kt = kt.replace("h", f"h / {group}")
        header = ", ".join(f"qb in 0..seq_q step {bq}" if v == "i" else f"{v} in 0..{RANGE[v]}" for v in loops)
        body = f"""        var m = -inf
        var l = 0.0
        var o = zeros(min({bq}, seq_q - qb), head_dim)
        for kb in 0..seq_k step {bq}:
            let S = Q[{qt}] @ transpose(K[{kt}]) / sqrt(head_dim)
            let m_new = max(m, row_max(S))
            l = exp(m - m_new) * l + row_sum(exp(S - m_new))
            o = exp(m - m_new) * o + exp(S - m_new) @ V[{kt}]
            m = m_new
        out[{qt}] = o / l"""
    kind = "flash_attention" if form == "flash" else "attention"
    return f"let attn = compute(Q, K, V) {{\n    @kernel {kind}\n    for {header}:\n{body}\n}}\n"


def arrays(layout, seq_q, seq_k, d, batch=2, heads=3, kv_heads=None, dv=None, dtype=np.float32, seed=0):
    """Q, K, V random in the axes of `layout` (then head_dim; V's last `dv` where given)."""
    rng = np.random.default_rng(seed)
    size = lambda s, h: tuple({"b": batch, "h": h, "s": s}[r] for r in layout)
    kvh = kv_heads or heads
    return {"Q": rng.standard_normal(size(seq_q, heads) + (d,)).astype(dtype),
            "K": rng.standard_normal(size(seq_k, kvh) + (d,)).astype(dtype),
            "V": rng.standard_normal(size(seq_k, kvh) + (dv or d,)).astype(dtype)}


def numpy_attention(a, layout, causal=False, group=1):
    """softmax(Q K^T / sqrt(d), causal) V in f64, computed on [b, h, s, d] views."""
    full = [r for r in "bhs" if r not in layout] + list(layout)     # missing axes first, of 1

    def bhsd(x):
        x = np.asarray(x, np.float64).reshape((1,) * (3 - len(layout)) + x.shape)
        return np.moveaxis(x, [full.index(r) for r in "bhs"], [0, 1, 2])
    q, k, v = bhsd(a["Q"]), bhsd(a["K"]), bhsd(a["V"])
    heads = q.shape[1]
    k, v = k[:, np.arange(heads) // group], v[:, np.arange(heads) // group]
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    out = (w / w.sum(-1, keepdims=True)) @ v
    out = np.moveaxis(out, [0, 1, 2], [full.index(r) for r in "bhs"])
    return out.reshape(out.shape[3 - len(layout):])


# name: (form, tensor layout, loop order, causal)
CASES = {
    "three_pass_4d_hib_causal": ("three_pass", "bhs", "hib", True),
    "three_pass_4d_bshd_ibh": ("three_pass", "bsh", "ibh", False),
    "three_pass_3d_sh_ih": ("three_pass", "sh", "ih", True),
    "three_pass_3d_hs_ih": ("three_pass", "hs", "ih", False),
    "three_pass_2d_i": ("three_pass", "s", "i", True),
    "online_3d_sh_hi": ("online", "sh", "hi", False),
    "online_3d_bs_ib": ("online", "bs", "ib", True),
    "one_pass_3d_sh_ihd": ("one_pass", "sh", "ihd", False),
    "one_pass_4d_dib_h": ("one_pass", "bhs", "dibh", True),
    "one_pass_2d_inner_d": ("one_pass", "s", "i", False),
    "flash_3d_sh_ih": ("flash", "sh", "ih", False),
    "flash_4d_ihb": ("flash", "bhs", "ihb", False),
    "flash_2d": ("flash", "s", "i", False),
}


def case(name, seq=53, d=40, **kw):
    form, layout, loops, causal = CASES[name]
    a = arrays(layout, seq, seq, d, **kw)
    k, ins, sz, sc = lower_block(source(form, layout, loops, causal), a)
    return k, ins, sz, sc, numpy_attention(a, layout, causal)


@pytest.mark.parametrize("name", sorted(CASES))
def test_recognised_with_the_axes_it_has(name):
    form, layout, loops, _ = CASES[name]
    k, _, sz, _, _ = case(name, seq=7, d=8)
    p = recognise.attention(k)
    assert p, p
    # one axis beside the sequence is the head's (nothing tells a batch from a head then)
    roles = {p.batch_var: "b", p.head_var: "h"} if len(layout) == 3 else {p.head_var: "h"}
    assert set(roles) - {None} == set(layout) - {"s"}
    assert p.batch_var is None if len(layout) < 3 else p.batch_var == "b"
    axis = lambda r: next((layout.index(v) for v, x in roles.items() if x == r and v), None)
    assert p.q_axes == p.out_axes == p.k_axes == p.v_axes == (axis("b"), axis("h"), layout.index("s"))
    assert p.form == {"three_pass": "three-pass", "online": "online-stats", "one_pass": "one-pass",
                      "flash": "flash"}[form]


# ------------------------------------------------------------------ the local devices

DEVICES = wanted_devices()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_equals_numpy_on_device(device, name):
    k, ins, sz, sc, want = case(name, seq=53 if "flash" in name else 70)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)
    if device != "cpu":
        schedule = str((launch.geometry or {}).get("schedule", ""))
        assert "attention" in schedule.lower(), schedule


# ------------------------------------------------------------------ the emulator

TARGETS = {"cuda": (cuda_target(), 32), "metal": (metal_target(), 32), "cpp": (cpu_target(), 1),
           "webgpu": (webgpu_target(["shader-f16"]), 1),
           "webgpu_sg4": (webgpu_target(["shader-f16", "subgroup"], subgroup=4), 4)}


def _params(k, target, sz):
    """The default and the last of the schedule's space (lanes, tiles or blocks apart)."""
    space = [p for p in SCHED.space(k, target, sz) if not p.mma]
    return list(dict.fromkeys([space[0], space[-1]]))


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_equals_numpy_on_the_emulator(name, target):
    t, warp = TARGETS[target]
    k, ins, sz, sc, want = case(name, seq=53 if target in ("cuda", "metal") else 21,
                                d=40 if target != "webgpu_sg4" else 12, batch=1, heads=2)
    assert SCHED.why_not(k, t, sz) is None
    for params in _params(k, t, sz):
        prog = SCHED.build(k, t, sz, params)
        got = emulate_kernel(prog, k, ins, sz, sc, warp=warp).astype(np.float64)
        assert_within(got, want, 2e-4, 2e-5)
    prog = schedules.build(k, t, sz)
    assert "(attention: " in prog.schedule, prog.schedule


@pytest.mark.parametrize("name", ["three_pass_3d_sh_ih", "online_3d_sh_hi", "three_pass_2d_i"])
def test_register_tiled_products_on_the_emulator(name):
    k, ins, sz, sc, want = case(name, seq=70, d=32)
    prog = SCHED.build(k, cuda_target(), sz, PRODUCTS)
    assert "register-tiled" in prog.schedule
    assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64), want, 2e-4, 2e-5)


def _half(name, dtype, seq, d):
    form, layout, loops, causal = CASES[name]
    a = {n: _representable(x, dtype) for n, x in arrays(layout, seq, seq, d).items()}
    lk = lower_signatures(source(form, layout, loops, causal), {n: (dtype, x.ndim) for n, x in a.items()})
    k = lk.kernel
    sz = dims.solve(lk, {b.name: a[lk.labels[b.name]].shape for b in k.inputs}, {})
    return k, [a[lk.labels[b.name]] for b in k.inputs], sz, numpy_attention(a, layout, causal)


TC = [("three_pass_3d_sh_ih", "f16", 70, 48), ("online_3d_bs_ib", "bf16", 53, 64),
      ("one_pass_3d_sh_ihd", "f16", 53, 16), ("flash_3d_sh_ih", "bf16", 70, 32),
      ("three_pass_2d_i", "f16", 53, 64), ("three_pass_4d_bshd_ibh", "bf16", 70, 64)]


@pytest.mark.parametrize("name,dtype,seq,d", TC)
def test_tensor_cores_on_the_emulator(name, dtype, seq, d):
    """mma.sync (two block shapes) and the warpgroup kernel (default, TMA) on sm_90."""
    k, ins, sz, want = _half(name, dtype, seq, d)
    cuda = cuda_target()
    space = SCHED.space(k, cuda, sz)
    mma = [p for p in space if p.mma and not p.wgmma][:2]
    wg = [p for p in space if p.wgmma]
    chosen = mma + wg[:1] + [p for p in wg if p.tma][:1]
    assert len(chosen) == 4 and any(p.tma for p in chosen)
    for params in chosen:
        prog = SCHED.build(k, cuda, sz, params)
        got = emulate_kernel(prog, k, ins, sz, {}, warp=32).astype(np.float64)
        assert_within(got, want, 2e-2, 2e-2)


# ------------------------------------------------------------- grouped heads, kv_attention

KV_ATTENTION = """let y = compute(q, k, v) {
    @kernel attention
    for i in 0..seq_q, h in 0..heads:
        let g = h / group
        var m = -inf
        for j in 0..seq_k:
            if j <= start + i:
                m = max(m, dot(q[i, h], k[j, g]) * scale)
        var s = 0.0
        for j in 0..seq_k:
            if j <= start + i:
                s += exp(dot(q[i, h], k[j, g]) * scale - m)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..seq_k:
                if j <= start + i:
                    acc += exp(dot(q[i, h], k[j, g]) * scale - m) * v[j, g, d]
            out[i, h, d] = acc / s
}
y
"""


def _kv_case(seq_q=53, start=17, heads=4, group=2, d=40):
    rng = np.random.default_rng(7)
    seq_k = seq_q + start
    a = {"q": rng.standard_normal((seq_q, heads, d)).astype(np.float32),
         "k": rng.standard_normal((seq_k, heads // group, d)).astype(np.float32),
         "v": rng.standard_normal((seq_k, heads // group, d)).astype(np.float32)}
    k, ins, sz, sc = lower_block(KV_ATTENTION, a, {"scale": 0.3}, {"group": group, "start": start})
    q, kk, v = (np.asarray(a[n], np.float64) for n in "qkv")
    kk, v = kk[:, np.arange(heads) // group], v[:, np.arange(heads) // group]
    s = np.einsum("ihd,jhd->hij", q, kk) * 0.3
    s = np.where(np.arange(seq_k)[None, None, :] <= start + np.arange(seq_q)[None, :, None], s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return k, ins, sz, sc, np.einsum("hij,jhd->ihd", w / w.sum(-1, keepdims=True), v)


def test_kv_attention_query_head_order_is_attention():
    k, _, sz, _, _ = _kv_case()
    p = recognise.attention(k)
    assert p and p.form == "three-pass" and p.batch_var is None and p.kv_group is not None


@pytest.mark.parametrize("device", DEVICES)
def test_kv_attention_on_device(device):
    k, ins, sz, sc, want = _kv_case()
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    assert_within(np.asarray(dev.to_host(got), np.float64), want, 2e-4, 2e-5)
    if device != "cpu":
        assert "attention" in str((launch.geometry or {}).get("schedule", "")).lower()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_kv_attention_on_the_emulator(target):
    t, warp = TARGETS[target]
    k, ins, sz, sc, want = _kv_case(seq_q=21 if target.startswith("webgpu") else 53)
    for params in _params(k, t, sz):
        got = emulate_kernel(SCHED.build(k, t, sz, params), k, ins, sz, sc, warp=warp)
        assert_within(got.astype(np.float64), want, 2e-4, 2e-5)


# ------------------------------------------------------------------ near misses


def test_a_loop_no_tensor_indexes_is_not_attention():
    """`for i, h, r` with r indexing nothing but the output: each r stores the same row;
    not the attention's loop nest (the schedule would leave out r's rows)."""
    text = source("three_pass", "sh", "ih").replace("for i in 0..seq_q, h in 0..heads:",
                                                    "for i in 0..seq_q, h in 0..heads, r in 0..reps:")
    text = text.replace("out[i, h, d]", "out[i, h, r, d]")
    a = arrays("sh", 9, 9, 8)
    k, ins, sz, sc = lower_block(text, a, {}, {"reps": 2})
    assert not recognise.attention(k)
    prog = schedules.build(k, cuda_target(), sz)
    assert "(attention: " not in prog.schedule
    want = numpy_attention(a, "sh")
    got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
    for r in range(2):
        assert_within(got[:, :, r], want, 2e-4, 2e-5)


@pytest.mark.parametrize("form", ["three_pass", "flash"])
def test_v_wider_than_head_dim_runs_attention_and_equals_numpy(form):
    """V's rows 24 wide over Q's and K's 8: the attention schedule scores over 8 and
    accumulates over 24 (tests/test_attention_dv.py)."""
    text = source(form, "sh", "ih", bq=8).replace("for d in 0..head_dim:", "for d in 0..dv:")
    text = text.replace("/ sqrt(head_dim)", "/ sqrt(8.0)")
    if form == "flash":
        text = text.replace("zeros(min(8, seq_q - qb), head_dim)", "zeros(min(8, seq_q - qb), dv)")
    a = arrays("sh", 19, 19, 8, dv=24)
    k, ins, sz, sc = lower_block(text, a)
    p = recognise.attention(k)
    shape_note = SCHED.why_not(k, cuda_target(), sz)
    assert p and shape_note is None, shape_note
    q, kk, v = (np.asarray(a[n], np.float64) for n in ("Q", "K", "V"))
    s = np.einsum("ihd,jhd->hij", q, kk) / np.sqrt(8)
    w = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("hij,jhd->ihd", w / w.sum(-1, keepdims=True), v)
    for t, warp in (TARGETS["cuda"], TARGETS["cpp"]):
        prog = schedules.build(k, t, sz)
        assert "(attention: " in prog.schedule, prog.schedule
        assert_within(emulate_kernel(prog, k, ins, sz, sc, warp=warp).astype(np.float64), want, 2e-4, 2e-5)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_source_compiles_with_nvcc():
    """The CUDA C of kv_attention's nest (one thread a query) and of a 3-D f16 attention
    (mma.sync on sm_80, warpgroup MMAs on sm_90), as the CUDA printer renders them."""
    k, _, sz, _, _ = _kv_case()
    sources = [(render_cuda(k, sz).source, "sm_80")]
    k, _, sz, _ = _half("three_pass_3d_sh_ih", "f16", 70, 64)
    sources += [(render_cuda(k, sz, options={"params": Choice("attention", p)}).source, arch)
                for p, arch in ((MMA, "sm_80"), (W.default(64), "sm_90a"))]
    flags = lambda arch: ("-gencode", f"arch=compute_{arch[3:]},code={arch}", "-cubin")
    runs = [(arch, nvcc_runs.queue(src, flags(arch))) for src, arch in sources]
    for arch, fut in runs:
        res = fut.result()
        assert res.returncode == 0, (arch, res.stderr[-3000:])
