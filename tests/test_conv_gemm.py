"""Convolutions as implicit GEMMs (compiler/schedules/gemm.py) on the launch-IR emulator
against the reference executor: f32 (exact, on the FMA tiles), TF32 and f16 on tensor
cores, the gathered input by 4-byte cp.async copies whose zero fill is the padding
(a ring of 2 to 4 stages) or staged through registers; odd sizes, a 1x1 and a strided
convolution; the printed CUDA through nvcc; on a CUDA GPU, against numpy."""
from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cuda_cir_kernels as K  # noqa: E402
import nvcc_runs  # noqa: E402

from compute_testing import emulate_kernel, lower_block  # noqa: E402
from kernel_sources import SPEC_CONV2D, unannotated  # noqa: E402
from test_gemm_schedule import _allow_tf32, _tf32  # noqa: E402
from tolerances import tolerance  # noqa: E402
from zynbook.backends.cpu.reference import run_kernel  # noqa: E402
from zynbook.compiler.launch import ir  # noqa: E402
from zynbook.compiler.schedules.gemm import CONV_FMA_TILE, CONV_TILE, Gemm, GemmParams  # noqa: E402
from zynbook.compiler.targets import cuda_target  # noqa: E402

CONV = unannotated(SPEC_CONV2D)
# (batch, in channels, filters, height, width, kernel size, stride, padding)
CASES = {"3x3": (2, 5, 7, 9, 9, 3, 1, 1), "1x1": (2, 6, 9, 7, 5, 1, 1, 0),
         "stride2": (1, 3, 8, 13, 11, 3, 2, 0),
         # input channels a multiple of BK: K walked a filter tap (kh, kw) a slice
         "3x3_c16": (2, 16, 7, 9, 7, 3, 1, 1), "stride2_c32": (1, 32, 5, 9, 8, 3, 2, 1)}
# tensor-core tiles for the emulator: the cp.async ring (padded or swizzled, 2 to 4
# stages), two buffers through registers, and the convolution's 64 x 256 tile
PIPELINED = [GemmParams(32, 32, 16, 16, 16, 4, True, 2, False), GemmParams(32, 32, 16, 16, 16, 4, True, 3, True),
             GemmParams(32, 64, 16, 16, 32, 4, True, 4, True)]
WIDE = GemmParams(width=4, mma=True, swizzle=True, **CONV_TILE)
STAGED = GemmParams(32, 32, 16, 16, 16, 1, True)
HALF = [GemmParams(32, 32, 16, 16, 16, 8, True), GemmParams(64, 128, 32, 32, 32, 8, True),
        GemmParams(64, 256, 32, 32, 64, 8, True)]


def conv(case: str, dtype: str = "f32", filters: int | None = None):
    """(kernel, inputs, sizes) of the ZynML convolution at `case`'s sizes in `dtype`
    (`filters` of them where given)."""
    n, c, k, h, w, r, stride, pad = CASES[case]
    k = filters or k
    rng = np.random.default_rng(sum(CASES[case]))
    arrays = {"input": rng.standard_normal((n, c, h, w)).astype(dtype.replace("f", "float")),
              "kernel": (rng.standard_normal((k, c, r, r)) * 0.3).astype(dtype.replace("f", "float")),
              "bias": rng.standard_normal(k).astype(dtype.replace("f", "float"))}
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1
    kernel, ins, sizes, _ = lower_block(CONV, arrays, sizes=dict(stride=stride, padding=pad, out_h=oh, out_w=ow))
    return kernel, ins, sizes


def numpy_conv(x, wt, bias, stride, pad):
    """The convolution in f64, written out with numpy."""
    x, wt, bias = (np.asarray(a, np.float64) for a in (x, wt, bias))
    n, _, h, w = x.shape
    k, _, r, _ = wt.shape
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - r) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(r):
            out += np.einsum("bchw,oc->bohw", xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride],
                             wt[:, :, i, j])
    return out + bias[None, :, None, None]


def emulated(kernel, ins, sizes, params):
    prog = Gemm().build(kernel, cuda_target(), sizes, params)
    assert "implicit GEMM" in prog.schedule
    return prog, np.asarray(emulate_kernel(prog, kernel, ins, sizes), np.float64)


