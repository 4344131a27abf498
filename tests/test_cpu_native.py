"""`cpu:native`: kernels compiled as C++ by the system compiler equal the CPU reference
executor, every kernel type, with sizes that are multiples of nothing in particular.
Libraries are cached on disk (a test-session cache directory), so each kernel compiles once."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import zynbook
from zynbook.backends import registry
from zynbook.backends.cpu import native
from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler.codegen import c as c_codegen
from zynbook.compiler.codegen import render_text
from zynbook.errors import ZynMLDeviceError

from compute_testing import float32_normals, lower_block
from kernel_sources import ATTENTION_TEMPLATE as ATTENTION
from kernel_sources import CLIPPED_FLASH_TEMPLATE, FLASH_TEMPLATE
from kernel_sources import (ACTIVATIONS, ARGMAX, ARGMIN_ROWS, BROADCAST, COL_MAX, LAYER_NORM,
                            MATH, MATMUL, MUL_ADD, REDUCE_MAX, REDUCE_SUM, RMS_NORM, ROW_SUMS,
                            SCALE_INT, SHARED_FFN, SOFTMAX_FUSED, SOFTMAX_ROWS,
                            SPEC_BATCHED_MATMUL, SPEC_CONV2D, SPEC_DEPTHWISE, block_of,
                            unannotated)
from tolerances import assert_close, tolerance

pytestmark = pytest.mark.skipif(native.find_compiler() is None, reason="no C/C++ compiler")

RNG = np.random.default_rng(7)
randn = float32_normals(RNG)


def _cases():
    x, y = randn(1003), randn(1003)
    m, v = randn(37, 53), randn(53)
    data = randn(70_001)
    ln_x, g, bt = randn(13, 301), RNG.random(301).astype(np.float32), randn(301)
    Q, K, V = randn(1, 2, 70, 8), randn(1, 2, 70, 8), randn(1, 2, 70, 8)
    mask = np.tril(np.ones((70, 70), bool))
    fq, fk, fv = randn(1, 2, 100, 16), randn(1, 2, 100, 16), randn(1, 2, 100, 16)
    ints = RNG.integers(-50, 50, 777).astype(np.int32)
    # (source, arrays, scalars, sizes, dtype, kind of computation)
    return {
        "mul_add": (MUL_ADD, {"x": x, "y": y}, {}, {}, "f32", "elementwise"),
        "mul_add_f64": (MUL_ADD, {"x": x.astype(np.float64), "y": y.astype(np.float64)}, {}, {},
                        "f64", "elementwise"),
        "mul_add_f16": (MUL_ADD, {"x": x.astype(np.float16), "y": y.astype(np.float16)}, {}, {},
                        "f16", "elementwise"),
        "activations": (ACTIVATIONS, {"x": x * 3}, {}, {}, "f32", "elementwise"),
        "math": (MATH, {"x": x * 2, "y": y}, {}, {}, "f32", "elementwise"),
        "ints": (SCALE_INT, {"x": ints, "n": ints[::-1].copy()}, {}, {}, "f64", "elementwise"),
        "broadcast": (BROADCAST, {"matrix": m, "vector": v}, {}, {}, "f32", "elementwise"),
        "reduce_sum": (REDUCE_SUM, {"data": data}, {}, {}, "f32", "reduction"),
        "reduce_sum_small": (REDUCE_SUM, {"data": data[:301]}, {}, {}, "f32", "reduction"),
        "reduce_max": (REDUCE_MAX, {"data": data}, {}, {}, "f64", "elementwise"),
        "argmax": (ARGMAX, {"data": data}, {}, {}, "f64", "elementwise"),
        "argmax_ties": (ARGMAX, {"data": np.repeat(randn(400), 171)}, {}, {}, "f64",
                        "elementwise"),
        "argmin_rows": (ARGMIN_ROWS, {"matrix": np.repeat(randn(37, 9), 3, axis=1)}, {}, {},
                        "f64", "elementwise"),
        "row_sums": (ROW_SUMS, {"matrix": m}, {}, {}, "f32", "reduction"),
        "col_max": (COL_MAX, {"matrix": m}, {}, {}, "f64", "elementwise"),
        "matmul": (MATMUL, {"A": randn(70, 33), "B": randn(33, 45)}, {}, {}, "f32",
                   "contraction"),
        "batched_matmul": (unannotated(SPEC_BATCHED_MATMUL), {"A": randn(3, 21, 17),
                                                             "B": randn(3, 17, 19)}, {}, {},
                           "f32", "contraction"),
        "conv2d": (unannotated(SPEC_CONV2D), {"input": randn(2, 3, 9, 11),
                                              "kernel": randn(4, 3, 3, 3), "bias": randn(4)},
                   {}, {"stride": 2, "padding": 1, "out_h": 5, "out_w": 6}, "f32", "contraction"),
        "depthwise": (block_of(SPEC_DEPTHWISE), {"input": randn(2, 3, 9, 11),
                                                 "kernel": randn(3, 3, 3)}, {}, {}, "f32",
                      "contraction"),
        "softmax_fused": (SOFTMAX_FUSED, {"logits": randn(1001)}, {}, {}, "f32", "reduction"),
        "softmax_rows": (SOFTMAX_ROWS, {"x": randn(7, 1001)}, {}, {}, "f32", "reduction"),
        "layer_norm": (LAYER_NORM, {"x": ln_x, "gamma": g, "beta": bt}, {"eps": 1e-5}, {},
                       "f32", "reduction"),
        "rms_norm": (RMS_NORM, {"x": ln_x, "weight": g}, {"eps": 1e-6}, {}, "f32", "reduction"),
        "attention": (ATTENTION, {"Q": Q, "K": K, "V": V, "mask": mask}, {}, {}, "f32",
                      "contraction"),
        "flash_attention": (FLASH_TEMPLATE.replace("BLOCK", "64"), {"Q": fq, "K": fk, "V": fv},
                            {}, {"seq_len": 100, "head_dim": 16}, "f32", "contraction"),
        "flash_clipped": (CLIPPED_FLASH_TEMPLATE.replace("BLOCK", "32"),
                          {"Q": fq, "K": fk, "V": fv}, {}, {"seq_len": 100, "head_dim": 16},
                          "f32", "contraction"),
        "shared_ffn": (SHARED_FFN, {"x": randn(5, 12), "up_w": randn(12, 40),
                                    "down_w": randn(40, 12)}, {}, {}, "f32", "contraction"),
    }


CASES = _cases()


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("zynbook-cache")


@pytest.fixture
def device(cache, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(cache))
    return _device()


_DEVICE: list = []


def _device():
    if not _DEVICE:
        _DEVICE.append(native.NativeCpuDevice(native.find_compiler()))
    return _DEVICE[0]


@pytest.fixture(scope="module")
def lowered(cache):
    """Every case lowered and compiled, two at a time."""
    import os
    old = os.environ.get("ZYNBOOK_CACHE_DIR")
    os.environ["ZYNBOOK_CACHE_DIR"] = str(cache)
    try:
        out = {name: lower_block(src, arrays, scalars, sizes)
               for name, (src, arrays, scalars, sizes, _, _) in CASES.items()}
        dev = _device()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda v: dev.compile(v[0], v[2]), out.values()))
    finally:
        if old is None:
            os.environ.pop("ZYNBOOK_CACHE_DIR", None)
        else:
            os.environ["ZYNBOOK_CACHE_DIR"] = old
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_cpu_reference(lowered, device, name):
    k, ins, sz, sc = lowered[name]
    got, launch = device.launch(k, ins, sz, sc)
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert got.shape == want.shape and got.dtype == want.dtype
    dtype, kind = CASES[name][4], CASES[name][5]
    assert_close(got, want, dtype, kind)
    assert launch.device == "cpu:native" and launch.times.kernel is not None


def test_argmax_keeps_the_first_index_on_ties(lowered, device):
    k, ins, sz, sc = lowered["argmax_ties"]
    got, _ = device.launch(k, ins, sz, sc)
    assert int(got) == int(np.argmax(ins[0]))
    k, ins, sz, sc = lowered["argmin_rows"]
    got, _ = device.launch(k, ins, sz, sc)
    np.testing.assert_array_equal(got, np.argmin(ins[0], axis=1))


def test_generated_source_is_cpp_with_openmp_over_the_outer_loops(lowered, device):
    k, _, sz, _ = lowered["matmul"]
    src = device.generated_source(k, sz)["c"]
    assert 'extern "C" void zyn_kernel(' in src and "// line " in src
    if device._openmp:
        assert "#pragma omp parallel for schedule(dynamic)" in src
    assert render_text("c", k, sz) == c_codegen.render(k, sz)
    assert "generated at launch" in render_text("c", k)
    src = device.generated_source(*lowered["shared_ffn"][::2])["c"]
    assert "u_up[40] = {};" in src and "barrier" in src


def test_compile_error_shows_the_generated_line(device, monkeypatch):
    k, ins, sz, sc = lower_block(MUL_ADD, {"x": randn(11), "y": randn(11)})
    real = c_codegen.render_program

    def broken(kernel, sizes, openmp=True, params=None):
        prog = real(kernel, sizes, openmp, params)
        prog.source = prog.source.replace("+ 1.0f)", "+ no_such_name)")
        return prog

    monkeypatch.setattr(c_codegen, "render_program", broken)
    dev = native.NativeCpuDevice(native.find_compiler())
    with pytest.raises(ZynMLDeviceError) as info:
        dev.launch(k, ins, sz, sc)
    msg = info.value.message
    assert "could not compile" in msg and "no_such_name" in msg and "generated line" in msg
    # the ZynML line of `out[i] = ...`
    assert info.value.line == k.first_line + MUL_ADD.splitlines().index(
        next(ln for ln in MUL_ADD.splitlines() if "out[i]" in ln))


def test_corrupt_cache_entry_is_rebuilt(device, cache):
    k, ins, sz, sc = lower_block(MUL_ADD, {"x": randn(29), "y": randn(29)})
    dev = native.NativeCpuDevice(native.find_compiler())
    got, _ = dev.launch(k, ins, sz, sc)
    path = dev.compile(k, sz).path
    path.unlink()                               # a new file, as another process would leave it
    path.write_bytes(b"not a shared library")
    fresh = native.NativeCpuDevice(native.find_compiler())
    again, _ = fresh.launch(k, ins, sz, sc)
    np.testing.assert_array_equal(again, got)
    assert path.read_bytes()[:4] == b"\x7fELF"
    # a stale entry: a library that loads but was built from other source
    other = lower_block(MUL_ADD, {"x": randn(31), "y": randn(31)})
    stale = fresh.compile(other[0], other[2]).path
    path.unlink()
    path.write_bytes(stale.read_bytes())
    third = native.NativeCpuDevice(native.find_compiler())
    np.testing.assert_array_equal(third.launch(k, ins, sz, sc)[0], got)
    assert path.read_bytes() != stale.read_bytes()


def test_wrong_input_size_is_a_zynml_error(lowered, device):
    k, ins, sz, sc = lowered["mul_add"]
    with pytest.raises(ZynMLDeviceError, match="expects"):
        device.launch(k, [ins[0][:10], ins[1]], sz, sc)


def test_device_is_registered_and_auto_prefers_gpus():
    ids = [d["id"] for d in zynbook.compute_devices()]
    assert "cpu:native" in ids
    info = next(d for d in zynbook.compute_devices() if d["id"] == "cpu:native")
    assert info["type"] == "cpu" and info["backend"] == "c"
    assert registry.best_device_id() != "cpu:native"


def test_without_a_compiler_there_is_no_device(monkeypatch):
    monkeypatch.setattr(native, "find_compiler", lambda: None)
    assert native.discover() == []


# every example on this device: tests/test_examples_every_device.py



VECTOR_MATH = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = FN(x[i])
}"""


