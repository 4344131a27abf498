"""A device buffer collected on another thread while the device runs a program: the
collector runs a buffer's finaliser on whichever thread allocates, which on WebGPU is the
thread that reads a result back while the launching thread holds the device's lock."""
import threading

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices


@pytest.mark.parametrize("device", wanted_devices())
def test_a_buffer_dropped_on_another_thread_under_the_device_lock_does_not_wait(device):
    dev = zynbook.device(device)
    base = dev.memory_stats()["live_bytes"]
    keep = dev.upload(np.arange(10, dtype=np.float32))
    box = [dev.upload(np.ones(1000, np.float32))]
    done = threading.Event()

    def drop():
        box.pop()           # the last reference: the finaliser runs on this thread
        done.set()

    with dev._lock:         # as a launch holds it while it waits for a native call's thread
        t = threading.Thread(target=drop)
        t.start()
        assert done.wait(10), "the finaliser waited for the device's lock"
    t.join()
    assert dev.memory_stats()["live_bytes"] == base + 40
    # the device still runs programs and counts what they make
    out = dev.elementwise([keep], 10, lambda v: v[0] * 2.0)
    np.testing.assert_array_equal(np.asarray(out), np.arange(10, dtype=np.float32) * 2)
    assert dev.memory_stats()["live_bytes"] == base + 80
    del out
    assert dev.memory_stats()["live_bytes"] == base + 40
