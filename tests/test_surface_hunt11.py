"""The Python and notebook surface (docs/api.md): pipelines called from Python in a
notebook, `%zynml_inspect`, Python inputs of every kind bound to a program; and two
language rules (empty windows under a tiled guard, a reversed index sizing its axis).
Compared with numpy written here, or checked for the ZynML error's kind, line and column."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices
from zynbook.errors import ZynMLError

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


@pytest.fixture
def shell():
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from zynbook.kernel import state

    sh = InteractiveShell.instance()
    state.set_notebook_session(zynbook.Session(device="cpu"))
    sh.run_line_magic("load_ext", "zynbook")
    names = set(sh.user_ns)
    yield sh
    for name in set(sh.user_ns) - names:
        sh.user_ns.pop(name, None)
    state.set_notebook_session(None)


def _cell(shell, cell, line=""):
    result = shell.run_cell(f"%%compute {line}\n" + cell)
    assert result.success, result.error_in_exec
    return result.result


# ------------------------- a pipeline called from Python reads the notebook's names as they are

_SCALED = """pipeline inner(x):
    return x * k
pipeline f(x):
    let y = compute(x, w) {
        for i in 0..n:
            out[i] = x[i] * w[i]
    }
    return inner(y)
"""


def test_a_pipeline_called_from_python_reads_python_values_of_now(shell):
    # (it read the values the session held since the cell ran: w = 2, k = 1)
    shell.user_ns.update(w=np.full(3, 2.0, np.float32), k=1.0)
    _cell(shell, _SCALED)
    f, x = shell.user_ns["f"], np.array([1.0, -2.0, 0.5], np.float32)
    assert_equals_numpy(f(x), x * 2.0, 0)
    w = np.arange(3, dtype=np.float32)
    shell.user_ns.update(w=w, k=10.0)
    assert_equals_numpy(f(x), x * w * 10.0, 0)
    w[1] = 7.0                      # written in place: read as it is now
    assert_equals_numpy(f(x), x * w * 10.0, 0)
    shell.user_ns["k"] = 3          # an int now
    assert_equals_numpy(f(x), x * w * 3, 0)
    assert_equals_numpy(_cell(shell, "f(w)\n"), w * w * 3, 0)


def test_a_pipeline_called_from_python_after_python_dropped_a_name(shell):
    shell.user_ns.update(w=np.ones(3, np.float32), k=1.0)
    _cell(shell, _SCALED)
    f = shell.user_ns["f"]
    shell.user_ns["k"] = print
    with pytest.raises(ZynMLError) as info:
        f(np.ones(3, np.float32))
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 3, 16)
    assert "builtin_function_or_method" in str(info.value)
    assert "^" in info.value.render()
    del shell.user_ns["k"]
    with pytest.raises(ZynMLError) as info:
        f(np.ones(3, np.float32))
    assert (info.value.kind, info.value.line, info.value.column) == ("name", 3, 16)
    shell.user_ns["k"] = 0.5
    assert_equals_numpy(f(np.full(3, 4.0, np.float32)), np.full(3, 2.0, np.float32), 0)
