"""The spec's transformer block end to end: ZynBook against PyTorch eager and torch.compile.

The block is examples/transformer_block.zyn's pipeline (the spec's "End-to-End Transformer
Block": QKV projection, multi-head flash attention, output projection, residual + layer
norm, a GELU feed-forward network, residual + layer norm), run on one CUDA device with
random weights scaled as a trained layer's are (normal / sqrt(fan-in); layer norm weights
near 1). The PyTorch peer is the same block written with `torch` ops
(`scaled_dot_product_attention`, `layer_norm`, `gelu(approximate="tanh")`), run eagerly and
through `torch.compile`. ZynBook runs it twice: as a cell runs it (`session.run(
"transformer_block(x, 0)", x=x)`), and as a model written in Python calls it (`session.
namespace["transformer_block"](x, 0)`: the pipeline called from Python, with no cell parsed
or interpreted around the call); "ratio" is against the first, "ratio (call)" against the
second. With `--layers N` (BERT-base has 12) every contender runs a stack of N blocks, each with
its own weights, the output of one the input of the next, as a model's forward pass does
(there the FFN's intermediate is declared in the activations' dtype, so that a layer maps
f16 activations to f16 ones as PyTorch's does, rather than to f32 by the spec's default):
the cell is `var h = x` then `for l in range(N): h = transformer_block(h, l)`, the call and
PyTorch loop in Python; the host work of one layer then overlaps the device's work on the
layers before it (nothing waits in between), as it does in a model. Every contender gets the
same inputs on the device, warm-up runs (which compile),
then `--reps` timed rounds, each running every contender once (so all see the same clocks;
the order rotates from round to round, so none always runs first, after another's host work);
a run is timed with CUDA events on the current stream (ZynBook launches on it too) and with
the host clock (the call and waiting for it);
medians are reported, with ratio = peer time / ZynBook time and the largest difference of
ZynBook's output from eager PyTorch's (relative to its largest magnitude).

PyTorch runs with `torch.backends.cuda.matmul.allow_tf32 = True`; ZynBook likewise with
`config { allow_tf32: true }`, so its f32 contractions (and those of f32 activations with
f16 weights) run on TF32 tensor cores, unless `--exact` asks for exact f32 contractions.
The header says which. `--tune SECONDS` autotunes ZynBook's blocks at their first call (as
`config { autotune: true }` does; the search's time is printed), each search capped there.

    python bench/bench_transformer.py [--device cuda:0] [--dtype f16|f32]
        [--batch 8] [--seq 512] [--hidden 768] [--heads 12] [--ffn 3072] [--layers 1]
        [--reps 50] [--warmup 10] [--no-compile] [--exact] [--tune SECONDS] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

# bf16 torch tensors are not bound to ZynML names yet (CuPy has no bf16 for DLPack)
TORCH_DTYPES = {"f16": "float16", "f32": "float32"}


def block_source(up_dtype: str | None = None) -> str:
    """The example's pipeline, placed on the session's device (its `@device("auto")`
    dropped) and called on `x`; with `up_dtype`, the FFN's intermediate `shared var up`
    declared of that type (the spec's text leaves it the default f32, so a layer of f16
    activations returns f32 ones)."""
    with open(os.path.join(ROOT, "examples", "transformer_block.zyn")) as f:
        src = f.read()
    body = src[src.index("pipeline transformer_block"):src.index("\ntransformer_block(x, 0)")]
    body = re.sub(r'\s*@device\("auto"\)', "", body)
    if up_dtype is not None:
        body = body.replace("shared var up[ffn_hidden]", f"shared var up[ffn_hidden]: {up_dtype}")
    return body + "\n"


def make_weights(hidden: int, ffn: int, seed: int = 0) -> dict:
    """One layer's weights (float32 numpy), scaled as a trained layer's are."""
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)

    return {"qkv_proj": w(hidden, 3 * hidden), "out_proj": w(hidden, hidden),
            "ln1_weight": (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32),
            "ln1_bias": (0.1 * rng.standard_normal(hidden)).astype(np.float32),
            "ffn_up": w(hidden, ffn), "ffn_down": w(ffn, hidden),
            "ln2_weight": (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32),
            "ln2_bias": (0.1 * rng.standard_normal(hidden)).astype(np.float32)}


def torch_block(torch, heads: int):
    """The block in PyTorch (post-norm, as the example)."""
    F = torch.nn.functional

    def block(x, w):
        b, s, h = x.shape
        d = h // heads
        q, k, v = (x @ w["qkv_proj"]).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, heads, d).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, h)
        normed = F.layer_norm(x + attn @ w["out_proj"], (h,), w["ln1_weight"], w["ln1_bias"],
                              eps=1e-6)
        ffn = F.gelu(normed @ w["ffn_up"], approximate="tanh") @ w["ffn_down"]
        return F.layer_norm(normed + ffn, (h,), w["ln2_weight"], w["ln2_bias"], eps=1e-6)

    return block


def timed(torch, fns: dict, reps: int, warmup: int, probes: dict | None = None) -> dict:
    """Medians of each `fns[name]()` over `reps` rounds after `warmup` calls of each: CUDA-event
    time on the current stream and host time (the call and waiting for the device); and the
    last output. A round runs every contender once, so that all of them see the same clocks
    and the same neighbours on a shared machine; the rounds rotate the order. `probes[name]()`,
    called after each timed call of `name` (outside its time), gives a figure of that call
    whose median is kept."""
    probes = probes or {}
    probed = {name: [] for name in probes}
    out = {name: None for name in fns}
    for name, fn in fns.items():
        for _ in range(warmup):
            out[name] = fn()
    torch.cuda.synchronize()
    events = {name: [] for name in fns}
    walls = {name: [] for name in fns}
    stream = torch.cuda.current_stream()
    names = list(fns)
    for r in range(reps):
        # each round in another order: a contender run right after another's heavy host
        # work finds the CPU's caches cold, and no contender should always be that one
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record(stream)
            out[name] = fn()
            end.record(stream)
            end.synchronize()
            walls[name].append(time.perf_counter() - t0)
            events[name].append(start.elapsed_time(end) / 1e3)
            if name in probes:
                probed[name].append(probes[name]())
    return {name: {"events_s": statistics.median(events[name]),
                   "wall_s": statistics.median(walls[name]),
                   "min_events_s": min(events[name]), "out": out[name],
                   **({"probe": statistics.median(probed[name])} if probed.get(name) else {})}
            for name in fns}


def graph_time(session):
    """The time of the CUDA graph the last call replayed (its last launch carries the
    graph's event time), or None where it replayed none."""
    last = session.launches[-1] if session.launches else None
    if last is None or "graph" not in last.geometry:
        return None
    return last.times.kernel


def graph_breakdown(session, x, reps: int = 5) -> list:
    """The replayed call's CUDA graphs: each graph's median time (CUDA events around its
    launch), named by the kernels it runs; with the whole call's time, it shows how much of
    the call is the graphs' work."""
    runs = []
    for _ in range(reps):
        session.run("transformer_block(x, 0)", x=x)
        names, runs_now = [], []
        for ln in session.launches:
            names.append(ln.kernel)
            t = ln.times.kernel if ln.times is not None else None
            if t:           # a graph's time sits on its last launch
                runs_now.append((" + ".join(names), t))
                names = []
        runs.append(runs_now)
    return [{"kernels": name, "graph_ms": statistics.median(r[i][1] for r in runs) * 1e3}
            for i, (name, _) in enumerate(runs[-1])]


def launch_breakdown(session, x, reps: int = 5) -> list:
    """Each launch of one run without a CUDA graph (a graph times only its whole): the
    kernel, its schedule and its median kernel time, to show where the block's time goes."""
    session.run("config { cuda_graph: false }")
    runs = []
    for _ in range(reps):
        session.run("transformer_block(x, 0)", x=x)
        runs.append([(ln.kernel, ln.geometry.get("schedule", ""), ln.times.kernel or 0.0)
                     for ln in session.launches])
    session.run('config { cuda_graph: "auto" }')
    return [{"kernel": name, "schedule": how,
             "kernel_ms": statistics.median(r[i][2] for r in runs) * 1e3}
            for i, (name, how, _) in enumerate(runs[-1])]


def trace(torch, session, x, reps: int = 10, path: str | None = None) -> dict:
    """A profiler's view of `reps` replayed calls (CUPTI sees every kernel of the process,
    CuPy's and those inside CUDA graphs): per call, the host time of `session.run`, the span
    from its first kernel's start to its last kernel's end, the time some kernel runs, and
    each kernel's median duration. Where the span is much more than the busy time, the GPU
    waits for the host between kernels."""
    from torch.profiler import ProfilerActivity, profile, record_function
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            with record_function("zynbook_call"):
                session.run("transformer_block(x, 0)", x=x)
            torch.cuda.synchronize()
    if path:
        prof.export_chrome_trace(path)
    events = prof.events()
    calls = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == "zynbook_call")
    kernels = sorted((e.time_range.start, e.time_range.end, e.name) for e in events
                     if e.device_type == torch.autograd.DeviceType.CUDA and e.name != "zynbook_call")
    per_call, names = [], {}
    for k, (c0, c1) in enumerate(calls):
        end = calls[k + 1][0] if k + 1 < len(calls) else float("inf")
        mine = [kn for kn in kernels if c0 <= kn[0] < end]
        if not mine:
            continue
        busy, last = 0.0, mine[0][0]
        for s0, s1, name in mine:
            busy += max(0.0, s1 - max(s0, last))
            last = max(last, s1)
            names.setdefault(name, []).append(s1 - s0)
        per_call.append({"host_us": c1 - c0, "span_us": mine[-1][1] - mine[0][0],
                         "busy_us": busy, "kernels": len(mine),
                         "first_kernel_after_us": mine[0][0] - c0})
    med = {key: statistics.median(c[key] for c in per_call) for key in per_call[0]} if per_call else {}
    per_kernel = sorted(((statistics.median(d), len(d) // max(1, len(per_call)), n)
                         for n, d in names.items()), reverse=True)
    cpu = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    return {"median": med, "per_kernel": per_kernel, "cpu_table": cpu}


# the functions on a replayed call's host path, in the order it enters them
HOST_PATH = (("zynbook.session", "Session", "run"),
             ("zynbook.runtime.interp", "Interpreter", "call_pipeline"),
             ("zynbook.runtime.traces", "Traces", "enter"),
             ("zynbook.runtime.traces", "_Form", "look_up"),
             ("zynbook.runtime.traces", "_Form", "key"),
             ("zynbook.runtime.traces", "_Trace", "replay"),
             ("zynbook.backends.cuda.graph", "CapturedGraph", "replay"),
             ("zynbook.backends.cuda.graph", "CapturedGraph", "check"))


def host_split(session, x, sync, reps: int = 200) -> list:
    """Where a replayed call's host time goes, without a profiler: the median time from the
    call's start at which each function on its path (HOST_PATH) is entered and left."""
    import importlib
    marks, saved = [], []
    for module, cls_name, name in HOST_PATH:
        cls = getattr(importlib.import_module(module), cls_name)
        real = cls.__dict__[name]
        fn = real.__func__ if isinstance(real, staticmethod) else real

        def wrap(*a, _fn=fn, _name=f"{cls_name}.{name}", **k):
            marks.append((_name, "enter", time.perf_counter()))
            try:
                return _fn(*a, **k)
            finally:
                marks.append((_name, "leave", time.perf_counter()))
        saved.append((cls, name, real))
        setattr(cls, name, staticmethod(wrap) if isinstance(real, staticmethod) else wrap)
    offsets = {}
    try:
        for _ in range(reps):
            marks.clear()
            session.run("transformer_block(x, 0)", x=x)
            sync()
            for name, how, t in marks:
                offsets.setdefault((name, how), []).append((t - marks[0][2]) * 1e6)
    finally:
        for cls, name, real in saved:
            setattr(cls, name, real)
    return sorted((statistics.median(v), how, name) for (name, how), v in offsets.items())


def host_profile(session, x, reps: int = 200) -> str:
    """cProfile of `reps` replayed calls: where the host's time per call goes."""
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(reps):
        session.run("transformer_block(x, 0)", x=x)
    pr.disable()
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(40)
    return buf.getvalue()


def as_torch(torch, value, device):
    """A ZynBook result (Tensor on cuda:N) as a torch tensor on `device`."""
    data = getattr(value, "data", value)
    if hasattr(data, "__cuda_array_interface__") or hasattr(data, "__dlpack__"):
        try:
            return torch.from_dlpack(data).to(device)
        except Exception:
            pass
    return torch.as_tensor(np.asarray(value.numpy()), device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--dtype", default="f16", choices=sorted(TORCH_DTYPES))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=None, help="default 4 * hidden")
    ap.add_argument("--layers", type=int, default=1,
                    help="a stack of this many blocks, each with its own weights")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--cuda-graph", default="auto", choices=("auto", "true", "false"),
                    help="ZynBook's config { cuda_graph } (default auto)")
    ap.add_argument("--exact", action="store_true",
                    help="ZynBook's f32 contractions exact (no config { allow_tf32: true })")
    ap.add_argument("--tune", type=float, default=None, metavar="SECONDS",
                    help="ZynBook's blocks autotuned (config { autotune: true, tune_budget }) "
                         "at their first run, each search capped at SECONDS")
    ap.add_argument("--json", default=None)
    ap.add_argument("--trace", default=None, metavar="DIR",
                    help="also profile replayed calls (kernels and host) into DIR")
    args = ap.parse_args(argv)

    import torch
    import zynbook
    torch.backends.cuda.matmul.allow_tf32 = True
    ffn = args.ffn or 4 * args.hidden
    dev = torch.device(args.device)
    dtype = getattr(torch, TORCH_DTYPES[args.dtype])
    layers = [{k: torch.from_numpy(v).to(dev, dtype)
               for k, v in make_weights(args.hidden, ffn, seed=l).items()}
              for l in range(args.layers)]
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((args.batch, args.seq, args.hidden))
                         .astype(np.float32)).to(dev, dtype)

    session = zynbook.Session(args.device)
    graph = {"auto": '"auto"', "true": "true", "false": "false"}[args.cuda_graph]
    tf32 = "false" if args.exact else "true"     # as PyTorch's allow_tf32 above, unless --exact
    tune = f", autotune: true, tune_budget: {args.tune}" if args.tune else ""
    session.run(f"config {{ cuda_graph: {graph}, allow_tf32: {tf32}{tune} }}\n"
                f"let num_heads = {args.heads}\nlet head_dim = {args.hidden // args.heads}\n"
                + block_source(args.dtype if args.layers > 1 else None), model={"layers": layers})
    results = {"shape": {"batch": args.batch, "seq": args.seq, "hidden": args.hidden,
                         "heads": args.heads, "ffn": ffn, "dtype": args.dtype,
                         "layers": args.layers},
               "zynbook_allow_tf32": not args.exact, "torch_allow_tf32": True,
               "zynbook_tuned": bool(args.tune),
               "device": torch.cuda.get_device_name(dev), "reps": args.reps}

    if args.tune:       # the first call searches each block's schedules (then kept)
        t0 = time.perf_counter()
        session.run("transformer_block(x, 0)", x=x)
        torch.cuda.synchronize()
        results["tuning_s"] = time.perf_counter() - t0
    block = torch_block(torch, args.heads)
    # the block as a cell runs it (`session.run`), and as a model written in Python calls it:
    # the pipeline called from Python (no cell parsed or interpreted around the call)
    pipeline = session.namespace["transformer_block"]
    cell = "transformer_block(x, 0)" if args.layers == 1 else \
        f"var h = x\nfor l in range({args.layers}):\n    h = transformer_block(h, l)\nh"

    def stacked(fn):
        def run():
            h = x
            for l, w in enumerate(layers):
                h = fn(h, l, w)
            return h
        return run

    contenders = {"zynbook": lambda: session.run(cell, x=x),
                  "zynbook_call": stacked(lambda h, l, w: pipeline(h, l)),
                  "torch_eager": stacked(lambda h, l, w: block(h, w))}
    if not args.no_compile:
        compiled = torch.compile(block)
        contenders["torch_compile"] = stacked(lambda h, l, w: compiled(h, w))
    with torch.no_grad():
        timings = timed(torch, contenders, args.reps, max(args.warmup, 3),
                        {"zynbook": lambda: graph_time(session) or 0.0})
    zyn = timings.pop("zynbook")
    call = timings.pop("zynbook_call")
    eager = timings["torch_eager"]
    peers = timings
    results["zynbook"] = {k: v for k, v in zyn.items() if k != "out"}
    session.run("transformer_block(x, 0)", x=x)      # (a pipeline called from Python lists
    results["zynbook"]["launches"] = len(session.launches)      # its launches after the cell's)
    results["zynbook"]["cuda_graph"] = any("graph" in ln.geometry for ln in session.launches)
    results["zynbook"]["per_graph"] = graph_breakdown(session, x) if results["zynbook"]["cuda_graph"] else []
    results["zynbook"]["per_launch"] = launch_breakdown(session, x)
    results["zynbook_call"] = {k: v for k, v in call.items() if k != "out"}
    print("timed: zynbook, " + ", ".join(peers), file=sys.stderr)

    ref = eager["out"].float()
    got = as_torch(torch, zyn["out"], dev).float()
    results["max_rel_diff_vs_eager"] = float((got - ref).abs().max() / ref.abs().max())
    for name, r in peers.items():
        results[name] = {k: v for k, v in r.items() if k != "out"}
        results[name]["ratio"] = r["events_s"] / zyn["events_s"]
        results[name]["ratio_call"] = r["events_s"] / call["events_s"]
        results[name]["wall_ratio"] = r["wall_s"] / zyn["wall_s"]

    print(f"transformer block B{args.batch} S{args.seq} H{args.hidden} heads {args.heads} "
          f"FFN {ffn} {args.dtype}" + (f", a stack of {args.layers}" if args.layers > 1 else "")
          + f" on {results['device']}; medians of {args.reps} rounds (each contender once a round)")
    print("f32 contractions: PyTorch TF32 (allow_tf32); ZynBook " +
          ("exact f32 (--exact)" if args.exact else "TF32 (config { allow_tf32: true })"))
    if args.tune:
        print(f"ZynBook's blocks autotuned at the first call: {results['tuning_s']:.1f} s")
    print(f"{'':16}{'events ms':>11}{'wall ms':>10}{'ratio':>8}{'ratio (call)':>14}")
    print(f"{'zynbook':16}{zyn['events_s'] * 1e3:11.3f}{zyn['wall_s'] * 1e3:10.3f}"
          f"{'':>22}   (session.run; {results['zynbook']['launches']} launches"
          f"{', CUDA graph' if results['zynbook']['cuda_graph'] else ''})")
    print(f"{'zynbook_call':16}{call['events_s'] * 1e3:11.3f}{call['wall_s'] * 1e3:10.3f}"
          f"{'':>22}   (the pipeline called from Python)")
    for name, r in peers.items():
        print(f"{name:16}{r['events_s'] * 1e3:11.3f}{r['wall_s'] * 1e3:10.3f}"
              f"{results[name]['ratio']:8.2f}{results[name]['ratio_call']:14.2f}")
    if zyn.get("probe"):
        last = "the last layer's" if args.layers > 1 else "the"
        print(f"  of which {last} replayed graph, by its "
              f"own events: {zyn['probe'] * 1e3:.3f} ms "
              "(the rest: host work before its launch and the launch; the events also hold "
              "the result's kernel, queued after the graph)")
    print(f"max |zynbook - eager| / max |eager| = {results['max_rel_diff_vs_eager']:.2e}")
    if results["zynbook"]["per_graph"]:
        print("zynbook graphs (replayed):")
        for g in results["zynbook"]["per_graph"]:
            print(f"  {g['graph_ms']:9.3f} ms  {g['kernels']}")
    print("zynbook launches (no graph):")
    for ln in results["zynbook"]["per_launch"]:
        print(f"  {ln['kernel']:<24}{ln['kernel_ms']:9.3f} ms  {ln['schedule'][:110]}")
    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
        t = trace(torch, session, x, path=os.path.join(args.trace, "block_trace.json"))
        m = t["median"]
        print(f"profiled call (median of 10): host {m.get('host_us', 0):.1f} us, kernels from "
              f"first to last {m.get('span_us', 0):.1f} us, some kernel running "
              f"{m.get('busy_us', 0):.1f} us, {m.get('kernels', 0)} kernels, first kernel "
              f"{m.get('first_kernel_after_us', 0):.1f} us after the call began")
        print("host path of a replayed call (no profiler; median us from its start):")
        for at, how, name in host_split(session, x, torch.cuda.synchronize):
            print(f"  {at:8.1f}  {how:5} {name}")
        for dur, count, name in t["per_kernel"]:
            print(f"  {dur:9.1f} us x{count}  {name[:120]}")
        with open(os.path.join(args.trace, "cpu_table.txt"), "w") as f:
            f.write(t["cpu_table"])
        with open(os.path.join(args.trace, "host_profile.txt"), "w") as f:
            f.write(host_profile(session, x))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
