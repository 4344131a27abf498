"""CPU benchmarks: ZynML kernels on the `cpu` device (the numpy reference executor) and the
`cpu:native` device (compiled C++, where a compiler is present) beside the equivalent numpy
expression on the same machine.

Each row times a whole `session.run` of the compute block (binding, the cached lowering,
the launch and the result) and, separately, the kernel launch alone as the device reports
it; numpy is timed on the same arrays. Medians of repeated runs after warm-up. Prints a table
and writes JSON. `ratio` is numpy time / ZynBook time, as in every benchmark of the project
(above 1: ZynBook is faster). Goals of `cpu:native` (issue 14): elementwise, GELU, softmax
and layer norm >= 1.0; matmul 1024 >= 0.5 (numpy's matmul is a tuned BLAS).

Each side is warmed up and timed in a loop of its own, after a pause (ROW_PAUSE): numpy's
BLAS (OpenBLAS) leaves its worker threads spinning for about a tenth of a second after each
call, and OpenMP's threads spin too, so runs alternating measured each side sharing the
cores with the other's idle threads (on 16 cores `cpu:native`'s 1024 matmul then took
17 ms, its plan falling back to one thread, backends/cpu/native.py, _CONTENDED, against
7 ms in a loop of its own with the same kernel).

    python bench/bench_cpu.py [--reps 7] [--small] [--devices cpu,cpu:native]
                              [--json bench/results/cpu.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import zynbook  # noqa: E402
from compute_testing import float32_normals  # noqa: E402
from kernel_sources import (SOFTMAX_ROWS, SPEC_GELU, SPEC_LAYER_NORM, SPEC_MATMUL,  # noqa: E402
                            SPEC_MUL_ADD, program, unannotated)

def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu(x):
    return x * 0.5 * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


def cases(small: bool):
    rng = np.random.default_rng(0)
    r = float32_normals(rng)
    n = 1_000_000 if small else 10_000_000
    mm = 128 if small else 512
    big = 256 if small else 1024
    rows, cols = (256, 1024) if small else (4096, 1024)
    x, y = r(n), r(n)
    a, b = r(mm, mm), r(mm, mm)
    a2, b2 = r(big, big), r(big, big)
    s = r(rows, cols)
    g, be = r(cols), r(cols)
    return [
        ("elementwise x*y+1", SPEC_MUL_ADD, {"x": x, "y": y}, (n,), lambda: x * y + np.float32(1.0)),
        ("gelu (tanh)", SPEC_GELU, {"x": x}, (n,), lambda: np_gelu(x)),
        ("matmul", program(unannotated(SPEC_MATMUL)), {"A": a, "B": b}, (mm, mm, mm), lambda: a @ b),
        ("matmul", program(unannotated(SPEC_MATMUL)), {"A": a2, "B": b2}, (big, big, big),
         lambda: a2 @ b2),
        ("softmax rows", program(SOFTMAX_ROWS), {"x": s}, (rows, cols), lambda: np_softmax(s)),
        ("layer norm", program(unannotated(SPEC_LAYER_NORM)), {"x": s, "gamma": g, "beta": be, "eps": 1e-5}, (rows, cols),
         lambda: np_layer_norm(s, g, be, np.float32(1e-5))),
    ]


# a pause before each row: the threads of the row before (numpy's BLAS workers spin for
# about 0.1 s after its last matmul) are idle again when the next row starts
ROW_PAUSE = 0.25


def median_times(fns, reps: int, warmup: int = 2) -> list:
    """The median time of each of `fns`, each warmed up and timed on its own, a pause
    between them: runs alternating measured each side's thread pool spinning on the cores
    the other's threads wanted (numpy's BLAS or OpenMP's, both about 2x slower on 16 cores)."""
    out = []
    for fn in fns:
        time.sleep(ROW_PAUSE)
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
        out.append(statistics.median(ts))
    return out


def bench_case(name, src, env, shape, numpy_fn, reps, device="cpu"):
    session = zynbook.Session(device=device)
    result = np.asarray(session.run(src, **env))
    expected = numpy_fn()
    scale = max(1.0, float(np.abs(expected).max()))
    error = float(np.abs(result.astype(np.float64) - expected).max()) / scale
    kernel_times = []

    def zynml_run():
        session.run(src, **env)
        kernel_times.append(session.launches[-1].times.kernel)

    t_zynml, t_numpy = median_times([zynml_run, numpy_fn], reps)
    t_kernel = statistics.median(kernel_times[-reps:])
    return {"name": name, "device": device, "dtype": "f32", "shape": list(shape),
            "peer": f"numpy {np.__version__}", "zynml_s": t_zynml, "zynml_kernel_s": t_kernel,
            "peer_s": t_numpy, "ratio": t_numpy / t_zynml,
            "kernel_ratio": t_numpy / t_kernel, "max_rel_error": error}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="small sizes (a quick check)")
    parser.add_argument("--json", default=str(Path(__file__).resolve().parent / "results" /
                                              "cpu.json"))
    parser.add_argument("--devices", default="cpu,cpu:native",
                        help="comma-separated device ids (those not present are left out)")
    args = parser.parse_args(argv)

    present = {d["id"] for d in zynbook.compute_devices()}
    devices = [d for d in args.devices.split(",") if d in present]
    rows = []
    for case in cases(args.small):
        for dev in devices:
            time.sleep(ROW_PAUSE)
            rows.append(bench_case(*case, reps=args.reps, device=dev))
    header = f"{'kernel':<20} {'device':<11} {'shape':<18} {'zynml run':>11} {'kernel':>11} {'numpy':>11} " \
             f"{'ratio':>7} {'kernel':>7} {'max err':>9}"
    print(f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"numpy {np.__version__}; medians of {args.reps} after warm-up")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['name']:<20} {r['device']:<11} {'x'.join(map(str, r['shape'])):<18} "
              f"{r['zynml_s'] * 1e3:>9.2f}ms {r['zynml_kernel_s'] * 1e3:>9.2f}ms "
              f"{r['peer_s'] * 1e3:>9.2f}ms {r['ratio']:>6.2f}x {r['kernel_ratio']:>6.2f}x "
              f"{r['max_rel_error']:>9.1e}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": {"processor": platform.processor(),
                                           "machine": platform.machine(),
                                           "cores": os.cpu_count(),
                                           "numpy": np.__version__},
                               "reps": args.reps, "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
