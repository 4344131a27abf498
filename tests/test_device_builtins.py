"""The compute-device interface as ZynML builtins: every builtin called from a ZynML program
gives what the Python interface (zynbook.nn.Device, checked against PyTorch in
test_device_interface.py) gives on the same device, and numpy where numpy says it simply;
on every device present. A buffer of the wrong length is a ZynML shape error with the line
and a caret under the argument, naming both sizes."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import zynbook
from zynbook import nn
from zynbook.runtime.device_ops import DEVICE_OPS

from tolerances import assert_within

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = ["cpu"] + [d["id"] for d in zynbook.compute_devices()
                     if d["id"] != "cpu" and not d["id"].startswith("gl:")
                     and (not _WANTED or d["id"] in _WANTED.split(","))]
TOL = {"rtol": 1e-4, "atol": 1e-5}

rng = np.random.default_rng(17)
X34, W45 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 5)))
ROWS = (rng.standard_normal((3, 7)) * 2).astype(np.float32)
NORM_W = rng.standard_normal(7).astype(np.float32)
TABLE = rng.standard_normal((6, 4)).astype(np.float32)
IDS = np.array([5, 0, 2, 2, 3], np.uint32)
Q = rng.standard_normal((5, 4 * 3)).astype(np.float32)          # seq 5, 4 heads of 3
KV = rng.standard_normal((5, 2 * 3)).astype(np.float32)         # 2 kv heads
V2 = rng.standard_normal((5, 2 * 3)).astype(np.float32)
G = rng.standard_normal((5, 4 * 3)).astype(np.float32)
LOGITS = (rng.standard_normal((4, 6)) * 2).astype(np.float32)
TARGETS = np.array([1, 0, 5, 3], np.uint32)
P0, GRAD = rng.standard_normal(9).astype(np.float32), rng.standard_normal(9).astype(np.float32)
INPUTS = dict(x34=X34, w45=W45, rows=ROWS, norm_w=NORM_W, table=TABLE, ids=IDS.astype(np.int32),
              q=Q, k=KV, v=V2, g=G, logits=LOGITS, targets=TARGETS.astype(np.int32), p0=P0,
              grad=GRAD)


def _py(d, name, *args):
    """The Python interface's result, as host arrays."""
    up = {"ids": lambda: d.upload_u32(IDS), "targets": lambda: d.upload_u32(TARGETS)}
    vals = [up[a]() if isinstance(a, str) and a in up else
            d.upload(a) if isinstance(a, np.ndarray) else a for a in args]
    out = getattr(d, name)(*vals)
    outs = out if isinstance(out, tuple) else (out,)
    return [np.array([o], np.float32) if isinstance(o, float) else d.download(o) for o in outs]


