"""The CIR pass pipeline: lowering's CIR in, the CIR every device and the reference run out.

The passes are listed once, in order (`PASSES`); each is a plain function `Kernel -> Kernel`
in its own module. The verifier (`verify.py`) runs on lowering's CIR and after every pass, and
an optional trace sees the CIR after each: `run_passes(kernel, trace=callback)` calls
`callback(pass_name, kernel)`, and `ZYNBOOK_TRACE_PASSES=1` in the environment prints
`cir.print_kernel` of each stage with its name (to stderr).

1. `whole`        whole_stores.py `out = <whole tensors combined>` as a loop nest over out
2. `widen`        widen.py        each `var` declared with the type its assignments gave it
3. `parallel`     parallel.py     loops whose iterations are independent marked parallel
4. `kernel_type`  kernel_type.py  the body has the shape its `@kernel` type names (or an error)
5. `simplify`     simplify.py     exact integer folds, constant conditions
6. `constant_tiles` constant_tiles.py a constant tile reduced, or a factor of `@`, by its own shape
7. `scalars`      scalars.py      a host float meeting f64 read as f64
8. `casts`        casts.py        casts from a float to an integer saturate (NaN gives 0)
9. `activations`  activations.py  `1 +- tanh(z)` as `2 sigmoid(+-2 z)` (the same function, kept exact)

Analyses that schedules and printers ask, not run here: `recognise.py` (attention, flash
attention, contractions by structure), `bounds.py` (which indices need guards) and
`tiles.inline_tile_lets`, the form of a body the C-like printers want (see tiles.py for why
it is theirs to run, not every device's).
"""
from __future__ import annotations

import os
import sys

from .. import cir
from .activations import tanh_as_sigmoid
from .casts import saturate_casts
from .constant_tiles import constant_tiles
from .kernel_type import check_kernel_type
from .parallel import mark_parallel
from .scalars import f64_scalars
from .simplify import simplify
from .verify import verify
from .whole_stores import whole_stores
from .widen import widen_vars

PASSES = (
    ("whole", whole_stores),
    ("widen", widen_vars),
    ("parallel", mark_parallel),
    ("kernel_type", check_kernel_type),
    ("simplify", simplify),
    ("constant_tiles", constant_tiles),
    ("scalars", f64_scalars),
    ("casts", saturate_casts),
    ("activations", tanh_as_sigmoid),
)

TRACE_ENV = "ZYNBOOK_TRACE_PASSES"


def _print_trace(name: str, kernel: cir.Kernel) -> None:
    sys.stderr.write(f"--- CIR after {name} ---\n{cir.print_kernel(kernel)}\n")


def run_passes(kernel: cir.Kernel, trace=None, passes=PASSES) -> cir.Kernel:
    """`kernel` through every pass of `passes`, verified before the first and after each.
    `trace(name, kernel)` sees lowering's CIR (name "lower") and the CIR after each pass."""
    tracers = [t for t in (trace, _print_trace if os.environ.get(TRACE_ENV, "") not in
                           ("", "0") else None) if t is not None]
    verify(kernel, "lower")
    for t in tracers:
        t("lower", kernel)
    for name, fn in passes:
        kernel = fn(kernel)
        verify(kernel, name)
        for t in tracers:
            t(name, kernel)
    return kernel


def run_pipeline(lowered, trace=None):
    """Run the pipeline on a `LoweredKernel` once: `lowered.kernel` becomes the passed CIR and
    `lowered.before_passes` keeps lowering's. Returns `lowered`; a second call does nothing."""
    if getattr(lowered, "before_passes", None) is None:
        original = lowered.kernel
        lowered.kernel = run_passes(original, trace)
        lowered.before_passes = original
    return lowered
