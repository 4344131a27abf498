"""`%load_ext zynbook`: %%compute and friends in an IPython shell."""
from __future__ import annotations

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import zynbook  # noqa: E402
from zynbook.errors import ZynMLError  # noqa: E402
from zynbook.kernel import state  # noqa: E402

AXPY = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * y[i] + 1.0
}
"""


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    state.set_notebook_session(zynbook.Session(device="cpu"))
    sh.run_line_magic("load_ext", "zynbook")
    yield sh
    for name in ("x", "y", "z", "s", "f", "r", "a", "b", "scale", "t", "m"):
        sh.user_ns.pop(name, None)
    state.set_notebook_session(None)


def run(shell, magic_line, cell):
    return shell.run_cell_magic("compute", magic_line, cell)


def test_load_ext_registers_the_magics(shell):
    magics = shell.magics_manager.magics
    assert "compute" in magics["cell"]
    assert {"zynml_devices", "zynml_device", "zynml_inspect"} <= set(magics["line"])


def test_compute_reads_numpy_and_binds_numpy(shell):
    x = np.arange(8, dtype=np.float32)
    y = np.full(8, 0.5, dtype=np.float32)
    shell.user_ns.update(x=x, y=y)
    result = shell.run_cell("%%compute\n" + AXPY)
    assert result.success, result.error_in_exec
    z = shell.user_ns["z"]
    assert isinstance(z, np.ndarray)
    np.testing.assert_allclose(z, x * y + 1.0, rtol=1e-6)
    assert result.result is None                     # the cell ends in a `let`


def test_cell_ending_in_an_expression_shows_its_value(shell):
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    result = shell.run_cell("%%compute\n" + AXPY + "z\n")
    assert result.success, result.error_in_exec
    assert isinstance(result.result, np.ndarray)
    np.testing.assert_allclose(result.result, np.full(4, 2.0))


def test_scalars_from_python(shell):
    shell.user_ns.update(x=np.arange(5, dtype=np.float32), scale=3.0)
    value = run(shell, "", "let s = compute(x) {\n    @kernel elementwise\n"
                           "    for i in 0..n:\n        out[i] = x[i] * scale\n}\ns\n")
    np.testing.assert_allclose(value, np.arange(5) * 3.0)


def test_magic_line_annotations_reach_every_block(shell):
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    two_blocks = AXPY + ("let s = compute(z) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
                         "        yield z[i]\n}\n")
    result = shell.run_cell('%%compute @device("cpu")\n' + two_blocks + "s\n")
    assert result.success, result.error_in_exec
    assert float(result.result) == pytest.approx(8.0)
    # a device that does not exist fails every block: the annotation did reach them
    result = shell.run_cell('%%compute @device("nosuch:9")\n' + two_blocks)
    assert not result.success
    assert isinstance(result.error_in_exec, ZynMLError)
    assert result.error_in_exec.kind == "device"


def test_async_on_the_magic_line_leaves_futures(shell):
    shell.user_ns.update(x=np.arange(4, dtype=np.float32), y=np.ones(4, np.float32))
    result = shell.run_cell("%%compute @async\n" + AXPY)
    assert result.success, result.error_in_exec
    future = shell.user_ns["z"]
    assert not isinstance(future, np.ndarray)
    assert "future" in type(future).__name__.lower()
    result = shell.run_cell("%%compute\nlet r = await z\nr\n")
    assert result.success, result.error_in_exec
    np.testing.assert_allclose(shell.user_ns["r"], np.arange(4) + 1.0)


def test_compile_error_fails_the_cell_with_the_rendered_error(shell, capsys):
    result = shell.run_cell("%%compute\nlet a = 1\nlet b = a +* 2\n")
    assert not result.success
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "syntax"
    assert err.line == 3            # the cell's own numbering: the magic line is line 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "let b = a +* 2" in text and "^" in text
    assert "Traceback" not in text


def test_unknown_name_is_a_zynml_error(shell):
    shell.user_ns.pop("nothing_here", None)
    result = shell.run_cell("%%compute\nlet a = nothing_here + 1\n")
    assert not result.success
    assert isinstance(result.error_in_exec, ZynMLError)


def test_devices_magic_lists_cpu(shell, capsys):
    shell.run_line_magic("zynml_devices", "")
    out = capsys.readouterr().out
    assert "cpu" in out and "id" in out
    shell.run_line_magic("zynml_device", "cpu")
    assert "default device: cpu" in capsys.readouterr().out


def test_inspect_magic_shows_the_last_blocks(shell, capsys):
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    run(shell, "", AXPY)
    shell.run_line_magic("zynml_inspect", "")
    out = capsys.readouterr().out
    assert "stages: zynml" in out and "--- python: the kernel ---" in out
    assert "x[i] * y[i] + 1.0" in out
    shell.run_line_magic("zynml_inspect", "cuda")
    short = capsys.readouterr().out
    shell.run_line_magic("zynml_inspect", "cuda --full")
    full = capsys.readouterr().out
    assert "--full shows all" in short and "the whole text" in full
    assert len(short.splitlines()) < len(full.splitlines())
    assert "zyn_atomic_min" in full and "zyn_atomic_min" not in short


def test_error_lines_count_the_magic_line(shell, capsys):
    shell.user_ns.update(x=np.ones(4, np.float32))
    cell = ("let a = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
            "        out[i] = x[i] * nothing_here\n}\n")
    result = shell.run_cell("%%compute\n" + cell)
    assert not result.success
    err = result.error_in_exec
    full_cell = ("%%compute\n" + cell).splitlines()
    # the line the error names is the line of the cell (as the notebook numbers it) that
    # holds the mistake
    assert "nothing_here" in full_cell[err.line - 1]
    assert err.line == 5
    text = capsys.readouterr()
    assert "line 5" in text.out + text.err


def test_inspect_after_a_failed_cell_shows_the_last_blocks_that_ran(shell, capsys):
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    run(shell, "", AXPY)
    result = shell.run_cell("%%compute\nlet a = compute(x) {\n    @kernel elementwise\n"
                            "    for i in 0..n:\n        out[i] = x[i] * nothing_here\n}\n")
    assert not result.success
    capsys.readouterr()
    shell.run_line_magic("zynml_inspect", "")
    out = capsys.readouterr().out
    assert "No compute block has run yet" not in out
    assert "x[i] * y[i] + 1.0" in out


def test_inspect_an_unknown_language_is_an_error_naming_the_languages(shell, capsys):
    from IPython.core.error import UsageError

    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    run(shell, "", AXPY)
    capsys.readouterr()
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("zynml_inspect", "cobol")
    message = str(info.value)
    assert "cobol" in message and "python" in message and "cuda" in message
    assert "elementwise_l" in message
    assert "stages" not in capsys.readouterr().out


# ------------------------------------------------------------------ other array kinds

def test_torch_inputs_through_dlpack(shell):
    torch = pytest.importorskip("torch")
    shell.user_ns.update(x=torch.arange(4, dtype=torch.float32),
                         y=torch.full((4,), 2.0, dtype=torch.float32))
    value = run(shell, '@device("cpu")', AXPY + "z\n")
    assert isinstance(value, np.ndarray)
    np.testing.assert_allclose(value, np.arange(4) * 2.0 + 1.0)


def _cuda_available():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0 and any(
            d["id"].startswith("cuda") for d in zynbook.compute_devices())
    except Exception:
        return False


@pytest.mark.gpu
def test_cupy_inputs_stay_on_the_gpu(shell):
    if not _cuda_available():
        pytest.skip("no CUDA device")
    import cupy

    shell.user_ns.update(x=cupy.arange(4, dtype=cupy.float32),
                         y=cupy.ones(4, dtype=cupy.float32))
    value = run(shell, '@device("cuda:0")', AXPY + "z\n")
    assert isinstance(value, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(value), np.arange(4) + 1.0)


def test_device_picker_drives_the_next_compute_cell(shell):
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import DevicePicker

    others = [d["id"] for d in zynbook.compute_devices() if d["id"] != "cpu"]
    if not others:
        pytest.skip("only the CPU is present")
    picker = DevicePicker()                     # the notebook's session, as %%compute uses
    picker.value = others[0]
    shell.user_ns.update(x=np.arange(4, dtype=np.float32), y=np.ones(4, np.float32))
    result = shell.run_cell("%%compute\n" + AXPY + "z\n")
    assert result.success, result.error_in_exec
    assert {ln.device for ln in state.notebook_session().launches} == {others[0]}
    value = result.result
    if others[0].startswith("cuda"):
        import cupy

        assert isinstance(value, cupy.ndarray)
        value = value.get()
    else:
        assert isinstance(value, zynbook.Tensor)     # neither numpy nor CuPy: a tensor
    np.testing.assert_allclose(np.asarray(value), np.arange(4) + 1.0)
