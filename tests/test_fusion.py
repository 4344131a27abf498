"""Fusion across compute blocks: the lazy graph (runtime/lazy.py) and compiler/fusion.py.

Random chains of elementwise, row, reduction and matmul blocks run fused and unfused on every
device here and are compared with numpy; known chains have pinned launch counts."""
from __future__ import annotations

import io
import math
from contextlib import redirect_stdout

import numpy as np
import pytest

import zynbook
from zynbook.compiler import schedules
from zynbook.compiler.passes.recognise import Contraction, contraction
from zynbook.compiler.targets import cuda_target
from zynbook.errors import ZynMLError
from zynbook.kernel.display import kernel_sections

from compute_testing import emulate_kernel
from tolerances import assert_close

DEVICES = [d["id"] for d in zynbook.compute_devices()]

PIPELINES = '''
pipeline mm(a: tensor[m, k], w: tensor[k, n]):
    return compute(a, w) {
        @kernel matmul
        for i in 0..M:
            for j in 0..N:
                var acc = 0.0
                for k in 0..K:
                    acc += a[i, k] * w[k, j]
                out[i, j] = acc
    }
pipeline bias_gelu_res(h: tensor[m, n], b: tensor[n], r: tensor[m, n]):
    return compute(h, b, r) {
        @kernel elementwise
        for i in 0..M:
            for j in 0..N:
                out[i, j] = gelu(h[i, j] + b[j]) + r[i, j]
    }
pipeline scale(x: tensor[m, n], s: float):
    return compute(x) {
        @kernel elementwise
        for i in 0..M:
            for j in 0..N:
                out[i, j] = x[i, j] * s
    }
pipeline add(x: tensor[m, n], r: tensor[m, n]):
    return compute(x, r) {
        @kernel elementwise
        for i in 0..M:
            for j in 0..N:
                out[i, j] = x[i, j] + r[i, j]
    }
pipeline act(x: tensor[m, n]):
    return compute(x) {
        @kernel elementwise
        for i in 0..M:
            for j in 0..N:
                out[i, j] = tanh(x[i, j])
    }
pipeline softmax(g: tensor[m, n]):
    return compute(g) {
        for i in 0..rows:
            var m = -inf
            for j in 0..cols:
                m = max(m, g[i, j])
            var t = 0.0
            for j in 0..cols:
                t += exp(g[i, j] - m)
            for j in 0..cols:
                out[i, j] = exp(g[i, j] - m) / t
    }
pipeline total(g: tensor[m, n]):
    return compute(g) {
        @kernel reduce(+)
        for i in 0..M:
            for j in 0..N:
                yield g[i, j]
    }
'''
# the line of each pipeline's compute block in PIPELINES
LINE = {line.split("(")[0].split()[1]: i + 2 for i, line in enumerate(PIPELINES.splitlines())
        if line.startswith("pipeline")}


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# op: (ZynML call in a chain, numpy, tolerance kind)
OPS = {
    "scale": ("scale(0.75)", lambda x, env: x * 0.75, "elementwise"),
    "add": ("add(r)", lambda x, env: x + env["r"], "elementwise"),
    "act": ("act()", lambda x, env: np.tanh(x), "elementwise"),
    "bias_gelu_res": ("bias_gelu_res(b, r)",
                      lambda x, env: _gelu(x + env["b"]) + env["r"], "elementwise"),
    "softmax": ("softmax()", lambda x, env: _softmax(x), "reduction"),
    "mm": ("mm(w)", lambda x, env: x @ env["w"], "contraction"),
}
KINDS = ("elementwise", "reduction", "contraction")


def _env(rng, m=6, n=8):
    return {"x": rng.standard_normal((m, n)).astype(np.float32),
            "w": (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32),
            "b": rng.standard_normal(n).astype(np.float32),
            "r": rng.standard_normal((m, n)).astype(np.float32)}


def _run(source, device="cpu", fuse=True, **env):
    session = zynbook.Session(device)
    session.fuse = fuse
    value = session.run(source, **env)
    return value, session


def _chain(ops, end_total=False) -> str:
    calls = " |> ".join(OPS[op][0] for op in ops) + (" |> total()" if end_total else "")
    return PIPELINES + f"x |> {calls}\n"


