"""The notebook surface: what a cell's progress names while it runs, compared with what the
cell runs (its values with numpy written here)."""
from __future__ import annotations

import time

import numpy as np
import pytest

import zynbook
from zynbook.kernel import progress
from zynbook.kernel.progress import cell_progress
from notebook_shell import cell, kc, shell  # noqa: F401

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
    assert after and all(f"kernel {session.activity[0]} on cpu " in s for s in after), shown
    assert "1 launch(es) done" in after[-1], shown      # (while it runs: 0)
    assert "cell finished in" in shown[-1] and "1 launch(es)" in shown[-1], shown


BLOCK = """let y = compute(x) {
    for i in 0..len:
        out[i] = x[i] * 2.0
}
"""


@pytest.mark.parametrize("line,message,column", [
    ("@device('cpu') @device('cpu')", "@device is given twice", 26),
    ("@async(3)", "@async takes no arguments", 11),
    ("@nofuse(x=1)", "@nofuse takes no arguments", 11)])
def test_a_magic_lines_annotations_are_checked_in_a_cell_without_a_block(shell, line, message,
                                                                         column):
    """`%%compute @device("cpu") @device("vulkan:0")` was refused only where the cell has a
    compute block: a cell without one ran, the line's mistake unsaid. It is the error the
    block gives, at the annotation, on either cell."""
    from zynbook.errors import ZynMLError
    shell.user_ns["x"] = x = np.arange(6, dtype=np.float32)
    for body in (BLOCK, "let y = x * 2.0\n"):
        shell.user_ns.pop("y", None)
        result = shell.run_cell(f"%%compute {line}\n{body}")
        err = result.error_in_exec
        assert isinstance(err, ZynMLError), err
        assert (err.kind, err.message, err.line, err.column) == ("type", message, 1, column), err
        assert "y" not in shell.user_ns
    cell(shell, "%%compute @device('cpu')\n" + BLOCK)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x * 2.0)


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_an_error_on_a_long_line_shows_the_line_around_its_column(shell, where):
    """A syntax error in a list literal of 20 000 numbers printed the whole 100 000-character
    line and as many spaces before its caret (200 KB in the notebook): the excerpt is the
    part of the line around the column, cut with `...`, the caret under the character at
    fault; line and column are still the source's."""
    from zynbook.errors import LONG_LINE, ZynMLError
    values = ["1.5"] * 20000
    at = {"start": 0, "middle": 10000, "end": 19999}[where]
    values[at] = "@"
    line = "let a = [" + ", ".join(values) + "]"
    column = line.index("@") + 1
    result = shell.run_cell("%%compute\n" + line + "\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "syntax", err
    assert (err.line, err.column) == (2, column), err
    shown, carets = err.render().splitlines()[1:3]
    text = shown[shown.index("| ") + 2:]
    assert len(text) <= LONG_LINE + 6 and len(err.render()) < 1000
    assert text.startswith("let a = [") == (where == "start")
    assert text.endswith("]") == (where == "end")
    under = carets.index("^") - shown.index("| ") - 2
    assert text[under] == "@" and carets.count("^") == 1, (text, carets)
    assert text[:under].lstrip(".") in line          # the part before the caret is the line's


@pytest.mark.parametrize("words", ["--bogus", "cpu", "vulkan:0 extra"])
def test_zynml_devices_refuses_arguments(shell, capsys, words):
    """`%zynml_devices cpu` listed every device, its words unsaid (one may mean
    `%zynml_device cpu`, which sets the default): a usage error naming them; without
    words (or with a comment only) it lists the devices zynbook.compute_devices() gives."""
    from zynbook.kernel.state import notebook_session
    before = notebook_session().default_device
    result = shell.run_cell(f"%zynml_devices {words}")
    assert not result.success and type(result.error_in_exec).__name__ == "UsageError"
    assert f"`{words}`" in str(result.error_in_exec)
    assert notebook_session().default_device == before
    capsys.readouterr()
    for line in ("%zynml_devices", "%zynml_devices  # all of them"):
        cell(shell, line)
        shown = capsys.readouterr().out
        assert all(d["id"] in shown for d in zynbook.compute_devices()), shown



@pytest.mark.parametrize("code,bad", [("%timeit -n 1.5 x16 * 2.0", "-n 1.5"),
                                      ("%timeit -r 2 -n 10x x16 * 2.0", "-n 10x"),
                                      ("%%timeit -n 2.5\nx16 * 2.0", "-n 2.5")])
def test_kernel_timeit_counts_that_are_not_whole_are_a_usage_error(kc, code, bad):
    """`%timeit -n 1.5 x * 2.0` took 1 as N and timed `.5 x * 2.0`: a syntax error at the
    `.`; a count that is not a whole number is the usage error `-n abc` gives. Whole
    counts still run the code that many times (its value numpy's)."""
    from test_kernel_support import execute, stdout_of
    x = np.array([1.5, -2.0, 3.25], np.float32)
    reply, _ = execute(kc, "let x16 = tensor([1.5, -2.0, 3.25])")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, code)
    assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
    assert f"`{bad}` is not one of them" in reply["evalue"], reply
    reply, outputs = execute(kc, "%timeit -n 2 -r 3 x16 * 2.0")
    assert reply["status"] == "ok" and "median of 3 runs, 2 loops each" in stdout_of(outputs)
    reply, outputs = execute(kc, "%time x16 * 2.0")
    shown = [m["content"]["data"]["text/plain"] for m in outputs
             if m["msg_type"] == "execute_result"]
    assert shown and shown[-1].endswith(str(x * 2.0)), shown
