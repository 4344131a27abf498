"""@device([...]) @parallel(data|model): one block split across devices equals one device."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError

MATMUL = """compute(A, B) @device(devices) @parallel({mode}) {{
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}}"""

SCALE_ROWS = """compute(x, w) @device(devices) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = x[b, f] * w[f] + 1.0
}"""


def device_lists():
    ids = [d["id"] for d in zynbook.compute_devices()]
    lists = [["cpu", "cpu"], ["cpu", "cpu", "cpu"]]
    gpus = [i for i in ids if i != "cpu"]
    if gpus:
        lists.append(["cpu", gpus[0]])
    return lists


@pytest.mark.parametrize("devices", device_lists(), ids=lambda d: "+".join(d))
@pytest.mark.parametrize("mode", ["data", "model"])
def test_split_matmul_equals_numpy(devices, mode):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 23)).astype(np.float32)
    session = zynbook.Session()
    out = session.run(MATMUL.format(mode=mode), A=a, B=b, devices=devices)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)
    # every device ran a part
    assert sorted(launch.device for launch in session.launches) == sorted(devices)


def test_split_with_more_devices_than_rows():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.ones(3, np.float32)
    out = zynbook.run(SCALE_ROWS, x=x, w=w, devices=["cpu", "cpu", "cpu"])
    np.testing.assert_allclose(np.asarray(out), x * w + 1.0)


def test_a_loop_variable_used_as_a_value_cannot_be_split():
    src = """compute(x) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * i
}"""
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run(src, x=np.ones(10, np.float32))
    assert "cannot split" in info.value.message and info.value.line == 1


def test_without_parallel_a_device_list_runs_on_its_first_device():
    session = zynbook.Session()
    out = session.run(SCALE_ROWS.replace(" @parallel(data)", ""),
                      x=np.ones((4, 3), np.float32), w=np.ones(3, np.float32),
                      devices=["cpu", "cpu"])
    assert [launch.device for launch in session.launches] == ["cpu"]
    np.testing.assert_allclose(np.asarray(out), 2.0)


# ------------------------------------------------------------ every kernel type, sharded
from zynbook.runtime.sharded import DeviceGroup, ShardedTensor, chunk_bounds  # noqa: E402
from zynbook.backends.registry import get_device  # noqa: E402

GROUPS = [["cpu", "cpu"], ["cpu", "cpu:native"], ["cpu", "cpu", "cpu"]]

KERNELS = {
    "elementwise": ("""compute(x, w) @device(devices) @parallel({mode}) {{
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = x[b, f] * w[f] + 1.0
}}""", lambda r: dict(x=r((7, 5)), w=r((5,))), lambda x, w: x * w + 1.0),
    "matmul": (MATMUL, lambda r: dict(A=r((13, 6)), B=r((6, 11))), lambda A, B: A @ B),
    "batched_matmul": ("""compute(A, B) @device(devices) @parallel({mode}) {{
    @kernel batched_matmul
    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[b, i, k] * B[b, k, j]
        out[b, i, j] = sum
}}""", lambda r: dict(A=r((5, 7, 4)), B=r((5, 4, 3))), lambda A, B: A @ B),
    "softmax_rows": ("""compute(x) @device(devices) @parallel({mode}) {{
    @kernel fused
    for b in 0..batch:
        var m = -inf
        for i in 0..n:
            m = max(m, x[b, i])
        var s = 0.0
        for i in 0..n:
            s += exp(x[b, i] - m)
        for i in 0..n:
            out[b, i] = exp(x[b, i] - m) / s
}}""", lambda r: dict(x=r((9, 6))),
        lambda x: np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)),
    "reduce_sum": ("""compute(data) @device(devices) @parallel({mode}) {{
    @kernel reduce(+)
    for i in 0..len:
        yield data[i]
}}""", lambda r: dict(data=r((23,))), lambda data: data.sum()),
    "reduce_max": ("""compute(data) @device(devices) @parallel({mode}) {{
    @kernel reduce(max)
    for i in 0..len:
        yield data[i]
}}""", lambda r: dict(data=r((23,))), lambda data: data.max()),
    "row_sums": ("""compute(matrix) @device(devices) @parallel({mode}) {{
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}}""", lambda r: dict(matrix=r((7, 9))), lambda matrix: matrix.sum(1)),
    "col_max": ("""compute(matrix) @device(devices) @parallel({mode}) {{
    @kernel reduce(max, axis=0)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}}""", lambda r: dict(matrix=r((7, 9))), lambda matrix: matrix.max(0)),
    "argmin_rows": ("""compute(matrix) @device(devices) @parallel({mode}) {{
    @kernel reduce(argmin, axis=1)
    for i in 0..rows, j in 0..cols:
        yield (matrix[i, j], j)
}}""", lambda r: dict(matrix=r((7, 9))), lambda matrix: matrix.argmin(1)),
}


def _rand(seed=0):
    rng = np.random.default_rng(seed)
    return lambda shape: rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("devices", GROUPS, ids=lambda d: "+".join(d))
@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_type_split_equals_one_device(name, mode, devices):
    src, make, expect = KERNELS[name]
    inputs = make(_rand())
    session = zynbook.Session()
    out = session.run(src.format(mode=mode), devices=devices, **inputs)
    one = zynbook.run(src.format(mode=mode).replace("@device(devices)", "@device(\"cpu\")"),
                      **inputs)
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), expect(**inputs), rtol=1e-4, atol=1e-4)
    # every device that got a non-empty chunk ran it
    assert len(session.launches) == len(devices)


def test_a_split_output_stays_sharded_with_its_placement():
    x = np.arange(35, dtype=np.float32).reshape(7, 5)
    w = np.ones(5, np.float32)
    out = zynbook.run(SCALE_ROWS, x=x, w=w, devices=["cpu", "cpu:native", "cpu"])
    assert isinstance(out, ShardedTensor)
    assert [(p["device"], p["start"], p["stop"]) for p in out.placement] == \
        [("cpu", 0, 2), ("cpu:native", 2, 4), ("cpu", 4, 7)]
    assert "sharded" in repr(out) and "cpu:native[2:4]" in repr(out)
    assert "cpu:native" in out._repr_html_()
    assert out.shape == (7, 5) and out.summary().startswith("tensor[7, 5] f32 sharded")
    np.testing.assert_array_equal(out.shard(1).numpy(), x[2:4] + 1.0)
    np.testing.assert_array_equal(out.gather().numpy(), x + 1.0)
    # host code sees the whole tensor
    total = zynbook.run("y.sum()", y=out)
    assert float(np.asarray(total)) == pytest.approx(float((x + 1.0).sum()))


def test_the_next_block_takes_the_shards_as_they_are():
    src = SCALE_ROWS + """
