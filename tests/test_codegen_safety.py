"""Generated code is safe and exact: every case gives the CPU reference's answer or the same
ZynML error (kind and line) on every device present, never a crash, a read of other memory,
a clamp or a silent zero. CUDA C is compiled with this machine's nvcc (it runs where a GPU
is); MSL runs on the Metal model (tests/metal_emu).

The cases: names a C, CUDA, MSL or WGSL compiler would take for its own (a matmul's `acc`,
INFINITY, NULL, keywords, a record field `w.a` beside `w_a`); f64 literals; a ZynML line
ending in a backslash; integers of 2^31 and more; integer division by zero and MIN / -1;
indices out of range (a gather, `out[i + k]` with k = -5, a shared array indexed by data);
NaN through max, min, relu, clamp, reduce(max/min) and argmax/argmin; long f32 sums.
"""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import nvcc_runs  # noqa: E402
import zynbook  # noqa: E402
from compute_testing import lower_block  # noqa: E402
from kernel_sources import CONV2D  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler import cir, errflag  # noqa: E402
from zynbook.compiler.codegen import c as c_codegen  # noqa: E402
from zynbook.compiler.codegen import cuda, msl, wgsl  # noqa: E402
from zynbook.compiler.passes.bounds import Facts  # noqa: E402
from zynbook.errors import ZynMLDeviceError, ZynMLError, ZynMLRuntimeError  # noqa: E402

DEVICES = [d["id"] for d in zynbook.compute_devices() if d["id"] != "cpu"]
NVCC = shutil.which("nvcc")

RNG = np.random.default_rng(1313)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


INT_MIN = np.iinfo(np.int32).min
WGPU = ("vulkan", "webgpu", "gl", "dx12", "metal:")     # wgpu adapters (32-bit only)

# name: (compute block, arrays by label, host scalars, devices that may refuse it clearly
#        [, sizes the program defines])
CASES = {
    # ---- names
    "user_acc_in_matmul": ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += a[i, k] * b[k, j]
        out[i, j] = acc
}
""", {"a": f32(33, 17), "b": f32(17, 20)}, {}, ()),
    "names_of_c_and_gpu_languages": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        let INFINITY = x[i] * 2.0
        let NULL = INFINITY + 1.0
        let int = NULL * 3.0
        let float = int - 1.0
        let threadIdx = float * 0.5
        let fn = threadIdx + 2.0
        let loop = fn - 0.25
        let u_x = loop * 2.0
        let _t = u_x + 1.0
        let zyn_err = _t * 0.5
        out[i] = zyn_err
}
""", {"x": f32(50)}, {}, ()),
    "record_field_beside_same_spelling": ("""
let y = compute(w.a, w_a) {
    @kernel elementwise
    for i in 0..len:
        out[i] = w.a[i] * 10.0 + w_a[i]
}
""", {"w.a": np.arange(6, dtype=np.float32), "w_a": np.full(6, 0.5, np.float32)}, {}, ()),
    # ---- literals and lines
    "f64_literals_exact": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        let c = 0.7978845608
        out[i] = x[i] * c + 0.1 * x[i] * x[i] * x[i] - 1.0000000000000002
}
""", {"x": np.linspace(-3, 3, 41)}, {}, WGPU + ("metal",)),
    "f64_sum_and_max": ("""
