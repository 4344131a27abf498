"""Open items: memory-pool tensors after pool.free(), views of released tensors and the
device interface's CUDA pool, compared with numpy written here on every device present."""
from __future__ import annotations

import contextlib
import sys
import types

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError
from compute_testing import assert_equals_numpy, wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]


def _slices_are_host_copies(device):
    """Whether a slice of a tensor on `device` is a copy on the host (WebGPU's buffers),
    not a view of its memory (the CPU's and CUDA's)."""
    from zynbook.backends.registry import get_device
    return type(get_device(device)).__module__.startswith("zynbook.backends.webgpu")


def _host(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _refused(src, line, column, words):
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src)
    err = info.value
    assert err.kind == "runtime", err
    for w in words:
        assert w in err.message, err
    assert (err.span.line, err.span.column) == (line, column), err
    assert "^" in err.render()
    return err


# ------------------------------------------------------------------ memory pools

_POOL = ('let pool = memory_pool(device="{device}", size=1MB)\n'
         'let a = pool.allocate(shape=[2, 3])\n'
         'a[0, 1] = 1.5\n'
         'a[1, 2] = -2.0\n'
         'let other = pool.allocate(shape=[2, 3])\n'
         'let before = a * 2.0\n')
_A = np.array([[0, 1.5, 0], [0, 0, -2.0]], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use, column", [
    ("a + 1.0", 1), ("a[0, 0] = 1.0", 1), ('a.to_device("cpu")', 1), ("sum(a)", 5),
    ("compute(a) {\n    for i in 0..m:\n        for j in 0..n:\n"
     "            out[i, j] = a[i, j] * 2.0\n}", 9),
    ("pool.free(a)", 11)])
