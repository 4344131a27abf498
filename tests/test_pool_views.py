"""pool.free() of a view of a pool's tensor (`t[1]`, `t[0:2]`) says so and frees nothing: it
said the tensor was not the pool's, which read as if `t` itself were not."""
import numpy as np
import pytest

import zynbook
from compute_testing import wanted_devices


@pytest.mark.parametrize("device", wanted_devices())
@pytest.mark.parametrize("view", ["t[1]", "t[0:2]", "t[1:3, 1]"])
def test_freeing_a_view_names_the_view_and_frees_nothing(device, view):
    session = zynbook.Session(device)
    src = (f'let pool = memory_pool(device="{device}", size=1KB)\n'
           f"let t = pool.allocate(shape=[4, 3])\n")
    session.run(src)
    with pytest.raises(zynbook.ZynMLError) as info:
        session.run(f"pool.free({view})")
    err = info.value
    assert err.kind == "type" and err.span.line == 1
    # host devices index into the tensor's memory (a view); others may copy it
    if device in ("cpu", "cpu:native"):
        assert "a view (a slice or an index) of a tensor this pool allocated" in err.message
    # the pool still holds t, whole and usable
    assert session.run("pool.used") == 48
    session.run("t[2, 1] = 5.0")
    got = np.asarray(session.run("t"))
    assert got.shape == (4, 3) and got[2, 1] == 5.0
    session.run("pool.free(t)")
    assert session.run("pool.used") == 0
