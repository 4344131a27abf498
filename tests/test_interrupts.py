"""Interruptible and cancellable work (docs/api.md, "Interrupts, timeouts and exit"): an
interrupt stops a running kernel and keeps the session's state, an expired `await ...
timeout` cancels its job, and leaving Python never waits on a job."""
from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLTimeoutError

DEVICES = [d["id"] for d in zynbook.compute_devices()]
STOPPABLE = [d for d in ("cpu", "cpu:native") if d in DEVICES]

# a kernel of many seconds on every CPU device: m dependent steps per element (a recurrence
# no executor can turn into one vector operation)
LONG = """let slow = compute(x) {{
    for i in 0..n:
        var acc = 0.0
        for k in 0..m:
            acc = sin(acc + x[i])
        out[i] = acc
}}
"""
STEPS = {"cpu": 2_000_000, "cpu:native": 60_000_000}


@pytest.fixture(autouse=True)
def _python_handles_sigint():
    """`_thread.interrupt_main` raises KeyboardInterrupt only where Python handles SIGINT;
    a process started in the background by a non-interactive shell begins with SIGINT
    ignored, so these tests install Python's own handler, as a notebook's kernel has it."""
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _interrupt_after(seconds: float):
    timer = threading.Timer(seconds, _thread.interrupt_main)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("device", STOPPABLE)
def test_interrupt_stops_a_running_kernel_and_keeps_the_session(device):
    session = zynbook.Session(device)
    x = np.linspace(0, 1, 4, dtype=np.float32)
    session.run("let before = 41\nlet kept = x * 2.0\n", x=x)
    source = "let after = 1\n" + LONG.format() + "let never = 2\n"
    timer = _interrupt_after(0.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        session.run(source, x=x, m=STEPS[device])
    elapsed = time.monotonic() - start
    timer.cancel()
    assert elapsed < 4.0, f"the interrupt took {elapsed:.1f} s to stop the kernel"
    ns = session.namespace
    # statements before the interrupted one ran; it and the ones after bound nothing
    assert ns["before"] == 41 and ns["after"] == 1
    assert "slow" not in ns and "never" not in ns
    np.testing.assert_array_equal(np.asarray(ns["kept"]), x * 2)
    # the session (and its lock) is usable at once
    assert session.run("before + 1\n") == 42
    got = session.run(LONG.format() + "slow\n", x=x, m=3)
    want = []
    for v in x:
        acc = 0.0
        for _ in range(3):
            acc = np.sin(acc + v)
        want.append(acc)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


# a WebGPU adapter that runs on the CPU (Mesa's llvmpipe): a kernel there takes seconds
SLOW_ADAPTERS = [d["id"] for d in zynbook.compute_devices()
                 if d["id"].startswith(("vulkan", "gl", "webgpu")) and "llvmpipe" in (d.get("name") or "")][:1]


@pytest.mark.parametrize("device", SLOW_ADAPTERS)
def test_interrupt_stops_waiting_for_a_webgpu_kernel_and_keeps_the_session(device):
    """A dispatched WebGPU kernel cannot be stopped, but the cell waiting for it can: the
    interrupt arrives at once (the wait blocked in wgpu until the kernel ended); the
    session keeps its state and its next run waits for the queue, then gives numpy's
    answer."""
    session = zynbook.Session(device)
    small = np.linspace(0, 1, 256, dtype=np.float32)
    x = np.linspace(0, 1, 1 << 20, dtype=np.float32)
    for n in (256, 256):        # (the first compiles; 64 Ki steps a thread at most)
        start = time.monotonic()
        session.run(LONG.format() + "slow\n", x=x[:n], m=60_000)
    per_element = (time.monotonic() - start) / 256
    x = x[:int(min(max(6.0 / per_element, 8192), 1 << 20))]
    session.run("let before = 41\n")
    timer = _interrupt_after(0.5)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            session.run(LONG.format() + "let never = 2\n", x=x, m=60_000)
    finally:
        timer.cancel()      # (a run that ended first: no interrupt left for later code)
    elapsed = time.monotonic() - start
    assert elapsed < 2.5, f"the interrupt took {elapsed:.1f} s to arrive"
    assert session.namespace["before"] == 41 and "never" not in session.namespace
    got = session.run(LONG.format() + "slow\n", x=small[:5], m=3)
    want = np.zeros(5)
    for _ in range(3):
        want = np.sin(want + small[:5].astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-7)


@pytest.mark.skipif("cpu:native" not in DEVICES, reason="no C++ compiler")
def test_an_abandoned_native_kernel_stops_instead_of_running_on():
    """The kernel an interrupt gave up on sees the cancel word and skips its remaining outer
    iterations: its worker is free again long before the whole kernel could have run."""
    from zynbook.runtime.cancel import _NativeWorker
    session = zynbook.Session("cpu:native")
    x = np.linspace(0, 1, 4000, dtype=np.float32)
    session.run(LONG.format() + "slow\n", x=x[:4], m=3)        # compiled, and a worker idle
    idle_before = len(_NativeWorker._idle)
    timer = _interrupt_after(0.5)
    with pytest.raises(KeyboardInterrupt):
        # 4000 outer iterations of 100,000 steps: tens of seconds if it ran to the end
        session.run(LONG.format() + "slow\n", x=x, m=100_000)
    timer.cancel()
    deadline = time.monotonic() + 5.0
    while len(_NativeWorker._idle) < idle_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_NativeWorker._idle) >= idle_before, "the abandoned kernel is still running"