def async_copies(prog) -> dict:
    """{buffer: bytes a copy} of the cp.async copies of the program's kernel."""
    return {n.src: n.count * (2 if n.dtype in ("f16", "bf16") else 4)
            for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.AsyncCopy)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_f32_exact(case):
    kernel, ins, sizes = conv(case)
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    auto = Gemm().default(kernel, cuda_target(), sizes)
    # f32 stays exact unless the program allows TF32 (on Hopper: as split TF32 products)
    assert not auto.mma or auto.terms == 3
    # (16 threads for a 64-wide tile: each chunk of a thread in a row of its own)
    for p in (auto, GemmParams(16, 16, 8, 4, 4, 4), GemmParams(32, 32, 16, 4, 4, 4), GemmParams(16, 64, 8, 4, 16, 1)):
        prog, got = emulated(kernel, ins, sizes, p)
        if p.threads < p.bn:
            assert {n.count for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.Array)
                    and n.name.startswith("_hn")} == {p.bn * p.bk // p.threads}
        np.testing.assert_allclose(got, want, err_msg=p.describe(), **tolerance("f32", "contraction"))
    np.testing.assert_allclose(want, numpy_conv(*ins, sizes["stride"], sizes["padding"]), rtol=1e-5, atol=1e-4)


def test_exact_f32_takes_the_wide_fma_tile_for_few_filters_and_many_pixels():
    """Before Hopper, the ResNet block (64 filters, 100352 pixels) in exact f32 takes
    CONV_FMA_TILE (what a sweep of the FMA tiles found fastest); so does 3x3 (7 filters, 162
    pixels), checked against the reference in test_f32_exact; more filters keep the tile
    the sizes pick. On Hopper the ResNet block takes the split TF32 products' tile for few
    filters (test_gemm_split.py); 3x3's 7 filters, less than a warpgroup's 64, keep the FMA
    tile."""
    ampere = cuda_target((8, 0))
    kernel, sizes = resnet_block("f32")
    p = Gemm().default(kernel, ampere, sizes)
    assert not p.mma and {k: getattr(p, k) for k in CONV_FMA_TILE} == CONV_FMA_TILE
    p = Gemm().default(kernel, cuda_target(), sizes)
    assert (p.terms, p.bm, p.bn, p.tm, p.tn) == (3, 64, 256, 64, 64)
    kernel, _, sizes = conv("3x3")
    assert Gemm().default(kernel, ampere, sizes).bn == CONV_FMA_TILE["bn"]
    assert Gemm().default(kernel, cuda_target(), sizes).bn == CONV_FMA_TILE["bn"]     # M < 64
    kernel, _, sizes = conv("3x3", filters=96)
    assert Gemm().default(kernel, ampere, sizes).bn != CONV_FMA_TILE["bn"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_tf32_on_tensor_cores(case):
    exact, ins, sizes = conv(case)
    kernel = _allow_tf32(exact)
    want = numpy_conv(*[_tf32(a) for a in ins[:2]], ins[2], sizes["stride"], sizes["padding"])
    exact_want = np.asarray(run_kernel(exact, ins, sizes, {}), np.float64)
    for p in PIPELINED + [STAGED] + ([WIDE] if case == "3x3" else []):
        prog, got = emulated(kernel, ins, sizes, p)
        assert any(isinstance(n, ir.Mma) and n.dtype == "tf32" for n in ir.walk(prog.kernels[0]))
        np.testing.assert_allclose(got, want, err_msg=p.describe(), **tolerance("f32", "contraction"))
        np.testing.assert_allclose(got, exact_want, rtol=1e-2, atol=1e-2, err_msg=p.describe())
        if p.stages:            # the gathered input 4 bytes a copy, the filters' rows 16 where aligned
            copies = async_copies(prog)
            assert copies["u_input"] == 4, copies
            assert f"{p.stages} shared-memory stages by cp.async" in prog.schedule
    # the schedule's own choice takes the cp.async ring
    auto = Gemm().default(kernel, cuda_target(), sizes)
    assert auto.mma and auto.stages


def test_filters_read_along_their_flattened_rows():
    """A filter's (ic, kh, kw) are one contiguous K: 16-byte copies where K is a multiple of 4."""
    kernel, ins, sizes = conv("1x1")          # K = 6 in channels: not a multiple of 4
    prog, _ = emulated(_allow_tf32(kernel), ins, sizes, PIPELINED[0])
    assert async_copies(prog)["u_kernel"] == 4
    kernel, sizes, make, _ = K.conv2d(batch=1, cin=4, cout=16, h=6, w=6)
    ins = make(np.random.default_rng(3))
    kernel = _allow_tf32(kernel)
    prog, got = emulated(kernel, ins, sizes, PIPELINED[1])
    assert async_copies(prog) == {"u_kernel": 16, "u_input": 4}
    assert "kernel in 16-byte loads" in prog.schedule
    want = numpy_conv(*[_tf32(a) for a in ins[:2]], ins[2], 1, 1)
    np.testing.assert_allclose(got, want, **tolerance("f32", "contraction"))


def test_a_tile_row_is_decomposed_once_a_tile():
    """The output pixel (image, row, column) of the gathered operand's tile row lives in
    registers set once a tile: no division by the image's size inside the K loop."""
    kernel, ins, sizes = conv("3x3")
    prog = Gemm().build(_allow_tf32(kernel), cuda_target(), sizes, WIDE)
    arrays = {n.name: n.count for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.Array)}
    assert {arrays[f"_hn{j}"] for j in range(3)} == {1}     # all of a thread's copies in one row
    loop = next(n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.For) and n.var == "_kt")
    divisors = {n.b.value for n in ir.walk(loop) if isinstance(n, ir.Bin) and n.op in ("/", "%")
                and isinstance(n.b, ir.Lit)}
    assert sizes["out_w"] not in divisors and sizes["out_h"] * sizes["out_w"] not in divisors


