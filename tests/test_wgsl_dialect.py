"""The WGSL dialect of the one printer (compiler/codegen/dialects/wgsl.py): the generic
schedule of compiler/schedules/ spelled in WGSL, as text (no adapter needed) and run on the
WebGPU device (any wgpu adapter, e.g. Mesa's lavapipe), compared against numpy.

The device's only path: one program for every size set where a schedule can (sizes as
uniforms, grids and scratch counts host expressions), else one per size set.
Tests that need an adapter are marked `webgpu` and skip when wgpu-py or a driver is absent.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from zynbook.compiler.codegen import wgsl
from zynbook.compiler.codegen.dialects.wgsl import WgslDialect
from zynbook.errors import ZynMLDeviceError, ZynMLRuntimeError

from compute_testing import float32_normals, lower_block
from kernel_sources import REDUCE_MAX, REDUCE_SUM, ROW_SUMS
from tolerances import assert_within

RNG = np.random.default_rng(2024)
randn = float32_normals(RNG)

ELEMENTWISE = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = x[i, j] * 2.0 + y[j]
}"""

GATHER = """let z = compute(table, idx) {
    @kernel elementwise
    for i in 0..n, j in 0..d:
        out[i, j] = table[idx[i], j]
}"""

DIVIDE = """let z = compute(a, b) {
    @kernel elementwise
    for i in 0..len:
        out[i] = a[i] / b[i] + a[i] % b[i] * 1000 + (a[i] / 4 - a[i] % 3) * 1000000
}"""

ELEMENTWISE_1D = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * 2.0 + y[i]
}"""

NAN_MAX = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = max(max(x[i], y[i]), -1.0)
}"""

NOT_EQUAL = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        if x[i] != y[i]:
            out[i] = 1.0
        else:
            out[i] = 0.0
}"""

SCALED = """let z = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * scale + f32(shift)
}"""

FLAGS_I8 = """let z = compute(a, b, flags) {
    @kernel elementwise
    for i in 0..len:
        if flags[i]:
            out[i] = a[i] + b[i]
        else:
            out[i] = a[i] * b[i]
}"""

DOUBLE = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = max(sqrt(x[i]), y[i] * 0.1) + 1.0
}"""

HALF = """let z = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * 3.0 + 1.0
}"""


def line_of(src: str, text: str) -> int:
    return next(n for n, line in enumerate(src.splitlines(), 1) if text in line)


def sized(kernel_sizes, **options) -> wgsl.WGSLOptions:
    return dataclasses.replace(wgsl.WGSLOptions(**options),
                               launch_sizes=tuple(sorted((k, int(v)) for k, v in kernel_sizes.items())))


def program(src, arrays, scalars=None, sizes=None, **options):
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
    return k, wgsl.render(k, sized(sz, **options)), ins, sz, sc


# ------------------------------------------------------------------- text (no adapter)


