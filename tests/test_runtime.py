"""The host side of ZynML on the CPU: async and futures, memory, devices, config, pipelines,
records and environment binding, Tensor, the command line, run-time errors, and a
differential test of the vectorised reference executor against the sequential Python
rendering of the same CIR.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zynbook
from zynbook.backends.cpu.device import CpuDevice
from zynbook.compiler import cir
from zynbook.compiler.codegen.python import compile_kernel
from tolerances import assert_close

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def vec(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def raises_zynml(kind, src, **env):
    """Run `src` and return the ZynMLError it must raise (of class `kind`), with a line."""
    with pytest.raises(kind) as info:
        zynbook.run(src, **env)
    err = info.value
    assert err.line > 0, f"no line in {err!r}"
    assert "^" in err.render()
    return err


# ----------------------------------------------------------------------------- async

# a kernel whose every element runs a loop that carries a value: it runs `steps` serial
# iterations, so its duration is set by `steps`
SLOW = """
let f = compute(data) @async {
    @kernel expensive
    for i in 0..len:
        var acc = 0.0
        for k in 0..steps:
            acc = acc * 0.5 + data[i]
        out[i] = acc
}
"""


def test_async_returns_a_future_at_once_and_await_gives_the_result():
    session = zynbook.Session(device="cpu")
    session.run("let warm = 1")
    start = time.perf_counter()
    fut = session.run(SLOW + "f", data=vec(8), steps=20000)
    launched = time.perf_counter() - start
    assert not fut.done(), "the kernel finished before compute() returned"
    result = session.run("await f")
    assert fut.done()
    total = time.perf_counter() - start
    assert launched < total / 2
    # acc converges to 2 * data[i] (a geometric series)
    assert_close(result, 2.0 * session.namespace["data"].numpy(), "f32")


def test_await_timeout_gives_the_default_for_a_slow_kernel():
    start = time.perf_counter()
    value = zynbook.run(SLOW + "await f timeout 1ms else fallback",
                        data=vec(8), steps=50000, fallback=-1.0)
    assert value == -1.0
    assert time.perf_counter() - start < 0.5


def test_await_timeout_gives_the_result_for_a_fast_kernel():
    value = zynbook.run(SLOW + "await f timeout 10s else fallback",
                        data=vec(8, 1), steps=100, fallback=-1.0)
    assert_close(value, 2.0 * vec(8, 1), "f32")


def test_await_all_and_any():
    src = """
let fs = [
    compute(a) @async {
        @kernel elementwise
        for i in 0..len:
            out[i] = a[i] * 2.0
    },
    compute(a) @async {
        @kernel elementwise
        for i in 0..len:
            out[i] = a[i] + 3.0
    },
]
let rs = await all(fs)
let (r, k) = await any(fs)
"""
    session = zynbook.Session(device="cpu")
    a = vec(7)
    session.run(src, a=a)
    rs = session.namespace["rs"]
    assert isinstance(rs, list) and len(rs) == 2
    assert_close(rs[0], a * 2.0, "f32")
    assert_close(rs[1], a + 3.0, "f32")
    k = session.namespace["k"]
    assert k in (0, 1)
    assert_close(session.namespace["r"], rs[k], "f32")


def test_await_any_gives_the_first_to_finish():
    src = SLOW.replace("let f =", "let slow =") + """
let fast = compute(data) @async {
    @kernel elementwise
    for i in 0..len:
        out[i] = data[i] * 4.0
}
"""
    # both queue on the one cpu worker: the slow kernel first, so await any must still
    # say which finished first -- the slow one -- and await all gives them in order
    session = zynbook.Session(device="cpu")
    session.run(src, data=vec(5), steps=3000)
    result, index = session.run("await any([slow, fast])")
    assert index == 0
    assert_close(result, 2.0 * vec(5), "f32")
    both = session.run("await all([fast, slow])")
    assert_close(both[0], 4.0 * vec(5), "f32")


def test_error_inside_an_async_kernel_surfaces_at_await():
    src = """
