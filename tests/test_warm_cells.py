"""Warm one-block cells (runtime/interp.py, `_WarmCell`): a cell that is one compute block,
run again with everything its launch was decided from unchanged, launches the same plan
without interpreting its statements; any change to that (an input's shape, dtype or
placement, a size the program gives, the session's device or fusion setting, the magic
line's annotations) runs the statements again. Every answer is checked against numpy, and
a warm run answers (value, shown) and fails as a cold run of the same cell does."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cupy_standin
import zynbook
from kernel_sources import FIRST, SCALE
from zynbook.errors import ZynMLError
from zynbook.runtime.interp import Interpreter


BARE = """compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * a + 1.0
}"""

UNSHOWN = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * a + 1.0
}"""


@pytest.fixture(params=["cpu", "cuda:0"])
def device(request, monkeypatch, tmp_path):
    """A device id: the CPU, or `cuda:0` on the CuPy stand-in."""
    if request.param == "cuda:0":
        cupy_standin.install_cuda0(monkeypatch, tmp_path)
    return request.param


@pytest.fixture
def interpreted(monkeypatch):
    """How many statements were interpreted so far (calls to `exec_top`)."""
    calls = []
    real = Interpreter.exec_top
    monkeypatch.setattr(Interpreter, "exec_top",
                        lambda self, stmt: calls.append(stmt) or real(self, stmt))
    return lambda: len(calls)


def host(t) -> np.ndarray:
    data = t.numpy() if hasattr(t, "numpy") else t
    return np.asarray(data.host if hasattr(data, "host") else data)


def on(device, values):
    """`values` as the device's own array (a stand-in CuPy array on cuda:0)."""
    return sys.modules["cupy"].asarray(values) if device.startswith("cuda") else values


def test_a_warm_cell_launches_without_interpreting_its_statements(device, interpreted):
    s = zynbook.Session(device)
    rng = np.random.default_rng(1)
    for k in range(4):
        x = rng.standard_normal(16).astype(np.float32)
        y = s.run(SCALE, x=on(device, x), a=2.0 + k)
        np.testing.assert_allclose(host(y), x * (2.0 + k) + 1, rtol=1e-6)
        assert y.device == device and s.namespace["y"] is y
        assert len(s.launches) == 1 and len(s.last_kernels) == 1
    assert interpreted() == 2           # the first run's two statements, then none


def test_a_changed_shape_or_dtype_is_not_served_the_stale_plan(device, interpreted):
    s = zynbook.Session(device)
    rng = np.random.default_rng(2)
    runs = [(8, np.float32), (8, np.float32), (24, np.float32), (8, np.float64),
            (8, np.float32), (24, np.float32)]
    for n, dtype in runs:
        x = rng.standard_normal(n).astype(dtype)
        y = s.run(SCALE, x=on(device, x), a=0.5)
        assert y.shape == (n,) and y.dtype == {np.float32: "f32", np.float64: "f64"}[dtype]
        np.testing.assert_allclose(host(y), x * 0.5 + 1, rtol=1e-6)
    # the second run is warm; every change of shape or dtype interprets both statements
    assert interpreted() == 2 * (len(runs) - 1)


def test_a_size_the_program_gives_is_part_of_the_key(device):
    s = zynbook.Session(device)
    x = np.arange(10, dtype=np.float32)
    for m in (4, 4, 7, 4):
        y = s.run(FIRST, x=on(device, x), m=m)
        assert y.shape == (m,)
        np.testing.assert_allclose(host(y), x[:m] * 2)


def test_the_sessions_device_and_fusion_setting_are_part_of_the_key(device, interpreted):
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32)
    for target in ("cpu", device, device, "cpu"):
        s.default_device = target
        y = s.run(SCALE, x=x, a=3.0)
        assert y.device == target
        np.testing.assert_allclose(host(y), x * 3 + 1)
    before = interpreted()
    s.fuse = False              # launched where it is met for another reason: interpreted
    for _ in range(2):
        np.testing.assert_allclose(host(s.run(SCALE, x=x, a=3.0)), x * 3 + 1)
    assert interpreted() == before + 4


def test_the_magic_lines_annotations_are_part_of_the_key(device):
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32)
    for line in (f'@device("{device}")', '@device("cpu")', f'@device("{device}")', ""):
        value, shown = s.run_cell(SCALE, compute_annotations=line, x=x, a=2.0)
        assert shown and value.device == (line[9:-2] or "cpu")
        np.testing.assert_allclose(host(value), x * 2 + 1)


@pytest.mark.parametrize("source,shown", [(SCALE, True), (BARE, True), (UNSHOWN, False)])
def test_a_warm_run_answers_as_a_cold_run(device, source, shown, interpreted):
    s = zynbook.Session(device)
    x = np.arange(6, dtype=np.float32)
    for k in range(3):
        value, is_expr = s.run_cell(source, x=on(device, x + k), a=-1.5)
        assert is_expr is shown
        got = value if shown else s.namespace["y"]
        np.testing.assert_allclose(host(got), (x + k) * -1.5 + 1)
    assert interpreted() == len(zynbook.session.parse_cached(source).body)


def test_a_warm_cell_fails_as_a_cold_one(device):
    def failure(session, **env):
        with pytest.raises(ZynMLError) as info:
            session.run(SCALE, **env)
        return type(info.value), str(info.value), info.value.span.line

    x = np.arange(4, dtype=np.float32)
    warm = zynbook.Session(device)
    for _ in range(2):
        warm.run(SCALE, x=on(device, x), a=1.0)
    for env in ({"x": "text", "a": 1.0}, {"x": on(device, x), "a": "text"}):
        assert failure(warm, **env) == failure(zynbook.Session(device), **env)
    np.testing.assert_allclose(host(warm.run(SCALE, x=on(device, x), a=1.0)), x + 1)
