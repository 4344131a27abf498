"""Programs with the mistakes a user makes, written from the language reference and the
spec: each is a ZynML error of the right kind whose line and column point at the mistake,
with a caret, on every device present; the session runs a correct program afterwards; and
correct programs over unusual host data (views, Fortran order, torch tensors, scalars)
give numpy's answer on every device. Also through `%%compute`."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError

from compute_testing import raises  # noqa: E402

DEVICES = [d["id"] for d in zynbook.compute_devices() if not d["id"].startswith("browser")]
X6 = np.arange(6, dtype=np.float32)


# ---------------------------------------------------------------------------- syntax

def test_deeply_nested_literals_run_or_are_refused_with_a_message():
    """A list literal nested 300 deep parses (its tree was too deep for the syntax cache's
    pickle: a Python RecursionError); deeper ones are a ZynML error that says what to do,
    and the session goes on."""
    def nested(depth):
        return "let a = " + "[" * depth + "1" + "]" * depth + "\nlen(a)\n"

    assert zynbook.Session("cpu").run(nested(300)) == 1
    for depth in (400, 600, 3000):
        try:
            assert zynbook.Session("cpu").run(nested(depth)) == 1
        except ZynMLError:
            err = raises("syntax" if depth > 400 else "runtime", nested(depth), 1, 1)
            assert "nested too deep" in err.message or "nests expressions too deeply" in \
                err.message


@pytest.mark.parametrize("src,line,column,opened", [
    ("let a = [1, 2\nlet b = 3\n", 2, 1, (1, 9)),
    ("let a = zeros([2], dtype=f32\nvar b = 3\n", 2, 1, (1, 14)),
    ("let a = max(1,\nfor i in 0..2:\n    print(i)\n", 2, 1, (1, 12)),
    ("let y = compute(x) {\n    @workgroup(16, 16\n    for i in 0..n:\n"
     "        out[i] = x[i]\n}\n", 3, 5, (2, 15)),
])
def test_a_bracket_left_open_is_named_where_the_next_statement_starts(src, line, column,
                                                                     opened):
    """The error is where the parse broke (the next statement's keyword) and says which
    bracket is still open, with a note under it (it said only "unexpected 'let'; expected
    '!=', '%', ...")."""
    err = raises("syntax", src, line, column, x=X6)
    assert "is still open" in err.message
    assert [(n.line, n.column) for _, n in err.notes] == [opened]
    assert err.render().count("^") >= 2


def test_host_ints_of_any_length_are_printed_and_named_in_errors(capsys):
    """`print` of an int past Python's 4300-digit repr limit writes it (it was a runtime
    error quoting sys.set_int_max_str_digits), and a kernel scalar too wide for 64 bits is
    the type error it is (the message could not be made: a runtime error)."""
    session = zynbook.Session("cpu")
    session.run("print(2 ** 20000, [1, \"a\", 2 ** 20000])")
    out = capsys.readouterr().out
    whole = str(__import__("decimal").Decimal(2 ** 20000))
    assert out == f"{whole} [1, 'a', {whole}]\n"
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * s\n}\ny\n"
    err = raises("type", src, 3, 25, x=X6, s=2 ** 20000)
    assert "(an int of 6021 digits, rounded here) does not fit a 64-bit integer" in err.message


@pytest.mark.parametrize("src,column", [
    ("pipeline f(t: tensr):\n    return t\nf(x)\n", 15),          # (said at the call, 3:3)
    ("pipeline f(t: tensr):\n    return t\n1\n", 15),             # (never said)
    ("pipeline f(t) -> tensr:\n    return t\nf(x)\n", 18),
])
def test_a_misspelt_type_in_a_pipeline_signature_is_refused_there(src, column):
    err = raises("type", src, 1, column, x=X6)
    assert "unknown type `tensr`" in err.message


def test_a_config_key_given_twice_is_refused_before_any_is_set():
    """(The last one won, silently.)"""
    session = zynbook.Session("cpu")
    err = raises("type", "config { seed: 1, seed: 2 }", 1, 19)
    assert "`seed` is given twice" in err.message
    with pytest.raises(ZynMLError):
        session.run('config {\n    compute_device: "cpu:native"\n    compute_device: "cpu"\n}')
    assert session.default_device == "cpu"


# ------------------------------------------------------------------- host builtins

@pytest.mark.parametrize("src,kind,column,words", [
    # dtype names the reference lists were unknown names
    ("let t = zeros([2], dtype=bool)\nt.dtype", None, None, "bool"),
    ("let t = ones([2], dtype=double)\nt.dtype", None, None, "f64"),
    ("let t = zeros([2], dtype=uint8)\nt.dtype", None, None, "u8"),
    # random numbers in an integer dtype were all 0
    ("let t = randn([2], dtype=i32)", "type", 9, "makes floats"),
    ("let t = rand([2], dtype=int)", "type", 9, "makes floats"),
    # numpy's own words, as runtime errors
    ("let t = softmax(zeros([2, 3]), axis=4)", "shape", 37, "axis 4 is outside"),
    ("let t = transpose(zeros([2, 3]), [0, 0])", "shape", 9, "not an order of the 2 axes"),
    ("let t = reshape(zeros([4]), [-2, -2])", "shape", 9, "no negative sizes"),
    ("let t = zeros(-1)", "shape", 9, "no negative sizes"),
    ("let t = arange(0, 5, 0)", "type", 9, "step must not be 0"),       # "division by zero"
    ("let t = arange(0.0, 1e30)", "memory", 9, "out of memory"),
    ("let t = zeros([4])[tensor([true, false])]", "shape", 20, "mask of shape [2]"),
    ("let t = zeros([4])[tensor([0, 7])]", "shape", 20, "out of range for axis 0"),
    ("let t = zeros([4])[tensor([0.0, 1.0])]", "type", 20, "integers or bools, not f32"),
    ('print(1, sep=",")', "type", 1, "no parameter `sep`"),        # dropped unread
])
def test_host_builtin_mistakes_say_what_is_wrong(src, kind, column, words):
    if kind is None:
        assert zynbook.Session("cpu").run(src) == words
        return
    err = raises(kind, src, 1, column)
    assert words in err.message


@pytest.mark.parametrize("src,column,words", [
    # an input (it said "it is declared with let")
    ("x = 5\n", 1, "`x`: it is an input of the program (bound from outside it, not by var); "
                   "declare it again with `var x = x`"),
    ("let y = 1\ny = 5\n", 1, "`y`: it is declared with let (use var to change it)"),
    ("for i in range(3):\n    i = 2\n", 5, "`i`: it is a loop variable"),
    ("pipeline f(t):\n    t = 2\n    return t\nf(1)\n", 5,
     "`t`: it is a parameter of pipeline f; declare it again with `var t = t`"),
    ("pipeline f(t):\n    return t\nf = 3\n", 1, "`f`: it names a pipeline"),
])
def test_assigning_a_name_that_is_not_a_var_says_what_the_name_is(src, column, words):
    line = next(k for k, text in enumerate(src.splitlines(), 1) if " = " in text and
                not text.lstrip().startswith(("let", "var", "for", "pipeline")))
    err = raises("type", src, line, column, x=X6)
    assert f"cannot assign to {words}" in err.message, err
    assert "declared with let" not in err.message or src.startswith("let")
    # what the message says to write runs
    assert zynbook.Session("cpu").run("var x = x\nx = 5\nx\n", x=X6) == 5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stmt,words", [
    ("s = 5.0", "`s`: it is a number of the host program, which the block reads but cannot "
                "change; declare a var of the block from it (`var s_ = s`)"),
    ("n = 5", "`n`: it is a size (an axis of an input or an int of the host program)"),
    ("k += 1", "`k`: it is a size (an axis of an input or an int of the host program)"),
])
def test_assigning_a_host_value_inside_a_block_says_what_it_is(device, stmt, words):
    """(It said "`s` is not declared; declare it with `var s = ...`".)"""
    src = ("let s = 2.0\nlet k = 3\nlet y = compute(x) {\n    for i in 0..n:\n"
           f"        {stmt}\n        out[i] = x[i] * s + k\n}}\ny\n")
    err = raises("type", src, 5, 9, device, x=X6)
    assert f"cannot assign to {words}" in err.message, err
    got = zynbook.Session(device).run(src.replace(stmt, "var s_ = s\n        s_ = 5.0"), x=X6)
    np.testing.assert_allclose(np.asarray(got), X6 * 2.0 + 3)


