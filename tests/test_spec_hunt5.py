"""Programs written from the spec's text (zynml-compute-system.md, gpu-kernel-library.md) and
docs/language.md as an outside tester writes them: reductions of every operator and dtype
with odd sizes, scans written as loops, shared arrays of other dtypes, fusion of
pipelines with reductions, several devices in one program, and the kernel library's less
common options. Each runs on every device present and is compared with numpy written here;
the CUDA and Metal forms run on the launch-IR emulator and CUDA compiles with nvcc."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, emulate_kernel, lower_block, wanted_devices
import nvcc_runs

DEVICES = wanted_devices()
RNG = np.random.default_rng(5150)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


def _emulated_and_compiled(src, arrays, want):
    """`src`'s one block as launch IR for CUDA and Metal on the emulator, against `want`,
    and its CUDA source through nvcc where it is installed."""
    from zynbook.compiler import schedules
    from zynbook.compiler.codegen import cuda
    from zynbook.compiler.targets import cuda_target, metal_target
    k, ins, sizes, scalars = lower_block(src, arrays)
    for tgt in (cuda_target(), cuda_target((8, 0)), metal_target()):
        prog = schedules.build(k, tgt, sizes)
        assert prog is not None, schedules.why_none(k, tgt, sizes)
        got = emulate_kernel(prog, k, ins, sizes, scalars)
        assert_equals_numpy(got.reshape(np.shape(want)), want, 0)
    if nvcc_runs.NVCC is not None:
        prog = cuda.render_cuda(k, sizes)
        res = nvcc_runs.run(prog.source, ("--ptx", "-arch=sm_90a" if prog.arch_specific
                                          else "-arch=sm_90"))
        assert res.returncode == 0, res.stderr[-4000:]


# ------------------------------------------------ argmax / argmin along an axis of a tile

_AM = RNG.integers(-2, 3, (7, 33)).astype(np.float32)
_AM[2, 5] = _AM[4, 0] = _AM[4, 30] = np.nan       # numpy's: the first NaN wins
_T3 = RNG.integers(-3, 3, (4, 5, 6)).astype(np.int32)
_H = RNG.standard_normal((6, 9)).astype(np.float16)

_ARG_AXIS = {
    "fused argmax axis 0": ("let r = compute(m) {\n    @kernel fused\n"
                            "    out = reduce(argmax, m, axis=0)\n}\nr\n", {"m": _AM},
                            np.argmax(_AM, 0)),
    "fused argmin axis -1": ("let r = compute(m) {\n    @kernel fused\n"
                             "    out = reduce(argmin, m, axis=-1)\n}\nr\n", {"m": _AM},
                             np.argmin(_AM, 1)),
    "argmax of a clipped slice per iteration": (
        "let r = compute(t3) {\n    for b in 0..B:\n"
        "        out[b] = reduce(argmax, t3[b, 1:4], axis=0)\n}\nr\n", {"t3": _T3},
        np.argmax(_T3[:, 1:4], 1)),
    "argmin of a tile expression per iteration": (
        "let r = compute(t3) {\n    for b in 0..B:\n"
        "        out[b] = reduce(argmin, t3[b] * 2 - t3[b, 0:1], axis=1)\n}\nr\n",
        {"t3": _T3}, np.argmin(_T3 * 2 - _T3[:, 0:1], 2)),
    "argmax of a half where": ("let r = compute(h) {\n    @kernel fused\n"
                               "    out = reduce(argmax, where(h > 0.0, h, -h), axis=0)\n}\nr\n",
                               {"h": _H}, np.argmax(np.abs(_H), 0)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(_ARG_AXIS))
def test_argmax_and_argmin_along_an_axis_of_a_tile(name, device):
    """`reduce(argmax, tile, axis=k)` inside a body is numpy's argmax along that axis on
    every device: the compiled devices refused it ("argmax along an axis of a tile inside a
    kernel body"), though the reference ran it and argmax of a whole tile compiled."""
    src, inputs, want = _ARG_AXIS[name]
    assert_equals_numpy(_run(device, src, **inputs), want.astype(np.int64), 0)


@pytest.mark.parametrize("name", ["fused argmax axis 0",
                                  "argmin of a tile expression per iteration"])
def test_argmax_along_an_axis_of_a_tile_for_cuda_and_metal(name):
    src, inputs, want = _ARG_AXIS[name]
    _emulated_and_compiled(src, inputs, want.astype(np.int64))


# ------------------------------------------------ programs of the spec's kernel kinds

_X = _f32(7, 1003)
_XI = RNG.integers(-100, 100, (7, 1003)).astype(np.int32)
_I8 = RNG.integers(-128, 128, 1003).astype(np.int8)
_U32 = RNG.integers(0, 2 ** 32, 1003, dtype=np.uint64).astype(np.uint32)
_B = RNG.random((5, 7)) > 0.8
_T = _f32(3, 5, 4)
_XS = _f32(5, 48)
_TIES = RNG.integers(0, 4, 1003).astype(np.int32)
_V = _f32(1003)
_V[[5, 600]] = np.nan


def _segmented(xi, seg):
    return np.concatenate([np.cumsum(xi[:, k:k + seg], 1) for k in range(0, xi.shape[1], seg)],
                          1).astype(np.int32)


def _shared_2d_want(xs):
    xh = xs.astype(np.float16).astype(np.float32).reshape(len(xs), 6, 8)
    j = np.arange(48)
    return xh[:, j % 6, j // 6] + 1


PROGRAMS = {
    # reductions: every operator, integer widths that wrap, ties read from the far end
    "argmin along the first axis of i16": (
        "let r = compute(m) {\n    @kernel reduce(argmin, axis=0)\n"
        "    for i in 0..rows, j in 0..cols:\n        yield (m[i, j], i)\n}\nr\n",
        {"m": _XI[:, :33].astype(np.int16) % 3}, np.argmin(_XI[:, :33].astype(np.int16) % 3, 0),
        0),
    "argmax of reversed positions keeps the smallest index yielded": (
        "let n = 1003\nlet r = compute(x) {\n    @kernel reduce(argmax)\n    for i in 0..n:\n"
        "        yield (x[i], n - 1 - i)\n}\nr\n", {"x": _TIES},
        np.int64(min(1002 - i for i in np.flatnonzero(_TIES == _TIES.max()))), 0),
    "argmax with NaN is the first NaN": (
        "let r = compute(v) {\n    @kernel reduce(argmax)\n    for i in 0..n:\n"
        "        yield (v[i], i)\n}\nr\n", {"v": _V}, np.int64(5), 0),
    "sum of u32 wraps": (
        "let r = compute(u) {\n    @kernel reduce(+)\n    for i in 0..n:\n        yield u[i]\n}\nr\n",
        {"u": _U32}, _U32.sum(dtype=np.uint32), 0),
    "sum of i8 wraps": (
        "let r = compute(a) {\n    @kernel reduce(+)\n    for i in 0..n:\n        yield a[i]\n}\nr\n",
        {"a": _I8}, _I8.sum(dtype=np.int8), 0),
    "max of bools along an axis is or": (
        "let r = compute(b) {\n    @kernel reduce(max, axis=1)\n"
        "    for i in 0..rows, j in 0..cols:\n        yield b[i, j]\n}\nr\n", {"b": _B}, _B.any(1), 0),
    "sum along the middle of three loops": (
        "let r = compute(t) {\n    @kernel reduce(+, axis=1)\n"
        "    for a in 0..A, b in 0..B, c in 0..C:\n        yield t[a, b, c]\n}\nr\n", {"t": _T},
        _T.sum(1), 1e-5),
    "or of a computed mask along the first axis": (
        "let r = compute(t) {\n    @kernel reduce(or, axis=0)\n    for i in 0..rows, j in 0..cols:\n"
        "        yield t[i, j] > 1.5 and i % 2 == 0\n}\nr\n", {"t": _X[:, :33].copy()},
        ((_X[:, :33] > 1.5) & (np.arange(7)[:, None] % 2 == 0)).any(0), 0),
    "masked sum under an if of data and position": (
        "let r = compute(z) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
        "        if z[i] > 0.5 or i % 7 == 3:\n            yield z[i] * 2.0\n}\nr\n",
        {"z": _X[0]}, np.float32((_X[0][(_X[0] > 0.5) | (np.arange(1003) % 7 == 3)] * 2).sum()),
        1e-4),
    # scans written as loops carrying a running value
    "inclusive prefix sum of rows": (
        "let y = compute(x) {\n    for i in 0..rows:\n        var s = 0.0\n        for j in 0..cols:\n"
        "            s += x[i, j]\n            out[i, j] = s\n}\ny\n", {"x": _X},
        np.cumsum(_X.astype(np.float64), 1), 1e-3),
    "exclusive prefix sum of i32 columns": (
        "let y = compute(xi) {\n    for j in 0..cols:\n        var s = 0\n        for i in 0..rows:\n"
        "            out[i, j] = s\n            s += xi[i, j]\n}\ny\n", {"xi": _XI},
        (np.cumsum(_XI, 0) - _XI).astype(np.int32), 0),
    "running max from the end": (
        "let cols = 1003\nlet y = compute(xi) {\n    for i in 0..rows:\n"
        "        var m = xi[i, cols - 1]\n        for j in 0..cols:\n"
        "            m = max(m, xi[i, cols - 1 - j])\n            out[i, cols - 1 - j] = m\n}\ny\n",
        {"xi": _XI}, np.maximum.accumulate(_XI[:, ::-1], 1)[:, ::-1], 0),
    "segmented scan restarting every 10": (
        "let y = compute(xi) {\n    for i in 0..rows:\n        var s = 0\n        for j in 0..cols:\n"
        "            if j % 10 == 0:\n                s = 0\n            s += xi[i, j]\n"
        "            out[i, j] = s\n}\ny\n", {"xi": _XI}, _segmented(_XI, 10), 0),
    # shared arrays of other dtypes and shapes, odd workgroups
    "2-D f16 shared array read transposed": (
        "let y = compute(xs) {\n    @workgroup(48)\n    for i in 0..rows:\n"
        "        shared var t[6, 8]: f16\n        for j in 0..cols:\n"
        "            t[j / 8, j % 8] = f16(xs[i, j])\n        barrier()\n        for j in 0..cols:\n"
        "            out[i, j] = f32(t[j % 6, j / 6]) + 1.0\n}\ny\n", {"xs": _XS},
        _shared_2d_want(_XS), 0),
    "bool shared array of a workgroup of one": (
        "let y = compute(xs) {\n    @workgroup(1)\n    for i in 0..rows:\n"
        "        shared var t[cols]: bool\n        for j in 0..cols:\n"
        "            t[j] = xs[i, j] > 0.0\n        barrier()\n        for j in 0..cols:\n"
        "            if t[(j + 1) % cols]:\n                out[i, j] = 1\n}\ny\n", {"xs": _XS},
        (np.roll(_XS, -1, 1) > 0).astype(np.int32), 0),
    "two shared arrays over two barriers": (
        "let y = compute(xs) {\n    @workgroup(16)\n    for i in 0..rows:\n        shared var a[cols]\n"
        "        shared var b[cols]\n        for j in 0..cols:\n            a[j] = xs[i, j]\n"
        "        barrier()\n        for j in 0..cols:\n            b[j] = a[j] + a[(j + 1) % cols]\n"
        "        barrier()\n        for j in 0..cols:\n            out[i, j] = b[j] * a[cols - 1 - j]\n"
        "}\ny\n", {"xs": _XS}, (_XS + np.roll(_XS, -1, 1)) * _XS[:, ::-1], 1e-6),
    # tiles
    "blocked matmul of clipped tiles": (
        "let r = compute(m, w) {\n    for i in 0..rows step 3:\n        var acc = zeros(3, 5)\n"
        "        for k in 0..33 step 4:\n            acc = acc + m[i:i+3, k:k+4] @ w[k:k+4]\n"
        "        out[i:i+3] = acc\n}\nr\n", {"m": _X[:, :33].copy(), "w": _X[:5, :33].T.copy()},
        _X[:, :33] @ _X[:5, :33].T, 1e-4),
    "integer tile arithmetic and reductions": (
        "let r = compute(mi) {\n    for i in 0..rows:\n"
        "        out[i] = mi[i] * 3 % 4 + reduce(min, mi[i]) - reduce(*, mi[i, 0:3])\n}\nr\n",
        {"mi": _XI[:, :33] % 9},
        (np.fmod(_XI[:, :33] % 9 * 3, 4) + (_XI[:, :33] % 9).min(1, keepdims=True)
         - np.prod(_XI[:, :3] % 9, 1, keepdims=True)).astype(np.int32), 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_equals_numpy(name, device):
    src, inputs, want, tol = PROGRAMS[name]
    assert_equals_numpy(_run(device, src, **inputs), np.asarray(want), tol)


# ------------------------------------------------ names the target languages reserve

# C, C++, CUDA, MSL, WGSL and GLSL keywords, builtins and types, names with digits and
# underscores, the names generated code uses for its own values
_NAMES = ("int float half double long static const auto register volatile signed unsigned "
          "struct union class template typename namespace using switch default case goto "
          "sizeof alignof constexpr nullptr NULL asm inline extern main this new delete "
          "private threadIdx blockIdx blockDim gridDim warpSize __global__ __device__ "
          "__shared__ __syncthreads __half __x _ a1_2 atomicAdd printf kernel device thread "
          "threadgroup constant uint uchar bfloat float4 half2 simd_sum as_type "
          "threadgroup_barrier mem_flags fn loop select bitcast vec4 mat2x2 ptr array "
          "workgroup storage uniform override discard enable requires sampler texture "
          "out_ gid lid tid acc max min exp sqrt fma isnan abs rint FLT_MAX INFINITY NAN "
          "M_PI_F HUGE_VALF INT_MAX std metal").split()
_NAMES_SRC = ("let y = compute(x) {\n    for i in 0..n:\n" +
              "".join(f"        let {n} = x[i] * {k + 1}.0\n" for k, n in enumerate(_NAMES)) +
              f"        out[i] = {' + '.join(_NAMES)}\n}}\ny\n")
_NAMES_X = _f32(9)
_NAMES_WANT = _NAMES_X * np.float32(len(_NAMES) * (len(_NAMES) + 1) // 2)

_SPELT_SRC = """let y = compute(kernel, device) {
    for thread in 0..n:
        shared var threadgroup[4]
        for constant in 0..4:
            threadgroup[constant] = kernel[thread] + float(constant)
        barrier()
        var half = 0.0
        for uint in 0..4:
            half += threadgroup[uint] * device[thread]
        out[thread] = half
}
y
"""
_SPELT_IN = {"kernel": _f32(33), "device": _f32(33)}
_SPELT_WANT = (4 * _SPELT_IN["kernel"] + 6) * _SPELT_IN["device"]


@pytest.mark.parametrize("device", DEVICES)
def test_names_the_target_languages_reserve(device):
    assert_equals_numpy(_run(device, _NAMES_SRC, x=_NAMES_X), _NAMES_WANT, 1e-5)
    assert_equals_numpy(_run(device, _SPELT_SRC, **_SPELT_IN), _SPELT_WANT, 1e-5)


@pytest.mark.parametrize("src, inputs, want", [(_NAMES_SRC, {"x": _NAMES_X}, _NAMES_WANT),
                                               (_SPELT_SRC, _SPELT_IN, _SPELT_WANT)])
def test_names_the_target_languages_reserve_in_msl_and_cuda(monkeypatch, src, inputs, want):
    """The MSL of these names runs on the Metal model and the CUDA C compiles: the model
    took `double` in a comment quoting the ZynML line (`// line 72: let double = ...`) and
    the name `u___global__` for Metal's refused words and failed the program."""
    import shutil

    from metal_emu import emulator as emu
    from metal_emu.device import EmulatedMetalDevice
    from zynbook.backends import registry
    from zynbook.compiler.codegen import cuda
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler")
    dev = EmulatedMetalDevice()
    monkeypatch.setitem(registry._discover(), dev.id, dev)
    got = zynbook.Session(device=dev.id).run(src, **inputs)
    assert dev.launches and not dev.mismatches, dev.mismatches
    assert_equals_numpy(got, want, 1e-5)
    if nvcc_runs.NVCC is not None:
        k, _, sizes, _ = lower_block(src, inputs)
        res = nvcc_runs.run(cuda.render_cuda(k, sizes).source, ("--ptx", "-arch=sm_90"))
        assert res.returncode == 0, res.stderr[-4000:]


# ------------------------------------------------ several yields, fusion, several devices

_YA = RNG.integers(0, 5, 1003).astype(np.int32)
_YB = RNG.integers(0, 5, 1003).astype(np.int32)
_YM = _YA.reshape(17, 59)
_INTERLEAVED = np.stack([_YA, _YB], 1).ravel()
_FX = _f32(1003)
_FM = _f32(33, 7)
_MA, _MB, _MBIAS = _f32(33, 17), _f32(17, 7), _f32(7)

_FUSE = "pipeline p(x: tensor[n]):\n    return compute(x) {\n        @kernel elementwise\n" \
        "        for i in 0..n: out[i] = x[i] * 2.0 + 1.0\n    }\n"

MORE = {
    "two yields an iteration, ties to the smallest position": (
        "let r = compute(a, b) {\n    @kernel reduce(argmax)\n    for i in 0..n:\n"
        "        yield (b[i], 2 * i + 1)\n        yield (a[i], 2 * i)\n}\nr\n",
        {"a": _YA, "b": _YB}, np.int64(np.argmax(_INTERLEAVED)), 0),
    "a yield under an if beside one outside": (
        "let r = compute(m) {\n    @kernel reduce(+, axis=1)\n    for i in 0..rows, j in 0..cols:\n"
        "        yield m[i, j]\n        if j == 0:\n            yield 100\n}\nr\n", {"m": _YM},
        (_YM.sum(1) + 100).astype(np.int32), 0),
    "yields under if, elif and else along the first axis": (
        "let r = compute(m) {\n    @kernel reduce(min, axis=0)\n    for i in 0..rows, j in 0..cols:\n"
        "        if m[i, j] == 0:\n            yield 50\n        elif m[i, j] == 1:\n"
        "            yield -i\n        else:\n            yield m[i, j] * j\n}\nr\n", {"m": _YM},
        np.where(_YM == 0, 50, np.where(_YM == 1, -np.arange(17)[:, None],
                                        _YM * np.arange(59))).min(0).astype(np.int32), 0),
    # fusion of pipelines: reductions read by name, producers read at other positions
    "min and max read by name by an elementwise block": (
        "pipeline rescale(x: tensor[n]):\n    let lo = compute(x) {\n        @kernel reduce(min)\n"
        "        for i in 0..n: yield x[i]\n    }\n    let hi = compute(x) {\n"
        "        @kernel reduce(max)\n        for i in 0..n: yield x[i] * 1.0\n    }\n"
        "    return compute(x) {\n        @kernel elementwise\n"
        "        for i in 0..n: out[i] = (x[i] - lo) / (hi - lo)\n    }\nrescale(x)\n",
        {"x": _FX}, (_FX - _FX.min()) / (_FX.max() - _FX.min()), 1e-6),
    "a producer read reversed": (
        _FUSE + "pipeline q(p: tensor[m]):\n    return compute(p) {\n"
        "        for i in 0..m: out[i] = p[m - 1 - i]\n    }\nq(p(x))\n", {"x": _FX},
        (_FX * 2 + 1)[::-1], 1e-6),
    "a producer read at two positions": (
        _FUSE + "pipeline q(p: tensor[m]):\n    return compute(p) {\n"
        "        for i in 0..m: out[i] = p[i] * p[(i + 1) % m]\n    }\nq(p(x))\n", {"x": _FX},
        (_FX * 2 + 1) * np.roll(_FX * 2 + 1, -1), 1e-5),
    "a producer read by an argmax of reversed positions": (
        _FUSE + "pipeline q(p: tensor[m]):\n    return compute(p) {\n        @kernel reduce(argmax)\n"
        "        for i in 0..m: yield (p[m - 1 - i], i)\n    }\nq(p(x))\n", {"x": _FX},
        np.int64(np.argmax(_FX[::-1])), 0),
    "a row mean then its use over the columns": (
        "pipeline center(m: tensor[r, c], g: tensor[c]):\n    let mean = compute(m) {\n"
        "        for i in 0..r:\n            var s = 0.0\n            for j in 0..c:\n"
        "                s += m[i, j]\n            out[i] = s / c\n    }\n"
        "    return compute(m, mean, g) {\n        @kernel elementwise\n"
        "        for i in 0..r, j in 0..c:\n            out[i, j] = (m[i, j] - mean[i]) * g[j]\n"
        "    }\ncenter(m, g)\n", {"m": _FM, "g": np.arange(7, dtype=np.float32)},
        (_FM - _FM.mean(1, keepdims=True)) * np.arange(7, dtype=np.float32), 1e-5),
    "a matmul with a bias and relu epilogue": (
        "pipeline mm(A: tensor[M, K], B: tensor[K, N]):\n    return compute(A, B) {\n"
        "        @kernel matmul\n        for i in 0..M, j in 0..N:\n            var acc = 0.0\n"
        "            for k in 0..K:\n                acc += A[i, k] * B[k, j]\n"
        "            out[i, j] = acc\n    }\npipeline br(h: tensor[M, N], bias: tensor[N]):\n"
        "    return compute(h, bias) {\n        @kernel elementwise\n"
        "        for i in 0..M, j in 0..N: out[i, j] = max(h[i, j] + bias[j], 0.0)\n    }\n"
        "br(mm(A, B), bias)\n", {"A": _MA, "B": _MB, "bias": _MBIAS},
        np.maximum(_MA @ _MB + _MBIAS, 0), 1e-4),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MORE))
def test_more_programs_equal_numpy(name, device):
    src, inputs, want, tol = MORE[name]
    assert_equals_numpy(_run(device, src, **inputs), np.asarray(want), tol)


def test_one_program_on_every_device():
    """A matmul on one device, tanh on another, a column sum on a third, host arithmetic on
    the first and the result back on the host: numpy's answer."""
    devices = [d for d in DEVICES if d != "cpu"] or ["cpu"]
    d = [devices[k % len(devices)] for k in range(3)]
    src = f"""let h = compute(x, w) @device("{d[0]}") {{
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += x[i, k] * w[k, j]
        out[i, j] = acc
}}
let g = compute(h) @device("{d[1]}") {{
    @kernel elementwise
    for i in 0..M, j in 0..N:
        out[i, j] = tanh(h[i, j])
}}
let s = compute(g) @device("{d[2]}") {{
    @kernel reduce(+, axis=0)
    for i in 0..M, j in 0..N:
        yield g[i, j]
}}
let t = s.to_device("{d[0]}") * 2.0
t.to_device("cpu")
"""
    got = _run("cpu", src, x=_MA, w=_MB)
    assert_equals_numpy(got, np.tanh(_MA.astype(np.float64) @ _MB).sum(0) * 2, 1e-4)


# ------------------------------------------------ tiles spilled to scratch memory

def _block_causal_attention(Q, K, V, block):
    S, D = Q.shape[2], Q.shape[3]
    scores = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) / np.sqrt(D)
    keep = (np.arange(S)[None, :] // block) <= (np.arange(S)[:, None] // block)
    scores = np.where(keep, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ V.astype(np.float64)


_BLOCK_CAUSAL_FLASH = """let head_dim = 16
let attn = compute(Q, K, V) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 64:
            var m = -inf
            var l = 0.0
            var o = zeros(64, head_dim)
            for kv_block in 0..seq_len step 64:
                if kv_block <= q_block:
                    let K_block = K[b, h, kv_block:kv_block+64]
                    let V_block = V[b, h, kv_block:kv_block+64]
                    let S = Q[b, h, q_block:q_block+64] @ transpose(K_block) / sqrt(head_dim)
                    let m_new = max(m, row_max(S))
                    let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                    o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                    m = m_new
                    l = l_new
            out[b, h, q_block:q_block+64] = o / l
}
attn
"""
_QKV = {n: _f32(1, 2, 150, 16) for n in "QKV"}


@pytest.mark.parametrize("device", DEVICES)
def test_flash_attention_skipping_key_blocks_under_an_if(device):
    """Flash attention whose key blocks past the query block are skipped by an `if` (no
    attention schedule takes it: the block schedule runs its tiles) equals numpy: on `gl:0`
    its fourteen tile arrays, past the shared memory, each took a scratch buffer of its
    own, and the kernel needed 19 storage buffers where the adapter binds 16; the arrays of
    one dtype now share one scratch buffer."""
    got = _run(device, _BLOCK_CAUSAL_FLASH, **_QKV)
    assert_equals_numpy(got, _block_causal_attention(_QKV["Q"], _QKV["K"], _QKV["V"], 64), 1e-4)


def test_spilled_tile_arrays_share_one_scratch_buffer_a_dtype():
    """The block schedule's program for that kernel, where its arrays spill: one scratch
    buffer of f32, and numpy's values from its launch IR (emulated)."""
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target, webgpu_target
    qkv = {n: v[:, :1, :70] for n, v in _QKV.items()}
    k, ins, sizes, scalars = lower_block(_BLOCK_CAUSAL_FLASH, qkv)
    progs = [schedules.build(k, tgt, sizes) for tgt in
             (cuda_target(), metal_target(), webgpu_target(("shader-f16",)))]
    spilled = [p for p in progs if p is not None and p.scratch]
    assert spilled
    for prog in spilled:
        assert [s.dtype for s in prog.scratch] == ["f32"], prog.scratch
    want = _block_causal_attention(qkv["Q"], qkv["K"], qkv["V"], 64)
    got = emulate_kernel(spilled[0], k, ins, sizes, scalars)
    assert_equals_numpy(got.reshape(want.shape), want, 1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_half_flash_attention_skipping_key_blocks_under_an_if(device):
    """The same in f16, its tiles spilled to an f16 scratch buffer: where the adapter has no
    shader-f16 (gl:0) the scratch buffer was declared `array<f16>`, a shader that did not
    compile; its elements are f32 there, as an f16 input's are."""
    qkv = {n: v.astype(np.float16) for n, v in _QKV.items()}
    want = _block_causal_attention(*(qkv[n].astype(np.float32) for n in "QKV"), 64)
    assert_equals_numpy(_run(device, _BLOCK_CAUSAL_FLASH, **qkv), want.astype(np.float16), 2e-2)
