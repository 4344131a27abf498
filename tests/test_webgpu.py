"""WebGPU backend: the WGSL renderer (pure text, pinned by golden files) and the wgpu device
(run for real on any adapter, e.g. Mesa's lavapipe), compared against numpy.

Tests that need an adapter are marked `webgpu` and skip when wgpu-py or a driver is absent.
Set ZYNBOOK_UPDATE_GOLDEN=1 to rewrite tests/golden/wgsl/ after an intended change.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from zynbook.compiler.codegen import wgsl
from zynbook.errors import ZynMLDeviceError
from zynbook.backends.webgpu import runtime as rt

from compute_testing import float32_normals, lower_block
from kernel_sources import (ARGMAX, ATTENTION, BATCHED_MATMUL, BROADCAST, CONV2D, FLASH, GELU,
                            LAYER_NORM, MATMUL, MUL_ADD, REDUCE_MAX, REDUCE_SUM, RMS_NORM,
                            ROW_SUMS, SHARED_FFN, SOFTMAX_FUSED, SOFTMAX_ROWS)
from tolerances import assert_within

GOLDEN = Path(__file__).parent / "golden" / "wgsl"

# Tolerances, written once: (relative, absolute) by kind of computation.
TOL = {
    "elementwise": (1e-5, 1e-6),
    "reduction": (1e-4, 1e-5),      # tree order differs from a sequential sum
    "matmul": (1e-4, 1e-5),
    "attention": (1e-4, 1e-5),
    "matmul_f16": (2e-3, 2e-3),     # f16 result rounding
}


def close(got, want, kind):
    assert_within(got, want, *TOL[kind])


# ------------------------------------------------------------------------- programs

RNG = np.random.default_rng(1234)
randn = float32_normals(RNG)

LINEAR = """let y = compute(x, w, bias) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += x[i, k] * w[j, k]
        out[i, j] = max(sum + bias[j], 0.0)
}"""

# the accumulator starts at a load: not the tiled form, so the generic schedule runs it
MATMUL_BIAS_INIT = """let y = compute(x, w, bias) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = bias[j]
        for k in 0..K:
            sum += x[i, k] * w[k, j]
        out[i, j] = sum
}"""

# a causal condition on the loop variables instead of a mask tensor
CAUSAL = ATTENTION.replace("compute(Q, K, V, mask)", "compute(Q, K, V)").replace(
    "if mask[i, j]:", "if j <= i:")

# not the three-pass form (the score has an extra term): the rows schedule runs it
ATTENTION_BIASED = ATTENTION.replace("/ sqrt(head_dim)", "/ sqrt(head_dim) + 0.5 * V[b, h, j, 0]")


def np_attention(Q, K, V, mask=None):
    s = Q.astype(np.float64) @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):     # a query that sees no key gives nan here
        s = s - s.max(-1, keepdims=True)
        p = np.exp(s)
        return (p / p.sum(-1, keepdims=True)) @ V


def np_attention_biased(Q, K, V, mask):
    s = Q.astype(np.float64) @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) + \
        0.5 * V[..., None, :, 0]
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ V


def np_conv2d(x, w, bias, stride, padding):
    B, C, H, W = x.shape
    O, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (H + 2 * padding - kh) // stride + 1
    ow = (W + 2 * padding - kw) // stride + 1
    out = np.zeros((B, O, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("bchw,ochw->bo", patch, w)
    return out + bias[None, :, None, None]


# Each case: source, arrays, scalars, sizes, numpy reference, tolerance kind.
# Sizes are deliberately not multiples of the workgroup (256) or the tiles (64).
def _cases():
    x, y = randn(1000), randn(1000)
    m, v = randn(37, 53), randn(53)
    data = randn(100_003)
    ln_x, g, bt = randn(37, 300), RNG.random(300).astype(np.float32), randn(300)
    A, B = randn(70, 33), randn(33, 45)
    A3, B3 = randn(3, 21, 17), randn(3, 17, 19)
    ci, ck, cb = randn(2, 3, 9, 11), randn(4, 3, 3, 3), randn(4)
    Q, K, V = randn(2, 3, 300, 16), randn(2, 3, 300, 16), randn(2, 3, 300, 16)
    mask = np.tril(np.ones((300, 300), bool))
    fq, fk, fv = randn(2, 3, 100, 16), randn(2, 3, 100, 16), randn(2, 3, 100, 16)
    sq, sk, sv = randn(1, 2, 21, 4), randn(1, 2, 21, 4), randn(1, 2, 21, 4)
    fx, fu, fd = randn(5, 12), randn(12, 40), randn(40, 12)
    logits = randn(1000)
    sm = randn(7, 1000)
    aq, ak, av = randn(1, 2, 77, 64), randn(1, 2, 77, 64), randn(1, 2, 77, 64)
    amask = RNG.random((77, 77)) > 0.3
    amask[5] = False                 # a query that sees no key: its output is 0
    wq, wk, wv = randn(1, 1, 40, 100), randn(1, 1, 40, 100), randn(1, 1, 40, 100)
    tA, tB = randn(150, 70), randn(70, 200)
    lx, lw, lb = randn(130, 37), randn(67, 37), randn(67)
    hA, hB = randn(33, 20).astype(np.float16), randn(20, 9).astype(np.float16)
    return {
        "mul_add": (MUL_ADD, {"x": x, "y": y}, {}, {}, x * y + 1, "elementwise"),
        "gelu": (GELU, {"x": x * 4}, {}, {},
                 0.5 * (x * 4) * (1 + np.tanh(0.7978845608 * (x * 4 + 0.044715 * (x * 4) ** 3))),
                 "elementwise"),
        "broadcast": (BROADCAST, {"matrix": m, "vector": v}, {}, {}, m * v, "elementwise"),
        "reduce_sum": (REDUCE_SUM, {"data": data}, {}, {}, data.astype(np.float64).sum(), "reduction"),
        "reduce_max": (REDUCE_MAX, {"data": data}, {}, {}, data.max(), "reduction"),
        "argmax": (ARGMAX, {"data": data}, {}, {}, data.argmax(), "reduction"),
        "row_sums": (ROW_SUMS, {"matrix": m}, {}, {}, m.astype(np.float64).sum(1), "reduction"),
        "matmul": (MATMUL, {"A": A, "B": B}, {}, {}, A.astype(np.float64) @ B, "matmul"),
        "batched_matmul": (BATCHED_MATMUL, {"A": A3, "B": B3}, {}, {}, A3.astype(np.float64) @ B3, "matmul"),
        # several block tiles in each direction, k not a multiple of the tile depth
        "matmul_tiles": (MATMUL, {"A": tA, "B": tB}, {}, {}, tA.astype(np.float64) @ tB, "matmul"),
        # x @ w^T with a bias and ReLU epilogue; w's contiguous axis is k
        "linear_bias_relu": (LINEAR, {"x": lx, "w": lw, "bias": lb}, {}, {},
                             np.maximum(lx.astype(np.float64) @ lw.T + lb, 0), "matmul"),
        "matmul_f16": (MATMUL, {"A": hA, "B": hB}, {}, {},
                       hA.astype(np.float64) @ hB.astype(np.float64), "matmul_f16"),
        "matmul_bias_init": (MATMUL_BIAS_INIT, {"x": lx, "w": lw.T.copy(), "bias": lb}, {}, {},
                             lx.astype(np.float64) @ lw.T + lb, "matmul"),
        "conv2d": (CONV2D, {"input": ci, "kernel": ck, "bias": cb}, {},
                   {"stride": 2, "padding": 1, "out_h": 5, "out_w": 6},
                   np_conv2d(ci, ck, cb, 2, 1), "matmul"),
        "softmax_fused": (SOFTMAX_FUSED, {"logits": logits}, {}, {},
                          np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum(),
                          "reduction"),
        "softmax_rows": (SOFTMAX_ROWS, {"x": sm}, {}, {},
                         np.exp(sm - sm.max(1, keepdims=True)) /
                         np.exp(sm - sm.max(1, keepdims=True)).sum(1, keepdims=True), "reduction"),
        "layer_norm": (LAYER_NORM, {"x": ln_x, "gamma": g, "beta": bt}, {"eps": 1e-5}, {},
                       (ln_x - ln_x.mean(1, keepdims=True)) /
                       np.sqrt(ln_x.var(1, keepdims=True) + 1e-5) * g + bt, "reduction"),
        "rms_norm": (RMS_NORM, {"x": ln_x, "weight": g}, {"eps": 1e-6}, {},
                     ln_x / np.sqrt((ln_x.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * g,
                     "reduction"),
        "attention": (ATTENTION, {"Q": Q, "K": K, "V": V, "mask": mask}, {}, {},
                      np_attention(Q, K, V, mask), "attention"),
        "attention_d64_masked_row": (ATTENTION, {"Q": aq, "K": ak, "V": av, "mask": amask}, {}, {},
                                     np.nan_to_num(np_attention(aq, ak, av, amask)), "attention"),
        "attention_causal_d100": (CAUSAL, {"Q": wq, "K": wk, "V": wv}, {}, {},
                                  np_attention(wq, wk, wv, np.tril(np.ones((40, 40), bool))),
                                  "attention"),
        "attention_not_flash": (ATTENTION_BIASED, {"Q": sq, "K": sk, "V": sv,
                                                   "mask": np.tril(np.ones((21, 21), bool))}, {}, {},
                                np_attention_biased(sq, sk, sv, np.tril(np.ones((21, 21), bool))),
                                "attention"),
        "flash_attention": (FLASH.replace("BLOCK", "64"), {"Q": fq, "K": fk, "V": fv}, {},
                            {"seq_len": 100, "head_dim": 16}, np_attention(fq, fk, fv), "attention"),
        # small blocks keep the generic tile path within lavapipe's loop limit
        "flash_tiles_generic": (FLASH.replace("BLOCK", "8").replace("flash_attention", "fused"),
                                {"Q": sq, "K": sk, "V": sv}, {}, {"seq_len": 21, "head_dim": 4},
                                np_attention(sq, sk, sv), "attention"),
        "shared_ffn": (SHARED_FFN, {"x": fx, "up_w": fu, "down_w": fd}, {}, {},
                       np.maximum(fx.astype(np.float64) @ fu, 0) @ fd, "matmul"),
    }


CASES = _cases()

GEMM = "contraction as GEMM"     # compiler/schedules/gemm.py, its banner
ATTENTION = "(attention: "       # compiler/schedules/attention.py, in its banner
# rows of a workgroup (softmax, norms, shared arrays, tiles) are the block schedule's, built
# for the sizes of the launch
EXPECTED_SCHEDULE = {
    "mul_add": "thread", "reduce_sum": "reduce", "argmax": "reduce", "row_sums": "reduce",
    "layer_norm": "block", "softmax_rows": "block", "rms_norm": "block", "attention": ATTENTION,
    "flash_attention": ATTENTION, "flash_tiles_generic": "block", "shared_ffn": "block",
    "matmul": GEMM, "batched_matmul": GEMM, "matmul_tiles": GEMM,
    "linear_bias_relu": GEMM, "matmul_bias_init": GEMM,
    "matmul_f16": GEMM,             # f16 buffers without `shader-f16`: held in f32
    "conv2d": "contraction as implicit GEMM", "attention_d64_masked_row": ATTENTION,
    "attention_causal_d100": ATTENTION,
    # a score with an added term (here V's first column): attention with a bias
    "attention_not_flash": ATTENTION,
}


def _as_device(k, sz, **options):
    """WGSL options as the device specialises them for a launch of `sz`: on which sizes
    are equal, and on the sizes themselves where no program serves every size set."""
    from zynbook.backends.webgpu.device import _equal_sizes
    return wgsl.sized_for(wgsl.WGSLOptions(equal_sizes=_equal_sizes(k, sz), **options), k, sz)

# ------------------------------------------------------------------ renderer (no adapter)

GOLDEN_CASES = ["mul_add", "reduce_sum", "argmax", "row_sums", "layer_norm", "attention",
                "flash_attention", "softmax_fused", "matmul", "batched_matmul", "linear_bias_relu"]


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_generated_wgsl_is_pinned(name):
    src, arrays, scalars, sizes, _, _ = CASES[name]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, name)
    text = wgsl.render(k, _as_device(k, sz)).source
    path = GOLDEN / f"{name}.wgsl"
    if os.environ.get("ZYNBOOK_UPDATE_GOLDEN") or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"generated WGSL of {name} changed; see {path}"


@pytest.mark.parametrize("name", sorted(EXPECTED_SCHEDULE))
def test_schedule_choice(name):
    src, arrays, scalars, sizes, _, _ = CASES[name]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, name)
    got = wgsl.render(k, _as_device(k, sz)).schedule
    want = EXPECTED_SCHEDULE[name]
    assert (ATTENTION in got) if want == ATTENTION else got.startswith(want), got


def test_generated_code_is_readable():
    src, arrays, scalars, sizes, _, _ = CASES["layer_norm"]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, "layer_norm")
    text = wgsl.render(k, _as_device(k, sz)).source
    assert "fn zyn_k_layer_norm(" in text
    assert "// line 14: let inv_std = rsqrt(var + eps)" in text
    assert "var u_var:" in text         # ZynML names have their own prefix: `var` is no keyword


def test_workgroup_storage_limit_is_a_compile_error():
    src, arrays, scalars, sizes, _, _ = CASES["reduce_sum"]
    k, _, _, _ = lower_block(src, arrays, scalars, sizes, "reduce_sum")
    with pytest.raises(ZynMLDeviceError, match="workgroup memory"):
        wgsl.render(k, wgsl.WGSLOptions(max_workgroup_storage=512))


def test_storage_buffer_count_limit_is_a_compile_error():
    src, arrays, scalars, sizes, _, _ = CASES["attention"]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, "attention")
    with pytest.raises(ZynMLDeviceError, match="storage buffers"):
        wgsl.render(k, _as_device(k, sz, max_storage_buffers=3))


def test_uniform_layout_follows_wgsl_alignment():
    offsets, size = rt.uniform_layout(["f32", "vec3<f32>", "f32", "vec2<f32>", "i32"])
    assert offsets == [0, 16, 28, 32, 40]
    assert size == 48
    offsets, size = rt.uniform_layout(["i32", "i32", "f32"])
    assert offsets == [0, 4, 8] and size == 16
    packed = rt.pack_uniform([("i32", 7), ("f32", 0.5), ("u32", 3)])
    assert np.frombuffer(packed[:4], "<i4")[0] == 7
    assert np.frombuffer(packed[4:8], "<f4")[0] == 0.5
    with pytest.raises(ZynMLDeviceError):
        rt.pack_uniform([("i32", 2**40)])
    with pytest.raises(ZynMLDeviceError, match=r"`k` is 1099511627776, past WebGPU's i32"):
        rt.pack_uniform([("f32", 0.5), ("i32", 2**40)], ["scale", "k"])
    offsets, size = rt.uniform_layout(["i32", "f64", "f32"])     # f64 scalars: 8 bytes
    assert offsets == [0, 8, 16] and size == 32
    packed = rt.pack_uniform([("i32", 1), ("f64", 0.1)])
    assert np.frombuffer(packed[8:16], "<f8")[0] == 0.1


@pytest.mark.parametrize("n", [1, 65535, 65536, 65535 * 3 + 1, 65535 * 65535 + 5])
def test_dispatch_split_covers_every_workgroup(n):
    x, y, z = rt.split_workgroups(n)
    assert max(x, y, z) <= 65535
    assert x * y * z >= n
    assert x * y * z - n < x * y  # at most one partial layer


def test_storage_conversion_refuses_values_that_do_not_fit():
    with pytest.raises(ZynMLDeviceError):
        rt.to_storage(np.array([2**40], np.int64), "i32")
    got = rt.to_storage(np.array([True, False]), "u32")
    assert got.tolist() == [1, 0]


# ------------------------------------------------------------------- device (adapter)

from zynbook.backends.webgpu import discover  # noqa: E402

DEVICES = discover()
webgpu = pytest.mark.webgpu
needs_adapter = pytest.mark.skipif(not DEVICES, reason="no wgpu adapter (install wgpu and "
                                   "mesa-vulkan-drivers)")


@pytest.fixture(scope="module")
def device():
    wanted = os.environ.get("ZYNBOOK_WEBGPU_DEVICE")
    if wanted:
        from zynbook.backends.webgpu import get_device
        return get_device(wanted)
    return DEVICES[0]


@webgpu
@needs_adapter
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_equals_numpy(device, name):
    src, arrays, scalars, sizes, want, kind = CASES[name]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, name)
    got, launch = device.launch(k, ins, sz, sc)
    assert got.shape == np.shape(want)
    close(got, want, kind)
    assert launch.device == device.id
    assert launch.times.kernel is not None and launch.times.kernel >= 0


@webgpu
@needs_adapter
def test_discovery_ids(device):
    ids = {a for d in DEVICES for a in d.aliases}
    assert {f"webgpu:{i}" for i in range(len(DEVICES))} <= ids
    info = device.info()
    assert info["id"] == device.id and info["backend"] in ("vulkan", "metal", "dx12", "gl")
    assert info["max_storage_buffer_binding_size"] > 0
    prefs = [d.preference() for d in DEVICES]
    assert prefs == sorted(prefs)


@webgpu
@needs_adapter
def test_more_workgroups_than_one_dimension_allows(device):
    # one workgroup per row: 70000 rows need a 2-D dispatch
    mat = randn(70_000, 3)
    k, ins, sz, sc = lower_block(ROW_SUMS, {"matrix": mat})
    got, launch = device.launch(k, ins, sz, sc)
    assert launch.geometry["passes"][0]["workgroups"][1] > 1
    close(got, mat.astype(np.float64).sum(1), "reduction")


@webgpu
@needs_adapter
def test_int64_and_bool_buffers(device):
    src = """let z = compute(a, b, flags) {
    @kernel elementwise
    for i in 0..len:
        if flags[i]:
            out[i] = a[i] + f32(b[i])
        else:
            out[i] = -1.0
}"""
    a = randn(300)
    b = RNG.integers(-50, 50, 300).astype(np.int64)
    flags = RNG.random(300) > 0.5
    k, ins, sz, sc = lower_block(src, {"a": a, "b": b, "flags": flags})
    got, _ = device.launch(k, ins, sz, sc)
    close(got, np.where(flags, a + b, -1.0), "elementwise")


@webgpu
@needs_adapter
def test_pipeline_cache_reuses_compiled_kernels(device):
    src, arrays, scalars, sizes, want, kind = CASES["mul_add"]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, "mul_add")
    device.launch(k, ins, sz, sc)
    misses = device.cache.misses
    x2 = randn(777)
    y2 = randn(777)
    k2, ins2, sz2, sc2 = lower_block(src, {"x": x2, "y": y2}, name="mul_add")
    got, launch = device.launch(k2, ins2, sz2, sc2)
    assert device.cache.misses == misses          # same CIR, new sizes: no recompile
    assert launch.times.compile == 0.0
    close(got, x2 * y2 + 1, "elementwise")


@webgpu
@needs_adapter
def test_async_launch_maps_asynchronously(device):
    src, arrays, scalars, sizes, want, kind = CASES["layer_norm"]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, "layer_norm")
    fut = device.launch_async(k, ins, sz, sc)
    got, launch = fut.result()
    close(got, want, kind)


@webgpu
@needs_adapter
def test_resident_arrays_chain_without_round_trip(device):
    src, arrays, scalars, sizes, want, kind = CASES["mul_add"]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, "mul_add")
    xd, yd = device.from_host(ins[0]), device.from_host(ins[1])
    out, _ = device.launch(k, [xd, yd], sz, sc, keep_on_device=True)
    out2, _ = device.launch(k, [out, yd], sz, sc)
    close(out2, (arrays["x"] * arrays["y"] + 1) * arrays["y"] + 1, "elementwise")


@webgpu
@needs_adapter
def test_buffer_larger_than_the_adapter_allows_is_a_device_error(device):
    src, arrays, scalars, sizes, want, kind = CASES["mul_add"]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, "mul_add")
    limit = device.limits["max-storage-buffer-binding-size"]
    saved = dict(device.limits)
    device.limits["max-storage-buffer-binding-size"] = 1024
    try:
        with pytest.raises(ZynMLDeviceError, match="binds at most"):
            device.launch(k, ins, sz, sc)
    finally:
        device.limits.clear()
        device.limits.update(saved)
    assert device.limits["max-storage-buffer-binding-size"] == limit


# ------------------------------------------------------------- adapter features (text)


def test_subgroup_reductions_are_rendered_where_the_adapter_has_them():
    src, arrays, scalars, sizes, _, _ = CASES["layer_norm"]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, "layer_norm")
    plain = wgsl.render(k, _as_device(k, sz)).source
    assert "subgroup" not in plain and "_tree_part" in plain
    sub = wgsl.render(k, _as_device(k, sz, subgroups=True)).source
    assert sub.startswith("enable subgroups;")
    assert "@builtin(subgroup_size) zyn_sg_size: u32" in sub
    assert sub.count("zyn_block_add_f32_256(") == 3     # the function, mean and variance
    assert "_tree_part" not in sub
    naga = wgsl.render(k, _as_device(k, sz, subgroups=True, subgroups_directive=False)).source
    assert "enable subgroups" not in naga and "subgroupAdd" in naga
    # max reductions use subgroupMax; argmax keeps its index and the tree
    src, arrays, scalars, sizes, _, _ = CASES["reduce_max"]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, "reduce_max")
    assert "subgroupMax(x)" in wgsl.render(k, _as_device(k, sz, subgroups=True)).source
    src, arrays, scalars, sizes, _, _ = CASES["argmax"]
    k, _, sz, _ = lower_block(src, arrays, scalars, sizes, "argmax")
    arg = wgsl.render(k, _as_device(k, sz, subgroups=True)).source
    assert "subgroupM" not in arg and "_ri" in arg


def test_f16_is_enabled_only_where_the_adapter_has_it():
    src, arrays, scalars, sizes, _, _ = CASES["matmul_f16"]
    k, _, _, _ = lower_block(src, arrays, scalars, sizes, "matmul_f16")
    on = wgsl.render(k, wgsl.WGSLOptions(f16=True)).source
    assert on.startswith("enable f16;")
    # the GEMM schedule's program (f16 buffers stored as f16)
    assert "var<storage, read> u_A: array<f16>;" in on and "u_out: array<f16>;" in on
    off = wgsl.render(k, wgsl.WGSLOptions(f16=False)).source    # held in f32
    assert "f16;" not in off and "var<storage, read> u_A: array<f32>;" in off


@webgpu
@needs_adapter
@pytest.mark.parametrize("name", ["layer_norm", "reduce_sum", "softmax_rows"])
def test_reductions_with_and_without_subgroups(device, monkeypatch, name):
    src, arrays, scalars, sizes, want, kind = CASES[name]
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, name)
    monkeypatch.delenv("ZYNBOOK_WEBGPU_NO_FEATURES", raising=False)
    has = "subgroup" in device.features             # used by default where the adapter has it
    assert device.options().subgroups == has
    if has:
        assert "subgroupAdd" in device.program(k, sz).source or \
            "subgroupMax" in device.program(k, sz).source
    got, _ = device.launch(k, ins, sz, sc)
    close(got, want, kind)
    monkeypatch.setenv("ZYNBOOK_WEBGPU_NO_FEATURES", "subgroup")
    assert not device.options().subgroups
    assert "subgroup" not in device.program(k, sz).source
    got, _ = device.launch(k, ins, sz, sc)
    close(got, want, kind)


def _attention_numpy(Q, K, V, allowed, scale):
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) * scale
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), V)


@webgpu
@needs_adapter
@pytest.mark.parametrize("mask", ["bool", "causal", "none"])
@pytest.mark.parametrize("shape", [(1, 2, 77, 32), (2, 1, 130, 16), (1, 3, 5, 32)])
def test_attention_register_tiled_products_on_subgroup_lanes(device, monkeypatch, mask, shape):
    """Where the adapter's subgroups hold the lanes sharing a query row, attention runs as
    register-tiled products built for the launch's sizes (their rows' max and sum by
    subgroup shuffles); without subgroups, a thread per query. Both equal numpy."""
    import attention_sources
    from zynbook import Session
    monkeypatch.delenv("ZYNBOOK_WEBGPU_NO_FEATURES", raising=False)
    rng = np.random.default_rng(sum(shape))
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    S = shape[2]
    allowed = {"bool": rng.random((S, S)) < 0.7, "causal": np.tril(np.ones((S, S), bool)),
               "none": None}[mask]
    src = attention_sources.three_pass(mask, "const")
    ins = dict(Q=Q, K=K, V=V) | ({"allowed": allowed} if mask == "bool" else {})
    want = _attention_numpy(Q, K, V, allowed, 0.125)
    lanes = device.lane_groups()
    for off in ("", "subgroup"):
        monkeypatch.setenv("ZYNBOOK_WEBGPU_NO_FEATURES", off)
        got = np.asarray(Session(device=device.id).run(src, **ins))
        close(got, want, "attention")
        products = "register-tiled products" in device.last_programs[-1].schedule
        room = device.limits.get("max-compute-workgroup-storage-size", 0) >= 4 * (128 * shape[3] + max(64 * shape[3], 4096))
        assert products == (not off and lanes >= 8 and room), device.last_programs[-1].schedule


@webgpu
@needs_adapter
def test_subgroup_lanes_probe(device):
    """The probe finds the adapter's subgroup width (lavapipe: its vector width, NVIDIA: 32)
    where every subgroup's lanes are consecutive local ids, else 0."""
    lanes = device.lane_groups()
    if "subgroup" not in device.features:
        assert lanes == 0
    else:
        assert lanes == 0 or (lanes & (lanes - 1) == 0 and 4 <= lanes <= 128)


