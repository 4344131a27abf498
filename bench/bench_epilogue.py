"""A GEMM with its activation fused in the epilogue, beside cuBLAS and torch.compile.

The transformer block's feed-forward products (f16, x[4096, 768] @ w[768, 3072] then GELU,
and [4096, 3072] @ [3072, 768]) with each epilogue: none, GELU written with tanh (as the
block writes it), the `gelu` builtin, and the sigmoid form of the same tanh GELU. Peers:
cuBLAS alone (torch.mm), torch.mm then F.gelu, and torch.compile of the two; ratio = best
peer time / ZynBook time (cuBLAS for the bare product, the faster of the other two for an
activation). CUDA events, L2 flushed, medians. `--sweep N` also times the GELU row with the first N tensor-core
configurations of the GEMM schedule's space fed by the copy engine.

    python bench/bench_epilogue.py [--reps 30] [--sweep 0]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench_cuda import Timer, lower_program, zyn_callable  # noqa: E402

BODY = """let y = compute(a, w) {
    for i in 0..m, j in 0..n:
        var sum = 0.0
        for h in 0..k:
            sum += a[i, h] * w[h, j]
        out[i, j] = ACT
}
"""
TANH = "sum * 0.5 * (1.0 + tanh(0.7978845608 * (sum + 0.044715 * sum * sum * sum)))"
EPILOGUES = {"none": "sum", "gelu_tanh": TANH, "gelu_builtin": "gelu(sum)",
             "gelu_sigmoid": "sum / (1.0 + exp(-1.5957691216 * (sum + 0.044715 * sum * sum * sum)))"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--sweep", type=int, default=0)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from zynbook.backends.cuda.device import CudaDevice
    from zynbook.compiler.codegen import device_target
    from zynbook.compiler.schedules.base import Choice
    from zynbook.compiler.schedules.gemm import Gemm
    import dataclasses
    dev = CudaDevice(0)
    T = Timer(torch, dev.l2_bytes)
    print(f"device: {dev.name}", flush=True)
    for m, n, k in ((4096, 3072, 768), (4096, 768, 3072), (4096, 2304, 768)):
        a = torch.randn(m, k, device="cuda").half()
        w = (torch.randn(k, n, device="cuda") / k ** 0.5).half()
        c = torch.empty(m, n, device="cuda", dtype=torch.half)
        flops = 2 * m * n * k
        mm = T.median(lambda: torch.mm(a, w), args.reps)
        mmg = T.median(lambda: F.gelu(torch.mm(a, w), approximate="tanh"), args.reps)
        comp = torch.compile(lambda: F.gelu(torch.mm(a, w), approximate="tanh"))
        tc = T.median(comp, args.reps)
        print(f"{m}x{n}x{k}: cuBLAS {mm * 1e6:.1f} us ({flops / mm / 1e12:.0f} TFLOP/s); "
              f"mm+gelu {mmg * 1e6:.1f} us; compiled {tc * 1e6:.1f} us", flush=True)
        ref = F.gelu(torch.mm(a.float(), w.float()), approximate="tanh")
        for name, act in EPILOGUES.items():
            kern, sizes = lower_program(BODY.replace("ACT", act), {"a": a.shape, "w": w.shape},
                                        {"a": "f16", "w": "f16"})
            kern = dataclasses.replace(kern, output=dataclasses.replace(kern.output, dtype="f16"))
            cands = [None]
            if args.sweep and name == "gelu_tanh":
                cands += [Choice("gemm", p) for p in Gemm().space(kern, device_target(dev), sizes)
                          if p.tma][:args.sweep]
            for params in cands:
                try:
                    fn, compiled = zyn_callable(dev, kern, sizes, [a, w], c, params=params)
                    t = T.median(fn, args.reps)
                except Exception as e:
                    print(f"  {name}: {str(e).splitlines()[0]}", flush=True)
                    continue
                # the best peer: cuBLAS alone for the bare product, else the faster of
                # mm then gelu and its compiled form
                best = mm if name == "none" else min(mmg, tc)
                err = "" if name == "none" else \
                    f" err {((c.float() - ref).abs().max() / ref.abs().max()).item():.1e}"
                label = compiled.program.schedule.split("(gemm: ")[-1][:-1] if params else ""
                print(f"  {name:13s} {t * 1e6:7.1f} us {flops / t / 1e12:5.0f} TFLOP/s "
                      f"ratio {best / t:4.2f}{err} {label}", flush=True)
        del a, w, c


if __name__ == "__main__":
    main()
