"""Memory safety and robustness: an index out of range reports the ZynML line and column
of the index at fault on every schedule, as the CPU reference does (an independent check:
numpy says the same index is out of range)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices


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



DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

# body: (the statements, numpy's value with `nan` standing for c)
NAN_BODIES = {
    "add": ("out[i] = x[i] + nan", lambda x, c: x + c),
    "max_min": ("out[i] = max(x[i], nan) + min(nan, x[i])",
                lambda x, c: np.maximum(x, c) + np.minimum(c, x)),
    "if": ("if x[i] > 0.0:\n            out[i] = x[i]\n        else:\n            out[i] = nan",
           lambda x, c: np.where(x > 0, x, c)),
    "var": ("var m = nan\n        m = max(m, x[i])\n        out[i] = m",
            lambda x, c: np.maximum(c, x)),
}


def _value(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", sorted(NAN_BODIES))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_nan_is_a_constant_in_a_compute_block(device, body, dtype):
    """`nan` is one of the language's constants on the host, but a compute block said
    "unknown name `nan`" (it knew inf, pi and e only): it is NaN there too, in the block's
    float type, as numpy's NaN; a host binding of the name still replaces it."""
    if dtype == np.float64 and device.startswith("gl"):
        pytest.skip("gl:0 has no f64")
    line, ref = NAN_BODIES[body]
    x = np.array([1.5, -2.0, np.nan, np.inf, -np.inf, 0.0], dtype)
    src = f"let y = compute(x) {{\n    for i in 0..len:\n        {line}\n}}\ny\n"
    with np.errstate(invalid="ignore"):
        for env, c in (({}, np.nan), ({"nan": 0.25}, 0.25)):
            want = ref(x, dtype(c)).astype(dtype)
            assert_equals_numpy(_value(zynbook.run(src, device, x=x, **env)), want, 0)


def test_nan_in_a_compute_block_on_the_launch_ir():
    from zynbook.compiler import schedules
    x = np.array([1.5, -2.0, np.nan, np.inf], np.float32)
    src = "let y = compute(x) {\n    for i in 0..4:\n        out[i] = max(x[i], nan) + x[i]\n}\ny\n"
    kernel, ins, sizes, _ = lower_block(src, {"x": x})
    with np.errstate(invalid="ignore"):
        want = np.maximum(x, np.nan) + x
    for tgt in _targets():
        prog = schedules.build(kernel, tgt, sizes)
        assert_equals_numpy(emulate_kernel(prog, kernel, ins, sizes), want, 0)
