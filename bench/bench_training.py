"""Training step time: the tiny GPT of tutorial 07 (zynbook.nn.model.TinyGPT, every number a
ZynML kernel) on ZynBook devices, beside the same model written in PyTorch (eager) on the
matching PyTorch device, from the same initial weights on the same batches. Prints the median
step time after warm-up, the loss curve's first and last values (they should agree between
the two), the activation memory kept with and without checkpointing and the peak device memory
of a step both ways (the interface's count of live buffers; on CUDA also CuPy's pool, and
PyTorch's max_memory_allocated beside it); writes JSON.

    python bench/bench_training.py [--devices cpu,cuda:0,vulkan:0] [--steps 60] [--warmup 5]
                                   [--json bench/results/training.json]

`ratio` is PyTorch time / ZynBook time (above 1: ZynBook is faster).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zynbook  # noqa: E402
from zynbook.nn.model import CharTokenizer, GPTConfig, TinyGPT, init_weights  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def torch_model(torch, host, c, device):
    """(parameters by dotted name, loss function) of the same model in PyTorch."""
    F = torch.nn.functional
    params = {"embed": host["embed"], "final_norm": host["final_norm"], "lm_head": host["lm_head"]}
    for i, layer in enumerate(host["layers"]):
        params.update({f"layers.{i}.{k}": v for k, v in layer.items()})
    params = {k: torch.tensor(v, device=device, requires_grad=True) for k, v in params.items()}
    hd = c.head_dim

    def rope(x, S, heads):
        x = x.reshape(S, heads, hd // 2, 2)
        freq = c.rope_base ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64, device=device) / hd)
        ang = (torch.arange(S, dtype=torch.float64, device=device)[:, None] * freq[None]).float()
        cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        x0, x1 = x[..., 0], x[..., 1]
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).reshape(S, -1)

    def loss_fn(ids, targets):
        S, w = len(ids), params
        x = F.embedding(ids, w["embed"])
        for i in range(c.n_layers):
            L = f"layers.{i}."
            h = F.rms_norm(x, (c.dim,), w[L + "attn_norm"], c.eps)
            q = rope(h @ w[L + "wq"], S, c.n_heads).reshape(S, c.n_heads, hd).transpose(0, 1)
            k = rope(h @ w[L + "wk"], S, c.n_kv_heads).reshape(S, c.n_kv_heads, hd).transpose(0, 1)
            v = (h @ w[L + "wv"]).reshape(S, c.n_kv_heads, hd).transpose(0, 1)
            g = c.n_heads // c.n_kv_heads
            k, v = k.repeat_interleave(g, 0), v.repeat_interleave(g, 0)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.transpose(0, 1).reshape(S, -1) @ w[L + "wo"]
            h2 = F.rms_norm(x, (c.dim,), w[L + "mlp_norm"], c.eps)
            x = x + (F.silu(h2 @ w[L + "w1"]) * (h2 @ w[L + "w3"])) @ w[L + "w2"]
        logits = F.rms_norm(x, (c.dim,), w["final_norm"], c.eps) @ w["lm_head"]
        return F.cross_entropy(logits, targets, ignore_index=c.pad_id)
    return params, loss_fn


def batches(data, n, S, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        i = int(rng.integers(0, len(data) - S - 1))
        out.append((data[i:i + S], data[i + 1:i + S + 1]))
    return out


def time_zynbook(device_id, c, host, work, warmup):
    dev = zynbook.device(device_id)
    model = TinyGPT(dev, c, host)
    losses, times = [], []
    for k, (x, y) in enumerate(work):
        t0 = time.perf_counter()
        losses.append(model.train_step(x, y))        # the loss is read back: a sync per step
        times.append(time.perf_counter() - t0)
    ckpt = TinyGPT(dev, GPTConfig(**{**c.__dict__, "memory_budget": 0}), host)
    ckpt.loss_and_grads(*work[0])
    whole = TinyGPT(dev, c, host)
    peaks, ckpt_times = {}, []
    for name, m in (("whole", whole), ("checkpointed", ckpt)):
        m.loss_and_grads(*work[0])                  # compiled
        before = dev.memory_stats()["live_bytes"]
        dev.reset_peak_memory()
        t0 = time.perf_counter()
        loss, grads = m.loss_and_grads(*work[1])
        dev.sync()
        if name == "checkpointed":
            ckpt_times.append(time.perf_counter() - t0)
        stats = dev.memory_stats()
        peaks[name] = (stats["peak_bytes"] - before, stats["pool_peak_bytes"], loss)
        del grads
    for x, y in work[2:2 + 5]:
        t0 = time.perf_counter()
        ckpt.train_step(x, y)
        ckpt_times.append(time.perf_counter() - t0)
    return {"device": dev.id, "ms_per_step": 1e3 * statistics.median(times[warmup:]),
            "ms_per_step_checkpointed": 1e3 * statistics.median(ckpt_times),
            "first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])),
            "activation_bytes": model.last_stored_bytes,
            "activation_bytes_checkpointed": ckpt.last_stored_bytes,
            "peak_step_bytes": peaks["whole"][0], "peak_step_bytes_checkpointed": peaks["checkpointed"][0],
            "cuda_pool_peak_bytes": peaks["whole"][1],
            "cuda_pool_peak_bytes_checkpointed": peaks["checkpointed"][1],
            "loss_whole_vs_checkpointed": [peaks["whole"][2], peaks["checkpointed"][2]]}


def time_torch(torch_device, c, host, work, warmup):
    import torch
    params, loss_fn = torch_model(torch, host, c, torch_device)
    decay = [p for k, p in params.items() if not k.endswith("norm")]
    no_decay = [p for k, p in params.items() if k.endswith("norm")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c.lr, betas=c.betas, eps=c.adam_eps)
    losses, times = [], []
    for x, y in work:
        xi = torch.tensor(x.astype(np.int64), device=torch_device)
        yi = torch.tensor(y.astype(np.int64), device=torch_device)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(xi, yi)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
    peak = None
    if torch_device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        opt.zero_grad()
        loss_fn(xi, yi).backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    return {"device": f"torch:{torch_device}", "ms_per_step": 1e3 * statistics.median(times[warmup:]),
            "first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])),
            "peak_step_bytes": peak}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seq", type=int, default=48)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    text = "".join(p.read_text() for p in sorted((ROOT / "examples").glob("*.zyn")))
    tok = CharTokenizer(text)
    data = tok.encode(text)
    c = GPTConfig(vocab=tok.vocab, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn=64,
                  max_seq=64, lr=1e-2, seed=0)
    host = init_weights(c)
    work = batches(data, args.steps, args.seq)
    rows = []
    for device_id in args.devices.split(","):
        z = time_zynbook(device_id, c, host, work, args.warmup)
        row = {"zynbook": z}
        torch_device = "cuda" if device_id.startswith("cuda") else "cpu"
        try:
            row["torch"] = time_torch(torch_device, c, host, work, args.warmup)
            row["ratio"] = row["torch"]["ms_per_step"] / z["ms_per_step"]
        except ImportError:
            row["torch"] = None
        rows.append(row)
        t = row["torch"]
        print(f"{z['device']:>12}: {z['ms_per_step']:8.1f} ms/step, loss {z['first_loss']:.3f} -> "
              f"{z['last_loss']:.3f}; activations kept {z['activation_bytes']} B "
              f"({z['activation_bytes_checkpointed']} B checkpointed)")
        print(f"{'':>12}  peak device memory of a step (the interface's buffers) "
              f"{z['peak_step_bytes'] / 1e3:.1f} kB, {z['peak_step_bytes_checkpointed'] / 1e3:.1f} kB "
              f"checkpointed ({z['ms_per_step_checkpointed']:.1f} ms/step), the same loss "
              f"{z['loss_whole_vs_checkpointed'][0]:.5f} / {z['loss_whole_vs_checkpointed'][1]:.5f}"
              + (f"; CuPy pool peak {z['cuda_pool_peak_bytes'] / 1e6:.2f} MB, "
                 f"{z['cuda_pool_peak_bytes_checkpointed'] / 1e6:.2f} MB checkpointed"
                 if z["cuda_pool_peak_bytes"] is not None else ""))
        if t:
            print(f"{t['device']:>12}: {t['ms_per_step']:8.1f} ms/step, loss {t['first_loss']:.3f} -> "
                  f"{t['last_loss']:.3f}; ratio torch/zynbook {row['ratio']:.3f}"
                  + (f"; peak of a step {t['peak_step_bytes'] / 1e3:.1f} kB"
                     if t.get("peak_step_bytes") is not None else ""))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"steps": args.steps, "seq": args.seq,
                                               "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
