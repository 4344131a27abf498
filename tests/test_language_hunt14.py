"""Language front end: signed with unsigned integers in every binary builtin and operator, a
size-1 axis of a tile stored into a longer slice, @parallel over a loop to a number written in
the kernel, and all(...)/any(...) of futures awaited from Python; every device present,
against numpy written here."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices
from test_parallel import device_lists
from zynbook.compiler.types import NUMPY_NAMES

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------- a signed and an unsigned integer: one dtype for all

def _promoted(a: str, b: str) -> str:
    """docs/language.md's rule, written out here: the wider integer; of equal widths, the
    signed one (numpy's int32 with uint32 is int64: ZynML keeps the width, as `+` does)."""
    wa, wb = int(a[1:]), int(b[1:])
    if wa != wb:
        return a if wa > wb else b
    return a if a.startswith("i") else b


def _values(dtype):
    # the extremes of the type; of a 64-bit one those of 16 bits, whose products every device
    # holds (WebGPU's 64-bit integers hold 32-bit values)
    info = np.iinfo(NUMPY_NAMES[dtype] if int(dtype[1:]) < 64 else ("int16" if dtype[0] == "i" else "uint16"))
    if dtype[0] == "i":
        return np.array([-1, 5, info.min, info.max, 0, -3], NUMPY_NAMES[dtype])
    return np.array([info.max, 2, 0, info.max // 2 + 1, info.max, 3], NUMPY_NAMES[dtype])


_PAIRS = [("i8", "u8"), ("i16", "u16"), ("i32", "u32"), ("i64", "u64"), ("u8", "i8"),
          ("u32", "i32"), ("i8", "u32"), ("u16", "i32"), ("i32", "u64")]

_OPS = {
    "a[i] + b[i]": np.add,
    "a[i] - b[i]": np.subtract,
    "a[i] * b[i]": np.multiply,
    "min(a[i], b[i])": np.minimum,
    "max(b[i], a[i])": lambda a, b: np.maximum(b, a),
    "clamp(a[i], b[i], b[i] + b[i])": lambda a, b: np.minimum(b + b, np.maximum(b, a)),
    "where(a[i] > b[i], a[i], b[i])": lambda a, b: np.where(a > b, a, b),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", _PAIRS, ids="-".join)
def test_signed_with_unsigned_is_one_dtype_in_every_binary_operation(device, pair):
    # min, max, clamp and where of a signed and an unsigned integer take the dtype `+` takes,
    # and compute in it (each operand converted to it, wrapping, as numpy's astype does);
    # a comparison compares the exact values, as numpy's does
    ta, tb = pair
    if _promoted(ta, tb) == "u64" and device.split(":")[0] in ("vulkan", "gl"):
        pytest.skip("a negative i32 as u64 is past the 32 bits WebGPU holds a u64 in")
    a, b = _values(ta), _values(tb)
    dtype = NUMPY_NAMES[_promoted(ta, tb)]
    wa, wb = a.astype(dtype), b.astype(dtype)
    session = zynbook.Session(device)
    for op, ref in _OPS.items():
        if op.startswith("where"):
            want = np.where(a > b, wa, wb)          # (the condition on the exact values)
        else:
            want = ref(wa, wb).astype(dtype)
        src = f"let y = compute(a, b) {{\n    for i in 0..n:\n        out[i] = {op}\n}}\ny\n"
        assert_equals_numpy(session.run(src, a=a, b=b), want, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", _PAIRS, ids="-".join)
def test_signed_with_unsigned_compares_exact_values(device, pair):
    a, b = _values(pair[0]), _values(pair[1])
    src = ("let y = compute(a, b) {\n    for i in 0..n:\n"
           "        out[i] = where(a[i] < b[i], 1, 0) + where(a[i] == b[i], 2, 0)\n}\ny\n")
    want = ((a < b).astype(np.int32) + 2 * (a == b)).astype(np.int32)
    assert_equals_numpy(_run(device, src, a=a, b=b), want, 0)


# ------------------------------------ a size-1 axis of a tile broadcasts along out's slice

_X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, sizes, want", [
    # a column of 1 stored into a slice of 4 is repeated along it, as numpy's
    # `out[i, 0:4] = x[i, 0:1]`; it was a shape error ("differ: 4 and 1")
    ("for i in 0..rows:\n        out[i, 0:4] = x[i, 0:1]", {},
     lambda x: np.repeat(x[:, 0:1], 4, 1)),
    ("for i in 0..rows:\n        out[i, 0:cols] = x[i, 0:1] * 2.0", {"cols": 4},
     lambda x: np.repeat(x[:, 0:1] * 2, 4, 1)),
    ("for i in 0..rows:\n        out[i, 0:cols] = x[i, 0:k]", {"cols": 4, "k": 1},
     lambda x: np.repeat(x[:, 0:1], 4, 1)),
    ("for i in 0..rows:\n        out[i, 0:cols] = x[i, 0:k]", {"cols": 4, "k": 4},
     lambda x: x),
    ("for r in 0..1:\n        out[0:3, 0:4] = x[0:1, 0:4]", {},
     lambda x: np.repeat(x[0:1], 3, 0)),
    ("for r in 0..1:\n        out[0:3, 0:4] = x[0:3, 3:4] - x[0:1, 0:1]", {},
     lambda x: np.broadcast_to(x[:, 3:4] - x[0:1, 0:1], (3, 4))),
    ("for r in 0..1:\n        let c = x[0:3, 1:2]\n        out[0:3, 0:4] = c", {},
     lambda x: np.repeat(x[:, 1:2], 4, 1)),
    # (tiles combined elementwise broadcast as they did)
    ("for i in 0..rows:\n        out[i, 0:4] = max(x[i, 0:1], x[i, 0:4])", {},
     lambda x: np.maximum(x[:, 0:1], x)),
])
def test_a_tile_of_one_is_stored_along_a_longer_slice(device, body, sizes, want):
    src = f"let y = compute(x) {{\n    {body}\n}}\ny\n"
    assert_equals_numpy(_run(device, src, x=_X, **sizes), want(_X), 0)


@pytest.mark.parametrize("body, sizes, line, column, says", [
    ("for i in 0..rows:\n        out[i, 0:4] = x[i, 0:3]", {}, 3, 9, "differ: 4 and 3"),
    ("for i in 0..rows:\n        out[i, 0:1] = x[i, 0:4]", {}, 3, 9, "differ: 1 and 4"),
    ("for i in 0..rows:\n        out[i, 0:cols] = x[i, 0:k]", {"cols": 4, "k": 3}, 3, 9,
     "`k` is 3"),
    ("for i in 0..rows:\n        out[i, 0:1] = x[i, 0:k]", {"k": 4}, 3, 9, "`k` is 4"),
])
def test_a_tile_that_is_neither_as_long_as_the_slice_nor_1_is_a_shape_error(body, sizes, line,
                                                                            column, says):
    src = f"let y = compute(x) {{\n    {body}\n}}\ny\n"
    err = raises("shape", src, line, column, x=_X, **sizes)
    assert says in str(err) and "as long as it, or of 1" in str(err), err


@pytest.mark.parametrize("body, b, line, column, fixed, want", [
    ("out = x + b", _X[0:1], 2, 11, "out = x + b[0:1]", _X + _X[0:1]),
    ("for i in 0..rows:\n        out[i, 0:4] = b[i]", _X[:, 0:1], 3, 9,
     "for i in 0..rows:\n        out[i, 0:4] = b[i, 0:1]", np.repeat(_X[:, 0:1], 4, 1)),
])
def test_an_input_whole_axis_of_1_says_to_slice_it(body, b, line, column, fixed, want):
    # an input's whole axis is tied to the size it meets (docs/language.md): the error says
    # that a slice of 1 broadcasts, and the slice does
    src = "let y = compute(x, b) {\n    BODY\n}\ny\n"
    err = raises("shape", src.replace("BODY", body), line, column, x=_X, b=b.copy())
    assert "a slice of 1 broadcasts: `m[0:1]`" in str(err), err
    assert_equals_numpy(_run("cpu", src.replace("BODY", fixed), x=_X, b=b.copy()), want, 0)


# ----------------------------------- @parallel over a loop to a number written in the kernel

_SPLIT = """let y = compute(x) @device(devices) @parallel(data) {
    for i in 0..BOUND:
        out[i] = x[i, 0] * 2.0 + x[i, 1]
}
y
"""


@pytest.mark.parametrize("devices", device_lists(), ids=lambda d: "+".join(d))
def test_a_split_loop_to_a_number_is_refused_at_the_number(devices):
    # each device runs its part's length, which a number written in the kernel cannot be:
    # the refusal points at the number and says what to write (it pointed at `compute` and
    # said only "it runs to a constant, not to a size")
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    err = raises("device", _SPLIT.replace("BOUND", "7"), 2, 17, x=x, devices=devices)
    assert "runs to 7, a number written in the kernel" in str(err)
    assert "`for i in 0..n`" in str(err), err
    # written as it says, it splits and equals numpy
    session = zynbook.Session()
    got = session.run(_SPLIT.replace("BOUND", "n"), x=x, devices=devices)
    assert_equals_numpy(np.asarray(got), x[:, 0] * 2 + x[:, 1], 0)
    assert sorted(launch.device for launch in session.launches) == sorted(devices)


def test_a_literal_loop_runs_on_one_device_listed_without_parallel():
    x = np.arange(14, dtype=np.float32).reshape(7, 2)
    src = _SPLIT.replace("BOUND", "7").replace(" @parallel(data)", "")
    assert_equals_numpy(_run("cpu", src, x=x, devices=["cpu", "cpu"]), x[:, 0] * 2 + x[:, 1], 0)


# ------------------------------------------ all(...) / any(...) of futures awaited in Python

_FUTURES = """let a = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let b = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]] + 1.0
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_python_awaits_all_and_any_of_futures(device):
    # (`await g` of `all([a, b])` a cell gave Python was a TypeError: only one future was
    # awaitable)
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    idx = np.array([4, 3, 2, 1, 0], np.int32)
    session = zynbook.Session(device)
    every = session.run(_FUTURES + "all([a, b])\n", x=x, idx=idx)
    first = session.run(_FUTURES + "any([a, b])\n", x=x, idx=idx)

    async def main():
        return await every, await first

    both, (value, index) = asyncio.run(main())
    assert len(both) == 2
    assert_equals_numpy(both[0], x * 2, 0)
    assert_equals_numpy(both[1], x[idx] + 1, 0)
    assert index in (0, 1)
    assert_equals_numpy(value, [x * 2, x[idx] + 1][index], 0)


def test_python_awaiting_all_with_a_failing_future_is_its_zynml_error():
    x = np.arange(4, dtype=np.float32)
    every = zynbook.Session("cpu").run(_FUTURES + "all([a, b])\n", x=x,
                                        idx=np.array([0, 9, 1, 2], np.int32))

    async def main():
        return await every

    with pytest.raises(zynbook.ZynMLError) as info:
        asyncio.run(main())
    assert (info.value.kind, info.value.line) == ("runtime", 9), info.value
    assert "index 9" in str(info.value)


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

def test_a_python_cell_awaits_all_of_a_cells_futures(shell):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    shell.user_ns.update(x=x, idx=np.array([1, 1, 0, 4, 2], np.int32))
    result = shell.run_cell("%%compute\n" + _FUTURES + "let g = all([a, b])\n")
    assert result.success, result.error_in_exec
    result = shell.run_cell("both = await g")
    assert result.success, result.error_in_exec
    both = shell.user_ns["both"]
    assert_equals_numpy(both[0], x * 2, 0)
    assert_equals_numpy(both[1], x[[1, 1, 0, 4, 2]] + 1, 0)
