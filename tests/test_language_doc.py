"""Every ZynML example of docs/language.md does what the reference says it does.

Fences (the doc's own table says the same):
  ```zynml                   compiles; runs on `cpu` when it has no inputs
  ```zynml compile-only      compiles (it needs a GPU, several devices or inputs)
  ```zynml error=KIND        zynbook.compile raises a ZynMLError of that kind
  ```zynml runtime-error=KIND  compiles, and running it on `cpu` raises a ZynMLError of that kind
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.errors import ERROR_KINDS

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"
_FENCE = re.compile(r"^```zynml([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_MODES = ("run", "compile-only", "error", "runtime-error")


def _blocks():
    text = DOC.read_text()
    out = []
    for m in _FENCE.finditer(text):
        info = m.group(1).strip()
        line = text.count("\n", 0, m.start()) + 1
        mode, _, kind = info.partition("=")
        mode = mode or "run"
        out.append(pytest.param(mode, kind, m.group(2), id=f"line{line}-{mode}"))
    return out


BLOCKS = _blocks()


def test_the_doc_has_examples_of_every_kind():
    modes = {b.values[0] for b in BLOCKS}
    assert modes == set(_MODES), modes
    assert len(BLOCKS) >= 40
    kinds = {b.values[1] for b in BLOCKS if b.values[0] in ("error", "runtime-error")}
    # every kind a program can provoke on a machine without a GPU is shown by an example
    assert kinds >= {"syntax", "name", "type", "shape", "device", "runtime", "memory"}, kinds


@pytest.mark.parametrize("mode,kind,source", BLOCKS)
def test_example(mode, kind, source, capsys):
    assert mode in _MODES, f"unknown fence mode {mode!r}"
    if mode in ("error", "runtime-error"):
        assert kind in ERROR_KINDS, f"unknown error kind {kind!r}"
    if mode == "error":
        with pytest.raises(zynbook.ZynMLError) as info:
            zynbook.compile(source)
        assert info.value.kind == kind, info.value.render()
        assert info.value.line > 0, info.value.render()
        return
    program = zynbook.compile(source)
    if mode == "compile-only":
        return
    assert not program.free_names, \
        f"a block that runs must define everything; inputs: {sorted(program.free_names)}"
    if mode == "runtime-error":
        with pytest.raises(zynbook.ZynMLError) as info:
            zynbook.run(source, device="cpu")
        assert info.value.kind == kind, info.value.render()
        return
    value = zynbook.run(source, device="cpu")
    assert value is not None


# The values a few examples state in the text, against numpy.

def _run(marker: str):
    for b in BLOCKS:
        if marker in b.values[2]:
            return zynbook.run(b.values[2], device="cpu")
    raise AssertionError(f"no example contains {marker!r}")


def test_first_program_is_x_times_y_plus_one():
    z = np.asarray(_run("out[i] = x[i] * y[i] + 1.0"))
    x = np.asarray(zynbook.run("randn([1000], seed=1)"))
    y = np.asarray(zynbook.run("randn([1000], seed=2)"))
    np.testing.assert_allclose(z, x * y + 1.0, rtol=1e-6)


def test_literals_mean_what_the_table_says():
    second, budget, small, s, f, t = _run("let second = 1000ms")
    assert (second, budget, small, s, f, t) == (1.0, 10**9, 4096, "tab:\there", 2.5e-3, (1, 2))


def test_host_division_truncates_toward_zero():
    *_, a, b = _run("7 / 2, -7 / 2]")
    assert (a, b) == (3, -3)


def test_promotion_example():
    half_dtype, quotient, ratio_dtype = _run("let quotient = compute(n)")
    assert half_dtype == "f16" and ratio_dtype == "f32"
    np.testing.assert_array_equal(np.asarray(quotient), np.arange(8) // 3)


def test_output_shape_from_writes():
    diffs, pairs = _run("let diffs = compute(x)")
    np.testing.assert_array_equal(np.asarray(diffs), np.ones(9, np.float32))
    np.testing.assert_array_equal(np.asarray(pairs), np.arange(10).reshape(5, 2).sum(1))


def test_stepped_loop_leaves_unwritten_positions_zero():
    evens = np.asarray(_run("for i in 0..10 step 2:"))
    expect = np.arange(10, dtype=np.float32)
    expect[1::2] = 0
    np.testing.assert_array_equal(evens, expect)


def test_reductions_example():
    total, best_col, any_negative = _run("let best_col = compute(x)")
    x = np.asarray(zynbook.run("randn([4, 8], seed=1)"))
    assert total == pytest.approx(float(x.sum()), rel=1e-5)
    np.testing.assert_array_equal(np.asarray(best_col), x.argmax(axis=1))
    assert any_negative == bool((x < 0).any())


def test_conv2d_geometry_defaults():
    assert _run("@kernel conv2d(stride=2, padding=1)") == [1, 4, 5, 5]


def test_flash_attention_example_is_softmax_attention():
    attn = np.asarray(_run("@kernel flash_attention"), np.float64)
    q, k, v = (np.asarray(zynbook.run(f"randn([1, 2, 100, 16], seed={s})"), np.float64)
               for s in (20, 21, 22))
    s = q @ np.swapaxes(k, -1, -2) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(attn, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)


def test_layer_norm_example():
    y = np.asarray(_run("var var = 0.0"), np.float64)
    x = np.asarray(zynbook.run("randn([3, 5], seed=24)"), np.float64)
    expect = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, expect, rtol=1e-4, atol=1e-5)


def test_accumulating_into_out_starts_from_zero():
    np.testing.assert_array_equal(np.asarray(_run("out[i] += x[i, j]")), [3.0, 3.0])


def test_the_doc_names_everything_the_implementation_has():
    """An annotation, kernel type, builtin or error kind added to the language without a word
    in the reference fails here."""
    from zynbook.compiler import cir, lower
    from zynbook.runtime.builtins import BUILTINS
    text = DOC.read_text()
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text))
    missing = []
    missing += [f"@{a}" for a in lower.ANNOTATIONS if f"`@{a}" not in text]
    missing += [k for k in lower.KERNEL_TYPES if f"`{k}" not in text]
    missing += [f for f in sorted(lower.KERNEL_BUILTINS) if f not in words]
    missing += [f for f in sorted(BUILTINS) if f not in words]
    missing += [op for op in cir.REDUCE_OPS if op not in text]
    missing += [f"error kind {k}" for k in ERROR_KINDS if f"`{k}`" not in text]
    assert not missing, f"docs/language.md does not mention: {missing}"


def test_a_host_bound_is_a_bound():
    assert _run("for r in 0..rows, c in 0..k:") == [4, 2]
    assert _run("out[r, c] = x[r, c + 1]") == [4, 7]
