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


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

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


def test_a_pipeline_the_zynml_kernel_gave_python_reads_python_values_of_now(shell):
    # (the ZynML kernel's `%python` cells call it: it read the session's w)
    from zynbook.kernel.kernel import ZynMLRunner

    runner = ZynMLRunner(shell)
    shell.user_ns["w"] = 2.0
    runner.run("pipeline g(x):\n    return x * w\n")
    shell.user_ns["w"] = 5.0
    x = np.array([1.0, -3.0], np.float32)
    assert_equals_numpy(shell.user_ns["g"](x), x * 5.0, 0)
    assert_equals_numpy(runner.run("g(ones([2]))"), np.full(2, 5.0, np.float32), 0)


# ------------------------------- %zynml_inspect after an @async cell whose block has not run yet

_ASYNC_CELL = """let fut = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 3.0
}
"""


@pytest.fixture
def busy_cpu_queue():
    """The cpu device's queue held by a job until the test lets it go: an @async block
    submitted meanwhile has not launched."""
    import threading

    from zynbook.runtime.values import DeviceQueue

    gate = threading.Event()
    DeviceQueue.for_device("cpu").submit(gate.wait)
    yield gate
    gate.set()


def test_inspect_after_an_unfinished_async_cell_shows_its_block(shell, busy_cpu_queue, capsys):
    # (it showed the previous cell's kernel, `a`, as if it were the last cell's)
    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    _cell(shell, "let a = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + 1.0\n}\n")
    _cell(shell, _ASYNC_CELL, "@async")
    shell.run_line_magic("zynml_inspect", "")
    shown = capsys.readouterr().out
    assert "kernel_l2 = fut" in shown and "still running: not launched yet" in shown
    assert "x[i] * 3.0" in shown and "x[i] + 1.0" not in shown
    busy_cpu_queue.set()
    assert_equals_numpy(_cell(shell, "await fut\n"), np.arange(4, dtype=np.float32) * 3.0, 0)
    shell.run_line_magic("zynml_inspect", "")
    shown = capsys.readouterr().out
    assert "kernel_l2 = fut" in shown and "still running" not in shown


def test_kernel_inspect_after_an_unfinished_async_cell_shows_its_block(shell, busy_cpu_queue,
                                                                       capsys):
    from zynbook.kernel.kernel import ZynMLRunner

    runner = ZynMLRunner(shell)
    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    runner.run("let a = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + 1.0\n}\n")
    runner.run("\n" + _ASYNC_CELL.replace("compute(x)", "compute(x) @async"))
    runner.inspect("")
    shown = capsys.readouterr().out
    assert "= fut" in shown and "still running: not launched yet" in shown
    assert "x[i] * 3.0" in shown and "x[i] + 1.0" not in shown
    busy_cpu_queue.set()
    assert_equals_numpy(runner.run("await fut"), np.arange(4, dtype=np.float32) * 3.0, 0)
    runner.inspect("")
    shown = capsys.readouterr().out
    assert "= fut" in shown and "still running" not in shown and "x[i] + 1.0" not in shown


# ----------------------------------------------------- a masked array is refused, not unmasked

_DOUBLE = """let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""


def test_a_masked_array_with_masked_elements_is_a_type_error():
    # (its mask was dropped: the values under it were used as data)
    x = np.ma.masked_array(np.arange(5, dtype=np.float32), mask=[0, 1, 0, 0, 1])
    err = raises("type", _DOUBLE, 1, 17, x=x)
    assert "2 of its 5 elements are masked" in str(err) and "a.filled(v)" in str(err)
    err = raises("type", "x.w", 1, 1, x={"w": x})
    assert "(at w)" in str(err) and "masked" in str(err)
    session = zynbook.Session("cpu")
    session.run("pipeline f(x):\n    return x * 2.0\n")
    with pytest.raises(ZynMLError) as info:
        session.namespace["f"](x)
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 1, 12)
    assert "masked" in str(info.value)


@pytest.mark.parametrize("device", DEVICES)
def test_a_masked_array_with_nothing_masked_is_its_data(device):
    data = np.array([1.5, -2.0, 0.25], np.float32)
    for x in (np.ma.masked_array(data), np.ma.masked_array(data, mask=[0, 0, 0])):
        assert_equals_numpy(_run(device, _DOUBLE, x=x), data * 2.0, 0)


# --------------------------- a window under a guard on a tiled index no tile passes is empty

_TILED_WINDOW = """let r = compute(x) {{
    for b in 0..(n + 3) / 4, t in 0..4:
        let i = b * 4 + t
        if {guard}:
            out[i] = x[i] + x[i + 2]
}}
r"""

_TILED_INLINE = """let r = compute(x) {{
    for b in 0..(n + 2) / 3, t in 0..3:
        if {guard}:
            out[b * 3 + t] = x[b * 3 + t] - x[b * 3 + t + 2]
}}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("guard", ["i < n - 2", "i + 2 < n", "n - 2 > i", "i + 3 <= n",
                                   "i < n - 2 and i >= 0"])
