"""The notebook surface, a fourth pass: the timing widget after Python deleted a name,
completion inside string literals, `%time` given timeit's options, and %%compute on arrays of
odd shapes and dtypes; values checked against numpy computed here."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("IPython")

import zynbook  # noqa: E402
from compute_testing import wanted_devices  # noqa: E402
from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)
from zynbook.errors import ZynMLError  # noqa: E402
from zynbook.kernel import state  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "cuda", "metal"))]
shell = shell_fixture(("x", "y", "z", "scale", "f", "g"))


# ------------------------------------------------ the timing widget after `del x`

DOUBLE = "%%compute\nlet y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\n"
PIPELINE = ("%%compute\nlet scale = 2.0\npipeline f(v):\n    return compute(v) {\n"
            "        for i in 0..n:\n            out[i] = v[i] * scale\n    }\n")


def test_timing_compare_a_name_python_deleted_is_an_unknown_name(shell):
    """`del x` in a cell, then `TimingWidget.compare("x * 2.0")`: every device ran on the
    array the notebook session kept (the stale value, no error); now the name is unknown,
    as the next cell says, and the current binding is what runs once Python binds it."""
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import TimingWidget

    shell.user_ns["x"] = np.ones(4, np.float32)
    cell(shell, DOUBLE)
    shell.run_cell("del x")
    devices = [d for d in DEVICES if d in ("cpu", "cpu:native")]
    widget = TimingWidget.compare("x * 2.0", devices, repeat=1)
    for device in devices:
        assert widget.results[device].get("error", "").startswith(
            "ZynML name error at line 1, column 1: unknown name `x`"), widget.results[device]
    # a pipeline's global Python deleted: unknown at its line in the pipeline
    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    cell(shell, PIPELINE)
    shell.run_cell("del scale")
    widget = TimingWidget.compare("f(x)", devices, repeat=1)
    for device in devices:
        assert "unknown name `scale`" in widget.results[device].get("error", ""), \
            widget.results[device]
    # rebound to a value ZynML cannot use: not run on the kept 2.0 (a pipeline's global
    # of such a value is unknown to it, as in %%compare); a name the source reads: said so
    shell.run_cell("scale = print")
    widget = TimingWidget.compare("f(x)", devices, repeat=1)
    for device in devices:
        assert "unknown name `scale`" in widget.results[device].get("error", ""), \
            widget.results[device]
    widget = TimingWidget.compare("f(x) * scale", devices, repeat=1)
    for device in devices:
        assert "`scale` is bound to a Python value of type `builtin_function_or_method`" in \
            widget.results[device].get("error", ""), widget.results[device]
    # bound again: Python's value
    shell.run_cell("scale = 3.0")
    widget = TimingWidget.compare("let y = f(x)\ny", devices, repeat=1)
    assert all("error" not in r for r in widget.results.values()), widget.results
    session = zynbook.Session("cpu")
    got = session.run("f(x)", **widget._notebook_env("f(x)"))
    np.testing.assert_array_equal(np.asarray(got), np.arange(4, dtype=np.float32) * 3.0)


# ------------------------------------------------------ completion inside a string

def _complete(kc, code, cursor=None):
    cursor = len(code) if cursor is None else cursor
    msg_id = kc.complete(code, cursor)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    content = reply["content"]
    return content["matches"], content["cursor_start"], content["cursor_end"]


@pytest.mark.parametrize("code", [
    'let nh4_s = "nh4_v',
    "let nh4_s = 'a b nh4_v",
    'let nh4_s = "it\\"s nh4_v',
    'let nh4_s = "a" + "nh4_v',
    'let nh4_s = "a // nh4_v',
    '%time let nh4_s = "nh4_v',
    'let nh4_s = "le',
])
def test_kernel_completes_no_names_inside_a_string(kc, code):
    """Inside `"..."` the kernel offered ZynML's names (`nh4_value`, keywords such as
    `let`): the text of a string is not code."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh4_value = 1.5\nlet nh4_view = 2")
    assert reply["status"] == "ok", reply
    assert _complete(kc, code) == ([], len(code), len(code))