def test_lane_collectives_are_shuffle_butterflies():
    """A collective over groups of 16 lanes: four shuffles, NaN kept by max."""
    from zynbook.compiler.codegen.dialects.wgsl import WgslDialect
    d = WgslDialect()
    call = d.collective("max", "v", "warp", "f32", 16)
    fn = d.block_fns["zyn_lanes_max_f32_16"]
    assert call == "zyn_lanes_max_f32_16(v)"
    assert [f"subgroupShuffleXor(x, {m}u)" in fn for m in (8, 4, 2, 1)] == [True] * 4
    assert "zyn_max_f32" in fn
    with pytest.raises(ZynMLDeviceError):
        d.collective("max", "v", "warp", "f32", 0)      # a whole subgroup: no known width


@webgpu
@needs_adapter
def test_generated_modules_skip_only_the_second_bounds_checks(device, monkeypatch):
    """Kernels' modules are made without naga's runtime checks (the kernels guard their
    own indices); a module that does not compile is still an error, and
    ZYNBOOK_WEBGPU_CHECKED=1 makes them with the checks."""
    bad = "@compute @workgroup_size(1) fn main() { let x: i32 = 1.5; }"
    for checked in ("", "1"):
        monkeypatch.setenv("ZYNBOOK_WEBGPU_CHECKED", checked)
        with pytest.raises(Exception, match="expected"):
            rt.shader_module(device.device, "bad", bad)
        src, arrays, scalars, sizes, want, kind = CASES["matmul"]
        monkeypatch.setattr(device, "cache", type(device.cache)("webgpu", disk=False))
        k, ins, sz, sc = lower_block(src, arrays, scalars, sizes, "matmul")
        got, _ = device.launch(k, ins, sz, sc)
        close(got, want, kind)


