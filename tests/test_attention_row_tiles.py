"""One-pass attention whose weighted sum is the output row, a tile (`var acc = zeros(E)`,
`acc = acc * c + w * v[b, h, j]`, `out[b, h, i] = acc / den`), in any names, multiply
orders, scales and key conditions: the same attention pattern as the loop over head_dim,
so it runs on the attention schedule of every device and on the CUDA kernels, against
numpy that runs the loops as written; a body that is not the online softmax (no rescale
of the row or of the sum) keeps the generic schedule and the loops' answer."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import emulate_kernel, lower_block, wanted_devices
from test_attention_hunt7 import _quiet, check, dots, qkv, run
from test_attention_hunt13 import SCHED, CUDA, _kernels
from zynbook.compiler.passes import recognise

DEVICES = wanted_devices()

CONDS = {"none": None, "causal": "j <= i", "causal_rev": "i >= j", "bool": "keep[i, j]"}
SCALES = {"const": ("* 0.125", {}), "sqrt": ("/ sqrt(E)", {}), "scalar": ("* temp", {"temp": 0.125}),
          "inside": ("", {})}


def row_source(cond=None, scale="const", names=("mx", "den", "acc", "c", "w", "s"), order=0,
               rescale_acc=True, rescale_den=True, inputs="q, k, v"):
    """The row-tile one-pass form; `order` 1 writes every product the other way round."""
    m, l, acc, c, w, s = names
    sc = SCALES[scale][0]
    qrow = "q[b, h, i] * 0.125" if scale == "inside" else "q[b, h, i]"
    score = f"dot({qrow}, k[b, h, j]) {sc}" if order == 0 else f"dot(k[b, h, j], {qrow}) {sc}"
    if order == 0:
        den = f"{l} * {c} + {w}" if rescale_den else f"{l} + {w}"
        upd = f"{acc} * {c} + {w} * v[b, h, j]" if rescale_acc else f"{acc} + {w} * v[b, h, j]"
    else:
        den = f"{w} + {c} * {l}" if rescale_den else f"{w} + {l}"
        upd = f"v[b, h, j] * {w} + {c} * {acc}" if rescale_acc else f"v[b, h, j] * {w} + {acc}"
    step = [f"let {s} = {score}", f"let mn = max({m}, {s})" if order == 0 else f"let mn = max({s}, {m})",
            f"let {c} = exp({m} - mn)", f"let {w} = exp({s} - mn)", f"{l} = {den}",
            f"{acc} = {upd}", f"{m} = mn"]
    pad = " " * 12
    if cond is not None:
        step = [f"if {cond}:"] + ["    " + x for x in step]
    body = "\n".join(pad + x for x in step)
    return f"""let o = compute({inputs}) {{
    @kernel attention
    for b in 0..B, h in 0..H, i in 0..N:
        var {m} = -inf
        var {l} = 0.0
        var {acc} = zeros(E)
        for j in 0..N:
{body}
        out[b, h, i] = {acc} / {l}
}}
o"""


def loops(s, ok, V, rescale_acc=True, rescale_den=True):
    """The loops as written over scores s[b, h, i, j] (float64), key condition ok."""
    with _quiet():
        m = np.full(s.shape[:-1], -np.inf)
        l = np.zeros(s.shape[:-1])
        acc = np.zeros(s.shape[:-1] + V.shape[-1:])
        for j in range(s.shape[-1]):
            sj, okj = s[..., j], ok[..., j]
            mn = np.maximum(m, sj)
            c, w = np.exp(m - mn), np.exp(sj - mn)
            l = np.where(okj, l * c + w if rescale_den else l + w, l)
            new = (acc * c[..., None] if rescale_acc else acc) + w[..., None] * V[:, :, j, None, :]
            acc = np.where(okj[..., None], new, acc)
            m = np.where(okj, mn, m)
        return acc / l[..., None]


def case(cond="causal", scale="const", dtype=np.float32, B=1, H=3, S=37, D=20, seed=0, **kw):
    """(source, arrays, scalars, numpy's answer); a bool mask leaves row 4 no key."""
    a = {n.lower(): x for n, x in qkv(seed, B, H, S, D, dtype).items()}
    i, j = np.arange(S)[:, None], np.arange(S)[None]
    inputs = "q, k, v"
    if cond == "bool":
        keep = np.random.default_rng(seed).random((S, S)) < 0.6
        keep[:, 0] = True
        keep[4] = False
        a["keep"], ok, inputs = keep, keep, "q, k, v, keep"
    else:
        ok = np.ones((S, S), bool) if cond == "none" else j <= i
    scalars = SCALES[scale][1]
    s = dots(a["q"], a["k"]) * (1 / np.sqrt(D) if scale == "sqrt" else 0.125)
    src = row_source(CONDS[cond], scale, inputs=inputs, **kw)
    want = loops(s, np.broadcast_to(ok, s.shape), a["v"].astype(np.float64),
                 kw.get("rescale_acc", True), kw.get("rescale_den", True))
    return src, a, scalars, want


def test_the_row_form_is_the_one_pass_attention():
    """The row-tile body and the loop over head_dim name the same attention."""
    src, a, sc, _ = case("bool", "scalar", names=("run_max", "total", "o_row", "alpha", "p", "score"), order=1)
    p = recognise.attention(lower_block(src, a, sc)[0])
    assert p and p.form == "one-pass" and p.masked and not p.causal, p
    assert (p.q, p.k, p.v, p.out, p.query_var, p.key_var) == ("q", "k", "v", "out", "i", "j")
    assert p.head_dim == recognise.cir.Var("E", recognise.cir.Ty("i32"))
    assert recognise.canon(p.scale) == recognise.canon(recognise.cir.Var("temp", recognise.F32))
    src, a, sc, _ = case("causal_rev", "sqrt")
    causal = recognise.attention(lower_block(src, a, sc)[0])
    assert causal and causal.causal and causal.form == "one-pass", causal


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("cond,scale,order", [("none", "const", 0), ("causal", "sqrt", 1),
                                              ("causal_rev", "inside", 0), ("bool", "scalar", 1)])
def test_row_tiles_on_every_device(device, dtype, cond, scale, order):
    src, a, sc, want = case(cond, scale, dtype, order=order)
    check(device, src, a, want, sc, tol=2e-4 if dtype == np.float32 else 2e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("cond", ["causal", "bool"])
def test_row_tiles_on_the_cuda_kernels(cond, dtype):
    src, a, sc, want = case(cond, "const", dtype, B=1, H=2, S=40, D=16, seed=3)
    k, ins, sz, sc = lower_block(src, a, sc)
    tol = 2e-4 if dtype == np.float32 else 2e-2
    for name, p in _kernels(k, sz, dtype):
        prog = SCHED.build(k, CUDA, sz, p)
        got = emulate_kernel(prog, k, ins, sz, sc, warp=32).astype(np.float64)
        assert (np.isnan(got) == np.isnan(want)).all(), name
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("miss", ["rescale_acc", "rescale_den"])
def test_near_misses_keep_the_loops_answer(device, miss):
    """No rescale of the row (acc = acc + w * v) or of the sum (den = den + w): not the
    online softmax, so no attention; every device gives what the loops compute."""
    src, a, sc, want = case("causal", "const", **{miss: False})
    assert not recognise.attention(lower_block(src, a, sc)[0])
    got, schedule = run(device, src, a, sc)
    assert "attention" not in schedule.lower(), schedule
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


def test_other_near_misses_are_not_attention():
    """A row that does not start at zero, a store of the row over the maximum, a value
    row of another head: not the pattern."""
    src, a, sc, _ = case("none", "const")
    for old, new in [("var acc = zeros(E)", "var acc = ones(E)"),
                     ("out[b, h, i] = acc / den", "out[b, h, i] = acc / mx"),
                     ("w * v[b, h, j]", "w * v[b, 0, j]")]:
        assert old in src
        p = recognise.attention(lower_block(src.replace(old, new), a, sc)[0])
        assert not p, (new, p)


@pytest.mark.parametrize("cond", ["causal", "bool"])
def test_row_tiles_take_the_attention_schedule_of_cuda_msl_cpp_and_run_on_the_metal_emulator(cond):
    from zynbook.compiler.codegen import c as c_render
    from zynbook.compiler.codegen import cuda, msl
    src, a, sc, want = case(cond, "sqrt", S=45, D=24)
    k, ins, sz, sc = lower_block(src, a, sc)
    assert "attention" in cuda.render_cuda(k, sz).schedule
    assert "attention" in c_render.render_program(k, sz).schedule
    flash_on_the_metal_emulator(k, ins, sz, sc, want)


def flash_on_the_metal_emulator(k, ins, sz, sc, want):
    """The kernel's MSL takes the flash schedule and, run on the Metal model, gives `want`."""
    import shutil
    from zynbook.compiler import cir
    from zynbook.compiler.codegen import msl
    prog = msl.render_program(k, sz)
    assert msl.schedule_name(prog) == "flash"
    try:
        from metal_emu import emulator as emu
    except Exception:                      # noqa: BLE001
        pytest.skip("no Metal emulator")
    if shutil.which(emu.CXX) is None:
        pytest.skip("no C++ compiler for the Metal emulator")
    emu.build(prog)
    got = np.asarray(emu.run(prog, ins, cir.output_shape(k, sz), sc), np.float64)
    assert (np.isnan(got) == np.isnan(want)).all()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, equal_nan=True)
