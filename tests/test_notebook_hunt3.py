"""The notebook surface, continued: devices on the magic line of a cell with no compute block,
%%compare and the timing widget calling a pipeline whose globals Python rebound, the widgets'
HTML without ipywidgets, carets under lines with wide characters, and the call of a pipeline
an earlier cell defined shown with its error; values checked against numpy computed here."""
from __future__ import annotations

import re
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

pytest.importorskip("IPython")

import zynbook  # noqa: E402
from compute_testing import wanted_devices  # noqa: E402
from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)
from zynbook.errors import ZynMLError  # noqa: E402
from zynbook.kernel import state  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "cuda", "metal"))]
shell = shell_fixture(("x", "y", "scale", "bias", "f", "g", "cmp3"))


def cells_wide(text: str) -> int:
    """Terminal cells of `text`: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


# ------------------------------------------------ a device no device has, with no block

@pytest.mark.parametrize("first,bad", [
    ('%%compute @device("vulkan:7")', '"vulkan:7"'),
    ('%%compute   @nofuse @device(["cpu", "nosuch:2"])', '"nosuch:2"'),
    ('%%compute @device("gl:9")  // a note', '"gl:9"'),
    ('%%zynml_timeit -r 1 @device("vulkan:7")', '"vulkan:7"'),
])
def test_a_device_no_device_has_is_an_error_in_a_cell_with_no_compute_block(shell, first,
                                                                           bad):
    """As an unknown annotation in that place is: the device error at the id, on the cell's
    magic line (it was accepted, and the cell ran on the default device)."""
    result = shell.run_cell(first + "\nlet y = 2.0\ny * 3.0\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "device", err
    assert (err.line, err.column) == (1, first.index(bad) + 1)
    assert f"no device `{bad.strip(chr(34))}`" in err.message
    shown, caret = err.render().splitlines()[1:3]
    assert shown == "   1 | " + first
    assert caret.index("^") == shown.index(bad) and caret.count("^") == len(bad)
    assert "y" not in shell.user_ns         # the cell did not run


def test_a_device_there_is_on_the_magic_line_runs_a_cell_with_no_block(shell):
    assert cell(shell, '%%compute @device("cpu")\nlet y = 2.0\ny * 3.0\n') == 6.0
    # a device held in a name is looked up where a block runs
    assert cell(shell, '%%compute @device(nowhere_)\nlet y = 2.0\ny + 1.0\n') == 3.0


# --------------------------------------- %%compare and the timing widget: pipeline globals

PIPELINES = ("%%compute\nlet scale = 2.0\nlet bias = 0.5\n"
             "pipeline f(v):\n    return compute(v) {\n        for i in 0..n:\n"
             "            out[i] = v[i] * scale\n    }\n"
             "pipeline g(v):\n    return f(v) + bias\n")


def test_compare_reads_pythons_value_of_a_pipelines_global(shell):
    """A pipeline an earlier cell defined reads `scale` (and, through `g`, `bias`), which
    Python rebound: every row computes with Python's values (the cell failed: the fresh
    sessions had no `scale`), checked by a numpy expression written here."""
    x = np.linspace(-2, 2, 64).astype(np.float32)
    shell.user_ns["x"] = x
    cell(shell, PIPELINES)
    shell.run_cell("scale = 3.0\nbias = -1.25")
    devices = [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0")]
    cell(shell, f"%%compare --devices {','.join(devices)} --repeat 1 --no-chart --result y "
                "--numpy 'np.asarray(x, np.float64) * 3.0 - 1.25' --out cmp3\nlet y = g(x)\n")
    rows = shell.user_ns["cmp3"].rows
    assert [r.device for r in rows] == devices + ["numpy"]
    for r in rows:
        assert not r.error and r.max_diff is not None and r.max_diff < 1e-5, r


def test_compare_a_global_python_deleted_is_an_unknown_name(shell):
    shell.user_ns["x"] = np.ones(4, np.float32)
    cell(shell, PIPELINES)
    shell.run_cell("del scale")
    result = shell.run_cell("%%compare --devices cpu --repeat 1 --no-chart\nlet y = f(x)\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "name", err
    assert "unknown name `scale`" in err.message and (err.line, err.column) == (7, 29)


def test_timing_compare_reads_pythons_value_of_a_pipelines_global(shell):
    """`TimingWidget.compare` gave the fresh sessions the notebook session's old values:
    `scale` rebound in Python to a string ran silently with the 2.0 kept."""
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import TimingWidget

    shell.user_ns["x"] = np.ones(4, np.float32)
    cell(shell, PIPELINES)
    devices = [d for d in DEVICES if d in ("cpu", "cpu:native")]
    widget = TimingWidget.compare("g(x)", devices, repeat=1)
    assert all("error" not in r for r in widget.results.values()), widget.results
    shell.run_cell("scale = 'three'")
    widget = TimingWidget.compare("g(x)", devices, repeat=1)
    for device in devices:
        assert "ZynML type error at line 7" in widget.results[device].get("error", ""), \
            widget.results[device]
    shell.run_cell("scale = 0.5")
    widget = TimingWidget.compare("g(x)", devices, repeat=1)
    assert all("error" not in r for r in widget.results.values()), widget.results
    # a session given explicitly is read as it is
    session = zynbook.Session("cpu")
    session.run("let scale = 2.0\nlet x = randn([4], seed=1)\n"
                "pipeline f(v):\n    return v * scale\n")
    widget = TimingWidget.compare("f(x)", ["cpu"], repeat=1, session=session)
    assert "error" not in widget.results["cpu"], widget.results


# ---------------------------------------------------- the widgets' HTML without ipywidgets

def test_timing_html_needs_no_ipywidgets():
    """`from zynbook.widgets import timing_html` failed where ipywidgets is not installed
    (blocked here): the HTML is text; the widgets themselves still need it."""
    code = r"""
