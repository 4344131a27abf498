"""More programs written from the spec and the docs: the kernel library, the compute-device
interface, host language features and the errors of each, run on every device present
against numpy (or torch's autograd for gradients) written here."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook

from compute_testing import raises  # noqa: E402

DEVICES = [d["id"] for d in zynbook.compute_devices() if not d["id"].startswith("browser")]


def run(src, device="cpu", **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------------------------------------ host language

def test_a_typed_var_keeps_its_type_at_every_assignment():
    """`var v: int = 2` then `v = 2.5`: the declared type is checked at the assignment, under
    the value (it was checked at the declaration only, and `v` silently became a float or
    a string)."""
    err = raises("type", "var v: int = 2\nv = 2.5\nv", 2, 5)
    assert "declared int" in err.message and "float" in err.message
    raises("type", 'var v: float = 2\nv = "s"', 2, 5)
    raises("type", "var v: tensor = zeros([2])\nv = 3", 2, 5)
    raises("type", "var v: int = 5\nv += 0.5", 2, 1)
    raises("shape", "var v: tensor[3] = zeros([3])\nv = zeros([4])", 2, 5)
    # what the type takes is still taken, and an untyped var still widens
    assert run("var v: float = 2\nv = 2.5\nv += 1\nv") == 3.5
    assert run("var v: int = 7\nv /= 2\nv -= 1\nv") == 2
    assert run("var v = 5\nv += 0.5\nv") == 5.5
    # in a pipeline, and a let of the same name later is a new, untyped binding
    raises("type", "pipeline f(x):\n    var n: int = 0\n    n = x\n    return n\nf(1.5)", 3, 9)
    assert run("var v: int = 1\nvar v = 2\nv = 2.5\nv") == 2.5
    # the type lasts across cells of a session
    s = zynbook.Session("cpu")
    s.run("var count: int = 0")
    with pytest.raises(zynbook.ZynMLError) as info:
        s.run("count = 0.5")
    assert (info.value.kind, info.value.line, info.value.column) == ("type", 1, 9)
    assert s.run("count += 2\ncount") == 2


def test_a_pipeline_declared_to_return_a_value_must_return_one():
    """`-> int` with no `return` on the path taken is a type error under the declared type
    (nothing was handed back unchecked); the unchecked types take nothing."""
    err = raises("type", "pipeline f() -> int:\n    let a = 1\nf()", 1, 17)
    assert "nothing" in err.message
    raises("type", "pipeline f() -> tensor:\n    return\nlet y = f()", 1, 17)
    src = "pipeline f(x: int) -> int:\n    if x > 0:\n        return x\nf({})"
    assert run(src.format(3)) == 3
    raises("type", src.format(-1), 1, 23)
    assert run("pipeline f() -> any:\n    let a = 1\nf()") is None
    assert run("pipeline f():\n    let a = 1\nf()") is None


def test_a_record_of_keys_that_are_not_names_reports_a_missing_field():
    """A dict with int keys bound as a record: a field it lacks is a name error listing its
    keys (the message's join raised Python's TypeError)."""
    err = raises("name", "y.a", 1, 1, y={1: 2, "b": 3})
    assert "no field `a`" in err.message and "1, b" in err.message
    assert run("y.b", y={1: 2, "b": 3}) == 3
