"""Programs written from the spec's Device Management, Async Execution and Memory Management
sections and the language reference's devices, async, memory and autotuning text, each run
on every device present (the CPU reference included) and compared with numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices
from zynbook.errors import ZynMLError

DEVICES = wanted_devices()

RNG = np.random.default_rng(4242)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got, want, tol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol)


# ------------------------------------------------------------------ device groups
@pytest.mark.parametrize("device", DEVICES)
def test_a_write_into_a_sharded_result_reaches_the_next_split_block(device):
    """`y[i, j] = v` on a result sharded over a group, then a block over the same group that
    takes the shards as they are: it reads the written elements (it read the shards as the
    first block left them, the write only in the gathered copy)."""
    x = _f32(7, 4)
    src = """let y = compute(x) @device(group) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..feat:
        out[b, f] = x[b, f] * 2.0
}
y[6, 3] = 100.0
y[0, 0] += 1.0
let s = compute(y) @device(group) @parallel(data) {
    @kernel reduce(+, axis=1)
    for b in 0..batch, f in 0..feat:
        yield y[b, f]
}
s
"""
    want = 2 * x
    want[6, 3] = 100.0
    want[0, 0] += 1.0
    got = zynbook.Session(device=device).run(src, x=x, group=[device, "cpu"])
    _close(got, want.sum(1))


@pytest.fixture
def local_dask(monkeypatch):
    """A local Dask cluster of `workers` (the fixture's function) whose workers run on
    `cpu`, shut down after the test."""
    pytest.importorskip("distributed")
    from zynbook.backends import dask as zdask
    monkeypatch.setenv("ZYNBOOK_WORKER_DEVICE", "cpu")      # the workers' own device, for CI
    yield lambda workers: monkeypatch.setenv("ZYNBOOK_DASK_WORKERS", str(workers))
    zdask.shutdown()


def test_a_write_into_a_result_on_dask_workers_reaches_the_next_block(local_dask):
    local_dask(2)
    x = _f32(7, 3)
    src = """let y = compute(x) @device("dask:local") @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..feat:
        out[b, f] = x[b, f] + 1.0
}
y[5, 1] = -50.0
let s = compute(y) @device("dask:local") @parallel(data) {
    @kernel reduce(max, axis=1)
    for b in 0..batch, f in 0..feat:
        yield y[b, f]
}
s
"""
    got = np.asarray(zynbook.Session().run(src, x=x))     # gathered while it runs
    want = x + 1
    want[5, 1] = -50.0
    _close(got, want.max(1))



INTEGER_REDUCTIONS = [
    ("+", np.array([2000000000, 2000000000, 5, -7], np.int32)),
    ("+", np.array([3000000000, 3000000000, 1], np.uint32)),
    ("*", np.array([100000, 100000, 3], np.int32)),
    ("max", np.array([-5, -9, -2, -100, -7], np.int32)),
]


def _reduced(op, a):
    with np.errstate(over="ignore"):
        return {"+": np.add, "*": np.multiply, "max": np.maximum}[op].reduce(a, dtype=a.dtype)


def _reduce_src(op, where):
    return f"""let s = compute(a) @device({where}) @parallel(data) {{
    @kernel reduce({op})
    for b in 0..batch:
        yield a[b]
}}
s
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, a", INTEGER_REDUCTIONS, ids=lambda v: str(getattr(v, "dtype", v)))
def test_an_integer_reduction_split_over_a_group_wraps_as_on_one_device(device, op, a):
    """The partial results of an integer reduction to one value are combined in its dtype:
    an i32 or u32 sum or product over a group wraps as it does on one device (the partials
    were summed in Python's unbounded integers: 4000000005 for an i32 sum)."""
    want = int(_reduced(op, a))
    group = f'["{device}", "cpu", "{device}"]'
    assert zynbook.Session().run(_reduce_src(op, f'"{device}"'), a=a) == want
    assert zynbook.Session().run(_reduce_src(op, group), a=a) == want


def test_an_integer_reduction_on_dask_wraps_as_on_one_device(local_dask):
    local_dask(3)
    for op, a in INTEGER_REDUCTIONS:
        got = zynbook.Session().run(_reduce_src(op, '"dask:local"'), a=a)
        assert got == int(_reduced(op, a)), (op, a.dtype, got)


# ------------------------------------------------------------------ async
# an @async block that keeps its device busy for a while, so that a block launched after it
# on the same device is still queued when the statements after them run
SLOW = """let slow = compute(big) @async {
    for i in 0..n:
        var s = big[i]
        for k in 0..100:
            s = sin(s) * 0.5 + 0.25
        out[i] = s
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_an_async_error_awaited_in_a_later_cell_shows_the_line_of_its_block(device):
    """The error of an @async block is raised at the await, with the block's line and the
    text the block is written in (it was given the text of the cell running when the job ran:
    no excerpt, or another line)."""
    session = zynbook.Session(device=device)
    session.run(SLOW + """let idx = tensor([0, 3, 9])