@pytest.mark.parametrize("code,want", [
    ('let nh4_s = "ab" + nh4_v', ["nh4_value", "nh4_view"]),
    ("let nh4_s = 'x' + nh4_va", ["nh4_value"]),
    ('let nh4_s = "a//b"\nnh4_vi', ["nh4_view"]),
])
def test_kernel_completes_names_after_a_closed_string(kc, code, want):
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh4_value = 1.5\nlet nh4_view = 2")
    assert reply["status"] == "ok", reply
    prefix = code.split("+ ")[-1].split("\n")[-1]
    assert _complete(kc, code) == (want, len(code) - len(prefix), len(code))


@pytest.mark.parametrize("code", ['let y = compute(x) @device("c',
                                  'let y = compute(x) @device(["vulkan:0", "c',
                                  "    @device(['c"])
def test_kernel_completes_device_ids_in_a_device_annotations_string(kc, code):
    """Still offered there (in the list form too, where names were offered)."""
    matches, start, end = _complete(kc, code)
    assert "cpu" in matches and all(m.startswith("c") for m in matches), matches
    assert (start, end) == (len(code) - 1, len(code))


# ----------------------------------------------------------- %time given -n or -r

@pytest.mark.parametrize("code,bad", [
    ("%time -n 3 let nh4_t = nh4_t + 1", "-n 3"),
    ("%time -n3 let nh4_t = nh4_t + 1", "-n3"),
    ("%time -r 2 -n 5 let nh4_t = nh4_t + 1", "-r 2"),
    ("%time -n 3\nlet nh4_t = nh4_t + 1", "-n 3"),
])
def test_kernel_time_refuses_timeits_options(kc, code, bad):
    """`%time -n 3 CODE` dropped `-n 3` and ran CODE once (the count asked for was not
    honoured, and nothing said so): %time takes no options, as `%time -p` is told."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh4_t = 10")
    assert reply["status"] == "ok", reply
    reply, _ = execute(kc, code)
    assert reply["status"] == "error" and reply["ename"] == "UsageError", reply
    assert reply["evalue"] == f"%time takes no options, only the code to time; not `{bad}`"
    # the code did not run: nh4_t is as it was
    reply, outputs = execute(kc, "nh4_t")
    (result,) = [m for m in outputs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "10"


def test_kernel_time_of_code_starting_with_a_negation_runs_it(kc):
    """`-n3` where it parses as code (a negated name) is code, as for %timeit."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let n3 = 4.5")
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "%time -n3 * 2.0")
    assert reply["status"] == "ok", reply
    (result,) = [m for m in outputs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == str(-4.5 * 2.0)


# ------------------------------------------------------ the device picker's value

def test_device_picker_takes_a_second_id_and_shows_an_unknown_one_in_red():
    """`picker.value = "webgpu:0"` (an id `vulkan:0` answers to, which `%device` takes) and
    `picker.value = "vulkan:7"` raised the dropdown's TraitError `Invalid selection`: the
    first is now the default device, the second is refused as a choice that fails is."""
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import DevicePicker

    session = zynbook.Session(device="cpu")
    picker = DevicePicker(session=session)
    aliases = [(d["id"], i) for d in zynbook.compute_devices() for i in d.get("ids", ())
               if i != d["id"]]
    x = np.linspace(-1, 1, 9).astype(np.float32)
    block = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 - 1.0\n}\ny"
    for device, alias in aliases[:1]:
        picker.value = alias
        assert session.default_device == alias and picker.value == alias
        got = session.run(block, x=x)
        assert [ln.device for ln in session.launches] == [device]
        np.testing.assert_allclose(np.asarray(got, np.float64),
                                   x.astype(np.float64) * 2.0 - 1.0, rtol=1e-6)
    picker.value = "cpu"
    picker.value = "vulkan:7"
    assert session.default_device == "cpu" and picker.value == "cpu"
    assert "no device `vulkan:7`" in picker.status.value and "b00020" in picker.status.value


# ------------------------------------------- a magic line of options, not annotations