let z = compute(y) @device(devices) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] * 2.0
}
z"""
    src = "let y = " + src
    x = _rand(3)((11, 4))
    w = _rand(4)((4,))
    session = zynbook.Session()
    session.run(src, x=x, w=w, devices=["cpu", "cpu"])
    y = session.namespace["y"]
    seen = []
    from zynbook.runtime import parallel
    original = parallel.input_parts

    def spy(t, axis, work, ids=None):
        parts = original(t, axis, work, ids)
        seen.append((t, parts))
        return parts
    parallel.input_parts = spy
    try:
        z = session.run("compute(y) @device(devices) @parallel(data) {\n"
                        "    @kernel elementwise\n"
                        "    for b in 0..batch, f in 0..features:\n"
                        "        out[b, f] = y[b, f] * 2.0\n}", devices=["cpu", "cpu"])
    finally:
        parallel.input_parts = original
    np.testing.assert_allclose(np.asarray(z), (x * w + 1.0) * 2.0, rtol=1e-6)
    [(given, parts)] = seen
    assert given is y
    # the very arrays of y's shards, no copy
    assert [p.data is a for p, (_, a, _) in zip(parts, y.shards)] == [True, True]


def test_a_differently_cut_input_is_recut():
    x = _rand(5)((10, 3))
    y = zynbook.run(SCALE_ROWS, x=x, w=np.ones(3, np.float32), devices=["cpu", "cpu"])
    # three devices cut 10 rows as 3/3/4: the chunks cross y's shards
    z = zynbook.run("""compute(y) @device(["cpu", "cpu:native", "cpu"]) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] - 1.0
}""", y=y)
    np.testing.assert_allclose(np.asarray(z), x, rtol=1e-6)


def test_a_sharded_tensor_as_a_whole_input_is_gathered():
    x = _rand(6)((5, 4))
    b = _rand(7)((4, 6))
    xs = zynbook.run(SCALE_ROWS, x=x, w=np.ones(4, np.float32), devices=["cpu", "cpu"])
    # model split: B is cut by columns, A (the sharded tensor) goes whole to every device
    out = zynbook.run(MATMUL.format(mode="model"), A=xs, B=b, devices=["cpu", "cpu"])
    np.testing.assert_allclose(np.asarray(out), (x + 1.0) @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("devices", GROUPS, ids=lambda d: "+".join(d))
@pytest.mark.parametrize("shape", [(13, 6, 11), (2, 17, 3), (1, 5, 1)])
def test_model_parallel_contraction_is_reduce_scattered(devices, shape):
    m, k, n = shape
    r = _rand(8)
    a, b = r((m, k)), r((k, n))
    session = zynbook.Session()
    out = session.run('config { model_split: "contraction" }\n' + MATMUL.format(mode="model"),
                      A=a, B=b, devices=devices)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)
    if isinstance(out, ShardedTensor):          # the rows of the sum, one part per device
        assert out.axis == 0 and [hi - lo for lo, hi in out.bounds] == \
            [hi - lo for lo, hi in chunk_bounds(m, len(devices)) if hi > lo]
    assert len(session.launches) == min(len(devices), k)


def test_contraction_split_of_a_kernel_without_one_says_so():
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run('config { model_split: "contraction" }\n' +
                    SCALE_ROWS.replace("parallel(data)", "parallel(model)"),
                    x=np.ones((4, 3), np.float32), w=np.ones(3, np.float32),
                    devices=["cpu", "cpu"])
    assert "contraction" in info.value.message


def test_model_split_takes_two_names():
    from zynbook.errors import ZynMLTypeError
    with pytest.raises(ZynMLTypeError):
        zynbook.run('config { model_split: "rows" }\n1')


@pytest.mark.parametrize("src,why", [
    ("""compute(x) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel reduce(argmax)
    for i in 0..len:
        yield (x[i], i)
}""", "position"),
    ("""compute(x) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * i
}""", "used other than as an index"),
    ("""compute(data) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel matmul
    for i in 0..n, j in 0..m:
        var sum = 0.0
        for k in 0..n2:
            sum += data[i, k] * data[k, j]
        out[i, j] = sum
}""", "other positions"),
    ("""compute(x) @device(["cpu", "cpu"]) @parallel(data) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] / n
}""", "used elsewhere"),
])
def test_kernels_that_cannot_be_split_say_why(src, why):
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run(src, data=np.ones((4, 4), np.float32), x=np.ones(4, np.float32))
    assert "cannot split" in info.value.message and why in info.value.message
    assert info.value.line == 1


def test_host_group_collectives_with_uneven_parts():
    devs = [get_device("cpu"), get_device("cpu:native"), get_device("cpu")]
    group = DeviceGroup(devs)
    r = _rand(9)
    parts = [r((7, 3)) for _ in devs]
    total = parts[0] + parts[1] + parts[2]
    for got in group.all_reduce(parts, "+"):
        np.testing.assert_allclose(got, total, rtol=1e-6)
    np.testing.assert_array_equal(group.all_reduce(parts, "max")[2],
                                  np.maximum(np.maximum(parts[0], parts[1]), parts[2]))
    bounds = chunk_bounds(7, 3)
    scattered = group.reduce_scatter(parts, "+", 0, bounds)
    for got, (lo, hi) in zip(scattered, bounds):
        np.testing.assert_allclose(got, total[lo:hi], rtol=1e-6)
    cols = group.reduce_scatter(parts, "+", 1, chunk_bounds(3, 3))
    np.testing.assert_allclose(np.concatenate(cols, axis=1), total, rtol=1e-6)
    shards = [total[lo:hi] for lo, hi in bounds]
    for got in group.all_gather(shards, 0):
        np.testing.assert_array_equal(got, total)


def test_the_multi_gpu_example_on_a_cpu_group():
    from pathlib import Path
    text = (Path(__file__).parent.parent / "examples" / "multi_gpu.zyn").read_text()
    text = text.replace('"cuda:0"', '"cpu"').replace('"cuda:1"', '"cpu:native"')
    session = zynbook.Session()
    max_diff = session.run(text)
    data = np.asarray(session.namespace["data"]).astype(np.float64)
    assert max_diff < 1e-3
    result, scaled = session.namespace["result"], session.namespace["scaled"]
    assert isinstance(result, ShardedTensor) and result.devices == ["cpu", "cpu:native"]
    np.testing.assert_allclose(np.asarray(scaled), 0.5 * data @ data, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(session.namespace["forward"]), np.tanh(data),
                               rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ the spec's kernels, split
def _spec_cases():
    from kernel_sources import (SPEC_ATTENTION, SPEC_BROADCAST, SPEC_CONV2D, SPEC_DEPTHWISE,
                                SPEC_FLASH, SPEC_GELU, SPEC_LAYER_NORM, SPEC_ROPE)

    def r(seed, *shape):
        return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    seq = 9
    mask = np.random.default_rng(1).random((seq, seq)) > 0.3
    mask[np.arange(seq), np.arange(seq)] = True
    angles = np.arange(seq)[:, None] * 10000.0 ** (-2.0 * np.arange(4) / 8)[None, :]
    return {
        # name: (source, inputs, axis of out that data / model split)
        "attention": (SPEC_ATTENTION, dict(Q=r(1, 3, 2, seq, 8), K=r(2, 3, 2, seq, 8),
                                           V=r(3, 3, 2, seq, 8), mask=mask), (0, 1)),
        "flash_attention": (SPEC_FLASH, dict(Q=r(1, 3, 2, 70, 8), K=r(2, 3, 2, 70, 8),
                                             V=r(3, 3, 2, 70, 8)), (0, 1)),
        "conv2d": (SPEC_CONV2D, dict(input=r(1, 3, 3, 7, 9), kernel=r(2, 5, 3, 3, 3),
                                     bias=r(3, 5), stride=1, padding=0, in_h=7, in_w=9,
                                     out_h=5, out_w=7), (0, 1)),
        "conv2d_depthwise": (SPEC_DEPTHWISE, dict(input=r(4, 3, 3, 7, 9), kernel=r(5, 3, 3, 3),
                                                  out_h=5, out_w=7), (0, 1)),
        "layer_norm": (SPEC_LAYER_NORM, dict(x=r(1, 7, 65), gamma=r(2, 65), beta=r(3, 65),
                                             eps=1e-5), (0, 0)),
        "rope": (SPEC_ROPE, dict(x=r(5, 3, 2, seq, 8), cos_cache=np.cos(angles).astype(np.float32),
                                 sin_cache=np.sin(angles).astype(np.float32)), (0, 2)),
        "gelu": (SPEC_GELU, dict(x=r(1, 33)), (0, 0)),
        "broadcast": (SPEC_BROADCAST, dict(matrix=r(1, 7, 5), vector=r(2, 5)), (0, 1)),
    }


@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", ["attention", "flash_attention", "conv2d", "conv2d_depthwise",
                                  "layer_norm", "rope", "gelu", "broadcast"])
def test_the_spec_kernels_split_equal_one_device(name, mode):
    """data splits the outermost loop that can be split (the batch), model the innermost
    one (heads of attention, output channels of a convolution)."""
    check_spec_kernel_split(name, mode, ["cpu", "cpu"])


SPEC_KERNELS = ["attention", "flash_attention", "conv2d", "conv2d_depthwise", "layer_norm",
                "rope", "gelu", "broadcast"]


def check_spec_kernel_split(name, mode, devices, tol=1e-5):
    """The spec's kernel `name` split with @parallel(mode) over `devices` equals it run on
    the session's default device, its result sharded along the axis the mode cuts."""
    import re
    src, inputs, (data_axis, model_axis) = _spec_cases()[name]
    one = zynbook.run(src, **inputs)
    group = "[" + ", ".join(f'"{d}"' for d in devices) + "]"
    split = re.sub(r"(compute\([^)]*\)) \{",
                   r"\1 @device(%s) @parallel(%s) {" % (group, mode), src, count=1)
    assert split != src
    out = zynbook.run(split, **inputs)
    assert isinstance(out, ShardedTensor) and out.devices == list(devices)
    assert out.axis == (data_axis if mode == "data" else model_axis)
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=tol, atol=tol)
    return out


