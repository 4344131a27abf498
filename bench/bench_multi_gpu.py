#!/usr/bin/env python3
"""Scaling of `@device([...]) @parallel(data|model)` over the GPUs of one host: each program
timed on the group's first device alone and split over the whole group.

    python bench/bench_multi_gpu.py --json $OUT/bench_multi_gpu.json     # cuda:0 + cuda:1
    python bench/bench_multi_gpu.py --devices cpu,cpu --quick             # a dry run anywhere

Rows (f32; --quick shrinks every size):
* data-parallel batched matmul, 64 x 1024^3: A and B sharded by the batch, the result too;
* the spec's transformer block (examples/transformer_block.zyn: QKV projection, flash
  attention, output projection, residual + layer norm, GELU feed-forward, residual + layer
  norm), batch 8, seq 512, hidden 768, 12 heads, ffn 3072, every block @parallel(data) by the
  batch, the activations sharded from block to block (split and reshape act on the shards);
  the pipeline defined and the weights bound (and replicated) once, each run one call. Over
  the device group a call of the same key replays one CUDA graph per device
  (runtime/traces.py; `replay on` in the row); a second row runs it with
  `config { cuda_graph: false }`, block by block. One device runs its @parallel blocks one
  by one either way (a group of one device launches each block where it is met);
* model-parallel matmul 4096: B cut by columns with the result left sharded, the same with the
  result gathered onto the first device, and the contraction split (A by columns, B by rows)
  with the partial products reduce-scattered (NCCL between GPUs);
* the data-parallel training step of the tiny GPT (zynbook.nn.DataParallel, gradients
  all-reduced) against the one-device batch step.

Timing: after --warm runs, --reps runs, each between synchronized devices, bracketed on every
CUDA device by CUDA events (the program's span on the devices' clocks, the slowest device's
span counted); the host clock where a device has no events (the dry run). Medians. Beside
it, the kernels alone (their own CUDA-event times, per block the slowest device's): what the
efficiency would be with no host time between launches.
Scaling efficiency = time on one / (n x time on n). Each result is checked against the
one-device result. Figures go to --json (default $OUT/bench_multi_gpu.json or
bench/results/bench_multi_gpu.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import multi_gpu_check as mg  # noqa: E402  (installs .whl/ where lark is missing)
import numpy as np  # noqa: E402

import zynbook  # noqa: E402
from zynbook.backends.registry import get_device  # noqa: E402
from zynbook.runtime.sharded import group_for  # noqa: E402

ROWS: list = []


# ------------------------------------------------------------------ timing
class Clock:
    """Times `fn()` over a device group: CUDA events on every CUDA device of the group (the
    span from before the run to after its work, on each device's own clock; the longest
    counts), else the host clock between synchronized devices."""

    def __init__(self, ids):
        self.ids = list(dict.fromkeys(ids))
        self.cuda = [get_device(d) for d in self.ids if d.startswith("cuda:")]
        self.issued: list = []      # per timed run: host seconds until fn() returned

    def time(self, fn):
        """(seconds, host seconds, fn's result)."""
        mg.sync(self.ids)
        events = []
        if self.cuda:
            import cupy as cp
            for dev in self.cuda:
                with dev.cupy_device:
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(cp.cuda.Stream.null)
                events.append((dev, start, end))
        t0 = time.perf_counter()
        out = fn()
        # the host's own time to queue the run: near the whole time, the run is host-bound
        self.issued.append(time.perf_counter() - t0)
        mg.sync(self.ids)
        host = time.perf_counter() - t0
        if not events:
            return host, host, out
        import cupy as cp
        spans = []
        for dev, start, end in events:
            with dev.cupy_device:
                end.record(cp.cuda.Stream.null)
                end.synchronize()
                spans.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
        return max(spans), host, out

    def median(self, fn, reps, warm, kernels=None):
        """(median seconds, median host seconds, the last result, median kernel seconds:
        `kernels()` after each run, None without it)."""
        out = None
        for _ in range(warm):
            out = fn()
        mg.sync(self.ids)
        self.issued = []
        times, hosts, busy = [], [], []
        for _ in range(reps):
            t, h, out = self.time(fn)
            times.append(t)
            hosts.append(h)
            if kernels is not None:
                busy.append(kernels())
        return (statistics.median(times), statistics.median(hosts), out,
                statistics.median(busy) if busy else None)


def kernel_seconds(launches) -> float:
    """The devices' own kernel time of one run: per block the slowest device's launch (the
    devices run a block's chunks at once), summed over the blocks (CUDA events on a GPU)."""
    per_block: dict = {}
    for launch in launches:
        k = launch.times.kernel or 0.0
        per_block[launch.kernel] = max(per_block.get(launch.kernel, 0.0), k)
    return sum(per_block.values())


def row(name, shape, flops, one, many, ids, note=""):
    """Record and print one row: `one`, `many`: (seconds, host seconds, kernel seconds or
    None, host seconds to queue a run or None) on the first device and on the group."""
    n = len(ids)
    (t1, h1, k1, q1), (tn, hn, kn, qn) = one, many
    rec = {"name": name, "shape": shape, "devices": ids, "n": n, "dtype": "f32",
           "one_ms": t1 * 1e3, "many_ms": tn * 1e3, "one_host_ms": h1 * 1e3,
           "many_host_ms": hn * 1e3, "efficiency": t1 / (n * tn) if tn else None,
           "speedup": t1 / tn if tn else None, "note": note}
    if q1 is not None and qn is not None:
        rec.update(one_queue_ms=q1 * 1e3, many_queue_ms=qn * 1e3)
    if k1 and kn:       # the kernels alone: how far the host's time per run is from it
        rec.update(one_kernel_ms=k1 * 1e3, many_kernel_ms=kn * 1e3,
                   efficiency_kernels=k1 / (n * kn))
    if flops:
        rec["one_tflops"] = flops / t1 / 1e12 if t1 else None
        rec["many_tflops"] = flops / tn / 1e12 if tn else None
    ROWS.append(rec)
    print(f"  {name:<40} {shape:<24} 1 dev {t1 * 1e3:9.2f} ms   {n} dev {tn * 1e3:9.2f} ms   "
          f"efficiency {rec['efficiency']:.1%}"
          + (f" (kernels alone {rec['efficiency_kernels']:.1%})" if "efficiency_kernels" in rec
             else "")
          + (f"   {rec['many_tflops']:.1f} TFLOP/s" if flops and rec["many_tflops"] else "")
          + (f"   host queues a run in {rec['one_queue_ms']:.2f} / {rec['many_queue_ms']:.2f} ms"
             if "many_queue_ms" in rec else "")
          + (f"   ({note})" if note else ""), flush=True)
    return rec


def guarded(fn):
    """A row that fails prints its error; the others still run."""
    def run(*args):
        try:
            fn(*args)
        except Exception as err:        # reported, the bench goes on
            traceback.print_exc()
            ROWS.append({"name": fn.__name__, "error": f"{type(err).__name__}: {err}"})
            print(f"  {fn.__name__}: FAILED {type(err).__name__}: {err}", flush=True)
    return run


def timed(clock, session, src, env, reps, warm, after=None):
    def once():
        out = session.run(src, **env)
        return after(out) if after is not None else out
    t, h, out, k = clock.median(once, reps, warm, lambda: kernel_seconds(session.launches))
    return (t, h, k, statistics.median(clock.issued)), out


# ------------------------------------------------------------------ rows
@guarded
def bench_batched_matmul(ids, quick, reps, warm):
    b, m = (8, 96) if quick else (64, 1024)
    r = mg.rand(10)
    a_h, b_h = r((b, m, m)), r((b, m, m))
    src = mg.BMM.format(mode="data")
    one, out1 = timed(Clock(ids[:1]), zynbook.Session(), src,
                      dict(A=mg.on_device(a_h, ids[0]), B=mg.on_device(b_h, ids[0]),
                           devs=ids[:1]), reps, warm)
    many, outn = timed(Clock(ids), zynbook.Session(), src,
                       dict(A=mg.shard(a_h, ids), B=mg.shard(b_h, ids), devs=list(ids)),
                       reps, warm)
    mg.close(outn, out1, rtol=1e-3, atol=1e-3, what="batched matmul")
    row("data-parallel batched matmul", f"{b}x{m}x{m}x{m}", 2.0 * b * m ** 3, one, many, ids,
        "inputs and result sharded by the batch")


def spec_block(devs_name: str = "devs") -> str:
    """examples/transformer_block.zyn's pipeline with every compute block split
    @parallel(data) over `devs_name` (its `@device("auto")` dropped)."""
    src = (ROOT / "examples" / "transformer_block.zyn").read_text()
    body = src[src.index("pipeline transformer_block"):]
    body = body.replace(' @device("auto")', "").replace('        @device("auto")\n', "")
    return re.sub(r"compute\(([^)]*)\) \{",
                  rf"compute(\1) @device({devs_name}) @parallel(data) {{", body)


CALL = "transformer_block(x, 0)"


def replayed(session) -> bool:
    """Whether the session's last run replayed its pipeline call's CUDA graphs (its
    launches are listed as in a graph, runtime/traces.py)."""
    return bool(session.launches) and all("graph" in (ln.geometry or {})
                                          for ln in session.launches)


@guarded
def bench_transformer_block(ids, quick, reps, warm):
    batch, seq, hidden, heads, ffn = (3, 64, 48, 3, 96) if quick else (8, 512, 768, 12, 3072)
    r = mg.rand(12)
    weights = {"qkv_proj": r((hidden, 3 * hidden)) * 0.05, "out_proj": r((hidden, hidden)) * 0.05,
               "ln1_weight": r((hidden,)) * 0.1 + 1.0, "ln1_bias": r((hidden,)) * 0.1,
               "ffn_up": r((hidden, ffn)) * 0.05, "ffn_down": r((ffn, hidden)) * 0.05,
               "ln2_weight": r((hidden,)) * 0.1 + 1.0, "ln2_bias": r((hidden,)) * 0.1}
    x = r((batch, seq, hidden))
    body = spec_block()
    # the pipeline defined and the weights bound once; each timed run is one call
    prog = f"let num_heads = {heads}\nlet head_dim = {hidden // heads}\n" + \
        body[:body.index("\n" + CALL)] + "\n"
    one_model = {"layers": [{k: mg.on_device(v, ids[0]) for k, v in weights.items()}]}
    # the weights sharded once: every device holds a replica after the first run
    many_model = {"layers": [{k: mg.shard(v, ids) for k, v in weights.items()}]}
    one_x, many_x = mg.on_device(x, ids[0]), mg.shard(x, ids)
    proj = 2.0 * batch * seq * hidden * (4 * hidden + 2 * ffn)
    attn = 4.0 * batch * seq * seq * hidden
    shape = f"B{batch} S{seq} H{hidden} h{heads} F{ffn}"
    out1 = None
    for graphs in (True, False):
        setting = "" if graphs else "config { cuda_graph: false }\n"
        runs = []
        for devs, model, xs in ((ids[:1], one_model, one_x), (list(ids), many_model, many_x)):
            session = zynbook.Session()
            session.run(setting + prog, model=model, devs=devs)
            timing, out = timed(Clock(devs), session, CALL, dict(x=xs), reps, warm)
            runs.append((timing, out, replayed(session),
                         session.interpreter.lazy.traces.last_miss))   # why not replayed
        (one, o1, r1, _), (many, outn, rn, why) = runs
        out1 = o1 if out1 is None else out1
        mg.close(outn, out1, rtol=2e-3, atol=2e-3, what="transformer block")
        rec = row("transformer block (spec), data-parallel" + ("" if graphs else ", no graphs"),
                  shape, proj + attn, one, many, ids,
                  f"6 blocks, activations sharded between them; replay "
                  f"{'on' if rn else 'off'} on {len(ids)} devices, "
                  f"{'on' if r1 else 'off'} on one" +
                  (f"; not replayed: {why}" if graphs and not rn else ""))
        rec.update(one_replayed=r1, many_replayed=rn, many_miss=why)


@guarded
def bench_model_parallel_matmul(ids, quick, reps, warm):
    n = 512 if quick else 4096
    r = mg.rand(11)
    a_h, b_h = r((n, n)), r((n, n))
    flops = 2.0 * n ** 3
    src = mg.MATMUL.format(mode="model")
    one, out1 = timed(Clock(ids[:1]), zynbook.Session(), src,
                      dict(A=mg.on_device(a_h, ids[0]), B=mg.on_device(b_h, ids[0]),
                           devs=ids[:1]), reps, warm)
    # columns: A whole on every device (replicated once), B cut by columns
    env = dict(A=mg.shard(a_h, ids, "data"), B=mg.shard(b_h, ids, "model"), devs=list(ids))
    many, outn = timed(Clock(ids), zynbook.Session(), src, env, reps, warm)
    mg.close(outn, out1, rtol=1e-3, atol=1e-3, what="model-parallel matmul, columns")
    row("model-parallel matmul (columns)", f"{n}^3", flops, one, many, ids,
        "result sharded by columns")
    many, outn = timed(Clock(ids), zynbook.Session(), src, env, reps, warm,
                       after=lambda out: out.gather(ids[0]))
    row("model-parallel matmul (columns, gathered)", f"{n}^3", flops, one, many, ids,
        f"result gathered onto {ids[0]}")
    # the contraction: A cut by columns, B by rows, the partial products reduce-scattered
    env = dict(A=mg.shard(a_h, ids, "model"), B=mg.shard(b_h, ids, "data"), devs=list(ids))
    many, outn = timed(Clock(ids), zynbook.Session(),
                       'config { model_split: "contraction" }\n' + src, env, reps, warm)
    mg.close(outn, out1, rtol=1e-3, atol=1e-3, what="model-parallel matmul, contraction")
    kind = group_for([get_device(d) for d in ids]).kind
    row("model-parallel matmul (contraction)", f"{n}^3", flops, one, many, ids,
        f"partial products reduce-scattered ({kind})")


@guarded
def bench_training_step(ids, quick, reps, warm):
    from zynbook.nn import DataParallel
    from zynbook.nn.model import GPTConfig, TinyGPT, init_weights
    config = GPTConfig(vocab=65, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn=128,
                       max_seq=64, seed=3)
    batch, seq = (4, 16) if quick else (16, 64)
    tokens = np.random.default_rng(9).integers(1, config.vocab, (batch, seq + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]
    weights = init_weights(config)
    one_model = TinyGPT(zynbook.device(ids[0]), config, weights)
    group = DataParallel(list(ids), config, weights)
    one_clock, many_clock = Clock(ids[:1]), Clock(ids)
    t1, h1, l1, _ = one_clock.median(lambda: one_model.train_batch(x, y), reps, warm)
    tn, hn, ln, _ = many_clock.median(lambda: group.train_step(x, y), reps, warm)
    # both took the same steps from the same weights (tests/test_data_parallel.py checks
    # them equal step by step); the last losses' difference is shown
    row("data-parallel training step (tiny GPT)", f"batch {batch} x seq {seq}", 0,
        (t1, h1, None, statistics.median(one_clock.issued)),
        (tn, hn, None, statistics.median(many_clock.issued)), ids,
        f"gradients all-reduced ({group.group.kind}); last loss {ln:.5f}, "
        f"{abs(ln - l1) / abs(l1):.1e} from one device's")


# ------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default="cuda:0,cuda:1",
                    help="the device group, comma-separated (default cuda:0,cuda:1)")
    ap.add_argument("--quick", action="store_true", help="small sizes (a dry run)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--rows", default="bmm,block,mm,train",
                    help="which rows: bmm, block, mm, train (default all)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    ids = [d.strip() for d in args.devices.split(",") if d.strip()]
    os.environ.setdefault("ZYNBOOK_CACHE_DIR", "/tmp/zynbook-cache")
    present = {d["id"] for d in zynbook.compute_devices()}
    missing = [d for d in ids if d not in present]
    if missing or len(ids) < 2:
        print(f"needs a group of two or more present devices; asked {ids}, present "
              f"{sorted(present)}", flush=True)
        return 2
    machine = {"python": platform.python_version(), "numpy": np.__version__,
               "devices": {d: get_device(d).info().get("name") for d in dict.fromkeys(ids)},
               "collectives": group_for([get_device(d) for d in ids]).kind}
    print(f"scaling over {' + '.join(ids)} (collectives: {machine['collectives']}); "
          f"median of {args.reps} after {args.warm} warm-up runs", flush=True)
    benches = {"bmm": bench_batched_matmul, "block": bench_transformer_block,
               "mm": bench_model_parallel_matmul, "train": bench_training_step}
    for name in args.rows.split(","):
        benches[name.strip()](ids, args.quick, args.reps, args.warm)
    out = Path(args.json or Path(os.environ.get("OUT") or ROOT / "bench" / "results") /
               "bench_multi_gpu.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "quick": args.quick, "rows": ROWS},
                              indent=2, default=str))
    print(f"figures written to {out}", flush=True)
    return 1 if any("error" in r for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
