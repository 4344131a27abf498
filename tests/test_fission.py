"""Fission of row-staged compute blocks (compiler/fission.py, applied by runtime/lazy.py).

A block whose rows run phases separated by barrier(), staging a shared array for the next,
runs as one kernel per phase (the staging array a temporary over the rows); each kernel meets
the ordinary schedules (the GEMM's here). Results are compared with numpy written here and
with the block run whole; blocks of other shapes stay whole."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.compiler import fission, schedules
from zynbook.compiler.passes.recognise import Contraction, contraction
from zynbook.compiler.targets import cuda_target
from zynbook.errors import ZynMLError
from zynbook.kernel.display import kernel_sections

from tolerances import assert_close

DEVICES = [d["id"] for d in zynbook.compute_devices()]

# the spec's FFN block (examples/transformer_block.zyn) as a pipeline
FFN = '''
pipeline ffn(normed: tensor[b, s, h], up_w: tensor[h, f], down_w: tensor[f, h]):
    return compute(normed, up_w, down_w) {
        @kernel fused
        @shared(batch * seq * ffn_hidden * 4)
        for b in 0..batch, s in 0..seq:
            shared var up[ffn_hidden]
            for f in 0..ffn_hidden:
                var sum = 0.0
                for h in 0..hidden:
                    sum += normed[b, s, h] * up_w[h, f]
                let x = sum
                let x3 = x * x * x
                up[f] = x * 0.5 * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x3)))
            barrier()
            for h in 0..hidden:
                var sum = 0.0
                for f in 0..ffn_hidden:
                    sum += up[f] * down_w[f, h]
                out[b, s, h] = sum
    }
ffn(x, wu, wd)
'''

# other names, one row loop, a relu epilogue, and a phase 2 with its own epilogue (a bias)
ROWS_RELU = '''
pipeline mlp(a: tensor[r, k], w1: tensor[k, n], w2: tensor[n, k], bias: tensor[k]):
    return compute(a, w1, w2, bias) {
        for row in 0..rows:
            shared var hid[inner]
            for j in 0..inner:
                var acc = 0.0
                for t in 0..width:
                    acc += a[row, t] * w1[t, j]
                hid[j] = max(acc, 0.0)
            barrier()
            for c in 0..width:
                var acc2 = 0.0
                for j in 0..inner:
                    acc2 += hid[j] * w2[j, c]
                out[row, c] = acc2 * 0.5 + bias[c]
    }
mlp(x, wu, wd, bias)
'''

# three outer loops, three phases (two staging arrays, the second staging f16)
THREE = '''
pipeline three(x: tensor[p, q, r, k], w1: tensor[k, n], w2: tensor[n, m], w3: tensor[m, k]):
    return compute(x, w1, w2, w3) {
        for i in 0..P, j in 0..Q, l in 0..R:
            shared var first[N]
            shared var second[M]: f16
            for n in 0..N:
                var acc = 0.0
                for k in 0..K:
                    acc += x[i, j, l, k] * w1[k, n]
                first[n] = tanh(acc)
            barrier()
            for m in 0..M:
                var acc = 0.0
                for n in 0..N:
                    acc += first[n] * w2[n, m]
                second[m] = acc
            barrier()
            for k in 0..K:
                var acc = 0.0
                for m in 0..M:
                    acc += second[m] * w3[m, k]
                out[i, j, l, k] = acc
    }
three(x, w1, w2, w3)
'''


def _gelu_tanh(x):
    return x * 0.5 * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _ffn_env(rng, b, s, h, f):
    return {"x": _rand(rng, b, s, h), "wu": _rand(rng, h, f, scale=h ** -0.5),
            "wd": _rand(rng, f, h, scale=f ** -0.5)}


def _ffn_numpy(env):
    return _gelu_tanh(env["x"] @ env["wu"]) @ env["wd"]


def _run(source, device="cpu", fuse=True, **env):
    session = zynbook.Session(device)
    session.fuse = fuse
    value = session.run(source, **env)
    return np.asarray(value.numpy()), session


def _split_notes(session) -> list:
    return [dict(kernel_sections(k)).get("fusion", "") for k in session.last_kernels]


# --------------------------------------------------------------------- split blocks


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("sizes", [(2, 3, 5, 7), (1, 37, 19, 53)])
def test_the_ffn_block_runs_as_two_kernels(device, sizes):
    env = _ffn_env(np.random.default_rng(sum(sizes)), *sizes)
    value, session = _run(FFN, device, **env)
    assert len(session.launches) == 2
    notes = _split_notes(session)
    assert "phase 1 of 2, writes up[batch, seq, ffn_hidden]" in notes[0]
    assert "phase 2 of 2, writes out, reads up" in notes[1]
    assert_close(value, _ffn_numpy(env), "f32", "contraction")


def test_the_split_computes_what_the_whole_block_computes():
    # (within a contraction's tolerance: the reference runs a contraction as a matmul)
    env = _ffn_env(np.random.default_rng(3), 2, 37, 19, 53)
    split, session = _run(FFN, **env)
    whole, alone = _run(FFN, fuse=False, **env)
    assert (len(session.launches), len(alone.launches)) == (2, 1)
    assert_close(split, whole, "f32", "contraction")


def test_each_phase_is_a_contraction_the_gemm_schedule_takes():
    env = _ffn_env(np.random.default_rng(4), 4, 16, 64, 96)
    _, session = _run(FFN, **env)
    first, second = session.last_kernels
    found = contraction(first.kernel)
    assert isinstance(found, Contraction) and found.epilogue is not None   # the GELU
    assert isinstance(contraction(second.kernel), Contraction)
    for k in (first, second):
        assert schedules.chosen(k.kernel, cuda_target(), k.sizes).name == "gemm"


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_every_device_launches_both_phases_in_its_gemm_schedule(device):
    env = _ffn_env(np.random.default_rng(5), 4, 16, 64, 96)
    value, session = _run(FFN, device, **env)
    assert len(session.launches) == 2
    for launch in session.launches:
        assert launch.geometry["schedule"].startswith("contraction as GEMM"), launch.geometry
    assert_close(value, _ffn_numpy(env), "f32", "contraction")


@pytest.mark.parametrize("device", DEVICES)
def test_other_names_one_row_loop_relu_and_a_phase_two_epilogue(device):
    rng = np.random.default_rng(6)
    env = {"x": _rand(rng, 37, 19), "wu": _rand(rng, 19, 53, scale=0.2),
           "wd": _rand(rng, 53, 19, scale=0.2), "bias": _rand(rng, 19)}
    value, session = _run(ROWS_RELU, device, **env)
    assert len(session.launches) == 2
    expected = np.maximum(env["x"] @ env["wu"], 0.0) @ env["wd"] * 0.5 + env["bias"]
    assert_close(value, expected, "f32", "contraction")


@pytest.mark.parametrize("device", ["cpu", "cpu:native"])
def test_three_outer_loops_three_phases_and_an_f16_staging_array(device):
    rng = np.random.default_rng(7)
    env = {"x": _rand(rng, 2, 3, 5, 11), "w1": _rand(rng, 11, 13, scale=0.3),
           "w2": _rand(rng, 13, 7, scale=0.3), "w3": _rand(rng, 7, 11, scale=0.3)}
    value, session = _run(THREE, device, **env)
    assert len(session.launches) == 3
    assert "writes second[P, Q, R, M]" in _split_notes(session)[1]
    second = (np.tanh(env["x"] @ env["w1"]) @ env["w2"]).astype(np.float16).astype(np.float32)
    assert_close(value, second @ env["w3"], "f32", "contraction")
    whole, _ = _run(THREE, device, fuse=False, **env)
    assert_close(value, whole, "f32", "contraction")


# ------------------------------------------------------------------- kept whole


def _kernel_of(source: str):
    (k,) = zynbook.compile(source).cir
    return k


def _ffn_sizes(b=2, s=3, h=5, f=7):
    return {"batch": b, "seq": s, "hidden": h, "ffn_hidden": f, "normed_d0": b, "normed_d1": s,
            "normed_d2": h, "up_w_d0": h, "up_w_d1": f, "down_w_d0": f, "down_w_d1": h}


NOT_SPLIT = {
    # the staging array read in the phase that writes it (another thread's element)
    "read where written": ("up[f] = x * 0.5", "up[f] = up[0] + x * 0.5", "read in the phase"),
    # a later phase reads it at an index no loop keeps in range
    "read elsewhere": ("sum += up[f] * down_w[f, h]", "sum += up[f % 3] * down_w[f, h]",
                       "in range"),
    # written at one element, not at its loop position
    "not its loop": ("up[f] = x * 0.5", "up[0] = x * 0.5", "once per element"),
    # a barrier inside the row's loop
    "barrier in a loop": ("            barrier()\n",
                          "            barrier()\n            for z in 0..2:\n"
                          "                barrier()\n",
                          "barrier is inside"),
    # a local of the first phase read by the second
    "local across phases": ("            barrier()\n",
                            "            let kept = 2.0\n            barrier()\n",
                            "local of one phase"),
}


@pytest.mark.parametrize("case", sorted(NOT_SPLIT))
def test_blocks_of_other_shapes_stay_whole(case):
    old, new, why = NOT_SPLIT[case]
    assert old in FFN
    source = FFN.replace(old, new)
    if case == "local across phases":
        source = source.replace("out[b, s, h] = sum", "out[b, s, h] = sum * kept")
    reason = fission.split(_kernel_of(source), _ffn_sizes())
    assert isinstance(reason, str) and why in reason, reason
    env = _ffn_env(np.random.default_rng(8), 2, 3, 5, 7)
    try:
        split, session = _run(source, **env)
    except ZynMLError:
        return      # refused by the language itself: nothing to split
    whole, _ = _run(source, fuse=False, **env)
    assert len(session.launches) == 1
    np.testing.assert_array_equal(split, whole)


def test_a_temporary_over_the_budget_is_not_made():
    reason = fission.split(_kernel_of(FFN), _ffn_sizes(64, 4096, 768, 3072))
    assert isinstance(reason, str) and "GiB" in reason
    assert isinstance(fission.split(_kernel_of(FFN), _ffn_sizes(8, 512, 768, 3072)), list)


@pytest.mark.parametrize("how", ["nofuse", "config"])
def test_nofuse_and_fuse_false_keep_the_block_whole(how):
    env = _ffn_env(np.random.default_rng(9), 2, 3, 5, 7)
    source = FFN.replace("@kernel fused", "@kernel fused\n        @nofuse") if how == "nofuse" \
        else "config { fuse: false }\n" + FFN
    value, session = _run(source, **env)
    assert len(session.launches) == 1
    assert_close(value, _ffn_numpy(env), "f32", "contraction")


@pytest.mark.parametrize("device", ["cpu", "cpu:native"])
@pytest.mark.parametrize("old,new,line", [
    ("normed[b, s, h]", "normed[b, s, h + 1]", 11),
    ("down_w[f, h]", "down_w[f, h + 1]", 19)])
def test_an_index_out_of_range_in_either_phase_names_its_line(device, old, new, line):
    env = _ffn_env(np.random.default_rng(10), 2, 3, 5, 7)
    source = FFN.replace(old, new)
    messages = []
    for fuse in (True, False):
        with pytest.raises(ZynMLError) as err:
            _run(source, device, fuse, **env)
        assert err.value.span.line == line
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_nan_in_a_row_stays_in_that_row():
    env = _ffn_env(np.random.default_rng(11), 2, 3, 5, 7)
    env["x"][1, 2, 0] = np.nan
    value, _ = _run(FFN, **env)
    whole, _ = _run(FFN, fuse=False, **env)
    np.testing.assert_array_equal(np.isnan(value), np.isnan(whole))
    assert np.isnan(value[1, 2]).all() and not np.isnan(value[0]).any()


@pytest.mark.parametrize("device", DEVICES)
def test_an_f32_staging_array_of_f16_values_is_an_f16_temporary(device):
    """On f16 inputs the FFN's `shared var up` (f32) is stored only f16 values (the GELU of
    an f16 sum): its temporary is f16, read widened (exact), so phase 2 multiplies f16 by
    f16 (on CUDA, f16 tensor cores) and the result is the whole block's."""
    rng = np.random.default_rng(11)
    env = {k: v.astype(np.float16) for k, v in _ffn_env(rng, 2, 9, 48, 64).items()}
    split, session = _run(FFN, device, **env)
    whole, _ = _run(FFN, device, fuse=False, **env)
    first, second = session.last_kernels
    assert first.kernel.output.dtype == "f16"
    assert [b.dtype for b in second.kernel.inputs] == ["f16", "f16"]
    found = contraction(second.kernel)
    assert isinstance(found, Contraction) and found.a_load.ty.dtype == "f16"
    assert_close(split, whole, "f16", "contraction")
    want = _ffn_numpy({k: v.astype(np.float32) for k, v in env.items()})
    assert_close(split, want, "f16", "contraction")


def test_a_staging_array_of_mixed_values_keeps_its_dtype():
    """A staging array stored f32 values anywhere keeps its own dtype (THREE's `first`: the
    tanh of an f32 sum)."""
    rng = np.random.default_rng(12)
    env = {"x": _rand(rng, 2, 1, 3, 8), "w1": _rand(rng, 8, 5), "w2": _rand(rng, 5, 6),
           "w3": _rand(rng, 6, 8)}
    _, session = _run(THREE, **env)
    assert [k.kernel.output.dtype for k in session.last_kernels[:2]] == ["f32", "f16"]
