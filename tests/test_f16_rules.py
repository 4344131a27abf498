"""One rounding rule for half precision on every device (docs/language.md, half precision):
an f16 product added straight into an accumulator (`acc += a * b`, `acc = acc + a * b`,
`acc = a * b + acc`, `acc -= a * b`) is not rounded to f16 (it is exact in f32), and the
accumulator sums in f32 and is rounded once, as numpy's f16 `A @ B` (f32 products of the
halves summed in f32, rounded once). The generic schedules rounded each product to f16 where
the reference and the GEMM schedules did not (22 of 45 outputs of a 9 x 257 x 5 matmul one
place apart), `acc -= a * b` and `acc = a * b + acc` rounded every step, and so did `var s = 0`
(an integer literal) summing f16 values where `var s = 0.0` rounded once."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

F16 = np.float16
RNG = np.random.default_rng(50)


def _halves(*shape):
    """f16 values +-(1 + m / 128): their products have 16 significant bits (more than f16's
    11, so rounding one to f16 shows) and every f32 sum of a few hundred of them is exact, so
    the result rounded once is the same in whatever order a device adds."""
    m = RNG.integers(0, 128, shape)
    return (RNG.choice([-1.0, 1.0], shape) * (1 + m / 128)).astype(F16)


def _exact(x):
    """An exact sum of products (f64 holds it) rounded once to f16."""
    return np.asarray(x, np.float64).astype(np.float32).astype(F16)


A, B = _halves(9, 257), _halves(257, 5)
AB = A.astype(np.float64) @ B.astype(np.float64)
AB_ROUNDED_PRODUCTS = np.sum((A[:, :, None] * B[None]).astype(np.float64), 1)


def _matmul(decl, update, kernel=""):
    return f"""let y = compute(A, B) {{
    {kernel}
    for i in 0..M, j in 0..N:
        {decl}
        for k in 0..K:
            {update}
        out[i, j] = sum
}}
y"""


MATMULS = {
    "sum += a * b": ("var sum = 0.0", "sum += A[i, k] * B[k, j]", 1),
    "an int literal's sum": ("var sum = 0", "sum += A[i, k] * B[k, j]", 1),
    "an f16 sum": ("var sum: f16 = 0.0", "sum += A[i, k] * B[k, j]", 1),
    "sum = sum + a * b": ("var sum = 0.0", "sum = sum + A[i, k] * B[k, j]", 1),
    "sum = b * a + sum": ("var sum = 0.0", "sum = B[k, j] * A[i, k] + sum", 1),
    "sum -= a * b": ("var sum = 0.0", "sum -= A[i, k] * B[k, j]", -1),
    "a masked sum": ("var sum = 0.0", "if k % 3 != 1:\n                sum += A[i, k] * B[k, j]",
                     "masked"),
}


def test_the_data_tells_rounded_products_apart():
    assert (_exact(AB) != _exact(AB_ROUNDED_PRODUCTS)).sum() > 10


@pytest.mark.parametrize("kernel", ["", "@kernel matmul"])
@pytest.mark.parametrize("name", list(MATMULS))
@pytest.mark.parametrize("device", wanted_devices())
def test_f16_products_into_an_accumulator_are_exact(device, name, kernel):
    decl, update, sign = MATMULS[name]
    if kernel and sign == "masked":
        pytest.skip("a matmul kernel has no if")
    if sign == "masked":
        keep = (np.arange(257) % 3 != 1)[:, None]
        want = _exact(A.astype(np.float64) @ (B.astype(np.float64) * keep))
    else:
        want = _exact(sign * AB)
    got = np.asarray(zynbook.Session(device).run(_matmul(decl, update, kernel), A=A, B=B))
    assert got.dtype == F16 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("acc", ["f32", "f64"])
@pytest.mark.parametrize("device", wanted_devices())
def test_a_wider_sum_of_f16_products_is_exact(device, acc):
    """An f32 or f64 accumulator adds the f16 products unrounded too (exact in f32)."""
    if acc == "f64" and device.split(":")[0] in ("vulkan", "gl", "webgpu"):
        pytest.skip("the adapters here have no shader-f64")
    got = np.asarray(zynbook.Session(device).run(
        _matmul(f"var sum: {acc} = 0.0", "sum += A[i, k] * B[k, j]"), A=A, B=B))
    assert got.dtype == np.dtype(acc.replace("f", "float"))
    np.testing.assert_array_equal(got, AB.astype(got.dtype))


ROWS = (RNG.integers(-8, 9, (6, 300)) / 4).astype(F16)
ROWS[:, 0] = 2048       # 2048 + 0.25 is 2048 in f16: f16 steps lose every small term


def _row_sum(decl, body):
    return f"""let y = compute(x) {{
    for i in 0..rows:
        {decl}
        var n = 0
        for k in 0..cols:
{body}
        out[i] = s
}}
y"""


ROW_SUMS = {
    "var s = 0.0": ("var s = 0.0", "            s += x[i, k]"),
    "var s = 0": ("var s = 0", "            s += x[i, k]"),
    "var s: f16 = 0": ("var s: f16 = 0", "            s = x[i, k] + s"),
    # a counter beside the sum: the reference runs the loop step by step (it held the sum
    # in f16 there, 2048 + 2048 * ... where the devices gave the f32 sum)
    "stepped beside a counter": (
        "var s = 0.0", "            s += x[i, k]\n            n = n + 1\n"
                       "            if n > 1000:\n                n = 0"),
    "stepped, subtracting products": (
        "var s = 0.0", "            s -= x[i, k] * x[i, cols - 1 - k]\n            n = n + 1\n"
                       "            if n > 1000:\n                n = 0"),
}


@pytest.mark.parametrize("name", list(ROW_SUMS))
@pytest.mark.parametrize("device", wanted_devices())
def test_an_f16_accumulator_sums_in_f32_and_rounds_once(device, name):
    """numpy's f16 sum along a row: f32, rounded once (the sums here are exact in f32)."""
    decl, body = ROW_SUMS[name]
    x = ROWS.astype(np.float64)
    want = _exact(-np.sum(x * x[:, ::-1], 1) if "products" in name else np.sum(x, 1))
    got = np.asarray(zynbook.Session(device).run(_row_sum(decl, body), x=ROWS))
    assert got.dtype == F16
    np.testing.assert_array_equal(got, want)


