"""The spec's kernels written directly as CIR, for the CUDA renderer tests.

Each builder returns (kernel, sizes, make_inputs(rng) -> list of numpy arrays,
reference(inputs, sizes) -> numpy array). The references are plain numpy written here.
"""
from __future__ import annotations

import numpy as np

from zynbook.compiler import cir

F32 = cir.Ty("f32")
I32 = cir.Ty("i32")
BOOL = cir.Ty("bool")


def c(v, ty=None):
    if ty is None:
        ty = F32 if isinstance(v, float) else I32
    return cir.Const(v, ty)


def v(name, ty=I32):
    return cir.Var(name, ty)


def ld(buf, *idx, ty=F32):
    return cir.Load(buf, tuple(idx), ty)


def b(op, x, y, ty=None):
    if ty is None:
        ty = BOOL if op in ("<", "<=", ">", ">=", "==", "!=", "and", "or") else (
            x.ty if x.ty.dtype != "i32" or y.ty.dtype == "i32" else y.ty)
    return cir.Bin(op, x, y, ty)


def call(fn, *args, ty=F32):
    return cir.Call(fn, tuple(args), ty)


def loop(var, stop, body, start=0, step=1, parallel=False):
    s = stop if isinstance(stop, cir.Expr) else (v(stop) if isinstance(stop, str) else c(stop))
    return cir.Loop(var, c(start) if isinstance(start, int) else start, s,
                    c(step) if isinstance(step, int) else step, tuple(body), parallel)


def pnest(vars_stops, body):
    """`for a in 0..A, b in 0..B:` marked parallel (what the lowering does for output loops)."""
    for var, stop in reversed(vars_stops):
        body = [loop(var, stop, body, parallel=True)]
    return body[0]


def kernel(name, kind, inputs, output, dims, body, params=(), scalars=(), schedule=None):
    return cir.Kernel(name, cir.KernelType(kind, tuple(sorted(params))), tuple(inputs), output,
                      tuple(sorted(dims)), tuple(scalars), tuple(body),
                      schedule or cir.Schedule())


def buf(name, dtype, *shape, access="read"):
    return cir.Buffer(name, dtype, tuple(shape), access)


def out(dtype, *shape):
    return cir.Buffer("out", dtype, tuple(shape), "write")


def assign_add(name, val, ty=F32):
    return cir.Assign(name, b("+", v(name, ty), val, ty))


# ---------------------------------------------------------------------------- kernels


def relu(n=1000, dtype="f32"):
    ty = cir.Ty(dtype)
    k = kernel("relu", "elementwise", [buf("x", dtype, "len")], out(dtype, "len"), ["len"],
               [pnest([("i", "len")], [cir.Store("out", (v("i"),),
                                                 call("relu", ld("x", v("i"), ty=ty), ty=ty))])])
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(_np(dtype))], \
        lambda ins, s: np.maximum(ins[0].astype(np.float32), 0)


def axpb(n=4096):
    body = [pnest([("i", "len")], [cir.Store("out", (v("i"),),
                                             b("+", b("*", ld("x", v("i")), ld("y", v("i"))), c(1.0)))])]
    k = kernel("mul_add", "elementwise", [buf("x", "f32", "len"), buf("y", "f32", "len")],
               out("f32", "len"), ["len"], body)
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32) for _ in range(2)], \
        lambda ins, s: ins[0] * ins[1] + 1.0


def broadcast_scale(rows=64, cols=96):
    body = [pnest([("i", "rows"), ("j", "cols")],
                  [cir.Store("out", (v("i"), v("j")), b("*", ld("matrix", v("i"), v("j")),
                                                         ld("vector", v("j"))))])]
    k = kernel("scaled", "elementwise", [buf("matrix", "f32", "rows", "cols"), buf("vector", "f32", "cols")],
               out("f32", "rows", "cols"), ["cols", "rows"], body,
               schedule=cir.Schedule(broadcast=(("vector", 1),)))
    return k, {"rows": rows, "cols": cols}, \
        lambda rng: [rng.standard_normal((rows, cols)).astype(np.float32),
                     rng.standard_normal(cols).astype(np.float32)], \
        lambda ins, s: ins[0] * ins[1][None, :]


