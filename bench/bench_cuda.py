"""ZynBook on CUDA beside PyTorch: each row of the spec's performance table, in one process.

Every row: the ZynML kernel (lowered and compiled by ZynBook, launched on the same stream
as PyTorch) and its peers (PyTorch eager: cuBLAS, cuDNN, SDPA; torch.compile where it
applies), timed with CUDA events after warm-up, L2 emptied before every repetition (by a
read: `Timer`), medians reported. Memory-bound rows (softmax, layer norm, RMS norm, residual + layer norm,
bias + GELU) also give achieved bandwidth as a share of the copy bandwidth measured in the
same run (a 1 GiB copy) and of a copy moving the same bytes. Writes a table to stdout and
JSON to --json.

    python bench/bench_cuda.py [--json bench/results/cuda.json] [--reps 20] [--rows a,b]
                               [--tune [--tune-budget 60]] [--gemm-sweep N] [--mma-choices]

Matmul rows: f32 (exact), TF32 (`config { allow_tf32: true }` beside cuBLAS with
`torch.backends.cuda.matmul.allow_tf32`), bf16 and f16 at 4096 and 8192; conv2d also in
TF32 beside cuDNN's. Compute rows give TFLOP/s and the share of the GPU's dense peak for
their dtype (`PEAK_TFLOPS`, by device name). Attention rows: BERT-base in f32, and in f16 and
bf16 (tensor cores) beside SDPA in the same type with each fused backend pinned (flash, cuDNN,
memory-efficient: `sdpa_backends`); bf16 at 4096 with a causal condition beside SDPA with
is_causal; `--mma-choices` (only those whose label holds one of the
words of `--mma-match w1,w2`, where given) adds to those a row per tensor-core
block shape (attention_mma.CHOICES), per structural variant of the default's shape
(attention_mma.variants) and per warpgroup (wgmma) candidate, each checked against SDPA and
with its kernel's registers and local (spilled) bytes.

`--gemm-sweep N` times instead the first N tensor-core configurations of the GEMM schedule's
space (its default first) for the matmul rows in bf16, f16 and TF32 (or those of --rows, or
`--gemm-shapes MxNxK:dtype,...`; exact f32 sweeps its split-TF32 tiles on Hopper, then its FMA
tiles),
each beside cuBLAS: what configs.GEMM_CONFIGS should name.

`--conv-sweep N` adds to the conv2d rows a row for each of the first N configurations of the
GEMM schedule's space (tensor-core ones for TF32 and f16), and for TF32 the split tiles with
one product a step. The f16 conv2d row gives cuDNN and
ZynBook the same f16 NCHW tensors.

`--tune` adds a tuned row after each row: the kernel searched as `@autotune` searches it
(zynbook/tuning.py), `tune_s` the search's seconds; the winner is recorded in the tuning
cache, so a second run in a new process reports the seconds from finding that record to a
compiled winner (`from the tuning cache` in its schedule column).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import numpy as np  # noqa: E402

from compute_testing import lower_signatures  # noqa: E402
from kernel_sources import SOFTMAX_ROWS, SPEC_CONV2D, SPEC_MATMUL, unannotated  # noqa: E402


def lower_program(text: str, inputs: dict, dtypes: dict | None = None, given: dict | None = None):
    """(cir.Kernel, sizes) for the first compute() of `text`, with inputs of these shapes."""
    from zynbook.compiler.dims import solve
    dtypes = dtypes or {}
    scalars = {k: "f32" for k, v in (given or {}).items() if isinstance(v, float)}
    lowered = lower_signatures(text, {n: (dtypes.get(n, "f32"), len(s)) for n, s in inputs.items()},
                               scalars, name="bench")
    k = lowered.kernel
    shapes = {b.name: tuple(inputs[lowered.labels[b.name]]) for b in k.inputs}
    sizes = solve(lowered, shapes, {kk: v for kk, v in (given or {}).items() if kk in k.dims})
    return k, sizes


# dense tensor-core (f32: CUDA-core) peaks in TFLOP/s by device name, from NVIDIA's data sheets
PEAK_TFLOPS = {"H100 PCIe": dict(f32=51.0, tf32=378.0, bf16=756.0, f16=756.0),
               "H100 NVL": dict(f32=60.0, tf32=418.0, bf16=835.0, f16=835.0),
               "H100": dict(f32=67.0, tf32=494.0, bf16=989.0, f16=989.0),     # SXM
               "H200": dict(f32=67.0, tf32=494.0, bf16=989.0, f16=989.0),
               "A100": dict(f32=19.5, tf32=156.0, bf16=312.0, f16=312.0)}


def peak_tflops(name: str, dtype: str) -> float | None:
    """The dense peak of a device (first entry whose key its name contains) for `dtype`."""
    for key, peaks in PEAK_TFLOPS.items():
        if key.lower() in name.lower():
            return peaks.get(dtype)
    return None


class Timer:
    """CUDA-event medians of one call each, L2 emptied of the call's data before every
    repetition by a pass over twice its size: by default a read, which leaves L2 holding
    clean lines; `flush="write"` zeroes the buffer instead, leaving up to L2's size of dirty
    lines that the timed call then writes back to memory (a cost of the flush, not of the
    call, and a large share of a call moving tens of MiB). Then a spin of `PAD_CYCLES` keeps
    the GPU busy while the host queues the call: a dispatch slower than the flush (SDPA's
    under a backend pinned took 0.05 ms) is not timed as the call's."""
    PAD_CYCLES = 400_000           # about 0.2 ms at 2 GHz

    def __init__(self, torch, l2_bytes, flush: str = "read"):
        self.torch = torch
        self.pad = hasattr(torch.cuda, "_sleep")
        self.flush = torch.zeros(max(l2_bytes * 2, 64 << 20) // 4, dtype=torch.float32, device="cuda")
        self.empty_l2 = self.flush.sum if flush == "read" else self.flush.zero_

    def median(self, fn, reps, warmup=3):
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            self.empty_l2()
            if self.pad:
                torch.cuda._sleep(self.PAD_CYCLES)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 1000.0)
        return statistics.median(times)