@webgpu
@needs_adapter
def test_the_tuner_searches_the_program_the_launch_runs(device, monkeypatch):
    """Where attention runs as products built for its sizes, a tuner starts from them (it
    searched the space of the program of every size set, which holds none)."""
    import attention_sources
    from zynbook import tuning
    monkeypatch.delenv("ZYNBOOK_WEBGPU_NO_FEATURES", raising=False)
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((1, 2, 77, 32)).astype(np.float32) for _ in range(3))
    k, _, sz, _ = lower_block(attention_sources.three_pass("none", "const"), {"Q": Q, "K": K, "V": V})
    products = "register-tiled products" in device.program(k, sz).schedule
    tuner = tuning.Tuner(device, k, sz, 1.0)
    assert tuner.candidates[0].params.products == products
    assert tuner.target.symbolic_sizes != products


@pytest.mark.parametrize("device_id", [d["id"] for d in __import__("zynbook").compute_devices()
                                       if not d["id"].startswith("browser")])
def test_a_host_int_past_i32_is_named_as_the_host_int_it_is(device_id):
    """A host int read in a kernel's integer arithmetic is past WebGPU's 32-bit integers: the
    device error names it and says so (it called it a size and spoke of indices); the CPU
    devices compute with it as numpy does. (Read as a float, it runs everywhere:
    test_wgsl_hunt7.)"""
    import zynbook
    from zynbook.errors import ZynMLError
    src = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..len:\n"
           "        out[i] = x[i] + k\n}\ny\n")
    x = np.arange(4, dtype=np.int32)
    backend = next(d for d in zynbook.compute_devices() if d["id"] == device_id)["backend"]
    if backend not in ("vulkan", "metal", "dx12", "gl"):
        got = zynbook.run(src, device=device_id, x=x, k=3_000_000_000)
        np.testing.assert_array_equal(np.asarray(got), x.astype(np.int64) + 3_000_000_000)
        return
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, device=device_id, x=x, k=3_000_000_000)
    msg = info.value.message
    assert info.value.kind == "device" and "`k` = 3000000000" in msg, msg
    assert "host int" in msg and "32-bit" in msg and "size" not in msg, msg