let bad = compute(x, idx) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}
""", big=_f32(1 << 20), x=_f32(7))
    with pytest.raises(ZynMLError) as info:
        session.run("let a = 1\nlet b = 2\nlet c = 3\nlet d = 4\nlet e2 = 5\nlet f = 6\n"
                    "let g = 7\nlet h = 8\nlet i = 9\nlet j = 10\nlet r = await bad\n")
    err = info.value
    assert (err.kind, err.line) == ("runtime", 12), err.render()
    assert "out[i] = x[idx[i]]" in err.render()
    assert session.run("1 + 1") == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_write_after_an_async_launch_does_not_reach_it(device):
    """`z[0] = 50.0` after `compute(z) @async` launched: the block reads z as it was at its
    launch (the job, queued behind another, read the written element)."""
    x = _f32(7)
    got = zynbook.Session(device=device).run(SLOW + """var z = x * 1.0
let f = compute(z) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = z[i] + 1.0
}
z[0] = 50.0
z[1:3] = -1.0
[await f, z]
""", big=_f32(1 << 20), x=x)
    _close(got[0], x + 1)
    want = x.copy()
    want[0], want[1:3] = 50.0, -1.0
    _close(got[1], want)


# ------------------------------------------------------------------ memory
@pytest.mark.parametrize("device", DEVICES)
def test_a_pool_refuses_an_allocation_past_its_budget_before_taking_memory(device):
    """An allocation far past a pool's budget is the pool's memory error under the call (the
    memory was taken first: the host's or device's out-of-memory error, under the statement);
    the pool and the session go on."""
    session = zynbook.Session(device=device)
    with pytest.raises(ZynMLError) as info:
        session.run("let pool = memory_pool(size=1MB)\n"
                    "let t = pool.allocate(shape=[200000, 200000])\n")
    err = info.value
    assert (err.kind, err.line, err.column) == ("memory", 2, 9), err.render()
    assert "in the pool" in err.message and "160.0 GB" in err.message, err.message
    got = session.run("let u = pool.allocate(shape=[100, 10], dtype=f16)\n[pool.used, u.shape]\n")
    assert got == [2000, [100, 10]]


@pytest.mark.parametrize("device", DEVICES)
def test_a_pool_counts_a_bf16_element_as_two_bytes(device):
    """A pool counts a bf16 element as 2 bytes, though the host holds it as f32 (it counted
    4): a pool of 4000 bytes holds 2000 of them; a tensor's byte count (what the device
    interface's memory statistics add up) says 2 each too."""
    session = zynbook.Session(device=device)
    got = session.run("let pool = memory_pool(size=4KB)\n"
                      "let b = pool.allocate(shape=[1000], dtype=bf16)\n"
                      "let h = pool.allocate(shape=[2, 3], dtype=f32)\n")
    pool = session.namespace["pool"]
    assert pool.used == 1000 * 2 + 6 * np.dtype(np.float32).itemsize, got
    assert session.namespace["b"].nbytes == 1000 * 2
    session.run("pool.reset()\nlet c = pool.allocate(shape=[2000], dtype=bf16)\n")
    assert pool.used == pool.size == 4000


@pytest.mark.parametrize("device", DEVICES)
def test_pinned_memory_is_host_memory(device):
    """allocate(..., pinned=true) needs the host's memory: on a device with memory of its own
    (a WebGPU adapter, even one that is a CPU) it is a device error under the call; on the
    host it is zeroed memory a block reads."""
    src = """let p = allocate(shape=[6], dtype=f32, device=dev, pinned=true)
p[1] = 5.0
let y = compute(p) {
    @kernel elementwise
    for i in 0..n:
        out[i] = p[i] * 2.0
}
y
"""
    session = zynbook.Session(device=device)
    if device in ("cpu", "cpu:native"):
        _close(session.run(src, dev=device), [0, 10, 0, 0, 0, 0])
        return
    with pytest.raises(ZynMLError) as info:
        session.run(src, dev=device)
    err = info.value
    assert (err.kind, err.line, err.column) == ("device", 1, 9), err.render()
    assert "host memory" in err.message
    _close(session.run(src, dev="cpu"), [0, 10, 0, 0, 0, 0])


# ------------------------------------------------------------------ user mistakes
_BLOCK = """let y = compute(x) {ann} {{
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}}
y
"""

