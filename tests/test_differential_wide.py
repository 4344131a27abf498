"""Differential testing over a wider part of ZynML (tests/random_programs_wide.py): integer
dtypes (i32, u32, i64, u8) with `/`, `%` and casts, mixed float/int arithmetic, `where`,
comparisons and bool logic, `min`/`max`/`abs`/`clamp`, math builtins on safe ranges, shared
arrays with barriers, row reductions (`+ max min argmax argmin`) with masks, loops with steps
over odd trip counts, and tiles. Every program runs on every device present and must equal
the CPU reference: integers exactly (dtype too), floats to a tolerance. Seeded;
ZYNBOOK_WIDE_PROGRAMS and ZYNBOOK_WIDE_SEED pick others.

A device may refuse a program clearly (WebGPU refuses f64 and 64-bit integers with a device
error); it may not give another answer or raise anything else."""
from __future__ import annotations

import functools
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError, ZynMLError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from random_programs_wide import random_wide_program  # noqa: E402
from compute_testing import programs_equal_references, reference_results  # noqa: E402

N_PROGRAMS = int(os.environ.get("ZYNBOOK_WIDE_PROGRAMS", "90"))
SEED = int(os.environ.get("ZYNBOOK_WIDE_SEED", "4"))
_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
ALL_DEVICES = [d["id"] for d in zynbook.compute_devices()
               if not _WANTED or d["id"] in _WANTED.split(",") or d["id"] == "cpu"]
DEVICES = [d for d in ALL_DEVICES if d != "cpu"]
TOLERANCE = {"int": 0.0, "f32": 1e-4, "f64": 1e-4}


@functools.lru_cache(maxsize=1)
def programs() -> list:
    rng = random.Random(SEED)
    return [random_wide_program(rng) for _ in range(N_PROGRAMS)]


@functools.lru_cache(maxsize=1)
def references() -> list:
    return reference_results(programs())


def _compare(p, want, got) -> str | None:
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, reference {want.shape}"
    if p.dtype == "int" and got.dtype != want.dtype:
        return f"dtype {got.dtype}, reference {want.dtype}"
    tol = TOLERANCE[p.dtype]
    w, g = want.astype(np.float64), got.astype(np.float64)
    if tol == 0.0:
        ok = np.array_equal(w, g)
        bad = np.argwhere(w != g) if w.ndim else []
    else:
        ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        bad = np.argwhere(~np.isclose(g, w, rtol=tol, atol=tol, equal_nan=True)) \
            if w.ndim else []
    if ok:
        return None
    at = tuple(bad[0]) if len(bad) else ()
    return f"differs at {at}: {g[at] if w.ndim else g} vs reference {w[at] if w.ndim else w}"


def _refusal_allowed(err: ZynMLDeviceError) -> bool:
    return "f64" in err.message or "64-bit" in err.message or "int64 values" in err.message


def test_generator_covers_what_it_claims():
    kinds = {p.kind for p in programs()}
    features = set().union(*(p.features for p in programs()))
    assert kinds == {"int", "float", "shared", "rowreduce", "steps", "tile"}
    assert {"int /", "int %", "where", "comparison", "and/or", "clamp", "exp", "log",
            "shared", "barrier", "step loops", "mask", "input u8", "input i64",
            "input u32", "int in float", "integers past f32's precision", "sigmoid", "erf",
            "pow", "tanh", "sqrt", "shared reduction", "tile sum", "slice", "whole reduce",
            "workgroup hint"} <= features, features
    assert len(references()) == N_PROGRAMS


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
def test_wide_random_programs_equal_the_reference(device):
    programs_equal_references(device, programs(), references(), _compare,
                              lambda p, err: _refusal_allowed(err), 0.5)


# Focused regressions: programs the generator found, reduced.

def _on_every_device(source: str, **inputs):
    want = np.asarray(zynbook.run(source, device="cpu", **inputs))
    for device in DEVICES:
        try:
            got = np.asarray(zynbook.run(source, device=device, **inputs))
        except ZynMLDeviceError as err:
            if _refusal_allowed(err):
                continue
            raise
        assert got.dtype == want.dtype, (device, got.dtype, want.dtype)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=1e-5, atol=1e-6, err_msg=device)
    return want


