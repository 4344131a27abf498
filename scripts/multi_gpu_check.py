#!/usr/bin/env python3
"""Checks of `@device([...]) @parallel(data|model)` on the GPUs of one host.

    python scripts/multi_gpu_check.py                       # cuda:0 + cuda:1
    python scripts/multi_gpu_check.py --devices cpu,cpu:native --quick   # a dry run anywhere

Each against the same block on the first device alone: the collectives of the device group
(NCCL between CUDA devices) with uneven parts and several dtypes; every kernel type
(elementwise, matmul, batched matmul, softmax rows, reductions) split with @parallel(data),
@parallel(model) and the contraction split, sizes that do not divide evenly; a sharded result
feeding the next block in place; a transformer feed-forward chain kept sharded; the
data-parallel TinyGPT training step (zynbook.nn.DataParallel, gradients all-reduced); a local
Dask cluster. The timings are bench/bench_multi_gpu.py's (which uses the helpers here);
scripts/multi_gpu_check.sh runs the tests, these checks and the bench.

Every check runs in its own try/except and prints its error; a watchdog ends the script
before 8 minutes. Results are printed and written as JSON (--json, default
$OUT/multi_gpu.json or bench/results/multi_gpu.json).
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _bootstrap():
    """On a GPU machine without internet, the pure-Python dependencies come as wheels in
    .whl/ (scripts/gpu_wheels.sh); install them into /tmp/site as scripts/gpu_tests.sh does."""
    try:
        import lark  # noqa: F401
        return
    except ImportError:
        pass
    import glob
    import subprocess
    wheels = sorted(glob.glob(str(ROOT / ".whl" / "*.whl")))
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--no-cache-dir", "--upgrade", "--target", "/tmp/site",
                        *wheels], check=False)
    sys.path.insert(0, "/tmp/site")


_bootstrap()

import numpy as np  # noqa: E402

import zynbook  # noqa: E402
from zynbook.backends.registry import get_device  # noqa: E402
from zynbook.runtime import parallel as zparallel  # noqa: E402
from zynbook.runtime.sharded import ShardedTensor, chunk_bounds, group_for  # noqa: E402

START = time.perf_counter()
BUDGET_S = 450.0            # leave the rest of 8 minutes for start-up and the summary
REPORT: dict = {"checks": [], "machine": {}}


def elapsed() -> float:
    return time.perf_counter() - START


def step(name):
    """Run a check: print PASS/FAIL/SKIP with its time, never let it stop the script."""
    def wrap(fn):
        def run(*args, **kwargs):
            if elapsed() > BUDGET_S:
                print(f"[SKIP] {name}: out of time ({elapsed():.0f} s used)", flush=True)
                REPORT["checks"].append({"name": name, "status": "skipped"})
                return None
            t0 = time.perf_counter()
            try:
                detail = fn(*args, **kwargs)
                status = "PASS"
            except _Skip as skip:
                detail, status = str(skip), "SKIP"
            except Exception as err:        # every failure is printed, the script goes on
                detail = f"{type(err).__name__}: {err}"
                status = "FAIL"
                traceback.print_exc()
            dt = time.perf_counter() - t0
            print(f"[{status}] {name} ({dt:.1f} s){': ' + str(detail) if detail else ''}",
                  flush=True)
            REPORT["checks"].append({"name": name, "status": status.lower(),
                                     "detail": str(detail or ""), "seconds": round(dt, 2)})
            return detail
        return run
    return wrap


class _Skip(Exception):
    pass


# ------------------------------------------------------------------ devices and helpers
def sync(ids):
    for d in dict.fromkeys(ids):
        try:
            get_device(d).synchronize()
        except Exception:
            pass


def on_device(arr, device_id):
    """A tensor of `arr` placed on `device_id` (uncommitted, as a program input)."""
    dev = get_device(device_id)
    from zynbook.runtime.tensor import Tensor
    return Tensor(dev.from_host(np.ascontiguousarray(arr)), dev.id, arr.shape)


def host(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def close(a, b, rtol=1e-4, atol=1e-4, what=""):
    a, b = host(a).astype(np.float64), host(b).astype(np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shapes {a.shape} and {b.shape}")
    err = np.abs(a - b)
    bad = err > atol + rtol * np.abs(b)
    if bad.any():
        raise AssertionError(f"{what}: {int(bad.sum())} of {a.size} differ, max error "
                             f"{err.max():.3g}")
    return float(err.max()) if err.size else 0.0


IDENTITY = {
    1: "for a in 0..n0:\n        out[a] = x[a]",
    2: "for a in 0..n0, b in 0..n1:\n        out[a, b] = x[a, b]",
    3: "for a in 0..n0, b in 0..n1, c in 0..n2:\n        out[a, b, c] = x[a, b, c]",
}


def shard(arr, devices, mode="data"):
    """`arr` cut across `devices` as @parallel(mode) cuts an identity kernel: axis 0 for
    data, the last axis for model. Comes back a ShardedTensor living on the devices."""
    src = (f"compute(x) @device(devs) @parallel({mode}) {{\n    @kernel elementwise\n    "
           f"{IDENTITY[arr.ndim]}\n}}")
    out = zynbook.Session().run(src, x=on_device(arr, devices[0]), devs=list(devices))
    assert isinstance(out, ShardedTensor), type(out)
    return out


# ------------------------------------------------------------------ kernels
MATMUL = """compute(A, B) @device(devs) @parallel({mode}) {{
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}}"""

BMM = """compute(A, B) @device(devs) @parallel({mode}) {{
    @kernel batched_matmul
    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[b, i, k] * B[b, k, j]
        out[b, i, j] = sum
}}"""

KERNELS = {
    "elementwise": ("""compute(x, w) @device(devs) @parallel({mode}) {{
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = x[b, f] * w[f] + 1.0
}}""", lambda r: dict(x=r((1001, 77)), w=r((77,)))),
    "matmul": (MATMUL, lambda r: dict(A=r((301, 129)), B=r((129, 257)))),
    "batched_matmul": (BMM, lambda r: dict(A=r((9, 65, 33)), B=r((9, 33, 47)))),
    "softmax_rows": ("""compute(x) @device(devs) @parallel({mode}) {{
    @kernel fused
    for b in 0..batch:
        var m = -inf
        for i in 0..n:
            m = max(m, x[b, i])
        var s = 0.0
        for i in 0..n:
            s += exp(x[b, i] - m)
        for i in 0..n:
            out[b, i] = exp(x[b, i] - m) / s
}}""", lambda r: dict(x=r((333, 129)))),
    "reduce_sum": ("""compute(data) @device(devs) @parallel({mode}) {{
    @kernel reduce(+)
    for i in 0..len:
        yield data[i]
}}""", lambda r: dict(data=r((100003,)))),
    "reduce_max": ("""compute(data) @device(devs) @parallel({mode}) {{
    @kernel reduce(max)
    for i in 0..len:
        yield data[i]
}}""", lambda r: dict(data=r((100003,)))),
    "row_sums": ("""compute(matrix) @device(devs) @parallel({mode}) {{
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}}""", lambda r: dict(matrix=r((513, 257)))),
    "col_max": ("""compute(matrix) @device(devs) @parallel({mode}) {{
    @kernel reduce(max, axis=0)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}}""", lambda r: dict(matrix=r((513, 257)))),
}

BLOCK = """let h = compute(x, w1) @device(devs) @parallel(data) {
    @kernel matmul
    for i in 0..T, j in 0..F:
        var sum = 0.0
        for k in 0..H:
            sum += x[i, k] * w1[k, j]
        out[i, j] = sum
}
let a = compute(h) @device(devs) @parallel(data) {
    @kernel elementwise
    for i in 0..T2, j in 0..F2:
        out[i, j] = gelu(h[i, j])
}
let y = compute(a, w2) @device(devs) @parallel(data) {
    @kernel matmul
    for i in 0..T3, j in 0..H2:
        var sum = 0.0
        for k in 0..F3:
            sum += a[i, k] * w2[k, j]
        out[i, j] = sum
}
let n = compute(y, x, g) @device(devs) @parallel(data) {
    @kernel fused
    for r in 0..T4:
        var ss = 0.0
        for c in 0..H3:
            ss += (y[r, c] + x[r, c]) * (y[r, c] + x[r, c])
        let scale = rsqrt(ss / H3 + 0.00001)
        for c in 0..H3:
            out[r, c] = (y[r, c] + x[r, c]) * scale * g[c]
}
n"""


def rand(seed):
    rng = np.random.default_rng(seed)
    return lambda shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)


# ------------------------------------------------------------------ correctness
@step("devices")
def check_devices(ids):
    listed = {d["id"]: d for d in zynbook.compute_devices()}
    missing = [d for d in ids if d not in listed]
    if missing:
        raise AssertionError(f"not present: {missing}; present: {sorted(listed)}")
    names = ", ".join(f"{d} = {listed[d].get('name')}" for d in dict.fromkeys(ids))
    group = group_for([get_device(d) for d in ids])
    REPORT["machine"].update(devices={d: listed[d] for d in dict.fromkeys(ids)},
                             collectives=group.kind)
    extra = ""
    if group.kind == "nccl":
        try:
            from cupy.cuda import nccl
            extra = f", NCCL {nccl.get_version()}"
        except Exception:
            pass
    return f"{names}; collectives: {group.kind}{extra}"


@step("collectives (all-reduce, reduce-scatter, all-gather; uneven parts)")
def check_collectives(ids):
    devs = [get_device(d) for d in ids]
    group = group_for(devs)
    n = len(devs)
    r = np.random.default_rng(1)
    done = []
    for dtype in ("float32", "float64", "int32", "float16"):
        parts = [(r.standard_normal((7, 5)) * 4).astype(dtype) for _ in devs]
        on = [d.from_host(p) for d, p in zip(devs, parts)]
        total = sum(p.astype(np.float64) for p in parts)
        tol = 1e-2 if dtype == "float16" else 1e-5
        for k, got in enumerate(group.all_reduce(on, "+")):
            close(devs[k].to_host(got), total, rtol=tol, atol=tol, what=f"all_reduce {dtype}")
        mx = np.maximum.reduce(parts)
        for k, got in enumerate(group.all_reduce(on, "max")):
            close(devs[k].to_host(got), mx, rtol=0, atol=0, what=f"all_reduce max {dtype}")
        for axis, length in ((0, 7), (1, 5)):
            bounds = chunk_bounds(length, n)
            for k, got in enumerate(group.reduce_scatter(on, "+", axis, bounds)):
                lo, hi = bounds[k]
                want = total[lo:hi] if axis == 0 else total[:, lo:hi]
                close(devs[k].to_host(got), want, rtol=tol, atol=tol,
                      what=f"reduce_scatter axis {axis} {dtype}")
        bounds = chunk_bounds(7, n)
        shards = [d.from_host(np.ascontiguousarray(parts[0][lo:hi]))
                  for d, (lo, hi) in zip(devs, bounds)]
        for k, got in enumerate(group.all_gather(shards, 0)):
            close(devs[k].to_host(got), parts[0], rtol=0, atol=0, what=f"all_gather {dtype}")
        done.append(dtype)
    return f"{group.kind}: {', '.join(done)}"


def _placed_on(out, ids):
    """That a sharded result's shards live on the devices they name."""
    if not isinstance(out, ShardedTensor):
        return
    for dev, arr, _ in out.shards:
        if dev.startswith("cuda:"):
            assert type(arr).__module__.startswith("cupy"), type(arr)
            assert arr.device.id == int(dev.split(":")[1]), (dev, arr.device.id)
    assert set(out.devices) <= set(ids)


