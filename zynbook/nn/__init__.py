"""Training on every device: the compute-device interface (`device`), its operations and
backward passes written in ZynML, traced elementwise expressions, and safetensors weights.

    import zynbook
    dev = zynbook.device("auto")
    a = dev.upload(x); b = dev.upload(w)
    c = dev.matmul(a, b, m, k, n)
"""
from . import expr
from .device import Buffer, Device, device
from .parallel import DataParallel
from .weights import load_weights, save_weights

__all__ = ["Buffer", "DataParallel", "Device", "device", "expr", "load_weights",
           "save_weights"]
