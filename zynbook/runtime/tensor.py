"""`zynbook.Tensor`: an n-dimensional array on a device, as ZynML programs see it."""
from __future__ import annotations

import html
import sys

import numpy as np

from ..backends.cuda.views import cupy_view     # (needs no CuPy until it is called)
from ..compiler.types import dtype_from_numpy
from .values import released


_MODULES: dict = {}          # type -> the top-level module that defines it


def _module_of(array) -> str:
    kind = type(array)
    module = _MODULES.get(kind)
    if module is None:
        module = _MODULES[kind] = kind.__module__.split(".")[0]
    return module


class Tensor:
    """An array living on a device (`cpu`, `cuda:0`, `vulkan:0`, ...).

    `data` is the device's own array type (numpy for the CPU, CuPy for CUDA, a buffer
    handle for WebGPU); `numpy()` always gives a host copy (or the array itself on the CPU).
    `committed`: placed on its device on purpose (`to_device`, `@device`), so it stays there;
    an uncommitted tensor moves to the device that needs it (runtime/placement.py).
    """

    __slots__ = ("data", "device", "_shape", "_dtype", "committed")

    def __init__(self, data, device: str = "cpu", shape=None, dtype=None,
                 committed: bool = False):
        self.data = data
        self.device = device
        self.committed = bool(committed)
        self._shape = tuple(map(int, shape if shape is not None else data.shape))
        self._dtype = dtype or _DTYPE_NAMES.get(data.dtype) or _dtype_name(data.dtype)

    # --------------------------------------------------------------- properties
    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self._shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of its elements in its dtype (a bf16 element is 2, though the host holds
        it as f32): what memory statistics count."""
        from ..compiler.types import dtype_bytes
        return self.size * dtype_bytes(self._dtype)

    @property
    def numpy_dtype(self):
        from ..compiler.types import NUMPY_NAMES
        return np.dtype(NUMPY_NAMES[self._dtype])

    # ------------------------------------------------------------- conversions
    def numpy(self) -> np.ndarray:
        data = self._held()
        if isinstance(data, np.ndarray):
            return data
        from ..backends.registry import get_device
        return get_device(self.device).to_host(data)

    def _held(self):
        """`data`, unless a memory pool released it (or the memory it views): an error."""
        gone = released(self.data)
        if gone is not None:
            raise gone[0].error(view=gone[1])
        return self.data

    def __array__(self, dtype=None, copy=None):
        # numpy's protocol: copy=True (np.array's default) gives memory of its own, never
        # the tensor's (writing into it would change the tensor); copy=False never copies
        fresh = type(self) is Tensor and not isinstance(self.data, np.ndarray)
        if copy is False and fresh:
            raise ValueError(f"a tensor on {self.device} is read into host memory by a copy")
        arr = self.numpy()
        if dtype is not None and arr.dtype != np.dtype(dtype):
            if copy is False:
                raise ValueError(f"a {self.dtype} tensor becomes {np.dtype(dtype)} by a copy")
            return arr.astype(dtype)
        return arr.copy() if copy and not fresh else arr

    def __dlpack__(self, *args, **kwargs):
        data = self._held()
        if hasattr(data, "__dlpack__"):
            return data.__dlpack__(*args, **kwargs)
        return self.numpy().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        data = self.data
        if hasattr(data, "__dlpack_device__"):
            return data.__dlpack_device__()
        return self.numpy().__dlpack_device__()

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    # a number as numpy's array reads one (without these, bool() was len() > 0: `[0.0]` true)
    def __bool__(self):
        return bool(self.numpy())

    def __float__(self):
        return float(self.numpy())

    def __int__(self):
        return int(self.numpy())

    # ---------------------------------------------------------------- display
    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), precision=4, threshold=64, edgeitems=3,
                               separator=", ", suppress_small=True)
        return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, device={self.device!r},\n" \
               f"       {body.replace(chr(10), chr(10) + '       ')})"

    def summary(self) -> str:
        return f"tensor[{', '.join(map(str, self.shape))}] {self.dtype} on {self.device}"

    def _repr_html_(self) -> str:
        head = (f"<div class='zynbook-tensor'><b>Tensor</b> "
                f"<code>[{', '.join(map(str, self.shape))}]</code> "
                f"<code>{self.dtype}</code> on <code>{html.escape(self.device)}</code>")
        arr = self.numpy()
        if arr.ndim == 2 and arr.shape[0] <= 16 and arr.shape[1] <= 16:
            rows = "".join(
                "<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in arr)
            return head + f"<table class='zynbook-tensor-table'>{rows}</table></div>"
        if arr.ndim == 1 and arr.shape[0] <= 16:
            cells = "".join(f"<td>{_fmt(v)}</td>" for v in arr)
            return head + f"<table class='zynbook-tensor-table'><tr>{cells}</tr></table></div>"
        preview = np.array2string(arr, precision=4, threshold=64, edgeitems=3, separator=", ")
        return head + f"<pre>{html.escape(preview)}</pre></div>"


_DTYPE_NAMES: dict = {}


def _dtype_name(np_dtype) -> str:
    """The ZynML name of an array's element type (remembered per type: arrays are bound on
    every run of a cell)."""
    name = _DTYPE_NAMES.get(np_dtype)
    if name is None:
        name = _DTYPE_NAMES[np_dtype] = dtype_from_numpy(np_dtype)
    return name


def _fmt(v) -> str:
    if isinstance(v, (np.floating, float)):
        return f"{float(v):.4g}"
    return html.escape(str(v))


class _CudaIds(dict):
    """Device index -> "cuda:N", made once per index."""

    def __missing__(self, index):
        name = self[index] = f"cuda:{index}"
        return name


_CUDA_IDS = _CudaIds()


def _cuda_tensor(view) -> "Tensor":
    return Tensor(view, _CUDA_IDS[view.data.device_id])


def _native_order(a: np.ndarray) -> np.ndarray:
    """`a`, or a copy in the machine's byte order where it was stored the other way round
    (a big-endian array read from a file): the same values, a dtype kernels know."""
    if a.dtype.byteorder not in ("=", "|") and a.dtype.kind in "biuf":
        return a.astype(a.dtype.newbyteorder("="))
    return a


def _unmasked(value) -> None:
    """Refuse a masked array with an element masked: a tensor has no mask, and the values
    under it are no data (what a masked element stands for is the caller's to say)."""
    masked = int(np.ma.count_masked(value))
    if masked:
        raise ValueError(f"{masked} of its {value.size} elements are masked, and a ZynML "
                         "tensor has no mask; pass `a.filled(v)` (the masked elements "
                         "as v) or `a.data` (the values under the mask)")


def to_tensor(value, device: str = "cpu"):
    """A Tensor for numpy arrays, anything with __array__, __array_interface__ or
    __dlpack__; None otherwise."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        if isinstance(value, np.ma.MaskedArray):
            _unmasked(value)
        # a subclass (np.matrix, a masked array with no element masked) as its plain
        # array: host arithmetic on the tensor is ZynML's (`*` elementwise, `x[0]` a row),
        # not the subclass's
        return Tensor(_native_order(value if type(value) is np.ndarray else
                                    value.view(np.ndarray)), "cpu")
    module = _module_of(value)
    if module == "cupy":
        return Tensor(value, _CUDA_IDS[value.data.device_id])
    if module == "torch":
        if value.requires_grad:
            value = value.detach()
        dtype = None
        if value.dtype is sys.modules["torch"].bfloat16:
            # numpy and CuPy have no bf16: held as f32 as ZynML's own bf16 host tensors are
            # (every bf16 value is exact in f32), widened where the tensor lives; a bf16
            # tensor still, as torch computes with it
            value, dtype = value.float(), "bf16"
        if value.is_cuda:
            try:        # made once per tensor (a Tensor is never changed)
                if dtype is None:
                    return cupy_view(value, _cuda_tensor)
                view = cupy_view(value)
                return Tensor(view, _CUDA_IDS[view.data.device_id], dtype=dtype)
            except ImportError:
                pass
        # (a lazily negated view, `-t` of some ops, is its values: numpy() refuses it)
        return Tensor(np.asarray(value.cpu().resolve_neg().numpy()), "cpu", dtype=dtype)
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        # (numpy's array interface alone: a PIL image, what a C extension hands over)
        return Tensor(_native_order(np.asarray(value)), "cpu")
    if hasattr(value, "__dlpack__"):
        return Tensor(np.from_dlpack(value), "cpu")
    return None