let f = compute(x, idx) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}
let other = 1
await f
"""
    err = raises_zynml(zynbook.ZynMLRuntimeError, src, x=vec(10), idx=np.array([0, 3, 12]), n=3)
    assert "12" in err.message and err.line == 5


def test_await_of_something_that_is_not_a_future():
    raises_zynml(zynbook.ZynMLTypeError, "let a = 3\nawait a")


# ----------------------------------------------------------------------------- memory


def test_allocate_pinned_and_dtypes():
    session = zynbook.Session(device="cpu")
    session.run("""
let a = allocate(shape=[2, 3], dtype=float64, device="cpu")
let p = allocate(shape=[4], dtype=float32, device="cpu", pinned=true)
let d = allocate(shape=[5])
""")
    a, p, d = (session.namespace[n] for n in "apd")
    assert (a.shape, a.dtype, a.device) == ((2, 3), "f64", "cpu")
    assert (p.shape, p.dtype, p.device) == ((4,), "f32", "cpu")
    assert d.dtype == "f32" and d.device == "cpu"
    assert not np.asarray(a).any()


def test_to_device_copy_and_zero_copy():
    session = zynbook.Session(device="cpu")
    session.run("""
let b = a.to_device("cpu", copy=false)
let c = a.to_device("cpu")
""", a=np.arange(4, dtype=np.float32))
    a, b, c = (session.namespace[n] for n in "abc")
    assert np.shares_memory(a.numpy(), b.numpy())
    assert not np.shares_memory(a.numpy(), c.numpy())
    np.testing.assert_array_equal(c.numpy(), a.numpy())


def test_memory_pool_allocate_free_reset_and_out_of_memory():
    session = zynbook.Session(device="cpu")
    session.run("""
let pool = memory_pool(device="cpu", size=1KB)
let t1 = pool.allocate(shape=[100])
let t2 = pool.allocate(shape=[100])
""")
    pool = session.namespace["pool"]
    assert pool.size == 1000 and pool.used == 800
    assert session.namespace["t1"].shape == (100,)
    with pytest.raises(zynbook.ZynMLMemoryError) as err:
        session.run("let t3 = pool.allocate(shape=[100])")
    assert err.value.line == 1 and "out of memory" in err.value.message
    assert "200 B" in err.value.message          # what is left is said
    session.run("pool.free(t1)\nlet t3 = pool.allocate(shape=[100])")
    assert pool.used == 800
    with pytest.raises(zynbook.ZynMLError):
        session.run("pool.free(t1)")            # freed twice
    session.run("pool.reset()\nlet big = pool.allocate(shape=[250])")
    assert pool.used == 1000


def test_memory_pool_needs_a_size():
    raises_zynml(zynbook.ZynMLTypeError, 'memory_pool(device="cpu")')


# ---------------------------------------------------------------- devices and config


def test_compute_devices_lists_the_cpu():
    devices = zynbook.compute_devices()
    cpu = [d for d in devices if d["id"] == "cpu"]
    assert len(cpu) == 1
    assert cpu[0]["type"] == "cpu" and cpu[0]["name"]
    listed = zynbook.run("compute_devices()")
    assert "cpu" in [d.id for d in listed]
    assert zynbook.run('compute_devices()[0].type') in ("cpu", "gpu")


def test_config_sets_the_default_device():
    session = zynbook.Session(device="cpu")
    session.run('config {\n    compute_device: "cpu"\n}')
    assert session.default_device == "cpu"
    session.run("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] + 1.0
}
""", x=vec(3))
    assert session.launches[0].device == "cpu"


def test_unknown_devices_are_device_errors():
    raises_zynml(zynbook.ZynMLDeviceError, 'config {\n    compute_device: "metal:7"\n}')
    raises_zynml(zynbook.ZynMLDeviceError, """
compute(x) @device("cuda:9") {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i]
}""", x=vec(3))
    raises_zynml(zynbook.ZynMLDeviceError, 'allocate(shape=[2], device="nope:0")')
    with pytest.raises(zynbook.ZynMLDeviceError):
        zynbook.Session(device="nope")
    session = zynbook.Session(device="cpu")
    with pytest.raises(zynbook.ZynMLDeviceError):
        session.default_device = "cuda:99"
    assert session.default_device == "cpu"