def sdpa_backends(kind, q, k, v, causal) -> list:
    """(label, call) of SDPA with each of its fused backends that takes these tensors
    (FlashAttention-2, cuDNN's, memory-efficient), each pinned: left to choose, SDPA took
    0.071 ms in one process and 0.090 in the next for BERT-base f16 on an H200."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = []
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue

        def call(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            call()
            torch.cuda.synchronize()
        except Exception:               # this backend does not take these tensors here
            continue
        out.append((f"torch SDPA {kind} ({name.split('_')[0].lower()})", call))
    return out


def zyn_callable(dev, kernel, sizes, tensors, out, scalars=None, params=None):
    """A no-allocation launch of ZynBook's compiled kernel on torch's current stream
    (`params`: a schedules.Choice to compile instead of the device's own choice)."""
    import cupy as cp
    import torch
    compiled = dev.compile(kernel, sizes, {"params": params} if params else None)
    bufs = [dev._as_device_array(t, b.dtype) for t, b in zip(tensors, kernel.inputs)]
    outb = dev._as_device_array(out, kernel.output.dtype) if kernel.output.dtype != "bf16" else \
        cp.from_dlpack(out.view(torch.int16)).view(cp.uint16)
    scratch = compiled.scratch()
    ts = torch.cuda.current_stream()
    stream = (cp.cuda.Stream.from_external(ts) if hasattr(cp.cuda.Stream, "from_external")
              else cp.cuda.ExternalStream(ts.cuda_stream))
    args = bufs + [outb]

    def run():
        compiled.launch_raw(args, scalars or {}, stream=stream, scratch=scratch)
    return run, compiled


# without the spec's @workgroup / @shared: the CUDA renderer picks its own
MATMUL = unannotated(SPEC_MATMUL)
CONV = unannotated(SPEC_CONV2D)

RESIDUAL_LN = """let normed = compute(x, projected, w, bias) {
    @kernel fused
    for r in 0..rows:
        var sum = 0.0
        var sq_sum = 0.0
        for h in 0..hidden:
            let val = x[r, h] + projected[r, h]
            sum += val
            sq_sum += val * val
        let mean = sum / hidden
        let var = sq_sum / hidden - mean * mean
        let inv_std = rsqrt(var + 1e-5)
        for h in 0..hidden:
            let val = x[r, h] + projected[r, h]
            out[r, h] = (val - mean) * inv_std * w[h] + bias[h]
}
"""

LAYER_NORM = """let normed = compute(x, w, bias) {
    @kernel fused
    for r in 0..rows:
        var mean = 0.0
        for h in 0..hidden:
            mean += x[r, h]
        mean /= hidden
        var var = 0.0
        for h in 0..hidden:
            let d = x[r, h] - mean
            var += d * d
        let inv_std = rsqrt(var / hidden + 1e-5)
        for h in 0..hidden:
            out[r, h] = (x[r, h] - mean) * inv_std * w[h] + bias[h]
}
"""

RMS_NORM = """let normed = compute(x, w) {
    @kernel fused
    for r in 0..rows:
        var ss = 0.0
        for h in 0..hidden:
            ss += x[r, h] * x[r, h]
        let inv = rsqrt(ss / hidden + 1e-6)
        for h in 0..hidden:
            out[r, h] = x[r, h] * inv * w[h]
}
"""

BIAS_GELU = """let y = compute(x, bias) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = gelu(x[i, j] + bias[j])
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "cuda.json"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rows", default="")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile peers")
    ap.add_argument("--flush", choices=("read", "write"), default="read",
                    help="empty L2 before each repetition by reading a buffer (clean lines) or "
                         "by zeroing it (dirty lines the timed call writes back)")
    ap.add_argument("--tune", action="store_true", help="add a tuned row after each row")
    ap.add_argument("--tune-budget", type=float, default=60.0, help="seconds per search")
    ap.add_argument("--mma-choices", nargs="?", const="all", default="", choices=("all", "wgmma"),
                    help="the half-precision attention rows also with each tensor-core block shape "
                         "(`wgmma`: the warpgroup kernel's only)")
    ap.add_argument("--mma-match", default="", metavar="W1,W2",
                    help="with --mma-choices: only the candidates whose label holds one of these words")
    ap.add_argument("--conv-sweep", type=int, default=0, metavar="N",
                    help="the conv2d rows also with each of the first N configurations of the "
                         "GEMM schedule's space (tensor-core ones for TF32 and f16)")
    ap.add_argument("--gemm-sweep", type=int, default=0, metavar="N",
                    help="time the first N tensor-core GEMM configurations, nothing else")
    ap.add_argument("--gemm-shapes", default="", metavar="MxNxK:dtype,...",
                    help="--gemm-sweep on these shapes instead of the square rows "
                         "(e.g. 4096x2304x768:f16, the transformer block's QKV projection)")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from zynbook.backends.cuda.device import CudaDevice
    from kernel_sources import FLASH_TEMPLATE
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = CudaDevice(0)
    T = Timer(torch, dev.l2_bytes, args.flush)
    reps = args.reps
    want = set(args.rows.split(",")) if args.rows else None
    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape, dtype=torch.float32):
        return torch.randn(*shape, device="cuda", generator=gen, dtype=torch.float32).to(dtype)

    # copy bandwidth of this GPU, this run
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    t_copy = T.median(lambda: dst.copy_(src), 10)
    copy_bw = 2 * src.numel() * 4 / t_copy
    del src, dst
    print(f"device: {dev.name} ({dev.info()['compute_capability']}, {dev.multiprocessors} SMs); "
          f"copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)", flush=True)

    if args.gemm_sweep:
        gemm_sweep(dev, T, torch, rnd, reps, args.gemm_sweep, want, args.gemm_shapes)
        return

    copies = {}

    def same_size_copy(nbytes: int) -> float:
        """The time of a copy moving `nbytes` (half read, half written): the launch and the
        ramp a short kernel pays are in it, which the 1 GiB copy above spreads thin."""
        if nbytes not in copies:
            a = torch.empty(nbytes // 8, dtype=torch.float32, device="cuda")
            b = torch.empty_like(a)
            copies[nbytes] = T.median(lambda: b.copy_(a), reps)
            del a, b
        return copies[nbytes]

    def compiled_peer(fn):
        if args.no_compile:
            return None
        try:
            return torch.compile(fn)
        except Exception:
            return None

    def add(row, shape, dtype, zyn_fn, peers, nbytes=None, flops=None, schedule="", check=None,
            tune_s=None, peak=None):
        if want and row not in want:
            return
        if check is not None:
            check()
        tz = T.median(zyn_fn, reps)
        for peer, fn in peers:
            if fn is None:
                continue
            try:
                tp = T.median(fn, reps)
            except Exception as err:
                print(f"  {row}: peer {peer} failed: {err}", flush=True)
                continue
            rec = dict(row=row, device=dev.name, dtype=dtype, shape=shape, peer=peer,
                       zynbook_ms=tz * 1e3, peer_ms=tp * 1e3, ratio=tp / tz, schedule=schedule)
            if nbytes:
                rec["zynbook_bw_share"] = nbytes / tz / copy_bw
                rec["peer_bw_share"] = nbytes / tp / copy_bw
                rec["same_copy_share"] = same_size_copy(nbytes) / tz
            if flops:
                rec["zynbook_tflops"] = flops / tz / 1e12
                rec["peer_tflops"] = flops / tp / 1e12
                top = peak_tflops(dev.name, peak or dtype.split()[0])
                if top:
                    rec["peak_tflops"] = top
                    rec["zynbook_peak_share"] = flops / tz / 1e12 / top
                    rec["peer_peak_share"] = flops / tp / 1e12 / top
            if tune_s is not None:
                rec["tune_s"] = tune_s
            rows.append(rec)
            print(f"  {row:<22} {peer:<26} zyn {tz * 1e3:8.3f} ms  peer {tp * 1e3:8.3f} ms  "
                  f"ratio {tp / tz:5.2f}" + (f"  tuning {tune_s:.1f} s" if tune_s is not None else ""),
                  flush=True)

    def tuned(row, shape, dtype, k, sizes, tensors, out, peers, **kw):
        """The row again with the kernel as `@autotune` picks it; the search's seconds (or,
        with a record, the seconds to the compiled winner) as `tune_s`."""
        from zynbook import tuning
        if not args.tune or (want and row not in want):
            return
        t0 = time.perf_counter()
        tuner = tuning.Tuner(dev, k, sizes, args.tune_budget)
        if len(tuner.candidates) < 2:
            print(f"  {row}: one candidate, nothing to tune", flush=True)
            return
        plan = tuner.cached()
        if plan is None:
            inputs = [dev._as_device_array(t, b.dtype) for t, b in zip(tensors, k.inputs)]
            plan = tuner.tune(inputs, {})
        fn, comp = zyn_callable(dev, k, sizes, tensors, out, params=tuner.winner)
        tune_s = time.perf_counter() - t0
        add(row, shape, dtype + " tuned", fn, peers,
            schedule=f"{comp.program.schedule}; {plan.geometry['tuning']}", tune_s=tune_s, **kw)

    def conv_sweep(row, dtype, k, sizes, tensors, out, peer, tol):
        # `peer`: (its label, its callable)
        """With --conv-sweep N: the row again with each of the first N configurations of the
        GEMM schedule's space (its default first; on tensor cores but for f32; tiles of 64
        rows at most), and in TF32 each split tile of 64 filters with one product a step
        (gemm_split, `terms=1`), output checked."""
        from zynbook.compiler.codegen import device_target
        from zynbook.compiler.schedules.base import Choice
        from zynbook.compiler.schedules.gemm import Gemm
        if not args.conv_sweep or (want and row not in want):
            return
        space = [p for p in Gemm().space(k, device_target(dev), sizes)     # none taller than the 64 filters
                 if (p.mma or dtype == "f32") and p.bm <= 64][:args.conv_sweep]
        if dtype == "tf32":     # TF32 on warpgroup MMAs (one product a step), the split tiles'
            from zynbook.compiler.schedules.gemm import match       # shapes, the conv's first
            from zynbook.compiler.schedules.gemm_split import SPLIT_CONV_TILE, SPLIT_TILES, oriented
            form, _ = match(k, sizes)
            space += [oriented(form, *t, terms=1) for t in dict.fromkeys((SPLIT_CONV_TILE,) + SPLIT_TILES)
                      if t[1] == 64][:args.conv_sweep]
        for p in space:
            try:
                fn_p, comp_p = zyn_callable(dev, k, sizes, tensors, out, params=Choice("gemm", p))
                add(row, [32, 64, 56, 56, 3, 3], f"{dtype} {p.describe()}", fn_p,
                    [peer], flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
                    schedule=comp_p.program.schedule, peak=dtype,
                    check=check_close(lambda: (fn_p(), out)[1], peer[1], tol))
            except Exception as err:        # a configuration the device refuses
                print(f"  {row}: {p.describe()} failed: {err}", flush=True)

    def check_close(got, ref, tol):
        def f():
            g, r = got().float(), ref().float()
            err = (g - r).abs().max().item() / max(1.0, r.abs().max().item())
            assert err < tol, f"mismatch {err}"
        return f

    from zynbook import tuning as ztuning

    def with_tf32(fn, flag):
        """`fn` with cuBLAS and cuDNN allowed TF32 (as `config { allow_tf32: true }`)."""
        def run():
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = flag
            try:
                return fn()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        return run

    # ---- matmul: f32 exact and TF32 at 4096, bf16 and f16 at 4096 and 8192
    tdts = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for n, kind in ((4096, "f32"), (4096, "tf32"), (4096, "bf16"), (4096, "f16"), (8192, "bf16"),
                    (8192, "f16")):
        row = f"matmul_{n}_{kind}"
        if want and row not in want:
            continue
        tdt, dt_name, tf32 = tdts[kind], ("f32" if kind == "tf32" else kind), kind == "tf32"
        A, B = rnd(n, n, dtype=tdt), rnd(n, n, dtype=tdt)
        C = torch.empty(n, n, device="cuda", dtype=tdt)
        k, sizes = lower_program(MATMUL, {"A": A.shape, "B": B.shape}, {"A": dt_name, "B": dt_name})
        k = _with_out_dtype(k, dt_name)
        k = ztuning.allowing_tf32(k, ztuning.Settings(allow_tf32=tf32))
        fn, comp = zyn_callable(dev, k, sizes, [A, B], C)
        mm = with_tf32(lambda: torch.mm(A, B, out=C if tdt == torch.float32 else None), tf32)
        peer = "torch eager (cuBLAS" + (", TF32)" if tf32 else ")")
        tol = {"f32": 1e-3, "tf32": 5e-3, "bf16": 2e-2, "f16": 2e-2}[kind]
        add(row, [n, n, n], kind, fn, [(peer, mm)], flops=2 * n ** 3, schedule=comp.program.schedule,
            check=check_close(lambda: (fn(), C)[1], lambda: A.double() @ B.double(), tol))
        tuned(row, [n, n, n], kind, k, sizes, [A, B], C, [(peer, mm)], flops=2 * n ** 3)
        del A, B, C

    # ---- softmax over rows of 2048: 64 MiB, and 1 GiB, the copy bandwidth's own size (at 64
    # MiB a kernel's launch and ramp are a tenth of its time, as a same-size copy shows)
    for row, n_rows in (("softmax_2048", 8192), ("softmax_2048_1gib", 131072)):
        if want and row not in want:
            continue
        x = rnd(n_rows, 2048)
        y = torch.empty_like(x)
        k, sizes = lower_program(SOFTMAX_ROWS, {"x": x.shape})
        fn, comp = zyn_callable(dev, k, sizes, [x], y)
        sm = lambda: torch.softmax(x, -1)
        add(row, [n_rows, 2048], "f32", fn,
            [("torch eager", sm), ("torch.compile", compiled_peer(lambda: torch.softmax(x, -1)))],
            nbytes=2 * x.numel() * 4, schedule=comp.program.schedule,
            check=check_close(lambda: (fn(), y)[1], sm, 1e-5))
        tuned(row, [n_rows, 2048], "f32", k, sizes, [x], y, [("torch eager", sm)],
              nbytes=2 * x.numel() * 4)
        del x, y

    # ---- attention, BERT-base
    if not want or "attention_bert" in want:
        b, h, s, d = 32, 12, 512, 64
        Q, K_, V = rnd(b, h, s, d), rnd(b, h, s, d), rnd(b, h, s, d)
        O = torch.empty_like(Q)
        k, sizes = lower_program(FLASH_TEMPLATE.replace("BLOCK", "64"),
                                 {"Q": Q.shape, "K": K_.shape, "V": V.shape})
        fn, comp = zyn_callable(dev, k, sizes, [Q, K_, V], O)
        sd = lambda: F.scaled_dot_product_attention(Q, K_, V)
        add("attention_bert", [b, h, s, d], "f32", fn,
            [("torch SDPA", sd)], flops=4 * b * h * s * s * d, schedule=comp.program.schedule,
            check=check_close(lambda: (fn(), O)[1], sd, 1e-3))
        tuned("attention_bert", [b, h, s, d], "f32", k, sizes, [Q, K_, V], O, [("torch SDPA", sd)],
              flops=4 * b * h * s * s * d)
        Qh, Kh, Vh = Q.half(), K_.half(), V.half()
        add("attention_bert", [b, h, s, d], "f32 (peer f16)", fn,
            [("torch SDPA f16 (flash)", lambda: F.scaled_dot_product_attention(Qh, Kh, Vh))],
            flops=4 * b * h * s * s * d, schedule=comp.program.schedule)
        del Q, K_, V, O, Qh, Kh, Vh

    # ---- attention over f16 / bf16 (tensor cores) beside SDPA's flash kernel in the same type:
    # BERT-base, and a causal condition at 4096 (FLOPs of the admitted half)
    from attention_sources import three_pass
    from zynbook.compiler.schedules import attention_mma
    from zynbook.compiler.schedules.base import Choice
    for row, (b, h, s, d), kind, causal in (
            ("attention_bert_f16", (32, 12, 512, 64), "f16", False),
            ("attention_bert_bf16", (32, 12, 512, 64), "bf16", False),
            ("attention_causal_4096_bf16", (1, 16, 4096, 128), "bf16", True)):
        if want and row not in want:
            continue
        Q, K_, V = (rnd(b, h, s, d, dtype=tdts[kind]) for _ in range(3))
        O = torch.empty_like(Q)
        text = three_pass("causal") if causal else FLASH_TEMPLATE.replace("BLOCK", "64")
        k, sizes = lower_program(text, {"Q": Q.shape, "K": K_.shape, "V": V.shape}, dict.fromkeys("QKV", kind))
        k = _with_out_dtype(k, kind)
        fn, comp = zyn_callable(dev, k, sizes, [Q, K_, V], O)
        sd = lambda: F.scaled_dot_product_attention(Q, K_, V, is_causal=causal)
        flops = 4 * b * h * s * s * d // (2 if causal else 1)
        add(row, [b, h, s, d], kind, fn, sdpa_backends(kind, Q, K_, V, causal), flops=flops,
            schedule=comp.program.schedule, check=check_close(lambda: (fn(), O)[1], sd, 2e-2))
        tuned(row, [b, h, s, d], kind, k, sizes, [Q, K_, V], O, [(f"torch SDPA {kind} (flash)", sd)],
              flops=flops)
        for p in (mma_candidates(attention_mma, dev, k, sizes, args.mma_choices) if args.mma_choices else ()):
            if args.mma_match and not any(w in mma_label(p) for w in args.mma_match.split(",")):
                continue
            fn_p, comp_p = zyn_callable(dev, k, sizes, [Q, K_, V], O, params=Choice("attention", p))
            label = f"{kind} {mma_label(p)}"
            try:
                print(f"  {row}: {label}: {kernel_resources(comp_p)}", flush=True)
            except Exception as err:            # the timing matters more than this line
                print(f"  {row}: {label}: registers not read ({err})", flush=True)
            add(row, [b, h, s, d], label, fn_p, [(f"torch SDPA {kind} (flash)", sd)], flops=flops,
                schedule=comp_p.program.schedule, check=check_close(lambda: (fn_p(), O)[1], sd, 2e-2))
        del Q, K_, V, O

    # ---- conv2d ResNet block
    if not want or "conv2d_resnet" in want:
        xb = rnd(32, 64, 56, 56)
        w = rnd(64, 64, 3, 3) * 0.05
        bias = rnd(64)
        y = torch.empty(32, 64, 56, 56, device="cuda")
        k, sizes = lower_program(CONV, {"input": xb.shape, "kernel": w.shape, "bias": bias.shape},
                                 given=dict(stride=1, padding=1, out_h=56, out_w=56))
        fn, comp = zyn_callable(dev, k, sizes, [xb, w, bias], y)
        cv = lambda: F.conv2d(xb, w, bias, padding=1)
        add("conv2d_resnet", [32, 64, 56, 56, 3, 3], "f32", fn,
            [("torch eager (cuDNN)", cv)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
            schedule=comp.program.schedule, check=check_close(lambda: (fn(), y)[1], cv, 1e-3))
        tuned("conv2d_resnet", [32, 64, 56, 56, 3, 3], "f32", k, sizes, [xb, w, bias], y,
              [("torch eager (cuDNN)", cv)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9)
        conv_sweep("conv2d_resnet", "f32", k, sizes, [xb, w, bias], y, ("torch eager (cuDNN)", cv), 1e-3)

        cv_tf32 = with_tf32(lambda: F.conv2d(xb, w, bias, padding=1), True)
        add("conv2d_resnet", [32, 64, 56, 56, 3, 3], "f32 (peer TF32)", fn,
            [("torch eager (cuDNN, TF32)", cv_tf32)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
            schedule=comp.program.schedule)
        # ZynBook in TF32 too: the implicit GEMM on m16n8k8 tensor cores
        k32 = ztuning.allowing_tf32(k, ztuning.Settings(allow_tf32=True))
        fn32, comp32 = zyn_callable(dev, k32, sizes, [xb, w, bias], y)
        add("conv2d_resnet", [32, 64, 56, 56, 3, 3], "tf32", fn32,
            [("torch eager (cuDNN, TF32)", cv_tf32)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
            schedule=comp32.program.schedule, check=check_close(lambda: (fn32(), y)[1], cv, 5e-3))
        tuned("conv2d_resnet", [32, 64, 56, 56, 3, 3], "tf32", k32, sizes, [xb, w, bias], y,
              [("torch eager (cuDNN, TF32)", cv_tf32)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9)
        conv_sweep("conv2d_resnet", "tf32", k32, sizes, [xb, w, bias], y,
                   ("torch eager (cuDNN, TF32)", cv_tf32), 5e-3)
        del xb, y

    # ---- conv2d ResNet block in f16: f16 tensors in NCHW (channels first, contiguous) for
    # both; cuDNN picks its own algorithm (and any layout change inside its call)
    if not want or "conv2d_resnet_f16" in want:
        xh = rnd(32, 64, 56, 56, dtype=torch.float16)
        wh = (rnd(64, 64, 3, 3) * 0.05).to(torch.float16)
        bh = rnd(64, dtype=torch.float16)
        yh = torch.empty(32, 64, 56, 56, device="cuda", dtype=torch.float16)
        k16, sizes = lower_program(CONV, {"input": xh.shape, "kernel": wh.shape, "bias": bh.shape},
                                   dict(input="f16", kernel="f16", bias="f16"),
                                   given=dict(stride=1, padding=1, out_h=56, out_w=56))
        k16 = _with_out_dtype(k16, "f16")
        fn16, comp16 = zyn_callable(dev, k16, sizes, [xh, wh, bh], yh)
        cv16 = lambda: F.conv2d(xh, wh, bh, padding=1)
        add("conv2d_resnet_f16", [32, 64, 56, 56, 3, 3], "f16", fn16,
            [("torch eager (cuDNN f16, NCHW)", cv16)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
            schedule=comp16.program.schedule, check=check_close(lambda: (fn16(), yh)[1], cv16, 2e-2))
        tuned("conv2d_resnet_f16", [32, 64, 56, 56, 3, 3], "f16", k16, sizes, [xh, wh, bh], yh,
              [("torch eager (cuDNN f16, NCHW)", cv16)], flops=2 * 32 * 64 * 56 * 56 * 64 * 9)
        conv_sweep("conv2d_resnet_f16", "f16", k16, sizes, [xh, wh, bh], yh,
                   ("torch eager (cuDNN f16, NCHW)", cv16), 2e-2)
        del xh, yh

    # ---- layer norm and RMS norm over rows of 4096 (8192 rows)
    for row, text, with_bias in (("layer_norm", LAYER_NORM, True), ("rms_norm", RMS_NORM, False)):
        if want and row not in want:
            continue
        x, w, bb = rnd(8192, 4096), rnd(4096), rnd(4096)
        y = torch.empty_like(x)
        ins = [x, w, bb] if with_bias else [x, w]
        names = ("x", "w", "bias") if with_bias else ("x", "w")
        k, sizes = lower_program(text, {n: t.shape for n, t in zip(names, ins)})
        fn, comp = zyn_callable(dev, k, sizes, ins, y)
        eager = (lambda: F.layer_norm(x, (4096,), w, bb, 1e-5)) if with_bias else \
            (lambda: F.rms_norm(x, (4096,), w, 1e-6))
        add(row, [8192, 4096], "f32", fn, [("torch eager", eager)], nbytes=2 * x.numel() * 4,
            schedule=comp.program.schedule, check=check_close(lambda: (fn(), y)[1], eager, 1e-4))
        del x, y

    # ---- residual + layer norm, bias + GELU over 8192 x 4096
    if not want or "residual_layernorm" in want:
        x, p = rnd(8192, 4096), rnd(8192, 4096)
        w, bb = rnd(4096), rnd(4096)
        y = torch.empty_like(x)
        k, sizes = lower_program(RESIDUAL_LN, {"x": x.shape, "projected": p.shape, "w": w.shape,
                                               "bias": bb.shape})
        fn, comp = zyn_callable(dev, k, sizes, [x, p, w, bb], y)
        eager = lambda: F.layer_norm(x + p, (4096,), w, bb, 1e-5)
        add("residual_layernorm", [8192, 4096], "f32", fn,
            [("torch eager", eager), ("torch.compile", compiled_peer(lambda: F.layer_norm(x + p, (4096,), w, bb, 1e-5)))],
            nbytes=3 * x.numel() * 4, schedule=comp.program.schedule,
            check=check_close(lambda: (fn(), y)[1], eager, 1e-4))
        tuned("residual_layernorm", [8192, 4096], "f32", k, sizes, [x, p, w, bb], y,
              [("torch eager", eager)], nbytes=3 * x.numel() * 4)
        del x, p, y
    if not want or "bias_gelu" in want:
        x, bb = rnd(8192, 4096), rnd(4096)
        y = torch.empty_like(x)
        k, sizes = lower_program(BIAS_GELU, {"x": x.shape, "bias": bb.shape})
        fn, comp = zyn_callable(dev, k, sizes, [x, bb], y)
        eager = lambda: F.gelu(x + bb)
        add("bias_gelu", [8192, 4096], "f32", fn,
            [("torch eager", eager), ("torch.compile", compiled_peer(lambda: F.gelu(x + bb)))],
            nbytes=2 * x.numel() * 4, schedule=comp.program.schedule,
            check=check_close(lambda: (fn(), y)[1], eager, 1e-5))
        tuned("bias_gelu", [8192, 4096], "f32", k, sizes, [x, bb], y, [("torch eager", eager)],
              nbytes=2 * x.numel() * 4)
        del x, y

    print()
    print(f"{'row':<22} {'dtype':<15} {'peer':<26} {'ZynBook ms':>10} {'peer ms':>9} {'ratio':>6}  extra")
    for r in rows:
        extra = ""
        if "zynbook_bw_share" in r:
            extra = (f"bw {r['zynbook_bw_share'] * 100:.0f}% vs {r['peer_bw_share'] * 100:.0f}% of copy; "
                     f"{r['same_copy_share'] * 100:.0f}% of a same-size copy")
        if "zynbook_tflops" in r:
            extra = f"{r['zynbook_tflops']:.1f} vs {r['peer_tflops']:.1f} TFLOP/s"
            if "peak_tflops" in r:
                extra += (f" ({r['zynbook_peak_share'] * 100:.0f}% vs {r['peer_peak_share'] * 100:.0f}%"
                          f" of {r['peak_tflops']:.0f})")
        if "tune_s" in r:
            extra += f"; tuning {r['tune_s']:.1f} s"
        print(f"{r['row']:<22} {r['dtype']:<15} {r['peer']:<26} {r['zynbook_ms']:>10.3f} "
              f"{r['peer_ms']:>9.3f} {r['ratio']:>6.2f}  {extra}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(dict(device=dev.info(), copy_bandwidth=copy_bw, torch=torch.__version__,
                       rows=rows, when=time.strftime("%Y-%m-%d %H:%M:%S")), f, indent=1)
    print(f"\nwrote {args.json}")


def mma_candidates(attention_mma, dev, k, sizes, which="all") -> list:
    """Every tensor-core block shape (attention_mma.CHOICES), then the structural variants
    (128-key tiles, the 3-stage ring, packed conversions, the folded scale, the skipped
    rescale) of the shape chosen by default, each where it runs this attention."""
    from zynbook.compiler.codegen import device_target
    from zynbook.compiler.schedules.attention import match
    target = device_target(dev)
    shape, _ = match(k, target, sizes)
    space = attention_mma.choices(target, shape, sizes)
    out = [p for p in [space[0]] + list(attention_mma.CHOICES) + attention_mma.variants(space[0])
           + [p for p in space if p.wgmma] if attention_mma.why_not(target, shape, p) is None]
    return [p for p in dict.fromkeys(out) if which == "all" or p.wgmma]


def mma_label(p) -> str:
    """A tensor-core attention's parameters in a few words: block shape, then its variants."""
    extra = [f"{p.block_kv}k"] if p.block_kv != 64 else []
    extra += [f"{p.stages} stages"] if p.stages != 2 else []
    extra += [w for w, on in (("packed", p.packed), ("folded scale", p.fold_scale),
                              ("skip rescale", p.skip_rescale), ("fast math", p.fast_math)) if on]
    extra += [f"{p.occupancy} blocks/SM"] if p.occupancy else []
    extra += ["ping-pong"] if p.pingpong else []
    extra += ["TMA"] if getattr(p, "tma", False) else []
    if p.wgmma:
        return f"wgmma {p.block_q}q/{p.warps // 4}wg" + "".join(f", {e}" for e in extra)
    return f"{p.block_q}q/{p.warps}w/{'held' if p.hold_q else 'read'} Q" + "".join(f", {e}" for e in extra)


