"""Mutated example programs either compile or fail with a ZynML error: never a Python
exception of any other kind (principle 4: no traceback reaches a notebook)."""
from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zynbook
from zynbook.compiler.parser import parse
from zynbook.errors import ZynMLError

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.zyn"))
SOURCES = [p.read_text() for p in EXAMPLES]

# pieces of ZynML (and a few things that are not) to splice in
TOKENS = [
    "{", "}", "(", ")", "[", "]", ":", ",", ".", "..", "...", "|>", "->", "@", "=", "+=",
    "-=", "*=", "/=", "==", "<=", "+", "-", "*", "/", "**", "^", "%", "let", "var", "var var",
    "for", "in", "step", "if", "elif", "else", "and", "or", "not", "yield", "return",
    "compute", "pipeline", "config", "await", "timeout", "shared var", "barrier()", "out",
    "out =", "@kernel", "@kernel reduce(+)", "@kernel reduce(argmax)", "@kernel matmul",
    "@workgroup(", "@workgroup(0)", "@shared(", "@tile(block_q=64)", "@device(\"cpu\")",
    "@async", "@broadcast(x, axis=1)", "0..n", "-inf", "1e-6", "1GB", "1000ms", "0", "-1",
    "3.5", "\"s\"", "'", "\"", "//", "\\\n", "\n", "    ", "\t", "\r\n", "x[i]", "K[b, h, 0:64]",
    "(a, b)", "[1, 2]", "true", "$", "#", "λ", "\x00",
]

_TOKEN = re.compile(r"\w+|\.\.\.?|\|>|->|[-+*/=<>!]=|\*\*|//[^\n]*|\S")


def _tokens(src: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN.finditer(src)]


def mutate(src: str, op: str, a: int, b: int, piece: str) -> str:
    """One mutation of `src`; a and b are arbitrary non-negative numbers that pick places."""
    if op.endswith("char"):
        if not src:
            return piece
        i, j = a % len(src), b % len(src)
        if op == "delete_char":
            return src[:i] + src[i + 1:]
        if op == "duplicate_char":
            return src[:i] + src[i] + src[i:]
        i, j = min(i, j), max(i, j)
        return src[:i] + src[j] + src[i + 1:j] + src[i] + src[j + 1:] if i != j else src
    if op.endswith("line"):
        lines = src.split("\n")
        i, j = a % len(lines), b % len(lines)
        if op == "delete_line":
            del lines[i]
        elif op == "duplicate_line":
            lines.insert(i, lines[i])
        elif op == "swap_line":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent_line":
            lines[i] = " " * (1 + b % 8) + lines[i]
        else:  # dedent_line
            lines[i] = lines[i][min(1 + b % 8, len(lines[i]) - len(lines[i].lstrip())):]
        return "\n".join(lines)
    spans = _tokens(src)
    if op == "insert_token" or not spans:
        i = a % (len(src) + 1)
        return src[:i] + piece + src[i:]
    (i0, i1), (j0, j1) = spans[a % len(spans)], spans[b % len(spans)]
    if op == "delete_token":
        return src[:i0] + src[i1:]
    if op == "duplicate_token":
        return src[:i1] + " " + src[i0:i1] + src[i1:]
    if op == "replace_token":
        return src[:i0] + piece + src[i1:]
    # swap_token
    if (i0, i1) == (j0, j1):
        return src
    (i0, i1), (j0, j1) = sorted([(i0, i1), (j0, j1)])
    return src[:i0] + src[j0:j1] + src[i1:j0] + src[i0:i1] + src[j1:]


OPS = ["delete_char", "duplicate_char", "swap_char", "delete_line", "duplicate_line",
       "swap_line", "indent_line", "dedent_line", "delete_token", "duplicate_token",
       "swap_token", "replace_token", "insert_token"]

mutation = st.tuples(st.sampled_from(OPS), st.integers(0, 10**6), st.integers(0, 10**6),
                     st.sampled_from(TOKENS))


def compile_or_parse(source: str):
    compile_ = getattr(zynbook, "compile", None)
    return (compile_ or parse)(source)


def check_mutant(source: str):
    try:
        compile_or_parse(source)
    except ZynMLError as err:
        assert err.kind and err.message, err
        n_lines = len(source.splitlines()) + 1
        assert 1 <= err.line <= n_lines and err.column >= 1, (err.line, err.column, err.message)
        rendered = err.render()
        assert isinstance(rendered, str) and err.message in rendered
        if err.line <= len(source.splitlines()):
            assert "^" in rendered


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SOURCES))), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_examples_compile_or_raise_zynml_errors(index, mutations):
    source = SOURCES[index]
    for op, a, b, piece in mutations:
        source = mutate(source, op, a, b, piece)
    check_mutant(source)


def test_mutate_changes_programs():
    """The mutations do what they say (so the fuzz test explores what it claims to)."""
    src = "let x = 1\nlet y = x + 2\n"
    assert mutate(src, "delete_char", 0, 0, "") == "et x = 1\nlet y = x + 2\n"
    assert mutate(src, "duplicate_line", 1, 0, "") == "let x = 1\nlet y = x + 2\nlet y = x + 2\n"
    assert mutate(src, "swap_line", 0, 1, "") == "let y = x + 2\nlet x = 1\n"
    assert mutate(src, "delete_token", 2, 0, "") == "let x  1\nlet y = x + 2\n"
    assert mutate(src, "swap_token", 1, 3, "") == "let 1 = x\nlet y = x + 2\n"
    assert mutate(src, "replace_token", 3, 0, "{") == "let x = {\nlet y = x + 2\n"
    assert mutate(src, "insert_token", 0, 0, "var ") == "var let x = 1\nlet y = x + 2\n"
    assert mutate(src, "indent_line", 1, 3, "") == "let x = 1\n    let y = x + 2\n"


# compiling these needs more than the program: `model` from the host, two CUDA GPUs
NEEDS_HOST = {"transformer_block", "multi_gpu"}


def test_unmutated_examples_are_valid():
    """The starting points of the fuzzing are valid programs."""
    for path, source in zip(EXAMPLES, SOURCES):
        if path.stem in NEEDS_HOST:
            check_mutant(source)
        else:
            compile_or_parse(source)
