"""WebGPU runtime pieces the device is built from: adapter discovery, host <-> buffer dtype
conversion, uniform layout per WGSL's alignment rules, dispatch geometry past the
65535-workgroups-per-dimension limit, and what a compiled program holds (the pipelines
are cached by `zynbook/cache.py`)."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from ...errors import ZynMLDeviceError

# ------------------------------------------------------------------------ wgpu import


def load_wgpu():
    """The wgpu module, or None when wgpu-py (or its native library) is missing."""
    try:
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences a Mesa warning on Linux
        import wgpu  # noqa: F401
        return wgpu
    except Exception:   # ImportError, or the native library failing to load
        return None


def shader_module(device, label: str, code: str):
    """A WGSL module. Generated kernels guard every index their bounds analysis cannot prove
    (an out-of-range one raises the error flag), and their loops are finite, so the module is
    made without naga's own runtime checks where wgpu-native offers that: they clamp every
    workgroup- and storage-array index a second time, which cost 28% of the 4096 GEMM and 30%
    of a row softmax on an H200. `ZYNBOOK_WEBGPU_CHECKED=1` keeps them (the browser always
    does)."""
    if os.environ.get("ZYNBOOK_WEBGPU_CHECKED", "") not in ("", "0"):
        return device.create_shader_module(label=label, code=code)
    try:
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._ffi import ffi
        create, struct, text = (_api.libf.wgpuDeviceCreateShaderModuleTrusted,
                                _api.new_struct_p, _api.to_c_string_view)
        handle_of = device._internal
    except (ImportError, AttributeError):      # another backend, or another wgpu-py
        return device.create_shader_module(label=label, code=code)
    source = struct("WGPUShaderSourceWGSL *", code=text(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = _api.lib.WGPUSType_ShaderSourceWGSL
    desc = struct("WGPUShaderModuleDescriptor *", label=text(label),
                  nextInChain=ffi.cast("WGPUChainedStruct *", source))
    handle = create(handle_of, desc, _api.lib.WGPUShaderRuntimeChecks_None)
    if handle == ffi.NULL:
        raise RuntimeError("shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)


# the fewest lanes a subgroup may have where a vendor's driver picks the width per pipeline
# (a probe's pipeline may get more than another's): Intel compiles SIMD8 to SIMD32, AMD wave32
# or wave64, Qualcomm 64 or 128 lanes
VENDOR_MIN_SUBGROUP = {0x8086: 8, 0x1002: 32, 0x5143: 64}

_PROBE = """
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sl: u32,
        @builtin(subgroup_size) ss: u32) { o[2u * li] = sl; o[2u * li + 1u] = ss; }
