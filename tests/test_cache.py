"""The one compiled-kernel cache (zynbook/cache.py): honest keys, atomic checksummed entries,
bad entries discarded and rebuilt, an unwritable folder falling back to memory, and a disk
entry reused by a new process. Kernels run on `cpu:native` and are compared with numpy."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from zynbook import cache as kcache
from zynbook.backends.cpu import native

from compute_testing import float32_normals, lower_block
from kernel_sources import MUL_ADD, ROW_SUMS
from tolerances import assert_close

RNG = np.random.default_rng(11)
randn = float32_normals(RNG)
HAVE_CC = native.find_compiler() is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C/C++ compiler")
TESTS = Path(__file__).resolve().parent


def _key(**changes) -> kcache.CacheKey:
    base = kcache.CacheKey("cpu", "0123abcd", params=kcache.parts(sizes={"len": 8}),
                           target=kcache.parts(flags=["-O3", "-march=native"],
                                               resolved=["-march=znver3"]),
                           versions=kcache.parts(compiler="gcc 12.2"),
                           source="void k() {}", zynbook="0.1.0")
    return dataclasses.replace(base, **changes)


# ----------------------------------------------------------------------------- keys


def test_key_changes_when_any_part_changes():
    base = _key()
    assert base.digest() == _key().digest()
    assert base == _key() and hash(base) == hash(_key())
    changed = {
        "kind": "cuda", "cir": "0123abce",
        "params": kcache.parts(sizes={"len": 9}),
        "target": kcache.parts(flags=["-O3", "-march=native"], resolved=["-march=skylake"]),
        "versions": kcache.parts(compiler="gcc 13.1"),
        "source": "void k() { }", "zynbook": "0.1.1",
    }
    assert set(changed) == {f.name for f in dataclasses.fields(kcache.CacheKey)}
    digests = {base.digest()}
    for name, value in changed.items():
        other = dataclasses.replace(base, **{name: value})
        assert other.digest() != base.digest(), name
        digests.add(other.digest())
    assert len(digests) == len(changed) + 1
    # the memory layer's key has no source; the disk layer's adds it
    assert base.without_source() != base
    assert base.without_source().with_source(base.source) == base


def test_key_parts_are_canonical_and_stable_across_processes():
    a = kcache.parts(sizes={"b": 2, "a": 1}, flags=["-O3"])
    b = kcache.parts(flags=("-O3",), sizes={"a": 1, "b": 2})
    assert a == b
    key = _key(params=a)
    code = ("from zynbook import cache as k; "
            "print(k.CacheKey('cpu', '0123abcd', params=k.parts(sizes={'a': 1, 'b': 2}, "
            "flags=['-O3']), target=k.parts(flags=['-O3', '-march=native'], "
            "resolved=['-march=znver3']), versions=k.parts(compiler='gcc 12.2'), "
            "source='void k() {}', zynbook='0.1.0').digest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(TESTS.parent), timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == key.digest()


@needs_cc
def test_native_key_holds_sizes_resolved_flags_and_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    dev = native.NativeCpuDevice(native.find_compiler())
    k8 = lower_block(MUL_ADD, {"x": randn(8), "y": randn(8)})
    k9 = lower_block(MUL_ADD, {"x": randn(9), "y": randn(9)})
    rows = lower_block(ROW_SUMS, {"matrix": randn(3, 8)})
    key = dev.cache_key(k8[0], k8[2])
    assert key == dev.cache_key(k8[0], dict(k8[2]))
    assert key != dev.cache_key(k9[0], k9[2])                 # sizes
    assert key.cir != dev.cache_key(rows[0], rows[2]).cir      # another kernel
    flags = dev.flags()
    resolved = dev.resolved_flags()
    if "-march=native" in flags:
        # the key names the CPU the compiler really targets, not the word `native`
        assert any((f.startswith("-march=") and f != "-march=native")
                   or f.startswith("-target-cpu") for f in resolved), resolved
    other_cpu = native.NativeCpuDevice(native.find_compiler())
    other_cpu._resolved = resolved + ("-mno-avx512f",)
    assert other_cpu.cache_key(k8[0], k8[2]) != key            # another CPU
    other_cc = native.NativeCpuDevice(native.find_compiler())
    other_cc._version = "c++ (other) 99.0"
    assert other_cc.cache_key(k8[0], k8[2]) != key             # another compiler
    same = native.NativeCpuDevice(native.find_compiler())
    assert same.cache_key(k8[0], k8[2]) == key


# ------------------------------------------------------------------------ disk layer


def test_atomic_write_leaves_a_whole_file_or_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "entry.bin"
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    kcache.atomic_write(path, b"first")
    assert path.read_bytes() == b"first" and synced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.bin"]

    def broken_replace(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        kcache.atomic_write(path, b"second, never seen")
    assert path.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.bin"]   # no temp left


def test_concurrent_writers_and_readers_see_whole_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    cache = kcache.KernelCache("tuning")
    key = _key(kind="tuning")
    payloads = [bytes([n]) * (200_000 + n) for n in range(6)]
    seen, bad = [], []

    def write(p):
        for _ in range(5):
            assert cache.store(key, p) is not None

    def read():
        for _ in range(40):
            try:
                data = cache.path(key).read_bytes()
            except FileNotFoundError:
                continue
            got, why = kcache.unpack_entry(data, key.digest())
            (seen if got is not None else bad).append(why or got[:1])

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
    assert cache.load(key) in payloads
    assert [p.name for p in tmp_path.joinpath("tuning").iterdir()] == [cache.path(key).name]


@pytest.mark.parametrize("damage", ["truncated", "bit-flip", "trailer-flip", "empty",
                                    "foreign", "folder"])
def test_bad_entries_are_discarded(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    cache = kcache.KernelCache("tuning")
    key, other = _key(kind="tuning"), _key(kind="tuning", source="other")
    payload = bytes(range(256)) * 40
    path = cache.store(key, payload)
    assert cache.load(key) == payload
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "bit-flip":
        path.write_bytes(data[:100] + bytes([data[100] ^ 0x10]) + data[101:])
    elif damage == "trailer-flip":
        path.write_bytes(data[:-30] + bytes([data[-30] ^ 0x01]) + data[-29:])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "foreign":
        path.write_bytes(kcache.pack_entry(other.digest(), payload))
    else:
        path.unlink()
        path.mkdir()
    before = cache.discarded
    assert cache.load(key) is None
    assert cache.discarded == before + 1 and not path.exists()
    built = []
    got, where = cache.fetch(key, lambda: built.append(1) or payload)
    assert got == payload and built == [1] and where == path
    assert cache.load(key) == payload


def test_fetch_stores_only_what_the_device_accepts(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    cache = kcache.KernelCache("tuning")
    key = _key(kind="tuning")

    def use(payload):
        if not payload.startswith(b"ok"):
            raise kcache.EntryUnusable("refused")
        return payload.upper()
    # a fresh build the device refuses: the error propagates, nothing is stored
    with pytest.raises(kcache.EntryUnusable):
        cache.fetch(key, lambda: b"bad build", use)
    assert not cache.path(key).exists() and cache.writes == 0
    # a verified entry the device refuses: discarded and rebuilt
    cache.store(key, b"verified but refused")
    got, path = cache.fetch(key, lambda: b"ok, rebuilt", use)
    assert got == b"OK, REBUILT" and cache.discarded == 1 and cache.disk_hits == 0
    assert cache.load(key) == b"ok, rebuilt"
    got, _ = cache.fetch(key, lambda: pytest.fail("built again"), use)
    assert got == b"OK, REBUILT" and cache.disk_hits == 2


# --------------------------------------------------------------- cpu:native entries


def _native(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    return native.NativeCpuDevice(native.find_compiler())


def _mul_add(n):
    x, y = randn(n), randn(n)
    return lower_block(MUL_ADD, {"x": x, "y": y}), x.astype(np.float64) * y + 1.0


@needs_cc
@pytest.mark.parametrize("damage", ["truncated", "bit-flip", "foreign", "not-a-library"])
def test_damaged_native_library_is_discarded_and_rebuilt(tmp_path, monkeypatch, damage):
    (k, ins, sz, sc), want = _mul_add(301)
    first = _native(tmp_path, monkeypatch)
    got, _ = first.launch(k, ins, sz, sc)
    assert_close(got, want, "f32", "elementwise")
    path = first.compile(k, sz).path
    assert path is not None and path.parent == tmp_path / "cpu"
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF"
    full_key = first.cache_key(k, sz).with_source(first.compile(k, sz).program.source)
    if damage == "truncated":
        bad = data[:len(data) // 3]
    elif damage == "bit-flip":
        # a flipped bit in the middle of the code: the checksum no longer matches
        i = len(data) // 2
        bad = data[:i] + bytes([data[i] ^ 0x04]) + data[i + 1:]
    elif damage == "foreign":
        # a whole, valid entry of another kernel under this one's name
        (k2, ins2, sz2, sc2), _ = _mul_add(17)
        bad = first.compile(k2, sz2).path.read_bytes()
    else:
        # a checksummed payload of this key that is not a library: verified, then refused
        bad = kcache.pack_entry(full_key.digest(), b"\x7fELF" + b"\0" * 1000)
    path.unlink()                       # a new file, as another process would leave it
    path.write_bytes(bad)

    fresh = _native(tmp_path, monkeypatch)
    again, _ = fresh.launch(k, ins, sz, sc)
    assert_close(again, want, "f32", "elementwise")
    np.testing.assert_array_equal(again, got)
    stats = fresh.cache.stats()
    assert stats["discarded"] == 1 and stats["builds"] == 1 and stats["writes"] == 1
    rebuilt = path.read_bytes()
    assert rebuilt != bad and rebuilt[:4] == b"\x7fELF"
    assert kcache.unpack_entry(rebuilt, full_key.digest())[0] is not None
    # and the rebuilt entry is used as it is by the next device
    third = _native(tmp_path, monkeypatch)
    np.testing.assert_array_equal(third.launch(k, ins, sz, sc)[0], got)
    assert third.cache.stats()["disk_hits"] == 1 and third.cache.stats()["builds"] == 0


@needs_cc
def test_library_is_loaded_from_verified_bytes(tmp_path, monkeypatch):
    (k, ins, sz, sc), want = _mul_add(64)
    dev = _native(tmp_path, monkeypatch)
    dev.flags()                                 # the compiler's probes load libraries too
    loaded = []
    real = kcache.ctypes.CDLL

    def cdll(name, *a, **kw):
        loaded.append((name, Path(name).read_bytes()))
        return real(name, *a, **kw)
    monkeypatch.setattr(kcache.ctypes, "CDLL", cdll)
    got, _ = dev.launch(k, ins, sz, sc)
    assert_close(got, want, "f32", "elementwise")
    entry = dev.compile(k, sz).path
    payload = dev.cache.load(dev.cache_key(k, sz).with_source(dev.compile(k, sz).program.source))
    assert len(loaded) == 1
    name, mapped = loaded[0]
    assert mapped == payload                    # exactly the verified payload, no trailer
    assert Path(name) != entry and not Path(name).exists()     # a private copy, removed


# -------------------------------------------------------------------- no disk at all


def _unwritable_cases(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cases = {"is-a-file": blocker, "parent-is-a-file": blocker / "cache"}
    if os.geteuid() != 0:           # root writes into a 0o500 folder anyway
        ro = tmp_path / "read-only"
        ro.mkdir()
        ro.chmod(0o500)
        cases["read-only"] = ro
    return cases


@needs_cc
@pytest.mark.parametrize("case", ["is-a-file", "parent-is-a-file", "read-only"])
def test_unwritable_folder_warns_once_and_runs_from_memory(tmp_path, monkeypatch, case):
    cases = _unwritable_cases(tmp_path)
    if case not in cases:
        pytest.skip("as root, a 0o500 folder is writable")
    folder = cases[case]
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(folder))
    dev = native.NativeCpuDevice(native.find_compiler())
    (k, ins, sz, sc), want = _mul_add(129)
    matrix = randn(5, 33)
    rows = lower_block(ROW_SUMS, {"matrix": matrix})
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got, _ = dev.launch(k, ins, sz, sc)
            again, _ = dev.launch(k, ins, sz, sc)
            sums, _ = dev.launch(*rows)
    finally:
        if case == "read-only":
            folder.chmod(0o700)
    assert_close(got, want, "f32", "elementwise")
    np.testing.assert_array_equal(again, got)
    assert_close(sums, matrix.astype(np.float64).sum(axis=1), "f32", "reduction")
    ours = [w for w in caught if issubclass(w.category, kcache.ZynBookCacheWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "memory" in str(ours[0].message)
    stats = dev.cache.stats()
    assert stats["memory_only"] and stats["writes"] == 0 and stats["builds"] == 2
    assert stats["discarded"] == 0
    assert stats["hits"] >= 1
    assert dev.compile(k, sz).path is None
    if case != "read-only":
        assert folder.is_file() or not folder.exists()


def test_memory_only_cache_never_touches_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path / "c"))
    cache = kcache.KernelCache("webgpu", disk=False)
    key = _key(kind="webgpu", source="")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.store(key, b"x") is None
        assert cache.load(key) is None
        made = []
        assert cache.memo(key, lambda: made.append(1) or "pipelines") == "pipelines"
        assert cache.memo(key, lambda: made.append(1) or "other") == "pipelines"
    assert made == [1] and cache.misses == 1 and cache.hits == 1 and len(cache) == 1
    assert not (tmp_path / "c").exists()


def test_memo_builds_once_when_threads_ask_together():
    cache = kcache.KernelCache("cpu", disk=False)
    key = _key()
    calls, gate = [], threading.Event()

    def make():
        calls.append(1)
        gate.wait(5)
        return object()

    out = []
    threads = [threading.Thread(target=lambda: out.append(cache.memo(key, make)))
               for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert calls == [1] and len({id(o) for o in out}) == 1
    # a failing build keeps nothing, the next call builds again
    bad = _key(cir="ffff")
    with pytest.raises(RuntimeError):
        cache.memo(bad, lambda: (_ for _ in ()).throw(RuntimeError("no")))
    assert bad not in cache and cache.memo(bad, lambda: "ok") == "ok"


# -------------------------------------------------------------------------- restart


_RESTART = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from compute_testing import lower_block
from kernel_sources import MUL_ADD
from zynbook.backends.cpu import native
x = np.arange(37, dtype=np.float32) / 7
y = np.linspace(-2, 2, 37, dtype=np.float32)
k, ins, sz, sc = lower_block(MUL_ADD, {{"x": x, "y": y}})
dev = native.NativeCpuDevice(native.find_compiler())
out, _ = dev.launch(k, ins, sz, sc)
ok = bool(np.allclose(out, x.astype(np.float64) * y + 1, rtol=1e-5, atol=1e-6))
print(json.dumps(dict(dev.cache.stats(), ok=ok, path=str(dev.compile(k, sz).path))))
"""


