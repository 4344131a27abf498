"""A run-time error points at what failed: an index out of range is underlined where the
index is written, an integer division by zero where the division is, on every device, however the block is spaced (a program compiled for
one spacing is not reused for another with its positions)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices
from zynbook.errors import ZynMLRuntimeError

DEVICES = wanted_devices()

GATHER = """let y = compute(x, idx) {{
    for i in 0..n:
        out[i] = 1.0 + x[{index}] * 2.0
}}
"""

SHARED_STORE = """let y = compute(x, idx) {
    shared var s[4]
    for i in 0..4:
        s[i] = x[i]
    s[idx[0]] = 9.0
    for i in 0..4:
        out[i] = s[i]
}
"""

SHARED = """let y = compute(x, idx) {
    shared var s[8]
    for i in 0..8:
        s[i] = x[i]
    for i in 0..n:
        out[i] = s[idx[i]]
}
"""

TWO_AXES = """let y = compute(m, r, c) {
    for i in 0..n:
        out[i] = m[r[i], c[i]]
}
"""


def _caret(err: ZynMLRuntimeError, source: str) -> str:
    """The text the error underlines."""
    line = source.splitlines()[err.span.line - 1]
    return line[err.span.column - 1:err.span.end_column - 1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", ["idx[i]", " idx[i] ", "idx[i] + 0"])
def test_an_out_of_range_gather_points_at_its_index(device, index):
    src = GATHER.format(index=index)
    with pytest.raises(ZynMLRuntimeError, match="index 9 is out of range .* `x`") as info:
        zynbook.Session(device=device).run(src, x=np.arange(8, dtype=np.float32),
                                           idx=np.array([1, 2, 9, 0], np.int32))
    assert info.value.span.line == 3
    assert _caret(info.value, src) == index.strip()


@pytest.mark.parametrize("device", DEVICES)
def test_an_out_of_range_store_points_at_its_index(device):
    with pytest.raises(ZynMLRuntimeError, match="index -1 is out of range .* `s`") as info:
        zynbook.Session(device=device).run(SHARED_STORE, x=np.arange(4, dtype=np.float32),
                                           idx=np.array([-1], np.int32))
    assert (info.value.span.line, _caret(info.value, SHARED_STORE)) == (5, "idx[0]")


@pytest.mark.parametrize("device", DEVICES)
def test_an_out_of_range_shared_read_points_at_its_index(device):
    with pytest.raises(ZynMLRuntimeError, match="index 8 is out of range .* `s`") as info:
        zynbook.Session(device=device).run(SHARED, x=np.arange(8, dtype=np.float32),
                                           idx=np.array([0, 8, 1], np.int32))
    assert (info.value.span.line, _caret(info.value, SHARED)) == (6, "idx[i]")


@pytest.mark.parametrize("device", DEVICES)
def test_the_failing_axis_is_the_one_pointed_at(device):
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(ZynMLRuntimeError, match="index 4 is out of range .* size 4") as info:
        zynbook.Session(device=device).run(TWO_AXES, m=m, r=np.array([0, 2], np.int32),
                                           c=np.array([1, 4], np.int32))
    assert (info.value.span.line, _caret(info.value, TWO_AXES)) == (3, "c[i]")


@pytest.mark.parametrize("device", DEVICES)
def test_in_range_the_block_gives_numpys_answer(device):
    x = np.arange(8, dtype=np.float32)
    idx = np.array([7, 0, 3, 3], np.int32)
    got = zynbook.Session(device=device).run(GATHER.format(index="idx[i]") + "y\n", x=x, idx=idx)
    np.testing.assert_allclose(np.asarray(got), 1.0 + x[idx] * 2.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, written, message", [
    ("/", "a[i] / b[i]", "integer division by zero"),
    ("%", "a[i] % (b[i] - 1)", "integer remainder by zero"),
])
def test_an_integer_division_by_zero_points_at_the_division(device, op, written, message):
    src = f"let y = compute(a, b) {{\n    for i in 0..n:\n        out[i] = 1 + {written} * 2\n}}\n"
    a, b = np.array([4, 5, 6], np.int32), np.array([1, 2, 0], np.int32)
    if op == "%":
        b = b + 1
    with pytest.raises(ZynMLRuntimeError, match=message) as info:
        zynbook.Session(device=device).run(src, a=a, b=b)
    assert (info.value.span.line, _caret(info.value, src)) == (3, written)
