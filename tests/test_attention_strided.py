"""Attention reading Q, K and V where strided views of them lie (cir.Buffer.strides): the
heads split from one packed QKV projection, [batch, seq, 3, heads, head_dim] (with and without
padding after each head), read by every attention form of the CUDA target (per-query
threads, register-tiled products, mma.sync and warpgroup MMAs) on the launch-IR emulator,
against numpy written in tests/test_attention_mma.py; the CUDA device compiles such a plan for
a view it is handed and takes the view without copying it (the CuPy stand-in)."""
from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import attention_sources as A  # noqa: E402
from compute_testing import emulate_kernel  # noqa: E402
from test_attention_mma import CUDA, SCHED, TOL, _lower, answer  # noqa: E402
from tolerances import assert_within  # noqa: E402

from zynbook.backends.cuda.device import view_strides  # noqa: E402
from zynbook.compiler.schedules.attention import PRODUCTS, match  # noqa: E402
from zynbook.compiler.schedules import attention_wgmma as W  # noqa: E402


def packed(kernel, ins, sizes, pad: int):
    """(the kernel reading Q, K and V as views of one packed array, their flat buffers from
    each view's first element): [batch, seq, 3, heads, head_dim + pad], Q, K, V at 0, 1, 2."""
    shape, why = match(kernel, CUDA, sizes)
    assert why is None
    named = {b.name: a for b, a in zip(kernel.inputs, ins)}
    roles = {shape.bufs[r].name: r for r in ("q", "k", "v")}
    q = named[shape.bufs["q"].name]
    b, s, h, d = q.shape                  # [batch, seq, heads, head_dim] (bshd)
    base = np.full((b, s, 3, h, d + pad), np.nan, q.dtype)     # padding never read
    flat, inputs = base.reshape(-1), []
    for buf in kernel.inputs:
        if buf.name not in roles:
            inputs.append(buf)
            continue
        part = "qkv".index(roles[buf.name])
        view = base[:, :, part, :, :d]
        view[...] = named[buf.name]
        strides = view_strides(view.shape, view.strides, view.itemsize)
        contiguous = np.zeros(view.shape, view.dtype)
        assert strides is not None and strides != tuple(np.array(contiguous.strides) // view.itemsize)
        inputs.append(dataclasses.replace(buf, strides=strides))
        offset = view.__array_interface__["data"][0] - flat.__array_interface__["data"][0]
        named[buf.name] = flat[offset // flat.itemsize:]        # from the view's first element
    kernel = dataclasses.replace(kernel, inputs=tuple(inputs))
    return kernel, [named[b.name] for b in kernel.inputs]


def _default(k, sz):
    return SCHED.default(k, CUDA, sz)


def _mma(k, sz):
    return next(p for p in SCHED.space(k, CUDA, sz) if p.mma and not p.wgmma)


CHOICES = {
    "default": _default,
    "mma_sync": _mma,
    "wgmma": lambda k, sz: W.default(32),           # the head_dim of the cases below
}


@pytest.mark.parametrize("pad", [0, 8])
@pytest.mark.parametrize("form", sorted(CHOICES))
@pytest.mark.parametrize("text,dtype,seq", [(A.FLASH_BSHD, "f16", 70), (A.ATTENTION_BSHD, "bf16", 45)],
                         ids=["flash_f16", "causal_bf16"])
def test_views_of_a_packed_projection_equal_numpy(text, dtype, seq, form, pad):
    k, ins, sz, sc = _lower(text, dtype, seq, seq, 32, batch=2, heads=3, bshd=True)
    want = answer(text, k, ins, sz)
    params = CHOICES[form](k, sz)
    strided, flat = packed(k, ins, sz, pad)
    prog = SCHED.build(strided, CUDA, sz, params)
    assert set(prog.strided_ok) == {b.name for b in strided.inputs if b.strides is not None}
    got = emulate_kernel(prog, strided, flat, sz, sc, warp=32).astype(np.float64)
    assert (np.isnan(got) == np.isnan(want)).all()
    ok = ~np.isnan(want)
    assert_within(got[ok], want[ok], TOL, TOL)


def test_f32_per_query_threads_and_products():
    """f32 Q, K, V: the per-query form and the register-tiled products (16-byte rows)."""
    k, ins, sz, sc = _lower(A.FLASH_BSHD, "f32", 33, 33, 16, batch=1, heads=2, bshd=True)
    want = answer(A.FLASH_BSHD, k, ins, sz)
    strided, flat = packed(k, ins, sz, 4)
    for params in (SCHED.default(strided, CUDA, sz), PRODUCTS):
        prog = SCHED.build(strided, CUDA, sz, params)
        got = emulate_kernel(prog, strided, flat, sz, sc, warp=32).astype(np.float64)
        assert_within(got, want, 2e-4, 2e-5)


def test_which_views_a_kernel_may_read_in_place():
    """The last axis contiguous, every other stride a whole number of 16 bytes; an axis of
    one element strides 0."""
    base = np.zeros((2, 5, 3, 4, 8), np.float16)
    v = base[:, :, 1]
    assert view_strides(v.shape, v.strides, 2) == (480, 96, 8, 1)
    assert view_strides(base[:, :, :, :, :3].shape, base[:, :, :, :, :3].strides, 2) is not None
    odd = np.zeros((2, 5, 3, 4, 7), np.float16)[:, :, 1]      # rows of 14 bytes
    assert view_strides(odd.shape, odd.strides, 2) is None
    t = base[:, :, 1].transpose(0, 1, 3, 2)                   # head_dim not contiguous
    assert view_strides(t.shape, t.strides, 2) is None
    one = base[:1, :, 1]
    assert view_strides(one.shape, one.strides, 2)[0] == 0
