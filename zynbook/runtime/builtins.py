"""Host builtins: tensor constructors, shape functions, math, memory and devices.

Each builtin is `fn(interp, args, kwargs) -> value`; `interp.span` is the call's span for
errors. Tensor math runs with the array module of the tensor's device (numpy, CuPy).
"""
from __future__ import annotations

import decimal
import math
import os
import warnings
import weakref

import numpy as np

from ..backends.registry import compute_devices, get_device
from ..compiler.types import (CONSTANTS, DTYPE_ALIASES, FLOATS, NUMPY_NAMES,  # noqa: F401
                              canonical_dtype, dtype_list, int_dtype)
from ..errors import (ZynMLDeviceError, ZynMLError, ZynMLMemoryError, ZynMLShapeError,
                      ZynMLTypeError)
from . import bf16
from .placement import HOST, memory_of
from .sharded import ShardedTensor
from .tensor import Tensor
from .values import Future, MemoryPool, Record

BUILTINS: dict = {}


def await_hint(*values) -> str:
    """What to write where an @async block's future is used as its tensor ('' elsewhere)."""
    return "; `await` an @async block's future for its tensor (await f)" \
        if any(isinstance(v, Future) for v in values) else ""


def builtin(name, *aliases):
    def register(fn):
        for n in (name,) + aliases:
            BUILTINS[n] = fn
        return fn
    return register


# ------------------------------------------------------------------- arguments


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def as_int(v):
    """`v` as a Python int where it is one integer however it came: an element of an
    integer tensor (`s[0]`, np.array(3) bound from Python) counts, as numpy's 0-d arrays
    do; any other value as it is."""
    if isinstance(v, Tensor):
        if v.ndim or v.dtype[0] not in "iu":
            return v
        v = v.numpy()
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        return int(v)
    return v


def as_number(v):
    """`v` as a Python int or float where it is one number: as `as_int`, a 0-d tensor of a
    float dtype counting as its float too."""
    v = as_int(v)
    if isinstance(v, Tensor) and not v.ndim and v.dtype[0] in "fb" and v.dtype != "bool":
        return float(v.numpy())
    return v


def _shape(value, what="shape") -> tuple:
    value = as_int(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = [value]         # zeros(3) is zeros([3])
    if isinstance(value, (list, tuple)):
        value = [as_int(d) for d in value]
    if isinstance(value, (list, tuple)) and all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in value):
        if any(d < 0 for d in value):
            raise ZynMLShapeError(f"a {what} has no negative sizes: {list(value)}")
        return tuple(int(d) for d in value)
    if isinstance(value, (list, tuple)):      # name the size that is not an integer
        bad = next(d for d in value if not _is_int(d))
        raise ZynMLTypeError(f"a {what} is a list of integers like [2, 3]; one of its "
                             f"sizes is {_kind(bad)}")
    raise ZynMLTypeError(f"a {what} is a list of integers like [2, 3], not {_kind(value)}")


def _dtype(value, default="f32") -> str:
    if value is None:
        return default
    if isinstance(value, str) and canonical_dtype(value):
        return canonical_dtype(value)
    raise _placed(ZynMLTypeError(f"unknown dtype {value!r}; use {dtype_list()}"), "dtype")


def _np(dtype: str):
    return np.dtype(NUMPY_NAMES[dtype])


def _host_tensor(arr, dtype: str) -> Tensor:
    """A host tensor of `dtype` holding `arr`'s values; a bf16 one holds them as f32, each
    rounded to bf16 (runtime/bf16.py)."""
    with np.errstate(over="ignore"):    # a float past the dtype's range: inf, as numpy's
        arr = arr.astype(_np(dtype), copy=False)
    return Tensor(bf16.rounded(arr) if dtype == "bf16" else arr, "cpu", dtype=dtype)


def _kind(value) -> str:
    if value is None:
        return "nothing"        # what a pipeline without `return` gives
    if isinstance(value, Tensor):
        return value.summary()
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, tuple):
        return "a tuple"
    if type(value).__name__ == "Buffer":
        return f"a buffer of {len(value)} {value.dtype} on {value.device}"
    if type(value).__name__ == "Expr":
        return "an elementwise expression"
    if type(value).__name__ == "_BuiltinRef":
        return f"the builtin function {value.name}"
    if type(value).__name__ == "Pipeline":
        return "a pipeline"
    futures = {"Future": "a future", "_Gather": "a future of all(...)",
               "_FirstOf": "a future of any(...)", "Record": "a record",
               "MemoryPool": "a memory pool"}
    return futures.get(type(value).__name__, type(value).__name__)


def _tensor(value, what="argument") -> Tensor:
    if isinstance(value, Tensor):
        return value
    raise ZynMLTypeError(f"the {what} must be a tensor, not {_kind(value)}{await_hint(value)}")


def xp_of(t: Tensor):
    """The array module for a tensor's data: numpy, or CuPy for CUDA arrays."""
    if type(t.data).__module__.split(".")[0] == "cupy":
        import cupy
        return cupy
    return np


# The arrays a caller bound (Session.run's **env, %%compute's notebook names): id -> a weak
# reference to each. A program's tensor may hold one without a copy; writing into it copies
# it first (`own`), so the caller's array is never changed, whatever the device.
_CALLERS: dict = {}


def borrowed(array) -> None:
    """Note that `array` (numpy or CuPy), held by a tensor, is the caller's."""
    key = id(array)
    try:
        _CALLERS[key] = weakref.ref(array, lambda _r, key=key: _CALLERS.pop(key, None))
    except TypeError:       # (numpy's and CuPy's arrays all take one)
        pass