@pytest.mark.parametrize("case", sorted(CASES))
def test_f16_on_tensor_cores(case):
    kernel, ins, sizes = conv(case, "f16")
    want = numpy_conv(*ins, sizes["stride"], sizes["padding"])
    ref = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    auto = Gemm().default(kernel, cuda_target(), sizes)
    assert auto.mma and not auto.stages     # 2-byte gathered elements go through registers
    # few filters and more than 128 pixels: the 64 x 256 tile
    pixels = sizes["batch"] * sizes["out_h"] * sizes["out_w"]
    assert (auto.bm, auto.bn) == (64, 256 if pixels > 128 else 128 if pixels > 64 else 64)
    for p in HALF:
        prog, got = emulated(kernel, ins, sizes, p)
        assert any(isinstance(n, ir.Mma) and n.dtype == "f16" for n in ir.walk(prog.kernels[0]))
        assert "m16n8k16 f16" in prog.schedule
        np.testing.assert_allclose(got, want, err_msg=p.describe(), **tolerance("f16", "contraction"))
        np.testing.assert_allclose(got, ref, err_msg=p.describe(), **tolerance("f16", "contraction"))


@pytest.mark.parametrize("target", ["metal", "cpp", "webgpu"])
@pytest.mark.parametrize("case", ["3x3", "3x3_c16"])
def test_every_target(target, case):
    """One algorithm for every target: the hoisted tile rows and the tap-by-tap K on Metal
    and C++ (sizes fixed), the hoisted rows over every size on WebGPU."""
    from zynbook.compiler.targets import cpu_target, metal_target, webgpu_target
    tgt = {"metal": metal_target(), "cpp": cpu_target(), "webgpu": webgpu_target()}[target]
    kernel, ins, sizes = conv(case)
    want = np.asarray(run_kernel(kernel, ins, sizes, {}), np.float64)
    p = GemmParams(16, 16, 16, 16, 16, 1) if target == "cpp" else GemmParams(16, 16, 8, 4, 4, 1)
    prog = Gemm().build(kernel, tgt, sizes, p)
    got = np.asarray(emulate_kernel(prog, kernel, ins, sizes), np.float64)
    np.testing.assert_allclose(got, want, err_msg=target, **tolerance("f32", "contraction"))


# channels last: the gathered input runs along K (its channels), the filters along N
NHWC = """let output = compute(input, kernel) {
    for b in 0..batch, oh in 0..out_h, ow in 0..out_w, oc in 0..out_channels:
        var sum = 0.0
        for kh in 0..kernel_h, kw in 0..kernel_w:
            for ic in 0..in_channels:
                let ih = oh + kh - 1
                let iw = ow + kw - 1
                if ih >= 0 and ih < in_h and iw >= 0 and iw < in_w:
                    sum += input[b, ih, iw, ic] * kernel[kh, kw, ic, oc]
        out[b, oh, ow, oc] = sum
}
output
"""


