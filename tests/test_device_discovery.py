"""Device discovery (zynbook/backends/registry.py): a named device asks only the backends of
its family (`cpu:native` never enumerates WebGPU adapters nor loads CuPy), while `auto`,
`compute_devices()` and an unknown id ask every backend; `metal:N` goes to the native Metal
device before wgpu's Metal adapter whatever was asked first. Results are compared with
numpy where kernels run."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.backends import registry
from zynbook.backends.cpu import native
from zynbook.errors import ZynMLDeviceError

ROOT = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(native.find_compiler() is None, reason="no C/C++ compiler")

CUDA, METAL, WEBGPU, NATIVE = registry._BACKENDS

MATMUL = """
let z = compute(a, b) {
    @kernel matmul
    for i in 0..m, j in 0..n:
        var s = 0.0
        for k in 0..kk:
            s += a[i, k] * b[k, j]
        out[i, j] = s
}
z
"""


class FakeDevice:
    """A device as a backend's discover() returns it (never launched)."""

    def __init__(self, dev_id: str, backend: str, aliases=(), kind: str = "gpu"):
        self.id, self.backend, self.kind = dev_id, backend, kind
        self.aliases = tuple(aliases)
        self.name = f"fake {dev_id}"

    def info(self) -> dict:
        return {"id": self.id, "type": self.kind, "name": self.name, "backend": self.backend}


@pytest.fixture
def asked(monkeypatch):
    """The registry with nothing found yet, and the GPU backends replaced by recorders:
    the list of backends asked, in order. CUDA finds `cuda:0`; Metal `metal:0`; wgpu one
    Vulkan adapter and one Metal adapter. `cpu:native` stays the real one."""
    monkeypatch.setattr(registry, "_devices", None)
    monkeypatch.setattr(registry, "_asked", set())
    calls = []
    found = {
        CUDA: [FakeDevice("cuda:0", "cuda")],
        METAL: [FakeDevice("metal:0", "metal", aliases=("metal:0",))],
        WEBGPU: [FakeDevice("vulkan:0", "vulkan", aliases=("webgpu:0", "vulkan:0")),
                 FakeDevice("metal:0", "metal", aliases=("webgpu:1", "metal:0"))],
    }
    for module, devices in found.items():
        monkeypatch.setattr(importlib.import_module(module), "discover",
                            lambda module=module, devices=devices: calls.append(module) or devices)
    real_native = native.discover
    monkeypatch.setattr(native, "discover", lambda: calls.append(NATIVE) or real_native())
    return calls


@needs_cc
def test_a_session_on_cpu_native_asks_no_gpu_backend(asked):
    a = np.random.default_rng(3).standard_normal((19, 23)).astype(np.float32)
    b = np.random.default_rng(4).standard_normal((23, 17)).astype(np.float32)
    session = zynbook.Session("cpu:native")
    got = np.asarray(session.run(MATMUL, a=a, b=b).numpy())
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert session.launches[-1].device == "cpu:native"
    assert asked == [NATIVE]
    zynbook.Session("cpu:native")
    assert asked == [NATIVE]                    # each backend is asked once
    # listing the devices asks the others, and finds the same cpu:native
    ids = [d["id"] for d in zynbook.compute_devices()]
    assert asked == [NATIVE, CUDA, METAL, WEBGPU]
    assert {"cpu", "cpu:native", "cuda:0", "metal:0", "vulkan:0"} <= set(ids)
    assert registry.get_device("cpu:native") is registry._discover()["cpu:native"]


def test_cpu_asks_nothing_and_each_family_asks_its_own(asked):
    assert registry.get_device("cpu").id == "cpu" and asked == []
    assert registry.get_device("cuda:0").id == "cuda:0" and asked == [CUDA]
    assert registry.get_device("vulkan:0").backend == "vulkan"
    assert asked == [CUDA, METAL, WEBGPU]
    assert registry.get_device("webgpu:0") is registry.get_device("vulkan:0")


