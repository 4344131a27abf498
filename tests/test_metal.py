"""Metal backend: the MSL renderer, checked without a Mac by compiling the generated MSL as
C++20 against tests/metal_emu/metal_stdlib and running it on the CPU (threads of a
threadgroup as real threads, real barriers), compared with the CPU reference executor.
docs/metal.md says what this proves and what it does not."""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import cir
from zynbook.compiler.codegen import msl
from zynbook.errors import ZynMLDeviceError

from compute_testing import float32_normals, lower_block
from kernel_sources import ATTENTION_TEMPLATE as ATTENTION
from kernel_sources import CLIPPED_FLASH_TEMPLATE, FLASH_TEMPLATE
from kernel_sources import (ACTIVATIONS, ARGMAX, ARGMIN_ROWS, BROADCAST, COL_MAX, LAYER_NORM,
                            MATH, MATMUL, MUL_ADD, REDUCE_MAX, REDUCE_SUM, RMS_NORM, ROW_SUMS,
                            SCALE_INT, SHARED_FFN, SOFTMAX_FUSED, SOFTMAX_ROWS,
                            SPEC_BATCHED_MATMUL, SPEC_CONV2D, unannotated)
from metal_emu import emulator as emu
from tolerances import assert_within

pytestmark = pytest.mark.skipif(shutil.which(emu.CXX) is None, reason="no C++ compiler")

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.zyn"))

# (rtol, atol) by kind of computation, written once
TOL = {"elementwise": (1e-5, 1e-6), "reduction": (1e-4, 1e-5), "contraction": (1e-4, 1e-5),
       "f16": (1e-2, 1e-2), "exact": (0, 0)}


RNG = np.random.default_rng(99)
randn = float32_normals(RNG)

# without the spec's @workgroup: the threadgroup is the renderer's choice
BMM = unannotated(SPEC_BATCHED_MATMUL)
CONV2D = unannotated(SPEC_CONV2D)

LAYER_NORM_128 = LAYER_NORM.replace("@workgroup(256)", "@workgroup(128)")


# Each case: source, arrays, scalars, sizes, tolerance kind, expected schedule.
# Sizes are deliberately not multiples of the threadgroup (256), the SIMD group (32) or tiles.
def _cases():
    x, y = randn(1000), randn(1000)
    m, v = randn(37, 53), randn(53)
    data = randn(20_011)
    ln_x, g, bt = randn(13, 300), RNG.random(300).astype(np.float32), randn(300)
    wide = randn(5, 3001)
    Q, K, V = randn(1, 2, 70, 8), randn(1, 2, 70, 8), randn(1, 2, 70, 8)
    mask = np.tril(np.ones((70, 70), bool))
    fq, fk, fv = randn(1, 2, 100, 16), randn(1, 2, 100, 16), randn(1, 2, 100, 16)
    sq, sk, sv = randn(1, 2, 21, 4), randn(1, 2, 21, 4), randn(1, 2, 21, 4)
    ints = RNG.integers(-50, 50, 777).astype(np.int32)
    return {
        "mul_add": (MUL_ADD, {"x": x, "y": y}, {}, {}, "elementwise", "generic"),
        "mul_add_f16": (MUL_ADD, {"x": x.astype(np.float16), "y": y.astype(np.float16)}, {}, {},
                        "f16", "generic"),
        "activations": (ACTIVATIONS, {"x": x * 3}, {}, {}, "elementwise", "generic"),
        "math": (MATH, {"x": x * 2, "y": y}, {}, {}, "elementwise", "generic"),
        "ints": (SCALE_INT, {"x": ints, "n": ints[::-1].copy()}, {}, {}, "exact", "generic"),
        "broadcast": (BROADCAST, {"matrix": m, "vector": v}, {}, {}, "elementwise", "generic"),
        "reduce_sum": (REDUCE_SUM, {"data": data}, {}, {}, "reduction", "reduce"),
        "reduce_sum_small": (REDUCE_SUM, {"data": data[:300]}, {}, {}, "reduction", "reduce"),
        "reduce_max": (REDUCE_MAX, {"data": data}, {}, {}, "exact", "reduce"),
        "argmax": (ARGMAX, {"data": data}, {}, {}, "exact", "reduce"),
        "argmax_ties": (ARGMAX, {"data": np.repeat(randn(40), 31)}, {}, {}, "exact", "reduce"),
        "argmin_rows": (ARGMIN_ROWS, {"matrix": m}, {}, {}, "exact", "reduce"),
        "row_sums": (ROW_SUMS, {"matrix": m}, {}, {}, "reduction", "reduce"),
        "row_sums_long": (ROW_SUMS, {"matrix": wide}, {}, {}, "reduction", "reduce"),
        "col_max": (COL_MAX, {"matrix": m}, {}, {}, "exact", "reduce"),
        "matmul": (MATMUL, {"A": randn(70, 33), "B": randn(33, 45)}, {}, {}, "contraction",
                   "generic"),
        "batched_matmul": (BMM, {"A": randn(3, 21, 17), "B": randn(3, 17, 19)}, {}, {},
                           "contraction", "generic"),
        "conv2d": (CONV2D, {"input": randn(2, 3, 9, 11), "kernel": randn(4, 3, 3, 3),
                            "bias": randn(4)}, {}, {"stride": 2, "padding": 1, "out_h": 5,
                                                    "out_w": 6}, "contraction", "generic"),
        "softmax_fused": (SOFTMAX_FUSED, {"logits": randn(1000)}, {}, {}, "reduction", "rows"),
        "softmax_rows": (SOFTMAX_ROWS, {"x": randn(7, 1000)}, {}, {}, "reduction", "rows"),
        "layer_norm": (LAYER_NORM_128, {"x": ln_x, "gamma": g, "beta": bt}, {"eps": 1e-5}, {},
                       "reduction", "rows"),
        "rms_norm": (RMS_NORM, {"x": ln_x, "weight": g}, {"eps": 1e-6}, {}, "reduction", "rows"),
        "attention": (ATTENTION, {"Q": Q, "K": K, "V": V, "mask": mask}, {}, {}, "contraction",
                      "flash"),
        "flash_attention": (FLASH_TEMPLATE.replace("BLOCK", "64"), {"Q": fq, "K": fk, "V": fv},
                            {}, {"seq_len": 100, "head_dim": 16}, "contraction", "flash"),
        "flash_clipped": (CLIPPED_FLASH_TEMPLATE.replace("BLOCK", "32"),
                          {"Q": fq, "K": fk, "V": fv}, {}, {"seq_len": 100, "head_dim": 16},
                          "contraction", "flash"),
        "shared_ffn": (SHARED_FFN, {"x": randn(5, 12), "up_w": randn(12, 40),
                                    "down_w": randn(40, 12)}, {}, {}, "contraction", "rows"),
    }


