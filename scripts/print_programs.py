"""Print the programs every schedule builds for a corpus of kernels, in every dialect, one
file per program, so that a change meant to keep the generated code can be checked byte for
byte: run it before and after the change, into two folders, and `diff -r` them.

The corpus: matmuls in f32, f16 and bf16 in every operand layout (odd sizes, 4096^3 and a
transformer's 4096 x 768 x 3072), TF32 matmuls, a batched matmul, convolutions (exact and
TF32), the tests' elementwise, reduction, row and attention kernels, and half-precision
attention (tests/test_attention_wgmma.py's cases) through every attention candidate. Each is
printed for CUDA sm_90 and sm_80, C++, MSL and WGSL, with the first N parameter choices of
every schedule that applies (default 6); a choice that fails writes its error instead.

    python scripts/print_programs.py OUT_DIR [N]
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)

import cuda_cir_kernels as K  # noqa: E402
import test_attention_wgmma as TW  # noqa: E402
from test_attention_mma import _lower  # noqa: E402

from zynbook import tuning  # noqa: E402
from zynbook.compiler.codegen.dialects.cpp import CppDialect  # noqa: E402
from zynbook.compiler.codegen.dialects.cuda import CudaDialect  # noqa: E402
from zynbook.compiler.codegen.dialects.msl import MslDialect  # noqa: E402
from zynbook.compiler.codegen.dialects.wgsl import WgslDialect  # noqa: E402
from zynbook.compiler.codegen.printer import print_program  # noqa: E402
from zynbook.compiler.schedules import SCHEDULES  # noqa: E402
from zynbook.compiler.schedules.attention import Attention  # noqa: E402
from zynbook.compiler.targets import cpu_target, cuda_target, metal_target, webgpu_target  # noqa: E402

TARGETS = {"cuda90": (cuda_target((9, 0)), CudaDialect), "cuda80": (cuda_target((8, 0)), CudaDialect),
           "cpp": (cpu_target(), CppDialect), "msl": (metal_target(), MslDialect),
           "wgsl": (webgpu_target(), WgslDialect)}
KERNELS = ("relu", "axpb", "broadcast_scale", "gelu_tanh", "rope", "reduce_full", "sum_squares",
           "argmax", "row_sums", "depthwise", "layer_norm", "residual_layer_norm", "rms_norm",
           "softmax_rows", "softmax_whole", "ffn_shared", "attention", "matmul")


def tf32(kernel):
    return tuning.allowing_tf32(kernel, tuning.Settings(allow_tf32=True))


def corpus() -> list:
    """(name, kernel, sizes) of every kernel printed for every schedule."""
    out = []
    for dt in ("f32", "f16", "bf16"):
        for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
            out.append((f"mm_{dt}_{ta}{tb}_301x296x200", *K.matmul_t(301, 296, 200, dt, ta, tb)[:2]))
        out.append((f"mm_{dt}_4096", *K.matmul_t(4096, 4096, 4096, dt, False, False)[:2]))
        out.append((f"mm_{dt}_4096x768x3072", *K.matmul_t(4096, 768, 3072, dt, False, False)[:2]))
    for name, mnk, tb in (("mm_tf32_4096", (4096, 4096, 4096), False), ("mm_tf32_301", (301, 296, 200), True)):
        kernel, sizes = K.matmul_t(*mnk, "f32", False, tb)[:2]
        out.append((name, tf32(kernel), sizes))
    out.append(("bmm", *K.batched_matmul()[:2]))
    for name, args in (("conv_resnet", dict(batch=32, cin=64, cout=64, h=56, w=56)),
                       ("conv_small", {}), ("conv_s2", dict(stride=2, padding=0))):
        kernel, sizes = K.conv2d(**args)[:2]
        out += [(name, kernel, sizes), (name + "_tf32", tf32(kernel), sizes)]
    out += [(name, *getattr(K, name)()[:2]) for name in KERNELS]
    return out


def write(path: str, params, build, dialect, kernel, sizes):
    try:
        text = f"{params!r}\n" + print_program(dialect(), build(), kernel, dict(sizes)).source
    except Exception as err:        # a choice the target refuses: its error is the output
        text = f"{params!r}\nERROR {err!r}"
    with open(path, "w") as f:
        f.write(text)


def main(out: str, n: int = 6) -> int:
    os.makedirs(out, exist_ok=True)
    count = 0
    for name, kernel, sizes in corpus():
        for tname, (target, dialect) in TARGETS.items():
            for sched in SCHEDULES:
                if sched.why_not(kernel, target, sizes) is not None:
                    continue
                for i, p in enumerate(sched.space(kernel, target, sizes)[:n]):
                    write(os.path.join(out, f"{name}.{tname}.{sched.name}.{i}"), p,
                          lambda: sched.build(kernel, target, sizes, p), dialect, kernel, sizes)
                    count += 1
    attention = Attention()
    for case, (text, dtype, sq, sk, d) in sorted(TW.CASES.items()):
        kernel, _, sizes, _ = _lower(text, dtype, sq, sk, d)
        for tname in ("cuda90", "cuda80"):
            target, dialect = TARGETS[tname]
            for i, p in enumerate(attention.space(kernel, target, sizes)):
                write(os.path.join(out, f"att_{case}.{tname}.{i}"), p,
                      lambda: attention.build(kernel, target, sizes, p), dialect, kernel, sizes)
                count += 1
    return count


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6), "programs written to", sys.argv[1])
