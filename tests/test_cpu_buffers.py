"""`cpu:native` launches: output buffers (backends/cpu/buffers.py): memory of an output
nothing references any more is handed out again; memory a result, a view of it or anything
made from it still uses never is; outputs equal numpy and the reference executor whatever
the reused memory held before. Busy cores (native.py, _CONTENDED): a plan whose launches on
every core are slower than alone runs alone for a while, with the same results."""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import zynbook
from zynbook.backends import registry
from zynbook.backends.cpu import buffers, native
from zynbook.backends.cpu.reference import run_kernel

from compute_testing import float32_normals
from tolerances import assert_close

RNG = np.random.default_rng(11)
randn = float32_normals(RNG)
# one rounding per element: numpy's result exactly
PRODUCT = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * y[i]
}
z
"""
# stores only some elements: the others are 0, as on every device
POSITIVE = """
let z = compute(x) {
    @kernel elementwise
    for i in 0..len:
        if x[i] > 0.0:
            out[i] = x[i]
}
z
"""
SHAPE = (300, 200)          # 240 000 bytes of f32: above MIN_BYTES


def address(a) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def pool():
    p = buffers.BufferPool(limit=64 << 20)
    assert p.enabled
    return p


def test_an_output_no_one_holds_is_handed_out_again(pool):
    a = pool.output(SHAPE, np.float32, False)
    first = address(a)
    del a
    b = pool.output(SHAPE, np.float32, False)
    assert address(b) == first and pool.reused == 1 and pool.fresh == 1
    # the same bytes in another shape and dtype
    del b
    c = pool.output((100, 300, 2), np.float32, False)
    d = pool.output((SHAPE[0] * SHAPE[1] // 2,), np.float64, False)
    assert address(c) == first and address(d) != first and pool.fresh == 2


@pytest.mark.parametrize("keep", [
    lambda a: a,
    lambda a: a[1:],
    lambda a: a.T[::2],
    lambda a: a.reshape(-1),
    lambda a: a.view(np.int32),
    lambda a: np.asarray(a),
    lambda a: memoryview(a),
    lambda a: np.frombuffer(memoryview(a), np.uint8),
    lambda a: a.base,
    lambda a: weakref.ref(a.base),
    lambda a: [float(a[5, 5])],         # not a view: nothing held
], ids=["array", "slice", "strided", "reshape", "dtype view", "asarray", "memoryview",
        "frombuffer", "owner", "weakref to owner", "element"])
def test_memory_still_in_use_is_never_handed_out(pool, keep):
    a = pool.output(SHAPE, np.float32, False)
    a[...] = 7.0
    held = keep(a)
    del a
    gc.collect()
    b = pool.output(SHAPE, np.float32, False)
    b[...] = -1.0
    if isinstance(held, list):          # a copy of an element: the memory is free again
        assert pool.reused == 1 and held == [7.0]
        return
    assert pool.reused == 0 and pool.fresh == 2
    arr = np.asarray(held() if isinstance(held, weakref.ref) else held)
    assert not np.shares_memory(arr, b)
    if arr.dtype == np.float32:
        assert np.all(arr == 7.0)


def test_a_reused_zeroed_output_is_cleared(pool):
    a = pool.output(SHAPE, np.float32, False)
    a[...] = np.nan
    del a
    b = pool.output(SHAPE, np.float32, True)
    assert pool.reused == 1 and not b.any()


def test_outputs_are_aligned_to_cache_lines(pool):
    for n in (65_537, 100_003, 1 << 20):
        assert address(pool.output((n,), np.uint8, False)) % buffers.ALIGN == 0


def test_bound_in_bytes_and_entries():
    pool = buffers.BufferPool(limit=1 << 20)
    held = [pool.output((100_000,), np.uint8, False) for _ in range(30)]
    assert pool.nbytes <= pool.limit and len(pool) <= buffers.MAX_ENTRIES
    assert len({address(h) for h in held}) == 30        # every one of them its own memory
    big = pool.output((2 << 20,), np.uint8, False)      # above the limit: not kept
    small = pool.output((100,), np.uint8, False)        # below MIN_BYTES: not kept
    assert big.base is None and small.base is None and pool.fresh == 30
    del held
    pool.clear()
    assert len(pool) == 0 and pool.nbytes == 0


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CPU_POOL_BYTES", "0")
    off = buffers.BufferPool()
    a = off.output(SHAPE, np.float32, False)
    assert a.base is None and len(off) == 0
    monkeypatch.setenv("ZYNBOOK_CPU_POOL_BYTES", str(3 << 20))
    assert buffers.BufferPool().limit == 3 << 20
    monkeypatch.delenv("ZYNBOOK_CPU_POOL_BYTES")
    assert 0 < buffers.BufferPool().limit <= buffers.DEFAULT_LIMIT


def test_threads_never_share_an_output(pool):
    seen, errors = [], []

    def work(k):
        for i in range(200):
            a = pool.output(SHAPE, np.float32, False)
            a[...] = k
            seen.append(address(a)) if i == 0 else None
            if not np.all(a == k):
                errors.append(k)
            del a
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(pool) <= 4


# ------------------------------------------------------------------ through a session

needs_compiler = pytest.mark.skipif(native.find_compiler() is None, reason="no C/C++ compiler")


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    return zynbook.Session(device="cpu:native")


@needs_compiler
def test_a_result_held_is_not_overwritten_by_the_next_launch(session):
    n = 100_003
    x, y = randn(n), randn(n)
    first = np.asarray(session.run(PRODUCT, x=x, y=y))
    want = x * y
    outs = [np.asarray(session.run(PRODUCT, x=x * 2, y=y)) for _ in range(4)]
    np.testing.assert_array_equal(first, want)
    for out in outs:
        np.testing.assert_array_equal(out, (x * 2) * y)
        assert not np.shares_memory(out, first)
    assert len({address(o) for o in outs}) == len(outs)


@needs_compiler
def test_results_no_one_holds_are_reused_and_equal_numpy(session):
    n = 100_003
    x, y = randn(n), randn(n)
    device = registry.get_device("cpu:native")
    before = device.buffers.reused
    for k in range(5):
        got = np.asarray(session.run(PRODUCT, x=x + k, y=y))
        np.testing.assert_array_equal(got, (x + np.float32(k)) * y)
        del got
    assert device.buffers.reused - before >= 2


class PoisonedPool(buffers.BufferPool):
    """New owners hold 0xFF bytes (NaN as floats, -1 as integers) unless asked zeroed."""

    @staticmethod
    def _allocate(nbytes, zeroed):
        return np.zeros(nbytes, np.uint8) if zeroed else np.full(nbytes, 0xFF, np.uint8)


@pytest.fixture
def poisoned(monkeypatch):
    monkeypatch.setattr(buffers, "MIN_BYTES", 0)
    return PoisonedPool(limit=64 << 20)


@needs_compiler
def test_unstored_elements_are_zero_in_reused_memory(session):
    x = randn(100_003)
    for _ in range(3):
        got = np.asarray(session.run(POSITIVE, x=x))
        np.testing.assert_array_equal(got, np.where(x > 0, x, np.float32(0)))
        got[...] = np.nan               # what the next launch finds in the memory
        del got
    assert registry.get_device("cpu:native").buffers.reused >= 2


@needs_compiler
def test_every_kernel_type_stores_every_element_it_leaves_unzeroed(poisoned, monkeypatch,
                                                                  tmp_path):
    """Each kernel of the native tests, its output in memory of 0xFF bytes where the pool
    does not zero it, equals the reference executor: the kernels that may leave an element
    unstored are exactly those whose outputs are zeroed."""
    import test_cpu_native as cases
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    from compute_testing import lower_block
    device = native.NativeCpuDevice(native.find_compiler())
    device.buffers = poisoned
    every = dict(cases.CASES, positive=(POSITIVE, {"x": randn(1003)}, {}, {}, "f32",
                                        "elementwise"))
    for name, (src, arrays, scalars, sizes, dtype, kind) in sorted(every.items()):
        k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
        for _ in range(2):              # a fresh owner, then one reused
            got, _ = device.launch(k, ins, sz, sc)
            want = np.asarray(run_kernel(k, ins, sz, sc))
            assert got.shape == want.shape and got.dtype == want.dtype, name
            assert_close(got, want, dtype, kind)
            if got.ndim:
                got[...] = np.array(-1).astype(got.dtype)      # garbage for the next one
            del got
    assert poisoned.reused > 0


# ------------------------------------------------------------------ busy cores

@needs_compiler
def test_a_launch_alone_equals_one_on_every_core(tmp_path, monkeypatch):
    """Reductions included: the blocks and their order are those of every core."""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path))
    import test_cpu_native as cases
    from compute_testing import lower_block
    device = native.NativeCpuDevice(native.find_compiler())
    src, arrays, scalars, sizes = cases.SOFTMAX_ROWS, {"x": randn(300, 1001)}, {}, {}
    k, ins, sz, sc = lower_block(src, arrays, scalars, sizes)
    plan = device.prepare(k, sz)
    if not plan.adapts:
        pytest.skip("the compiler builds no OpenMP")
    on_every, launch = plan.launch(ins, sc)
    assert launch.geometry["threads"] == "every core"
    plan.alone = 1
    alone, launch = plan.launch(ins, sc)
    assert launch.geometry["threads"] == "one (the cores were busy)"
    np.testing.assert_array_equal(alone, on_every)


def bare_plan(probes=True):
    """A plan's contention state alone, as a new plan has it."""
    plan = native.NativePlan.__new__(native.NativePlan)
    plan.best_s, plan.alone_s, plan.alone, plan.backoff, plan.on_every_core = \
        float("inf"), None, 0, 1, 0
    plan.probes = probes
    return plan


