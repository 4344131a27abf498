"""The Python and notebook surface, a twelfth pass: values put into `session.namespace`
directly, `{x}` and `$x` on a cell magic's line and `{x}` in its cell, and Python values of
every kind bound by `%%compute` and written back. Compared with numpy written here, or
checked for the error's kind, line and column."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy
from zynbook.errors import ZynMLError


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

def _cell(shell, cell, line=""):
    result = shell.run_cell(f"%%compute {line}\n" + cell)
    assert result.success, result.error_in_exec
    return result.result


def _fails(shell, text):
    result = shell.run_cell(text)
    assert not result.success
    return result.error_in_exec


# ------------------------------------------ values put into session.namespace directly

_SCALE = "compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * k\n}\n"


def test_values_put_into_the_namespace_are_bound_as_run_binds_them():
    s = zynbook.Session("cpu")
    x = np.arange(5, dtype=np.float32)
    s.namespace.update(x=x, k=np.float32(2.5), lst=[1.0, np.float64(2.0), 3.0],
                       d={"a": np.ones(3, np.float32), "b": [np.int32(4)]})
    assert_equals_numpy(s.run("x * 2.0"), x * 2.0, 0)
    assert_equals_numpy(s.run("sum(x)"), np.float32(10.0), 0)
    assert_equals_numpy(s.run(_SCALE), x * np.float32(2.5), 0)
    assert s.run("lst[1] + 1.0") == 3.0
    assert_equals_numpy(s.run("d.a + 1.0"), np.full(3, 2.0, np.float32), 0)
    assert s.run("d.b[0] * 2") == 8
    x[0] = 7.0              # the caller's array, bound without a copy as run's inputs are
    assert_equals_numpy(s.run("x + 0.0"), x, 0)
    s.namespace["w"] = w = np.ones(3, np.float32)
    assert_equals_numpy(s.run("w[0] = 9.0\nw"), np.array([9.0, 1.0, 1.0], np.float32), 0)
    assert_equals_numpy(w, np.ones(3, np.float32), 0)     # written into a copy, as run's


def test_a_torch_tensor_put_into_the_namespace_is_bound():
    torch = pytest.importorskip("torch")
    s = zynbook.Session("cpu")
    s.namespace["t"] = torch.arange(4, dtype=torch.float32)
    assert_equals_numpy(s.run("t + 1.0"), np.arange(4, dtype=np.float32) + 1.0, 0)


def test_a_pipeline_called_from_python_reads_values_put_into_the_namespace():
    s = zynbook.Session("cpu")
    s.run("pipeline f(a):\n    return a * w\n")
    w = np.array([1.0, 2.0, 3.0], np.float32)
    s.namespace["w"] = w
    assert_equals_numpy(s.namespace["f"](np.full(3, 2.0, np.float32)), w * 2.0, 0)


def test_an_unusable_value_put_into_the_namespace_is_a_type_error_where_read():
    s = zynbook.Session("cpu")
    s.namespace.update(z=np.zeros(2, np.complex64), x=np.ones(2, np.float32))
    assert_equals_numpy(s.run("x * 3.0"), np.full(2, 3.0, np.float32), 0)   # z not read
    with pytest.raises(ZynMLError) as info:
        s.run("let y = 1\nlet w = z * 2.0\n")
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 2, 9)
    assert "complex64" in str(info.value)


@pytest.mark.parametrize("value, what", [(np.sum, "_ArrayFunctionDispatcher"),
                                         (lambda a: a, "function"), (dict, "type")])
def test_a_function_put_into_the_namespace_is_the_type_error_run_gives(value, what):
    # (`function is not a function` at the call, where run(**env) named the value)
    s = zynbook.Session("cpu")
    s.namespace["sum"] = value
    with pytest.raises(ZynMLError) as info:
        s.run("let y = 2\nlet z = sum(x) + 1.0\n", x=np.ones(3, np.float32))
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 2, 9)
    assert f"`sum` is bound to a Python value of type `{what}`" in str(info.value)
    assert s.run("1 + 1") == 2      # a program not reading it runs


# ------------------------------------------------- `{x}` on a magic line and in its cell

def test_an_array_round_trips_exactly_through_a_cell(shell):
    x = np.random.default_rng(3).standard_normal(2000).astype(np.float32)
    shell.user_ns["x"] = x
    _cell(shell, "let y = x\nlet s = sum(x)\n")
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]), x)
    assert shell.user_ns["y"].dtype == np.float32 and shell.user_ns["y"].shape == (2000,)


@pytest.mark.parametrize("line", ["{x}", "$x", '@device("cpu") {x[:3]}'])
def test_an_array_on_the_magic_line_is_a_usage_error_not_its_printed_text(shell, line):
    from IPython.core.error import UsageError

    shell.user_ns["x"] = np.arange(2000, dtype=np.float32)
    err = _fails(shell, f"%%compute {line}\nlet s = sum(x)\n")
    assert isinstance(err, UsageError), err
    assert "printed text is not its value" in str(err) and "numpy.ndarray" in str(err)
    assert "s" not in shell.user_ns
    for magic in ("%%zynml_timeit -r 1", "%%compare --sizes n="):
        err = _fails(shell, f"{magic}{line}\nlet s = sum(x)\n")
        assert isinstance(err, UsageError) and "printed text" in str(err), err


def test_scalars_and_strings_on_the_magic_line_still_expand(shell):
    shell.user_ns.update(x=np.ones(3, np.float32), dev=np.str_("cpu"), n0=np.int64(2),
                         z=np.array(3))
    assert _cell(shell, "sum(x)\n", '@device("{dev}")') == 3.0
    assert _cell(shell, "sum(x)\n", '@device("cpu") // {n0} {z}') == 3.0
    # a comment is not expanded: an array named there is no error
    assert _cell(shell, "sum(x)\n", '@device("{dev}")  # {x} was ones') == 3.0


def test_braces_in_the_cell_are_not_expanded_and_say_so(shell):
    shell.user_ns["x"] = np.arange(2000, dtype=np.float32)
    err = _fails(shell, "%%compute\nlet s = sum({x})\n")
    assert (err.kind, err.line, err.column) == ("syntax", 2, 13)
    assert "write `x`" in str(err) and "^" in err.render()
    assert float(_cell(shell, "sum(x)\n")) == float(np.arange(2000).sum())
    for magic in ("%%zynml_timeit -r 1", "%%compare --repeat 1 --no-chart"):
        err = _fails(shell, f"{magic}\nlet s = sum({{x}})\n")
        assert (err.kind, err.line, err.column) == ("syntax", 2, 13), err
        assert "write `x`" in str(err)


# ------------------------------------------------ a future a cell gives Python, awaited there

_ASYNC = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 + 1.0\n}\n"


def test_python_awaits_the_future_of_an_async_cell(shell):
    # (`await y` in a Python cell was a TypeError: a future was not awaitable)
    x = np.linspace(-1.0, 1.0, 7, dtype=np.float32)
    shell.user_ns["x"] = x
    _cell(shell, _ASYNC, "@async")
    result = shell.run_cell("z = await y")
    assert result.success, result.error_in_exec
    assert_equals_numpy(shell.user_ns["z"], x * np.float32(2.0) + np.float32(1.0), 0)


def test_awaiting_a_failed_async_block_in_python_is_its_zynml_error(shell):
    shell.user_ns.update(x=np.arange(4, dtype=np.float32), idx=np.array([0, 9, 1], np.int32))
    _cell(shell, "let y = compute(x, idx) {\n    for i in 0..n:\n        out[i] = x[idx[i]]\n}\n",
          "@async")
    err = _fails(shell, "z = await y")
    assert (err.kind, err.line, err.column) == ("runtime", 4, 20), err
    assert "index 9" in str(err)
    assert _cell(shell, "sum(x)\n") == 6.0      # the shell still runs cells


# ------------------------------------------------- an array given by numpy's array interface

class _Interface:
    """An array numpy reads through `__array_interface__` alone (as a PIL image is)."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def test_an_array_interface_is_bound_as_its_array():
    # (it was `a Python value of type _Interface, which a ZynML program cannot use`)
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    got = zynbook.run("let y = compute(x) {\n    for i in 0..r, j in 0..c:\n"
                      "        out[i, j] = f32(x[i, j]) * 0.5\n}\ny\n", x=_Interface(a))
    assert_equals_numpy(got, a.astype(np.float32) * np.float32(0.5), 0)
    s = zynbook.Session("cpu")
    s.namespace["x"] = _Interface(a)
    assert_equals_numpy(s.run("sum(x)"), np.uint64(a.sum()), 0)


