"""Attention written in many ways (renamed, inlined, a bool or float mask, a causal condition,
other scales, one-pass online softmax, flash with blocks of 48 or min(...) tiles) equals numpy
attention on every device present, gets the attention schedule there, and a flash body that
is not attention computes what it says (the reference), never attention.

Devices: the CPU reference, `cpu:native`, every Vulkan adapter (lavapipe here), CUDA GPUs;
the MSL through the Metal emulator; the CUDA C through nvcc where no GPU is present."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import zynbook
from zynbook.backends.cpu.reference import run_kernel
from zynbook.backends.registry import get_device
from zynbook.compiler import cir
from zynbook.compiler.codegen import c as c_render
from zynbook.compiler.codegen import cuda, msl, wgsl
from zynbook.errors import ZynMLDeviceError

import attention_sources as A
import nvcc_runs
from compute_testing import lower_block
from tolerances import assert_within

RNG = np.random.default_rng(2026)
TOL = (2e-4, 2e-5)


def np_attention(Q, K, V, scale, mask=None, empty="zero"):
    """softmax(Q K^T * scale) V in f64, keys where `mask` is False left out; a query
    without keys gives 0 ("zero") or NaN ("nan")."""
    s = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.exp(s - np.where(np.isfinite(mx), mx, 0.0))
        out = np.einsum("bhij,bhjd->bhid", p, V.astype(np.float64)) / p.sum(-1, keepdims=True)
    if empty == "zero":
        out = np.nan_to_num(out, nan=0.0)
    return out


def _case(text, seq, d=16, mask=None, scale="sqrt", empty="zero", causal=False, batch=2, heads=3):
    Q, K, V = (RNG.standard_normal((batch, heads, seq, d)).astype(np.float32) for _ in range(3))
    arrays = {"Q": Q, "K": K, "V": V}
    m = None
    if mask is not None:
        m = RNG.random((seq, seq)) < 0.7
        m[:, 0] = True                       # every query has a key ...
        m[seq // 2, :] = False               # ... but one
        arrays["allowed"] = m if mask == "bool" else m.astype(np.float32)
    if causal:
        m = np.tril(np.ones((seq, seq), bool))
    scalars = {"temp": 0.3} if scale == "scalar" else {}
    sc = {"sqrt": 1 / np.sqrt(d), "const": 0.125, "scalar": 0.3}[scale]
    return text, arrays, scalars, np_attention(Q, K, V, sc, m, empty)


CASES = {
    "three_pass_bool_37": _case(A.three_pass("bool"), 37, mask="bool"),
    "three_pass_float_100": _case(A.three_pass("float"), 100, mask="float"),
    "three_pass_causal_37": _case(A.three_pass("causal"), 37, causal=True),
    "three_pass_causal_rev_100": _case(A.three_pass("causal_rev"), 100, causal=True),
    "three_pass_scale_const_37": _case(A.three_pass("none", "const"), 37, scale="const"),
    "three_pass_scalar_bool_37": _case(A.three_pass("bool", "scalar"), 37, mask="bool", scale="scalar"),
    "three_pass_renamed_inline_100": _case(
        A.three_pass("causal", names=("bb", "hh", "row", "col", "e", "peak", "den", "total", "sc"),
                     inline=True), 100, causal=True),
    "three_pass_d24_causal_37": _case(A.three_pass("causal"), 37, d=24, causal=True),
    "online_stats_bool_37": _case(A.online_stats("bool"), 37, mask="bool", empty="nan"),
    "online_stats_const_100": _case(A.online_stats("none", "const"), 100, scale="const"),
    "one_pass_causal_37": _case(A.one_pass("causal"), 37, causal=True),
    "one_pass_bool_100": _case(A.one_pass("bool"), 100, mask="bool", empty="nan"),
    "flash_48_100": _case(A.flash(48), 100),
    "flash_48_min_37": _case(A.flash(48, tile="min"), 37),
    "flash_64_min_100": _case(A.flash(64, tile="min"), 100),
    "flash_32x16_reordered_37": _case(A.flash_reordered(), 37, scale="const"),
    "flash_query_scaled_37": _case(A.flash(32).replace(
        "Q[b, h, q_block:q_block+32] @", "(Q[b, h, q_block:q_block+32] * 0.5) @"), 37, scale="const"),
    "flash_renamed_const_100": _case(A.flash(48, renamed=True, scale="const"), 100, scale="const"),
}

def _bshd_case(text, seq, d=8, causal=False, scale=None):
    """Tensors laid out [batch, seq, heads, head_dim] (tutorial 05)."""
    q, k, v = (RNG.standard_normal((2, seq, 3, d)).astype(np.float32) for _ in range(3))
    t = lambda x: x.transpose(0, 2, 1, 3)
    m = np.tril(np.ones((seq, seq), bool)) if causal else None
    want = t(np_attention(t(q), t(k), t(v), scale or 1 / np.sqrt(d), m))
    return text, {"q": q, "k": k, "v": v}, {}, want


CASES["flash_bshd_min_100"] = _bshd_case(A.FLASH_BSHD, 100)
CASES["flash_bshd_min_37"] = _bshd_case(A.FLASH_BSHD, 37, d=16)
CASES["three_pass_bshd_causal_37"] = _bshd_case(A.ATTENTION_BSHD, 37, d=16, causal=True, scale=0.25)

# what a flash body without the rescale really computes is the reference's business
NOT_ATTENTION = {"flash_no_rescale_100": _case(A.flash(16, rescale=False), 100),
                 "flash_no_rescale_37": _case(A.flash(16, rescale=False), 37)}


_LOWERED: dict = {}


def lowered(name):
    if name not in _LOWERED:
        text, arrays, scalars, _ = {**CASES, **NOT_ATTENTION}[name]
        _LOWERED[name] = lower_block(text, arrays, scalars, {})
    return _LOWERED[name]


def devices():
    out = []
    for d in zynbook.compute_devices():
        if d["id"] == "cpu:native" or d.get("backend") in ("vulkan", "cuda", "metal"):
            out.append(d["id"])
    return out


DEVICES = devices()


# ------------------------------------------------------------------ the reference


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_equals_numpy(name):
    k, ins, sz, sc = lowered(name)
    got = np.asarray(run_kernel(k, ins, sz, sc))
    assert_within(got, CASES[name][3], *TOL)


@pytest.mark.parametrize("name", sorted(NOT_ATTENTION))
def test_non_flash_body_is_not_attention_in_the_reference(name):
    k, ins, sz, sc = lowered(name)
    got = np.asarray(run_kernel(k, ins, sz, sc), np.float64)
    assert np.nanmax(np.abs(got - NOT_ATTENTION[name][3])) > 0.05


# ------------------------------------------------------------------ every device


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_variant_equals_numpy_on_device(device, name):
    k, ins, sz, sc = lowered(name)
    got, launch = _launch(device, k, ins, sz, sc)
    assert_within(got, CASES[name][3], *TOL)
    schedule = str((launch.geometry or {}).get("schedule", ""))
    assert "flash" in schedule or "attention" in schedule, schedule      # the attention schedule


def _launch(device, kernel, inputs, sizes, scalars):
    """A device launch with its result read back to the host (CuPy arrays included)."""
    dev = get_device(device)
    got, launch = dev.launch(kernel, inputs, sizes, scalars)
    return np.asarray(dev.to_host(got)), launch


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device,name", [(d, n) for d in DEVICES for n in sorted(NOT_ATTENTION)])
def test_non_flash_body_equals_reference_on_device(device, name):
    """What the body computes, on the generic schedule, or a clear refusal."""
    k, ins, sz, sc = lowered(name)
    try:
        got, _ = _launch(device, k, ins, sz, sc)
    except ZynMLDeviceError as exc:
        assert "cannot compile" in exc.message or "tile" in exc.message
        return
    want = np.asarray(run_kernel(k, ins, sz, sc))
    assert_within(np.asarray(got), want, *TOL)


# ------------------------------------------------------ schedules, rendered as text


def wgsl_as_the_device_renders(k, sz):
    """The WGSL of `k` specialised, as the WebGPU device renders it, on which sizes are equal
    at the launch (and on the sizes, where no program serves every size set)."""
    from zynbook.backends.webgpu.device import _equal_sizes
    return wgsl.render(k, wgsl.sized_for(wgsl.WGSLOptions(equal_sizes=_equal_sizes(k, sz)), k, sz))


@pytest.mark.parametrize("name", sorted(CASES))
def test_wgsl_takes_the_attention_schedule(name):
    k, _, sz, _ = lowered(name)
    prog = wgsl_as_the_device_renders(k, sz)
    assert "(attention: " in prog.schedule, prog.notes


@pytest.mark.parametrize("name", sorted(NOT_ATTENTION))
def test_wgsl_does_not_run_a_non_flash_body_as_attention(name):
    k, _, sz, _ = lowered(name)
    prog = wgsl_as_the_device_renders(k, sz)
    assert "(attention: " not in prog.schedule
    assert any("rescaled" in n for n in prog.notes), prog.notes


@pytest.mark.parametrize("lang", ["cuda", "msl", "cpp"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_msl_cpp_take_the_attention_schedule(name, lang):
    k, _, sz, _ = lowered(name)
    if lang == "cuda":
        assert "attention" in cuda.render_cuda(k, sz).schedule
    elif lang == "msl":
        assert msl.schedule_name(msl.render_program(k, sz)) == "flash"
    else:
        assert "attention" in c_render.render_program(k, sz).schedule


@pytest.mark.parametrize("name", sorted(NOT_ATTENTION))
def test_cuda_msl_cpp_do_not_run_a_non_flash_body_as_attention(name):
    k, _, sz, _ = lowered(name)
    for render in (cuda.render_cuda, msl.render_program, c_render.render_program):
        try:
            prog = render(k, sz)
        except ZynMLDeviceError as exc:         # refused clearly: no attention either
            assert "cannot compile" in exc.message
            continue
        assert "attention" not in prog.schedule


# ----------------------------------------------------------------- Metal emulator

try:
    from metal_emu import emulator as emu
    HAVE_EMU = shutil.which(emu.CXX) is not None
except Exception:                      # noqa: BLE001
    HAVE_EMU = False

EMU_CASES = ["flash_bshd_min_100", "three_pass_bshd_causal_37", "three_pass_bool_37", "three_pass_causal_37", "three_pass_scale_const_37",
             "three_pass_scalar_bool_37", "one_pass_bool_100", "flash_48_min_37",
             "flash_32x16_reordered_37", "flash_no_rescale_37"]


@pytest.mark.skipif(not HAVE_EMU, reason="no C++ compiler for the Metal emulator")
@pytest.mark.parametrize("name", EMU_CASES)
def test_msl_in_the_emulator(name):
    k, ins, sz, sc = lowered(name)
    try:
        prog = msl.render_program(k, sz)
    except ZynMLDeviceError as exc:            # a body that is not attention may be refused
        assert name in NOT_ATTENTION and "cannot compile" in exc.message
        return
    emu.build(prog)
    got = emu.run(prog, ins, cir.output_shape(k, sz), sc)
    want = CASES[name][3] if name in CASES else np.asarray(run_kernel(k, ins, sz, sc))
    assert_within(got, want, *TOL)


# ------------------------------------------------------------------------- nvcc

NVCC = nvcc_runs.NVCC
NVCC_CASES = ["three_pass_bool_37", "three_pass_float_100", "three_pass_causal_37",
              "three_pass_scalar_bool_37", "three_pass_d24_causal_37", "one_pass_bool_100",
              "flash_48_100", "flash_48_min_37", "flash_bshd_min_100", "flash_bshd_min_37",
              "three_pass_bshd_causal_37"]


def _ptx_flags(prog):
    return ("--ptx", "-arch=sm_90a" if prog.arch_specific else "-arch=sm_90")   # warpgroup MMAs: sm_90a's own


@pytest.fixture(scope="module")
def queued_compiles():
    """The nvcc compiles of test_cuda_compiles queued at once (nvcc_runs.py): they run beside
    one another and the tests, each test then waits for its own."""
    futures = []
    for name in NVCC_CASES:
        try:
            k, _, sz, _ = lowered(name)
            prog = cuda.render_cuda(k, sz)
        except Exception:       # noqa: BLE001 (the test itself says what went wrong)
            continue
        futures.append(nvcc_runs.queue(prog.source, _ptx_flags(prog)))
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", NVCC_CASES)
def test_cuda_compiles(name, queued_compiles):
    k, _, sz, _ = lowered(name)
    prog = cuda.render_cuda(k, sz)
    res = nvcc_runs.run(prog.source, _ptx_flags(prog))
    assert res.returncode == 0, res.stderr[-4000:]


# ------------------------------------------------------------- tutorial 05 for CUDA


def _tutorial05_kernels(monkeypatch):
    """(kernel, sizes) of every launch of notebooks/05_transformer_block.ipynb, run on the
    CPU reference (`@device("auto")` resolved to it)."""
    import json
    from pathlib import Path
    from zynbook.backends import registry
    from zynbook.backends.cpu import device as cpu_device
    nb = json.loads((Path(__file__).parent.parent / "notebooks" /
                     "05_transformer_block.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    py = next(c for c in cells if c.startswith("%%python") and "def layer" in c)
    env = {"np": np}
    exec(py.split("\n", 1)[1], env)                       # noqa: S102 (the notebook's own setup)
    zyn = [c for c in cells if not c.startswith("%") and "compute(" in c or c.startswith("let y0")]
    seen = []
    orig = cpu_device.CpuDevice.launch

    def record(self, kernel, inputs, sizes, scalars):
        seen.append((kernel, dict(sizes)))
        return orig(self, kernel, inputs, sizes, scalars)
    monkeypatch.setattr(cpu_device.CpuDevice, "launch", record)
    monkeypatch.setattr(registry, "best_device_id", lambda: "cpu")
    session = zynbook.Session(device="cpu")
    for cell in zyn:
        session.run(cell, model=env["model"])
    return seen


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_tutorial05_kernels_render_and_compile_for_cuda(monkeypatch):
    seen = _tutorial05_kernels(monkeypatch)
    kinds = {k.kernel_type.kind for k, _ in seen}
    assert "flash_attention" in kinds
    done = set()
    compiles = []
    for kernel, sizes in seen:
        key = (kernel.stable_hash(), tuple(sorted(sizes.items())))
        if key in done:
            continue
        done.add(key)
        prog = cuda.render_cuda(kernel, sizes)
        if kernel.kernel_type.kind == "flash_attention":
            assert "attention" in prog.schedule, prog.notes
        compiles.append(nvcc_runs.queue(prog.source, _ptx_flags(prog)))      # all at once
    for fut in compiles:
        res = fut.result()
        assert res.returncode == 0, res.stderr[-4000:]


# ---------------------------------------------------------------------- half precision

F16_CASES = {"three_pass_bool_f16_37": (A.three_pass("bool"), True),
             "flash_48_f16_37": (A.flash(48), False)}


def _f16(name):
    text, masked = F16_CASES[name]
    rng = np.random.default_rng(16)
    arrays = {n: rng.standard_normal((2, 3, 37, 16)).astype(np.float16) for n in ("Q", "K", "V")}
    if masked:
        m = rng.random((37, 37)) < 0.7
        m[:, 0] = True
        arrays["allowed"] = m
    return lower_block(text, arrays, {}, {})


@pytest.mark.skipif(not DEVICES, reason="no device here but the reference")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(F16_CASES))
def test_f16_attention_equals_reference_on_device(device, name):
    k, ins, sz, sc = _f16(name)
    got, _ = _launch(device, k, ins, sz, sc)
    want = np.asarray(run_kernel(k, ins, sz, sc), np.float32)
    assert_within(np.asarray(got, np.float32), want, 1e-2, 1e-2)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", sorted(F16_CASES))
def test_f16_attention_compiles_for_cuda(name):
    k, _, sz, _ = _f16(name)
    prog = cuda.render_cuda(k, sz)
    assert "attention" in prog.schedule
    res = nvcc_runs.run(prog.source, _ptx_flags(prog))
    assert res.returncode == 0, res.stderr[-4000:]
