"""`cell_progress` (kernel/progress.py): nothing for a quick cell, updates and a last message
for one that runs past `AFTER`, outside a notebook as a line on stderr."""
from __future__ import annotations

import threading
import time

from zynbook.kernel import progress
from zynbook.kernel.progress import cell_progress


class Busy:
    """A session as `describe` reads it (its run sets `activity`)."""
    activity = None
    launches: list = []


def test_a_quick_cell_shows_nothing_and_leaves_no_watch(capsys):
    with cell_progress(Busy()):
        pass
    cell = cell_progress(Busy())        # the form %%compute uses: watched once made
    assert cell in progress._watcher.cells
    cell.close()
    assert not progress._watcher.cells
    assert capsys.readouterr().err == ""


def test_a_long_cell_is_reported_while_it_runs_and_when_it_ends(capsys, monkeypatch):
    monkeypatch.setattr(progress, "AFTER", 0.05)
    monkeypatch.setattr(progress, "EVERY", 0.05)
    busy = Busy()
    with cell_progress(busy):
        busy.activity = ("double_l1", "cpu")        # the cell's run launches it
        time.sleep(0.5)
    assert not progress._watcher.cells
    err = capsys.readouterr().err
    running = err.split("\r")[1:-1]
    named = [r for r in running if "kernel double_l1 on cpu (compiling or running)" in r]
    # (on a loaded machine the watcher may report once before the launch is set: "running")
    assert named and running[len(running) - len(named):] == named, running
    assert "cell finished in" in err.split("\r")[-1] and err.endswith("\n")


def test_cells_of_several_threads_are_watched_each(capsys, monkeypatch):
    monkeypatch.setattr(progress, "AFTER", 0.05)
    done = []

    def cell():
        with cell_progress(Busy()):
            time.sleep(0.3)
        done.append(1)

    threads = [threading.Thread(target=cell) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 3 and not progress._watcher.cells
    assert capsys.readouterr().err.count("cell finished in") == 3
