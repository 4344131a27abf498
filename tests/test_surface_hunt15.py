"""What the documentation promises of the surface: `zynbook run -` reads the program from
standard input, compared with numpy written here."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _cli(*argv, stdin=""):
    return subprocess.run([sys.executable, "-c", "import sys; from zynbook.cli import main; "
                           "sys.exit(main())", *argv], input=stdin, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("device", [d for d in DEVICES if d in ("cpu", "cpu:native", "vulkan:0",
                                                                 "gl:0")])
def test_cli_dash_reads_the_program_from_stdin(device):
    """`zynbook run -` said it cannot read `-`: the program comes from standard input, as Unix
    tools take `-`; its value equals numpy's, and an error names <stdin> with its caret."""
    src = ("let x = tensor([0.5, -1.5, 2.0, 3.25])\n"
           "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * x[i] + 1.0\n}\n"
           "y\n")
    x = np.array([0.5, -1.5, 2.0, 3.25], np.float32)
    done = _cli("run", "-", "--device", device, stdin=src)
    assert done.returncode == 0, done.stderr
    shown = done.stdout[done.stdout.index("[", done.stdout.index("device")):]
    got = np.array([float(v) for v in shown.strip(" []\n)").split(",")], np.float32)
    assert_equals_numpy(got, x * x + 1.0, 1e-6)
    done = _cli("check", "-", stdin="let a = 1\nlet b = a +\n")
    assert done.returncode == 1 and done.stderr.startswith("<stdin>: "), done.stderr
    assert "line 2" in done.stderr and "^" in done.stderr, done.stderr
    done = _cli("run", "-", stdin="\ufefflet a = 2\na * 21\n")        # a byte order mark too
    assert (done.returncode, done.stdout.strip()) == (0, str(2 * 21)), done.stderr


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _silu(x):
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,ref", [("gelu", _gelu), ("silu", _silu)])
def test_library_activations_of_a_plain_number(device, name, ref):
    """gelu(0.5) and silu(0.5) were "x must be a tensor" while sigmoid(0.5) gave a float: a
    number gives a float (f64, as sigmoid's), a tensor the library kernel's result on the
    device, both numpy's; a bool is refused under the argument, as sigmoid refuses it."""
    values = [0.5, -1.25, 3, 0.0, -30.0, 12.5]
    src = "[" + ", ".join(f"{name}({v})" for v in values) + f", {name}(x)]\n"
    x = np.array(values, np.float32)
    with np.errstate(over="ignore"):
        *numbers, tensor = zynbook.run(src, device=device, x=x)
        for v, got in zip(values, numbers):
            assert type(got) is float, (v, got)
            assert_equals_numpy(got, ref(np.float64(v)), 1e-9)
        assert_equals_numpy(_host(tensor), ref(x.astype(np.float64)), 2e-6)
    assert type(zynbook.run("sigmoid(0.5)")) is float
    with pytest.raises(ZynMLError) as info:
        zynbook.run(f"{name}(true)", device=device)
    err = info.value
    assert err.kind == "type" and "a number or a tensor" in err.message, err
    assert (err.span.line, err.span.column) == (1, len(name) + 2), err