def test_a_freed_tensor_is_refused(device, use, column):
    """After pool.free(a) the tensor was still read (a + 1.0 gave its values): any use is a
    runtime error naming it and pool.free(); the pool's other tensor, values computed before
    and a new allocation equal numpy's."""
    src = _POOL.format(device=device) + "pool.free(a)\n"
    _refused(src + use + "\n", 8, column, ["`a`", "pool.free()"])
    got = zynbook.run(src + "let b = pool.allocate(shape=[2, 3])\n"
                      "[before, other + 1.0, b - 1.0, pool.used]\n")
    want = [_A * 2.0, np.ones((2, 3), np.float32), -np.ones((2, 3), np.float32), 2 * 6 * 4]
    for g, w in zip(got, want):
        assert_equals_numpy(_host(g), w, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("release", ["pool.free(a)", "pool.reset()"])
@pytest.mark.parametrize("view", ["a[1, 0:3]", "a.T", "reshape(a, [6])", "a[0:2, 1:2]",
                                  'a.to_device("{device}", copy=false)'])
def test_a_view_made_before_the_release_is_refused(device, release, view):
    """A slice, .T, reshape or to_device(copy=false) of a pool tensor made before its
    release still read the released memory: it is refused as the tensor is, naming the
    view; before the release it equals numpy's view, and a view copied before is kept.
    (A slice of a tensor in a WebGPU buffer is a host copy: it shares nothing and stays.)"""
    view = view.format(device=device)
    src = (_POOL.format(device=device) + f"let v = {view}\n" + "let kept = v * 1.0\n" +
           release + "\n")
    ref = {"a[1, 0:3]": _A[1, 0:3], "a.T": _A.T, "reshape(a, [6])": _A.reshape(6),
           "a[0:2, 1:2]": _A[0:2, 1:2]}.get(view, _A)
    assert_equals_numpy(_host(zynbook.run(src.replace(release + "\n", "") + "v\n")), ref, 0)
    assert_equals_numpy(_host(zynbook.run(src + "kept\n")), ref, 0)
    if "copy=false" in view or not _slices_are_host_copies(device):
        err = _refused(src + "v + 1.0\n", 10, 1, ["`v`", release.split("(")[0] + "()"])
        assert ("view" in err.message) == ("copy=false" not in view), err
    else:
        assert_equals_numpy(_host(zynbook.run(src + "v + 1.0\n")), ref + 1.0, 0)


@pytest.mark.parametrize("release", ["pool.free(a)", "pool.reset()"])
def test_a_released_tensor_and_its_view_are_refused_from_python(release):
    """The tensors a session holds are refused from Python too (numpy(), np.asarray and
    DLPack read the released memory)."""
    session = zynbook.Session("cpu")
    session.run(_POOL.format(device="cpu") + "let v = a[0, 0:2]\n" + release + "\n")
    for name in ("a", "v"):
        t = session.namespace[name]
        for read in (lambda: t.numpy(), lambda: np.asarray(t), lambda: np.from_dlpack(t)):
            with pytest.raises(ZynMLError) as info:
                read()
            assert info.value.kind == "runtime", info.value
            assert release.split("(")[0] + "()" in info.value.message, info.value
    assert_equals_numpy(_host(session.namespace["before"]), _A * 2.0, 0)


# ------------------------------------------------ the device interface's CUDA pool
# No CUDA here: the CUDA device runs on the CuPy stand-in (tests/cupy_standin.py), with a
# recording stand-in for CuPy's MemoryPool; the pool's own logic is what is tested.

class _CupyPool:
    def __init__(self):
        self.limit, self.freed, self.mallocs = None, 0, 0

    def set_limit(self, size):
        self.limit = size

    def malloc(self, nbytes):
        self.mallocs += 1

    def free_all_blocks(self):
        self.freed += 1

    def used_bytes(self):
        return 0


@pytest.fixture
def cuda_pool_device(monkeypatch, tmp_path):
    if "cupy" in sys.modules or _cupy_installed():
        pytest.skip("CuPy is installed: the real pool is tested by test_cuda_pool_on_the_gpu")
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import cupy_standin
    cupy_standin.install_cuda0(monkeypatch, tmp_path)
    cp = sys.modules["cupy"]
    used = {}

    @contextlib.contextmanager
    def using_allocator(malloc):
        used["malloc"] = malloc
        yield

    monkeypatch.setattr(cp.cuda, "MemoryPool", _CupyPool, raising=False)
    monkeypatch.setattr(cp.cuda, "using_allocator", using_allocator, raising=False)
    monkeypatch.setattr(cp.cuda.runtime, "memGetInfo", lambda: (1 << 20, 1 << 30),
                        raising=False)
    from zynbook.backends.registry import get_device
    return get_device("cuda:0"), used


def _cupy_installed():
    import importlib.util
    return importlib.util.find_spec("cupy") is not None


@pytest.mark.parametrize("release", ["free", "reset"])
def test_the_cuda_device_pool_refuses_released_tensors(cuda_pool_device, release):
    """CudaDevice.memory_pool().reset() left its arrays usable (and their memory held): its
    tensors are refused after free or reset as the language's pool's are, and the pool's
    unused blocks go back; the budget is the language pool's."""
    from zynbook.runtime.tensor import Tensor
    device, used = cuda_pool_device
    pool = device.memory_pool(100)
    assert pool.pool.limit == 100
    a = pool.allocate((3, 4))
    b = pool.allocate((2,), "f64")
    assert used["malloc"] == pool.pool.malloc
    assert isinstance(a, Tensor) and (a.shape, a.dtype, a.device) == ((3, 4), "f32", "cuda:0")
    assert_equals_numpy(a.numpy(), np.zeros((3, 4), np.float32), 0)
    assert pool.used == 3 * 4 * 4 + 2 * 8
    shared = Tensor(a.data, a.device, a.shape, a.dtype)     # as to_device(copy=false) makes
    with pytest.raises(ZynMLError) as info:
        pool.allocate((10,))                    # 40 bytes more than the 100 of the budget
    assert info.value.kind == "memory", info.value
    getattr(pool, release)(*([a] if release == "free" else []))
    assert pool.pool.freed == 1
    for t in (a, shared):
        for read in (t.numpy, lambda: np.asarray(t), t.__dlpack__):
            with pytest.raises(ZynMLError) as info:
                read()
            assert info.value.kind == "runtime" and f"pool.{release}()" in info.value.message
    if release == "free":
        assert_equals_numpy(b.numpy(), np.zeros(2), 0)
        assert pool.used == 2 * 8
        with pytest.raises(ZynMLError):
            pool.free(a)                        # freed already
    else:
        assert pool.used == 0
    c = pool.allocate((5,))
    assert_equals_numpy(c.numpy(), np.zeros(5, np.float32), 0)


def test_the_cuda_device_pool_without_a_size_is_the_devices_memory(cuda_pool_device):
    device, _ = cuda_pool_device
    pool = device.memory_pool()
    assert pool.pool.limit is None and pool.size == 1 << 30


def test_cuda_pool_on_the_gpu():
    """On a GPU: the CuPy pool's tensors refused after reset, their memory returned."""
    from compute_testing import cuda_device
    if cuda_device() is None:
        pytest.skip("no CUDA device")
    from zynbook.backends.registry import get_device
    device = get_device("cuda:0")
    pool = device.memory_pool(64 << 20)
    a = pool.allocate((512, 512))
    assert pool.used_bytes() >= 512 * 512 * 4
    assert_equals_numpy(a.numpy(), np.zeros((512, 512), np.float32), 0)
    pool.reset()
    with pytest.raises(ZynMLError):
        a.numpy()
    assert pool.used_bytes() == 0


# ------------------------------------------------------------------ dropout with p = 1

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("p", [1.0, 1, np.float32(1.0), np.float64(0.75)])
def test_softmax_dropout_with_p_1_gives_zeros_as_torch(device, p):
    """softmax_dropout and its backward refused p = 1 (the drop probability was in [0, 1)):
    every value is dropped and both give zeros, as PyTorch's dropout with p = 1 does
    (torch autograd of dropout(softmax(x), p) with the same Philox mask)."""
    import torch
    from zynbook.nn.fused import philox_reference
    rows, cols, seed, offset = 3, 5, 99, 2
    rng = np.random.default_rng(7)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    words = [philox_reference([e, offset, 0, 0], [seed, 0])[0] for e in range(rows * cols)]
    keep = torch.tensor(((np.array(words) >> 8) * 2.0 ** -24 >= float(p)).reshape(rows, cols))
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    sm = torch.softmax(xt, -1)
    # PyTorch's dropout: zeros at p = 1, else the kept values over 1 - p
    y = sm * 0.0 if float(p) == 1.0 else sm * keep / (1 - float(p))
    y.backward(torch.tensor(g, dtype=torch.float64))
    dev = zynbook.device(device)
    out = dev.download(dev.softmax_dropout(dev.upload(x), rows, cols, p, seed, offset))
    dx = dev.download(dev.softmax_dropout_backward(dev.upload(x), dev.upload(g), rows, cols, p,
                                                   seed, offset))
    assert_equals_numpy(np.asarray(out).reshape(-1), y.detach().numpy().reshape(-1), 1e-5)
    assert_equals_numpy(np.asarray(dx).reshape(-1), xt.grad.numpy().reshape(-1), 1e-5)
    if float(p) == 1.0:
        assert not np.any(out) and not np.any(dx)


@pytest.mark.parametrize("p", [1.5, -0.25, float("nan"), True])
def test_softmax_dropout_outside_0_1_is_refused(p):
    from zynbook.errors import ZynMLTypeError
    dev = zynbook.device("cpu")
    a = dev.upload(np.zeros(12, np.float32))
    for call in (lambda: dev.softmax_dropout(a, 3, 4, p, 0),
                 lambda: dev.softmax_dropout_backward(a, a, 3, 4, p, 0)):
        with pytest.raises(ZynMLTypeError, match=r"drop probability p is in \[0, 1\]"):
            call()


# ------------------------------------------------- reductions of one element, bit for bit

_ONE = np.array([-0.0, 0.0, 1.5, -2.5, np.nan, np.inf, -np.inf, 1e-45], np.float32)


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want, got.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=True), (got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want)), (got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, ref", [
    ("sum(x[i:i+1])", np.sum), ("reduce(+, x[i:i+1])", np.sum),
    ("reduce(*, x[i:i+1])", np.prod), ("reduce(max, x[i:i+1])", np.max),
    ("reduce(min, x[i:i+1])", np.min)])
