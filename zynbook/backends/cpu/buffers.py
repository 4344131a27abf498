"""Output buffers of `cpu:native` launches, kept and handed out again.

Why: a launch's output is a fresh numpy array, and a fresh large array costs about as much
as a simple kernel writing it. glibc takes a block of more than 32 MiB (less, before the
first free of one) straight from the OS: every page is zeroed by the OS and faulted in when
the kernel first writes it, and freeing it unmaps it again. A smaller block comes from the
heap, where `np.zeros` clears it byte by byte on the calling thread. A 40 MB output of an
elementwise kernel spends about as long in page faults as in the loop itself. The pool keeps the
memory of recent outputs and hands an idle one out again: warm pages, nothing to fault in,
nothing to clear where the kernel stores every element.

Safety: a buffer (an `owner`, a uint8 array the pool allocated) is handed out only when
nothing but the pool references it. A result is a view of its owner, and every object that
reaches a result's memory through Python holds a reference to the owner: numpy points every
view (of a view, a slice, a reshape, `np.asarray`) at the array that owns the memory, and a
memoryview, a DLPack capsule, `torch.from_numpy` or a ctypes object made from an array
holds that array. So `sys.getrefcount(owner)` counts them all, and while a result or
anything made from it lives, its owner is not handed out. Weak references to an owner
(reachable as `result.base`) keep it too. A raw address taken with `.ctypes.data` or
`__array_interface__` holds nothing, exactly as for any numpy array, whose memory malloc
hands out again once it is freed. An owner is taken under the pool's lock, and the view is
made before the lock is released, so two threads never take the same idle owner. A kernel
still running in an abandoned worker (runtime/cancel.py) holds its output until it returns.
Where reference counts do not tell (an interpreter without `sys.getrefcount`, or one that
runs without the GIL) the pool hands out fresh arrays only.

Bound: the pool references at most `MAX_ENTRIES` owners of at most `limit` bytes together
(`ZYNBOOK_CPU_POOL_BYTES`, default 256 MiB, at most an eighth of the machine's memory; 0
turns the pool off); the least recently handed out are dropped first. Memory that only the
pool keeps alive (idle owners) is therefore at most `limit`; an owner a result still uses
lives as long as the result would anyway. Outputs smaller than `MIN_BYTES` (which malloc
serves from its heap cheaply) or larger than `limit` are plain numpy arrays. `clear()`
drops every owner.

Owners are allocated with `ALIGN` bytes to spare and results start at a multiple of
`ALIGN` (a cache line: a vector store of a full line touches one line, not two).
"""
from __future__ import annotations

import os
import sys
import threading
import weakref

import numpy as np

MIN_BYTES = 64 << 10
MAX_ENTRIES = 16
ALIGN = 64
DEFAULT_LIMIT = 256 << 20


def _counts_references() -> bool:
    """Whether reference counts tell that nothing else holds an object."""
    if not hasattr(sys, "getrefcount"):
        return False
    gil = getattr(sys, "_is_gil_enabled", None)
    return gil is None or bool(gil())


def default_limit() -> int:
    """`ZYNBOOK_CPU_POOL_BYTES` where set (bytes; 0 turns the pool off), else 256 MiB, at
    most an eighth of physical memory."""
    value = os.environ.get("ZYNBOOK_CPU_POOL_BYTES", "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            pass
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_LIMIT
    return min(DEFAULT_LIMIT, max(0, memory // 8))


def _references(owner) -> int:
    """The reference count of `owner` (called where one variable and the pool's entry hold
    it)."""
    return sys.getrefcount(owner)


def _calibrate() -> int:
    """What `_references` says of an owner referenced as an idle one is where the pool
    looks at it: from its entry and one variable (the interpreter's own counting of
    arguments differs between versions, so it is measured, not assumed)."""
    entry = [1, np.empty(1, np.uint8)]
    owner = entry[1]
    return _references(owner)


_IDLE_REFS = _calibrate() if hasattr(sys, "getrefcount") else 0


class BufferPool:
    """Owners of recent outputs, most recently handed out last (see the module docstring)."""

    def __init__(self, limit: int | None = None):
        self.limit = default_limit() if limit is None else int(limit)
        self._lock = threading.Lock()
        self._entries: list = []        # [nbytes, owner, offset of the aligned start]: least
        #                                 recently handed out first
        self._bytes = 0
        self.enabled = _counts_references()
        self.reused = 0                 # outputs handed out in a kept owner
        self.fresh = 0                  # owners allocated

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes of the owners the pool references."""
        return self._bytes

    def output(self, shape: tuple, dtype, zeroed: bool, nbytes: int | None = None):
        """An array of `shape` and `dtype` (a numpy dtype; `nbytes` its size in bytes, where
        the caller knows it) for a launch to write: zero-filled where `zeroed` (the kernel
        may leave elements unstored), else of unspecified contents."""
        if nbytes is None:
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if not self.enabled or nbytes < MIN_BYTES or nbytes > self.limit:
            return (np.zeros if zeroed else np.empty)(shape, dtype)
        with self._lock:
            entries = self._entries
            for i in range(len(entries) - 1, -1, -1):
                entry = entries[i]
                if entry[0] == nbytes:
                    owner = entry[1]
                    if _references(owner) <= _IDLE_REFS and \
                            not weakref.getweakrefcount(owner):
                        out = np.ndarray(shape, dtype, owner, entry[2])
                        if i != len(entries) - 1:
                            del entries[i]
                            entries.append(entry)
                        self.reused += 1
                        break
                    del owner
            else:
                owner = self._allocate(nbytes + ALIGN, zeroed)
                offset = -owner.ctypes.data % ALIGN
                out = np.ndarray(shape, dtype, owner, offset)
                entries.append([nbytes, owner, offset])
                self._bytes += nbytes
                self.fresh += 1
                del owner
                while self._bytes > self.limit or len(entries) > MAX_ENTRIES:
                    self._bytes -= entries.pop(0)[0]
                return out
        if zeroed:
            out.fill(0)
        return out

    @staticmethod
    def _allocate(nbytes: int, zeroed: bool):
        """A new owner: from calloc where zeroed (a block from the OS is not cleared again),
        else from malloc."""
        return (np.zeros if zeroed else np.empty)(nbytes, np.uint8)

    def clear(self):
        """Drop every owner (those results still use live on with them)."""
        with self._lock:
            self._entries = []
            self._bytes = 0