def _launches(ops, end_total) -> int:
    """Launches of a fused chain: an elementwise block joins the group before it (inlined
    or as its epilogue); softmax and the final sum take an all-elementwise group in; a
    matmul starts a group (an operand is not inlined into a GEMM)."""
    count, host = 0, None
    for op in list(ops) + (["total"] if end_total else []):
        if op in ("scale", "add", "act", "bias_gelu_res") and host is not None:
            continue
        if op in ("softmax", "total") and host == "elementwise":
            host = op
            continue
        count += 1
        host = "elementwise" if op in ("scale", "add", "act", "bias_gelu_res") else op
    return count


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(8))
def test_random_chains_fused_and_unfused_agree_with_numpy(device, seed):
    rng = np.random.default_rng(seed)
    env = {k: v.astype(np.float64) for k, v in _env(rng).items()}
    ops = list(rng.choice(sorted(OPS), size=int(rng.integers(2, 5))))
    end_total = bool(rng.integers(0, 2))
    expected, kind = env["x"], "elementwise"
    for op in ops:
        expected = OPS[op][1](expected, env)
        kind = max(kind, OPS[op][2], key=KINDS.index)
    if end_total:
        expected, kind = expected.sum(), max(kind, "reduction", key=KINDS.index)
    source = _chain(ops, end_total)
    inputs = {k: v.astype(np.float32) for k, v in env.items()}
    fused, s_fused = _run(source, device, True, **inputs)
    plain, s_plain = _run(source, device, False, **inputs)
    assert len(s_plain.launches) == len(ops) + end_total
    assert len(s_fused.launches) == _launches(ops, end_total), ops
    assert_close(np.asarray(fused), expected, "f32", kind)
    assert_close(np.asarray(plain), expected, "f32", kind)
    if device == "cpu":     # the reference runs the same operations: fusion changes no bit
        assert np.array_equal(np.asarray(fused), np.asarray(plain))


def _fused(session):
    return [k for k in session.last_kernels if k.fusion and len(k.fusion.origins) > 1]


def test_matmul_bias_gelu_residual_is_one_launch_the_gemm_takes():
    env = _env(np.random.default_rng(1), 48, 64)
    source = PIPELINES + "x |> mm(w) |> bias_gelu_res(b, r)\n"
    value, session = _run(source, **env)
    assert len(session.launches) == 1
    (k,) = _fused(session)
    assert [line for _, line, _ in k.fusion.origins] == [LINE["mm"], LINE["bias_gelu_res"]]
    found = contraction(k.kernel)
    assert isinstance(found, Contraction) and found.epilogue is not None
    assert schedules.chosen(k.kernel, cuda_target(), k.sizes).name == "gemm"
    expected = _gelu(env["x"] @ env["w"] + env["b"]) + env["r"]
    assert_close(value, expected, "f32", "contraction")
    # the GEMM schedule's program, with the fused epilogue, on the launch emulator
    prog = schedules.build(k.kernel, cuda_target(), k.sizes, only="gemm")
    arrays = {"a": env["x"], "w": env["w"], "b": env["b"], "r": env["r"]}
    out = emulate_kernel(prog, k.kernel, [arrays[b.name] for b in k.kernel.inputs], k.sizes)
    assert_close(out, expected, "f32", "contraction")


def test_three_elementwise_blocks_are_one_launch():
    env = _env(np.random.default_rng(2))
    value, session = _run(PIPELINES + "x |> scale(2.0) |> add(r) |> act()\n", **env)
    assert len(session.launches) == 1
    assert_close(value, np.tanh(env["x"] * 2.0 + env["r"]))


def test_elementwise_then_row_softmax_is_one_launch():
    env = _env(np.random.default_rng(3))
    value, session = _run(PIPELINES + "x |> scale(3.0) |> softmax()\n", **env)
    assert len(session.launches) == 1
    assert_close(value, _softmax(env["x"] * 3.0), "f32", "reduction")


def test_row_softmax_then_elementwise_is_its_epilogue():
    env = _env(np.random.default_rng(4))
    value, session = _run(PIPELINES + "x |> softmax() |> add(r)\n", **env)
    assert len(session.launches) == 1
    assert_close(value, _softmax(env["x"]) + env["r"], "f32", "reduction")


def test_elementwise_into_a_reduction_to_one_value():
    env = _env(np.random.default_rng(5))
    value, session = _run(PIPELINES + "x |> act() |> total()\n", **env)
    assert len(session.launches) == 1
    assert_close(value, np.tanh(env["x"]).sum(), "f32", "reduction")


def test_nofuse_and_config_turn_fusion_off():
    env = _env(np.random.default_rng(6))
    nofuse = PIPELINES.replace("                out[i, j] = x[i, j] + r[i, j]",
                               "                out[i, j] = x[i, j] + r[i, j]\n"
                               "        @nofuse", 1)
    chain = "x |> scale(2.0) |> add(r) |> act()\n"
    value, session = _run(nofuse + chain, **env)
    assert len(session.launches) == 3
    assert "never fused: @nofuse" in dict(kernel_sections(session.last_kernels[1]))["fusion"]
    assert_close(value, np.tanh(env["x"] * 2.0 + env["r"]))
    value, session = _run(PIPELINES + "config { fuse: false }\n" + chain, **env)
    assert len(session.launches) == 3
    assert session.fuse is False
    with pytest.raises(ZynMLError, match="fuse takes true or false"):
        _run("config { fuse: 1 }")


