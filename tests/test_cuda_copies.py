"""Views taken contiguous on CUDA before a launch: which views are rows of contiguous runs
(row_runs, checked against numpy's own bytes of the view on the CPU) and, on a GPU, the 2-D
copy of such a view equal to CuPy's general copy."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from compute_testing import cuda_device  # noqa: E402
from zynbook.backends.cuda.device import row_runs  # noqa: E402

QKV = np.arange(2 * 5 * 3 * 24, dtype=np.float16).reshape(2, 5, 3 * 24)
VIEWS = {
    "head split from a qkv slice": lambda: QKV[..., 24:48].reshape(2, 5, 3, 8),
    "last-axis slice": lambda: QKV[:, :, 8:20],
    "every other row": lambda: QKV.reshape(10, 72)[::2],
    "middle axis slice": lambda: np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)[:, 1:4],
    "a single row kept 2-D": lambda: QKV[0, 1:2, 5:9],
    "transposed": lambda: QKV[0].T,
    "reversed": lambda: QKV[0, ::-1],
    "broadcast": lambda: np.broadcast_to(np.arange(8, dtype=np.float32), (3, 8)),
    "every other column": lambda: QKV[0, :, ::2],
    "contiguous": lambda: QKV[1],
}
RUNS = {"head split from a qkv slice", "last-axis slice", "every other row", "middle axis slice"}


def gathered(view: np.ndarray, rows) -> bytes:
    """The bytes a 2-D copy of (rows, width, pitch) from the view's first byte reads."""
    count, width, pitch = rows
    base = view.__array_interface__["data"][0]
    owner = view
    while owner.base is not None and isinstance(owner.base, np.ndarray):
        owner = owner.base
    start = base - owner.__array_interface__["data"][0]
    raw = owner.reshape(-1).view(np.uint8)
    return b"".join(raw[start + r * pitch:start + r * pitch + width].tobytes() for r in range(count))


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_rows_of_contiguous_runs(name):
    view = VIEWS[name]()
    rows = row_runs(view.shape, view.strides, view.itemsize)
    assert (rows is not None) == (name in RUNS), rows
    if rows is not None:
        assert gathered(view, rows) == np.ascontiguousarray(view).tobytes()


GPU = cuda_device()


@pytest.mark.skipif(GPU is None, reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_the_gpu_copy_equals_cupys(name):
    import cupy as cp
    from zynbook.backends.cuda.device import contiguous
    view = VIEWS[name]()
    owner = view
    while owner.base is not None and isinstance(owner.base, np.ndarray):
        owner = owner.base
    # the same view of the same bytes on the GPU
    dev = cp.asarray(owner)
    offset = view.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    on_gpu = cp.ndarray(view.shape, view.dtype, dev.data + offset, view.strides)
    got = contiguous(on_gpu)
    cp.cuda.get_current_stream().synchronize()
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(cp.asnumpy(got), np.ascontiguousarray(view))
