"""Where a tensor lives and where it may go: the one placement rule.

- A tensor that comes from the host (a program input, a literal or constructor without
  `device=`, the result of host arithmetic, the output of a kernel placed by the session's
  default device) is *uncommitted*: it moves to the device that needs it.
- A tensor placed on purpose (`x.to_device(...)`, `device=` of a constructor or `allocate`,
  the output of a `compute` block with `@device(...)`, or of one that ran where its committed
  inputs live) is *committed*: it stays where it was put.
- Two committed tensors whose memories differ meet in one operation: a ZynMLDeviceError that
  names both devices. `cpu` and `cpu:native` share the host's memory and never conflict.
- A `compute` block runs on its `@device(...)`; without one, on the device its committed
  inputs share; with none committed, on the session's default device.

So what a program computes never depends on the default device: only placements written in
the program can conflict, and they conflict the same way under every default.
"""
from __future__ import annotations

from ..backends.registry import get_device
from ..errors import ZynMLDeviceError
from .tensor import Tensor

HOST = "host"


def memory_of(device_id: str) -> str:
    """The memory a device's tensors live in: "host" for the CPU devices (`cpu`,
    `cpu:native`), else the device's own id."""
    if device_id in ("cpu", "cpu:native"):
        return HOST
    try:
        dev = get_device(device_id)
    except ZynMLDeviceError:
        return device_id
    return HOST if getattr(dev, "backend", "") in ("cpu", "c") else dev.id


def same_memory(a: str, b: str) -> bool:
    return a == b or memory_of(a) == memory_of(b)


def committed_device(tensors, span=None, what: str = "operands") -> str | None:
    """The device the committed tensors among `tensors` share (None when none is
    committed); two committed to different memories are a ZynMLDeviceError naming both."""
    first = None
    for t in tensors:
        if not isinstance(t, Tensor) or not t.committed:
            continue
        if first is None:
            first = t
        elif not same_memory(first.device, t.device):
            raise ZynMLDeviceError(
                f"{what} are placed on two devices, {first.device} and {t.device}; move one "
                f"with .to_device(\"{first.device}\") or .to_device(\"{t.device}\")", span)
    return first.device if first is not None else None


def target_device(tensors, span=None, what: str = "operands") -> str:
    """Where an operation on `tensors` runs: the committed device if any, else the device of
    the first tensor that is not in host memory (it stays where it is), else `cpu`."""
    committed = committed_device(tensors, span, what)
    if committed is not None:
        return committed
    for t in tensors:
        if isinstance(t, Tensor) and memory_of(t.device) != HOST:
            return t.device
    return "cpu"