@pytest.mark.webgpu
@pytest.mark.skipif("vulkan:0" not in {d["id"] for d in zynbook.compute_devices()},
                    reason="needs a Vulkan adapter")
def test_a_group_with_a_webgpu_device():
    """A device whose memory is not the host's: shards live in its buffers, a chain reuses
    them, reductions and contractions combine through the host."""
    devices = ["vulkan:0", "cpu"]
    x, w = _rand(20)((9, 4)), _rand(21)((4,))
    session = zynbook.Session()
    y = session.run("let y = " + SCALE_ROWS + """
let z = compute(y) @device(devices) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] * 2.0
}
let s = compute(z) @device(devices) @parallel(data) {
    @kernel reduce(+, axis=0)
    for b in 0..batch, f in 0..features:
        yield z[b, f]
}
z""", x=x, w=w, devices=devices)
    assert isinstance(y, ShardedTensor) and y.devices == devices
    np.testing.assert_allclose(np.asarray(y), (x * w + 1.0) * 2.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(session.namespace["s"]),
                               ((x * w + 1.0) * 2.0).sum(0), rtol=1e-4)
    a, b = _rand(22)((5, 7)), _rand(23)((7, 3))
    out = zynbook.run('config { model_split: "contraction" }\n' + MATMUL.format(mode="model"),
                      A=a, B=b, devices=devices)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ reshape and split of shards