import sys
sys.modules["ipywidgets"] = None            # as if not installed
import numpy as np
import zynbook
from zynbook.widgets import compare_html, launch_info_html, timing_html, timing_svg
s = zynbook.Session("cpu")
x = np.arange(6, dtype=np.float32)
y = s.run("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny", x=x)
assert np.array_equal(np.asarray(y), x * 2)
page = timing_html(s.launches, s.last_kernels)
(launch,) = s.launches
assert launch.kernel in page and page.count("<tr>") == 2, page
assert launch.kernel in launch_info_html(s.last_kernels[0], s.launches)
assert "zynml-compare-row" in compare_html({"cpu": {"launches": s.launches, "wall": 0.1}})
try:
    from zynbook.widgets import TimingWidget
except ImportError:
    print("widgets need ipywidgets")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["widgets", "need", "ipywidgets", "ok"], out.stdout


# -------------------------------------------------------- carets under wide characters

@pytest.mark.parametrize("text", ["漢字", "😀", "ｆｕｌｌ", "e\u0301t\u00e9", "\tα漢"])
def test_the_caret_is_under_its_column_by_display_width(text):
    """A line with wide characters (CJK, emoji, full-width forms) before the column: the
    caret is as many cells in as the text before it takes (it counted characters)."""
    source = f'let s = "{text}" + nope_\n'
    with pytest.raises(ZynMLError) as info:
        zynbook.run(source)
    err = info.value
    assert err.kind == "name" and err.column == source.index("nope_") + 1
    shown, caret = err.render().splitlines()[1:3]
    before = source[:err.column - 1]
    gutter = len("   1 | ")
    want = "".join("\t" if c == "\t" else " " * cells_wide(c) for c in before)
    assert caret == " " * gutter + want + "^" * len("nope_")


