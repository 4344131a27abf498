"""One cache for compiled kernels (and tuning records, compiler probes): memory and disk layers.

* **Keys** (`CacheKey`, a frozen dataclass) name everything a compiled artifact depends on:
  the CIR hash, the schedule and render parameters (sizes baked in, options), the target and
  its resolved flags (the real `-march` a compiler picked for `-march=native`, the GPU arch,
  the NVRTC options), the compiler and library versions, ZynBook's version and, for the disk
  layer, the generated source text itself. `digest()` is a sha256 of all of it.
* **Memory layer** (`KernelCache.memo`): loaded artifacts (a mapped library, a CUDA module,
  WebGPU pipelines) keyed by the key without the source text, so a launch does not render
  source again; one build per key even when threads ask at once.
* **Disk layer** (`KernelCache.fetch`): payload bytes under `$ZYNBOOK_CACHE_DIR/<kind>`
  (default `~/.cache/zynbook/<kind>`), one file per entry named by the key's digest. An entry
  is the payload followed by a trailer: a JSON record (format, key digest, payload size,
  sha256 of the payload), the record's length and a magic word. Entries are written to a
  temporary file in the same folder, fsync'ed and moved into place with `os.replace`, so a
  reader sees a whole entry or none. Before anything is used the trailer is parsed, the key
  compared and the checksum verified; a truncated, corrupt, foreign (another key) or
  unreadable entry is discarded and rebuilt, and so is an entry whose verified payload the
  device cannot load.
* **No writable folder**: a folder that cannot be created or written to (read-only, a path
  through a regular file, ...) turns the disk layer off for that folder with one
  `ZynBookCacheWarning`; kernels then run from the memory layer. Never an exception.
* **Native libraries** (`load_library`): the verified payload bytes are written to a private
  file of their own, checked once more against the checksum right before ctypes maps them,
  and the file is removed once mapped. What runs is exactly what was verified, and a cache
  entry replaced on disk later never aliases a library this process has already mapped.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import os
import shutil
import struct
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

FORMAT = 1
MAGIC = b"ZYNCACH1"                     # last 8 bytes of every entry
_TRAILER = struct.Struct("<Q8s")        # record length, magic
_MAX_RECORD = 1 << 16
_STALE_TMP_SECONDS = 3600


class ZynBookCacheWarning(UserWarning):
    """ZynBook's cache could not use its folder and keeps compiled kernels in memory."""


def _zynbook_version() -> str:
    try:
        from . import __version__
        return str(__version__)
    except ImportError:           # during package import
        return "?"


