"""Programs written from the spec's text (zynml-compute-system.md, wgsl-compute-kernels.md)
and docs/language.md as an outside tester writes them: shared arrays, reductions, scans,
gathers, masks, pipelines and placement, with names, dtypes and sizes the spec's own
examples do not use. Each runs on every device present (the CPU reference included) and is
compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices
from kernel_sources import ATTENTION_TEMPLATE

DEVICES = wanted_devices()

RNG = np.random.default_rng(4133)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _attention(q, k, v, mask):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _windows(x, width):
    got = np.zeros(len(x), np.float64)
    for i in range(len(x) - width + 1):
        got[i:i + width] += x[i:i + width]
    return got


def _last_rows(v, ids, n):
    got = np.zeros((n, v.shape[1]), v.dtype)
    for j, row in enumerate(ids):
        if row < n:
            got[row] = v[j]
    return got


def _histogram(ids, weights, bins):
    got = np.zeros((ids.shape[0], bins), np.float64)
    for r in range(ids.shape[0]):
        for c in range(ids.shape[1]):
            if ids[r, c] >= 0:
                got[r, ids[r, c]] += weights[r, c]
    return got


_IDS = RNG.integers(-2, 7, (5, 33)).astype(np.int32)
_W = _f32(5, 33)
_PAIRS = RNG.integers(0, 3, (4, 6, 2)).astype(np.int64)
_U8 = RNG.integers(0, 255, (4, 33)).astype(np.uint8)
_I16 = RNG.integers(-200, 200, (6, 33)).astype(np.int16)
_DOT16 = (_I16.astype(np.int64) ** 2).sum(1).astype(np.int16)      # wrapped in i16
_I16S = RNG.integers(-9, 9, (6, 11)).astype(np.int16)
_X = _f32(5, 33)
_X9 = _f32(9, 9)
_X57 = _f32(5, 7)
_X3 = _f32(3, 4, 300)
_A10, _B13 = _f32(10, 13), _f32(13, 7)
_V33 = _f32(33)
_IDS33 = RNG.integers(0, 7, 33).astype(np.int32)
_V93 = _f32(9, 3)
_IDS9 = np.int64([0, 3, 1, 3, 7, 0, 2, 2, 1])
_M9 = RNG.integers(0, 4, (9, 9))
_M9[:, 0] = 1
_AQ, _AK, _AV = _f32(2, 3, 9, 5), _f32(2, 3, 9, 5), _f32(2, 3, 9, 5)
_AMASK = RNG.random((9, 9)) > 0.5
np.fill_diagonal(_AMASK, True)
_XH = _f32(5, 33).astype(np.float16)


# name: (source, inputs, numpy's answer, tolerance)
CASES = {
    # a histogram in each row's own shared array, its bin read from data: the CPU reference
    # refused a shared array written at a position that differs between the rows ("shared
    # arrays are indexed by values the same in every lane") where every compiled device ran
    "shared_histogram_indexed_by_data": ("""
let y = compute(ids) {
    for r in 0..R:
        shared var cnt[7]: i32
        for b in 0..7:
            cnt[b] = 0
        barrier()
        for c in 0..C:
            if ids[r, c] >= 0:
                cnt[ids[r, c]] += 1
        barrier()
        for b in 0..7:
            out[r, b] = cnt[b]
}
y
""", {"ids": _IDS}, _histogram(_IDS, np.ones(_IDS.shape), 7).astype(np.int32), 0),
    "shared_weighted_histogram_under_a_mask": ("""
let y = compute(ids, w) {
    for r in 0..R:
        shared var h[7]
        for b in 0..7:
            h[b] = 0.0
        barrier()
        for c in 0..C:
            if ids[r, c] >= 0:
                h[ids[r, c]] += w[r, c]
        barrier()
        for b in 0..7:
            out[r, b] = h[b]
}
y
""", {"ids": _IDS, "w": _W}, _histogram(_IDS, _W, 7), 1e-5),
    "shared_2d_counts_of_pairs": ("""
