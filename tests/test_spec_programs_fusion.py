"""Programs of chained compute blocks written from the fusion section of the language
reference, each run on every device present (the CPU reference included), fused and with
fusion turned off, and compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices
from zynbook.errors import ZynMLError

DEVICES = wanted_devices()

RNG = np.random.default_rng(1618)


def _session(device: str, fuse: bool) -> zynbook.Session:
    session = zynbook.Session(device)
    session.fuse = fuse
    return session


GATHER_CELL = """pipeline gather(x: tensor[n], idx: tensor[n]):
    return compute(x, idx) {
        @kernel elementwise
        for i in 0..n: out[i] = x[int(idx[i])]
    }
"""
DOUBLE_CELL = """// a cell of its own
// whose block sits below
// the gather's line
pipeline double(x: tensor[n]):
    return compute(x) {
        @kernel elementwise
        for i in 0..n: out[i] = x[i] * 2.0
    }
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("chain", ["x |> gather(idx) |> double()\n",
                                   "x |> double() |> gather(idx) |> double()\n"])
def test_an_error_in_a_fused_chain_shows_the_line_of_the_cell_it_is_written_in(device, fuse,
                                                                                chain):
    # the gather (the block the fused kernel is built on, as the epilogue's producer or
    # the inlined block's consumer) fails; the kernel's result is the other cell's block,
    # whose text at that line is not the gather's
    x = RNG.standard_normal(8).astype(np.float32)
    idx = np.arange(8, dtype=np.int32)[::-1].copy()
    s = _session(device, fuse)
    s.run(GATHER_CELL)
    s.run(DOUBLE_CELL)
    bad = idx.copy()
    bad[3] = 50
    with pytest.raises(ZynMLError) as info:
        s.run(chain, x=x, idx=bad)
    assert info.value.kind == "runtime" and info.value.span.line == 4
    assert "out[i] = x[int(idx[i])]" in info.value.render()
    want = x[idx] * 2 * (2 if chain.count("double") == 2 else 1)
    np.testing.assert_allclose(np.asarray(s.run(chain, x=x, idx=idx).numpy()), want)


SCALE_THEN_HOST = """pipeline scaled(x: tensor[m, n], k: float):
    let h = compute(x) {
        @kernel elementwise
        for i in 0..m, j in 0..n: out[i, j] = x[i, j] * 2.0
    }
    return 1.5 - h * k + r
scaled(x, k)
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("number", [np.float64, np.float32, float])
def test_a_numpy_number_bound_as_an_input_is_a_number_in_host_arithmetic(device, fuse,
                                                                         number):
    # a number is weak next to a tensor, as numpy takes a Python float: the f32 result of
    # a block times k stays f32 (np.float64, a float subclass, was kept a numpy scalar, and
    # numpy widened the unfused product to f64 while the recorded one stayed f32)
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    r = RNG.standard_normal((5, 7)).astype(np.float32)
    got = _session(device, fuse).run(SCALE_THEN_HOST, x=x, r=r, k=number(0.1))
    assert got.dtype == "f32"
    want = np.float32(1.5) - (x * np.float32(2)) * np.float32(0.1) + r
    np.testing.assert_allclose(np.asarray(got.numpy()), want, rtol=1e-6, atol=1e-6)


REPEATS = """pipeline p(x: tensor[n], k: int):
    let h = compute(x) {
        for t in 0..k:
            for i in 0..n:
                out[i] = x[i] * 2.0
    }
    return compute(h) {
        @kernel elementwise
        for i in 0..n: out[i] = h[i] + 1.0
    }
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fuse", [True, False])
def test_a_store_under_a_loop_that_may_not_run_leaves_zeros(device, fuse):
    # with k = 0 no iteration stores, so h is zeros ("positions of out that no iteration
    # writes are 0"): the epilogue, applied at the store, was never applied (0 instead of
    # 1), and cpu:native, which skips zeroing an output every element of which is stored,
    # left what its memory held; the same session runs k = 1, 0, 2, 0 in turn
    x = RNG.standard_normal(37).astype(np.float32)
    s = _session(device, fuse)
    s.run(REPEATS)
    for k in (1, 0, 2, 0):
        got = s.run("p(x, k)\n", x=x, k=k)
        want = x * 2 + 1 if k else np.ones_like(x)
        np.testing.assert_allclose(np.asarray(got.numpy()), want, rtol=1e-6)
        got = s.run("let h = compute(x) {\n    for t in 0..k:\n        for i in 0..n:\n"
                    "            out[i] = x[i] * 2.0\n}\nh\n", x=x, k=k)
        np.testing.assert_allclose(np.asarray(got.numpy()), x * 2 if k else 0 * x)


HELD = """pipeline scale(x: tensor[n], k: float):
    return compute(x) {
        @kernel elementwise
        for i in 0..n: out[i] = x[i] * k
    }
pipeline pair(h: tensor[n]):
    return [h, h |> scale(3.0)]
pipeline overwrite(t: tensor[n]):
    t[0] = 100.0
    return t |> scale(1.0)
let r = [pair(x |> scale(2.0)), overwrite(x)]
r
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fuse", [True, False])
def test_a_fused_away_result_held_by_a_list_being_built_reads_its_inputs_before_they_change(
        device, fuse):
    # pair's h is fused into h * 3.0 and held only by the list the statement is building,
    # not by a name; the element assignment that follows changes x, so h is computed
    # before it (it was computed after, from the changed x: 200 for 2)
    x = RNG.standard_normal(9).astype(np.float32)
    (h, g), t = _session(device, fuse).run(HELD, x=x.copy())
    changed = np.concatenate([[100.0], x[1:]]).astype(np.float32)
    np.testing.assert_allclose(np.asarray(h.numpy()), x * 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g.numpy()), x * 2 * 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(t.numpy()), changed, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fuse", [True, False])
def test_a_half_result_is_rounded_where_it_was_stored_though_fused(device, fuse):
    """An f16 result is rounded to f16 where its block stores it: x * 1000 overflows to inf
    whether or not the next block is fused with it (fused, the devices computed it in f32
    and never rounded it, so 100 came back as 100)."""
    x = np.float16([100, 1, -70, 0.5, 3.3333, 65.5])
    with np.errstate(over="ignore"):
        want = (x * np.float16(1000)).astype(np.float32) / 1000
    src = """pipeline p(x: tensor[n]):
    let h = compute(x) {
        @kernel elementwise
        for i in 0..n: out[i] = x[i] * 1000.0
    }
    return compute(h) {
        @kernel elementwise
        for i in 0..n: out[i] = f32(h[i]) / 1000.0
    }
p(x)
"""
    got = np.asarray(_session(device, fuse).run(src, x=x), np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)
