"""One `Session` shared between threads (widget callbacks, a pool): every call sees its own
bound names; calls run one at a time (docs/api.md, "Sessions and threads")."""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import numpy as np

import zynbook

KERNEL = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * s + t
}
let total = y
"""


def test_session_shared_by_eight_threads_gives_every_call_its_own_names():
    session = zynbook.Session("cpu")

    def call(k):
        x = np.full(5 + k % 7, float(k), dtype=np.float32)
        s, t = float(k % 5 + 1), float(k)
        value = session.run(KERNEL, x=x, s=s, t=t)
        return k, np.asarray(value).copy(), x * s + t

    with cf.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(call, range(320)))
    wrong = [k for k, got, want in results
             if got.shape != want.shape or not np.allclose(got, want)]
    assert not wrong, f"{len(wrong)} of 320 calls saw another call's names: {wrong[:10]}"


def test_calls_from_two_threads_do_not_interleave():
    session = zynbook.Session("cpu")
    inside, overlaps = [0], [0]
    lock = threading.Lock()
    original = session.interpreter.run_program

    def watched(program, source):
        with lock:
            inside[0] += 1
            overlaps[0] = max(overlaps[0], inside[0])
        try:
            time.sleep(0.01)
            return original(program, source)
        finally:
            with lock:
                inside[0] -= 1

    session.interpreter.run_program = watched
    with cf.ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda k: session.run("let a = k + 1\na\n", k=k), range(20)))
    assert overlaps[0] == 1


def test_pipelines_called_from_python_threads_share_the_lock():
    session = zynbook.Session("cpu")
    session.run("""pipeline scaled(v, f):
    return v * f
""")
    scaled = session.namespace["scaled"]
    with cf.ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda k: scaled(np.full(3, k, np.float32), 2.0), range(60)))
    for k, g in enumerate(got):
        np.testing.assert_array_equal(np.asarray(g), np.full(3, 2.0 * k, np.float32))