let y = compute(m) {
    for a in 0..A:
        shared var h[3, 3]: i32
        for i in 0..3, j in 0..3:
            h[i, j] = 0
        barrier()
        for c in 0..C:
            h[m[a, c, 0], m[a, c, 1]] += 1
        barrier()
        for i in 0..3, j in 0..3:
            out[a, i, j] = h[i, j]
}
y
""", {"m": _PAIRS}, np.stack([np.histogram2d(p[:, 0], p[:, 1], bins=3, range=[[0, 3], [0, 3]])[0]
                              for p in _PAIRS]).astype(np.int32), 0),
    # the dot of two u8 rows, or the sum or product of a narrow integer tile, is of the
    # rows' type and wraps in it, as numpy's dot and every compiled device give it: the CPU
    # reference summed them in 64 bits (numpy's sum widens), so a cast or a division after
    # it saw the unwrapped value
    "dot_of_u8_rows_cast_to_i32": ("""
let y = compute(u) {
    for i in 0..n, j in 0..n:
        out[i, j] = i32(dot(u[i], u[j]))
}
y
""", {"u": _U8}, np.dot(_U8, _U8.T).astype(np.int32), 0),
    "dot_of_i16_rows_divided": ("""
let y = compute(w) {
    for i in 0..n:
        out[i] = dot(w[i], w[i]) / 7
}
y
""", {"w": _I16}, np.fix(_DOT16 / 7).astype(np.int16), 0),
    "sum_of_a_u8_tile_cast_to_i32": ("""
let y = compute(u) {
    for i in 0..n:
        out[i] = i32(sum(u[i]))
}
y
""", {"u": _U8}, _U8.sum(1, dtype=np.uint8).astype(np.int32), 0),
    "product_of_an_i16_tile_cast_to_i64": ("""
let y = compute(w) {
    for i in 0..n:
        out[i] = i64(reduce(*, w[i, 0:9]))
}
y
""", {"w": _I16S}, np.prod(_I16S[:, :9], 1, dtype=np.int16).astype(np.int64), 0),
    # a running max or sum over the tiles of a row in steps of 7 (33 is no multiple of 7):
    # the CPU reference ran the loop's iterations side by side, each a tile at its own
    # start, and refused it ("this value differs between parallel iterations but must not")
    "running_max_over_tiles_of_seven": ("""
let y = compute(x) {
    for r in 0..R:
        var m = -inf
        for c in 0..C step 7:
            m = max(m, reduce(max, x[r, c:c+7]))
        out[r] = m
}
y
""", {"x": _X}, _X.max(1), 0),
    "f32_sum_over_f16_tiles_of_seven": ("""
let y = compute(h) {
    for r in 0..R:
        var s: f32 = 0.0
        for c in 0..C step 7:
            s += sum(h[r, c:c+7])
        out[r] = s
}
y
""", {"h": _XH}, _XH.astype(np.float64).sum(1), 2e-2),
    # 64-bit integer masks and ids compared with constants: WebGPU holds them in 32 bits
    # (refusing data that does not fit), so the comparison in 32 bits is exact; it refused
    # the kernel ("the WGSL dialect cannot spell 64-bit integers") though it reads i64 ids
    "spec_attention_with_an_i64_mask": (ATTENTION_TEMPLATE, {
        "Q": _AQ, "K": _AK, "V": _AV, "mask": _AMASK.astype(np.int64)},
        _attention(_AQ, _AK, _AV, _AMASK), 1e-4),
    "running_max_under_a_u64_mask": ("""
let y = compute(x, m) {
    for i in 0..R:
        var s = -inf
        for j in 0..C:
            if m[i, j] != 0 and m[i, j] <= 2:
                s = max(s, x[i, j])
        out[i] = s
}
y
""", {"x": _X9, "m": _M9.astype(np.uint64)},
        np.where((_M9 != 0) & (_M9 <= 2), _X9, -np.inf).max(1), 0),
    "i64_ids_compared_with_a_negative_bound": ("""
let y = compute(ids) {
    @kernel elementwise
    for i in 0..n:
        out[i] = ids[i] > -3 and ids[i] < 40000
}
y
""", {"ids": (_IDS64 := np.int64([-5, -3, -2, 0, 39999, 40000, 7]))},
        (_IDS64 > -3) & (_IDS64 < 40000), 0),
    # out indexed by a value read from data, kept below a size by an `if` around the write,
    # as the output's shape rule says of guarded indices: out is that size (it was "cannot
    # tell the size of out from this index"); repeated ids accumulate, or the last wins
    "scatter_add_of_ids_kept_below_a_size": ("""
let y = compute(v, ids) {
    for j in 0..C:
        if ids[j] < nb:
            out[ids[j]] += v[j]
}
y
""", {"v": _V33, "ids": _IDS33, "nb": 5},
        np.bincount(_IDS33[_IDS33 < 5], _V33[_IDS33 < 5], minlength=5), 1e-5),
    "counts_of_ids_between_two_bounds": ("""
