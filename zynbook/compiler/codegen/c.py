"""CIR -> C++ for the CPU (compiled by the system compiler into a shared library).

`render_program(kernel, sizes, openmp=True)` returns a `CProgram`: the source text, the
order in which the entry point takes its scalar arguments and a map from generated lines to
ZynML lines. A schedule of compiler/schedules/ builds the launch IR for the CPU target (one
thread a block, blocks run by the host's cores through `#pragma omp parallel for`) and the
C++ dialect (codegen/dialects/cpp.py) prints it, with the sizes compiled in. The entry point
is `extern "C" void zyn_kernel(void* const* bufs, const double* fargs, const long long* iargs)`:
the buffers in kernel order (inputs, then the output), the float scalars and the integer and
boolean scalars that are not sizes. f16 buffers are `_Float16` (arithmetic in float); bf16
values are held as f32, as the reference executor holds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import cir, errflag, schedules
from ..launch import ir
from ..launch.scalar import DTYPE_BYTES, user_name
from ..targets import cpu_target
from .dialects.cpp import CppDialect
from .printer import print_program
from .cstyle import no_schedule, rendered, sized_source

# the word of the error-flag buffer, past the flag itself, that asks a running kernel to stop
CANCEL_WORD = errflag.WORDS


@dataclass
class CProgram:
    name: str               # the kernel's name
    source: str
    args: list              # (CIR scalar name, "f" or "i", position in fargs / iargs)
    schedule: str = ""
    line_map: dict = field(default_factory=dict)   # generated line (1-based) -> ZynML line
    openmp: bool = True
    error_sites: tuple = ()     # compiler/errflag.py: what the kernel may report
    scratch_bytes: int = 0      # the memory the entry point allocates (block memory)


def render_program(kernel: cir.Kernel, sizes: dict, openmp: bool = True,
                   params=None) -> CProgram:
    """Render `kernel` for one binding of its sizes (with `params`, a schedules.Choice: that
    schedule's parameters). Raises ZynMLDeviceError if impossible."""
    return rendered(kernel, sizes, "C", lambda sizes: _launch_program(
        kernel, sizes, openmp, params) or no_schedule(kernel, cpu_target(), sizes))


def _launch_program(kernel: cir.Kernel, sizes: dict, openmp: bool, params=None) -> CProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the C++ dialect."""
    prog = schedules.build(kernel, cpu_target(), sizes, params)
    if prog is None:
        return None
    env = {user_name(d): sizes[d] for d in kernel.dims}
    out = print_program(CppDialect(openmp), prog, kernel, env)
    # (name, "f" or "i", its place among the float or the integer scalars that are not sizes)
    scalars = [s for s in kernel.scalars if s.name not in sizes]
    kinds = ["f" if s.dtype in cir.FLOAT_DTYPES else "i" for s in scalars]
    args = [(s.name, k, kinds[:n].count(k)) for n, (s, k) in enumerate(zip(scalars, kinds))]
    scratch = sum(max(1, ir.evaluate(sc.count, env)) * DTYPE_BYTES["f32" if sc.dtype == "bf16" else sc.dtype]
                  for sc in prog.scratch)          # (bf16 is held as f32 here)
    return CProgram(kernel.name, out.source, args, prog.schedule, out.line_map, openmp, prog.sites,
                    scratch)


def render(kernel: cir.Kernel, sizes: dict | None = None, openmp: bool = True) -> str:
    """C++ source of `kernel` (`cstyle.sized_source`)."""
    return sized_source(kernel, sizes, "C++",
                        lambda sizes: render_program(kernel, sizes, openmp).source)
