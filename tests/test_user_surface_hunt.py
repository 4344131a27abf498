"""Mistakes a new user makes on the notebook surface (the ZynML kernel through the Jupyter
messaging protocol, the magics in an IPython shell): each gives its ZynML error or usage
error pointing at the place in the cell, and the state before it stays usable."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("ipykernel")

from test_kernel_support import (errors_of, execute, kernel_client,  # noqa: E402
                                 stdout_of)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def kc():
    yield from kernel_client()


def _error(outputs) -> tuple[dict, str]:
    (err,) = errors_of(outputs)
    return err, ANSI.sub("", "\n".join(err["traceback"]))


# ------------------------------------------------------------------- %time / %timeit

def test_time_line_error_points_at_the_column_in_the_cell(kc):
    cell = "%time let a = undefined_q + 1"
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "error"
    err, text = _error(outputs)
    column = cell.index("undefined_q") + 1
    assert f"line 1, column {column}" in reply["evalue"]
    # the line shown is the cell's own, with the caret under the name in it
    shown = [ln for ln in text.splitlines() if ln.startswith("   1 | ")]
    assert shown == ["   1 | " + cell]
    caret = text.splitlines()[text.splitlines().index(shown[0]) + 1]
    assert caret.index("^") - len("   1 | ") == column - 1
    assert caret.count("^") == len("undefined_q")


def test_timeit_line_error_on_a_later_line_points_into_that_line(kc):
    cell = "let ok_before = 2\n%timeit -n 1 -r 1 let b = ok_before +\nok_before"
    reply, outputs = execute(kc, cell)
    assert reply["status"] == "error"
    err, text = _error(outputs)
    line2 = cell.splitlines()[1]
    assert f"line 2, column {len(line2) + 1}" in reply["evalue"]
    assert "   2 | " + line2 in text
    reply, outputs = execute(kc, "ok_before")
    assert reply["status"] == "ok"


def test_timeit_options_without_a_space_are_read(kc):
    reply, outputs = execute(kc, "%timeit -n3 -r2 let b = 2")
    assert reply["status"] == "ok", outputs
    assert "median of 2 runs, 3 loops each" in stdout_of(outputs)


def test_timeit_with_no_repeats_runs_once_and_reports(kc):
    reply, outputs = execute(kc, "%timeit -r 0 -n 1 let b = 2")
    assert reply["status"] == "ok", [e["evalue"] for e in errors_of(outputs)]
    assert "median of 1 run" in stdout_of(outputs)
    reply, outputs = execute(kc, "%%timeit -r 0 -n 1\nlet b = 3")
    assert reply["status"] == "ok", [e["evalue"] for e in errors_of(outputs)]


# ---------------------------------------------------------------------- is_complete

def _is_complete(kc, code):
    msg_id = kc.is_complete(code)
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


@pytest.mark.parametrize("code", ['let url = "http://example.com"',
                                  'let s = "a // b:"',
                                  'let t = "time:" // a comment',
                                  "let q = 'ftp://host/x:'"])
def test_is_complete_a_string_holding_slashes_is_complete(kc, code):
    assert _is_complete(kc, code)["status"] == "complete"
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", [e["evalue"] for e in errors_of(outputs)]


def test_is_complete_a_comment_after_a_colon_still_asks_for_the_body(kc):
    reply = _is_complete(kc, 'for i in 0..3:   // "loop"')
    assert reply["status"] == "incomplete" and reply["indent"] == "    "



@pytest.mark.parametrize("code,status,indent", [
    # the docs' own example: the last line continues a bracket, it opens no block
    ("let shape = [2,\n             3]", "complete", None),
    ("let q = [zeros([2]),\n ones([2])]\nq", "complete", None),
    ("let m = max(1,\n        2)", "complete", None),
    # inside a block the statement's first line decides: the block may go on
    ("for i in 0..3:\n    let z = [1,\n        2]", "incomplete", "    "),
    ("for i in 0..3:\n    let z = [1,\n        2]\n\n", "complete", None),
    ("for i in 0..3:\n    let z = i", "incomplete", "    "),
])
def test_is_complete_a_bracket_continued_on_an_indented_line(kc, code, status, indent):
    reply = _is_complete(kc, code)
    assert reply["status"] == status, reply
    if indent is not None:
        assert reply["indent"] == indent


# ----------------------------------------------------------------------------- magics

AXPY = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * y[i] + 1.0
}
"""


@pytest.fixture
def shell():
    np = pytest.importorskip("numpy")
    from IPython.core.interactiveshell import InteractiveShell

    import zynbook
    from zynbook.kernel import state

    sh = InteractiveShell.instance()
    state.set_notebook_session(zynbook.Session(device="cpu"))
    sh.run_line_magic("load_ext", "zynbook")
    sh.user_ns.update(x=np.arange(8, dtype=np.float32), y=np.full(8, 0.5, np.float32))
    yield sh
    for name in ("x", "y", "z"):
        sh.user_ns.pop(name, None)
    state.set_notebook_session(None)


