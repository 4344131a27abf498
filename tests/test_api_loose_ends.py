"""Loose ends of the Python and notebook surface, each the regression of a bug found: a
program input named `device` (zynbook.run, Program.run) and `compute_annotations` (the
ZynML kernel, %%compare, Session.run_cell), a pipeline parameter named `self`, a device that
is not a string; 0-d tensors as the numbers of pipeline parameters, host builtins (axis=,
seed=, range, ...), the device interface's sizes, timeouts, memory budgets and list
indices; `to_device(..., copy=false)` returning the tensor itself; a placement surviving
%%compute's numpy; an interrupted `await` and host loop; `memory_stats()` counting what the
program holds. Each is compared with numpy or torch written here, on every device present."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

BLOCK = """compute(device, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = device[i] * 2.0 + x[i]
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_program_input_named_device_binds_when_the_device_is_given_by_position(device):
    """`zynbook.run(src, dev, device=a)` and `Program.run(dev, device=a)` bind an input named
    `device`, as `Session(dev).run(src, device=a)` does; Python refused the keyword given
    twice. `device=` alone still names the device the blocks run on."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 9)).astype(np.float32)
    want = a * np.float32(2) + b
    for got in (zynbook.run(BLOCK, device, device=a, x=b),
                zynbook.compile(BLOCK).run(device, device=a, x=b),
                zynbook.Session(device).run(BLOCK, device=a, x=b)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        assert got.device == device
    double = "compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 2.0\n}"
    for got in (zynbook.run(double, device=device, x=b),
                zynbook.compile(double).run(device=device, x=b)):
        assert got.device == device
        np.testing.assert_allclose(np.asarray(got), b * 2, rtol=1e-6)
    with pytest.raises(zynbook.ZynMLTypeError) as info:       # meant as the input
        zynbook.run(BLOCK, device=a, x=b)
    assert "to bind an input named `device`" in info.value.message


def test_a_device_that_is_not_a_string_is_a_type_error_naming_its_type():
    """Session(array) raised numpy's ValueError (an array's truth value) and a device id
    of another type printed its repr, every element of an array."""
    with pytest.raises(zynbook.ZynMLTypeError):
        zynbook.run("1", np.ones(3))
    with pytest.raises(zynbook.ZynMLTypeError) as info:
        zynbook.Session(np.zeros(1000))
    assert "ndarray" in info.value.message and len(info.value.message) < 200


PIPELINES = """pipeline scale(x: tensor, k: int):
    return x * k + zeros([k]).shape[0]
pipeline small(x: tensor, k: u8):
    return x * k
pipeline ratio(x: tensor, f: float):
    return x * f
pipeline flag(x: tensor, b: bool):
    return where(b, x, -x)
[scale, small, ratio, flag]"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_tensor_is_a_pipeline_s_int_or_float_argument(device):
    """A 0-d integer tensor (np.array(2), torch.tensor(2), `s[0]`) is an argument for a
    parameter typed `int` or `u8` (its range still checked), and a 0-d float tensor for one
    typed `float`, a 0-d bool tensor for one typed `bool`, as kernels and host builtins take
    them; each was a type error ("must be an int, not tensor[] i64")."""
    torch = pytest.importorskip("torch")
    scale, small, ratio, flag = zynbook.Session(device).run(PIPELINES)
    x = np.arange(5, dtype=np.float32)
    for k in (np.array(2), torch.tensor(3), np.array(4, np.uint8), torch.tensor(2, dtype=torch.int8)):
        n = int(k)
        np.testing.assert_array_equal(np.asarray(scale(x, k)), x * n + n)
        np.testing.assert_array_equal(np.asarray(small(x, k)), x * n)
    for f in (np.array(0.5), torch.tensor(1.5, dtype=torch.float32), np.array(3)):
        np.testing.assert_allclose(np.asarray(ratio(x, f)), x * float(f), rtol=1e-6)
    for b in (np.array(True), torch.tensor(False), np.bool_(True)):
        np.testing.assert_array_equal(np.asarray(flag(x, b)), np.where(bool(b), x, -x))
    with pytest.raises(zynbook.ZynMLTypeError) as info:
        small(x, np.array(300))
    assert "from 0 to 255" in info.value.message
    with pytest.raises(zynbook.ZynMLTypeError):
        scale(x, np.array(2.5))                # a float is still not an int
    with pytest.raises(zynbook.ZynMLTypeError):
        scale(x, np.array([2]))                # nor a 1-element array
    session = zynbook.Session(device)
    got = session.run("let k: int = s[1]\nvar m: u8 = s[0]\nm = s[1]\n[k, m, zeros([k]).shape]",
                      s=np.array([3, 7]))
    assert got == [7, 7, [7]]


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_without_a_copy_returns_the_tensor_itself(device):
    """`x.to_device(its device, copy=false)` is `x` itself, committed there, wherever `x`
    came from: for a tensor bound from a Python array or made by host code it was a second
    tensor, so an assignment through it left `x` as it was (bound from Python) and the
    caller's array is never written."""
    a = np.arange(4, dtype=np.float32)
    caller = a.copy()
    session = zynbook.Session(device)
    for make in ("x", "ones([4]) * x", f'x.to_device("{device}")'):
        got = session.run(f"let t = {make}\nlet v = t.to_device(t.device, copy=false)\n"
                          f"v[0] = 9.0\n[t, v, v.device == t.device]", x=a)
        t, v, same = got
        assert v is t and t.committed and same
        want = np.ones(4, np.float32) * a if make.startswith("ones") else a.copy()
        want[0] = 9.0
        np.testing.assert_array_equal(np.asarray(t), want)
        np.testing.assert_array_equal(a, caller)
    t, v = session.run('[x, x.to_device(x.device, copy=true)]', x=a)
    assert v is not t


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