@pytest.mark.parametrize("n", [1, 2, 3, 9])
def test_window_under_a_guard_on_a_tiled_index_is_empty_where_no_tile_passes(device, guard, n):
    # (n = 1 was a shape error: out's axis "would have -1 elements"; only a guard on a
    # loop's own variable was read)
    x = np.arange(n, dtype=np.float32) * 0.5 - 1.0
    got = _run(device, _TILED_WINDOW.format(guard=guard), x=x, n=n)
    assert_equals_numpy(got, x[:-2] + x[2:] if n >= 2 else x[:0], 0)
    inline = guard.replace("i", "(b * 3 + t)").replace("(b * 3 + t) >=", "b * 3 + t >=")
    got = _run(device, _TILED_INLINE.format(guard=inline), x=x, n=n)
    assert_equals_numpy(got, x[:-2] - x[2:] if n >= 2 else x[:0], 0)


# --------------------------------------- a reversed index `n - 1 - j` sizes its axis as `j` does

_REVERSED = """let r = compute(x) {{
    for i in 0..m, j in 0..n:
        out[i, j] = x[i, {index}] * 2.0
}}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", ["n - 1 - j", "n - j - 1", "(n - 1) - j", "-j + n - 1"])
@pytest.mark.parametrize("cols", [0, 1, 5])
def test_a_reversed_index_ties_its_size_to_the_axis(device, index, cols):
    # (`cannot tell the size n`: an index computed from `j` tied no size)
    x = np.arange(3 * cols, dtype=np.float32).reshape(3, cols) - 4.5
    assert_equals_numpy(_run(device, _REVERSED.format(index=index), x=x), x[:, ::-1] * 2.0, 0)


def test_a_reversed_index_is_held_to_its_axis_as_the_loop_variable_is():
    x = np.arange(6, dtype=np.float32)
    src = "let r = compute(x) {\n    for j in 0..4:\n        out[j] = x[3 - j]\n}\nr"
    err = raises("shape", src, 3, 20, x=x)
    assert "the loop covers 4 positions but the axis has 6" in str(err)
    src = "let r = compute(x) {\n    for j in 0..n:\n        out[j] = x[n - 1 - j]\n}\nr"
    assert_equals_numpy(_run("cpu", src, x=x, n=4), x[3::-1], 0)
    err = raises("shape", src, 3, 20, x=x, n=8)
    assert "covers 8 positions" in str(err)



_ROTATED = """let r = compute(x) {{
    for i in 0..n:
        out[i] = x[{index}]
}}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index, shift", [("(i + 1) % n", -1), ("(1 + i) % n", -1),
                                          ("(i + n - 1) % n", 1), ("(i + 2 * n - 2) % n", 2),
                                          ("(i + 7) % n", -7), ("i % n", 0)])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_a_rotated_index_ties_its_size_to_the_axis(device, index, shift, n):
    # (`cannot tell the size n`, as for the reversed index)
    x = np.arange(n, dtype=np.float32) * 1.5 - 2.0
    got = _run(device, _ROTATED.format(index=index), x=x)
    assert_equals_numpy(got, np.roll(x, shift) if n else x, 0)


@pytest.mark.parametrize("index", ["(i - 1) % n", "(n + i - 3) % n"])
def test_a_rotation_that_may_go_below_zero_still_ties_nothing(index):
    err = raises("name", _ROTATED.format(index=index), 2, 17, x=np.ones(5, np.float32))
    assert "ties no size" in str(err)


def test_a_rotation_modulo_another_size_is_checked_not_tied():
    src = "let r = compute(x) {\n    for i in 0..n:\n        out[i] = x[(i + 1) % m]\n}\nr"
    x = np.arange(6, dtype=np.float32)
    assert_equals_numpy(_run("cpu", src, x=x, n=6, m=3), x[(np.arange(6) + 1) % 3], 0)
    raises("name", src, 2, 17, x=x, m=3)        # n is not told by x[(i + 1) % m]


# ------------------------------------------------------------- a numpy string is a string