def test_a_print_between_blocks_splits_them():
    env = _env(np.random.default_rng(7))
    source = PIPELINES + '''
pipeline two(x: tensor[m, n]):
    let h = x |> scale(2.0)
    print("between")
    return h |> act()
two(x)
'''
    out = io.StringIO()
    with redirect_stdout(out):
        value, session = _run(source, **env)
    assert "between" in out.getvalue()
    assert len(session.launches) == 2
    assert_close(value, np.tanh(env["x"] * 2.0))


def test_top_level_names_are_boundaries():
    env = _env(np.random.default_rng(8))
    source = PIPELINES + "let h = x |> scale(2.0)\nh |> act()\n"
    value, session = _run(source, **env)
    assert len(session.launches) == 2
    assert type(session.namespace["h"]) is zynbook.Tensor
    assert_close(value, np.tanh(env["x"] * 2.0))
    # the inspector says why the second block did not take the first
    line = source.count("\n")
    note = dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert f"`h`, bound at line {line - 1}, is a top-level name" in note
    assert session.last_kernels[0].lowered.kernel.name in note
    # a block alone in its statement, reading a name bound by the statement before, too;
    # one reading a name of an earlier cell is not told so
    blocks = ("let a = compute(x) {\n    for i in 0..m, j in 0..n:\n        out[i, j] = x[i, j] * 2.0\n}\n"
              "let b = compute(a) {\n    for i in 0..m, j in 0..n:\n        out[i, j] = a[i, j] + 1.0\n}\n")
    value, session = _run(blocks, **env)
    assert "`a`, bound at line 1, is a top-level name" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert_close(value if value is not None else session.namespace["b"], env["x"] * 2.0 + 1.0)
    session.run("let c = compute(a) {\n    for i in 0..m, j in 0..n:\n        out[i, j] = a[i, j] + 1.0\n}\n")
    assert session.last_kernels[-1].fusion is None


def test_a_result_read_twice_is_written_and_the_inspector_says_why():
    env = _env(np.random.default_rng(8))
    source = PIPELINES + '''
pipeline twice(x: tensor[m, n]):
    let h = x |> scale(2.0)
    return add(h |> act(), h)
twice(x)
'''
    value, session = _run(source, **env)
    assert len(session.launches) == 2
    sections = dict(kernel_sections(session.last_kernels[-1]))
    assert "read by more than one block" in sections["fusion"]
    assert_close(value, np.tanh(env["x"] * 2.0) + env["x"] * 2.0)


def test_the_inspector_shows_the_fused_blocks_and_their_lines():
    env = _env(np.random.default_rng(9))
    _, session = _run(PIPELINES + "x |> scale(2.0) |> softmax()\n", **env)
    (k,) = _fused(session)
    sections = dict(kernel_sections(k))
    assert f"line {LINE['scale']}" in sections["fusion"]
    assert f"line {LINE['softmax']}" in sections["fusion"]
    assert "x[i, j] * s" in sections["zynml"] and "exp(g[i, j] - m)" in sections["zynml"]


def test_a_fused_away_local_read_later_is_computed_from_its_own_inputs():
    env = _env(np.random.default_rng(10))
    source = PIPELINES + '''
pipeline keep(x: tensor[m, n]):
    let h = x |> scale(2.0)
    let g = h |> act()
    print(g.shape)
    x[0, 0] = 100.0
    return [g, h]
keep(x)
'''
    x0 = env["x"].copy()
    (g, h), _ = _run(source, **env)
    assert_close(g, np.tanh(x0 * 2.0))
    assert_close(h, x0 * 2.0)


def test_errors_name_their_line_through_a_fused_chain():
    env = _env(np.random.default_rng(11))
    source = PIPELINES + '''
pipeline add_row(h: tensor, q: tensor):
    return compute(h, q) {
        for i in 0..M:
            for j in 0..N:
                out[i, j] = h[i, j] + q[j]
    }
let q = randn([3])
x |> scale(2.0) |> act() |> add_row(q)
'''
    block_line = source.splitlines().index("    return compute(h, q) {") + 1
    for fuse in (True, False):
        with pytest.raises(ZynMLError) as err:
            _run(source, fuse=fuse, **env)
        assert err.value.span.line == block_line + 3


