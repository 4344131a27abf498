"""The runtime features of the spec (devices, async, memory, tuning, fusion, placement, the
kernel library, the Jupyter kernel) on every local device, against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = wanted_devices()


# ---------------------------------------------------------------- transfers


@pytest.mark.parametrize("device", DEVICES)
def test_f64_data_moved_through_a_device_keeps_its_digits(device):
    # an adapter without shader-f64 held f64 buffers as f32: a round trip lost digits,
    # and host arithmetic on the tensor computed with them, reported as f64
    x = np.random.default_rng(1).standard_normal((3, 7)) + 1e-9
    back = zynbook.run('x.to_device(d).to_device("cpu")', x=x, d=device)
    assert np.asarray(back).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(back), x)
    scaled = zynbook.run("x.to_device(d).T * 3.0 + x.to_device(d).T", x=x, d=device)
    np.testing.assert_array_equal(np.asarray(scaled), x.T * 3.0 + x.T)


# ------------------------------------------------------------------ tuning


@pytest.mark.parametrize("text, seconds", [("nan", 60.0), ("NaN", 60.0), ("2.5", 2.5),
                                           ("soon", 60.0)])
def test_the_tuning_budget_variable_that_is_not_a_number_is_the_default(monkeypatch, text,
                                                                          seconds):
    # NaN compared false with the time spent, so it stopped no candidate at all
    from zynbook import tuning
    monkeypatch.setenv("ZYNBOOK_TUNE_BUDGET_S", text)
    assert tuning.DEFAULT_BUDGET_S == 60.0
    assert tuning.budget(None) == seconds
    assert tuning.budget(tuning.Settings(budget_s=3.0)) == 3.0


# ------------------------------------------------------------------ memory


@pytest.mark.parametrize("device", DEVICES)
def test_a_pool_a_few_bytes_short_says_how_many(device):
    from compute_testing import raises
    # 251 f32 are 1004 bytes; the pool has 1000: both rounded read "1.0 KB"
    err = raises("memory", f'let pool = memory_pool(device="{device}", size=1KB)\n'
                           "let t = pool.allocate(shape=[251])\n", 2, 9)
    assert f"{251 * 4} bytes asked, {1000} free" in err.message


@pytest.mark.parametrize("source, column", [("zeros([2.5, 3])", 1),
                                            ("allocate(shape=[2, true])", 16),
                                            ('let p = memory_pool(device="cpu", size=1KB)\n'
                                             "p.allocate(shape=[4, 1.0])", 1)])
def test_a_shape_with_a_size_that_is_not_an_integer_names_it(source, column):
    from compute_testing import raises
    err = raises("type", source, source.count("\n") + 1, column)
    kind = "a bool" if "true" in source else "a float"
    assert err.message.endswith(f"one of its sizes is {kind}"), err.message


# ------------------------------------------------------------------ devices

BLOCK_ON = """let y = compute(x) @device(DEVICES) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
"""


@pytest.mark.parametrize("devices, what", [("[]", "an empty list"),
                                           ('["cpu", 3]', "a list holding an int"),
                                           ("compute_devices()[0]", "a record")])
def test_a_device_list_or_value_that_is_no_id_says_what_it_is(devices, what):
    from compute_testing import raises
    err = raises("type", BLOCK_ON.replace("DEVICES", devices), 1, 20,
                 x=np.arange(3, dtype=np.float32))
    assert err.message.endswith(f"(or a list of them), not {what}"), err.message


def test_a_pool_in_a_compute_block_is_named_as_a_memory_pool():
    from compute_testing import raises
    err = raises("type", 'let pool = memory_pool(device="cpu", size=1KB)\n'
                         "let y = compute(pool) {\n    for i in 0..n:\n        out[i] = pool[i]\n}\n",
                 2, 17)
    assert err.message.endswith("`pool` is a memory pool"), err.message


# ------------------------------------------------------------------ async

# a kernel of seconds on the CPU devices: dependent steps no executor folds into one
SLOW_ASYNC = """let f = compute(x) @async {
    for i in 0..n:
        var acc = 0.0
        for k in 0..m:
            acc = sin(acc + x[i])
        out[i] = acc
}
"""
SLOW_STEPS = {"cpu": 3_000_000, "cpu:native": 300_000_000}


@pytest.mark.parametrize("device", [d for d in SLOW_STEPS if d in DEVICES])
def test_a_job_cancelled_by_an_earlier_wait_says_how(device):
    # (an interrupted wait leaves the job of an earlier statement running:
    # test_api_loose_ends.py)
    from zynbook.errors import ZynMLRuntimeError
    session = zynbook.Session(device)
    x = np.linspace(0, 1, 4, dtype=np.float32)
    session.run(SLOW_ASYNC, x=x, m=SLOW_STEPS[device])
    assert session.run("await f timeout 100ms else 7") == 7
    why = "an earlier wait for it timed out"
    with pytest.raises(ZynMLRuntimeError) as info:
        session.run("let y = 1\nawait all([f])")
    assert info.value.message == f"this job was cancelled ({why}) before it finished"
    assert (info.value.line, info.value.column) == (2, 1)
    assert session.run("1 + 1") == 2


# ------------------------------------------------------------------ host reductions


@pytest.mark.parametrize("source, shape", [("mean(zeros([0]))", ()),
                                           ("mean(zeros([0, 3]), axis=0)", (3,)),
                                           ("x.mean()", ())])
def test_the_mean_of_nothing_is_nan_without_numpy_warnings(source, shape):
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = np.asarray(zynbook.run(source, x=np.zeros((0,), np.float32)))
    assert got.shape == shape and np.isnan(got).all()
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in seen]


@pytest.mark.parametrize("source, shape", [("max(zeros([0]))", [0]),
                                           ("argmin(zeros([2, 0]), axis=1)", [2, 0]),
                                           ("max([])", [0])])
def test_the_extreme_of_an_empty_tensor_is_a_shape_error_in_zynml_words(source, shape):
    from compute_testing import raises
    name = source.split("(")[0]
    err = raises("shape", source, 1, 1)
    assert err.message == f"{name}() of an empty tensor ({shape}) has no value: nothing " \
                          "to compare", err.message


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_keeps_a_bf16_tensor_bf16_on_its_own_device_and_between_host_devices(device):
    # a copy on the tensor's own device (and cpu <-> cpu:native) was made from its f32
    # array and so became f32; on WebGPU it was a host array labelled with the device
    torch = pytest.importorskip("torch")
    h = torch.randn(5, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    source = """let c = h.to_device(d)
