"""The device picker."""
from __future__ import annotations

import html

import ipywidgets as W

from ..errors import ZynMLError
from ..kernel.state import announce_device, notebook_session, register_picker
from .views import device_label


class DevicePicker(W.VBox):
    """A dropdown of the devices `compute_devices()` lists (and `auto`); choosing one sets
    the session's default device."""

    def __init__(self, session=None, devices=None, **kwargs):
        self.session = session if session is not None else notebook_session()
        self.dropdown = W.Dropdown(description="Device", layout=W.Layout(width="420px"),
                                   style={"description_width": "60px"})
        self.status = W.HTML()
        self._updating = False
        super().__init__([self.dropdown, self.status], **kwargs)
        self.refresh(devices)
        self.dropdown.observe(self._on_change, names="value")
        register_picker(self)

    def refresh(self, devices=None) -> None:
        """List the devices again (`devices`: the dicts of compute_devices(), for tests)."""
        if devices is None:
            from .. import compute_devices

            devices = compute_devices()
        # every id a device answers to (`webgpu:0` is `vulkan:0` too), for its description
        self.devices = {i: d for d in devices for i in (*d.get("ids", ()), d["id"])}
        options = [(device_label(d), d["id"]) for d in devices]
        options.append(("auto · the best GPU, else the CPU", "auto"))
        current = self.session.default_device
        ids = [o[1] for o in options]
        if current not in ids:
            options.insert(0, (self._label(current), current))
        self._updating = True
        try:
            self.dropdown.options = options
            self.dropdown.value = current
        finally:
            self._updating = False
        self._show(current)

    @property
    def value(self) -> str:
        return self.dropdown.value

    @value.setter
    def value(self, device: str) -> None:
        if device in [o[1] for o in self.dropdown.options]:
            self.dropdown.value = device
            return
        # another id of a listed device (`webgpu:0`) or one the list lacks (a TraitError
        # of the dropdown's): set as a choice is, a device the session has not shown in red
        self._on_change({"old": self.dropdown.value, "new": device})

    def _on_change(self, change) -> None:
        if self._updating:
            return
        device = change["new"]
        try:
            self.session.default_device = device
        except ZynMLError as err:
            self.status.value = (f"<span style='color:#b00020'>{html.escape(err.message)}"
                                 f"</span>")
            self._updating = True
            try:
                self.dropdown.value = change["old"]
            finally:
                self._updating = False
            return
        self.show_device(self.session.default_device)
        announce_device(self.session)

    def show_device(self, device: str) -> None:
        """Show `device` as the default (set elsewhere: `%device`, the toolbar, `config`,
        another picker) without setting it again."""
        if self.dropdown.value == device:
            self._show(device)
            return
        self._updating = True
        try:
            if device not in [o[1] for o in self.dropdown.options]:
                self.dropdown.options = [(self._label(device), device)] + \
                    list(self.dropdown.options)
            self.dropdown.value = device
        finally:
            self._updating = False
        self._show(device)

    def _label(self, device: str) -> str:
        """The option of a default device the list does not hold as such: another id of a
        listed device (`webgpu:0`) is labelled as that device is."""
        info = self.devices.get(device)
        return device_label({**info, "id": device}) if info else device

    def _show(self, device: str) -> None:
        info = self.devices.get(device, {})
        extra = ", ".join(f"{k}: {v}" for k, v in info.items()
                          if k not in ("id", "ids", "name", "type") and v not in (None, ""))
        self.status.value = (f"default device: <code>{html.escape(device)}</code>"
                             + (f" <span style='color:#666'>({html.escape(extra)})</span>"
                                if extra else ""))