def test_python_calls_of_pipelines_return_computed_tensors():
    env = _env(np.random.default_rng(12))
    session = zynbook.Session("cpu")
    session.run(PIPELINES + "pipeline both(x: tensor[m, n]):\n    return x |> scale(2.0) |> act()\n")
    value = session.namespace["both"](env["x"])
    assert type(value) is zynbook.Tensor
    assert_close(value, np.tanh(env["x"] * 2.0))
    # each call lists its own launches, as a cell does: a model calling a pipeline in a
    # loop does not pile them up
    listed = len(session.launches)
    for _ in range(3):
        session.namespace["both"](env["x"])
    assert listed >= 1 and len(session.launches) == listed == len(session.last_kernels)


def test_host_arithmetic_on_a_recorded_result_joins_the_graph():
    env = _env(np.random.default_rng(13), 48, 64)
    source = PIPELINES + '''
pipeline layer(x: tensor[m, n], w: tensor[n, n], r: tensor[m, n]):
    let h = mm(x, w)
    return 2.0 - h * 0.5 + r
layer(x, w, r)
'''
    value, session = _run(source, **env)
    assert len(session.launches) == 1
    (k,) = _fused(session)
    assert isinstance(contraction(k.kernel), Contraction)
    assert_close(value, 2.0 - (env["x"] @ env["w"]) * 0.5 + env["r"], "f32", "contraction")
    plain, session = _run(source, fuse=False, **env)
    assert len(session.launches) == 1 and isinstance(plain, zynbook.Tensor)
    assert_close(value, plain, "f32", "contraction")


@pytest.mark.parametrize("device", ["cpu", "cpu:native"])
def test_a_failing_read_keeps_its_line(device):
    env = _env(np.random.default_rng(14))
    idx = np.arange(8, dtype=np.int32)
    idx[3] = 100
    source = PIPELINES + '''
pipeline gather(x: tensor[m, n], idx: tensor[n]):
    return compute(x, idx) {
        for i in 0..M:
            for j in 0..N:
                out[i, j] = x[i, idx[j]]
    }
'''
    line = source.splitlines().index("                out[i, j] = x[i, idx[j]]") + 1
    # an epilogue leaves the read where it was; the gather is not inlined into softmax
    for chain, launches in (("x |> gather(idx) |> act()\n", 1),
                            ("x |> gather(idx) |> softmax()\n", 2)):
        for fuse in (True, False):
            with pytest.raises(ZynMLError) as err:
                _run(source + chain, device, fuse, idx=idx, **env)
            assert err.value.span.line == line, (chain, fuse, err.value)
        good = np.where(idx == 100, 2, idx).astype(np.int32)
        value, session = _run(source + chain, device, True, idx=good, **env)
        assert len(session.launches) == launches
    assert "could fail" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert_close(value, _softmax(env["x"][:, good]), "f32", "reduction")


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_every_device_runs_the_fused_epilogue_in_its_gemm_schedule(device):
    env = _env(np.random.default_rng(15), 48, 64)
    value, session = _run(PIPELINES + "x |> mm(w) |> bias_gelu_res(b, r)\n", device, **env)
    (launch,) = session.launches
    assert launch.geometry["schedule"].startswith("contraction as GEMM"), launch.geometry
    assert_close(value, _gelu(env["x"] @ env["w"] + env["b"]) + env["r"], "f32", "contraction")


def test_a_row_reduction_then_elementwise_is_one_launch():
    env = _env(np.random.default_rng(16))
    source = PIPELINES + '''
pipeline row_norm(x: tensor[m, n]):
    let sq = compute(x) {
        for i in 0..rows:
            var s = 0.0
            for j in 0..cols:
                s += x[i, j] * x[i, j]
            out[i] = s
    }
    return compute(sq) {
        @kernel elementwise
        for i in 0..rows:
            out[i] = sqrt(sq[i]) + 1.0
    }
row_norm(x)
'''
    value, session = _run(source, **env)
    assert len(session.launches) == 1
    assert_close(value, np.sqrt((env["x"] ** 2).sum(axis=1)) + 1.0, "f32", "reduction")


def test_a_result_printed_is_written_not_fused_away():
    env = _env(np.random.default_rng(17))
    source = PIPELINES + '''
pipeline shown(x: tensor[m, n]):
    let h = x |> scale(2.0)
    let g = h |> act()
    print(h)
    return g
shown(x)
'''
    with redirect_stdout(io.StringIO()):
        value, session = _run(source, **env)
    assert len(session.launches) == 2
    assert "read elsewhere" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert_close(value, np.tanh(env["x"] * 2.0))


TWO_XS = """pipeline first(x):
    return compute(x) {
        @kernel elementwise
        for i in 0..n: out[i] = x[i] * 2.0
    }
pipeline second(y, x):
    return compute(y, x) {
        @kernel elementwise
        for i in 0..n: out[i] = y[i] + x[i]
    }
second(first(a), b)
"""


