"""The browser back end: `browser:N` is the WebGPU adapter of a JupyterLab page connected to
the kernel through the `zynbook.browser` comm (bridge.py); launches send the WebGPU back
end's WGSL and a launch plan (plan.py) to the page, whose runner (runner.js, shared with
`zynbook export`) runs them. Devices come and go with pages; `auto` never picks one."""
from __future__ import annotations

import weakref

from . import bridge
from .bridge import COMM_TARGET, register
from .device import BrowserDevice

__all__ = ["BrowserDevice", "COMM_TARGET", "connected", "discover", "register"]

_devices: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _device(page) -> BrowserDevice:
    dev = _devices.get(page)
    if dev is None or dev.page.adapter is not page.adapter:
        dev = _devices[page] = BrowserDevice(page)
    return dev


def connected() -> list:
    """A device per connected page, with or without WebGPU (launching on one without it
    raises the page's reason as a device error)."""
    return [_device(p) for p in bridge.pages()]


def discover() -> list:
    """The devices of connected pages that have a WebGPU adapter."""
    return [d for d in connected() if d.available]
