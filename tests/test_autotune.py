"""Autotuning (zynbook/tuning.py): `@autotune` and `config { autotune: true }` measure the
chosen schedule's candidates on the device, keep the fastest whose result equals the
default's, and record it in the cache's tuning records, which a new process finds and
launches without measuring; a corrupt record is discarded, `ZYNBOOK_AUTOTUNE=0` skips,
the budget stops the search. The kernel library's flash-attention configurations
(schedules/configs.py) and their shared-memory check. CUDA runs on the CuPy stand-in."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cupy_standin  # noqa: E402
from kernel_sources import FLASH_TEMPLATE  # noqa: E402

import zynbook  # noqa: E402
from zynbook import cache as kcache  # noqa: E402
from zynbook import tuning  # noqa: E402
from zynbook.backends.registry import get_device  # noqa: E402
from zynbook.compiler.schedules import configs  # noqa: E402
from zynbook.compiler.schedules.base import Choice  # noqa: E402
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target  # noqa: E402
from zynbook.errors import ZynMLDeviceError, ZynMLNameError, ZynMLTypeError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _native():
    try:
        return get_device("cpu:native")
    except Exception:       # no C++ compiler
        return None


needs_native = pytest.mark.skipif(_native() is None, reason="no C++ compiler for cpu:native")


def flash(device: str, annotations: str = "@autotune", block: int = 16) -> str:
    src = FLASH_TEMPLATE.replace("BLOCK", str(block))
    src = src.replace("@kernel flash_attention", "@kernel flash_attention\n    " + annotations)
    return src.replace("compute(Q, K, V)", f'compute(Q, K, V) @device("{device}")') + "attn\n"


def qkv(seed=0, shape=(1, 2, 64, 16)):
    r = np.random.default_rng(seed)
    return [r.standard_normal(shape).astype(np.float32) for _ in range(3)]


def attention(q, k, v):
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def run_flash(session, src, seed=0):
    q, k, v = qkv(seed)
    out = session.run(src, Q=q, K=k, V=v, seq_len=64, head_dim=16)
    np.testing.assert_allclose(np.asarray(out.numpy()), attention(q, k, v), rtol=1e-4, atol=1e-5)
    return session.launches[-1]


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("zyncache")


@pytest.fixture
def fresh(cache_root, monkeypatch):
    """The module's cache folder (compiled libraries kept, tuning records removed), the
    tuning counters at zero, no tuning variables from the environment."""
    import shutil
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(cache_root))
    for var in ("ZYNBOOK_AUTOTUNE", "ZYNBOOK_TUNE_BUDGET_S"):
        monkeypatch.delenv(var, raising=False)
    shutil.rmtree(cache_root / "tuning", ignore_errors=True)
    for k in tuning.STATS:
        monkeypatch.setitem(tuning.STATS, k, 0)
    return cache_root


def records(root: Path) -> list:
    return sorted((root / "tuning").glob("*.json")) if (root / "tuning").is_dir() else []


# ------------------------------------------------------------------------- cpu:native


@needs_native
def test_autotune_on_cpu_native_picks_a_candidate_and_records_it(fresh):
    launch = run_flash(zynbook.Session(), flash("cpu:native"))
    assert tuning.STATS["searches"] == 1 and tuning.STATS["candidates"] >= 3
    assert launch.geometry["tuning"].startswith("tuned: attention: ")
    assert "candidates" in launch.geometry["tuning"] and " ms, " in launch.geometry["tuning"]
    [path] = records(fresh)
    payload, why = kcache.unpack_entry(path.read_bytes(), _record_key(path))
    assert why is None
    import json
    record = json.loads(payload)
    assert record["schedule"] == "attention" and record["candidates"] >= 3 and record["ms"] > 0


def _record_key(path: Path) -> str:
    """The full key digest an entry's trailer holds (its name is the digest's start)."""
    import json
    data = path.read_bytes()
    n, _ = kcache._TRAILER.unpack_from(data, len(data) - kcache._TRAILER.size)
    end = len(data) - kcache._TRAILER.size
    digest = json.loads(data[end - n:end])["key"]
    assert digest.startswith(path.stem)
    return digest


@needs_native
def test_the_same_session_and_a_new_one_reuse_the_record(fresh):
    run_flash(zynbook.Session(), flash("cpu:native"))
    s = zynbook.Session()
    launch = run_flash(s, flash("cpu:native"))
    assert tuning.STATS["searches"] == 1 and tuning.STATS["from_cache"] == 1
    assert launch.geometry["tuning"].startswith("from the tuning cache: attention: ")
    pytest.importorskip("ipywidgets")
    from zynbook.widgets.inspector import launch_info_html
    assert "tuning=from the tuning cache: attention: " in launch_info_html(
        s.last_kernels[-1], s.launches)


WARM = """
import sys, time
sys.path.insert(0, {tests!r})
import numpy as np, zynbook
from zynbook import tuning
from zynbook.backends.registry import get_device
from test_autotune import flash, qkv
dev = get_device({device!r})
q, k, v = qkv()
t0 = time.perf_counter()
zynbook.run(flash({device!r}), Q=q, K=k, V=v, seq_len=64, head_dim=16)
print(tuning.STATS["searches"], tuning.STATS["from_cache"], dev.cache.misses, dev.cache.builds,
      time.perf_counter() - t0)