@pytest.mark.parametrize("device", [d for d in DEVICES if not d.startswith("browser")])
def test_an_error_about_a_fused_kernel_names_the_users_input(device):
    """Two blocks fused into one, each reading an `x` of its own: the kernel renames one
    `x_2`, and an error about it names it `x` with its block's line (a WebGPU adapter
    without shader-f64 said `x_2` is f64); where it runs, it is numpy's answer."""
    a, b = np.arange(4, dtype=np.float64), np.ones(4, np.float32)
    session = zynbook.Session(device)
    info = next(d for d in zynbook.compute_devices() if d["id"] == device)
    if info.get("backend") in ("vulkan", "gl", "metal", "dx12") and \
            "shader-f64" not in info.get("features", []):
        with pytest.raises(ZynMLError) as err:
            session.run(TWO_XS, a=a, b=b)
        msg = err.value.message
        assert "shader-f64" in msg and "`x` of line 2" in msg and "x_2" not in msg, msg
        return
    got = session.run(TWO_XS, a=a, b=b)
    assert [k.name for k in session.last_kernels] == ["fused_l2_l7"]
    np.testing.assert_array_equal(np.asarray(got), a * 2.0 + b)


ROW_STAT = '''
pipeline centred(x: tensor[m, n]):
    let mean = compute(x) {
        for i in 0..rows:
            var s = 0.0
            for j in 0..cols:
                s += x[i, j]
            out[i] = s / cols
    }
    return compute(x, mean) {
        @kernel elementwise
        for r in 0..rows:
            for c in 0..cols:
                out[r, c] = (x[r, c] - mean[r]) * 2.0
    }
pipeline scaled_t(x: tensor[m, n]):
    let top = compute(x) {
        for i in 0..rows:
            var t = -inf
            for j in 0..cols:
                t = max(t, x[i, j])
            out[i] = t
    }
    return compute(x, top) {
        for c in 0..cols:
            for r in 0..rows:
                out[c, r] = exp(x[r, c] - top[r])
    }
pipeline both(x: tensor[n, n]):
    let total = compute(x) {
        for i in 0..rows:
            var s = 0.0
            for j in 0..cols:
                s += x[i, j]
            out[i] = s
    }
    return compute(x, total) {
        @kernel elementwise
        for r in 0..rows:
            for c in 0..cols:
                out[r, c] = x[r, c] * total[r] - total[c]
    }
pipeline by_column(x: tensor[m, n], w: tensor[n, n]):
    let total = compute(w) {
        for i in 0..rows:
            var s = 0.0
            for j in 0..cols:
                s += w[i, j]
            out[i] = s
    }
    return compute(x, total) {
        @kernel elementwise
        for r in 0..rows:
            for c in 0..cols:
                out[r, c] = x[r, c] * total[c]
    }
'''


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_row_statistic_used_along_its_rows_is_one_launch(device, dtype):
    """The reverse of inlining: a reduction per row read by an elementwise block over the
    row's elements (centring, a max subtracted) runs as one row kernel: the row's value kept
    in a local where the first block stores it, the second block's other axis a loop there
    (a per-row total of `w` read as `total[c]` too: the loop runs down a column). A result
    read at two positions (`total[r]` and `total[c]`) is launched apart."""
    x = np.random.default_rng(21).standard_normal((37, 301)).astype(np.float16 if dtype == "f16" else np.float32)
    w = np.random.default_rng(22).standard_normal((301, 301)).astype(np.float32)
    xf = x.astype(np.float64)
    for call, want, launches in (
            ("centred(x)", (xf - xf.mean(axis=1, keepdims=True)) * 2.0, 1),
            ("scaled_t(x)", np.exp(xf - xf.max(axis=1, keepdims=True)).T, 1),
            ("by_column(x, w)", xf * w.astype(np.float64).sum(axis=1), 1),
            ("both(w)", w * w.sum(axis=1, keepdims=True) - w.sum(axis=1), 2)):
        fused, s_fused = _run(ROW_STAT + call + "\n", device, True, x=x, w=w)
        plain, s_plain = _run(ROW_STAT + call + "\n", device, False, x=x, w=w)
        assert (len(s_fused.launches), len(s_plain.launches)) == (launches, 2), call
        for got in (fused, plain):
            if call == "both(w)" and dtype == "f32":
                # w * total - total cancels: its error is the terms' (a row sum in another
                # order on cpu:native's threads), not the result's
                terms = np.abs(w.astype(np.float64) * w.astype(np.float64).sum(axis=1)).max()
                np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4,
                                           atol=2e-6 * terms)
            else:
                assert_close(np.asarray(got), want, dtype, "reduction")
        if device == "cpu":     # the same operations in the same order
            assert np.array_equal(np.asarray(fused), np.asarray(plain)), call
    why = dict(kernel_sections(s_fused.last_kernels[-1]))["fusion"]
    assert "other than at one set of its own loop positions" in why, why


