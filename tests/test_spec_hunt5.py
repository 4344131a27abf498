"""Programs written from the spec's text (zynml-compute-system.md, gpu-kernel-library.md) and
docs/language.md as an outside tester writes them: reductions of every operator and dtype
with odd sizes, scans written as loops, shared arrays of other dtypes, fusion of
pipelines with reductions, several devices in one program, and the kernel library's less
common options. Each runs on every device present and is compared with numpy written here;
the CUDA and Metal forms run on the launch-IR emulator and CUDA compiles with nvcc."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices
import nvcc_runs

DEVICES = wanted_devices()
RNG = np.random.default_rng(5150)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(device, src, **inputs):
    return zynbook.Session(device).run(src, **inputs)


def _emulated_and_compiled(src, arrays, want):
    """`src`'s one block as launch IR for CUDA and Metal on the emulator, against `want`,
    and its CUDA source through nvcc where it is installed."""
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen import cuda
    from zynbook.compiler.targets import cuda_target, metal_target
    k, ins, sizes, scalars = lower_block(src, arrays)
    for tgt in (cuda_target(), cuda_target((8, 0)), metal_target()):
        prog = schedules.build(k, tgt, sizes)
        assert prog is not None, schedules.why_none(k, tgt, sizes)
        got = emulate_kernel(prog, k, ins, sizes, scalars)
        assert_equals_numpy(got.reshape(np.shape(want)), want, 0)
    if nvcc_runs.NVCC is not None:
        prog = cuda.render_cuda(k, sizes)
        res = nvcc_runs.run(prog.source, ("--ptx", "-arch=sm_90a" if prog.arch_specific
                                          else "-arch=sm_90"))
        assert res.returncode == 0, res.stderr[-4000:]


# ------------------------------------------------ argmax / argmin along an axis of a tile

_AM = RNG.integers(-2, 3, (7, 33)).astype(np.float32)
_AM[2, 5] = _AM[4, 0] = _AM[4, 30] = np.nan       # numpy's: the first NaN wins
_T3 = RNG.integers(-3, 3, (4, 5, 6)).astype(np.int32)
_H = RNG.standard_normal((6, 9)).astype(np.float16)

_ARG_AXIS = {
    "fused argmax axis 0": ("let r = compute(m) {\n    @kernel fused\n"
                            "    out = reduce(argmax, m, axis=0)\n}\nr\n", {"m": _AM},
                            np.argmax(_AM, 0)),
    "fused argmin axis -1": ("let r = compute(m) {\n    @kernel fused\n"
                             "    out = reduce(argmin, m, axis=-1)\n}\nr\n", {"m": _AM},
                             np.argmin(_AM, 1)),
    "argmax of a clipped slice per iteration": (
        "let r = compute(t3) {\n    for b in 0..B:\n"
        "        out[b] = reduce(argmax, t3[b, 1:4], axis=0)\n}\nr\n", {"t3": _T3},
        np.argmax(_T3[:, 1:4], 1)),
    "argmin of a tile expression per iteration": (
        "let r = compute(t3) {\n    for b in 0..B:\n"
        "        out[b] = reduce(argmin, t3[b] * 2 - t3[b, 0:1], axis=1)\n}\nr\n",
        {"t3": _T3}, np.argmin(_T3 * 2 - _T3[:, 0:1], 2)),
    "argmax of a half where": ("let r = compute(h) {\n    @kernel fused\n"
                               "    out = reduce(argmax, where(h > 0.0, h, -h), axis=0)\n}\nr\n",
                               {"h": _H}, np.argmax(np.abs(_H), 0)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(_ARG_AXIS))
def test_argmax_and_argmin_along_an_axis_of_a_tile(name, device):
    """`reduce(argmax, tile, axis=k)` inside a body is numpy's argmax along that axis on
    every device: the compiled devices refused it ("argmax along an axis of a tile inside a
    kernel body"), though the reference ran it and argmax of a whole tile compiled."""
    src, inputs, want = _ARG_AXIS[name]
    assert_equals_numpy(_run(device, src, **inputs), want.astype(np.int64), 0)


@pytest.mark.parametrize("name", ["fused argmax axis 0",
                                  "argmin of a tile expression per iteration"])
def test_argmax_along_an_axis_of_a_tile_for_cuda_and_metal(name):
    src, inputs, want = _ARG_AXIS[name]
    _emulated_and_compiled(src, inputs, want.astype(np.int64))
