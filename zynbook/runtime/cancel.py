"""Interruptible and cancellable work.

- `run_interruptibly(fn, *args, keep=...)`: call a foreign function (a `cpu:native` kernel)
  in a worker thread and wait for it in a way a KeyboardInterrupt (or a job's cancellation)
  can break: the caller gets the exception at once; the worker is abandoned (its result
  dropped, the arrays it writes kept alive until it returns).
- `JobQueue`: one daemon worker thread per device running submitted jobs in order. A job
  can be cancelled: one still waiting never starts; a running one gets `JobCancelled`
  raised in its thread (delivered at its next Python step: at once for a native kernel
  waiting in `run_interruptibly`, between two steps of the reference executor, after the
  current GPU call otherwise). Its threads are daemons: leaving Python never waits on a job.
"""
from __future__ import annotations

import concurrent.futures as cf
import ctypes
import queue
import threading


class JobCancelled(BaseException):
    """Raised inside a job's thread when the job is cancelled (a BaseException, like
    KeyboardInterrupt, so no `except Exception` in the job swallows it)."""


_local = threading.local()


def current_job():
    """The job running in this thread (None outside a JobQueue worker)."""
    return getattr(_local, "job", None)


class _NativeWorker:
    """A daemon thread that runs foreign calls handed to it, one at a time; idle workers
    are reused (starting a thread per call would cost more than a small kernel)."""

    _idle: list = []
    _lock = threading.Lock()

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="zynml-native-call", daemon=True).start()

    @classmethod
    def take(cls) -> "_NativeWorker":
        with cls._lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    def _loop(self):
        while True:
            fn, args, keep, box, done = self.jobs.get()
            try:
                box["value"] = fn(*args)
            except BaseException as err:   # noqa: BLE001 - handed to the waiting caller
                box["error"] = err
            del fn, args, keep             # an abandoned call's arrays live until here
            with self._lock:
                self._idle.append(self)    # free again (even if its caller gave up on it)
            done.set()


def run_interruptibly(fn, *args, keep=()):
    """`fn(*args)` on a worker thread; waits in short steps so a KeyboardInterrupt or a
    JobCancelled reaches the caller at once. `keep`: objects (arrays the call reads and
    writes) held until the call really returns, even when the caller gave up on it."""
    done = threading.Event()
    box: dict = {}
    _NativeWorker.take().jobs.put((fn, args, keep, box, done))
    while not done.wait(0.05):
        pass
    if "error" in box:
        raise box["error"]
    return box.get("value")


def call_native(fn, *args, keep=()):
    """A native kernel call that an interrupt (in the main thread) or a cancellation (in a
    device queue's job) can stop waiting for; a direct call elsewhere."""
    if threading.current_thread() is threading.main_thread() or current_job() is not None:
        return run_interruptibly(fn, *args, keep=keep)
    return fn(*args)


class _Job:
    __slots__ = ("fn", "future", "thread", "lock")

    def __init__(self, fn, future):
        self.fn, self.future, self.thread = fn, future, None
        self.lock = threading.Lock()


class CancellableFuture(cf.Future):
    """A `concurrent.futures.Future` whose `cancel()` also stops a running job."""

    def __init__(self):
        super().__init__()
        self._job = None

    def cancel(self) -> bool:
        if super().cancel():
            return True                      # still waiting: it will never start
        job = self._job
        if job is None:
            return False
        with job.lock:
            thread = job.thread
            if thread is None or self.done():
                return False
            _async_raise(thread, JobCancelled)
        return True


class JobQueue:
    """One daemon worker running jobs in submission order (see the module docstring)."""

    def __init__(self, name: str):
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = None
        self._lock = threading.Lock()

    def submit(self, fn) -> CancellableFuture:
        future = CancellableFuture()
        job = _Job(fn, future)
        future._job = job
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=self.name,
                                                daemon=True)
                self._thread.start()
            self._queue.put(job)
        return future

    def _work(self):
        while True:
            job = self._queue.get()
            try:
                self._run_one(job)
            except JobCancelled as err:
                # the cancellation arrived as its job was ending: the job ends cancelled
                if not job.future.done():
                    try:
                        job.future.set_exception(err)
                    except cf.InvalidStateError:
                        pass

    @staticmethod
    def _run_one(job: _Job):
        if not job.future.set_running_or_notify_cancel():
            return                           # cancelled before it started
        me = threading.current_thread()
        with job.lock:
            job.thread = me
        _local.job = job
        try:
            value, error = job.fn(), None
        except BaseException as err:         # noqa: BLE001 - the awaiting caller gets it
            value, error = None, err
        finally:
            _local.job = None
            with job.lock:
                job.thread = None            # from here on no cancellation is sent
            _clear_pending(me)               # and one sent but not yet delivered is dropped
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(value)


def _async_raise(thread: threading.Thread, exc_type) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                               ctypes.py_object(exc_type))


def _clear_pending(thread: threading.Thread) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), None)