def test_a_row_epilogue_over_few_long_rows_is_launched_apart():
    """Two rows of 70,000: fused, their 140,000 elements would run over two blocks."""
    x = np.random.default_rng(23).standard_normal((2, 70000)).astype(np.float32)
    value, session = _run(ROW_STAT + "centred(x)\n", x=x)
    assert len(session.launches) == 2
    assert "over the first one's 2 rows" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert_close(np.asarray(value), (x - x.mean(axis=1, keepdims=True)) * 2.0, "f32", "reduction")


def test_a_cold_compile_leaves_no_fused_away_value_alive(tmp_path, monkeypatch):
    """The first compile of a `cpu:native` kernel falls back from a cache folder that does
    not exist yet; the error it kept held every caller's frame in a reference cycle, so the
    fused-away softmax and scale stayed alive and were computed after the fused kernel
    (three launches instead of one)."""
    monkeypatch.setenv("ZYNBOOK_CACHE_DIR", str(tmp_path / "not-yet"))
    env = _env(np.random.default_rng(24), 5, 11)
    chain = PIPELINES + "x |> softmax() |> scale(0.8125) |> add(r)\n"
    value, session = _run(chain, "cpu:native", **env)
    assert len(session.launches) == 1
    assert_close(np.asarray(value), _softmax(env["x"]) * 0.8125 + env["r"], "f32", "reduction")


ONE_VALUE = '''
pipeline normed(x: tensor[n]):
    let t = compute(x) {
        @kernel reduce(+)
        for i in 0..N:
            yield x[i]
    }
    return compute(x) {
        @kernel elementwise
        for i in 0..N:
            out[i] = x[i] / t
    }
pipeline shifted(x: tensor[m, n]):
    let t = compute(x) {
        @kernel reduce(max)
        for i in 0..rows:
            for j in 0..cols:
                yield x[i, j]
    }
    return compute(x) {
        @kernel elementwise
        for i in 0..rows:
            for j in 0..cols:
                out[i, j] = x[i, j] - t
    }
'''


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_reduction_to_one_value_read_by_name_is_one_launch(device, dtype):
    """The row epilogue with no row axes: a sum or a maximum of the whole input, read by
    name in an elementwise block (a scalar argument), is computed first in that block's
    kernel: one launch, where unfused the float comes back to the host and goes out again."""
    np_dtype = np.float16 if dtype == "f16" else np.float32
    rng = np.random.default_rng(31)
    x = (rng.random(4097) + 0.5).astype(np_dtype)
    g = rng.standard_normal((37, 27)).astype(np_dtype)
    xf, gf = x.astype(np.float64), g.astype(np.float64)
    # (a sum's quotients are about 1 / n: compared times n, so the tolerance is relative)
    for call, want, times in (("normed(x)", xf / xf.sum(), 4097), ("normed(y)", None, 1000),
                              ("shifted(g)", gf - gf.max(), 1)):
        if want is None:        # a size of no power of two (a part of x)
            want = xf[:1000] / xf[:1000].sum()
        env = {"x": x, "g": g, "y": x[:1000].copy()}
        fused, s_fused = _run(ONE_VALUE + call + "\n", device, True, **env)
        plain, s_plain = _run(ONE_VALUE + call + "\n", device, False, **env)
        assert (len(s_fused.launches), len(s_plain.launches)) == (1, 2), call
        (k,) = _fused(s_fused)
        assert [name.split("_")[0] for name, _, _ in k.fusion.origins] == ["reduce", "elementwise"]
        assert not k.kernel.scalars
        assert np.asarray(fused).dtype == np.asarray(plain).dtype
        for got in (fused, plain):
            assert_close(np.asarray(got, np.float64) * times, want * times, dtype, "reduction")
        if device == "cpu":     # the same operations in the same order
            assert np.array_equal(np.asarray(fused), np.asarray(plain)), call