@pytest.mark.parametrize("first,bad", [("%%compute --device vulkan:0", "-"),
                                       ("%%compute vulkan:0", "vulkan"),
                                       ('%%compute @nofuse cpu', "cpu")])
def test_a_magic_line_of_words_not_annotations_says_an_annotation_was_expected(shell, first,
                                                                              bad):
    """The syntax error named the grammar's rule: `expected '{', annot, end of line`."""
    result = shell.run_cell(first + "\nlet y = 2.0\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "syntax", err
    assert (err.line, err.column) == (1, first.index(bad, len("%%compute")) + 1)
    assert err.message.startswith(f"unexpected {bad!r}; expected ") and \
        "an annotation" in err.message and "annot," not in err.message, err.message
    shown, caret = err.render().splitlines()[1:3]
    assert shown == "   1 | " + first and caret.index("^") == shown.index(bad, 15)
    assert "y" not in shell.user_ns


# ---------------------------------------------- %%compare's difference of NaN and inf

def test_compare_rows_agreeing_on_nan_and_inf_differ_by_nothing(shell):
    """sqrt of a negative is NaN on every device and in numpy: each row said the largest
    difference was `nan` (NaN - NaN); a torch expression of bf16 said none at all (numpy
    cannot read bf16)."""
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 0.0, 4.0, np.inf, -np.inf, 2.25], np.float32)
    shell.user_ns["x"] = x
    devices = [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0")]
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x.astype(np.float64)) * 2.0
    assert np.isnan(want[0]) and np.isnan(want[4]) and want[3] == np.inf
    cell(shell, f"%%compare --devices {','.join(devices)} --repeat 1 --no-chart "
                "--numpy 'np.sqrt(x) * 2.0' "
                "--torch 'torch.sqrt(torch.as_tensor(x)).to(torch.bfloat16) * 2' --out z\n"
                "let y = compute(x) {\n    for i in 0..n:\n        out[i] = sqrt(x[i]) * 2.0\n}\n")
    rows = shell.user_ns["z"].rows
    assert [r.device for r in rows] == devices + ["numpy", "torch"]
    for r in rows:
        assert not r.error and r.max_diff == 0.0, r
    assert torch is not None


@pytest.mark.parametrize("got,ref,want", [
    ([np.nan, 1.0], [np.nan, 1.5], 0.5),
    ([np.nan, 1.0], [2.0, 1.0], np.inf),            # a NaN where the reference has a value
    ([np.inf, -np.inf], [np.inf, -np.inf], 0.0),
    ([np.inf, 0.0], [-np.inf, 0.0], np.inf),
    (np.float32(np.nan), np.float64(np.nan), 0.0),  # 0-d
    ([1.0, 2.0], [1.0, 2.0, 3.0], np.inf),          # shapes differ
])
def test_compare_max_diff_treats_nan_and_inf_as_numpy_equal_nan_does(got, ref, want):
    from zynbook.magics.compare import _max_diff

    assert _max_diff(np.asarray(got), np.asarray(ref)) == want


# ------------------------------------------------ the timing widget's devices as text

@pytest.mark.parametrize("devices", ["cpu", "cpu, cpu:native", "cpu:native,vulkan:0"])
def test_timing_compare_takes_device_ids_as_text(devices):
    """`TimingWidget.compare(src, "cpu")` ran on devices `c`, `p` and `u` (each failing):
    a string is one id, or ids between commas as %%compare's --devices takes them."""
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import TimingWidget

    want = [d.strip() for d in devices.split(",")]
    if not set(want) <= set(DEVICES):
        pytest.skip("a device of these is not here")
    session = zynbook.Session("cpu")
    x = np.linspace(-3, 3, 16).astype(np.float32)
    session.run("let x = xs", xs=x)
    source = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * x[i]\n}\ny"
    widget = TimingWidget.compare(source, devices, repeat=1, session=session)
    assert list(widget.results) == want
    for device in want:
        result = widget.results[device]
        assert "error" not in result, result
        assert [ln.device for ln in result["launches"]] == [device]
    got = zynbook.Session(want[-1]).run(source, x=x)
    np.testing.assert_allclose(np.asarray(got, np.float64), x.astype(np.float64) ** 2,
                               rtol=1e-6)


