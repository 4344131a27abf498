"""Language and runtime: a tile of one element stored into one element of out (or of a shared
array, or held in a number's var) is that element, as numpy stores it; products subtracted
from zero are a contraction (a GEMM); the device interface's buffers of cpu and cpu:native
mix; argmin/argmax give every index a yield gives (2^31 - 1, 2^63 - 1, -1). Every device
present (and the CUDA and Metal launch IR), against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()
SHAPES = [(5, 7), (37, 19)]


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ a tile of one element stored into one element of out

_ONE_ELEMENT = {
    "out[i, j] = x[i, j] + b[0:1, j]": lambda x, b: x + b[0:1],
    "out[i, j] = x[i, j] + b[0:1, j:j+1]": lambda x, b: x + b[0:1],
    "out[i, j] = x[i, j] + b[i:i+1, 0]": lambda x, b: x + b[:, 0:1],
    "out[i, j] = b[i:i + 1, j:j + 1] * 2.0 - x[i, j]": lambda x, b: b * 2 - x,
    "let t = b[0:1, j]\n        out[i, j] = x[i, j] * t": lambda x, b: x * b[0:1],
    "let t = exp(b[i:i+1, j:j+1])\n        out[i, j] += -t": lambda x, b: -np.exp(b),
    "var acc = 0.0\n        acc += b[0:1, j] * x[i, j]\n        out[i, j] = acc":
        lambda x, b: b[0:1] * x,
    "var acc: f32 = 1.0\n        acc = max(acc, b[i:i+1, j])\n        out[i, j] = acc":
        lambda x, b: np.maximum(np.float32(1), b),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("body", list(_ONE_ELEMENT), ids=range(len(_ONE_ELEMENT)))
def test_a_tile_of_one_element_stored_into_an_element_keeps_outs_shape(device, shape, body):
    rng = np.random.default_rng(len(body))
    x, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    src = f"""let y = compute(x, b) {{
    for i in 0..rows, j in 0..cols:
        {body}
}}
y
"""
    got = _run(device, src, x=x, b=b, rows=shape[0], cols=shape[1])
    assert_equals_numpy(got, _ONE_ELEMENT[body](x, b), 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_tile_of_one_element_stored_into_a_shared_element(device, shape):
    rng = np.random.default_rng(3)
    x, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    src = """let y = compute(x, b) {
    for i in 0..rows:
        shared var s[cols]
        for j in 0..cols:
            s[j] = b[i:i+1, j] * 2.0
        barrier()
        for j in 0..cols:
            out[i, j] = s[cols - 1 - j] + x[i, j]
}
y
"""
    got = _run(device, src, x=x, b=b, rows=shape[0], cols=shape[1])
    assert_equals_numpy(got, b[:, ::-1] * 2 + x, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_longer_tile_stored_into_an_element_still_adds_its_axis(device):
    b = np.random.default_rng(4).standard_normal((5, 7)).astype(np.float32)
    src = """let y = compute(b) {
    for i in 0..rows, j in 0..cols:
        out[i, j] = b[0:2, j] + b[i:i+1, j]
}
y
"""
    got = _run(device, src, b=b, rows=5, cols=7)
    want = (b[0:2].T[None, :, :] + b[:, :, None])        # out[i, j] holds a tile of 2
    assert_equals_numpy(got, want, 1e-5)


# ------------------------- a product negated by a subtraction from zero is a contraction

_GEMM_SRC = """let y = compute(A, B, bias) {
    for i in 0..M, j in 0..N:
        var acc = INIT
        for k in 0..K:
            UPDATE
        out[i, j] = acc
}
y
"""

# update: (start, sign of the products, multiple of the bias that starts the sum)
_ZERO_MINUS = {
    "acc = 0.0 - A[i, k] * B[k, j] + acc": ("0.0", -1, 0),
    "acc += (0.0 - A[i, k]) * B[k, j]": ("0.0", -1, 0),
    "acc += -A[i, k] * B[k, j]": ("0.0", -1, 0),
    "acc = acc + A[i, k] * (0.0 - B[k, j])": ("bias[j]", -1, 1),
    "acc = acc - (0.0 - A[i, k] * B[k, j])": ("bias[j]", 1, 1),
    "acc = (A[i, k] + 0.0) * B[k, j] - 0.0 + acc": ("-bias[j]", 1, -1),
}


def _gemm_case(update, m, k, n, seed=0):
    init, sign, with_bias = _ZERO_MINUS[update]
    rng = np.random.default_rng(seed)
    ins = {"A": rng.standard_normal((m, k)).astype(np.float32),
           "B": rng.standard_normal((k, n)).astype(np.float32),
           "bias": rng.standard_normal(n).astype(np.float32)}
    want = with_bias * ins["bias"].astype(np.float64) + \
        sign * (ins["A"].astype(np.float64) @ ins["B"].astype(np.float64))
    return _GEMM_SRC.replace("INIT", init).replace("UPDATE", update), ins, want


def _relative(got, want):
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dims", [(70, 40, 66), (37, 19, 53)], ids=str)
@pytest.mark.parametrize("update", list(_ZERO_MINUS), ids=range(len(_ZERO_MINUS)))
def test_products_subtracted_from_zero_run_as_a_gemm(device, dims, update):
    src, ins, want = _gemm_case(update, *dims)
    session = zynbook.Session(device=device)
    got = session.run(src, **ins)
    assert np.asarray(got).shape == want.shape
    assert _relative(got, want) < 1e-5
    schedule = session.launches[-1].geometry.get("schedule")
    assert schedule is None or "GEMM" in schedule, schedule     # (cpu: the reference)


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "metal"])
@pytest.mark.parametrize("update", list(_ZERO_MINUS)[:2] + list(_ZERO_MINUS)[4:5])
def test_products_subtracted_from_zero_on_the_launch_ir(target, update):
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    from compute_testing import emulate_kernel, lower_block
    tgt = {"sm_90": cuda_target((9, 0)), "sm_80": cuda_target((8, 0)), "metal": metal_target()}[target]
    src, ins, want = _gemm_case(update, 128, 96, 128)
    kernel, arrays, sizes, _ = lower_block(src, ins)
    prog = schedules.build(kernel, tgt, sizes)
    assert "GEMM" in prog.schedule, prog.schedule
    assert _relative(emulate_kernel(prog, kernel, arrays, sizes).reshape(want.shape), want) < 2e-6


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("update,extra", [
    ("acc = 0.5 - A[i, k] * B[k, j] + acc", lambda A, B: 0.5 * A.shape[1] - A @ B),
    ("acc += (1.0 - A[i, k]) * B[k, j]", lambda A, B: (1.0 - A) @ B),
    ("acc = 0.0 - acc + A[i, k] * B[k, j]", None),
])
def test_a_nonzero_start_or_a_negated_accumulator_is_no_contraction(device, update, extra):
    """Near misses: what is subtracted from is not zero, or the running sum is negated; the
    answer is numpy's, and the recogniser does not take them for a GEMM."""
    from zynbook.compiler.passes.recognise import contraction
    from compute_testing import lower_block
    rng = np.random.default_rng(5)
    A = rng.standard_normal((9, 7)).astype(np.float32)
    B = rng.standard_normal((7, 11)).astype(np.float32)
    src = _GEMM_SRC.replace("INIT", "0.0").replace("UPDATE", update)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    if extra is None:           # acc_k = p_k - acc_(k-1), written out
        want = np.zeros((9, 11))
        for k in range(7):
            want = np.outer(A64[:, k], B64[k]) - want
    else:
        want = extra(A64, B64)
    kernel, *_ = lower_block(src, {"A": A, "B": B, "bias": B[0]})
    assert not contraction(kernel)
    got = zynbook.Session(device=device).run(src, A=A, B=B, bias=B[0])
    assert_equals_numpy(got, want, 1e-5)


