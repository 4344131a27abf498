"""IPython magics for Python notebooks: `%load_ext zynbook`, then

    %%compute [@device("cuda:0")] [@async] ...
    let z = compute(x, y) { ... }

runs a ZynML cell whose free names come from the Python namespace and whose `let` bindings
go back into it (numpy for `cpu`, CuPy for `cuda:N`, a ZynBook tensor elsewhere; a record's
fields likewise); annotations
on the magic line apply to every compute block of the cell. `%zynml_devices` lists devices,
`%zynml_device ID` sets the default device, `%zynml_inspect` shows the generated code of the
last cell's compute blocks. `%%compare --devices a,b --sizes n=1,2,3 [--numpy EXPR]` runs
a ZynML cell on several devices across sizes, checks each against the CPU reference and
shows a table and a chart (see `zynbook.magics.compare`); `%%zynml_timeit [-r R]` times a
%%compute cell: medians, spread, and per kernel GFLOP/s, GB/s and share of the device's peak.
"""
from __future__ import annotations

from .compare import CompareMagics
from .compute import ComputeMagics, to_python

__all__ = ["load_ipython_extension", "unload_ipython_extension", "ComputeMagics",
           "CompareMagics", "to_python"]


def load_ipython_extension(ipython) -> None:
    from ..errors import ZynMLError
    from ..kernel.display import register_formatters, show_error

    from ..backends import browser

    ipython.register_magics(ComputeMagics)
    ipython.register_magics(CompareMagics)
    browser.register()              # a JupyterLab page offers its GPU as `browser:N`
    register_formatters(ipython)
    # a ZynML mistake shows as its source line and caret, not a Python stack (the ZynML
    # kernel's shell already handles these, with interrupts besides)
    if not ipython.custom_exceptions:
        ipython.set_custom_exc((ZynMLError,), show_error)


def unload_ipython_extension(ipython) -> None:
    from ..errors import ZynMLError

    if ipython.custom_exceptions == (ZynMLError,):
        ipython.set_custom_exc((), None)
