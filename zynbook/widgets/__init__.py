"""ipywidgets for ZynBook, usable from the ZynML kernel and from Python notebooks.

- `DevicePicker()`: a dropdown of `compute_devices()` that sets the notebook session's
  default device.
- `ShaderInspector()`: tabs with a compute block's ZynML source, its CIR and each backend's
  generated code, highlighted, with the device, arch and launch geometry.
- `TimingWidget()`: per launch, compile / upload / kernel / download times as bars;
  `TimingWidget.compare(source, devices)` runs one cell on several devices side by side.

Each takes an explicit `session=` or uses the notebook's (`zynbook.kernel.state`). Their
HTML (`timing_html`, `compare_html`, ...) is plain text from `zynbook.widgets.views`, which
needs no ipywidgets; the widgets are imported when first named.
"""
from __future__ import annotations

import importlib

from .views import compare_html, launch_info_html, timing_html, timing_svg, timing_table

_WIDGETS = {"DevicePicker": "devices", "ShaderInspector": "inspector",
            "TimingWidget": "timing"}

__all__ = ["DevicePicker", "ShaderInspector", "TimingWidget", "compare_html",
           "launch_info_html", "timing_html", "timing_svg", "timing_table"]


def __getattr__(name: str):
    if name in _WIDGETS:
        return getattr(importlib.import_module(f".{_WIDGETS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
