"""@parallel over two CUDA GPUs (skipped without them): every kernel type equals one GPU,
results stay sharded on the GPUs, the collectives are NCCL's, and a mixed GPU + CPU group
gives the same results. scripts/multi_gpu_check.py adds the timings."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.backends.registry import get_device
from zynbook.runtime.sharded import ShardedTensor, chunk_bounds, group_for

from test_parallel import KERNELS, MATMUL, SPEC_KERNELS, _rand, check_spec_kernel_split

IDS = {d["id"] for d in zynbook.compute_devices()}
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not {"cuda:0", "cuda:1"} <= IDS, reason="needs two CUDA GPUs")]
GPUS = ["cuda:0", "cuda:1"]


@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_type_on_two_gpus_equals_one(name, mode):
    src, make, _ = KERNELS[name]
    inputs = make(_rand(11))
    one = zynbook.run(src.format(mode=mode), devices=["cuda:0"], **inputs)
    session = zynbook.Session()
    out = session.run(src.format(mode=mode), devices=GPUS, **inputs)
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-4, atol=1e-4)
    assert sorted(launch.device for launch in session.launches) == GPUS
    if isinstance(out, ShardedTensor):
        for dev, arr, _ in out.shards:
            assert type(arr).__module__.startswith("cupy") and f"cuda:{arr.device.id}" == dev


def test_the_collectives_are_nccl_and_exact_for_uneven_parts():
    devs = [get_device(d) for d in GPUS]
    group = group_for(devs)
    assert group.kind == "nccl"
    parts = [_rand(k)((7, 5)) for k in range(2)]
    total = parts[0] + parts[1]
    on = [d.from_host(p) for d, p in zip(devs, parts)]
    for d, got in zip(devs, group.all_reduce(on, "+")):
        np.testing.assert_allclose(d.to_host(got), total, rtol=1e-6)
    bounds = chunk_bounds(7, 2)
    for d, got, (lo, hi) in zip(devs, group.reduce_scatter(on, "+", 0, bounds), bounds):
        np.testing.assert_allclose(d.to_host(got), total[lo:hi], rtol=1e-6)
    shards = [d.from_host(np.ascontiguousarray(total[lo:hi])) for d, (lo, hi) in zip(devs, bounds)]
    for d, got in zip(devs, group.all_gather(shards, 0)):
        np.testing.assert_array_equal(d.to_host(got), total)


def test_contraction_split_on_two_gpus():
    a, b = _rand(12)((129, 301)), _rand(13)((301, 65))
    out = zynbook.run('config { model_split: "contraction" }\n' + MATMUL.format(mode="model"),
                      A=a, B=b, devices=GPUS)
    assert isinstance(out, ShardedTensor) and out.devices == GPUS
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-4)


def test_a_gpu_and_the_cpu_in_one_group():
    src, make, _ = KERNELS["matmul"]
    inputs = make(_rand(14))
    out = zynbook.run(src.format(mode="data"), devices=["cuda:1", "cpu"], **inputs)
    np.testing.assert_allclose(np.asarray(out), inputs["A"] @ inputs["B"], rtol=1e-4, atol=1e-4)


def test_the_spec_transformer_block_on_two_gpus_stays_sharded():
    """Every block of the spec's transformer block split by the batch over two GPUs equals
    cuda:0 alone, and nothing is gathered between the blocks."""
    from zynbook.runtime import sharded
    from test_parallel import _spec_block_on
    r = _rand(31)
    hidden, heads, ffn = 64, 4, 128
    layer = {"qkv_proj": r((hidden, 3 * hidden)) * 0.2, "out_proj": r((hidden, hidden)) * 0.2,
             "ln1_weight": r((hidden,)) + 1.0, "ln1_bias": r((hidden,)),
             "ffn_up": r((hidden, ffn)) * 0.2, "ffn_down": r((ffn, hidden)) * 0.2,
             "ln2_weight": r((hidden,)) + 1.0, "ln2_bias": r((hidden,))}
    prog = f"let num_heads = {heads}\nlet head_dim = {hidden // heads}\n" + \
        _spec_block_on("devs")
    x = r((5, 130, hidden))
    one = zynbook.run(prog, x=x, model={"layers": [layer]}, devs=["cuda:0"])
    gathered = []
    original = sharded.ShardedTensor.gather_array

    def spy(self, device_id):
        gathered.append(self.shape)
        return original(self, device_id)
    sharded.ShardedTensor.gather_array = spy
    try:
        out = zynbook.run(prog, x=x, model={"layers": [layer]}, devs=GPUS)
    finally:
        sharded.ShardedTensor.gather_array = original
    assert gathered == [] and isinstance(out, ShardedTensor) and out.devices == GPUS
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", SPEC_KERNELS)
def test_the_spec_kernels_split_over_two_gpus(name, mode):
    out = check_spec_kernel_split(name, mode, GPUS, tol=1e-4)
    for dev, arr, _ in out.shards:
        assert type(arr).__module__.startswith("cupy") and f"cuda:{arr.device.id}" == dev