"""


def subgroup_lanes(device, vendor: int) -> int:
    """The width every subgroup of `device` has at least, its lanes consecutive local ids
    (what collectives over groups of lanes need), from a probe of a 256-invocation
    workgroup and what the vendor's drivers may do; 0 where the probe finds subgroups of
    mixed widths, or lanes out of order, or fails."""
    import wgpu
    try:
        module = device.create_shader_module(code=_PROBE)
        pipe = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
        buf = device.create_buffer(size=2048, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        group = device.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                         entries=[{"binding": 0, "resource": {"buffer": buf}}])
        enc = device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(pipe)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(1)
        cpass.end()
        device.queue.submit([enc.finish()])
        lanes = np.frombuffer(device.queue.read_buffer(buf), np.uint32).reshape(256, 2)
    except Exception:
        return 0
    widths = set(lanes[:, 1].tolist())
    width = widths.pop() if len(widths) == 1 else 0
    if not width or any(lanes[i, 0] != i % width for i in range(256)):
        return 0
    return min(width, VENDOR_MIN_SUBGROUP.get(vendor, width))


_ADAPTERS = None
_LOCK = threading.Lock()


def adapters() -> list:
    """Every wgpu adapter on this machine (cached; empty without wgpu or a driver)."""
    global _ADAPTERS
    with _LOCK:
        if _ADAPTERS is None:
            wgpu = load_wgpu()
            found = []
            if wgpu is not None:
                try:
                    found = list(wgpu.gpu.enumerate_adapters_sync())
                except Exception:
                    found = []
            _ADAPTERS = found
        return list(_ADAPTERS)


_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3, "Unknown": 4}
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2, "BrowserWebGPU": 1}
BACKEND_IDS = {"Vulkan": "vulkan", "Metal": "metal", "D3D12": "dx12", "OpenGL": "gl",
               "BrowserWebGPU": "browser"}


def adapter_rank(info) -> tuple:
    """Sort key: discrete before integrated before CPU adapters; native APIs before GL."""
    return (_TYPE_RANK.get(info.get("adapter_type", "Unknown"), 4),
            _BACKEND_RANK.get(info.get("backend_type", ""), 3))


# ---------------------------------------------------------------------- host dtypes

# storage type of the WGSL buffer -> numpy dtype the host converts to
STORAGE_NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32,
                 "f64": np.float64}

NUMPY_OF = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
            "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
            "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}


def to_storage(array: np.ndarray, storage: str, name: str = "") -> np.ndarray:
    """`array` converted to the buffer's storage type (contiguous). Integer values that the
    32-bit storage cannot hold are an error, never wrapped silently."""
    target = STORAGE_NUMPY[storage]
    a = np.asarray(array)
    if a.dtype == np.bool_:
        a = a.astype(np.uint32)
    if a.dtype.kind in "iu" and np.dtype(target).kind in "iu" and a.size:
        info = np.iinfo(target)
        lo, hi = a.min(), a.max()
        if lo < info.min or hi > info.max:
            what = f"values of `{name}` ({a.dtype})" if name else f"{a.dtype} values from {lo} to {hi}"
            raise ZynMLDeviceError(
                f"{what} do not fit the device's {storage} storage (WebGPU has no "
                f"64-bit integers); run it on `cpu`, `cpu:native` or a CUDA device")
    return np.ascontiguousarray(a, dtype=target)


def from_storage(array: np.ndarray, dtype: str) -> np.ndarray:
    """A buffer's contents as the CIR dtype's numpy array."""
    target = NUMPY_OF[dtype]
    if dtype == "bool":
        return array != 0
    return array.astype(target, copy=False)


# ---------------------------------------------------------------------- uniform layout

_SCALAR = {"f32": (4, 4), "i32": (4, 4), "u32": (4, 4), "f16": (2, 2), "f64": (8, 8)}


def wgsl_align_size(t: str) -> tuple:
    """(alignment, size) of a WGSL host-shareable type: scalars, vecN<T> and arrays of them."""
    if t in _SCALAR:
        return _SCALAR[t]
    if t.startswith("vec"):
        n = int(t[3])
        inner = t[t.index("<") + 1:-1]
        a, s = _SCALAR[inner]
        size = n * s
        align = {2: 2 * s, 3: 4 * s, 4: 4 * s}[n]
        return align, size
    raise ZynMLDeviceError(f"no uniform layout for WGSL type {t}")


def uniform_layout(types: list) -> tuple:
    """Offsets of struct members of `types` in the uniform address space, and the struct's
    size (rounded up to its alignment, and to 16 as uniform buffers require)."""
    offsets, off, struct_align = [], 0, 16
    for t in types:
        a, s = wgsl_align_size(t)
        off = (off + a - 1) // a * a
        offsets.append(off)
        off += s
        struct_align = max(struct_align, a)
    size = (off + struct_align - 1) // struct_align * struct_align
    return offsets, max(size, 16)


def pack_uniform(values: list, names: list | None = None) -> bytes:
    """values: [(wgsl type, number)] -> the struct's bytes; `names`: the size or scalar
    each holds (for errors)."""
    offsets, size = uniform_layout([t for t, _ in values])
    buf = bytearray(size)
    for k, ((t, v), off) in enumerate(zip(values, offsets)):
        dt = {"f32": "<f4", "i32": "<i4", "u32": "<u4", "f16": "<f2", "f64": "<f8"}[t]
        if t in ("i32", "u32"):
            iv = int(v)
            lim = (-2**31, 2**31 - 1) if t == "i32" else (0, 2**32 - 1)
            if not lim[0] <= iv <= lim[1]:
                what = f"`{names[k]}`" if names and names[k] else "a size or scalar argument"
                raise ZynMLDeviceError(f"{what} is {iv}, past WebGPU's {t} ({lim[0]} to "
                                       f"{lim[1]}); run it on `cpu`, `cpu:native` or a CUDA "
                                       "device")
            v = iv
        with np.errstate(over="ignore"):    # a float past f32 is its infinity, as on `cpu`
            arr = np.array([v], dtype=dt)
        buf[off:off + arr.nbytes] = arr.tobytes()
    return bytes(buf)


# ------------------------------------------------------------------ dispatch geometry


def split_workgroups(n: int, limit: int = 65535) -> tuple:
    """A (x, y, z) dispatch with x*y*z >= n and each at most `limit`; shaders recover the
    linear id as x + y*nx + z*nx*ny and skip ids past n."""
    if n <= 0:
        return (0, 1, 1)
    if n <= limit:
        return (n, 1, 1)
    y = -(-n // limit)
    if y <= limit:
        x = -(-n // y)
        return (x, y, 1)
    z = -(-n // (limit * limit))
    if z > limit:
        raise ZynMLDeviceError(f"{n} workgroups exceed what one dispatch can address")
    per = -(-n // z)
    y = -(-per // limit)
    x = -(-per // y)
    return (x, y, z)


# ---------------------------------------------------------------- compiled program


@dataclass
class CompiledProgram:
    program: object         # codegen.wgsl.Program
    module: object
    pipelines: dict         # entry -> GPUComputePipeline
    layout: object          # GPUBindGroupLayout
    compile_seconds: float