def kernel_resources(compiled) -> str:
    """Registers a thread and local (spilled) bytes of each kernel of a compiled program,
    as the driver reports them."""
    from cupy.cuda import driver
    out = []
    for step in compiled.program.steps:
        f = compiled.function(step.func, step.smem)
        regs = driver.funcGetAttribute(4, f.ptr)        # CU_FUNC_ATTRIBUTE_NUM_REGS
        local = driver.funcGetAttribute(3, f.ptr)       # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
        out.append(f"{step.func}: {regs} registers, {local} bytes local (spills)")
    return "; ".join(out)


def gemm_sweep(dev, T, torch, rnd, reps, count, want, shapes=""):
    """Time the GEMM schedule's first `count` tensor-core configurations on square matmuls
    (bf16 and f16 at 4096 and 8192, TF32 at 4096; `want`: those rows only), or on `shapes`
    ("MxNxK:dtype,...", dtype f32, tf32, bf16 or f16), beside cuBLAS and its error."""
    from zynbook import tuning as ztuning
    from zynbook.compiler.codegen import device_target
    from zynbook.compiler.schedules.base import Choice
    from zynbook.compiler.schedules.gemm import Gemm
    tdts = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    rows = [((n, n, n), kind, f"matmul_{n}_{kind}") for n, kind in
            ((4096, "bf16"), (4096, "f16"), (8192, "bf16"), (8192, "f16"), (4096, "tf32"))]
    if shapes:
        rows = [(tuple(int(v) for v in mnk.split("x")), kind, f"matmul_{mnk}_{kind}")
                for mnk, kind in (s.split(":") for s in shapes.split(","))]
    for (m, n, kk), kind, row in rows:
        if want and row not in want:
            continue
        dt, tdt = ("f32" if kind == "tf32" else kind), tdts[kind]
        A, B = rnd(m, kk, dtype=tdt), rnd(kk, n, dtype=tdt)
        C = torch.empty(m, n, device="cuda", dtype=tdt)
        k, sizes = lower_program(MATMUL, {"A": A.shape, "B": B.shape}, {"A": dt, "B": dt})
        k = ztuning.allowing_tf32(_with_out_dtype(k, dt), ztuning.Settings(allow_tf32=kind == "tf32"))
        torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
        t_peer = T.median(lambda: torch.mm(A, B), reps)
        torch.backends.cuda.matmul.allow_tf32 = False
        ref = (A.double() @ B.double()).float()
        torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
        peer_err = ((torch.mm(A, B).float() - ref).abs().max() / ref.abs().max()).item()
        torch.backends.cuda.matmul.allow_tf32 = False
        flops, top = 2 * m * n * kk, peak_tflops(dev.name, kind)
        print(f"{row}: cuBLAS {t_peer * 1e3:.3f} ms, {flops / t_peer / 1e12:.0f} TFLOP/s, "
              f"err {peer_err:.1e}", flush=True)
        # (exact f32: its split-TF32 warpgroup tiles on Hopper, then its FMA tiles)
        space = [p for p in Gemm().space(k, device_target(dev), sizes) if p.mma or kind == "f32"][:count]
        for p in space:
            try:
                fn, comp = zyn_callable(dev, k, sizes, [A, B], C, params=Choice("gemm", p))
                fn()
                err = ((C.float() - ref).abs().max() / ref.abs().max()).item()
                t = T.median(fn, reps)
            except Exception as e:      # a configuration this GPU refuses
                print(f"  {p.describe()}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
                continue
            share = f" {flops / t / 1e12 / top * 100:3.0f}% of peak" if top else ""
            print(f"  {t * 1e3:7.3f} ms {flops / t / 1e12:6.0f} TFLOP/s{share} ratio {t_peer / t:5.2f} "
                  f"err {err:.1e}  {p.describe()}", flush=True)
        del A, B, C, ref


def _with_out_dtype(k, dtype):
    import dataclasses
    return dataclasses.replace(k, output=dataclasses.replace(k.output, dtype=dtype))


if __name__ == "__main__":
    main()
