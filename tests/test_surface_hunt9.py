"""The notebook surface, a ninth pass: what a cell magic's line expands `$name` and
`{expr}` to, %%compare's options, and the ZynML kernel reading Python values that Python
changed in place; values checked against numpy computed here."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("IPython")

from notebook_shell import cell, kc, shell_fixture  # noqa: E402,F401  (kc: a fixture)

shell = shell_fixture(("x", "y", "result", "self", "dev", "reps", "cmp", "C", "f", "config", "q"))

DOUBLE = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0 + 1.0\n}\n"
X = np.linspace(-2.0, 3.0, 7, dtype=np.float32)


def _doubled(shell):
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"], np.float64),
                                  X.astype(np.float64) * 2.0 + 1.0)


# ------------------------------------------------------- `$name` on a cell magic's line

@pytest.mark.parametrize("line", ['@device("$result")', '@device("{result}")',
                                  '@device("{self}")'])
def test_the_compute_line_expands_the_notebooks_names_not_ipythons_locals(shell, line):
    """`$result` expanded to IPython's ExecutionResult (the locals of its `run_code`, a frame
    past the cell), `{self}` to the shell: the notebook's `result` and `self` are meant."""
    shell.user_ns.update(x=X, result="cpu:native", self="cpu:native")
    assert cell(shell, f"%%compute {line}\n" + DOUBLE + "y.device\n") == "cpu:native"
    _doubled(shell)


def test_the_compute_line_called_from_a_function_expands_its_locals(shell):
    """`run_cell_magic` called by a function sees the function's names, as IPython's line
    magics do (the notebook's `dev` was read)."""
    shell.user_ns.update(x=X, dev="cpu", C=DOUBLE + "y.device\n")
    cell(shell, 'def f():\n    dev = "cpu:native"\n'
                '    return get_ipython().run_cell_magic("compute", \'@device("$dev")\', C)\n')
    assert cell(shell, "f()") == "cpu:native"
    _doubled(shell)
    assert cell(shell, '%%compute @device("$dev")\n' + DOUBLE + "y.device\n") == "cpu"


def test_timeit_and_compare_lines_expand_the_notebooks_names(shell, capsys):
    shell.user_ns.update(x=X, result="cpu:native", reps=2)
    cell(shell, '%%zynml_timeit -r $reps @device("$result")\n' + DOUBLE)
    out = capsys.readouterr().out
    assert "(median of 2;" in out and "cpu:native" in out, out
    cell(shell, "%%compare --devices $result --repeat 1 --no-chart --out cmp "
                "--numpy 'x * 2.0 + 1.0'\n" + DOUBLE)
    rows = shell.user_ns["cmp"].rows
    assert [r.device for r in rows] == ["cpu:native", "numpy"], rows
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows


# ------------------------------------------------------------------ %%compare's options

NEGATED = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = -x[i] * 2.0\n}\n"


@pytest.mark.parametrize("option", ["--numpy", "--torch"])
def test_compare_takes_an_expression_that_starts_with_a_minus(shell, option):
    """`--numpy "-x*2.0"` was a usage error (argparse took `-x*2.0` for an option)."""
    if option == "--torch":
        pytest.importorskip("torch")
    shell.user_ns.update(x=X)
    cell(shell, f"%%compare --devices cpu --repeat 1 --no-chart {option} '-x*2.0' "
                f"--out cmp\n" + NEGATED)
    rows = shell.user_ns["cmp"].rows
    assert [r.device for r in rows] == ["cpu", option[2:]], rows
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows
    # a missing value is still said to be missing
    result = shell.run_cell("%%compare --devices cpu --numpy --repeat 1\n" + NEGATED)
    assert "argument --numpy: expected one argument" in str(result.error_in_exec)