@pytest.mark.parametrize("option,said", [("--repeat -3", "a whole number; not `-3`"),
                                         ("-r -1", "a whole number; not `-1`"),
                                         ("--repeat 2.5", "invalid int value: '2.5'")])
def test_compare_a_repeat_that_is_not_a_count_is_a_usage_error(shell, option, said):
    """`--repeat -3` ran the cell once on each device, as if it were a count."""
    from IPython.core.error import UsageError

    shell.user_ns["x"] = np.ones(3, np.float32)
    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("compare", f"--devices cpu {option} --no-chart --out z",
                             "let y = x * 2.0\n")
    assert said in str(info.value)
    assert "z" not in shell.user_ns
    # 0 runs once, as %timeit -r 0 does
    shell.run_cell_magic("compare", "--devices cpu --repeat 0 --no-chart --result y "
                                    "--numpy 'x * 2.0' --out z", "let y = x * 2.0\n")
    rows = shell.user_ns["z"].rows
    assert [len(r.times) for r in rows] == [1, 1] and [r.max_diff for r in rows] == [0.0, 0.0]


def _inspect(kc, code, cursor):
    msg_id = kc.inspect(code, cursor)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    content = reply["content"]
    assert content["status"] == "ok", content
    return content["found"], content["data"].get("text/plain", "")


def test_kernel_inspecting_a_word_inside_a_string_shows_no_value(kc):
    """Shift-Tab on `nh4_value` inside `"..."` showed the notebook's value of that name (a
    word in a comment already showed none); outside the string it still does."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh4_value = 1.5\nlet nh4_view = 2")
    assert reply["status"] == "ok", reply
    code = 'let nh4_s = "see nh4_value" + \'nh4_view\'\nlet nh4_r = nh4_value'
    for word in ('see nh4_value"', "'nh4_view'"):
        at = code.index(word) + len(word) // 2
        assert _inspect(kc, code, at) == (False, "")
    found, text = _inspect(kc, code, code.rindex("nh4_value") + 3)
    assert found and text == "nh4_value: float: 1.5", text


# ------------------------------------------------ a comment after a line magic's words

@pytest.mark.parametrize("comment", ["  # the fast one", " // the fast one"])
def test_zynml_device_and_inspect_end_at_a_comment(shell, capsys, comment):
    """`%zynml_device cpu:native  # why` looked for a device `cpu:native  # why` (IPython
    passes a Python comment on to a line magic); the kernel's %device ends at `//`."""
    want = [d for d in DEVICES if d != "cpu"][:1] or ["cpu"]
    device = want[0]
    x = np.arange(5, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, f"%zynml_device {device}{comment}")
    assert state.notebook_session().default_device == device
    cell(shell, "%%compute\nlet y = compute(x) {\n    for i in 0..n:\n"
                "        out[i] = x[i] * 2.0 + 1.0\n}\n")
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64), x * 2.0 + 1.0)
    assert [ln.device for ln in state.notebook_session().launches] == [device]
    capsys.readouterr()
    cell(shell, f"%zynml_inspect zynml{comment}")
    out = capsys.readouterr().out
    assert "--- zynml: the whole text ---" in out and "x[i] * 2.0 + 1.0" in out, out
    # an id no device has, before a comment: the caret under the id alone
    line = f"%zynml_device vulkan:9{comment}"
    err = shell.run_cell(line).error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "device", err
    assert "no device `vulkan:9`" in err.message and (err.line, err.column) == (1, 15)
    shown, caret = err.render().splitlines()[1:3]
    assert shown == "   1 | " + line and caret == " " * (7 + 14) + "^" * len("vulkan:9")
    assert state.notebook_session().default_device == device


