"""Grouped-query attention (K and V rows of head h / group, the heads sharing them in groups)
recognised by structure in every form, and run by every attention schedule, on the launch-IR
emulator against numpy written here: the warpgroup kernel (sm_90), the mma.sync kernel
(sm_80), the one-thread-per-query kernel in f32 for CUDA, WebGPU (sizes not baked in) and
the CPU, groups of 1, 2, 3 and 8 heads with head counts they do not divide, K and V holding
more heads than the groups read; forms that are not grouped attention (V of another group,
a divided batch) fall to the generic schedule and still equal the reference executor; and
the printed code on every device present (cpu:native, the Vulkan adapter, a GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import attention_sources as A
from compute_testing import emulate_kernel, lower_signatures
from cuda_cir_kernels import _representable
from tolerances import assert_within
from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import dims, schedules
from zynbook.compiler.launch.text import format_program
from zynbook.compiler.passes import recognise
from zynbook.compiler.targets import cpu_target, cuda_target, webgpu_target

TARGETS = {"cuda_sm90": cuda_target(), "cuda_sm80": cuda_target((8, 0)),
           "webgpu": webgpu_target(["shader-f16"]), "cpu": cpu_target()}


def _lower(text, dtype, heads, kv_heads, sq, d, group, batch=1, seed=0):
    """(kernel, inputs, sizes, arrays) of `text` over random tensors of `dtype`."""
    rng = np.random.default_rng(seed)
    arrays = {"Q": _representable(rng.standard_normal((batch, heads, sq, d)), dtype),
              "K": _representable(rng.standard_normal((batch, kv_heads, sq, d)), dtype),
              "V": _representable(rng.standard_normal((batch, kv_heads, sq, d)), dtype)}
    lk = lower_signatures(text, {n: (dtype, 4) for n in arrays}, {}, "kernel")
    k = lk.kernel
    sz = dims.solve(lk, {b.name: arrays[lk.labels[b.name]].shape for b in k.inputs}, {})
    return k, [arrays[lk.labels[b.name]] for b in k.inputs], sz, arrays


def numpy_gqa(arrays, group, causal):
    """softmax(Q K^T / sqrt(d)) V with query head h reading K and V head h // group."""
    q, k, v = (np.asarray(arrays[n], np.float64) for n in "QKV")
    heads = q.shape[1]
    k, v = (x[:, np.arange(heads) // group] for x in (k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


FORMS = {"three_pass_causal": (A.three_pass("causal"), True), "online": (A.online_stats(), False),
         "one_pass": (A.one_pass(), False), "flash_32": (A.flash(32), False)}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_recognised_in_every_form(form):
    text, _ = FORMS[form]
    k, _, sz, _ = _lower(A.grouped(text, "2"), "f32", 4, 2, 40, 16, 2)
    p = recognise.attention(k)
    assert p and recognise.launch_value(p.kv_group, sz) == 2
    plain, _, _, _ = _lower(text, "f32", 4, 4, 40, 16, 2)
    assert recognise.attention(plain).kv_group is None


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("form,dtype,heads,kv_heads,group", [
    ("three_pass_causal", "f16", 8, 2, 4), ("flash_32", "bf16", 6, 2, 3), ("online", "f16", 5, 3, 2),
    ("three_pass_causal", "f32", 3, 1, 8), ("one_pass", "f16", 4, 4, 1), ("flash_32", "f16", 4, 3, 2)])
def test_every_schedule_equals_numpy(target, form, dtype, heads, kv_heads, group):
    """Head counts the group does not divide (5 over groups of 2, 3 over 8), and K and V
    of more heads than the groups read (3 where 2 are)."""
    text, causal = FORMS[form]
    t = TARGETS[target]
    if target in ("webgpu", "cpu"):
        dtype = "f32"
    k, ins, sz, arrays = _lower(A.grouped(text, str(group)), dtype, heads, kv_heads, 37, 16, group)
    prog = schedules.build(k, t, sz, only="attention")
    assert prog is not None and "attention" in prog.schedule
    got = emulate_kernel(prog, k, ins, sz, {}, warp=t.warp if t.warp > 1 else 32).astype(np.float64)
    tol = 2e-2 if dtype != "f32" else 1e-4
    assert_within(got, numpy_gqa(arrays, group, causal), tol, tol)


def test_the_head_stride_of_the_warpgroup_kernel():
    """The tensor-core kernels read K's and V's rows of head h / group (the emitted IR)."""
    k, _, sz, _ = _lower(A.grouped(A.three_pass("causal"), "4"), "f16", 8, 2, 64, 64, 4)
    text = format_program(schedules.build(k, cuda_target(), sz, only="attention"))
    assert "wgmma" in text and "_h / 4" in text.replace("(", "").replace(")", "")


@pytest.mark.parametrize("text,why", [
    (A.grouped(A.three_pass("none"), "2").replace("V[b, h / 2,", "V[b, h / 3,"), "the value's head"),
    # (one divided index is a grouped head axis, whichever it is: two are not attention)
    (A.three_pass("none").replace("K[b, h,", "K[b / 2, h / 2,"), "divides another index"),
])
def test_not_grouped_attention_runs_generic(text, why):
    """V of another group than K, or K dividing both its batch and head: not attention, so the generic
    schedule runs it, equal to the reference executor."""
    k, ins, sz, _ = _lower(text, "f32", 4, 4, 12, 8, 2, batch=2)
    p = recognise.attention(k)
    assert not p and why in p.note("attention")
    prog = schedules.build(k, cuda_target(), sz)
    assert "attention" not in prog.schedule.split(":")[0]
    got = emulate_kernel(prog, k, ins, sz, {}, warp=32)
    assert_within(np.asarray(got, np.float64), np.asarray(run_kernel(k, ins, sz, {}), np.float64), 1e-5, 1e-5)


# ------------------------------------------------- on every device present (the printed code)

def _devices():
    from test_attention_variants import DEVICES
    return DEVICES


@pytest.mark.parametrize("form,dtype", [("three_pass_causal", "f32"), ("flash_32", "f32"),
                                        ("three_pass_causal", "f16"), ("online", "f16")])
def test_every_device_equals_numpy(form, dtype):
    """The printed C++, WGSL and CUDA (cpu:native, the Vulkan adapter, a GPU: those present)
    of grouped-query attention, 6 query heads over 2 K/V heads of 33 positions."""
    from zynbook.backends.registry import get_device
    devices = _devices()
    if not devices:
        pytest.skip("no device here but the reference")
    text, causal = FORMS[form]
    k, ins, sz, arrays = _lower(A.grouped(text, "3"), dtype, 6, 2, 33, 16, 3, seed=5)
    want = numpy_gqa(arrays, 3, causal)
    for device in devices:
        dev = get_device(device)
        got, launch = dev.launch(k, ins, sz, {})
        assert "attention:" in launch.geometry["schedule"], (device, launch.geometry["schedule"])
        tol = 1e-4 if dtype == "f32" else 2e-2
        assert_within(np.asarray(dev.to_host(got), np.float64), want, tol, tol)
