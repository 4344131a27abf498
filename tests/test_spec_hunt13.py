"""Programs written from the spec's sections on multi-device execution, fusion, async work,
memory and the compute-device interface, on every device present, compared with numpy (or
torch CPU) written here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = wanted_devices()
# a device group of the reference and each device present (two chunks of every split)
GROUPS = [["cpu", d] for d in DEVICES]


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


def _group(devices) -> str:
    return "[" + ", ".join(f'"{d}"' for d in devices) + "]"


# ------------------------------------- sums of halves split over a device group

_SUM = """let t = compute(x) @device(GROUP) @parallel(data) {
    @kernel reduce(OP)
    for i in 0..n:
        yield x[i]
}
t"""

_ROW_SUMS = """let t = compute(x) @device(GROUP) @parallel(model) {
    @kernel reduce(+, axis=1)
    for i in 0..r, j in 0..c:
        yield x[i, j]
}
t"""

_MATMUL_K = """config { model_split: "contraction" }
let c = compute(A, B) @device(GROUP) @parallel(model) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
c"""


def _half_sum(x, axis=None):
    """numpy's f32 sum of f16 values, rounded once to f16 (docs: "Half-precision")."""
    return x.astype(np.float32).sum(axis).astype(np.float16)


@pytest.mark.parametrize("devices", GROUPS, ids="+".join)
def test_a_half_sum_split_over_devices_is_rounded_once(devices):
    """A sum of f16 values is taken in f32 and rounded once on one device; split over a
    group, each chunk rounded its partial sum to f16 first, so 60000 + 60000 in one chunk
    was inf and the whole sum inf where one device gives 60000. The same for a product
    (300 * 300 past 65504 in one chunk), row sums split along the row, and a matmul split
    along its contraction. Partial results of halves are kept in f32 and rounded once."""
    group = _group(devices)
    x = np.array([60000, 60000, -60000, 1.5], np.float16)
    got = _run("cpu", _SUM.replace("GROUP", group).replace("OP", "+"), x=x)
    assert np.float16(got) == _half_sum(x) == np.float16(60000)
    p = np.array([300, 300, 1 / 300, 1 / 300], np.float16)
    got = _run("cpu", _SUM.replace("GROUP", group).replace("OP", "*"), x=p)
    want = np.float16(np.prod(p.astype(np.float32)))
    assert np.float16(got) == want and np.isfinite(want)
    rows = np.stack([x, x[::-1], x * np.float16(0.5)])
    assert_equals_numpy(_run("cpu", _ROW_SUMS.replace("GROUP", group), x=rows),
                        _half_sum(rows, 1), 0)
    a = np.array([[300, 300, -300, 1], [1, 2, 3, 4]], np.float16)
    b = np.array([[200], [200], [200], [0.5]], np.float16)
    assert_equals_numpy(_run("cpu", _MATMUL_K.replace("GROUP", group), A=a, B=b),
                        (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16), 0)


@pytest.mark.parametrize("devices", GROUPS, ids="+".join)
def test_a_bf16_sum_split_over_devices_is_a_bf16_value(devices):
    """bf16 partial sums combined in f32 gave 1 + 2^-7 + 1 = 2.0078125, a value no bf16
    holds, labelled bf16; one device (and torch) rounds the f32 sum once: 2.0."""
    x = torch.tensor([1.0, 2 ** -7, 0.0, 1.0], dtype=torch.bfloat16)
    want = float(x.float().sum().bfloat16())
    got = _run("cpu", _SUM.replace("GROUP", _group(devices)).replace("OP", "+"), x=x)
    assert got == want == 2.0
    rows = x.reshape(1, 4).repeat(3, 1)
    got = _run("cpu", _ROW_SUMS.replace("GROUP", _group(devices)), x=rows)
    assert got.dtype == "bf16"
    assert_equals_numpy(np.asarray(got), rows.float().sum(1).bfloat16().float().numpy(), 0)