# ------------------------------------------------------------------------ pipelines

MATVEC = """
pipeline matvec(a: tensor[n, m], b: tensor[m]) -> tensor[n]:
    return compute(a, b) {
        @kernel fused
        for i in 0..n:
            var s = 0.0
            for j in 0..m:
                s += a[i, j] * b[j]
            out[i] = s
    }
"""


def test_pipeline_with_shape_checked_arguments():
    a = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    out = zynbook.run(MATVEC + "matvec(a, b)", a=a, b=vec(5))
    assert_close(out, a.astype(np.float64) @ vec(5), "f32", "contraction")


def test_pipeline_argument_of_the_wrong_rank():
    err = raises_zynml(zynbook.ZynMLShapeError, MATVEC + "matvec(b, b)", b=vec(5))
    assert "2 axes" in err.message


def test_pipeline_arguments_with_inconsistent_dims():
    err = raises_zynml(zynbook.ZynMLShapeError, MATVEC + "matvec(a, b)",
                       a=np.zeros((3, 4), np.float32), b=vec(5))
    assert "m" in err.message and "4" in err.message and "5" in err.message


def test_pipeline_result_type_is_checked():
    src = "pipeline p(a: tensor[n, m]) -> tensor[n]:\n    return a\np(x)"
    raises_zynml(zynbook.ZynMLShapeError, src, x=np.zeros((3, 4)))


def test_pipe_into_a_host_function():
    assert zynbook.run("x |> sqrt()", x=16.0) == 4.0


def test_split_into_three():
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    session = zynbook.Session(device="cpu")
    session.run("let (a, b, c) = split(x, 3, axis=-1)", x=x)
    for name, part in zip("abc", np.split(x, 3, axis=-1)):
        np.testing.assert_array_equal(session.namespace[name].numpy(), part)
    raises_zynml(zynbook.ZynMLShapeError, "let (a, b) = split(x, 3, axis=-1)", x=x)
    raises_zynml(zynbook.ZynMLShapeError, "split(x, 5, axis=-1)", x=x)


def test_reshape_and_transpose_builtins():
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(zynbook.run("transpose(reshape(x, [2, 3]))", x=x).numpy(),
                                  x.reshape(2, 3).T)
    raises_zynml(zynbook.ZynMLShapeError, "reshape(x, [4, 2])", x=x)


def test_randn_is_seeded():
    a = zynbook.run("randn([5], seed=3)").numpy()
    b = zynbook.run("randn([5], seed=3)").numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, zynbook.run("randn([5], seed=4)").numpy())


# -------------------------------------------------------------- binding from Python


class ArrayLike:
    def __array__(self, dtype=None, copy=None):
        return np.arange(4, dtype=np.float32)


def test_env_binding_rules():
    t = zynbook.run("x", x=np.ones((2, 2), np.float64))
    assert isinstance(t, zynbook.Tensor) and t.dtype == "f64"
    t = zynbook.run("x", x=ArrayLike())
    assert isinstance(t, zynbook.Tensor) and t.shape == (4,)
    assert zynbook.run("n * 2", n=21) == 42
    assert isinstance(zynbook.run("n", n=21), int)
    assert zynbook.run("f + 0.25", f=0.5) == 0.75
    rec = {"w": np.zeros((2, 3), np.float32), "inner": {"k": 5}, "name": "layer"}
    assert zynbook.run("r.w.shape", r=rec) == [2, 3]
    assert zynbook.run("r.inner.k", r=rec) == 5
    assert zynbook.run("r.name", r=rec) == "layer"
    assert zynbook.run("xs[1] + xs[2]", xs=[1, 2, 3]) == 5
    layers = zynbook.run("m.layers[1].w", m={"layers": [{"w": 1.0}, {"w": 2.0}]})
    assert layers == 2.0
    raises_zynml(zynbook.ZynMLNameError, "r.nope", r=rec)
    raises_zynml(zynbook.ZynMLShapeError, "xs[5]", xs=[1, 2, 3])


