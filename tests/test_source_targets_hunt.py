"""Programs whose generated Metal (MSL on the Metal model, tests/metal_emu) or CUDA source
(nvcc for sm_80 and sm_90, the CUDA target's launch IR on the emulator) was wrong, each
compared with numpy written here:

- `**` of integers in MSL spelled its helper in `unsigned long long`, which Metal lacks (its
  64-bit integer is `long`);
- a block kernel whose shared arrays spill to scratch (device) memory, past the threadgroup's
  32 KiB, synchronised them with `threadgroup_barrier(mem_flags::mem_threadgroup)` in MSL and
  `workgroupBarrier()` in WGSL, which order threadgroup memory only: a thread could read a
  slot another had written before the barrier but not made visible (the barrier now says
  so in the launch IR, `Barrier.device`, and each dialect spells it);
- `MSLProgram.threadgroup_bytes` was always 0, so the 32 KiB limit that tests check of it
  held of every program.

Run: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_source_targets_hunt.py"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.backends import registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_sources as A  # noqa: E402
import nvcc_runs  # noqa: E402
from compute_testing import emulate_kernel, lower_block, wanted_devices  # noqa: E402
from metal_emu import emulator as emu  # noqa: E402
from metal_emu.device import EmulatedMetalDevice  # noqa: E402

RNG = np.random.default_rng(2207)


@pytest.fixture
def metal(monkeypatch):
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler")
    dev = EmulatedMetalDevice()
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    return dev


def run_metal(dev, src, **inputs):
    got = zynbook.run(src, device=dev.id, **inputs)
    assert dev.launches, "no kernel ran on the Metal model"
    assert not dev.mismatches, dev.mismatches
    return np.asarray(got.numpy() if hasattr(got, "numpy") else got)


def cuda_checks(src, inputs, want, rtol=1e-5, atol=1e-6):
    """The block's kernel rendered for sm_80 and sm_90 compiles with nvcc, and the CUDA
    target's launch IR run on the emulator equals `want`."""
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen import cuda
    from zynbook.compiler.codegen.cstyle import scheduled
    from zynbook.compiler.targets import cuda_target
    arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    scalars = {k: v for k, v in inputs.items() if not isinstance(v, np.ndarray)}
    kernel, ins, sizes, sc = lower_block(src, arrays, scalars)
    for arch in ((8, 0), (9, 0)):
        prog = cuda.render_cuda(kernel, sizes, arch)
        if nvcc_runs.NVCC:
            a = f"sm_{arch[0]}{arch[1]}" + ("a" if prog.arch_specific else "")
            res = nvcc_runs.run(prog.source, ("--ptx", f"-arch={a}"))
            assert res.returncode == 0, res.stderr[-3000:]
        target = cuda_target(arch, 0, True)
        ip = scheduled(kernel, target, sizes, {}, lambda notes, **how: schedules.build(
            kernel, target, sizes, how.get("params"), only=how.get("only"),
            exclude=how.get("exclude", ())), gemm_first=True)
        got = emulate_kernel(ip, kernel, ins, sizes, sc)
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                                   rtol=rtol, atol=atol)


INT_POW = """let y = compute(k) {
    for i in 0..n:
        out[i] = k[i] ** 3 + i64(k[i]) ** 5 - u8(abs(k[i])) ** 2
}
y
"""


def _int_pow(k):
    k64 = k.astype(np.int64)
    return (k ** 3).astype(np.int64) + k64 ** 5 - (np.abs(k).astype(np.uint8) ** 2).astype(np.int64)


def test_integer_power_on_metal(metal):
    k = RNG.integers(-40, 40, 37).astype(np.int32)
    np.testing.assert_array_equal(run_metal(metal, INT_POW, k=k), _int_pow(k))


def test_integer_power_on_cuda():
    k = RNG.integers(-40, 40, 37).astype(np.int32)
    cuda_checks(INT_POW, {"k": k}, _int_pow(k), 0, 0)


SPILLED = """let y = compute(x) {
    @workgroup(256)
    for r in 0..R:
        shared var t[C]
        for c in 0..C:
            t[c] = x[r, c]
        barrier()
        for c in 0..C:
            out[r, c] = t[C - 1 - c] - t[c]
}
y
"""


def _spilled_inputs():
    x = RNG.standard_normal((3, 9000)).astype(np.float32)     # 36 KB of shared floats
    return x, x[:, ::-1] - x


def test_spilled_shared_array_barrier_orders_device_memory_on_metal(metal):
    from zynbook.compiler.codegen import msl
    x, want = _spilled_inputs()
    np.testing.assert_array_equal(run_metal(metal, SPILLED, x=x), want)
    kernel, _, sizes, _ = lower_block(SPILLED, {"x": x})
    prog = msl.render_program(kernel, sizes)
    assert "scratch memory" in prog.schedule
    barriers = [line.strip() for line in prog.source.splitlines() if "threadgroup_barrier" in line]
    assert barriers and all("mem_device" in b for b in barriers), barriers


@pytest.mark.parametrize("device", [d for d in wanted_devices() if d.startswith(("vulkan", "gl"))])
def test_spilled_shared_array_barrier_orders_storage_on_webgpu(device):
    from zynbook.compiler.codegen import wgsl
    x, want = _spilled_inputs()
    got = zynbook.run(SPILLED, device=device, x=x)
    np.testing.assert_array_equal(np.asarray(got.numpy() if hasattr(got, "numpy") else got), want)
    kernel, _, sizes, _ = lower_block(SPILLED, {"x": x})
    text = wgsl.render_source(kernel, sizes=sizes)
    barriers = [line.strip() for line in text.splitlines() if "workgroupBarrier" in line]
    assert "var<workgroup>" not in text        # spilled to a storage buffer here too
    assert barriers and all("storageBarrier" in b for b in barriers), barriers


def test_spilled_shared_array_on_cuda():
    x, want = _spilled_inputs()
    cuda_checks(SPILLED, {"x": x}, want, 0, 0)


def _declared_threadgroup_bytes(source: str) -> int:
    """The bytes of the `threadgroup T name[n];` declarations in MSL text."""
    import re
    size = {"float": 4, "half": 2, "bfloat": 2, "int": 4, "uint": 4, "long": 8, "ulong": 8,
            "char": 1, "uchar": 1, "short": 2, "ushort": 2, "bool": 1}
    total = 0
    for base, lanes, n in re.findall(r"^\s*threadgroup (\w+?)(\d?) \w+\[(\d+)\];", source, re.M):
        total += size[base] * int(lanes or 1) * int(n)
    return total


FLASH_256 = A.flash(32, 32, "min") + "attn\n"        # K/V tiles in threadgroup memory


def test_threadgroup_bytes_are_what_the_msl_declares(metal):
    from zynbook.compiler.codegen import msl
    q, k, v = (RNG.standard_normal((1, 1, 40, 256)).astype(np.float32) for _ in range(3))
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / 16
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(run_metal(metal, FLASH_256, Q=q, K=k, V=v), want, rtol=1e-4, atol=1e-5)
    kernel, _, sizes, _ = lower_block(FLASH_256, {"Q": q, "K": k, "V": v})
    prog = msl.render_program(kernel, sizes)
    declared = _declared_threadgroup_bytes(prog.source)
    assert declared > 0 and prog.threadgroup_bytes == declared <= 32768, \
        (prog.threadgroup_bytes, declared)