def test_zynml_timeit_unknown_option_is_a_usage_error(shell, capsys):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="-n"):
        shell.run_cell_magic("zynml_timeit", "-n 3", AXPY)
    out = capsys.readouterr()
    assert "compute()" not in out.out + out.err


def test_zynml_timeit_annotation_error_shows_the_magic_line(shell, capsys):
    from zynbook.errors import ZynMLNameError

    line = '-r 2 @device("cpu")  @nosuch'
    with pytest.raises(ZynMLNameError) as info:
        shell.run_cell_magic("zynml_timeit", line, AXPY)
    err = info.value
    shown = f"%%zynml_timeit {line}"
    assert err.line == 1 and err.column == shown.index("@nosuch") + 1
    lines = err.render().splitlines()
    assert lines[1] == "   1 | " + shown
    assert lines[2].index("^") - len("   1 | ") == shown.index("@nosuch")


def test_compare_result_naming_nothing_the_cell_binds_is_a_usage_error(shell):
    from IPython.core.error import UsageError

    cell = ("let v = randn([n], seed=3)\nlet y = compute(v) {\n    for i in 0..n:\n"
            "        out[i] = v[i] * 2.0\n}\n")
    # a misspelt name left the difference column empty ('-') with no word why
    with pytest.raises(UsageError, match=r"--result yy: the cell binds no `yy` \(it binds: v, y\)"):
        shell.run_cell_magic("compare", "--devices cpu --sizes n=8 --repeat 1 --no-chart "
                                        "--result yy", cell)
    shell.run_cell_magic("compare", "--devices cpu --sizes n=8 --repeat 1 --no-chart "
                                    "--result y --out cmp_hunt", cell)
    (row,) = shell.user_ns.pop("cmp_hunt").rows
    assert row.max_diff == 0.0 and not row.error


# ------------------------------------------------------------------------- completion

def _complete(kc, code):
    msg_id = kc.complete(code, len(code))
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


def test_completion_after_a_tensor_dot_offers_what_zynml_reads(kc):
    reply, _ = execute(kc, "let hunt_t = randn([4, 3], seed=1)\n"
                           "%python import numpy as np\n"
                           "%python hunt_arr = np.ones((2, 3), np.float32)")
    assert reply["status"] == "ok"
    want = {"shape", "dtype", "device", "ndim", "size", "T", "to_device", "reshape", "sum",
            "mean", "max", "min", "numpy"}
    for name in ("hunt_t", "hunt_arr"):
        matches = _complete(kc, f"let q = {name}.")["matches"]
        # the Python object's own attributes (nbytes, data, summary, ...) are name errors
        # in ZynML; to_device, T and the methods were left out
        assert set(matches) == want, (name, matches)
        for attr in matches:
            reply, outputs = execute(kc, f"let q = {name}.{attr}")
            assert reply["status"] == "ok", (attr, [e["evalue"] for e in errors_of(outputs)])
    assert _complete(kc, "let q = hunt_t.to_d")["matches"] == ["to_device"]


def test_completion_and_inspection_know_dtypes_and_constants(kc):
    assert {"f16", "f32", "f64"} <= set(_complete(kc, "let z = zeros([2], dtype=f")["matches"])
    assert _complete(kc, "let z = f3")["matches"] == ["f32"]
    assert "pi" in _complete(kc, "let c = p")["matches"]
    assert "bfloat16" in _complete(kc, "let d = bfl")["matches"]
    for word, part in (("f32", "dtype"), ("half", "f16"), ("pi", "3.14159")):
        msg_id = kc.inspect(f"let d = {word}", len(f"let d = {word}"))
        reply = kc.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=30)
        content = reply["content"]
        assert content["found"], word
        assert part in content["data"]["text/plain"], (word, content["data"])


def _inspect(kc, code):
    msg_id = kc.inspect(code, len(code))
    reply = kc.get_shell_msg(timeout=30)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=30)
    return reply["content"]


def test_completion_after_other_values_offers_only_what_zynml_reads(kc):
    reply, _ = execute(kc, "let hunt_dev = compute_devices()[0]\n"
                           "let hunt_s = randn([2, 3], seed=1)\n"
                           "let hunt_list = [1, 2]")
    assert reply["status"] == "ok"
    fields = _complete(kc, "let q = hunt_dev.")["matches"]
    assert "id" in fields and "keys" not in fields and "get" not in fields
    # a shape is a list in a cell: no Python tuple or list methods after its dot
    assert _complete(kc, "let q = hunt_s.shape.")["matches"] == []
    assert _complete(kc, "let q = hunt_list.")["matches"] == []
    for field in fields:
        reply, outputs = execute(kc, f"let q = hunt_dev.{field}")
        assert reply["status"] == "ok", (field, [e["evalue"] for e in errors_of(outputs)])
    # shift-tab on a shape shows what the cell gives (a list), and a record's field
    content = _inspect(kc, "hunt_s.shape")
    assert content["found"] and "[2, 3]" in content["data"]["text/plain"]
    content = _inspect(kc, "hunt_dev.id")
    assert content["found"] and "cpu" in content["data"]["text/plain"]


