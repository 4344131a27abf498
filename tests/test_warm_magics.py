"""Warm `%%compute` cells: what the magic keeps between runs of a cell (its source and
names, per cell text; magics/compute.py) never serves a run whose cell text, magic line,
notebook bindings, or inputs' shapes, dtypes or devices changed. Every answer is checked
against numpy."""
from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import zynbook  # noqa: E402
from test_warm_cells import device  # noqa: E402,F401  (the fixture: cpu, or cuda:0 on the stand-in)
from zynbook.errors import ZynMLError  # noqa: E402
from zynbook.kernel import state  # noqa: E402

CELL = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * a + 1.0
}
y
"""


@pytest.fixture
def shell(device):
    sh = InteractiveShell.instance()
    state.set_notebook_session(zynbook.Session(device="cpu"))
    sh.run_line_magic("load_ext", "zynbook")
    yield sh
    for name in ("x", "y", "a", "b", "source", "compute_annotations", "_x"):
        sh.user_ns.pop(name, None)
    state.set_notebook_session(None)


def on(device, values):
    """`values` as the device's own array (a stand-in CuPy array on cuda:0)."""
    return sys.modules["cupy"].asarray(values) if device.startswith("cuda") else values


def host(value) -> np.ndarray:
    return np.asarray(value.host if hasattr(value, "host") else value)


def run(shell, line, cell=CELL):
    return shell.run_cell_magic("compute", line, cell)


def test_changed_shapes_dtypes_and_values_are_not_served_a_stale_run(shell, device):
    line = f'@device("{device}")'
    shell.user_ns["a"] = 2.0
    for shape, dtype in [((8,), np.float32), ((8,), np.float32), ((5,), np.float32),
                         ((5,), np.float64), ((5,), np.float64), ((8,), np.float32)]:
        x = np.random.default_rng(len(shell.user_ns)).standard_normal(shape).astype(dtype)
        shell.user_ns["x"] = on(device, x)
        value = run(shell, line)
        assert host(value).shape == shape and host(value).dtype == dtype
        np.testing.assert_allclose(host(value), x * 2 + 1, rtol=1e-6)
        np.testing.assert_allclose(host(shell.user_ns["y"]), x * 2 + 1, rtol=1e-6)


def test_changed_cell_text_and_magic_line_are_not_served_a_stale_run(shell, device):
    x = np.arange(6, dtype=np.float32)
    shell.user_ns.update(x=on(device, x), a=3.0)
    other = CELL.replace("+ 1.0", "- 4.0")
    for line, cell, want in [(f'@device("{device}")', CELL, x * 3 + 1),
                             (f'@device("{device}")', other, x * 3 - 4),
                             (f'@device("{device}")', CELL, x * 3 + 1),
                             ('@device("cpu")', CELL, x * 3 + 1),
                             (f'@device("{device}")', other, x * 3 - 4)]:
        shell.user_ns["x"] = on(device, x) if "cpu" not in line else x
        value = run(shell, line, cell)
        assert state.notebook_session().launches[-1].device == line[9:-2]
        np.testing.assert_allclose(host(value), want)


def test_rebound_notebook_names_are_looked_up_at_every_run(shell, device):
    line = f'@device("{device}")'
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=on(device, x), a=1.0)
    np.testing.assert_allclose(host(run(shell, line)), x + 1)
    shell.user_ns["a"] = -2.0                                   # a scalar rebound
    np.testing.assert_allclose(host(run(shell, line)), x * -2 + 1)
    shell.user_ns["x"] = on(device, x[::-1].copy())             # an array rebound
    np.testing.assert_allclose(host(run(shell, line)), x[::-1] * -2 + 1)
    shell.user_ns["a"] = "text"                                 # no longer a number
    with pytest.raises(ZynMLError):
        run(shell, line)
    shell.user_ns["a"] = 0.5
    np.testing.assert_allclose(host(run(shell, line)), x[::-1] * 0.5 + 1)


def test_ipythons_history_names_are_not_bound_and_no_name_clashes_with_the_call(shell, device):
    x = np.arange(4, dtype=np.float32)
    # notebook names the call's own parameters once had: bound as any other name
    shell.user_ns.update(x=on(device, x), a=2.0, source=1.0, compute_annotations=2.0)
    cell = CELL.replace("* a", "* a + source * compute_annotations")
    np.testing.assert_allclose(host(run(shell, f'@device("{device}")', cell)), x * 2 + 3)
    # a notebook's `_x` is a name like any other; IPython's `_` (the last output) is not read
    shell.user_ns["_x"] = on(device, x)
    got = run(shell, "", CELL.replace("x[i]", "_x[i]").replace("compute(x)", "compute(_x)"))
    np.testing.assert_allclose(host(got), x * 2 + 1)
    shell.user_ns.pop("_x")
    shell.user_ns["_"] = on(device, x)
    with pytest.raises(ZynMLError, match="unknown name `_`"):
        run(shell, "", CELL.replace("x[i]", "_[i]").replace("compute(x)", "compute(_)"))