@pytest.mark.parametrize("first", ["metal:0", "vulkan:0", "webgpu:1", "auto"])
def test_metal_ids_go_to_the_native_metal_device_whatever_is_asked_first(asked, first):
    registry.get_device(first)
    metal = registry.get_device("metal:0")
    assert metal.aliases == ("metal:0",)            # Metal's own device, not wgpu's adapter
    assert registry.get_device("webgpu:1").aliases == ("webgpu:1", "metal:0")
    assert asked.index(METAL) < asked.index(WEBGPU)


def test_auto_and_an_unknown_id_ask_every_backend(asked):
    assert registry.get_device("auto").id == "cuda:0"
    assert sorted(asked) == sorted([CUDA, METAL, WEBGPU, NATIVE])
    registry.refresh()
    asked.clear()
    with pytest.raises(ZynMLDeviceError, match="no device `tpu:0`.*cuda:0.*vulkan:0"):
        registry.get_device("tpu:0")
    assert sorted(asked) == sorted([CUDA, METAL, WEBGPU, NATIVE])


def test_an_absent_device_of_a_family_names_every_device(asked):
    with pytest.raises(ZynMLDeviceError, match="no device `cuda:3`.*cuda:0.*metal:0"):
        registry.get_device("cuda:3")


_NEW_PROCESS = """
import json, sys
import numpy as np
import zynbook
a = np.arange(12, dtype=np.float32).reshape(3, 4) / 5
b = np.arange(20, dtype=np.float32).reshape(4, 5) / 7
got = np.asarray(zynbook.Session("cpu:native").run({src!r}, a=a, b=b).numpy())
ok = bool(np.allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5))
loaded = [m for m in ("wgpu", "cupy") if m in sys.modules]
zynbook.compute_devices()
print(json.dumps(dict(ok=ok, loaded=loaded, after=[m for m in ("wgpu",) if m in sys.modules])))
"""


# libraries a program may use but `import zynbook` must not load: each costs a new process
# from tenths of a second (CuPy, IPython) to seconds (torch) before its first result
_HEAVY = ("cupy", "torch", "wgpu", "numba", "dask", "distributed", "IPython", "ipykernel",
          "ipywidgets", "pygments", "jinja2", "matplotlib", "scipy")


def test_import_zynbook_loads_no_gpu_array_or_notebook_library():
    script = f"import sys, zynbook; print(sorted(m for m in {_HEAVY!r} if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=str(ROOT), timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@needs_cc
def test_a_new_process_on_cpu_native_loads_no_gpu_library(tmp_path):
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", _NEW_PROCESS.format(src=MATMUL)],
                         capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=600)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["loaded"] == []
    if importlib.util.find_spec("wgpu") is not None:
        assert out["after"] == ["wgpu"]         # listing the devices does enumerate adapters


def test_cuda_discovery_starts_the_driver_on_a_thread_while_cupy_imports(monkeypatch):
    """`cuInit` runs on another thread (it overlaps `import cupy`), once per discovery; with
    CuPy imported already there is nothing to overlap; without a driver nothing fails."""
    import threading
    from zynbook.backends import cuda
    calls, done = [], threading.Event()

    class Driver:
        def __init__(self, name):
            if name == "missing":
                raise OSError("no such library")

        def cuInit(self, flags):
            calls.append((flags, threading.current_thread() is threading.main_thread()))
            done.set()
            return 0

    monkeypatch.setattr(cuda.ctypes, "CDLL", Driver)
    monkeypatch.setitem(cuda._DRIVER, sys.platform, "libcuda")
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    cuda._start_driver()
    assert done.wait(10) and calls == [(0, False)]
    monkeypatch.setitem(sys.modules, "cupy", object())
    cuda._start_driver()
    monkeypatch.delitem(sys.modules, "cupy")
    monkeypatch.setitem(cuda._DRIVER, sys.platform, "missing")
    cuda._start_driver()
    time.sleep(0.2)
    assert calls == [(0, False)]