def _math_reference(fn, x):
    from math import erf
    x = x.astype(np.float64)
    erf_ = np.vectorize(erf, otypes=[np.float64])
    return {"exp": np.exp, "tanh": np.tanh, "log": np.log, "sin": np.sin, "cos": np.cos,
            "erf": erf_, "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
            "gelu": lambda v: 0.5 * v * (1.0 + erf_(v / np.sqrt(2.0)))}[fn](x)


@pytest.mark.parametrize("fn,dtype", [(fn, "f32") for fn in ("exp", "tanh", "erf", "gelu",
                                                             "sigmoid", "log", "sin", "cos")]
                         + [(fn, "f64") for fn in ("exp", "tanh", "erf")])
def test_vector_math_keeps_nan_inf_and_accuracy(device, fn, dtype):
    """Loops of math functions run in vector form (glibc's vector math where it links, no
    -ffast-math): NaN and infinities give what numpy gives, finite values are within the
    elementwise tolerance, in the vector body and in the scalar tail of the loop."""
    npdt = np.float32 if dtype == "f32" else np.float64
    x = (RNG.standard_normal(1003) * 3).astype(npdt)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 80.0, -100.0, 1e-30, 1000.0]
    x[[5, 77, 200, 333, 512, 700, 998, 1001, 1002][:len(special)]] = special
    k, ins, sz, sc = lower_block(VECTOR_MATH.replace("FN", fn), {"x": x})
    with np.errstate(all="ignore"):
        want = _math_reference(fn, x)
        got, _ = device.launch(k, ins, sz, sc)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got.astype(np.float64), want, equal_nan=True,
                               **tolerance(dtype, "elementwise"))
    assert "-fno-math-errno" in device.flags() and "-ffast-math" not in device.flags()
    if "-DZYN_LIBMVEC" in device.flags() and fn in ("exp", "tanh", "erf", "log", "sin", "cos"):
        # the loop calls a vector variant (_ZGV...): the library imports one
        assert b"_ZGV" in device.compile(k, sz).path.read_bytes()