# The views host code made of a program's tensors (a slice, `x.T`, `reshape`, `split`, as
# numpy arrays, and the LazyViews of results not yet computed): id -> a weak reference to
# each. They are tensors of their own: writing into one, or into the tensor it views, copies
# the written one first (`own`).
_VIEWS: dict = {}


def viewed(view) -> None:
    """Note that `view` (a numpy or CuPy array, or a LazyView) shares another tensor's
    memory."""
    key = id(view)
    try:
        _VIEWS[key] = weakref.ref(view, lambda _r, key=key: _VIEWS.pop(key, None))
    except TypeError:
        pass


def _array_of_view(view):
    """The array a registered view holds now; None for a LazyView of a result not yet
    computed (which shares nothing yet)."""
    if isinstance(view, Tensor):
        return view.data if view.done else None
    return view


def own(t: Tensor) -> None:
    """Before host code writes into `t`: where its array is (or views) a caller's, is a view
    of another array, or another tensor views it, `t` takes a copy of it (slices, `.T` and
    reshapes bound to a name are tensors of their own, not views)."""
    data = t.data
    module = type(data).__module__.split(".")[0]
    if module not in ("numpy", "cupy"):
        return
    shares = (np if module == "numpy" else __import__("cupy")).may_share_memory
    copy = getattr(data, "base", None) is not None
    for registry in (_CALLERS, _VIEWS):
        for ref in list(registry.values()):
            other = ref()
            if other is None or other is t or (copy and not isinstance(other, Tensor)):
                continue
            array = _array_of_view(other)
            if array is not None and type(array) is type(data) and shares(data, array):
                copy = True
                if isinstance(other, Tensor):
                    # a LazyView reads its root's array at every read: it keeps the one it
                    # views now, which the write below leaves as it is
                    other.data = array
    if copy:
        data = data.copy()
        result = getattr(t, "result", None)     # a recorded block's result: its data
        if isinstance(result, Tensor):
            result.data = data
        t.data = data


def host_array(t: Tensor):
    if isinstance(t.data, np.ndarray) or type(t.data).__module__.split(".")[0] == "cupy":
        return t.data
    return t.numpy()


def wrap(array, like: Tensor | None = None, device: str | None = None, keep_bf16=True):
    if np.ndim(array) == 0 and not hasattr(array, "device"):
        return array.item() if hasattr(array, "item") else array
    if getattr(array, "base", None) is not None:
        viewed(array)       # a view of another tensor's array (a slice, .T, a reshape)
    dev = device or (like.device if like is not None and
                     type(array).__module__.split(".")[0] == "cupy" else "cpu")
    if keep_bf16 and like is not None and like.dtype == "bf16":     # a float result stays bf16
        return bf16.tagged(Tensor(array, dev), (like,))
    return Tensor(array, dev)


def _unexpected(kwargs, allowed, fn):
    for k in kwargs:
        if k not in allowed:
            raise ZynMLTypeError(f"{fn}() has no parameter `{k}`" +
                                 (f"; it takes {', '.join(allowed)}" if allowed else ""))


def argument(place, fn, *args):
    """fn(*args) on a builtin's argument: its error is under that argument (`place`: its
    keyword or position, and an item of a list or None, as device_ops places errors)."""
    try:
        return fn(*args)
    except ZynMLError as err:
        err.argument = place
        raise


def _placed(err: ZynMLError, where, item=None) -> ZynMLError:
    """`err` said under the argument at fault (a keyword or position, as `argument`)."""
    err.argument = (where, item)
    return err


def device_argument(value, place=("device", None)):
    """The device a builtin's argument names: an id that names none, or is not a string, is
    an error under that argument."""
    return argument(place, get_device, value)


def _placed_device(interp, kwargs):
    """The device of `device=`, else the session's default device."""
    if "device" in kwargs:
        return device_argument(kwargs["device"])
    return get_device(interp.default_device)


def by_position(fn, args, kwargs, required: int, names):
    """`fn`'s arguments with those after the first `required` positions given the keywords
    `names` in order, as numpy and torch take them (softmax(x, 1), rmsnorm(x, w, 1e-5)):
    (args, kwargs, {keyword: position}). More positions than that, or a keyword given both
    ways, is a type error under the argument."""
    extra = args[required:]
    if len(extra) > len(names):
        raise _placed(ZynMLTypeError(
            f"{fn}() takes at most {required + len(names)} positional argument(s)" +
            (f" (the last: {', '.join(names)})" if names else "") + f", got {len(args)}"),
            required + len(names))
    for k, name in enumerate(names[:len(extra)]):
        if name in kwargs:
            raise _placed(ZynMLTypeError(f"{fn}(): {name} is given twice, by position and "
                                         f"as {name}="), required + k)
    moved = {name: required + k for k, name in enumerate(names[:len(extra)])}
    return list(args[:required]), {**kwargs, **dict(zip(names, extra))}, moved


def placed_by_position(err: ZynMLError, moved: dict) -> ZynMLError:
    """`err` placed under the position a keyword argument it is about was given at."""
    place = getattr(err, "argument", None)
    if place is not None and place[0] in moved:
        err.argument = (moved[place[0]], place[1])
    return err