let y = compute(x) {
    for r in 0..rows:
        var s = 0.0
        var m = -inf
        for j in 0..cols:
            s += x[r, j] * 0.1
            m = max(m, x[r, j])
        out[r] = s + m
}
""", {"x": np.random.default_rng(5).standard_normal((6, 301))}, {}, WGPU + ("metal",)),
    "f64_exp_where_shaders_lack_it": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = exp(x[i]) * 0.3
}
""", {"x": np.linspace(-2, 2, 17)}, {}, WGPU + ("metal",)),
    "backslash_at_line_end": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        let t = x[i] * 2.0  // a note \\\\
        out[i] = t + 1.0
}
""", {"x": f32(20)}, {}, ()),
    "host_int_beyond_i32": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] + k
}
""", {"x": np.arange(5, dtype=np.int64)}, {}, WGPU + ("metal",), {"k": 3_000_000_000}),
    # ---- integer division
    "int_division_by_zero": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] / b[i]
}
""", {"a": np.array([7, -8, 9, 10], np.int32), "b": np.array([2, 3, 0, 5], np.int32)}, {}, ()),
    "int_remainder_by_zero": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] % b[i]
}
""", {"a": np.array([7, -8, 9, 10], np.int32), "b": np.array([2, 3, 0, 5], np.int32)}, {}, ()),
    "int_min_divided_by_minus_one": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] / b[i]
}
""", {"a": np.array([7, INT_MIN, 9], np.int32), "b": np.array([2, -1, 3], np.int32)}, {}, ()),
    "int_division_fine": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] / b[i] + a[i] % b[i] + a[i] / 4
}
""", {"a": np.array([7, -8, 9, INT_MIN, -7], np.int32),
      "b": np.array([2, 3, -4, 1, -1], np.int32)}, {}, ()),
    "int_power_is_a_float_power": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] ** b[i]
}
""", {"a": np.array([2, 3, 2, -2], np.int32), "b": np.array([3, -1, 40, 3], np.int32)}, {}, ()),
    "division_guarded_by_if": ("""
let y = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        if b[i] != 0:
            out[i] = a[i] / b[i]
        else:
            out[i] = 0
}
""", {"a": np.array([7, -8, 9, 10], np.int32), "b": np.array([2, 0, 0, 5], np.int32)}, {}, ()),
    # ---- bounds
    "gather_out_of_range": ("""
let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[idx[i]]
}
""", {"x": f32(8), "idx": np.array([0, 3, 7, 9, 2], np.int32)}, {}, ()),
    "gather_in_range": ("""
let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[idx[i]] * 2.0
}
""", {"x": f32(8), "idx": np.array([0, 3, 7, 5, 2], np.int32)}, {}, ()),
    "store_with_negative_offset": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i + k] = x[i]
}
""", {"x": f32(12)}, {}, (), {"k": -5}),
    "read_past_the_end": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i + k]
}
""", {"x": f32(12)}, {}, (), {"n": 12, "k": 3}),
    "shared_indexed_by_data": ("""
let y = compute(x, idx) {
    for r in 0..rows:
        shared var buf[4]
        for j in 0..4:
            buf[j] = x[r, j]
        barrier()
        for j in 0..4:
            out[r, j] = buf[idx[r, j]]
}
""", {"x": f32(3, 4), "idx": np.array([[0, 1, 2, 3], [3, 2, 1, 0], [1, 6, 1, 1]], np.int32)},
        {}, ()),
    # ---- NaN
    "nan_through_max_min_relu_clamp": ("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = max(x[i], 0.5) + min(0.0, x[i]) + relu(x[i]) + clamp(x[i], -1.0, 1.0)
}
""", {"x": np.array([1.0, np.nan, -1.0, 0.7, -np.inf, np.inf], np.float32)}, {}, ()),
    "nan_reduce_max": ("""
let y = compute(x) {
    @kernel reduce(max)
    for i in 0..len:
        yield x[i]
}
""", {"x": np.where(np.arange(3000) == 1777, np.nan, np.arange(3000.0)).astype(np.float32)}, {}, ()),
    "nan_reduce_min": ("""
let y = compute(x) {
    @kernel reduce(min)
    for i in 0..len:
        yield x[i]
}
""", {"x": np.where(np.arange(3000) == 5, np.nan, np.arange(3000.0)).astype(np.float32)}, {}, ()),
    "nan_argmax": ("""
let y = compute(x) {
    @kernel reduce(argmax)
    for i in 0..len:
        yield (x[i], i)
}
""", {"x": np.where(np.isin(np.arange(3000), [2100, 2900]), np.nan,
                    np.arange(3000.0)).astype(np.float32)}, {}, ()),
    "nan_argmin": ("""
let y = compute(x) {
    @kernel reduce(argmin)
    for i in 0..len:
        yield (x[i], i)
}
""", {"x": np.where(np.arange(3000) == 1500, np.nan, np.arange(3000.0)).astype(np.float32)}, {}, ()),
    "nan_row_max": ("""
let y = compute(x) {
    for r in 0..rows:
        var m = -inf
        for j in 0..cols:
            m = max(m, x[r, j])
        out[r] = m
}
""", {"x": np.where(np.arange(5 * 300).reshape(5, 300) == 301, np.nan,
                    f32(5, 300))}, {}, ()),
}

