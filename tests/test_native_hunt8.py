"""Float exactness against numpy: products and sums that `cpu:native` rounds one by one (no
fma the kernel does not ask for) while its GEMM accumulates in fused multiply-adds."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import zynbook
from zynbook.backends.cpu import native
from compute_testing import assert_equals_numpy, lower_block, wanted_devices

DEVICES = wanted_devices()
_RNG = np.random.default_rng(88)
needs_cc = pytest.mark.skipif(native.find_compiler() is None, reason="no C/C++ compiler")


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _elementwise(expr, inputs):
    return f"let y = compute({inputs}) {{\n    for k in 0..n:\n        out[k] = {expr}\n}}\ny\n"


def _normals(n):
    return _RNG.standard_normal(n).astype(np.float32)


# ---------------------------------------------------------------- no contraction to fma

_A, _B = _normals(997), _normals(997)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, inputs, arrays, want", [
    # c = -(a * b) rounded: numpy's a * b + c is 0; an fma leaves the product's rounding error
    ("a[k] * b[k] + c[k]", "a, b, c", dict(a=_A, b=_B, c=-(_A * _B)), lambda a, b, c: a * b + c),
    ("a[k] * b[k] - a[k] * b[k]", "a, b", dict(a=_A, b=_B), lambda a, b: a * b - a * b),
    ("x[k] * x[k] - y[k] * y[k]", "x, y", dict(x=_A, y=_A.copy()), lambda x, y: x * x - y * y),
    ("x[k] * x[k] - y[k] * y[k]", "x, y", dict(x=_A, y=_A * np.float32(1.0000001)),
     lambda x, y: x * x - y * y),
    ("a[k] * 3.0 - b[k]", "a, b", dict(a=_A, b=_A * np.float32(3)),
     lambda a, b: a * np.float32(3) - b),
])
def test_products_and_sums_round_one_by_one(device, expr, inputs, arrays, want):
    """GCC contracted a * b + c into one fma under -march=native (a CPU with FMA) even with
    -std=c++17: x * x - y * y of x == y was 1e-8 where numpy has 0. GPUs contract as their
    compilers do (CUDA's, as PyTorch's kernels; a Vulkan driver's), so the CPUs and
    llvmpipe only."""
    from zynbook.backends.registry import get_device
    if not (device.startswith("cpu") or "llvmpipe" in getattr(get_device(device), "name", "")):
        pytest.skip("a GPU compiler contracts a * b + c into an fma")
    got = _host(zynbook.run(_elementwise(expr, inputs), device=device, **arrays))
    assert_equals_numpy(got, want(*arrays.values()), 0)


@needs_cc
def test_native_flags_and_key_hold_no_contraction(tmp_path, monkeypatch):
    """-ffp-contract=off is among the flags, and the library's cache key holds the flags: a
    device compiling without it keys its libraries apart."""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    x = _normals(8)
    k, _, sizes = lower_block(_elementwise("a[k] * b[k] + c[k]", "a, b, c"),
                              {"a": x, "b": x, "c": x})[:3]
    dev = native.NativeCpuDevice(native.find_compiler())
    assert "-ffp-contract=off" in dev.flags()
    other = native.NativeCpuDevice(native.find_compiler())
    other._flags = [f for f in dev.flags() if f != "-ffp-contract=off"]
    assert other.cache_key(k, sizes) != dev.cache_key(k, sizes)


# ---------------------------------------------------------------- the GEMM's fused steps

def _round_f32(q: Fraction) -> np.float32:
    """The f32 nearest the rational q (ties to even)."""
    f = np.float32(float(q))
    near = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(near, key=lambda c: (abs(Fraction(float(c)) - q), int(c.view(np.uint32)) % 2))


def _fma_chain(A, B):
    """Each C element as a sum over k in order, each step a * b + s rounded once."""
    out = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for i, j in np.ndindex(out.shape):
        s = np.float32(0)
        for k in range(A.shape[1]):
            s = _round_f32(Fraction(float(A[i, k])) * Fraction(float(B[k, j])) + Fraction(float(s)))
        out[i, j] = s
    return out


def _cpu_has_fma() -> bool:
    import platform
    if platform.machine() in ("aarch64", "arm64"):
        return True
    try:
        with open("/proc/cpuinfo") as f:
            return " fma " in f.read().replace("\n", " ")
    except OSError:
        return False


_GEMM = ("let C = compute(A, B) {\n    for i in 0..M, j in 0..N:\n        var s = 0.0\n"
         "        for k in 0..K:\n            s += A[i, k] * B[k, j]\n        out[i, j] = s\n}\nC\n")


@needs_cc
@pytest.mark.skipif(not _cpu_has_fma(), reason="a CPU without fused multiply-adds")
def test_native_gemm_accumulates_in_fused_multiply_adds():
    """The CPU GEMM schedule (a micro-kernel over two K slices) asks for its fmas by name,
    as the compiler fuses nothing by itself: each sum is the fma chain over k, as a GPU's,
    where separately rounded steps differ in most elements."""
    A, B = _RNG.standard_normal((16, 260)).astype(np.float32), \
        _RNG.standard_normal((260, 16)).astype(np.float32)
    want = _fma_chain(A, B)
    separate = np.zeros_like(want)
    for k in range(A.shape[1]):
        separate = separate + A[:, k:k + 1] * B[k:k + 1, :]
    assert np.count_nonzero(separate != want) > 10        # the data tells them apart
    got = _host(zynbook.run(_GEMM, device="cpu:native", A=A, B=B))
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- fmod of subnormals

_TINY = np.finfo(np.float32).tiny
_SUB = np.float32(_TINY) / np.float32(2) ** np.arange(0, 23, 3).astype(np.float32)   # subnormals


def _fmod_cases():
    """x, y: subnormal divisors of normal and subnormal x, subnormal x of normal y,
    remainders that are subnormal and zero, signed zeros and the values fmod makes NaN."""
    rng = np.random.default_rng(8)
    subs = lambda n: rng.integers(1, 2 ** 23, n, dtype=np.uint32).view(np.float32)
    s1, s2 = subs(500), subs(500)
    normal = (s1.view(np.uint32) | np.uint32(0x3f000000)).view(np.float32)
    lifted = (s2.view(np.uint32) | np.uint32(0x20000000)).view(np.float32)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 3.4e38,
                          1.0, -2.5, _TINY])
    sx, sy = (g.ravel() for g in np.meshgrid(special, special))
    x = np.concatenate([_SUB, 3 * _SUB, np.float32([1e-40, 3e-39, 1.0, 7e-45, 1e-38, -3e-39]),
                        s1, s1, normal, -s1, sx])
    y = np.concatenate([_SUB[::-1], np.full(len(_SUB), np.float32(1e-45)),
                        np.float32([3e-45, 1e-40, 1e-39, 3e-45, 3e-39, 7e-45]),
                        s2, lifted, s2, s2, sy])
    return x.astype(np.float32), y.astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_float_remainder_of_subnormals_is_c_fmod(device):
    """`%` of f32 is np.fmod bit for bit (the zero's sign too) where x, y or the remainder
    is subnormal: on gl:0 the WGSL helper's ldexp of a subnormal divisor gave 0, and
    x % 6e-45 was x."""
    x, y = _fmod_cases()
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    got = _host(zynbook.run(_elementwise("x[k] % y[k]", "x, y"), device=device, x=x, y=y))
    assert got.dtype == np.float32
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("device", DEVICES)
def test_float_remainder_of_any_bits_is_c_fmod(device):
    """f32 of every exponent, as bits drawn at random, against np.fmod bit for bit."""
    bits = np.random.default_rng(9).integers(0, 2 ** 32, (2, 4000), dtype=np.uint64)
    x, y = bits.astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        want = np.fmod(x, y)
    got = _host(zynbook.run(_elementwise("x[k] % y[k]", "x, y"), device=device, x=x, y=y))
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


# ---------------------------------------------------------------- compensated sums

_KAHAN = """let total = compute(x) {
    for r in 0..R:
        var s = 0.0
        var c = 0.0
        for k in 0..n:
            let y = x[r, k] - c
            let t = s + y
            c = (t - s) - y
            s = t
        out[r] = s
}
total
"""


def _kahan_rows(x):
    """Kahan's sum of each row in f32, step by step."""
    out = []
    for row in x:
        s = c = np.float32(0)
        for v in row:
            y = v - c
            t = s + y
            c = (t - s) - y
            s = t
        out.append(s)
    return np.array(out, np.float32)


def _kahan_data():
    x = np.full((3, 2000), np.float32(1e-8), np.float32)
    x[:, 0] = 1.0
    x[1] = _RNG.standard_normal(2000).astype(np.float32)
    x[2, ::2], x[2, 1::2] = 1e8, 1.0
    return x


@pytest.mark.parametrize("device", [d for d in DEVICES if d.startswith("cpu")])
def test_user_kahan_sum_keeps_its_compensation(device):
    """A compensated sum written in ZynML is computed as written: (t - s) - y is not folded
    to 0 (no -ffast-math, no contraction), so 1 + 1999 x 1e-8 is 1.00002, not 1.
    (WebGPU: the WGSL is as written, test below, but a Vulkan driver may reassociate float
    operations that SPIR-V leaves undecorated (NoContraction), and naga decorates none:
    llvmpipe folds (s + y) - s to y there.)"""
    x = _kahan_data()
    want = _kahan_rows(x)
    assert want[0] != np.float32(1) and not np.array_equal(want, x.sum(1, dtype=np.float32))
    got = _host(zynbook.run(_KAHAN, device=device, x=x))
    np.testing.assert_array_equal(got, want)


def test_webgpu_program_keeps_a_user_kahan_sum():
    """ZynBook's own WebGPU program of the sum (launch IR on the emulator) and its WGSL keep
    the compensation: no ZynBook pass folds float arithmetic."""
    from compute_testing import emulate_kernel
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen import render_text
    from zynbook.compiler.targets import webgpu_target
    x = _kahan_data()
    k, ins, sz, sc = lower_block(_KAHAN, {"x": x})
    prog = schedules.build(k, webgpu_target(), sz)
    np.testing.assert_array_equal(emulate_kernel(prog, k, ins, sz, sc), _kahan_rows(x))
    assert "((u_t - u_s) - u_y)" in render_text("wgsl", k, sz)
