"""CIR -> Metal Shading Language.

`render_program(kernel, sizes)` returns an `MSLProgram`: the source text (the MSL dialect,
codegen/dialects/msl.py, printing the launch IR a schedule of compiler/schedules/ built, with
the sizes of one launch compiled in), the dispatches to make in order, the buffer table
(`[[buffer(n)]]` index -> input, output, scratch, the argument struct or the error flag) and
the layout of the `constant ZynArgs&` struct that carries the scalar arguments that are not
sizes. Metal has no `double`: f64 kernels are refused with a ZynML error.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .. import cir, schedules
from ..launch import ir
from ..launch.scalar import DTYPE_BYTES, user_name
from ..targets import metal_target
from .dialects.msl import ARG_TYPES as MSL_ARG_TYPES
from .dialects.msl import MslDialect, Refused
from .printer import print_program
from .cstyle import Unsupported, rendered, scheduled, sized_source

@dataclass
class Dispatch:
    entry: str
    grid: int               # threadgroups (1-D)
    threadgroup: int        # threads per threadgroup


@dataclass
class BufferSlot:
    index: int              # [[buffer(index)]]
    role: str               # "input", "output", "scratch", "args", "error" (the error flag)
    name: str               # CIR buffer name, scratch name, or "zyn_args"
    dtype: str = ""         # element dtype (inputs, output, scratch)
    count: int = 0          # elements (scratch) or bytes (args)


@dataclass
class MSLProgram:
    name: str
    source: str
    dispatches: list
    slots: list             # of BufferSlot, by index
    args: list              # (field name, MSL type, CIR scalar name) in struct order
    schedule: str = ""
    notes: list = field(default_factory=list)
    threadgroup_bytes: int = 0
    error_sites: tuple = ()     # compiler/errflag.py; the flag is the last buffer slot

    def pack_args(self, scalars: dict) -> bytes:
        """The bytes of the `constant ZynArgs&` struct (natural C alignment)."""
        out = b""
        for _, ty, name in self.args:
            fmt, size = {"float": ("<f", 4), "int": ("<i", 4), "uint": ("<I", 4),
                         "long": ("<q", 8), "ulong": ("<Q", 8)}[ty]
            out += b"\0" * (-len(out) % size)
            v = scalars[name]
            out += struct.pack(fmt, float(v) if ty == "float" else int(v))
        out += b"\0" * (-len(out) % 8)
        return out or b"\0" * 8


def render_program(kernel: cir.Kernel, sizes: dict, options: dict | None = None) -> MSLProgram:
    """Render `kernel` for one binding of its sizes. Raises ZynMLDeviceError if impossible.
    `options["params"]`, a schedules.Choice, builds that schedule with those parameters."""
    return rendered(kernel, sizes, "MSL", lambda sizes: scheduled(
        kernel, metal_target(), sizes, dict(options or {}),
        lambda notes, **how: _launch_program(kernel, sizes, notes, **how)))


def render(kernel: cir.Kernel, sizes: dict | None = None, options: dict | None = None) -> str:
    """MSL source of `kernel` (`cstyle.sized_source`)."""
    return sized_source(kernel, sizes, "MSL",
                        lambda sizes: render_program(kernel, sizes, options).source)


def schedule_name(prog: MSLProgram) -> str:
    s = prog.schedule
    for key, name in (("flash", "flash"), ("attention", "flash"), ("reduce", "reduce"),
                      ("rows:", "rows"), ("block:", "rows"), ("threadgroup of", "rows"),
                      ("whole body", "rows")):
        if key in s:
            return name
    return "generic"


def _launch_program(kernel, sizes, notes, only=None, exclude=(), params=None) -> MSLProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the MSL dialect (whose copies
    are element by element: a program's aligned fallback is not needed)."""
    prog = schedules.build(kernel, metal_target(), sizes, params, only=only, exclude=exclude)
    if prog is None:
        return None
    try:
        out = print_program(MslDialect(), prog, kernel, {user_name(d): sizes[d] for d in kernel.dims})
    except Refused as err:
        raise Unsupported(str(err)) from None
    args = [(user_name(s.name), MSL_ARG_TYPES[s.dtype], s.name) for s in kernel.scalars
            if s.name not in sizes]
    slots = [BufferSlot(n, "input", b.name, b.dtype) for n, b in enumerate(kernel.inputs)]
    slots.append(BufferSlot(len(slots), "output", kernel.output.name, kernel.output.dtype))
    for sc in prog.scratch:
        slots.append(BufferSlot(len(slots), "scratch", sc.name, sc.dtype, int(ir.evaluate(sc.count, sizes))))
    if args:
        slots.append(BufferSlot(len(slots), "args", "zyn_args"))
    slots.append(BufferSlot(len(slots), "error", "zyn_err", "i32", 2))
    dispatches = [Dispatch(l.kernel, int(ir.evaluate(l.grid, sizes)), l.block) for l in prog.launches]
    return MSLProgram(prog.kernels[0].name, out.source, dispatches, slots, args, prog.schedule,
                      notes + prog.notes, max(_threadgroup_bytes(k) for k in prog.kernels), prog.sites)


def _threadgroup_bytes(k: ir.Kernel) -> int:
    """The threadgroup memory kernel `k` declares (Metal allows 32 KiB)."""
    return k.dynamic_shared + sum(
        DTYPE_BYTES[ir.element_of(a.dtype)] * ir.lanes_of(a.dtype) * max(a.count, 1)
        for a in ir.walk(k.body) if isinstance(a, ir.Array) and a.space == "shared")