def test_dlpack_input_binds_as_a_tensor():
    class OnlyDlpack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, *args, **kwargs):
            return self.a.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    t = zynbook.run("x", x=OnlyDlpack(np.arange(3, dtype=np.float32)))
    np.testing.assert_array_equal(np.asarray(t), [0, 1, 2])


def test_record_tensor_fields_as_compute_inputs():
    w = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    out = zynbook.run("""
compute(x, layer.w) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * layer.w[i] + bias
}""", x=vec(6), layer={"w": w}, bias=0.5)
    assert_close(out, vec(6) * w.astype(np.float64) + 0.5, "f32")


def test_record_scalar_field_in_a_kernel_body():
    w = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    out = zynbook.run("""
compute(x, layer.w) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * layer.w[i] + layer.bias
}""", x=vec(6), layer={"w": w, "bias": 0.5})
    assert_close(out, vec(6) * w.astype(np.float64) + 0.5, "f32")


# ---------------------------------------------------------------------------- Tensor


def test_tensor_interface():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = zynbook.run("x", x=x)
    assert t.shape == (2, 3) and t.dtype == "f32" and t.device == "cpu"
    assert isinstance(t.numpy(), np.ndarray)
    np.testing.assert_array_equal(np.asarray(t), x)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), x)
    np.testing.assert_array_equal(np.from_dlpack(t), x)
    html = t._repr_html_()
    assert "<table" in html and "[2, 3]" in html and "f32" in html
    assert "shape=[2, 3]" in repr(t)
    big = zynbook.run("zeros([100, 100])")
    assert "<pre>" in big._repr_html_()


def test_kernel_results_are_tensors_and_scalars():
    y = zynbook.run("""
compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * 2.0
}""", x=vec(4))
    assert isinstance(y, zynbook.Tensor)
    s = zynbook.run("""
compute(x) {
    @kernel reduce(+)
    for i in 0..len:
        yield x[i]
}""", x=np.ones(5, np.float32))
    assert s == 5.0 and isinstance(s, float)


# ------------------------------------------------------------------------- run errors


def test_unbound_size_is_a_name_error():
    err = raises_zynml(zynbook.ZynMLNameError, """
compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = 1.0
}""", x=vec(3))
    assert "`n`" in err.message and err.line == 4


def test_input_of_the_wrong_rank_is_a_shape_error():
    err = raises_zynml(zynbook.ZynMLShapeError, """
compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i, 0]
}""", x=vec(3))
    assert err.line == 5


def test_affine_index_out_of_range_is_found_before_running():
    err = raises_zynml(zynbook.ZynMLShapeError, """
compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i + 5]
}""", x=vec(10), n=10)
    assert "14" in err.message and err.line == 5


def test_gathered_index_out_of_range_is_a_runtime_error():
    err = raises_zynml(zynbook.ZynMLRuntimeError, """
compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}""", x=vec(10), idx=np.array([0, 3, 12], np.int32), n=3)
    assert "12" in err.message and err.line == 5


def test_negative_gathered_index_is_a_runtime_error():
    raises_zynml(zynbook.ZynMLRuntimeError, """
compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}""", x=vec(10), idx=np.array([0, -1, 2], np.int32), n=3)


def test_non_tensor_compute_input_is_a_type_error():
    raises_zynml(zynbook.ZynMLTypeError, """
compute(x) {
    @kernel elementwise
    for i in 0..4:
        out[i] = 1.0
}""", x=3)


# ------------------------------------------------------------------------------- CLI


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "zynbook.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_check_cir_and_run(tmp_path):
    r = cli("check", "examples/matmul.zyn")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    r = cli("cir", "examples/matmul.zyn")
    assert r.returncode == 0 and "kernel" in r.stdout and "matmul" in r.stdout
    prog = tmp_path / "sum.zyn"
    prog.write_text("let x = ones([10])\ncompute(x) {\n    @kernel reduce(+)\n"
                    "    for i in 0..len:\n        yield x[i]\n}\n")
    r = cli("run", str(prog), "--device", "cpu")
    assert r.returncode == 0 and float(r.stdout) == 10.0


