"""The notebook surface, a fifth pass: the inspector's launch IR of a CPU run, completion
inside comments, `#` comments on the %%compute line, `%%compare --devices ,`, and the
spelling of booleans and of rates of empty inputs; values checked against numpy computed
here."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("IPython")

from compute_testing import wanted_devices  # noqa: E402
from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)
from zynbook.kernel import state  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "cuda", "metal"))]
CPUS = [d for d in DEVICES if d in ("cpu", "cpu:native")]
shell = shell_fixture(("x", "y", "z", "flags"))


DOUBLE = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 + 1.0\n}\n"


# ------------------------------------------------ the launch IR of a kernel run on a CPU

@pytest.mark.parametrize("device", CPUS)
def test_inspect_launch_ir_of_a_cpu_run_is_that_devices(shell, capsys, device):
    """`%zynml_inspect launch-ir` after a run on `cpu` showed the CUDA target's program
    (`// target: cuda sm_90`): the reference executor has no launch IR and says so;
    cpu:native shows its C++ target's."""
    x = np.arange(8, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, f'%%compute @device("{device}")\n' + DOUBLE)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64), x * 2.0 + 1.0)
    capsys.readouterr()
    cell(shell, "%zynml_inspect launch-ir")
    out = capsys.readouterr().out
    text = out.split("--- launch-ir: the whole text ---")[1]
    assert "cuda" not in text and "sm_90" not in text, text
    if device == "cpu":
        assert "cpu (the reference executor) runs no launch IR" in text, text
        assert "launch zyn_k_" not in text
    else:
        assert text.lstrip().startswith("// target: cpu\n"), text
        assert "launch zyn_k_" in text


# ------------------------------------------------ completion inside a `//` comment

@pytest.mark.parametrize("code", [
    "let nh5_a = 1  // nh5_",
    "// nh5_",
    "// see @dev",
    "// %ti",
    'let nh5_b = 2 // @device("cp',
    "let nh5_c = x.sh // nh5_v.sh",
])
def test_kernel_completes_nothing_inside_a_comment(kc, code):
    """Completion offered the notebook's names (and annotations, magics, device ids) after
    `//`, where inspection already saw no name: a comment names nothing."""
    from test_kernel_support import execute
    from test_notebook_hunt4 import _complete

    reply, _ = execute(kc, "let nh5_value = 1.5\nlet nh5_view = 2")
    assert reply["status"] == "ok", reply
    assert _complete(kc, code) == ([], len(code), len(code))


def test_kernel_completes_code_before_a_comment_and_after_a_url_string(kc):
    """The code before a comment, and after a string holding `//`, still completes."""
    from test_kernel_support import execute
    from test_notebook_hunt4 import _complete

    reply, _ = execute(kc, "let nh5_value = 1.5\nlet nh5_view = 2")
    assert reply["status"] == "ok", reply
    code = "let q = nh5_v"
    assert _complete(kc, code + " // a note", len(code)) == (
        ["nh5_value", "nh5_view"], len(code) - len("nh5_v"), len(code))
    code = 'let u = "http://x" + nh5_val'
    assert _complete(kc, code) == (["nh5_value"], len(code) - len("nh5_val"), len(code))


# ------------------------------------------------ a `#` comment on the %%compute line

@pytest.mark.parametrize("note", ["  # the fast one", "  // the fast one",
                                  "# a note with @device(\"vulkan:9\")"])
@pytest.mark.parametrize("magic", ["compute", "zynml_timeit -r 1"])
def test_compute_line_ends_at_a_hash_comment(shell, capsys, note, magic):
    """`%%compute @device("cpu")  # why` was a ZynML syntax error (only `//` ended the
    line) while `%zynml_device cpu  # why` ended at `#`: every magic line ends at either."""
    device = CPUS[-1]
    x = np.arange(6, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, f'%%{magic} @device("{device}"){note}\n' + DOUBLE)
    y = state.notebook_session().namespace["y"]         # (%%zynml_timeit binds it there)
    np.testing.assert_array_equal(np.asarray(y.numpy(), np.float64), x * 2.0 + 1.0)
    assert {ln.device for ln in state.notebook_session().launches} == {device}