def gelu_tanh(n=8192):
    xi = ld("x", v("i"))
    x3 = v("x3", F32)
    body = [pnest([("i", "len")], [
        cir.Let("x3", b("*", b("*", xi, xi), xi)),
        cir.Store("out", (v("i"),), b("*", b("*", xi, c(0.5)), b("+", c(1.0), call(
            "tanh", b("*", c(0.7978845608), b("+", xi, b("*", c(0.044715), x3)))))))])]
    k = kernel("gelu", "elementwise", [buf("x", "f32", "len")], out("f32", "len"), ["len"], body)

    def ref(ins, s):
        x = ins[0].astype(np.float64)
        return (x * 0.5 * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))).astype(np.float32)
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32)], ref


def rope(batch=2, heads=3, seq=16, hd=32):
    x0 = ld("x", v("b"), v("h"), v("s"), b("*", v("d"), c(2)))
    x1 = ld("x", v("b"), v("h"), v("s"), b("+", b("*", v("d"), c(2)), c(1)))
    body = [pnest([("b", "batch"), ("h", "heads"), ("s", "seq"), ("d", b("/", v("head_dim"), c(2)))], [
        cir.Let("x0", x0), cir.Let("x1", x1),
        cir.Let("c", ld("cos_cache", v("s"), v("d"))),
        cir.Let("sn", ld("sin_cache", v("s"), v("d"))),
        cir.Store("out", (v("b"), v("h"), v("s"), b("*", v("d"), c(2))),
                  b("-", b("*", v("x0", F32), v("c", F32)), b("*", v("x1", F32), v("sn", F32)))),
        cir.Store("out", (v("b"), v("h"), v("s"), b("+", b("*", v("d"), c(2)), c(1))),
                  b("+", b("*", v("x0", F32), v("sn", F32)), b("*", v("x1", F32), v("c", F32)))),
    ])]
    k = kernel("rope", "elementwise", [buf("x", "f32", "batch", "heads", "seq", "head_dim"),
                                       buf("cos_cache", "f32", "seq", "half"),
                                       buf("sin_cache", "f32", "seq", "half")],
               out("f32", "batch", "heads", "seq", "head_dim"),
               ["batch", "half", "head_dim", "heads", "seq"], body)
    sizes = {"batch": batch, "heads": heads, "seq": seq, "head_dim": hd, "half": hd // 2}

    def ref(ins, s):
        x, cc, ss = ins
        o = np.empty_like(x)
        o[..., 0::2] = x[..., 0::2] * cc - x[..., 1::2] * ss
        o[..., 1::2] = x[..., 0::2] * ss + x[..., 1::2] * cc
        return o
    return k, sizes, lambda rng: [rng.standard_normal((batch, heads, seq, hd)).astype(np.float32),
                                  rng.standard_normal((seq, hd // 2)).astype(np.float32),
                                  rng.standard_normal((seq, hd // 2)).astype(np.float32)], ref


def reduce_full(op="+", n=100_000):
    k = kernel(f"reduce_{'sum' if op == '+' else op}", "reduce", [buf("data", "f32", "len")],
               out("f32", 1), ["len"], [loop("i", "len", [cir.Yield(ld("data", v("i")))])],
               params=(("op", op),))
    fn = {"+": np.sum, "max": np.max, "min": np.min}[op]
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32)], \
        lambda ins, s: np.array([fn(ins[0].astype(np.float64))], dtype=np.float32)


def sum_squares(n=5000):
    x = ld("data", v("i"))
    k = kernel("sumsq", "reduce", [buf("data", "f32", "len")], out("f32", 1), ["len"],
               [loop("i", "len", [cir.Yield(b("*", x, x))])], params=(("op", "+"),))
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32)], \
        lambda ins, s: np.array([np.sum(ins[0].astype(np.float64) ** 2)], dtype=np.float32)


def argmax(n=300_000):
    k = kernel("argmax", "reduce", [buf("data", "f32", "len")], out("i64", 1), ["len"],
               [loop("i", "len", [cir.Yield(ld("data", v("i")), v("i"))])], params=(("op", "argmax"),))
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32)], \
        lambda ins, s: np.array([np.argmax(ins[0])], dtype=np.int64)