def test_a_reduction_of_a_one_element_tile_is_numpys(device, expr, ref):
    """sum, reduce(+), reduce(*), reduce(max) and reduce(min) of a one-element tile in a
    kernel equal numpy's of that element, sign of zero and NaN included (numpy, as PyTorch,
    sums [-0.0] to +0.0: its sum starts from +0.0; the product, maximum and minimum are the
    element itself). (1e-45 is a subnormal a device may flush: left out there.)"""
    x = _ONE if device in ("cpu", "cpu:native") else _ONE[:-1]
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    got = _host(zynbook.run(src, device=device, x=x))
    _same_bits(got, [ref(x[k:k + 1]) for k in range(len(x))])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op, ref", [("+", np.sum), ("*", np.prod), ("max", np.max),
                                     ("min", np.min)])
@pytest.mark.parametrize("value", [-0.0, 0.0, -3.0, np.nan])
def test_a_reduce_kernel_of_one_element_is_numpys(device, op, ref, value):
    """A reduce kernel, a whole-input reduction in a kernel and the host's of one element
    equal numpy's bit for bit."""
    x = np.array([value], np.float32)
    kernel = (f"let y = compute(x) {{\n    @kernel reduce({op})\n    for i in 0..n:\n"
              f"        yield x[i]\n}}\n")
    name = {"+": "sum", "*": "prod", "max": "max", "min": "min"}[op]
    tile = f"let z = compute(x) {{\n    out = reduce({op}, x)\n}}\n"
    host = f"{name}(x)" if name != "prod" else "y"
    got = zynbook.run(kernel + tile + f"[y, z, {host}]\n", device=device, x=x)
    for g in got:
        _same_bits(np.asarray(_host(g), np.float32).reshape(()), ref(x))


