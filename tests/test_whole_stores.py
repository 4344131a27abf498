"""A whole-tensor store (`out = E` over whole inputs, compiler/passes/whole_stores.py) runs as
a loop nest over the output on every device, against numpy written here: elementwise bodies
of 1 to 3 axes with trailing alignment, a matrix product with an epilogue at sizes that are
multiples of nothing, transposes, integers, f64 and f16 (numpy's f32 sums); a product llvmpipe's loop budget refused
as one block; what the pass leaves as it was still equals numpy."""
from __future__ import annotations

import numpy as np
import pytest

from compute_testing import assert_equals_numpy, lower_block, wanted_devices
from zynbook.backends.registry import get_device
from zynbook.compiler import cir
from zynbook.compiler.passes.pipeline import run_passes

DEVICES = wanted_devices()
RNG = np.random.default_rng(11)


def block(body: str, inputs: str) -> str:
    return f"let y = compute({inputs}) {{\n" + "\n".join("    " + ln for ln in body.splitlines()) + "\n}\ny"


def run(device, src, arrays):
    k, ins, sz, sc = lower_block(src, arrays)
    dev = get_device(device)
    got, launch = dev.launch(k, ins, sz, sc)
    return np.asarray(dev.to_host(got)), str((launch.geometry or {}).get("schedule", ""))


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def passed(src, arrays) -> cir.Kernel:
    return run_passes(lower_block(src, arrays)[0])


CASES = {
    "axpy_2d": ("out = a * 2.0 + b", "a, b", lambda: {"a": f32(33, 17), "b": f32(33, 17)},
                lambda a, b: a * np.float32(2) + b),
    "row_broadcast": ("out = exp(a) - c", "a, c", lambda: {"a": f32(7, 5), "c": f32(5)},
                      lambda a, c: np.exp(a) - c),
    "three_axes": ("out = max(x, y) * z", "x, y, z", lambda: {"x": f32(2, 3, 5), "y": f32(2, 3, 5), "z": f32(3, 5)},
                   lambda x, y, z: np.maximum(x, y) * z),
    "select_and_cast": ("out = where(a > b, a, -b)", "a, b", lambda: {"a": f32(9, 4), "b": f32(9, 4)},
                        lambda a, b: np.where(a > b, a, -b)),
    "matmul_epilogue": ("out = relu(a @ b + c) * 0.5", "a, b, c",
                        lambda: {"a": f32(33, 50), "b": f32(50, 17), "c": f32(17)},
                        lambda a, b, c: np.maximum(a.astype(np.float64) @ b + c, 0) * 0.5),
    "transposed_operand": ("out = transpose(a) @ b", "a, b", lambda: {"a": f32(20, 7), "b": f32(20, 9)},
                           lambda a, b: a.T.astype(np.float64) @ b),
    "matmul_f64": ("out = a @ b - a2", "a, b, a2",
                   lambda: {"a": RNG.standard_normal((5, 13)), "b": RNG.standard_normal((13, 6)),
                            "a2": RNG.standard_normal((5, 6))},
                   lambda a, b, a2: a @ b - a2),
    "matmul_i32": ("out = a @ b", "a, b",
                   lambda: {"a": RNG.integers(-50, 50, (6, 11)).astype(np.int32),
                            "b": RNG.integers(-50, 50, (11, 4)).astype(np.int32)},
                   lambda a, b: a @ b),
    "matmul_f16": ("out = a @ b + c", "a, b, c",
                   lambda: {"a": f32(17, 300).astype(np.float16), "b": f32(300, 9).astype(np.float16),
                            "c": f32(9).astype(np.float16)},
                   lambda a, b, c: (a @ b) + c),          # numpy: f32 sums rounded once, then + c in f16
    "matmul_llvmpipe_budget": ("out = a @ b", "a, b", lambda: {"a": f32(260, 300), "b": f32(300, 257)},
                               lambda a, b: a.astype(np.float64) @ b),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_whole_store_equals_numpy(device, case):
    body, inputs, make, want = CASES[case]
    arrays = make()
    if device.startswith(("vulkan", "gl")) and any(a.dtype == np.float64 for a in arrays.values()):
        pytest.skip("f64 needs the adapter's shader-f64")
    got, schedule = run(device, block(body, inputs), arrays)
    expect = want(*arrays.values())
    if np.issubdtype(expect.dtype, np.integer):
        assert np.array_equal(got, expect)
    else:
        tol = 2e-3 if expect.dtype == np.float16 else 1e-4
        assert_equals_numpy(got.astype(np.float64), expect.astype(np.float64), tol)
    if device != "cpu":
        assert "one block runs the whole body" not in schedule, schedule


def test_the_nest_it_writes():
    """`out = relu(a @ b + c)`: two parallel loops over out around the product's sum, the
    epilogue on the sum; generated names apart from the program's (`i`, `acc`)."""
    src = block("let i = 2.0\nlet acc = 1.0\nout = relu(a @ b + c) * i + acc", "a, b, c")
    k = passed(src, {"a": f32(4, 3), "b": f32(3, 5), "c": f32(5)})
    outer = k.body[-1]
    assert isinstance(outer, cir.Loop) and outer.parallel and outer.body[0].parallel
    inner = outer.body[0].body
    assert isinstance(inner[0], cir.Let) and inner[0].mutable and isinstance(inner[1], cir.Loop)
    assert not inner[1].parallel and isinstance(inner[2], cir.Store) and len(inner[2].index) == 2
    names = {n.var for n in cir.walk(k.body) if isinstance(n, cir.Loop)} | {inner[0].name}
    assert not names & {"i", "acc"}


@pytest.mark.parametrize("body,inputs,arrays", [
    ("out = a[0:3] * 2.0", "a", {"a": f32(5)}),                    # a slice
    ("out = a / sum(a)", "a", {"a": f32(6)}),                       # a reduction
    ("out = (a @ b) @ c", "a, b, c", {"a": f32(3, 4), "b": f32(4, 2), "c": f32(2, 5)}),   # two products
])
def test_what_it_leaves(body, inputs, arrays):
    """Left as tiles (the block schedule runs them), and still numpy's answer on `cpu`."""
    src = block(body, inputs)
    assert not any(isinstance(n, cir.Loop) for n in cir.walk(passed(src, arrays).body))
    got, _ = run("cpu", src, arrays)
    env = {n: a.astype(np.float64) for n, a in arrays.items()}
    want = eval(body.split("= ", 1)[1].replace("sum(a)", "a.sum()"), {}, env)
    assert_equals_numpy(got.astype(np.float64), want, 2e-3)