@pytest.mark.parametrize("note", ["  # a quick look", "  // a quick look"])
def test_compare_ends_its_line_at_a_comment(shell, note):
    """`%%compare ... # note` was a usage error (`unrecognized arguments: # note`); a `#`
    or `//` inside a quoted expression is the expression's."""
    x = np.arange(8, dtype=np.float32)          # (x * 4 // 2 is x * 2)
    shell.user_ns["x"] = x
    cell(shell, "%%compare --devices cpu --repeat 1 --no-chart --result y --out z "
                "--numpy 'x * 4.0 // 2.0 # in numpy'" + note + "\nlet y = x * 2.0\n")
    rows = shell.user_ns["z"].rows
    assert [r.device for r in rows] == ["cpu", "numpy"]
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows


# --------------------------------------------- indentation errors on tab-indented lines

@pytest.mark.parametrize("body,line,said", [
    ("let a = 1\n\tlet b = 2\n", 3, "unexpected indentation"),
    ("for i in 0..2:\n\t\tlet a = i\n\tlet b = 2\n", 4, "matches no enclosing block"),
    ("let y = compute(x) {\n\t\tfor i in 0..n:\n\t\t\tout[i] = x[i]\n\tlet q = 1\n}\n", 5,
     "indented left of its block"),
])
def test_an_indentation_error_on_a_tab_indented_line_points_at_its_first_character(
        shell, body, line, said):
    """The column counted a tab as the 8 columns of indentation it stands for: the caret
    sat far right of the line's first character (column 9 of `\\tlet b = 2`)."""
    shell.user_ns["x"] = np.ones(3, np.float32)
    err = shell.run_cell("%%compute\n" + body).error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "syntax" and said in err.message, err
    text = body.splitlines()[line - 2]
    tabs = len(text) - len(text.lstrip("\t"))
    assert (err.line, err.column) == (line, tabs + 1)
    shown, caret = err.render().splitlines()[1:3]
    assert shown == f"{line:>4} | " + text
    assert caret == " " * 7 + "\t" * tabs + "^"


# ------------------------------------------------------ a `//` note after a timer

def test_kernel_timers_followed_by_a_note_time_the_rest_of_the_cell(kc):
    """`%timeit -n 1 -r 2  // why` timed the note (an empty program) and ran the rest of
    the cell once, untimed; `%time // why` likewise; `%%time // why` was a usage error
    (`not // why`). A note ends the magic's line, as on ZynML's lines."""
    from test_kernel_support import execute, stdout_of

    def value(code):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "ok", reply
        (result,) = [m for m in outputs if m["msg_type"] == "execute_result"]
        return result["content"]["data"]["text/plain"], stdout_of(outputs)

    bump = "nh4_k[0] = nh4_k[0] + 1.0\nnh4_k[0]"
    reply, _ = execute(kc, "var nh4_k = zeros([2])")
    assert reply["status"] == "ok", reply
    # the warm-up run and 2 runs of 1 loop: three times
    reply, outputs = execute(kc, "%timeit -n 1 -r 2  // bump it\n" + bump)
    assert reply["status"] == "ok", reply
    assert "(median of 2 runs, 1 loop each" in stdout_of(outputs), outputs
    got, _ = value("nh4_k[0]")
    assert float(got.split()[-1].strip("[]")) == 3.0, got
    block = ("let nh4_y = compute(nh4_k) {\n    for i in 0..n:\n        out[i] = nh4_k[i] * 2.0\n}\n"
             "nh4_y")
    for timer in ("%time // the block below", "%%time // the whole cell"):
        got, out = value(timer + "\n" + block)
        # the block's launch is in the timer's table
        assert out.startswith("Wall time:") and "\nkernel_l" in out, out
        assert got.splitlines()[-1].split() == ["[6.", "0.]"], got


# ------------------------------------- a Python name in the magic line's annotations

DOUBLE_Y = ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 - 0.5\n}\n"
            "y\n")