def test_straight_line_f16_products_round():
    """`w -= a * c` outside a loop is f16 arithmetic, as numpy's: the product rounds."""
    a, c = _halves(50), _halves(50)
    src = """let y = compute(a, c) {
    for i in 0..len:
        var w = a[i] + c[i]
        w -= a[i] * c[i]
        out[i] = w
}
y"""
    want = (a + c) - a * c
    assert (want != _exact((a + c).astype(np.float64) - a.astype(np.float64) * c)).any()
    for device in wanted_devices():
        np.testing.assert_array_equal(zynbook.Session(device).run(src, a=a, c=c), want)


CONV = """let y = compute(img, w) {
    @kernel conv2d
    for oc in 0..OC, oh in 0..OH, ow in 0..OW:
        var sum = 0.0
        for ic in 0..IC:
            for kh in 0..3, kw in 0..3:
                let ih = oh + kh - 1
                let iw = ow + kw - 1
                if ih >= 0 and ih < H and iw >= 0 and iw < W:
                    sum += img[ic, ih, iw] * w[oc, ic, kh, kw]
        out[oc, oh, ow] = sum
}
y"""


@pytest.mark.parametrize("device", wanted_devices())
def test_an_f16_conv2d_adds_exact_products(device):
    img, w = _halves(3, 7, 6), _halves(5, 3, 3, 3)
    pad = np.pad(img.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    want = np.zeros((5, 7, 6))
    for kh in range(3):
        for kw in range(3):
            want += np.einsum("chw,oc->ohw", pad[:, kh:kh + 7, kw:kw + 6], w[:, :, kh, kw])
    got = np.asarray(zynbook.Session(device).run(CONV, img=img, w=w, OH=7, OW=6, H=7, W=6))
    np.testing.assert_array_equal(got, _exact(want))


@pytest.mark.parametrize("shape", [(9, 257, 5), (64, 40, 32)], ids=["generic", "gemm"])
@pytest.mark.parametrize("name", ["sum += a * b", "an int literal's sum", "sum -= a * b"])
def test_cuda_and_metal_add_exact_f16_products(name, shape):
    """The launch IR for CUDA (a block per output, tensor-core GEMMs on sm_80 and sm_90) and
    Metal on the emulator follow the same rule."""
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    m, k, n = shape
    a, b = _halves(m, k), _halves(k, n)
    decl, update, sign = MATMULS[name]
    want = _exact(sign * (a.astype(np.float64) @ b.astype(np.float64)))
    kern, ins, sizes, scalars = lower_block(_matmul(decl, update), {"A": a, "B": b})
    for tgt in (cuda_target(), cuda_target((8, 0)), metal_target()):
        prog = schedules.build(kern, tgt, sizes)
        assert prog is not None, schedules.why_none(kern, tgt, sizes)
        got = emulate_kernel(prog, kern, ins, sizes, scalars).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=prog.schedule)