@pytest.mark.parametrize("expr, ref", [
    ("sum(x[i:i+1])", np.sum), ("reduce(*, x[i:i+1])", np.prod),
    ("reduce(max, x[i:i+1])", np.max), ("reduce(min, x[i:i+1])", np.min)])
def test_a_reduction_of_a_one_element_tile_on_the_launch_ir(expr, ref):
    """The same on the CUDA and Metal launch IR (their emulators: no GPU here)."""
    from zynbook.compiler import schedules
    from zynbook.compiler.targets import cuda_target, metal_target
    from compute_testing import emulate_kernel, lower_block
    x = _ONE[:-1]
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"
    kernel, arrays, sizes, _ = lower_block(src, {"x": x})
    for tgt in (cuda_target((9, 0)), metal_target()):
        got = emulate_kernel(schedules.build(kernel, tgt, sizes), kernel, arrays, sizes)
        _same_bits(got, [ref(x[k:k + 1]) for k in range(len(x))])


# ------------------------------------------------- a name used before its definition

_X2 = np.array([1.0, 2.0], np.float32)
_W2 = np.array([2.0, 3.0], np.float32)


@pytest.mark.parametrize("src, line, column, defined, fixed, want", [
    ("let a = b\nlet b = 2\na\n", 1, 9, 2, "let b = 2\nlet a = b\na\n", 2),
    ("let x = 1.5\nlet a = x + b * 2.0\nvar b = 2.0\na\n", 2, 13, 3,
     "let x = 1.5\nvar b = 2.0\nlet a = x + b * 2.0\na\n", 1.5 + 2.0 * 2.0),
    ("let c = f(1.5)\npipeline f(x):\n    return x * 2.0\nc\n", 1, 9, 2,
     "pipeline f(x):\n    return x * 2.0\nlet c = f(1.5)\nc\n", 3.0),
    ("b = 3.0\nvar b = 2.0\nb\n", 1, 1, 2, "var b = 2.0\nb = 3.0\nb\n", 3.0),
    ("let t = 2.0\nif t > 1.0:\n    let z = q\nlet q = 1.0\nt\n", 3, 13, 4,
     "let t = 2.0\nlet q = 1.0\nif t > 1.0:\n    let z = q\nt\n", 2.0),
    ("let x = tensor([1.0, 2.0])\nlet y = compute(x, w) {\n    for i in 0..n:\n"
     "        out[i] = x[i] * w[i]\n}\nlet w = tensor([2.0, 3.0])\ny\n", 2, 20, 6,
     "let x = tensor([1.0, 2.0])\nlet w = tensor([2.0, 3.0])\nlet y = compute(x, w) {\n"
     "    for i in 0..n:\n        out[i] = x[i] * w[i]\n}\ny\n", _X2 * _W2),
    ("let b = b + 1.0\n", 1, 9, 1, "let c = 1.0\nlet b = c + 1.0\nb\n", 2.0)])
