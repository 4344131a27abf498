"""Variations of the spec's kernel programs, as a tester writes them from the spec's text
and docs/language.md: other names (C and WGSL keywords, names of sizes reused for locals),
masks, dtypes, block sizes and sizes that are multiples of nothing. Each runs on every
device present (the CPU reference included) and is compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()

RNG = np.random.default_rng(4099)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# name: (source, inputs, numpy's answer, tolerance)
CASES = {
    # a loop variable named as a size the block also reads (`for K in 0..K`), a local named
    # as a size met later, or as an input's axis: the generated C++ used one name for both
    # (its loop ran to its own variable)
    "loop_variable_named_as_its_bound": ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for K in 0..K:
            acc += a[i, K] * b[K, j]
        out[i, j] = acc
}
y
""", {"a": (a := _f32(7, 13)), "b": (b := _f32(13, 9))}, a @ b, 1e-4),
    "local_named_as_a_size_read_later": ("""
let y = compute(x) {
    for i in 0..n:
        var t = x[i]
        for m in 0..2:
            let n = float(m)
            t += n
        out[i] = t + float(n)
}
y
""", {"x": (x := _f32(10))}, x + 11, 1e-5),
    "local_named_as_an_axis": ("""
let y = compute(x) {
    for i in 0..n:
        let x_d0 = x[i] * 2.0
        out[i] = x_d0 + float(n)
}
y
""", {"x": (x := _f32(7))}, x * 2 + 7, 1e-5),
    # out indexed by a loop variable times a size, flattening two loops (it was "cannot
    # tell the size of out from this index": a product with a size had no bounds)
    "out_flattened_by_a_size": ("""
let y = compute(x) {
    for b in 0..B, s in 0..S:
        out[b * S + s] = x[b, s] * 2.0
}
y
""", {"x": (x := _f32(3, 7))}, x.reshape(-1) * 2, 1e-6),
    # the classic tiled matmul with shared arrays: blocks of T run past M and N, and the
    # `if i < M and j < N` around the store keeps out M x N (out took the blocks' size,
    # 8 x 8 for 7 x 5, or could not tell it at all)
    "shared_tiled_matmul_guarded_store": ("""
let T = 4
let y = compute(a, b) {
    @workgroup(4, 4)
    for ib in 0..(M + T - 1) / T, jb in 0..(N + T - 1) / T:
        shared var ta[T, T]
        shared var tb[T, T]
        shared var acc[T, T]
        for ti in 0..T, tj in 0..T:
            acc[ti, tj] = 0.0
        for kb in 0..(K + T - 1) / T:
            for ti in 0..T, tj in 0..T:
                let i = ib * T + ti
                let j = jb * T + tj
                if i < M and kb * T + tj < K:
                    ta[ti, tj] = a[i, kb * T + tj]
                else:
                    ta[ti, tj] = 0.0
                if kb * T + ti < K and j < N:
                    tb[ti, tj] = b[kb * T + ti, j]
                else:
                    tb[ti, tj] = 0.0
            barrier()
            for ti in 0..T, tj in 0..T:
                for kk in 0..T:
                    acc[ti, tj] += ta[ti, kk] * tb[kk, tj]
            barrier()
        for ti in 0..T, tj in 0..T:
            let i = ib * T + ti
            let j = jb * T + tj
            if i < M and j < N:
                out[i, j] = acc[ti, tj]
}
y
""", {"a": (a := _f32(7, 13)), "b": (b := _f32(13, 5)), "M": 7, "K": 13, "N": 5}, a @ b, 1e-4),
    # the guard written the other way round, on a bound the shapes give
    "guarded_store_bound_on_the_right": ("""
let y = compute(x) {
    for blk in 0..(n + 47) / 48, t in 0..48:
        let i = blk * 48 + t
        if n > i:
            out[i] = x[i] + 1.0
}
y
""", {"x": (x := _f32(100)), "n": 100}, x + 1, 1e-6),
    # the same guard on the loop's own variable: the differences of neighbours are n - 1
    # long (out took the loop's n, its last element 0)
    "guarded_store_at_the_loop_variable": ("""
let y = compute(x) {
    for i in 0..n:
        if i < n - 1:
            out[i] = x[i + 1] - x[i]
}
y
""", {"x": (x := _f32(17))}, np.diff(x), 1e-6),
    # a triangle stored at its own loop variables: out's column axis is as long as the
    # outer loop lets the inner one run (n - 1), not the outer loop's variable (a KeyError
    # naming it, on every device), and n with the diagonal
    "triangle_stored_at_the_inner_loop_variable": ("""
let y = compute(m) {
    for i in 0..n:
        for j in 0..i:
            out[i, j] = m[j, i]
}
y
""", {"m": (m := _f32(6, 6))}, np.tril(m.T, -1)[:, :5], 0),
    "causal_triangle_with_the_diagonal": ("""
let y = compute(q) {
    for i in 0..n, j in 0..i + 1:
        out[i, j] = q[i] * q[j]
}
y
""", {"q": (q := _f32(7))}, np.tril(np.outer(q, q)), 1e-6),
    # an inner loop bounded by a let of the outer variable (a KeyError naming the let)
    "inner_loop_bounded_by_a_let": ("""
let y = compute(m) {
    for i in 0..R:
        let k = i * 2
        for j in 0..k:
            out[i, j] = m[i, j % 6] + 1.0
}
y
""", {"m": (m := _f32(4, 6))},
        np.array([[m[i, j % 6] + 1 if j < 2 * i else 0 for j in range(6)] for i in range(4)]),
        1e-6),
    # an inner loop whose step is an outer loop's variable, or read from data: each lane
    # steps its own way (the reference refused it: "this value differs between parallel
    # iterations but must not", where the compiled devices ran it)
    "inner_step_from_the_outer_variable": ("""
let y = compute(x) {
    for i in 0..n:
        var s = 0.0
        for j in i..n step i + 1:
            s += x[j]
        out[i] = s
}
y
""", {"x": (x := _f32(11)), "n": 11}, np.array([x[i::i + 1].sum() for i in range(11)]), 1e-5),
    "inner_step_read_from_data_under_an_if": ("""
let y = compute(x, q) {
    for i in 0..n:
        var s = 0.0
        if q[i] < 6:
            for j in q[i]..n step q[i] + 1:
                s += x[j]
        out[i] = s
}
y
""", {"x": (x := _f32(9)), "q": (q := np.int32([0, 3, 1, 7, 2, 0, 5, 6, 8])), "n": 9},
        np.array([x[q[i]::q[i] + 1].sum() if q[i] < 6 else 0 for i in range(9)]), 1e-5),
    # a float literal given a type keeps it: an f32 accumulator of f16 products (an
    # internal compiler error: the CIR checker took `var acc: f32 = 0.0` for weak), and an
    # f32 let times f16 data, which is f32 (it was f16: 60000 * 2 overflowed)
    "typed_f32_accumulator_of_f16_products": ("""
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc: f32 = 0.0
        for k in 0..K:
            acc += a[i, k] * b[k, j]
        out[i, j] = acc
}
y
""", {"a": (a := RNG.standard_normal((5, 7)).astype(np.float16)),
      "b": (b := RNG.standard_normal((7, 3)).astype(np.float16))},
        a.astype(np.float32) @ b.astype(np.float32), 2e-3),     # f16 products: f16's tolerance
    "typed_f32_let_times_f16": ("""
let y = compute(h) {
    for i in 0..n:
        let s: f32 = 2.0
        out[i] = s * h[i]
}
y
""", {"h": (h := np.float16([1000, -2000, 60000, 0.5]))}, h.astype(np.float32) * 2, 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_variant_equals_numpy(name, device):
    src, inputs, want, tol = CASES[name]
    assert_equals_numpy(zynbook.Session(device=device).run(src, **inputs), want, tol)


@pytest.mark.parametrize("device", DEVICES)
def test_a_step_from_a_loop_variable_that_is_zero_is_a_runtime_error(device):
    """`for j in 0..8 step i` runs with a step of 0 in the lane i = 0: a runtime error at the
    loop on every device (the compiled devices looped forever)."""
    src = ("let y = compute(x) {\n"
           "    for i in 0..n:\n"
           "        var s = 0.0\n"
           "        for j in 0..8 step i:\n"
           "            s += x[j]\n"
           "        out[i] = s\n"
           "}\ny\n")
    err = raises("runtime", src, 4, 9, device, x=np.arange(8, dtype=np.float32), n=8)
    assert "a loop step must be positive, not 0" in err.message, err.render()


def test_a_register_tile_hint_past_the_automatic_tiles_is_not_taken():
    """`@tile(bm=16, bn=16, bk=16, tm=16, tn=16)`: one thread holding 256 sums, 16 deep,
    written out by the WGSL printer, took minutes to compile on llvmpipe (a hint may change
    speed, not make a tiny matmul unusable): the GEMM schedule takes the automatic tile, and
    a hint within the automatic tiles' size still sets the tile."""
    from compute_testing import lower_block
    from zynbook.compiler.schedules.gemm import Gemm
    from zynbook.compiler.targets import webgpu_target
    src = """
let y = compute(a, b) {
    @kernel matmul
    @tile(bm=16, bn=16, bk=16, tm=TM, tn=TN)
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += a[i, k] * b[k, j]
        out[i, j] = acc
}
"""
    arrays = {"a": _f32(37, 29), "b": _f32(29, 41)}
    big, _, sizes, _ = lower_block(src.replace("TM", "16").replace("TN", "16"), arrays)
    p = Gemm().default(big, webgpu_target(), sizes)
    assert p.tm * p.tn <= 64 and p.tm * p.tn * p.bk <= 1024, p
    small, _, sizes, _ = lower_block(src.replace("TM", "4").replace("TN", "8"), arrays)
    p = Gemm().default(small, webgpu_target(), sizes)
    assert (p.bm, p.bn, p.bk, p.tm, p.tn) == (16, 16, 16, 4, 8), p