# name: (ZynML program, its value as arrays from the Python interface on device d)
CASES = {
    "upload upload_u32 download": ("[download(upload(x34)), download(upload_u32(ids))]",
                        lambda d: [X34.ravel(), IDS]),
    "alloc": ("download(alloc(5))", lambda d: [np.zeros(5, np.float32)]),
    "elementwise": ("""
pipeline f(xs):
    let s = sigmoid(xs[0]) * xs[1]
    return where(xs[0] > 0.0, s * s, tanh(xs[1]) - 1.5) + max(xs[0], xs[1]) / (1.0 + exp(-xs[1]))
download(elementwise([upload(x34), upload(reshape(w45, [20])[0:12])], 12, f))
""", lambda d: [d.download(d.elementwise(
        [d.upload(X34), d.upload(W45.ravel()[:12])], 12,
        lambda xs: nn.expr.where(xs[0] > 0.0, (nn.expr.sigmoid(xs[0]) * xs[1]) ** 2,
                                 nn.expr.tanh(xs[1]) - 1.5)
        + nn.expr.maximum(xs[0], xs[1]) / (1.0 + nn.expr.exp(-xs[1]))))]),
    "matmul": ("download(matmul(upload(x34), upload(w45), 3, 4, 5))",
               lambda d: [(X34 @ W45).ravel()]),
    "softmax": ("download(softmax(upload(rows), 3, 7))",
                lambda d: [(np.exp(ROWS) / np.exp(ROWS).sum(1, keepdims=True)).ravel()]),
    "rms_norm": ("download(rms_norm(upload(rows), upload(norm_w), 3, 7, 1e-5))",
                 lambda d: [(ROWS / np.sqrt((ROWS ** 2).mean(1, keepdims=True) + 1e-5)
                             * NORM_W).ravel()]),
    "embedding": ("download(embedding(upload(table), upload_u32(ids), 5, 4))",
                  lambda d: [TABLE[IDS].ravel()]),
    "reduce_sum": ("[download(reduce_sum(upload(rows), [3, 7], 0)), "
                   "download(reduce_sum(upload(rows), [3, 7], axis=1))]",
                   lambda d: [ROWS.sum(0), ROWS.sum(1)]),
    "causal_attention": ("download(causal_attention(upload(q), upload(k), upload(v), 5, 4, 2, 3))",
                         lambda d: _py(d, "causal_attention", Q, KV, V2, 5, 4, 2, 3)),
    "kv_attention": ("download(kv_attention(upload(reshape(q, [-1])[24:60]), upload(k), upload(v), "
                     "2, 3, 4, 2, 3))",
                     lambda d: _py(d, "kv_attention", Q.ravel()[24:60].copy(), KV, V2, 2, 3, 4, 2, 3)),
    "transpose_2d": ("download(transpose_2d(upload(x34), 3, 4))", lambda d: [X34.T.ravel()]),
    "softmax_backward": ("""
let sm = softmax(upload(rows), 3, 7)
download(softmax_backward(sm, upload(reshape(g, [-1])[0:21]), 3, 7))
""", lambda d: [d.download(d.softmax_backward(d.softmax(d.upload(ROWS), 3, 7),
                                              d.upload(G.ravel()[:21]), 3, 7))]),
    "rms_norm_backward": ("""
let (dx, dw) = rms_norm_backward(upload(rows), upload(norm_w), upload(reshape(g, [-1])[0:21]), 3, 7, 1e-5)
[download(dx), download(dw)]
""", lambda d: _py(d, "rms_norm_backward", ROWS, NORM_W, G.ravel()[:21].copy(), 3, 7, 1e-5)),
    "embedding_backward": ("download(embedding_backward(upload(reshape(g, [-1])[0:20]), "
                           "upload_u32(ids), 6, 5, 4))",
                           lambda d: _py(d, "embedding_backward", G.ravel()[:20].copy(), "ids",
                                         6, 5, 4)),
    "causal_attention_backward": ("""
let (dq, dk, dv) = causal_attention_backward(upload(g), upload(q), upload(k), upload(v), 5, 4, 2, 3)
[download(dq), download(dk), download(dv)]
""", lambda d: _py(d, "causal_attention_backward", G, Q, KV, V2, 5, 4, 2, 3)),
    "cross_entropy_forward_backward": ("""
let (loss, dlogits) = cross_entropy_forward_backward(upload(logits), upload_u32(targets), 4, 6, 0)
[tensor([loss]), download(dlogits)]
""", lambda d: _py(d, "cross_entropy_forward_backward", LOGITS, "targets", 4, 6, 0)),
    "sync copy_buffer bias_add add_assign zero_buffer": ("""
let a = upload(x34)
let c = copy_buffer(a)
add_assign(c, a)
let z = upload(w45)
zero_buffer(z)
sync()
[download(a), download(c), download(bias_add(a, upload(norm_w[0:4]), 12, 4)), download(z)]
""", lambda d: [X34.ravel(), 2 * X34.ravel(), (X34 + NORM_W[:4]).ravel(), np.zeros(20)]),
    "adamw_step": ("""
let p = upload(p0)
let m = alloc(9)
let v = alloc(9)
for t in 1..3:
    adamw_step(p, upload(grad), m, v, 0.01, 0.9, 0.95, 1e-8, 0.1, t)
[download(p), download(m), download(v)]
""", lambda d: _adamw_py(d)),
}


def _adamw_py(d):
    p, m, v = d.upload(P0), d.alloc(9), d.alloc(9)
    for t in (1, 2):
        d.adamw_step(p, d.upload(GRAD), m, v, 0.01, 0.9, 0.95, 1e-8, 0.1, t)
    return [d.download(p), d.download(m), d.download(v)]


def test_every_builtin_has_a_case():
    named = {w for case in CASES for w in case.split()}
    assert set(DEVICE_OPS) <= named, sorted(set(DEVICE_OPS) - named)


