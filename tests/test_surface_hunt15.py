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


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("device", DEVICES)
def test_optional_arguments_by_position(device):
    """softmax(x, 1), sum(x, 1) and rmsnorm(x, w, 1e-5) were refused ("is called as ...
    axis=k"): the optional arguments are taken by position in the documented order, as numpy
    and torch take them; max(x, 0) and min(x, 0.5) stay the element-wise maximum and minimum
    of a kernel. All equal numpy's."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    m = rng.standard_normal((3, 3)).astype(np.float32)
    r = rng.standard_normal((2, 5, 6)).astype(np.float32)
    src = ("[softmax(x, 0), softmax(x, 1), sum(x, 1), mean(x, 0), argmax(x, 1), argmin(x, -1),"
           " max(x, 0), min(x, 0.5, 1), max(x, axis=0), rmsnorm(x, w, 1e-5), sinkhorn(m, 3),"
           " rope(r, 100.0)]\n")
    got = [_host(v) for v in zynbook.run(src, device=device, x=x, w=w, m=m, r=r)]
    x64 = x.astype(np.float64)
    p = np.exp(m.astype(np.float64) - m.max())
    for _ in range(3):
        p = p / p.sum(axis=1, keepdims=True)
        p = p / p.sum(axis=0, keepdims=True)
    angle = np.arange(5)[:, None] * 100.0 ** (-2.0 * np.arange(3)[None, :] / 6)
    c, s = np.cos(angle), np.sin(angle)
    x0, x1 = r[..., 0::2].astype(np.float64), r[..., 1::2].astype(np.float64)
    rope = np.empty(r.shape)
    rope[..., 0::2], rope[..., 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    want = [_softmax(x64, 0), _softmax(x64, 1), x64.sum(1), x64.mean(0),
            np.argmax(x, 1), np.argmin(x, -1), np.maximum(x, 0), np.minimum(np.minimum(x, 0.5), 1),
            x.max(axis=0), x64 * w / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5),
            p, rope]
    for k, (g, v) in enumerate(zip(got, want)):
        if v.dtype.kind in "iu":
            np.testing.assert_array_equal(g, v, err_msg=str(k))
        else:
            assert_equals_numpy(g, v, 2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_optionals_by_position(device):
    """The library's attention(q, k, v, mask, causal, scale) takes causal and scale by
    position after the mask, equal to numpy's causal attention."""
    from zynbook import library
    rng = np.random.default_rng(16)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    mask = np.ones((4, 4), bool)
    got = _host(library.run("attention", device, [q, k, v, mask, True, 0.25], {}))
    s = np.einsum("bhid,bhjd->bhij", q, k).astype(np.float64) * 0.25
    s = np.where(np.tril(np.ones((4, 4), bool)), s, -np.inf)
    assert_equals_numpy(got, _softmax(s, -1) @ v.astype(np.float64), 2e-5)


@pytest.mark.parametrize("src, column, words", [
    ("rmsnorm(x, w, 1e-5, 2)", 21, "at most 3 positional"),
    ("sum(x, 1, 2)", 11, "at most 2 positional"),
    ("softmax(x, 1, 2)", 15, "at most 2 positional"),
    ("softmax(x, 1, axis=1)", 12, "axis is given twice"),
    ("rmsnorm(x, w, 1e-5, eps=1.0)", 15, "eps is given twice"),
    ("rmsnorm(x, w, -1.0)", 15, "eps= takes a finite number"),
    ("sum(x, 7)", 8, "axis 7 is outside"),
    ("max(x, 0, axis=1)", 16, "takes no axis="),
])
def test_positional_argument_errors_name_the_argument(src, column, words):
    """Too many positions, a keyword given twice, and a bad value given by position: an error
    of its kind at the argument, its caret under it."""
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ZynMLError) as info:
        zynbook.run("let y = 1\n" + src + "\n", x=x, w=np.ones(4, np.float32))
    err = info.value
    assert words in err.message, err
    assert err.kind in ("type", "shape") and (err.span.line, err.span.column) == (2, column), err
    assert "^" in err.render(), err.render()


_POOL = ('let pool = memory_pool(device="{device}", size=1MB)\n'
         'let a = pool.allocate(shape=[4])\n'
         'let kept = tensor([0.5, -1.0, 2.0, 4.0]).to_device("{device}")\n'
         'let before = a + kept\n'
         'pool.reset()\n')


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use, column", [
    ("a + 1.0", 1), ("a[0] = 1.0", 1), ('a.to_device("cpu")', 1), ("a.numpy()", 1),
    ("compute(a) {\n    for i in 0..n:\n        out[i] = a[i] * 2.0\n}", 9), ("sum(a)", 5),
    ("pool.free(a)", 11)])
def test_a_tensor_of_a_reset_pool_is_not_read(device, use, column):
    """After pool.reset() a tensor allocated from the pool was still read (a + 1.0 gave its
    old values from memory the pool may hand out again): any use is a runtime error naming
    it at its line; tensors not from the pool, values computed before the reset and a fresh
    allocation equal numpy's."""
    src = _POOL.format(device=device)
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src + use + "\n")
    err = info.value
    assert err.kind == "runtime" and "`a`" in err.message and "pool.reset()" in err.message, err
    assert (err.span.line, err.span.column) == (6, column), err
    assert "^" in err.render()
    kept = np.array([0.5, -1.0, 2.0, 4.0], np.float32)
    got = zynbook.run(src + "let b = pool.allocate(shape=[4])\n[kept * 2.0, before, b + 1.0]\n")
    for g, want in zip(got, [kept * 2.0, np.zeros(4, np.float32) + kept, np.ones(4, np.float32)]):
        assert_equals_numpy(_host(g), want, 0)


def test_a_reset_pools_tensor_read_from_python_is_refused():
    """The tensor a session holds is refused from Python too (numpy() read freed memory)."""
    session = zynbook.Session("cpu")
    session.run(_POOL.format(device="cpu"))
    with pytest.raises(ZynMLError) as info:
        session.namespace["a"].numpy()
    assert info.value.kind == "runtime" and "pool.reset()" in info.value.message
    assert_equals_numpy(_host(session.namespace["kept"]), [0.5, -1.0, 2.0, 4.0], 0)