@needs_cc
def test_a_new_process_reuses_the_disk_entry(tmp_path):
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(tmp_path / "cache"))
    script = _RESTART.format(tests=str(TESTS))

    def run():
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, cwd=str(TESTS.parent), timeout=600)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    first = run()
    assert first["ok"] and first["builds"] == 1 and first["writes"] == 1
    assert first["disk_hits"] == 0
    second = run()
    assert second["ok"] and second["builds"] == 0 and second["writes"] == 0
    assert second["disk_hits"] == 1 and second["discarded"] == 0
    assert second["path"] == first["path"] and Path(first["path"]).is_file()


# ------------------------------------------------------------ compiler probes


def _no_compiler(monkeypatch):
    """Any run of the compiler (or another program) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a program ran: {args[0] if args else kwargs}")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def _probes(root: Path) -> list:
    return sorted((root / "probes").glob("*.json")) if (root / "probes").is_dir() else []


def _probed(dev) -> tuple:
    return dev.flags(), dev._openmp, dev._libs, dev.resolved_flags(), dev.version()


@needs_cc
def test_a_second_device_reads_the_probe_and_runs_no_compiler(tmp_path, monkeypatch):
    (k, ins, sz, sc), want = _mul_add(203)
    first = _native(tmp_path, monkeypatch)
    got, _ = first.launch(k, ins, sz, sc)            # probes, builds and stores the library
    assert_close(got, want, "f32", "elementwise")
    [entry] = _probes(tmp_path)
    _no_compiler(monkeypatch)
    second = native.NativeCpuDevice(native.find_compiler())
    assert _probed(second) == _probed(first)
    assert second.cache_key(k, sz) == first.cache_key(k, sz)
    again, _ = second.launch(k, ins, sz, sc)         # the library from disk: no compiler
    assert_close(again, want, "f32", "elementwise")
    assert second.cache.stats()["builds"] == 0 and _probes(tmp_path) == [entry]


def _wrapper(folder: Path) -> Path:
    """An executable that runs the system compiler: a compiler of its own identity."""
    real = native.find_compiler()
    path = folder / "zyn-cxx"
    path.write_text("#!/bin/sh\nexec " + " ".join(f"'{w}'" for w in real) + ' "$@"\n')
    path.chmod(0o755)
    return path


def _counting_probes(monkeypatch) -> list:
    runs = []
    real = native.NativeCpuDevice._run_probes
    monkeypatch.setattr(native.NativeCpuDevice, "_run_probes",
                        lambda self: runs.append(self.compiler) or real(self))
    return runs


@needs_cc
@pytest.mark.skipif(os.name != "posix", reason="a shell script as the compiler")
def test_a_changed_compiler_or_cpu_is_probed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path / "cache"))
    cxx = _wrapper(tmp_path)
    runs = _counting_probes(monkeypatch)
    first = native.NativeCpuDevice([str(cxx)])
    flags = first.flags()
    same = native.NativeCpuDevice([str(cxx)])
    assert same.flags() == flags and len(runs) == 1
    key = native.probe_key([str(cxx)])
    st = cxx.stat()
    os.utime(cxx, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))      # an upgrade in place
    assert native.probe_key([str(cxx)]) != key
    upgraded = native.NativeCpuDevice([str(cxx)])
    assert upgraded.flags() == flags and len(runs) == 2
    assert len(_probes(tmp_path / "cache")) == 2
    cpu = dict(native.cpu_model(), **{"model name": "another CPU"})
    monkeypatch.setattr(native, "cpu_model", lambda: cpu)
    elsewhere = native.NativeCpuDevice([str(cxx)])
    assert elsewhere.flags() == flags and len(runs) == 3
    # the kernels built by the re-probed compiler still equal numpy
    (k, ins, sz, sc), want = _mul_add(65)
    assert_close(elsewhere.launch(k, ins, sz, sc)[0], want, "f32", "elementwise")


@needs_cc
@pytest.mark.parametrize("damage", ["bit-flip", "truncated", "not-json", "missing-field"])
def test_a_damaged_probe_is_discarded_and_probed_again(tmp_path, monkeypatch, damage):
    first = _native(tmp_path, monkeypatch)
    want = _probed(first)
    [path] = _probes(tmp_path)
    key = native.probe_key(first.compiler)
    data = path.read_bytes()
    if damage == "bit-flip":
        path.write_bytes(data[:3] + bytes([data[3] ^ 0x20]) + data[4:])
    elif damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "not-json":
        path.write_bytes(kcache.pack_entry(key.digest(), b"{not json"))
    else:
        record = json.loads(kcache.unpack_entry(data, key.digest())[0])
        del record["resolved"]
        path.write_bytes(kcache.pack_entry(key.digest(), json.dumps(record).encode()))
    discarded = kcache.PROBES.discarded
    runs = _counting_probes(monkeypatch)
    again = native.NativeCpuDevice(native.find_compiler())
    assert _probed(again) == want and len(runs) == 1
    assert kcache.PROBES.discarded == discarded + 1
    [path] = _probes(tmp_path)
    assert json.loads(kcache.unpack_entry(path.read_bytes(), key.digest())[0])["flags"] == want[0]


_PROBED_RESTART = """
import json, subprocess, sys
import numpy as np
sys.path.insert(0, {tests!r})
from compute_testing import lower_block
from kernel_sources import MUL_ADD
from zynbook.backends.cpu import native
import platform
def refuse(*args, **kwargs):
    raise RuntimeError("a program ran")