RECURRENCE = """let y = compute(x) {
    for i in 0..m:
        var s = 0.0
        for k in 0..n:
            s = s * 0.99999 + x[i, k]
        out[i] = s
}
y"""


def _recurrence(n: int) -> np.float32:
    s, r = np.float32(0), np.float32(0.99999)
    for _ in range(n):
        s = np.float32(s * r + np.float32(1))
    return s


@webgpu
@needs_adapter
@pytest.mark.parametrize("dev", [d.id for d in DEVICES])
def test_a_loop_the_driver_quits_early_is_an_error_not_a_wrong_value(dev):
    """Mesa's llvmpipe quits a shader thread's loops after 65,535 iterations in all, without
    an error: a sequential loop of 70,000 steps returned the value after 65,535. There every
    loop's count is checked against its trip count (launch/steps.py) and the launch raises
    a runtime error at the loop's line; other adapters run it. There an innermost loop runs
    8 iterations at a time (launch/steps.py), so 70,000 steps run, and a program built for
    the launch's sizes runs a longer one more at a time (600,000 steps); 30,000,000 do not."""
    import zynbook
    from zynbook.errors import ZynMLRuntimeError
    session = zynbook.Session(dev)
    for n in (60000, 70000, 600000):
        got = np.asarray(session.run(RECURRENCE, x=np.ones((3, n), np.float32)))
        assert np.allclose(got, _recurrence(n), rtol=1e-4)
    if "llvmpipe" not in next(d for d in DEVICES if d.id == dev).name.lower():
        return
    with pytest.raises(ZynMLRuntimeError) as info:
        session.run(RECURRENCE, x=np.ones((1, 30_000_000), np.float32))
    assert (info.value.line, info.value.column) == (4, 9)
    assert "iterations short" in info.value.message and "llvmpipe" in info.value.message


