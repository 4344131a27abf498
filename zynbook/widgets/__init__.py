"""ipywidgets for ZynBook, usable from the ZynML kernel and from Python notebooks.

- `DevicePicker()`: a dropdown of `compute_devices()` that sets the notebook session's
  default device.
- `ShaderInspector()`: tabs with a compute block's ZynML source, its CIR and each backend's
  generated code, highlighted, with the device, arch and launch geometry.
- `TimingWidget()`: per launch, compile / upload / kernel / download times as bars;
  `TimingWidget.compare(source, devices)` runs one cell on several devices side by side.

Each takes an explicit `session=` or uses the notebook's (`zynbook.kernel.state`).
"""
from __future__ import annotations

from .devices import DevicePicker
from .inspector import ShaderInspector
from .timing import TimingWidget, timing_html

__all__ = ["DevicePicker", "ShaderInspector", "TimingWidget", "timing_html"]