def test_a_pil_image_is_read_by_a_cell(shell):
    Image = pytest.importorskip("PIL.Image")
    pixels = np.random.default_rng(5).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    shell.user_ns["img"] = Image.fromarray(pixels)
    _cell(shell, "let g = compute(img) {\n    for i in 0..h, j in 0..w:\n"
                 "        out[i, j] = f32(img[i, j, 1])\n}\n")
    assert_equals_numpy(shell.user_ns["g"], pixels[:, :, 1].astype(np.float32), 0)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["img"]), pixels)


@pytest.mark.parametrize("value, dtype", [(np.timedelta64(5, "s"), "timedelta64[s]"),
                                          (np.timedelta64("NaT"), "timedelta64")])
def test_a_numpy_timedelta_is_a_type_error_naming_its_dtype(value, dtype):
    # (np.timedelta64 is an integer to numpy: it was bound as a datetime.timedelta, or
    # as None for NaT, and failed later or not at all)
    with pytest.raises(ZynMLError) as info:
        zynbook.run("let a = 1\nlet b = x\n", x=value)
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 2, 9)
    assert f"of dtype `{dtype}`" in str(info.value)


# ------------------------------------------------ the inspector after a cell whose launch failed

_GATHER = "let y = compute(x, idx) {\n    for i in 0..n:\n        out[i] = x[idx[i]]\n}\n"