let y = compute(ids) {
    for j in 0..C:
        if ids[j] >= 1 and nb > ids[j]:
            out[ids[j]] += 1
}
y
""", {"ids": _IDS33, "nb": 4},
        np.bincount(_IDS33[(_IDS33 >= 1) & (_IDS33 < 4)], minlength=4).astype(np.int32), 0),
    "scatter_of_rows_last_write_wins": ("""
let y = compute(v, ids) {
    for j in 0..C, d in 0..D:
        if ids[j] <= nb - 1:
            out[ids[j], d] = v[j, d]
}
y
""", {"v": _V93, "ids": _IDS9, "nb": 4}, _last_rows(_V93, _IDS9, 4), 0),
    # slices of a shared array are tiles as slices of an input are: written from a tile,
    # read into `sum`, `reduce`, `row_max` and `@` (the compiled devices refused them: "a
    # tile stored into shared array `buf`", "shared arrays and barriers need a block
    # schedule", where the CPU reference ran them)
    "tile_written_into_a_shared_array_read_reversed": ("""
let y = compute(x) {
    for a in 0..A:
        shared var buf[C]
        buf[0:C] = x[a, 0] * 3.0
        for c in 0..C:
            out[a, c] = buf[C - 1 - c]
}
y
""", {"x": _X3, "C": 300}, (_X3[:, 0] * 3)[:, ::-1], 1e-6),
    "sum_and_max_of_a_shared_slice_at_the_row": ("""
let y = compute(x) {
    for a in 0..A:
        shared var buf[C]
        for c in 0..C:
            buf[c] = x[a, 0, c]
        barrier()
        out[a] = sum(buf[a:a + 3]) + reduce(max, buf[a:a + 3])
}
y
""", {"x": _X3, "C": 300},
        np.array([_X3[a, 0, a:a + 3].sum() + _X3[a, 0, a:a + 3].max() for a in range(3)]), 1e-5),
    "row_max_and_row_sum_of_a_2d_shared_tile": ("""
let y = compute(x) {
    for a in 0..A:
        shared var s2[B, C]
        s2[0:B, 0:C] = x[a]
        barrier()
        out[a] = row_max(s2[0:B, 0:C]) - row_sum(s2[0:B, 0:C])
}
y
""", {"x": _X3, "B": 4, "C": 300},
        _X3.max(2, keepdims=True) - _X3.astype(np.float64).sum(2, keepdims=True), 1e-4),
    "shared_tile_times_an_input": ("""
let y = compute(a, b) {
    for ib in 0..M / 5:
        shared var ta[5, K]
        ta[0:5, 0:K] = a[ib * 5:ib * 5 + 5]
        barrier()
        out[ib * 5:ib * 5 + 5] = ta[0:5, 0:K] @ b
}
y
""", {"a": _A10, "b": _B13, "M": 10, "K": 13}, _A10 @ _B13, 1e-4),
    "tile_written_into_part_of_a_shared_array": ("""
let y = compute(x) {
    for a in 0..A:
        shared var buf[8]
        for t in 0..8:
            buf[t] = -1.0
        barrier()
        buf[2:5] = x[a, 0, 0:3]
        barrier()
        for t in 0..8:
            out[a, t] = buf[t]
}
y
""", {"x": _X3}, np.concatenate([-np.ones((3, 2)), _X3[:, 0, :3], -np.ones((3, 3))], 1), 0),
    # the spec's `compute(batch1) @async { ... }` written out on one line, a loop's body on
    # the `:` line before the `}`, and a `}` right after the last line of a nested body:
    # `}` closes every level still open (all three were syntax errors)
    "one_line_async_blocks_awaited_together": ("""
let fs = [
    compute(x) @async { for i in 0..R: out[i] = x[i, 0] },
    compute(x) @async { for i in 0..R, j in 0..C: out[i, j] = x[i, j] * 2.0 },
    compute(x) @async { @kernel reduce(max)
        for i in 0..R, j in 0..C: yield x[i, j] },
]
let rs = await all(fs)
rs[0] + rs[1][0:9, 1] + rs[2]
""", {"x": _X9}, _X9[:, 0] + 2 * _X9[:, 1] + _X9.max(), 1e-6),
    "closing_brace_after_a_nested_body": ("""
