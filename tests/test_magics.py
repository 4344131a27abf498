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


def _host(value):
    """A cell's array result on the host (a `cuda:N` result is CuPy's)."""
    return value.get() if type(value).__module__.startswith("cupy") else np.asarray(value)


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


@pytest.mark.parametrize("device", [d["id"] for d in zynbook.compute_devices()
                                    if not d["id"].startswith("browser")])
def test_a_python_float_in_an_f64_kernel_keeps_f64_precision(shell, device):
    """A Python float read by an f64 block is f64 there, as numpy reads it (it was passed as
    f32: 3 * 0.1 gave 0.30000000447); beside f32 data it stays f32."""
    info = next(d for d in zynbook.compute_devices() if d["id"] == device)
    if info.get("backend") in ("vulkan", "gl", "metal", "dx12") and \
            "shader-f64" not in info.get("features", []):
        pytest.skip("f64 kernels are refused without shader-f64 (tests/test_spec_programs_host.py)")
    x, h = np.array([3.0, 0.1, -7.25]), np.array([3.0, 0.1, -7.25], np.float32)
    shell.user_ns.update(x=x, t=h, scale=0.1)
    value = run(shell, f'@device("{device}")',
                "let s = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                "        out[i] = x[i] * scale\n}\n"
                "let m = compute(t) {\n    @kernel elementwise\n    for i in 0..n:\n"
                "        out[i] = t[i] * scale\n}\n[s, m]\n")
    np.testing.assert_array_equal(_host(value[0]), x * 0.1)
    np.testing.assert_array_equal(_host(value[1]), h * np.float32(0.1))


@pytest.mark.parametrize("device", [d["id"] for d in zynbook.compute_devices()
                                    if not d["id"].startswith("browser")])
def test_writing_into_an_input_leaves_the_notebooks_array_as_it_was(shell, device):
    """A cell's `x[0] = 50.0` changes the cell's `x`, not the notebook's numpy array (it did
    where the device held the array without a copy)."""
    x = np.arange(4, dtype=np.float32)
    shell.user_ns.update(x=x)
    value = run(shell, f'@device("{device}")',
                "x[0] = 50.0\nlet y = compute(x) {\n    @kernel elementwise\n"
                "    for i in 0..n:\n        out[i] = x[i] + 1.0\n}\ny\n")
    np.testing.assert_array_equal(_host(value), [51.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(x, np.arange(4))
    # the notebook's name holds the cell's x, written into (the copy), as the next cell reads
    np.testing.assert_array_equal(_host(shell.user_ns["x"]), [50.0, 1.0, 2.0, 3.0])


def test_the_magic_line_expands_python_names_as_ipython_does(shell):
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32), dev="cpu")
    session = state.notebook_session()
    result = shell.run_cell('%%compute @device("{dev}")\n' + AXPY + "z\n")
    assert result.success, result.error_in_exec
    assert session.launches[-1].device == "cpu"
    shell.user_ns["dev"] = "no-such-device"
    result = shell.run_cell('%%compute @device("$dev")\n' + AXPY + "z\n")
    assert not result.success and "no-such-device" in str(result.error_in_exec)
    shell.user_ns.pop("dev")


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
    assert "the whole text" in full
    # printed from the launch IR: the source holds only the helpers the kernel calls, so
    # there is nothing to fold and the short view is the kernel whole
    assert "--full shows all" not in short and "zyn_atomic_min" not in full
    assert "u_out[u_i] = ((u_x[u_i] * u_y[u_i]) + 1.0f);" in short


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


def test_mistakes_on_the_magic_line_show_the_magic_line(shell, capsys):
    """An unknown annotation on the magic line is a name error even in a cell without a
    compute block, and an error on line 1 shows `%%compute ...` with the caret under the
    annotation (line 1 of the cell's ZynML is blank)."""
    for cell in ("%%compute @bogus\nlet r = 1\n",
                 "%%compute @bogus\n" + AXPY.replace("x[i] * y[i]", "1.0 * 2.0")):
        result = shell.run_cell(cell)
        assert not result.success
        err = result.error_in_exec
        assert isinstance(err, ZynMLError) and err.kind == "name"
        assert (err.line, err.column) == (1, 11)
        rendered = err.render()
        assert "1 | %%compute @bogus" in rendered
        assert rendered.splitlines()[-1].index("^") == rendered.splitlines()[-2].index("@")
    result = shell.run_cell("%%compute --bogus-flag\nlet r = 1\n")
    assert result.error_in_exec.kind == "syntax"
    assert "1 | %%compute --bogus-flag" in result.error_in_exec.render()
    capsys.readouterr()


