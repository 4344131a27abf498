"""Language: host slices take numpy's step (x[::2], x[::-1], x[7:1:-2]), a kernel's slices
refuse one with a ZynML error under it. Every device present, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------------------ host slices with numpy's step

_X = np.arange(10, dtype=np.float32) * 1.5 - 4.0
_M = np.arange(24, dtype=np.float32).reshape(4, 6) - 7.0

_STEPPED = {
    "x[::-1]": lambda x, m: x[::-1],
    "x[::2]": lambda x, m: x[::2],
    "x[1:8:3]": lambda x, m: x[1:8:3],
    "x[7:1:-2]": lambda x, m: x[7:1:-2],
    "x[-2::-3]": lambda x, m: x[-2::-3],
    "x[2:5:]": lambda x, m: x[2:5],
    "x[5:2:1]": lambda x, m: x[5:2:1],              # empty, as numpy's
    "x[100:-100:-4]": lambda x, m: x[100:-100:-4],  # clipped, as numpy clips
    "x[::k]": lambda x, m: x[::3],
    "m[::-1, 1::2]": lambda x, m: m[::-1, 1::2],
    "m[:, ::-1] @ m[::-1].T": lambda x, m: m[:, ::-1] @ m[::-1].T,
    "sum(m[1:, ::2], axis=0)": lambda x, m: m[1:, ::2].sum(0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr", list(_STEPPED))
def test_a_host_slice_with_a_step_equals_numpy(device, expr):
    """These were a syntax error (`unexpected ':'`) under the second colon."""
    got = _run(device, expr, x=_X, m=_M, k=3)
    assert_equals_numpy(got, _STEPPED[expr](_X, _M), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_assigning_into_a_stepped_slice_equals_numpy(device):
    want = _M.copy()
    want[::-2, 1::3] = -1.0
    got = _run(device, "let y = m\ny[::-2, 1::3] = -1.0\ny", m=_M)
    assert_equals_numpy(got, want, 0)


def test_a_list_slice_with_a_step_is_pythons():
    assert zynbook.run("[1, 2, 3, 4, 5][::-2]") == [5, 3, 1]


@pytest.mark.parametrize("src, col, said", [
    ("x[::0]", 5, "a slice step cannot be 0"),
    ("x[1:5:0.5]", 7, "a slice step is an integer, not a float"),
])
def test_a_slice_step_of_0_or_a_float_is_a_type_error_under_it(src, col, said):
    err = raises("type", src, 1, col, x=_X)
    assert said in err.message


@pytest.mark.parametrize("body, line, col", [
    ("    for i in 0..1:\n        out[0:5] = x[0:10:2]", 3, 27),
    ("    out = x[::-1]", 2, 15),
    ("    for i in 0..1:\n        out[0:10:1] = x", 3, 18),
])
def test_a_kernel_slice_with_a_step_is_a_shape_error_under_it(body, line, col):
    err = raises("shape", f"let y = compute(x) {{\n{body}\n}}\ny", line, col, x=_X)
    assert "takes no step: loop over the positions" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_the_loop_the_kernel_slice_message_suggests_equals_numpy(device):
    src = """let y = compute(x) {
    for j in 0..n step 2:
        out[j / 2] = x[j]
}
y"""
    assert_equals_numpy(_run(device, src, x=_X, n=10), _X[0:10:2], 0)


# ------------------------- a constant tile reduced or multiplied counts its own elements

_MX = ((np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 3)

_CONSTANT_TILES = {
    # body, numpy; every device held the tile as one element: sum(ones(4, 3)) was 1
    "for i in 0..rows:\n        out[i] = sum(ones(4, 3)) + m[i, 0]":
        lambda m, k: 12 + m[:, 0],
    "for i in 0..rows:\n        var o = zeros(2, 5)\n        out[i] = sum(o + 1.0) * m[i, 1]":
        lambda m, k: 10 * m[:, 1],
    "for i in 0..rows:\n        let w = ones(1, k) / k\n        out[i] = sum(w) * m[i, 2]":
        lambda m, k: np.float32(k) * (np.float32(1) / np.float32(k)) * m[:, 2],
    "for i in 0..rows:\n        out[i, 0:4] = m[i] + reduce(+, ones(5, 4), axis=0)":
        lambda m, k: m + 5,
    "for i in 0..rows:\n        out[i] = reduce(*, ones(2, 3) * 2.0 + m[i, 0] * 0.0)":
        lambda m, k: np.full(3, 64.0, np.float32),
    "for i in 0..rows:\n        out[i] = dot(m[i], ones(4)) + dot(ones(k), ones(k) * 2.0)":
        lambda m, k: m.sum(1) + 2 * k,
    "for i in 0..1:\n        out[0:3, 0:1] = row_sum(ones(3, k) * 0.5) + row_sum(m)":
        lambda m, k: m.sum(1, keepdims=True) + 0.5 * k,
    "out = ones(2, 3) @ m[0:3, 0:4]": lambda m, k: np.ones((2, 3), np.float32) @ m,
    "out = m @ ones(4, 5) * 0.5": lambda m, k: m @ np.full((4, 5), 0.5, np.float32),
    "for i in 0..1:\n        let o = ones(2, k) * 2.0\n        out[0:2, 0:3] = o @ ones(k, 3)":
        lambda m, k: np.full((2, 3), 2.0 * k, np.float32),
    "for i in 0..rows:\n        out[i] = sum(ones(0, 3)) + m[i, 3]": lambda m, k: m[:, 3],
    # a var given a tile of data later holds that tile, as before
    "for i in 0..1:\n        var o = zeros(3, 4)\n        o = o + m\n        out[0:3, 0:1] = row_sum(o)":
        lambda m, k: m.sum(1, keepdims=True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body", list(_CONSTANT_TILES), ids=range(len(_CONSTANT_TILES)))
def test_a_constant_tile_reduced_or_multiplied_counts_its_own_elements(device, body):
    src = f"let y = compute(m) {{\n    {body}\n}}\ny"
    got = _run(device, src, m=_MX, k=7)
    assert_equals_numpy(got, _CONSTANT_TILES[body](_MX, 7), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, np_dtype", [("f16", np.float16), ("i32", np.int32),
                                             ("u8", np.uint8)])
def test_a_sum_of_a_constant_tile_of_a_dtype_equals_numpy(device, dtype, np_dtype):
    q = np.arange(6).astype(np_dtype)
    src = f"""let y = compute(q) {{
    for i in 0..n:
        out[i] = sum(ones(3, 3, dtype={dtype}) * q[i])
}}
y"""
    want = (np.ones((3, 3), np_dtype)[None] * q[:, None, None]).sum((1, 2), dtype=np_dtype)
    assert_equals_numpy(_run(device, src, q=q), want, 1e-3)


def test_a_constant_tile_reduced_on_the_launch_ir():
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    from compute_testing import emulate_kernel, lower_block
    src = """let y = compute(x) {
    for i in 0..n:
        let w = ones(2, k) * 0.5
        out[i] = sum(w) * x[i] + dot(x[0:3], ones(3))
}
y
"""
    x = np.arange(6, dtype=np.float32) - 2
    kernel, arrays, sizes, _ = lower_block(src, {"x": x}, sizes={"n": 6, "k": 5})
    for tgt in (cuda_target((9, 0)), metal_target()):
        prog = schedules.build(kernel, tgt, sizes)
        got = emulate_kernel(prog, kernel, arrays, sizes)
        assert_equals_numpy(got, 5 * x + x[0:3].sum(), 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, col, said", [
    ("var o = ones(-2, 3)\n        out[0:2, 0:3] = o", 22, "ones() makes a tile of sizes 0 or more, "
                                                             "not -2"),
    ("out[i] = sum(ones(k, 3)) + m[i, 0]", 22, "ones() makes a tile of sizes 0 or more, not -2 "
                                                "(`k` at these sizes)"),
    ("out[i] = sum(zeros(3, k) + 1.0) * m[i, 1]", 22, "zeros() makes a tile of sizes 0 or more, not -2"),
])
def test_a_constant_tile_of_a_negative_size_is_a_shape_error_at_it(device, body, col, said):
    """numpy refuses np.ones((-2, 3)); these gave out an axis of -2 elements (an error at the
    block that named out), or a sum of -6 or of the one element held, 1."""
    src = f"let y = compute(m) {{\n    for i in 0..rows:\n        {body}\n}}\ny"
    err = raises("shape", src, 3, col, device=device, m=_MX, k=-2)
    assert said in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_a_constant_tile_of_size_0_sums_to_0(device):
    src = "let y = compute(m) {\n    for i in 0..rows:\n        out[i] = sum(ones(k, 3)) + m[i, 0]\n}\ny"
    assert_equals_numpy(_run(device, src, m=_MX, k=0), _MX[:, 0], 0)


# ----------------- a shared array past what a WebGPU adapter binds is named by its name

@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith(("vulkan", "gl", "webgpu"))])
def test_a_shared_array_too_big_for_the_adapter_is_named_at_its_declaration(device):
    """It said "`@scratch:_spill_f32` needs ... bytes" under the block's first line."""
    # one element past what the adapter binds (NVIDIA's binds far more than Mesa's)
    limit = next(d for d in zynbook.compute_devices()
                 if device in [d["id"]] + d.get("ids", []))["max_storage_buffer_binding_size"]
    src = """let r = compute(m) {
    for i in 0..rows:
        shared var big[N]
        big[0] = m[i, 0]
        barrier()
        out[i] = big[0]
}
r""".replace("N", str(limit // 4 + 1))
    err = raises("device", src, 3, 9, device=device, m=_MX)
    assert "the shared array `big` (more than a workgroup's memory" in err.message
    assert "@scratch" not in err.message
