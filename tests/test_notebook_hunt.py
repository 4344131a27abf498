"""The notebook surface as a user meets it: the ZynML kernel through the Jupyter messaging
protocol and the magics in an IPython shell, driven with the mistakes and habits of a
notebook (deleting names, names IPython itself uses, odd magic arguments); each leaves the
kernel usable and says what went wrong where."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("ipykernel")

from test_kernel_support import (errors_of, execute, kernel_client,  # noqa: E402
                                 results_of, stdout_of)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def kc():
    yield from kernel_client()


def _ok(kc, code):
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", (code, reply, [e["evalue"] for e in errors_of(outputs)])
    return outputs


def _value(kc, code) -> str:
    (data,) = results_of(_ok(kc, code))
    return data["text/plain"]


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

# ------------------------------------------------------------- names Python deleted

def test_kernel_a_name_python_deleted_is_unknown_to_the_next_cell(kc):
    assert _value(kc, "let nh_keep = 7\nnh_keep") == "7"
    reply, outputs = execute(kc, "%python del nh_keep\nlet nh_other = 1\nnh_keep")
    # the cell read the 7 the session kept, though the notebook had deleted the name
    assert reply["status"] == "error" and reply["ename"] == "ZynMLNameError", reply
    assert reply["evalue"] == "unknown name `nh_keep` (line 3, column 1)"
    # bound again from Python, it is read again
    assert _value(kc, "%python nh_keep = 11\nnh_keep + 1") == "12"


def test_kernel_reset_forgets_the_zynml_names(kc):
    _ok(kc, "let nh_reset = randn([3], seed=4)")
    _ok(kc, "%reset -f")
    reply, _ = execute(kc, "let nh_after = nh_reset * 2.0")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLNameError", reply
    assert reply["evalue"] == "unknown name `nh_reset` (line 1, column 16)"
    assert _value(kc, "let nh_fresh = 2\nnh_fresh") == "2"


# ---------------------------------------------------------- names IPython uses itself

@pytest.mark.parametrize("name", ["get_ipython", "In", "exit"])
def test_kernel_binding_an_ipython_name_leaves_the_kernel_working(kc, name):
    assert _value(kc, f"let {name} = 3\n{name} + 1") == "4"
    # every later cell calls get_ipython(): binding it in Python broke them all with a
    # Python TypeError
    x = np.arange(4, dtype=np.float32)
    text = _value(kc, "%python import numpy as np\n%python nh_x = np.arange(4, dtype=np.float32)\n"
                      "let nh_y = nh_x * 2.0 + 1.0\nnh_y")
    assert str(x * 2 + 1) in text, text
    out = stdout_of(_ok(kc, f"%python print(type({name}).__name__)"))
    assert out.strip() != "int", out
    # the ZynML name keeps its ZynML value
    assert _value(kc, f"{name} * 2") == "6"


def test_compute_binding_an_ipython_name_leaves_the_shell_working(shell):
    x = np.linspace(-1, 1, 6).astype(np.float32)
    shell.user_ns["nh_x"] = x
    got = shell.run_cell_magic("compute", "", "let get_ipython = 3\nlet nh_y = nh_x * 3.0\nnh_y")
    np.testing.assert_allclose(got, x * 3.0)
    assert callable(shell.user_ns["get_ipython"])
    # IPython's own transforms call get_ipython(): a later magic line still runs
    result = shell.run_cell("%time nh_z = 1")
    assert result.success, result.error_in_exec
    for name in ("nh_x", "nh_y", "nh_z"):
        shell.user_ns.pop(name, None)


# ------------------------------------------------------------------ timer options

def _usage(kc, code):
    reply, outputs = execute(kc, code)
    assert reply["status"] == "error" and reply["ename"] == "UsageError", (code, reply)
    return reply["evalue"]


@pytest.mark.parametrize("code,bad", [
    # `-n 1 -r 1` after an option %%timeit does not take were ignored too: the cell ran 7
    # runs of as many loops as fit in 0.2 s
    ("%%timeit -q -n 1 -r 1\nlet nh_t = 1", "-q"),
    ("%%timeit -n 1 -r 1 -o\nlet nh_t = 1", "-o"),
    ("%%timeit -n many\nlet nh_t = 1", "-n many"),
    ("%%timeit let nh_t = 1\nlet nh_u = 2", "let nh_t = 1"),
])
def test_kernel_cell_timeit_options_it_does_not_take_are_a_usage_error(kc, code, bad):
    evalue = _usage(kc, code)
    assert evalue == (f"%%timeit takes -n N and -r R (whole numbers) on its line; `{bad}` "
                      "is not one of them")


@pytest.mark.parametrize("code,message", [
    ("%timeit -q let nh_t = 1",
     "%timeit takes -n N and -r R (whole numbers) before the code; `-q` is not one of them"),
    ("%timeit -n abc let nh_t = 1",
     "%timeit takes -n N and -r R (whole numbers) before the code; `-n abc` is not one of "
     "them"),
    ("%time -p let nh_t = 1", "%time takes no options, only the code to time; not `-p`"),
    ("%%time -n 3\nlet nh_t = 1",
     "%%time takes nothing on its line, it times the cell below it; not `-n 3`"),
])
def test_kernel_timer_options_they_do_not_take_are_a_usage_error(kc, code, message):
    # they were read as ZynML: `unexpected 'let'` at the code after the option
    assert _usage(kc, code) == message


def test_kernel_timeit_of_a_negation_is_code_not_an_option(kc):
    x = np.array([1.5, -2.0, 3.25], np.float32)
    _ok(kc, "%python import numpy as np\n%python nh_q = np.array([1.5, -2.0, 3.25], np.float32)")
    out = stdout_of(_ok(kc, "%timeit -n 1 -r 1 -nh_q * 2.0"))
    assert "median of 1 run, 1 loop each" in out
    assert _value(kc, "%time -nh_q * 2.0").endswith(str(-x * 2.0))
    _ok(kc, "%python del nh_q")


# --------------------------------------------------------------------- completion

def _shell_reply(kc, msg_id):
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


def test_kernel_completes_every_id_a_device_answers_to(kc):
    import zynbook

    aliases = [i for d in zynbook.compute_devices() for i in d.get("ids", ()) if i != d["id"]]
    if not aliases:
        pytest.skip("no device here answers to a second id")
    for alias in aliases:
        prefix = alias[:-1]
        for code in (f"%device {prefix}", f'let y = compute(x) @device("{prefix}'):
            content = _shell_reply(kc, kc.complete(code, len(code)))
            # `webgpu:0` (the id `vulkan:0` also answers to) was never offered
            assert alias in content["matches"], (code, content)
            assert content["cursor_start"] == len(code) - len(prefix)
        # and the completed id is one %device takes
        _ok(kc, f"%device {alias}")
    _ok(kc, "%device cpu")


# ----------------------------------------------------------------------- %%compare

COMPARE_CELL = ("let v = randn([n], seed=3)\nlet y = compute(v) {\n    for i in 0..n:\n"
                "        out[i] = v[i] * 2.0\n}\n")


@pytest.mark.parametrize("line,reason", [
    # an unclosed quotation was a Python ValueError out of shlex, with a stack
    ("--devices cpu --sizes n=4 --numpy 'np.asarray(v", "No closing quotation"),
    # argparse's reason went to stderr, the usage error said only the usage
    ("--devices cpu --sizes n=4 --bogus", "unrecognized arguments: --bogus"),
    ("--devices cpu --repeat x", "argument --repeat/-r: invalid int value: 'x'"),
    ("--devices cpu --numpy", "argument --numpy: expected one argument"),
])
def test_compare_a_bad_magic_line_is_a_usage_error_saying_why(shell, capsys, line, reason):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as info:
        shell.run_cell_magic("compare", line, COMPARE_CELL)
    message = str(info.value)
    assert message.startswith("%%compare: ") and reason in message, message
    assert "usage: %%compare [--devices a,b]" in message
    assert capsys.readouterr().err == ""
    # the magic still runs a good line
    shell.run_cell_magic("compare", "--devices cpu --sizes n=4 --repeat 1 --no-chart "
                                    "--result y --numpy 'np.asarray(v) * 2' --out nh_cmp",
                         COMPARE_CELL)
    rows = shell.user_ns.pop("nh_cmp").rows
    assert [r.device for r in rows] == ["cpu", "numpy"]
    assert all(r.max_diff == 0.0 and not r.error for r in rows), rows



# ------------------------------------------------- a ZynML write into a Python array

def test_kernel_a_write_into_a_python_array_is_one_value_under_its_name(kc):
    x = np.arange(4, dtype=np.float32)
    _ok(kc, "%python import numpy as np\n%python nh_w = np.arange(4, dtype=np.float32)\n"
            "%python nh_orig = nh_w")
    want = x.copy()
    want[0] = 50.0
    assert _value(kc, "nh_w[0] = 50.0\nnh_w").endswith(str(want))
    # Python's name holds what the cell's does (it kept the array the write copied, and
    # no later cell saw what Python wrote into that array)
    out = stdout_of(_ok(kc, "%python print(np.asarray(nh_w).tolist(), nh_orig.tolist())"))
    assert out.strip() == f"{want.tolist()} {x.tolist()}", out
    # a later ZynML write lands in the same value, seen from both sides
    want[1] = 9.0
    _ok(kc, "nh_w[1] = 9.0")
    out = stdout_of(_ok(kc, "%python print(np.asarray(nh_w).tolist())"))
    assert out.strip() == str(want.tolist()), out
    # Python binding a new array is what the next cell reads
    _ok(kc, "%python nh_w = np.full(4, 3.0, np.float32)")
    assert _value(kc, "nh_w * 2.0").endswith(str(np.full(4, 6.0, np.float32)))


def test_kernel_an_array_only_read_stays_pythons_and_its_writes_are_seen(kc):
    _ok(kc, "%python import numpy as np\n%python nh_r = np.arange(3, dtype=np.float32)")
    _ok(kc, "let nh_r2 = nh_r * 2.0")
    out = stdout_of(_ok(kc, "%python print(type(nh_r).__name__)"))
    assert out.strip() == "ndarray"
    _ok(kc, "%python nh_r[2] = 10.0")
    assert _value(kc, "nh_r * 1.0").endswith(str(np.array([0.0, 1.0, 10.0], np.float32)))


# ------------------------------------------------------------------------ widgets

def test_device_picker_describes_a_default_set_under_a_second_id():
    pytest.importorskip("ipywidgets")
    import zynbook
    from zynbook.widgets import DevicePicker

    devices = [{"id": "cpu", "type": "cpu", "name": "x86_64", "backend": "cpu"},
               {"id": "vulkan:0", "ids": ["webgpu:0", "vulkan:0"], "type": "gpu",
                "name": "Test GPU", "backend": "vulkan", "driver": "d1"}]
    session = zynbook.Session(device="cpu")
    picker = DevicePicker(session=session, devices=devices)
    # `%device webgpu:0` (the id vulkan:0 also answers to), as an announcement
    picker.show_device("webgpu:0")
    assert picker.value == "webgpu:0"
    labels = dict((v, k) for k, v in picker.dropdown.options)
    # the option was the bare id, and the status said nothing of the device
    assert labels["webgpu:0"] == "webgpu:0 · Test GPU (gpu)"
    assert "driver: d1" in picker.status.value and "ids" not in picker.status.value


# ------------------------------------------------------- a comment on the magic line

TRIPLE = "let nh_q = compute(nh_x) {\n    for i in 0..n:\n        out[i] = nh_x[i] * 3.0\n}\nnh_q"


@pytest.mark.parametrize("magic,line", [
    ("compute", '@device("cpu")  // on the reference, to compare'),
    ("compute", "// no annotations, only a note"),
    ("compute", '@device("cpu:native") @nofuse // "quoted" // twice'),
    ("zynml_timeit", '-r 2 @device("cpu") // timed on the reference'),
])
def test_a_comment_ends_the_magic_line(shell, capsys, magic, line):
    x = np.linspace(-2, 2, 7).astype(np.float32)
    shell.user_ns["nh_x"] = x
    # the comment swallowed the brace the annotations are parsed before: a syntax error
    got = shell.run_cell_magic(magic, line, TRIPLE)
    if magic == "compute":
        np.testing.assert_allclose(got, x * 3.0)
    else:
        assert "per run (median of 2" in capsys.readouterr().out
    shell.user_ns.pop("nh_x")
    shell.user_ns.pop("nh_q", None)


def test_a_string_holding_slashes_on_the_magic_line_is_no_comment(shell):
    from zynbook.errors import ZynMLDeviceError

    shell.user_ns["nh_x"] = np.ones(3, np.float32)
    line = '@device("web//gpu") // a typo'
    with pytest.raises(ZynMLDeviceError) as info:
        shell.run_cell_magic("compute", line, TRIPLE)
    shown = "%%compute " + line
    assert (info.value.line, info.value.column) == (1, shown.index('"web//gpu"') + 1)
    assert "web//gpu" in info.value.message
    shell.user_ns.pop("nh_x")


def test_kernel_a_cell_rebinding_a_python_name_hands_python_the_new_value(kc):
    _ok(kc, "%python import numpy as np\nvar nh_v = 1")
    # Python rebinds it, the cell adds to it: Python kept 10 while the cell's name said 11
    assert _value(kc, "%python nh_v = 10\nnh_v += 1\nnh_v") == "11"
    assert stdout_of(_ok(kc, "%python print(nh_v)")).strip() == "11"
    # `let` of a name Python bound to an array
    a = np.arange(3, dtype=np.float32)
    _ok(kc, "%python nh_a = np.arange(3, dtype=np.float32)\nlet nh_a = nh_a * 2.0 + 1.0")
    out = stdout_of(_ok(kc, "%python print(np.asarray(nh_a).tolist())"))
    assert out.strip() == str((a * 2.0 + 1.0).tolist())
    # a rebinding the cell does not reach leaves Python's array as it was
    _ok(kc, "%python nh_b = np.arange(3, dtype=np.float32)\n%python nh_b0 = nh_b\n"
            "if nh_b[0] > 5.0:\n    let nh_b = nh_b * 0.0\nlet nh_c = nh_b * 1.0")
    out = stdout_of(_ok(kc, "%python print(type(nh_b).__name__, nh_b is nh_b0)"))
    assert out.strip() == "ndarray True"


def test_compare_rates_a_device_named_by_its_second_id(shell):
    import zynbook
    from zynbook.kernel.costs import device_info

    pairs = [(d["id"], i) for d in zynbook.compute_devices() for i in d.get("ids", ())
             if i != d["id"]]
    if not pairs:
        pytest.skip("no device here answers to a second id")
    first, alias = pairs[0]
    # the record of the device, not {'id': alias, 'type': ''}: no peak, no % peak
    assert device_info(alias) is device_info(first) or device_info(alias) == device_info(first)
    shell.run_cell_magic("compare", f"--devices {first},{alias} --sizes n=4096 --repeat 1 "
                                    "--no-chart --result y --out nh_cmp", COMPARE_CELL)
    rows = shell.user_ns.pop("nh_cmp").rows
    assert [r.device for r in rows] == [first, alias]
    assert all(not r.error and r.max_diff is not None and r.max_diff < 1e-5 for r in rows), rows
    assert (rows[0].peak_share is None) == (rows[1].peak_share is None), rows
    assert rows[1].peak_share is not None and rows[1].bound, rows[1]


def test_timing_compare_calls_a_pipeline_the_notebook_defined():
    pytest.importorskip("ipywidgets")
    from IPython.core.interactiveshell import InteractiveShell

    import zynbook
    from zynbook.kernel import state
    from zynbook.widgets import TimingWidget

    session = zynbook.Session(device="cpu")
    state.set_notebook_session(session)
    try:
        session.run("pipeline nh_dbl(v):\n    return compute(v) {\n        for i in 0..n:\n"
                    "            out[i] = v[i] * 2.0 + 1.0\n    }\n"
                    "let nh_x = randn([8], seed=1)")
        x = np.asarray(session.namespace["nh_x"])
        # (in a notebook the names a cell binds go to Python: a name Python lacks was
        # deleted there, and is unknown to the runs)
        user_ns = InteractiveShell.instance().user_ns
        user_ns.update(nh_dbl=session.namespace["nh_dbl"], nh_x=session.namespace["nh_x"])
        widget = TimingWidget.compare("let nh_y = nh_dbl(nh_x)\nnh_y", ["cpu", "cpu:native"],
                                      repeat=1)
        for device, result in widget.results.items():
            # `unknown name nh_dbl`: the notebook's pipelines were left out of the names
            assert "error" not in result, (device, result.get("error"))
            assert [ln.device for ln in result["launches"]] == [device]
        got = zynbook.Session("cpu:native").run("nh_dbl(nh_x)", nh_dbl=session.namespace["nh_dbl"],
                                                nh_x=x)
        np.testing.assert_allclose(np.asarray(got), x * 2.0 + 1.0, rtol=1e-6)
    finally:
        state.set_notebook_session(None)
        for name in ("nh_dbl", "nh_x"):
            InteractiveShell.instance().user_ns.pop(name, None)


def test_compare_calls_a_pipeline_an_earlier_cell_defined(shell):
    shell.run_cell_magic("compute", "", "pipeline nh_pdbl(v):\n    return compute(v) {\n"
                                        "        for i in 0..n:\n"
                                        "            out[i] = v[i] * 2.0 - 0.5\n    }")
    cell = "let v = randn([n], seed=1)\nlet y = nh_pdbl(v)\n"
    # `unknown name nh_pdbl`: the notebook's pipelines were not passed to the cell
    shell.run_cell_magic("compare", "--devices cpu,cpu:native --sizes n=64 --repeat 1 "
                                    "--no-chart --result y --numpy 'np.asarray(v) * 2.0 - 0.5' "
                                    "--out nh_cmp", cell)
    rows = shell.user_ns.pop("nh_cmp").rows
    assert [r.device for r in rows] == ["cpu", "cpu:native", "numpy"]
    for r in rows:
        assert not r.error and r.max_diff is not None and r.max_diff < 1e-5, r
    shell.user_ns.pop("nh_pdbl")


def test_compute_reads_a_zynml_value_under_another_python_name(shell):
    shell.run_cell_magic("compute", "", "let nh_rec = compute_devices()[0]\n"
                                        "pipeline nh_pf(v):\n    return v * 2.0 + 1.0")
    shell.user_ns["nh_rec2"] = shell.user_ns["nh_rec"]
    shell.user_ns["nh_pf2"] = shell.user_ns["nh_pf"]
    # `nh_rec2 is bound to a Python value of type Record, which a ZynML program cannot use`
    assert shell.run_cell_magic("compute", "", "nh_rec2.id") == "cpu"
    x = np.linspace(0, 1, 5).astype(np.float32)
    shell.user_ns["nh_x"] = x
    np.testing.assert_allclose(shell.run_cell_magic("compute", "", "nh_pf2(nh_x)"), x * 2 + 1,
                               rtol=1e-6)
    for name in ("nh_rec", "nh_rec2", "nh_pf", "nh_pf2", "nh_x"):
        shell.user_ns.pop(name)


def test_kernel_reads_a_zynml_value_under_another_python_name(kc):
    _ok(kc, "let nh_krec = compute_devices()[0]\npipeline nh_kpf(v):\n    return v * 2.0")
    assert _value(kc, "%python nh_krec2 = nh_krec\n%python nh_kpf2 = nh_kpf\nnh_krec2.id") \
        == "'cpu'"
    assert _value(kc, "nh_kpf2(3.5)") == "7.0"


def test_zynml_devices_marks_a_default_set_under_a_second_id(shell, capsys):
    import zynbook

    pairs = [(d["id"], i) for d in zynbook.compute_devices() for i in d.get("ids", ())
             if i != d["id"]]
    if not pairs:
        pytest.skip("no device here answers to a second id")
    first, alias = pairs[0]
    shell.run_line_magic("zynml_device", alias)
    try:
        capsys.readouterr()
        shell.run_line_magic("zynml_devices", "")
        out = capsys.readouterr().out
        marked = [ln for ln in out.splitlines() if ln.startswith("* ")]
        # no row was marked: the default's id is none of the listed ones
        assert len(marked) == 1 and marked[0].split()[1] == first, out
        assert f"(* default device: {alias})" in out
    finally:
        shell.run_line_magic("zynml_device", "cpu")


def test_kernel_completion_and_inspection_see_what_the_next_cell_reads(kc):
    _ok(kc, "let nh_comp_kept = 7\nlet nh_comp_gone = 8")
    matches = _shell_reply(kc, kc.complete("nh_comp_", len("nh_comp_")))["matches"]
    assert {"nh_comp_kept", "nh_comp_gone"} <= set(matches)
    _ok(kc, "%python del nh_comp_gone\n%python nh_comp_kept = 11")
    # the deleted name was still offered, and shift-tab showed the 7 the session kept
    matches = _shell_reply(kc, kc.complete("nh_comp_", len("nh_comp_")))["matches"]
    assert "nh_comp_gone" not in matches and "nh_comp_kept" in matches, matches
    content = _shell_reply(kc, kc.inspect("nh_comp_kept", len("nh_comp_kept")))
    assert content["found"] and content["data"]["text/plain"] == "nh_comp_kept: int: 11", \
        content
    content = _shell_reply(kc, kc.inspect("nh_comp_gone", len("nh_comp_gone")))
    assert not content["found"], content
    assert _value(kc, "nh_comp_kept + 1") == "12"


def test_compute_a_failing_rerun_does_not_bring_back_a_deleted_name(shell):
    from zynbook.errors import ZynMLNameError

    x = np.arange(4, dtype=np.float32)
    shell.user_ns["nh_in"] = x
    cell = "let nh_first = nh_in * 2.0\nlet nh_bad = nh_in + nh_missing_\nlet nh_late = nh_in * 3.0"
    shell.user_ns["nh_missing_"] = 1.0
    shell.run_cell_magic("compute", "", cell)
    np.testing.assert_allclose(shell.user_ns["nh_late"], x * 3.0)
    shell.run_cell("del nh_late\ndel nh_missing_")
    with pytest.raises(ZynMLNameError) as info:
        shell.run_cell_magic("compute", "", cell)
    assert (info.value.line, info.value.column) == (3, len("let nh_bad = nh_in + ") + 1)
    # the run failed before `let nh_late`: the name the notebook deleted came back
    assert "nh_late" not in shell.user_ns
    np.testing.assert_allclose(shell.user_ns["nh_first"], x * 2.0)
    for name in ("nh_in", "nh_first", "nh_bad"):
        shell.user_ns.pop(name, None)


def test_zynml_timeit_reads_no_option_from_a_comment(shell, capsys):
    from IPython.core.error import UsageError

    shell.user_ns["nh_x"] = np.ones(4, np.float32)
    # `-fast` in the note was an option it does not take; `-r 50` there set the repeats
    shell.run_cell_magic("zynml_timeit", '-r 2 @device("cpu") // was -r 50, try -fast', TRIPLE)
    assert "per run (median of 2;" in capsys.readouterr().out
    with pytest.raises(UsageError, match="`-q` is not one of them"):
        shell.run_cell_magic("zynml_timeit", "-r 2 -q // note", TRIPLE)
    shell.user_ns.pop("nh_x")
    shell.user_ns.pop("nh_q", None)


def test_kernel_device_and_inspect_magics_end_at_a_comment(kc):
    # `no device \`cpu:native // the compiled one\` here`
    out = stdout_of(_ok(kc, "%device cpu:native   // the compiled one"))
    assert "default device: cpu:native" in out
    x = np.arange(5, dtype=np.float32)
    text = _value(kc, "%python import numpy as np\n%python nh_dx = np.arange(5, dtype=np.float32)\n"
                      "let nh_dy = compute(nh_dx) {\n    for i in 0..n:\n"
                      "        out[i] = nh_dx[i] * 4.0\n}\nnh_dy")
    assert "on cpu:native" in text and str(x * 4.0) in text, text
    outputs = _ok(kc, "%inspect cir  // the loop nest")
    (bundle,) = results_of(outputs)
    assert "--- cir" in bundle["text/plain"], bundle["text/plain"][:300]
    _ok(kc, "%device cpu")