def _freeze(value):
    """A hashable, canonical form of a key part (dicts become sorted pairs)."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(_freeze(v) for v in value))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def parts(**named) -> tuple:
    """Named key parts as a canonical tuple of (name, value) pairs."""
    return _freeze(named)


@dataclass(frozen=True)
class CacheKey:
    """Everything a compiled artifact depends on. Build parts with `parts(...)`."""

    kind: str                       # cache folder: "cpu", "cuda", "tuning", "probes", ...
    cir: str                        # the CIR's stable hash
    params: tuple = ()              # schedule / render parameters: sizes, options
    target: tuple = ()              # target and its resolved flags
    versions: tuple = ()            # compiler and library versions
    source: str = ""                # generated source text ("" for the memory layer's key)
    zynbook: str = field(default_factory=_zynbook_version)

    def with_source(self, source: str) -> "CacheKey":
        return dataclasses.replace(self, source=source)

    def without_source(self) -> "CacheKey":
        return dataclasses.replace(self, source="")

    def record(self) -> dict:
        """The key as JSON-able data (the source text as its sha256)."""
        return {"kind": self.kind, "cir": self.cir, "params": self.params,
                "target": self.target, "versions": self.versions,
                "source_sha256": hashlib.sha256(self.source.encode()).hexdigest(),
                "zynbook": self.zynbook, "format": FORMAT}

    def digest(self) -> str:
        text = json.dumps(self.record(), sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha256(text.encode()).hexdigest()


class EntryUnusable(Exception):
    """Raised by a `use` callback: these verified bytes cannot be loaded by the device."""


# ----------------------------------------------------------------------------- folders


def cache_root() -> Path:
    # `~` expanded: set from Python or a .env file (no shell to expand it), `~/cache` made
    # a folder named `~` in the working directory
    base = os.environ.get("ZYNBOOK_CACHE_DIR") or os.path.join("~", ".cache", "zynbook")
    return Path(os.path.expanduser(base))


_WARNED: set = set()
_SWEPT: set = set()
_FOLDER_LOCK = threading.Lock()


def _warn_memory_only(folder: Path, err: BaseException):
    # once per cache root: its folders (cpu, probes, tuning, ...) fail together
    with _FOLDER_LOCK:
        if str(folder.parent) in _WARNED:
            return
        _WARNED.add(str(folder.parent))
    warnings.warn(f"ZynBook cannot write its kernel cache in {folder} ({err}); compiled "
                  "kernels are kept in memory for this session. Set ZYNBOOK_CACHE_DIR to a "
                  "writable folder to keep them across restarts.", ZynBookCacheWarning,
                  stacklevel=4)


def _sweep(folder: Path):
    """Remove temporary files that a crashed writer left behind (once per folder)."""
    with _FOLDER_LOCK:
        if str(folder) in _SWEPT:
            return
        _SWEPT.add(str(folder))
    now = time.time()
    try:
        for p in folder.iterdir():
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                try:
                    if now - p.stat().st_mtime > _STALE_TMP_SECONDS:
                        p.unlink()
                except OSError:
                    pass
    except OSError:
        pass


def _fsync_dir(folder: Path):
    if os.name != "posix":
        return
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes):
    """Write `data` to `path` whole or not at all: a temporary file in the same folder,
    flushed and fsync'ed, then moved into place. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def pack_entry(key_digest: str, payload: bytes) -> bytes:
    record = json.dumps({"format": FORMAT, "key": key_digest, "size": len(payload),
                         "sha256": hashlib.sha256(payload).hexdigest()},
                        sort_keys=True).encode()
    return payload + record + _TRAILER.pack(len(record), MAGIC)


def unpack_entry(data: bytes, key_digest: str) -> tuple:
    """(payload, None) when `data` is a whole entry of `key_digest` with a matching
    checksum, else (None, why)."""
    if len(data) < _TRAILER.size:
        return None, "truncated"
    n, magic = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if magic != MAGIC:
        return None, "truncated or not an entry"
    if n <= 0 or n > _MAX_RECORD or n > len(data) - _TRAILER.size:
        return None, "corrupt record"
    end = len(data) - _TRAILER.size
    try:
        record = json.loads(data[end - n:end].decode())
    except (UnicodeDecodeError, ValueError):
        return None, "corrupt record"
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return None, "other format"
    if record.get("key") != key_digest:
        return None, "foreign entry"
    payload = data[:end - n]
    if record.get("size") != len(payload):
        return None, "truncated payload"
    if record.get("sha256") != hashlib.sha256(payload).hexdigest():
        return None, "checksum mismatch"
    return payload, None


# ------------------------------------------------------------------------------- cache