@pytest.mark.parametrize("device", DEVICES)
def test_a_fused_sum_is_as_accurate_as_the_reduction_it_replaces(device):
    """131,000 values of 0.1 summed in f32 one after another are off by about 1e-3: a fused
    one-value sum (and a row kernel's sum, which the fused kernel is on the CPU) keeps the
    accuracy of the reduction launched apart: on the CPU, the long loop summed in chunks
    added in f64 (launch/wide_sums.py); on a GPU, a tree."""
    x = np.full(131000, 0.1, np.float32)
    exact = float(np.float32(0.1)) * x.size
    for fuse in (True, False):
        got, session = _run(ONE_VALUE + "normed(x)\n", device, fuse, x=x)
        assert len(session.launches) == (1 if fuse else 2)
        total = float(np.float32(0.1)) / float(np.asarray(got)[0])
        assert abs(total - exact) / exact < 2e-5, (fuse, total)
    rows = np.full((2, 70001), 0.1, np.float32)
    got, _ = _run("let s = compute(x) {\n    for i in 0..m:\n        var t = 0.0\n"
                  "        for j in 0..n:\n            t += x[i, j]\n        out[i] = t\n}\ns\n",
                  device, x=rows)
    np.testing.assert_allclose(np.asarray(got), float(np.float32(0.1)) * 70001, rtol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_one_value_epilogue_over_many_elements_is_launched_apart(device):
    """Fused, the reduction and the elementwise loop run on one block: past SMALL elements
    they launch apart, and the inspector says why."""
    from zynbook.compiler.fusion import SMALL
    x = (np.random.default_rng(32).random(SMALL + 1) + 0.5).astype(np.float32)
    value, session = _run(ONE_VALUE + "normed(x)\n", device, x=x)
    assert len(session.launches) == 2
    why = dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    assert f"{SMALL + 1} values reduced and {SMALL + 1} elements" in why, why
    assert "one block" in why, why
    xf = x.astype(np.float64)
    assert_close(np.asarray(value, np.float64) * x.size, xf / xf.sum() * x.size, "f32",
                 "reduction")
    x = x[:SMALL].copy()
    value, session = _run(ONE_VALUE + "normed(x)\n", device, x=x)
    assert len(session.launches) == 1
    xf = x.astype(np.float64)
    assert_close(np.asarray(value, np.float64) * x.size, xf / xf.sum() * x.size, "f32",
                 "reduction")


@pytest.mark.parametrize("device", DEVICES)
def test_a_one_value_observed_on_the_host_is_the_float_it_was(device):
    """Read on the host between or after the blocks (printed, in arithmetic, a condition, a
    typed let, a pipeline's argument, returned), the value is the float the reduction gives
    unfused (the same bits: the reduction is launched alone), and the blocks still compute
    with it."""
    x = (np.random.default_rng(33).random(1000) + 0.5).astype(np.float32)
    total = x.astype(np.float64).sum()
    head = '''
pipeline half(v: float):
    return v / 2.0
pipeline total(x: tensor[n]):
    let t = compute(x) {
        @kernel reduce(+)
        for i in 0..N:
            yield x[i]
    }
'''
    scale = '''    let y = compute(x) {
        @kernel elementwise
        for i in 0..N:
            out[i] = x[i] / t
    }
'''
    for between, after, launches, shown in (
            ("    print(t)\n", "    return [y, t]\n", 2, lambda t: [t]),
            ("    let u: float = t\n    if t > 0.0:\n        print(u * 2.0)\n",
             "    return [y, half(t)]\n", 2, lambda t: [t * 4.0]),
            ("", "    print(t + 1.0)\n    return [y, t]\n", 2, lambda t: [t + 1.0]),
            ("", "    return [y, t]\n", 2, lambda t: []),
            ("", "    return [y, 0.0]\n", 1, None)):
        source = head + between + scale + after + "total(x)\n"
        runs = []
        for fuse in (True, False):
            out = io.StringIO()
            with redirect_stdout(out):
                (y, t), session = _run(source, device, fuse, x=x)
            runs.append((t, out.getvalue().split(), len(session.launches)))
            assert_close(np.asarray(y, np.float64) * x.size, x / total * x.size, "f32",
                         "reduction")
        (t, printed, count), (t_plain, printed_plain, _) = runs
        assert count == launches, (between, after)
        assert type(t) is float and t == t_plain, (t, t_plain)
        if shown is not None:
            assert printed == printed_plain == [repr(v) for v in shown(t)]
            assert_close(t * (2.0 if "half" in after else 1.0), total, "f32", "reduction")


@pytest.mark.parametrize("device", DEVICES)
def test_a_one_value_read_by_two_blocks_is_computed_once(device):
    x = (np.random.default_rng(34).random(1000) + 0.5).astype(np.float32)
    source = '''
pipeline both(x: tensor[n]):
    let t = compute(x) {
        @kernel reduce(+)
        for i in 0..N:
            yield x[i]
    }
    let a = compute(x) {
        @kernel elementwise
        for i in 0..N:
            out[i] = x[i] / t
    }
    let b = compute(x) {
        @kernel elementwise
        for i in 0..N:
            out[i] = x[i] - t
    }
    return [a, b]
both(x)
'''
    (a, b), session = _run(source, device, x=x)
    assert len(session.launches) == 3
    assert not _fused(session)
    assert "read by more than one block" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]
    total = x.astype(np.float64).sum()
    assert_close(np.asarray(a, np.float64) * x.size, x / total * x.size, "f32", "reduction")
    assert_close(np.asarray(b), x - total, "f32", "reduction")