@pytest.mark.parametrize("channels", [5, 16])
def test_channels_last(channels):
    """The gathered input read along K: a thread's chunks in rows of their own (one hoisted
    tile row each), the filters in 16-byte copies along their output channels."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, 7, 6, channels)).astype(np.float32)
    wt = rng.standard_normal((3, 3, channels, 24)).astype(np.float32)
    kernel, ins, sizes, _ = lower_block(NHWC, {"input": x, "kernel": wt}, sizes=dict(out_h=7, out_w=6, in_h=7, in_w=6))
    want = numpy_conv(x.transpose(0, 3, 1, 2), wt.transpose(3, 2, 0, 1), np.zeros(24), 1, 1).transpose(0, 2, 3, 1)
    tf32 = _allow_tf32(kernel)
    want_tf32 = numpy_conv(_tf32(x).transpose(0, 3, 1, 2), _tf32(wt).transpose(3, 2, 0, 1), np.zeros(24),
                           1, 1).transpose(0, 2, 3, 1)
    for k, p, ref in [(kernel, GemmParams(32, 32, 16, 4, 4, 4), want), (tf32, PIPELINED[0], want_tf32),
                      (tf32, STAGED, want_tf32)]:
        prog, got = emulated(k, ins, sizes, p)
        np.testing.assert_allclose(got, ref, err_msg=p.describe(), **tolerance("f32", "contraction"))
        assert ("kernel in 16-byte loads" in prog.schedule) == (p.width == 4)
        assert {n.count for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.Array)
                and n.name.startswith("_hm")} == {p.bm * p.bk // p.threads}


def test_half_tiles_refuse_a_gathered_operand_in_the_ring():
    kernel, _, sizes = conv("3x3", "f16")
    with pytest.raises(ValueError, match="a gathered one is staged through registers"):
        Gemm().build(kernel, cuda_target(), sizes, GemmParams(32, 32, 16, 16, 16, 8, True, 3, True))
    assert not any(p.stages for p in Gemm().space(kernel, cuda_target(), sizes) if p.mma)


def tap_values(prog) -> set:
    """The values the copies (or staging loads) of a K slice's chunks give a filter tap's
    kh and kw: set from the slice's digits, or decomposed per chunk (a division)."""
    loop = next(n for n in ir.walk(prog.kernels[0]) if isinstance(n, ir.For) and n.var == "_kt")
    chunks = [n for n in ir.walk(loop) if isinstance(n, ir.For) and n.var.startswith("_r")]
    return {type(n.value).__name__ if not isinstance(n.value, ir.Bin) else n.value.op
            for c in chunks for n in ir.walk(c) if isinstance(n, ir.Decl) and n.name.startswith(("u_kh", "u_kw"))}


@pytest.mark.parametrize("case", ["3x3_c16", "stride2_c32"])
def test_a_k_slice_is_one_filter_tap(case):
    """Where BK divides the input channels, K is walked as (kh, kw, ic): a slice's tap is
    decomposed once, a column's channel is the slice's plus a constant, the padding guard
    and address of a tile row the same for all its columns but that constant."""
    exact, ins, sizes = conv(case)
    want = numpy_conv(*ins, sizes["stride"], sizes["padding"])
    want_tf32 = numpy_conv(*[_tf32(a) for a in ins[:2]], ins[2], sizes["stride"], sizes["padding"])
    tf32 = _allow_tf32(exact)
    for kernel, p, ref in [(exact, GemmParams(32, 32, 16, 4, 4, 4), want),
                           (tf32, PIPELINED[0], want_tf32), (tf32, PIPELINED[2], want_tf32),
                           (tf32, STAGED, want_tf32), (tf32, WIDE, want_tf32),
                           (tf32, replace(WIDE, bk=16), want_tf32)]:
        prog, got = emulated(kernel, ins, sizes, p)
        np.testing.assert_allclose(got, ref, err_msg=p.describe(), **tolerance("f32", "contraction"))
        # K in the loops' order where BK does not divide the channels
        tap_by_tap = sizes["in_channels"] % p.bk == 0
        assert (tap_values(prog) == {"Ref"}) == tap_by_tap, p.describe()
        if tap_by_tap:
            assert "kernel in 16-byte loads" not in prog.schedule     # the filters gathered too
    half, ins, sizes = conv(case, "f16")
    for p in HALF:
        prog, got = emulated(half, ins, sizes, p)
        np.testing.assert_allclose(got, numpy_conv(*ins, sizes["stride"], sizes["padding"]),
                                   err_msg=p.describe(), **tolerance("f16", "contraction"))
        # K in the loops' order where BK does not divide the channels
        assert (tap_values(prog) == {"Ref"}) == (sizes["in_channels"] % p.bk == 0), p.describe()


def test_the_space_offers_tiles_for_few_filters():
    kernel, _, sizes = conv("3x3")
    space = Gemm().space(_allow_tf32(kernel), cuda_target(), sizes)
    assert {(p.bm, p.bn) for p in space if p.mma and p.stages} >= {(64, 256), (64, 128), (64, 64)}