def test_program_text_of_the_wrong_type_or_unusual_characters(tmp_path, capsys):
    """zynbook.compile(5) is the type error run() gives (an AttributeError before); a lone
    surrogate in a string literal runs (the syntax cache's key raised UnicodeEncodeError);
    a file saved with a byte order mark reads as its text on the command line (a syntax
    error at its invisible first character before)."""
    from zynbook import cli

    with pytest.raises(ZynMLError, match="text \\(a str\\), not int") as info:
        zynbook.compile(5)
    assert info.value.kind == "type"
    assert zynbook.Session("cpu").run('let s = "a\ud800"\nlen(s)\n') == 2
    good, bad = tmp_path / "good.zyn", tmp_path / "bad.zyn"
    good.write_bytes(b"\xef\xbb\xbflet a = 1 + 2\na\n")
    bad.write_bytes(b"\xef\xbb\xbflet a = 1 +* 2\n")
    assert cli.main(["run", str(good)]) == 0
    assert capsys.readouterr().out.strip() == "3"
    assert cli.main(["check", str(bad)]) == 1
    assert "line 1, column 12" in capsys.readouterr().err


# --------------------------------------------------------------------- loops and sizes

@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_step_given_by_the_host_must_be_positive(device):
    """A host int as a loop's step is checked at the launch as a constant step is when the
    block compiles (a step of 0 looped forever on cpu:native and gave zeros on WebGPU; a
    negative one ran out of range)."""
    x = np.arange(6, dtype=np.float32)
    src = ("let y = compute(x) {\n"
           "    for i in 0..6 step s:\n"
           "        out[i] = x[i]\n"
           "}\ny\n")
    for s in (0, -2):
        err = raises("type", src, 2, 24, device, x=x, s=s)
        assert "step must be positive" in err.message and str(s) in err.message
    got = zynbook.Session(device).run(src, x=x, s=2)
    np.testing.assert_array_equal(np.asarray(got), [0, 0, 2, 0, 4, 0])


