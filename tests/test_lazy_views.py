"""Views of results not yet computed (runtime/lazy.py `LazyView`): `split` and `reshape` of a
recorded block's result are no boundary of the lazy graph, so the blocks that read them run
in the same run of the graph as the block they view; a reshape that would copy computes the
result first. Every result is checked against numpy written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.runtime.lazy import LazyView, ViewOf

SCALE = """
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n, j in 0..m:
            out[i, j] = x[i, j] * 2.0 + 1.0
    }
"""


def test_split_and_reshape_of_a_pending_result_are_views_in_one_run():
    s = zynbook.Session("cpu")
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    s.run("pipeline f(x: tensor[n, m]) -> tensor[a, b]:" + SCALE + """
    let (p, q) = split(y, 2, axis=-1)
    let r = reshape(q, [4, 1, 3])
    let z = compute(p, r) {
        @kernel elementwise
        for i in 0..4, j in 0..3:
            out[i, j] = p[i, j] - r[i, 0, j]
    }
    return z
""")
    got = s.run("f(x)", x=x)
    y = x * 2 + 1
    np.testing.assert_array_equal(got.numpy(), y[:, :3] - y[:, 3:])
    assert len(s.launches) == 2         # y, then z reading its views


def test_a_view_is_recorded_not_computed():
    s = zynbook.Session("cpu")
    x = np.ones((2, 4), np.float32)
    seen = []
    real = s.interpreter.lazy.view

    def view(t, op):
        made = real(t, op)
        seen.append(made)
        return made
    s.interpreter.lazy.view = view
    s.run("pipeline g(x: tensor[n, m]) -> tensor[a]:" + SCALE + """
    let v = reshape(y, [8])
    let w = compute(v) {
        @kernel elementwise
        for i in 0..8:
            out[i] = v[i] + 1.0
    }
    return w
""")
    np.testing.assert_array_equal(s.run("g(x)", x=x).numpy(), np.full(8, 4.0, np.float32))
    assert seen and all(isinstance(v, LazyView) for v in seen)


def test_a_reshape_that_would_copy_computes_the_result_first():
    s = zynbook.Session("cpu")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    s.run("pipeline h(x: tensor[n, m]) -> tensor[a]:" + SCALE + """
    let (p, q) = split(y, 2, axis=1)
    let flat = reshape(q, [6])
    let w = compute(flat) {
        @kernel elementwise
        for i in 0..6:
            out[i] = flat[i] * 10.0
    }
    return w
""")
    y = x * 2 + 1
    np.testing.assert_array_equal(s.run("h(x)", x=x).numpy(), y[:, 3:].reshape(6) * 10)


def test_views_bound_to_top_level_names_are_plain_tensors():
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    s.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..2, j in 0..4:\n"
          "        out[i, j] = x[i, j] + 0.5\n}\nlet (a, b) = split(y, 2, axis=0)", x=x)
    a, b = s.interpreter.globals["a"], s.interpreter.globals["b"]
    assert not isinstance(a, LazyView) and not isinstance(b, LazyView)
    np.testing.assert_array_equal(a.numpy(), x[:1] + 0.5)
    np.testing.assert_array_equal(b.numpy(), x[1:] + 0.5)


def test_view_chains_are_checked_on_shapes_alone():
    whole = (3, 8)
    part = ViewOf((), ()).then(("part", 1, 4, 8))
    made = ViewOf.checked(whole, part.then(("reshape", (3, 2, 2))))
    assert made is not None and made.shape == (3, 2, 2)
    a = np.arange(24.0).reshape(whole)
    np.testing.assert_array_equal(made(a), a[:, 4:].reshape(3, 2, 2))
    assert ViewOf.checked(whole, part.then(("reshape", (12,)))) is None    # would copy


DEVICES = [d["id"] for d in zynbook.compute_devices() if d["id"] != "cpu"]


@pytest.mark.parametrize("device", DEVICES)
def test_views_of_pending_results_on_every_device(device):
    s = zynbook.Session(device)
    x = np.arange(5 * 8, dtype=np.float32).reshape(5, 8)
    s.run("pipeline f(x: tensor[n, m]) -> tensor[a, b, c]:" + SCALE + """
    let (p, q) = split(y, 2, axis=1)
    let r = reshape(q, [5, 2, 2])
    let z = compute(p, r) {
        @kernel elementwise
        for i in 0..5, j in 0..2, k in 0..2:
            out[i, j, k] = p[i, 2 * j + k] * r[i, j, k]
    }
    return z
""")
    y = x * 2 + 1
    want = y[:, :4].reshape(5, 2, 2) * y[:, 4:].reshape(5, 2, 2)
    np.testing.assert_allclose(s.run("f(x)", x=x).numpy(), want, rtol=1e-6)