def _positional_optionals(required: int, names):
    """A builtin taking its optional keywords `names` by position too (by_position)."""
    def wrap_builtin(fn):
        def run(interp, args, kwargs):
            args, kwargs, moved = by_position(run.__name__, args, kwargs, required, names)
            try:
                return fn(interp, args, kwargs)
            except ZynMLError as err:
                raise placed_by_position(err, moved)
        run.__name__, run.__doc__ = fn.__name__.lstrip("_"), fn.__doc__
        return run
    return wrap_builtin


def _arity(args, n, fn, usage):
    if len(args) not in (n if isinstance(n, tuple) else (n,)):
        raise ZynMLTypeError(f"{fn}() is called as {usage}")


# -------------------------------------------------------------- constructors


def host_memory_bytes() -> int | None:
    """The memory this machine can give a process now: Linux's estimate of what is
    available (free memory and what the kernel can reclaim) plus free swap; elsewhere its
    physical memory plus swap (None where the system does not tell). Asking past it, the
    allocation may succeed lazily and the process be killed later, taking the session."""
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if "MemAvailable" in info:
        return info["MemAvailable"] + info.get("SwapFree", 0)
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return total + info.get("SwapTotal", 0)


def check_host_memory(shape, dtype: str):
    """A ZynMLMemoryError, before anything is allocated, for more host memory than the
    machine can give now: numpy would try, lazily, and the process die late."""
    nbytes = int(np.prod([int(d) for d in shape], dtype=object)) * _np(dtype).itemsize
    check_host_bytes(nbytes, lambda size: f"this line asked for {size} (an array of shape "
                                          f"{list(shape)} of {dtype})")


def check_host_bytes(nbytes: int, asked):
    """A ZynMLMemoryError where `nbytes` pass what the machine has available; `asked(size
    in words)` says what wanted them."""
    limit = host_memory_bytes()
    if limit is not None and nbytes > limit:
        raise ZynMLMemoryError(f"out of memory: {asked(_size_text(nbytes))}, more than the "
                               f"{_size_text(limit)} of memory and swap this machine has available")