@pytest.mark.parametrize("magic", ["compute", "zynml_timeit -r 1"])
def test_a_device_held_in_a_python_name_on_the_magic_line_is_used(shell, magic):
    """`%%compute @device(dev)` with `dev = "vulkan:0"` in Python: the name was not given
    to the run, and the error said a `str` cannot be used, under an empty line 1."""
    x = np.linspace(-2, 2, 11).astype(np.float32)
    shell.user_ns["x"] = x
    first = f"%%{magic} @device(dev)"
    for device in [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0")]:
        shell.user_ns["dev"] = device
        shell.user_ns.pop("y", None)
        cell(shell, first + "\n" + DOUBLE_Y)
        assert [ln.device for ln in state.notebook_session().launches] == [device]
        # (%%zynml_timeit writes nothing back to Python: the session's value)
        got = state.notebook_session().namespace["y"]
        np.testing.assert_allclose(np.asarray(got, np.float64),
                                   x.astype(np.float64) * 2.0 - 0.5, rtol=1e-6)
    # an id no device has, a value ZynML cannot use, a name not bound: on the magic line
    at = first.index("dev)") + 1
    for value, kind, said in [("vulkan:9", "device", "no device `vulkan:9`"),
                              (print, "type", "`dev` is bound to a Python value of type "
                                              "`builtin_function_or_method`")]:
        shell.user_ns["dev"] = value
        err = shell.run_cell(first + "\n" + DOUBLE_Y).error_in_exec
        assert isinstance(err, ZynMLError) and err.kind == kind and said in err.message, err
        assert err.line == 1 and err.column in (at, first.index("@device") + 1), err
        assert err.render().splitlines()[1] == "   1 | " + first
    shell.user_ns.pop("dev")
    err = shell.run_cell(first + "\n" + DOUBLE_Y).error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "name", err
    assert "unknown name `dev`" in err.message and (err.line, err.column) == (1, at)
    assert err.render().splitlines()[1] == "   1 | " + first


# ----------------------------------------------- a stage one of the kernels does not have

def test_inspect_a_stage_a_kernel_lacks_says_so(shell, capsys):
    """`%zynml_inspect fusion` with a kernel the fusion pass never met printed its heading
    `--- fusion: the whole text ---` over nothing; the kernel that has it shows it."""
    x = np.arange(8, dtype=np.float32)
    shell.user_ns["x"] = x
    got = cell(shell, "%%compute\nlet y = compute(x) {\n    for i in 0..n:\n"
                      "        out[i] = x[i] * 2.0\n}\nlet z = compute(y) {\n    for i in 0..n:\n"
                      "        out[i] = y[i] + 1.0\n}\nz\n")
    np.testing.assert_array_equal(np.asarray(got), x * 2.0 + 1.0)
    first, second = [k.name for k in state.notebook_session().last_kernels]
    capsys.readouterr()
    cell(shell, "%zynml_inspect fusion")
    out = capsys.readouterr().out
    assert f"--- fusion: none for {first} (its stages are listed above) ---" in out, out
    shown = out.split(f"{second} = z")[1]
    assert "--- fusion: the whole text ---" in shown and f"{first} -> {second}" in shown, out
    from zynbook.kernel.display import code_bundle

    bundle = code_bundle(state.notebook_session().last_kernels, (), f"{first} fusion")
    assert "<i>fusion: none for " + first in bundle["text/html"]


def test_compare_torch_expressions_see_bf16_tensors_as_bf16(shell):
    """The torch expression reads a notebook's bf16 tensor and the cell's bf16 result as
    bf16 tensors, as torch computes with them (the cell's was widened to f32, and reading
    the notebook's through numpy widened it too)."""
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 1.00390625, 3.0, -2.5], dtype=torch.bfloat16)
    shell.user_ns["x"] = x
    seen = {}
    shell.user_ns["seen"] = seen
    cell(shell, "%%compare --devices cpu --repeat 1 --no-chart --result y --out z "
                "--torch 'seen.setdefault(\"dtypes\", (x.dtype, y.dtype)) and x * 3'\n"
                "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 3.0\n}\n")
    assert seen["dtypes"] == (torch.bfloat16, torch.bfloat16)
    want = (x.float().numpy().astype(np.float64) * 3.0)
    want_bf16 = torch.tensor(want, dtype=torch.bfloat16).float().numpy()
    rows = shell.user_ns["z"].rows
    assert [r.device for r in rows] == ["cpu", "torch"]
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows
    # the reference both rows matched: bf16's rounding of x * 3
    got = zynbook.Session("cpu").run("let y = compute(x) {\n    for i in 0..n:\n"
                                     "        out[i] = x[i] * 3.0\n}\ny", x=x)
    np.testing.assert_array_equal(np.asarray(got, np.float64), want_bf16)
    shell.user_ns.pop("seen")