def _spec_block_on(devs_name: str) -> str:
    """examples/transformer_block.zyn with every compute block split @parallel(data) over
    `devs_name`, as bench/bench_multi_gpu.py times it."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    from bench_multi_gpu import spec_block
    return spec_block(devs_name)


def test_the_spec_transformer_block_stays_sharded_through_split_and_reshape():
    """Every block of the spec's transformer block split by the batch over a cpu group
    equals one device; split() and reshape() between the blocks act on the shards where they
    are, so nothing is gathered."""
    from zynbook.runtime import sharded
    r = _rand(31)
    hidden, heads, ffn = 24, 3, 40
    layer = {"qkv_proj": r((hidden, 3 * hidden)), "out_proj": r((hidden, hidden)),
             "ln1_weight": r((hidden,)) + 1.0, "ln1_bias": r((hidden,)),
             "ffn_up": r((hidden, ffn)), "ffn_down": r((ffn, hidden)),
             "ln2_weight": r((hidden,)) + 1.0, "ln2_bias": r((hidden,))}
    prog = f"let num_heads = {heads}\nlet head_dim = {hidden // heads}\n" + \
        _spec_block_on("devs")
    assert prog.count("@parallel(data)") == 6
    x = r((3, 70, hidden))          # 3 sequences over 2 devices: 1 and 2
    one = zynbook.run(prog, x=x, model={"layers": [layer]}, devs=["cpu"])
    gathered = []
    original = sharded.ShardedTensor.gather_array

    def spy(self, device_id):
        gathered.append(self.shape)
        return original(self, device_id)
    sharded.ShardedTensor.gather_array = spy
    try:
        session = zynbook.Session()
        out = session.run(prog, x=x, model={"layers": [layer]}, devs=["cpu", "cpu"])
    finally:
        sharded.ShardedTensor.gather_array = original
    assert gathered == []
    assert isinstance(out, ShardedTensor) and out.bounds == [(0, 1), (1, 3)]
    assert len(session.launches) == 12
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-5, atol=1e-5)


def test_reshape_and_split_of_a_sharded_tensor():
    x = _rand(32)((5, 6, 4))
    y = zynbook.run(SCALE_ROWS.replace("b in 0..batch, f in 0..features",
                                       "b in 0..batch, t in 0..seq, f in 0..features")
                    .replace("x[b, f]", "x[b, t, f]").replace("out[b, f]", "out[b, t, f]"),
                    x=x, w=np.ones(4, np.float32), devices=["cpu", "cpu"])
    assert isinstance(y, ShardedTensor) and y.axis == 0
    kept = zynbook.run("reshape(y, [5, 3, -1])", y=y)
    assert isinstance(kept, ShardedTensor) and kept.bounds == y.bounds
    assert [s.shape for s in (kept.shard(0), kept.shard(1))] == [(2, 3, 8), (3, 3, 8)]
    np.testing.assert_array_equal(np.asarray(kept), (x + 1.0).reshape(5, 3, 8))
    # a reshape that changes the sharded axis gathers
    flat = zynbook.run("reshape(y, [30, 4])", y=y)
    assert not isinstance(flat, ShardedTensor)
    np.testing.assert_array_equal(np.asarray(flat), (x + 1.0).reshape(30, 4))
    parts = zynbook.run("split(y, 2, axis=-1)", y=y)
    assert all(isinstance(p, ShardedTensor) and p.bounds == y.bounds for p in parts)
    for got, want in zip(parts, np.split(x + 1.0, 2, axis=-1)):
        np.testing.assert_array_equal(np.asarray(got), want)
    rows = zynbook.run("split(y, 5, axis=0)", y=y)        # along the sharded axis: gathered
    np.testing.assert_array_equal(np.asarray(rows[4]), (x + 1.0)[4:])
