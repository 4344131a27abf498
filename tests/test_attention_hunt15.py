"""One-pass attention whose output row is stored through a slice of out's whole last axis
(`out[b, h, i, 0:E] = acc / den`, `out[b, h, i, :] = acc / den`) is the row form
`out[b, h, i] = acc / den`: the same attention pattern, run on the attention schedule of
every device, the CUDA kernels (the launch-IR emulator) and the Metal emulator, against
numpy that runs the loops as written. A slice that is not the whole row (an offset one, a
part of V's row) keeps the generic schedule and numpy's answer; a slice shorter than the
row stored into it is a shape error at the store."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, raises, wanted_devices
from test_attention_hunt13 import CUDA, SCHED, _kernels
from test_attention_hunt7 import check, dots
from test_attention_row_tiles import case, loops
from zynbook.backends.registry import get_device
from zynbook.compiler.passes import recognise

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
    from zynbook.compiler import cir
    from zynbook.compiler.codegen import c as c_render
    from zynbook.compiler.codegen import cuda, msl
    src, a, sc, want = sliced(SLICES[kind], "bool", "sqrt", S=45, D=24)
    k, ins, sz, sc = lower_block(src, a, sc)
    assert "attention" in cuda.render_cuda(k, sz).schedule
    assert "attention" in c_render.render_program(k, sz).schedule
    prog = msl.render_program(k, sz)
    assert msl.schedule_name(prog) == "flash"
    try:
        from metal_emu import emulator as emu
    except Exception:                      # noqa: BLE001
        pytest.skip("no Metal emulator")
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler for the Metal emulator")
    emu.build(prog)
    got = np.asarray(emu.run(prog, ins, cir.output_shape(k, sz), sc), np.float64)
    assert (np.isnan(got) == np.isnan(want)).all()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)


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