def test_cli_errors(tmp_path):
    bad = tmp_path / "bad.zyn"
    bad.write_text("let a = 1\nlet b = a +\n")
    for command in ("check", "run"):
        r = cli(command, str(bad))
        assert r.returncode == 1
        assert "ZynML syntax error at line 2" in r.stderr and "^" in r.stderr
        assert "Traceback" not in r.stderr
    unknown = tmp_path / "unknown.zyn"
    unknown.write_text("let a = 1\nlet b = c + a\n")
    r = cli("run", str(unknown))
    assert r.returncode == 1 and "name error at line 2" in r.stderr and "^" in r.stderr
    r = cli("run", "examples/relu.zyn", "--device", "nope:3")
    assert r.returncode == 1 and "device" in r.stderr and "Traceback" not in r.stderr
    r = cli("run", str(tmp_path / "missing.zyn"))
    assert r.returncode == 2 and "cannot read" in r.stderr


# ------------------------------------------------------- vectorised vs. sequential

_MAX_ITERATIONS = 4_000_000     # the sequential rendering runs one Python step per iteration


@pytest.fixture
def recorded_launches(monkeypatch):
    """Every CPU launch of the test: (kernel, inputs, sizes, scalars, output). A program's
    `@device("auto")` picks the CPU too, so a GPU on the machine does not take its kernels."""
    from zynbook.backends import registry
    monkeypatch.setattr(registry, "best_device_id", lambda: "cpu")
    launches = []
    launch = CpuDevice.launch

    def recording(self, kernel, inputs, sizes, scalars):
        out, info = launch(self, kernel, inputs, sizes, scalars)
        launches.append((kernel, [np.array(a, copy=True) for a in inputs], dict(sizes),
                         dict(scalars), np.array(out, copy=True)))
        return out, info

    monkeypatch.setattr(CpuDevice, "launch", recording)
    return launches


