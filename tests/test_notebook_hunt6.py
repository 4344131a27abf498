"""The notebook surface, a sixth pass: a Python int read as a loop bound, comments on the
magic line, and what a user meets with numpy and torch data of every layout; values
checked against numpy computed here."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("IPython")

from compute_testing import wanted_devices  # noqa: E402
from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)
from zynbook.errors import ZynMLShapeError, ZynMLWarning  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "cuda", "metal"))]
shell = shell_fixture(("x", "y", "z", "n", "m", "a", "b"))


DOUBLE = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 + 1.0\n}\n"


def _run_noting(shell, text):
    """(the cell's result, the ZynMLWarning notes it issued)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = shell.run_cell(text)
    return result, [w.message for w in caught if isinstance(w.message, ZynMLWarning)]


# ------------------------------------------------ a Python int as a loop bound

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [5, np.int64(3), np.array(2), 0])
def test_a_python_int_bounding_a_loop_short_of_the_axis_is_noted(shell, device, n):
    """`n = 5` in Python and `for i in 0..n: out[i] = x[i]` over an `x` of 8 ran over 5
    positions without a word (docs/api.md: a Python int is a host int, its bound a bound):
    the cell still runs over n positions, and says so at the index, naming Python's n."""
    x = np.arange(8, dtype=np.float32)
    shell.user_ns.update(x=x, n=n)
    result, notes = _run_noting(shell, f'%%compute @device("{device}")\n' + DOUBLE)
    assert result.success, result.error_in_exec
    k = int(n)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64), x[:k] * 2.0 + 1.0)
    assert len(notes) == 1, notes
    note = notes[0]
    assert (note.span.line, note.span.column) == (4, 20), note
    assert f"`n` = {k} being read from Python" in note.message, note.message
    assert f"covers {k} of the axis's 8 positions" in note.message, note.message
    assert "^" in str(note)


def test_a_python_int_equal_to_the_axis_or_not_a_bound_says_nothing(shell):
    """A bound that covers the axis, and a Python int that bounds no loop over an input (an
    output's size), are quiet."""
    x = np.arange(8, dtype=np.float32)
    shell.user_ns.update(x=x, n=8)
    result, notes = _run_noting(shell, "%%compute\n" + DOUBLE)
    assert result.success and not notes, notes
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64), x * 2.0 + 1.0)
    shell.user_ns["n"] = 3
    result, notes = _run_noting(shell, "%%compute\nlet y = compute() {\n    for i in 0..n:\n"
                                       "        out[i] = 2.0\n}\n")
    assert result.success and not notes, notes
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), np.full(3, 2.0))




