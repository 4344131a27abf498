"""The placement rule (runtime/placement.py, docs/language.md "Devices and placement"):
uncommitted tensors move to the device that needs them, committed tensors on different
memories are a ZynMLDeviceError naming both, `cpu` and `cpu:native` never conflict, and a
program that runs on `cpu` runs unchanged under any default device."""
from __future__ import annotations

import os

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLDeviceError

_WANTED = os.environ.get("ZYNBOOK_TEST_DEVICES")
DEVICES = [d["id"] for d in zynbook.compute_devices()
           if not _WANTED or d["id"] in _WANTED.split(",")]
# devices with memory of their own (not the host's)
OTHER_MEMORY = [d for d in DEVICES if d not in ("cpu", "cpu:native")]

SCALE = """let a = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 3.0 + 1.0
}
"""

# programs written once; each must give the same value under every default device
PROGRAMS = {
    "kernel result and host arithmetic": SCALE + "let b = a + a * 2.0\nb\n",
    "input and kernel result": SCALE + "let d = a + x\nd - x * 0.5\n",
    "kernel of a kernel of host arithmetic": SCALE + """let b = a * 0.5 + x
let c = compute(b, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = b[i] - x[i]
}
c + a
""",
    "literal constructors and concat": SCALE + "let z = ones([7])\nconcat([a, z, a + z])\n",
    "explicit cpu next to the default": SCALE + """let h = compute(x) @device("cpu") {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + 2.0
}
let m = compute(a, h) {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] * h[i]
}
m + h
""",
    "reduction result as a scalar": SCALE + """let s = compute(a) {
    @kernel reduce(+)
    for i in 0..n:
        yield a[i]
}
a * s
""",
}


def _x():
    return np.linspace(-2.0, 3.0, 7, dtype=np.float32)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("device", DEVICES)
def test_program_runs_unchanged_under_any_default_device(name, device):
    source = PROGRAMS[name]
    want = np.asarray(zynbook.run(source, device="cpu", x=_x()))
    got = np.asarray(zynbook.run(source, device=device, x=_x()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cpu_and_cpu_native_share_memory():
    if "cpu:native" not in DEVICES:
        pytest.skip("no C++ compiler here")
    source = SCALE + """let p = x.to_device("cpu")
let q = x.to_device("cpu:native")
let r = compute(p, q) {
    @kernel elementwise
    for i in 0..n:
        out[i] = p[i] + q[i]
}
r + p + q + a
"""
    for default in ("cpu", "cpu:native"):
        got = np.asarray(zynbook.run(source, device=default, x=_x()))
        x = _x()
        np.testing.assert_allclose(got, 4 * x + 3 * x + 1, rtol=1e-5)


@pytest.mark.skipif(not OTHER_MEMORY, reason="every device here uses the host's memory")
def test_committed_tensors_on_two_devices_name_both():
    other = OTHER_MEMORY[0]
    session = zynbook.Session("cpu")
    cases = [
        f'let p = x.to_device("cpu")\nlet q = x.to_device("{other}")\np + q\n',
        f'let p = x.to_device("{other}")\nlet q = zeros([7], device="cpu")\n'
        'concat([p, q])\n',
        f'let p = x.to_device("cpu:native")\nlet q = x.to_device("{other}")\n'
        'let r = compute(p, q) {\n    for i in 0..n:\n        out[i] = p[i] + q[i]\n}\n',
    ]
    for source in cases:
        with pytest.raises(ZynMLDeviceError) as info:
            session.run(source, x=_x())
        err = info.value
        assert other in err.message and ("cpu" in err.message), err.render()
        assert err.line == len(source.rstrip("\n").split("\n")) or err.line >= 3
        assert "^" in err.render()


@pytest.mark.skipif(not OTHER_MEMORY, reason="every device here uses the host's memory")
def test_uncommitted_input_moves_to_a_committed_tensor():
    other = OTHER_MEMORY[0]
    source = f'let p = x.to_device("{other}")\n' + """let r = compute(p, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = p[i] * x[i]
}
r + x
"""
    session = zynbook.Session("cpu")
    got = np.asarray(session.run(source, x=_x()))
    np.testing.assert_allclose(got, _x() * _x() + _x(), rtol=1e-5)
    # the block had no @device: it ran where its committed input lives
    assert session.launches[-1].device == other


def test_a_block_follows_its_committed_inputs_not_the_default():
    target = "cpu:native" if "cpu:native" in DEVICES else "cpu"
    source = f'let p = x.to_device("{target}")\n' + """let r = compute(p) {
    @kernel elementwise
    for i in 0..n:
        out[i] = p[i] + 1.0
}
r
"""
    for default in DEVICES:
        session = zynbook.Session(default)
        got = session.run(source, x=_x())
        assert session.launches[-1].device == target
        assert got.device == target and got.committed
        np.testing.assert_allclose(np.asarray(got), _x() + 1, rtol=1e-6)


def test_commitment_of_each_kind_of_tensor():
    session = zynbook.Session("cpu")
    session.run(SCALE + """let h = compute(x) @device("cpu") {
    for i in 0..n:
        out[i] = x[i]
}
let t = x.to_device("cpu")
let z = zeros([3])
let zd = zeros([3], device="cpu")
let s = a * 2.0
""", x=_x())
    ns = session.namespace
    assert not ns["x"].committed          # an input
    assert not ns["a"].committed          # placed by the default device
    assert ns["h"].committed              # @device
    assert ns["t"].committed              # to_device
    assert not ns["z"].committed and ns["zd"].committed
    assert not ns["s"].committed          # host arithmetic