let y = compute(x) {
    for i in 0..R:
        for j in 0..C:
            if x[i, j] > 0.0:
                out[i, j] = x[i, j] }
y
""", {"x": _X9}, np.maximum(_X9, 0), 0),
    "closing_brace_after_an_if_on_its_line": ("""
let y = compute(x) {
    for i in 0..R:
        var s = 0.0
        for j in 0..C:
            s += x[i, j]
        if s > 0.0: out[i] = s }
y
""", {"x": _X9}, np.maximum(_X9.sum(1), 0), 1e-5),
    # rows written and read backwards (`out[C - 1 - j, 0:D] = v[j]`): the CPU reference
    # refused a tile stored at a lane index running backwards ("a store of a tile needs
    # indices that are the loop variables themselves") where the compiled devices ran it
    "rows_stored_backwards_as_tiles": ("""
let y = compute(v) {
    for j in 0..C:
        out[C - 1 - j, 0:D] = v[j] * 2.0
}
y
""", {"v": _V93, "C": 9, "D": 3}, _V93[::-1] * 2, 0),
    "row_sums_read_and_stored_backwards": ("""
let y = compute(v) {
    for j in 0..C:
        out[C - 1 - j] = sum(v[C - 1 - j]) + reduce(max, v[j, 0:2])
}
y
""", {"v": _V93, "C": 9}, _V93.sum(1) + _V93[::-1, :2].max(1), 1e-6),
    # two loops writing the same positions of out (`out[j + k]` for j in 0..R, k in 0..C):
    # each iteration of `j` writes positions the next one writes too, so the loops run in
    # order (the CPU reference ran `j` as a vector, the GPUs as threads: the sums raced)
    "sums_along_the_antidiagonals": ("""
let y = compute(x) {
    for j in 0..R, k in 0..C:
        out[j + k] += x[j, k]
}
y
""", {"x": _X57}, np.array([sum(_X57[j, t - j] for j in range(5) if 0 <= t - j < 7)
                            for t in range(11)]), 1e-5),
    "last_write_along_the_antidiagonals": ("""
let y = compute(x) {
    for j in 0..R, k in 0..C:
        out[j + k] = x[j, k]
}
y
""", {"x": _X57}, np.array([_X57[min(t, 4), t - min(t, 4)] for t in range(11)]), 0),
    # neighbouring writes that stay apart keep the loops parallel (checked below)
    "pairs_written_at_2j_plus_k": ("""
let y = compute(x) {
    for j in 0..R, k in 0..2:
        out[2 * j + k] = x[j, k] * 2.0
}
y
""", {"x": _X57[:, :2]}, (_X57[:, :2] * 2).reshape(-1), 0),
    # windows of 3 at every position, summed into out: out reaches the last window's end,
    # n (it was as long as the loop's bound, n - 2, so the last windows were cut short and
    # the block failed on every device: "the tiles of this statement do not fit together");
    # the iterations overlap, so the loop runs in order
    "overlapping_windows_summed": ("""