def test_a_python_int_bounding_two_axes_short_is_noted_once(shell):
    """Python's `K` bounding both `A`'s columns and `B`'s rows short: one note for `K`
    (it was one per axis), one for `M`; the product over the first K of each."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    shell.user_ns.update(a=a, b=b, m=1, n=2)
    result, notes = _run_noting(shell, "%%compute\nlet y = compute(a, b) {\n"
                                       "    for i in 0..m, j in 0..c:\n        var acc = 0.0\n"
                                       "        for k in 0..n:\n"
                                       "            acc += a[i, k] * b[k, j]\n"
                                       "        out[i, j] = acc\n}\n")
    assert result.success, result.error_in_exec
    want = a[:1, :2].astype(np.float64) @ b[:2].astype(np.float64)
    np.testing.assert_allclose(np.asarray(shell.user_ns["y"], np.float64), want, rtol=1e-6)
    named = sorted(note.message.split(" being read")[0].rsplit(", ", 1)[-1] for note in notes)
    assert named == ["`m` = 1", "`n` = 2"], [n.message for n in notes]

def test_a_python_int_a_stencil_needs_says_nothing(shell):
    """`n = len(x) - 1` for `x[i] + x[i + 1]`: the loop reads the whole axis, no note."""
    x = np.arange(8, dtype=np.float32) ** 2
    shell.user_ns.update(x=x, n=7)
    result, notes = _run_noting(shell, "%%compute\nlet y = compute(x) {\n    for i in 0..n:\n"
                                       "        out[i] = x[i] + x[i + 1]\n}\n")
    assert result.success and not notes, (result.error_in_exec, notes)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x[:-1] + x[1:])

def test_a_python_int_past_the_axis_is_a_shape_error_at_the_index(shell):
    x = np.arange(8, dtype=np.float32)
    shell.user_ns.update(x=x, n=12)
    result = shell.run_cell("%%compute\n" + DOUBLE)
    err = result.error_in_exec
    assert isinstance(err, ZynMLShapeError), err
    assert (err.line, err.column) == (4, 20) and "12" in err.message and "8" in err.message
    # (it said "`n` = 12 in the program", of a value the notebook gave)
    assert "(`n` = 12, given: a bound, not a size solved from the shapes)" in err.message
    assert "y" not in shell.user_ns
    # the kernel goes on: with n deleted in Python, the cell solves n from x
    del shell.user_ns["n"]
    result, notes = _run_noting(shell, "%%compute\n" + DOUBLE)
    assert result.success and not notes, (result.error_in_exec, notes)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64), x * 2.0 + 1.0)


def test_a_pipeline_argument_of_the_same_name_is_not_pythons(shell):
    """A pipeline's own `n` (given n + 1) is not the notebook's `n`: no note names it."""
    x = np.arange(8, dtype=np.float32)
    shell.user_ns.update(x=x, n=3)
    result, notes = _run_noting(shell, "%%compute\npipeline f(x, n):\n    return compute(x) {\n"
                                       "        for i in 0..n:\n            out[i] = x[i]\n"
                                       "    }\nlet y = f(x, n + 1)\n")
    assert result.success and not notes, (result.error_in_exec, notes)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x[:4])


def test_timeit_notes_a_python_bound_once(shell, capsys):
    shell.user_ns.update(x=np.arange(8, dtype=np.float32), n=5)
    result, notes = _run_noting(shell, "%%zynml_timeit -r 2\n" + DOUBLE)
    assert result.success, result.error_in_exec
    assert len(notes) == 1 and "`n` = 5 being read from Python" in notes[0].message, notes



def test_kernel_a_python_int_bounding_a_loop_short_of_the_axis_is_noted(kc):
    """The ZynML kernel reads Python's names too: a Python `n` bounding a loop short of the
    axis is noted on stderr when the cell reads it from Python; a ZynML `let` is not."""
    from test_kernel_support import execute

    _kernel_ok(kc, "%python import numpy as np; nh6_x = np.arange(8, dtype=np.float32); "
                   "nh6_n = 5")
    body = "let nh6_y = compute(nh6_x) {\n    for i in 0..{n}:\n        out[i] = nh6_x[i] * 2.0\n}\n"
    reply, outputs = execute(kc, body.replace("{n}", "nh6_n"))
    assert reply["status"] == "ok", outputs
    err = "".join(m["content"]["text"] for m in outputs
                  if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    assert "ZynML note at line 3, column 24" in err and "`nh6_n` = 5 being read from Python" \
        in err, err
    np.testing.assert_array_equal(_kernel_value(kc, "nh6_y"), np.arange(5) * 2.0)
    reply, outputs = execute(kc, "let nh6_k = 3\n" + body.replace("{n}", "nh6_k"))
    assert reply["status"] == "ok" and not [m for m in outputs if m["msg_type"] == "stream"
                                            and "ZynML note" in m["content"]["text"]], outputs
    np.testing.assert_array_equal(_kernel_value(kc, "nh6_y"), np.arange(3) * 2.0)

# ------------------------------------------------ `#` on a magic's line, in both kernels

def _kernel_ok(kc, code):
    """The cell's printed and displayed text (it must run without an error)."""
    from test_kernel_support import errors_of, execute, results_of, stdout_of

    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", (code, errors_of(outputs), outputs)
    return stdout_of(outputs) + "".join(d.get("text/plain", "") for d in results_of(outputs))


def _kernel_value(kc, name):
    """A ZynML name's value, through %python."""
    out = _kernel_ok(kc, f"%python import numpy as _np; print(_np.asarray({name}).tolist())")
    return np.asarray(eval(out.strip()), np.float64)


def test_kernel_magic_lines_end_at_a_hash_comment(kc):
    """In the ZynML kernel `%device cpu  # note` was `no device \\`cpu  # note\\``, and
    `%timeit -r 2 # note`, `%time # note` timed `# note` (a syntax error), while the Python
    magics' lines (`%%compute`, `%zynml_device`, `%%compare`) end at `#`: every magic's line
    now ends at `#` or `//` outside quotes."""
    x = [1.0, 2.0, 3.0, 4.0]
    want = np.asarray(x) * 3.0
    _kernel_ok(kc, "%device cpu:native  # the fast one\nlet nh6_x = upload([1.0, 2.0, 3.0, 4.0])")
    assert "default device: cpu:native" in _kernel_ok(kc, "%device  # which one?")
    body = "let nh6_y = compute(nh6_x) {\n    for i in 0..k:\n        out[i] = nh6_x[i] * 3.0\n}\n"
    for head in ("%%timeit -r 2 # was -r 50", "%%time # why", "%timeit -r 1 # note",
                 "%time // note"):
        _kernel_ok(kc, "%python nh6_y = None")
        _kernel_ok(kc, head + "\n" + body)
        np.testing.assert_array_equal(_kernel_value(kc, "nh6_y"), want)
    out = _kernel_ok(kc, "%inspect launch-ir  # the C++ target's")
    assert "launch zyn_k_" in out and "// target: cpu" in out, out
    _kernel_ok(kc, "%device cpu  // back")


