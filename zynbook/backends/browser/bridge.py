"""The kernel's side of the `zynbook.browser` comm: the JupyterLab pages connected to this
kernel, each one a `Page` whose WebGPU adapter is a `browser:N` device.

The page opens the comm (target COMM_TARGET) once the kernel has the target, with its
adapter's description, or the reason it has no WebGPU. The kernel sends a launch as one
comm message (a JSON plan and binary buffers) and waits for the page's reply.

Waiting while a cell runs: the cell runs in the kernel's main thread, which does not handle
shell messages until the cell ends. The page's comm messages therefore travel through a
kernel *subshell* (JEP 91; ipykernel >= 7 with JupyterLab >= 4.4 sends comm messages over a
subshell per comm target), which ipykernel handles in its own thread: the handler below
stores the reply and sets an event, and the main thread waits on that event in short steps,
so a KeyboardInterrupt (interrupt) or a job's cancellation stops the wait at once. A kernel
without subshells never gets the reply while the cell runs: the wait ends with an error
that says so, instead of hanging.

A page that goes away closes its comms (on `pagehide`); one that vanishes without closing
them (a killed tab) stops answering the pings sent during a wait. Either way its device
is removed and a launch waiting on it fails with a device error. The page answers each
ping with the requests it is still running, so a request whose reply was lost on the way
fails instead of waiting for ever; replies larger than the server's websocket message limit
(10 MiB by default) come in parts and are put back together here.
"""
from __future__ import annotations

import itertools
import threading
import time

from ...errors import ZynMLDeviceError

COMM_TARGET = "zynbook.browser"
# a page that has not answered anything for this long during a wait is gone
SILENCE_S = 10.0
PING_EVERY_S = 2.0

_lock = threading.Lock()
_pages: dict = {}                   # index -> Page, in connection order
_registered = False
_ids = itertools.count(1)


class PageGone(Exception):
    pass


class DeviceLost(Exception):
    """The page's GPU device was lost (a driver reset, the GPU process gone)."""


class LostReply(Exception):
    """The page answered a ping without the request among its running launches, and its
    reply never came: the request or the reply was lost on the way."""