# name: (source, kind, line, column): the same error on every device, under the device id,
# the argument or the annotation at fault
ERROR_CASES = {
    # a device id that is not a string is a type error (it was a device error, under the
    # whole call for to_device and the constructors)
    "device_annotation_number": (_BLOCK.format(ann="@device(3)"), "type", 1, 20),
    "device_annotation_two_ids": (_BLOCK.format(ann='@device("cpu", "cpu:native")'),
                                  "type", 1, 20),
    "device_annotation_empty_list": (_BLOCK.format(ann="@device([])"), "type", 1, 20),
    "device_annotation_unknown": (_BLOCK.format(ann='@device("cuda:99")'), "device", 1, 28),
    "config_device_number": ("config { compute_device: 7 }\n", "type", 1, 26),
    "config_device_unknown": ('config { compute_device: "tpu:0" }\n', "device", 1, 26),
    "to_device_number": ("let t = x.to_device(3)\n", "type", 1, 21),
    "to_device_unknown": ('let t = x.to_device("nope")\n', "device", 1, 21),
    # copy= that is not a bool was taken for its truth
    "to_device_copy_number": ('let t = x.to_device("cpu", copy=3)\n', "type", 1, 33),
    "randn_device_unknown": ('let t = randn([3], device="nope:0")\n', "device", 1, 27),
    "zeros_device_number": ("let t = zeros([2], device=5)\n", "type", 1, 27),
    "tensor_device_unknown": ('let t = tensor([1, 2], device="gpu")\n', "device", 1, 31),
    "allocate_device_unknown": ('let t = allocate(shape=[4], device="tpu:0")\n', "device", 1, 36),
    "allocate_dtype_unknown": ('let t = allocate(shape=[4], dtype="f8")\n', "type", 1, 35),
    "allocate_shape_negative": ("let t = allocate(shape=[4, -1])\n", "shape", 1, 24),
    "allocate_pinned_string": ('let t = allocate(shape=[4], pinned="yes")\n', "type", 1, 36),
    "memory_pool_device_unknown": ('let p = memory_pool(device="nope", size=1MB)\n',
                                   "device", 1, 28),
    "upload_device_unknown": ('let b = upload(x, device="nope")\n', "device", 1, 26),
    "memory_stats_device_unknown": ('let s = memory_stats(device="nope")\n', "device", 1, 29),
    "memory_stats_device_number": ("let s = memory_stats(device=3)\n", "type", 1, 29),
    # annotations that take no arguments refuse them (@async(1) and @nofuse(2) were taken)
    "async_with_an_argument": (_BLOCK.format(ann="@async(1)"), "type", 1, 20),
    "nofuse_with_an_argument": (_BLOCK.format(ann="@nofuse(2)"), "type", 1, 20),
    "future_done_with_an_argument": (_BLOCK.format(ann="@async").replace("\ny\n", "\n")
                                     + "y.done(1)\n", "type", 6, 1),
    "pool_reset_with_an_argument": ("let p = memory_pool(size=1MB)\np.reset(1)\n", "type", 2, 1),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_device_and_memory_mistakes_are_zynml_errors_where_they_are(name, device):
    src, kind, line, column = ERROR_CASES[name]
    session = zynbook.Session(device=device)
    with pytest.raises(ZynMLError) as info:
        session.run(src, x=_f32(5))
    err = info.value
    assert (err.kind, err.line, err.column) == (kind, line, column), err.render()
    assert "^" in err.render()
    assert session.run("1 + 1") == 2


# config keys of the wrong type: a type error under the value (NaN seconds were taken as a
# budget, a number for flash_config was a name error); an unknown name, a name error
CONFIG_ERRORS = {
    "config { tune_budget: nan }\n": ("type", 1, 23),
    "config { tune_budget: 0 }\n": ("type", 1, 23),
    'config { tune_budget: "5s" }\n': ("type", 1, 23),
    "config { flash_config: 3 }\n": ("type", 1, 24),
    'config { flash_config: "volta" }\n': ("name", 1, 24),
    'config { autotune: "yes" }\n': ("type", 1, 20),
    "config { allow_tf32: 1 }\n": ("type", 1, 22),
    "config { seed: 1.5 }\n": ("type", 1, 16),
    'config { fuse: "no" }\n': ("type", 1, 16),
    "config { cuda_graph: 1 }\n": ("type", 1, 22),
    'config { model_split: "rows" }\n': ("type", 1, 23),
    "config { cluster: 5 }\n": ("type", 1, 19),
    'config { memory_budget: "1MB" }\n': ("type", 1, 25),
    "config {\n    seed: 3\n    autotun: true\n}\n": ("name", 3, 5),
}


@pytest.mark.parametrize("src", list(CONFIG_ERRORS))
def test_config_keys_of_the_wrong_type_or_name(src):
    session = zynbook.Session()
    with pytest.raises(ZynMLError) as info:
        session.run(src)
    err = info.value
    assert (err.kind, err.line, err.column) == CONFIG_ERRORS[src], err.render()
    assert session.run("config { tune_budget: 2 }\n1 + 1") == 2
