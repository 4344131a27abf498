"""A Dask cluster as a device group: the same @parallel programs on a local cluster of two
worker processes (one thread each) equal the single-device result."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError

distributed = pytest.importorskip("distributed")

from test_parallel import KERNELS, MATMUL, SCALE_ROWS, _rand  # noqa: E402

ON_DASK = '@device("dask:local")'


@pytest.fixture(scope="module")
def client():
    from zynbook.backends import dask as zdask
    saved = {k: os.environ.get(k) for k in ("ZYNBOOK_WORKER_DEVICE", "ZYNBOOK_DASK_WORKERS")}
    os.environ["ZYNBOOK_WORKER_DEVICE"] = "cpu"      # the workers' own device, for CI
    os.environ["ZYNBOOK_DASK_WORKERS"] = "2"
    try:
        yield zdask.client_for("local")
    finally:
        zdask.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.mark.parametrize("mode", ["data", "model"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_kernel_type_on_dask_equals_one_device(client, name, mode):
    src, make, expect = KERNELS[name]
    inputs = make(_rand(1))
    text = src.format(mode=mode).replace("@device(devices)", ON_DASK)
    session = zynbook.Session()
    out = session.run(text, **inputs)
    one = zynbook.run(src.format(mode=mode).replace("@device(devices)", '@device("cpu")'),
                      **inputs)
    np.testing.assert_allclose(np.asarray(out), np.asarray(one), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out), expect(**inputs), rtol=1e-4, atol=1e-4)
    workers = sorted(client.scheduler_info()["workers"])
    ran = sorted(launch.device.split("/", 1)[1] for launch in session.launches)
    assert ran == workers           # one shard per worker


def test_results_stay_on_the_workers_and_feed_the_next_block(client):
    from zynbook.backends import dask as zdask
    x, w = _rand(2)((9, 4)), _rand(3)((4,))
    session = zynbook.Session()
    y = session.run(SCALE_ROWS.replace("@device(devices)", ON_DASK), x=x, w=w)
    assert isinstance(y, zdask.DistributedTensor)
    assert [hi - lo for lo, hi in y.bounds] == [4, 5]
    assert "Dask workers" in repr(y) and "tcp://" in y.summary()
    futures = [f for _, f, _ in y.shards]
    assert all(isinstance(f, distributed.Future) for f in futures)
    seen = []
    original = zdask._input_for

    def spy(*args):
        got = original(*args)
        seen.append(got[0])
        return got
    zdask._input_for = spy
    try:
        z = session.run("""compute(y) @device("dask:local") @parallel(data) {
    @kernel elementwise
    for b in 0..batch, f in 0..features:
        out[b, f] = y[b, f] * 2.0
}""", y=y)
    finally:
        zdask._input_for = original
    assert seen == futures          # the shards went as they were, never through the host
    np.testing.assert_allclose(np.asarray(z), (x * w + 1.0) * 2.0, rtol=1e-6)
    arr = z.to_dask_array()
    assert arr.chunks[0] == (4, 5)
    np.testing.assert_allclose(arr.compute(), (x * w + 1.0) * 2.0, rtol=1e-6)


def test_a_cluster_named_in_config(client):
    address = client.scheduler.address
    a, b = _rand(4)((10, 3)), _rand(5)((3, 6))
    out = zynbook.run(f'config {{ cluster: "{address}" }}\n' +
                      MATMUL.format(mode="data").replace("@device(devices)", '@device("dask")'),
                      A=a, B=b)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-4, atol=1e-5)


def test_a_block_without_parallel_is_one_task(client):
    session = zynbook.Session()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = session.run(SCALE_ROWS.replace(" @parallel(data)", "").replace(
        "@device(devices)", ON_DASK), x=x, w=np.ones(3, np.float32))
    np.testing.assert_allclose(np.asarray(out), x + 1.0)
    assert len(session.launches) == 1


def test_a_failing_shard_is_a_device_error_naming_the_worker(client):
    src = """compute(x, n) @device("dask:local") @parallel(data) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] / n[i]
}"""
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run(src, x=np.arange(6, dtype=np.int32),
                    n=np.array([1, 1, 1, 1, 0, 1], np.int32))
    workers = sorted(client.scheduler_info()["workers"])
    msg = info.value.message
    assert "Dask worker" in msg and any(w in msg for w in workers)
    assert "division by zero" in msg


def test_an_unreachable_scheduler_is_a_device_error(monkeypatch):
    monkeypatch.setenv("ZYNBOOK_DASK_TIMEOUT", "1s")
    with pytest.raises(ZynMLDeviceError, match="could not start or reach"):
        zynbook.run('config { cluster: "tcp://127.0.0.1:9" }\n' +
                    SCALE_ROWS.replace("@device(devices)", '@device("dask")'),
                    x=np.ones((2, 2), np.float32), w=np.ones(2, np.float32))


SLOW = """compute(x) @device("dask:local") @parallel(data) {
    @kernel fused
    for i in 0..n:
        var s = 0.0
        for k in 0..steps:
            s += sin(x[i] + k * 0.001)
        out[i] = s
}"""


def test_a_lost_worker_shard_runs_again_elsewhere(client):
    """Kill (by its pid) the worker process running a shard: Dask runs the shard again on
    another worker and the result is whole. (Last in this file: the cluster has one worker
    fewer until its nanny restarts it.)"""
    import signal
    import threading
    import time
    from zynbook.backends import dask as zdask
    cluster = zdask._clients["local"][1]
    x = np.linspace(0, 1, 8).astype(np.float32)
    steps = 1_500_000           # about a second per shard on the reference executor
    # k * 0.001 and x[i] + ... are f32 arithmetic, as on every device (an integer beside an
    # f32 is converted to it); the sines and their sum in f64
    args = np.arange(steps).astype(np.float32) * np.float32(0.001)
    want = np.array([np.sin((xi + args).astype(np.float64)).sum() for xi in x])
    session = zynbook.Session()
    result = {}

    def run():
        try:
            result["out"] = session.run(SLOW, x=x, steps=steps)
        except Exception as err:        # reported below
            result["err"] = err
    thread = threading.Thread(target=run)
    thread.start()
    busy = {}
    for _ in range(200):
        time.sleep(0.05)
        busy = {w: keys for w, keys in client.processing().items()
                if any(k.endswith("-1") for k in keys)}
        if busy:
            break
    assert busy, "the second shard never started"
    [victim] = busy
    pids = [n.process.process.pid for n in cluster.workers.values()
            if n.worker_address == victim]
    assert pids
    os.kill(pids[0], signal.SIGKILL)
    thread.join(120)
    assert "err" not in result, result.get("err")
    np.testing.assert_allclose(np.asarray(result["out"]), want, rtol=1e-3, atol=1e-2)
    ran = [launch.device.split("/", 1)[1] for launch in session.launches]
    assert victim not in ran          # the second shard's result lives on another worker


def test_a_cluster_whose_workers_are_not_up_yet_is_waited_for(monkeypatch):
    """A cluster with no worker for the moment (starting, or a worker dropped under load and
    being restarted) is waited for, up to ZYNBOOK_DASK_WAIT seconds; none by then is a
    device error naming the cluster. The notebook on multiple devices once failed with "no
    workers" where its cluster's worker was back a moment later."""
    import threading
    from zynbook.backends import dask as zdask
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0")
    client = distributed.Client(cluster)
    try:
        monkeypatch.setenv("ZYNBOOK_DASK_WAIT", "0.5")
        with pytest.raises(ZynMLDeviceError, match="the Dask cluster at here has no workers"):
            zdask._workers(client, "here")
        monkeypatch.setenv("ZYNBOOK_DASK_WAIT", "60")
        threading.Timer(1.0, lambda: cluster.scale(1)).start()
        workers = zdask._workers(client, "here")
        assert workers == sorted(client.scheduler_info()["workers"]) and len(workers) == 1
    finally:
        client.close()
        cluster.close()
