"""Gaps found by writing programs from docs/language.md: each construct run on every device
present and compared with numpy written here, or refused with a ZynML error that says why."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()


def _on(device, src, **inputs):
    r = zynbook.run(src, device=device, **inputs)
    return r.numpy() if hasattr(r, "numpy") else r


# ------------------------------------------------------------------ where() in a body

@pytest.mark.parametrize("device", DEVICES)
def test_where_inside_a_compute_body(device):
    """`where(cond, a, b)` is numpy's where in a body too: of numbers (a literal is weak, so
    an f16 input stays f16), of integers, with a number as the condition (true when not
    zero), and of tiles, which broadcast."""
    x = np.array([-3.0, -0.5, 0.0, 0.25, 2.0, 7.5], np.float32)
    src = ("let y = compute(x) {\n    for i in 0..n:\n"
           "        out[i] = where(x[i] > 0.0, x[i], 0.5 * x[i])\n}\ny")
    assert_equals_numpy(_on(device, src, x=x), np.where(x > 0, x, 0.5 * x), 1e-6)

    h = x.astype(np.float16)
    got = _on(device, src.replace("x", "h"), h=h)
    assert got.dtype == np.float16
    assert_equals_numpy(got, np.where(h > 0, h, np.float16(0.5) * h), 1e-3)

    k = np.array([5, -7, 0, 2147483647, -2147483648], np.int32)
    src = ("let y = compute(k) {\n    for i in 0..n:\n"
           "        out[i] = where(k[i], k[i] - 1, 42)\n}\ny")
    with np.errstate(over="ignore"):
        assert_equals_numpy(_on(device, src, k=k), np.where(k != 0, k - np.int32(1), 42), 0)

    m = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0
    src = ("let y = compute(m) {\n    for i in 0..r:\n"
           "        out[i] = where(m[i] < 0.0, 0.0, m[i] + m[0])\n}\ny")
    assert_equals_numpy(_on(device, src, m=m), np.where(m < 0, 0.0, m + m[0]), 1e-6)
    src = "let y = compute(m) {\n    for i in 0..r:\n        out[i] = where(m[i] > 1.0, 1, -1)\n}\ny"
    assert_equals_numpy(_on(device, src, m=m), np.where(m > 1, 1, -1).astype(np.int32), 0)


def test_where_in_a_body_takes_three_values():
    err = raises("type", "let x = ones([3])\nlet y = compute(x) {\n    for i in 0..n:\n"
                 "        out[i] = where(x[i] > 0.0, x[i])\n}", 4, 18)
    assert "three" in err.message


# ------------------------------------------------------------------ `{ for ...:` bodies

@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_opened_on_the_brace_line_with_its_body_below(device):
    """`compute(x) { for i in 0..n:` with the loop's body on the lines below: the loop sits
    on the `{` line, so its body is indented past that line, as under any `for`."""
    x = np.arange(5, dtype=np.float32)
    src = "let y = compute(x) { for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny"
    assert_equals_numpy(_on(device, src, x=x), x * 2, 0)
    src = ("let y = [compute(x) { for i in 0..n:\n    if i > 1:\n        out[i] = x[i]\n"
           "    else:\n        out[i] = 1.0\n    }, 1]\ny[0]")
    assert_equals_numpy(_on(device, src, x=x), np.where(np.arange(5) > 1, x, 1.0), 0)


def test_a_loop_on_the_brace_line_needs_an_indented_body():
    err = raises("syntax", "let x = ones([3])\nlet y = compute(x) { for i in 0..n:\n"
                 "out[i] = x[i]\n}", 3, 1)
    assert "must be indented" in err.message


# ------------------------------------------------------------------ out[j % c]

@pytest.mark.parametrize("device", DEVICES)
def test_an_output_index_that_is_a_remainder(device):
    """`out[j % 4, k]`: the axis is as long as the remainder can reach (4, or fewer where j
    stops sooner); two iterations write one position, so the loop runs in order and the
    last write stays, and `+=` sums the rows that fall together."""
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    src = "let y = compute(x) {\n    for j in 0..n, k in 0..m:\n        out[j % 4, k] = x[j, k]\n}\ny"
    assert_equals_numpy(_on(device, src, x=x), x[4:], 0)
    src = ("let y = compute(x) {\n    for j in 0..n, k in 0..m:\n"
           "        out[(j + 1) % 3, k] += x[j, k]\n}\ny")
    want = np.zeros((3, 3), np.float32)
    for j in range(8):
        want[(j + 1) % 3] += x[j]
    assert_equals_numpy(_on(device, src, x=x), want, 1e-6)
    src = "let y = compute(x) {\n    for j in 0..2:\n        out[j % 4] = x[j + 6, 0]\n}\ny"
    assert_equals_numpy(_on(device, src, x=x), x[6:, 0], 0)


def test_a_remainder_index_below_zero_is_a_runtime_error():
    """C's `%` keeps the dividend's sign: `(j - 3) % 4` is -3 at j = 0, outside out."""
    err = raises("runtime", "let x = ones([8])\nlet y = compute(x) {\n    for j in 0..n:\n"
                 "        out[(j - 3) % 4] = x[j]\n}\ny", 4, 13)
    assert "-3" in err.message


# ------------------------------------------------------------------ tiles of named sizes

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p,q", [(1, 4), (4, 1), (3, 3)])
def test_tiles_of_named_sizes_broadcast_where_one_is_1(device, p, q):
    """`m[i, 0:p] + m[i, 0:q]` broadcasts as numpy's slices do when p or q is 1 (the two
    sizes were tied as equal), and so does a slice against a constant length."""
    m = np.arange(20, dtype=np.float32).reshape(4, 5) - 7.0
    src = "let z = compute(m) {\n    for i in 0..r:\n        out[i] = m[i, 0:p] * 2.0 + m[i, 0:q]\n}\nz"
    want = m[:, 0:p] * 2 + m[:, 0:q]
    assert_equals_numpy(_on(device, src, m=m, p=p, q=q), want, 1e-6)
    src = "let z = compute(m) {\n    for i in 0..r:\n        out[i, 0:3] = m[i, 0:p] - m[i, 1:4]\n}\nz"
    if p in (1, 3):
        assert_equals_numpy(_on(device, src, m=m, p=p), m[:, 0:p] - m[:, 1:4], 1e-6)


def test_tiles_of_named_sizes_that_do_not_broadcast():
    err = raises("shape", "let m = ones([4, 5])\nlet p = 3\nlet q = 4\nlet z = compute(m) {\n"
                 "    for i in 0..r:\n        out[i] = m[i, 0:p] + m[i, 0:q]\n}\nz", 6, 18)
    assert "`p` is 3" in err.message and "one of them is 1" in err.message
    err = raises("shape", "let m = ones([4, 5])\nlet p = 3\nlet z = compute(m) {\n    for i in 0..r:\n"
                 "        out[i, 0:4] = m[i, 0:p] - m[i, 0:4]\n}\nz", 5, 23)
    assert "the other is 4" in err.message
    # an input's whole axis is the size it meets: the message says so
    err = raises("shape", "let m = ones([4, 5])\nlet p = 1\nlet z = compute(m) {\n"
                 "    for i in 0..r:\n        out[i] = m[i, 0:p] + m[i]\n}\nz", 5, 18)
    assert "whole axis" in err.message


# ------------------------------------------------------------------ bf16 host tensors

def _bf16(a):
    """numpy's float32 `a` rounded to bfloat16 (ties to even), held as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def test_bf16_host_tensors_are_bf16():
    """`ones`/`zeros`/`randn`/`tensor`/`arange` with dtype=bf16 make bf16 tensors (f32 before),
    their values rounded to bf16; host arithmetic on them rounds each result to bf16 and stays
    bf16 beside a number, another bf16 or an integer tensor, as torch's does, and gives f32
    beside f32 or f16."""
    got = zynbook.run("let a = ones([3], dtype=bf16)\nlet z = zeros([2], dtype=bf16)\n"
                      "let r = randn([5], dtype=bf16, seed=4)\nlet t = tensor([0.1, 3.3], dtype=bf16)\n"
                      "let x = tensor([1.0, 2.0, 3.0])\nlet i = tensor([1, 2, 3])\n"
                      "let h = ones([3], dtype=f16)\n"
                      "[a, z, r, t, a * 0.1 + a, a / 3.0 + i, a + x, a + h, -t, sqrt(t), t > 1.0]")
    a, z, r, t, p, q, ax, ah, neg, root, cmp = got
    assert [v.dtype for v in got] == ["bf16"] * 4 + ["bf16", "bf16", "f32", "f32", "bf16",
                                                     "bf16", "bool"]
    np.testing.assert_array_equal(a.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(z.numpy(), np.zeros(2, np.float32))
    drawn = np.random.default_rng(4).standard_normal(5).astype(np.float32)
    np.testing.assert_array_equal(r.numpy(), _bf16(drawn))
    np.testing.assert_array_equal(t.numpy(), _bf16(np.array([0.1, 3.3], np.float32)))
    one = np.float32(1)
    np.testing.assert_array_equal(p.numpy(), _bf16(_bf16(one * np.float32(0.1)) + one) * np.ones(3))
    np.testing.assert_array_equal(q.numpy(), _bf16(_bf16(np.float32(1 / 3)) + np.arange(1, 4)))
    np.testing.assert_array_equal(ax.numpy(), np.array([2, 3, 4], np.float32))
    np.testing.assert_array_equal(neg.numpy(), -t.numpy())
    np.testing.assert_array_equal(root.numpy(), _bf16(np.sqrt(t.numpy())))
    np.testing.assert_array_equal(cmp.numpy(), t.numpy() > 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_bf16_host_tensor_into_a_block(device):
    """A bf16 host tensor is a bf16 input: the block computes with it and writes bf16."""
    got = zynbook.run("let a = randn([9], dtype=bf16, seed=2)\nlet y = compute(a) {\n"
                      "    for i in 0..n:\n        out[i] = a[i] * 3.0 + 1.0\n}\n[a, y]", device=device)
    a, y = got
    assert y.dtype == "bf16"
    np.testing.assert_array_equal(y.numpy(), _bf16(a.numpy() * np.float32(3) + np.float32(1)))


# ------------------------------------------------------------------ -INT_MIN wraps

_NEG = {"negated": ("-x[i]", lambda x: -x), "negated_compared": ("-x[i] < 0", lambda x: -x < 0),
        "abs_compared": ("abs(x[i]) < 0", lambda x: np.abs(x) < 0), "abs": ("abs(x[i])", np.abs)}
_SMALLEST = {"i32": np.array([5, -2147483648, 2147483647, 0, -7], np.int32),
             "i64": np.array([5, -(1 << 63), (1 << 63) - 1, 0, -7], np.int64)}


def _negation_src(expr):
    return f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\n"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_NEG))
@pytest.mark.parametrize("dtype", list(_SMALLEST))
def test_negating_the_smallest_integer_wraps(device, case, dtype):
    """`-x` and `abs(x)` of the smallest integer are that integer, as numpy's wrap (CUDA C++
    and MSL left it undefined), so `-x < 0` holds for it on every device."""
    if dtype == "i64" and device.startswith(("vulkan", "gl", "webgpu", "metal")):
        pytest.skip("WebGPU holds no 64-bit integer arithmetic")
    expr, fn = _NEG[case]
    x = _SMALLEST[dtype]
    with np.errstate(over="ignore"):
        want = fn(x)
    assert_equals_numpy(zynbook.run(_negation_src(expr) + "y", x=x, device=device), want, 0)


@pytest.mark.parametrize("case", list(_NEG))
@pytest.mark.parametrize("dtype", list(_SMALLEST))
def test_cuda_and_msl_negate_in_unsigned_types(case, dtype):
    """The CUDA and Metal targets write a signed negation as `0 - x` in the unsigned type of
    its width (ir.WRAPPING_NEG), and their programs wrap on the launch-IR emulator."""
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen.dialects.cuda import CudaDialect
    from zynbook.compiler.codegen.dialects.msl import MslDialect
    from zynbook.compiler.codegen.printer import print_program
    from zynbook.compiler.targets import cuda_target, metal_target
    expr, fn = _NEG[case]
    x = _SMALLEST[dtype]
    with np.errstate(over="ignore"):
        want = fn(x)
    kernel, ins, sizes, scalars = lower_block(_negation_src(expr), {"x": x})
    for target, dialect, unsigned in ((cuda_target(), CudaDialect, "unsigned "),
                                      (metal_target(), MslDialect, "u")):
        prog = schedules.build(kernel, target, sizes)
        source = print_program(dialect(), prog, kernel).source
        u = unsigned + ("long long" if unsigned == "unsigned " and dtype == "i64" else
                        "long" if dtype == "i64" else "int")
        assert f"({u})0 - ({u})" in source, source
        np.testing.assert_array_equal(emulate_kernel(prog, kernel, ins, sizes, scalars, 32), want)


# ------------------------------------------------------------------ rows of shared arrays

_SHARED_ROWS = {
    # each: the statements that fill `tile` (4 x 8) in iteration i, and numpy's tile for x[i]
    "number_across_a_row": ("        for r in 0..4:\n            tile[r] = 0.5\n",
                            lambda xi: np.full((4, 8), 0.5, np.float32)),
    "number_in_a_loop": ("        for r in 0..4:\n            for c in 0..8:\n"
                         "                tile[r, c] = 0.25\n",
                         lambda xi: np.full((4, 8), 0.25, np.float32)),
    "row_then_added": ("        for r in 0..4:\n            tile[r] = float(r)\n"
                       "        for r in 0..4:\n            tile[r] += 1.5\n",
                       lambda xi: np.arange(4, dtype=np.float32)[:, None] + np.full((4, 8), 1.5)),
    "sum_across_a_row": ("        var s = 0.0\n        for c in 0..8:\n            s += x[i, c]\n"
                         "        for r in 0..4:\n            tile[r] = s * float(r)\n",
                         lambda xi: np.repeat(xi.sum() * np.arange(4.0)[:, None], 8, 1)),
    "input_row_across_rows": ("        tile[0:4] = x[i]\n",
                              lambda xi: np.repeat(xi[None, :], 4, 0)),
    "whole_array": ("        tile = 0.5\n        tile += x[i]\n",
                    lambda xi: np.repeat(xi[None, :] + np.float32(0.5), 4, 0)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(_SHARED_ROWS))
def test_a_number_stored_across_a_row_of_a_shared_array(device, case):
    """`tile[r] = v` writes the whole row (as `tile[r, 0:8] = v`), a number or a row, and
    `tile = v` the whole array (it was "not a variable"); on
    cpu:native and WebGPU no schedule took it, and the reference refused a value that differs
    between iterations (a `var`) across a row."""
    fill, tile_of = _SHARED_ROWS[case]
    x = (np.arange(16, dtype=np.float32).reshape(2, 8) - 5.0) / 4.0
    src = ("let y = compute(x) {\n    for i in 0..2:\n        shared var tile[4, 8]\n" + fill +
           "        barrier()\n        for r in 0..4, c in 0..8:\n"
           "            out[i, r, c] = tile[r, c] + x[i, c]\n}\ny")
    want = np.stack([tile_of(x[i]) + x[i][None, :] for i in range(2)])
    assert_equals_numpy(_on(device, src, x=x), want, 1e-5)