class KernelCache:
    """A memory layer (`memo`) and a disk layer (`fetch`) for one kind of artifact.

    `disk=False` keeps only the memory layer (artifacts that cannot be persisted, such as
    WebGPU pipelines or Metal pipeline states). `suffix` names the disk entries' files."""

    def __init__(self, kind: str, suffix: str = ".bin", disk: bool = True):
        self.kind = kind
        self.suffix = suffix
        self.disk = disk
        self._memory: dict = {}
        self._lock = threading.Lock()
        self._key_locks: dict = {}
        self._memory_only: set = set()        # folders found unwritable
        self.hits = 0            # memory layer
        self.misses = 0
        self.disk_hits = 0       # disk layer
        self.disk_misses = 0
        self.builds = 0          # payloads built (compiler runs)
        self.writes = 0          # entries written to disk
        self.discarded = 0       # entries found bad and removed

    # ------------------------------------------------------------------ memory layer

    def __len__(self) -> int:
        return len(self._memory)

    def __contains__(self, key: CacheKey) -> bool:
        return key in self._memory

    def get(self, key: CacheKey):
        return self._memory.get(key)

    def memo(self, key: CacheKey, make: Callable[[], object]):
        """The artifact for `key` from memory, else `make()` (run once per key, even when
        several threads ask at once; nothing is kept when it raises)."""
        hit = self._memory.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            hit = self._memory.get(key)
            if hit is not None:
                self.hits += 1
                return hit
            value = None
            try:
                value = make()
            finally:
                with self._lock:
                    if value is not None:
                        self.misses += 1
                        self._memory[key] = value
                    self._key_locks.pop(key, None)
            return value

    def values(self) -> list:
        return list(self._memory.values())

    # -------------------------------------------------------------------- disk layer

    def folder(self) -> Path:
        return cache_root() / self.kind

    def path(self, key: CacheKey) -> Path:
        return self.folder() / f"{key.digest()[:40]}{self.suffix}"

    def _writable_folder(self) -> Path | None:
        folder = self.folder()
        if not self.disk or str(folder) in self._memory_only:
            return None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if not folder.is_dir():
                raise NotADirectoryError(f"{folder} is not a folder")
        except OSError as err:
            self._to_memory(folder, err)
            return None
        _sweep(folder)
        return folder

    def _to_memory(self, folder: Path, err: BaseException):
        self._memory_only.add(str(folder))
        _warn_memory_only(folder, err)

    def load(self, key: CacheKey) -> bytes | None:
        """The verified payload of `key` on disk, or None (a bad entry is removed)."""
        payload = self._read(key)
        if payload is not None:
            self.disk_hits += 1
        return payload

    def _read(self, key: CacheKey) -> bytes | None:
        if not self.disk or str(self.folder()) in self._memory_only:
            return None
        path = self.path(key)
        try:
            st = path.stat()
            with open(path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, NotADirectoryError):
            self.disk_misses += 1
            return None
        except OSError:
            # unreadable (a folder where the file should be, no permission, ...)
            self.disk_misses += 1
            self._discard(path, None)
            return None
        payload, _why = unpack_entry(data, key.digest())
        if payload is None:
            self.disk_misses += 1
            self._discard(path, (st.st_dev, st.st_ino))
            return None
        return payload

    def _discard(self, path: Path, ident):
        """Remove a bad entry (unless another process has replaced it meanwhile)."""
        self.discarded += 1
        try:
            if ident is not None:
                st = path.stat()
                if (st.st_dev, st.st_ino) != ident:
                    return
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
        except OSError:
            pass            # gone already, or not ours to remove: rebuilt all the same

    def store(self, key: CacheKey, payload: bytes) -> Path | None:
        """Write `payload` as the entry of `key` (atomically); None when the folder is not
        writable (then one warning, and the caller keeps the artifact in memory)."""
        folder = self._writable_folder()
        if folder is None:
            return None
        path = self.path(key)
        try:
            atomic_write(path, pack_entry(key.digest(), payload))
        except OSError as err:
            if isinstance(err, IsADirectoryError) or path.is_dir():
                self._discard(path, None)
                try:
                    atomic_write(path, pack_entry(key.digest(), payload))
                    self.writes += 1
                    return path
                except OSError as err2:
                    err = err2
            self._to_memory(folder, err)
            return None
        self.writes += 1
        return path

    def discard(self, key: CacheKey):
        """Remove the entry of `key` (its verified payload did not load)."""
        if self.disk:
            self._discard(self.path(key), None)

    def fetch(self, key: CacheKey, build: Callable[[], bytes],
              use: Callable[[bytes], object] = lambda b: b):
        """`use(payload)` for the verified payload of `key` from disk, else for a payload
        that `build()` makes, stored once `use` has accepted it. When `use` raises
        `EntryUnusable` on a disk payload, that entry is discarded and rebuilt; on a fresh
        build it propagates (and nothing is stored).
        Returns (use's result, the entry's path or None when kept in memory only)."""
        payload = self._read(key)
        if payload is not None:
            try:
                result = use(payload)
            except EntryUnusable:
                self.discard(key)
            else:
                self.disk_hits += 1
                return result, self.path(key)
        self.builds += 1
        payload = build()
        result = use(payload)
        return result, self.store(key, payload)

    # ------------------------------------------------------------------------ stats

    def stats(self) -> dict:
        return {"kind": self.kind, "entries": len(self._memory), "hits": self.hits,
                "misses": self.misses, "disk_hits": self.disk_hits,
                "disk_misses": self.disk_misses, "builds": self.builds,
                "writes": self.writes, "discarded": self.discarded,
                "memory_only": bool(self._memory_only) or not self.disk}