def test_a_numpy_string_is_a_string():
    # (it was bound as a 0-d array of text: "unsupported element type <U2" at line 1,
    # column 1, with no word of `x`)
    err = raises("type", "let r = compute(x) {\n    for i in 0..n:\n        out[i] = 1.0\n}\nr",
                 1, 17, x=np.str_("hi"))
    assert "`x` is a string" in str(err)
    assert zynbook.run('x + "!"', x=np.str_("hi")) == "hi!"
    session = zynbook.Session("cpu")
    session.run("pipeline f(a: str):\n    return a + a\n")
    assert session.namespace["f"](np.str_("yo")) == "yoyo"


def test_a_pipeline_the_zynml_kernel_gave_python_keeps_the_names_zynml_keeps(shell):
    # (a `_name` ZynML binds is not written to Python: a call from Python must not drop it
    # as deleted there)
    from zynbook.kernel.kernel import ZynMLRunner

    runner = ZynMLRunner(shell)
    runner.run("let _w = 4.0\npipeline h(x):\n    return x * _w\n")
    assert "_w" not in shell.user_ns
    x = np.array([1.0, 0.5], np.float32)
    assert_equals_numpy(shell.user_ns["h"](x), x * 4.0, 0)
    assert_equals_numpy(runner.run("h(ones([2]))"), np.full(2, 4.0, np.float32), 0)


# ------------------------------- Python inputs of every kind, on every device, against numpy

_AXPB = """let r = compute(x) {
    for i in 0..m, j in 0..n:
        out[i, j] = x[i, j] * 3 + 1
}
r"""

_GRID = np.arange(-6, 18).reshape(4, 6)


def _inputs():
    """(name, the bound value, numpy's array of it)."""
    torch = pytest.importorskip("torch")
    f = _GRID.astype(np.float32)
    out = [("rows step 2", f[::2], f[::2]), ("columns reversed", f[:, ::-1], f[:, ::-1]),
           ("transposed", f.T, f.T), ("fortran", np.asfortranarray(f), f),
           ("broadcast", np.broadcast_to(f[:1], (3, 6)), np.broadcast_to(f[:1], (3, 6)))]
    for dt in (">f4", ">f8", ">i4", ">i2", ">u2"):
        a = np.abs(_GRID).astype(dt)[:, 1::2]
        out.append((f"big-endian {dt}", a, a.astype(a.dtype.newbyteorder("="))))
    for dt in ("f2", "f8", "i1", "i2", "i8", "u1", "u4"):
        a = np.abs(_GRID).astype(dt)
        out.append((dt, a, a))
    t = torch.from_numpy(f.copy())
    out += [("torch", t, f), ("torch transposed", t.T, f.T), ("torch sliced", t[:, 1::2], f[:, 1::2]),
            ("torch requires grad", t.clone().requires_grad_(), f),
            ("torch i16", torch.from_numpy(_GRID.astype(np.int16)), _GRID.astype(np.int16))]
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_python_inputs_of_every_kind_equal_numpy(device):
    from zynbook.errors import ZynMLDeviceError

    for name, value, want in _inputs():
        try:
            got = _run(device, _AXPB, x=value)
        except ZynMLDeviceError as err:     # an adapter without f64 says so
            assert want.dtype == np.float64 and "shader-f64" in str(err), (name, err)
            continue
        three, one = np.array(3, want.dtype), np.array(1, want.dtype)
        try:
            assert_equals_numpy(got, want * three + one, 0)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


@pytest.mark.parametrize("device", DEVICES)
def test_bool_arrays_and_zero_d_scalars_equal_numpy(device):
    b = np.array([[True, False, True], [False, False, True]])[:, ::2]
    got = _run(device, """let r = compute(b) {
    for i in 0..m, j in 0..n:
        out[i, j] = b[i, j] and not b[i, 0]
}
r""", b=b)
    assert_equals_numpy(got, b & ~b[:, :1], 0)
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    src = "let r = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * k\n}\nr"
    for k in (np.array(2.5), np.array(2.5, ">f4"), np.float16(0.5), np.int8(-3), np.uint8(200),
              True, 7, -0.0):
        assert_equals_numpy(_run(device, src, x=x, k=k), x * np.float32(k), 1e-7)


# ---------------------------------------------------- %%compare --sizes of a name the cell reads

