"""The CUDA renderer without a GPU: every kernel type renders, picks its schedule, and the
generated CUDA C compiles with this machine's nvcc (`--ptx -arch=sm_90`)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
import nvcc_runs  # noqa: E402

from zynbook.compiler import cir  # noqa: E402
from zynbook.compiler.codegen import cuda  # noqa: E402
from kernel_sources import ATTENTION_TEMPLATE, FLASH_TEMPLATE, lower_template  # noqa: E402

NVCC = nvcc_runs.NVCC

EXPECTED_SCHEDULE = {
    "relu": "16-byte vector", "mul_add": "16-byte vector", "broadcast": "16-byte vector",
    "gelu": "16-byte vector", "rope": "thread:", "reduce_sum": "second launch",
    "argmax": "reduce(argmax)", "row_sums": "per output",
    "col_sums": "one thread per output", "matmul": "GEMM", "batched_matmul": "batch=3",
    "conv2d": "implicit GEMM", "layer_norm": "rows: one block", "softmax_rows": "16-byte vector loads",
    "softmax_whole": "one block runs the whole body", "ffn_shared": "block:",
    "rms_norm": "rows:", "residual_ln": "rows: one warp per row", "relu_f16": "8 consecutive",
    "matmul_f16": "tensor cores", "softmax_odd": "(4 x 1 per thread)", "softmax_short": "one warp per row",
    "softmax_ragged": "rows:", "softmax_long": "rows:", "softmax_too_long": "block:",
    "layer_norm_odd": "rows:", "rms_norm_odd": "rows:", "residual_ln_odd": "(3 x 1 per thread)",
    "matmul_odd": "8x8 per thread", "matmul_vec_ragged": "A in 16-byte loads and B in 16-byte loads",
    "matmul_vec_a_only": "; A in 16-byte loads", "bmm_vec": "batch=3", "matmul_bf16": "tensor cores",
    "matmul_f16_ragged": "tensor cores", "matmul_bf16_tt": "tensor cores", "matmul_f16_tn": "tensor cores",
    "matmul_bf16_nt": "tensor cores", "matmul_bf16_odd": "4x8 per thread",
}


def _flags(arch: str = "sm_90"):
    return ("--ptx", f"-arch={arch}")


def nvcc_compile(source: str, tmp_path, name: str, arch: str = "sm_90"):
    res = nvcc_runs.run(source, _flags(arch))
    assert res.returncode == 0, res.stderr[-4000:]
    assert ".entry" in res.ptx


@pytest.fixture(scope="module")
def queued_compiles():
    """Every compile of this file, queued at once: the compiles (nvcc processes) run beside
    one another and the tests, each test then waits for its own."""
    def kernel_program(name):
        kernel, sizes, _, _ = K.ALL[name]()
        return cuda.render_cuda(kernel, sizes)
    # (test_nvcc_compiles compiles for sm_90a where the program is arch-specific, the others
    # for sm_90 always)
    programs = ([(kernel_program, name, True) for name in sorted(K.ALL)] +
                [(_head_dim_program, head_dim, False) for head_dim, _ in HEAD_DIMS] +
                [(_spec_program, kind, False) for kind in sorted(SPEC_KERNELS)] +
                [(_row_max_program, dtype, False) for dtype in NARROW])
    futures = []
    for make, arg, by_arch in programs if NVCC else ():
        try:
            prog = make(arg)
        except Exception:       # noqa: BLE001 (the test itself says what went wrong)
            continue
        flags = _flags("sm_90a" if by_arch and prog.arch_specific else "sm_90")
        futures.append(nvcc_runs.queue(prog.source, flags))
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.parametrize("name", sorted(K.ALL))
def test_renders_with_schedule(name):
    kernel, sizes, _, _ = K.ALL[name]()
    prog = cuda.render_cuda(kernel, sizes)
    assert f'extern "C" __global__' in prog.source
    for step in prog.steps:
        assert f" {step.func}(" in prog.source
        assert all(g >= 1 for g in step.grid) and 1 <= step.block[0] <= 1024
    if name in EXPECTED_SCHEDULE:
        assert EXPECTED_SCHEDULE[name] in prog.schedule, prog.schedule


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", sorted(K.ALL))
def test_nvcc_compiles(name, tmp_path, queued_compiles):
    kernel, sizes, _, _ = K.ALL[name]()
    prog = cuda.render_cuda(kernel, sizes)
    # a program on sm_90a's warpgroup MMAs compiles for that variant, as the device does
    nvcc_compile(prog.source, tmp_path, name, "sm_90a" if prog.arch_specific else "sm_90")


SPEC_KERNELS = {
    "flash_attention": (FLASH_TEMPLATE.replace("BLOCK", "64"), [4, 4, 4], "flash attention"),
    "attention": (ATTENTION_TEMPLATE, [4, 4, 4, 2], "masked attention"),
}


HEAD_DIMS = [(64, "register-tiled"), (48, "register-tiled"), (16, "register-tiled"),
             (40, "one thread per query"), (128, "one thread per query")]


@pytest.mark.parametrize("head_dim,schedule", HEAD_DIMS)
def test_attention_schedule_by_head_dim(head_dim, schedule, tmp_path, queued_compiles):
    prog = _head_dim_program(head_dim)
    assert schedule in prog.schedule
    if NVCC:
        nvcc_compile(prog.source, tmp_path, f"attention_{head_dim}")


def _head_dim_program(head_dim):
    kernel = lower_template(ATTENTION_TEMPLATE, [4, 4, 4, 2])
    sizes = {d: (head_dim if d.endswith("_d3") or d == "head_dim" else (100 if v == 128 else v))
             for d, v in _spec_sizes(kernel).items()}
    return cuda.render_cuda(kernel, sizes)


def _spec_program(kind):
    text, ranks, _ = SPEC_KERNELS[kind]
    kernel = lower_template(text, ranks)
    return cuda.render_cuda(kernel, _spec_sizes(kernel))


def _spec_sizes(kernel):
    sizes = {}
    for d in kernel.dims:
        if d.endswith("_d0") or d == "batch":
            sizes[d] = 2
        elif d.endswith("_d1") or d == "heads":
            sizes[d] = 3
        elif d.endswith("_d3") or d == "head_dim":
            sizes[d] = 64
        else:
            sizes[d] = 128
    return sizes


@pytest.mark.parametrize("kind", sorted(SPEC_KERNELS))
def test_spec_attention_kernels_get_the_attention_schedule(kind, tmp_path, queued_compiles):
    prog = _spec_program(kind)
    assert SPEC_KERNELS[kind][2] in prog.schedule
    if NVCC:
        nvcc_compile(prog.source, tmp_path, kind)


def test_changed_attention_body_is_not_taken_for_the_spec_algorithm():
    # the same kernel with exp replaced by exp2 is not attention: generic schedule, with a note
    text = ATTENTION_TEMPLATE.replace("sum_exp += exp(", "sum_exp += exp2(")
    kernel = lower_template(text, [4, 4, 4, 2])
    prog = cuda.render_cuda(kernel, _spec_sizes(kernel))
    assert "masked attention" not in prog.schedule
    assert any("is not attention" in n and "denominator" in n for n in prog.notes)


def test_matmul_epilogue_and_bias_init_are_kept():
    kernel, sizes, _, _ = K.conv2d()
    prog = cuda.render_cuda(kernel, sizes)
    assert "bias[" in prog.source          # the accumulator starts from bias[oc]


def test_not_a_matmul_falls_back_with_a_note():
    k, sizes, _, _ = K.matmul()
    # sum += A[i, k] + B[k, j] is no contraction
    loop = k.body[0].body[0].body[1]
    upd = loop.body[0]
    prod = upd.value.right
    bad = cir.Assign(upd.name, cir.Bin("+", upd.value.left, cir.Bin("+", prod.left, prod.right, prod.ty),
                                       upd.value.ty))
    body = list(k.body[0].body[0].body)
    body[1] = cir.Loop(loop.var, loop.start, loop.stop, loop.step, (bad,), loop.parallel)
    inner = cir.Loop("j", k.body[0].body[0].start, k.body[0].body[0].stop, k.body[0].body[0].step,
                     tuple(body), True)
    outer = cir.Loop("i", k.body[0].start, k.body[0].stop, k.body[0].step, (inner,), True)
    k2 = cir.Kernel(k.name, k.kernel_type, k.inputs, k.output, k.dims, k.scalars, (outer,))
    prog = cuda.render_cuda(k2, sizes)
    assert "GEMM" not in prog.schedule
    assert any("not a plain contraction" in n for n in prog.notes)


def test_sizes_must_be_bound():
    kernel, sizes, _, _ = K.relu()
    with pytest.raises(Exception):
        cuda.render_cuda(kernel, {})


def test_generic_flash_runs_on_the_block_schedule():
    # a mutable scalar later assigned a column of maxima is a block array (tile_loops.py)
    text = FLASH_TEMPLATE.replace("BLOCK", "16")
    kernel = lower_template(text, [4, 4, 4])
    prog = cuda.render_cuda(kernel, _spec_sizes(kernel), options={"generic": True})
    assert prog.schedule.startswith("block:")
    # its arrays at a block of 64 pass the 48 KiB of static shared memory: in scratch
    kernel = lower_template(FLASH_TEMPLATE.replace("BLOCK", "64"), [4, 4, 4])
    prog = cuda.render_cuda(kernel, _spec_sizes(kernel), options={"generic": True})
    assert "shared arrays in scratch memory" in prog.schedule and prog.scratch


def test_discover_without_cupy_or_gpu_is_empty_or_devices():
    from zynbook.backends import cuda as backend
    devs = backend.discover()
    assert isinstance(devs, list)
    for d in devs:
        info = d.info()
        assert info["id"].startswith("cuda:") and "compute_capability" in info


NARROW = ["bool", "int8", "uint8", "int16", "uint16", "float16"]


def _row_max_program(dtype):
    import numpy as np
    from compute_testing import lower_block
    src = ("let t = compute(x) {\n    @kernel reduce(max, axis=1)\n    for r in 0..rows, c in 0..cols:\n"
           "        yield x[r, c]\n}\nt\n")
    kernel, _, sizes, _ = lower_block(src, {"x": np.ones((6, 1000), dtype)})
    return cuda.render_cuda(kernel, sizes)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype", NARROW)
def test_warp_reductions_of_narrow_types_compile(dtype, tmp_path, queued_compiles):
    """A row max over int8, uint8, int16 or uint16 data did not compile: the warp shuffle of
    a narrow integer gives an int, which the max functor's one type did not take (a bool
    row's max, an `or`, is one warp vote)."""
    prog = _row_max_program(dtype)
    assert ("__any_sync" if dtype == "bool" else "__shfl_xor_sync") in prog.source, prog.schedule
    nvcc_compile(prog.source, tmp_path, f"row_max_{dtype}")