def _size_text(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _fill(fn_name, value_fn):
    def make(interp, args, kwargs):
        _unexpected(kwargs, ("shape", "dtype", "device", "seed"), fn_name)
        shape = kwargs.get("shape", args[0] if args else None)
        if shape is None:
            raise ZynMLTypeError(f"{fn_name}() needs a shape: {fn_name}([2, 3])")
        if len(args) > 1:
            if any(isinstance(a, str) and canonical_dtype(a) for a in args[1:]):
                raise ZynMLTypeError(f"{fn_name}() takes its dtype by name: "
                                     f"{fn_name}([2, 3], dtype=f16)")
            # zeros(2, 3) is zeros([2, 3]), its sizes read as a shape's are (an element of
            # an integer tensor too: zeros(n, 2) with `n = sum(mask)` was zeros([n]))
            shape = list(args)
        shape = _shape(shape)
        dtype = _dtype(kwargs.get("dtype"))
        device = kwargs.get("device")
        if device is not None:
            device_argument(device)
        check_host_memory(shape, dtype)
        t = _host_tensor(value_fn(interp, shape, dtype, kwargs.get("seed")), dtype)
        return interp.move(t, device) if device else t
    return make


def _rng(interp, seed):
    if seed is None:
        return interp.rng
    seed = as_int(seed)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ZynMLTypeError("seed= takes a non-negative integer")
    return np.random.default_rng(seed)


BUILTINS["zeros"] = _fill("zeros", lambda i, s, d, seed: np.zeros(s, _np(d)))
BUILTINS["ones"] = _fill("ones", lambda i, s, d, seed: np.ones(s, _np(d)))
_CHUNK = 1 << 16


def _random(draw, shape, dtype, name="randn"):
    """`draw(n)` (f64 numbers) into an array of `dtype`, a chunk at a time: the values are
    those one draw of the whole shape gives, with no f64 temporary of the whole size."""
    out = np.empty(shape, _np(dtype))
    if out.dtype.kind != "f":       # values in [0, 1) or around 0 would truncate to 0 or so
        raise ZynMLTypeError(f"{name}() makes floats: dtype= is {dtype_list(FLOATS)}, not {dtype}")
    if out.dtype == np.float64:
        return draw(shape)
    flat = out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        stop = min(start + _CHUNK, flat.size)
        flat[start:stop] = draw(stop - start)
    return out


BUILTINS["randn"] = _fill("randn", lambda i, s, d, seed:
                          _random(_rng(i, seed).standard_normal, s, d, "randn"))
BUILTINS["rand"] = _fill("rand", lambda i, s, d, seed:
                         _random(_rng(i, seed).random, s, d, "rand"))


@builtin("arange")
def _arange(interp, args, kwargs):
    _unexpected(kwargs, ("dtype",), "arange")
    args = [as_int(a) for a in args]
    if not 1 <= len(args) <= 3 or not all(isinstance(a, (int, float)) for a in args):
        raise ZynMLTypeError("arange(n) or arange(start, stop[, step])")
    if any(isinstance(a, int) and not -2**63 <= a < 2**63 for a in args):
        raise ZynMLTypeError("arange(): an integer past 64 bits")
    floats = any(isinstance(a, float) for a in args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if step == 0:
        raise ZynMLTypeError("arange(): the step must not be 0")
    # an infinite bound or a NaN has no length (math.ceil's 'cannot convert float infinity
    # to integer'); an infinite step gives the start alone, as numpy's
    bad = next((k for k, a in enumerate(args) if a != a or k < 2 and math.isinf(a)), None)
    if bad is not None:
        raise _placed(ZynMLTypeError(f"arange(): {args[bad]} is not a finite number"), bad)
    check_host_memory((max(0, math.ceil((stop - start) / step)),), "f32" if floats else "i64")
    values = np.arange(*args)
    dtype = _dtype(kwargs.get("dtype"), "f32" if floats else _int_dtype(values))
    if "dtype" in kwargs and dtype not in ("bf16", "bool"):
        # numpy's arange(..., dtype=) steps by the difference of the first two values in
        # that dtype (arange(0, 5, 1.5, dtype=i32) is [0, 1, 2, 3], as torch's), computed
        # here with integers of 64 bits so that a value the dtype cannot hold is refused
        _refuse_unheld(values, dtype, "arange")
        try:
            values = np.arange(*args, dtype=np.int64 if dtype[0] in "iu" else _np(dtype))
        except OverflowError:       # u64 values past i64: the float values, truncated
            pass
    if dtype == "bool" and values.size > 2:
        # numpy's rule: bools step from False to True, so at most two values
        raise _placed(ZynMLTypeError(f"arange(): a bool arange has at most 2 values (False, "
                                     f"True), not {values.size}"), "dtype")
    _refuse_unheld(values, dtype, "arange")
    return _host_tensor(values, dtype)


def _int_dtype(values) -> str:
    return int_dtype(int(values.min()), int(values.max())) if values.size else "i32"


@builtin("tensor")
def _tensor_fn(interp, args, kwargs):
    _unexpected(kwargs, ("dtype", "device"), "tensor")
    _arity(args, 1, "tensor", "tensor([[1, 2], [3, 4]])")
    arr = _numbers_array(args[0], "tensor")
    dtype = _dtype(kwargs.get("dtype"), _content_dtype(arr))
    _refuse_unheld(arr, dtype, "tensor")
    t = _host_tensor(arr, dtype)
    return interp.move(t, device_argument(kwargs["device"]).id) if "device" in kwargs else t


def _content_dtype(arr) -> str:
    """The dtype of a tensor made from nested lists, by their content: f32, bool, or i32
    (i64, u64 for integers past 32 bits)."""
    return "f32" if arr.dtype.kind == "f" else "bool" if arr.dtype.kind == "b" else \
        _int_dtype(arr)


def _refuse_unheld(arr, dtype: str, fn: str):
    """Numbers an integer dtype cannot hold (300 for u8, NaN or 1.5e10 for i32) are a type
    error, as numpy's np.array([300], dtype=np.uint8) and `t[i] = 300` refuse them; a float
    that can is truncated toward zero, as numpy converts it."""
    if dtype[0] not in "iu" or arr.dtype.kind not in "iuf" or arr.size == 0:
        return
    info = np.iinfo(_np(dtype))
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            whole = np.trunc(arr)
            bad = ~np.isfinite(arr) | (whole < float(info.min)) | (whole >= float(info.max + 1))
    else:
        bad = (arr < info.min) | (arr > info.max) if arr.dtype.kind == "i" else arr > info.max
    if bad.any():
        v = arr[bad].flat[0]
        why = (f"{'NaN' if v != v else 'an infinity'} has no {dtype} value" if
               arr.dtype.kind == "f" and not np.isfinite(v) else
               f"{v.item()!r} does not fit {dtype} ({info.min} to {info.max})")
        raise _placed(ZynMLTypeError(f"{fn}(): {why}"), "dtype")


def _numbers_array(data, name: str) -> np.ndarray:
    """Nested lists (or tuples, tensors) of numbers as a numpy array: lists of unequal
    lengths are a shape error, anything but numbers and bools a type error."""
    try:
        arr = np.array(_plain(data))    # a copy: tensor(t) is a tensor of its own, not t
    except ValueError:
        raise ZynMLShapeError(f"{name}() takes nested lists of equal lengths (a rectangular "
                              "array of numbers)") from None
    if arr.dtype.kind not in "biuf":
        past = arr.dtype == object and any(isinstance(v, int) and not isinstance(v, bool)
                                           for v in arr.ravel())
        raise ZynMLTypeError(f"{name}(): an integer past 64 bits" if past else
                             f"{name}() takes nested lists of numbers or bools")
    return arr


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Tensor):
        return v.numpy()
    return v


@builtin("allocate")
def _allocate(interp, args, kwargs):
    _unexpected(kwargs, ("shape", "dtype", "device", "pinned"), "allocate")
    if args:
        raise ZynMLTypeError("allocate() takes named arguments: allocate(shape=[4, 4], "
                             "dtype=float32, device=\"cpu\")")
    if "shape" not in kwargs:
        raise ZynMLTypeError("allocate() needs shape=[...]")
    shape = argument(("shape", None), _shape, kwargs["shape"])
    dtype = argument(("dtype", None), _dtype, kwargs.get("dtype"))
    pinned = kwargs.get("pinned", False)
    if not isinstance(pinned, bool):
        err = ZynMLTypeError("pinned= takes true or false")
        err.argument = ("pinned", None)
        raise err
    dev = _placed_device(interp, kwargs)
    if dev.backend in ("cpu", "c") or pinned:
        check_host_memory(shape, dtype)
    if pinned and memory_of(dev.id) != HOST:
        # (a WebGPU adapter that is a CPU, llvmpipe, still has memory of its own)
        raise ZynMLDeviceError(f"pinned memory is host memory, not {dev.id}'s: use "
                               "device=\"cpu\" with pinned=true")
    return interp.allocate(shape, dtype, dev.id, pinned=pinned, commit="device" in kwargs)


@builtin("memory_pool")
def _memory_pool(interp, args, kwargs):
    _unexpected(kwargs, ("device", "size"), "memory_pool")
    if args:
        raise ZynMLTypeError("memory_pool() takes named arguments: memory_pool(device=\"cpu\", "
                             "size=1GB)")
    if "size" not in kwargs:
        raise ZynMLTypeError("memory_pool() needs size= in bytes, e.g. size=1GB")
    size = as_int(kwargs["size"])
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        # it was "needs size=" where a size was given (0, -5, 1.5, true)
        shown = size if isinstance(size, (int, float)) and not isinstance(size, bool) else \
            _kind(size)
        err = ZynMLTypeError(f"memory_pool(): size= is a positive whole number of bytes like "
                             f"1GB, not {shown}")
        err.argument = ("size", None)
        raise err
    dev = _placed_device(interp, kwargs)
    commit = "device" in kwargs
    return MemoryPool(dev, kwargs["size"],
                      lambda shape, dtype, device: interp.allocate(
                          _shape(shape), _dtype(dtype), device, commit=commit))


@builtin("compute_devices")
def _compute_devices(interp, args, kwargs):
    _unexpected(kwargs, (), "compute_devices")
    _arity(args, 0, "compute_devices", "compute_devices()")
    return [Record(d) for d in compute_devices()]


# ------------------------------------------------------------------- shapes


@builtin("reshape")
def _reshape(interp, args, kwargs):
    _unexpected(kwargs, (), "reshape")        # (order="F" was ignored)
    _arity(args, 2, "reshape", "reshape(x, [d0, d1, ...])")
    t = _tensor(args[0], "first argument of reshape()")
    shape = [as_int(d) for d in args[1]] if isinstance(args[1], (list, tuple)) else None
    if shape is None or not all(_is_int(d) for d in shape):
        raise ZynMLTypeError("reshape()'s shape is a list of integers (-1 for one inferred size)")
    if any(d < -1 for d in shape):
        raise ZynMLShapeError(f"reshape(): a shape has no negative sizes but one -1: {shape}")
    known = 1
    for d in shape:
        if d != -1:
            known *= d
    if shape.count(-1) > 1 or (shape.count(-1) == 0 and known != t.size) or \
            (shape.count(-1) == 1 and (known == 0 or t.size % known)):
        raise ZynMLShapeError(f"cannot reshape a tensor of shape {list(t.shape)} "
                              f"({t.size} values) to {shape}")
    kept = t.reshaped(shape) if isinstance(t, ShardedTensor) else None
    if kept is not None:        # the shards reshaped where they are
        return kept
    kept = interp.lazy.view(t, ("reshape", tuple(shape)))
    if kept is not None:        # a view of a result not yet computed: no boundary
        return kept
    return wrap(xp_of(t).reshape(host_array(t), shape), t)


@builtin("split")
def _split(interp, args, kwargs):
    _unexpected(kwargs, ("axis",), "split")
    _arity(args, 2, "split", "split(x, parts, axis=0)")
    t = _tensor(args[0])
    n = as_int(args[1])
    axis = as_int(kwargs.get("axis", 0))
    if not isinstance(n, int) or n <= 0:
        raise ZynMLTypeError("split()'s second argument is the number of equal parts")
    if not _is_int(axis):
        raise _placed(ZynMLTypeError(f"split(): axis= takes an integer, not {_kind(axis)}"),
                      "axis")
    if not -t.ndim <= axis < t.ndim:
        raise _placed(ZynMLShapeError(f"axis {axis} is out of range for a {t.ndim}-D tensor"),
                      "axis")
    if t.shape[axis] % n:
        raise ZynMLShapeError(f"cannot split an axis of {t.shape[axis]} into {n} equal parts")
    kept = t.split_parts(n, axis) if isinstance(t, ShardedTensor) else None
    if kept is not None:        # each shard split where it is
        return kept
    m = t.shape[axis] // n
    parts = [interp.lazy.view(t, ("part", axis % t.ndim, i * m, (i + 1) * m)) for i in range(n)]
    if all(p is not None for p in parts):       # views of a result not yet computed
        return tuple(parts)
    return tuple(wrap(a, t) for a in xp_of(t).split(host_array(t), n, axis=axis))


@builtin("concat")
def _concat(interp, args, kwargs):
    _unexpected(kwargs, ("axis",), "concat")
    _arity(args, 1, "concat", "concat([a, b], axis=0)")
    if not isinstance(args[0], (list, tuple)) or not args[0]:
        raise ZynMLTypeError("concat() takes a list of one or more tensors: concat([a, b])")
    axis = as_int(kwargs.get("axis", 0))
    if not _is_int(axis):
        raise _placed(ZynMLTypeError(f"concat(): axis= takes an integer, not {_kind(axis)}"),
                      "axis")
    parts = interp.colocate([_tensor(t) for t in args[0]], what="the tensors of concat()")
    try:
        return wrap(xp_of(parts[0]).concatenate([host_array(p) for p in parts],
                                                axis=axis), parts[0])
    except ValueError as err:
        raise ZynMLShapeError(f"concat(): {err}") from None


@builtin("transpose")
def _transpose(interp, args, kwargs):
    # numpy's transpose(x, axes=[...]) too: the keyword was ignored, the last two axes swapped
    _unexpected(kwargs, ("axes",), "transpose")
    if "axes" in kwargs:
        if len(args) != 1:
            raise ZynMLTypeError("transpose(): the axes are given twice")
        args = [*args, kwargs["axes"]]
    _arity(args, (1, 2), "transpose", "transpose(x) or transpose(x, [axes])")
    t = _tensor(args[0])
    arr = host_array(t)
    if len(args) == 2:
        axes = [as_int(a) for a in
                (args[1] if isinstance(args[1], (list, tuple)) else [args[1]])]
        if sorted(a % t.ndim if _is_int(a) and -t.ndim <= a < t.ndim else -1
                  for a in axes) != list(range(t.ndim)):
            raise ZynMLShapeError(f"transpose(): axes {axes} are not an order of the "
                                  f"{t.ndim} axes of a {list(t.shape)} tensor (each of "
                                  f"0..{t.ndim - 1} once)")
        return wrap(xp_of(t).transpose(arr, axes), t)
    # (of one axis, a view of the same elements: a tensor of its own, as the others)
    return wrap(xp_of(t).swapaxes(arr, -1, -2) if t.ndim >= 2 else arr[...], t)


@builtin("len")
def _len(interp, args, kwargs):
    _unexpected(kwargs, (), "len")
    _arity(args, 1, "len", "len(x)")
    v = args[0]
    if isinstance(v, (list, tuple, str)) or type(v).__name__ == "Buffer":
        return len(v)
    t = _tensor(v)
    if t.ndim == 0:
        raise ZynMLTypeError("len() of a 0-d tensor (one number): it has no first axis; "
                             "x.size counts its elements")
    return len(t)


@builtin("shape")
def _shape_fn(interp, args, kwargs):
    _unexpected(kwargs, (), "shape")
    _arity(args, 1, "shape", "shape(x)")
    return list(_tensor(args[0]).shape)


@builtin("print")
def _print(interp, args, kwargs):
    _unexpected(kwargs, (), "print")        # (sep= and end= were dropped unread)
    interp.write(" ".join(_show(a) for a in args) + "\n")
    return None


def _show(v, top=True) -> str:
    if isinstance(v, (str, bool)) and not top:
        return repr(v)          # as the list's repr shows it
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return int_text(v)
    if isinstance(v, (list, tuple)) and type(v) in (list, tuple):
        inner = ", ".join(_show(x, False) for x in v)
        return f"[{inner}]" if isinstance(v, list) else \
            f"({inner}{',' if len(v) == 1 else ''})"
    return repr(v)


_REPR_BELOW = 10**4000      # ints Python's repr shows


def int_text(n: int, digits_shown: int = 100_000) -> str:
    """A host int as text, however long (ZynML's ints are unbounded; Python refuses to
    print one of 4300 digits or more): whole up to `digits_shown` digits, else rounded,
    with its number of digits."""
    if isinstance(n, bool) or -_REPR_BELOW < n < _REPR_BELOW and digits_shown >= 4000:
        return repr(n)
    digits = math.floor(math.log10(abs(n))) + 1 if n else 1
    if digits <= digits_shown:
        return str(decimal.Decimal(n))      # not bound by Python's int-to-text limit
    lead = 10 ** (math.log10(abs(n)) - digits + 1)
    return f"{'-' if n < 0 else ''}{lead:.15f}e+{digits - 1} (an int of {digits} digits, " \
        "rounded here)"


# --------------------------------------------------------------------- math


def _as_floats(xp, a):
    """An integer or bool array as the floats numpy's math functions give it (8-bit and
    bool as f16, 16-bit as f32, wider as f64), a float array as it is: an unsigned array
    negated, or less its maximum, wrapped around (sigmoid and softmax of u8 [0, 1, 2] were
    [0.5, 0, 0] and NaN; of bools, Python's TypeError)."""
    return a.astype(xp.result_type(a.dtype, xp.float16)) if a.dtype.kind in "biu" else a


def _math(name, np_fn, scalar_fn, floats=True):
    """A math builtin; `floats`: its values are floats (ints and bools are converted
    first), else it keeps an integer dtype (abs, floor, ceil, relu)."""
    def fn(interp, args, kwargs):
        _unexpected(kwargs, (), name)          # (numpy's out= and where= were ignored)
        _arity(args, 1, name, f"{name}(x)")
        v = args[0]
        if isinstance(v, Tensor):
            xp, a = xp_of(v), host_array(v)
            a = _as_floats(xp, a) if floats else a
            with np.errstate(all="ignore"):
                if a.dtype == np.float16:       # in f32, rounded once, as in compute blocks
                    return wrap(np_fn(xp, a.astype(np.float32)).astype(np.float16), v)
                return wrap(np_fn(xp, a), v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return scalar_fn(v)
            except (ValueError, OverflowError, ZeroDivisionError):
                # IEEE results where Python's math refuses: log(0.0) is -inf, exp(1000.0)
                # inf, sigmoid(-1000.0) 0, rsqrt(0.0) inf, sqrt(-1.0) NaN, as numpy gives
                with np.errstate(all="ignore"):
                    return float(np_fn(np, np.float64(v)))
        raise ZynMLTypeError(f"{name}() takes a number or a tensor, not {_kind(v)}")
    BUILTINS[name] = fn


_math("sqrt", lambda xp, a: xp.sqrt(a), math.sqrt)
_math("rsqrt", lambda xp, a: 1 / xp.sqrt(a), lambda x: 1 / math.sqrt(x))
_math("exp", lambda xp, a: xp.exp(a), math.exp)
_math("log", lambda xp, a: xp.log(a), math.log)
_math("abs", lambda xp, a: xp.abs(a), abs, floats=False)
_math("tanh", lambda xp, a: xp.tanh(a), math.tanh)
_math("sin", lambda xp, a: xp.sin(a), math.sin)
_math("cos", lambda xp, a: xp.cos(a), math.cos)
_math("floor", lambda xp, a: xp.floor(a), math.floor, floats=False)
_math("ceil", lambda xp, a: xp.ceil(a), math.ceil, floats=False)
_math("relu", lambda xp, a: xp.maximum(a, 0), lambda x: max(x, 0), floats=False)
_math("sigmoid", lambda xp, a: 1 / (1 + xp.exp(-a)), lambda x: 1 / (1 + math.exp(-x)))


def _reduction(name, method):
    def fn(interp, args, kwargs):
        _unexpected(kwargs, ("axis",), name)
        if len(args) > 1 and name in ("max", "min") and any(isinstance(a, Tensor) for a in args):
            if "axis" in kwargs:
                raise _placed(ZynMLTypeError(
                    f"{name}(a, b, ...) is the values' element-wise {name}imum and takes no "
                    f"axis=; {name}(x, axis=k) reduces one tensor"), "axis")
            return _elementwise_extreme(interp, name, args)
        if len(args) > 1 and not isinstance(args[0], (Tensor, list)):
            vals = args
            if name not in ("max", "min", "sum"):   # mean(1, 2, 3) gave nothing
                raise ZynMLTypeError(f"{name}() is called as {name}(x, axis=k), of one tensor "
                                     "or list (of several numbers only sum, max and min)")
            for v in vals:      # max("s", 1) was Python's TypeError from inside
                if not (isinstance(v, (int, float)) and not isinstance(v, bool)
                        or type(v).__name__ == "Expr"):
                    raise ZynMLTypeError(f"{name}(a, b, ...) takes numbers, not {_kind(v)}")
            if name in ("max", "min") and any(isinstance(v, float) and v != v for v in vals):
                return math.nan         # NaN propagates, as numpy's maximum does (in any order)
            return {"max": max, "min": min, "sum": sum}[name](vals)
        # sum(x, 1) is numpy's axis; max(x, 0) is the values' maximum, as in a kernel
        args, kwargs, moved = by_position(name, args, kwargs, 1,
                                          () if name in ("max", "min") else ("axis",))
        _arity(args, 1, name, f"{name}(x, axis=k)")
        try:
            return reduce_tensor(args[0], kwargs)
        except ZynMLError as err:
            raise placed_by_position(err, moved)

    def reduce_tensor(v, kwargs):
        if isinstance(v, list) and name in ("max", "min", "sum") and not kwargs and \
                any(type(x).__name__ == "Expr" for x in v):
            # sum(xs) of elementwise's traced expressions: one expression, as sum(a, b) is
            from .device_ops import traced_call
            if len(v) == 1:
                return v[0]
            return sum(v[1:], v[0]) if name == "sum" else traced_call(name, v, {})
        if isinstance(v, list):
            # as tensor() reads it (f32 by content, not numpy's f64)
            arr = _numbers_array(v, name)
            v = _host_tensor(arr, _content_dtype(arr))
        t = _tensor(v)
        axis = as_int(kwargs.get("axis"))
        if isinstance(axis, (list, tuple)) and name not in ("argmax", "argmin"):
            axis = tuple(as_int(a) for a in axis)      # several axes, as numpy takes them
        for a in axis if isinstance(axis, tuple) else (axis,):
            if a is not None and (not isinstance(a, int) or isinstance(a, bool)):
                raise _placed(ZynMLTypeError(
                    f"{name}(): axis= takes an integer"
                    + ("" if name.startswith("arg") else " or a list of them")
                    + f", not {_kind(a)}"), "axis")
            if a is not None and not -t.ndim <= a < max(t.ndim, 1):
                raise _placed(ZynMLShapeError(f"{name}(): axis {a} is outside a tensor of "
                                              f"{t.ndim} axes"), "axis")
        try:
            # the mean of nothing is NaN, as numpy's, without numpy's warning on stderr
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                xp, data = xp_of(t), host_array(t)
                if xp is not np and method in ("sum", "mean") and data.dtype == np.float16:
                    # numpy sums f16 in f32 and rounds once; CuPy's f16 mean sums in f16
                    return wrap(getattr(xp, method)(data, axis=axis, dtype=np.float32)
                                .astype(np.float16), t)
                return wrap(getattr(xp, method)(data, axis=axis), t)
        except ValueError as err:       # a repeated axis; an empty tensor's max, argmax
            if t.size == 0:
                raise ZynMLShapeError(f"{name}() of an empty tensor ({list(t.shape)}) has no "
                                      "value: nothing to compare") from None
            raise ZynMLShapeError(f"{name}(): {err}") from None
    BUILTINS[name] = fn


def _elementwise_extreme(interp, name, args):
    """max(a, b, ...) or min() of tensors and numbers: numpy's maximum or minimum, element by
    element with broadcasting, as max and min are in a kernel (NaN propagates)."""
    for k, v in enumerate(args):
        if not isinstance(v, Tensor) and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise _placed(ZynMLTypeError(f"{name}(a, b, ...) takes numbers and tensors, not "
                                         f"{_kind(v)}"), k)
    vals = interp.colocate(list(args), what=f"the arguments of {name}()")
    t = next(v for v in vals if isinstance(v, Tensor))
    xp = xp_of(t)
    op = xp.maximum if name == "max" else xp.minimum
    out = host_array(vals[0]) if isinstance(vals[0], Tensor) else vals[0]
    try:
        for v in vals[1:]:
            out = op(out, host_array(v) if isinstance(v, Tensor) else v)
    except ValueError as err:
        raise ZynMLShapeError(f"{name}(): {err}") from None
    return bf16.tagged(wrap(out, t, keep_bf16=False), vals)


_reduction("sum", "sum")
_reduction("mean", "mean")
_reduction("max", "max")
_reduction("min", "min")
_reduction("argmax", "argmax")
_reduction("argmin", "argmin")


@builtin("softmax")
@_positional_optionals(1, ("axis",))
def _softmax(interp, args, kwargs):
    _unexpected(kwargs, ("axis",), "softmax")
    _arity(args, 1, "softmax", "softmax(x, axis=-1)")
    t = _tensor(args[0])
    xp = xp_of(t)
    a = _as_floats(xp, host_array(t))
    axis = as_int(kwargs.get("axis", -1))
    if not _is_int(axis):
        raise _placed(ZynMLTypeError(f"softmax(): axis= takes an integer, not {_kind(axis)}"),
                      "axis")
    if not -t.ndim <= axis < max(t.ndim, 1):
        raise _placed(ZynMLShapeError(f"softmax(): axis {axis} is outside a tensor of {t.ndim} "
                                      f"axes"), "axis")
    if a.size == 0:     # rows of no values (numpy's max of an empty axis raised): no values
        return wrap(xp.exp(a), t)
    with np.errstate(all="ignore"):     # (inf - inf is NaN, as torch gives it, silently)
        e = xp.exp(a - a.max(axis=axis, keepdims=True))
        return wrap(e / e.sum(axis=axis, keepdims=True), t)


# the library's activations of one number, in f64 on the host as sigmoid(0.5) is (the
# library's programs take tensors: gelu(0.5) was "x must be a tensor")
_OF_A_NUMBER = {
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x))),
}


