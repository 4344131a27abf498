"""The ZynML Jupyter kernel, through the Jupyter messaging protocol."""
from __future__ import annotations

import os
import re
import sys
import time
import unittest

import pytest

pytest.importorskip("ipykernel")
jkt = pytest.importorskip("jupyter_kernel_test")

from jupyter_client.manager import start_new_kernel  # noqa: E402

from test_kernel_support import (TIMEOUT, errors_of, execute, install_kernelspec,  # noqa: E402
                                 kernel_json, results_of, stdout_of)

SPEC_DIR = None


def setUpModule():
    global SPEC_DIR
    SPEC_DIR = install_kernelspec()


X_2D = ("%python import numpy as np\n"
        "%python x = np.arange(6, dtype=np.float32).reshape(2, 3)\n")

DOUBLE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = x[i, j] * 2.0
}
"""


class ZynMLKernelTests(jkt.KernelTests):
    """The jupyter_kernel_test suite: kernel info, execution, display, errors, completion,
    inspection, is_complete."""

    kernel_name = "zynml"
    language_name = "zynml"
    file_extension = ".zyn"

    code_hello_world = 'print("hello, world")'
    code_stderr = '%python import sys; print("warning: low memory", file=sys.stderr)'
    code_generate_error = "let a = 1\nlet b = a + undefined_name"
    code_execute_result = [
        {"code": "let a = 6 * 7\na", "result": "42"},
        {"code": "2.5 * 4.0", "result": "10.0"},
        {"code": X_2D + DOUBLE + "y", "mime": "text/html"},
    ]
    code_display_data = [
        {"code": X_2D + DOUBLE + "%inspect", "mime": "text/html"},
    ]
    code_inspect_sample = "compute"
    code_clear_output = "%python from IPython.display import clear_output; clear_output()"
    supported_history_operations = ("tail", "search")
    code_history_pattern = "let a = 6 *"
    completion_samples = [
        {"text": "le", "matches": {"let", "len"}},
        {"text": "@ker", "matches": {"@kernel"}},
        {"text": "@as", "matches": {"@async"}},
        {"text": "let y = compute(x) {\n    @kernel elem", "matches": {"elementwise"}},
        {"text": "let q = rsq", "matches": {"rsqrt"}},
    ]
    complete_code_samples = [
        "let a = 1",
        DOUBLE,
        "%device cpu",
        "for i in 0..3:\n    let z = i\n\n",
    ]
    incomplete_code_samples = [
        "let y = compute(x) {",
        "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:",
        "for i in 0..3:",
        "let a = (1 +",
    ]
    invalid_code_samples = ["let = 3", "let a = 1 +* 2", "let a = )"]

    def test_language_info(self):
        self.flush_channels()
        self.kc.kernel_info()
        reply = self.kc.get_shell_msg(timeout=TIMEOUT)
        info = reply["content"]["language_info"]
        assert info["name"] == "zynml"
        assert info["mimetype"] == "text/x-zynml"
        assert info["file_extension"] == ".zyn"
        assert info["codemirror_mode"] == "zynml"
        assert info["pygments_lexer"] == "zynml"


@pytest.fixture(scope="module")
def kernel():
    km, kc = start_new_kernel(kernel_name="zynml", startup_timeout=60)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture
def kc(kernel):
    return kernel[1]


def test_kernelspec_names_this_interpreter():
    """A Jupyter from another environment must start the kernel where ZynBook is installed:
    the installed kernel.json names the interpreter by its absolute path, not `python`."""
    spec = kernel_json(SPEC_DIR)
    assert spec["argv"] == [sys.executable, "-m", "zynbook.kernel", "-f", "{connection_file}"]
    assert os.path.isabs(spec["argv"][0]) and os.access(spec["argv"][0], os.X_OK)
    assert spec["language"] == "zynml"
    assert spec["interrupt_mode"] == "signal"
    assert (SPEC_DIR / "logo-64x64.png").exists()


@pytest.mark.parametrize("args,user,prefix", [
    ([], False, None), (["--user"], True, None), (["--sys-prefix"], False, sys.prefix),
    (["--prefix", "/opt/env"], False, "/opt/env")])
def test_install_command_line(monkeypatch, capsys, args, user, prefix):
    from zynbook.kernel import kernelspec as inst

    calls = []
    monkeypatch.setattr(inst, "install", lambda **kw: calls.append(kw) or "/somewhere/zynml")
    assert inst.main(args) == 0
    assert calls == [{"user": user, "prefix": prefix, "name": "zynml"}]
    assert "/somewhere/zynml" in capsys.readouterr().out


def test_kernelspec_list_shows_zynml():
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    assert "zynml" in specs


# ------------------------------------------------------------------------------ errors

def test_syntax_error_has_line_and_caret(kc):
    reply, outputs = execute(kc, "let a = 1\nlet b = a +* 2\n")
    assert reply["status"] == "error"
    assert reply["ename"] == "ZynMLSyntaxError"
    assert "line 2" in reply["evalue"]
    (err,) = errors_of(outputs)
    assert err["ename"] == "ZynMLSyntaxError"
    tb = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in err["traceback"]]
    source_line = next(i for i, ln in enumerate(tb) if "let b = a +* 2" in ln)
    caret = tb[source_line + 1]
    column = int(re.search(r"column (\d+)", err["evalue"]).group(1))
    gutter = tb[source_line].index("let b")
    assert caret.index("^") == gutter + column - 1
    assert tb[source_line][caret.index("^")] == "*"


def test_name_error_inside_compute_block_points_into_it(kc):
    code = ("%python import numpy as np\n%python v = np.ones(4, dtype=np.float32)\n"
            "let w = compute(v) {\n    @kernel elementwise\n    for i in 0..n:\n"
            "        out[i] = v[i] * nothing_here\n}\n")
    reply, outputs = execute(kc, code)
    assert reply["status"] == "error"
    (err,) = errors_of(outputs)
    text = "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in err["traceback"])
    assert "line 6" in err["evalue"]
    assert "out[i] = v[i] * nothing_here" in text
    assert "^" in text


def test_user_mistakes_show_no_python_stack(kc):
    for code in ("let = 3", "let a = no_such_name", "%device nosuch:7"):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "error", code
        (err,) = errors_of(outputs)
        assert err["ename"].startswith("ZynML"), code
        text = "\n".join(err["traceback"])
        assert "Traceback" not in text and 'File "' not in text, code
        assert ".py" not in text, code


# ----------------------------------------------------------------- state and magics

def test_state_persists_and_python_shares_the_namespace(kc):
    reply, _ = execute(kc, "let base = 20")
    assert reply["status"] == "ok"
    reply, outputs = execute(kc, "%python print(base + 1)")
    assert stdout_of(outputs).strip() == "21"
    execute(kc, "%%python\nfrom_python = 22\n")
    reply, outputs = execute(kc, "let total = base + from_python\ntotal")
    assert reply["status"] == "ok", reply
    assert results_of(outputs)[-1]["text/plain"] == "42"
    reply, outputs = execute(kc, "%python total * 2")
    assert results_of(outputs)[-1]["text/plain"] == "84"


def test_tensor_display_and_python_arrays(kc):
    reply, outputs = execute(kc, X_2D + DOUBLE + "y")
    assert reply["status"] == "ok", reply
    data = results_of(outputs)[-1]
    assert "f32[2, 3]" in data["text/plain"] and "cpu" in data["text/plain"]
    assert "<table" in data["text/html"] and "10" in data["text/html"]
    reply, outputs = execute(kc, "%python print(np.asarray(y).tolist())")
    assert stdout_of(outputs).strip() == "[[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]"
    # ZynML read Python's `x` and bound `y`: Python keeps its numpy array, gets the tensor
    reply, outputs = execute(kc, "%python print(type(x).__name__, type(y).__name__)")
    assert stdout_of(outputs).strip() == "ndarray Tensor"


def test_device_magic(kc):
    reply, outputs = execute(kc, "%device cpu")
    assert reply["status"] == "ok"
    assert "default device: cpu" in stdout_of(outputs)
    reply, outputs = execute(kc, "%device")
    assert "cpu" in stdout_of(outputs)


def test_time_and_timeit(kc):
    execute(kc, X_2D)
    reply, outputs = execute(kc, "%time\n" + DOUBLE)
    assert reply["status"] == "ok", reply
    out = stdout_of(outputs)
    assert "Wall time" in out and "compile" in out
    reply, outputs = execute(kc, "%timeit -n 2 -r 2\n" + DOUBLE)
    assert reply["status"] == "ok", reply
    assert "per loop" in stdout_of(outputs)


def test_inspect_magic_shows_generated_code(kc):
    reply, outputs = execute(kc, X_2D + DOUBLE + "%inspect")
    assert reply["status"] == "ok", reply
    text = results_of(outputs)[-1]["text/plain"]
    # a summary, the stages there are, and the kernel in the language of its device
    assert "stages: zynml" in text and "cir (" in text and "python (" in text
    assert "--- python: the kernel ---" in text
    assert "x[i, j] * 2.0" in text
    # a language by name, the whole text on request, and an unknown one refused
    reply, outputs = execute(kc, "%inspect wgsl --full")
    text = results_of(outputs)[-1]["text/plain"]
    assert "--- wgsl: the whole text ---" in text and "@compute" in text
    reply, outputs = execute(kc, "%inspect cobol")
    assert reply["status"] == "error"
    shown = "".join(o["content"]["text"] for o in outputs if o["msg_type"] == "stream")
    shown += "\n".join(ln for e in errors_of(outputs) for ln in e.get("traceback", []))
    shown += reply.get("evalue", "")
    assert "cobol" in shown and "cir" in shown and "python" in shown and "stages" not in shown


def test_inspect_after_a_failed_cell_shows_the_last_blocks_that_ran(kc):
    execute(kc, X_2D + DOUBLE)
    reply, _ = execute(kc, "let broken = compute(x) {\n    @kernel elementwise\n"
                           "    for i in 0..n:\n        out[i] = x[i] * nothing_here\n}\n")
    assert reply["status"] == "error"
    reply, outputs = execute(kc, "%inspect")
    assert reply["status"] == "ok", reply
    assert "x[i, j] * 2.0" in results_of(outputs)[-1]["text/plain"]


def test_shift_tab_on_a_builtin_gives_its_signature(kc):
    reply = _inspect(kc, "let r = sqrt(", len("let r = sqrt("))
    assert reply["found"]
    text = reply["data"]["text/plain"]
    assert text.startswith("sqrt(x)") and "square root" in text
    reply = _inspect(kc, "let t = randn", len("let t = randn"))
    assert "randn(shape" in reply["data"]["text/plain"] and "seed" in reply["data"]["text/plain"]


def test_inspect_magic_before_any_block(kernel):
    # a fresh kernel: nothing has run
    km, kc = start_new_kernel(kernel_name="zynml", startup_timeout=60)
    try:
        reply, outputs = execute(kc, "%inspect")
        assert reply["status"] == "ok"
        assert "No compute block has run yet" in stdout_of(outputs)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# ------------------------------------------------------- completion and inspection

def _complete(kc, code, cursor=None):
    kc.complete(code, len(code) if cursor is None else cursor)
    return kc.get_shell_msg(timeout=TIMEOUT)["content"]


def _inspect(kc, code, cursor=None):
    kc.inspect(code, len(code) if cursor is None else cursor)
    return kc.get_shell_msg(timeout=TIMEOUT)["content"]


def test_completion_of_names_and_tensor_attributes(kc):
    execute(kc, X_2D + DOUBLE)
    reply = _complete(kc, "let q = y.sh")
    assert reply["matches"] == ["shape"]
    assert reply["cursor_start"] == len("let q = y.")
    assert {"device", "dtype", "numpy", "shape"} <= set(_complete(kc, "y.")["matches"])
    execute(kc, "let my_scale = 3")
    assert "my_scale" in _complete(kc, "let r = my_")["matches"]
    # names the cell itself binds, before it runs
    assert "fresh_name" in _complete(kc, "let fresh_name = 1\nlet s = fres")["matches"]
    # magics, and Python completion inside %python lines
    assert "%device" in _complete(kc, "%dev")["matches"]
    assert "%%compare" in _complete(kc, "%%comp")["matches"]
    assert "numpy" in _complete(kc, "%python import nump")["matches"]


def test_inspection_of_a_tensor_name(kc):
    execute(kc, X_2D + DOUBLE)
    reply = _inspect(kc, "let z = y", len("let z = y"))
    assert reply["found"]
    text = reply["data"]["text/plain"]
    assert "Tensor" in text and "f32[2, 3]" in text and "cpu" in text


def test_inspection_of_a_compute_block_shows_generated_code(kc):
    execute(kc, X_2D + DOUBLE)
    cursor = DOUBLE.index("@kernel") + 2
    reply = _inspect(kc, DOUBLE, cursor)
    assert reply["found"]
    text = reply["data"]["text/plain"]
    assert "--- python: the kernel ---" in text and "stages: zynml" in text
    assert "zynml-map" in reply["data"]["text/html"]


def test_is_complete_handles_magics_and_python(kc):
    kc.is_complete("%%python\ndef f(x):")
    assert kc.get_shell_msg(timeout=TIMEOUT)["content"]["status"] == "incomplete"
    kc.is_complete("%%python\nx = 1")
    assert kc.get_shell_msg(timeout=TIMEOUT)["content"]["status"] == "complete"


# --------------------------------------------------------------------------- interrupt

LONG_CELL = "var acc = 0\nfor i in 0..1000000000:\n    acc += 1\nacc"


def test_interrupt_stops_a_long_cell_and_the_kernel_stays_usable(kernel):
    km, kc = kernel
    # (stop_on_error=False: the interrupted cell must not abort the next request, which a
    # client may send before the kernel has finished reporting the error)
    msg_id = kc.execute(LONG_CELL, stop_on_error=False)
    # wait until the cell is running
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
            break
    time.sleep(1.0)
    started = time.time()
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=TIMEOUT)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert time.time() - started < 10
    reply, outputs = execute(kc, "let after = 5 + 6\nafter")
    assert reply["status"] == "ok"
    assert results_of(outputs)[-1]["text/plain"] == "11"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(unittest.main())


def test_compare_magic_in_the_zynml_kernel(kc):
    code = ('%%compare --devices cpu --sizes n=32,128 --repeat 2\n'
            'let v = randn([n], seed=3)\n'
            'let w = compute(v) {\n    @kernel elementwise\n    for i in 0..n:\n'
            '        out[i] = v[i] * v[i]\n}\n')
    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", reply
    data = results_of(outputs)
    table = next(d for d in data if "max |diff|" in d.get("text/plain", ""))
    rows = [ln.split() for ln in table["text/plain"].splitlines()[1:3]]
    assert [r[:2] for r in rows] == [["32", "cpu"], ["128", "cpu"]]
    assert all(r[-1] == "0.0e+00" for r in rows)       # the CPU is the reference
    assert "<tr data-device='cpu'>" in table["text/html"]
    assert any("image/png" in d for d in data)          # the chart


def test_progress_widget_in_a_notebook(kc):
    reply, outputs = execute(kc, "%%python\nfrom zynbook.magics.compare import Progress\n"
                                 "p = Progress(3, 'compile', after=0.0)\n"
                                 "p.update('kernel matmul_l3', 1)\nlabel = p.label.value\n"
                                 "p.close()\nprint(label)\n")
    assert reply["status"] == "ok", reply
    assert any("application/vnd.jupyter.widget-view+json" in d for d in results_of(outputs))
    assert stdout_of(outputs).startswith("compile kernel matmul_l3 · 1/3 · ")


def test_device_changes_are_announced_on_a_comm(kc):
    """The toolbar follows the default device through the `zynbook.device` comm: `%device`,
    `config { compute_device }` and a picker widget each announce a change (once)."""
    def announced(outputs):
        return [m["content"]["data"]["default"] for m in outputs
                if m["msg_type"] == "comm_open"
                and m["content"]["target_name"] == "zynbook.device"]

    execute(kc, "%device cpu")
    reply, outputs = execute(kc, "%device auto")
    assert reply["status"] == "ok"
    assert announced(outputs) == ["auto"]
    reply, outputs = execute(kc, 'config { compute_device: "cpu" }\nlet q = 1')
    assert reply["status"] == "ok", reply
    assert announced(outputs) == ["cpu"]
    reply, outputs = execute(kc, "let unchanged = 2")
    assert announced(outputs) == []
    reply, outputs = execute(kc, "%%python\nfrom zynbook.widgets import DevicePicker\n"
                                 "p = DevicePicker()\np.value = 'auto'\n")
    assert reply["status"] == "ok", reply
    assert announced(outputs) == ["auto"]
    execute(kc, "%device cpu")


def test_a_slow_cell_reports_progress_on_a_comm(kc):
    """Progress goes to the front end on the `zynbook.progress` comm (no cell output); here
    the threshold is lowered so that a quick cell counts as slow."""
    execute(kc, "%python import zynbook.kernel.progress as progress_module\n"
                "%python progress_module.AFTER = 0.0")
    try:
        reply, outputs = execute(kc, X_2D + DOUBLE)
        assert reply["status"] == "ok", reply
        opened = [m for m in outputs if m["msg_type"] == "comm_open"
                  and m["content"]["target_name"] == "zynbook.progress"]
        assert len(opened) == 1
        msgs = [opened[0]["content"]["data"]] + [
            m["content"]["data"] for m in outputs if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == opened[0]["content"]["comm_id"]]
        last = msgs[-1]
        assert last["done"] and last["launches"] == 1
        assert last["kernel"].startswith("elementwise_l") and last["device"] == "cpu"
        assert "cell finished in" in last["text"]
        assert not [m for m in outputs if m["msg_type"] in ("display_data", "stream")]
    finally:
        execute(kc, "%python progress_module.AFTER = 1.0")