def test_a_name_used_before_its_definition_is_one_error(src, line, column, defined, fixed,
                                                         want):
    """run() said `unknown name b` and compile() `b is used before it is defined (line 2)`:
    both give the same name error at the use, with a note at the definition; with the
    definition above the use, the program runs and equals numpy's."""
    errors = []
    for entry in (zynbook.run, zynbook.compile):
        with pytest.raises(ZynMLError) as info:
            entry(src)
        errors.append(info.value)
    run_err, compile_err = errors
    assert run_err.message == compile_err.message, (run_err, compile_err)
    for err in errors:
        assert err.kind == "name" and (err.span.line, err.span.column) == (line, column), err
        assert "before it is defined" in err.message or "its own definition" in err.message
        assert [s.line for _n, s in err.notes] == [defined], err.notes
        assert "^" in err.render() and "defined here" in err.render()
    assert_equals_numpy(_host(zynbook.run(fixed)), np.asarray(want), 1e-6)


def test_a_pipeline_called_before_a_name_it_reads_is_defined():
    """A pipeline of the program called before a name it reads is defined says so at the
    read, naming the pipeline (it said `unknown name q`); one of an earlier cell keeps the
    call's frame and its own lines."""
    src = "pipeline g():\n    return q\nlet r = g()\nlet q = 5\nr\n"
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src)
    err = info.value
    assert err.kind == "name" and (err.span.line, err.span.column) == (2, 12), err
    assert "pipeline `g`" in err.message and "line 4" in err.message, err
    assert zynbook.run("pipeline g():\n    return q\nlet q = 5\nlet r = g()\nr\n") == 5


# ------------------------------------------ shapes in messages: the user's names or sizes

_X34 = np.arange(12, dtype=np.float32).reshape(3, 4)
_Y3 = np.array([0.5, 1.0, 2.0], np.float32)


def _block(body, inputs="x, y"):
    return f"let r = compute({inputs}) {{\n{body}\n}}\nr\n"


@pytest.mark.parametrize("body, line, column, run_says, compile_says", [
    ("    out = dot(x, y)", 2, 15, "this is f32[3, 4]", None),
    ("    var a: f32 = x[0, 0]\n    a = x\n    out = a", 3, 9, "this value is f32[3, 4]",
     "this value is f32[x.shape[0], x.shape[1]]"),
    ("    out = reduce(max, x, axis=2)", 2, 31, "out of range for f32[3, 4]", None),
    ("    out = x[y]", 2, 13, "not f32[3]", "not f32[y.shape[0]]"),
    # (compile() takes the unbound inputs' ranks from the body: y as 2-D, x as 3-D here)
    ("    for i in 0..m:\n        out[i] = x[i, y[0:m]]", 3, 23, "not f32[m]",
     "not i32[m, y.shape[1]]"),
    ("    for i in 0..m:\n        out[i] = dot(x[0:m, 0:2], y)", 3, 22, "this is f32[m, 2]",
     "this is f32[m, 2, x.shape[2]]")])
def test_shapes_in_messages_use_the_programs_names_or_sizes(body, line, column, run_says,
                                                           compile_says):
    """Messages showed an input's axes by internal names (`f32[x_d0, x_d1]`, `f32[y_d0]`):
    they show the size name the body ties the axis to (`m`), else its size where the input
    is bound (run) or `x.shape[k]` (compile); run on every device."""
    src = _block(body)
    for device in DEVICES:
        with pytest.raises(ZynMLError) as info:
            zynbook.run(src, device=device, x=_X34, y=_Y3)
        err = info.value
        assert run_says in err.message and (err.span.line, err.span.column) == (line, column), err
        assert "_d0" not in err.message and "_d1" not in err.message, err
    if compile_says is None:        # (an unbound input used whole is taken as it fits)
        zynbook.compile(src)
        return
    with pytest.raises(ZynMLError) as info:
        zynbook.compile(src)
    assert compile_says in info.value.message, info.value
    assert "_d0" not in info.value.message and "_d1" not in info.value.message


@pytest.mark.parametrize("device", DEVICES)
def test_the_programs_fixed_as_the_messages_say_equal_numpy(device):
    """What the messages ask for runs: a vector for dot(), an integer index."""
    got = zynbook.run(_block("    for i in 0..m:\n        out[i] = dot(x[i, 0:3], y)"),
                      device=device, x=_X34, y=_Y3)
    assert_equals_numpy(_host(got), _X34[:, 0:3] @ _Y3, 1e-6)
    ids = np.array([2, 0, 1], np.int32)
    got = zynbook.run(_block("    for i in 0..m:\n        out[i] = y[ids[i]]", "y, ids"),
                      device=device, y=_Y3, ids=ids)
    assert_equals_numpy(_host(got), _Y3[ids], 0)