# ---- the bench's ResNet block (32 x 64 x 56 x 56, 64 filters 3 x 3) through nvcc ----

def resnet_block(dtype: str):
    from zynbook.compiler import dims
    from compute_testing import lower_signatures
    kind = "f16" if dtype == "f16" else "f32"
    lk = lower_signatures(CONV, {"input": (kind, 4), "kernel": (kind, 4), "bias": (kind, 1)},
                          {"stride": "i32", "padding": "i32", "out_h": "i32", "out_w": "i32"})
    kernel = lk.kernel
    shapes = {"input": (32, 64, 56, 56), "kernel": (64, 64, 3, 3), "bias": (64,)}
    sizes = dims.solve(lk, {b.name: shapes[lk.labels[b.name]] for b in kernel.inputs},
                       dict(stride=1, padding=1, out_h=56, out_w=56))
    return (_allow_tf32(kernel) if dtype == "tf32" else kernel), sizes


RESNET_DTYPES, RESNET_ARCHS = ["f32", "tf32", "f16"], ["sm_80", "sm_90"]


def _resnet_program(dtype, arch):
    from zynbook.compiler.codegen.cuda import render_cuda
    kernel, sizes = resnet_block(dtype)
    return render_cuda(kernel, sizes, (int(arch[3]), int(arch[4])))


def _resnet_flags(prog, arch):
    return (("-gencode", f"arch=compute_{arch[3:]}a,code={arch}a") if prog.arch_specific else
            (f"-arch={arch}",)) + ("-cubin",)      # (wgmma: sm_90a)


@pytest.fixture(scope="module")
def queued_compiles():
    """The six compiles queued at once (nvcc_runs.py): they run beside one another and the
    tests, each test then waits for its own."""
    futures = []
    for dtype in RESNET_DTYPES:
        for arch in RESNET_ARCHS:
            try:
                prog = _resnet_program(dtype, arch)
            except Exception:       # noqa: BLE001 (the test itself says what went wrong)
                continue
            futures.append(nvcc_runs.queue(prog.source, _resnet_flags(prog, arch)))
    yield
    nvcc_runs.cancel(futures)


@pytest.mark.skipif(nvcc_runs.NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("dtype", RESNET_DTYPES)
@pytest.mark.parametrize("arch", RESNET_ARCHS)
def test_nvcc_compiles_the_resnet_block(dtype, arch, queued_compiles):
    prog = _resnet_program(dtype, arch)
    assert "implicit GEMM" in prog.schedule
    # (exact f32 on Hopper: three TF32 products, test_gemm_split.py)
    assert ("tensor cores" in prog.schedule) == (dtype != "f32" or arch == "sm_90")
    if dtype == "tf32":
        assert "cp.async" in prog.schedule and "zyn_cp_async4" in prog.source
    res = nvcc_runs.run(prog.source, _resnet_flags(prog, arch))
    assert res.returncode == 0, res.stderr[-3000:]


# ---- on a CUDA GPU, against numpy ----

def _gpu():
    try:
        from zynbook.backends import cuda as backend
        found = backend.discover()
    except Exception:       # no CuPy, no driver
        return None
    return found[0] if found else None


GPU = _gpu()


@pytest.mark.gpu
@pytest.mark.skipif(GPU is None, reason="no CUDA GPU (or no CuPy)")
@pytest.mark.parametrize("dtype", ["f32", "tf32", "f16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_convolutions_on_the_gpu(dtype, case):
    from zynbook.compiler.schedules.base import Choice
    # filters enough for the GEMM schedule to take the convolution (MIN_SIDE)
    kernel, ins, sizes = conv(case, "f16" if dtype == "f16" else "f32", filters=24)
    kernel = _allow_tf32(kernel) if dtype == "tf32" else kernel
    x, wt = (_tf32(a) for a in ins[:2]) if dtype == "tf32" else ins[:2]
    want = numpy_conv(x, wt, ins[2], sizes["stride"], sizes["padding"])
    params = [None] + {"f32": [], "tf32": PIPELINED + [STAGED, WIDE], "f16": HALF}[dtype]
    tol = {"f32": 1e-4, "tf32": 1e-3, "f16": 2e-2}[dtype]
    for p in params:
        plan = GPU.prepare(kernel, sizes) if p is None else GPU.prepare(kernel, sizes, params=Choice("gemm", p))
        out, _ = plan.launch(ins, {})
        got = np.asarray(GPU.to_host(out), np.float64).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(), err_msg=str(p))
