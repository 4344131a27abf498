"""ZynBook: ZynML compute() kernels in Jupyter, on the CPU, CUDA and WebGPU."""
from .backends.registry import compute_devices
from .nn import device, load_weights, save_weights
from .errors import (ZynMLDeviceError, ZynMLError, ZynMLMemoryError, ZynMLNameError,
                     ZynMLRuntimeError, ZynMLShapeError, ZynMLSyntaxError, ZynMLTimeoutError,
                     ZynMLTypeError)
from .program import Program, compile
from .runtime.sharded import ShardedTensor
from .runtime.tensor import Tensor
from .session import Session, run

__version__ = "0.1.0"

__all__ = [
    "run", "compile", "compute_devices", "device", "load_weights", "save_weights", "Session", "Program", "Tensor", "ShardedTensor", "ZynMLError",
    "ZynMLSyntaxError", "ZynMLNameError", "ZynMLTypeError", "ZynMLShapeError",
    "ZynMLDeviceError", "ZynMLRuntimeError", "ZynMLTimeoutError", "ZynMLMemoryError",
    "load_ipython_extension", "unload_ipython_extension",
]


def load_ipython_extension(ipython):
    """`%load_ext zynbook`: the %%compute and %zynml_devices magics."""
    from .magics import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from .magics import unload_ipython_extension as unload
    unload(ipython)


def _jupyter_labextension_paths():
    """Where `jupyter labextension develop` finds the built ZynML extension."""
    return [{"src": "labextension", "dest": "zynbook-zynml"}]