@step("every kernel type split vs one device (data, model, contraction)")
def check_kernels(ids):
    rows = []
    for name, (src, make) in KERNELS.items():
        inputs = make(rand(2))
        for mode in ("data", "model"):
            one = zynbook.run(src.format(mode=mode), devs=[ids[0]], **inputs)
            s = zynbook.Session()
            out = s.run(src.format(mode=mode), devs=list(ids), **inputs)
            _placed_on(out, ids)
            err = close(out, one, rtol=2e-4, atol=2e-4, what=f"{name} {mode}")
            ran = sorted({launch.device for launch in s.launches})
            assert ran == sorted(set(ids)), ran
            rows.append(f"{name}/{mode} {err:.1e}")
    inputs = KERNELS["matmul"][1](rand(3))
    one = zynbook.run(MATMUL.format(mode="model"), devs=[ids[0]], **inputs)
    out = zynbook.run('config { model_split: "contraction" }\n' + MATMUL.format(mode="model"),
                      devs=list(ids), **inputs)
    _placed_on(out, ids)
    rows.append(f"matmul/contraction {close(out, one, what='contraction'):.1e}")
    return "; ".join(rows)


@step("a sharded result feeds the next block in place")
def check_chain(ids):
    x, w = rand(4)((1001, 64)), rand(5)((64,))
    src = KERNELS["elementwise"][0].format(mode="data")
    s = zynbook.Session()
    y = s.run(src, x=x, w=w, devs=list(ids))
    assert isinstance(y, ShardedTensor)
    seen = []
    original = zparallel.input_parts

    def spy(t, axis, work, ids=None):
        parts = original(t, axis, work, ids)
        seen.append((t, parts))
        return parts
    zparallel.input_parts = spy
    try:
        z = s.run("""compute(y) @device(devs) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] * 2.0
}""", y=y, devs=list(ids))
    finally:
        zparallel.input_parts = original
    close(z, (x * w + 1.0) * 2.0, rtol=1e-5, atol=1e-5, what="chain")
    [(given, parts)] = seen
    assert given is y
    same = [p.data is a for p, (_, a, _) in zip(parts, y.shards)]
    assert all(same), same
    gathered = y.gather()
    close(gathered, x * w + 1.0, rtol=1e-5, atol=1e-5, what="gather")
    return f"{y.summary()}; gathered on {gathered.device}"


