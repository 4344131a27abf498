"""The CIR pass pipeline (zynbook/compiler/passes/): each pass on small kernels (the CIR
before and after), the verifier on broken CIR, the trace, the pipeline run once per compiled
block, and results: the reference executor gives the same values on the CIR as lowered and
on the CIR after the passes, for every example and the kernels of kernel_sources.py."""
from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import zynbook
from compute_testing import lower_signatures
from kernel_sources import (ACTIVATIONS, ARGMAX, ARGMIN_ROWS, ATTENTION, BROADCAST, COL_MAX,
                            FLASH_TEMPLATE, LAYER_NORM, MATH, MATMUL, MUL_ADD, REDUCE_MAX,
                            REDUCE_SUM, RMS_NORM, ROW_SUMS, SCALE_INT, SHARED_FFN,
                            SOFTMAX_FUSED, SOFTMAX_ROWS, SPEC_BATCHED_MATMUL, SPEC_CONV2D,
                            SPEC_DEPTHWISE, block_of, unannotated)
from zynbook.backends.cpu.reference import run_kernel
from zynbook.compiler import cir, dims
from zynbook.compiler.passes import pipeline
from zynbook.compiler.passes.kernel_type import check_kernel_type
from zynbook.compiler.passes.parallel import mark_parallel
from zynbook.compiler.passes.simplify import simplify
from zynbook.compiler.passes.tiles import inline_tile_lets, inline_tiles
from zynbook.compiler.passes.verify import CIRVerifyError, verify
from zynbook.compiler.passes.widen import widen_vars
from zynbook.errors import ZynMLTypeError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
I32, F32, BOOL = cir.Ty("i32"), cir.Ty("f32"), cir.Ty("bool")


def lowered(src, signatures, scalars=None):
    """The LoweredKernel of the one block of `src` (the pipeline has run: `.kernel` is the
    passed CIR, `.before_passes` lowering's)."""
    return lower_signatures(src, signatures, scalars)


def body_text(kernel) -> str:
    return cir.format_body(kernel.body)


# ------------------------------------------------------------------------ the passes

ROW_STATS = """let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        var m = -inf
        var acc = 0.0
        for c in 0..cols:
            m = max(m, x[r, c])
            acc += x[r, c]
        out[r] = acc - m
}"""


def test_lowering_only_translates_and_the_passes_widen_and_mark():
    lk = lowered(ROW_STATS, {"x": ("f16", 2)})
    assert body_text(lk.before_passes) == (
        "for r in 0..rows:\n"
        "  var m: f32 = -inf\n"
        "  var acc: f32 = 0.0\n"
        "  for c in 0..cols:\n"
        "    m = max(m, x[r, c])\n"
        "    acc = acc + x[r, c]\n"
        "  store out[r] = acc - m")
    assert body_text(lk.kernel) == (
        "parallel for r in 0..rows:\n"
        "  var m: f16 = -inf\n"           # weak literals take the f16 they meet, in max()
        "  var acc: f16 = 0.0\n"          # and in sums
        "  for c in 0..cols:\n"
        "    m = max(m, x[r, c])\n"
        "    acc = acc + x[r, c]\n"
        "  store out[r] = acc - m")


SCALED = """let y = compute(x, h) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * (1.0 - scale) + h[i] * scale
}
"""


def test_scalars_reads_a_host_float_meeting_f64_as_f64():
    """The f64 arithmetic reads `scale` as an f64 argument, the f32 product reads f32(scale);
    with f32 data the kernel is left as lowering made it."""
    from zynbook.compiler.passes.scalars import f64_scalars
    k = lowered(SCALED, {"x": ("f64", 1), "h": ("f32", 1)}, {"scale": "f32"}).kernel
    assert k.scalars == (cir.Scalar("scale", "f64"),)
    text = cir.format_body(k.body)
    assert "(1.0 - scale)" in text and "f32(scale)" in text, text
    x = np.array([3.0, 0.1, -7.25])
    h = np.array([3.0, 0.1, -7.25], np.float32)
    got = run_kernel(k, [x, h], {"n": 3}, {"scale": 0.1})
    np.testing.assert_array_equal(got, x * (1.0 - 0.1) + (h * np.float32(0.1)).astype(np.float64))
    f32 = lowered(SCALED, {"x": ("f32", 1), "h": ("f32", 1)}, {"scale": "f32"})
    assert f32.kernel.scalars == (cir.Scalar("scale", "f32"),)
    assert f64_scalars(f32.kernel) is f32.kernel