class Page:
    """One connected page (one comm)."""

    def __init__(self, comm, index: int, hello: dict):
        self.comm = comm
        self.index = index
        self.id = f"browser:{index}"
        self.adapter: dict | None = hello.get("adapter")
        self.error: dict | None = hello.get("error")
        self.closed = False
        self.closed_reason = ""
        self.last_heard = time.monotonic()
        self._waiting: dict = {}        # request id -> [event, reply or None, ping seq]
        self._parts: dict = {}          # request id -> {part: bytes} of a reply in parts
        self._ping = 0
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- messages in
    def on_msg(self, msg):
        content = msg.get("content", {})
        data = content.get("data") or {}
        buffers = msg.get("buffers") or []
        self.last_heard = time.monotonic()
        kind = data.get("type")
        if kind == "lost":
            self.error = {"kind": "lost", "message": data.get("message", "the GPU device was lost")}
            self.adapter = None
            self._fail_all(self.error["message"], DeviceLost)
            return
        if kind == "adapter":
            self.adapter, self.error = data.get("adapter"), data.get("error")
            return
        if kind == "pong":
            self._pong(int(data.get("seq") or 0), set(data.get("busy") or ()))
            return
        rid = data.get("id")
        buffers = [b if isinstance(b, bytes) else bytes(b) for b in buffers]
        parts = int(data.get("parts") or 1)
        if parts > 1:           # a large reply, in parts: put it back together
            with self._lock:
                got = self._parts.setdefault(rid, {})
                got[int(data["part"])] = buffers[0] if buffers else b""
                if len(got) < parts:
                    return
                del self._parts[rid]
            whole = b"".join(got[k] for k in range(parts))
            buffers, at = [], 0
            for size in data.get("sizes") or []:
                buffers.append(whole[at:at + size])
                at += size
        with self._lock:
            slot = self._waiting.get(rid)
        if slot is not None:
            slot[1] = (data, buffers)
            slot[0].set()

    def _pong(self, seq: int, busy: set):
        """Requests sent before ping `seq` that the page neither runs nor has answered were
        lost (a message past the server's size limit, a dropped connection)."""
        with self._lock:
            lost = [(rid, slot) for rid, slot in self._waiting.items()
                    if slot[1] is None and slot[2] < seq and rid not in busy
                    and rid not in self._parts]
        for rid, slot in lost:
            slot[1] = LostReply("the page has no such request running and its reply did "
                                "not arrive (lost on the way: a message over the server's "
                                "size limit, or a dropped connection)")
            slot[0].set()

    def on_close(self, msg=None):
        self.mark_closed("the page closed its connection")

    def mark_closed(self, reason: str):
        with _lock:
            if _pages.get(self.index) is self:
                del _pages[self.index]
        self.closed = True
        self.closed_reason = reason
        self._fail_all(f"the page went away ({reason})")

    def _fail_all(self, reason: str, kind=PageGone):
        with self._lock:
            slots = list(self._waiting.values())
            self._parts.clear()
        for slot in slots:
            if slot[1] is None:
                slot[1] = kind(reason)
                slot[0].set()

    # --------------------------------------------------------------- messages out
    def send(self, data: dict, buffers=None):
        if self.closed:
            raise PageGone(self.closed_reason)
        self.comm.send(data, buffers=list(buffers or []))

    def request(self, data: dict, buffers=None, what: str = "the request"):
        """Send `data` with a fresh id and wait for the page's reply: (reply, buffers).
        Raises PageGone, KeyboardInterrupt (the wait is interruptible) or
        ZynMLDeviceError (no reply can come)."""
        rid = next(_ids)
        slot = [threading.Event(), None, self._ping]
        with self._lock:
            self._waiting[rid] = slot
        try:
            self.send({**data, "id": rid}, buffers)
            sent = time.monotonic()
            last_ping = sent
            while not slot[0].wait(0.02):
                now = time.monotonic()
                if self.closed:
                    raise PageGone(self.closed_reason)
                if now - last_ping >= PING_EVERY_S:
                    last_ping = now
                    with self._lock:
                        self._ping += 1
                        seq = self._ping
                    self.send({"type": "ping", "id": 0, "seq": seq})
                if now - max(self.last_heard, sent) > SILENCE_S:
                    if not subshells_supported():
                        raise ZynMLDeviceError(
                            f"{self.id}: the page's reply cannot reach a running cell: this "
                            f"kernel has no subshells (ipykernel >= 7 has them)")
                    self.mark_closed(f"no answer for {SILENCE_S:.0f} s")
                    raise PageGone(self.closed_reason)
        except KeyboardInterrupt:
            self._cancel(rid)
            raise
        except BaseException:
            self._cancel(rid)
            raise
        finally:
            with self._lock:
                self._waiting.pop(rid, None)
                self._parts.pop(rid, None)
        if isinstance(slot[1], BaseException):
            raise slot[1]
        return slot[1]

    def _cancel(self, rid):
        try:
            if not self.closed:
                self.send({"type": "cancel", "id": rid})
        except Exception:
            pass


# ------------------------------------------------------------------- the comm target

def subshells_supported() -> bool:
    try:
        from ipykernel.kernelbase import Kernel
        if Kernel.initialized():
            return getattr(Kernel.instance(), "shell_channel_thread", None) is not None
    except Exception:
        pass
    return False


def _open(comm, open_msg):
    """A page opened the comm: it becomes `browser:N` (the smallest N free)."""
    data = (open_msg.get("content") or {}).get("data") or {}
    # every message of this comm goes to the subshell the page sends it to, never to the
    # main shell: the main thread is busy running the cell that waits for it
    comm._reply_subshell_for = lambda _data, default: default
    with _lock:
        index = 0
        while index in _pages:
            index += 1
        page = Page(comm, index, data)
        _pages[index] = page
    comm.on_msg(page.on_msg)
    comm.on_close(page.on_close)
    try:
        comm.send({"type": "welcome", "device": page.id})
    except Exception:
        pass


def register() -> bool:
    """Register the comm target in the running kernel (idempotent); False outside one."""
    global _registered
    if _registered:
        return True
    import sys
    if "ipykernel.ipkernel" not in sys.modules:     # not in a Jupyter kernel
        return False
    try:
        from comm import get_comm_manager       # ipykernel's, once ipykernel.ipkernel is in
        get_comm_manager().register_target(COMM_TARGET, _open)
    except Exception:
        return False
    _registered = True
    return True


def pages() -> list:
    with _lock:
        return [p for _, p in sorted(_pages.items()) if not p.closed]
