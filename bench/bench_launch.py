"""The host overhead of a warm one-kernel cell: end-to-end time minus kernel time.

Each row runs one compute block again and again with the same shapes and dtypes, through
`Session.run` and through the `%%compute` magic (inside IPython's builtin trap, as a notebook
cell runs it), after warm-up (the first run compiles),
and reports medians: end-to-end time (the call plus waiting for the device), kernel time
(CUDA events on `cuda:N`, the host clock on CPU devices), the difference of the two in each
run (the host overhead), the time the call itself takes before returning (on CUDA it need
not wait for the kernel), and the same operation in PyTorch (eager, on the same device,
timed the same way). The row `pipeline_20` runs a pipeline of 20 launches instead (on
`cuda:N` replayed as one CUDA graph from its second run, runtime/replay.py): its "us/launch"
column is the end-to-end time per launch.

    python bench/bench_launch.py [--device cuda:0|cpu:native] [--reps 200] [--rows a,b]
                                 [--json out.json] [--poll] [--standin]
                                 [--profile ROW [--magic] [--sort tottime] [--lines 30]]

The call time is taken right after the end-to-end runs, before IPython is started for the
magic's rows. `--poll` waits for the device by polling the stream rather than in the
driver's synchronisation: a difference between the two on a row with a long kernel is the
driver's wake-up after a long wait, not host work. `--profile ROW` runs that row's warm
`Session.run` (`--magic`: its `%%compute` cell) under cProfile and prints where the host
time goes instead of the table. `--standin` runs `cuda:0` on the CuPy stand-in of the tests
with kernels that do nothing: the host work of the CUDA path alone, on any machine.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import numpy as np  # noqa: E402

from kernel_sources import SOFTMAX_ROWS, SPEC_MATMUL  # noqa: E402

ELEMENTWISE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0 + 1.0
}
y"""



def pipeline_source(kernels: int) -> str:
    """A pipeline `p(x)` of `kernels` launches: elementwise blocks each reading the two
    results before it (read twice, a result is not fused away), the last two blocks fused
    into one launch."""
    lines = ["pipeline p(h0):",
             "    let h1 = compute(h0) {", "        @kernel elementwise",
             "        for i in 0..n:", "            out[i] = h0[i] * 0.5 + 1.0", "    }"]
    for k in range(2, kernels + 2):
        lines += [f"    let h{k} = compute(h{k - 1}, h{k - 2}) {{",
                  "        @kernel elementwise", "        for i in 0..n:",
                  f"            out[i] = h{k - 1}[i] * 0.5 + h{k - 2}[i] * 0.25", "    }"]
    lines.append(f"    return h{kernels + 1}")
    return "\n".join(lines) + "\n"


# name: (ZynML source, input shapes, the torch peer)
ROWS = {
    "elementwise_1k": (ELEMENTWISE, {"x": (1024,)}, lambda t, e: e["x"] * 2.0 + 1.0),
    "elementwise_1m": (ELEMENTWISE, {"x": (1 << 20,)}, lambda t, e: e["x"] * 2.0 + 1.0),
    "matmul_256": (SPEC_MATMUL, {"A": (256, 256), "B": (256, 256)},
                   lambda t, e: e["A"] @ e["B"]),
    "matmul_1024": (SPEC_MATMUL, {"A": (1024, 1024), "B": (1024, 1024)},
                    lambda t, e: e["A"] @ e["B"]),
    "softmax_4096x2048": (SOFTMAX_ROWS + "\nprobs", {"x": (4096, 2048)},
                          lambda t, e: t.softmax(e["x"], dim=1)),
    # 20 launches a run, replayed as a CUDA graph from the second run on cuda:N
    "pipeline_20": (pipeline_source(20) + "p(x)", {"x": (1 << 16,)},
                    lambda t, e: torch_pipeline(e["x"], 20)),
}


def torch_pipeline(x, kernels: int):
    """What `pipeline_source(kernels)` computes, in PyTorch eager."""
    h = [x, x * 0.5 + 1.0]
    for _ in range(kernels):
        h.append(h[-1] * 0.5 + h[-2] * 0.25)
    return h[-1]


class Clock:
    """Waits for the launches of this thread on a device: in the driver's synchronisation,
    or (`poll`) asking the stream whether it is done until it is, which wakes as soon as
    the device is idle (the driver may sleep through a long wait and wake later)."""

    def __init__(self, device: str, poll: bool = False):
        self.cuda = device.startswith("cuda")
        self.poll = poll
        if self.cuda:
            import cupy
            self.cupy = cupy

    def wait(self):
        if self.cuda:
            stream = self.cupy.cuda.get_current_stream()
            if self.poll and hasattr(stream, "done"):
                while not stream.done:
                    pass
            else:
                stream.synchronize()