@pytest.mark.parametrize("device", DEVICES)
def test_a_placement_survives_a_trip_through_the_notebook_as_numpy(shell, device):
    """A tensor committed to `cpu` goes to the notebook as its numpy array; the next
    %%compute cell bound that array again, an uncommitted tensor, so its block ran on the
    default device and host arithmetic with a tensor placed elsewhere was not refused. A
    placement on another device stays too, with the default `cpu`."""
    from zynbook.kernel import state
    x = np.random.default_rng(5).standard_normal(16).astype(np.float32)
    shell.user_ns["le_x"] = x
    block = ("let le_q = compute(le_p) {\n    for i in 0..n:\n        out[i] = le_p[i] * 3.0 - 1.0\n}\n"
             "[le_p.device, le_q.device, le_q]")
    for default, placed in ((device, "cpu"), ("cpu", device)):
        state.notebook_session().default_device = default
        shell.run_cell_magic("compute", "", f'let le_p = le_x.to_device("{placed}")')
        if placed == "cpu":
            assert type(shell.user_ns["le_p"]) is np.ndarray
        got = shell.run_cell_magic("compute", "", block)
        assert got[:2] == [placed, placed]
        np.testing.assert_allclose(_host(got[2]), x * np.float32(3) - np.float32(1),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(_host(shell.user_ns["le_p"]), x)
        other = next((d for d in DEVICES if not d.startswith("cpu")), None)
        if placed == "cpu" and other is not None:
            with pytest.raises(zynbook.ZynMLDeviceError):
                shell.run_cell_magic("compute", "", f'le_p + ones([16], device="{other}")')
    shell.user_ns["le_p"] = x * 2          # rebound in Python: a new, uncommitted input
    state.notebook_session().default_device = device
    assert shell.run_cell_magic("compute", "", block)[:2] == ["cpu", device]


@pytest.fixture
def python_handles_sigint():
    """A real SIGINT raises KeyboardInterrupt only where Python handles it (a process a
    non-interactive shell started in the background ignores it, a notebook's kernel not)."""
    import signal
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _interrupted(session, source, after=0.3, **inputs):
    """Run `source`, a real SIGINT (as Jupyter sends) arriving after `after` seconds."""
    import os
    import signal
    import threading
    timer = threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            session.run(source, **inputs)
    finally:
        timer.cancel()
        timer.join()


# seconds of work on every device (a recurrence no executor folds), converging to 2 * x;
# WebGPU on llvmpipe runs at most ~65535 loop steps a thread, so it gets more threads
HALVING = """compute(x) @async {
    for i in 0..n:
        var acc = 0.0
        for k in 0..m:
            acc = acc * 0.5 + x[i]
        out[i] = acc
}"""
WORK = {"cpu": (4, 60_000), "cpu:native": (4, 400_000_000)}


def _work(device: str) -> tuple:
    """(threads, steps) of HALVING that take seconds on `device`: llvmpipe runs ~65535 loop
    steps a thread at most, so it gets many threads; a GPU's thread takes about two seconds
    for 10^9 dependent steps (its 32768 threads of 60000 steps took a millisecond)."""
    if device in WORK:
        return WORK[device]
    name = next((str(d.get("name", "")) for d in zynbook.compute_devices() if d["id"] == device), "")
    # (llvmpipe vectorises the threads: 32768 of them took 0.2 s on two idle cores, less
    # than the interrupt's 0.3 s)
    return (262144, 60_000) if "llvmpipe" in name.lower() else (1024, 1_000_000_000)


def _host(v) -> np.ndarray:
    """A result or notebook value as a numpy array (a CuPy array is copied to the host)."""
    return v.get() if type(v).__module__.split(".")[0] == "cupy" else np.asarray(v)


@pytest.mark.parametrize("device", DEVICES)
def test_an_interrupted_await_leaves_a_job_of_an_earlier_statement_running(
        device, python_handles_sigint):
    """Interrupting `await f` stops the wait and leaves the session as it was: the job an
    earlier statement started runs on and `await f` gives its value (numpy's); it was
    cancelled, and every later `await f` a runtime error."""
    n, m = _work(device)
    x = np.linspace(0, 1, n, dtype=np.float32)
    session = zynbook.Session(device)
    session.run(f"let f = {HALVING}", x=x, m=m)
    _interrupted(session, "let r = await f")
    assert "r" not in session.namespace
    got = session.run("await f")
    np.testing.assert_allclose(np.asarray(got), 2 * x, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", [d for d in ("cpu", "cpu:native") if d in DEVICES])
def test_an_interrupted_await_cancels_the_job_its_own_statement_started(
        device, python_handles_sigint):
    """A job the interrupted statement started itself can be awaited by nothing after it:
    it is cancelled, and the device's next job does not wait for it (tens of seconds)."""
    import time
    n, m = {"cpu": (4, 400_000), "cpu:native": (64, 50_000_000)}[device]
    x = np.linspace(0, 1, n, dtype=np.float32)
    session = zynbook.Session(device)
    session.run(f"await {HALVING}", x=x, m=1)          # (compiled before)
    _interrupted(session, f"let r = await {HALVING}", x=x, m=m)
    start = time.monotonic()
    got = session.run(f"await {HALVING}", x=x[:3], m=40)
    assert time.monotonic() - start < 8.0
    np.testing.assert_allclose(np.asarray(got), 2 * x[:3], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_memory_stats_counts_the_buffers_the_program_holds(device):
    """`memory_stats().live_bytes` counts what the program holds: the value of the statement
    before (`var acc = upload(x)`, a discarded `upload(x)`) was kept alive while the next one
    ran, one buffer more in a loop's body and after a top-level statement."""
    x = np.random.default_rng(6).standard_normal(1000).astype(np.float32)
    session = zynbook.Session(device)
    got = session.run("""let base = memory_stats().live_bytes
var seen = []
var acc = upload(x)
for i in 0..3:
    acc = copy_buffer(acc)
    seen = seen + [memory_stats().live_bytes - base]
for i in 0..2:
    upload(x)
    seen = seen + [memory_stats().live_bytes - base]
upload(x)
seen = seen + [memory_stats().live_bytes - base]
[seen, acc]""", x=x)
    held = x.nbytes                 # acc alone: each copy replaces the one before
    assert got[0] == [held] * 6
    np.testing.assert_array_equal(np.asarray(got[1]), x)


def test_a_notebook_name_called_compute_annotations_is_an_input_of_every_cell_kind(shell):
    """A Python name `compute_annotations` that a cell reads is an input: the ZynML kernel
    and %%compare passed the notebook's names as keywords of Session.run_cell, whose
    `compute_annotations=` took it for the annotation text (numpy's ValueError for an
    array). Session.run_cell takes the annotations by position for the same reason."""
    x = np.arange(5, dtype=np.float32)
    shell.user_ns["compute_annotations"] = x
    try:
        shell.run_cell_magic("compare", "--devices cpu --repeat 1 --out le_cmp "
                             "--numpy 'compute_annotations * 2'", "compute_annotations * 2.0")
        row = shell.user_ns["le_cmp"].rows[-1]
        assert row.device == "numpy" and row.max_diff == 0.0
    finally:
        shell.user_ns.pop("compute_annotations", None)
        shell.user_ns.pop("le_cmp", None)
    session = zynbook.Session("cpu")
    got, shown = session.run_cell("compute_annotations * 2.0", "", compute_annotations=x)
    assert shown
    np.testing.assert_array_equal(np.asarray(got), x * 2)
    block = "compute(x) {\n    for i in 0..n:\n        out[i] = x[i] + 1.0\n}"
    fut, _ = session.run_cell(block, compute_annotations="@async", x=x)     # as before
    np.testing.assert_array_equal(np.asarray(session.run("await f", f=fut)), x + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_integer_tensor_is_an_integer_argument_of_host_builtins(device):
    """axis=, seed=, split's parts, transpose's axes, range() and memory_pool's size= take a
    0-d integer tensor (np.array(1), torch.tensor(2), `s[0]`) as its int, as numpy does; each
    was a type error ("axis= takes an integer ..., not tensor[] i64"), softmax's a shape
    error printing the tensor."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    session = zynbook.Session(device)
    for k, two in ((np.array(1), torch.tensor(2)), (np.array(1, np.uint8), np.array(2, np.int8))):
        got = session.run("""[x.sum(axis=k), mean(x, axis=[k]), x.max(axis=k), argmax(x, axis=k),
 softmax(x, axis=k), concat([x, x], axis=k), split(x, two, axis=k)[1], transpose(x, [k, 0]),
 range(two), memory_pool(device="cpu", size=s[1]).size,
 randn([5], seed=s[0]), randn([5], seed=3)]""", x=x, k=k, two=two, s=np.array([3, 2000]))
        e = np.exp(x - x.max(1, keepdims=True))
        want = [x.sum(1), x.mean(1), x.max(1), x.argmax(1), e / e.sum(1, keepdims=True),
                np.concatenate([x, x], 1), np.split(x, 2, 1)[1], x.T]
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)
        assert got[8] == [0, 1] and got[9] == 2000
        np.testing.assert_array_equal(np.asarray(got[10]), np.asarray(got[11]))
    with pytest.raises(zynbook.ZynMLTypeError):
        session.run("softmax(x, axis=a)", x=x, a=np.array(1.0))       # a float is no axis


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_tensor_is_a_size_or_number_of_the_device_interface(device):
    """The device interface's sizes and hyperparameters (matmul's m, k, n, alloc's length,
    softmax's rows) take a 0-d tensor as the number it holds, in ZynML and from Python;
    each was a type error printing the tensor's every value."""
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    session = zynbook.Session(device)
    got = session.run("""[download(matmul(upload(a), upload(b), s[0], s[1], s[2])),
 len(alloc(s[1] * 2)), download(softmax(upload(a), m, s[1]))]""",
                      a=a, b=b, s=np.array([3, 4, 2]), m=np.array(3, np.int32))
    np.testing.assert_allclose(np.asarray(got[0]), (a @ b).ravel(), rtol=1e-5, atol=1e-5)
    assert got[1] == 8
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(got[2]), (e / e.sum(1, keepdims=True)).ravel(),
                               rtol=1e-5, atol=1e-6)
    dev = zynbook.device(device)
    np.testing.assert_array_equal(dev.download(dev.alloc(np.array(5))), np.zeros(5, np.float32))
    with pytest.raises(zynbook.ZynMLTypeError) as info:
        session.run("alloc(x)", x=np.ones(1000))
    assert "not Tensor" in info.value.message and len(info.value.message) < 100


def test_an_interrupted_host_loop_keeps_its_finished_iterations(python_handles_sigint):
    """As docs/api.md says (it said the interrupted statement binds nothing): a host loop
    keeps what its finished iterations did, as Python's loop does; a later statement binds
    nothing."""
    session = zynbook.Session("cpu")
    session.run("var t = 0")
    _interrupted(session, "for i in 0..1000000000:\n    t = t + 1\n    let last = i\n"
                 "let never = 1", after=0.5)
    ns = session.namespace
    assert ns["t"] > 0 and ns["t"] in (ns["last"] + 1, ns["last"] + 2)
    assert "never" not in ns
    assert session.run("t + 1") == ns["t"] + 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_pipeline_parameter_named_self_is_given_by_name_from_python(device):
    """A pipeline called from Python takes any parameter by name, `self` too (Python said
    "got multiple values for argument 'self'"), as Session.run binds an input of any name."""
    p = zynbook.Session(device).run("pipeline p(self: tensor, args: float):\n"
                                    "    return self * args\np")
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(p(self=x, args=1.5)), x * np.float32(1.5))
    np.testing.assert_array_equal(np.asarray(p(x, args=3.0)), x * np.float32(3))


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_tensor_is_a_timeout_and_a_memory_budget(device):
    """`await f timeout d` and `config { memory_budget: m }` take a 0-d tensor as the number
    it holds (np.array(2.0), s[0]); each was a type error ("timeout takes a duration")."""
    x = np.random.default_rng(9).standard_normal(6).astype(np.float32)
    session = zynbook.Session(device)
    got = session.run("let f = compute(x) @async {\n    for i in 0..n:\n"
                      "        out[i] = x[i] * 2.0\n}\nawait f timeout d", x=x, d=np.array(30.0))
    np.testing.assert_allclose(np.asarray(got), x * 2, rtol=1e-6)
    try:
        budget = session.run("config { memory_budget: s[0] }\nmemory_stats().budget_bytes",
                             s=np.array([1 << 20, 0]))
        assert budget == 1 << 20
    finally:
        session.run("config { memory_budget: inf }")


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_integer_tensor_indexes_a_list_it_assigns_into(device):
    """`l[k] = v` and `l[s[0]] += v` take a 0-d integer tensor as the index, as reading
    `l[k]` does; each was a type error ("a list is indexed by one integer")."""
    got = zynbook.Session(device).run("var l = [1, 2, 3]\nl[k] = 9\nl[s[0]] += 5\n[l, l[k]]",
                                      k=np.array(1), s=np.array([2]))
    want = [1, 2, 3]
    want[int(np.array(1))] = 9
    want[2] += 5
    assert got == [want, want[1]]
