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


def describe(session, elapsed: float, done: bool = False) -> dict:
    """The progress message for `session` (its current activity and finished launches)."""
    kernel, device = getattr(session, "activity", None) or ("", "")
    launches = len(getattr(session, "launches", None) or [])
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
    is due: a thread started per cell would cost more than a quick cell itself. One lock
    guards the cells and what each has sent (a send, rare, is made holding it)."""

    POLL = 0.1

    def __init__(self):
        self.cells: set = set()
        self.lock = threading.Lock()
        self.pid = None             # the process whose thread runs (none survives a fork)

    def add(self, cell: cell_progress):
        with self.lock:
            self.cells.add(cell)
            if self.pid != os.getpid():
                self.pid = os.getpid()
                threading.Thread(target=self._loop, daemon=True, name="zynbook-progress").start()

    def finish(self, cell: cell_progress):
        with self.lock:
            self.cells.discard(cell)
            if cell.sender is not None or time.perf_counter() - cell.start >= AFTER:
                cell._send(done=True)

    def _loop(self):
        while True:
            time.sleep(self.POLL)
            now = time.perf_counter()
            with self.lock:
                for cell in [c for c in self.cells if c.due <= now]:
                    cell.ctx.run(cell._send)
                    cell.due = now + EVERY


_watcher = _Watcher()


class cell_progress:
    """Report the progress of the code run inside (see the module docstring): the cell
    being watched, when its next message is due and what it has sent. One plain object a
    cell (no generator, no lock of its own): it wraps every cell, a warm one's few
    microseconds included."""

    __slots__ = ("session", "start", "due", "ctx", "sender")

    def __init__(self, session):
        self.session = session
        self.sender = None              # made when there is something to send

    def __enter__(self) -> None:
        self.start = time.perf_counter()
        self.due = self.start + AFTER
        # the watcher sends in the context of the cell (the kernel routes its messages by it)
        self.ctx = contextvars.copy_context()
        _watcher.add(self)

    def __exit__(self, *exc) -> None:
        _watcher.finish(self)

    def _send(self, done: bool = False):
        if self.sender is None:
            self.sender = _Sender()
        self.sender.send(describe(self.session, time.perf_counter() - self.start, done))