let again = c.to_device(d)
let native = c.to_device(other)
again[0] = 100.0
let y = compute(again) {
    @kernel elementwise
    for i in 0..n:
        out[i] = again[i] * 3.0
}
[c, again, native, y]
"""
    other = "cpu:native" if "cpu:native" in DEVICES else "cpu"
    c, again, native, y = zynbook.run(source, h=h, d=device, other=other)
    want = h.float().numpy()
    assert (c.dtype, again.dtype, native.dtype, y.dtype) == ("bf16",) * 4
    assert again.device == device and type(again.data) is type(c.data)
    np.testing.assert_array_equal(np.asarray(c), want)
    np.testing.assert_array_equal(np.asarray(native), want)
    changed = h.clone()
    changed[0] = 100.0
    np.testing.assert_array_equal(np.asarray(again), changed.float().numpy())
    np.testing.assert_array_equal(np.asarray(y), (changed * 3.0).float().numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_host_where_of_bf16_values_is_bf16_as_torch(device):
    # the result took the dtype of the condition's promotion: f32
    torch = pytest.importorskip("torch")
    h = torch.randn(3, 4, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    got = zynbook.run('let d = h.to_device(dev)\n'
                      '[where(d > 0.0, d, d * 3.0), where(d > 0.0, 0.3, d)]', h=h, dev=device)
    cond = h > 0
    for g, want in zip(got, (torch.where(cond, h, h * 3.0), torch.where(cond, 0.3, h))):
        assert g.dtype == "bf16" and want.dtype == torch.bfloat16
        np.testing.assert_array_equal(np.asarray(g), want.float().numpy())


# ------------------------------------------------------------------ element assignment


@pytest.mark.parametrize("device", DEVICES)
def test_elements_assigned_into_a_bf16_tensor_are_bf16_values(device):
    # its f32 array took 0.3 as it was: a bf16 tensor holding a value bf16 has not
    torch = pytest.importorskip("torch")
    h = torch.zeros(4, dtype=torch.bfloat16)
    got = zynbook.run("let t = h.to_device(d)\nt[0] = 0.3\nt[1:3] = tensor([1.001, 3.14159])\n"
                      "t[2] += 0.001\nt[t > 3.0] = 7.77\nt", h=h, d=device)
    want = h.clone()
    want[0] = 0.3
    want[1:3] = torch.tensor([1.001, 3.14159])
    want[2] += 0.001
    want[want > 3.0] = 7.77
    assert got.dtype == "bf16"
    np.testing.assert_array_equal(np.asarray(got), want.float().numpy())


@pytest.mark.parametrize("dtype, value, message", [
    ("u8", "300", "300 does not fit u8 (0 to 255)"),
    ("i32", "-2**40", "-1099511627776 does not fit i32 (-2147483648 to 2147483647)"),
    ("i64", "2**70", "1180591620717411303424 does not fit i64"),
    ("i32", "nan", "NaN has no i32 value"),
    ("u16", "-inf", "an infinity has no u16 value")])
def test_a_number_the_elements_cannot_hold_is_a_zynml_error_under_it(dtype, value, message):
    # numpy's "Python integer 300 out of bounds for uint8"; NaN gave "cannot assign values of
    # shape [] into the elements []"
    from compute_testing import raises
    err = raises("runtime", f"let t = zeros([3], dtype={dtype})\nt[1] = {value}\n", 2, 8)
    assert err.message.startswith(message) and f"tensor[3] {dtype}" in err.message, err.message


def test_a_value_past_f16_range_assigned_is_inf_without_numpy_warnings():
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = zynbook.run("let t = zeros([3], dtype=f16)\nt[0] = 1e6\nt[1:] = tensor([7e4, 2.0])\nt")
    want = np.zeros(3, np.float16)
    with np.errstate(over="ignore"):
        want[0], want[1:] = np.float16(1e6), np.array([7e4, 2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert np.isinf(want[:2]).all()
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in seen]


@pytest.mark.skipif("cpu:native" not in DEVICES, reason="no C++ compiler for cpu:native")
def test_a_checksummed_tuning_record_with_fields_of_other_types_is_searched_again(
        tmp_path, monkeypatch):
    # a record whose checksum holds but whose `ms` is not a number (written by another
    # version of the record) was read into Python's format error
    import json
    from zynbook import cache as kcache
    from zynbook import tuning
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNBOOK_AUTOTUNE", raising=False)
    source = """config { tune_budget: 0.000001 }
let C = compute(A, B) @device("cpu:native") {
    @kernel matmul
    @autotune
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
C"""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((37, 19), np.float32), rng.standard_normal((19, 23), np.float32)

    def run():
        session = zynbook.Session("cpu")
        got = session.run(source, A=a, B=b)
        np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-4, atol=1e-4)
        return session.launches[-1].geometry["tuning"]

    assert run().startswith("tuned:")
    [path] = (tmp_path / "tuning").glob("*.json")
    data = path.read_bytes()
    n, _ = kcache._TRAILER.unpack_from(data, len(data) - kcache._TRAILER.size)
    trailer = json.loads(data[len(data) - kcache._TRAILER.size - n:len(data) - kcache._TRAILER.size])
    payload, why = kcache.unpack_entry(data, trailer["key"])
    assert why is None
    record = json.loads(payload)
    record["ms"] = "fast"
    path.write_bytes(kcache.pack_entry(trailer["key"], json.dumps(record).encode()))
    searches = tuning.STATS["searches"]
    assert run().startswith("tuned:")
    assert tuning.STATS["searches"] == searches + 1
    assert run().startswith("from the tuning cache:")
