"""The kernel's text side: splitting cells, is_complete, cursor helpers, the Pygments lexer."""
from __future__ import annotations

import pytest
from pygments.token import Comment, Keyword, Name, Number, String

from zynbook.compiler.parser import parse
from zynbook.highlight import ZynMLLexer, highlight_html, lexer_for
from zynbook.kernel import cells

BLOCK = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}"""


def test_split_cell_orders_zynml_magics_and_python():
    cell = "%device cpu\nlet a = 1\n%python b = a + 1\nlet c = b\n%time let d = c\ne"
    parts = cells.split_cell(cell)
    assert [(p.kind, p.name or p.timed) for p in parts] == [
        ("magic", "device"), ("zynml", ""), ("python", ""), ("zynml", ""),
        ("zynml", "time"), ("zynml", "")]
    assert parts[0].args == "cpu"
    assert parts[2].text == "b = a + 1"
    # ZynML keeps the cell's line numbers
    assert parts[3].text.splitlines()[3] == "let c = b"
    assert parts[5].text.splitlines()[5] == "e"


def test_split_cell_bare_timers_take_the_rest_of_the_cell():
    parts = cells.split_cell("let a = 1\n%timeit -n 3\nlet b = a\nb")
    assert [p.timed for p in parts] == ["", "timeit"]
    assert parts[1].args == "-n 3"
    (p,) = cells.split_cell("%timeit -n 2 -r 3 let a = 1")
    assert (p.args, p.text) == ("-n 2 -r 3", "let a = 1")
    assert parts[1].text.splitlines()[2:] == ["let b = a", "b"]


def test_split_cell_cell_magics():
    (p,) = cells.split_cell("%%python\nx = 1\ny = 2")
    assert p.kind == "python" and p.text == "x = 1\ny = 2"
    (p,) = cells.split_cell("%%timeit\nlet a = 1")
    assert p.kind == "zynml" and p.timed == "timeit" and p.text.splitlines()[1] == "let a = 1"
    (p,) = cells.split_cell('%%compute @device("cpu")\nlet a = 1')
    assert p.kind == "magic" and p.name == "%%compute" and p.args == '@device("cpu")'


def test_comment_only_chunks_are_dropped():
    assert [p.kind for p in cells.split_cell("// just a note\n%device cpu\n// another")] \
        == ["magic"]


@pytest.mark.parametrize("code,status", [
    ("let a = 1", "complete"),
    (BLOCK, "complete"),
    ("let y = compute(x) {", "incomplete"),
    ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:", "incomplete"),
    ("for i in 0..3:", "incomplete"),
    ("for i in 0..3:\n    let z = i", "incomplete"),
    ("for i in 0..3:\n    let z = i\n\n", "complete"),
    ("let a = (1 +", "incomplete"),
    ("let a = [1, 2,", "incomplete"),
    ("let = 3", "invalid"),
    ("let a = )", "invalid"),
    ("%device cpu", "complete"),
    ("", "complete"),
])
def test_is_complete(code, status):
    assert cells.is_complete(code)[0] == status


def test_is_complete_indents_the_next_line():
    assert cells.is_complete("for i in 0..3:")[1] == "    "
    assert cells.is_complete("let y = compute(x) {")[1] == "    "
    assert cells.is_complete("let y = compute(x) {\n    @kernel elementwise\n"
                             "    for i in 0..n:")[1] == "        "


def test_cursor_helpers():
    assert cells.token_before("let a = @ker", 12) == ("@ker", 8)
    assert cells.token_before("%dev", 4) == ("%dev", 0)
    assert cells.word_at("let z = y.shape", 13)[0] == "y.shape"
    assert cells.word_at("exp(", 4)[0] == "exp"
    assert cells.line_col("ab\ncd", 4) == (2, 2)
    assert cells.defined_names("let (q, r) = f\nvar acc = 0\nfor a in 0..1, b in 0..2:") \
        == ["q", "r", "acc", "a", "b"]


def test_compute_at_finds_the_block_under_the_cursor():
    src = "let a = 1\n" + BLOCK + "\nlet b = a"
    program = parse(src)
    node = cells.compute_at(program, 4, 10)
    assert node is not None
    assert cells.span_text(src, node.span).startswith("compute(x) {")
    assert cells.span_text(src, node.span).endswith("}")
    assert cells.compute_at(program, 1, 3) is None
    assert cells.free_names(program)[:1] and "x" in cells.free_names(program)
    assert cells.bound_names(program) == ["a", "y", "b"]


# ---------------------------------------------------------------------- highlighting

def _tokens(src):
    return [(t, v) for t, v in ZynMLLexer().get_tokens(src) if v.strip()]


def test_lexer_tokens():
    toks = dict((v, t) for t, v in _tokens(
        '%device cuda:0\nlet z = compute(x) @device("cpu") {\n    @kernel reduce(+)\n'
        '    for i in 0..n:\n        yield exp(x[i]) * 1.5e3 // sum\n}\n'
        'let r = await z timeout 100ms else 0'))
    assert toks["%device cuda:0"] in Comment.Preproc
    assert toks["let"] in Keyword and toks["compute"] in Keyword
    assert toks["@device"] is Name.Decorator and toks["@kernel"] is Name.Decorator
    assert toks["reduce"] in Name.Builtin
    assert toks['"cpu"'] in String
    assert toks["exp"] is Name.Builtin
    assert toks["1.5e3"] in Number and toks["100ms"] in Number
    assert toks["// sum"] in Comment
    assert toks["await"] in Keyword and toks["timeout"] in Keyword


def test_lexer_for_generated_languages():
    assert isinstance(lexer_for("zynml"), ZynMLLexer)
    assert lexer_for("wgsl").name == "WebGPU Shading Language"
    assert lexer_for("cuda").name == "CUDA"
    assert lexer_for("python").name == "Python"
    assert lexer_for("ptx").name == "Text only"
    html = highlight_html(BLOCK, "zynml")
    assert '<span class="nd">@kernel</span>' in html


def test_lexer_is_registered_for_pygments():
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name("zynml")
    except ClassNotFound:
        pytest.skip("zynbook is not installed (the pygments.lexers entry point comes with it)")
    assert type(lexer).__name__ == "ZynMLLexer"


@pytest.mark.parametrize("code", ["", "x", "let a = 1 # hash", "%%", "let café = 1", "x.sh"])
def test_cursor_helpers_take_a_cursor_past_the_end(code):
    """A front end counting in UTF-16 units may send a cursor past the end of the text: the
    helpers read it as the end (an IndexError reached the kernel before)."""
    for cursor in (len(code) + 1, len(code) + 5):
        assert cells.word_at(code, cursor) == cells.word_at(code, len(code))
        assert cells.token_before(code, cursor) == cells.token_before(code, len(code))
