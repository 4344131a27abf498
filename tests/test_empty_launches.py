"""Launches with nothing to compute: an axis reduction over no rows and a contraction over
K = 0 give numpy's answer (an empty result, zeros) on every device and on the launch IR of
the CUDA and Metal targets, reading no element of their empty inputs. The one block a
reduce or a rows kernel (layer norm) launches for no rows used to read row 0 (an illegal
address on CUDA, which loses the context), and the GEMM schedules loaded a first K slice
that did not exist."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices
from kernel_sources import SPEC_LAYER_NORM

ROWS = """let y = compute(x) {{
    @kernel reduce({op}, axis=1)
    for i in 0..r, j in 0..c:
        yield {value}
}}
y
"""

MATMUL = """let y = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var s = 0.0
        for k in 0..K:
            s += A[i, k] * B[k, j]
        out[i, j] = s
}
y
"""

ROW_CASES = [("argmax", "(x[i, j], j)", np.float32), ("argmin", "(x[i, j], j)", np.int32),
             ("+", "x[i, j] * 2.0", np.float32), ("max", "x[i, j]", np.float32)]


def _row_case(op, value, dtype, cols):
    x = np.zeros((0, cols), dtype)
    numpy_op = {"argmax": np.argmax, "argmin": np.argmin, "+": np.sum, "max": np.max}[op]
    return ROWS.format(op=op, value=value), {"x": x}, numpy_op(x, axis=1)


def _matmul_case(m, k, n, dtype):
    A = np.ones((m, k), dtype)
    B = np.ones((k, n), dtype)
    return MATMUL, {"A": A, "B": B}, (A.astype(np.float32) @ B.astype(np.float32)).astype(dtype)


def _layer_norm_case(rows, hidden):
    x = np.ones((rows, hidden), np.float32)
    mean = x.mean(axis=1, keepdims=True)
    inv_std = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    return (SPEC_LAYER_NORM, dict(x=x, gamma=np.ones(hidden, np.float32),
                                  beta=np.ones(hidden, np.float32), eps=1e-5),
            (x - mean) * inv_std + 1)


def _check(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("op,value,dtype", ROW_CASES)
@pytest.mark.parametrize("cols", [3, 1000])
def test_axis_reduction_of_no_rows(device, op, value, dtype, cols):
    src, inputs, want = _row_case(op, value, dtype, cols)
    _check(zynbook.run(src, device=device, **inputs), want)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("m,k,n", [(128, 0, 128), (64, 0, 96), (0, 64, 64), (37, 0, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_contraction_over_nothing_is_zeros(device, m, k, n, dtype):
    src, inputs, want = _matmul_case(m, k, n, dtype)
    _check(zynbook.run(src, device=device, **inputs), want)


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("hidden", [32, 1000])
def test_layer_norm_of_no_rows(device, hidden):
    src, inputs, want = _layer_norm_case(0, hidden)
    _check(zynbook.run(src, device=device, **inputs), want)


def _emulated(target_name, monkeypatch):
    from test_launch_emulate import _ScheduledDevice

    from zynbook.backends import registry
    from zynbook.compiler.targets import cuda_target, metal_target
    target = {"sm_90": cuda_target((9, 0)), "sm_80": cuda_target((8, 0)),
              "metal": metal_target()}[target_name]
    dev = _ScheduledDevice(target, gemm_first=target_name != "metal")
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    return dev


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "metal"])
def test_empty_launches_on_the_scheduled_targets(monkeypatch, target):
    """The emulator fails a load outside its buffer, as the GPU faults on it."""
    dev = _emulated(target, monkeypatch)
    cases = [_row_case(op, value, dtype, cols) for op, value, dtype in ROW_CASES for cols in (3, 1000)]
    cases += [_matmul_case(m, k, n, dt) for m, k, n in [(128, 0, 128), (64, 0, 96), (0, 64, 64)]
              for dt in (np.float32, np.float16)]
    cases += [_layer_norm_case(0, hidden) for hidden in (32, 1000)]
    for src, inputs, want in cases:
        _check(zynbook.Session(device=dev.id).run(src, **inputs), want)
    assert not dev.mismatches, dev.mismatches