def test_compare_sizes_of_a_name_the_cell_never_reads_is_a_usage_error(shell):
    # (`--sizes N=...` for a cell reading `n` ran every row at x's one size, as if sized)
    from IPython.core.error import UsageError

    shell.user_ns["x"] = np.arange(4, dtype=np.float32)
    body = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny\n"
    with pytest.raises(UsageError, match="the cell reads no `N`"):
        shell.run_cell_magic("compare", "--sizes N=2,3 --devices cpu --no-chart", body)
    shell.run_cell_magic("compare", "--sizes n=2,3 --devices cpu --no-chart --out cmp", body)
    assert [row.size for row in shell.user_ns["cmp"].rows] == [2, 3]


# --------------------------- %zynml_inspect after a cell whose launch failed shows that block

def test_inspect_after_a_failed_launch_shows_the_failed_block(shell, capsys):
    # (it showed the previous cell's kernel, `a`, as the last cell's)
    shell.user_ns.update(x=np.arange(4, dtype=np.float32), idx=np.array([0, 9], np.int32))
    _cell(shell, "let a = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + 1.0\n}\n")
    result = shell.run_cell("%%compute\nlet b = compute(x, idx) {\n    for i in 0..m:\n"
                            "        out[i] = x[idx[i]] * 5.0\n}\n")
    assert (result.error_in_exec.kind, result.error_in_exec.line) == ("runtime", 4)
    capsys.readouterr()
    shell.run_line_magic("zynml_inspect", "")
    shown = capsys.readouterr().out
    assert "= b" in shown and "its launch failed: ZynML runtime error" in shown
    assert "x[idx[i]] * 5.0" in shown and "x[i] + 1.0" not in shown
    # a cell failing before any block compiles leaves the last one that compiled
    assert not shell.run_cell("%%compute\nlet c = nope\n").success
    shell.run_line_magic("zynml_inspect", "")
    assert "= b" in capsys.readouterr().out


# ------------------------------ an annotation line cut short or holding a brace says so there

@pytest.mark.parametrize("annotations, column, said", [
    ('@device("cpu"', 14, "unexpected end of the line; expected"),
    ("@tile(block_q=", 15, "unexpected end of the line; expected"),
    ("{undefined_name}", 1, "unexpected '{': annotations take no braces"),
    ("@async }", 8, "unexpected '}': annotations take no braces"),
])
def test_run_cell_annotation_errors_at_the_end_or_a_brace(annotations, column, said):
    # (they said "unexpected '{'" of the block's brace the annotations are parsed before,
    # past the end of the line, or took `{name}` for that block)
    session = zynbook.Session("cpu")
    with pytest.raises(ZynMLError) as info:
        session.run_cell("1 + 1", annotations)
    err = info.value
    assert (err.kind, err.line, err.column) == ("syntax", 1, column), err
    assert said in str(err) and "^" in err.render()
    assert session.run_cell("1 + 1", '@device("{cpu}")'.replace("{cpu}", "cpu")) == (2, True)


def test_compute_magic_line_with_an_unexpanded_brace_points_at_it(shell):
    shell.user_ns["x"] = np.ones(2, np.float32)
    result = shell.run_cell("%%compute {not_a_python_name}\nlet y = x * 2.0\n")
    err = result.error_in_exec
    assert (err.kind, err.line, err.column) == ("syntax", 1, 11)
    assert "annotations take no braces" in str(err)


# --------------------------------- host arithmetic of a narrow tensor and an int past its range

@pytest.mark.parametrize("src, k, column, said", [
    ("x + k", np.int16(300), 1, "300 is out of bounds for i8"),
    ("let y = 2 * (k * x)", 300, 14, "300 is out of bounds for i8"),
    ("x - 1000", 0, 1, "1000 is out of bounds for i8"),
])
def test_a_host_int_past_a_narrow_tensor_is_a_type_error_at_the_operation(src, k, column, said):
    # (numpy's "Python integer 300 out of bounds for int8", a runtime error under the
    # statement's first column)
    x = np.arange(3, dtype=np.int8)
    with pytest.raises(OverflowError):
        x + 300
    err = raises("type", src, 1, column, x=x, k=k)
    assert said in str(err) and "the type it meets" in str(err)
    assert_equals_numpy(zynbook.run("x + k", x=x, k=100), x + 100, 0)


@pytest.mark.parametrize("dtype, k, said", [
    (np.float32, 10**400, "an int of 401 digits is too large for a float"),
    (np.int8, 10**400, "an int of 401 digits is out of bounds for i8"),
    (np.uint64, 2**64, "18446744073709551616 is out of bounds for u64"),
])
def test_a_host_int_past_every_type_says_what_to_do(dtype, k, said):
    err = raises("type", "x + k", 1, 1, x=np.ones(2, dtype), k=k)
    assert said in str(err)
    assert ("compute in floats" in str(err)) == (dtype is not np.float32)
