"""Long f32 sums on every device against numpy's f64 sum: a thread that adds a long run of
values in order loses digits (4 million values of 0.1 were 4% off on cpu:native and WebGPU,
where a row's `reduce(+, x[r])` ran in one thread, and 1.5e-4 off in a WebGPU thread's
share of a long row). Every target now sums long runs in chunks (launch/wide_sums.py)."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import lower_block, wanted_devices
from zynbook.compiler.codegen import wgsl
from zynbook.compiler.codegen.cuda import render_cuda
from zynbook.nn import kernels as K

DEVICES = wanted_devices()
ROW_SUM = """let y = compute(x) {
    for r in 0..R:
        out[r] = reduce(+, x[r])
}
y"""
ONE_THREAD = """let y = compute(x) {
    for r in 0..R:
        var total = 0.0
        for c in 0..C:
            total += x[r, c] * w
        out[r] = total
}
y"""
DOT = """let y = compute(a, b) {
    for r in 0..R:
        var d = 0.0
        for c in 0..C:
            d += a[r, c] * b[r, c]
        out[r] = d
}
y"""


def _rows(n, rows=2):
    """Rows of n values whose f32 sums in order drift: 0.1 (not an f32), and a ramp."""
    x = np.full((rows, n), 0.1, np.float32)
    x[1:] = (np.arange(n, dtype=np.float64) % 97 / 97.0 + 0.5).astype(np.float32)
    return x


def _close(got, x, scale=1.0):
    want = x.astype(np.float64).sum(axis=-1) * scale
    np.testing.assert_allclose(np.asarray(got, np.float64).ravel(), want.ravel(), rtol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [300_007, 70_001])
def test_a_rows_reduce_of_long_rows(device, n):
    """`reduce(+, x[r])` over rows of 300,007 and 70,001 values (in order: 3e-3 and 5e-4
    off)."""
    x = _rows(n)
    _close(zynbook.run(ROW_SUM, device, x=x), x)


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_summing_a_long_row_in_one_thread(device):
    """A `var` summed in a loop of a generic thread, with a scalar factor (the reference's
    contraction summed it in order: 1.3e-4 off)."""
    x = _rows(200_003)
    _close(zynbook.run(ONE_THREAD, device, x=x, w=0.5), x, 0.5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_dot_of_two_long_rows(device):
    """`d += a[r, c] * b[r, c]` over rows of 1,000,003 (the reference's einsum: 6e-4 off)."""
    a = _rows(1_000_003)
    b = np.ones_like(a)
    b[1] = 2.0
    want = (a.astype(np.float64) * b).sum(axis=1)
    got = np.asarray(zynbook.run(DOT, device, a=a, b=b), np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_the_library_sum_of_one_long_row(device):
    """The device interface's reduce_sum (a block's threads each sum a share, then a
    tree): 2,000,003 values of 0.1 in one row."""
    x = _rows(2_000_003, rows=1)
    _close(zynbook.run(K.REDUCE_SUM, device, x=x.reshape(1, -1, 1)), x)


def test_a_whole_row_index_needs_no_check():
    """The index of `reduce(+, x[r])` runs over x's own axis: no `extent == 1` select, no
    check (which kept the sum from being seen as one, and cost a compare a value)."""
    k, _, sz, _ = lower_block(ROW_SUM, {"x": _rows(10)})
    assert "zyn_chk" not in render_cuda(k, sz).source


def test_a_sized_gpu_program_sums_a_thread_s_long_share_in_chunks():
    """A WebGPU program built for its sizes (an adapter with subgroups, as NVIDIA's): a
    block's thread summing 3,907 values of a row of 1,000,003 sums them in chunks (it added
    them in order, 3.7e-5 off on an H200); a row of 2,048 (8 a thread) is left as it is."""
    opts = wgsl.WGSLOptions(subgroups=True, max_workgroup_storage=49152, max_invocations=1024)
    for n, chunked in ((1_000_003, True), (2048, False)):
        a = np.ones((2, n), np.float32)
        k, _, sz, _ = lower_block(DOT, {"a": a, "b": a})
        source = wgsl.render(k, wgsl.sized_for(opts, k, sz)).source
        assert ("_chunk" in source) == chunked, source
