"""Progress of a ZynML cell that takes more than about a second (a long compile, a slow
kernel): which kernel, on which device, how many launches are done, the time so far.

`cell_progress(session)` wraps a cell's run. A watcher thread (one for all cells) wakes
after `AFTER` seconds and then every `EVERY` seconds while the cell runs (give or take its
polling interval): in a Jupyter kernel it sends the state on a comm (target `zynbook.progress`, data {"text", "kernel", "device", "launches",
"elapsed", "done"}), which the JupyterLab extension shows as a progress item in the
notebook's toolbar (no cell output, so saved notebooks do not change); elsewhere it writes
one text line to stderr, rewritten in place. A last message with `done: true` follows a cell
that ran longer than `AFTER`.
"""
from __future__ import annotations

import contextvars
import os
import sys
import threading
import time

COMM_TARGET = "zynbook.progress"
AFTER = 1.0            # seconds before anything shows
EVERY = 0.5            # seconds between updates


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:     # a kernel has imported it: a plain process is spared its import
        return False
    try:
        ip = ipython.get_ipython()
        return ip is not None and getattr(ip, "kernel", None) is not None
    except Exception:
        return False


def describe(session, elapsed: float, done: bool = False, before=(None, None)) -> dict:
    """The progress message for `session` (its current activity and finished launches);
    `before`: its (activity, launches) when the cell began, which are an earlier cell's
    (a cell's run sets new ones only once its program is parsed and its inputs bound,
    which can take a second or more: the last kernel was named meanwhile)."""
    activity, launches = (getattr(session, "activity", None), getattr(session, "launches", None))
    kernel, device = activity if activity is not None and activity is not before[0] else ("", "")
    launches = 0 if launches is None or launches is before[1] else len(launches)
    if done:
        text = f"cell finished in {elapsed:.1f} s · {launches} launch(es)"
    elif kernel:
        text = (f"kernel {kernel} on {device} (compiling or running) · {launches} launch(es) "
                f"done · {elapsed:.1f} s")
    else:
        text = f"running · {launches} launch(es) done · {elapsed:.1f} s"
    return {"text": text, "kernel": kernel, "device": device, "launches": launches,
            "elapsed": round(elapsed, 3), "done": done}


class _Sender:
    def __init__(self):
        self.kernel = _in_kernel()
        self.comm = None
        self.text_shown = False

    def send(self, data: dict) -> None:
        if self.kernel:
            try:
                if self.comm is None:
                    from comm import create_comm

                    self.comm = create_comm(target_name=COMM_TARGET, data=data)
                else:
                    self.comm.send(data)
                if data.get("done"):
                    self.comm.close()
                    self.comm = None
            except Exception:  # no front end listening: nothing to show
                pass
            return
        end = "\n" if data.get("done") else ""
        sys.stderr.write(f"\r[zynbook] {data['text'][:110]:<110}{end}")
        sys.stderr.flush()
        self.text_shown = True


class _Watcher:
    """One daemon thread for every watched cell, waking every `POLL` seconds to send what
    is due: a thread started per cell would cost more than a quick cell itself.

    A cell joins and leaves `cells` without a lock (adding to and discarding from a set
    are atomic): a quick cell, nearly every one, never takes it. The lock orders the sends
    (rare) of the thread and of a finishing cell: the thread sends only for a cell still
    watched, checked holding it, and a cell that left after the thread found it due has run
    past `AFTER` itself, so it takes the lock to send its last message after the thread's."""

    POLL = 0.1

    def __init__(self):
        self.cells: set = set()
        self.lock = threading.Lock()
        self.started = False        # the thread runs (reset in a forked child: none survives)

    def start(self):
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self._loop, daemon=True, name="zynbook-progress").start()

    def _forked(self):
        self.lock = threading.Lock()
        self.started = False

    def _loop(self):
        cells = self.cells
        while True:
            time.sleep(self.POLL)
            now = time.perf_counter()
            try:
                due = [c for c in tuple(cells) if c.due <= now]
            except RuntimeError:        # changed while copied (a finaliser ran): next time
                continue
            for cell in due:
                with self.lock:
                    if cell in cells:
                        cell.ctx.run(cell._send)
                        cell.due = now + EVERY


_watcher = _Watcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watcher._forked)
_watch, _unwatch = _watcher.cells.add, _watcher.cells.discard
_clock, _context = time.perf_counter, contextvars.copy_context


class cell_progress:
    """Report the progress of the code run inside (see the module docstring): the cell
    being watched, when its next message is due and what it has sent. One plain object a
    cell, no lock taken: it wraps every cell, a warm one's microsecond included; the
    watcher acts only on a cell that runs past `AFTER`.

    `with cell_progress(session): ...`, or (one call less) `cell = cell_progress(session)`
    right before the run and `cell.close()` after it: the watch starts when it is made."""

    __slots__ = ("session", "before", "start", "due", "ctx", "sender")

    def __init__(self, session):
        self.session = session
        self.before = (getattr(session, "activity", None), getattr(session, "launches", None))
        self.sender = None              # made when there is something to send
        self.start = start = _clock()
        self.due = start + AFTER
        # the watcher sends in the context of the cell (the kernel routes its messages by it)
        self.ctx = _context()
        if not _watcher.started:
            _watcher.start()
        _watch(self)

    def __enter__(self) -> None:
        pass

    def close(self, kind=None, error=None, trace=None) -> None:
        """The cell has finished: a last message if it ran past `AFTER` (or sent any)."""
        _unwatch(self)
        if self.sender is not None or _clock() - self.start >= AFTER:
            with _watcher.lock:
                self._send(done=True)

    __exit__ = close

    def _send(self, done: bool = False):
        if self.sender is None:
            self.sender = _Sender()
        self.sender.send(describe(self.session, time.perf_counter() - self.start, done,
                                  self.before))
