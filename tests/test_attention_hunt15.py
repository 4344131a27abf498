"""One-pass attention whose output row is stored through a slice of out's whole last axis
(`out[b, h, i, 0:E] = acc / den`, `out[b, h, i, :] = acc / den`) is the row form
`out[b, h, i] = acc / den`: the same attention pattern, run on the attention schedule of
every device, the CUDA kernels (the launch-IR emulator) and the Metal emulator, against
numpy that runs the loops as written. A slice that is not the whole row (an offset one, a
part of V's row) keeps the generic schedule and numpy's answer; a slice shorter than the
row stored into it is a shape error at the store.

An admitted key whose softmax weight is 0 (a score far below the others) and whose value is
inf adds 0 * inf, NaN, as numpy's weights @ V and the loops do, on the register-tiled,
mma.sync and wgmma kernels (emulated), the Metal emulator and every device, beside keys the
mask leaves out, whose NaN and inf values add nothing."""
from __future__ import annotations

import numpy as np
import pytest

import attention_sources as A
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, raises, wanted_devices
from test_attention_hunt13 import CUDA, SCHED, _kernels, weighed
from test_attention_hunt7 import check, dots, qkv
from test_attention_row_tiles import case, flash_on_the_metal_emulator, loops
from zynbook.backends.registry import get_device
from zynbook.compiler.passes import recognise
from zynbook.compiler.schedules.attention import PRODUCTS

DEVICES = wanted_devices()
ROW = "out[b, h, i] = acc / den"
SLICES = {"span": "out[b, h, i, 0:E] = acc / den", "colon": "out[b, h, i, :] = acc / den"}


def sliced(store, cond="causal", scale="const", dtype=np.float32, **kw):
    """case() of the row form with its store written as `store`."""
    src, a, sc, want = case(cond, scale, dtype, **kw)
    assert ROW in src
    return src.replace(ROW, store), a, sc, want


def launch(device, src, a, sc, sizes=None):
    """(result as float64, schedule) of `src` on `device`, with sizes given at the launch."""
    k, ins, sz, sc = lower_block(src, a, sc, sizes)
    dev = get_device(device)
    got, info = dev.launch(k, ins, sz, sc)
    return np.asarray(dev.to_host(got), np.float64), str((info.geometry or {}).get("schedule", ""))


@pytest.mark.parametrize("kind", SLICES)
@pytest.mark.parametrize("cond,scale", [("causal", "const"), ("bool", "scalar"), ("none", "sqrt")])
def test_a_whole_row_slice_is_the_row_form(kind, cond, scale):
    src, a, sc, _ = case(cond, scale)
    row = recognise.attention(lower_block(src, a, sc)[0])
    assert row and row.form == "one-pass", row
    got = recognise.attention(lower_block(src.replace(ROW, SLICES[kind]), a, sc)[0])
    assert got == row, got


def test_a_whole_row_slice_of_a_number_is_the_row_form():
    """A head_dim written as a number (zeros(20), out[b, h, i, 0:20])."""
    src, a, sc, _ = case("bool", "const", D=20)
    src = src.replace("zeros(E)", "zeros(20)")
    row = recognise.attention(lower_block(src, a, sc)[0])
    got = recognise.attention(lower_block(src.replace(ROW, "out[b, h, i, 0:20] = acc / den"), a, sc)[0])
    assert row and got == row and recognise.canon(got.head_dim) == ("C", 20.0), got


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("kind,cond,scale,order", [("span", "causal", "sqrt", 1), ("colon", "bool", "scalar", 0),
                                                   ("colon", "none", "const", 1)])