@step("transformer block chain (4 kernels kept sharded) vs one device")
def check_block(ids, quick):
    t, hdim, f = (192, 32, 96) if quick else (1031, 256, 1024)
    r = rand(6)
    env = dict(x=r((t, hdim)), w1=r((hdim, f)) * 0.1, w2=r((f, hdim)) * 0.1,
               g=r((hdim,)) + 1.0)
    one = zynbook.run(BLOCK, devs=[ids[0]], **env)
    s = zynbook.Session()
    out = s.run(BLOCK, devs=list(ids), **env)
    _placed_on(out, ids)
    return f"max error {close(out, one, rtol=1e-3, atol=1e-3, what='block'):.1e}"


@step("data-parallel training step (TinyGPT, gradients all-reduced) equals one device")
def check_training(ids, quick):
    from zynbook.nn import DataParallel
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    config = GPTConfig(vocab=61, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn=64,
                       max_seq=64, seed=2)
    batch, seq = (4, 24) if quick else (8, 64)
    tokens = np.random.default_rng(8).integers(1, config.vocab, (batch, seq + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]
    weights = init_weights(config)
    one = TinyGPT(zynbook.device(ids[0]), config, weights)
    group = DataParallel(ids, config, weights)
    times_one, times_group = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        l1 = one.train_batch(x, y)
        one.dev.sync()
        times_one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        l2 = group.train_step(x, y)
        group.sync()
        times_group.append(time.perf_counter() - t0)
        if abs(l1 - l2) > 1e-4 * abs(l1):
            raise AssertionError(f"loss {l2} on the group, {l1} on {ids[0]}")
    worst = 0.0
    for name, buf in one.params.items():
        for r in group.replicas:
            worst = max(worst, close(r.params[name].to_vec(), buf.to_vec(), rtol=1e-3,
                                     atol=1e-4, what=name))
    return (f"3 steps of a batch of {batch} x {seq}: loss {l2:.4f}; weights agree to "
            f"{worst:.1e}; collectives {group.group.kind}; last step "
            f"{times_one[-1] * 1e3:.0f} ms on {ids[0]}, {times_group[-1] * 1e3:.0f} ms on the group")


@step("Dask local cluster on this machine (workers on their best device)")
def check_dask(ids, quick):
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise _Skip("dask[distributed] is not installed here")
    os.environ.setdefault("ZYNBOOK_DASK_WORKERS", "2")
    from zynbook.backends import dask as zdask
    try:
        inputs = KERNELS["matmul"][1](rand(7))
        one = zynbook.run(MATMUL.format(mode="data"), devs=[ids[0]], **inputs)
        s = zynbook.Session()
        out = s.run(MATMUL.format(mode="data").replace("@device(devs)", '@device("dask:local")'),
                    **inputs)
        close(out, one, what="dask")
        client = zdask.client_for("local")
        where = client.run(lambda: __import__(
            "zynbook.backends.dask.worker", fromlist=["x"]).worker_device_id())
        return f"{out.summary()}; worker devices {where}"
    finally:
        zdask.shutdown()


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default="cuda:0,cuda:1",
                    help="the device group (comma-separated ids), default cuda:0,cuda:1")
    ap.add_argument("--quick", action="store_true", help="small sizes (a dry run)")
    ap.add_argument("--json", default=None, help="where to write the figures")
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(470, exit=True)     # never past 8 minutes
    ids = [d.strip() for d in args.devices.split(",") if d.strip()]
    os.environ.setdefault("ZYNBOOK_CACHE_DIR", "/tmp/zynbook-cache")
    REPORT["machine"].update(python=platform.python_version(), numpy=np.__version__,
                             group=ids)
    try:
        import cupy
        REPORT["machine"]["cupy"] = cupy.__version__
    except Exception:
        pass
    print(f"multi-GPU checks on {' + '.join(ids)}", flush=True)
    if check_devices(ids) is None:
        print("the device group is not here; nothing else can run", flush=True)
    else:
        check_collectives(ids)
        check_kernels(ids)
        check_chain(ids)
        check_block(ids, args.quick)
        check_training(ids, args.quick)
        if not args.no_dask:
            check_dask(ids, args.quick)
    out = args.json or os.path.join(os.environ.get("OUT") or str(ROOT / "bench" / "results"),
                                    "multi_gpu.json")
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(REPORT, indent=2, default=str))
        print(f"figures written to {out}", flush=True)
    except Exception as err:
        print(f"could not write {out}: {err}", flush=True)
    print("\nsummary:")
    for c in REPORT["checks"]:
        print(f"  {c['status'].upper():5} {c['name']}")
    print(f"total {elapsed():.0f} s", flush=True)
    failed = [c for c in REPORT["checks"] if c["status"] == "fail"]
    faulthandler.cancel_dump_traceback_later()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