def test_widen_declares_a_var_with_the_tile_it_comes_to_hold():
    src = FLASH_TEMPLATE.replace("BLOCK", "64")
    k = lowered(src, {"Q": ("f32", 4), "K": ("f32", 4), "V": ("f32", 4)}).before_passes
    before = {s.name: s for s in cir.walk(k.body) if isinstance(s, cir.Let) and s.mutable}
    after = {s.name: s for s in cir.walk(widen_vars(k).body)
             if isinstance(s, cir.Let) and s.mutable}
    m0, m1 = before["m"], after["m"]
    assert m0.declared_ty == F32 and m0.ty is None
    # `var m = -inf`, later a column of row maxima: the literal stays, the declaration widens
    assert m1.value == m0.value and m1.declared_ty.shape and len(m1.declared_ty.shape) == 2
    assert widen_vars(widen_vars(k)) == widen_vars(k)


def test_mark_parallel_keeps_carried_loops_serial():
    k = lowered(SOFTMAX_ROWS, {"x": ("f32", 2)}).before_passes
    text = body_text(mark_parallel(k))
    assert text.startswith("parallel for b in 0..batch:")
    # the three loops over i carry m and s or write out from one row: only the last is
    # independent, and it sits in a parallel loop
    assert text.count("parallel for i") == 1
    assert "  for i in 0..n:" in text and "  for i_2 in 0..n:" in text
    assert "  parallel for i_3 in 0..n:" in text
    assert "parallel" not in body_text(k)