def test_integer_with_float_arithmetic_rounds_the_integer_to_the_float_first():
    """i32 with f32 computes in f32, the integer converted first (as the devices do): the
    reference computed in f64 (numpy's promotion) and rounded once more, so 16777217 + 1.0
    was 16777218 (f32: 16777216) and -2147483647 % 300.7 the f64 remainder -230.02 (f32's
    fmod of -2147483648 is -231.02), and 3.0 / 16777217 was not f32's quotient."""
    a = np.array([16777217, 16777219, -2147483647, 2147483647, 5, 16777217], dtype=np.int32)
    b = np.array([1.0, 1.0, 300.7, -3.7, 2.5, 3.0], dtype=np.float32)
    af, bf = a.astype(np.float32), b
    for op, want in (("a[i] + b[i]", af + bf), ("a[i] - b[i]", af - bf),
                     ("a[i] % b[i]", np.fmod(af, bf)), ("b[i] / a[i]", bf / af)):
        src = ("let r = compute(a, b) {\n    @kernel elementwise\n    for i in 0..n:\n"
               f"        out[i] = {op}\n}}\nr\n")
        got = _on_every_device(src, a=a, b=b)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want, err_msg=op)


def test_integer_compared_with_float_and_where_of_both_convert_the_integer_first():
    """A comparison of an integer with an f32 compares in f32, and `where` of an integer
    and an f32 converts the integer to f32 (as the devices do): the reference compared and
    selected in numpy's f64, so 16777217 == f32(16777216) was false there and true on the
    devices, and where(a > 0, a, b) - b was 1 for a = 16777217, b = 16777216."""
    a = np.array([16777217, 2147483647, -2147483647, 7], dtype=np.int32)
    b = np.array([16777216.0, 2147483648.0, -2147483648.0, 7.0], dtype=np.float32)
    cases = {"a[i] == b[i]": [True] * 4, "a[i] < b[i]": [False] * 4,
             "i64(a[i]) >= b[i]": [True] * 4,
             "where(a[i] > 0, a[i], b[i]) - b[i]": [0.0] * 4}
    for expr, want in cases.items():
        src = ("let r = compute(a, b) {\n    @kernel elementwise\n    for i in 0..n:\n"
               f"        out[i] = {expr}\n}}\nr\n")
        got = _on_every_device(src, a=a, b=b)
        np.testing.assert_array_equal(got, np.array(want), err_msg=expr)


def test_integer_compared_with_float_in_a_sequential_loop():
    """The same conversions where the reference runs a loop one iteration at a time (scalar
    values, not lanes): a[k] == f of an i32 and an f32 local compares in f32."""
    a = np.array([16777217, 16777219, 5], dtype=np.int32)
    b = np.array([16777216.0, 16777220.0, 5.0], dtype=np.float32)
    src = ("let r = compute(a, b) {\n    for i in 0..1:\n        var c = 0\n"
           "        var s = 0.0\n        for k in 0..n:\n            let f = b[k] * 1.0\n"
           "            if a[k] == f:\n                c += 1\n"
           "            s += a[k] - f\n            s += where(a[k] > 0, a[k], f) - f\n"
           "        out[i] = c * 1000 + i32(s)\n}\nr\n")
    assert _on_every_device(src, a=a, b=b).tolist() == [3000]


def test_pow_of_a_base_near_one_to_a_large_exponent():
    """pow(a, b) with a near 1 and a large b: WebGPU's builtin is exp2(b * log2(a)), whose
    log2 near 1 keeps only an absolute error, so 0.9999999^16777219 was 0.177 there (e^-2,
    0.135, everywhere else)."""
    a = np.array([0.9999999, 1.0000001, 0.99, 1.5, 3.0], dtype=np.float32)
    b = np.array([16777219.0, 16777217.0, 300.0, -40.0, 5.5], dtype=np.float32)
    src = ("let r = compute(a, b) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = pow(a[i], b[i])\n}\nr\n")
    want = np.power(a.astype(np.float64), b.astype(np.float64))
    for device in ALL_DEVICES:
        got = np.asarray(zynbook.run(src, device=device, a=a, b=b))
        np.testing.assert_allclose(got, want, rtol=5e-5, err_msg=device)


