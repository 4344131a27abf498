"""Every variant of the attention schedule's register-tiled products (PRODUCTS and
PRODUCT_VARIANTS in zynbook/compiler/schedules/attention.py) on the BERT-base shape of
bench_cuda.py's attention_bert row, beside torch SDPA f32, in one process: each compiled
with those parameters, checked against SDPA, timed as bench_cuda.py times (CUDA events, L2
flushed, medians).

    python bench/bench_attention_products.py [--reps 20] [--shape 32,12,512,64]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from bench_cuda import Timer, lower_program, zyn_callable  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--shape", default="32,12,512,64", help="batch,heads,seq,head_dim")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from kernel_sources import FLASH_TEMPLATE
    from zynbook.backends.cuda.device import CudaDevice
    from zynbook.compiler.schedules.attention import PRODUCT_VARIANTS, PRODUCTS
    from zynbook.compiler.schedules.base import Choice
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = CudaDevice(0)
    T = Timer(torch, dev.l2_bytes)
    b, h, s, d = (int(x) for x in args.shape.split(","))
    gen = torch.Generator(device="cuda").manual_seed(0)
    Q, K, V = (torch.randn(b, h, s, d, device="cuda", generator=gen) for _ in range(3))
    O = torch.empty_like(Q)
    k, sizes = lower_program(FLASH_TEMPLATE.replace("BLOCK", "64"), {"Q": Q.shape, "K": K.shape, "V": V.shape})
    want = F.scaled_dot_product_attention(Q, K, V)
    t_sdpa = T.median(lambda: F.scaled_dot_product_attention(Q, K, V), args.reps)
    flops = 4 * b * h * s * s * d
    print(f"device: {dev.name}; shape {b}x{h}x{s}x{d}; torch SDPA f32 {t_sdpa * 1e3:.3f} ms "
          f"({flops / t_sdpa / 1e12:.1f} TFLOP/s)", flush=True)
    for params in (PRODUCTS,) + PRODUCT_VARIANTS:
        name = params.describe().split("products=True")[-1].lstrip(", ") or "default"
        try:
            fn, _ = zyn_callable(dev, k, sizes, [Q, K, V], O, params=Choice("attention", params))
            fn()
            torch.cuda.synchronize()
            err = (O - want).abs().max().item()
            t = T.median(fn, args.reps)
        except Exception as e:          # a variant that fails is reported, the others still run
            print(f"  {name:<36} failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", flush=True)
            continue
        print(f"  {name:<36} {t * 1e3:8.3f} ms  {flops / t / 1e12:5.1f} TFLOP/s  "
              f"SDPA/zyn {t_sdpa / t:5.2f}  max err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