def test_kernel_type_pass_refuses_a_body_of_another_shape_at_the_annotation():
    src = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        var s = 0.0
        for j in 0..m:
            s += x[i, j]
        out[i] = s
}"""
    with pytest.raises(ZynMLTypeError) as info:
        lowered(src, {"x": ("f32", 2)})
    err = info.value
    assert "@kernel elementwise expects" in str(err) and "runs in order" in str(err)
    assert (err.span.line, err.span.column) == (2, 13)
    # the check changes nothing it accepts
    k = lowered(MUL_ADD, {"x": ("f32", 1), "y": ("f32", 1)}).kernel
    assert check_kernel_type(k) is k


def test_inline_tiles_substitutes_immutable_tile_lets():
    src = FLASH_TEMPLATE.replace("BLOCK", "64")
    k = lowered(src, {"Q": ("f32", 4), "K": ("f32", 4), "V": ("f32", 4)}).kernel
    tile_lets = [s.name for s in cir.walk(k.body)
                 if isinstance(s, cir.Let) and not s.mutable and s.value.ty.shape]
    assert tile_lets
    inlined = inline_tiles(k)
    left = [s.name for s in cir.walk(inlined.body) if isinstance(s, cir.Let) and not s.mutable
            and s.value.ty.shape]
    used = {n.name for n in cir.walk(inlined.body) if isinstance(n, cir.Var)}
    assert not (set(tile_lets) - set(left)) & used
    verify(inlined, "inline_tiles")
    # mutable lets keep their widened type through the inlining
    widened = {s.name: s.ty for s in cir.walk(k.body) if isinstance(s, cir.Let) and s.ty}
    assert widened and all(s.ty == widened[s.name] for s in cir.walk(inlined.body)
                           if isinstance(s, cir.Let) and s.name in widened)
    assert inline_tile_lets(k.body) == inlined.body


def _tiny(body, dims_=("n",)):
    out = cir.Buffer("out", "f32", ("n",), "write")
    x = cir.Buffer("x", "f32", ("n",))
    return cir.Kernel("k", cir.KernelType("custom"), (x,), out, tuple(dims_), (), tuple(body))


def test_simplify_folds_integers_and_constant_conditions_only():
    i, n = cir.Var("i", I32), cir.Var("n", I32)
    zero, one, two = cir.Const(0, I32), cir.Const(1, I32), cir.Const(2, I32)
    xi = cir.Load("x", (cir.Bin("*", cir.Bin("+", i, zero, I32), one, I32),), F32)
    half = cir.Bin("*", cir.Const(0.5, F32), cir.Const(2.0, F32), F32)
    body = [cir.Loop("i", zero, cir.Bin("-", n, cir.Bin("*", two, zero, I32), I32), one, (
        cir.If(cir.Const(True, BOOL), (
            cir.Store("out", (cir.Bin("+", zero, i, I32),), cir.Bin("+", xi, half, F32)),)),
        cir.If(cir.Const(False, BOOL), (cir.Store("out", (i,), half),)),
    ), True)]
    k = _tiny(body)
    verify(k)
    assert body_text(k) == ("parallel for i in 0..n - 2 * 0:\n"
                            "  if true:\n"
                            "    store out[0 + i] = x[(i + 0) * 1] + 0.5 * 2.0\n"
                            "  if false:\n"
                            "    store out[i] = 0.5 * 2.0")
    s = simplify(k)
    verify(s, "simplify")
    assert body_text(s) == ("parallel for i in 0..n:\n"
                            "  store out[i] = x[i] + 0.5 * 2.0")   # floats stay as written
    # an integer that would overflow its dtype is not folded
    big = cir.Bin("*", cir.Const(1 << 20, I32), cir.Const(1 << 20, I32), I32)
    from zynbook.compiler.passes.simplify import expr
    assert expr(big) == big


def test_one_and_tanh_become_twice_a_sigmoid_within_rounding():
    from zynbook.compiler.passes.activations import tanh_as_sigmoid
    src = """let y = compute(x) {
    for i in 0..n:
        let z = 0.7978845608 * (x[i] + 0.044715 * x[i] * x[i] * x[i])
        out[i] = x[i] * 0.5 * (1.0 + tanh(z)) + (tanh(z) + 1.0) * (1.0 - tanh(x[i])) - tanh(z)
}
y"""
    lk = lowered(src, {"x": ("f32", 1)})
    text = body_text(lk.kernel)
    assert text.count("sigmoid(") == 3 and text.count("tanh(") == 1     # a lone tanh stays
    assert "2.0 * sigmoid(-2.0 * x[i])" in text and "2.0 * sigmoid(2.0 * z)" in text
    x = np.concatenate([np.linspace(-30, 30, 601), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]]
                       ).astype(np.float32)
    sizes = {"n": x.size, "x_d0": x.size}
    xd = x.astype(np.float64)
    z = 0.7978845608 * (xd + 0.044715 * xd ** 3)
    with np.errstate(all="ignore"):
        want = xd * 0.5 * (1 + np.tanh(z)) + (np.tanh(z) + 1) * (1 - np.tanh(xd)) - np.tanh(z)
        got = np.asarray(run_kernel(lk.kernel, [x], sizes, {}), np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)     # inf - inf, NaN: NaN both
    # the CIR as lowered has no sigmoid: the pass made them
    assert "sigmoid" not in body_text(lk.before_passes)
    assert tanh_as_sigmoid(lk.before_passes) != lk.before_passes


# ------------------------------------------------------------------------ the verifier

def _broken(problem_fragment, kernel):
    with pytest.raises(CIRVerifyError) as info:
        verify(kernel, "some_pass")
    assert "some_pass" in str(info.value) and problem_fragment in str(info.value)


def test_the_verifier_accepts_what_lowering_and_the_passes_produce():
    for src, sigs in ((ROW_STATS, {"x": ("f16", 2)}), (SHARED_FFN, {
            "x": ("f32", 2), "up_w": ("f32", 2), "down_w": ("f32", 2)}),
            (ARGMAX, {"data": ("f32", 1)})):
        lk = lowered(src, sigs)
        verify(lk.before_passes)
        verify(lk.kernel)


def test_the_verifier_catches_broken_cir():
    i, n = cir.Var("i", I32), cir.Var("n", I32)
    zero, one = cir.Const(0, I32), cir.Const(1, I32)
    xi = cir.Load("x", (i,), F32)

    def loop(*body, parallel=True, stop=n):
        return cir.Loop("i", zero, stop, one, tuple(body), parallel)

    _broken("`j` is used but not defined", _tiny([loop(cir.Store("out", (cir.Var("j", I32),), xi))]))
    _broken("`t` is used but not defined", _tiny([
        loop(cir.Store("out", (i,), cir.Var("t", F32)), cir.Let("t", xi))]))
    _broken("typed i32", _tiny([loop(cir.Store("out", (i,), cir.Bin("+", xi, xi, I32)))]))
    _broken("typed f32", _tiny([loop(cir.Store("out", (i,), cir.Cast(
        cir.Bin("<", xi, xi, F32), F32)))]))
    _broken("not an integer", _tiny([loop(cir.Store("out", (i,), xi),
                                          stop=cir.Const(3.0, F32))]))
    _broken("is assigned but is a let", _tiny([loop(cir.Let("t", xi),
                                                    cir.Assign("t", xi), cir.Store("out", (i,), xi))]))
    _broken("yields and writes out", _tiny([loop(cir.Yield(xi), cir.Store("out", (i,), xi))]))
    _broken("declared twice", _tiny([loop(cir.Let("t", xi), cir.Store("out", (i,), xi)),
                                     cir.Loop("j", zero, n, one, (cir.Let("t", cir.Const(1.0, F32)),))]))
    _broken("input `x` is written", _tiny([loop(cir.Store("x", (i,), xi))]))
    _broken("assigns `s`, declared outside it", _tiny([
        cir.Let("s", cir.Const(0.0, F32), True),
        loop(cir.Assign("s", xi), cir.Store("out", (i,), xi))]))
    _broken("holds a barrier", _tiny([loop(cir.Barrier(), cir.Store("out", (i,), xi))]))
    _broken("neither a buffer nor a shared array", _tiny([
        loop(cir.Store("out", (i,), cir.Load("tmp", (i,), F32)))]))
    reduce = replace(_tiny([loop(cir.Store("out", (i,), xi))]),
                     kernel_type=cir.KernelType("reduce", (("op", "+"),)))
    _broken("a reduce kernel writes out", reduce)


def test_a_pass_that_breaks_the_cir_is_an_internal_error_naming_it():
    def drop_loop_var(kernel):
        loop = kernel.body[0]
        return replace(kernel, body=(replace(loop, var="i_renamed"),))

    k = lowered(MUL_ADD, {"x": ("f32", 1), "y": ("f32", 1)}).before_passes
    with pytest.raises(CIRVerifyError) as info:
        pipeline.run_passes(k, passes=pipeline.PASSES + (("drop_loop_var", drop_loop_var),))
    assert info.value.after == "drop_loop_var" and "internal compiler error" in str(info.value)
    assert not isinstance(info.value, zynbook.ZynMLError)


# ------------------------------------------------------------------------ the pipeline

def test_the_passes_are_listed_once_in_order():
    assert [name for name, _ in pipeline.PASSES] == ["whole", "widen", "parallel", "kernel_type",
                                                      "simplify", "constant_tiles", "scalars",
                                                      "casts", "activations"]
    assert all(callable(fn) for _, fn in pipeline.PASSES)


def test_trace_sees_every_stage(monkeypatch, capsys):
    k = lowered(ROW_STATS, {"x": ("f32", 2)}).before_passes
    seen = []
    out = pipeline.run_passes(k, trace=lambda name, kernel: seen.append((name, kernel)))
    assert [name for name, _ in seen] == ["lower", "whole", "widen", "parallel", "kernel_type",
                                          "simplify", "constant_tiles", "scalars", "casts",
                                          "activations"]
    assert seen[0][1] is k and seen[-1][1] == out
    monkeypatch.setenv("ZYNBOOK_TRACE_PASSES", "1")
    pipeline.run_passes(k)
    err = capsys.readouterr().err
    for name in ("lower", "widen", "parallel", "kernel_type", "simplify", "activations"):
        assert f"--- CIR after {name} ---" in err
    assert "parallel for r in 0..rows:" in err


def test_the_pipeline_runs_once_per_compiled_block(monkeypatch):
    calls = []
    real = pipeline.run_passes
    monkeypatch.setattr(pipeline, "run_passes", lambda k, *a, **kw: calls.append(k.name) or real(k, *a, **kw))
    s = zynbook.Session("cpu")
    s.run("pipeline double(t: tensor[n]) -> tensor[n]:\n"
          "    let d = compute(t) {\n        @kernel elementwise\n"
          "        for i in 0..n:\n            out[i] = t[i] * 2.0\n    }\n"
          "    return d\n"
          "let a = randn([4], seed=1)\nlet b = double(a)\nlet c = double(b)\nlet e = double(c)\n")
    launched = [k for k in s.last_kernels]
    assert len(launched) == 3
    assert launched[0].lowered is launched[1].lowered is launched[2].lowered
    assert "parallel for" in launched[0].cir_text and "parallel" not in launched[0].lowered_cir_text
    # the checker passes the block once, the session once for its one signature
    assert len(calls) <= 2


# -------------------------------------------------------- results: as lowered and passed

def _launches_of_examples():
    """(example, kernel as lowered, kernel passed, inputs, sizes, scalars) of every launch
    of every example that runs on the CPU here."""
    from zynbook.backends.cpu.device import CpuDevice

    out = []
    record = []
    real = CpuDevice.launch

    def launch(self, kernel, inputs, sizes, scalars):
        record.append((kernel, [np.array(a, copy=True) for a in inputs], dict(sizes),
                       dict(scalars)))
        return real(self, kernel, inputs, sizes, scalars)

    CpuDevice.launch = launch
    try:
        for path in sorted(EXAMPLES.glob("*.zyn")):
            record.clear()
            s = zynbook.Session("cpu")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    s.run(path.read_text())
            except zynbook.ZynMLError:
                continue        # needs devices or inputs this machine does not have
            before = {k.name: k.lowered.before_passes for k in s.last_kernels}
            for kernel, arrays, sizes, scalars in record:
                out.append((path.name, before[kernel.name], kernel, arrays, sizes, scalars))
    finally:
        CpuDevice.launch = real
    return out


RNG = np.random.default_rng(11)


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _kernel_source_cases():
    x, y = _randn(101), _randn(101)
    m, v = _randn(7, 13), _randn(13)
    q = [_randn(1, 2, 20, 8) for _ in range(3)]
    ints = RNG.integers(-50, 50, 77).astype(np.int32)
    return {
        "mul_add": (MUL_ADD, {"x": x, "y": y}, {}, {}),
        "mul_add_f16": (MUL_ADD, {"x": x.astype(np.float16), "y": y.astype(np.float16)}, {}, {}),
        "activations": (ACTIVATIONS, {"x": x * 3}, {}, {}),
        "math": (MATH, {"x": x * 2, "y": y}, {}, {}),
        "ints": (SCALE_INT, {"x": ints, "n": ints[::-1].copy()}, {}, {}),
        "broadcast": (BROADCAST, {"matrix": m, "vector": v}, {}, {}),
        "reduce_sum": (REDUCE_SUM, {"data": _randn(301)}, {}, {}),
        "reduce_max": (REDUCE_MAX, {"data": _randn(301)}, {}, {}),
        "argmax": (ARGMAX, {"data": _randn(301)}, {}, {}),
        "argmin_rows": (ARGMIN_ROWS, {"matrix": np.repeat(_randn(7, 5), 3, axis=1)}, {}, {}),
        "row_sums": (ROW_SUMS, {"matrix": m}, {}, {}),
        "col_max": (COL_MAX, {"matrix": m}, {}, {}),
        "matmul": (MATMUL, {"A": _randn(9, 7), "B": _randn(7, 5)}, {}, {}),
        "batched_matmul": (unannotated(SPEC_BATCHED_MATMUL), {"A": _randn(2, 5, 4),
                                                             "B": _randn(2, 4, 3)}, {}, {}),
        "conv2d": (unannotated(SPEC_CONV2D), {"input": _randn(1, 2, 6, 7),
                                              "kernel": _randn(3, 2, 3, 3), "bias": _randn(3)},
                   {}, {"stride": 2, "padding": 1, "out_h": 3, "out_w": 4}),
        "depthwise": (block_of(SPEC_DEPTHWISE), {"input": _randn(1, 2, 6, 7),
                                                 "kernel": _randn(2, 3, 3)}, {}, {}),
        "softmax_fused": (SOFTMAX_FUSED, {"logits": _randn(101)}, {}, {}),
        "softmax_rows": (SOFTMAX_ROWS, {"x": _randn(3, 51)}, {}, {}),
        "layer_norm": (LAYER_NORM, {"x": _randn(3, 31), "gamma": _randn(31), "beta": _randn(31)},
                       {"eps": 1e-5}, {}),
        "rms_norm": (RMS_NORM, {"x": _randn(3, 31), "weight": _randn(31)}, {"eps": 1e-6}, {}),
        "attention": (ATTENTION, {"Q": q[0], "K": q[1], "V": q[2],
                                  "mask": np.tril(np.ones((20, 20), bool))}, {}, {}),
        "flash_attention": (FLASH_TEMPLATE.replace("BLOCK", "8"), {"Q": q[0], "K": q[1], "V": q[2]},
                            {}, {"seq_len": 20, "head_dim": 8}),
        "shared_ffn": (SHARED_FFN, {"x": _randn(3, 6), "up_w": _randn(6, 10),
                                    "down_w": _randn(10, 6)}, {}, {}),
    }


def _launches_of_kernel_sources():
    from zynbook.compiler.types import DTYPE_ALIASES

    out = []
    for name, (src, arrays, scalars, sizes) in _kernel_source_cases().items():
        types = {k: ("f32" if isinstance(v, float) else "i32") for k, v in scalars.items()}
        types.update({k: "i32" for k in sizes})
        lk = lowered(src, {n: (DTYPE_ALIASES[str(a.dtype)], a.ndim) for n, a in arrays.items()},
                     types)
        k = lk.kernel
        shapes = {b.name: arrays[lk.labels[b.name]].shape for b in k.inputs}
        sz = dims.solve(lk, shapes, dict(sizes))
        out.append((name, lk.before_passes, k, [arrays[lk.labels[b.name]] for b in k.inputs],
                    sz, {s.name: scalars[s.name] for s in k.scalars}))
    return out


@pytest.fixture(scope="module")
def launches():
    return _launches_of_examples() + _launches_of_kernel_sources()


def _run(kernel, arrays, sizes, scalars):
    with np.errstate(all="ignore"):
        return np.asarray(run_kernel(kernel, [np.array(a, copy=True) for a in arrays],
                                     dict(sizes), dict(scalars)))


def _same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def test_every_example_and_kernel_source_is_covered(launches):
    names = {name for name, *_ in launches}
    assert {"flash_attention.zyn", "attention_mask.zyn", "matmul.zyn", "conv2d.zyn",
            "flash_attention", "conv2d", "shared_ffn", "argmin_rows"} <= names
    assert len(launches) > 40


def test_the_passes_after_marking_never_change_a_result(launches):
    """The CIR the devices ran before the pipeline existed (lowering widened and marked
    itself) against the full pipeline but its last pass, and against the printers' inlined
    tile lets: the reference executor's values are identical; the last pass (a tanh form as a
    sigmoid) keeps them within the rounding of their dtype."""
    from tolerances import assert_close

    marked_only = pipeline.PASSES[1:3]
    assert [n for n, _ in marked_only] == ["widen", "parallel"]
    for name, before, passed, arrays, sizes, scalars in launches:
        marked = pipeline.run_passes(before, passes=marked_only)
        want = _run(marked, arrays, sizes, scalars)
        exact = pipeline.run_passes(before, passes=pipeline.PASSES[:-1])
        assert _same(_run(exact, arrays, sizes, scalars), want), name
        assert _same(_run(inline_tiles(exact), arrays, sizes, scalars), want), name
        assert _same(_run(simplify(exact), arrays, sizes, scalars), want), name
        got = _run(passed, arrays, sizes, scalars)
        if got.dtype.kind in "iub":
            assert _same(got, want), name
        else:
            assert_close(got, want.astype(np.float64), passed.output.dtype, "reduction")


def test_the_reference_agrees_on_the_cir_as_lowered_and_passed(launches):
    """Lowering's loop nest runs serially on the reference (nothing is marked parallel yet),
    the passed CIR in lanes: integer and bool results agree exactly, float results to the
    rounding of their dtype (the serial path rounds f32 arithmetic once per expression
    rather than once per operation), and the output's dtype and shape are the same."""
    from tolerances import assert_close

    for name, before, passed, arrays, sizes, scalars in launches:
        if name in ("attention_mask.zyn", "conv2d.zyn"):
            continue    # seconds serially; the kernel_sources cases cover their kinds
        a = _run(before, arrays, sizes, scalars)
        b = _run(passed, arrays, sizes, scalars)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if a.dtype.kind in "iub":
            assert np.array_equal(a, b), name
        else:
            assert_close(b, a.astype(np.float64), passed.output.dtype, "reduction")


def test_the_command_line_prints_either_stage(capsys):
    from zynbook.cli import main

    path = str(EXAMPLES / "matmul.zyn")
    assert main(["cir", path]) == 0
    passed = capsys.readouterr().out
    assert main(["cir", path, "--before-passes"]) == 0
    before = capsys.readouterr().out
    assert "parallel for i in 0..M:" in passed and "parallel" not in before
    assert zynbook.compile((EXAMPLES / "matmul.zyn").read_text()).cir_text() + "\n" == passed