@pytest.mark.parametrize("device_id", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_builtin_equals_the_python_interface(name, device_id):
    source, expect = CASES[name]
    program = zynbook.compile(source)           # checked before anything runs
    assert set(program.free_names) <= set(INPUTS)
    got = zynbook.run(source, device=device_id, **INPUTS)
    got = got if isinstance(got, list) else [got]
    want = expect(nn.device(device_id))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == np.asarray(w).shape, (g.shape, np.asarray(w).shape)
        assert_within(g, w, **TOL)


@pytest.mark.parametrize("device_id", DEVICES)
def test_buffers_live_on_the_session_device(device_id):
    buf = zynbook.run("matmul(upload(x34), upload(w45), 3, 4, 5)", device=device_id, **INPUTS)
    assert isinstance(buf, nn.Buffer) and len(buf) == 15
    assert buf.owner is nn.device(device_id)
    # device= puts a buffer elsewhere; operations run where their buffers are
    other = DEVICES[-1]
    b = zynbook.run(f'softmax(upload(rows, device="{other}"), 3, 7)', device="cpu", **INPUTS)
    assert b.owner is nn.device(other)
    # a buffer made in Python is a ZynML value, and back
    d = nn.device(device_id)
    out = zynbook.run("download(transpose_2d(x, 4, 3))", device=device_id, x=d.upload(X34.T))
    np.testing.assert_array_equal(np.asarray(out), X34.ravel())


# ---------------------------------------------------------------- mistakes

BAD = [
    ("let a = upload(x34)\nlet b = upload(w45)\nlet c = matmul(a, b, 3, 5, 4)\n",
     "shape", 3, "a, b", "`a` has 12 elements but m * k = 3 * 5 = 15"),
    ("let a = upload(x34)\nlet c = matmul(a, upload(w45), 3, 4, 4)\n",
     "shape", 2, "upload(w45)", "`b` has 20 elements but k * n = 4 * 4 = 16"),
    ("pipeline f(xs):\n    return xs[0] * xs[1]\nlet a = upload(x34)\n"
     "let y = elementwise([a, upload(w45)], 12, f)\n",
     "shape", 4, "upload(w45)", "`inputs[1]` has 20 elements but numel = 12"),
    ("let p = upload(p0)\nlet m = alloc(9)\nlet v = alloc(8)\n"
     "adamw_step(p, upload(grad), m, v=v, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8, "
     "weight_decay=0.0, step_t=1)\n", "shape", 4, "v, lr", "`v` has 8 elements but len(param) = 9"),
    ("let e = embedding(upload(table), upload(ids), 5, 4)\n", "type", 1, "upload(ids)",
     "`ids` must hold u32 values"),
    ("let e = causal_attention(upload(q), upload(k), upload(v), 5, 4, 3, 3)\n", "shape", 1,
     "causal_attention(", "n_kv_heads = 3 does not divide n_heads = 4"),
    ("let a = matmul(upload(x34), upload(w45), 3, 4)\n", "type", 1, "matmul(",
     "matmul() needs `n`"),
    ("pipeline f(xs):\n    return xs[0] % 2.0\nlet y = elementwise([upload(x34)], 12, f)\n",
     "type", 2, "xs[0] % 2.0", "% is not available in an elementwise expression"),
    ("let y = elementwise([upload(x34)], 12, relu)\n", "type", 1, "relu",
     "`f` is a pipeline of one parameter"),
]


@pytest.mark.parametrize("source,kind,line,at,message", BAD)
def test_mistakes_are_zynml_errors_under_the_argument(source, kind, line, at, message):
    with pytest.raises(zynbook.ZynMLError) as info:
        zynbook.run(source, device="cpu", **INPUTS)
    err = info.value
    assert err.kind == kind, err.render()
    assert message in err.message, err.render()
    assert err.line == line, err.render()
    assert err.source_line[err.column - 1:].startswith(at), err.render()
    assert "^" in err.render()


STATIC = [
    ("let a = upload(zeros([3, 4]))\nlet b = upload(zeros([4, 5]))\nlet c = matmul(a, b, 3, 5, 4)\n",
     3, "a, b", "`a` has 12 elements but m * k = 3 * 5 = 15"),
    ("let a = upload(zeros([3, 4]))\nlet (dx, dw) = rms_norm_backward(a, alloc(4), a, 3, 4, 1e-5)\n"
     "let y = transpose_2d(dw, 2, 3)\n", 3, "dw", "`buf` has 4 elements but rows * cols = 2 * 3 = 6"),
    ("pipeline f(xs):\n    return xs[0]\nlet a = alloc(12)\n"
     "let y = elementwise([a, upload([1.0, 2.0])], 12, f)\n", 4, "upload([1.0",
     "`inputs[1]` has 2 elements but numel = 12"),
    ("let q = alloc(24)\nlet k = alloc(12)\nlet y = kv_attention(q, k, k, 3, 2, 4, 2, 3)\n", 3,
     "k, k", "`k_cache` has 12 elements but (cache_start + q_len) * n_kv_heads * head_dim = 30"),
    ("let p = alloc(9)\nadamw_step(p, alloc(9), alloc(9), v=alloc(8), lr=0.1, beta1=0.9, "
     "beta2=0.99, eps=1e-8, weight_decay=0.0, step_t=1)\n", 2, "alloc(8)",
     "`v` has 8 elements but len(param) = 9"),
]


@pytest.mark.parametrize("source,line,at,message", STATIC)
def test_known_lengths_are_checked_before_anything_runs(source, line, at, message):
    with pytest.raises(zynbook.ZynMLShapeError) as info:
        zynbook.compile(source)
    err = info.value
    assert message in err.message and err.line == line, err.render()
    assert err.source_line[err.column - 1:].startswith(at), err.render()


def test_a_var_buffer_may_change_length():
    zynbook.compile("var b = alloc(4)\nb = alloc(6)\nlet y = transpose_2d(b, 2, 3)\n")
    np.testing.assert_array_equal(np.asarray(zynbook.run(
        "var b = alloc(4)\nb = upload([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])\n"
        "download(transpose_2d(b, 2, 3))")), [1, 4, 2, 5, 3, 6])
