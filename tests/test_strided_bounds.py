"""Index bounds of strided loops and of quotients: the static check and the output's size
follow the values a loop really takes (numpy written here is the reference)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLShapeError


def _run(src, **env):
    return np.asarray(zynbook.run(src, device="cpu", **env))


@pytest.mark.parametrize("n,step", [(12, 2), (13, 3), (7, 4), (5, 1)])
def test_strided_loop_reads_past_its_own_values(n, step):
    x = np.arange(n, dtype=np.float32) * 1.5
    src = f"""
let y = compute(x) {{
    for i in 0..{n} step {step}:
        out[i] = x[i + {step - 1}]
}}
y
"""
    last = (n - 1) // step * step
    if last + step - 1 >= n:            # the last iteration reads past the end: refused
        with pytest.raises(ZynMLShapeError, match=f"index {last + step - 1} is outside"):
            _run(src, x=x)
        return
    want = np.zeros(n, np.float32)        # out[i]: the loop's range 0..n is out's axis
    for i in range(0, n, step):
        want[i] = x[i + step - 1]
    np.testing.assert_array_equal(_run(src, x=x), want)


def test_strided_loop_that_reads_past_the_end_is_refused():
    with pytest.raises(ZynMLShapeError, match="outside"):
        _run("""
let y = compute(x) {
    for i in 0..12 step 2:
        out[i] = x[i + 2]
}
y
""", x=np.zeros(12, np.float32))


@pytest.mark.parametrize("n,d", [(12, 2), (13, 4), (9, 3)])
def test_output_indexed_by_a_quotient(n, d):
    x = np.arange(n, dtype=np.int32)
    got = _run(f"""
let y = compute(x) {{
    for i in 0..len:
        out[i / {d}] = x[i]
}}
y
""", x=x)
    want = np.zeros((n - 1) // d + 1, np.int32)
    for i in range(n):          # the loop nest as written: later iterations overwrite
        want[i // d] = x[i]
    np.testing.assert_array_equal(got, want)