# what the reference says for these (so the cases test what they claim to)
REFERENCE_ERRORS = {"int_division_by_zero": "division by zero",
                    "int_remainder_by_zero": "remainder by zero",
                    "int_min_divided_by_minus_one": "overflow",
                    "gather_out_of_range": "out of range",
                    "store_with_negative_offset": "out of range",
                    "read_past_the_end": "outside axis 0",
                    "shared_indexed_by_data": "out of range"}


def _program(block: str, arrays: dict) -> tuple:
    """A program yielding the block's result, and its host bindings (records as dicts)."""
    kwargs: dict = {}
    for label, arr in arrays.items():
        parts = label.split(".")
        d = kwargs
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = arr
    return block + "y\n", kwargs


def _outcome(fn):
    """("ok", array) or ("error", kind, line, message) of fn()."""
    try:
        return ("ok", np.asarray(fn()))
    except ZynMLError as err:
        return ("error", err.kind, err.line, err.message)


def _same(got, want, dtype_kind: str):
    if want[0] == "error":
        assert got[0] == "error", f"expected a ZynML {want[1]} error ({want[3]}), got {got}"
        assert got[1] == want[1] and got[2] == want[2], (got, want)
        return
    assert got[0] == "ok", f"expected a value, got the error {got}"
    a, b = np.asarray(got[1]), np.asarray(want[1])
    assert a.shape == b.shape
    if b.dtype.kind in "iub":
        np.testing.assert_array_equal(a, b)
    else:
        # f64: exact to a few ulps (an f32 literal widened is off by 1e-8)
        rtol, atol = (1e-12, 1e-14) if b.dtype == np.float64 else (1e-5, 1e-6)
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)


def _refused(got, case, device) -> bool:
    """A device that cannot run the case exactly may refuse it with a clear device error."""
    may = CASES[case][3]
    return got[0] == "error" and got[1] == "device" and any(device.startswith(m) for m in may)


def _reference(case):
    block, arrays, scalars = CASES[case][:3]
    src, kwargs = _program(block, arrays)
    return _outcome(lambda: zynbook.run(src, device="cpu", **kwargs, **scalars, **_sizes(case)))


def _sizes(case) -> dict:
    return CASES[case][4] if len(CASES[case]) > 4 else {}


@pytest.mark.parametrize("case", sorted(REFERENCE_ERRORS))
def test_reference_reports_the_mistake(case):
    want = _reference(case)
    assert want[0] == "error" and want[1] in ("runtime", "shape"), want
    assert REFERENCE_ERRORS[case] in want[3]
    assert want[2] > 0                  # it names the ZynML line


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_device_equals_reference(case, device):
    block, arrays, scalars = CASES[case][:3]
    src, kwargs = _program(block, arrays)
    want = _reference(case)
    got = _outcome(lambda: zynbook.run(src, device=device, **kwargs, **scalars, **_sizes(case)))
    if _refused(got, case, device):
        return
    _same(got, want, "")


# ------------------------------------------------------------------ kernel level: C, CUDA, MSL


def _lowered(case):
    """(kernel, inputs, sizes, scalars), or None when the front end already refuses it
    (its sizes say the index is out of range before any device runs)."""
    block, arrays, scalars = CASES[case][:3]
    try:
        return lower_block(block, dict(arrays), dict(scalars), _sizes(case))
    except ZynMLError:
        return None


def _kernel_reference(k, ins, sz, sc):
    return _outcome(lambda: run_kernel(k, ins, sz, sc))


PTX = ("--ptx", "-arch=sm_90")


