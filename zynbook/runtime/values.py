"""Host values a ZynML program handles besides tensors and numbers: records, futures,
pipelines and memory pools."""
from __future__ import annotations

import concurrent.futures as cf
import sys
import threading
import weakref

import numpy as np

from ..backends.cuda.views import torch_stream
from ..errors import ZynMLError, ZynMLMemoryError, ZynMLRuntimeError, ZynMLTypeError

_SESSION = __name__.rsplit(".", 2)[0] + ".session"      # zynbook.session, which imports this


class Record:
    """A read-only record whose fields are read with `.name` (dicts bound from the host,
    device descriptions)."""

    def __init__(self, fields: dict):
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name):
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def get(self, name, default=None):
        return self._fields.get(name, default)

    def __getitem__(self, name):
        # Python code (tests, widgets) reads records like the dicts they came from
        return self._fields[name]

    def __contains__(self, name):
        return name in self._fields

    def keys(self):
        return self._fields.keys()

    def __eq__(self, other):
        return isinstance(other, Record) and other._fields == self._fields

    def __repr__(self):
        return "{" + ", ".join(f"{k}: {v!r}" for k, v in self._fields.items()) + "}"


class Future:
    """The result of `compute(...) @async`: resolved with `await`."""

    def __init__(self, inner: cf.Future, label: str = "compute"):
        self.inner = inner
        self.label = label
        self.cancelled_by = ""      # why it was cancelled, for a later await's error
        self.statement = 0          # the statement that started it (Interpreter.statement)

    def done(self) -> bool:
        return self.inner.done()

    def result(self, timeout=None):
        return self.inner.result(timeout)

    def __await__(self):
        """`await future` in Python (a notebook's top-level `await`, an async function):
        its value, as `result()` gives it, the event loop running meanwhile."""
        import asyncio

        return asyncio.wrap_future(self.inner).__await__()

    def cancel(self, why: str = "") -> bool:
        """Stop the job: one still queued never starts, a running one is told to stop."""
        stopped = self.inner.cancel()
        if stopped and not self.cancelled_by:
            self.cancelled_by = why
        return stopped

    def __repr__(self):
        state = "done" if self.inner.done() else "running"
        return f"<future {self.label} ({state})>"


class DeviceQueue:
    """One worker thread per device: launches on a device run in submission order; a job
    can be cancelled, and leaving Python never waits on one (runtime/cancel.py)."""

    _queues: dict = {}
    _lock = threading.Lock()

    @classmethod
    def for_device(cls, device_id: str):
        from .cancel import JobQueue
        with cls._lock:
            q = cls._queues.get(device_id)
            if q is None:
                q = JobQueue(f"zynml-{device_id}")
                cls._queues[device_id] = q
            return q


class Pipeline:
    """A `pipeline name(params) -> type:` definition, callable like a function."""

    def __init__(self, node, interpreter, source: str = ""):
        self.node = node
        self.interpreter = interpreter
        self.name = node.name
        self.source = source            # the text it was defined in, for its errors

    def __call__(self, /, *args, **kwargs):
        """Call from Python: arrays become tensors, dicts records, as `zynbook.run` binds them
        (`self` is positional: a parameter may have that name)."""
        # (no import statement on this path: a model calls it per layer and step, and one
        # costs as much as binding an argument; the session module imports this one)
        bind_value = sys.modules[_SESSION].bind_value
        session = self.interpreter.session
        lock = getattr(session, "lock", None)
        try:
            try:
                args = [bind_value(a) for a in args]
                kwargs = {k: bind_value(v) for k, v in kwargs.items()}
            except ZynMLError as err:
                raise self._unbound_argument(err, bind_value, args, kwargs) from None
            if lock is None:
                return self._call(args, kwargs)
            with lock:          # one call at a time per session (Session's docstring)
                outside = getattr(session, "outside_names", None)
                if outside is not None:
                    outside(self)
                # (values put into the namespace directly, as the call's arguments are)
                sys.modules[_SESSION].bind_namespace(self.interpreter.globals, self.node,
                                                     self.source)
                # the session lists what this call launched, as it lists a cell's (a model
                # calling a pipeline per layer and step would otherwise pile them up)
                session.last_kernels, session.launches = [], []
                session.last_async, session.last_failed = [], []
                return self._call(args, kwargs)
        except ZynMLError as err:
            if err.span.line <= 0:
                # a mistake of the call itself (how many arguments, a name no parameter has,
                # a value ZynML has no type for): there is no ZynML call to point at, so the
                # caret goes under the pipeline's definition
                err.span = self.node.span
            raise err.with_source(self.source) from None

    def _unbound_argument(self, err, bind_value, args, kwargs) -> ZynMLError:
        """`err`, raised binding a Python argument no ZynML value stands for, said of the
        parameter it was for, with the caret under that parameter."""
        params = self.node.params
        given = [(params[k] if k < len(params) else None, a) for k, a in enumerate(args)]
        given += [(next((p for p in params if p.name == k), None), v) for k, v in kwargs.items()]
        for param, value in given:
            try:
                bind_value(value)
            except ZynMLError:
                if param is not None:
                    return ZynMLTypeError(f"argument `{param.name}` of pipeline {self.name}: "
                                     f"{err.message}", param.span)
                break
        return err

    def _call(self, args, kwargs):
        """The call's result, computed (returning to Python is a boundary, runtime/lazy.py),
        on the caller's torch stream where it made one current."""
        stream = torch_stream()
        if stream is None:
            return self._run(args, kwargs)
        with stream:
            return self._run(args, kwargs)

    def _run(self, args, kwargs):
        lazy = self.interpreter.lazy
        self.interpreter.statement += 1
        try:
            result = self.interpreter.call_pipeline(self, args, kwargs, None)
            lazy.finish(roots=[result])
        except BaseException:
            lazy.drop()
            raise
        finally:
            self.interpreter.last_made = None     # (Interpreter.last_made: a cell's alone)
        return lazy.plain(result)

    def __repr__(self):
        def typed(name, typ):       # (the type as written, from the text it was defined in)
            span = getattr(typ, "span", None)
            lines = self.source.split("\n")
            if span is None or not 0 < span.line <= len(lines) or span.end_line != span.line:
                return name
            text = lines[span.line - 1][span.column - 1:span.end_column - 1].strip()
            return f"{name}: {text}" if name else f" -> {text}"

        params = ", ".join(typed(q.name, q.type) for q in self.node.params)
        returns = typed("", self.node.returns) if self.node.returns is not None else ""
        return f"<pipeline {self.name}({params}){returns}>"


