"""The CPU GEMM schedule (compiler/schedules/cpu_gemm.py): packed panels and a register
micro-kernel, on the launch-IR emulator for several parameter choices and compiled on
`cpu:native`, against numpy written here: odd sizes, every operand layout, slices of K
that do not divide it, epilogues, a guarded accumulation, batches, a convolution, f64."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402

from compute_testing import emulate_kernel, lower_block  # noqa: E402
from kernel_sources import EPILOGUE, GUARDED  # noqa: E402
from tolerances import tolerance  # noqa: E402
from zynbook.backends.cpu import native  # noqa: E402
from zynbook.compiler import schedules  # noqa: E402
from zynbook.compiler.schedules.cpu_gemm import CpuGemm, CpuGemmParams, micro_tile  # noqa: E402
from zynbook.compiler.targets import cpu_target, cuda_target  # noqa: E402

CPU = cpu_target()
# small micro-tiles keep the emulator quick; a K slice shorter than K, tiles of odd shape
PARAMS = [CpuGemmParams(4, 8, 16, 8, 16), CpuGemmParams(3, 4, 64, 6, 8),
          CpuGemmParams(2, 16, 512, 4, 32)]


def matmul_source(ta: bool, tb: bool, dtype: str = "f32") -> str:
    a = "A[k, i]" if ta else "A[i, k]"
    b = "B[j, k]" if tb else "B[k, j]"
    return f"""let y = compute(A, B) {{
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += {a} * {b}
        out[i, j] = acc
}}
y
"""




BATCHED = """let y = compute(A, B) {
    @kernel batched_matmul
    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[b, i, k] * B[b, k, j]
        out[b, i, j] = sum
}
y
"""


def _normals(rng, dtype, *shape):
    return rng.standard_normal(shape).astype(dtype)


def cases(dtype=np.float32):
    """name -> (source, arrays, numpy result in f64)."""
    rng = np.random.default_rng(5)
    M, N, Kd = 37, 53, 101
    out = {}
    for ta in (False, True):
        for tb in (False, True):
            a = _normals(rng, dtype, *((Kd, M) if ta else (M, Kd)))
            b = _normals(rng, dtype, *((N, Kd) if tb else (Kd, N)))
            A, B = a.astype(np.float64), b.astype(np.float64)
            out[f"layout_{'t' if ta else 'n'}{'t' if tb else 'n'}"] = (
                matmul_source(ta, tb), {"A": a, "B": b}, (A.T if ta else A) @ (B.T if tb else B))
    a, b, bias = _normals(rng, dtype, M, Kd), _normals(rng, dtype, Kd, N), _normals(rng, dtype, N)
    from math import erf
    acc = a.astype(np.float64) @ b + bias
    pre = np.maximum(acc, 0.0) + bias * 0.5
    gelu = 0.5 * pre * (1.0 + np.vectorize(erf)(pre / np.sqrt(2.0)))
    out["epilogue"] = (EPILOGUE, {"A": a, "B": b, "bias": bias}, gelu)
    a, b = _normals(rng, dtype, 33, 40), _normals(rng, dtype, 40, 19)
    mask = np.arange(40)[None, :] <= np.arange(33)[:, None]
    out["guarded"] = (GUARDED, {"A": a, "B": b}, 1.5 + (a.astype(np.float64) * mask) @ b)
    a, b = _normals(rng, dtype, 3, 37, 21), _normals(rng, dtype, 3, 21, 29)
    out["batched"] = (BATCHED, {"A": a, "B": b}, a.astype(np.float64) @ b)
    return out


CASES32 = cases()


def _check(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, **tolerance(dtype, "contraction"))


@pytest.mark.parametrize("name", sorted(CASES32))
def test_emulated_every_form_and_parameter_choice(name):
    src, arrays, want = CASES32[name]
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    assert CpuGemm().why_not(kernel, CPU, sizes) is None
    for params in PARAMS[:2] if name != "layout_nn" else PARAMS:
        prog = CpuGemm().build(kernel, CPU, sizes, params)
        _check(emulate_kernel(prog, kernel, ins, sizes, scalars), want, "f32")


def test_emulated_convolution_is_an_implicit_gemm():
    kernel, sizes, make, ref = K.conv2d(batch=1, cin=3, cout=16, h=6, w=7)
    ins = make(np.random.default_rng(2))
    prog = CpuGemm().build(kernel, CPU, sizes, CpuGemmParams(4, 8, 8, 8, 16))
    assert "implicit GEMM" in prog.schedule
    _check(emulate_kernel(prog, kernel, ins, sizes), ref(ins, sizes), "f32")


def test_emulated_f64_keeps_f64_panels():
    src, arrays, _ = cases(np.float64)["layout_nt"]
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    A, B = (x.astype(np.float64) for x in ins)
    prog = CpuGemm().build(kernel, CPU, sizes, CpuGemmParams(3, 4, 32, 6, 8))
    from zynbook.compiler.launch import ir
    assert {a.dtype for a in ir.walk(prog) if isinstance(a, ir.Array)} == {"f64"}
    _check(emulate_kernel(prog, kernel, ins, sizes, scalars), A @ B.T, "f64")


def test_chosen_on_the_cpu_only():
    kernel, sizes, _, _ = K.matmul(64, 64, 64)
    assert schedules.chosen(kernel, CPU, sizes).name == "cpu_gemm"
    assert schedules.chosen(kernel, cuda_target(), sizes).name == "gemm"
    assert "C++" in CpuGemm().why_not(kernel, cuda_target(), sizes)
    small, sz, _, _ = K.matmul(8, 64, 64)
    assert "M=8" in CpuGemm().why_not(small, CPU, sz)


def test_parameters_follow_the_vector_registers_and_the_cores():
    kernel, sizes, _, _ = K.matmul(1024, 1024, 1024)
    for simd, mr, nr in ((64, 8, 32), (32, 6, 16), (16, 6, 8)):
        from dataclasses import replace
        t = replace(CPU, simd_bytes=simd, cores=2)
        assert micro_tile(t, "f32") == (mr, nr)
        p = CpuGemm().default(kernel, t, sizes)
        assert (p.mr, p.nr) == (mr, nr) and p.valid()
        space = CpuGemm().space(kernel, t, sizes)
        assert space[0] == p and len(set(space)) == len(space) > 3
    assert micro_tile(replace(CPU, simd_bytes=64), "f64") == (8, 16)
    # a small product is cut into a tile per core
    small, sz, _, _ = K.matmul(40, 64, 30)
    p = CpuGemm().default(small, replace(CPU, cores=4), sz)
    assert -(-40 // p.mc) * -(-64 // p.nc) >= 4


# ---------------------------------------------------------------------------- native

needs_compiler = pytest.mark.skipif(native.find_compiler() is None, reason="no C/C++ compiler")


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    old = os.environ.get("ZYNBOOK_CACHE_DIR")
    os.environ["ZYNBOOK_CACHE_DIR"] = str(tmp_path_factory.mktemp("zynbook-cpu-gemm"))
    yield native.NativeCpuDevice(native.find_compiler())
    if old is None:
        os.environ.pop("ZYNBOOK_CACHE_DIR", None)
    else:
        os.environ["ZYNBOOK_CACHE_DIR"] = old


@needs_compiler
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES32))
def test_native_equals_numpy(device, name, dtype):
    src, arrays, want = (CASES32 if dtype == "f32" else CASES64)[name]
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    plan = device.prepare(kernel, sizes)
    assert "cpu_gemm" in plan.compiled.program.schedule
    got, _ = plan.launch(ins, scalars)
    _check(got, want, dtype)


CASES64 = cases(np.float64)


@needs_compiler
def test_native_slices_of_k_and_a_tile_of_edges(device):
    """K in slices that do not divide it (sums kept between slices), tiles cut by both edges."""
    src, arrays, want = CASES32["layout_tn"]
    kernel, ins, sizes, scalars = lower_block(src, arrays)
    for params in (CpuGemmParams(8, 32, 24, 16, 32), CpuGemmParams(6, 16, 50, 30, 48)):
        plan = device.prepare(kernel, sizes, schedules.Choice("cpu_gemm", params))
        assert f"kc={params.kc}" in plan.compiled.program.schedule
        _check(plan.launch(ins, scalars)[0], want, "f32")


@needs_compiler
def test_native_larger_product_with_several_tiles_per_core(device):
    rng = np.random.default_rng(3)
    a, b = _normals(rng, np.float32, 301, 517), _normals(rng, np.float32, 517, 263)
    kernel, ins, sizes, scalars = lower_block(matmul_source(False, False), {"A": a, "B": b})
    got, _ = device.prepare(kernel, sizes).launch(ins, scalars)
    _check(got, a.astype(np.float64) @ b, "f32")


@needs_compiler
@pytest.mark.parametrize("dtype", ["f16", "bf16", "i32"])
def test_native_narrow_and_integer_operands_are_converted_in_the_panels(device, dtype):
    """f16, bf16 (held as f32) and integer operands are converted once, when packed; the
    sums are f32 and the store converts to the output's dtype."""
    if dtype == "i32":
        rng = np.random.default_rng(11)
        a = rng.integers(-5, 5, (45, 37)).astype(np.int32)
        b = _normals(rng, np.float32, 37, 29)
        kernel, ins, sizes, scalars = lower_block(matmul_source(False, False), {"A": a, "B": b})
        want = a.astype(np.float64) @ b
    else:
        kernel, sizes, make, ref = K.matmul_t(45, 29, 37, dtype, False, True)
        ins = make(np.random.default_rng(12))
        want = ref(ins, sizes).astype(np.float64)
    plan = device.prepare(kernel, sizes)
    assert "cpu_gemm" in plan.compiled.program.schedule
    got, _ = plan.launch(ins, {})
    _check(got, want, "f16" if dtype in ("f16", "bf16") else "f32")