def test_compare_sizes_that_are_not_integers_are_a_usage_error(shell, capsys):
    """`--sizes n=abc` is a usage error naming the option (a Python ValueError traceback
    before)."""
    from IPython.core.error import UsageError
    from zynbook.magics.compare import parse_sizes
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    for sizes in ("n=abc", "n=", "=4", "n=-2", "2 3=4"):
        with pytest.raises(UsageError, match="--sizes"):
            parse_sizes(sizes)
    result = shell.run_cell("%%compare --sizes n=abc --no-chart\n" + AXPY)
    assert isinstance(result.error_in_exec, UsageError)
    assert parse_sizes("m=8,16") == ("m", [8, 16]) and parse_sizes("4") == ("n", [4])
    capsys.readouterr()


def test_python_names_do_not_replace_the_languages_own(shell):
    """A notebook's `e`, `pi` or `inf` (an exception, a loop counter) is not bound over
    ZynML's constants of those names: a cell's `e` stays Euler's number."""
    shell.user_ns.update(e="not a number", pi=3, inf=7, nan=0.0)
    result = shell.run_cell("%%compute\nlet r = [e * 1.0, pi, inf, nan]\n")
    assert result.success, result.error_in_exec
    r = shell.user_ns["r"]
    assert r[:3] == [np.e, np.pi, np.inf] and np.isnan(r[3])
    for name in ("e", "pi", "inf", "nan", "r"):
        shell.user_ns.pop(name, None)


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


# ------------------------------------------------------------------------------ %%compare

TANH = """let x = randn([n], seed=1)
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = tanh(x[i]) * 2.0
}
"""


def test_compare_runs_every_device_and_size_and_checks_each_result(shell, capsys):
    from zynbook.magics.compare import Comparison

    result = shell.run_cell('%%compare --devices cpu,nosuch:1 --sizes n=64,512 --repeat 3 '
                            '--numpy "np.tanh(x) * 3.0" --out cmp\n' + TANH)
    assert result.success, result.error_in_exec
    cmp = shell.user_ns.pop("cmp")
    assert isinstance(cmp, Comparison)
    assert [(r.size, r.device) for r in cmp.rows] == [
        (64, "cpu"), (64, "nosuch:1"), (64, "numpy"),
        (512, "cpu"), (512, "nosuch:1"), (512, "numpy")]
    for r in cmp.rows:
        if r.device == "nosuch:1":
            assert "nosuch:1" in r.error
            continue
        assert len(r.times) == 3 and r.median is not None
        # tanh and * per element, inputs and output of f32
        assert r.flops == 2 * r.size and r.bytes == 2 * 4 * r.size
        x = np.asarray(zynbook.run(f"randn([{r.size}], seed=1)"), dtype=np.float64)
        if r.device == "cpu":
            assert r.max_diff == 0.0
        else:
            # the numpy expression is off by tanh(x): the difference is its largest value
            assert r.max_diff == pytest.approx(np.abs(np.tanh(x)).max(), rel=1e-5)
    text = capsys.readouterr().out
    assert "max |diff|" in text and "numpy" in text


def test_compare_table_has_devices_as_rows_and_fits(shell):
    from zynbook.magics.compare import COLUMNS, Row, table_html

    rows = [Row(2**k, d, times=[1e-3, 2e-3, 3e-3], flops=1e6, bytes=1e6, max_diff=0.0)
            for k in (10, 12, 14) for d in ("cpu", "cpu:native", "vulkan:0", "cuda:0")]
    page = table_html(rows)
    assert page.count("<tr data-device=") == 12
    for d in ("cpu", "cpu:native", "vulkan:0", "cuda:0"):
        assert page.count(f"data-device='{d}'") == 3
    assert "max-width:100%" in page and "overflow-x:auto" in page
    assert page.count("<th") == len(COLUMNS)
    assert "2 ms" in page and "1 ms .. 3 ms" in page