def test_kernel_inspecting_a_field_of_a_python_array_shows_what_a_cell_reads(kc):
    """`xa.shape` of a numpy array Python holds was shown as numpy's tuple and `xa.dtype`
    as dtype('float32'); a cell reads the list [2, 3] and `f32` (as for a ZynML tensor)."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "%python import numpy as np, torch\n"
                           "%python nh4_a = np.zeros((2, 3), np.float32)\n"
                           "%python nh4_t = torch.ones(4, 2, dtype=torch.bfloat16).T")
    assert reply["status"] == "ok", reply
    want = {"nh4_a.shape": "list: [2, 3]", "nh4_a.dtype": "str: 'f32'", "nh4_a.ndim": "int: 2",
            "nh4_t.shape": "list: [2, 4]", "nh4_t.dtype": "str: 'bf16'",
            "nh4_t.size": "int: 8", "nh4_t.device": "str: 'cpu'"}
    for code, text in want.items():
        assert _inspect(kc, code, len(code)) == (True, f"{code}: {text}")
    # what a cell reads there
    reply, outputs = execute(kc, "[nh4_a.shape, nh4_t.shape, nh4_t.dtype]")
    (result,) = [m for m in outputs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == "[[2, 3], [2, 4], 'bf16']"


# ------------------------- comparing a cell that reads a tensor a block placed on a device

def test_compare_runs_each_row_on_its_device_when_an_input_was_placed_on_another(shell):
    """`v` computed by an earlier `@device("vulkan:0")` block is placed there: each fresh
    session of %%compare and of the timing widget ran the cell's block on vulkan:0 (where
    its input was placed), under the rows and bars of `cpu` and `cpu:native`."""
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import TimingWidget

    if "vulkan:0" not in DEVICES:
        pytest.skip("no vulkan:0 here")
    x = np.linspace(-1, 1, 12).astype(np.float32)
    shell.user_ns["x"] = x
    cell(shell, '%%compute @device("vulkan:0")\nlet v = compute(x) {\n    for i in 0..n:\n'
                "        out[i] = x[i] * 2.0\n}\n")
    assert shell.user_ns["v"].device == "vulkan:0"
    block = "let y = compute(v) {\n    for i in 0..n:\n        out[i] = v[i] + 1.0\n}\n"
    devices = [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0")]
    widget = TimingWidget.compare(block + "y", devices, repeat=1)
    for device in devices:
        result = widget.results[device]
        assert "error" not in result, result
        assert [ln.device for ln in result["launches"]] == [device]
    cell(shell, f"%%compare --devices {','.join(devices)} --repeat 1 --no-chart --result y "
                "--numpy 'np.asarray(x, np.float64) * 2.0 + 1.0' --out z\n" + block)
    rows = shell.user_ns["z"].rows
    assert [r.device for r in rows] == devices + ["numpy"]
    for r in rows:
        assert not r.error and r.max_diff is not None and r.max_diff < 1e-6, r
    # a host clock timed the CPU rows (the GPU's timestamps did)
    assert {r.device: r.clock for r in rows if r.device.startswith("cpu")} == \
        {d: "host-clock" for d in devices if d.startswith("cpu")}
    shell.user_ns.pop("v")


def test_kernel_inspecting_a_torch_tensor_names_torch(kc):
    """A torch tensor Python holds was described as `Tensor: tensor([...])`, the word the
    kernel shows ZynML's own tensors with; now as a numpy array is: library, dtype, shape."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "%python import torch\n"
                           "%python nh4_u = torch.zeros(3, 5, dtype=torch.float16)[:, 1:]")
    assert reply["status"] == "ok", reply
    assert _inspect(kc, "nh4_u", 5) == (True, "nh4_u: torch.Tensor torch.float16[3, 4] on cpu")


