"""Memory safety and robustness: an index out of range reports the ZynML line and column
of the index at fault on every schedule, as the CPU reference does (an independent check:
numpy says the same index is out of range)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import emulate_kernel, lower_block


def _reference_error(src, **inputs):
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, device="cpu", **inputs)
    return info.value


def _launch_ir_errors(src, arrays, targets):
    """(schedule, error) of the program each target builds, run on the launch-IR emulator."""
    from zynbook.compiler import schedules
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    got = []
    for tgt in targets:
        prog = schedules.build(kernel, tgt, sizes)
        with pytest.raises(ZynMLError) as info:
            emulate_kernel(prog, kernel, ins, sizes, scalars)
        got.append((prog.schedule, info.value))
    return got


def _targets():
    from zynbook.compiler.targets import cuda_target, metal_target
    return [cuda_target((7, 0)), cuda_target((8, 0)), cuda_target((9, 0)), metal_target()]


GATHER_ROWS = """let y = compute(x, idx) {
    for i in 0..3, j in 0..4:
        out[i, j] = x[idx[i], j]
}
y
"""

GATHER_MATMUL = """let y = compute(a, b, idx) {
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += a[idx[i], k] * b[k, j]
        out[i, j] = acc
}
y
"""


def _gather_rows():
    return {"x": np.arange(12, dtype=np.float32).reshape(3, 4),
            "idx": np.array([0, 2, 5], np.int32)}


def _gather_matmul(dtype, m, k):
    rng = np.random.default_rng(7)
    idx = np.arange(m, dtype=np.int32)
    idx[m - 3] = m + 7
    return {"a": rng.standard_normal((m, k)).astype(dtype),
            "b": rng.standard_normal((k, m)).astype(dtype), "idx": idx}


@pytest.mark.parametrize("case", ["rows", "matmul_f32", "matmul_f16"])
def test_a_gather_out_of_range_names_its_index_on_every_schedule(case):
    """The vector schedule (16-byte loads of a row) and the GEMM schedules (staged and
    cp.async tiles) reported a gathered row out of range at 1:1 or at the `for k` line: the
    error names the index, line and column, as the reference does."""
    src, arrays = {"rows": (GATHER_ROWS, _gather_rows()),
                   "matmul_f32": (GATHER_MATMUL, _gather_matmul(np.float32, 128, 64)),
                   "matmul_f16": (GATHER_MATMUL, _gather_matmul(np.float16, 128, 64))}[case]
    idx = arrays["idx"]
    rows = (arrays.get("x") if "x" in arrays else arrays["a"]).shape[0]
    bad = int(idx[(idx < 0) | (idx >= rows)][0])
    with pytest.raises(IndexError):       # numpy: the same gather is out of range
        np.take(np.zeros(rows), idx, mode="raise")
    want = _reference_error(src, **arrays)
    assert want.kind == "runtime" and f"index {bad} is out of range" in want.message, want
    line = src.splitlines()[want.line - 1]
    assert line[want.column - 1:].startswith("idx["), (want.line, want.column)
    for schedule, err in _launch_ir_errors(src, arrays, _targets()):
        assert (err.kind, err.line, err.column, err.message) == \
            (want.kind, want.line, want.column, want.message), (schedule, err)