def test_whole_row_slices_on_every_device(device, dtype, kind, cond, scale, order):
    src, a, sc, want = sliced(SLICES[kind], cond, scale, dtype, order=order)
    check(device, src, a, want, sc, tol=2e-4 if dtype == np.float32 else 2e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("kind,cond", [("span", "causal"), ("colon", "bool")])
def test_whole_row_slices_on_the_cuda_kernels(kind, cond, dtype):
    src, a, sc, want = sliced(SLICES[kind], cond, "const", dtype, B=1, H=2, S=40, D=16, seed=3)
    k, ins, sz, sc = lower_block(src, a, sc)
    tol = 2e-4 if dtype == np.float32 else 2e-2
    for name, p in _kernels(k, sz, dtype):
        got = emulate_kernel(SCHED.build(k, CUDA, sz, p), k, ins, sz, sc, warp=32).astype(np.float64)
        assert (np.isnan(got) == np.isnan(want)).all(), name
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("kind", SLICES)
def test_whole_row_slices_take_the_attention_schedule_of_cuda_msl_cpp_and_run_on_the_metal_emulator(kind):
    from zynbook.compiler.codegen import c as c_render
    from zynbook.compiler.codegen import cuda
    src, a, sc, want = sliced(SLICES[kind], "bool", "sqrt", S=45, D=24)
    k, ins, sz, sc = lower_block(src, a, sc)
    assert "attention" in cuda.render_cuda(k, sz).schedule
    assert "attention" in c_render.render_program(k, sz).schedule
    flash_on_the_metal_emulator(k, ins, sz, sc, want)


# ------------------------------------------------------------ near misses

@pytest.mark.parametrize("device", DEVICES)
def test_an_offset_slice_keeps_the_loops_answer(device):
    """out[b, h, i, 1:E + 1]: out is one column wider, its column 0 never written (0)."""
    src, a, sc, want = sliced("out[b, h, i, 1:E + 1] = acc / den")
    assert not recognise.attention(lower_block(src, a, sc)[0])
    got, schedule = launch(device, src, a, sc)
    assert "attention" not in schedule.lower(), schedule
    assert_equals_numpy(got, np.concatenate([np.zeros(want.shape[:-1] + (1,)), want], -1), 2e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("part", ["0:E - 1", "1:E"])
def test_a_part_of_the_value_row_keeps_the_loops_answer(device, part):
    """acc = zeros(E - 1) over v[b, h, j, 0:E - 1] (or 1:E), stored whole into
    out[b, h, i, 0:E - 1]: attention over some of V's columns, which the pattern (V's whole
    row) does not name; the loops' answer over those columns."""
    src, a, sc, _ = case("causal", "const", D=20)
    src = src.replace("zeros(E)", "zeros(E - 1)").replace("w * v[b, h, j]", f"w * v[b, h, j, {part}]")
    src = src.replace(ROW, "out[b, h, i, 0:E - 1] = acc / den")
    cols = slice(0, 19) if part == "0:E - 1" else slice(1, 20)
    s = dots(a["q"], a["k"]) * 0.125
    ok = np.broadcast_to(np.tril(np.ones(s.shape[-2:], bool)), s.shape)
    want = loops(s, ok, a["v"][..., cols].astype(np.float64))
    assert not recognise.attention(lower_block(src, a, sc, {"E": 20})[0])
    got, schedule = launch(device, src, a, sc, {"E": 20})
    assert "attention" not in schedule.lower(), schedule
    assert_equals_numpy(got, want, 2e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_a_slice_shorter_than_the_row_is_a_shape_error(device):
    """out[b, h, i, 0:E - 1] = acc with acc of E: numpy's out[..., 0:E - 1] = row refuses it too."""
    src, a, sc, _ = sliced("out[b, h, i, 0:E - 1] = acc / den")
    err = raises("shape", src, 16, 9, device=device, **a)
    assert "19 and 20" in str(err), err


# ------------------------------------------------------------ a weight of 0 times inf

def _zero_weight_case(form, mask, dtype, S=40, D=16, seed=9):
    """Q, K, V (and a bool mask `allowed`) where admitted key 3 of head 1 scores about -3000
    below the others (its weight exp(-3000) is 0 in float64 too) and holds inf and -inf in
    columns 5 and 2: numpy's 0 * inf makes those columns NaN in every query that admits it.
    Under the bool mask keys 11 and 12, left out of every query, hold NaN and inf in the
    same columns, and key 3 is left out of every third query: those add nothing."""
    a = qkv(seed, 1, 2, S, D, dtype)
    a["Q"] = (np.abs(a["Q"]) + 0.5).astype(dtype)
    a["K"][0, 1, 3] = -1000
    a["V"][0, 1, 3, 5], a["V"][0, 1, 3, 2] = np.inf, -np.inf
    i, j = np.arange(S)[:, None], np.arange(S)[None]
    if mask == "causal":
        ok = j <= i
    else:
        ok = np.random.default_rng(seed).random((S, S)) < 0.6
        ok[:, 0], ok[::3, 3], ok[:, 11:13] = True, False, False
        a["V"][0, 1, 11, 5], a["V"][0, 1, 12, 2] = np.nan, np.inf
        a["allowed"] = ok
    s = dots(a["Q"], a["K"]) * 0.125
    ok = np.broadcast_to(ok, s.shape)
    want = weighed(s, ok, a["V"].astype(np.float64))
    # the NaN columns are those of the queries that admit key 3, and no others
    nan = np.zeros(want.shape, bool)
    nan[0, 1, :, 5] = nan[0, 1, :, 2] = ok[0, 1, :, 3]
    assert (np.isnan(want) == nan).all() and nan.any() and not nan.all()
    return getattr(A, form)(mask, "const"), a, want


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("form,mask", [("three_pass", "bool"), ("one_pass", "bool"), ("online_stats", "causal")])
def test_zero_weight_times_inf_on_the_cuda_kernels(form, mask, dtype):
    """The register-tiled products (and their fallback), mma.sync and wgmma kernels: an
    admitted key weighed 0 adds 0 * inf, NaN, as numpy; a key the mask leaves out adds
    nothing."""
    src, a, want = _zero_weight_case(form, mask, dtype)
    k, ins, sz, sc = lower_block(src, a)
    tol = 2e-4 if dtype == np.float32 else 2e-2
    for name, p in _kernels(k, sz, dtype):
        prog = SCHED.build(k, CUDA, sz, p)
        progs = [prog, prog.fallback] if p == PRODUCTS else [prog]
        for pr in progs:
            got = emulate_kernel(pr, k, ins, sz, sc, warp=32).astype(np.float64)
            assert (np.isnan(got) == np.isnan(want)).all(), (name, np.argwhere(np.isnan(got) != np.isnan(want))[:4])
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("form,mask", [("three_pass", "bool"), ("one_pass", "causal")])
def test_zero_weight_times_inf_on_every_device(device, dtype, form, mask):
    src, a, want = _zero_weight_case(form, mask, dtype, S=37, D=12)
    check(device, src, a, want, tol=2e-4 if dtype == np.float32 else 2e-2)


@pytest.mark.parametrize("form", ["three_pass", "one_pass"])
def test_zero_weight_times_inf_on_the_metal_emulator(form):
    src, a, want = _zero_weight_case(form, "bool", np.float32)
    k, ins, sz, sc = lower_block(src, a)
    flash_on_the_metal_emulator(k, ins, sz, sc, want)