EPILOGUE = """let y = compute(A, B) {
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum / 3.0 - A[i, 0]
}
y"""


def _epilogue_want(a, b):
    """numpy's `(A @ B) / 3 - A[:, :1]` in f16: the matmul rounded once, then each step."""
    return _exact(a.astype(np.float64) @ b.astype(np.float64)) / F16(3) - a[:, :1]


@pytest.mark.parametrize("device", wanted_devices())
def test_an_f16_accumulator_read_after_its_loop_is_f16(device):
    """An f16 sum read in arithmetic after its loop is the f16 it holds, on every device: the
    compiled devices divided the f32 running sum (10 of 45 elements one place off numpy's;
    3228 of 12288 of a 128 x 200 x 96 GEMM's epilogue)."""
    got = np.asarray(zynbook.Session(device).run(EPILOGUE, A=A, B=B))
    np.testing.assert_array_equal(got, _epilogue_want(A, B))


@pytest.mark.parametrize("shape", [(9, 257, 5), (64, 40, 32)], ids=["generic", "gemm"])
def test_cuda_and_metal_read_an_f16_accumulator_as_f16(shape):
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    m, k, n = shape
    a, b = _halves(m, k), _halves(k, n)
    want = _epilogue_want(a, b)
    kern, ins, sizes, scalars = lower_block(EPILOGUE, {"A": a, "B": b})
    for tgt in (cuda_target(), cuda_target((8, 0)), metal_target()):
        prog = schedules.build(kern, tgt, sizes)
        got = emulate_kernel(prog, kern, ins, sizes, scalars).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=prog.schedule)


SCALED = {
    # (0.1 * a) rounds as f16 arithmetic, its product with b is added exactly: numpy's
    # (0.1 * A) @ B
    "0.1 * a * b": ("sum += 0.1 * A[i, k] * B[k, j]",
                    lambda a, b: _exact((F16(0.1) * a).astype(np.float64) @ b.astype(np.float64))),
    # a * b rounds, then its quotient: each term an f16 value, summed exactly
    "a * b / 3.0": ("sum += A[i, k] * B[k, j] / 3.0",
                    lambda a, b: _exact(np.sum(((a[:, :, None] * b[None]) / F16(3))
                                               .astype(np.float64), 1))),
}


@pytest.mark.parametrize("shape", [(9, 257, 5), (64, 40, 32)], ids=["generic", "gemm"])
@pytest.mark.parametrize("name", list(SCALED))
def test_a_constant_factor_of_f16_products_rounds_with_them(name, shape):
    """A GEMM scaled the exact sum of the products (A * B / 3.0 one place off numpy in
    half the outputs of a 128 x 200 x 96 matmul on every compiled device, the reference
    rounding each product): an f16
    contraction with a constant factor runs as f16 arithmetic, the same on every device, CUDA
    and Metal on the emulator too."""
    from compute_testing import emulate_kernel, lower_block
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    update, model = SCALED[name]
    a, b = _halves(shape[0], shape[1]), _halves(shape[1], shape[2])
    want, src = model(a, b), _matmul("var sum = 0.0", update)
    for device in wanted_devices():
        np.testing.assert_array_equal(zynbook.Session(device).run(src, A=a, B=b), want,
                                      err_msg=device)
    kern, ins, sizes, scalars = lower_block(src, {"A": a, "B": b})
    for tgt in (cuda_target(), cuda_target((8, 0)), metal_target()):
        prog = schedules.build(kern, tgt, sizes)
        got = emulate_kernel(prog, kern, ins, sizes, scalars).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=prog.schedule)


def _bf16(a):
    """f32 `a` rounded to bf16 (ties to even), held in f32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("device", wanted_devices())
def test_a_bf16_matmul_stays_f32_until_its_store(device):
    """bf16 values are held in f32 (exact products, an f32 sum, the quotient too) and rounded
    to bf16 where out is stored, on every device."""
    src = """let A = randn([9, 257], dtype=bf16, seed=1)