def test_loop_count_checks_change_no_result_on_the_emulator():
    """The checks a loop-limited target gets (a count per loop, compared with its trip count
    after it) pass wherever the loops run to the end: strided grid loops, tiles, GEMM slices,
    attention's key steps, odd sizes."""
    import dataclasses
    from compute_testing import emulate_kernel
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import webgpu_target
    rng = np.random.default_rng(40)
    r = float32_normals(rng)
    limited = dataclasses.replace(webgpu_target(), loop_steps=65535)
    cases = [(MATMUL, {"A": r(37, 29), "B": r(29, 41)}), (SOFTMAX_ROWS, {"x": r(5, 300)}),
             (LAYER_NORM, {"x": r(7, 130), "gamma": r(130), "beta": r(130)}),
             (RECURRENCE, {"x": r(3, 77)}), (GELU, {"x": r(1000)})]
    built = 0
    for src, arrays in cases:
        k, ins, sz, sc = lower_block(src, arrays, {"eps": 1e-5} if "gamma" in arrays else {})
        prog, plain = schedules.build(k, limited, sz), schedules.build(k, webgpu_target(), sz)
        if plain is None:       # (a kernel the older renderer takes)
            continue
        built += 1
        assert any(s.kind == "steps" for s in prog.sites), prog.schedule
        np.testing.assert_array_equal(emulate_kernel(prog, k, ins, sz, sc),
                                      emulate_kernel(plain, k, ins, sz, sc))
    assert built >= 3
