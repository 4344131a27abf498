"""Progress of a ZynML cell that takes more than about a second (a long compile, a slow
kernel): which kernel, on which device, how many launches are done, the time so far.

`cell_progress(session)` wraps a cell's run. A watcher thread wakes after `AFTER` seconds
and then every `EVERY` seconds while the cell runs: in a Jupyter kernel it sends the state
on a comm (target `zynbook.progress`, data {"text", "kernel", "device", "launches",
"elapsed", "done"}), which the JupyterLab extension shows as a progress item in the
notebook's toolbar (no cell output, so saved notebooks do not change); elsewhere it writes
one text line to stderr, rewritten in place. A last message with `done: true` follows a cell
that ran longer than `AFTER`.
"""
from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time

COMM_TARGET = "zynbook.progress"
AFTER = 1.0            # seconds before anything shows
EVERY = 0.5            # seconds between updates


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
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


@contextlib.contextmanager
def cell_progress(session):
    """Report the progress of the code run inside (see the module docstring)."""
    start = time.perf_counter()
    stop = threading.Event()
    sender = _Sender()
    lock = threading.Lock()
    shown = {"any": False}

    def watch():
        if stop.wait(AFTER):
            return
        while True:
            with lock:
                if stop.is_set():
                    return
                sender.send(describe(session, time.perf_counter() - start))
                shown["any"] = True
            if stop.wait(EVERY):
                return

    # the thread sends in the context of the cell (the kernel routes its messages by it)
    ctx = contextvars.copy_context()
    thread = threading.Thread(target=ctx.run, args=(watch,), daemon=True,
                              name="zynbook-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        elapsed = time.perf_counter() - start
        with lock:
            if shown["any"] or elapsed >= AFTER:
                sender.send(describe(session, elapsed, done=True))
