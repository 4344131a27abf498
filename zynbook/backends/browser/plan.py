"""The launch plan of one kernel for a page's GPU: the WebGPU back end's WGSL `Program`
(zynbook/compiler/codegen/wgsl.py) turned into data the page's runner (runner.js) executes.

A plan is a JSON-able dict plus a list of binary buffers (the uniform struct and the inputs
in their WGSL storage types); the runner creates every buffer the program binds, dispatches
its passes and returns the buffers named in `read` (the output, and the error flag where the
program has one). The sizes of scratch and error buffers and the dispatch
geometry are computed here exactly as zynbook/backends/webgpu/device.py computes them.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from ...compiler import cir, errflag
from ...compiler.codegen import wgsl
from ...errors import ZynMLDeviceError
from ..webgpu import runtime as rt

# WebGPU's guaranteed limits, used where the page reports none
DEFAULT_LIMITS = {
    "maxBufferSize": 1 << 28, "maxStorageBufferBindingSize": 1 << 27,
    "maxComputeWorkgroupStorageSize": 16384, "maxComputeInvocationsPerWorkgroup": 256,
    "maxComputeWorkgroupSizeX": 256, "maxComputeWorkgroupsPerDimension": 65535,
    "maxStorageBuffersPerShaderStage": 8,
}


def options(limits: dict) -> wgsl.WGSLOptions:
    """WGSL options for a page's adapter. f16, f64 and subgroups are left off: the storage
    of those dtypes is widened as on any adapter without the feature, and the page's WGSL
    compiler (Tint in Chromium) gets standard WGSL only."""
    lim = {**DEFAULT_LIMITS, **{k: v for k, v in (limits or {}).items() if v}}
    return wgsl.WGSLOptions(
        workgroup_size=min(256, lim["maxComputeInvocationsPerWorkgroup"],
                           lim["maxComputeWorkgroupSizeX"]),
        f16=False, f64=False, subgroups=False, subgroups_directive=True,
        max_workgroup_storage=lim["maxComputeWorkgroupStorageSize"],
        max_invocations=lim["maxComputeInvocationsPerWorkgroup"],
        max_storage_buffers=lim["maxStorageBuffersPerShaderStage"],
        # loops stay loops: SwiftShader's page loses its device on a GEMM written out
        write_out_registers=False)


def equal_sizes(kernel: cir.Kernel, sizes: dict) -> tuple:
    """The kernel's size names grouped by equal value (as the WebGPU device specialises)."""
    groups: dict = {}
    for name in kernel.dims:
        if name in sizes:
            groups.setdefault(int(sizes[name]), []).append(name)
    return tuple(sorted(tuple(sorted(g)) for g in groups.values() if len(g) > 1))


def specialised(opts: wgsl.WGSLOptions, kernel: cir.Kernel, sizes: dict) -> wgsl.WGSLOptions:
    import dataclasses
    return wgsl.sized_for(dataclasses.replace(
        opts, equal_sizes=equal_sizes(kernel, sizes),
        negative_sizes=tuple(sorted(d for d in kernel.dims if int(sizes.get(d, 0)) < 0))),
        kernel, sizes)


_BITS = re.compile(r"bitcast<f32>\((0x[0-9a-fA-F]+u)\)")
_BITS_FN = ("\n// infinities and NaNs, made at run time: WGSL refuses them in constant expressions\n"
            "fn z_f32_bits(bits: u32) -> f32 { return bitcast<f32>(bits); }\n")


def browser_source(source: str) -> str:
    """The back end's WGSL as a browser's WGSL compiler takes it. WGSL makes an infinity or
    a NaN in a constant expression a shader-creation error, which Chromium's Tint enforces
    and wgpu's Naga does not: `bitcast<f32>(0xff800000u)` (-inf) is evaluated through a
    function call instead, which is never a constant expression."""
    if not _BITS.search(source):
        return source
    return _BITS.sub(r"z_f32_bits(\1)", source) + _BITS_FN


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


@dataclass
class Plan:
    """One launch: `spec` (JSON) and `data` (bytes) for the page; what the host needs back."""
    spec: dict
    data: list
    program: wgsl.Program
    out_shape: tuple
    out_dtype: str
    out_storage: str
    out_count: int
    geometry: list = field(default_factory=list)
    nbytes: int = 0             # bytes sent (inputs and uniforms)