# --------------------------- buffers of cpu and cpu:native share the host's memory

_HOST = [d for d in DEVICES if d in ("cpu", "cpu:native")]
_OTHER = [d for d in DEVICES if d not in ("cpu", "cpu:native")]
_HOST_PAIRS = [(a, b) for a in _HOST for b in _HOST if a != b]


@pytest.mark.parametrize("dst,src", _HOST_PAIRS, ids="-".join)
@pytest.mark.parametrize("session_device", DEVICES)
def test_add_assign_between_host_devices_adds_as_numpy(dst, src, session_device):
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(37).astype(np.float32) for _ in range(2))
    prog = f"""let d = upload(a, device="{dst}")
let s = upload(b, device="{src}")
add_assign(d, s)
add_assign(d, s)
download(d)"""
    got = _run(session_device, prog, a=a, b=b)
    assert_equals_numpy(got, a + b + b, 1e-6)


@pytest.mark.parametrize("dst,src", _HOST_PAIRS, ids="-".join)
def test_the_device_interface_takes_either_host_devices_buffers(dst, src):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    dd, ds = zynbook.device(dst), zynbook.device(src)
    bx, bw = dd.upload(x.ravel()), ds.upload(w.ravel())
    np.testing.assert_allclose(dd.download(dd.matmul(bx, bw, 5, 3, 4)).reshape(5, 4), x @ w,
                               rtol=1e-5, atol=1e-5)
    acc = dd.upload(np.ones(20, np.float32))
    ds.add_assign(acc, dd.matmul(bx, bw, 5, 3, 4))
    np.testing.assert_allclose(dd.download(acc), 1 + (x @ w).ravel(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dst,src", _HOST_PAIRS, ids="-".join)
def test_in_place_sum_of_tensors_on_the_host_devices(dst, src):
    a = np.arange(6, dtype=np.float32)
    prog = f"""var d = a.to_device("{dst}")
let s = (a * 2.0).to_device("{src}")
d += s
d[1:3] += s[0:2]
d"""
    want = a + a * 2
    want[1:3] += (a * 2)[0:2]
    assert_equals_numpy(_run("cpu", prog, a=a), want, 0)


@pytest.mark.parametrize("host", _HOST)
@pytest.mark.parametrize("other", _OTHER)
def test_add_assign_between_host_and_another_devices_memory_is_a_device_error(host, other):
    from compute_testing import raises
    ones = np.ones(4, np.float32)
    prog = f"""let d = upload(a, device="{host}")
let s = upload(a, device="{other}")
add_assign(d, s)"""
    err = raises("device", prog, 3, 15, a=ones)
    assert host in err.message and other in err.message
    err = raises("device", f'var d = a.to_device("{host}")\nd += a.to_device("{other}")\nd', 2, 1,
                 a=ones)
    assert host in err.message and other in err.message


# ------------------- argmin/argmax: every index a yield gives is an index, 2^31 - 1 too

_I32_MAX, _I64_MAX = 2 ** 31 - 1, 2 ** 63 - 1
_ARG_WHOLE = """let r = compute(x) {
    @kernel reduce(OP)
    for i in 0..len:
        IF
            yield (x[i], IDX)
}
r
"""
_ARG_ROWS = """let r = compute(x) {
    @kernel reduce(OP, axis=AXIS)
    for a in 0..rows, b in 0..cols:
        IF
            yield (x[a, b], IDX)
}
r
"""
# the index yielded at position p, written with the position's loop variable v
_INDICES = {
    "i32_max": ("2147483647 - V", lambda p: _I32_MAX - p),
    "minus_one": ("V - 1", lambda p: p - 1),
}
_I64_INDEX = ("9223372036854775807 - V", lambda p: _I64_MAX - p)     # (devices of 64-bit ints)


def _arg_src(template, op, index, var, guarded, axis=None):
    cond = f"if x[{'i' if axis is None else 'a, b'}] > 100.0:" if guarded else "if true:"
    return (template.replace("OP", op).replace("IF", cond).replace("IDX", index.replace("V", var))
            .replace("AXIS", str(axis)))


def _arg_data(shape, op, seed, guarded):
    """Values above 100, a third of them below where the if skips them, the extreme at
    position 0 of every row: argmax's largest, argmin's smallest above 100."""
    x = np.random.default_rng(seed).uniform(101, 200, shape).astype(np.float32)
    if guarded:
        x.reshape(-1)[1::3] = 0.0
    x[..., 0] = 250.0 if op == "argmax" else 100.5
    return x


def _check_indices(run, fails, op, index, with_i64=False):
    arg = np.argmax if op == "argmax" else np.argmin
    written, at = _INDICES[index] if index in _INDICES else index
    for guarded in (False, True):
        src = _arg_src(_ARG_WHOLE, op, written, "i", guarded)
        for n in (5, 3000):
            x = _arg_data(n, op, n, guarded)
            assert_equals_numpy(run(src, x), np.int64(at(0)), 0)
            x[0] = 150.0                # the extreme elsewhere
            kept = np.where(x > 100.0, x, -np.inf if op == "argmax" else np.inf)
            assert_equals_numpy(run(src, x), np.int64(at(int(arg(kept)))), 0)
        if guarded:
            fails(src, 5, 13, np.zeros(7, np.float32))      # none above 100: no index
        for axis in (0, 1):
            src = _arg_src(_ARG_ROWS, op, written, "b" if axis == 1 else "a", guarded, axis)
            for shape in [(4, 3), (3, 2500)]:
                x = _arg_data(shape, op, shape[1], guarded)
                x = x if axis == 1 else np.ascontiguousarray(x.T)
                want = np.full(shape[0], at(0), np.int64)
                assert_equals_numpy(run(src, x), want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", list(_INDICES))
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_gives_every_index_a_yield_gives(device, op, index):
    _check_indices(lambda src, x: zynbook.run(src, device=device, x=x),
                   lambda src, line, col, x: raises("runtime", src, line, col, device=device, x=x),
                   op, index)


@pytest.mark.parametrize("device", [d for d in DEVICES if d in ("cpu", "cpu:native")])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduction_gives_the_largest_i64_index(device, op):
    _check_indices(lambda src, x: zynbook.run(src, device=device, x=x),
                   lambda src, line, col, x: raises("runtime", src, line, col, device=device, x=x),
                   op, _I64_INDEX)


@pytest.mark.parametrize("target", ["sm_90", "sm_80", "metal"])
@pytest.mark.parametrize("index", list(_INDICES) + ["i64_max"])
def test_arg_reduction_gives_every_index_on_the_launch_ir(monkeypatch, target, index):
    from test_argmax_nothing import _on_launch_ir
    index = _I64_INDEX if index == "i64_max" else index
    _on_launch_ir(monkeypatch, target,
                  lambda run, fails, op: _check_indices(run, fails, op, index), "argmax")


@pytest.mark.parametrize("device", DEVICES)
def test_arg_reduction_by_positions_gives_the_largest_i32_index(device):
    # a var carried along the kept loop: each thread runs the body once for its outputs
    src = """let r = compute(x) {
    @kernel reduce(argmax, axis=1)
    var c = 0.0
    for a in 0..rows:
        c = c + 1.0
        for b in 0..cols:
            if x[a, b] > 100.0:
                yield (x[a, b] + c * 0.0, 2147483647 - b)
}
r
"""
    x = _arg_data((7, 9), "argmax", 9, True)
    x[2, 0], x[2, 5] = 120.0, 260.0
    want = _I32_MAX - np.argmax(np.where(x > 100.0, x, -np.inf), axis=1)
    assert_equals_numpy(zynbook.run(src, device=device, x=x), want, 0)
    x[3] = 0.0
    raises("runtime", src, 8, 17, device=device, x=x)