def test_a_hash_inside_a_quoted_annotation_argument_is_not_a_comment(shell):
    """`#` inside quotes is the string's: `@device("cpu#1")` names the id `cpu#1` (no
    device has it), not `@device("cpu` and a comment."""
    shell.user_ns["x"] = np.ones(3, np.float32)
    err = shell.run_cell('%%compute @device("cpu#1")  # note\n' + DOUBLE).error_in_exec
    assert err is not None and "cpu#1" in str(err), err


# ------------------------------------------------ %%compare --devices with no id

@pytest.mark.parametrize("given", ["--devices ,", "--devices ' , '", '-d ""', "--devices=,"])
def test_compare_an_empty_device_list_is_a_usage_error(shell, given):
    """`%%compare --devices ,` ran on every device (the empty list read as none given)."""
    from IPython.core.error import UsageError

    shell.user_ns["x"] = np.ones(4, np.float32)
    err = shell.run_cell(f"%%compare {given} --repeat 1 --no-chart --out z\n"
                         "let y = x * 2.0\n").error_in_exec
    assert isinstance(err, UsageError), err
    assert "--devices" in str(err) and "names none" in str(err), err
    assert "z" not in shell.user_ns


def test_compare_a_device_list_still_runs_those_devices(shell):
    x = np.arange(4, dtype=np.float32)
    shell.user_ns["x"] = x
    cell(shell, f"%%compare --devices {','.join(CPUS)}, --repeat 1 --no-chart --result y "
                f"--out z\nlet y = x * 2.0\n")
    rows = shell.user_ns["z"].rows
    assert [r.device for r in rows] == CPUS
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows


# ------------------------------------------------ booleans, and rates of empty inputs

def test_tensor_text_and_html_spell_booleans_as_zynml_does(shell):
    """The HTML table showed `true`/`false`, the text view numpy's `True`/`False`: both
    now show ZynML's `true`/`false` (docs/language.md), the long HTML preview too."""
    from zynbook.kernel.display import tensor_html, tensor_text

    for n in (4, 300):              # a table, then a preview numpy summarises
        x = np.arange(n, dtype=np.float32)
        shell.user_ns["x"] = x
        cell(shell, "%%compute\nlet flags = x > 1.5\n")
        flags = state.notebook_session().namespace["flags"]
        want = x > 1.5
        np.testing.assert_array_equal(np.asarray(flags.numpy()), want)
        text, page = tensor_text(flags), tensor_html(flags)
        body = text.split("\n", 1)[1]
        assert "True" not in text and "False" not in text, text
        assert "True" not in page and "False" not in page
        words = re.findall(r"true|false", body)
        if n == 4:
            assert words == ["true" if v else "false" for v in want], body
            cells = re.findall(r"<td>(\w+)</td>", page)
            assert cells == ["true" if v else "false" for v in want], page
        else:
            assert words[:3] == ["false", "false", "true"] and words[-1] == "true", body


def test_timeit_rates_of_an_empty_input_are_dashes_as_compares(shell, capsys):
    """`%%zynml_timeit` of a kernel on an empty array showed `0%` of peak (and 0 GFLOP/s)
    where `%%compare` shows `-`: no work is no rate."""
    shell.user_ns["x"] = np.zeros(0, np.float32)
    capsys.readouterr()
    cell(shell, "%%zynml_timeit -r 2\n" + DOUBLE)
    out = capsys.readouterr().out
    assert np.asarray(state.notebook_session().namespace["y"].numpy()).shape == (0,)
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("kernel "))
    rows = lines[head + 1:]
    assert rows, out
    for row in rows:
        gflops, gbytes, share = row.split()[-3:]
        assert (gflops, gbytes, share) == ("-", "-", "-"), row
    cell(shell, "%%compare --devices cpu --repeat 1 --no-chart --out z\n" + DOUBLE)
    row = shell.user_ns["z"].rows[0]
    assert not row.error and (row.gflops, row.gbytes, row.peak_share) == (None, None, None)