@pytest.mark.parametrize("name", ["'a b'", "3x", "class", "x.y"])
def test_compare_out_is_a_python_name(shell, name):
    """`--out "a b"` bound the comparison under a name no code can read, without a word."""
    from IPython.core.error import UsageError
    shell.user_ns.update(x=X)
    before = set(shell.user_ns)
    result = shell.run_cell(f"%%compare --devices cpu --repeat 1 --no-chart --out {name}\n"
                            + NEGATED)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert "--out NAME" in str(result.error_in_exec)
    assert not {k for k in set(shell.user_ns) - before if not k.startswith("_")}


# -------------------------------------- the ZynML kernel reads Python's in-place changes

def _kernel_ok(kc, code):
    """The cell's printed and displayed text (it must run without an error)."""
    from test_kernel_support import errors_of, execute, results_of, stdout_of

    reply, outputs = execute(kc, code)
    assert reply["status"] == "ok", (code, errors_of(outputs), outputs)
    return stdout_of(outputs) + "".join(d.get("text/plain", "") for d in results_of(outputs))


def _kernel_value(kc, name):
    """A ZynML name's value, through %python."""
    out = _kernel_ok(kc, f"%python import numpy as _np; print(_np.asarray({name}, "
                         f"_np.float64).tolist())")
    return np.asarray(eval(out.strip()), np.float64)


READS = ("let sh9_a = sh9_d.w * 2.0\nlet sh9_b = sh9_d.k + 0\nlet sh9_c = len(sh9_l)\n"
         "let sh9_e = sh9_n[0] * 2.0\nlet sh9_f = compute(sh9_t) {\n    for i in 0..n:\n"
         "        out[i] = sh9_t[i] * 2.0\n}\n")


def test_kernel_reads_a_dict_list_or_bf16_tensor_python_changed_in_place(kc):
    """A dict, a list or a bf16 torch tensor is bound as a copy (a record, a list, f32
    values): after Python changed it in place, the next cell read the first cell's copy."""
    pytest.importorskip("torch")
    _kernel_ok(kc, "%python import numpy as np, torch\n"
                   "%python sh9_d = {'w': np.ones(3, np.float32), 'k': 2}; sh9_l = [1, 2, 3]\n"
                   "%python sh9_n = [np.ones(2, np.float32)]\n"
                   "%python sh9_t = torch.arange(4, dtype=torch.bfloat16)\n" + READS)
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_f"), np.arange(4) * 2.0)
    _kernel_ok(kc, "%python sh9_d['w'] = np.full(3, 4.0, np.float32); sh9_d['k'] = 7\n"
                   "%python sh9_l.append(4); sh9_n[0] = np.full(2, 5.0, np.float32)\n"
                   "%python sh9_t.mul_(3)\n" + READS)
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_a"), np.full(3, 8.0))
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_b"), 7.0)
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_c"), 4.0)
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_e"), np.full(2, 10.0))
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_f"), np.arange(4) * 3.0 * 2.0)


def test_kernel_reads_a_numpy_array_python_changed_in_place(kc):
    """(An array is bound without a copy: the session's tensor reads Python's array.)"""
    _kernel_ok(kc, "%python import numpy as np; sh9_x = np.arange(4, dtype=np.float32)\n"
                   "let sh9_y = sh9_x * 2.0")
    _kernel_ok(kc, "%python sh9_x[0] = 100.0\nlet sh9_y = sh9_x * 2.0")
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_y"), [200.0, 2.0, 4.0, 6.0])


# ------------------------------------------- host math of integer and bool tensors

def _numpy_softmax(a, axis=-1):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


INTEGERS = [np.array([0, 1, 2, 7], np.uint8), np.array([[0, 1], [250, 255]], np.uint8),
            np.array([-100, 100, 3], np.int8), np.array([0, 1, 2, 40000], np.uint16),
            np.array([0, 1, 2, 3_000_000_000], np.uint32), np.array([5, -3, 0], np.int32),
            np.array([True, False, True])]