def test_compare_chart_draws_time_and_share_of_peak():
    pytest.importorskip("matplotlib")
    from zynbook.magics.compare import Row, chart

    rows = [Row(n, "cpu", times=[n * 1e-9, n * 2e-9], peak_share=0.1) for n in (64, 256)]
    for r in rows:
        r.flops, r.bytes, r.gflops = 2.0 * r.size, 8.0 * r.size, 2.0 * r.size / r.median / 1e9
    fig = chart(rows, "n")
    ax_t, ax_p, ax_r = fig.axes
    # the roofline: intensity 2/8 FLOPs per byte, the achieved rate, and the CPU's roof
    points = [ln for ln in ax_r.get_lines() if ln.get_marker() == "o"]
    assert [p.get_xdata()[0] for p in points] == [0.25, 0.25]
    assert [p.get_ydata()[0] for p in points] == pytest.approx([r.gflops for r in rows])
    assert any(ln.get_marker() in ("None", "", None) for ln in ax_r.get_lines())
    assert ax_t.get_xlabel() == "n" and ax_p.get_ylabel() == "% of peak"
    (line,) = ax_t.get_lines()
    assert list(line.get_xdata()) == [64, 256]
    assert list(line.get_ydata()) == pytest.approx([64 * 1.5e-9, 256 * 1.5e-9])
    assert list(ax_p.get_lines()[0].get_ydata()) == pytest.approx([10.0, 10.0])


def test_progress_is_text_outside_a_notebook_after_a_second(capsys):
    from zynbook.magics.compare import Progress

    quick = Progress(4, "quick")
    quick.update("step", 1)
    quick.close()
    assert capsys.readouterr().err == ""
    slow = Progress(4, "slow", after=0.0)
    slow.update("compiling kernel", 1)
    slow.update("running", 2)
    slow.close()
    err = capsys.readouterr().err
    assert "slow compiling kernel · 1/4" in err and "slow running · 3/4" in err
    assert "[" + "#" * 18 + "." * 6 + "]" in err          # 3 of 4 done: 18 of 24


def test_a_slow_compute_cell_reports_progress_as_text_outside_a_notebook(shell, capsys,
                                                                         monkeypatch):
    from zynbook.kernel import progress

    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    run(shell, "", AXPY)
    assert "[zynbook]" not in capsys.readouterr().err      # quick: nothing shown
    monkeypatch.setattr(progress, "AFTER", 0.0)
    run(shell, "", AXPY)
    err = capsys.readouterr().err
    assert "[zynbook] cell finished in" in err and "1 launch(es)" in err


def test_zynml_timeit_gives_medians_and_rates(shell, capsys):
    shell.user_ns.update(x=np.arange(64, dtype=np.float32), y=np.ones(64, np.float32))
    result = shell.run_cell("%%zynml_timeit -r 4\n" + AXPY)
    assert result.success, result.error_in_exec
    out = capsys.readouterr().out.splitlines()
    assert "per run (median of 4; spread" in out[0]
    head, row = out[1].split(), out[2].split()
    assert head[:4] == ["kernel", "device", "median", "IQR"]
    assert row[0].startswith("elementwise_l") and row[1] == "cpu"
    # x * y + 1 over 64 elements: 128 FLOPs, 3 x 256 bytes; GFLOP/s and GB/s at the median
    median = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}[row[3]] * float(row[2])
    assert row[6] == ".." and float(row[9]) == pytest.approx(128 / median / 1e9, rel=0.05)
    assert float(row[10]) == pytest.approx(768 / median / 1e9, rel=0.05)


def test_a_compute_cell_announces_the_default_device_once_when_it_changed(shell,
                                                                         monkeypatch):
    """After each %%compute cell the default device is announced (pickers, the toolbar's
    comm) only if it changed since the last announcement, however it changed."""
    sent = []
    monkeypatch.setattr(state, "_send_to_frontend", sent.append)
    session = state.notebook_session()
    shell.user_ns.update(x=np.ones(4, np.float32), y=np.ones(4, np.float32))
    for _ in range(2):
        run(shell, "", AXPY)
    assert sent == []
    shell.run_line_magic("zynml_device", "auto")
    assert sent == [{"default": "auto"}]
    for _ in range(2):
        run(shell, "", 'config { compute_device: "cpu" }\n' + AXPY)
    assert sent[1:] == [{"default": "cpu"}]
    session.default_device = "auto"             # set from Python: the next cell tells
    run(shell, "", AXPY)
    run(shell, "", AXPY)
    assert sent[2:] == [{"default": "auto"}]
    session.default_device = "".join(["au", "to"])      # the same id, another string
    run(shell, "", AXPY)
    assert sent[3:] == []
    session.default_device = "cpu"