def build(program: wgsl.Program, kernel: cir.Kernel, inputs: list, sizes: dict,
          scalars: dict, limits: dict) -> Plan:
    """The plan of `program` (rendered from `kernel`) for inputs (numpy arrays, in
    kernel.inputs order), sizes and scalars, checked against the page's `limits`."""
    lim = {**DEFAULT_LIMITS, **{k: v for k, v in (limits or {}).items() if v}}
    out_shape = tuple(cir.output_shape(kernel, sizes))
    shapes = {b.name: tuple(np.shape(a)) for b, a in zip(kernel.inputs, inputs)}
    shapes[kernel.output.name] = out_shape
    env = {"sizes": dict(sizes), "scalars": dict(scalars), "shapes": shapes}

    data: list = []
    buffers: dict = {}
    params = rt.pack_uniform(program.param_values(env), [f.label for f in program.params])
    buffers["@params"] = {"size": len(params), "data": 0}
    data.append(params)
    for b, a in zip(kernel.inputs, inputs):
        storage = wgsl.storage_type(b.dtype, False)
        host = rt.to_storage(np.asarray(a), storage, b.name)
        buffers[b.name] = {"size": host.nbytes, "data": len(data)}
        data.append(host.tobytes())
    out = kernel.output
    out_storage = wgsl.storage_type(out.dtype, False)
    out_count = int(np.prod(out_shape)) if out_shape else 1
    buffers[out.name] = {"size": out_count * np.dtype(rt.STORAGE_NUMPY[out_storage]).itemsize,
                         "data": None}
    for role, nbytes in program.scratch_bytes.items():
        # scratch (partials between launches): one buffer per launch
        buffers[role] = {"size": max(4, int(nbytes(env))), "data": None}
    read = [out.name]
    for b in program.bindings:
        if b.buffer == "@error":
            buffers["@error"] = {"size": 4 * errflag.WORDS, "data": None}
            read.append("@error")
    bind_max = lim["maxStorageBufferBindingSize"]
    for b in program.bindings:
        if b.access == "uniform" or b.buffer not in buffers:
            continue
        size = max(16, (buffers[b.buffer]["size"] + 15) // 16 * 16)
        if size > min(bind_max, lim["maxBufferSize"]):
            raise ZynMLDeviceError(
                f"`{b.buffer}` needs {size} bytes; the page's adapter binds at most "
                f"{min(bind_max, lim['maxBufferSize'])} bytes per storage buffer")
    passes, geometry = [], []
    for p in program.passes:
        count = int(p.workgroups(env))
        if count <= 0:
            continue
        dims = rt.split_workgroups(count, lim["maxComputeWorkgroupsPerDimension"])
        passes.append({"entry": p.entry, "workgroups": list(dims)})
        geometry.append({"entry": p.entry, "workgroups": dims,
                         "workgroup_size": program.workgroup_size})
    source = browser_source(program.source)
    spec = {
        "kernel": kernel.name, "hash": source_hash(source), "source": source,
        "bindings": [{"binding": b.binding, "buffer": b.buffer, "access": b.access}
                     for b in program.bindings],
        "buffers": buffers, "passes": passes, "read": read,
    }
    return Plan(spec, data, program, out_shape, out.dtype, out_storage, out_count, geometry,
                sum(len(d) for d in data))


def result(plan: Plan, kernel: cir.Kernel, sizes: dict, outputs: list) -> np.ndarray:
    """The output array from the buffers the page read back; a failed check of the error
    flag raises the ZynML runtime error the reference executor gives."""
    if len(plan.spec["read"]) > 1:
        words = np.frombuffer(_bytes(outputs[1]), dtype=np.int32, count=errflag.WORDS)
        errflag.raise_if_failed(plan.program.error_sites, words, kernel, sizes)
    st = rt.STORAGE_NUMPY[plan.out_storage]
    raw = _bytes(outputs[0])
    host = np.frombuffer(raw, dtype=st, count=plan.out_count).reshape(plan.out_shape)
    return rt.from_storage(host, plan.out_dtype).copy()


def _bytes(buf) -> bytes:
    if isinstance(buf, memoryview):
        return buf.tobytes()
    return bytes(buf)
