"""Fusion across compute blocks: known chains timed fused and unfused on a device.

For each chain: launches per run and the median wall time of one run of the statement
(launches, transfers and host work; after warm-up), fused (`Session.fuse`, the default) and
unfused (`config { fuse: false }`). Prints a table and writes JSON (--json PATH).

    python bench/bench_fusion.py --device cuda:0 [--size 2048] [--reps 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import zynbook  # noqa: E402
from test_fusion import PIPELINES  # noqa: E402

CHAINS = {
    "matmul + bias + gelu + residual": "x |> mm(w) |> bias_gelu_res(b, r)",
    "three elementwise": "x |> scale(2.0) |> add(r) |> act()",
    "elementwise + row softmax": "x |> scale(3.0) |> softmax()",
    "elementwise + sum": "x |> act() |> total()",
}


def _time(session, source: str, reps: int) -> tuple:
    session.run(source)                     # compiles and plans
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        value = session.run(source)
        np.asarray(value)                   # the result on the host
        times.append(time.perf_counter() - start)
    return statistics.median(times), len(session.launches)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n = args.size
    env = {"x": rng.standard_normal((n, n)).astype(np.float32),
           "w": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
           "b": rng.standard_normal(n).astype(np.float32),
           "r": rng.standard_normal((n, n)).astype(np.float32)}
    results = {}
    print(f"{'chain':<34} {'launches':>9} {'fused':>10} {'unfused':>10} {'speed-up':>9}")
    for name, chain in CHAINS.items():
        row = {}
        for fuse in (True, False):
            session = zynbook.Session(args.device)
            session.fuse = fuse
            session.run(PIPELINES, **env)
            row["fused" if fuse else "unfused"] = _time(session, chain + "\n", args.reps)
        (tf, lf), (tu, lu) = row["fused"], row["unfused"]
        print(f"{name:<34} {lf:>4} / {lu:<3} {tf * 1e3:>8.3f}ms {tu * 1e3:>8.3f}ms "
              f"{tu / tf:>8.2f}x")
        results[name] = {"launches_fused": lf, "launches_unfused": lu, "fused_s": tf,
                         "unfused_s": tu}
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "size": n,
                                               "chains": results}, indent=2))
    return results


if __name__ == "__main__":
    main()
