"""WebGPU (llvmpipe's `vulkan:0` and `gl:0`) against numpy, next to the reference and the
C++ device: reduce kernels with a thread's own `shared var`, 64-bit integers held in 32
bits."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(9909)


def _run(device, src, /, **inputs):
    out = zynbook.run(src, device=device, **inputs)
    return np.asarray(out.numpy() if hasattr(out, "numpy") else out)


# ------------------------------------ reduce kernels with a thread's own shared array

_ROWS = RNG.standard_normal((5, 257)).astype(np.float32)
_TIES = RNG.integers(-3, 4, (9, 33)).astype(np.float32)

_SHARED = {
    # the row's loop runs 8 iterations at a time on llvmpipe: each copy declared `t` again
    "min_of_rows_unrolled": ("""let r = compute(x) {
    @kernel reduce(min, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[4]
        t[1] = x[i, j]
        t[3] = t[1] + t[1]
        yield t[3] + t[0]
}
r""", {"x": _ROWS}, _ROWS.min(1) * 2, 1e-6),
    "sum_of_everything": ("""let r = compute(x) {
    @kernel reduce(+)
    for i in 0..rows, j in 0..cols:
        shared var t[2]
        t[j % 2] = x[i, j]
        yield t[0] - t[1]
}
r""", {"x": _ROWS}, np.where(np.arange(257) % 2 == 0, _ROWS, -_ROWS).astype(np.float64).sum(), 1e-4),
    # the positions were i64 in the program for the launch's sizes: WGSL has none
    "argmax_with_ties": ("""let r = compute(x) {
    @kernel reduce(argmax, axis=1)
    for i in 0..rows, j in 0..cols:
        shared var t[1]
        t[0] = x[i, j]
        yield (t[0], j)
}
r""", {"x": _TIES}, _TIES.argmax(1), 0),
    "argmin_along_the_outer_loop": ("""let r = compute(x) {
    @kernel reduce(argmin, axis=0)
    for i in 0..rows:
        shared var t[cols]
        for j in 0..cols:
            t[j] = x[i, j]
        barrier()
        for j in 0..cols:
            yield (t[cols - 1 - j], i)
}
r""", {"x": _TIES}, _TIES[:, ::-1].argmin(0), 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(_SHARED))
def test_a_reduce_kernel_with_a_threads_own_shared_array(name, device):
    """WebGPU refused a reduce kernel with a `shared var` ("shared arrays in a reduce
    kernel"); its program for the launch's sizes holds it as the thread's own array, as
    C++, CUDA and Metal do."""
    src, ins, want, tol = _SHARED[name]
    assert_equals_numpy(_run(device, src, **ins), want, tol)