let B = randn([257, 5], dtype=bf16, seed=2)
let C = compute(A, B) {
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum / 3.0
}
[A.numpy(), B.numpy(), C.numpy(), C.dtype]"""
    a, b, c, dtype = zynbook.Session(device).run(src)
    a, b, c = (np.asarray(v, np.float32) for v in (a, b, c))
    assert dtype == "bf16" and (a == _bf16(a)).all()
    want = _bf16((a.astype(np.float64) @ b).astype(np.float32) / np.float32(3))
    # (the f32 sum's order may move a rounding to bf16 by one place, rarely)
    np.testing.assert_allclose(c, want, rtol=2 ** -7, atol=0)
    assert (c == want).mean() > 0.95


def _reduction_data():
    """Multiples of 1/16 below 4, a 2048 first in each row (2048 + 0.0625 is 2048 in f16,
    so f16 steps would lose the rest): every f32 sum is exact."""
    x = (RNG.integers(-64, 64, (37, 301)) / 16).astype(F16)
    x[:, 0] = 2048
    return x


RX = _reduction_data()


def _f16_sum(x, axis=None):
    """numpy's f16 sum taken in f32 and rounded once (numpy's own does so along the last
    axis only; 37 rows of 2048 pass f16's largest: inf, as on the devices)."""
    with np.errstate(over="ignore"):
        return np.asarray(np.sum(x, axis=axis, dtype=np.float32)).astype(F16)


REDUCTIONS = {
    "reduce(+, axis=1)": ("@kernel reduce(+, axis=1)\n    for r in 0..rows, c in 0..cols:\n"
                          "        yield x[r, c]", _f16_sum(RX, 1)),
    "reduce(+, axis=0)": ("@kernel reduce(+, axis=0)\n    for r in 0..rows, c in 0..cols:\n"
                          "        yield x[r, c]", _f16_sum(RX, 0)),
    "sum of a row": ("for r in 0..rows:\n        out[r] = sum(x[r])", _f16_sum(RX, 1)),
    "reduce(+) of a row": ("for r in 0..rows:\n        out[r] = reduce(+, x[r])", _f16_sum(RX, 1)),
    "a row's mean": ("for r in 0..rows:\n        out[r] = sum(x[r]) / 301",
                     _f16_sum(RX, 1) / F16(RX.shape[1])),
    "a loop's mean": ("for r in 0..rows:\n        var s = 0\n        for c in 0..cols:\n"
                      "            s += x[r, c]\n        out[r] = s / cols",
                      _f16_sum(RX, 1) / F16(RX.shape[1])),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("device", wanted_devices())
def test_f16_reductions_sum_in_f32_and_round_once(device, name):
    body, want = REDUCTIONS[name]
    got = np.asarray(zynbook.Session(device).run(
        f"let y = compute(x) {{\n    {body}\n}}\ny", x=RX))
    assert got.dtype == F16
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", wanted_devices())
def test_f16_sums_of_normal_data_are_within_a_place(device):
    """Normal data (inexact f32 sums, any order): the whole sum and the row sums within one
    f16 place of numpy's f32 sum rounded once."""
    x = (np.random.default_rng(7).standard_normal((33, 517)) * 8).astype(F16)
    src = """let y = compute(x) {
    @kernel reduce(+, axis=AXIS)
    for r in 0..rows, c in 0..cols:
        yield x[r, c]
}
y"""
    for axis in (0, 1):
        want = _f16_sum(x, axis)
        got = np.asarray(zynbook.Session(device).run(src.replace("AXIS", str(axis)), x=x))
        ulp = np.spacing(np.abs(want)).astype(np.float32)
        assert (np.abs(got.astype(np.float32) - want) <= ulp).all(), axis


@pytest.mark.parametrize("device", wanted_devices())
def test_host_f16_sum_and_mean_are_numpys(device):
    """A tensor's sum() and mean() (and sum(x, axis=)) of f16 values placed on a device are
    numpy's: f16 results, the mean through f32."""
    x = _halves(11, 40)
    got = zynbook.Session(device).run(
        f'let t = x.to_device("{device}")\n[t.sum(), t.mean(), sum(t, axis=0), mean(t, axis=1)]',
        x=x)
    for g, w in zip(got, (x.sum(), x.mean(), x.sum(axis=0), x.mean(axis=1))):
        g = np.asarray(g.numpy() if hasattr(g, "numpy") else g)
        assert g.dtype == F16
        np.testing.assert_array_equal(g, w)
