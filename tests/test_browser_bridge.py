"""The kernel side of `browser:N` without a browser: a stand-in page on the
`zynbook.browser` comm answers launches (tests/browser/test_browser_device.py runs the real
page). Listing, `auto`, the launch plan and its result, the page's errors, a page that goes
away or stops answering during a launch, an interrupt during the wait, and `zynbook export`."""
from __future__ import annotations

import _thread
import base64
import json
import re
import signal
import threading
import time

import numpy as np
import pytest

import zynbook
from zynbook.backends import registry
from zynbook.backends.browser import bridge
from zynbook.backends.browser import plan as plans
from zynbook.errors import ZynMLDeviceError

ADAPTER = {"name": "stand-in adapter", "vendor": "test", "fallback": True,
           "features": ["timestamp-query"],
           "limits": {"maxStorageBufferBindingSize": 1 << 27, "maxBufferSize": 1 << 28,
                      "maxComputeWorkgroupsPerDimension": 65535}}

DOUBLE = """let y = compute(x) @device("browser:0") {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""


class FakeComm:
    """A comm whose page is a Python function: `answer(data, buffers)` -> a reply (data,
    buffers), or None for no reply."""

    def __init__(self, answer):
        self.answer = answer
        self.sent: list = []
        self._msg = self._close = None

    def on_msg(self, cb):
        self._msg = cb

    def on_close(self, cb):
        self._close = cb

    def send(self, data, buffers=None):
        self.sent.append(data)
        reply = self.answer(data, list(buffers or []))
        if reply is not None:
            rdata, rbuffers = reply
            # the page answers from another thread, as the kernel's subshell delivers it
            threading.Thread(target=self._msg, args=({"content": {"data": rdata},
                                                      "buffers": rbuffers},)).start()

    def close_from_page(self):
        self._close({"content": {"data": {}}})


@pytest.fixture
def page_with():
    """Connects a stand-in page; returns (comm, page); disconnects it afterwards."""
    made = []

    def connect(answer, hello=None):
        comm = FakeComm(answer)
        bridge._open(comm, {"content": {"data": hello or {"type": "hello",
                                                          "adapter": ADAPTER}}})
        page = bridge.pages()[-1]
        made.append(page)
        return comm, page

    yield connect
    for page in made:
        if not page.closed:
            page.mark_closed("test ended")


def doubling_page(data, buffers):
    """Runs the elementwise `x * 2` plan as a page would (checks what the plan holds)."""
    if data.get("type") != "launch":
        return None
    plan = data["plan"]
    assert plan["source"].startswith("//") or "fn " in plan["source"]
    x = np.frombuffer(buffers[plan["buffers"]["x"]["data"]], np.float32)
    out = (x * 2).astype(np.float32).tobytes()
    outputs = [out] + [bytes(8) for _ in plan["read"][1:]]
    return {"type": "result", "id": data["id"],
            "times": {"kernel": 1e-5, "source": "gpu-timestamps", "page": 1e-3}}, outputs


def test_listed_while_connected_never_auto(page_with):
    before = registry.best_device_id()
    comm, page = page_with(doubling_page)
    ids = [d["id"] for d in zynbook.compute_devices()]
    assert "browser:0" in ids
    info = next(d for d in zynbook.compute_devices() if d["id"] == "browser:0")
    assert info["name"] == "stand-in adapter" and info["backend"] == "browser"
    assert info["limits"]["maxStorageBufferBindingSize"] == 1 << 27
    assert registry.best_device_id() == before != "browser:0"
    page.mark_closed("gone")
    assert "browser:0" not in [d["id"] for d in zynbook.compute_devices()]
    with pytest.raises(ZynMLDeviceError, match="no device `browser:0`"):
        registry.get_device("browser:0")


def test_a_launch_through_the_comm(page_with):
    comm, _ = page_with(doubling_page)
    x = np.arange(1001, dtype=np.float32)
    session = zynbook.Session(device="cpu")
    y = session.run(DOUBLE, x=x)
    np.testing.assert_array_equal(np.asarray(y), x * 2)
    launch = session.launches[-1]
    assert launch.device == "browser:0" and launch.times.source == "gpu-timestamps"
    sent = [m for m in comm.sent if m.get("type") == "launch"][0]
    plan = sent["plan"]
    assert plan["hash"] and plan["passes"] and plan["read"][0] in plan["buffers"]
    assert plan["passes"][0]["workgroups"][0] >= 1
    assert {b["access"] for b in plan["bindings"]} >= {"uniform", "read"}


def test_the_page_errors_are_device_errors_with_the_line(page_with):
    def refusing(data, buffers):
        if data.get("type") == "launch":
            return {"type": "error", "id": data["id"], "kind": "compile",
                    "message": "line 3:1: expected ';'"}, []
        return None

    page_with(refusing)
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert info.value.line == 1
    assert "WGSL compiler refused" in str(info.value) and "expected ';'" in str(info.value)


def test_a_page_without_webgpu(page_with):
    page_with(None, hello={"type": "hello", "error": {
        "kind": "no-webgpu", "message": "navigator.gpu is missing"}})
    assert "browser:0" not in [d["id"] for d in zynbook.compute_devices()]
    with pytest.raises(ZynMLDeviceError, match="no WebGPU: navigator.gpu is missing") as info:
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert info.value.line == 1


def test_a_page_that_goes_away_during_the_launch(page_with):
    holder = {}

    def leaving(data, buffers):
        if data.get("type") == "launch":
            threading.Timer(0.2, holder["comm"].close_from_page).start()
        return None

    comm, _ = page_with(leaving)
    holder["comm"] = comm
    t0 = time.time()
    with pytest.raises(ZynMLDeviceError, match="went away during the launch") as info:
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert info.value.line == 1 and time.time() - t0 < 5
    assert "browser:0" not in [d["id"] for d in zynbook.compute_devices()]


def test_a_silent_page_outside_a_kernel(page_with, monkeypatch):
    monkeypatch.setattr(bridge, "SILENCE_S", 0.3)
    monkeypatch.setattr(bridge, "PING_EVERY_S", 0.1)
    comm, _ = page_with(lambda data, buffers: None)
    with pytest.raises(ZynMLDeviceError, match="cannot reach a running cell"):
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert any(m.get("type") == "ping" for m in comm.sent)


def test_an_interrupt_stops_the_wait(page_with):
    comm, _ = page_with(lambda data, buffers: None)
    # interrupt_main acts only where Python handles SIGINT (a process a non-interactive
    # shell starts in the background begins with it ignored): as a notebook's kernel has it
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    t0 = time.time()
    try:
        with pytest.raises(KeyboardInterrupt):
            zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    finally:
        signal.signal(signal.SIGINT, old)
    assert time.time() - t0 < 3
    assert comm.sent[-1]["type"] == "cancel"


def test_browser_source_makes_infinities_at_run_time():
    src = "fn f() { var m: f32 = bitcast<f32>(0xff800000u); }"
    out = plans.browser_source(src)
    assert "z_f32_bits(0xff800000u)" in out and "fn z_f32_bits(bits: u32) -> f32" in out
    assert plans.browser_source("fn g() {}") == "fn g() {}"


def test_export_embeds_plans_and_reference_values(tmp_path):
    cell = ("let x = randn([257], seed=3)\n"
            "let y = compute(x) @device(\"cuda:0\") {\n"
            "    @kernel elementwise\n"
            "    for i in 0..n:\n"
            "        out[i] = x[i] + 1.0\n"
            "}\n"
            "%python print(1)\n")
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "zynml", "language": "zynml",
                                      "display_name": "ZynML"}},
          "cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": cell}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    from zynbook.export import export_notebook
    page = export_notebook(path)
    assert page == tmp_path / "nb.html"
    text = page.read_text()
    blocks = json.loads(re.search(r'<script type="application/json" id="zb-blocks">(.*?)</script>',
                                  text, re.S).group(1))
    assert len(blocks) == 1 and blocks[0]["kind"] == "elementwise"
    x = np.frombuffer(base64.b64decode(blocks[0]["data"][1]), np.float32)
    want = np.frombuffer(base64.b64decode(blocks[0]["expected"]), np.float32)
    np.testing.assert_allclose(want, x + 1, rtol=1e-6)
    assert "export class" not in text and "class Runner" in text      # inlined runner


def test_a_lost_reply_is_an_error_not_a_hang(page_with, monkeypatch):
    monkeypatch.setattr(bridge, "PING_EVERY_S", 0.1)

    def forgetful(data, buffers):     # answers pings, never the launch
        if data.get("type") == "ping":
            return {"type": "pong", "id": 0, "seq": data["seq"], "busy": []}, []
        return None

    page_with(forgetful)
    t0 = time.time()
    with pytest.raises(ZynMLDeviceError, match="lost on the way") as info:
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert info.value.line == 1 and time.time() - t0 < 3


def test_a_reply_in_parts(page_with):
    def in_parts(data, buffers):
        reply = doubling_page(data, buffers)
        if reply is None:
            return None
        head, outputs = reply
        whole = b"".join(outputs)
        sizes = [len(o) for o in outputs]
        comm = holder["comm"]
        for k in range(3):        # three parts, delivered in order from another thread
            piece = whole[k * len(whole) // 3:(k + 1) * len(whole) // 3]
            comm._msg({"content": {"data": {**head, "sizes": sizes, "part": k, "parts": 3}},
                       "buffers": [piece]})
        return None

    holder = {}
    comm, _ = page_with(in_parts)
    holder["comm"] = comm
    x = np.arange(3001, dtype=np.float32)
    y = zynbook.run(DOUBLE, device="cpu", x=x)
    np.testing.assert_array_equal(np.asarray(y), x * 2)


def test_a_lost_gpu_device(page_with):
    holder = {}

    def losing(data, buffers):
        if data.get("type") == "launch":
            threading.Timer(0.1, holder["comm"]._msg, args=({"content": {"data": {
                "type": "lost", "message": "the GPU process crashed"}}, "buffers": []},)).start()
        return None

    comm, _ = page_with(losing)
    holder["comm"] = comm
    with pytest.raises(ZynMLDeviceError, match="device was lost during the launch") as info:
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))
    assert info.value.line == 1 and "GPU process crashed" in str(info.value)
    assert "browser:0" not in [d["id"] for d in zynbook.compute_devices()]
    with pytest.raises(ZynMLDeviceError, match="device was lost: the GPU process crashed"):
        zynbook.run(DOUBLE, device="cpu", x=np.ones(8, np.float32))


def test_the_server_extension_sets_nodelay_on_kernel_websockets():
    import asyncio

    from zynbook import serverext

    assert serverext._jupyter_server_extension_points() == [{"module": "zynbook.serverext"}]
    seen = []

    class Handler:
        async def open(self, kernel_id):
            seen.append(("open", kernel_id))

        def set_nodelay(self, value):
            seen.append(("nodelay", value))

    Handler.open = serverext.nodelay_open(Handler.open)
    asyncio.run(Handler().open("k1"))
    assert seen == [("open", "k1"), ("nodelay", True)]