@pytest.fixture
def envs(monkeypatch):
    """The names each run of the notebook session was given to bind, one list a run."""
    calls = []
    real = zynbook.Session._run_cell

    def spy(self, source, annotations, env):
        calls.append(sorted(env))
        return real(self, source, annotations, env)

    monkeypatch.setattr(zynbook.Session, "_run_cell", spy)
    return calls


def test_a_name_the_cell_binds_before_reading_it_is_bound_only_when_the_notebook_changed_it(
        shell, device, envs):
    """`let y = ...` then `y`: the `y` the magic wrote back is not bound again (the run
    replaces it unread); a `y` the notebook rebound is, as every other name."""
    line = f'@device("{device}")'
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=on(device, x), a=2.0)
    for _ in range(3):
        value = run(shell, line)
        np.testing.assert_allclose(host(value), x * 2 + 1)
        np.testing.assert_allclose(host(shell.user_ns["y"]), x * 2 + 1)
    assert envs == [["a", "x"]] * 3
    for rebound in (on(device, np.zeros(4, np.float32)), 3.0):      # rebound in Python
        shell.user_ns["y"] = rebound
        for _ in range(2):
            np.testing.assert_allclose(host(run(shell, line)), x * 2 + 1)
    assert envs[3:] == [["a", "x", "y"], ["a", "x"]] * 2
    # read before the cell binds it (here in the statement that binds it): the `y` the
    # notebook holds is the one the magic wrote back, so the cell reads the session's own
    # tensor (its dtype and placement kept) and binds nothing new; a rebound `y` is bound
    cell = CELL.replace("out[i] = x[i] * a", "out[i] = x[i] * a + y[i] * 0.0")
    for _ in range(2):
        np.testing.assert_allclose(host(run(shell, line, cell)), x * 2 + 1)
    shell.user_ns["y"] = on(device, np.zeros(4, np.float32))
    np.testing.assert_allclose(host(run(shell, line, cell)), x * 2 + 1)
    assert envs[7:] == [["a", "x"], ["a", "x"], ["a", "x", "y"]]


def test_a_cell_failing_before_it_binds_a_name_leaves_the_notebook_value_bound(
        shell, device):
    """The session holds the notebook's `y` after a cell that fails before its `let y`, as
    when every name was bound before the run, and the notebook keeps its `y`."""
    line = f'@device("{device}")'
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=on(device, x), a=2.0)
    run(shell, line)                                        # y = x * 2 + 1, written back
    written = shell.user_ns["y"]
    session = state.notebook_session()
    session.run_cell("let y = 5.0")                         # the session alone moves on
    failing = "let w = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
              "        out[i] = x[i] * nowhere\n}\n" + CELL
    with pytest.raises(ZynMLError, match="nowhere"):
        run(shell, line, failing)
    assert shell.user_ns["y"] is written
    np.testing.assert_allclose(host(session.namespace["y"].data), x * 2 + 1)
    np.testing.assert_allclose(host(run(shell, line, failing.replace("nowhere", "a"))),
                               x * 2 + 1)


def test_names_a_cell_binds_before_any_statement_reads_them():
    from zynbook.magics.compute import _cell_form

    def first(cell):
        return set(_cell_form(cell)[3])

    assert first(CELL) == {"y"}
    assert first("let b = 1\nlet y = b + 1\ny\n") == {"b", "y"}
    assert first("let y = y + 1\ny\n") == set()                # read where it is bound
    assert first("let a = y\nlet y = 2\ny + a\n") == {"a"}
    assert first("var y = 1\ny = y + 1\ny\n") == {"y"}
    assert first("pipeline p(t):\n    return t * y\nlet y = 2.0\np(y)\n") == {"p"}
    assert first("let y = 2.0\npipeline p(t):\n    return t * y\np(y)\n") == {"y", "p"}


def test_a_cell_ending_in_a_name_it_binds_shows_the_array_written_back(shell, device):
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=on(device, x), a=1.0)
    for _ in range(2):
        value = run(shell, f'@device("{device}")')
        assert value is shell.user_ns["y"]
        assert type(value) is type(on(device, x))