def row_sums(rows=300, cols=5000, axis=1):
    body = [loop("i", "rows", [loop("j", "cols", [cir.Yield(ld("matrix", v("i"), v("j")))])])]
    oshape = "rows" if axis == 1 else "cols"
    k = kernel(f"sums_axis{axis}", "reduce", [buf("matrix", "f32", "rows", "cols")], out("f32", oshape),
               ["cols", "rows"], body, params=(("axis", axis), ("op", "+")))
    return k, {"rows": rows, "cols": cols}, \
        lambda rng: [rng.standard_normal((rows, cols)).astype(np.float32)], \
        lambda ins, s: ins[0].astype(np.float64).sum(axis=axis).astype(np.float32)


def matmul(M=256, N=192, K=320, dtype="f32"):
    ty = cir.Ty(dtype)
    body = [pnest([("i", "M"), ("j", "N")], [
        cir.Let("sum", c(0.0), mutable=True),
        loop("k", "K", [assign_add("sum", b("*", ld("A", v("i"), v("k"), ty=ty), ld("B", v("k"), v("j"), ty=ty),
                                            ty=F32))]),
        cir.Store("out", (v("i"), v("j")), v("sum", F32))])]
    k = kernel("matmul", "matmul", [buf("A", dtype, "M", "K"), buf("B", dtype, "K", "N")], out(dtype, "M", "N"),
               ["K", "M", "N"], body, schedule=cir.Schedule(workgroup=(16, 16), shared_bytes=2048))
    return k, {"M": M, "N": N, "K": K}, \
        lambda rng: [rng.standard_normal((M, K)).astype(_np(dtype)), rng.standard_normal((K, N)).astype(_np(dtype))], \
        lambda ins, s: (ins[0].astype(np.float64) @ ins[1].astype(np.float64)).astype(np.float32)


def matmul_t(M=96, N=80, K=48, dtype="bf16", ta=True, tb=True, b_dtype=None):
    """out = A @ B with A stored (K, M) when `ta` and B stored (N, K) when `tb`; B of
    `b_dtype` where given (operands of two types make an f32 product)."""
    ty, b_dtype = cir.Ty(dtype), b_dtype or dtype
    a = ld("A", v("k"), v("i"), ty=ty) if ta else ld("A", v("i"), v("k"), ty=ty)
    bb = ld("B", v("j"), v("k"), ty=cir.Ty(b_dtype)) if tb else ld("B", v("k"), v("j"), ty=cir.Ty(b_dtype))
    body = [pnest([("i", "M"), ("j", "N")], [
        cir.Let("sum", c(0.0), mutable=True),
        loop("k", "K", [assign_add("sum", b("*", a, bb, ty=F32))]),
        cir.Store("out", (v("i"), v("j")), v("sum", F32))])]
    sa, sb = (("K", "M") if ta else ("M", "K")), (("N", "K") if tb else ("K", "N"))
    k = kernel("matmul_t", "matmul", [buf("A", dtype, *sa), buf("B", b_dtype, *sb)],
               out(dtype if b_dtype == dtype else "f32", "M", "N"),
               ["K", "M", "N"], body)
    shp = {"M": M, "N": N, "K": K}

    def ref(ins, s):
        A, B = (x.astype(np.float64) for x in ins)
        return ((A.T if ta else A) @ (B.T if tb else B)).astype(np.float32)

    def make(rng):       # inputs exactly representable in `dtype`: the reference sees what the GPU sees
        return [_representable(rng.standard_normal(tuple(shp[d] for d in dims)), dt)
                for dims, dt in ((sa, dtype), (sb, b_dtype))]
    return k, shp, make, ref