CASES = _cases()


@pytest.fixture(scope="module")
def lowered():
    """Every case lowered and rendered; the binaries built two at a time."""
    out = {}
    for name, (src, arrays, scalars, sizes, _, _) in CASES.items():
        k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
        out[name] = (k, ins, sz, sc, msl.render_program(k, sz))
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda p: emu.build(p), [v[4] for v in out.values()]))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_cpu_reference(lowered, name):
    k, ins, sz, sc, prog = lowered[name]
    got = emu.run(prog, ins, cir.output_shape(k, sz), sc)
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert got.shape == want.shape
    assert_within(got, want, *TOL[CASES[name][4]])


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_choice(lowered, name):
    prog = lowered[name][4]
    assert msl.schedule_name(prog) == CASES[name][5], prog.schedule
    assert prog.threadgroup_bytes <= 32768
    for d in prog.dispatches:
        assert 1 <= d.threadgroup <= 1024 and d.threadgroup % 32 == 0 and d.grid >= 1


def test_dispatch_geometry(lowered):
    first = lambda name: (lowered[name][4].dispatches[0].grid, lowered[name][4].dispatches[0].threadgroup)
    prog = lowered["reduce_sum"][4]
    assert len(prog.dispatches) == 2 and prog.dispatches[1].grid == 1
    assert first("softmax_rows")[0] == 7        # one threadgroup per row
    assert first("flash_attention") == (2 * 2, 64)     # ceil(100 / 64) query blocks x 2 heads


def test_generated_msl_reads_as_metal(lowered):
    src = lowered["layer_norm"][4].source
    assert "#include <metal_stdlib>" in src and "using namespace metal;" in src
    assert "[[buffer(0)]]" in src and "constant ZynArgs& zyn_args [[buffer(4)]]" in src
    assert "simd_sum" in src                      # rows of 300: a SIMD group each
    assert "// line " in src                      # the ZynML line each statement came from
    long_rows = lowered["softmax_rows"][4].source          # rows of 1000: a threadgroup each
    assert "rows: one block" in long_rows
    assert "threadgroup_barrier(mem_flags::mem_threadgroup)" in long_rows
    f16 = lowered["mul_add_f16"][4].source
    assert "device const half* u_x" in f16 and "half(" in f16   # ZynML names: cstyle.cname


def test_f64_is_refused_with_a_zynml_error():
    x = np.ones(10)
    k, _, sz, _ = lower_block(MUL_ADD, {"x": x, "y": x})
    with pytest.raises(ZynMLDeviceError, match="64-bit floats"):
        msl.render_program(k, sz)


def test_render_without_sizes_says_when_sizes_are_needed():
    k, _, _, _ = lower_block(MUL_ADD, {"x": randn(10), "y": randn(10)})
    assert "generated at launch" in msl.render(k)


# --------------------------------------------------- the check fails when the MSL is wrong


def _check(name, source):
    k, ins, sz, sc, prog = lowered_cache()[name]
    got = emu.run(prog, ins, cir.output_shape(k, sz), sc, source=source)
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert_within(got, want, *TOL[CASES[name][4]])


_LOWERED: dict = {}


def lowered_cache():
    if not _LOWERED:
        for name in ("mul_add", "layer_norm", "softmax_rows", "argmax_ties"):
            src, arrays, scalars, sizes, _, _ = CASES[name]
            k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
            _LOWERED[name] = (k, ins, sz, sc, msl.render_program(k, sz))
    return _LOWERED