@pytest.mark.parametrize("device", ["cpu", "cpu:native"])
def test_the_inspector_says_a_failed_launch_failed_on_its_device(shell, device):
    # (it said `device: not launched`, where %zynml_inspect says the launch failed)
    from zynbook.kernel.state import last_run
    from zynbook.widgets.views import launch_info_html

    shell.user_ns.update(x=np.arange(4, dtype=np.float32), idx=np.array([0, 9], np.int32))
    err = _fails(shell, f'%%compute @device("{device}")\n' + _GATHER)
    assert (err.kind, err.line, err.column) == ("runtime", 4, 20), err
    kernels, launches = last_run()
    info = launch_info_html(kernels[-1], launches)
    assert f"{device} (its launch failed: ZynML runtime error)" in info, info
    assert "not launched" not in info
    shell.user_ns["idx"] = np.array([3, 0], np.int32)     # the cell runs again, and right
    _cell(shell, _GATHER, f'@device("{device}")')
    assert_equals_numpy(shell.user_ns["y"], np.array([3.0, 0.0], np.float32), 0)
    kernels, launches = last_run()
    assert "launches" in launch_info_html(kernels[-1], launches)


def test_the_zynml_kernel_says_its_cells_are_not_expanded(shell):
    from zynbook.kernel.kernel import ZynMLRunner

    runner = ZynMLRunner(shell)
    x = np.arange(2000, dtype=np.float32)
    shell.user_ns["x"] = x
    with pytest.raises(ZynMLError) as info:
        runner.run("let a = 1\nlet s = sum({x})\n")
    assert (info.value.kind, info.value.line, info.value.column) == ("syntax", 2, 13)
    assert "write `x`" in str(info.value)
    assert_equals_numpy(runner.run("sum(x)"), np.float32(x.sum()), 0)


@pytest.mark.parametrize("devices", ["", " , ", []])
def test_timing_compare_on_no_device_says_so(shell, devices):
    # (an empty chart, as %%compare --devices , is a usage error)
    pytest.importorskip("ipywidgets")
    from zynbook.widgets import TimingWidget

    with pytest.raises(ZynMLError) as info:
        TimingWidget.compare("x * 2.0", devices, env={"x": np.ones(2, np.float32)}, repeat=1)
    assert info.value.kind == "device" and "names no device" in str(info.value)
    widget = TimingWidget.compare("x * 2.0", "cpu", env={"x": np.ones(2, np.float32)},
                                  repeat=1)
    assert list(widget.results) == ["cpu"] and "error" not in widget.results["cpu"]


def test_a_namespace_assigned_anew_is_the_one_a_run_reads():
    # (the interpreter kept the dict the session was made with: `unknown name x`)
    s = zynbook.Session("cpu")
    s.run("var a = 1\nlet old = 2\n")
    x = np.arange(3, dtype=np.float32)
    s.namespace = {"x": x, "a": 5}
    assert_equals_numpy(s.run("x * 2.0"), x * 2.0, 0)
    assert "old" not in s.namespace and isinstance(s.namespace["x"], zynbook.Tensor)
    with pytest.raises(ZynMLError) as info:     # `a` is an input now, not the old var
        s.run("a = 2")
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 1, 1)
    with pytest.raises(ZynMLError) as info:
        s.run("old")
    assert info.value.kind == "name"
    with pytest.raises(ZynMLError):
        s.namespace = [("x", 1)]