# ------------------------------------------------------------------ native libraries


def load_library(payload: bytes, folder: Path | None = None, suffix: str = ".so"):
    """Map the shared library whose bytes are `payload` with ctypes.

    The bytes go to a private file (in `folder` when given and usable, else the system's
    temporary folder), whose checksum is verified again right before `ctypes.CDLL` maps it;
    the file is removed once mapped (its name ends in `.tmp`, so a copy that a crash left
    behind is swept later). Raises EntryUnusable when it does not load."""
    want = hashlib.sha256(payload).hexdigest()
    # the last failure's message, not the exception: kept here, its traceback would make a
    # cycle through this frame holding every caller's locals (a launch's lazy values, which
    # the graph then computes as if still read) until the cyclic collector runs
    last = ""
    dirs = ([str(folder)] if folder is not None else []) + [None]
    for d in dirs:
        try:
            fd, name = tempfile.mkstemp(dir=d, prefix=".load-", suffix=f"{suffix}.tmp")
        except OSError as err:
            last = str(err)
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            with open(name, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != want:
                    raise EntryUnusable(f"{name} changed before it was loaded")
            return ctypes.CDLL(name)
        except OSError as err:
            # a folder mounted noexec refuses to map: try the next one
            last = str(err)
        finally:
            try:
                os.unlink(name)
            except OSError:
                pass
    raise EntryUnusable(f"the library does not load: {last}")


# ------------------------------------------------------------------- JSON records

# the winners of `@autotune` searches (zynbook/tuning.py) and what probing a compiler found
# (backends/cpu/native.py): small JSON records, written and verified as every entry is
# (atomic, checksummed, discarded when bad)
TUNING = KernelCache("tuning", suffix=".json")
PROBES = KernelCache("probes", suffix=".json")


def load_json(cache: KernelCache, key: CacheKey,
              valid: Callable[[dict], bool] = lambda record: True) -> dict | None:
    """The JSON record of `key` from `cache`'s disk layer, or None (an entry that is corrupt,
    or whose verified payload is not a JSON object that `valid` accepts, is discarded)."""
    payload = cache.load(key)
    if payload is None:
        return None
    try:
        record = json.loads(payload.decode())
    except (UnicodeDecodeError, ValueError):
        record = None
    if not isinstance(record, dict) or not valid(record):
        cache.discard(key)
        return None
    return record


def store_json(cache: KernelCache, key: CacheKey, record: dict) -> Path | None:
    """Write `record` as the entry of `key`; None when only memory can hold it."""
    return cache.store(key, json.dumps(record, sort_keys=True, default=repr).encode())


def _tuning_record(record: dict) -> bool:
    """Whether a checksummed record has the fields tuning reads, of their types (one written
    otherwise is discarded and searched again, never read into a crash)."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    return isinstance(record.get("params", {}), dict) and \
        all(number(record.get(k, 0)) for k in ("ms", "tune_s", "candidates"))


def load_record(key: CacheKey) -> dict | None:
    """The tuning record of `key` from disk, or None (see load_json)."""
    return load_json(TUNING, key, _tuning_record)


def store_record(key: CacheKey, record: dict) -> Path | None:
    """Write `record` as the tuning entry of `key`; None when only memory can hold it."""
    return store_json(TUNING, key, record)