@pytest.fixture(scope="module")
def queued_compiles():
    """Every case's nvcc compile queued at once (nvcc_runs.py): they run beside one another
    and the tests, each test then waits for its own."""
    futures = []
    for case in sorted(CASES):
        try:
            lowered = _lowered(case)
            if lowered is not None:
                futures.append(nvcc_runs.queue(cuda.render_cuda(lowered[0], lowered[2]).source, PTX))
        except Exception:       # noqa: BLE001 (the test itself says what went wrong)
            continue
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_compiles(case, queued_compiles):
    if _lowered(case) is None:
        pytest.skip("refused by the front end")
    k, ins, sz, sc = _lowered(case)
    prog = cuda.render_cuda(k, sz)
    res = nvcc_runs.run(prog.source, PTX)
    assert res.returncode == 0, res.stderr[-3000:]
    # every kernel takes the error flag last; a program that can fail says where
    assert prog.source.count("int* __restrict__ zyn_err") == len({s.func for s in prog.steps}) \
        or prog.source.count("int* __restrict__ zyn_err") >= 1
    if REFERENCE_ERRORS.get(case):
        assert prog.error_sites


def test_metal_model_equals_reference():
    pytest.importorskip("subprocess")
    from metal_emu import emulator as emu
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler")
    failures = []
    for case in sorted(CASES):
        if _lowered(case) is None:
            continue
        k, ins, sz, sc = _lowered(case)
        want = _kernel_reference(k, ins, sz, sc)
        try:
            prog = msl.render_program(k, sz)
        except ZynMLDeviceError as err:
            if any(m == "metal" for m in CASES[case][3]):
                continue
            failures.append((case, f"refused: {err.message}"))
            continue
        got = _outcome(lambda: emu.run(prog, ins, cir.output_shape(k, sz), sc, kernel=k))
        try:
            _same(got, want, "")
        except AssertionError as err:
            failures.append((case, str(err)[:300]))
    assert not failures, failures


# ------------------------------------------------------------------ speed: no needless guards

COMMON = {
    "elementwise": ("""
let y = compute(x, b) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = x[i, j] * 2.0 + b[j]
}
""", {"x": f32(7, 9), "b": f32(9)}),
    "softmax_rows": ("""
let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        var m = -inf
        for j in 0..cols:
            m = max(m, x[r, j])
        var s = 0.0
        for j in 0..cols:
            s += exp(x[r, j] - m)
        for j in 0..cols:
            out[r, j] = exp(x[r, j] - m) / s
}
""", {"x": f32(5, 33)}),
    "matmul": (CASES["user_acc_in_matmul"][0], {"a": f32(33, 17), "b": f32(17, 20)}),
    "shifted_stencil": ("""
let y = compute(x) {
    for i in 1..n - 1:
        out[i] = x[i - 1] + x[i] + x[i + 1]
}
""", {"x": f32(30)}, {"n": 30}),
    # a padded convolution: its `if` proves the gather in range
    "conv2d_padded": (CONV2D, {"input": f32(2, 3, 9, 11), "kernel": f32(4, 3, 3, 3), "bias": f32(4)},
                      {"stride": 2, "padding": 1, "out_h": 5, "out_w": 6}),
}


@pytest.mark.parametrize("name", sorted(COMMON))
def test_common_kernels_carry_no_guards(name):
    block, arrays = COMMON[name][:2]
    sizes = COMMON[name][2] if len(COMMON[name]) > 2 else {}
    k, ins, sz, sc = lower_block(block, arrays, {}, sizes)
    texts = {"c": c_codegen.render_program(k, sz).source, "cuda": cuda.render_cuda(k, sz).source,
             "msl": msl.render_program(k, sz).source}
    for lang, text in texts.items():
        assert "zyn_chk<" not in text and "zyn_in<" not in text and "zyn_idiv<" not in text, lang
    from zynbook.backends.webgpu.device import _equal_sizes
    opts = wgsl.sized_for(wgsl.WGSLOptions(equal_sizes=_equal_sizes(k, sz)), k, sz)
    text = wgsl.render(k, opts).source
    assert "zyn_chk(" not in text and "zyn_in(" not in text, text


def test_bounds_analysis_proves_and_refuses():
    k, ins, sz, sc = lower_block(CASES["store_with_negative_offset"][0], {"x": f32(12)}, {}, {"k": -5})
    facts = Facts(k.body, sz, k.dims)
    i = cir.Var("i", cir.Ty("i32"))
    store = next(n for n in cir.walk(k.body) if isinstance(n, cir.Store))
    assert not facts.index_in_range(store.index[0], 12)          # i + k, k unknown
    loop = next(n for n in cir.walk(k.body) if isinstance(n, cir.Loop))
    assert facts.index_in_range(cir.Var(loop.var, cir.Ty("i32")), sz[loop.stop.name])
    assert not facts.index_in_range(cir.Bin("+", cir.Var(loop.var, cir.Ty("i32")),
                                            cir.Const(1, cir.Ty("i32")), cir.Ty("i32")),
                                    sz[loop.stop.name])
    assert facts.divisor_safe(cir.Const(4, cir.Ty("i32"))) == (True, True)
    assert facts.divisor_safe(cir.Var(loop.var, cir.Ty("i32"))) == (False, True)
    del i


