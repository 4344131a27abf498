"""The notebook surface: what a cell's progress names while it runs, compared with what the
cell runs (its values with numpy written here)."""
from __future__ import annotations

import time

import numpy as np

import zynbook
from zynbook.kernel import progress
from zynbook.kernel.progress import cell_progress

DOUBLE = """let y = compute(x) {
    for i in 0..len:
        out[i] = x[i] * 2.0
}
y
"""


def test_a_cells_progress_names_nothing_of_the_cell_before(capsys, monkeypatch):
    """A cell that had not launched yet (parsing, binding a torch tensor, starting a
    device: seconds) was reported as running the previous cell's kernel, with its launches
    done: it is `running · 0 launch(es)` until its own kernel starts, then that kernel."""
    monkeypatch.setattr(progress, "AFTER", 0.05)
    monkeypatch.setattr(progress, "EVERY", 0.05)
    session = zynbook.Session(device="cpu")
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(session.run(DOUBLE, x=x)), x * 2.0)
    capsys.readouterr()
    with cell_progress(session):
        time.sleep(0.3)                 # before the run: nothing of this cell yet
        got = np.asarray(session.run(DOUBLE.replace("* 2.0", "+ 1.0"), x=x))
        time.sleep(0.3)
    np.testing.assert_array_equal(got, x + 1.0)
    shown = capsys.readouterr().err.split("\r")[1:]
    before = [s for s in shown if "running ·" in s]
    assert before and all("0 launch(es) done" in s for s in before), shown
    after = [s for s in shown if "(compiling or running)" in s]
    assert after and all(session.activity[0] in s and "on cpu" in s and "1 launch(es) done" in s
                         for s in after), shown
    assert "cell finished in" in shown[-1] and "1 launch(es)" in shown[-1], shown
