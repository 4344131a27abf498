"""The kernel library and the compute-device interface against numpy written here (or torch
CPU autograd), on every device present."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import zynbook

from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
RNG = np.random.default_rng(20261216)


def _run_f64(session, src, **inputs):
    """`src` run on `session`; skipped where the device has no f64 (WebGPU through OpenGL)."""
    try:
        return session.run(src, **inputs)
    except zynbook.ZynMLError as err:
        if "shader-f64" in err.message:
            pytest.skip(err.message)
        raise


def _rope(x, base):
    """Interleaved pairs (2d, 2d + 1) of position s turned by s * base^(-2d / head_dim), in f64."""
    seq, hd = x.shape[-2], x.shape[-1]
    angle = np.arange(seq)[:, None] * base ** (-np.arange(0, hd, 2) / hd)
    x0, x1 = x[..., 0::2].astype(np.float64), x[..., 1::2].astype(np.float64)
    out = np.empty(x.shape)
    out[..., 0::2] = x0 * np.cos(angle) - x1 * np.sin(angle)
    out[..., 1::2] = x0 * np.sin(angle) + x1 * np.cos(angle)
    return out


@pytest.mark.parametrize("shape", [(7, 4), (2, 3, 5, 6), (1, 333, 8)])
@pytest.mark.parametrize("device", DEVICES)
def test_rope_of_f64_turns_by_f64_angles(device, shape):
    # rope's cos and sin tables were made from f32 angles whatever x's dtype: an f64 x came
    # back f64 with only f32's digits (5e-6 off at position 332), where gelu, silu and
    # rmsnorm of f64 compute in f64
    x = RNG.standard_normal(shape)
    y = _run_f64(zynbook.Session(device), "rope(x, base=500.0)", x=x)
    assert y.dtype == "f64"
    assert_equals_numpy(y.numpy(), _rope(x, 500.0), 1e-12)
    y = _run_f64(zynbook.Session(device), "rope(x)", x=x)
    assert_equals_numpy(y.numpy(), _rope(x, 10000.0), 1e-12)


@pytest.mark.parametrize("dtype, tol", [("float32", 2e-5), ("float16", 3e-3)])
@pytest.mark.parametrize("device", DEVICES)
def test_rope_of_f32_and_f16_is_unchanged(device, dtype, tol):
    x = RNG.standard_normal((2, 7, 6)).astype(dtype)
    y = zynbook.Session(device).run("rope(x, 300.0)", x=x)
    assert y.dtype == {"float32": "f32", "float16": "f16"}[dtype]
    assert_equals_numpy(y.numpy(), _rope(x, 300.0), tol)


@pytest.mark.parametrize("src, column, what", [
    ("gelu(upload(x))", 6, "gelu(): x"),
    ("silu(upload(x))", 6, "silu(): x"),
    ("rmsnorm(upload(x), w)", 9, "rmsnorm(): x"),
    ("rmsnorm(x, upload(w))", 12, "rmsnorm(): weight"),
    ("rope(upload(x))", 6, "rope(): x"),
    ("sinkhorn(upload(x[0:4, 0:4]))", 10, "sinkhorn(): m"),
])
def test_a_library_kernel_of_a_buffer_says_it_takes_a_tensor(src, column, what):
    # a buffer of the device interface was read as a flat tensor: gelu(buf) gave a tensor
    # where softmax(buf, rows, cols) gives a buffer, and rmsnorm(buf, w) normalised the
    # whole buffer as one row
    from compute_testing import raises
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    err = raises("type", src, 1, column, x=x, w=np.ones(6, np.float32))
    assert err.message.startswith(what + " must be a tensor, not a buffer"), err.message
    assert "download(buf)" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_a_library_kernel_of_a_downloaded_buffer_equals_numpy(device):
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    w = RNG.standard_normal(6).astype(np.float32)
    y = zynbook.Session(device).run("rmsnorm(reshape(download(upload(x)), [4, 6]), w)", x=x, w=w)
    x64 = x.astype(np.float64)
    assert_equals_numpy(y.numpy(), x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w,
                        1e-5)


def _all_get_one(ask):
    """What `ask()` gives four threads that call it at once: one object, asserted."""
    import threading
    start, got = threading.Barrier(4), []

    def run():
        start.wait()
        got.append(ask())
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(d is got[0] for d in got)
    return got[0]


@pytest.mark.parametrize("device", [d for d in DEVICES if d.split(":")[0] in ("vulkan", "gl",
                                                                               "webgpu", "metal",
                                                                               "dx12")])
def test_threads_asking_first_for_a_webgpu_device_share_one(device):
    # the wgpu device was requested without a lock: an @async block's thread and the caller's
    # asking first made two, and upload() wrote a buffer one made through the other's queue
    # (a wgpu validation error on a fresh vulkan:0 the first time a program did so)
    import threading
    from zynbook.backends.registry import get_device
    known = get_device(device)
    fresh = type(known)(known.adapter, known.index, int(known.id.split(":")[1]))
    _all_get_one(lambda: fresh.device)
    x = RNG.standard_normal(7).astype(np.float32)
    np.testing.assert_array_equal(fresh.to_host(fresh.from_host(x)), x)


_ASYNC_THEN_UPLOAD = """import sys
import numpy as np
import zynbook
src = '''let f = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let b = upload(x)
let c = matmul(b, upload(ones([1])), 1000, 1, 1)
let g = compute(x) @async {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
sync()
let y = await f
[y, download(c), await g]
'''
x = np.arange(1000, dtype=np.float32)
y, c, s = zynbook.run(src, device=sys.argv[1], x=x)
np.testing.assert_array_equal(y.numpy(), 2 * x)
np.testing.assert_array_equal(c.numpy(), x)
assert float(s) == float(x.astype(np.float64).sum())
"""


@pytest.mark.parametrize("device", DEVICES)
def test_an_async_block_and_an_upload_in_a_fresh_process_equal_numpy(device, tmp_path):
    import subprocess
    import sys
    script = tmp_path / "first_use.py"
    script.write_text(_ASYNC_THEN_UPLOAD)
    # the child imports this checkout's zynbook, installed or not
    repo = str(pathlib.Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (repo, os.environ.get("PYTHONPATH")) if p))
    run = subprocess.run([sys.executable, str(script), device], capture_output=True, text=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.parametrize("device", DEVICES)
def test_threads_asking_first_for_the_device_interface_share_one(device, monkeypatch):
    # zynbook.device(id) is one object per id; threads asking first each made their own,
    # splitting the interface's memory counts (memory_stats) and budget between them
    import sys
    import threading
    monkeypatch.setattr(sys.modules["zynbook.nn.device"], "_DEVICES", {})
    dev = _all_get_one(lambda: zynbook.device(device))
    x = RNG.standard_normal(12).astype(np.float32)
    w = RNG.standard_normal(12).astype(np.float32)
    before = dev.memory_stats()["live_bytes"]
    a, b = zynbook.device(device).upload(x), dev.upload(w)
    assert dev.memory_stats()["live_bytes"] - before == 96      # both buffers counted here
    assert_equals_numpy(dev.download(dev.matmul(a, b, 3, 4, 3)),
                        (x.reshape(3, 4).astype(np.float64) @ w.reshape(4, 3)).ravel(), 1e-5)