def test_slow_launches_on_every_core_run_alone_then_try_again():
    plan = bare_plan()

    def launch(every_core_s, alone_s):
        alone = plan.alone > 0
        plan._contention(alone, alone_s if alone else every_core_s)
        return alone

    # the first two on every core; the third learns the time alone
    assert [launch(1.0e-3, 2.0e-3) for _ in range(3)] == [False, False, True]
    # every core twice as fast as alone: it stays there
    assert not any(launch(1.0e-3, 2.0e-3) for _ in range(20))
    # the cores busy: every core takes 10 ms, alone 2 ms: alone 1, 2, 4, 8, 16, 16 times
    # between tries of every core
    runs = [launch(10e-3, 2.0e-3) for _ in range(80)]
    gaps, n = [], 0
    for alone in runs:
        if alone:
            n += 1
        elif n:
            gaps.append(n)
            n = 0
    assert gaps[:6] == [1, 2, 4, 8, 16, 16]
    # the cores free again: the next try of every core is faster, and it stays there
    while plan.alone:
        launch(1.0e-3, 2.0e-3)
    assert not any(launch(1.0e-3, 2.0e-3) for _ in range(20))


def test_a_slow_first_launch_on_busy_cores_is_found_without_an_earlier_fast_one():
    """Busy from the start: the time alone, learned at the third launch, shows it."""
    plan = bare_plan()
    seen = []
    for _ in range(10):
        alone = plan.alone > 0
        plan._contention(alone, 30e-6 if alone else 4e-3)
        seen.append(alone)
    assert seen[2] and sum(seen) >= 6


def test_a_plan_the_tuner_times_runs_alone_only_after_a_slow_launch():
    plan = bare_plan(probes=False)
    seen = []
    for t in [1e-3] * 5 + [5e-3] + [1e-3] * 3:
        alone = plan.alone > 0
        plan._contention(alone, 2e-3 if alone else t)
        seen.append(alone)
    assert seen == [False] * 6 + [True] + [False] * 2