let y = compute(x) {
    for i in 0..n - 2:
        out[i:i + 3] += x[i:i + 3]
}
y
""", {"x": _V33, "n": 33}, _windows(_V33, 3), 1e-5),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_hunt_program_equals_numpy(name, device):
    src, inputs, want, tol = CASES[name]
    assert_equals_numpy(zynbook.Session(device=device).run(src, **inputs), want, tol)


@pytest.mark.parametrize("device", DEVICES)
def test_an_id_past_the_guard_of_a_scatter_is_a_runtime_error(device):
    """`if ids[j] < n: out[ids[j]] += ...` keeps ids below n only: -1 is out of range, a
    runtime error at the index on every device (the CPU reference said "the tiles of this
    statement do not fit together" for any index out of range that was one value, not a
    lane's: numpy has no nonzero() of a 0-d array)."""
    src = ("let y = compute(v, ids) {\n"
           "    for j in 0..C:\n"
           "        if ids[j] < nb:\n"
           "            out[ids[j]] += v[j]\n"
           "}\ny\n")
    err = raises("runtime", src, None, None, device, v=np.ones(4, np.float32),
                 ids=np.int32([0, -1, 2, 9]), nb=5)
    assert err.line == 4, err.render()
    assert err.message == "index -1 is out of range for an axis of size 5 of `out`", err.render()
    src = ("let y = compute(x, ids) {\n"
           "    for i in 0..1:\n"
           "        var s = 0.0\n"
           "        for j in 0..C:\n"
           "            s = s * 2.0 + x[ids[j]]\n"
           "        out[i] = s\n"
           "}\ny\n")
    err = raises("runtime", src, None, None, device, x=np.ones(4, np.float32),
                 ids=np.int32([0, 1, 7]))
    assert err.line == 5, err.render()
    assert err.message == "index 7 is out of range for an axis of size 4 of `x`", err.render()


_FLOATS = np.float32([-300.7, -129.5, -1.5, -0.5, 0.0, 0.9, 127.9, 128.5, 255.5, 256.0,
                      70000.0, 5e9, 1.9e19, np.inf, -np.inf, np.nan])
_INTS = np.int32([-129, -128, -1, 0, 127, 128, 255, 256, 65535, 65536, 2 ** 31 - 1, -2 ** 31])


def _saturated(values, dtype):
    """numpy's truncation toward zero, saturating at the integer's ends, NaN to 0 (as
    CUDA's conversions, which the language takes)."""
    info = np.iinfo(dtype)
    out = []
    for v in values.astype(np.float64):
        if v != v:
            out.append(0)
        elif v >= info.max:
            out.append(info.max)
        elif v <= info.min:
            out.append(info.min)
        else:
            out.append(int(np.trunc(v)))
    return np.array(out, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["i8", "u8", "i16", "u16", "u64"])
def test_casts_to_every_integer_dtype(name, device):
    """`u8(x)`, `i16(x)` ... as numpy's astype of integers and saturating of floats, for
    every integer dtype a kernel has (only i32, i64 and u32 could be written as casts: `u8`
    was "unknown function"); u64 of a float past 2^64 or of inf saturates on the CPU
    reference too (a select of u64 and a Python int went through f64 there: 0)."""
    if name == "u64" and device.startswith(("vulkan", "gl")):
        pytest.skip("WebGPU has no 64-bit integers")
    dtype = np.dtype(name.replace("u", "uint") if name.startswith("u") else name.replace("i", "int"))
    session = zynbook.Session(device=device)
    got = session.run(f"let y = compute(f) {{\n    for i in 0..n: out[i] = {name}(f[i])\n}}\ny\n",
                      f=_FLOATS)
    want = _saturated(_FLOATS, dtype)
    assert np.asarray(got).dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    got = session.run(f"let y = compute(k) {{\n    for i in 0..n: out[i] = {name}(k[i])\n}}\ny\n",
                      k=_INTS)
    np.testing.assert_array_equal(np.asarray(got), _INTS.astype(dtype))
    # a typed let converts the same way
    got = session.run(f"let y = compute(f) {{\n    for i in 0..n:\n        let v: {name} = f[i]\n"
                      f"        out[i] = v\n}}\ny\n", f=_FLOATS)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("index, bounds, parallel", [
    ("out[j + k]", "j in 0..R, k in 0..C", False),       # j and j + 1 write k + 1 and k
    ("out[2 * j + k]", "j in 0..R, k in 0..2", True),    # {2j, 2j + 1}: apart
    ("out[2 * j + k]", "j in 0..R, k in 0..3", False),   # {2j .. 2j + 2}: 2j + 2 twice
    ("out[j * C + k]", "j in 0..R, k in 0..C", True),    # a flattened row: apart
    ("out[j * C + k]", "j in 0..R, k in 0..C + 1", False),
    ("out[(R - 1 - j) * C + k]", "j in 0..R, k in 0..C", True),
    ("out[(j * H + k) * C + h]", "j in 0..R, k in 0..H, h in 0..C", True),
    ("out[k * C + j]", "j in 0..R, k in 0..H", False),   # (j + C, k), (j, k + 1) meet if R > C
    ("out[2 * j:2 * j + 2]", "j in 0..R, k in 0..1", True),      # blocks of 2 by 2
    ("out[j:j + 3]", "j in 0..R, k in 0..1", False),             # windows overlap
])
def test_an_outer_loop_is_parallel_only_where_its_iterations_write_apart(index, bounds,
                                                                        parallel):
    """An outer loop is parallel only where the positions one iteration writes, over the
    loops inside it, are apart from every other iteration's."""
    src = f"""
let y = compute(x) {{
    for {bounds}:
        {index} = x[j, k % 2]
}}
y
"""
    loop_j = [line.strip() for line in zynbook.compile(src).cir_text().splitlines()
              if "for j in" in line][0]
    assert loop_j.startswith("parallel for") == parallel, loop_j
