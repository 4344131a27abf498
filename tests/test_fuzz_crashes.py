"""Mutants of valid programs that a mutation fuzzer found crashing the compiler with a Python
exception instead of a ZynML error: each gives its ZynML error, pointing at the mistake, on
every device present."""
from __future__ import annotations

import pytest

import zynbook
from compute_testing import wanted_devices
from zynbook.errors import ZynMLTypeError

DEVICES = wanted_devices()

SHARED_SIZED_BY_LOOP = """let m = randn([4, 6], seed=1)
let r = compute(m) {
    @kernel fused
    for i in 0..rows:
        shared var row[i - 1]
        for j in 0..cols:
            row[j] = m[i, j] * 2.0
        barrier()
        for j in 0..cols:
            out[i, j] = row[cols - 1 - j]
}
r
"""


@pytest.mark.parametrize("device", DEVICES)
def test_shared_array_sized_by_a_loop_variable(device):
    # was a KeyError from the static evaluation of the size on vulkan:0
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.run(SHARED_SIZED_BY_LOOP, device)
    err = info.value
    line = SHARED_SIZED_BY_LOOP.split("\n")[4]
    assert (err.line, err.column) == (5, line.index("i - 1") + 1), err.render()
    assert "`i`" in err.message and "^" in err.render()
