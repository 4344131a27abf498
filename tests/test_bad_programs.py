"""The corpus of bad programs in tests/bad_programs/: each must fail to compile with the
ZynML error its header announces.

Header of each file (comment lines at the top):

    // expect: KIND LINE:COLUMN        KIND: syntax, name, type or shape; 1-based position
    // message: SUBSTRING              optional: a piece of the error message
    // known-bug: WHAT                 optional: a known parser bug; the case is an xfail
                                       (strict) until the bug is fixed

The position conventions: an unknown name at the name; a shape mismatch at the second of
the two disagreeing index expressions or operands in reading order; a kernel type that
does not fit its body at the type name after `@kernel`; a bad annotation at its `@`; a
constant index out of range at the index; a syntax error at the offending token (at the
end of the line when the line ends too early).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import zynbook
from zynbook.compiler.parser import parse
from zynbook.errors import ZynMLError

CORPUS = Path(__file__).resolve().parent / "bad_programs"
FILES = sorted(CORPUS.glob("*.zyn"))
KINDS = ("syntax", "name", "type", "shape")

_EXPECT = re.compile(r"^//\s*expect:\s*(\w+)\s+(\d+):(\d+)\s*$")
_MESSAGE = re.compile(r"^//\s*message:\s*(.+?)\s*$")
_BUG = re.compile(r"^//\s*known-bug:\s*(.+?)\s*$")


@dataclass
class Case:
    kind: str
    line: int
    column: int
    message: str | None
    known_bug: str | None
    source: str


def load(path: Path) -> Case:
    source = path.read_text()
    lines = source.splitlines()
    m = _EXPECT.match(lines[0])
    assert m, f"{path.name}: the first line must be `// expect: KIND LINE:COLUMN`"
    message = known_bug = None
    for extra in lines[1:3]:
        if mm := _MESSAGE.match(extra):
            message = mm.group(1)
        elif mb := _BUG.match(extra):
            known_bug = mb.group(1)
    return Case(m.group(1), int(m.group(2)), int(m.group(3)), message, known_bug, source)


def check_then_run(source: str):
    """What a user meets: `zynbook.compile` refuses what it can before any input is bound;
    a name the program never defines is an input to bind, so the rest is refused when the
    program runs with nothing bound (as `zynbook run FILE` does)."""
    zynbook.compile(source)
    zynbook.run(source)


def test_corpus_is_large_and_well_formed():
    assert len(FILES) >= 50
    cases = [load(p) for p in FILES]
    kinds = {c.kind for c in cases}
    assert kinds == set(KINDS)
    for path, case in zip(FILES, cases):
        lines = case.source.splitlines()
        assert 1 <= case.line <= len(lines) + 1, path.name
        if case.line <= len(lines):
            # the column points into the line, or just past its end
            assert 1 <= case.column <= len(lines[case.line - 1]) + 1, path.name
        # file names say what they test
        assert path.stem.split("_")[0] in KINDS + ("kernel", "annotation"), path.name


def caret_column(rendered: str, source_line: str) -> int | None:
    """The 1-based column the caret under `source_line` points at, in a rendered error."""
    lines = rendered.splitlines()
    for i, text in enumerate(lines[:-1]):
        if source_line and text.endswith(source_line) or not source_line and text.endswith("| "):
            start = len(text) - len(source_line)
            caret = lines[i + 1]
            if "^" in caret:
                return caret.index("^") - start + 1
    return None


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_bad_program(path, request):
    case = load(path)
    compile_ = check_then_run
    if case.known_bug:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"known bug: {case.known_bug}"))

    with pytest.raises(ZynMLError) as info:
        compile_(case.source)
    err = info.value
    where = f"\n{err.render()}"
    assert err.kind == case.kind, where
    assert (err.line, err.column) == (case.line, case.column), where
    if case.message:
        assert case.message in err.message, where

    rendered = err.render()
    source_line = (case.source.splitlines() + [""])[case.line - 1]
    assert source_line in rendered, where
    assert caret_column(rendered, source_line) == case.column, where


@pytest.mark.parametrize("path", [p for p in FILES if load(p).kind != "syntax"],
                         ids=lambda p: p.stem)
def test_non_syntax_cases_parse(path):
    """Only the syntax cases are the parser's business; the rest are well-formed."""
    parse(load(path).source)
