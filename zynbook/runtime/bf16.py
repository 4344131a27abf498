"""bf16 host tensors. numpy and CuPy have no bfloat16, so a bf16 tensor holds its values
as f32, each one a bf16 value (exact in f32). Host arithmetic on it computes in f32 and
rounds every result to bf16, as torch's bf16 arithmetic does, and keeps the dtype where
torch's promotion keeps it: beside another bf16 tensor, a number, or an integer or bool
tensor. Beside f16 it gives f32, beside f32 or f64 that dtype (numpy's result already)."""
from __future__ import annotations

from .tensor import Tensor


def rounded(arr):
    """`arr` (f32, numpy or CuPy) rounded to the nearest bf16, ties to even; NaN stays NaN."""
    xp = array_module(arr)
    a = xp.asarray(arr, dtype=xp.float32)
    u = a.view(xp.uint32).astype(xp.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(xp.uint32)
    nan = (a.view(xp.uint32) | 0x00400000) & 0xFFFF0000
    return xp.where(xp.isnan(a), nan, r).astype(xp.uint32).view(xp.float32)


def keeps_bf16(*operands) -> bool:
    """Whether a float result of these operands is bf16 (torch's promotion): one of them is
    a bf16 tensor and every other tensor is bf16, an integer or a bool."""
    tensors = [v for v in operands if isinstance(v, Tensor)]
    return any(t.dtype == "bf16" for t in tensors) and \
        all(t.dtype == "bf16" or t.dtype == "bool" or t.dtype[0] in "iu" for t in tensors)


def tagged(result, operands):
    """`result` (a Tensor computed from `operands`) as bf16 where they keep bf16 and it is a
    float: rounded, its dtype bf16; any other result as it is."""
    if not isinstance(result, Tensor) or result.dtype not in ("f32", "f64") or \
            not keeps_bf16(*operands):
        return result
    xp = array_module(result.data)
    if not hasattr(result.data, "view"):        # a device buffer: read back by the caller
        return result
    return Tensor(rounded(xp.asarray(result.data, dtype=xp.float32)), result.device,
                  result.shape, "bf16", result.committed)


def array_module(arr):
    """numpy or CuPy: the module that holds `arr`."""
    if type(arr).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    import numpy
    return numpy
