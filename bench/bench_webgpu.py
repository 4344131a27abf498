"""WebGPU benchmarks: matmul 4096 f32, softmax, layer norm and attention through ZynML on a
wgpu adapter, beside PyTorch on the same machine where torch is installed.

`ratio` is peer time / WebGPU time (above 1: ZynBook is faster); `vs cuda` is the time of the
same kernel on ZynBook's own CUDA path (cuda:0, CUDA events) over the WebGPU time, where the
machine has CUDA. Times are medians after warm-up; the WebGPU column uses GPU timestamps
(timestamp-query) where the adapter has them. Prints a table and writes JSON (--json PATH).

    python bench/bench_webgpu.py [--device webgpu:0] [--reps 10] [--small] [--json out.json]
                                 [--rows matmul,bmm] [--sweep N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from compute_testing import float32_normals, lower_block  # noqa: E402
from kernel_sources import (ATTENTION, BATCHED_MATMUL, FLASH, LAYER_NORM, MATMUL,  # noqa: E402
                            SOFTMAX_ROWS)

from zynbook.backends.webgpu import discover, get_device  # noqa: E402


def cases(small: bool):
    rng = np.random.default_rng(0)
    r = float32_normals(rng)
    n = 512 if small else 4096
    rows, seq = (64, 512) if small else (4096, 2048)
    b, h, s, d = (1, 2, 128, 64) if small else (2, 12, 512, 64)
    bb, mm = (2, 128) if small else (16, 1024)
    mask = np.ones((s, s), bool)
    return [
        ("matmul", MATMUL, {"A": r(n, n), "B": r(n, n)}, {}, (n, n, n),
         lambda t, a: t["A"] @ t["B"]),
        ("softmax", SOFTMAX_ROWS, {"x": r(rows, seq)}, {}, (rows, seq),
         lambda t, a: a.softmax(t["x"], dim=-1)),
        ("layer_norm", LAYER_NORM, {"x": r(rows, 1024), "gamma": r(1024), "beta": r(1024)},
         {"eps": 1e-5}, (rows, 1024),
         lambda t, a: a.layer_norm(t["x"], (1024,), t["gamma"], t["beta"], 1e-5)),
        ("attention", ATTENTION, {"Q": r(b, h, s, d), "K": r(b, h, s, d), "V": r(b, h, s, d),
                                  "mask": mask}, {}, (b, h, s, d),
         lambda t, a: a.scaled_dot_product_attention(t["Q"], t["K"], t["V"], attn_mask=t["mask"])),
        ("flash_attn", FLASH.replace("BLOCK", "64"),
         {"Q": r(b, h, s, d), "K": r(b, h, s, d), "V": r(b, h, s, d)}, {}, (b, h, s, d),
         lambda t, a: a.scaled_dot_product_attention(t["Q"], t["K"], t["V"])),
        ("bmm", BATCHED_MATMUL, {"A": r(bb, mm, mm), "B": r(bb, mm, mm)}, {}, (bb, mm, mm, mm),
         lambda t, a: t["A"] @ t["B"]),
    ]


def bench_zynbook(dev, kernel, ins, sizes, scalars, reps, **launch_kw):
    """(median kernel seconds, its timer, the schedule) of one lowered block on a ZynBook
    device: WebGPU (GPU timestamps) or our CUDA path (CUDA events), inputs resident."""
    resident = [dev.from_host(a) for a in ins]
    for _ in range(2):
        dev.launch(kernel, resident, sizes, scalars, **launch_kw)
    times = []
    source = ""
    for _ in range(reps):
        _, launch = dev.launch(kernel, resident, sizes, scalars, **launch_kw)
        times.append(launch.times.kernel)
        source = launch.times.source
    program = getattr(dev, "program", None)      # WebGPU's, for its schedule's name
    return statistics.median(times), source, program(kernel, sizes).schedule if program else ""


def sweep(dev, kernel, ins, sizes, scalars, reps, count):
    """Time the first `count` configurations of the schedule the adapter picks for this
    kernel (its default first), each checked against the default's output."""
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen import wgsl
    from zynbook.compiler.schedules.base import Choice
    # the adapter's own limits (its workgroup memory, its invocations), as its programs see them
    target = wgsl.launch_target(dev.specialised(kernel, sizes))
    sched = schedules.chosen(kernel, target, sizes)
    if sched is None:
        return
    resident = [dev.from_host(a) for a in ins]
    want = None
    for params in sched.space(kernel, target, sizes)[:count]:
        choice = Choice(sched.name, params)
        try:
            out, _ = dev.launch(kernel, resident, sizes, scalars, params=choice)
            got = np.asarray(out, np.float64)
            want = got if want is None else want
            err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            times = [dev.launch(kernel, resident, sizes, scalars, keep_on_device=True,
                                params=choice)[1].times.kernel for _ in range(reps + 2)][2:]
        except Exception as e:      # a configuration this adapter refuses
            print(f"  {params.describe()}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        print(f"  {statistics.median(times) * 1e3:8.3f} ms  err {err:.1e}  {params.describe()}",
              flush=True)