def _broken(name, old, new, count=1):
    src = lowered_cache()[name][4].source
    assert old in src, f"mutation target `{old}` not in the {name} MSL"
    return src.replace(old, new, count)


def test_unbroken_output_passes_the_check():
    _check("mul_add", lowered_cache()["mul_add"][4].source)


@pytest.mark.parametrize("name,old,new", [
    ("mul_add", "+ 1.0f", "- 1.0f"),                                     # an operator swapped
    ("layer_norm", "[[buffer(1)]]", "[[buffer(2)]]"),                     # gamma bound to beta
    ("softmax_rows", "const T r = simd_max(v);", "const T r = simd_min(v);"),  # wrong SIMD collective
    ("argmax_ties", "(_i2 < _acci)", "(_i2 > _acci)"),                    # ties keep the last index
    ("softmax_rows", "if (((int)_lane < 2)) {\n        _part3 = _red_part3",
     "if (((int)_lane < 1)) {\n        _part3 = _red_part3"),                    # partials lost
])
def test_broken_msl_fails_the_check(name, old, new):
    broken = _broken(name, old, new)
    if "[[buffer(2)]]" in new:       # keep the binding unique: beta moves to gamma's slot
        broken = broken.replace("device const float* beta [[buffer(2)]]",
                                "device const float* beta [[buffer(1)]]")
    if name == "argmax_ties":        # the threadgroup tree keeps the last index as well
        broken = broken.replace(" < _xi)", " > _xi)")
    with pytest.raises((AssertionError, emu.EmulatorError)):
        _check(name, broken)


@pytest.mark.parametrize("old,new,what", [
    ("u_out[u_i] = ((u_x[u_i] * u_y[u_i]) + 1.0f);",
     "u_out[u_i] = expf((u_x[u_i] * u_y[u_i]) + 1.0f);", "compile"),
    ("const int u_i = _g;", "const long long u_i = _g;", "long long"),
    ("u_out[u_i] = ((u_x[u_i] * u_y[u_i]) + 1.0f);", "u_out[u_i] = erf(u_x[u_i]);", "compile"),
])
def test_c_habits_metal_lacks_are_refused(old, new, what):
    with pytest.raises(emu.EmulatorError, match=what):
        emu.build(lowered_cache()["mul_add"][4], _broken("mul_add", old, new))


def test_threadgroup_barrier_is_a_real_barrier():
    """The rows schedule, whose reductions meet at threadgroup barriers among real threads,
    gives the reference's result on every run (runs repeat: a misplaced barrier races)."""
    name = "softmax_rows"
    for _ in range(3):
        _check(name, lowered_cache()[name][4].source)


def test_native_backend_is_absent_off_macos_and_imports_nothing():
    import sys
    from zynbook.backends import metal
    if sys.platform == "darwin" and metal.available():
        devices = metal.discover()
        assert all(d.id == f"metal:{n}" for n, d in enumerate(devices))
        return
    assert metal.discover() == []
    assert "zynbook.backends.metal.device" not in sys.modules


def test_runtime_error_names_the_extent_of_the_launch(monkeypatch):
    """An index out of range reports the axis's size at the launch (6), as every device does
    (Metal gave the size's name, `x_d0`: the error flag was read without the sizes)."""
    import zynbook
    from zynbook.backends import registry
    from metal_emu.device import EmulatedMetalDevice
    dev = EmulatedMetalDevice()
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    src = "let y = compute(x, ix) {\n    for i in 0..n:\n        out[i] = x[ix[i] * 3]\n}\ny\n"
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.Session(device=dev.id).run(src, x=np.arange(6, dtype=np.float32),
                                           ix=np.array([0, 2, 1], np.int32))
    assert info.value.message == "index 6 is out of range for an axis of size 6 of `x`"


# ------------------------------------------- the spec's kernel programs on the Metal model

def _spec_cases():
    from test_spec_programs_kernels import CASES as SPEC
    # a body one thread runs alone, 8000 stores each followed by a threadgroup barrier
    # among 1024 real threads: half a minute on the model, nothing the others lack
    slow = {"out_written_twice_by_a_loop"}
    return {name: case for name, case in SPEC.items() if name not in slow}


SPEC_CASES = _spec_cases()


@pytest.mark.parametrize("name", sorted(SPEC_CASES))
def test_spec_kernel_program_equals_numpy(monkeypatch, name):
    """tests/test_spec_programs_kernels.py's programs (numpy's answers written there), each
    launch as MSL on the Metal model and equal to the reference too."""
    import zynbook
    from zynbook.backends import registry
    from metal_emu.device import EmulatedMetalDevice
    dev = EmulatedMetalDevice()
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    src, inputs, want, tol = SPEC_CASES[name]
    got = np.asarray(zynbook.Session(device=dev.id).run(src, **inputs))
    want = np.asarray(want)
    assert dev.launches and not dev.mismatches, dev.mismatches
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol, atol=tol, equal_nan=True)