def inputs_for(device: str, shapes: dict, rng):
    """The row's inputs: torch CUDA tensors on `cuda:N` (CuPy arrays without torch),
    numpy arrays elsewhere; and the same data as torch tensors for the peer."""
    host = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    try:
        import torch
    except ImportError:
        torch = None
    if device.startswith("cuda"):
        if torch is not None and torch.cuda.is_available():
            data = {k: torch.from_numpy(v).to(device) for k, v in host.items()}
            return data, data, torch
        import cupy
        with cupy.cuda.Device(int(device.split(":")[1])):
            return {k: cupy.asarray(v) for k, v in host.items()}, None, None
    peer = {k: torch.from_numpy(v) for k, v in host.items()} if torch is not None else None
    return host, peer, torch


def median_of(fn, wait, reps: int, warmup: int, waited: bool = True) -> float:
    """Median seconds of `fn()` (with `wait()` inside the timing when `waited`)."""
    for _ in range(warmup):
        fn()
    wait()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if waited:
            wait()
        times.append(time.perf_counter() - t0)
        if not waited:
            wait()
    return statistics.median(times)


def timed_runs(run, session, wait, reps: int, warmup: int) -> dict:
    """Medians of end-to-end time (the call and waiting for the device), of kernel time
    (the run's launch) and of their difference in each run (the host overhead)."""
    for _ in range(warmup):
        run()
    wait()
    walls, kernels = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        wait()
        walls.append(time.perf_counter() - t0)
        # a CUDA graph's time is on its last launch, the others have none
        kernels.append(sum(ln.times.kernel or 0.0 for ln in session.launches))
    return {"e2e": statistics.median(walls), "kernel": statistics.median(kernels),
            "overhead": statistics.median(w - k for w, k in zip(walls, kernels)),
            "launches": len(session.launches),
            "graph": any("graph" in ln.geometry for ln in session.launches)}


def magic_runner(device: str, source: str, env: dict):
    """`%%compute @device(...)` of `source` in an IPython shell holding `env`, the notebook
    session it runs in, and the shell's builtin trap: a notebook cell runs inside it (the
    shell puts its builtins in place once per cell), so the magic's runs are timed inside it
    too, rather than paying for that per call."""
    from IPython.core.interactiveshell import InteractiveShell

    import zynbook
    from zynbook.kernel import state
    shell = InteractiveShell.instance()
    session = zynbook.Session(device=device)
    state.set_notebook_session(session)
    if "compute" not in shell.magics_manager.magics["cell"]:     # (once: rows share the shell)
        shell.run_line_magic("load_ext", "zynbook")
    shell.user_ns.update(env)
    line = f'@device("{device}")'
    return (lambda: shell.run_cell_magic("compute", line, source)), session, shell.builtin_trap


def measure(row: str, device: str, reps: int, warmup: int, poll: bool = False) -> dict:
    import zynbook
    source, shapes, peer_op = ROWS[row]
    env, peer, torch = inputs_for(device, shapes, np.random.default_rng(0))
    wait = Clock(device, poll).wait
    session = zynbook.Session(device)
    run = lambda: session.run(source, **env)         # noqa: E731
    direct = timed_runs(run, session, wait, reps, warmup)
    call = median_of(run, wait, reps, 0, waited=False)     # before IPython is started
    run_magic, magic_session, trap = magic_runner(device, source, env)
    with trap:
        magic = timed_runs(run_magic, magic_session, wait, reps, warmup)
    result = {"row": row, "device": device, "e2e_s": direct["e2e"],
              "kernel_s": direct["kernel"], "overhead_s": direct["overhead"],
              "launches": direct["launches"], "cuda_graph": direct["graph"],
              "per_launch_s": direct["e2e"] / max(1, direct["launches"]),
              "call_s": call, "wait": "poll" if poll else "sync",
              "magic_e2e_s": magic["e2e"], "magic_overhead_s": magic["overhead"]}
    if torch is not None and peer is not None:
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        result["torch_s"] = median_of(lambda: peer_op(torch, peer), sync, reps, warmup)
    return result


