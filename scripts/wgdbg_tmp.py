import sys; sys.path.insert(0, "tests")
import numpy as np
from dataclasses import replace
from test_attention_mma import _lower, A, answer, _gpu
from zynbook.compiler.schedules import attention_wgmma as W
from zynbook.compiler.schedules.base import Choice
dev = _gpu()
def run(text, dtype, sq, d, b, h, p):
    k, ins, sz, sc = _lower(text, dtype, sq, sq, d, b, h)
    plan = dev.prepare(k, sz, params=Choice("attention", p))
    out, _ = plan.launch(ins, sc)
    want = answer(text, k, ins, sz)
    got = np.asarray(dev.to_host(out), np.float64)
    err = np.abs(got - want)
    bad = err > 2e-2 * (1 + np.abs(want))
    idx = np.argwhere(bad)
    print(f"{sq} d{d} {dtype} {p.block_q}q {p.block_kv}k {p.stages}st ov={p.overlap}: maxerr {np.nanmax(err):.3g} nan {np.isnan(got).sum()} bad {bad.sum()}",
          "rows", sorted(set(idx[:, 2].tolist()))[:12] if len(idx) else "", "heads", sorted(set(idx[:, 1].tolist())) if len(idx) else "", flush=True)
for text in (A.three_pass("causal", "const"), A.three_pass("causal")):
    for sq in (300, 256, 384):
        for p in (W.default(128), replace(W.default(128), stages=2), replace(W.default(128), block_kv=64),
                  replace(W.default(128), block_q=64, warps=4)):
            run(text, "bf16", sq, 128, 1, 4, p)
run(A.three_pass("causal", "const"), "bf16", 300, 64, 1, 4, W.default(64))
run(A.three_pass("causal", "const"), "f16", 300, 128, 1, 4, W.default(128))