"""


def warm_run(root: Path, device: str) -> tuple:
    """(searches, records used, compiles, compiler runs, seconds to the block's result) of
    the tuned flash attention run again in a new process."""
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(root))
    res = subprocess.run([sys.executable, "-c", WARM.format(tests=str(ROOT / "tests"), device=device)],
                         capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=600)
    assert res.returncode == 0, res.stderr
    assert "tuning flash" not in res.stderr
    *counts, seconds = res.stdout.split()
    return tuple(int(c) for c in counts) + (float(seconds),)


@needs_native
def test_a_new_process_launches_the_recorded_winner_without_tuning(fresh):
    run_flash(zynbook.Session(), flash("cpu:native"))
    # no search: the winner alone compiled (found as a library on disk: no compiler run)
    assert warm_run(fresh, "cpu:native")[:4] == (0, 1, 1, 0)


@needs_native
def test_a_corrupt_record_is_discarded_and_the_search_runs_again(fresh):
    run_flash(zynbook.Session(), flash("cpu:native"))
    [path] = records(fresh)
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF                         # the checksum no longer matches
    path.write_bytes(bytes(data))
    discarded = kcache.TUNING.discarded
    run_flash(zynbook.Session(), flash("cpu:native"))
    assert kcache.TUNING.discarded == discarded + 1
    assert tuning.STATS["searches"] == 2 and tuning.STATS["from_cache"] == 0
    [again] = records(fresh)
    assert kcache.unpack_entry(again.read_bytes(), _record_key(again))[1] is None


@needs_native
def test_autotune_0_runs_the_defaults_without_measuring(fresh, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_AUTOTUNE", "0")
    launch = run_flash(zynbook.Session(), flash("cpu:native"))
    assert tuning.STATS == {"searches": 0, "from_cache": 0, "candidates": 0}
    assert "tuning" not in launch.geometry and records(fresh) == []


@needs_native
def test_the_budget_stops_the_search_after_the_default(fresh):
    src = "config { tune_budget: 0.000001 }\n" + flash("cpu:native")
    launch = run_flash(zynbook.Session(), src)
    assert tuning.STATS["candidates"] == 1
    assert "1 candidates" in launch.geometry["tuning"] and "skipped" in launch.geometry["tuning"]


@needs_native
def test_the_budget_variable_and_config_autotune(fresh, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_TUNE_BUDGET_S", "0.000001")
    src = "config { autotune: true }\n" + flash("cpu:native", annotations="")
    run_flash(zynbook.Session(), src)
    assert tuning.STATS["searches"] == 1 and tuning.STATS["candidates"] == 1


def test_config_keys_are_checked():
    with pytest.raises(ZynMLTypeError, match="autotune takes true or false"):
        zynbook.run("config { autotune: 3 }\n1")
    with pytest.raises(ZynMLTypeError, match="tune_budget takes a positive number"):
        zynbook.run("config { tune_budget: -1 }\n1")
    with pytest.raises(ZynMLTypeError, match="@autotune takes no arguments"):
        zynbook.compile(flash("cpu", annotations="@autotune(3)"))


def test_a_kernel_with_one_candidate_is_not_searched(fresh):
    src = """let y = compute(x) @device("cpu") {
    @kernel elementwise
    @autotune
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""
    np.testing.assert_allclose(zynbook.run(src, x=np.arange(4.0)).numpy(), np.arange(4.0) * 2)
    assert tuning.STATS["searches"] == 0 and records(fresh) == []


# ------------------------------------------------------------------------- WebGPU


REDUCE = """config { tune_budget: 20 }
let total = compute(x) @device("DEVICE") {
    @kernel reduce(+)
    @autotune
    for i in 0..n:
        yield x[i]
}
total
"""


def test_webgpu_tunes_on_its_adapter_and_reuses_the_record(fresh):
    """On an adapter (lavapipe on a machine without a GPU): the reduction's workgroup sizes
    and block counts measured, the record found by the next session."""
    try:
        dev = get_device("webgpu:0")
    except Exception:
        pytest.skip("no WebGPU adapter")
    x = np.random.default_rng(1).standard_normal(100_000).astype(np.float32)
    s = zynbook.Session()
    got = s.run(REDUCE.replace("DEVICE", dev.id), x=x)
    assert got == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-4, abs=1e-3)
    assert tuning.STATS["searches"] == 1 and tuning.STATS["candidates"] >= 2
    assert s.launches[-1].geometry["tuning"].startswith("tuned: reduce: ")
    s = zynbook.Session()
    assert s.run(REDUCE.replace("DEVICE", dev.id), x=x) == got
    assert tuning.STATS["from_cache"] == 1 and tuning.STATS["searches"] == 1
    assert s.launches[-1].geometry["tuning"].startswith("from the tuning cache: reduce: ")
    assert len(records(fresh)) == 1


# ------------------------------------------------------------------------------- CUDA

SCALE = """let y = compute(x) {
    @kernel elementwise
    @autotune
    for i in 0..n:
        out[i] = x[i] * 3.0 + 1.0
}
y"""


@pytest.fixture
def cuda(monkeypatch, fresh):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the CUDA device itself is tuned in test_cuda_gpu.py runs")
    log = cupy_standin.install(monkeypatch)
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice
    registry.get_device("cpu")
    dev = CudaDevice(0)
    monkeypatch.setitem(registry._devices, "cuda:0", dev)
    return sys.modules["cupy"], dev, log


def _gpu():
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        return get_device("cuda:0")
    except Exception:       # CuPy without a GPU
        return None


@pytest.mark.skipif(_gpu() is None, reason="no CUDA GPU")
def test_a_gpu_tunes_attention_and_a_new_process_launches_within_a_second(fresh):
    launch = run_flash(zynbook.Session(), flash("cuda:0"))
    assert tuning.STATS["searches"] == 1 and tuning.STATS["candidates"] >= 2
    print("tuning:", launch.geometry["tuning"])
    searches, used, compiles, builds, seconds = warm_run(fresh, "cuda:0")
    print(f"warm run in a new process: {seconds:.3f} s to the result")
    assert (searches, used, compiles, builds) == (0, 1, 1, 0) and seconds < 1.0


def test_cuda_tunes_with_its_events_and_reuses_the_record(cuda):
    cp, dev, _log = cuda
    x = cp.asarray(np.arange(1000, dtype=np.float32))
    y = zynbook.Session("cuda:0").run(SCALE, x=x)
    np.testing.assert_allclose(y.numpy(), np.arange(1000) * 3.0 + 1.0)
    searched = tuning.STATS["candidates"]
    assert tuning.STATS["searches"] == 1 and searched >= 2 and dev.cache.misses == searched
    s = zynbook.Session("cuda:0")
    s.run(SCALE, x=x)
    assert tuning.STATS["from_cache"] == 1 and dev.cache.misses == searched   # the winner, compiled
    assert s.launches[-1].geometry["tuning"].startswith("from the tuning cache: vector: ")
    assert "0.25 ms" in s.launches[-1].geometry["tuning"]          # the stand-in's event time


TUNED_PIPELINE = """config { autotune: true }
pipeline twice(x: tensor[n]) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * 3.0 + 1.0
    }
    let z = compute(y) {
        @kernel elementwise
        for i in 0..n:
            out[i] = y[i] - 2.0
    }
    return z
"""


def test_tuned_blocks_are_captured_in_a_cuda_graph_once_searched(cuda):
    """The first call searches each block's schedules; later calls launch the winners, and
    a pipeline of them is captured and replayed as a CUDA graph as an untuned one is."""
    cp, _dev, log = cuda
    s = zynbook.Session("cuda:0")
    s.run(TUNED_PIPELINE)
    x = np.arange(1000, dtype=np.float32)
    for _ in range(4):
        got = s.run("twice(x)", x=cp.asarray(x))
        np.testing.assert_allclose(got.numpy(), x * 3.0 - 1.0)
    assert tuning.STATS["searches"] >= 1
    assert s.interpreter.lazy.traces.entries and log.graph_launches
    assert s.interpreter.lazy.traces.last_miss is None

def test_a_candidate_whose_result_differs_or_that_fails_is_skipped(cuda, monkeypatch):
    import json
    cp, dev, _log = cuda
    real = dev.prepare

    def prepare(kernel, sizes, params=None):
        if params is not None and params.params.threads == 128:
            raise RuntimeError("refused")
        plan = real(kernel, sizes, params)
        if params is not None and params.params.threads == 64:
            right = plan.launch
            plan.launch = lambda inputs, scalars, background=False: (
                lambda got: (cp.asarray(np.asarray(got[0]) + 1), got[1]))(
                    right(inputs, scalars, background))
        return plan
    monkeypatch.setattr(dev, "prepare", prepare)
    x = cp.asarray(np.arange(1000, dtype=np.float32))
    s = zynbook.Session("cuda:0")
    np.testing.assert_allclose(s.run(SCALE, x=x).numpy(), np.arange(1000) * 3.0 + 1.0)
    [path] = records(kcache.cache_root())
    record = json.loads(kcache.unpack_entry(path.read_bytes(), _record_key(path))[0])
    why = {desc.split("threads=")[1].split(",")[0]: reason for desc, reason in record["skipped"]}
    assert why["64"] == "its result differs from the default's"
    assert why["128"] == "does not compile or run: refused"
    assert record["params"]["threads"] not in (64, 128)
    assert len(record["skipped"]) == 4           # 64 and 128 threads, one and two vectors each
    assert "skipped 4" in s.launches[-1].geometry["tuning"]


def test_sizes_of_one_bucket_share_a_search_and_another_bucket_searches(cuda):
    cp, _dev, _log = cuda
    for n in (1000, 1020, 400):
        x = cp.asarray(np.arange(n, dtype=np.float32))
        np.testing.assert_allclose(zynbook.Session("cuda:0").run(SCALE, x=x).numpy(),
                                   np.arange(n) * 3.0 + 1.0)
    assert (tuning.STATS["searches"], tuning.STATS["from_cache"]) == (2, 1)


def test_the_record_key_holds_the_device_fingerprint_and_size_bucket(cuda):
    _cp, dev, _log = cuda
    kernel = zynbook.compile(SCALE).kernels[0].kernel
    key = tuning.Tuner(dev, kernel, {"n": 1000, "x_d0": 1000}, 10).key()
    assert dict(key.params)["bucket"] == (("n", 1024), ("x_d0", 1024))
    assert dict(key.params)["schedule"] == "vector"
    text = repr(key.target)
    assert "CuPy stand-in" in text and "sm_90" in text and "nvrtc" in text


STANDIN_RUN = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np, pytest
import cupy_standin
log = cupy_standin.install(pytest.MonkeyPatch())
import zynbook
from zynbook import tuning
from zynbook.backends.registry import get_device
x = sys.modules["cupy"].asarray(np.arange(1000, dtype=np.float32))
y = zynbook.Session("cuda:0").run({src!r}, x=x)
ok = bool(np.allclose(y.numpy(), np.arange(1000) * 3.0 + 1.0))
dev = get_device("cuda:0")
print(json.dumps(dict(ok=ok, searches=tuning.STATS["searches"], used=tuning.STATS["from_cache"],
                      compiles=dev.cache.misses, builds=dev.cache.builds, nvrtc=log.nvrtc,
                      binaries=[b.decode() for b in log.loaded],
                      loaded=[m for m in ("wgpu", "torch", "ipywidgets", "IPython")
                              if m in sys.modules])))
"""


def test_cuda_on_the_standin_a_new_process_launches_the_record_without_tuning(fresh):
    """The CUDA path of a warm run: `cuda:0` found by asking the CUDA backend alone (no wgpu,
    torch or notebook library loaded), the record keyed by the device's fingerprint found,
    the winner's cubin read from the cache and loaded as it is (no NVRTC run at all, not
    even for PTX)."""
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the real CUDA path runs in test_a_gpu_tunes_...")
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(fresh))

    def run():
        script = STANDIN_RUN.format(tests=str(ROOT / "tests"), src=SCALE)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, cwd=str(ROOT), timeout=600)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    first = run()
    assert first["ok"] and first["searches"] == 1 and first["compiles"] >= 2
    assert first["loaded"] == [] and "ptx" not in first["nvrtc"]      # cubins only
    second = run()
    [binary] = second.pop("binaries")
    assert second == dict(ok=True, searches=0, used=1, compiles=1, builds=0, nvrtc=[], loaded=[])
    # what was loaded is the verified payload of one of the cache's cubin entries
    entries = [kcache.unpack_entry(p.read_bytes(), _record_key(p))[0]
               for p in (fresh / "cuda").glob("*.cubin")]
    assert binary.startswith("// stand-in cubin of ") and binary.encode() in entries


# ------------------------------------------------------- the library's configurations


def test_named_configs_and_their_shared_memory():
    assert {n: configs.required_shared_memory(c) for n, c in configs.CONFIGS.items()} == {
        "ampere": 49152, "hopper": 163840, "rdna3": 24576, "apple": 24576, "fallback": 24576}
    assert configs.named_config(cuda_target((8, 0))).name == "ampere"
    assert configs.named_config(cuda_target((8, 9))).name == "hopper"
    assert configs.named_config(cuda_target((9, 0))).name == "hopper"
    assert configs.named_config(cuda_target((7, 5))).name == "fallback"
    assert configs.named_config(metal_target()).name == "apple"
    import dataclasses
    radeon = dataclasses.replace(webgpu_target(limits={"max_compute_workgroup_storage_size": 65536}),
                                 arch="AMD Radeon RX 7900 XTX")
    assert configs.named_config(radeon).name == "rdna3"
    assert configs.architecture(dataclasses.replace(radeon, arch="NVIDIA GeForce RTX 4090")) == "hopper"
    assert configs.architecture(dataclasses.replace(radeon, arch="NVIDIA A100-SXM4-80GB")) == "ampere"
    assert configs.architecture(dataclasses.replace(radeon, arch="Apple M2 Max")) == "apple"
    assert configs.architecture(dataclasses.replace(radeon, arch="llvmpipe (LLVM 15.0.6)")) == "fallback"
    from zynbook.compiler.codegen import wgsl
    assert wgsl.launch_target(wgsl.WGSLOptions(adapter="AMD Radeon RX 7600")).arch == "AMD Radeon RX 7600"
    assert configs.named_config(webgpu_target()) is None          # 16 KiB
    assert configs.named_config(cpu_target()).name == "fallback"


def test_a_config_that_does_not_fit_names_both_numbers():
    with pytest.raises(ZynMLDeviceError) as err:
        configs.validate_config(configs.CONFIGS["hopper"], cuda_target((7, 5)))
    assert "163840 bytes" in str(err.value) and "49152 bytes" in str(err.value)
    configs.validate_config(configs.CONFIGS["hopper"], cuda_target((9, 0)))


@needs_native
def test_a_tile_too_large_for_the_target_is_a_zynml_error_at_the_tile(fresh):
    src = flash("cpu:native", annotations="@tile(block_q=64, block_kv=16384)")
    q, k, v = qkv()
    with pytest.raises(ZynMLDeviceError) as err:
        zynbook.run(src, Q=q, K=k, V=v, seq_len=64, head_dim=16)
    e = err.value
    assert "2101248 bytes" in e.message and "1048576 bytes" in e.message
    assert (e.span.line, e.span.column) == (3, 5)
    assert "^^^" in e.render() and "@tile(block_q=64, block_kv=16384)" in e.render()


def test_the_named_config_and_the_tile_are_candidates_of_attention():
    kernel = zynbook.compile(flash("cpu", annotations="@tile(block_q=8, block_kv=8)")).kernels[0].kernel
    sizes = {d: 64 if d.endswith("_d2") or d == "seq_len" else (16 if d.endswith("_d3") or
             d == "head_dim" else (2 if d.endswith("_d1") or d == "heads" else 1))
             for d in kernel.dims}
    t = tuning.Tuner.__new__(tuning.Tuner)
    t.kernel, t.schedule_sizes, t.target, t.named = kernel, sizes, cuda_target((8, 0)), None
    from zynbook.compiler import schedules
    t.schedule = schedules.chosen(kernel, t.target, sizes)
    got = t._candidates()
    assert got[0] == Choice("attention", t.schedule.default(kernel, t.target, sizes))
    ampere = configs.attention_params(configs.CONFIGS["ampere"], t.target)
    tile = configs.attention_params(configs.hinted_config(kernel, t.target, sizes), t.target)
    assert {Choice("attention", ampere), Choice("attention", tile)} <= set(got[1:3])


# ------------------------------------------------------------------------- progress


def test_the_text_bar_shows_the_candidate_its_time_and_the_best():
    out = io.StringIO()
    bar = tuning.TextProgress("k", "cpu:native", 4, stream=out)
    choice = Choice("attention", configs.attention_params(configs.CONFIGS["fallback"], cpu_target()))
    bar.update(2, choice, 0.002, 0.0015)
    bar.update(3, choice, None, 0.0015, "its result differs from the default's")
    bar.done(choice, 0.0015, 1.25)
    text = out.getvalue()
    assert "2/4: 2 ms · best 1.5 ms · attention: block_q=1, block_kv=32" in text
    assert "3/4: its result differs" in text and "tuned k on cpu:native in 1.2 s" in text


def test_the_notebook_widget_shows_the_same():
    pytest.importorskip("ipywidgets")
    from zynbook.widgets.tuning import TuningProgress
    w = TuningProgress("k", "cuda:0", 3)
    choice = Choice("attention", configs.attention_params(configs.CONFIGS["ampere"], cuda_target()))
    w.update(1, choice, 0.001, 0.001)
    assert w.bar.value == 1 and "1 ms" in w.label.value and "block_q=128" in w.label.value
    w.done(choice, 0.001, 2.0)
    assert w.bar.bar_style == "success" and "tuned in 2.0 s" in w.label.value


def test_unknown_annotation_hint_lists_autotune():
    with pytest.raises(ZynMLNameError, match="@autotune"):
        zynbook.compile(flash("cpu", annotations="@autotun"))


def test_records_are_keyed_with_power_of_two_buckets():
    assert tuning.bucket({"n": 1000, "m": 1024, "k": 1, "z": 0}) == (
        ("k", 1), ("m", 1024), ("n", 1024), ("z", 1))


def test_a_stored_record_that_is_not_an_object_is_discarded(fresh):
    key = kcache.CacheKey("tuning", "0" * 16, params=kcache.parts(x=1))
    kcache.TUNING.store(key, b"[1, 2]")
    assert kcache.load_record(key) is None and not kcache.TUNING.path(key).exists()
    kcache.store_record(key, {"ms": 1.0})
    assert kcache.load_record(key) == {"ms": 1.0}



# ------------------------------------------------------------- config { flash_config }


@needs_native
def test_flash_config_runs_the_named_configuration_without_a_search(fresh):
    launch = run_flash(zynbook.Session(), 'config { flash_config: "apple" }\n'
                       + flash("cpu:native", annotations=""))
    assert launch.geometry["tuning"] == ("library configuration apple (block_q=64, "
                                         "block_kv=64, head_dim=64, half precision)")
    assert tuning.STATS["searches"] == 0 and records(fresh) == []


def test_an_unknown_flash_config_is_a_name_error():
    with pytest.raises(ZynMLNameError, match="flash_config is one of ampere, hopper"):
        zynbook.run('config { flash_config: "volta" }\n1')


def test_a_flash_config_too_large_for_the_adapter_names_both_numbers(fresh):
    try:
        dev = get_device("webgpu:0")
    except Exception:
        pytest.skip("no WebGPU adapter")
    src = 'config { flash_config: "hopper" }\n' + flash(dev.id, annotations="")
    q, k, v = qkv()
    with pytest.raises(ZynMLDeviceError) as err:
        zynbook.run(src, Q=q, K=k, V=v, seq_len=64, head_dim=16)
    e = err.value
    limit = dev.limits.get("max-compute-workgroup-storage-size")
    assert "163840 bytes" in e.message and f"{limit} bytes" in e.message
    assert (e.span.line, e.span.column) == (1, 24) and "^" in e.render()
