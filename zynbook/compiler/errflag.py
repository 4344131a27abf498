"""The error flag: how a generated kernel reports a ZynML runtime error to its device.

A kernel that can fail at run time (an index the bounds analysis cannot prove in range, an
integer division whose divisor may be 0 or -1, tile extents that may not fit together)
receives one extra buffer of two 32-bit integers, zero before the launch:

* word 0: the *site* of the first failure (1-based; 0 = no failure). Each place in the
  generated code that checks something is a site, registered while rendering with what
  failed there and the ZynML line it came from.
* word 1: the offending value (the index, or the dividend; both tile extents, packed).

The first failing thread wins (compare-and-swap 0 -> site; the value is written by the
winner), the access or division is skipped (a load gives 0 without reading, or reads
element 0 in WGSL; a store is not made; a division gives 0) and the kernel carries on, its
output never returned: after the launch the device reads the two
words and raises `ZynMLRuntimeError` naming the ZynML line, with the message the reference
executor gives for the same mistake. Programs with no site get no buffer and no check.

Renderers collect sites in an `ErrorSites`; their programs carry the list as
`error_sites`, which `raise_if_failed` turns back into the error.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Span, ZynMLRuntimeError
from . import cir

INDEX = "index"                 # an index out of range
DIV_ZERO = "div0"               # integer division by zero
REM_ZERO = "rem0"               # integer remainder by zero
DIV_OVERFLOW = "divov"          # the smallest signed integer divided by -1
LIMIT = "limit"                 # a size past what a kernel built for every size holds
STEPS = "steps"                 # a loop the device quit early (launch/steps.py)
STEP = "step"                   # a loop step, known only as the kernel runs, not positive
TILES = "tiles"                 # tile extents that do not fit together (cir.Check)
WIDE = "wide"                   # a 64-bit sum past the 32 bits WebGPU stores it in
PAST32 = "past32"               # 64-bit arithmetic past the 32 bits WebGPU computes it in
NO_INDEX = "noindex"            # an argmin/argmax (buffer: which) that no yield reached

WORDS = 2                       # the flag buffer: two 32-bit integers


@dataclass(frozen=True)
class Site:
    kind: str                   # INDEX, DIV_ZERO, REM_ZERO, DIV_OVERFLOW, LIMIT, STEPS, STEP
                                # or TILES
    line: int                   # the ZynML line
    # INDEX: the buffer read or written; LIMIT: the size's name; TILES: the cir.Check's kind;
    # DIV_OVERFLOW: the dtype divided; NO_INDEX: the operator
    buffer: str = ""
    # INDEX: the size of the axis (a number, a size name or a CIR expression over size
    # names); LIMIT: the largest the kernel takes; STEPS: the steps a thread may run
    extent: int | str | cir.Expr = 0
    span: Span | None = None    # INDEX: where the index is written (else: the statement)

    def message(self, value: int) -> str:
        if self.kind == INDEX:
            # the flag's value word holds 32 bits: a wider index is reported saturated
            past = (" or more" if value == 2**31 - 1 else " or less" if value == -2**31 else "")
            return (f"index {value}{past} is out of range for an axis of size "
                    f"{cir.format_dim(self.extent)} of `{self.buffer}`")
        if self.kind == LIMIT:      # (value: the last index the size reaches)
            return (f"{self.buffer} {value + 1} is past the {self.extent} that this device's "
                    "kernel, built for every size, takes")
        if self.kind == STEPS:      # (value: the iterations the loop missed, negative)
            return (f"a loop stopped {-value} iterations short: this device (Mesa's llvmpipe) "
                    f"quits a thread's loops past about {self.extent} iterations in all, without "
                    "an error; run the block on `cpu`, `cpu:native` or a GPU")
        if self.kind == WIDE:      # (buffer: the local read, where one is)
            what = (f"the 64-bit integer `{self.buffer}`" if self.buffer else
                    "a 64-bit integer sum, maximum or minimum (or, over no values, its "
                    "identity: -2^63 for a maximum)")
            return (f"{what} is past the 32 bits this device stores 64-bit integers in (WebGPU "
                    "has none): run it on `cpu`, `cpu:native` or a CUDA device"
                    + (f", or declare it a float (`var {self.buffer}: f64 = ...`)"
                       if self.buffer else ""))
        if self.kind == PAST32:
            return ("a 64-bit integer value is past the 32 bits this device computes 64-bit "
                    "integers in (WebGPU has none): run it on `cpu`, `cpu:native` or a CUDA "
                    "device")
        if self.kind == NO_INDEX:      # (buffer: "argmax", or "argmax tile" of a tile's)
            op, _, tile = self.buffer.partition(" ")
            return no_index_message(op, bool(tile))
        if self.kind == STEP:      # (value: the step less 1)
            return f"a loop step must be positive, not {value + 1}"
        if self.kind == TILES:      # (value: both extents, packed by `tile_extents`)
            return tiles_message(self.buffer, *unpack_extents(value))
        if self.kind == DIV_ZERO:
            return "integer division by zero"
        if self.kind == REM_ZERO:
            return "integer remainder by zero"
        # DIV_OVERFLOW (buffer: the dividend's dtype): the dividend is its smallest value,
        # which the 32-bit value word cannot hold for i64
        bits = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}.get(self.buffer)
        if bits:
            value = -(1 << (bits - 1))
        return f"integer overflow: {value} / -1 does not fit its integer type"


def no_index_message(op: str, tile: bool = False) -> str:
    """What a NO_INDEX site (or the reference, for the same kernel) says."""
    what = "the tile is empty" if tile else "no yield was reached (for an output)"
    return (f"reduce({op}) of nothing: {what}, and {op} of an empty sequence has no index "
            "(numpy refuses it too)")


# TILES: the two extents in the flag's value word, 16 bits each; -1 where either passes
# 32767 (the message then gives no numbers)
EXTENT_BITS = 16
EXTENT_LIMIT = 2 ** (EXTENT_BITS - 1)


def unpack_extents(value: int) -> tuple:
    if value < 0:
        return None, None
    return value >> EXTENT_BITS, value & ((1 << EXTENT_BITS) - 1)


def tiles_message(kind: str, left=None, right=None) -> str:
    """What a TILES site (or the reference, for the same statement) says: `kind` as in
    cir.Check, `left` and `right` the extents (None: not known)."""
    head = "the tiles of this statement do not fit together at these sizes: "
    both = left is not None and right is not None
    if kind == "@":
        return head + ("the inner sizes of @ differ" +
                       (f" ({left} columns on the left, {right} rows on the right)" if both else ""))
    if kind == "store":
        return head + (f"a tile {left} long on an axis is written into a slice {right} long"
                       if both else "a tile is written into a slice of another length")
    return head + (f"an axis {left} long meets one {right} long (they broadcast only where "
                   "one of them is 1)" if both else "their axes do not broadcast")


class ErrorSites:
    """The sites of one rendered program, numbered from 1 in the order they are added."""

    def __init__(self):
        self.sites: list[Site] = []
        self._ids: dict = {}

    def add(self, kind: str, line: int, buffer: str = "", extent=0, span: Span | None = None) -> int:
        site = Site(kind, int(line or 0), buffer, extent, span)
        hit = self._ids.get(site)
        if hit is None:
            self.sites.append(site)
            hit = self._ids[site] = len(self.sites)
        return hit

    def __bool__(self) -> bool:
        return bool(self.sites)

    def as_tuple(self) -> tuple:
        return tuple(self.sites)


def column_of(source: str, first_line: int, line: int) -> int:
    """The column of the first non-blank character of ZynML `line` (1 when unknown)."""
    if not source or not line:
        return 1
    rel = line - first_line if first_line else line - 1
    lines = source.splitlines()
    if 0 <= rel < len(lines):
        text = lines[rel]
        return len(text) - len(text.lstrip()) + 1
    return 1


def error(sites, words, kernel=None, sizes=None) -> ZynMLRuntimeError | None:
    """The error the flag words `(site, value)` report, or None when no site failed
    (`sizes`: the launch's, for extents the program holds as size names)."""
    site_id, value = int(words[0]), int(words[1])
    if site_id == 0:
        return None
    if not 0 < site_id <= len(sites):
        return ZynMLRuntimeError(f"kernel `{getattr(kernel, 'name', '?')}` reported an "
                                 f"unknown error ({site_id})")
    site = sites[site_id - 1]
    if not isinstance(site.extent, int) and sizes:
        try:
            site = replace(site, extent=cir.eval_dim(site.extent, sizes))
        except (KeyError, TypeError, ZeroDivisionError):    # a name the launch lacks
            pass
    if site.span is not None and site.span.line:
        return ZynMLRuntimeError(site.message(value), site.span)
    col = column_of(getattr(kernel, "source", ""), getattr(kernel, "first_line", 0), site.line)
    return ZynMLRuntimeError(site.message(value), Span(site.line, col) if site.line else None)


def raise_if_failed(sites, words, kernel=None, sizes=None):
    err = error(sites, words, kernel, sizes)
    if err is not None:
        raise err
