"""WebGPU backend: WGSL through wgpu-py on any adapter (Vulkan, Metal, DX12, lavapipe)."""
from .device import WebGPUArray, WebGPUDevice, device_ids, discover, get_device

__all__ = ["WebGPUArray", "WebGPUDevice", "device_ids", "discover", "get_device"]
