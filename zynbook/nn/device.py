"""The compute-device interface: buffers on one device and the operations a small model
trains with, each a ZynML program (zynbook/nn/kernels.py) run by the same compiler and
back ends as user code.

    dev = zynbook.device("cuda:0")          # any device id; "auto" is the best present
    x = dev.upload(np.arange(12, dtype=np.float32))
    y = dev.matmul(x, w, 3, 4, 5)
    dev.download(y)                          # numpy, f32

A `Buffer` is a flat array of f32 (or u32 for token ids) on the device; the in-place
operations (`add_assign`, `zero_buffer`, `adamw_step`) rebind the buffer they are given to
the new values, which never leave the device.
"""
from __future__ import annotations

import collections
import math
import threading

import numpy as np

from ..errors import (ZynMLDeviceError, ZynMLError, ZynMLRuntimeError, ZynMLShapeError,
                      ZynMLTypeError)
from ..runtime.placement import same_memory
from . import expr as E
from . import kernels as K
from .fused import FusedOps


def _held_number(v):
    """A 0-d array or tensor of numbers (np.array(3), `s[0]` in ZynML) as the number it
    holds, as numpy reads one; anything else as it is."""
    if getattr(v, "ndim", None) == 0 and not isinstance(v, (np.generic, Buffer)) and \
            hasattr(v, "__array__"):
        from ..runtime.tensor import to_tensor
        t = to_tensor(v)        # as a program binds it: a torch parameter (numpy refuses it)
        a = np.asarray(v if t is None else t.numpy())
        if a.dtype.kind in "iuf":
            return a.item()
    return v


def _shown(v) -> str:
    """`v` in an error: a number as it is, anything else by its type (not every value)."""
    return repr(v) if isinstance(v, (int, float, str, type(None))) else type(v).__name__


class Buffer:
    """A flat buffer of `len()` elements on one device (`.device`), f32 or u32."""

    __slots__ = ("_tensor", "owner", "_nbytes", "__weakref__")

    def __init__(self, tensor, owner):
        self._nbytes = 0
        self.owner = owner
        self.tensor = tensor            # a 1-D zynbook.Tensor on owner.id

    @property
    def tensor(self):
        return self._tensor

    @tensor.setter
    def tensor(self, t):
        # the device's allocator counts every buffer's bytes while the buffer lives
        n = int(t.nbytes)
        self.owner._track(n - self._nbytes)
        self._tensor, self._nbytes = t, n

    def __del__(self):
        # no lock here: the collector runs this on whichever thread allocates, which may be
        # the thread a launch holding the device's lock waits for (a deadlock on WebGPU's
        # buffer reads); deque.append is atomic and _track counts the bytes back
        try:
            self.owner._freed.append(self._nbytes)
        except Exception:       # noqa: BLE001 - interpreter shutdown
            pass

    def __len__(self) -> int:
        return self.tensor.size

    def is_empty(self) -> bool:
        return len(self) == 0

    @property
    def device(self) -> str:
        return self.tensor.device

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def to_vec(self) -> np.ndarray:
        return self.owner.download(self)

    def __array__(self, dtype=None, copy=None):
        arr = self.to_vec()
        return arr if dtype is None else arr.astype(dtype)

    def __repr__(self):
        return f"Buffer(len={len(self)}, dtype={self.dtype}, device={self.device!r})"


def _reshape(t, shape):
    # uncommitted: an operation runs on its interface's device, a buffer of the other
    # host device (cpu, cpu:native) included
    from ..library import reshape
    return reshape(t, shape, committed=False)