@pytest.mark.parametrize("device", STOPPABLE)
def test_expired_timeout_cancels_the_job_and_frees_the_device(device):
    session = zynbook.Session("cpu")
    x = np.linspace(0, 1, 4, dtype=np.float32)
    source = LONG.format().replace("compute(x)", f'compute(x) @async @device("{device}")') + \
        f"""let r = await slow timeout 300ms else 0.5
let quick = compute(x) @async @device("{device}") {{
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + 1.0
}}
let q = await quick timeout 20s
"""
    start = time.monotonic()
    session.run(source, x=x, m=STEPS[device])
    elapsed = time.monotonic() - start
    ns = session.namespace
    assert ns["r"] == 0.5
    np.testing.assert_allclose(np.asarray(ns["q"]), x + 1)
    assert elapsed < 8.0, f"the later job waited {elapsed:.1f} s behind a cancelled one"
    # awaiting the cancelled job again is a ZynML error, not a hang
    with pytest.raises(zynbook.ZynMLError) as info:
        session.run("await slow timeout 5s\n")
    assert "cancelled" in info.value.message


def test_expired_timeout_without_default_is_a_timeout_error_and_cancels():
    if "cpu" not in DEVICES:
        pytest.skip("no cpu")
    session = zynbook.Session("cpu")
    x = np.ones(4, np.float32)
    source = LONG.format().replace("compute(x)", "compute(x) @async") + \
        "let r = await slow timeout 100ms\n"
    with pytest.raises(ZynMLTimeoutError) as info:
        session.run(source, x=x, m=STEPS["cpu"])
    assert "cancelled" in info.value.message and info.value.line >= 1
    fut = session.namespace["slow"]
    deadline = time.monotonic() + 5
    while not fut.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fut.done(), "the job still runs after its wait expired"


def test_a_queued_job_behind_a_cancelled_one_runs_and_a_cancelled_queued_one_never_starts():
    from zynbook.runtime.cancel import JobQueue
    q = JobQueue("test-queue")
    started = []

    def slow():
        started.append("slow")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            sum(range(1000))
        return "slow done"

    a = q.submit(slow)
    b = q.submit(lambda: started.append("b") or "b")
    c = q.submit(lambda: started.append("c") or "c")
    while "slow" not in started:
        time.sleep(0.01)
    assert b.cancel()                       # queued: never starts
    assert a.cancel()                       # running: stopped
    assert c.result(timeout=5) == "c"
    assert b.cancelled() and "b" not in started
    assert a.done() and a.exception() is not None


def test_leaving_python_never_waits_on_a_job():
    root = Path(__file__).resolve().parents[1]
    script = f"""
import time, numpy as np, zynbook
src = '''{LONG.format()}'''.replace("compute(x)", "compute(x) @async")
zynbook.run(src, x=np.ones(4, np.float32), m={STEPS['cpu'] * 10})
print("left", flush=True)
"""
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=120,
                         env={**os.environ, "XDG_RUNTIME_DIR": os.environ.get(
                             "XDG_RUNTIME_DIR", "/tmp")})
    elapsed = time.monotonic() - start
    assert res.returncode == 0, res.stderr[-2000:]
    assert "left" in res.stdout
    assert elapsed < 30, f"exit waited {elapsed:.1f} s for a running job"


def test_jupyter_interrupt_stops_a_native_kernel_and_keeps_the_notebook_state():
    """The notebook case: a Jupyter interrupt (SIGINT to the kernel process) during a long
    `cpu:native` kernel returns at once; names bound by earlier cells stay."""
    if "cpu:native" not in DEVICES:
        pytest.skip("no C++ compiler here")
    pytest.importorskip("ipykernel")
    from jupyter_client.manager import start_new_kernel
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_kernel_support import TIMEOUT, execute, install_kernelspec, results_of

    install_kernelspec()
    km, kc = start_new_kernel(kernel_name="zynml", startup_timeout=60)
    try:
        reply, _ = execute(kc, "%python import numpy as np\n"
                               "%python x = np.ones(4, dtype=np.float32)\n"
                               "let kept = 41\nconfig { compute_device: \"cpu:native\" }\n")
        assert reply["status"] == "ok", reply
        msg_id = kc.execute(f"let m = {STEPS['cpu:native'] * 4}\n" + LONG.format() + "slow\n",
                            stop_on_error=False)
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") == msg_id and \
                    msg["msg_type"] == "execute_input":
                break
        time.sleep(1.5)
        started = time.time()
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=TIMEOUT)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=TIMEOUT)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.time() - started < 5
        reply, outputs = execute(kc, "kept + 1")
        assert reply["status"] == "ok"
        assert results_of(outputs)[-1]["text/plain"] == "42"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