def our_cuda():
    """ZynBook's cuda:0 where the machine has it: the same kernels on the same GPU through
    CUDA, the issue's "WebGPU vs our CUDA path" rows."""
    try:
        from zynbook.backends.registry import get_device as zyn_device
        return zyn_device("cuda:0")
    except Exception:
        return None


def bench_torch(fn, arrays, reps):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None, ""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t = {k: torch.from_numpy(v).to(dev) for k, v in arrays.items()}
    for _ in range(2):
        fn(t, F)
    times = []
    for _ in range(reps):
        if dev == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(t, F)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        else:
            import time
            t0 = time.perf_counter()
            fn(t, F)
            times.append(time.perf_counter() - t0)
    return statistics.median(times), f"torch-{dev}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--small", action="store_true", help="small shapes (CPU adapters)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--sweep", type=int, default=0, metavar="N",
                    help="time the first N configurations of each row's schedule, nothing else")
    ap.add_argument("--rows", default="", help="comma-separated ops (default: all)")
    args = ap.parse_args(argv)
    want = set(filter(None, args.rows.split(",")))
    devs = discover()
    if not devs:
        print("no wgpu adapter")
        return 1
    dev = get_device(args.device) if args.device else devs[0]
    cuda = our_cuda()
    rows = []
    for name, src, arrays, scalars, shape, tfn in cases(args.small):
        if want and name not in want:
            continue
        lowered = lower_block(src, arrays, scalars)
        if args.sweep:
            print(f"{name} {list(shape)} on {dev.id}:", flush=True)
            sweep(dev, *lowered, args.reps, args.sweep)
            continue
        ours, source, sched = bench_zynbook(dev, *lowered, args.reps, keep_on_device=True)
        peer, peer_name = bench_torch(tfn, arrays, args.reps)
        ours_cuda = bench_zynbook(cuda, *lowered, args.reps)[0] if cuda else None
        rows.append({"op": name, "device": dev.id, "adapter": dev.name, "dtype": "f32",
                     "shape": list(shape), "schedule": sched, "webgpu_s": ours,
                     "webgpu_timer": source, "peer": peer_name or None, "peer_s": peer,
                     # the project's convention: peer time / our time (> 1: we are faster)
                     "ratio": (peer / ours) if peer and ours else None,
                     "cuda_s": ours_cuda,
                     "vs_cuda": (ours_cuda / ours) if ours_cuda and ours else None})
    if args.sweep:
        return 0
    print(f"{'op':<12}{'device':<12}{'shape':<22}{'webgpu ms':>11}"
          f"{'peer':>14}{'peer ms':>10}{'ratio':>8}{'our cuda ms':>13}{'vs cuda':>9}  schedule")
    for r in rows:
        peer = f"{r['peer_s'] * 1e3:10.3f}" if r["peer_s"] else f"{'-':>10}"
        ratio = f"{r['ratio']:8.2f}" if r["ratio"] else f"{'-':>8}"
        cuda_ms = f"{r['cuda_s'] * 1e3:13.3f}" if r["cuda_s"] else f"{'-':>13}"
        vs = f"{r['vs_cuda']:9.2f}" if r["vs_cuda"] else f"{'-':>9}"
        print(f"{r['op']:<12}{r['device']:<12}{str(r['shape']):<22}"
              f"{r['webgpu_s'] * 1e3:11.3f}{(r['peer'] or '-'):>14}{peer}{ratio}{cuda_ms}{vs}"
              f"  {r['schedule']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