class MemoryPool:
    """`memory_pool(device=, size=)`: allocations on one device within a fixed budget."""

    def __init__(self, device, size: int, allocate_fn):
        self.device = device
        self.size = int(size)
        self._allocate = allocate_fn
        self.live: dict = {}            # id(tensor) -> (tensor, nbytes)
        self._native = None

    @property
    def used(self) -> int:
        return sum(n for _t, n in self.live.values())

    @property
    def free_bytes(self) -> int:
        return self.size - self.used

    def allocate(self, shape, dtype="f32"):
        # the budget is checked before any memory is taken: an allocation far past it is the
        # pool's error, not the device's (or the host's) running out
        from ..compiler.types import dtype_bytes
        # the dtype's own bytes: a bf16 element is 2 (its host form, f32, is not the budget's)
        nbytes = int(np.prod(shape, dtype=object)) * dtype_bytes(dtype)
        if nbytes > self.free_bytes:
            raise ZynMLMemoryError(
                f"out of memory in the pool on {self.device.id}: asked for {_bytes(nbytes)}, "
                f"{_bytes(self.free_bytes)} of {_bytes(self.size)} free" +
                # (rounded, the two may read alike)
                (f" ({nbytes} bytes asked, {self.free_bytes} free)"
                 if _bytes(nbytes) == _bytes(self.free_bytes) else ""))
        tensor = self._allocate(shape, dtype, self.device.id)
        self.live[id(tensor)] = (tensor, nbytes)
        return tensor

    def free(self, tensor):
        if id(tensor) not in self.live:
            if self._viewed(tensor):
                raise ZynMLTypeError("this is a view (a slice or an index) of a tensor this pool "
                                     "allocated: free the tensor itself")
            raise ZynMLTypeError("this tensor was not allocated from this pool (or was freed)")
        _release(tensor, self.device.id, "pool.free()")
        del self.live[id(tensor)]

    def _viewed(self, tensor) -> bool:
        """Whether `tensor`'s data is a view of the memory of a tensor this pool holds."""
        owners = {id(t.data) for t, _n in self.live.values()}
        data = getattr(getattr(tensor, "data", None), "base", None)
        while data is not None:
            if id(data) in owners:
                return True
            data = getattr(data, "base", None)
        return False

    def reset(self):
        for tensor, _n in self.live.values():
            _release(tensor, self.device.id, "pool.reset()")
        self.live.clear()

    def __repr__(self):
        return (f"<memory_pool on {self.device.id}: {_bytes(self.used)} used of "
                f"{_bytes(self.size)}, {len(self.live)} allocations>")


class Released:
    """The data of a tensor whose memory pool freed it (pool.free() or pool.reset()): reading
    it in any way (an attribute, numpy's conversion) is a runtime error."""
    __slots__ = ("device", "by")

    def __init__(self, device: str, by: str):
        self.device = device
        self.by = by            # "pool.free()" or "pool.reset()"

    def error(self, name: str | None = None, span=None, view: bool = False) -> ZynMLRuntimeError:
        what = f"`{name}`" if name else "this tensor"
        what += " is a view of a tensor that" if view else ""
        return ZynMLRuntimeError(
            f"{what} was allocated from a memory pool on {self.device} that {self.by} has "
            f"since released (its memory may be handed out again): allocate it anew after "
            f"{self.by}" + (", or copy the view before it" if view else ""), span)

    def __getattr__(self, attr):
        raise self.error()

    def __array__(self, *args, **kwargs):
        raise self.error()


# The arrays of pool tensors that were released: id -> (a weak reference to the array, its
# Released). A view made before the release (a slice, .T, a reshape, to_device(copy=false))
# holds the array as its base, or is it: released() finds it there.
_RELEASED: dict = {}


def _release(tensor, device: str, by: str) -> None:
    """The pool may hand `tensor`'s memory out again: it keeps no data, and its views are
    known, so any later use is an error (interp.lookup names the tensor) rather than a read
    of another's memory."""
    marker = Released(device, by)
    array = tensor.data
    while getattr(array, "base", None) is not None:     # (the array that owns the memory)
        array = array.base
    key = id(array)
    try:
        _RELEASED[key] = (weakref.ref(array, lambda _r, key=key: _RELEASED.pop(key, None)),
                          marker)
    except TypeError:           # (numpy's, CuPy's and WebGPU's arrays all take one)
        pass
    tensor.data = marker


def released(data) -> tuple | None:
    """(Released, whether `data` is a view) where `data` is a released pool tensor's, or a
    view of its memory made before the release; None for live data."""
    if type(data) is Released:
        return data, False
    view = False
    while _RELEASED and data is not None:
        entry = _RELEASED.get(id(data))
        if entry is not None and entry[0]() is data:
            return entry[1], view
        data, view = getattr(data, "base", None), True
    return None


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
