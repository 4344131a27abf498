"""Writes the weights examples/transformer_block.zyn reads as `model` (one layer of the shapes
its header lists, seeded) to a safetensors file:

    python scripts/example_weights.py build/transformer_block.safetensors
    zynbook run examples/transformer_block.zyn --weights model=build/transformer_block.safetensors
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import zynbook  # noqa: E402

SHAPES = {"qkv_proj": (24, 72), "out_proj": (24, 24), "ln1_weight": (24,), "ln1_bias": (24,),
          "ffn_up": (24, 40), "ffn_down": (40, 24), "ln2_weight": (24,), "ln2_bias": (24,)}


def layer(rng) -> dict:
    out = {}
    for name, shape in SHAPES.items():
        if name.endswith("_weight"):
            out[name] = np.ones(shape, np.float32)
        else:
            out[name] = (rng.standard_normal(shape) * 0.2).astype(np.float32)
    return out


def main(argv=None) -> int:
    path = Path((argv or sys.argv[1:] or ["build/transformer_block.safetensors"])[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    zynbook.save_weights(path, {"layers": [layer(np.random.default_rng(36))]})
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