@pytest.mark.parametrize("device", DEVICES)
def test_an_output_of_negative_size_points_at_the_block(device):
    """Writes that all land below 0 give `out` a negative axis: a shape error with the caret
    under the block's `compute` (it was under the `let`). A host int bound below 0 runs no
    iteration, as Python's range(-2) does: out is empty."""
    src = ("let y = compute(x) {{\n"
           "    for i in 0..k:\n"
           "        out[i{shift}] = x[i]\n"
           "}}\ny\n")
    err = raises("shape", src.format(shift=" - 5"), 1, 9, device, x=np.ones(3, np.float32), k=3)
    assert "-2 elements" in err.message
    got = zynbook.Session(device).run(src.format(shift=""), x=np.ones(3, np.float32), k=-2)
    assert np.asarray(got).shape == (0,)


@pytest.mark.parametrize("device", DEVICES)
def test_a_shared_array_index_out_of_range_is_the_same_error_everywhere(device):
    """A shared array read or written past its size: the CPU reference said numpy's "index 9
    is out of bounds for axis 1 with size 4" at line 1 (or wrapped a negative index), the
    compiled devices a runtime error at the statement; now all say the latter, pointing
    at the index."""
    src = ("let y = compute(x) {{\n"
           "    for r in 0..1:\n"
           "        shared var s[4]\n"
           "        {write}\n"
           "        barrier()\n"
           "        out[r] = s[{read}]\n"
           "}}\ny\n")
    for write, read, line, value, column in (("s[0] = 1.0", "9", 6, 9, 20),
                                             ("s[0] = 1.0", "0 - 1", 6, -1, 20),
                                             ("s[int(x[5])] = 1.0", "0", 4, 5, 11)):
        err = raises("runtime", src.format(write=write, read=read), line, column, device, x=X6)
        assert err.message == f"index {value} is out of range for an axis of size 4 of `s`"
    got = zynbook.Session(device).run(src.format(write="s[3] = 2.0", read="3"), x=X6)
    np.testing.assert_array_equal(np.asarray(got), [2.0])