def _library(name):
    """A kernel of the library (zynbook/library: written in ZynML), run on the session's
    default device."""
    def run(interp, args, kwargs):
        from .. import library
        if name in _OF_A_NUMBER and len(args) == 1 and isinstance(args[0], bool):
            raise _placed(ZynMLTypeError(f"{name}() takes a number or a tensor, not a bool"), 0)
        if name in _OF_A_NUMBER and len(args) == 1 and not kwargs and \
                isinstance(args[0], (int, float)):
            with np.errstate(all="ignore"):     # (IEEE results: silu(-1000.0) is -0.0)
                return float(_OF_A_NUMBER[name](np.float64(args[0])))
        try:
            return library.call(name, interp.session, args, kwargs)
        except ZynMLError as err:
            if err.inner_program is not None:    # raised by the library's own program
                raise err.at_call(name) from None
            raise
    run.__doc__ = f"{name}(...) from the kernel library"
    return run


for _name in ("sinkhorn", "rmsnorm", "silu", "gelu", "rope"):
    BUILTINS[_name] = _library(_name)


@builtin("where")
def _where(interp, args, kwargs):
    _unexpected(kwargs, (), "where")
    _arity(args, 3, "where", "where(cond, a, b)")
    cond, a, b = args
    t = next((v for v in args if isinstance(v, Tensor)), None)
    if t is None:
        if isinstance(cond, Tensor) or not isinstance(cond, (bool, int, float)):
            raise ZynMLTypeError(f"where(): the condition is a bool or a bool tensor, not "
                                 f"{_kind(cond)}")
        return a if cond else b
    cond, a, b = interp.colocate([cond, a, b], what="the arguments of where()")
    xp = xp_of(t)
    pick = lambda v: host_array(v) if isinstance(v, Tensor) else v      # noqa: E731
    try:
        picked = wrap(xp.where(pick(cond), pick(a), pick(b)), t, keep_bf16=False)
    except ValueError as err:
        raise ZynMLShapeError(f"where(): {err}") from None
    return bf16.tagged(picked, (a, b))      # the values' dtype, not the condition's


@builtin("range")
def _range(interp, args, kwargs):
    _unexpected(kwargs, (), "range")        # (range(3, step=2) ignored the step)
    args = [as_int(a) for a in args]
    if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
        raise ZynMLTypeError("range(n) or range(start, stop[, step]) with integers")
    if len(args) == 3 and args[2] == 0:     # (Python's 'range() arg 3 must not be zero')
        raise _placed(ZynMLTypeError("range(): the step must not be 0"), 2)
    values = range(*args)
    # a list of Python ints: a pointer and an int object each (range(10 ** 10) took the
    # machine's memory before failing)
    check_host_bytes(len(values) * 40, lambda size: f"range() of {len(values)} values asked "
                                                    f"for {size}")
    return list(values)


# dtype names are values too: allocate(dtype=float32)
# every dtype name and alias of the language reference ("Dtypes and promotion")
DTYPE_VALUES = dict(DTYPE_ALIASES)


# the compute-device interface (upload, matmul, ..., adamw_step): runtime/device_ops.py
from . import device_ops as _device_ops  # noqa: E402

_device_ops.register(BUILTINS)