def test_elementwise_is_the_generic_schedule_in_wgsl():
    k, p, *_ = program(ELEMENTWISE, {"x": randn(37, 53), "y": randn(53)})
    src = p.source
    assert p.schedule.startswith("thread:") and "generic" in p.schedule
    assert "@compute @workgroup_size(256)" in src
    assert "var<storage, read> u_x: array<f32>;" in src
    assert "var<storage, read_write> u_out: array<f32>;" in src
    # grid-stride over the flattened nest: blocks are the linear workgroup count; the
    # count of iterations is computed from the sizes, which are uniforms
    assert "let _n0: i32 = max(u_rows, 0i);" in src and "let _total: i32 = (_n0 * _n1);" in src
    assert "for (var _g: i32 = ((zyn_block * 256i) + zyn_thread); _g < _total; " \
           "_g += (zyn_blocks * 256i))" in src
    assert "// line 4: out[i, j] = x[i, j] * 2.0 + y[j]" in src
    assert "1961" not in src and "37i" not in src and "53i" not in src
    # every index is proven in range (x_d0 = rows, ...): no error flag
    assert "zyn_err" not in src and not p.error_sites
    assert "let u_rows: i32 = zyn_p.u_rows;" in src
    assert [b.buffer for b in p.bindings] == ["x", "y", "out", "@params"]
    for r, c in ((37, 53), (1, 1), (1000, 3000)):
        env = {"sizes": {"rows": r, "cols": c, "x_d0": r, "x_d1": c, "y_d0": c}}
        assert [pp.workgroups(env) for pp in p.passes] == [min(-(-r * c // 256), 65535)]


def test_gather_checks_the_index_through_the_error_flag():
    k, p, *_ = program(GATHER, {"table": randn(5, 3), "idx": np.arange(6, dtype=np.int32)})
    src = p.source
    assert "zyn_chk(u_idx[" in src
    assert "var<storage, read_write> zyn_err: array<atomic<i32>>;" in src
    assert "atomicCompareExchangeWeak(&zyn_err[0], 0i, site)" in src
    assert p.bindings[-2].buffer == "@error" and p.bindings[-2].storage == "i32"
    assert len(p.error_sites) == 1 and p.error_sites[0].buffer == "table"


def test_max_propagates_nan_on_the_bits():
    _, p, *_ = program(NAN_MAX, {"x": randn(10), "y": randn(10)})
    assert "fn zyn_max_f32(a: f32, b: f32) -> f32" in p.source
    assert "(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u" in p.source
    assert "zyn_min_f32" not in p.source          # helpers only when used


ALL_POSITIVE = """let z = compute(x) {
    @kernel reduce(and)
    for i in 0..len:
        yield x[i] > 0.0
}"""

ARGMIN = """let z = compute(x) {
    @kernel reduce(argmin)
    for i in 0..len:
        yield (x[i] * x[i] - 1.0, i)
}"""


def test_nan_tests_and_workgroup_bools_are_spelled_on_the_bits():
    """A shader compiler may assume no NaN (WGSL allows it) and fold `x != x` to false, so a
    float compared with itself is a bit test; bools in workgroup memory are u32 (a 1-byte
    array stride there is what Naga gives a bool array)."""
    _, p, *_ = program(ARGMIN, {"x": randn(300)})
    assert "zyn_isnan_f32(_acc)" in p.source
    assert not any(f"({v} == {v})" in p.source or f"({v} != {v})" in p.source
                   for v in ("_acc", "_x", "_v2"))
    _, p, *_ = program(ALL_POSITIVE, {"x": randn(300)})
    assert "array<bool" not in p.source and "var<workgroup> _tree: array<u32" in p.source


def test_scalars_and_sizes_are_uniforms():
    k, p, ins, sz, sc = program(SCALED, {"x": randn(11)}, {"scale": 1.5}, {"shift": 3})
    assert "    u_scale: f32,\n" in p.source and "    u_shift: i32,\n" in p.source
    assert "let u_scale: f32 = zyn_p.u_scale;" in p.source
    assert "// sizes: " not in p.source
    values = dict(zip([f.name for f in p.params],
                      p.param_values({"sizes": sz, "scalars": {"scale": 0.25}})))
    assert values["u_scale"] == ("f32", 0.25) and values["u_shift"] == ("i32", 3)
    assert p.bindings[-1].access == "uniform"


def test_one_program_for_every_size_of_a_pattern():
    # the sizes of a launch give only which sizes are equal: other launches of that
    # pattern print the same program
    a = program(ELEMENTWISE, {"x": randn(3, 4), "y": randn(4)})[1]
    b = program(ELEMENTWISE, {"x": randn(300, 7), "y": randn(7)})[1]
    assert a.source == b.source
    k = lower_block(ELEMENTWISE, {"x": randn(3, 4), "y": randn(4)})[0]
    pattern = wgsl.WGSLOptions(equal_sizes=(("cols", "x_d1", "y_d0"), ("rows", "x_d0")))
    assert wgsl.render(k, pattern).source == a.source
    # without the pattern, x[i, j] is checked against x's axes
    assert "zyn_chk" in wgsl.render(k, wgsl.WGSLOptions()).source


def test_a_schedule_that_reads_a_size_never_makes_the_one_program(monkeypatch):
    # a target that bakes the sizes in: its programs differ with the values, so no program
    # serves every size set; the device then asks for one per size set (`sized_for`)
    k, _, sz, _ = lower_block(ELEMENTWISE, {"x": randn(3, 4), "y": randn(4)})
    opts = wgsl.WGSLOptions()
    baked = dataclasses.replace(wgsl.launch_target(opts), symbolic_sizes=False)
    monkeypatch.setattr(wgsl, "launch_target", lambda options: baked)
    monkeypatch.setattr(wgsl, "_PROGRAMS", {})     # (programs built for the real target)
    assert wgsl.launch_program(k, opts) is None
    with pytest.raises(ZynMLDeviceError, match="sizes of the launch"):
        wgsl.render(k, opts)
    assert wgsl.render(k, wgsl.sized_for(opts, k, sz)).schedule.startswith("thread:")


def test_a_launch_past_i32_indices_is_refused_before_it_runs():
    k, p, *_ = program(ELEMENTWISE, {"x": randn(3, 4), "y": randn(4)})
    env = lambda r, c: {"sizes": {"rows": r, "cols": c, "x_d0": r, "x_d1": c, "y_d0": c},
                        "shapes": {"x": (r, c), "y": (c,), "out": (r, c)}}
    assert p.check(env(1000, 1000)) is None
    assert "elements" in p.check(env(50_000, 50_000))
    assert "size" in p.check(env(3, 2 ** 31))


def test_integer_division_is_checked():
    _, p, *_ = program(DIVIDE, {"a": np.ones(4, np.int32), "b": np.ones(4, np.int32)})
    assert "zyn_idiv_i32(" in p.source and "zyn_irem_i32(" in p.source
    assert "zyn_tdiv(u_a[u_i], 4i)" in p.source     # proven safe: unchecked, still truncating
    assert {s.kind for s in p.error_sites} == {"div0", "divov", "rem0"}


def test_what_wgsl_lacks_is_refused_or_held_as_the_device_holds_it():
    # 64-bit integer buffers are held in 32 bits (the device refuses data that does not
    # fit): read into floats they are exact; 64-bit integer arithmetic on values not
    # provably within 32 bits (i64 data) is computed in 32 bits, a value past them failing
    # a site at its line; with a constant past them it is refused at its line
    i64 = {"x": np.ones((3, 4), np.int64), "y": np.ones(4, np.int64)}
    assert "var<storage, read> u_x: array<i32>;" in program(ELEMENTWISE, i64)[1].source
    ints = {"a": np.ones(4, np.int64), "b": np.ones(4, np.int64)}
    checked = program(DIVIDE, ints)[1]
    assert "zyn_iadd_past32(" in checked.source and "zyn_imul_past32(" in checked.source
    assert "past32" in {s.kind for s in checked.error_sites}
    with pytest.raises(ZynMLDeviceError, match="line 4, column 9: 64-bit integer arithmetic"):
        program(DIVIDE.replace("1000000", "10000000000"), ints)
    # f16 without the adapter's shader-f16: held in f32, rounded where converted to f16;
    # with it, `enable f16;`
    half = {"x": np.ones(9, np.float16)}
    off = program(HALF, half)[1]
    assert "var<storage, read> u_x: array<f32>;" in off.source and "zyn_f16(" in off.source
    assert not off.uses_f16 and "enable f16" not in off.source
    on = program(HALF, half, f16=True)[1]
    assert on.schedule.startswith("thread:") and on.source.startswith("enable f16;")
    assert "var<storage, read> u_x: array<f16>;" in on.source and on.uses_f16


def test_f64_with_shader_f64_and_refused_without():
    arrays = {"x": np.ones(5), "y": np.ones(5)}
    p = program(DOUBLE, arrays, f64=True)[1]
    assert p.schedule.startswith("thread:")
    assert "var<storage, read> u_x: array<f64>;" in p.source and "f64(0.1)" in p.source
    assert "fn zyn_max_f64(a: f64, b: f64) -> f64" in p.source
    with pytest.raises(ZynMLDeviceError, match="shader-f64"):
        program(DOUBLE, arrays)
    assert "fn zyn_exp_f64(x: f64) -> f64" in program(DOUBLE.replace("sqrt(", "exp("), arrays, f64=True)[1].source
    assert "fn zyn_sin_f64(x: f64) -> f64" in program(DOUBLE.replace("sqrt(", "sin("), arrays, f64=True)[1].source


def test_reduce_partials_live_in_a_scratch_buffer_between_two_launches():
    k, p, *_ = program(REDUCE_SUM, {"data": randn(100_003)})
    assert p.schedule.startswith("reduce(+)") and len(p.passes) == 2
    assert "var<storage, read_write> _part: array<f32>;" in p.source
    assert "var<workgroup> _tree: array<f32, 256>;" in p.source and "workgroupBarrier();" in p.source
    env = {"sizes": {"len": 100_003, "data_d0": 100_003}}
    blocks = p.passes[0].workgroups(env)
    assert blocks == -(-100_003 // 1024)
    assert p.scratch_bytes["@scratch:_part"](env) == 4 * blocks
    assert p.passes[1].workgroups(env) == 1
    small = {"sizes": {"len": 5, "data_d0": 5}}
    assert p.passes[0].workgroups(small) == 1 and p.scratch_bytes["@scratch:_part"](small) == 4
    assert p.workgroup_storage == 256 * 4


def test_dialect_spelling():
    d = WgslDialect()
    assert d.select("c", "a", "b", "f32") == "select(b, a, c)"
    assert d.lit(float("nan"), "f32") == "bitcast<f32>(0x7fc00000u)"
    assert d.lit(float("-inf"), "f32") == "bitcast<f32>(0xff800000u)"
    assert d.lit(0.1, "f32") == "0.1f" and d.lit(-2.5, "f32") == "(-2.5f)"
    assert d.lit(1e-5, "f32") == "1.0e-05f"
    assert d.lit(-2 ** 31, "i32") == "i32(-2147483647 - 1)" and d.lit(7, "u32") == "7u"
    assert d.cast("x", "i32", "f32") == "f32(x)"
    assert d.cast("x", "f32", "bool") == "(!(x == 0.0f))"             # NaN is true
    assert d.cast("x", "bool", "i32") == "select(0i, 1i, x)"
    assert d.cast("x", "i32", "i8") == "(((x + 128i) & 255i) - 128i)"   # wraps as the reference
    assert d.binary("+", "a", "b", "u8", "u8") == "((a + b) & 255u)"
    assert d.unary("neg", "a", "u32") == "(0u - a)"
    assert d.binary("!=", "a", "b", "f32", "bool") == "(!(a == b))"      # true for NaN
    assert d.for_header("i", "i32", "0i", "n", "1i") == "for (var i: i32 = 0i; i < n; i++)"
    assert d.decl("v", "f32", "1.0f", False) == "let v: f32 = 1.0f;"
    assert d.decl("v", "i32", None, True) == "var v: i32;"
    for dtype in ("i64", "u64", "f64"):
        with pytest.raises(ZynMLDeviceError, match="cannot spell"):
            d.type(dtype)
    assert d.type("f16") == "f32" and d.cast("x", "f32", "f16") == "zyn_f16(x)"
    assert d.cast("n", "i32", "f16") == "zyn_f16(f32(n))"
    with_f16 = WgslDialect(f16=True)         # rounded by the helper first: not folded away
    assert with_f16.cast("x", "f32", "f16") == "f16(zyn_f16(x))"
    assert d.cast("x", "i32", "i64") == "x" and d.cast("x", "i64", "f32") == "f32(x)"
    with pytest.raises(ZynMLDeviceError, match="collective"):
        d.collective("+", "v", "warp", "f32")


# ---------------------------------------------------------------- on the WebGPU device

try:
    from zynbook.backends.webgpu.device import discover
    DEVICES = discover()
except Exception:       # no wgpu-py
    DEVICES = []

webgpu = pytest.mark.webgpu
needs_adapter = pytest.mark.skipif(not DEVICES, reason="no wgpu adapter (install wgpu and "
                                   "mesa-vulkan-drivers)")


@pytest.fixture(params=[d.id for d in DEVICES] or ["none"])
def device(request):
    """Every wgpu adapter here (Vulkan, OpenGL...)."""
    return next(d for d in DEVICES if d.id == request.param)


def run(device, src, arrays, scalars=None, sizes=None):
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
    got, launch = device.launch(k, ins, sz, sc)
    assert launch.geometry["schedule"].startswith("thread:"), launch.geometry
    return got, launch


@webgpu
@needs_adapter
@pytest.mark.parametrize("shape", [(37, 53), (1, 1001), (300, 7)])
def test_elementwise_with_odd_sizes(device, shape):
    x, y = randn(*shape), randn(shape[1])
    got, _ = run(device, ELEMENTWISE, {"x": x, "y": y})
    assert_within(got, x * 2.0 + y, 1e-6, 1e-6)


@webgpu
@needs_adapter
def test_dispatch_split_over_dimensions_covers_every_iteration(device):
    # with at most 3 workgroups per dimension, 19 workgroups are a 3 x 3 x 3 dispatch
    x, y = randn(19, 256), randn(256)
    saved = dict(device.limits)
    device.limits["max-compute-workgroups-per-dimension"] = 3
    try:
        got, launch = run(device, ELEMENTWISE, {"x": x, "y": y})
    finally:
        device.limits.clear()
        device.limits.update(saved)
    assert launch.geometry["passes"][0]["workgroups"] == (3, 3, 3)
    assert_within(got, x * 2.0 + y, 1e-6, 1e-6)


@webgpu
@needs_adapter
def test_a_dispatch_larger_than_asked_for_leaves_rows_right(device):
    # 19 rows on at most 3 workgroups per dimension: 27 workgroups, 8 past the last row
    matrix = randn(19, 300)
    saved = dict(device.limits)
    device.limits["max-compute-workgroups-per-dimension"] = 3
    try:
        got, launch = device.launch(*lower_block(ROW_SUMS, {"matrix": matrix}))
    finally:
        device.limits.clear()
        device.limits.update(saved)
    assert launch.geometry["passes"][0]["workgroups"] == (3, 3, 3)
    assert launch.geometry["schedule"].startswith("reduce(+, axis=1): one block per output")
    assert_within(got, matrix.astype(np.float64).sum(1), 1e-5, 1e-4)


@webgpu
@needs_adapter
def test_gather_and_an_index_out_of_range(device):
    table = randn(5, 3)
    idx = np.array([4, 0, 2, 2, 1, 3, 0], np.int32)
    got, _ = run(device, GATHER, {"table": table, "idx": idx})
    np.testing.assert_array_equal(got, table[idx])
    bad = idx.copy()
    bad[5] = 7
    with pytest.raises(ZynMLRuntimeError) as err:
        run(device, GATHER, {"table": table, "idx": bad})
    assert f"line {line_of(GATHER, 'out[i, j] = table')}" in str(err.value)
    assert "index 7 is out of range for an axis of size 5 of `table`" in str(err.value)


@webgpu
@needs_adapter
def test_integer_division_truncates_and_by_zero_is_an_error(device):
    a = np.array([7, -7, 7, -7, 0, 100, -2 ** 31 + 1, -8], np.int32)
    b = np.array([2, 2, -2, -2, 3, 7, 3, 3], np.int32)
    got, _ = run(device, DIVIDE, {"a": a, "b": b})
    quot = np.trunc(a.astype(np.float64) / b).astype(np.int64)
    rem = np.fmod(a.astype(np.int64), b)
    by4, rem3 = np.trunc(a / 4.0).astype(np.int64), np.fmod(a.astype(np.int64), 3)
    np.testing.assert_array_equal(got, (quot + rem * 1000 + (by4 - rem3) * 1000000).astype(np.int32))
    b[3] = 0
    with pytest.raises(ZynMLRuntimeError, match="integer division by zero") as err:
        run(device, DIVIDE, {"a": a, "b": b})
    assert f"line {line_of(DIVIDE, 'out[i] = a[i] / b[i]')}" in str(err.value)


@webgpu
@needs_adapter
def test_nan_propagates_through_max(device):
    x = np.array([1.0, np.nan, 3.0, -np.inf, np.nan, -5.0], np.float32)
    y = np.array([np.nan, 2.0, 1.0, np.nan, np.nan, -6.0], np.float32)
    got, _ = run(device, NAN_MAX, {"x": x, "y": y})
    np.testing.assert_array_equal(got, np.maximum(np.maximum(x, y), np.float32(-1.0)))


@webgpu
@needs_adapter
@pytest.mark.parametrize("n", [1, 37, 257, 5000])
def test_bool_reductions_and_argmin_with_nan(device, n):
    x = np.linspace(0.5, 1.5, n).astype(np.float32)
    got, _ = device.launch(*lower_block(ALL_POSITIVE, {"x": x}))
    assert bool(got) is True
    x[n // 2] = -1.0
    got, _ = device.launch(*lower_block(ALL_POSITIVE, {"x": x}))
    assert bool(got) is False
    y = randn(n)
    y[(3 * n) // 4] = np.nan
    got, _ = device.launch(*lower_block(ARGMIN, {"x": y}))
    assert int(got) == int(np.argmin(y * y - 1))        # numpy: the first NaN


@webgpu
@needs_adapter
@pytest.mark.parametrize("n", [1, 255, 100_003])
def test_reductions(device, n):
    data = randn(n)
    data[n // 2] = 7.5
    got, launch = device.launch(*lower_block(REDUCE_SUM, {"data": data}))
    assert launch.geometry["schedule"].startswith("reduce(+)")
    assert_within(got, data.astype(np.float64).sum(), 1e-5, 1e-4)
    got, launch = device.launch(*lower_block(REDUCE_MAX, {"data": data}))
    assert launch.geometry["schedule"].startswith("reduce(max)") and got == np.float32(7.5)
    data[n - 1] = np.nan            # NaN wins, as numpy's max
    got, _ = device.launch(*lower_block(REDUCE_MAX, {"data": data}))
    assert np.isnan(got)
    matrix = randn(max(1, n // 100), 301)
    got, launch = device.launch(*lower_block(ROW_SUMS, {"matrix": matrix}))
    assert launch.geometry["schedule"].startswith("reduce(+, axis=1)")
    assert_within(got, matrix.astype(np.float64).sum(1), 1e-5, 1e-4)


@webgpu
@needs_adapter
def test_generated_source_is_the_program_that_runs(device):
    k, ins, sz, sc = lower_block(ELEMENTWISE, {"x": randn(3, 5), "y": randn(5)})
    shown = device.generated_source(k, sizes=sz)["wgsl"]
    assert "// ZynBook WGSL for kernel" in shown and "_g < _total" in shown
    device.launch(k, ins, sz, sc)
    assert device.last_programs[0].source == shown
    # no sizes: nothing known to be equal, so indices of x are checked
    assert "zyn_chk" in device.generated_source(k)["wgsl"]


@webgpu
@needs_adapter
def test_float_inequality_is_true_for_nan(device):
    x = np.array([1.0, np.nan, 2.0, np.nan, -0.0], np.float32)
    y = np.array([1.0, 1.0, np.nan, np.nan, 0.0], np.float32)
    got, _ = run(device, NOT_EQUAL, {"x": x, "y": y})
    np.testing.assert_array_equal(got, (x != y).astype(np.float32))


@webgpu
@needs_adapter
def test_scalar_argument_and_a_size(device):
    x = randn(1003)
    got, _ = run(device, SCALED, {"x": x}, {"scale": 1.5}, {"shift": 3})
    assert_within(got, x * np.float32(1.5) + 3, 1e-6, 1e-6)
    # a new scalar value is a new uniform, not a new program
    misses = device.cache.misses
    got, launch = run(device, SCALED, {"x": x}, {"scale": -0.5}, {"shift": 3})
    assert device.cache.misses == misses and launch.times.compile == 0.0
    assert_within(got, x * np.float32(-0.5) + 3, 1e-6, 1e-6)
    # a new size is a new uniform too (a negative one is a new pattern: a new program)
    got, _ = run(device, SCALED, {"x": randn(77)}, {"scale": 1.5}, {"shift": 5})
    assert device.cache.misses == misses
    got, _ = run(device, SCALED, {"x": x}, {"scale": 1.5}, {"shift": -4})
    assert device.cache.misses == misses + 1
    assert_within(got, x * np.float32(1.5) - 4, 1e-6, 1e-6)


@webgpu
@needs_adapter
def test_one_compile_for_every_size(device):
    misses = None
    for n in (1, 255, 4097, 100_003):
        data = randn(n)
        for src in (REDUCE_SUM, ELEMENTWISE_1D):
            arrays = {"data": data} if src is REDUCE_SUM else {"x": data, "y": data}
            got, launch = device.launch(*lower_block(src, arrays))
            want = data.astype(np.float64).sum() if src is REDUCE_SUM else data * 2.0 + data
            assert_within(got, want, 1e-5, 1e-4)
            assert not launch.geometry["schedule"] == "generic"
        if misses is None:
            misses = device.cache.misses
    assert device.cache.misses == misses


@webgpu
@needs_adapter
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_bool_and_narrow_integer_buffers(device, dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, 301, endpoint=True).astype(dtype)
    b = RNG.integers(info.min, info.max, 301, endpoint=True).astype(dtype)
    a[:2], b[:2] = info.max, info.max
    flags = RNG.random(301) > 0.5
    got, _ = run(device, FLAGS_I8, {"a": a, "b": b, "flags": flags})
    with np.errstate(over="ignore"):
        want = np.where(flags, a + b, a * b)        # both wrap at the dtype's width
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@webgpu
@needs_adapter
def test_f16_buffers_where_the_adapter_has_them(device):
    if "shader-f16" not in device.features:
        pytest.skip("this adapter has no shader-f16")
    x = randn(333).astype(np.float16)
    got, _ = run(device, HALF, {"x": x})
    assert got.dtype == np.float16
    want = (x.astype(np.float32) * 3 + 1).astype(np.float16)
    assert_within(got.astype(np.float32), want.astype(np.float32), 1e-3, 1e-3)


@webgpu
@needs_adapter
def test_f64_where_the_adapter_has_it(device):
    if "shader-f64" not in device.features:
        pytest.skip("this adapter has no shader-f64")
    x, y = RNG.random(517) * 10, RNG.standard_normal(517) * 40
    y[3] = np.nan
    got, _ = run(device, DOUBLE, {"x": x, "y": y})
    assert got.dtype == np.float64
    assert_within(got, np.maximum(np.sqrt(x), y * 0.1) + 1.0, 1e-12, 1e-12)
    assert np.isnan(got[3])


# ------------------------------------------- launch IR written by hand: what no schedule
# makes yet (atomics, workgroup memory, barriers, sizes passed as uniforms)


def hand_program():
    from zynbook.compiler import errflag
    from zynbook.compiler.launch import ir
    i32 = "i32"
    t = ir.Ref("_t", i32)
    me = ir.Bin("+", ir.Bin("*", ir.Thread("block"), ir.Thread("threads"), i32), ir.Thread("thread"), i32)
    sites = errflag.ErrorSites()
    # WGSL's select evaluates both arms, as the reference's does: the index stays in range
    last = ir.Bin("-", ir.Ref("u_n", i32), ir.Lit(1, i32), i32)
    x = ir.Load("u_x", ir.Checked(ir.Math("min", (t, last), i32), ir.Ref("u_n", i32),
                                  sites.add(errflag.INDEX, 2, "x", "n"), i32), "f32")
    body = (
        ir.Array("_s", "f32", 64, "shared", 1),
        ir.Decl("_t", i32, me, False, 1),
        ir.Store("_s", ir.Thread("thread"), ir.Select(ir.Bin("<", t, ir.Ref("u_n", i32), "bool"), x,
                                                      ir.Lit(0.0, "f32"), "f32"), None, 2),
        ir.Barrier(2),
        ir.If(ir.Bin("<", t, ir.Ref("u_n", i32), "bool"), (
            ir.Atomic("+", "u_hist", ir.Checked(ir.Load("u_idx", t, i32), ir.Lit(8, i32),
                                                sites.add(errflag.INDEX, 3, "hist", 8), i32),
                      ir.Lit(1, i32), None, 3),
            ir.Atomic("max", "u_peak", ir.Lit(0, i32),
                      ir.Bin("*", ir.Load("_s", ir.Thread("thread"), "f32"), ir.Ref("u_alpha", "f32"), "f32"),
                      None, 4),
            ir.Atomic("+", "u_peak", ir.Lit(1, i32), ir.Load("_s", ir.Thread("thread"), "f32"), None, 5),
        )),
    )
    params = (ir.Param("u_x", "buffer", "f32"), ir.Param("u_idx", "buffer", i32),
              ir.Param("u_hist", "buffer", i32, True), ir.Param("u_peak", "buffer", "f32", True),
              ir.Param("u_alpha", "scalar", "f32"), ir.Param("u_n", "size", i32))
    k = ir.Kernel("zyn_k_hand", params, body, 64)
    n = ir.Ref("u_n", i32)
    return ir.Program("hand", (k,), (ir.Launch(k.name, ir.ceildiv(n, 64), 64),), (),
                      sites.as_tuple(), "by hand")


def test_atomics_workgroup_memory_and_uniform_sizes_are_spelled():
    from zynbook.compiler.codegen.printer import print_program
    d = WgslDialect()
    src = print_program(d, hand_program()).source
    assert "var<workgroup> _s: array<f32, 64>;" in src and "workgroupBarrier();" in src
    assert "var<storage, read_write> u_hist: array<atomic<i32>>;" in src
    assert "var<storage, read_write> u_peak: array<atomic<u32>>;" in src
    assert "atomicAdd(&u_hist[zyn_chk(u_idx[_t], 8i, 2i)], 1i);" in src
    assert "atomicCompareExchangeWeak(&u_peak[zyn_i]" in src
    assert "struct ZynParams {\n    u_alpha: f32,\n    u_n: i32,\n}" in src
    assert "let u_n: i32 = zyn_p.u_n;" in src
    assert [b[2] for b in d.bindings(hand_program())] == ["u_x", "u_idx", "u_hist", "u_peak",
                                                           "@error", "@params"]


@webgpu
@needs_adapter
def test_hand_written_launch_ir_runs(device):
    """The program above compiled and run with wgpu directly: integer and float atomics
    (a compare-exchange loop), workgroup memory across a barrier, sizes as uniforms."""
    from zynbook.backends.webgpu import runtime as rt
    from zynbook.backends.webgpu.device import _layout_entry
    from zynbook.compiler.codegen.printer import print_program
    from zynbook.compiler.launch import ir
    wgpu = rt.load_wgpu()
    prog = hand_program()
    d = WgslDialect()
    src = print_program(d, prog).source
    n, alpha = 1000, 0.5
    x = randn(n)
    idx = RNG.integers(0, 8, n).astype(np.int32)
    dev = device.device
    data = {"u_x": x, "u_idx": idx, "u_hist": np.zeros(8, np.int32),
            "u_peak": np.array([-np.inf, 0.0], np.float32),
            "@error": np.zeros(2, np.int32)}
    bufs = {}
    for name, a in data.items():
        bufs[name] = device._buffer(a.nbytes, name)
        dev.queue.write_buffer(bufs[name], 0, a.tobytes())
    params = rt.pack_uniform([("f32", alpha), ("i32", n)])
    bufs["@params"] = device._buffer(len(params), "params",
                                     wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
    dev.queue.write_buffer(bufs["@params"], 0, params)
    bindings = [wgsl.ProgramBinding(b, name, role, access, elem) for b, name, role, access, elem, _
                in d.bindings(prog)]
    layout = dev.create_bind_group_layout(entries=[_layout_entry(b) for b in bindings])
    pipe = dev.create_compute_pipeline(
        layout=dev.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": dev.create_shader_module(code=src), "entry_point": "zyn_k_hand"})
    group = dev.create_bind_group(layout=layout, entries=[
        {"binding": b.binding, "resource": {"buffer": bufs[b.buffer], "offset": 0,
                                            "size": bufs[b.buffer].size}} for b in bindings])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    cp.dispatch_workgroups(int(ir.evaluate(prog.launches[0].grid, {"u_n": n})), 1, 1)
    cp.end()
    dev.queue.submit([enc.finish()])
    read = lambda name, dt, count: np.frombuffer(dev.queue.read_buffer(bufs[name]), dt)[:count]
    np.testing.assert_array_equal(read("u_hist", np.int32, 8), np.bincount(idx, minlength=8))
    peak = read("u_peak", np.float32, 2)
    assert peak[0] == np.float32(x.max() * alpha)
    assert_within(peak[1], x.astype(np.float64).sum(), 1e-4, 1e-3)
    np.testing.assert_array_equal(read("@error", np.int32, 2), [0, 0])


@webgpu
@needs_adapter
def test_a_host_int_past_i32_is_refused_at_launch(device):
    """`shift`, a host int, is named as one (not as a size or an index)."""
    with pytest.raises(ZynMLDeviceError, match=r"the host int `shift` = 2147483648 is past "
                                               r"the 32-bit integers"):
        run(device, SCALED, {"x": randn(5)}, {"scale": 1.0}, {"shift": 2 ** 31})


def test_registers_indexed_by_constants_are_variables_and_one_trip_loops_go():
    """A local array read and written only at constant indices (its loops written out) is
    printed as one variable per element; one indexed by a value stays an array; a loop of one
    trip is its body, its variable a constant."""
    from zynbook.compiler.codegen.printer import print_program
    from zynbook.compiler.launch import ir
    i32, f32 = "i32", "f32"
    t = ir.Thread("thread")
    body = (ir.Array("_a", f32, 2), ir.Array("_b", f32, 2),
            ir.For("_u", ir.Lit(0, i32), ir.Lit(2, i32), ir.Lit(1, i32), (
                ir.Store("_a", ir.Ref("_u", i32), ir.Load("u_x", ir.Ref("_u", i32), f32)),
                ir.Store("_b", ir.Ref("_u", i32), ir.Lit(0.0, f32))), unroll=True),
            ir.For("_one", ir.Lit(3, i32), ir.Lit(4, i32), ir.Lit(8, i32), (
                ir.Store("u_y", t, ir.Bin("+", ir.Load("_a", ir.Lit(1, i32), f32),
                                          ir.Load("_b", ir.Bin("%", t, ir.Lit(2, i32), i32), f32), f32)),
                ir.Store("u_y", ir.Ref("_one", i32), ir.Load("_a", ir.Lit(0, i32), f32)))))
    params = (ir.Param("u_x", "buffer", f32), ir.Param("u_y", "buffer", f32, True))
    k = ir.Kernel("k", params, body, 64)
    prog = ir.Program("k", (k,), (ir.Launch("k", ir.Lit(1, i32), 64),))
    src = print_program(WgslDialect(), prog).source
    assert "var _a_0: f32;" in src and "_a_1 = u_x[1i];" in src and "(_a_1 + _b[" in src
    assert "var _b: array<f32, 2>;" in src and "_a[" not in src
    assert "_one" not in src and "u_y[3i] = _a_0;" in src


@webgpu
@needs_adapter
def test_64_bit_integers_are_refused_saying_so(device):
    """WGSL has no 64-bit integers: i64 arithmetic past i32 is a runtime error, and i64
    data past i32 a device error, that say so and name the devices that run them."""
    import zynbook
    from zynbook.errors import ZynMLRuntimeError
    s = zynbook.Session(device.id)
    src = ("let y = compute(a) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = a[i] * 3 + a[i] / 2\n}\ny")
    a = np.array([40, -5, 7], np.int64)
    np.testing.assert_array_equal(np.asarray(s.run(src, a=a).numpy()), a * 3 + np.trunc(a / 2))
    with pytest.raises(ZynMLRuntimeError, match=r"line 4, .*past the 32 bits.*run it on `cpu`"):
        s.run(src, a=np.array([40, 2 ** 30], np.int64))
    with pytest.raises(ZynMLDeviceError, match=r"int64 values from -5 to 1099511627776 do not "
                                               r"fit the device's i32 storage \(WebGPU has no"):
        s.run("let y = compute(a) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        out[i] = a[i]\n}\ny", a=np.array([2 ** 40, -5], np.int64))
    assert s.run("1 + 2") == 3


@webgpu
@needs_adapter
def test_attention_past_the_largest_head_dim_class_runs_a_program_built_for_it(device):
    """The attention program of every size set holds head_dim up to its largest class
    (128); a launch past it runs a program built for its sizes instead of being refused."""
    from attention_sources import three_pass
    rng = np.random.default_rng(132)
    small = {n: rng.standard_normal((1, 1, 7, 64)).astype(np.float32) for n in "QKV"}
    kernel, _, sz, _ = lower_block(three_pass(), small)
    # where the adapter's attention is built for each launch's sizes (register-tiled
    # products on an NVIDIA adapter) no program of every size set has a limit to pass
    every_size = not device.specialised(kernel, sz).launch_sizes
    limits = device.compile(kernel, sz).program.error_sites
    q, k, v = (rng.standard_normal((1, 1, 7, 132)).astype(np.float32) for _ in range(3))
    kernel, ins, sz, sc = lower_block(three_pass(), {"Q": q, "K": k, "V": v})
    assert device.specialised(kernel, sz).launch_sizes
    assert wgsl.past_limits(limits, sz) or not every_size
    got, _ = device.launch(kernel, ins, sz, sc)
    s = q[0, 0].astype(np.float64) @ k[0, 0].T.astype(np.float64) / np.sqrt(132)
    w = np.exp(s - s.max(1, keepdims=True))
    assert_within(got[0, 0], (w / w.sum(1, keepdims=True)) @ v[0, 0], 1e-5, 1e-5)
