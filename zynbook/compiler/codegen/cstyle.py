"""What the C-like renderers (CUDA C, Metal, C++) share around the schedules: the error a
renderer raises where no schedule of compiler/schedules/ takes a kernel, and how it reaches
the user (a ZynML device error at the kernel's line)."""
from __future__ import annotations

from .. import cir
from ...errors import ZynMLDeviceError, Span


class Unsupported(Exception):
    """The renderer cannot express this CIR (raised as a ZynML error by the device)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def no_schedule(kernel, target, sizes):
    """Raise the reason no schedule of compiler/schedules/ takes `kernel` on `target`."""
    from .. import schedules
    raise Unsupported(schedules.why_none(kernel, target, sizes))


def raise_unsupported(kernel: cir.Kernel, err: Unsupported, lang: str):
    line = err.line or kernel.first_line
    raise ZynMLDeviceError(f"the {lang} renderer cannot compile kernel `{kernel.name}`: {err}",
                           Span(line, 1) if line else None)