UNIT = '''
pipeline unit(x: tensor[n]):
    let lo = compute(x) {
        @kernel reduce(min)
        for i in 0..N:
            yield x[i]
    }
    let hi = compute(x) {
        @kernel reduce(max)
        for i in 0..N:
            yield x[i]
    }
    return compute(x) {
        @kernel elementwise
        for i in 0..N:
            out[i] = (x[i] - lo) / (hi - lo)
    }
unit(x)
'''


@pytest.mark.parametrize("device", DEVICES)
def test_two_one_values_read_by_one_block_are_one_launch(device):
    """A minimum and a maximum read by one block both run first in its kernel, in program
    order; past SMALL values in all, the second is launched apart."""
    from zynbook.compiler.fusion import SMALL
    for n, launches in ((4097, 1), (SMALL // 2 + 1, 2)):
        x = np.random.default_rng(35).standard_normal(n).astype(np.float32)
        value, session = _run(UNIT, device, x=x)
        plain, s_plain = _run(UNIT, device, False, x=x)
        assert (len(session.launches), len(s_plain.launches)) == (launches, 3)
        fusion_text = dict(kernel_sections(session.last_kernels[-1]))["fusion"]
        assert ("values reduced" in fusion_text) == (launches == 2), fusion_text
        want = (x - x.min()) / (x.max() - x.min())
        assert_close(np.asarray(value), want, "f32", "reduction")
        assert np.array_equal(np.asarray(value), np.asarray(plain))   # min and max are exact


@pytest.mark.parametrize("device", ["cpu", "cpu:native"])
def test_a_one_value_epilogue_keeps_the_lines_of_errors(device):
    """The second block's failing read names its line, fused or not; a reduction that could
    fail is not fused (its error must name its own line)."""
    x = (np.random.default_rng(36).random(1000) + 0.5).astype(np.float32)
    idx = np.arange(1000, dtype=np.int32)
    idx[7] = 5000
    source = '''
pipeline gathered(x: tensor[n], idx: tensor[n]):
    let t = compute(x, idx) {
        @kernel reduce(+)
        for i in 0..N:
            yield x[IDX]
    }
    return compute(x, idx) {
        @kernel elementwise
        for i in 0..N:
            out[i] = x[GATHER] / t
    }
gathered(x, idx)
'''
    lines = source.splitlines()
    for reduce_at, gather_at, bad_line, launches in (
            ("i", "idx[i]", "            out[i] = x[idx[i]] / t", 1),
            ("idx[i]", "i", "            yield x[idx[i]]", 2)):
        text = source.replace("IDX", reduce_at).replace("GATHER", gather_at)
        line = text.splitlines().index(bad_line) + 1
        for fuse in (True, False):
            with pytest.raises(ZynMLError) as err:
                _run(text, device, fuse, x=x, idx=idx)
            assert err.value.span.line == line, (bad_line, fuse, err.value)
        good = np.where(idx >= 1000, 3, idx).astype(np.int32)
        value, session = _run(text, device, x=x, idx=good)
        assert len(session.launches) == launches
        xf = x.astype(np.float64)
        want = xf[good] / xf.sum() if gather_at != "i" else xf / xf[good].sum()
        assert_close(np.asarray(value, np.float64) * x.size, want * x.size, "f32", "reduction")
    assert "could fail" in dict(kernel_sections(session.last_kernels[-1]))["fusion"]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_one_value_epilogue_renders_for_cuda_as_one_block(dtype, tmp_path):
    """Without a GPU: the fused kernels (a sum, a maximum, a minimum and a maximum) render for
    CUDA as one block running the whole body, and their CUDA C compiles with nvcc where it
    is installed."""
    from zynbook.compiler.codegen import cuda
    from test_cuda_render import NVCC, nvcc_compile
    np_dtype = np.float16 if dtype == "f16" else np.float32
    x = np.random.default_rng(37).standard_normal(4097).astype(np_dtype)
    g = np.random.default_rng(38).standard_normal((37, 27)).astype(np_dtype)
    for source in (ONE_VALUE + "normed(x)\n", ONE_VALUE + "shifted(g)\n", UNIT):
        _, session = _run(source, x=x, g=g)
        (k,) = _fused(session)
        prog = cuda.render_cuda(k.kernel, k.sizes)
        assert "one block runs the whole body" in prog.schedule, prog.schedule
        assert [step.grid for step in prog.steps] == [(1, 1, 1)]
        if NVCC is not None:
            nvcc_compile(prog.source, tmp_path, k.kernel.name)