def test_kernel_a_hash_in_zynml_code_is_a_syntax_error_saying_so(kc):
    """`#` is no comment in ZynML code (a cell's line, the code after `%time`): a syntax
    error at the `#` that says comments start with `//`; the kernel goes on."""
    from test_kernel_support import errors_of, execute

    for code, column in (("let nh6_a = 1  # one", 16), ("%time let nh6_a = 1 # one", 21)):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "error", outputs
        errs = errors_of(outputs)
        assert errs and errs[0]["ename"] == "ZynMLSyntaxError", errs
        assert "ZynML comments start with //" in errs[0]["evalue"], errs
        assert f"(line 1, column {column})" in errs[0]["evalue"], errs
    _kernel_ok(kc, "let nh6_a = 1  // one")
    assert _kernel_value(kc, "nh6_a").tolist() == 1.0


@pytest.mark.parametrize("code", ["%device cpu  # vul", "%inspect # cu", "%%timeit -r 1 # nh6_"])
def test_kernel_completes_nothing_inside_a_magic_lines_hash_comment(kc, code):
    from test_notebook_hunt4 import _complete

    _kernel_ok(kc, "let nh6_value = 1.5")
    assert _complete(kc, code) == ([], len(code), len(code))


def test_python_inspect_line_ends_at_a_hash_comment(shell, capsys):
    x = np.arange(5, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, '%%compute @device("cpu:native")  # note\nlet y = compute(x) {\n'
                "    for i in 0..m:\n        out[i] = x[i] + 1.0\n}\n")
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x + 1.0)
    capsys.readouterr()
    cell(shell, "%zynml_inspect launch-ir  # the C++ target's")
    out = capsys.readouterr().out
    assert "launch zyn_k_" in out, out


# ------------------------------------------------ %%compare: results of another shape

def test_compare_a_result_of_another_shape_says_both_shapes(shell):
    """A numpy expression whose result has another shape than the cell's (here the cell's
    loop is bounded by Python's `n` = 2, numpy reads all of `x`) showed a difference of
    `inf` and nothing else: the row says both shapes."""
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=x, n=2)
    cell(shell, "%%compare --devices cpu,cpu:native --repeat 1 --no-chart "
                "--numpy 'np.tanh(x) * 2.0' --out z\n"
                "let y = compute(x) {\n    for i in 0..n:\n        out[i] = tanh(x[i]) * 2.0\n}\n")
    rows = {r.device: r for r in shell.user_ns["z"].rows}
    assert not rows["cpu"].error and rows["cpu:native"].max_diff == 0.0, rows
    assert rows["numpy"].error == "a result of shape [4] where the CPU reference's is [2]"
    del shell.user_ns["n"]          # the cell solves n from x: numpy agrees
    cell(shell, "%%compare --devices cpu --repeat 1 --no-chart --numpy 'np.tanh(x) * 2.0' "
                "--out z\nlet y = compute(x) {\n    for i in 0..n:\n"
                "        out[i] = tanh(x[i]) * 2.0\n}\n")
    row = shell.user_ns["z"].rows[-1]
    assert row.device == "numpy" and not row.error and row.max_diff < 1e-6, row


# ------------------------------------------------ the inspector's stage list

def test_inspect_counts_a_one_line_stage_as_one_line(shell, capsys):
    """`launch-ir (1 lines)` in the stage list of a kernel run on the reference cpu."""
    x = np.arange(5, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, "%%compute\n" + DOUBLE)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x * 2.0 + 1.0)
    capsys.readouterr()
    cell(shell, "%zynml_inspect zynml")
    out = capsys.readouterr().out
    stages = next(ln for ln in out.splitlines() if ln.startswith("stages: "))
    assert "launch-ir (1 line)," in stages and "zynml (4 lines)" in stages, stages
    assert "1 lines" not in out, out


# ------------------------------------------------ layouts of the notebook's arrays

def _layouts():
    torch = pytest.importorskip("torch")
    base = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5
    wide = np.zeros((8, 18), np.float32)
    wide[::2, ::3] = base
    return {
        "fortran": np.asfortranarray(base),
        "transposed": np.ascontiguousarray(base.T).T,
        "strided": wide[::2, ::3],
        "reversed": base[::-1, ::-1].copy()[::-1, ::-1],
        "broadcast": np.broadcast_to(base[:1], (4, 6)),
        "torch_t": torch.from_numpy(np.ascontiguousarray(base.T)).t(),
        "empty": np.zeros((0, 6), np.float32),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["fortran", "transposed", "strided", "reversed",
                                    "broadcast", "torch_t", "empty"])
def test_compute_reads_every_layout_as_numpy_does(shell, device, layout):
    x = _layouts()[layout]
    want = np.asarray(x, np.float64) * 2.0 + 1.0
    shell.user_ns["x"] = x
    cell(shell, f'%%compute @device("{device}")\nlet y = compute(x) {{\n'
                "    for i in 0..r, j in 0..c:\n        out[i, j] = x[i, j] * 2.0 + 1.0\n}\n")
    got = np.asarray(shell.user_ns["y"], np.float64)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