def test_carets_under_wide_characters_are_as_wide_as_they(shell):
    """The caret under a device id of wide characters covers the cells they take."""
    first = '%%compute  @device("漢字:0")'
    result = shell.run_cell(first + "\nlet y = 1\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "device", err
    shown, caret = err.render().splitlines()[1:3]
    bad = '"漢字:0"'
    at = first.index(bad)
    assert caret == " " * (len("   1 | ") + cells_wide(first[:at])) + "^" * cells_wide(bad)


# -------------------------------------- an error in a pipeline another cell defined

def frames(err) -> list:
    """(line, column, shown line) of the error and of each call that led to it."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", err.render()).splitlines()
    out = [(err.line, err.column, text[1])]
    for i, ln in enumerate(text):
        m = re.match(r"  in the call of pipeline \w+ here \(line (\d+), column (\d+)\)$", ln)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), text[i + 1].strip()))
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_an_error_in_a_pipeline_of_another_cell_says_where_it_was_called(shell, device):
    """The error at its line in the defining cell, then the call in the cell that called it
    (a traceback's two frames); through a pipeline of a third cell, three."""
    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    cell(shell, "%%compute\npipeline f(v):\n    let m = 4\n    return compute(v) {\n"
                "        for i in 0..m:\n            out[i] = v[i + 5]\n    }\n")
    at = f'%%compute @device("{device}")\n'
    call = "let y = f(x) * 2.0"
    result = shell.run_cell(at + "let a = 1.0\n" + call + "\ny\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "shape", err
    assert frames(err) == [(6, 24, "   6 |             out[i] = v[i + 5]"),
                           (3, call.index("f(") + 1, "3 | " + call)]
    # called through a pipeline a third cell defined
    cell(shell, "%%compute\npipeline g(v):\n    let w = v + 1.0\n    return f(w)\n")
    result = shell.run_cell(at + "g(x)\n")
    err = result.error_in_exec
    assert frames(err)[1:] == [(4, 12, "4 |     return f(w)"), (2, 1, "2 | g(x)")]
    # a pipeline that works gives numpy's values
    cell(shell, "%%compute\npipeline h(v):\n    return compute(v) {\n        for i in 0..n:\n"
                "            out[i] = v[i] * 3.0\n    }\n")
    got = cell(shell, at + "h(x)\n")
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.arange(4) * 3.0)
    for name in ("h", "a"):
        shell.user_ns.pop(name, None)


def test_an_error_in_a_pipeline_of_the_same_cell_has_one_frame(shell):
    result = shell.run_cell("%%compute\npipeline f(v):\n    return v[9]\nlet y = f([1, 2])\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and (err.line, err.column) == (3, 14), err
    assert "in the call of" not in err.render()


def test_kernel_an_error_in_a_pipeline_of_another_cell_says_where_it_was_called(kc):
    from test_kernel_support import errors_of, execute

    reply, _ = execute(kc, "pipeline nh3_f(v):\n    let w = v * 2.0\n    return w[7]\n")
    assert reply["status"] == "ok", reply
    call = "let nh3_y = nh3_f(randn([2], seed=1)) + 1.0"
    reply, outputs = execute(kc, "let nh3_a = 1\n" + call + "\n")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLShapeError", reply
    (error,) = errors_of(outputs)
    text = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in error["traceback"]]
    text = "\n".join(text).splitlines()
    assert text[1] == "   3 |     return w[7]" and text[2].index("^") == text[1].index("7")
    col = call.index("nh3_f(") + 1
    i = text.index(f"  in the call of pipeline nh3_f here (line 2, column {col})")
    assert text[i + 1] == "     2 | " + call
    assert text[i + 2].index("^") == text[i + 1].index("nh3_f(")


def test_kernel_a_call_after_time_is_shown_at_the_cells_column(kc):
    """`%time` runs the code after it: the call frame points at the cell's line and column
    (as the error itself does for an error in that code)."""
    from test_kernel_support import errors_of, execute

    reply, _ = execute(kc, "pipeline nh3_g(v):\n    return v[5]\n")
    assert reply["status"] == "ok", reply
    line = "%time let nh3_z = nh3_g(randn([2], seed=1))"
    reply, outputs = execute(kc, "let nh3_b = 2\n" + line + "\n")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLShapeError", reply
    (error,) = errors_of(outputs)
    text = "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in error["traceback"])
    text = text.splitlines()
    assert text[1] == "   2 |     return v[5]"
    col = line.index("nh3_g(") + 1
    i = text.index(f"  in the call of pipeline nh3_g here (line 2, column {col})")
    assert text[i + 1] == "     2 | " + line
    assert text[i + 2].index("^") == text[i + 1].index("nh3_g(")


@pytest.mark.parametrize("magic", ["compute", "zynml_timeit -r 1"])
def test_an_error_on_line_1_of_a_pipelines_text_is_shown_there(shell, magic):
    """A pipeline defined in a text whose line 1 is code (the notebook session's `run`):
    its error on that line was shown on the calling cell's magic line."""
    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    text = "pipeline pf3(v) -> int:\n    return v\npf3"
    shell.user_ns["f"] = state.notebook_session().run(text)
    call = "let y = f(x)"
    result = shell.run_cell(f"%%{magic}\n{call}\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "type", err
    assert (err.line, err.column) == (1, text.index("int") + 1)
    assert err.render().splitlines()[1] == "   1 | pipeline pf3(v) -> int:"
    assert frames(err)[1:] == [(2, call.index("f(") + 1, "2 | " + call)]


@pytest.mark.parametrize("first,bad,kind,said", [
    ('%%compute @device("cpu", "gl:0")', '@device("cpu", "gl:0")', "type", "one device id"),
    ("%%compute  @device(3)", "@device(3)", "type", "not an int"),
    ("%%compute @device([])", "@device([])", "type", "not an empty list"),
    ('%%compute @device(["cpu", true])', '@device(["cpu", true])', "type", "holding a bool"),
])
def test_a_device_annotation_of_the_wrong_form_is_an_error_with_no_block(shell, first, bad,
                                                                          kind, said):
    """What the block's @device refuses is refused on the magic line of a cell with no block
    (it was accepted), by the same check."""
    result = shell.run_cell(first + "\nlet y = 2.0\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == kind and said in err.message, err
    assert (err.line, err.column) == (1, first.index(bad) + 1)
    assert "y" not in shell.user_ns
    # and the same cell with a block says the same
    shell.user_ns["x"] = np.ones(3, np.float32)
    result = shell.run_cell(first + "\n" + "let y = compute(x) {\n    for i in 0..n:\n"
                            "        out[i] = x[i] * 2.0\n}\n")
    assert (result.error_in_exec.kind, result.error_in_exec.message) == (err.kind, err.message)


def test_a_device_of_a_list_in_a_block_is_pointed_at_in_the_list(shell):
    x = np.arange(3, dtype=np.float32)
    shell.user_ns["x"] = x
    line = '    @device(["cpu", "nosuch:4"])'
    result = shell.run_cell("%%compute\nlet y = compute(x) {\n" + line + "\n    for i in 0..n:\n"
                            "        out[i] = x[i] * 2.0\n}\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "device", err
    assert (err.line, err.column) == (3, line.index('"nosuch:4"') + 1)


@pytest.mark.parametrize("option,what", [("-r -3", "not `-3`"),
                                         ("-r 2 -r 3", "given twice"), ("-r", "given no number"),
                                         ("-r 2.5", "not `2.5`")])
def test_zynml_timeit_a_repeat_that_is_not_a_count_is_a_usage_error(shell, capsys, option,
                                                                     what):
    """`-r -3` said `-r` is not an option, `-r 2.5` was a syntax error of the annotations,
    and `-r 2 -r 3` ran 2."""
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("zynml_timeit", option, "let y = 1.0\n")
    assert "a whole number" in str(info.value) and str(info.value).endswith(what)
    shell.run_cell_magic("zynml_timeit", "-r 3", "let y = 1.0\n")
    assert "(median of 3;" in capsys.readouterr().out


def _inspect(kc, code, cursor):
    kc.inspect(code, cursor)
    reply = kc.get_shell_msg(timeout=30)["content"]
    assert reply["status"] == "ok", reply
    return reply["found"], reply["data"].get("text/plain", "")


def test_kernel_inspecting_a_pipelines_parameter_does_not_show_the_global(kc):
    """Inside a pipeline, a parameter or a name its body binds that shadows a notebook name
    is described as what it is there (the notebook's tensor of that name was shown); a word
    in a comment shows no value; the notebook's name elsewhere shows its value."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh3_t = randn([3], seed=1)\nnh3_t")
    assert reply["status"] == "ok", reply
    code = ("pipeline nh3_q(nh3_t: tensor[n], k):\n    for nh3_i in 0..k:\n"
            "        let nh3_u = nh3_t * 2.0\n    return nh3_t + nh3_u\n"
            "let r = nh3_t  // nh3_t here\n")
    at = code.index("return nh3_t") + len("return nh")
    assert _inspect(kc, code, at) == (True, "nh3_t: a parameter of pipeline nh3_q: tensor[n]")
    at = code.index("+ nh3_u") + 4
    assert _inspect(kc, code, at) == (True, "nh3_u: a name pipeline nh3_q binds (line 3)")
    found, text = _inspect(kc, code, code.index("let r = nh3_t") + 10)
    assert found and text.startswith("nh3_t: Tensor f32[3] on cpu"), text
    assert _inspect(kc, code, code.index("// nh3_t") + 5) == (False, "")


@pytest.mark.parametrize("line", ["%device vulkan:7", "%device   nosuch:1  // a note",
                                  '%device "gl:9"'])
def test_kernel_a_device_magic_naming_no_device_points_at_the_id(kc, line):
    """`%device ID` of an id no device has: the device error at the id on the cell's line,
    with its caret (it had no line, column or caret); the default device is unchanged."""
    from test_kernel_support import errors_of, execute, stdout_of

    reply, outputs = execute(kc, "let nh3_d = 1\n" + line + "\n")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLDeviceError", reply
    bad = line.split()[1]
    col = line.index(bad) + 1
    assert reply["evalue"].endswith(f"(line 2, column {col})"), reply["evalue"]
    (error,) = errors_of(outputs)
    text = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in error["traceback"]]
    assert text[1] == "   2 | " + line
    assert text[2].index("^") == text[1].index(bad) and text[2].count("^") == len(bad)
    reply, outputs = execute(kc, "%device")
    assert stdout_of(outputs).startswith("default device: cpu\n")


def test_zynml_device_naming_no_device_points_at_the_id(shell):
    result = shell.run_cell("%zynml_device   vulkan:7")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "device", err
    shown, caret = err.render().splitlines()[1:3]
    assert shown == "   1 | %zynml_device   vulkan:7"
    assert caret.index("^") == shown.index("vulkan:7") and caret.count("^") == 8
    assert state.notebook_session().default_device == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_an_error_of_a_block_run_after_its_pipeline_returned_says_where_it_was_called(
        shell, device):
    """A pipeline's block that runs only when the calling cell reads its result (fused with
    the cell's own block) fails after the call returned: its error still names the call
    (it had no frame); with a divisor that is never 0 the cell computes numpy's values."""
    x = np.arange(8, dtype=np.int32)
    shell.user_ns.update(x=x, z=np.zeros(8, np.int32), w=np.arange(1, 9, dtype=np.int32))
    try:
        cell(shell, "%%compute\npipeline f(v, d):\n    return compute(v, d) {\n"
                    "        for i in 0..n:\n            out[i] = v[i] / d[i]\n    }\n")
        body = ("let y = f(x, {d})\nlet r = compute(y) {{\n    for i in 0..n:\n"
                "        out[i] = y[i] + 1\n}}\nr\n")
        at = f'%%compute @device("{device}")\nlet q = 0\n'
        result = shell.run_cell(at + body.format(d="z"))
        err = result.error_in_exec
        assert isinstance(err, ZynMLError) and err.kind == "runtime", err
        assert frames(err) == [(5, 22, "   5 |             out[i] = v[i] / d[i]"),
                               (3, 9, "3 | let y = f(x, z)")]
        got = cell(shell, at + body.format(d="w"))
        np.testing.assert_array_equal(np.asarray(got), x // np.arange(1, 9) + 1)
    finally:
        for name in ("z", "w", "r", "q"):
            shell.user_ns.pop(name, None)


def test_kernel_inspecting_a_pipeline_shows_its_signature_as_written(kc):
    """(it showed `<pipeline nh3_sig(v, k)>`, the declared types left out)"""
    from test_kernel_support import execute

    sig = "nh3_sig(v: tensor[n, m], k: int, s) -> tensor"
    reply, _ = execute(kc, f"pipeline {sig}:\n    return v * k\n")
    assert reply["status"] == "ok", reply
    assert _inspect(kc, "nh3_sig(", 3) == (True, f"nh3_sig: Pipeline: <pipeline {sig}>")


def test_kernel_compare_reads_pythons_value_of_a_pipelines_global(kc):
    from test_kernel_support import errors_of, execute

    reply, _ = execute(kc, "let nh3_s = 2.0\npipeline nh3_h(v):\n    return v * nh3_s\n"
                           "let nh3_x = randn([16], seed=3)")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, "%python nh3_s = -1.5")
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "%%compare --devices cpu,cpu:native "
                                 "--repeat 1 --no-chart --result y --out nh3_cmp "
                                 "--numpy 'np.asarray(nh3_x, np.float64) * -1.5'\n"
                                 "let y = nh3_h(nh3_x)\n")
    assert reply["status"] == "ok", (reply, [e["evalue"] for e in errors_of(outputs)])
    reply, outputs = execute(kc, "%%python\nrows = nh3_cmp.rows\n"
                                 "assert [r.device for r in rows] == ['cpu', 'cpu:native', "
                                 "'numpy'], rows\n"
                                 "assert all(not r.error and r.max_diff < 1e-5 for r in rows), rows")
    assert reply["status"] == "ok", reply.get("evalue")


@pytest.mark.parametrize("bad", ["print", "range(3)", "{1, 2}"])
def test_a_pipelines_global_python_rebound_to_a_value_zynml_cannot_use(shell, bad):
    """Python rebinds a pipeline's global to a function, a range, a set: the call is a type
    error at the pipeline's read of it, with the call's frame (it ran silently on the
    session's old 2.0); rebound to a number again, it computes with it."""
    x = np.linspace(-1, 1, 5).astype(np.float32)
    shell.user_ns["x"] = x
    cell(shell, "%%compute\nlet scale = 2.0\npipeline f(v):\n    return v * scale\n")
    shell.run_cell(f"scale = {bad}")
    result = shell.run_cell("%%compute\nlet y = f(x)\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "type", err
    assert "`scale` is bound to a Python value of type" in err.message
    assert frames(err) == [(4, 16, "   4 |     return v * scale"), (2, 9, "2 | let y = f(x)")]
    assert "y" not in shell.user_ns
    shell.run_cell("scale = -3.0")
    np.testing.assert_allclose(np.asarray(cell(shell, "%%compute\nf(x)\n")), x * -3.0,
                               rtol=1e-6)


def test_kernel_a_pipelines_global_python_rebound_to_a_value_zynml_cannot_use(kc):
    from test_kernel_support import execute, results_of

    reply, _ = execute(kc, "let nh3_k = 2.0\npipeline nh3_m(v):\n    return v * nh3_k\n")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, "%python nh3_k = print\nlet nh3_o = nh3_m(1.5)")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLTypeError", reply
    assert reply["evalue"].startswith("`nh3_k` is bound to a Python value of type")
    assert reply["evalue"].endswith("(line 3, column 16)"), reply["evalue"]
    reply, outputs = execute(kc, "%python nh3_k = 4.0\nnh3_m(1.5)")
    assert reply["status"] == "ok", reply
    (data,) = results_of(outputs)
    assert data["text/plain"] == str(1.5 * 4.0)