@pytest.mark.parametrize("a", INTEGERS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
@pytest.mark.parametrize("name", ["sigmoid", "softmax"])
def test_sigmoid_and_softmax_of_integers_and_bools_are_numpys_of_their_floats(a, name):
    """`sigmoid(u8)` negated the unsigned values (sigmoid of u8 [0, 1, 2] was [0.5, 0, 0]),
    `softmax(u8)` subtracted the maximum in u8 (NaN), both were Python's TypeError for bools:
    they are the functions of the values, in the float type numpy's exp gives them."""
    import zynbook
    want_dtype = np.exp(a[:0]).dtype
    values = a.astype(np.float64)
    with np.errstate(over="ignore"):
        want = 1.0 / (1.0 + np.exp(-values)) if name == "sigmoid" else _numpy_softmax(values)
    got = zynbook.run(f"let r = {name}(a)\nr\n", a=a)
    assert np.asarray(got).dtype == want_dtype, (got.dtype, want_dtype)
    tol = 2e-3 if want_dtype == np.float16 else 1e-6
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


# ------------------------------------------- host constructors and library calls

@pytest.mark.parametrize("call, want", [
    ("zeros(t[2], t[3])", np.zeros((2, 3), np.float32)),
    ("ones(2, n)", np.ones((2, 3), np.float32)),
    ("ones(k, k, dtype=f16)", np.ones((3, 3), np.float16)),
    ("zeros(n, 2, dtype=i32)", np.zeros((3, 2), np.int32)),
])
def test_sizes_given_one_by_one_may_be_elements_of_integer_tensors(call, want):
    """`zeros(n, 2)` with `n` an element of an integer tensor (`t[2]`, `sum(mask)`, or
    np.array(3) from Python, an integer wherever host code needs one, docs/language.md) was
    `zeros([n])`: the later sizes were dropped."""
    import zynbook
    got = zynbook.run(f"let t = arange(5)\nlet n = sum(arange(3))\nlet r = {call}\nr\n",
                      k=np.array(3, np.int64))
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    rand = zynbook.run("let n = sum(arange(3))\nrandn(2, n, seed=4).shape\n")
    assert list(rand) == [2, 3]


@pytest.mark.parametrize("call, kind, what", [
    ("zeros(2, 2.5)", "type", "a float"), ("zeros([2, 3], 4)", "type", "a list"),
    ("ones(2, -1)", "shape", "no negative sizes")])
def test_a_size_given_one_by_one_that_is_not_one_is_an_error(call, kind, what):
    """(`zeros(2, 2.5)` was `zeros([2])`, `zeros([2, 3], 4)` `zeros([2, 3])`.)"""
    from compute_testing import raises
    err = raises(kind, f"let r = {call}\n", 1, 9)
    assert what in err.message, err.message


def test_rmsnorm_of_a_number_tensor_is_a_shape_error_at_the_call():
    """rmsnorm of a 0-d tensor was a runtime error 'tuple index out of range' at column 1."""
    from compute_testing import raises
    err = raises("shape", "let r = rmsnorm(x, w)\n", 1, 9, x=np.array(1.5, np.float32),
                 w=np.ones(1, np.float32))
    assert "at least one axis" in err.message, err.message


@pytest.mark.parametrize("call", ["zeros([2], f16)", "ones(2, 3, f16)", 'randn([2], "f64")'])
def test_a_dtype_given_by_position_is_an_error_saying_to_name_it(call):
    """`zeros([2], f16)` gave f32 zeros: the dtype was dropped with the later sizes."""
    from compute_testing import raises
    err = raises("type", f"let r = {call}\n", 1, 9)
    assert "takes its dtype by name" in err.message, err.message


# ------------------------------------------------------------------------- the cache

def test_a_cache_dir_under_home_written_with_a_tilde_is_the_home_folder(tmp_path):
    """ZYNBOOK_CACHE_DIR=~/zcache set from Python (no shell expands the `~`) made a folder
    named `~` in the working directory."""
    import os
    import subprocess
    import sys

    from compute_testing import wanted_devices
    if "cpu:native" not in wanted_devices():
        pytest.skip("no cpu:native here (its compiled kernels are what the cache keeps)")
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    code = ("import numpy as np, zynbook\n"
            "x = np.arange(7, dtype=np.float32)\n"
            "y = zynbook.run('let y = compute(x) {\\n    for i in 0..n:\\n"
            "        out[i] = x[i] * 3.0 + 1.0\\n}\\ny\\n', device='cpu:native', x=x)\n"
            "assert np.array_equal(np.asarray(y), x * 3.0 + 1.0), y\n")
    env = dict(os.environ, HOME=str(home), ZYNBOOK_CACHE_DIR="~/zcache",
               PYTHONPATH=os.pathsep.join([str(os.path.dirname(os.path.dirname(
                   os.path.abspath(__file__))))] + [os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not (cwd / "~").exists()
    assert list((home / "zcache" / "cpu").iterdir()), list((home / "zcache").iterdir())


def test_kernel_reads_a_numpy_array_python_reshaped_in_place(kc):
    """`x.shape = (2, 3)` in Python: the next cell read x in its old shape ([6], and a
    2-D index of it was a shape error)."""
    _kernel_ok(kc, "%python import numpy as np; sh9_r = np.arange(6, dtype=np.float32)\n"
                   "let sh9_s = sh9_r * 1.0")
    _kernel_ok(kc, "%python sh9_r.shape = (2, 3)\n"
                   "let sh9_s = compute(sh9_r) {\n    for i in 0..m, j in 0..n:\n"
                   "        out[i, j] = sh9_r[i, j] * 2.0 + float(j)\n}\n")
    want = np.arange(6, dtype=np.float64).reshape(2, 3) * 2.0 + np.arange(3)
    np.testing.assert_array_equal(_kernel_value(kc, "sh9_s"), want)


def test_compute_reads_a_placed_result_python_reshaped_in_place(shell):
    """A result of `@device("cpu")` is the session's placed tensor, read again by the next
    cell; after `y.shape = (2, 3)` in Python the cell read it as [6]."""
    shell.user_ns.update(x=X[:6])
    cell(shell, '%%compute @device("cpu")\n' + DOUBLE)
    y = shell.user_ns["y"]
    assert type(y) is np.ndarray
    y.shape = (2, 3)
    got = cell(shell, "%%compute\nlet z = compute(y) {\n    for i in 0..m, j in 0..n:\n"
                      "        out[i, j] = y[i, j] + float(j)\n}\nz\n")
    want = (X[:6] * np.float32(2.0) + np.float32(1.0)).reshape(2, 3) + \
        np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(got), want)


# ----------------------------------------------------------- binding Python values

def test_a_list_or_dict_holding_itself_is_a_type_error_where_it_is_read(shell):
    """A list or dict that contains itself was Python's RecursionError, even where the
    program never reads the name (docs/api.md: such a name is not bound at all)."""
    import zynbook
    from compute_testing import raises
    loop = [1.0]
    loop.append(loop)
    config = {"w": np.arange(3, dtype=np.float32)}
    config["self"] = config
    err = raises("type", "let a = 1\nlet q = v\n", 2, 9, v=loop)
    assert "contains itself" in err.message, err.message
    assert zynbook.run("let q = 2\nq\n", v=config) == 2
    # a list shared, not nested in itself, is two lists
    shared = [np.float32(1.5)]
    got = zynbook.run("v[0][0] + v[1][0]\n", v=[shared, shared])
    assert got == 3.0
    shell.user_ns.update(config=config)
    result = shell.run_cell("%%compute\nlet q = config.w * 2.0\n")
    assert isinstance(result.error_in_exec, zynbook.ZynMLTypeError), result.error_in_exec
    assert (result.error_in_exec.line, result.error_in_exec.column) == (2, 9)