def profile(row: str, device: str, reps: int, warmup: int, magic: bool = False,
            sort: str = "tottime", lines: int = 30):
    import zynbook
    source, shapes, _ = ROWS[row]
    env, _, _ = inputs_for(device, shapes, np.random.default_rng(0))
    trap = contextlib.nullcontext()
    if magic:
        run, _, trap = magic_runner(device, source, env)
    else:
        session = zynbook.Session(device)
        run = lambda: session.run(source, **env)        # noqa: E731
    with trap:
        for _ in range(warmup):
            run()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(reps):
            run()
        prof.disable()
    Clock(device).wait()
    pstats.Stats(prof).sort_stats(sort).print_stats(lines)


def table(results: list) -> str:
    ms = lambda s: f"{s * 1e3:.4f}" if s is not None else "-"      # noqa: E731
    us = lambda s: f"{s * 1e6:.1f}"                                 # noqa: E731
    head = ("row", "launches", "e2e ms", "kernel ms", "overhead us", "us/launch", "call us",
            "magic ms", "magic overhead us", "torch ms")
    lines = [head]
    for r in results:
        lines.append((r["row"], f"{r['launches']}{' (graph)' if r['cuda_graph'] else ''}",
                      ms(r["e2e_s"]), ms(r["kernel_s"]), us(r["overhead_s"]),
                      us(r["per_launch_s"]), us(r["call_s"]), ms(r["magic_e2e_s"]),
                      us(r["magic_overhead_s"]), ms(r.get("torch_s"))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w)
                               for i, (c, w) in enumerate(zip(line, widths)))
                     for line in lines)


def install_standin():
    """`cuda:0` on the CuPy stand-in, its kernels doing nothing (what is timed is the host's
    work; results are not computed)."""
    import tempfile

    import cupy_standin
    from zynbook.backends import registry
    from zynbook.backends.cuda.device import CudaDevice

    class Patch:        # what cupy_standin.install asks of pytest's monkeypatch
        setitem = staticmethod(lambda d, k, v: d.__setitem__(k, v))
        setattr = staticmethod(setattr)

    os.environ.setdefault("ZYNBOOK_CACHE_DIR", tempfile.mkdtemp(prefix="zynbook-standin-"))
    cupy_standin.install(Patch)
    cupy_standin.Function.run = lambda self, args: None
    sys.modules["cupy"].cuda.get_elapsed_time = lambda start, end: 0.0     # no kernel time
    registry.get_device("cpu")
    registry._devices["cuda:0"] = CudaDevice(0)
    sys.modules.pop("torch", None)
    sys.modules["torch"] = None         # the peer and torch inputs need a real GPU


def default_device() -> str:
    from zynbook.backends.registry import get_device
    for device in ("cuda:0", "cpu:native"):
        try:
            get_device(device)
            return device
        except Exception:
            continue
    return "cpu"


def ramp_clocks(device: str, seconds: float = 0.5):
    """Keep the GPU busy for a moment first: an idle GPU runs at a low clock, and the first
    row would otherwise be timed while it ramps up (its kernels and launches slower)."""
    import cupy
    with cupy.cuda.Device(int(device.split(":")[1])):
        a = cupy.ones((2048, 2048), cupy.float32)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(10):
                a = a @ a * (1.0 / 2048)
            cupy.cuda.get_current_stream().synchronize()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda:0, cpu:native, ... (default: the "
                    "first of cuda:0 and cpu:native present)")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", default=None, metavar="ROW")
    ap.add_argument("--magic", action="store_true",
                    help="with --profile: profile the row's %%%%compute cell instead")
    ap.add_argument("--sort", default="tottime",
                    help="with --profile: the pstats order (tottime, cumtime, ncalls)")
    ap.add_argument("--lines", type=int, default=30, help="with --profile: lines printed")
    ap.add_argument("--poll", action="store_true",
                    help="wait for the device by polling the stream instead of the driver's "
                    "synchronisation (which may sleep through a long wait)")
    ap.add_argument("--standin", action="store_true",
                    help="cuda:0 on tests/cupy_standin.py with kernels that do nothing: the "
                    "host work of the CUDA path alone, on a machine without a GPU")
    args = ap.parse_args(argv)
    if args.standin:
        install_standin()
    device = args.device or default_device()
    if args.profile:
        profile(args.profile, device, args.reps, args.warmup, args.magic, args.sort,
                args.lines)
        return
    if device.startswith("cuda:") and not args.standin:
        ramp_clocks(device)
    results = []
    for row in args.rows.split(","):
        results.append(measure(row, device, args.reps, args.warmup, args.poll))
        print(f"{row}: done", file=sys.stderr)
    print(f"device {device}; medians of {args.reps} warm runs; waiting by "
          f"{'polling the stream' if args.poll else 'stream synchronisation'}")
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