def _iterations(body, sizes) -> int:
    total = 0
    for s in body:
        if isinstance(s, cir.Loop):
            start, stop, step = (cir.eval_expr_static(e, sizes) for e in (s.start, s.stop, s.step))
            trips = max(0, -(-(stop - start) // step))
            total += trips * max(1, _iterations(s.body, sizes))
        elif isinstance(s, cir.If):
            total += _iterations(s.then, sizes) + _iterations(s.orelse, sizes)
        else:
            total += 1
    return total


def run_sequential(kernel, inputs, sizes, scalars):
    """The sequential Python rendering of `kernel`, driven here: allocates out, passes
    sizes and scalars in the order the kernel lists them, and combines what a reduce
    kernel yields."""
    fn = compile_kernel(kernel)
    shape = cir.output_shape(kernel, sizes) if kernel.output.shape else ()
    out = np.zeros(shape, dtype=np.dtype({"f16": np.float16, "f32": np.float32,
                                          "f64": np.float64, "i32": np.int32,
                                          "i64": np.int64, "bool": np.bool_}
                                         [kernel.output.dtype]))
    yields = []
    fn(*inputs, out, *[sizes[d] for d in kernel.dims], *[scalars[s.name] for s in kernel.scalars],
       _yield=lambda value, index=None: yields.append((value, index)))
    if kernel.kernel_type.kind != "reduce":
        return out
    op = kernel.kernel_type.param("op")
    values = np.array([float(v) for v, _ in yields])
    if op == "+":
        return values.sum()
    if op == "max":
        return values.max()
    if op == "min":
        return values.min()
    if op in ("argmax", "argmin"):
        pick = np.argmax(values) if op == "argmax" else np.argmin(values)
        return yields[int(pick)][1]
    raise AssertionError(f"no sequential combiner for reduce({op})")


EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.zyn") if p.stem != "multi_gpu")


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_vectorised_executor_equals_sequential_rendering(name, recorded_launches):
    env = {}
    if name == "transformer_block":
        from test_examples_cpu import make_model
        env["model"] = make_model()
    zynbook.Session(device="cpu").run((EXAMPLES / f"{name}.zyn").read_text(), **env)
    if name == "memory":
        assert not recorded_launches
        return
    assert recorded_launches
    compared = 0
    for kernel, inputs, sizes, scalars, out in recorded_launches:
        if kernel.kernel_type.param("axis") is not None:
            continue        # the rendering yields values without saying which row they are for
        if _iterations(kernel.body, sizes) > _MAX_ITERATIONS:
            continue
        expected = run_sequential(kernel, inputs, sizes, scalars)
        kind = "elementwise" if kernel.kernel_type.kind == "elementwise" else "contraction"
        assert_close(out, expected, kernel.output.dtype if kernel.output.dtype.startswith("f")
                     else "f64", kind)
        compared += 1
    if name != "row_sums_axis":
        assert compared, "no kernel was small enough to compare"


def test_endless_recursion_is_a_zynml_error_and_the_session_goes_on():
    import zynbook
    from zynbook.errors import ZynMLRuntimeError
    s = zynbook.Session("cpu")
    s.run("pipeline f(a):\n    return f(a)\n")
    with pytest.raises(ZynMLRuntimeError, match="nested too deep") as err:
        s.run("f(1)")
    assert err.value.span.line == 2          # the pipeline's `return f(a)`
    assert s.run("1 + 2") == 3


def test_host_integer_remainder_by_zero_and_nan_in_max():
    """Host integer `%` by zero is a ZynML error, tensor or number (as in kernels); a float
    one is NaN; max and min of numbers propagate NaN in any order, as numpy's do."""
    import math
    import zynbook
    from zynbook.errors import ZynMLRuntimeError
    s = zynbook.Session("cpu")
    for src in ("tensor([1, 2, 3]) % tensor([1, 0, 3])", "tensor([5, 7]) % 0", "5 % 0"):
        with pytest.raises(ZynMLRuntimeError, match="integer remainder by zero"):
            s.run(src)
    assert math.isnan(s.run("5.0 % 0.0")) and s.run("-7 % 3") == -1
    assert list(s.run("tensor([5, -7]) % 3").numpy()) == [2, -1]
    for src in ("max(1.0, nan)", "max(nan, 1.0)", "min(2.0, nan, 1.0)"):
        assert math.isnan(s.run(src))
    assert s.run("max(1, 3, 2)") == 3


def test_integers_to_a_negative_power_is_no_broadcast_error():
    import zynbook
    from zynbook.errors import ZynMLRuntimeError, ZynMLShapeError
    s = zynbook.Session("cpu")
    with pytest.raises(ZynMLRuntimeError, match=r"an integer to a negative power \(here -1\)"):
        s.run("tensor([1, 2]) ** tensor([-1, 2])")
    with pytest.raises(ZynMLShapeError, match=r"shapes \[2\] and \[3\] do not broadcast"):
        s.run("tensor([1, 2]) ** tensor([-1, 2, 3])")
    with pytest.raises(ZynMLShapeError, match=r"shapes \[2\] and \[3\] do not broadcast"):
        s.run("tensor([1, 2]) + tensor([1, 2, 3])")


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux's /proc/meminfo")
def test_host_memory_check_uses_what_the_machine_has_available():
    """An array is refused past the memory and swap available now (MemAvailable + SwapFree),
    not past the machine's total: past what is available, the allocation succeeds lazily
    and the kernel process is killed when it is touched."""
    from zynbook.runtime.builtins import host_memory_bytes
    info = {}
    for line in open("/proc/meminfo"):
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024
    available = info["MemAvailable"] + info.get("SwapFree", 0)
    assert abs(host_memory_bytes() - available) < max(available // 10, 1 << 29)
    total = info["MemTotal"] + info.get("SwapTotal", 0)
    n = (available + total) // 2 // 4          # between the two, in f32 elements
    if n * 4 > host_memory_bytes() * 1.05:     # (the other processes leave such a gap)
        with pytest.raises(zynbook.ZynMLMemoryError) as err:
            zynbook.Session(device="cpu").run(f"let big = zeros([{n}])")
        assert "available" in err.value.message