def _representable(x, dtype):
    if dtype == "bf16":
        bits = np.asarray(x, dtype=np.float32).view(np.uint32)
        return ((bits + 0x8000) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.asarray(x).astype(_np(dtype))


def batched_matmul(batch=3, M=100, N=70, K=50):
    body = [pnest([("b", "batch"), ("i", "M"), ("j", "N")], [
        cir.Let("sum", c(0.0), mutable=True),
        loop("k", "K", [assign_add("sum", b("*", ld("A", v("b"), v("i"), v("k")), ld("B", v("b"), v("k"), v("j"))))]),
        cir.Store("out", (v("b"), v("i"), v("j")), v("sum", F32))])]
    k = kernel("bmm", "batched_matmul", [buf("A", "f32", "batch", "M", "K"), buf("B", "f32", "batch", "K", "N")],
               out("f32", "batch", "M", "N"), ["K", "M", "N", "batch"], body)
    return k, {"batch": batch, "M": M, "N": N, "K": K}, \
        lambda rng: [rng.standard_normal((batch, M, K)).astype(np.float32),
                     rng.standard_normal((batch, K, N)).astype(np.float32)], \
        lambda ins, s: np.matmul(ins[0].astype(np.float64), ins[1].astype(np.float64)).astype(np.float32)


def conv2d(batch=2, cin=8, cout=16, h=12, w=12, kh=3, kw=3, stride=1, padding=1):
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    ih = b("-", b("+", b("*", v("oh"), v("stride")), v("kh")), v("padding"))
    iw = b("-", b("+", b("*", v("ow"), v("stride")), v("kw")), v("padding"))
    cond = b("and", b("and", b("and", b(">=", v("ih"), c(0)), b("<", v("ih"), v("in_h"))),
                      b(">=", v("iw"), c(0))), b("<", v("iw"), v("in_w")))
    body = [pnest([("b", "batch"), ("oc", "out_channels"), ("oh", "out_h"), ("ow", "out_w")], [
        cir.Let("sum", ld("bias", v("oc")), mutable=True),
        loop("ic", "in_channels", [loop("kh", "kernel_h", [loop("kw", "kernel_w", [
            cir.Let("ih", ih), cir.Let("iw", iw),
            cir.If(cond, (assign_add("sum", b("*", ld("input", v("b"), v("ic"), v("ih"), v("iw")),
                                                ld("kernel", v("oc"), v("ic"), v("kh"), v("kw")))),))])])]),
        cir.Store("out", (v("b"), v("oc"), v("oh"), v("ow")), v("sum", F32))])]
    k = kernel("conv", "conv2d", [buf("input", "f32", "batch", "in_channels", "in_h", "in_w"),
                                  buf("kernel", "f32", "out_channels", "in_channels", "kernel_h", "kernel_w"),
                                  buf("bias", "f32", "out_channels")],
               out("f32", "batch", "out_channels", "out_h", "out_w"),
               ["batch", "in_channels", "in_h", "in_w", "kernel_h", "kernel_w", "out_channels", "out_h",
                "out_w", "padding", "stride"], body)
    sizes = dict(batch=batch, in_channels=cin, out_channels=cout, in_h=h, in_w=w, kernel_h=kh, kernel_w=kw,
                 out_h=oh, out_w=ow, stride=stride, padding=padding)

    def ref(ins, s):
        x, wt, bias = [a.astype(np.float64) for a in ins]
        xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
        o = np.zeros((batch, cout, oh, ow))
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                o += np.einsum("bchw,oc->bohw", patch, wt[:, :, i, j])
        return (o + bias[None, :, None, None]).astype(np.float32)
    return k, sizes, lambda rng: [rng.standard_normal((batch, cin, h, w)).astype(np.float32),
                                  rng.standard_normal((cout, cin, kh, kw)).astype(np.float32),
                                  rng.standard_normal(cout).astype(np.float32)], ref


def depthwise(batch=2, ch=4, h=10, w=10, kh=3, kw=3):
    oh, ow = h - kh + 1, w - kw + 1
    body = [pnest([("b", "batch"), ("c", "channels"), ("oh", "out_h"), ("ow", "out_w")], [
        cir.Let("sum", c(0.0), mutable=True),
        loop("kh", "kernel_h", [loop("kw", "kernel_w", [assign_add("sum", b(
            "*", ld("input", v("b"), v("c"), b("+", v("oh"), v("kh")), b("+", v("ow"), v("kw"))),
            ld("kernel", v("c"), v("kh"), v("kw"))))])]),
        cir.Store("out", (v("b"), v("c"), v("oh"), v("ow")), v("sum", F32))])]
    k = kernel("dwconv", "conv2d_depthwise", [buf("input", "f32", "batch", "channels", "in_h", "in_w"),
                                              buf("kernel", "f32", "channels", "kernel_h", "kernel_w")],
               out("f32", "batch", "channels", "out_h", "out_w"),
               ["batch", "channels", "in_h", "in_w", "kernel_h", "kernel_w", "out_h", "out_w"], body)
    sizes = dict(batch=batch, channels=ch, in_h=h, in_w=w, kernel_h=kh, kernel_w=kw, out_h=oh, out_w=ow)

    def ref(ins, s):
        x, wt = ins
        o = np.zeros((batch, ch, oh, ow))
        for i in range(kh):
            for j in range(kw):
                o += x[:, :, i:i + oh, j:j + ow] * wt[None, :, i, j, None, None]
        return o.astype(np.float32)
    return k, sizes, lambda rng: [rng.standard_normal((batch, ch, h, w)).astype(np.float32),
                                  rng.standard_normal((ch, kh, kw)).astype(np.float32)], ref


def layer_norm(batch=64, hidden=1024, eps=1e-5):
    xi = ld("x", v("b"), v("i"))
    body = [pnest([("b", "batch")], [
        cir.Let("mean", c(0.0), mutable=True),
        loop("i", "hidden", [assign_add("mean", xi)]),
        cir.Assign("mean", b("/", v("mean", F32), cir.Cast(v("hidden"), F32))),
        cir.Let("var", c(0.0), mutable=True),
        loop("i", "hidden", [cir.Let("diff", b("-", xi, v("mean", F32))),
                             assign_add("var", b("*", v("diff", F32), v("diff", F32)))]),
        cir.Assign("var", b("/", v("var", F32), cir.Cast(v("hidden"), F32))),
        cir.Let("inv_std", call("rsqrt", b("+", v("var", F32), v("eps", F32)))),
        loop("i", "hidden", [cir.Store("out", (v("b"), v("i")), b("+", b("*", b("*", b(
            "-", xi, v("mean", F32)), v("inv_std", F32)), ld("gamma", v("i"))), ld("beta", v("i"))))]),
    ])]
    k = kernel("layer_norm", "fused", [buf("x", "f32", "batch", "hidden"), buf("gamma", "f32", "hidden"),
                                       buf("beta", "f32", "hidden")], out("f32", "batch", "hidden"),
               ["batch", "hidden"], body, scalars=(cir.Scalar("eps", "f32"),),
               schedule=cir.Schedule(workgroup=(256,)))

    def ref(ins, s):
        x, g, bb = [a.astype(np.float64) for a in ins]
        m = x.mean(1, keepdims=True)
        var = ((x - m) ** 2).mean(1, keepdims=True)
        return ((x - m) / np.sqrt(var + eps) * g + bb).astype(np.float32)
    return k, {"batch": batch, "hidden": hidden}, \
        lambda rng: [rng.standard_normal((batch, hidden)).astype(np.float32),
                     rng.standard_normal(hidden).astype(np.float32),
                     rng.standard_normal(hidden).astype(np.float32)], ref


def residual_layer_norm(batch=4, seq=8, hidden=512, eps=1e-6):
    val = b("+", ld("x", v("b"), v("s"), v("h")), ld("projected", v("b"), v("s"), v("h")))
    body = [pnest([("b", "batch"), ("s", "seq")], [
        cir.Let("sum", c(0.0), mutable=True), cir.Let("sq_sum", c(0.0), mutable=True),
        loop("h", "hidden", [cir.Let("val", val), assign_add("sum", v("val", F32)),
                             assign_add("sq_sum", b("*", v("val", F32), v("val", F32)))]),
        cir.Let("mean", b("/", v("sum", F32), cir.Cast(v("hidden"), F32))),
        cir.Let("var", b("-", b("/", v("sq_sum", F32), cir.Cast(v("hidden"), F32)),
                         b("*", v("mean", F32), v("mean", F32)))),
        cir.Let("inv_std", call("rsqrt", b("+", v("var", F32), c(eps)))),
        loop("h", "hidden", [cir.Let("val", val), cir.Store("out", (v("b"), v("s"), v("h")), b("+", b("*", b("*", b(
            "-", v("val", F32), v("mean", F32)), v("inv_std", F32)), ld("w", v("h"))), ld("bias", v("h"))))]),
    ])]
    k = kernel("residual_ln", "fused", [buf("x", "f32", "batch", "seq", "hidden"),
                                        buf("projected", "f32", "batch", "seq", "hidden"),
                                        buf("w", "f32", "hidden"), buf("bias", "f32", "hidden")],
               out("f32", "batch", "seq", "hidden"), ["batch", "hidden", "seq"], body)

    def ref(ins, s):
        x, p, g, bb = [a.astype(np.float64) for a in ins]
        t = x + p
        m = t.mean(-1, keepdims=True)
        var = (t * t).mean(-1, keepdims=True) - m * m
        return ((t - m) / np.sqrt(var + eps) * g + bb).astype(np.float32)
    shp = (batch, seq, hidden)
    return k, {"batch": batch, "seq": seq, "hidden": hidden}, \
        lambda rng: [rng.standard_normal(shp).astype(np.float32), rng.standard_normal(shp).astype(np.float32),
                     rng.standard_normal(hidden).astype(np.float32),
                     rng.standard_normal(hidden).astype(np.float32)], ref


def rms_norm(batch=32, hidden=768, eps=1e-6):
    xi = ld("x", v("b"), v("i"))
    body = [pnest([("b", "batch")], [
        cir.Let("ss", c(0.0), mutable=True),
        loop("i", "hidden", [assign_add("ss", b("*", xi, xi))]),
        cir.Let("inv", call("rsqrt", b("+", b("/", v("ss", F32), cir.Cast(v("hidden"), F32)), c(eps)))),
        loop("i", "hidden", [cir.Store("out", (v("b"), v("i")), b("*", b("*", xi, v("inv", F32)), ld("w", v("i"))))]),
    ])]
    k = kernel("rms_norm", "fused", [buf("x", "f32", "batch", "hidden"), buf("w", "f32", "hidden")],
               out("f32", "batch", "hidden"), ["batch", "hidden"], body)

    def ref(ins, s):
        x, w = [a.astype(np.float64) for a in ins]
        return (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w).astype(np.float32)
    return k, {"batch": batch, "hidden": hidden}, \
        lambda rng: [rng.standard_normal((batch, hidden)).astype(np.float32),
                     rng.standard_normal(hidden).astype(np.float32)], ref


def softmax_rows(rows=128, cols=2048):
    xi = ld("x", v("r"), v("i"))
    body = [pnest([("r", "rows")], [
        cir.Let("m", c(float("-inf")), mutable=True),
        loop("i", "cols", [cir.Assign("m", call("max", v("m", F32), xi))]),
        cir.Let("s", c(0.0), mutable=True),
        loop("i", "cols", [assign_add("s", call("exp", b("-", xi, v("m", F32))))]),
        loop("i", "cols", [cir.Store("out", (v("r"), v("i")), b("/", call("exp", b("-", xi, v("m", F32))),
                                                                 v("s", F32)))]),
    ])]
    k = kernel("softmax", "fused", [buf("x", "f32", "rows", "cols")], out("f32", "rows", "cols"),
               ["cols", "rows"], body)

    def ref(ins, s):
        x = ins[0].astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True)).astype(np.float32)
    return k, {"rows": rows, "cols": cols}, lambda rng: [rng.standard_normal((rows, cols)).astype(np.float32)], ref