@pytest.mark.parametrize("device", DEVICES)
def test_a_tile_written_into_a_slice_of_out_of_another_length(device):
    """`out[r, 0:2] = m[r]` with rows of 4: a shape error at the store on every device (the
    CPU reference failed in numpy's words at line 1, the compiled devices cut the row to
    2); a row that fits runs."""
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = ("let y = compute(m) {{\n"
           "    for r in 0..rows:\n"
           "        out[r, {sl}] = m[r]\n"
           "}}\ny\n")
    err = raises("shape", src.format(sl="0:2"), 3, 9, device, m=m)
    assert "differ: 2 and 4" in err.message
    got = zynbook.Session(device).run(src.format(sl="1:5"), m=m)
    np.testing.assert_array_equal(np.asarray(got)[:, 1:], m)


@pytest.mark.parametrize("device", DEVICES)
def test_tiles_that_do_not_fit_at_the_launch_fail_at_their_statement(device):
    """`m[0:2] @ m[0:2]` of a [3, 4] m: the inner sizes (4 and 2) are known only at the
    launch. A runtime error at the statement on every device (the CPU reference gave
    numpy's words at the host line that launched the block, 1:1)."""
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = ("let y = compute(m) {\n"
           "    for r in 0..1:\n"
           "        out[r] = m[0:2] @ m[0:2]\n"
           "}\ny\n")
    raises("runtime", src, 3, 9, device, m=m)


# ------------------------------------------------------------------------- host data

WEBGPU = [d["id"] for d in zynbook.compute_devices()
          if d.get("backend") in ("vulkan", "gl", "metal", "dx12")]

DOUBLE_BLOCK = ("let y = compute(x) {\n"
                "    @kernel elementwise\n"
                "    for i in 0..n:\n"
                "        out[i] = x[i] * 2.0 + 1.0\n"
                "}\ny\n")


@pytest.mark.parametrize("device", WEBGPU)
def test_what_a_webgpu_device_cannot_hold_is_refused_at_the_block(device):
    """u64 values past 32 bits, and f64 where the adapter lacks shader-f64, are device errors
    with the caret under the block's `compute` (they pointed at column 1, the `let`)."""
    err = raises("device", DOUBLE_BLOCK, 1, 9, device, x=np.array([2**63 + 5, 1], np.uint64))
    assert "u32" in err.message
    info = next(d for d in zynbook.compute_devices() if d["id"] == device)
    if "shader-f64" not in info.get("features", []):
        err = raises("device", DOUBLE_BLOCK, 1, 9, device, x=np.arange(4, dtype=np.float64))
        assert "shader-f64" in err.message


MATMUL = ("let C = compute(A, B) {\n"
          "    @kernel matmul\n"
          "    for i in 0..M, j in 0..N:\n"
          "        var sum = 0.0\n"
          "        for k in 0..K:\n"
          "            sum += A[i, k] * B[k, j]\n"
          "        out[i, j] = sum\n"
          "}\nC\n")
ROW_MAX = ("let t = compute(x) {\n"
           "    @kernel reduce(max, axis=1)\n"
           "    for r in 0..rows, c in 0..cols:\n"
           "        yield x[r, c]\n"
           "}\nt\n")
AFFINE = ("let t = compute(x) {\n"
          "    @kernel elementwise\n"
          "    for r in 0..rows, c in 0..cols:\n"
          "        out[r, c] = x[r, c] * a + b\n"
          "}\nt\n")


