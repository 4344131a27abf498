"""%%compute cells as a notebook user writes them: writes into the notebook's arrays, cells
that fail midway, names the notebook rebinds between cells; each checked against numpy
computed here, on every local device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("IPython")
torch = pytest.importorskip("torch")

from compute_testing import wanted_devices  # noqa: E402
from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)
from zynbook.errors import ZynMLError  # noqa: E402

DEVICES = [d for d in wanted_devices() if not d.startswith(("browser", "cuda", "metal"))]
shell = shell_fixture(("x", "y", "z", "w", "acc", "r"))


def host(value):
    """A notebook value as float64 numpy (a torch bf16 tensor has no numpy dtype)."""
    if isinstance(value, torch.Tensor):
        return value.float().numpy().astype(np.float64)
    return np.asarray(value).astype(np.float64)


# (library, dtype name): numpy has no bf16, torch's is what a notebook holds
KINDS = [("numpy", "f32"), ("numpy", "i32"), ("numpy", "f16"),
         ("torch", "f32"), ("torch", "i32"), ("torch", "f16"), ("torch", "bf16")]


def make(library, dtype, values):
    if library == "numpy":
        return np.asarray(values, {"f32": np.float32, "i32": np.int32, "f16": np.float16}[dtype])
    return torch.tensor(values, dtype={"f32": torch.float32, "i32": torch.int32,
                                       "f16": torch.float16, "bf16": torch.bfloat16}[dtype])


# ------------------------------------------------- writes into a notebook array persist

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("library,dtype", KINDS)
def test_element_writes_into_a_notebook_array_reach_the_next_cells(shell, device, library,
                                                                    dtype):
    """`x[i] = ...` in a %%compute cell on an array the notebook defined is seen by the next
    cell and by Python (it was lost: the next cell read the notebook's array again), and
    the notebook's original array is left as it was."""
    start = [3, -1, 4, 1, -5, 9]
    x = make(library, dtype, start)
    original = host(x).copy()
    shell.user_ns["x"] = x
    at = f'%%compute @device("{device}")\n'
    # a host write, a kernel reading the written array, a write in a host loop
    cell(shell, at + "x[1] = 7\nlet y = compute(x) {\n    for i in 0..n:\n"
                     "        out[i] = x[i] * 2\n}\nfor k in 0..2:\n    x[4 + k] = x[k] + 1\n")
    want = np.array(start, np.float64)
    want[1] = 7
    want_y = want * 2
    want[4:6] = want[0:2] + 1
    np.testing.assert_array_equal(host(shell.user_ns["y"]), want_y)
    np.testing.assert_array_equal(host(shell.user_ns["x"]), want)
    # the next cell reads what the last one wrote, and writes again
    got = cell(shell, at + "x[0] = x[0] + x[5]\nlet z = compute(x) {\n    for i in 0..n:\n"
                           "        out[i] = x[i] + 1\n}\nz\n")
    want[0] += want[5]
    np.testing.assert_array_equal(host(got), want + 1)
    np.testing.assert_array_equal(host(shell.user_ns["x"]), want)
    np.testing.assert_array_equal(host(x), original)        # the notebook's own array


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("library,dtype", [("numpy", "f32"), ("numpy", "i32"),
                                           ("torch", "f32"), ("torch", "bf16")])
def test_rebinding_a_notebook_name_reaches_the_next_cell(shell, device, library, dtype):
    x = make(library, dtype, [1, 2, 3, 4])
    shell.user_ns["x"] = x
    at = f'%%compute @device("{device}")\n'
    cell(shell, at + "let x = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 3\n}\n")
    np.testing.assert_array_equal(host(shell.user_ns["x"]), [3, 6, 9, 12])
    # (an input is assigned to after `var`)
    got = cell(shell, at + "var x = x\nx = compute(x) {\n    for i in 0..n:\n"
                           "        out[i] = x[i] - 1\n}\nx\n")
    np.testing.assert_array_equal(host(got), [2, 5, 8, 11])
    np.testing.assert_array_equal(host(shell.user_ns["x"]), [2, 5, 8, 11])
    np.testing.assert_array_equal(host(x), [1, 2, 3, 4])


@pytest.mark.parametrize("device", DEVICES)
def test_a_cell_failing_after_a_write_keeps_the_write(shell, device):
    """Nothing is lost: the statements before the failing one keep their effect, in the
    notebook as in the next cell."""
    x = np.arange(5, dtype=np.float32)
    shell.user_ns["x"] = x
    result = shell.run_cell(f'%%compute @device("{device}")\nx[2] = 40.0\n'
                            "let y = compute(x) {\n    for i in 0..n:\n"
                            "        out[i] = x[i] + 0.5\n}\nlet w = y + nope_\n")
    assert isinstance(result.error_in_exec, ZynMLError)
    assert (result.error_in_exec.line, result.error_in_exec.column) == (7, 13)
    want = np.arange(5, dtype=np.float32)
    want[2] = 40.0
    np.testing.assert_array_equal(shell.user_ns["x"], want)
    np.testing.assert_array_equal(host(shell.user_ns["y"]), want + np.float32(0.5))
    assert "w" not in shell.user_ns
    np.testing.assert_array_equal(x, np.arange(5))


def test_a_write_the_cell_does_not_reach_leaves_a_torch_tensor_as_it_is(shell):
    """A cell that may write into a torch tensor but does not (the branch is not taken) leaves
    the notebook's name the torch tensor itself, not a numpy copy of it."""
    t = torch.arange(4, dtype=torch.float32)
    shell.user_ns["x"] = t
    got = cell(shell, "%%compute\nif x[0] > 100.0:\n    x[0] = 1.0\nlet y = x * 2.0\ny\n")
    np.testing.assert_array_equal(got, np.arange(4) * 2.0)
    assert shell.user_ns["x"] is t


# -------------------------------------------- names the notebook rebound between cells

def test_a_failing_cell_does_not_bring_back_a_value_the_notebook_replaced(shell):
    """A name an earlier cell bound, that Python rebound since, and that a failing cell
    binds after its failure: the notebook keeps Python's value (the session's old one was
    written back over it)."""
    cell(shell, "%%compute\nlet y = 1.5\nlet w = randn([3], seed=2)\n")
    shell.run_cell("y = 5\nw = 'text'")
    result = shell.run_cell("%%compute\nlet z = nope_\nlet y = 3\nlet w = 2\n")
    assert isinstance(result.error_in_exec, ZynMLError)
    assert shell.user_ns["y"] == 5 and shell.user_ns["w"] == "text"
    # and the cell run when it can binds them
    shell.user_ns["nope_"] = 1.0
    try:
        cell(shell, "%%compute\nlet z = nope_\nlet y = 3\nlet w = 2\n")
    finally:
        shell.user_ns.pop("nope_")
    assert (shell.user_ns["y"], shell.user_ns["w"], shell.user_ns["z"]) == (3, 2, 1.0)


def test_a_failing_cell_keeps_the_cells_own_value_of_an_ipython_name(shell):
    cell(shell, "%%compute\nlet get_ipython = 3\n")
    result = shell.run_cell("%%compute\nlet z = nope_\nlet get_ipython = 4\n")
    assert isinstance(result.error_in_exec, ZynMLError)
    assert cell(shell, "%%compute\nget_ipython + 1\n") == 4
    assert callable(shell.user_ns["get_ipython"])


# ------------------------------------------------------------ errors on the magic line

BLOCK = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny\n"


@pytest.mark.parametrize("first,bad", [
    ('%%compute   @device("cpu")   @bogus', "@bogus"),
    ('%%compute \t @nofuse @device("nosuch:3")', '"nosuch:3"'),
    ('%%compute    @device("nosuch:3")  // a note', '"nosuch:3"'),
    ("%%compute  --bogus-flag", "--bogus-flag"),
])
def test_an_error_on_the_magic_line_points_at_the_cells_own_column(shell, first, bad):
    """Blanks after `%%compute` stay in the line shown and in the column (the shown line
    was `%%compute @...` with the blanks dropped, and the column counted in it)."""
    shell.user_ns["x"] = np.ones(3, np.float32)
    result = shell.run_cell(first + "\n" + BLOCK)
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind in ("name", "device", "syntax"), err
    assert (err.line, err.column) == (1, first.index(bad) + 1)
    shown, caret = err.render().splitlines()[1:3]
    assert shown == "   1 | " + first
    assert caret.index("^") == shown.index(bad)


# --------------------------------------------------------------- names with underscores

@pytest.mark.parametrize("device", DEVICES)
def test_a_notebook_name_with_a_leading_underscore_is_read(shell, device):
    """`_scale` is a notebook name like any other (it was never passed: the cell failed
    saying a float is a value ZynML cannot use)."""
    x = np.linspace(-1, 1, 5).astype(np.float32)
    shell.user_ns.update(x=x, _scale=2.5)
    try:
        got = cell(shell, f'%%compute @device("{device}")\nlet y = compute(x) {{\n'
                          "    for i in 0..n:\n        out[i] = x[i] * _scale\n}\ny\n")
        np.testing.assert_allclose(host(got), x * np.float32(2.5), rtol=1e-6)
    finally:
        shell.user_ns.pop("_scale")


def test_a_cell_reads_the_notebooks_value_of_an_underscore_name_it_wrote_before(shell):
    """A `_name` a cell bound and Python rebound since: the next cell reads Python's value
    (it read the session's old one, silently)."""
    x = np.arange(4, dtype=np.float32)
    shell.user_ns["x"] = x
    try:
        cell(shell, "%%compute\nlet _y = x * 3.0\n")
        np.testing.assert_array_equal(shell.user_ns["_y"], x * 3)
        shell.run_cell("_y = 100.0")
        assert cell(shell, "%%compute\n_y + 1.0\n") == 101.0
    finally:
        shell.user_ns.pop("_y", None)


def test_ipythons_output_history_is_not_read(shell):
    shell.run_cell("1 + 1")             # IPython's `_` is now 2
    result = shell.run_cell("%%compute\nlet q = _ + 1\n")
    err = result.error_in_exec
    assert isinstance(err, ZynMLError) and err.kind == "name", err
    assert (err.line, err.column) == (2, 9) and "unknown name `_`" in err.message


@pytest.mark.parametrize("body", ["t[0] = 1\n", "let t = t * 2\n", "if t[0] > 5:\n    t[1] = 0\n"])
@pytest.mark.parametrize("bad", ["torch.ones(4, dtype=torch.complex64)",
                                 "np.ones(4, np.complex64)", "torch.ones(4, device='meta')"])
def test_a_value_the_cell_cannot_bind_stays_the_notebooks(shell, body, bad):
    """The session still holds an earlier cell's `t`; the notebook rebinds `t` to a value
    ZynML has no type for, and a cell writing into or rebinding `t` fails saying so: the
    notebook keeps its value (the session's earlier `t` was written back over it)."""
    shell.user_ns["t"] = np.arange(4, dtype=np.float32)
    cell(shell, "%%compute\nlet w = t * 2.0\n")
    value = eval(bad, {"np": np, "torch": torch})
    shell.user_ns["t"] = value
    try:
        result = shell.run_cell("%%compute\n" + body)
        err = result.error_in_exec
        assert isinstance(err, ZynMLError) and err.kind == "type", err
        assert err.line == 2 and "^" in err.render()
        assert shell.user_ns["t"] is value
    finally:
        shell.user_ns.pop("t", None)


@pytest.mark.parametrize("device", DEVICES)
def test_an_async_block_reads_the_array_as_it_was_when_it_started(shell, device):
    """An `@async` block launched before a later cell writes into its input computes from
    the input as it was; the write reaches the cell after."""
    x = np.arange(4, dtype=np.float32)
    shell.user_ns["x"] = x
    at = f'%%compute @device("{device}")'
    cell(shell, at + " @async\nlet f = compute(x) {\n    for i in 0..n:\n"
                     "        out[i] = x[i] * 2.0\n}\n")
    cell(shell, at + "\nx[0] = 100.0\n")
    got = cell(shell, at + "\nlet r = await f\nlet s = compute(x) {\n    for i in 0..n:\n"
                           "        out[i] = x[i] + r[i]\n}\ns\n")
    written = np.array([100.0, 1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(host(got), written + x * 2)
    np.testing.assert_array_equal(host(shell.user_ns["x"]), written)


def test_an_interrupted_cell_keeps_what_its_earlier_statements_wrote(shell):
    import _thread
    import signal
    import threading

    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)    # as a kernel has it
    x = np.arange(4, dtype=np.float32)
    shell.user_ns["x"] = x
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        result = shell.run_cell("%%compute\nx[0] = 9.0\nlet after = 1\nvar steps = 0\n"
                                "for i in 0..2000000:\n    steps += 1\nlet never = 2\n")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
    try:
        assert isinstance(result.error_in_exec, KeyboardInterrupt)
        np.testing.assert_array_equal(shell.user_ns["x"], [9.0, 1.0, 2.0, 3.0])
        assert shell.user_ns["after"] == 1 and 0 < shell.user_ns["steps"] < 2000000
        assert "never" not in shell.user_ns
        got = cell(shell, "%%compute\nlet y = compute(x) {\n    for i in 0..n:\n"
                          "        out[i] = x[i] + 1.0\n}\ny\n")
        np.testing.assert_array_equal(got, [10.0, 2.0, 3.0, 4.0])
    finally:
        for name in ("after", "steps"):
            shell.user_ns.pop(name, None)


# ------------------------------------------------ pipelines reading the notebook's names

@pytest.mark.parametrize("device", DEVICES)
def test_a_pipeline_reads_the_notebooks_value_of_a_global_now(shell, device):
    """A pipeline an earlier cell defined reads a global (`scale`) that Python rebinds: a
    later call reads Python's value (it read the session's old one, silently), also through
    a pipeline that calls it."""
    x = np.linspace(-2, 2, 6).astype(np.float32)
    shell.user_ns.update(x=x)
    try:
        cell(shell, f'%%compute @device("{device}")\nlet scale = 2.0\nlet bias = 0.5\n'
                    "pipeline f(v):\n    return compute(v) {\n        for i in 0..n:\n"
                    "            out[i] = v[i] * scale\n    }\n"
                    "pipeline g(v):\n    return f(v) + bias\n")
        np.testing.assert_allclose(host(cell(shell, "%%compute\nf(x)\n")), x * 2, rtol=1e-6)
        shell.run_cell("scale = 3.0\nbias = -1.0")
        np.testing.assert_allclose(host(cell(shell, "%%compute\nf(x)\n")), x * 3, rtol=1e-6)
        np.testing.assert_allclose(host(cell(shell, "%%compute\ng(x)\n")), x * 3 - 1,
                                   rtol=1e-6)
        # a failing cell that would have bound `scale` leaves the notebook's
        assert not shell.run_cell("%%compute\nlet z = nope_\nlet scale = 5.0\n").success
        np.testing.assert_allclose(host(cell(shell, "%%compute\nf(x)\n")), x * 3, rtol=1e-6)
        shell.run_cell("del scale")
        result = shell.run_cell("%%compute\ng(x)\n")
        err = result.error_in_exec
        assert isinstance(err, ZynMLError) and err.kind == "name", err
        # the caret in the defining cell, at its own line and column
        assert (err.line, err.column) == (7, 29) and "unknown name `scale`" in err.message
    finally:
        for name in ("scale", "bias", "f", "g"):
            shell.user_ns.pop(name, None)


def test_kernel_a_pipeline_reads_pythons_value_of_a_global_now(kc):
    from test_kernel_support import errors_of, execute, results_of

    def value(code):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "ok", (code, [e["evalue"] for e in errors_of(outputs)])
        (data,) = results_of(outputs)
        return data["text/plain"]

    value("let nh2_scale = 2.0\npipeline nh2_f(v):\n    return v * nh2_scale\nnh2_f(1.5)")
    # Python rebinds the global: the pipeline read the 2.0 the session kept
    assert value("%python nh2_scale = 3.0\nnh2_f(1.5)") == str(1.5 * 3.0)
    reply, outputs = execute(kc, "%python del nh2_scale\nnh2_f(1.5)")
    assert reply["status"] == "error" and reply["ename"] == "ZynMLNameError", reply
    assert reply["evalue"] == "unknown name `nh2_scale` (line 3, column 16)"


# --------------------------------------------------------- names that shadow builtins

@pytest.mark.parametrize("device", DEVICES)
def test_a_builtin_a_cell_shadowed_comes_back_when_python_deletes_the_name(shell, device):
    """`let sum = ...` binds a notebook name; `del sum` in Python makes `sum` the builtin
    again (the session kept the tensor: `sum(x)` stayed `tensor is not a function`), and
    Python rebinding it is what the next cell reads (it read the session's old tensor)."""
    x = np.arange(1, 6, dtype=np.float32)
    shell.user_ns["x"] = x
    at = f'%%compute @device("{device}")\n'
    try:
        cell(shell, at + "let sum = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\n")
        np.testing.assert_array_equal(host(shell.user_ns["sum"]), x * 2)
        shell.run_cell("sum = 7.5")
        assert cell(shell, at + "sum + 1.0\n") == 8.5
        shell.run_cell("del sum")
        got = cell(shell, at + "let s = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
                               "        yield x[i]\n}\n[s, sum(x)]\n")
        assert float(host(got[0])) == float(host(got[1])) == float(x.sum())
        # a notebook name the language also defines, never bound by a cell, stays unread
        shell.run_cell("sum = 'not a function'")
        assert float(host(cell(shell, at + "sum(x)\n"))) == float(x.sum())
    finally:
        shell.user_ns.pop("sum", None)
        shell.user_ns.pop("s", None)


def test_kernel_a_builtin_a_cell_shadowed_comes_back_when_python_deletes_it(kc):
    from test_kernel_support import errors_of, execute, results_of

    def value(code):
        reply, outputs = execute(kc, code)
        assert reply["status"] == "ok", (code, [e["evalue"] for e in errors_of(outputs)])
        (data,) = results_of(outputs)
        return data["text/plain"]

    assert value("let max = 3\nmax + 1") == "4"
    assert value("%python max = 10\nmax + 1") == "11"
    assert value("%python del max\nmax(2, 9)") == "9"