def softmax_whole(n=3000):
    """The spec's fused softmax: whole-buffer tile operations, no loops."""
    T = cir.Ty("f32", ("len",))
    logits = ld("logits", ty=T)
    body = [
        cir.Let("max_val", cir.Reduce("max", logits, None, F32)),
        cir.Let("shifted", b("-", logits, v("max_val", F32), T)),
        cir.Let("exp_vals", call("exp", v("shifted", T), ty=T)),
        cir.Let("sum_exp", cir.Reduce("+", v("exp_vals", T), None, F32)),
        cir.Store("out", (), b("/", v("exp_vals", T), v("sum_exp", F32), T)),
    ]
    k = kernel("softmax_all", "fused", [buf("logits", "f32", "len")], out("f32", "len"), ["len"], body)

    def ref(ins, s):
        x = ins[0].astype(np.float64)
        e = np.exp(x - x.max())
        return (e / e.sum()).astype(np.float32)
    return k, {"len": n}, lambda rng: [rng.standard_normal(n).astype(np.float32)], ref


def ffn_shared(batch=2, seq=4, hidden=64, ffn=128):
    """The spec's FFN: `shared var up[ffn_hidden]`, barrier(), two projections."""
    body = [pnest([("b", "batch"), ("s", "seq")], [
        cir.SharedAlloc("up", ("ffn_hidden",), "f32"),
        loop("f", "ffn_hidden", [
            cir.Let("sum", c(0.0), mutable=True),
            loop("h", "hidden", [assign_add("sum", b("*", ld("normed", v("b"), v("s"), v("h")),
                                                     ld("ffn_up", v("h"), v("f"))))]),
            cir.Let("x", v("sum", F32)),
            cir.Let("x3", b("*", b("*", v("x", F32), v("x", F32)), v("x", F32))),
            cir.Store("up", (v("f"),), b("*", b("*", v("x", F32), c(0.5)), b("+", c(1.0), call("tanh", b(
                "*", c(0.7978845608), b("+", v("x", F32), b("*", c(0.044715), v("x3", F32)))))))),
        ]),
        cir.Barrier(),
        loop("h", "hidden", [
            cir.Let("sum", c(0.0), mutable=True),
            loop("f", "ffn_hidden", [assign_add("sum", b("*", ld("up", v("f")), ld("ffn_down", v("f"), v("h"))))]),
            cir.Store("out", (v("b"), v("s"), v("h")), v("sum", F32)),
        ]),
    ])]
    k = kernel("ffn", "fused", [buf("normed", "f32", "batch", "seq", "hidden"),
                                buf("ffn_up", "f32", "hidden", "ffn_hidden"),
                                buf("ffn_down", "f32", "ffn_hidden", "hidden")],
               out("f32", "batch", "seq", "hidden"), ["batch", "ffn_hidden", "hidden", "seq"], body)

    def ref(ins, s):
        x, up, down = [a.astype(np.float64) for a in ins]
        u = x @ up
        g = u * 0.5 * (1 + np.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
        return (g @ down).astype(np.float32)
    return k, {"batch": batch, "seq": seq, "hidden": hidden, "ffn_hidden": ffn}, \
        lambda rng: [rng.standard_normal((batch, seq, hidden)).astype(np.float32) * 0.3,
                     rng.standard_normal((hidden, ffn)).astype(np.float32) * 0.2,
                     rng.standard_normal((ffn, hidden)).astype(np.float32) * 0.2], ref


def attention(batch=2, heads=2, seq=40, hd=16):
    """The spec's three-pass masked attention."""
    row = cir.Ty("f32", ("head_dim",))
    q = ld("Q", v("b"), v("h"), v("i"), ty=row)
    kj = ld("K", v("b"), v("h"), v("j"), ty=row)
    score = b("/", cir.Dot(q, kj, F32), call("sqrt", cir.Cast(v("head_dim"), F32)))
    mask = ld("mask", v("i"), v("j"), ty=BOOL)
    body = [pnest([("b", "batch"), ("h", "heads"), ("i", "seq_len")], [
        cir.Let("max_score", c(float("-inf")), mutable=True),
        loop("j", "seq_len", [cir.If(mask, (cir.Let("score", score),
                                            cir.Assign("max_score", call("max", v("max_score", F32), v("score", F32)))))]),
        cir.Let("sum_exp", c(0.0), mutable=True),
        loop("j", "seq_len", [cir.If(mask, (cir.Let("score", score),
                                            assign_add("sum_exp", call("exp", b("-", v("score", F32), v("max_score", F32))))))]),
        loop("d", "head_dim", [
            cir.Let("acc", c(0.0), mutable=True),
            loop("j", "seq_len", [cir.If(mask, (
                cir.Let("score", score),
                cir.Let("weight", b("/", call("exp", b("-", v("score", F32), v("max_score", F32))), v("sum_exp", F32))),
                assign_add("acc", b("*", v("weight", F32), ld("V", v("b"), v("h"), v("j"), v("d"))))))]),
            cir.Store("out", (v("b"), v("h"), v("i"), v("d")), v("acc", F32))]),
    ])]
    shp = ("batch", "heads", "seq_len", "head_dim")
    k = kernel("attn", "attention", [buf("Q", "f32", *shp), buf("K", "f32", *shp), buf("V", "f32", *shp),
                                     buf("mask", "bool", "seq_len", "seq_len")],
               out("f32", *shp), ["batch", "head_dim", "heads", "seq_len"], body,
               schedule=cir.Schedule(workgroup=(32, 4), shared_bytes=32 * 64 * 4))

    def ref(ins, s):
        Q, K, V, m = ins
        sc = np.einsum("bhid,bhjd->bhij", Q.astype(np.float64), K.astype(np.float64)) / np.sqrt(hd)
        sc = np.where(m[None, None], sc, -np.inf)
        mx = sc.max(-1, keepdims=True)
        e = np.where(m[None, None], np.exp(sc - mx), 0)
        p = e / e.sum(-1, keepdims=True)
        return np.einsum("bhij,bhjd->bhid", p, V.astype(np.float64)).astype(np.float32)
    sizes = {"batch": batch, "heads": heads, "seq_len": seq, "head_dim": hd}

    def make(rng):
        m = rng.random((seq, seq)) < 0.7
        np.fill_diagonal(m, True)
        return [rng.standard_normal((batch, heads, seq, hd)).astype(np.float32) for _ in range(3)] + [m]
    return k, sizes, make, ref


def _np(dtype):
    return {"f32": np.float32, "f16": np.float16, "f64": np.float64, "bf16": np.float32}[dtype]


ALL = {
    "relu": relu, "mul_add": axpb, "broadcast": broadcast_scale, "gelu": gelu_tanh, "rope": rope,
    "reduce_sum": reduce_full, "reduce_max": lambda: reduce_full("max"), "sum_squares": sum_squares,
    "argmax": argmax, "row_sums": row_sums, "col_sums": lambda: row_sums(200, 300, axis=0),
    "matmul": matmul, "batched_matmul": batched_matmul, "conv2d": conv2d,
    "conv2d_strided": lambda: conv2d(stride=2, padding=0, h=13, w=11),
    "depthwise": depthwise, "layer_norm": layer_norm, "residual_ln": residual_layer_norm,
    "rms_norm": rms_norm, "softmax_rows": softmax_rows, "softmax_whole": softmax_whole,
    "ffn_shared": ffn_shared, "attention": attention,
    "relu_f16": lambda: relu(4096, "f16"), "matmul_f16": lambda: matmul(128, 128, 64, "f16"),
    # row schedules at sizes that are not multiples of the vector width or the block
    "softmax_odd": lambda: softmax_rows(7, 1001), "softmax_short": lambda: softmax_rows(37, 100),
    "softmax_ragged": lambda: softmax_rows(9, 1000), "softmax_long": lambda: softmax_rows(3, 50_000),
    "softmax_too_long": lambda: softmax_rows(2, 300_000),
    "layer_norm_odd": lambda: layer_norm(5, 1000), "rms_norm_odd": lambda: rms_norm(3, 4100),
    "residual_ln_odd": lambda: residual_layer_norm(3, 5, 333),
    # GEMM schedules: ragged tiles, vector and scalar operand loads, tensor cores
    "matmul_odd": lambda: matmul(131, 77, 45), "matmul_vec_ragged": lambda: matmul(300, 260, 132),
    "matmul_vec_a_only": lambda: matmul(100, 75, 64), "bmm_vec": lambda: batched_matmul(3, 100, 68, 52),
    "matmul_bf16": lambda: matmul(200, 136, 72, "bf16"), "matmul_f16_ragged": lambda: matmul(72, 264, 40, "f16"),
    "matmul_bf16_tt": lambda: matmul_t(96, 80, 48, "bf16"), "matmul_f16_tn": lambda: matmul_t(40, 136, 56, "f16", True, False),
    "matmul_bf16_nt": lambda: matmul_t(130, 24, 200, "bf16", False, True),
    "matmul_bf16_odd": lambda: matmul(50, 70, 30, "bf16"),
}