def test_a_half_sum_split_over_dask_workers_is_rounded_once():
    """The same on a local Dask cluster of two workers: each worker's partial sum was an f16,
    60000 + 60000 = inf."""
    pytest.importorskip("distributed")
    import os
    from zynbook.backends import dask as zdask
    saved = {k: os.environ.get(k) for k in ("ZYNBOOK_WORKER_DEVICE", "ZYNBOOK_DASK_WORKERS")}
    os.environ.update(ZYNBOOK_WORKER_DEVICE="cpu", ZYNBOOK_DASK_WORKERS="2")
    try:
        x = np.array([60000, 60000, -60000, 1.5], np.float16)
        got = _run("cpu", _SUM.replace("GROUP", '"dask:local"').replace("OP", "+"), x=x)
        assert np.float16(got) == _half_sum(x)
        rows = np.stack([x, x[::-1]])
        assert_equals_numpy(_run("cpu", _ROW_SUMS.replace("GROUP", '"dask:local"'), x=rows),
                            _half_sum(rows, 1), 0)
    finally:
        zdask.shutdown()
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


# ------------------------------------- a scaled product of integers summed in floats

_SCALED_PRODUCTS = """let c = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j] * 0.5
        out[i, j] = sum
}
c"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 3, 1), (40, 33, 36)])
def test_a_scaled_product_of_u8_values_wraps_before_it_is_scaled(device, shape):
    """`sum += A[i, k] * B[k, j] * 0.5` of u8 A and B: the u8 product wraps at 256 (numpy's
    u8 arithmetic), then is scaled and summed in f32. The contraction recogniser took the
    u8 loads as the GEMM's factors and 0.5 as its scale, so cpu:native's and WebGPU's GEMMs
    multiplied the f32 values (20300 for 76); the reference summed the wrapped products
    along k in u8 before scaling them (einsum sums a factor in its own dtype)."""
    m, k, n = shape
    rng = np.random.default_rng(13)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(0, 256, (k, n)).astype(np.uint8)
    if shape == (1, 3, 1):
        a, b = np.array([[200, 100, 3]], np.uint8), np.array([[200], [3], [100]], np.uint8)
    products = (a[:, :, None] * b[None]).astype(np.float32)     # u8 products, wrapped
    want = (products * np.float32(0.5)).sum(1, dtype=np.float32)
    assert_equals_numpy(_run(device, _SCALED_PRODUCTS, A=a, B=b), want, 1e-6)


# ------------------------------------- async work and sharded halves, as the spec writes them

@pytest.mark.parametrize("device", DEVICES)
def test_an_error_in_an_async_block_of_a_pipeline_is_raised_by_a_later_await(device):
    """A failing `@async` block inside a pipeline is raised by the `await` of a later run,
    at the block's own line and column (its cell's text), on every device."""
    session = zynbook.Session(device)
    session.run("""pipeline p(x: tensor[n]):
    return compute(x) @async {
        for i in 0..n:
            out[i] = 10 / x[i]
    }
let f = p(x)
""", x=np.array([1, 0, 2], np.int32))
    with pytest.raises(zynbook.ZynMLError) as info:
        session.run("let a = 1\nlet b = await f\n")
    err = info.value
    assert (err.kind, err.line, err.column) == ("runtime", 4, 22), err
    assert "out[i] = 10 / x[i]" in err.render() and "division by zero" in err.message


@pytest.mark.parametrize("devices", GROUPS, ids="+".join)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_host_arithmetic_on_a_sharded_half_result_rounds_as_torch(devices, dtype):
    """A half-precision block split over a group stays sharded; host arithmetic on it (and
    a sum of it) keeps its dtype and rounds each result as torch's does."""
    x = (torch.arange(15, dtype=torch.float32).reshape(5, 3) / 7 + 1).to(dtype)
    src = f"""let y = compute(x) @device({_group(devices)}) @parallel(data) {{
    @kernel elementwise
    for i in 0..r, j in 0..c:
        out[i, j] = x[i, j] * 3.0
}}
[y, y + 1.0, y * y, y[1:3] / 3.0]"""
    y = x * 3
    for got, want in zip(_run("cpu", src, x=x), [y, y + 1, y * y, y[1:3] / 3]):
        assert got.dtype == {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
        assert_equals_numpy(np.asarray(got, np.float64), want.double().numpy(), 0)