# ------------------------------------------------------------------ text: comments, literals


def test_comments_never_splice_and_f64_literals_are_exact():
    block, arrays, scalars = CASES["backslash_at_line_end"][:3]
    k, ins, sz, sc = lower_block(block, arrays, scalars)
    for text in (c_codegen.render_program(k, sz).source, cuda.render_cuda(k, sz).source,
                 msl.render_program(k, sz).source, wgsl.render(k).source):
        for line in text.splitlines():
            if "//" in line:
                assert not line.rstrip().endswith("\\"), line
    block, arrays, scalars = CASES["f64_literals_exact"][:3]
    k, ins, sz, sc = lower_block(block, arrays, scalars)
    for text in (c_codegen.render_program(k, sz).source, cuda.render_cuda(k, sz).source):
        body = [ln for ln in text.splitlines() if "u_out[" in ln and "=" in ln]
        assert body and all("f)" not in ln and "(double)" not in ln for ln in body), body
        assert all("* 0.7978845608)" in ln and "1.0000000000000002" in ln for ln in body), body


def test_error_flag_messages():
    sites = errflag.ErrorSites()
    s = sites.add(errflag.INDEX, 3, "x", "x_d0")
    assert errflag.error(sites.sites, [0, 0]) is None
    err = errflag.error(sites.sites, [s, 9], None, {"x_d0": 4})
    assert isinstance(err, ZynMLRuntimeError) and err.line == 3
    assert "index 9 is out of range for an axis of size 4 of `x`" in err.message


# ------------------------------------------------------------------ accuracy of long sums


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith("cpu")] or ["cpu:native"])
def test_long_f32_sum_is_accurate(device):
    if device not in DEVICES:
        pytest.skip(f"{device} not present")
    x = np.full(10_000_000, 0.1, np.float32)
    src = """
let y = compute(x) {
    @kernel reduce(+)
    for i in 0..len:
        yield x[i]
}
y
"""
    got = float(np.asarray(zynbook.run(src, device=device, x=x)))
    exact = float(np.sum(x.astype(np.float64)))
    assert abs(got - exact) / exact < 1e-6, (got, exact)


# ------------------------------------------------------------------ NaN through attention


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
def test_nan_through_attention(device):
    """A NaN key reaches the outputs of exactly the queries whose mask lets them see it."""
    from kernel_sources import ATTENTION
    from zynbook.backends.registry import get_device
    rng = np.random.default_rng(8)
    Q, K, V = (rng.standard_normal((1, 2, 40, 16)).astype(np.float32) for _ in range(3))
    K[0, 1, 7, 3] = np.nan
    mask = np.tril(np.ones((40, 40), bool))
    k, ins, sz, sc = lower_block(ATTENTION, {"Q": Q, "K": K, "V": V, "mask": mask})
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert np.isnan(want).any() and not np.isnan(want).all()
    try:
        got = np.asarray(get_device(device).to_host(get_device(device).launch(k, ins, sz, sc)[0]))
    except ZynMLDeviceError:
        pytest.skip(f"{device} does not run this attention")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ fields beside names