platform.processor()        # the CPU's name, from `uname` (not the compiler)
if {refuse!r}:
    subprocess.run = subprocess.Popen = refuse
x = np.arange(37, dtype=np.float32) / 7
y = np.linspace(-2, 2, 37, dtype=np.float32)
k, ins, sz, sc = lower_block(MUL_ADD, {{"x": x, "y": y}})
dev = native.NativeCpuDevice(native.find_compiler())
out, _ = dev.launch(k, ins, sz, sc)
ok = bool(np.allclose(out, x.astype(np.float64) * y + 1, rtol=1e-5, atol=1e-6))
print(json.dumps(dict(ok=ok, flags=dev.flags(), builds=dev.cache.stats()["builds"])))
"""


@needs_cc
def test_a_new_process_finds_the_probe_and_runs_no_program(tmp_path):
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(tmp_path / "cache"))

    def run(refuse):
        script = _PROBED_RESTART.format(tests=str(TESTS), refuse=refuse)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, cwd=str(TESTS.parent), timeout=600)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    first = run(refuse=False)
    assert first["ok"] and first["builds"] == 1
    second = run(refuse=True)            # no compiler run: the probe from the cache
    assert second["ok"] and second["builds"] == 0 and second["flags"] == first["flags"]


# ------------------------------------------------------------ WebGPU: memory only


def _webgpu_devices():
    try:
        from zynbook.backends.webgpu.device import discover
        return discover()
    except Exception:
        return []


@pytest.mark.webgpu
def test_webgpu_pipelines_live_in_memory_only(tmp_path, monkeypatch):
    devices = _webgpu_devices()
    if not devices:
        pytest.skip("no wgpu adapter")
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path / "c"))
    dev = devices[0]
    x, y = randn(333), randn(333)
    k, ins, sz, sc = lower_block(MUL_ADD, {"x": x, "y": y})
    before = dict(dev.cache.stats())
    got, _ = dev.launch(k, ins, sz, sc)
    assert_close(dev.to_host(got), x.astype(np.float64) * y + 1.0, "f32", "elementwise")
    again, launch = dev.launch(k, ins, sz, sc)
    assert_close(dev.to_host(again), x.astype(np.float64) * y + 1.0, "f32", "elementwise")
    after = dev.cache.stats()
    assert after["hits"] > before["hits"] and after["misses"] <= before["misses"] + 1
    assert after["memory_only"] and after["writes"] == 0 and launch.times.compile == 0.0
    assert not (tmp_path / "c").exists()            # shader modules are never written
    key = dev.cache_key(k, dev.options())
    assert dict(key.versions)["wgpu"] == dev.wgsl_version
    assert dict(key.target)["device"] == dev.id
    if len(devices) > 1:
        other = devices[1]
        assert other.cache_key(k, other.options()) != key


# -------------------------------------------------------------------- CUDA (a GPU)


def _cuda_device():
    from zynbook.backends import cuda
    found = cuda.discover()
    if not found:
        pytest.skip("no CUDA GPU (or no CuPy)")
    from zynbook.backends.cuda.device import CudaDevice
    return CudaDevice


@pytest.mark.gpu
@pytest.mark.parametrize("damage", [None, "truncated", "bit-flip", "foreign", "not-cubin"])
def test_cuda_cubin_entries_are_checked_and_reused(tmp_path, monkeypatch, damage):
    CudaDevice = _cuda_device()
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    (k, ins, sz, sc), want = _mul_add(1000)
    first = CudaDevice(0)
    out, _ = first.launch(k, ins, sz, sc)
    assert_close(first.to_host(out), want, "f32", "elementwise")
    compiled = first.compile(k, sz)
    full = first.cache_key(k, sz).with_source(compiled.program.source)
    assert dict(full.target)["arch"] == f"sm_{first.cc[0]}{first.cc[1]}"
    assert set(dict(full.versions)) == {"nvrtc", "cupy", "driver"}
    assert f"--gpu-architecture=sm_{first.cc[0]}{first.cc[1]}" in dict(full.target)["nvrtc_options"]
    path = first.cache.path(full)
    assert path.parent == tmp_path / "cuda" and path.suffix == ".cubin"
    # the entry is the machine code the driver loaded: an ELF image, no PTX to assemble
    assert kcache.unpack_entry(path.read_bytes(), full.digest())[0] == compiled.cubin
    assert compiled.cubin.startswith(b"\x7fELF")
    assert first.cache.stats()["builds"] == 1
    assert ".entry" in first.generated_source(k, sz)["ptx"]       # the inspector's PTX
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif damage == "bit-flip":
        i = len(data) // 3
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:])
    elif damage == "foreign":
        (k2, _, sz2, _), _ = _mul_add(77)
        c2 = first.compile(k2, sz2)
        other = first.cache.path(first.cache_key(k2, sz2).with_source(c2.program.source))
        path.write_bytes(other.read_bytes())
    elif damage == "not-cubin":
        path.write_bytes(kcache.pack_entry(full.digest(), b"\x7fELF this is not a cubin"))
    fresh = CudaDevice(0)
    again, _ = fresh.launch(k, ins, sz, sc)
    assert_close(fresh.to_host(again), want, "f32", "elementwise")
    stats = fresh.cache.stats()
    if damage is None:
        assert stats["disk_hits"] == 1 and stats["builds"] == 0 and stats["discarded"] == 0
    else:
        assert stats["discarded"] == 1 and stats["builds"] == 1 and stats["writes"] == 1
        assert kcache.unpack_entry(path.read_bytes(), full.digest())[0] is not None


@needs_cc
def test_a_compile_that_does_not_end_at_O3_is_made_again_at_O1(tmp_path, monkeypatch):
    """GCC 13.3 never finished -O3 of one kernel (a running max over tiles of 7) that GCC 12
    compiles in 0.2 s: past native.OPTIMISE_SECONDS the kernel is compiled again at -O1 and
    runs, rather than the cell waiting 10 minutes for a compiler error. Here a compiler that
    hangs at -O3 on kernels (its probes it answers at once)."""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "OPTIMISE_SECONDS", 2)
    real = native.find_compiler()
    slow = tmp_path / "slow-c++"
    slow.write_text("#!/bin/sh\ncase \"$*\" in *-O3*kernel.cpp*) sleep 60;; esac\n"
                    f"exec {' '.join(real)} \"$@\"\n")
    slow.chmod(0o755)
    dev = native.NativeCpuDevice([str(slow)])
    x, y = randn(37), randn(37)
    kernel, ins, sizes, scalars = lower_block(MUL_ADD, {"x": x, "y": y})
    start = time.monotonic()
    out, _ = dev.launch(kernel, ins, sizes, scalars)
    assert time.monotonic() - start < 40
    assert_close(np.asarray(out), x * y + 1.0, "f32", "elementwise")