def test_i64_smallest_divided_by_minus_one_names_its_value():
    """The i64 minimum divided by -1 is the overflow error on every device, naming the
    dividend: the compiled devices' 32-bit error word gave -2147483648."""
    a = np.array([np.iinfo(np.int64).min, 5], dtype=np.int64)
    b = np.array([-1, 2], dtype=np.int64)
    src = ("let r = compute(a, b) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = a[i] / b[i]\n}\nr\n")
    for device in ALL_DEVICES:
        try:
            zynbook.run(src, device=device, a=a, b=b)
        except ZynMLDeviceError as err:
            assert _refusal_allowed(err), err.render()
            continue
        except ZynMLError as err:
            assert "-9223372036854775808 / -1 does not fit" in err.message, (device, err.message)
            continue
        raise AssertionError(f"{device}: no error")


def test_integer_with_f16_keeps_the_compiled_devices_value():
    """An integer beside f16 is not rounded to f16 first in the reference (the compiled
    devices hold f16 in f32): 2049 - f16(2048) is 1 on every device, not 0."""
    a = np.array([2049, 2051, 5], dtype=np.int32)
    h = np.array([2048, 2052, 5], dtype=np.float16)
    src = ("let r = compute(a, h) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = a[i] - h[i]\n}\nr\n")
    assert _on_every_device(src, a=a, h=h).tolist() == [1.0, -1.0, 0.0]


def test_whole_argmax_with_a_workgroup_size_runs_everywhere():
    """reduce(argmax) of a whole nest with @workgroup(32): the per-block kernel and the
    final one each have a shared (value, index) tree of their own block size, and WebGPU
    refused the module that named both `_rv` (a schedule hint may not change results)."""
    x = np.round(np.random.default_rng(5).uniform(-3, 3, (3, 1000))).astype(np.float32)
    for op in ("argmax", "argmin"):
        src = (f"let y = compute(v) {{\n    @kernel reduce({op})\n    @workgroup(32)\n"
               "    for r in 0..rows, c in 0..cols:\n        yield (v[r, c], r * cols + c)\n}\ny\n")
        got = _on_every_device(src, v=x)
        assert int(got) == int((np.argmax if op == "argmax" else np.argmin)(x)), op


def test_max_of_u8_arithmetic_compiles_in_c():
    """reduce(max, xu[i] / 3) and max/min/clamp of u8 arithmetic: C computes u8 / 3 as an
    int, and cpu:native could not compile zyn_max(unsigned char, int)."""
    xu = (np.arange(7 * 10) % 256).astype(np.uint8).reshape(7, 10)
    src = ("let r = compute(xu) {\n    @kernel fused\n    for i in 0..rows:\n"
           "        out[i] = sum(xu[i]) + reduce(max, xu[i] / 3)\n}\nr\n")
    _on_every_device(src, xu=xu)
    src = ("let r = compute(xu) {\n    @kernel elementwise\n    for i in 0..rows, j in 0..cols:\n"
           "        out[i, j] = max(xu[i, j] / 3, xu[i, j]) + min(xu[i, j] * 2, u8(9))"
           " + clamp(xu[i, j] + 1, u8(3), u8(200))\n}\nr\n")
    _on_every_device(src, xu=xu)


def test_tiles_that_do_not_broadcast_say_so_alike_everywhere():
    """Tiles of 2 and 4 columns added (the last block clipped) are the same error on every
    device, naming both extents: the reference gave numpy's own text."""
    xi = np.arange(7 * 10, dtype=np.int32).reshape(7, 10)
    src = ("let r = compute(xi) {\n    @kernel fused\n    for i in 0..rows:\n"
           "        for k in 0..cols step 4:\n"
           "            out[i, k:k + 4] = xi[i, k:k + 4] + xi[i, 0:4]\n}\nr\n")
    for device in ALL_DEVICES:
        with pytest.raises(ZynMLError) as info:
            zynbook.run(src, device=device, xi=xi)
        assert info.value.message.endswith("an axis 2 long meets one 4 long (they broadcast "
                                           "only where one of them is 1)"), \
            (device, info.value.message)