# -------------------------------------------------------------------------- %inspect

TWO_BLOCKS = """let hx = randn([8, 4], seed=2)
let hy = compute(hx) {
    for i in 0..n, j in 0..m:
        out[i, j] = hx[i, j] * 2.0
}
let hs = compute(hy) {
    @kernel reduce(+)
    for i in 0..n, j in 0..m:
        yield hy[i, j]
}
"""


def test_inspect_a_kernel_in_a_language_in_either_order(kc):
    reply, _ = execute(kc, TWO_BLOCKS)
    assert reply["status"] == "ok"
    for args in ("reduce_l6 cir", "cir reduce_l6", "--full reduce_l6 cir"):
        reply, outputs = execute(kc, f"%inspect {args}")
        assert reply["status"] == "ok"
        (bundle,) = [m["content"]["data"] for m in outputs if m["msg_type"] == "display_data"]
        text = bundle["text/plain"]
        # the kernel named, in the language named (the language was dropped when it came
        # second, the kernel when the language came first)
        assert "--- cir: the whole text ---" in text, (args, text[:300])
        assert "reduce_l6" in text and "kernel_l2" not in text, (args, text[:300])
    reply, outputs = execute(kc, "%inspect reduce_l6 cir wgsl")
    assert reply["status"] == "error"
    shown = reply.get("evalue", "") + "".join(
        m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    assert "one language at a time" in shown, (reply, outputs)


def test_completion_of_device_ids_and_inspect_words(kc):
    reply = _complete(kc, "%device cp")
    assert {"cpu", "cpu:native"} <= set(reply["matches"])
    assert reply["cursor_start"] == len("%device ")
    reply = _complete(kc, "%device cpu:n")
    assert reply["matches"] == ["cpu:native"] and reply["cursor_start"] == len("%device ")
    code = 'let y = compute(x) @device("cpu:'
    reply = _complete(kc, code)
    assert reply["matches"] == ["cpu:native"] and reply["cursor_start"] == len(code) - 4
    assert "auto" in _complete(kc, 'config { compute_device: "a')["matches"]
    reply, _ = execute(kc, TWO_BLOCKS)
    assert reply["status"] == "ok"
    assert _complete(kc, "%inspect red")["matches"] == ["reduce_l6"]
    assert {"cir", "cir-passes"} <= set(_complete(kc, "%inspect reduce_l6 ci")["matches"])
    assert "wgsl" in _complete(kc, "%inspect wg")["matches"]


def test_compute_writes_back_names_the_cell_assigns(shell):
    import numpy as np

    shell.run_cell_magic("compute", "", "var hunt_acc = 0\nfor k in 0..3:\n    hunt_acc += k")
    assert shell.user_ns["hunt_acc"] == 3
    # a later cell assigns the name an earlier one bound: the notebook sees the new value
    assert shell.run_cell_magic("compute", "", "hunt_acc += 10\nhunt_acc") == 13
    assert shell.user_ns["hunt_acc"] == 13
    shell.run_cell_magic("compute", "", "for k in 0..2:\n    if k > 0:\n        hunt_acc += 100")
    assert shell.user_ns["hunt_acc"] == 113
    # the notebook rebinding it is what the next cell starts from
    shell.user_ns["hunt_acc"] = 1000
    assert shell.run_cell_magic("compute", "", "hunt_acc += 1\nhunt_acc") == 1001
    assert shell.user_ns["hunt_acc"] == 1001
    # a tensor assigned whole
    shell.run_cell_magic("compute", "", "var hunt_v = x * 1.0\nhunt_v = hunt_v + 1.0")
    np.testing.assert_allclose(shell.user_ns["hunt_v"], np.arange(8) + 1.0)
    shell.run_cell_magic("compute", "", "hunt_v = hunt_v * 2.0")
    np.testing.assert_allclose(shell.user_ns["hunt_v"], (np.arange(8) + 1.0) * 2)
    for name in ("hunt_acc", "hunt_v"):
        shell.user_ns.pop(name, None)


def test_compute_writes_back_names_bound_in_host_blocks(shell):
    shell.run_cell_magic("compute", "", "if true:\n    let hunt_z = 5\n"
                                        "for k in 0..3:\n    var hunt_w = k * 2")
    assert shell.user_ns.pop("hunt_z") == 5
    assert shell.user_ns.pop("hunt_w") == 4


def test_compare_result_may_name_a_let_inside_an_if(shell):
    cell = ("let v = randn([n], seed=3)\nif true:\n    let y = compute(v) {\n"
            "        for i in 0..n:\n            out[i] = v[i] * 2.0\n    }\n")
    shell.run_cell_magic("compare", "--devices cpu --sizes n=8 --repeat 1 --no-chart "
                                    "--result y --out cmp_hunt", cell)
    (row,) = shell.user_ns.pop("cmp_hunt").rows
    assert row.max_diff == 0.0 and not row.error


def test_compute_does_not_read_a_name_the_notebook_deleted(shell):
    import numpy as np

    from zynbook.errors import ZynMLNameError

    shell.user_ns["hunt_big"] = np.ones(4, np.float32)
    shell.run_cell_magic("compute", "", "let hunt_y = hunt_big * 2.0")
    shell.run_cell("del hunt_big")
    with pytest.raises(ZynMLNameError, match="hunt_big"):
        shell.run_cell_magic("compute", "", "let hunt_y2 = hunt_big + 1.0")
    shell.run_cell("del hunt_y")
    with pytest.raises(ZynMLNameError, match="hunt_y"):
        shell.run_cell_magic("compute", "", "hunt_y")
    # bound again, it is read again
    shell.user_ns["hunt_big"] = np.full(4, 3.0, np.float32)
    np.testing.assert_allclose(shell.run_cell_magic("compute", "", "hunt_big + 1.0"), 4.0)
    shell.user_ns.pop("hunt_big", None)


@pytest.mark.parametrize("value", [range(3), {1, 2}, (lambda t: t), None, b"ab"])
def test_compute_a_notebook_value_zynml_cannot_use_is_a_type_error(shell, value):
    from zynbook.errors import ZynMLTypeError

    # a name the session never held: the cell said `unknown name`, though the notebook
    # binds it
    shell.user_ns["hunt_rr"] = value
    with pytest.raises(ZynMLTypeError, match=f"`hunt_rr` is bound to .*{type(value).__name__}") \
            as info:
        shell.run_cell_magic("compute", "", "let hunt_q = 1\nlet hunt_q2 = hunt_rr")
    assert (info.value.line, info.value.column) == (3, len("let hunt_q2 = ") + 1)
    assert "hunt_rr" in info.value.render().splitlines()[1]
    shell.user_ns.pop("hunt_rr")
    shell.user_ns.pop("hunt_q", None)


def test_compute_an_unknown_name_the_notebook_lacks_is_still_a_name_error(shell):
    from zynbook.errors import ZynMLNameError

    with pytest.raises(ZynMLNameError, match="unknown name `hunt_absent`"):
        shell.run_cell_magic("compute", "", "let hunt_q = hunt_absent")


def test_kernel_a_python_value_zynml_cannot_use_is_a_type_error(kc):
    reply, outputs = execute(kc, "%python hunt_r = range(3)\nlet hunt_q = hunt_r")
    assert reply["status"] == "error"
    assert reply["ename"] == "ZynMLTypeError", reply
    assert "`hunt_r` is bound to a Python value of type `range`" in reply["evalue"]
    assert "(line 2, column 14)" in reply["evalue"]
    reply, outputs = execute(kc, "%time let hunt_q = hunt_r")
    assert reply["ename"] == "ZynMLTypeError" and "(line 1, column 20)" in reply["evalue"]


def test_zynml_timeit_does_not_read_a_name_the_notebook_deleted(shell):
    import numpy as np

    from zynbook.errors import ZynMLNameError

    shell.user_ns["hunt_tbig"] = np.ones(4, np.float32)
    shell.run_cell_magic("zynml_timeit", "-r 1", "let hunt_ty = hunt_tbig * 2.0")
    shell.run_cell("del hunt_tbig")
    with pytest.raises(ZynMLNameError, match="unknown name `hunt_tbig`"):
        shell.run_cell_magic("zynml_timeit", "-r 1", "let hunt_ty2 = hunt_tbig + 1.0")


@pytest.mark.parametrize("value", [range(3), (lambda t: t), None])
def test_zynml_timeit_a_notebook_value_zynml_cannot_use_is_a_type_error(shell, value):
    from zynbook.errors import ZynMLTypeError

    shell.user_ns["hunt_tr"] = value
    with pytest.raises(ZynMLTypeError, match=f"`hunt_tr` is bound to .*{type(value).__name__}") \
            as info:
        shell.run_cell_magic("zynml_timeit", "-r 1", "let hunt_tq = 1\nlet hunt_tq2 = hunt_tr")
    assert (info.value.line, info.value.column) == (3, len("let hunt_tq2 = ") + 1)
    shell.user_ns.pop("hunt_tr")
