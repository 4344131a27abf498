"""The ZynML error family: every mistake a user can make ends up as one of these.

Each error carries its kind, a message, and the 1-based line and column of the source it
points at. `render()` shows the source line with a caret under the column, which is what
the CLI, the Jupyter kernel and the magics print instead of a Python traceback.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A region of ZynML source: 1-based line/column of its start and end."""

    line: int
    column: int
    end_line: int = 0
    end_column: int = 0

    def __post_init__(self):
        if not self.end_line:
            object.__setattr__(self, "end_line", self.line)
        if not self.end_column:
            object.__setattr__(self, "end_column", self.column + 1)


NO_SPAN = Span(0, 0, 0, 0)

# characters Python's str.splitlines() takes for line breaks but ZynML (whose lines end with
# \n, or \r\n) does not: shown as a space in an excerpt so the caret stays under its column
_OTHER_BREAKS = {ord(c): " " for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def source_lines(source: str) -> list[str]:
    """The lines of ZynML source as the parser counts them (only \n ends a line)."""
    lines = source.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


LONG_LINE = 160         # characters of a source line an error shows, around its column


def display_line(text: str) -> str:
    return text.translate(_OTHER_BREAKS)


def _cells(char: str) -> int:
    """The terminal cells `char` takes: two for an East Asian wide or full-width one."""
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


class ZynMLError(Exception):
    """Base of all ZynML errors. `kind` names the family member."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, source: str | None = None,
                 notes: tuple[tuple[str, Span], ...] = ()):
        super().__init__(message)
        self.message = message
        self.span = span or NO_SPAN
        self.source = source
        # extra places worth pointing at ("the other side of the mismatch is here")
        self.notes = tuple(notes)
        # (message, span, source) of the calls that led here from other texts (a pipeline
        # an earlier cell defined), innermost first, as a traceback's frames
        self.calls: tuple = ()

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column

    # the source of one of ZynBook's own programs (a kernel of the library or of the
    # compute-device interface) the error was raised in, where it was
    inner_program: str | None = None
    calls: tuple = ()

    def at_call(self, operation: str) -> "ZynMLError":
        """This error, raised inside one of ZynBook's own programs, pointed at the user's call
        of `operation` instead: span, source and notes are dropped (the interpreter puts the
        caret under the call) and the message names the operation."""
        if not self.message.startswith(f"{operation}("):
            self.message = f"{operation}(): {self.message}"
            self.args = (self.message,)
        self.span, self.source, self.notes, self.inner_program = NO_SPAN, None, (), None
        self.calls = ()
        return self

    def with_source(self, source: str) -> "ZynMLError":
        if self.source is None:
            self.source = source
        return self

    @property
    def source_line(self) -> str:
        if not self.source or self.line <= 0:
            return ""
        lines = source_lines(self.source)
        return lines[self.line - 1] if self.line <= len(lines) else ""

    def _excerpt(self, span: Span, source: str | None = None) -> list[str]:
        source = source or self.source
        if not source or span.line <= 0:
            return []
        lines = source_lines(source)
        if span.line > len(lines):
            return []
        text = lines[span.line - 1]
        width = 1
        if span.end_line == span.line and span.end_column > span.column:
            width = span.end_column - span.column
        width = max(1, min(width, len(text) - span.column + 2))
        text, column = display_line(text), span.column
        if len(text) > LONG_LINE:
            # a long line (a list literal of 100 000 numbers) is shown around the column:
            # printed whole, with as many spaces before its caret, it filled the notebook
            start = max(0, min(column - 1 - LONG_LINE // 3, len(text) - LONG_LINE))
            head = "..." if start else ""
            tail = "..." if start + LONG_LINE < len(text) else ""
            width = max(1, min(width, start + LONG_LINE - column + 2))
            text = head + text[start:start + LONG_LINE] + tail
            column += len(head) - start
        gutter = f"{span.line:>4} | "
        # a tab before the column stays a tab under it, so the caret lines up whatever
        # width the terminal or notebook gives tabs; a wide character (CJK, emoji) takes
        # two cells, under it and under the caret
        before = text[:column - 1]
        under = "".join("\t" if c == "\t" else " " * _cells(c) for c in before)
        under += " " * (column - 1 - len(before))
        marked = text[column - 1:column - 1 + width]
        carets = sum(_cells(c) for c in marked) + width - len(marked)
        return [gutter + text, " " * len(gutter) + under + "^" * carets]

    def render(self) -> str:
        where = f" at line {self.line}, column {self.column}" if self.line > 0 else ""
        out = [f"ZynML {self.kind} error{where}: {self.message}"]
        out += self._excerpt(self.span)
        for note, span in self.notes:
            out.append(f"  note: {note}" + (f" (line {span.line}, column {span.column})"
                                              if span.line > 0 else ""))
            out += ["  " + s for s in self._excerpt(span)]
        for note, span, source in self.calls:
            out.append(f"  {note} (line {span.line}, column {span.column})")
            out += ["  " + s for s in self._excerpt(span, source)]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


class ZynMLSyntaxError(ZynMLError):
    kind = "syntax"


class ZynMLNameError(ZynMLError):
    kind = "name"

    def __init__(self, message: str, span: Span | None = None, source: str | None = None,
                 notes: tuple[tuple[str, Span], ...] = (), unknown: str | None = None):
        super().__init__(message, span, source, notes)
        self.unknown = unknown      # the name no scope binds, for an unknown name


class ZynMLTypeError(ZynMLError):
    kind = "type"


class ZynMLShapeError(ZynMLError):
    kind = "shape"


class ZynMLDeviceError(ZynMLError):
    kind = "device"


class ZynMLRuntimeError(ZynMLError):
    kind = "runtime"


class ZynMLTimeoutError(ZynMLRuntimeError):
    kind = "timeout"


class ZynMLMemoryError(ZynMLRuntimeError):
    kind = "memory"


class ZynMLWarning(UserWarning):
    """Something a program does that is legal but probably not meant (a near-miss of a known
    name): shown with the line and a caret, never refusing the program."""

    def __init__(self, message: str, span: Span | None = None, source: str | None = None):
        self.error = ZynMLError(message, span, source)
        self.error.kind = "note"
        super().__init__(self.error.render().replace("ZynML note error", "ZynML note", 1))
        self.message = message
        self.span = self.error.span


ERROR_KINDS = {cls.kind: cls for cls in (
    ZynMLSyntaxError, ZynMLNameError, ZynMLTypeError, ZynMLShapeError, ZynMLDeviceError,
    ZynMLRuntimeError, ZynMLTimeoutError, ZynMLMemoryError)}
