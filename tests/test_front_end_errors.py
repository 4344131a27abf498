"""Every front-end mistake is a ZynML error with a line, a column and a caret, never a Python
exception; near-misses that are legal get a note."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import zynbook
from zynbook.errors import (ZynMLError, ZynMLMemoryError, ZynMLNameError, ZynMLShapeError,
                            ZynMLSyntaxError, ZynMLTypeError, ZynMLWarning, source_lines)

ELEMENTWISE = "let y = compute(x{sep}) {{\n    @kernel elementwise\n    for i in 0..n:\n" \
              "        out[i] = x[i]\n}}\n"


def _error(fn, kind=ZynMLError) -> ZynMLError:
    with pytest.raises(kind) as info:
        fn()
    err = info.value
    assert err.line >= 1 and err.column >= 1, err
    text = err.render()
    assert err.message in text
    if err.source is not None and err.line <= len(source_lines(err.source)):
        assert "^" in text
    return err


@pytest.mark.parametrize("sep", ["\r", "\x0b", "\x1c", "\x1d", "\x1e", "\x85",
                                 "\u2028", "\u2029"])
def test_line_breaks_python_knows_but_zynml_does_not(sep):
    source = ELEMENTWISE.format(sep=sep)
    err = _error(lambda: zynbook.compile(source), ZynMLSyntaxError)
    assert (err.line, err.column) == (1, 18)
    assert "does not end a line" in err.message
    # the excerpt shows line 1 (the lexer's line), with the caret under the character
    rendered = err.render().splitlines()
    assert rendered[1].endswith("let y = compute(x ) {")
    assert rendered[2].index("^") == rendered[1].index("x ") + 1


def test_form_feed_is_blank_space_and_errors_after_it_keep_their_line():
    source = ELEMENTWISE.format(sep="\x0c")
    zynbook.compile(source)
    err = _error(lambda: zynbook.compile(source.replace("out[i] = x[i]", "out[i] = x[i) ")),
                 ZynMLSyntaxError)
    assert err.line == 4 and "^" in err.render()


def test_crlf_line_endings_are_line_breaks():
    source = ELEMENTWISE.format(sep="").replace("\n", "\r\n")
    out = zynbook.run(source, x=np.arange(4, dtype=np.float32))
    assert np.array_equal(np.asarray(out), np.arange(4, dtype=np.float32))
    err = _error(lambda: zynbook.compile(source.replace("out[i] = x[i]", "out[i] = x[i) ")),
                 ZynMLSyntaxError)
    assert err.line == 4


def test_index_without_a_loop_is_no_crash():
    source = "compute(x) {\n    @kernel elementwise\n    out[i] = x[i]\n}\n"
    try:
        zynbook.compile(source)
    except ZynMLError as err:
        assert err.line >= 1


@pytest.mark.parametrize("cut", range(1, 12))
def test_source_cut_off_inside_a_block_points_inside_the_source(cut):
    source = ("let y = compute(x, w) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        out[i] = x[i] * w[i] + (x[i] - 1.0)\n}\nlet z = y\n")
    lines = source.split("\n")
    # cut after `cut` tokens' worth of characters of each line but the first
    for k in range(1, len(lines)):
        text = "\n".join(lines[:k]) + "\n" + lines[k][:cut]
        try:
            zynbook.compile(text)
        except ZynMLError as err:
            assert 1 <= err.line <= len(source_lines(text)), (text, err.render())
            assert "^" in err.render()


def test_unclosed_brace_is_pointed_at():
    source = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n" \
             "        out[i] = x[i]\n"
    err = _error(lambda: zynbook.compile(source), ZynMLSyntaxError)
    assert (err.line, err.column) == (1, 20) and "never closed" in err.message
    # a line left of the block before its `}`: the open `{` is the note
    err = _error(lambda: zynbook.compile(source + "let z = 1\n"), ZynMLSyntaxError)
    assert err.line == 5
    assert err.notes and err.notes[0][1].line == 1 and err.notes[0][1].column == 20
    err = _error(lambda: zynbook.compile("let a = [1, 2,\n3 + (4\n"), ZynMLSyntaxError)
    assert "never closed" in err.message and (err.line, err.column) == (2, 5)


def test_broadcast_axis_out_of_range():
    body = "    @broadcast(v, axis={axis})\n    for i in 0..n, j in 0..m:\n" \
           "        out[i, j] = x[i, j] + v[j]\n}}\n"
    head = "let y = compute(x, v) {\n    @kernel elementwise\n"
    zynbook.compile(head + body.format(axis=1))
    err = _error(lambda: zynbook.compile(head + body.format(axis=5)), ZynMLShapeError)
    assert err.line == 3 and "axis 5" in err.message and "2 axes" in err.message
    _error(lambda: zynbook.compile(head + body.format(axis=2)), ZynMLShapeError)


def test_duplicate_loop_variable():
    source = "let y = compute(x) {\n    for i in 0..n, i in 0..m:\n        out[i] = x[i]\n}\n"
    err = _error(lambda: zynbook.compile(source), ZynMLSyntaxError)
    assert err.line == 2 and err.column == 20 and "`i`" in err.message
    assert err.notes[0][1].column == 9
    host = "for k in 0..3, k in 0..2:\n    let a = k\n"
    _error(lambda: zynbook.compile(host), ZynMLSyntaxError)


def test_near_miss_kernel_type_gets_a_note():
    source = ELEMENTWISE.format(sep="").replace("elementwise", "elementwize")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = zynbook.compile(source)
    notes = [w.message for w in caught if isinstance(w.message, ZynMLWarning)]
    assert notes and "elementwise" in str(notes[0]) and notes[0].span.line == 2
    assert program.notes and "did you mean `@kernel elementwise`" in program.notes[0][0]
    # a custom kernel name far from every known type is legal and quiet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = zynbook.compile(source.replace("elementwize", "my_blur"))
    assert not [w for w in caught if isinstance(w.message, ZynMLWarning)] and not program.notes


def test_unknown_function_in_a_kernel_suggests_a_builtin():
    source = ELEMENTWISE.format(sep="").replace("out[i] = x[i]", "out[i] = sqrtt(x[i])")
    err = _error(lambda: zynbook.run(source, x=np.ones(4, np.float32)), ZynMLNameError)
    assert "did you mean `sqrt`" in err.message and err.line == 4
    err = _error(lambda: zynbook.compile("let y = randnn([3])\n"), ZynMLNameError)
    assert "did you mean `randn`" in err.message


@pytest.mark.parametrize("value", [object(), print, {"w": object()}, [1, object()], type])
def test_python_objects_bound_as_inputs(value):
    for source in (ELEMENTWISE.format(sep=""), "let y = x + 1\n", "let y = x.w\n"):
        err = _error(lambda: zynbook.run(source, x=value), ZynMLTypeError)
        assert "Python value of type" in err.message and err.line == 1
        assert err.source_line[err.column - 1:].startswith("x")
    # a name the program never reads is not bound at all
    assert zynbook.run("let y = 2\n", x=value) == 2


def test_await_any_of_no_futures():
    err = _error(lambda: zynbook.run("let y = await any([])\n"), ZynMLTypeError)
    assert "no futures" in err.message
    assert zynbook.run("let y = await all([])\n") == []
    assert zynbook.run("let y = any([])\n") is False


@pytest.mark.parametrize("source", [
    "let y = allocate(shape=[2147483648, 5000], dtype=f32)\n",
    "let y = randn([10000000, 1000000])\n",
    "let y = zeros([1000000, 1000000], dtype=f64)\n",
    "let a = 1\nlet y = ones(shape=[4000000, 4000000], device=\"cpu\")\n",
])
def test_out_of_memory_is_a_zynml_error(source):
    # sizes past any machine's memory: refused before anything is allocated
    err = _error(lambda: zynbook.run(source), ZynMLMemoryError)
    assert err.line == source.count("\n") and "TiB" in err.message
    assert "shape [" in err.message


def test_kernel_output_too_large_is_a_zynml_error():
    source = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n, j in 0..m:\n" \
             "        out[i, j] = x[i]\n}\n"
    err = _error(lambda: zynbook.run(source, x=np.ones(3_000_000, np.float32), m=3_000_000),
                 ZynMLMemoryError)
    assert "TiB" in err.message and err.line == 1


def test_randn_f32_needs_no_f64_temporary_and_keeps_its_values():
    from zynbook.runtime import builtins as B
    old = B._CHUNK
    B._CHUNK = 7
    try:
        for shape in [(5,), (3, 11), (0,), (4, 0, 2)]:
            a = B._random(np.random.default_rng(3).standard_normal, shape, "f32")
            b = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
            assert a.dtype == np.float32 and np.array_equal(a, b)
    finally:
        B._CHUNK = old
    import tracemalloc
    tracemalloc.start()
    zynbook.run("let y = randn([2000, 1000], seed=1)\n")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2000 * 1000 * 4 * 1.6       # the f32 result and one chunk, not 8 MB of f64


@pytest.mark.parametrize("m", [np.int64(3), np.int32(3), np.array(3)])
def test_numpy_numbers_are_numbers(m):
    source = ELEMENTWISE.format(sep="").replace("0..n", "0..m").replace("x[i]", "x[i] * s")
    got = zynbook.run(source, x=np.ones(5, np.float32), m=m, s=np.float32(2.5))
    np.testing.assert_array_equal(np.asarray(got), np.full(3, 2.5, np.float32))


HOSTILE = [
    ("let y = compute(x) {\n    for i in 0..m:\n        out[i] = x[i]\n}\n", {"m": -3}),
    ("let y = compute(x) {\n    for i in 0..m:\n        out[i] = x[i]\n}\n", {"m": 2**40}),
    ("let y = compute(x) {\n    for i in 0..m:\n        out[i] = x[i]\n}\n", {"m": 3.5}),
    ("let y = compute(x) {\n    for i in 0..m:\n        out[i] = x[i]\n}\n", {"m": "3"}),
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i]\n}\n",
     {"x": np.array(["a", "b"])}),
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i]\n}\n",
     {"x": np.array([1 + 2j])}),
    ("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i]\n}\n",
     {"x": np.array([object()])}),
    ("let y = x[1.5]\n", {}), ("let y = 1 / 0\n", {}), ("let y = zeros([-1])\n", {}),
    ("let y = zeros([2**62, 2**62])\n", {}), ("let y = tensor([[1, 2], [3]])\n", {}),
    ("let y = split(x, 0)\n", {}), ("let y = concat([])\n", {}),
    ("let y = softmax(x, axis=5)\n", {}), ("let y = x.to_device(5)\n", {}),
    ("let p = memory_pool(size=1KB)\nlet t = p.allocate(shape=[1000000])\n", {}),
    ("let y = await x\n", {}), ("let y = len(3)\n", {}), ("let y = 5 % 0\n", {}),
    ("let y = tensor([1, 2]) @ tensor([1, 2, 3])\n", {}), ("let y = gelu(\"s\")\n", {}),
]


@pytest.mark.parametrize("source,env", HOSTILE)
def test_hostile_runs_are_zynml_errors(source, env):
    env = {"x": np.ones(5, np.float32), **env}
    try:
        zynbook.run(source, **env)
    except ZynMLError as err:
        assert err.line >= 1 and "^" in err.render(), err.render()


@pytest.mark.parametrize("callee", ["randn([3])", "[1, 2]", "3", "\"s\""])
def test_calling_a_value_is_a_zynml_error(callee):
    source = f"let x = {callee}\nlet y = x([1000], seed=2)\n"
    try:
        zynbook.compile(source)         # the checker refuses what it can see
    except ZynMLError as err:
        assert err.line == 2
    err = _error(lambda: zynbook.run(source))
    assert err.line == 2


@pytest.mark.parametrize("first, second, said", [
    ("shared var t[4]", "shared var t[4]", "already declared at line 3"),
    ("var t = 1.0", "shared var t[4]", "already declared at line 3"),
    ("let s = 2.0", "shared var i[4]", "already a loop variable at line 2"),
])
def test_a_shared_array_taking_a_name_the_block_declared_is_refused(first, second, said):
    """A second `shared var` of a name in scope was an internal compiler error (the CIR
    declared it twice); a later `var` of a shared array's name still shadows it."""
    src = (f"let y = compute(x) {{\n    for i in 0..n:\n        {first}\n        {second}\n"
           "        out[i] = x[i]\n}\ny")
    with pytest.raises(ZynMLNameError) as info:
        zynbook.Session("cpu").run(src, x=np.ones(3, np.float32))
    assert said in info.value.message and (info.value.line, info.value.column) == (4, 9)
    shadowed = ("let y = compute(x) {\n    for i in 0..n:\n        shared var t[4]\n"
                "        t[0] = x[i]\n        var t = 2.0\n        out[i] = t + x[i]\n}\ny")
    np.testing.assert_array_equal(zynbook.Session("cpu").run(shadowed, x=np.arange(3.0)).numpy(),
                                  [2.0, 3.0, 4.0])