def _unusual_inputs():
    """Valid host data of unusual layouts and kinds: (name, value, its numpy array)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    base = rng.standard_normal((6, 10)).astype(np.float32)
    wide = rng.standard_normal((12, 20)).astype(np.float32)
    t_slice = torch.from_numpy(wide.copy())[:, 3:13][::2]
    readonly = base.copy()
    readonly.setflags(write=False)
    return [("fortran", np.asfortranarray(base), base),
            ("strided", wide[::2, ::2], wide[::2, ::2]),
            ("reversed", base[::-1, ::-1], base[::-1, ::-1]),
            ("torch transposed", torch.from_numpy(base.T.copy()).T, base),
            ("torch slice", t_slice, t_slice.numpy()),
            ("bool", base > 0, base > 0),
            ("int8", (base * 3).astype(np.int8), (base * 3).astype(np.int8)),
            ("read-only", readonly, base)]


@pytest.mark.parametrize("device", DEVICES)
def test_unusual_host_data_gives_numpys_answer(device):
    """Views, Fortran order, torch views, bool and int8 arrays, numpy and torch scalars: a
    matmul, a row reduction and an affine map over them equal numpy's on every device."""
    torch = pytest.importorskip("torch")
    session = zynbook.Session(device)
    b = np.random.default_rng(8).standard_normal((10, 3)).astype(np.float32)
    for name, value, array in _unusual_inputs():
        wide = array.astype(np.float64)
        got = np.asarray(session.run(MATMUL, A=value, B=b))
        np.testing.assert_allclose(got, wide @ b, rtol=1e-4, atol=1e-4, err_msg=name)
        got = np.asarray(session.run(ROW_MAX, x=value))
        np.testing.assert_array_equal(got.astype(np.float64), array.max(1), err_msg=name)
        got = np.asarray(session.run(AFFINE, x=value, a=np.float32(2.5), b=torch.tensor(1.0)))
        np.testing.assert_allclose(got, wide * 2.5 + 1.0, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("written,meant", [("CPU", "cpu"), (" cpu", "cpu"),
                                           ("Cpu:Native", "cpu:native"), ("nope", None)])
def test_a_device_id_typed_loosely_is_refused_with_the_id_meant(written, meant):
    """Device ids are exact; one that differs from a present id only in case or spaces
    names it. Refused at the @device argument, by Session(...) and by zynbook.run."""
    present = {d["id"] for d in zynbook.compute_devices()}
    if meant is not None and meant not in present:
        pytest.skip(f"no {meant} here")
    src = f'let y = compute(x) @device("{written}") {{\n    for i in 0..n:\n' \
          f'        out[i] = x[i]\n}}\ny\n'
    err = raises("device", src, 1, 28, x=X6)
    hint = f"(did you mean `{meant}`?)"
    assert (hint in err.message) == (meant is not None), err.message
    with pytest.raises(ZynMLError, match="did you mean" if meant else "available"):
        zynbook.Session(written)


# ------------------------------------------------------------------------ annotations

def block(annotation, body="out[i] = x[i]", outside=""):
    """A one-loop block over `x` with `annotation` as its first body line (line 2)."""
    return (f"let y = compute(x){outside} {{\n"
            f"    {annotation}\n"
            f"    for i in 0..n:\n"
            f"        {body}\n"
            "}\ny\n")



@pytest.mark.parametrize("annotation,column,words", [
    ('@shared("a")', 13, "size in bytes"),          # a string, a float: accepted and unused
    ("@shared(1.5)", 13, "size in bytes"),
    ("@tile(block=4, block=8)", 20, "`block` is given twice"),     # the first was dropped
    ("@broadcast(x, axis=0, axis=0)", 27, "`axis` is given twice"),
])
def test_annotation_arguments_that_are_not_what_the_annotation_takes(annotation, column, words):
    err = raises("type", block(annotation), 2, column, x=X6)
    assert words in err.message


def test_kernel_parameters_are_integers_in_their_range():
    """reduce's axis= and conv2d's stride= and padding= are integers (an axis of 0.5 was
    taken as 0, a stride of 1.5 or 0 ignored or reported as an undefined out_h, a padding
    of -5 as an output of -3 rows), each given once."""
    src = block("@kernel reduce(+, axis=0.5)", "yield x[i]")
    assert "axis" in raises("type", src, 2, 28, x=X6).message
    raises("type", block("@kernel reduce(+, axis=0, axis=0)", "yield x[i]"), 2, 31, x=X6)
    conv = ("let y = compute(input, kernel) {{\n"
            "    @kernel conv2d({params})\n"
            "    for b in 0..batch, oc in 0..out_channels:\n"
            "        for oh in 0..out_h, ow in 0..out_w:\n"
            "            var sum = 0.0\n"
            "            for ic in 0..in_channels:\n"
            "                for kh in 0..kernel_h, kw in 0..kernel_w:\n"
            "                    let ih = oh * stride + kh - padding\n"
            "                    let iw = ow * stride + kw - padding\n"
            "                    if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:\n"
            "                        sum += input[b, ic, ih, iw] * kernel[oc, ic, kh, kw]\n"
            "            out[b, oc, oh, ow] = sum\n"
            "}}\ny\n")
    data = dict(input=np.ones((1, 2, 9, 9), np.float32), kernel=np.ones((4, 2, 3, 3), np.float32))
    for params, column in (("stride=1.5, padding=1", 27), ("stride=0, padding=1", 27),
                           ("stride=1, padding=-5", 38)):
        err = raises("type", conv.format(params=params), 2, column, **data)
        assert params.split(", ")[0 if column == 27 else 1].split("=")[0] in err.message
    got = zynbook.Session("cpu").run(conv.format(params="stride=2, padding=1"), **data)
    assert np.asarray(got).shape == (1, 4, 5, 5)


def test_barrier_used_as_a_value_says_it_is_a_statement():
    """(It said "unknown function `barrier`; did you mean `barrier`?".)"""
    err = raises("type", block("@kernel elementwise", "out[i] = barrier()"), 4, 18, x=X6)
    assert "statement" in err.message and "did you mean" not in err.message


# --------------------------------------------------------------------------- %%compute

from notebook_shell import shell  # noqa: E402,F401  (the fixture)

def cell(shell, line, body, **names):
    """Run `%%compute line` over `body` with `names` in the notebook: (value, error)."""
    shell.user_ns.update(names)
    result = shell.run_cell(f"%%compute {line}\n{body}")
    value = result.result       # a cuda:N result comes back as CuPy's: its values, on the host
    return (value.get() if type(value).__module__.startswith("cupy") else value), \
        result.error_in_exec


DOUBLE = ("let y = compute(x) {\n"
          "    @kernel elementwise\n"
          "    for i in 0..n:\n"
          "        out[i] = x[i] * 2.0 + 1.0\n"
          "}\ny\n")


def test_compute_cell_never_reads_a_value_the_notebook_replaced(shell):
    """A notebook name rebound to something ZynML cannot use (None, a function, bytes)
    is a type error at the cell's read of it, not a run on the array it held before (the
    magic skipped such values, so the session's older binding was used)."""
    value, err = cell(shell, "", DOUBLE, x=np.ones(3, np.float32))
    assert err is None
    np.testing.assert_array_equal(value, [3, 3, 3])
    for bad in (None, lambda: 1, b"x"):
        value, err = cell(shell, "", DOUBLE, x=bad)
        assert isinstance(err, ZynMLError) and err.kind == "type", (bad, value)
        assert (err.line, err.column) == (2, 17)       # `x` in compute(x); line 1: %%compute
    value, err = cell(shell, "", "let q = s\n", s=2.0)
    value, err = cell(shell, "", "q + s\n", s=None)
    assert isinstance(err, ZynMLError) and err.kind == "type"
    value, err = cell(shell, "", DOUBLE, x=np.arange(3, dtype=np.float32))
    assert err is None
    np.testing.assert_array_equal(value, [1, 3, 5])


# ------------------------------------------------------------------ the Jupyter kernel

@pytest.fixture(scope="module")
def kc():
    pytest.importorskip("ipykernel")
    from test_kernel_support import kernel_client
    yield from kernel_client()


def kernel_run(kc, code):
    """(status, the error's evalue or None, the text/plain results) of a kernel cell."""
    from test_kernel_support import errors_of, execute, results_of

    reply, outputs = execute(kc, code)
    errors = errors_of(outputs)
    for err in errors:       # a user's mistake shows no Python stack
        assert err["ename"].startswith("ZynML"), err
        assert "Traceback" not in "\n".join(err["traceback"])
    text = [r.get("text/plain", "") for r in results_of(outputs)]
    return reply["status"], errors[0]["evalue"] if errors else None, text


def test_kernel_cell_never_reads_a_value_python_replaced(kc):
    """`%python x = None` (or a function) after ZynML read `x` is a type error where the
    ZynML reads it again, not a run on the array Python held before."""
    status, _, text = kernel_run(kc, "%python import numpy as np\n"
                                     "%python x = np.ones(3, dtype=np.float32)\n"
                                     "let y = x * 2.0\ny")
    assert status == "ok" and "[2. 2. 2.]" in text[0]
    for value in ("None", "lambda: 1"):
        status, evalue, _ = kernel_run(kc, f"%python x = {value}\nlet y = x * 2.0\ny")
        assert status == "error" and "(line 2, column 9)" in evalue, evalue
    status, _, text = kernel_run(kc, "%python x = np.arange(3, dtype=np.float32)\n"
                                     "let y = x * 2.0\ny")
    assert status == "ok" and "[0. 2. 4.]" in text[0]


def test_kernel_shows_a_host_int_of_any_length(kc):
    """Host ints are unbounded: `2 ** 100000` is shown whole and a far longer one rounded
    with its number of digits (Python's repr refused more than 4300 digits: a ValueError
    shown as the cell's error)."""
    status, evalue, text = kernel_run(kc, "2 ** 100000")
    assert status == "ok", evalue
    assert text == [str(__import__("decimal").Decimal(2 ** 100000))]
    status, evalue, text = kernel_run(kc, "[10 ** 200000, 3]")
    assert status == "ok", evalue
    assert "1.000000000000000e+200000 (an int of 200001 digits" in text[0] and ", 3]" in text[0]
    assert kernel_run(kc, "let a = 6 * 7\na")[2] == ["42"]


@pytest.mark.parametrize("device", DEVICES)
def test_compute_cells_on_every_device_over_unusual_data_and_mistakes(shell, device):
    """`%%compute @device(...)` over torch views and Fortran arrays gives numpy's answer;
    a misspelt name, an index out of range and a step of 0 are ZynML errors at the cell's
    line (the magic line is line 1) and column; the next cell runs."""
    torch = pytest.importorskip("torch")
    line = f'@device("{device}")'
    base = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0
    for value in (torch.from_numpy(base.T.copy()).T, np.asfortranarray(base), base[:, ::-1]):
        got, err = cell(shell, line, AFFINE, x=value, a=2.0, b=np.float64(0.5))
        assert err is None, err
        np.testing.assert_allclose(np.asarray(got), np.asarray(value) * 2.0 + 0.5)
    ramp = np.arange(4, dtype=np.float32)
    mistakes = [
        ("name", AFFINE.replace("* a + b", "* a + bb"), base, 5, 35),
        ("runtime", "let t = compute(x) {\n    for i in 0..n:\n        out[i] = x[int(x[i]) + 5]\n"
                    "}\nt\n", ramp, 4, 20),        # (the index, on line 3 of the cell)
        ("type", "let t = compute(x) {\n    for i in 0..4 step s:\n        out[i] = x[i]\n}\nt\n",
         ramp, 3, 24),
    ]
    for kind, body, x, at_line, at_column in mistakes:
        _, err = cell(shell, line, body, x=x, s=0, a=2.0, b=0.5)
        assert isinstance(err, ZynMLError) and err.kind == kind, (kind, err)
        assert (err.line, err.column) == (at_line, at_column), err
        assert "^" in err.render()
    got, err = cell(shell, line, AFFINE, x=base, a=1.0, b=0.0)
    assert err is None and np.array_equal(np.asarray(got), base)