def test_kernel_inspecting_a_compute_blocks_own_name_does_not_show_the_notebooks(kc):
    """Inside a compute block, its accumulator `nh4_acc` and loop variable `nh4_i` were
    shown as the notebook's values of those names (an int 5, an int 7); the block binds
    them (as a pipeline's own names were already told apart). Outside it, the notebook's."""
    from test_kernel_support import execute

    reply, _ = execute(kc, "let nh4_x = randn([4], seed=1)\nlet nh4_i = 7\nlet nh4_acc = 5")
    assert reply["status"] == "ok", reply
    code = ("let nh4_y = compute(nh4_x) {\n    var nh4_acc = 0.0\n    for nh4_i in 0..n:\n"
            "        nh4_acc += nh4_x[nh4_i]\n    out[0] = nh4_acc\n}\n"
            "let nh4_z = nh4_acc + nh4_i\n")
    block = "a name the compute block of line 1 binds"
    for at, want in [(code.index("var nh4_acc") + 6, f"nh4_acc: {block} (line 2)"),
                     (code.index("nh4_acc +=") + 2, f"nh4_acc: {block} (line 2)"),
                     (code.index("[nh4_i]") + 3, f"nh4_i: {block} (line 3)"),
                     (code.index("= nh4_acc\n}") + 4, f"nh4_acc: {block} (line 2)"),
                     (code.index("nh4_z = nh4_acc") + 10, "nh4_acc: int: 5"),
                     (code.index("+ nh4_i") + 4, "nh4_i: int: 7")]:
        assert _inspect(kc, code, at) == (True, want), code[at - 5:at + 5]
    # and what the block computes is the sum of the notebook's nh4_x
    from test_kernel_support import stdout_of

    reply, _ = execute(kc, code)
    assert reply["status"] == "ok", reply
    reply, outputs = execute(kc, "%python import numpy as np\n%python print(float(np.asarray("
                                 "nh4_y)[0]), float(np.asarray(nh4_x, np.float64).sum()), nh4_z)")
    got, want, z = stdout_of(outputs).split()
    assert abs(float(got) - float(want)) < 1e-5 and z == "12"


# ------------------------------------------------- a write into an array of a dict

@pytest.mark.parametrize("device", DEVICES)
def test_a_write_into_an_array_of_a_notebook_dict_leaves_python_a_dict(shell, device):
    """`p.w[0] = 50.0` on a dict of arrays (weights, a state dict) replaced Python's `p`
    with ZynML's read-only record of tensors; Python keeps a dict of arrays holding the
    write, as a list stays a list, and the next cell reads it."""
    torch = pytest.importorskip("torch")
    w = np.arange(4, dtype=np.float32)
    params = {"w": w, "b": 1.5, "inner": {"t": torch.ones(3)}}
    shell.user_ns["p"] = params
    at = f'%%compute @device("{device}")\n'
    cell(shell, at + "p.w[0] = 50.0\np.inner.t[2] = -2.0\n")
    got = shell.user_ns["p"]
    assert type(got) is dict and list(got) == ["w", "b", "inner"] and got["b"] == 1.5
    assert type(got["inner"]) is dict
    want = w.astype(np.float64)
    want[0] = 50.0
    np.testing.assert_array_equal(np.asarray(got["w"], np.float64), want)
    np.testing.assert_array_equal(np.asarray(got["inner"]["t"], np.float64), [1.0, 1.0, -2.0])
    np.testing.assert_array_equal(w, np.arange(4))         # the notebook's own array
    y = cell(shell, at + "let y = compute(p.w) {\n    for i in 0..n:\n"
                         "        out[i] = p.w[i] * 2.0 + p.b\n}\ny\n")
    np.testing.assert_array_equal(np.asarray(y, np.float64), want * 2.0 + 1.5)
    shell.user_ns.pop("p")