class Device(FusedOps):
    """One device (`cpu`, `cpu:native`, `cuda:0`, `vulkan:0`, ...) and the operations of the
    compute-device interface, with the interface's names and arguments."""

    def __init__(self, device_id: str = "auto"):
        from ..backends.registry import best_device_id, get_device
        from ..session import Session
        if device_id == "auto":
            device_id = best_device_id()
        self.backend = get_device(device_id)       # ZynMLDeviceError for unknown ids
        self.id = device_id
        self._session = Session(device_id)
        self._lock = threading.RLock()      # one program at a time on the session
        self._mem_lock = threading.Lock()   # the byte counts below
        self._freed = collections.deque()   # bytes of buffers collected since, not yet counted
        self._live = self._peak = 0         # bytes of the buffers alive now, and at most
        self._pool_peak = None              # CUDA: CuPy's memory pool in use, at most
        # bytes a training step may keep for its backward pass (models built on this device
        # use it unless their own config names one); None: no budget
        self.memory_budget = None

    def __repr__(self):
        return f"zynbook.device({self.id!r})"

    def dialect(self) -> str:
        """The language kernels are generated in on this device."""
        return {"cpu": "python", "c": "c++", "cuda": "cuda", "metal": "msl"}.get(
            self.backend.backend, "wgsl")

    # -------------------------------------------------------------- memory
    def _track(self, delta: int):
        with self._mem_lock:
            while self._freed:
                self._live -= self._freed.popleft()
            self._live += delta
            if self._live > self._peak:
                self._peak = self._live
            if delta > 0 and self.backend.backend == "cuda":
                used = self._pool_used()
                if used is not None and (self._pool_peak is None or used > self._pool_peak):
                    self._pool_peak = used

    def _pool_used(self):
        try:
            import cupy
            with cupy.cuda.Device(int(self.backend.id.split(":")[1])):
                return int(cupy.get_default_memory_pool().used_bytes())
        except Exception:       # noqa: BLE001 - no CuPy pool to ask
            return None

    def memory_stats(self) -> dict:
        """{"live_bytes": bytes of this device's buffers alive now, "peak_bytes": the most
        alive at once since the last reset_peak_memory(), "pool_peak_bytes": on CUDA, the most
        CuPy's memory pool held in use at a buffer's allocation (every array on the device,
        the kernels' temporaries too), else None}."""
        self._track(0)
        with self._mem_lock:
            return {"live_bytes": self._live, "peak_bytes": self._peak,
                    "pool_peak_bytes": self._pool_peak}

    def reset_peak_memory(self):
        """Start the peak over from the bytes alive now."""
        self._track(0)
        with self._mem_lock:
            self._peak = self._live
            self._pool_peak = self._pool_used() if self.backend.backend == "cuda" else None

    # -------------------------------------------------------------- plumbing
    def _wrap(self, t) -> Buffer:
        if t.ndim != 1:
            t = _reshape(t, (t.size,))
        return Buffer(t, self)

    def _t(self, buf, what: str, op: str, dtype: str | None = None):
        if not isinstance(buf, Buffer):
            raise ZynMLTypeError(f"{op}(): `{what}` must be a buffer of this device (from "
                                 f"upload, alloc or an operation), not {type(buf).__name__}")
        # (`cpu` and `cpu:native` share the host's memory: either's buffers serve the other)
        if not same_memory(buf.tensor.device, self.id) and self.backend.id != buf.tensor.device:
            raise ZynMLDeviceError(f"{op}(): `{what}` lives on {buf.tensor.device}, this "
                                   f"device is {self.id}")
        if dtype is not None and buf.dtype != dtype:
            raise ZynMLTypeError(f"{op}(): `{what}` must hold {dtype} values, not {buf.dtype}"
                                 + (" (upload token ids with upload_u32)" if dtype == "u32"
                                    else ""))
        return buf.tensor

    def _need(self, buf, n: int, what: str, formula: str, op: str, dtype="f32"):
        t = self._t(buf, what, op, dtype)
        if t.size != n:
            raise ZynMLShapeError(f"{op}(): `{what}` has {t.size} elements but {formula} = {n}")
        return t

    @staticmethod
    def _size(v, what: str, op: str, positive=True) -> int:
        v = _held_number(v)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ZynMLTypeError(f"{op}(): `{what}` is a size (an int), not {_shown(v)}")
        v = int(v)
        if v < (1 if positive else 0):
            raise ZynMLShapeError(f"{op}(): `{what}` must be {'at least 1' if positive else 'at least 0'}, not {v}")
        if v >= 2 ** 63:    # (alloc(2 ** 64) named its kernel's own `n` and said to pass a float)
            raise ZynMLShapeError(f"{op}(): `{what}` = {v} is past 2^63 - 1, the largest size "
                                  "a device takes")
        return v

    @classmethod
    def _rows(cls, v, what: str, op: str) -> int:
        """A count of rows (positions, elements): 0 of them gives no values, as torch."""
        return cls._size(v, what, op, positive=False)

    @staticmethod
    def _number(v, what: str, op: str, below_one=False, positive=False) -> float:
        """A hyperparameter: a number at least 0 (and below 1 where `below_one`, above 0
        where `positive`: RoPE's base)."""
        v = _held_number(v)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ZynMLTypeError(f"{op}(): `{what}` is a number, not {_shown(v)}")
        v = float(v)
        if not (0.0 <= v < 1.0 if below_one else 0.0 <= v < math.inf) or (positive and v == 0):
            raise ZynMLTypeError(f"{op}(): `{what}` must be " +
                                 ("in [0, 1)" if below_one else
                                  f"a finite number {'above' if positive else 'at least'} 0") +
                                 f", not {v!r}")
        return v

    def _run(self, source: str, **bindings):
        """Run a ZynML program of kernels.py on this device; its value."""
        from ..session import parse_cached
        program = parse_cached(source)
        session = self._session
        with self._lock:
            ns = session.namespace
            ns.clear()
            ns.update(bindings)
            try:
                value, _ = session.interpreter.run_program(program, source)
            except ZynMLError as err:
                err.inner_program = source
                raise err.with_source(source) from None
            finally:
                ns.clear()
                session.last_kernels = []
                session.launches = []
        return value

    def _on_device(self, host: np.ndarray, dtype: str) -> Buffer:
        from ..runtime.tensor import Tensor
        data = self.backend.from_host(np.ascontiguousarray(host))
        return Buffer(Tensor(data, self.backend.id, host.shape, dtype, committed=True), self)

    # -------------------------------------------------------- buffer lifecycle
    @staticmethod
    def _numbers(data, op: str) -> np.ndarray:
        # strings, None and ragged lists are the caller's mistake, not numpy's to report;
        # a torch tensor that requires grad (RuntimeError) is read as a program binds it
        try:
            arr = np.asarray(data)
        except (ValueError, TypeError, RuntimeError):
            arr = None
        if arr is None or arr.dtype.kind == "O":
            # an array numpy cannot read (a torch bfloat16 tensor, exact in f32), bound as a
            # ZynML program binds it
            from ..runtime.tensor import Tensor, to_tensor
            try:
                t = data if isinstance(data, Tensor) else to_tensor(data)
            except ZynMLError:
                t = None
            if t is not None:
                arr = np.asarray(t.numpy())
        if arr is None or arr.dtype.kind not in "biuf":
            raise ZynMLTypeError(f"{op}(): `data` takes an array or a (rectangular) list of "
                                 f"numbers, not {type(data).__name__}")
        return arr

    def upload(self, data) -> Buffer:
        """f32 values (any array or list) onto the device, flattened."""
        with np.errstate(over="ignore"):    # past f32's range: inf, as numpy casts it
            arr = self._numbers(data, "upload").astype(np.float32).reshape(-1)
        return self._on_device(arr, "f32")

    def upload_u32(self, data) -> Buffer:
        """u32 values (token ids) onto the device."""
        raw = self._numbers(data, "upload_u32")
        if raw.size == 0:       # no ids ([] is numpy's float64): an empty buffer, as upload([])
            raw = raw.astype(np.uint32)
        if raw.dtype.kind not in "iub" or raw.size and (int(raw.min()) < 0 or
                                                         int(raw.max()) >= 2 ** 32):
            raise ZynMLTypeError("upload_u32(): token ids are integers from 0 to 2^32 - 1")
        return self._on_device(raw.astype(np.uint32).reshape(-1), "u32")

    def alloc(self, length: int) -> Buffer:
        """A buffer of `length` f32 elements (zeroed: ZynML gives unwritten memory as 0)."""
        n = self._size(length, "len", "alloc", positive=False)
        if n == 0:
            return self._on_device(np.zeros(0, np.float32), "f32")
        return self._wrap(self._run(K.ZERO, n=n))

    def download(self, buf: Buffer) -> np.ndarray:
        """The buffer's values on the host (numpy, f32 or u32)."""
        t = self._t(buf, "buf", "download")
        return np.array(t.numpy(), copy=True).reshape(-1)

    def sync(self):
        """Wait for every launch made on this device."""
        self.backend.synchronize()

    def copy_buffer(self, src: Buffer) -> Buffer:
        """A copy made on the device, without a round trip through the host."""
        t = self._t(src, "src", "copy_buffer")
        if t.size == 0:
            return self._on_device(np.zeros(0, t.numpy_dtype), t.dtype)
        return self._wrap(self._run(K.COPY, x=t))

    # -------------------------------------------------------------- fused elementwise
    def elementwise(self, inputs, numel: int, f) -> Buffer:
        """`f` (a Python callable taking a list of one expression per input) traced into one
        fused kernel over `numel` elements; every input must hold `numel` elements."""
        n = self._size(numel, "numel", "elementwise", positive=False)
        if not isinstance(inputs, (list, tuple)):
            raise ZynMLTypeError("elementwise(): `inputs` is a list of buffers, not "
                                 f"{type(inputs).__name__}")
        if not callable(f):
            raise ZynMLTypeError("elementwise(): `f` is a function of the list of input "
                                 f"expressions, not {type(f).__name__}")
        inputs = list(inputs)
        ts = [self._need(b, n, f"inputs[{k}]", "numel", "elementwise")
              for k, b in enumerate(inputs)]
        leaves = [E.Expr("input", (), k) for k in range(len(ts))]
        try:
            result = f(leaves)
        except ZynMLError:
            raise
        except Exception as err:    # another library's function of a traced value (torch.exp)
            raise ZynMLTypeError(
                f"elementwise(): the function failed on its traced inputs ({type(err).__name__}: "
                f"{err}); build the result with + - * / **, comparisons and zynbook.nn.expr's "
                "functions") from err
        if result is not None and not isinstance(result, E.Expr):
            try:        # a number, numpy's and a 0-d array's too: every element that value
                result = E.lift(result)
            except ZynMLTypeError:
                if isinstance(result, (int, float, np.number)):     # one past every float
                    raise
        if not isinstance(result, E.Expr):
            raise ZynMLTypeError("elementwise(): the function must return an expression built "
                                 "from its inputs, not "
                                 f"{'nothing' if result is None else type(result).__name__}")
        names = [f"x{k}" for k in range(len(ts))]
        lets, final = E.render(result, names)
        body = "".join("        " + line.replace("\n", "\n        ") + "\n" for line in lets)
        if not ts:
            head = "compute()"
        else:
            head = f"compute({', '.join(names)})"
        # a buffer holds f32 whatever the expression gives (a comparison is a bool, 1 or 0)
        source = (f"let y = {head} {{\n    @kernel elementwise\n    for i in 0..n:\n{body}"
                  f"        out[i] = f32({final})\n}}\ny\n")
        return self._wrap(self._run(source, n=n, **dict(zip(names, ts))))

    # -------------------------------------------------------------- forward ops
    def matmul(self, a: Buffer, b: Buffer, m: int, k: int, n: int) -> Buffer:
        """C[m, n] = A[m, k] B[k, n], row-major."""
        op = "matmul"
        m, k, n = (self._size(v, w, op, positive=False) for v, w in ((m, "m"), (k, "k"), (n, "n")))
        ta = self._need(a, m * k, "a", f"m * k = {m} * {k}", op)
        tb = self._need(b, k * n, "b", f"k * n = {k} * {n}", op)
        return self._wrap(self._run(K.MATMUL, a=_reshape(ta, (m, k)), b=_reshape(tb, (k, n))))

    def softmax(self, data: Buffer, n_rows: int, row_len: int) -> Buffer:
        op = "softmax"
        r, c = self._size(n_rows, "n_rows", op, positive=False), self._size(row_len, "row_len", op, positive=False)
        t = self._need(data, r * c, "data", f"n_rows * row_len = {r} * {c}", op)
        return self._wrap(self._run(K.SOFTMAX_ROWS, x=_reshape(t, (r, c))))

    def rms_norm(self, data: Buffer, weight: Buffer, n_groups: int, dim: int,
                 eps: float) -> Buffer:
        """x * weight / sqrt(mean(x^2) + eps) over each of `n_groups` rows of `dim`."""
        op = "rms_norm"
        g, d = self._size(n_groups, "n_groups", op, positive=False), self._size(dim, "dim", op, positive=False)
        t = self._need(data, g * d, "data", f"n_groups * dim = {g} * {d}", op)
        w = self._need(weight, d, "weight", "dim", op)
        return self._wrap(self._run(K.RMS_NORM, x=_reshape(t, (g, d)), weight=w,
                                    eps=self._number(eps, "eps", op)))

    def embedding(self, weight: Buffer, ids: Buffer, seq_len: int, dim: int) -> Buffer:
        """Row `ids[t]` of the table for each of `seq_len` positions: [seq_len, dim]."""
        op = "embedding"
        s, d = self._size(seq_len, "seq_len", op, positive=False), self._size(dim, "dim", op)
        ti = self._need(ids, s, "ids", "seq_len", op, dtype="u32")
        tw = self._t(weight, "weight", op, "f32")
        if tw.size % d:
            raise ZynMLShapeError(f"{op}(): `weight` has {tw.size} elements, not a multiple "
                                  f"of dim = {d}")
        self._check_ids(ti, tw.size // d, op)
        return self._wrap(self._run(K.EMBEDDING, weight=_reshape(tw, (tw.size // d, d)),
                                    ids=ti, dim=d))

    def _check_ids(self, ids, rows: int, op: str):
        """A runtime error naming the largest token id where it is past a table of `rows`
        rows, on every device (the backward pass's gather dropped such ids silently)."""
        if ids.size == 0:
            return
        top = int(self._run(K.MAX_ID, ids=ids))
        if top >= rows:
            raise ZynMLRuntimeError(f"{op}(): token id {top} is outside the table of {rows} "
                                    "rows")

    def reduce_sum(self, data: Buffer, shape, axis: int) -> Buffer:
        """Sum along `axis` of `data` viewed with `shape`; the result has that axis dropped."""
        op = "reduce_sum"
        if not isinstance(shape, (list, tuple)):
            raise ZynMLTypeError(f"{op}(): `shape` is a list of sizes, not {shape!r}")
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ZynMLTypeError(f"{op}(): `axis` is an int, not {axis!r}")
        shape = [self._size(v, "shape", op, positive=False) for v in shape]
        if not shape:
            raise ZynMLShapeError(f"{op}(): `shape` needs at least one axis")
        if not -len(shape) <= axis < len(shape):
            raise ZynMLShapeError(f"{op}(): axis {axis} is outside a shape of {len(shape)} axes")
        axis = int(axis) % len(shape)
        total = math.prod(shape)
        t = self._need(data, total, "data", f"the product of shape {shape}", op)
        outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
        return self._wrap(self._run(K.REDUCE_SUM, x=_reshape(t, (outer, shape[axis], inner))))

    def _heads(self, op, n_heads, n_kv_heads, head_dim):
        h = self._size(n_heads, "n_heads", op)
        kv = self._size(n_kv_heads, "n_kv_heads", op)
        d = self._size(head_dim, "head_dim", op)
        if h % kv:
            raise ZynMLShapeError(f"{op}(): n_kv_heads = {kv} does not divide n_heads = {h}")
        return h, kv, d

    def causal_attention(self, q: Buffer, k: Buffer, v: Buffer, seq_len: int, n_heads: int,
                         n_kv_heads: int, head_dim: int) -> Buffer:
        """Causal self-attention with grouped-query heads; q [seq_len, n_heads * head_dim],
        k and v [seq_len, n_kv_heads * head_dim]."""
        return self.kv_attention(q, k, v, 0, seq_len, n_heads, n_kv_heads, head_dim,
                                 _op="causal_attention", _names=("q", "k", "v"))

    def kv_attention(self, q: Buffer, k_cache: Buffer, v_cache: Buffer, cache_start: int,
                     q_len: int, n_heads: int, n_kv_heads: int, head_dim: int, *,
                     _op="kv_attention", _names=("q", "k_cache", "v_cache")) -> Buffer:
        """Attention of `q_len` new positions over a cache of cache_start + q_len positions;
        query i sees positions 0..cache_start + i."""
        op = _op
        h, kv, d = self._heads(op, n_heads, n_kv_heads, head_dim)
        start = self._size(cache_start, "cache_start", op, positive=False)
        s = self._size(q_len, "q_len" if op == "kv_attention" else "seq_len", op, positive=False)
        total = start + s
        tq = self._need(q, s * h * d, _names[0], f"{'q_len' if op == 'kv_attention' else 'seq_len'}"
                        f" * n_heads * head_dim = {s} * {h} * {d}", op)
        rows = "(cache_start + q_len)" if op == "kv_attention" else "seq_len"
        tk = self._need(k_cache, total * kv * d, _names[1],
                        f"{rows} * n_kv_heads * head_dim = {total} * {kv} * {d}", op)
        tv = self._need(v_cache, total * kv * d, _names[2],
                        f"{rows} * n_kv_heads * head_dim = {total} * {kv} * {d}", op)
        return self._wrap(self._run(
            K.KV_ATTENTION, q=_reshape(tq, (s, h, d)), k=_reshape(tk, (total, kv, d)),
            v=_reshape(tv, (total, kv, d)), start=start, group=h // kv,
            scale=1.0 / math.sqrt(d)))

    def transpose_2d(self, buf: Buffer, rows: int, cols: int) -> Buffer:
        op = "transpose_2d"
        r, c = self._size(rows, "rows", op, positive=False), self._size(cols, "cols", op, positive=False)
        t = self._need(buf, r * c, "buf", f"rows * cols = {r} * {c}", op)
        return self._wrap(self._run(K.TRANSPOSE, x=_reshape(t, (r, c))))

    # -------------------------------------------------------------- backward ops
    def softmax_backward(self, softmax_out: Buffer, grad_output: Buffer, n_rows: int,
                         row_len: int) -> Buffer:
        op = "softmax_backward"
        r, c = self._size(n_rows, "n_rows", op, positive=False), self._size(row_len, "row_len", op, positive=False)
        f = f"n_rows * row_len = {r} * {c}"
        sm = self._need(softmax_out, r * c, "softmax_out", f, op)
        g = self._need(grad_output, r * c, "grad_output", f, op)
        return self._wrap(self._run(K.SOFTMAX_BACKWARD, sm=_reshape(sm, (r, c)),
                                    g=_reshape(g, (r, c))))

    def rms_norm_backward(self, input: Buffer, weight: Buffer, grad_output: Buffer,
                          n_groups: int, dim: int, eps: float):
        """(grad_input, grad_weight) of rms_norm."""
        op = "rms_norm_backward"
        r, d = self._size(n_groups, "n_groups", op, positive=False), self._size(dim, "dim", op, positive=False)
        f = f"n_groups * dim = {r} * {d}"
        x = self._need(input, r * d, "input", f, op)
        w = self._need(weight, d, "weight", "dim", op)
        g = self._need(grad_output, r * d, "grad_output", f, op)
        dx, dw = self._run(K.RMS_NORM_BACKWARD, x=_reshape(x, (r, d)), weight=w,
                           g=_reshape(g, (r, d)), eps=self._number(eps, "eps", op))
        return self._wrap(dx), self._wrap(dw)

    def embedding_backward(self, grad_output: Buffer, ids: Buffer, vocab_size: int,
                           seq_len: int, dim: int) -> Buffer:
        """grad_weight[ids[t]] += grad_output[t]: [vocab_size, dim]."""
        op = "embedding_backward"
        v = self._size(vocab_size, "vocab_size", op, positive=False)
        s, d = self._size(seq_len, "seq_len", op, positive=False), self._size(dim, "dim", op, positive=False)
        g = self._need(grad_output, s * d, "grad_output", f"seq_len * dim = {s} * {d}", op)
        ids = self._need(ids, s, "ids", "seq_len", op, dtype="u32").numpy()
        if ids.size and int(ids.max()) >= v:
            raise ZynMLRuntimeError(f"{op}(): token id {int(ids.max())} is outside the table "
                                    f"of {v} rows")
        # the positions grouped by id, on the host: seq_len ids read back (as the id check
        # read their maximum), two small tables sent
        order = np.argsort(ids, kind="stable").astype(np.int32)
        start = np.searchsorted(ids[order], np.arange(v + 1)).astype(np.int32)
        return self._wrap(self._run(K.EMBEDDING_BACKWARD, g=_reshape(g, (s, d)),
                                    order=self._on_device(order, "i32").tensor,
                                    start=self._on_device(start, "i32").tensor, vocab=v))

    def causal_attention_backward(self, grad_output: Buffer, q: Buffer, k: Buffer, v: Buffer,
                                  seq_len: int, n_heads: int, n_kv_heads: int, head_dim: int):
        """(grad_q, grad_k, grad_v), recomputing the attention scores from q and k."""
        op = "causal_attention_backward"
        h, kv, d = self._heads(op, n_heads, n_kv_heads, head_dim)
        s = self._size(seq_len, "seq_len", op, positive=False)
        fq = f"seq_len * n_heads * head_dim = {s} * {h} * {d}"
        fk = f"seq_len * n_kv_heads * head_dim = {s} * {kv} * {d}"
        tg = self._need(grad_output, s * h * d, "grad_output", fq, op)
        tq = self._need(q, s * h * d, "q", fq, op)
        tk = self._need(k, s * kv * d, "k", fk, op)
        tv = self._need(v, s * kv * d, "v", fk, op)
        o = self.causal_attention(q, k, v, s, h, kv, d).tensor
        dq, dk, dv = self._run(
            K.ATTENTION_BACKWARD, q=_reshape(tq, (s, h, d)), k=_reshape(tk, (s, kv, d)),
            v=_reshape(tv, (s, kv, d)), dout=_reshape(tg, (s, h, d)), o=_reshape(o, (s, h, d)),
            group=h // kv, kv_heads=kv, scale=1.0 / math.sqrt(d))
        return self._wrap(dq), self._wrap(dk), self._wrap(dv)

    def cross_entropy_forward_backward(self, logits: Buffer, targets: Buffer,
                                       n_positions: int, vocab_size: int, pad_id: int):
        """(mean loss over the positions whose target is not `pad_id`, grad_logits);
        padded positions get a zero gradient. With every position padded the loss is 0."""
        op = "cross_entropy_forward_backward"
        n, v = (self._size(n_positions, "n_positions", op, positive=False),
                self._size(vocab_size, "vocab_size", op, positive=False))
        pad = self._size(pad_id, "pad_id", op, positive=False)
        if pad >= 2 ** 32:
            raise ZynMLTypeError(f"{op}(): `pad_id` is a token id (a u32, below 2^32), not {pad}")
        tl = self._need(logits, n * v, "logits", f"n_positions * vocab_size = {n} * {v}", op)
        tt = self._need(targets, n, "targets", "n_positions", op, dtype="u32")
        halves = {"pad_hi": pad >> 16, "pad_lo": pad & 0xFFFF}
        count = float(self._run(K.CE_COUNT, targets=tt, **halves))
        # the kernel's own index error named an internal buffer, and a target past 2^31 as
        # a negative index
        top = int(self._run(K.CE_MAX_TARGET, targets=tt, **halves))
        if count > 0 and top >= v:      # (with no position kept, the max is of nothing)
            raise ZynMLRuntimeError(f"{op}(): target {top} is outside the vocabulary of "
                                    f"vocab_size = {v} (and is not pad_id = {pad})")
        loss, grad = self._run(K.CE_FORWARD_BACKWARD, logits=_reshape(tl, (n, v)), targets=tt,
                               count=max(count, 1.0), **halves)
        return float(loss), self._wrap(grad)

    # -------------------------------------------------------------- beyond the interface
    def rope(self, x: Buffer, seq_len: int, n_heads: int, head_dim: int, pos0: int = 0,
             base: float = 10000.0, inverse: bool = False) -> Buffer:
        """Rotary position embedding of x [seq_len, n_heads * head_dim] for positions
        pos0, pos0 + 1, ... (interleaved pairs); `inverse` turns back (its backward pass)."""
        op = "rope"
        s = self._rows(seq_len, "seq_len", op)
        h, d = self._size(n_heads, "n_heads", op), self._size(head_dim, "head_dim", op)
        if d % 2:
            raise ZynMLShapeError(f"{op}(): head_dim = {d} must be even")
        p0 = self._size(pos0, "pos0", op, positive=False)
        t = self._need(x, s * h * d, "x", f"seq_len * n_heads * head_dim = {s} * {h} * {d}", op)
        base = self._number(base, "base", op, positive=True)
        return self._wrap(self._run(K.ROPE, x=_reshape(t, (s, h, d)), half=d // 2,
                                    pos0=float(p0), sign=-1.0 if inverse else 1.0,
                                    log_step=-2.0 * math.log(base) / d))

    def append_rows(self, a: Buffer, b: Buffer, rows_a: int, rows_b: int, dim: int) -> Buffer:
        """The rows of `b` after those of `a` ([rows_a + rows_b, dim]): a growing KV cache."""
        op = "append_rows"
        ra, rb = self._rows(rows_a, "rows_a", op), self._rows(rows_b, "rows_b", op)
        d = self._size(dim, "dim", op)
        ta = self._need(a, ra * d, "a", f"rows_a * dim = {ra} * {d}", op)
        tb = self._need(b, rb * d, "b", f"rows_b * dim = {rb} * {d}", op)
        if ra == 0:
            return self.copy_buffer(b)
        return self._wrap(self._run(K.APPEND_ROWS, a=_reshape(ta, (ra, d)),
                                    b=_reshape(tb, (rb, d))))

    def write_rows(self, cache: Buffer, new: Buffer, at: int, rows: int, q_len: int,
                   dim: int) -> Buffer:
        """`cache` [rows, dim] with rows at..at + q_len - 1 replaced by `new` [q_len, dim];
        `at` is a scalar argument, so every position launches the same kernel."""
        op = "write_rows"
        r, q = self._rows(rows, "rows", op), self._rows(q_len, "q_len", op)
        d = self._size(dim, "dim", op)
        a = self._size(at, "at", op, positive=False)
        if a + q > r:
            raise ZynMLShapeError(f"{op}(): rows at + q_len = {a} + {q} do not fit in {r} rows")
        tc = self._need(cache, r * d, "cache", f"rows * dim = {r} * {d}", op)
        tn = self._need(new, q * d, "new", f"q_len * dim = {q} * {d}", op)
        return self._wrap(self._run(K.WRITE_ROWS, cache=_reshape(tc, (r, d)),
                                    new=_reshape(tn, (q, d)), at=float(a), q_len=q))

    def kv_attention_fixed(self, q: Buffer, k_cache: Buffer, v_cache: Buffer, cache_start: int,
                           q_len: int, capacity: int, n_heads: int, n_kv_heads: int,
                           head_dim: int) -> Buffer:
        """kv_attention over caches of `capacity` rows of which cache_start + q_len are
        filled; cache_start is a scalar argument (no new kernel per decoded token)."""
        op = "kv_attention_fixed"
        h, kv, d = self._heads(op, n_heads, n_kv_heads, head_dim)
        start = self._size(cache_start, "cache_start", op, positive=False)
        s, cap = self._rows(q_len, "q_len", op), self._size(capacity, "capacity", op)
        if start + s > cap:
            raise ZynMLShapeError(f"{op}(): cache_start + q_len = {start} + {s} is more than "
                                  f"capacity = {cap}")
        tq = self._need(q, s * h * d, "q", f"q_len * n_heads * head_dim = {s} * {h} * {d}", op)
        f = f"capacity * n_kv_heads * head_dim = {cap} * {kv} * {d}"
        tk = self._need(k_cache, cap * kv * d, "k_cache", f, op)
        tv = self._need(v_cache, cap * kv * d, "v_cache", f, op)
        return self._wrap(self._run(
            K.KV_ATTENTION_FIXED, q=_reshape(tq, (s, h, d)), k=_reshape(tk, (cap, kv, d)),
            v=_reshape(tv, (cap, kv, d)), start=float(start), group=h // kv,
            scale=1.0 / math.sqrt(d)))

    # -------------------------------------------------------------- small in-place ops
    def bias_add(self, matrix: Buffer, bias: Buffer, numel: int, dim: int) -> Buffer:
        """out[i] = matrix[i] + bias[i % dim]."""
        op = "bias_add"
        n, d = self._size(numel, "numel", op, positive=False), self._size(dim, "dim", op)
        tm = self._need(matrix, n, "matrix", "numel", op)
        tb = self._need(bias, d, "bias", "dim", op)
        if n % d:       # (the spec's any numel: the bias wraps around mid-row)
            return self._wrap(self._run(K.BIAS_ADD_FLAT, m=tm, b=tb, dim=d))
        return self._wrap(self._run(K.BIAS_ADD, m=_reshape(tm, (n // d, d)), b=tb))

    def add_assign(self, dst: Buffer, src: Buffer) -> None:
        """dst[i] += src[i] (dst is rebound to the sum, on the device)."""
        op = "add_assign"
        td = self._t(dst, "dst", op, "f32")
        ts = self._need(src, td.size, "src", "len(dst)", op)
        if td.size:
            dst.tensor = self._wrap(self._run(K.ADD, a=td, b=ts)).tensor

    def zero_buffer(self, buf: Buffer) -> None:
        """Every element of `buf` set to 0."""
        t = self._t(buf, "buf", "zero_buffer", "f32")
        if t.size:
            buf.tensor = self._wrap(self._run(K.ZERO, n=t.size)).tensor

    def adamw_step(self, param: Buffer, grad: Buffer, m: Buffer, v: Buffer, lr: float,
                   beta1: float, beta2: float, eps: float, weight_decay: float,
                   step_t: int) -> None:
        """One AdamW step (decoupled weight decay, bias correction for step `step_t`, from
        1): `param`, `m` and `v` are rebound to their new values, on the device."""
        op = "adamw_step"
        tp = self._t(param, "param", op, "f32")
        n = tp.size
        tg = self._need(grad, n, "grad", "len(param)", op)
        tm = self._need(m, n, "m", "len(param)", op)
        tv = self._need(v, n, "v", "len(param)", op)
        t = self._size(step_t, "step_t", op)
        # the trait takes them as three `&mut` borrows: one buffer given twice would end up
        # holding only the last of the values written to it
        if len({id(param), id(m), id(v)}) < 3:
            raise ZynMLTypeError(f"{op}(): `param`, `m` and `v` are updated in place and must "
                                 "be three different buffers")
        # the ranges torch.optim.AdamW takes: beta1 = 1 made every value NaN (bias
        # correction 1 - beta1^t = 0)
        lr, eps, weight_decay = (self._number(v, w, op) for v, w in (
            (lr, "lr"), (eps, "eps"), (weight_decay, "weight_decay")))
        b1, b2 = (self._number(v, w, op, below_one=True) for v, w in ((beta1, "beta1"),
                                                                     (beta2, "beta2")))
        if n == 0:
            return
        p_new, m_new, v_new = self._run(
            K.ADAMW, p=tp, g=tg, m=tm, v=tv, beta1=b1, beta2=b2, one_b1=1.0 - b1,
            one_b2=1.0 - b2, eps=eps, decay=1.0 - lr * weight_decay,
            step_size=lr / (1.0 - b1 ** t), sqrt_bc2=math.sqrt(1.0 - b2 ** t))
        param.tensor, m.tensor, v.tensor = p_new, m_new, v_new


_DEVICES: dict = {}
# (threads asking first for one id each made a Device of their own: the interface's memory
# counts and budget were split between objects meant to be one)
_DEVICES_LOCK = threading.Lock()


def device(device_id: str = "auto") -> Device:
    """The compute-device interface on `device_id` (one object per id)."""
    from ..backends.registry import best_device_id
    if not isinstance(device_id, str):
        raise ZynMLTypeError(f"a device id is a string like \"cpu\" or \"cuda:0\", not "
                             f"{device_id!r}")
    key = best_device_id() if device_id == "auto" else device_id
    dev = _DEVICES.get(key)
    if dev is None:
        with _DEVICES_LOCK:
            dev = _DEVICES.get(key)
            if dev is None:
                dev = _DEVICES[key] = Device(key)
    return dev
