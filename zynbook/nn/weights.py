"""Weights in the safetensors format, read and written with numpy (never a pickle).

`load_weights(path)` gives the tensors as records and lists by their dotted names, so a file
holding `layers.0.qkv_proj` is read in ZynML as `model.layers[0].qkv_proj`;
`save_weights(path, weights)` writes records, dicts, lists, tensors, arrays and device
buffers the same way back.

The format: an 8-byte little-endian header length, a JSON header
`{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}}`,
then the tensors' bytes, little-endian and row-major.
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

from ..errors import ZynMLRuntimeError, ZynMLTypeError

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
           "BOOL": "?"}
_NAMES = {np.dtype(v).str.replace("|", ""): k for k, v in _DTYPES.items()}
_HEADER_LIMIT = 100_000_000


def _bad(path, why):
    return ZynMLRuntimeError(f"{os.fspath(path)} is not a safetensors file: {why}")


def read_safetensors(path) -> tuple[dict, dict]:
    """({name: numpy array, or _BF16 for a BF16 entry}, metadata) of a safetensors file."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as err:
        raise ZynMLRuntimeError(f"cannot read weights from {os.fspath(path)}: "
                                f"{err.strerror or err}") from None
    if len(raw) < 8:
        raise _bad(path, "it is shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > min(_HEADER_LIMIT, len(raw) - 8):
        raise _bad(path, f"its header length {n} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _bad(path, f"its header is not JSON ({err})") from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            shape = [int(d) for d in shape]
            begin, end = int(begin), int(end)
            if not isinstance(dtype, str) or any(d < 0 for d in shape):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise _bad(path, f"the entry of `{name}` lacks dtype, shape or data_offsets") \
                from None
        if not 0 <= begin <= end <= len(data):
            raise _bad(path, f"the bytes of `{name}` lie outside the file")
        if dtype != "BF16" and dtype not in _DTYPES:
            raise ZynMLTypeError(f"{os.fspath(path)}: `{name}` has dtype {dtype}, which "
                                 f"ZynBook does not read (it reads {', '.join(_DTYPES)}, BF16)")
        # a byte count that does not fit the shape (numpy's ValueError reached the caller)
        itemsize = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
        if end - begin != int(np.prod(shape)) * itemsize:
            raise _bad(path, f"`{name}` holds {end - begin} bytes, its shape {shape} of "
                             f"{dtype} needs {int(np.prod(shape)) * itemsize}")
        if dtype == "BF16":
            out[name] = _BF16(np.frombuffer(data[begin:end], "<u2").reshape(shape))
        else:
            out[name] = np.frombuffer(data[begin:end], _DTYPES[dtype]).reshape(shape).copy()
    return out, meta


def _nest(flat: dict):
    """{"layers.0.w": a} -> {"layers": [{"w": a}]}: parts that are all 0..n-1 become lists."""
    root: dict = {}
    for name, value in flat.items():
        parts = name.split(".")
        node = root
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ZynMLTypeError(f"weights: `{name}` sits below the tensor "
                                     f"`{p}` of the same file")
            node = nxt
        if parts[-1] in node:
            raise ZynMLTypeError(f"weights: `{name}` is both a tensor and a group")
        node[parts[-1]] = value

    def fix(node):
        if not isinstance(node, dict):
            return node
        node = {k: fix(v) for k, v in node.items()}
        keys = list(node)
        if keys and all(k.isdigit() for k in keys) and \
                sorted(int(k) for k in keys) == list(range(len(keys))):
            return [node[str(i)] for i in range(len(keys))]
        return node
    return fix(root)


def load_weights(path, device: str = "cpu"):
    """A safetensors file as ZynML values: a record of tensors, records and lists, by the
    dotted names (`layers.0.qkv_proj` -> `.layers[0].qkv_proj`), on `device`."""
    from ..backends.registry import get_device
    from ..runtime.tensor import Tensor
    from ..runtime.values import Record
    from ..compiler.types import dtype_from_numpy
    flat, _meta = read_safetensors(path)
    dev = get_device(device)

    def tensor(entry):
        # a BF16 entry is a bf16 tensor, held in f32 as ZynML holds bf16
        arr = entry.values() if isinstance(entry, _BF16) else entry
        dtype = "bf16" if isinstance(entry, _BF16) else dtype_from_numpy(arr.dtype)
        data = arr if dev.id == "cpu" else dev.from_host(np.ascontiguousarray(arr))
        return Tensor(data, dev.id, arr.shape, dtype, committed=dev.id != "cpu")

    def build(node):
        if isinstance(node, dict):
            return Record({k: build(v) for k, v in node.items()})
        if isinstance(node, list):
            return [build(v) for v in node]
        return tensor(node)
    return build(_nest(flat))


def _flatten(value, prefix: str, out: dict):
    from ..runtime.values import Record
    if isinstance(value, (dict, Record)):
        for k in value.keys():
            if not isinstance(k, str) or not k or "." in k:
                raise ZynMLTypeError(f"weights: a name is a non-empty string without dots, "
                                     f"not {k!r}")
            _flatten(value[k], f"{prefix}{k}.", out)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}{i}.", out)
        return
    from ..runtime.tensor import Tensor, to_tensor
    if hasattr(value, "to_vec") and hasattr(value, "tensor"):      # a device Buffer
        value = value.tensor
    # ZynML's own reading of arrays and tensors: a torch parameter (which numpy refuses for
    # its grad) and a bf16 tensor (which numpy has no dtype for) included
    t = to_tensor(value)
    if t is not None:
        out[prefix[:-1]] = _BF16.nearest(t.numpy()) if t.dtype == "bf16" else np.asarray(t.numpy())
        return
    try:
        arr = np.asarray(value)
    except Exception:
        arr = None
    if arr is None or arr.dtype == object:
        raise ZynMLTypeError(f"weights: `{prefix[:-1]}` is a {type(value).__name__}, not "
                             "a tensor")
    out[prefix[:-1]] = arr


class _BF16:
    """A BF16 entry: its bits (uint16, the high half of each value's f32 bits)."""

    def __init__(self, bits):
        self.shape = bits.shape
        self.bits = bits

    @classmethod
    def nearest(cls, values) -> "_BF16":
        """bf16 values (held in f32, as ZynML holds them) as BF16."""
        bits = np.asarray(values, np.float32, order="C").view(np.uint32)
        # the nearest bf16, ties to even (the values of a bf16 tensor are exact already)
        return cls(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2"))

    def values(self) -> np.ndarray:
        """The values, in f32 (where every bf16 value is exact)."""
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def save_weights(path, weights, metadata: dict | None = None) -> None:
    """Write `weights` (a record, dict or list nesting tensors, arrays or device buffers) to
    a safetensors file, each tensor under its dotted name."""
    flat: dict = {}
    _flatten(weights, "", flat)
    header, chunks, offset = {}, [], 0
    for name in sorted(flat):
        value = flat[name]
        if isinstance(value, _BF16):
            code, shape, data = "BF16", value.shape, value.bits.tobytes()
        else:
            arr = np.asarray(value, order="C")     # (ascontiguousarray made a 0-d one 1-d)
            code = _NAMES.get(arr.dtype.newbyteorder("<").str.replace("|", ""))
            if code is None:
                raise ZynMLTypeError(f"weights: `{name}` has dtype {arr.dtype}, which "
                                     "safetensors does not hold")
            shape, data = arr.shape, arr.astype(_DTYPES[code], copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(struct.pack("<Q", len(text)))
            fh.write(text)
            for c in chunks:
                fh.write(c)
        os.replace(tmp, path)
    except OSError as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise ZynMLRuntimeError(f"cannot write weights to {os.fspath(path)}: "
                                f"{err.strerror or err}") from None