def test_reduction_loops_are_vector_loops_and_keep_nan(device):
    """A loop that only updates a sum or a running maximum becomes `omp simd reduction`
    (a partial one per lane, combined in a fixed order; the maximum by the NaN-propagating
    helper); a loop that stores does not. A NaN or an infinity in a row still reaches that
    row's result, as in the reference."""
    x = randn(7, 1001)
    x[2, 500], x[4, 3], x[5, 1000] = np.nan, np.inf, -np.inf
    x[3, 1000], x[6, 0] = np.nan, np.nan        # in the loop's tail, in its first lane
    k, ins, sz, sc = lower_block(SOFTMAX_ROWS, {"x": x})
    src = device.generated_source(k, sz)["c"]
    pragmas = [ln.strip() for ln in src.splitlines() if "omp simd" in ln]
    assert pragmas == ["#pragma omp simd reduction(zyn_max_f32_reduction:u_m)",
                       "#pragma omp simd reduction(+:u_s)"]
    got, _ = device.launch(k, ins, sz, sc)
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got[[2, 3, 4, 6]]).all()
    assert_close(got, want, "f32", "reduction")
    # the same launch gives the same bits
    np.testing.assert_array_equal(device.launch(k, ins, sz, sc)[0], got)


def test_loop_reductions_are_only_order_free_updates():
    from zynbook.compiler.launch import ir
    f, i = "f32", ir.Ref("i", "i32")
    x = ir.Load("u_x", i, f)
    s, m = ir.Ref("s", f), ir.Ref("m", f)
    add = ir.Set("s", ir.Bin("+", s, ir.Bin("*", x, x, f), f))
    top = ir.Set("m", ir.Math("max", (m, x), f))
    assert ir.loop_reductions((ir.Decl("t", f, x), add, top)) == (("s", "+", f), ("m", "max", f))
    # a store, a read of the sum, a check, an inner loop: the order matters or may
    assert ir.loop_reductions((add, ir.Store("u_out", i, s))) == ()
    assert ir.loop_reductions((add, ir.Set("m", ir.Math("max", (m, s), f)))) == ()
    assert ir.loop_reductions((ir.Set("s", ir.Bin("+", s, ir.Load(
        "u_x", ir.Checked(i, ir.Lit(9, "i32"), 1, "i32"), f), f)),)) == ()
    assert ir.loop_reductions((ir.For("k", ir.Lit(0, "i32"), ir.Lit(4, "i32"),
                                      ir.Lit(1, "i32"), (add,)),)) == ()
    assert ir.loop_reductions((ir.Set("s", ir.Bin("-", s, x, f)),)) == ()