FIELD_NAMES = {     # source, host values, numpy's answer for x = [1, 2]
    "scalar_field_beside_a_local": ("""
let y = compute(x) {
    for i in 0..n:
        let c_s = x[i]
        out[i] = c_s + c.s
}
y
""", {"c": {"s": 100.0}}, lambda x: x + 100),
    "scalar_field_beside_a_host_scalar": ("""
let c_s = 7.0
let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * c_s + c.s
}
y
""", {"c": {"s": 100.0}}, lambda x: x * 7 + 100),
    "fields_spelled_alike": ("""
let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * a.b_c + a_b.c
}
y
""", {"a": {"b_c": 10.0}, "a_b": {"c": 0.5}}, lambda x: x * 10 + 0.5),
    "tensor_field_beside_a_host_scalar": ("""
let w_a = 2.0
let y = compute(w.a) {
    for i in 0..n:
        out[i] = w.a[i] * w_a
}
y
""", {"w": {"a": np.array([1.0, 2.0], np.float32)}}, lambda x: np.array([2.0, 4.0])),
    "tensor_field_beside_a_host_size": ("""
let w_n = 2
let y = compute(w.n) {
    for i in 0..w_n:
        out[i] = w.n[i] + 1.0
}
y
""", {"w": {"n": np.array([1.0, 2.0], np.float32)}}, lambda x: np.array([2.0, 3.0])),
    "host_names_shadowing_inf_and_e": ("""
let inf = 5.0
let e = 2
let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * e - inf + pi * 0.0
}
y
""", {}, lambda x: x * 2 - 5),
    "int_field_as_a_loop_bound": ("""
let y = compute(x) {
    for i in 0..c.k:
        out[i] = x[i] * c.k
}
y
""", {"c": {"k": 1}}, lambda x: x[:1]),
}


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
@pytest.mark.parametrize("case", sorted(FIELD_NAMES))
def test_fields_are_names_of_their_own(case, device):
    """`c.s` is neither a local nor a host name `c_s`, and `a.b_c` is not `a_b.c`: every
    device (the reference too) reads each where it is (numpy's answer)."""
    src, host, want = FIELD_NAMES[case]
    x = np.array([1.0, 2.0], np.float32)
    got = zynbook.run(src, device=device, x=x, **host)
    np.testing.assert_allclose(np.asarray(got.numpy() if hasattr(got, "numpy") else got), want(x), rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
@pytest.mark.parametrize("dtype", ["i64", "u8", "i16"])
def test_integer_literals_keep_the_tensors_integer_type(dtype, device):
    """An integer literal is weak beside an integer read from a tensor: `x[i] * 3 - 1` keeps
    x's type and wraps as numpy's does (a size keeps a chain of literals weak, as numpy's
    Python ints are); every device gives numpy's answer or refuses a type it lacks."""
    npt = {"i64": np.int64, "u8": np.uint8, "i16": np.int16}[dtype]
    x = np.array([2**40 if dtype == "i64" else 2, 0, 100, 1], npt)
    src = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 3 - 1 + n * 0\n}\ny\n"
    try:
        got = np.asarray(zynbook.run(src, device=device, x=x).numpy())
    except ZynMLDeviceError:
        assert dtype == "i64" and device.startswith(WGPU), device     # 64-bit integers: refused
        return
    want = x * npt(3) - npt(1)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _bf16(a) -> np.ndarray:
    """numpy's float32 `a` rounded to bfloat16 (ties to even), written here apart from the
    reference's."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


HALF_CASTS = {     # body, numpy's answer for float32 x
    "f16_cast_rounds": ("out[i] = f32(f16(x[i]))", lambda x: x.astype(np.float16).astype(np.float32)),
    "bf16_let_rounds": ("let v: bf16 = x[i]\n        out[i] = f32(v) * 2.0", lambda x: _bf16(x) * 2),
    "bf16_cast_rounds": ("out[i] = f32(bf16(x[i])) + 1.0", lambda x: _bf16(x) + np.float32(1)),
}


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
@pytest.mark.parametrize("case", sorted(HALF_CASTS))
def test_a_cast_to_a_half_rounds(case, device):
    """An explicit f16 or bf16 (a cast, a typed let) rounds the value there, though halves
    compute in f32 between loads and stores: every device gives numpy's answer."""
    body, want = HALF_CASTS[case]
    x = np.array([3.14159265, 1e-3 + 1e-7, 7000.3, -41.77, 0.1], np.float32)
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        {body}\n}}\ny\n"
    got = np.asarray(zynbook.run(src, device=device, x=x).numpy())
    np.testing.assert_allclose(got, want(x), rtol=1e-7)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_a_bf16_shared_array_holds_rounded_values(device):
    x = np.linspace(-150, 150, 7).astype(np.float32) + np.float32(0.3377)
    src = """let y = compute(x) {
    for i in 0..n:
        shared var row[8]: bf16
        row[0] = x[i]
        out[i] = f32(row[0])
}
y
"""
    got = np.asarray(zynbook.run(src, device=device, x=x).numpy())
    np.testing.assert_array_equal(got, _bf16(x))


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
@pytest.mark.parametrize("bound", ["i", "i + 1"])
def test_an_inner_loop_bounded_by_the_outer_one(bound, device):
    """`for j in 0..i` (a prefix sum, a causal row) runs on the reference too, each
    iteration of i over its own keys: numpy's cumulative sums."""
    x = np.arange(1, 8, dtype=np.float32)
    src = f"""let n = 7
let y = compute(x) {{
    for i in 0..n:
        var s = 0.0
        for j in 0..{bound}:
            s += x[j]
        out[i] = s
}}
y
"""
    got = np.asarray(zynbook.run(src, device=device, x=x).numpy())
    c = np.cumsum(x)
    want = np.concatenate([[0], c[:-1]]) if bound == "i" else c
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_pow_and_tanh_at_special_values(device):
    """pow and tanh at NaN, 0, 1, negative bases and infinities give numpy's answers on every
    device (WGSL's own pow is undefined at most of them, its tanh drops NaN)."""
    inf, nan = np.inf, np.nan
    a = np.array([nan, 0.0, 1.0, nan, inf, -2.0, -2.0, 0.0, 2.0, -8.0, 0.5, nan], np.float32)
    b = np.array([1.0, 0.0, nan, 2.5, 0.0, 3.0, 0.5, -1.0, 10.0, 2.0, inf, 0.0], np.float32)
    src = """let y = compute(a, b) {
    for i in 0..n:
        out[i] = pow(a[i], b[i])
}
y
"""
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    got = np.asarray(zynbook.run(src, device=device, a=a, b=b).numpy())
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    t = np.asarray(zynbook.run("let z = compute(a) {\n    for i in 0..n:\n        out[i] = tanh(a[i])\n}\nz\n",
                               device=device, a=a).numpy())
    np.testing.assert_allclose(t, np.tanh(a), rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
@pytest.mark.parametrize("axis", [-1, -2, -3, 1])
def test_a_negative_reduce_axis_counts_from_the_innermost_loop(axis, device):
    x = np.random.default_rng(104).standard_normal((3, 37, 5)).astype(np.float32)
    src = f"""let s = compute(x) {{
    @kernel reduce(+, axis={axis})
    for a in 0..A, b in 0..B, c in 0..C:
        yield x[a, b, c] * 2.0
}}
s
"""
    got = np.asarray(zynbook.run(src, device=device, x=x).numpy())
    np.testing.assert_allclose(got, (x.astype(np.float64) * 2).sum(axis), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_out_indexed_only_below_zero_is_a_shape_error(device):
    """`out[-1]` does not count from the end: out's size comes from its indices, so a
    constant negative index is refused before anything runs, on every device alike; and an
    index that can fall below 0 names its axis in ZynML (`n - 1`), not in the compiler's
    terms."""
    from zynbook.errors import ZynMLShapeError
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(ZynMLShapeError, match="out is indexed at -1") as err:
        zynbook.run("let y = compute(x) {\n    for i in 0..n:\n        out[-1] = x[i]\n}\ny\n",
                    device=device, x=x)
    assert err.value.span.line == 3
    with pytest.raises(ZynMLRuntimeError, match="index -1 is out of range") as err:
        zynbook.run("let y = compute(x) {\n    for i in 0..n:\n        out[i - 1] = x[i]\n}\ny\n",
                    device=device, x=x)
    assert "Bin(" not in str(err.value)


@pytest.mark.parametrize("device", ["cpu"] + DEVICES)
def test_argmax_ties_go_to_the_smallest_index_yielded(device):
    """Where the index yielded is no position (`n - 1 - i`), a tie still has one answer on
    every device: the smallest index yielded with the largest value."""
    x = np.array([1, 5, 2, 5, 0], np.float32)
    src = """let n = 5
let y = compute(x) {
    @kernel reduce(argmax)
    for i in 0..n:
        yield (x[i], n - 1 - i)
}
y
"""
    assert int(zynbook.run(src, device=device, x=x)) == 1
