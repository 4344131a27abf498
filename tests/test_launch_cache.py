"""Launch plans (zynbook/runtime/plans.py): a compute block run again with the same
signature reuses its parse, lowering, solved sizes and the device's prepared launch; every
change that can change the result (shape, dtype, a size the program gives, the device,
`config`, a redefined pipeline or weight, the magic line's annotations) gets its own, and
the answer matches numpy either way."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from kernel_sources import FIRST, SCALE
from zynbook.backends.registry import get_device
from zynbook.errors import ZynMLRuntimeError
from zynbook.runtime import plans

DEVICES = ["cpu"]
for _device in ("cpu:native", "cuda:0"):
    try:
        get_device(_device)
        DEVICES.append(_device)
    except Exception:       # no C++ compiler, no GPU here
        pass


GATHER = """let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]] * 2.0
}
y"""


class Counts:
    """How often the front end and the devices did their work."""

    def __init__(self, monkeypatch):
        self.solves = self.prepares = 0
        real_solve = plans.solve

        def solve(*args, **kwargs):
            self.solves += 1
            return real_solve(*args, **kwargs)

        monkeypatch.setattr(plans, "solve", solve)
        for device_id in DEVICES:
            dev = get_device(device_id)
            real_prepare = dev.prepare

            def prepare(kernel, sizes, real=real_prepare):
                self.prepares += 1
                return real(kernel, sizes)

            monkeypatch.setattr(dev, "prepare", prepare)

    def __call__(self, session):
        return (session.interpreter.kernel_counter, self.solves, self.prepares)


def close(got, want):
    """`got` (a tensor, numpy, or the CuPy array a magic gives on cuda:N) is `want`."""
    host = got.get() if hasattr(got, "get") else np.asarray(got)
    np.testing.assert_allclose(host, want, rtol=1e-6, atol=1e-6)


@pytest.fixture
def counts(monkeypatch):
    return Counts(monkeypatch)


@pytest.mark.parametrize("device", DEVICES)
def test_a_warm_run_reuses_its_plan(device, counts, monkeypatch):
    import zynbook.session as session_module
    parses = []
    real_parse = session_module.parse_kept
    monkeypatch.setattr(session_module, "parse_kept", lambda s: parses.append(s) or real_parse(s))
    source = SCALE + f"\n// {device} warm"         # a text no other test parsed
    s = zynbook.Session(device)
    x = np.arange(16, dtype=np.float32)
    close(s.run(source, x=x, a=2.0), x * 2 + 1)
    first = counts(s)
    assert first == (1, 1, 1)
    for k in range(3):
        y = x + k
        close(s.run(source, x=y, a=2.0), y * 2 + 1)
    assert counts(s) == first
    assert parses == [source]
    assert len(s.launches) == 1 and s.launches[0].times.kernel is not None


@pytest.mark.parametrize("device", DEVICES)
def test_a_float_scalar_is_passed_not_baked(device, counts):
    s = zynbook.Session(device)
    x = np.arange(8, dtype=np.float32)
    close(s.run(SCALE, x=x, a=2.0), x * 2 + 1)
    before = counts(s)
    close(s.run(SCALE, x=x, a=-3.5), x * -3.5 + 1)
    assert counts(s) == before


@pytest.mark.parametrize("device", DEVICES)
def test_a_new_shape_solves_and_prepares_again_without_lowering(device, counts):
    s = zynbook.Session(device)
    for n in (8, 24, 8):
        x = np.linspace(0, 1, n, dtype=np.float32)
        close(s.run(SCALE, x=x, a=0.5), x * 0.5 + 1)
    assert counts(s) == (1, 2, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_a_new_dtype_lowers_again(device, counts):
    s = zynbook.Session(device)
    for dtype in (np.float32, np.float64, np.float32):
        x = np.linspace(0, 1, 8).astype(dtype)
        y = s.run(SCALE, x=x, a=3.0)
        assert y.dtype == {np.float32: "f32", np.float64: "f64"}[dtype]
        close(y, x * 3 + 1)
    assert counts(s)[0] == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_size_the_program_gives_is_part_of_the_key(device, counts):
    s = zynbook.Session(device)
    x = np.arange(10, dtype=np.float32)
    for m in (4, 7, 4):
        y = s.run(FIRST, x=x, m=m)
        assert y.shape == (m,)
        close(y, x[:m] * 2)
    assert counts(s) == (1, 2, 2)


def test_another_device_gets_its_own_launch(counts):
    if "cpu:native" not in DEVICES:
        pytest.skip("no cpu:native here")
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32)
    for device in ("cpu", "cpu:native", "cpu"):
        s.default_device = device
        y = s.run(SCALE, x=x, a=2.0)
        assert y.device == device
        close(y, x * 2 + 1)
    assert counts(s) == (1, 1, 2)


def test_config_picks_the_device_of_later_runs():
    if "cpu:native" not in DEVICES:
        pytest.skip("no cpu:native here")
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32)
    assert s.run(SCALE, x=x, a=1.0).device == "cpu"
    s.run('config { compute_device: "cpu:native" }')
    y = s.run(SCALE, x=x, a=1.0)
    assert y.device == "cpu:native"
    close(y, x + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_tuning_settings_prepare_again(device, counts):
    s = zynbook.Session(device)
    x = np.arange(8, dtype=np.float32)
    close(s.run(SCALE, x=x, a=2.0), x * 2 + 1)
    s.run("config { autotune: true }")
    close(s.run(SCALE, x=x, a=2.0), x * 2 + 1)
    close(s.run(SCALE, x=x, a=2.0), x * 2 + 1)
    assert counts(s) == (1, 1, 2)


def test_the_magic_lines_annotations_are_part_of_the_key():
    if "cpu:native" not in DEVICES:
        pytest.skip("no cpu:native here")
    s = zynbook.Session("cpu")
    x = np.arange(8, dtype=np.float32)
    for line in ('@device("cpu:native")', '@device("cpu")', '@device("cpu:native")'):
        value, _ = s.run_cell(SCALE, compute_annotations=line, x=x, a=2.0)
        assert value.device == line[9:-2]
        close(value, x * 2 + 1)
    assert s.interpreter.kernel_counter == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_redefined_pipeline_runs_its_new_body(device):
    s = zynbook.Session(device)
    x = np.arange(8, dtype=np.float32)
    define = """pipeline f(x):
    return compute(x) {{
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * {k}
    }}
"""
    for k in (2.0, 3.0, 2.0):
        s.run(define.format(k=k))
        for _ in range(2):
            close(s.run("f(x)", x=x), x * k)
    # the third definition is the first's text: its parsed block, lowered once
    assert s.interpreter.kernel_counter == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_rebound_weight_is_read_again(device, counts):
    s = zynbook.Session(device)
    source = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * w[i]
}
y"""
    x = np.arange(8, dtype=np.float32)
    for w in (np.full(8, 2.0, np.float32), np.full(8, 5.0, np.float32)):
        close(s.run(source, x=x, w=w), x * w)
    assert counts(s) == (1, 1, 1)
    w = np.full(8, 2.0, np.float64)         # another dtype: lowered again
    close(s.run(source, x=x, w=w), x * w)
    assert counts(s)[0] == 2


@pytest.mark.parametrize("device", DEVICES)
def test_an_index_out_of_range_is_raised_on_a_warm_run(device, counts):
    s = zynbook.Session(device)
    x = np.arange(8, dtype=np.float32)
    good = np.array([1, 2, 3], dtype=np.int32)
    close(s.run(GATHER, x=x, idx=good), x[good] * 2)
    before = counts(s)
    with pytest.raises(ZynMLRuntimeError) as info:
        s.run(GATHER, x=x, idx=np.array([1, 9, 3], dtype=np.int32))
    assert info.value.span.line == 4
    assert "index 9 is out of range for an axis of size 8 of `x`" in str(info.value)
    close(s.run(GATHER, x=x, idx=good), x[good] * 2)      # the flag was cleared
    assert counts(s) == before


def test_a_magic_cell_run_again_reuses_its_plan(counts):
    IPython = pytest.importorskip("IPython")  # noqa: N806, F841
    from IPython.core.interactiveshell import InteractiveShell

    from zynbook.kernel import state
    device = DEVICES[-1]        # the compiled device where there is one
    shell = InteractiveShell.instance()
    session = zynbook.Session(device=device)
    state.set_notebook_session(session)
    shell.run_line_magic("load_ext", "zynbook")
    try:
        for k in range(3):
            x = np.arange(8, dtype=np.float32) + k
            shell.user_ns.update(x=x, a=1.5)
            y = shell.run_cell_magic("compute", "", SCALE)
            close(y, x * 1.5 + 1)
        assert counts(session) == (1, 1, 1)
    finally:
        for name in ("x", "a", "y"):
            shell.user_ns.pop(name, None)
        state.set_notebook_session(None)


@pytest.mark.parametrize("device", DEVICES)
def test_a_compiled_program_reuses_its_plans_across_runs(device, counts):
    program = zynbook.compile(SCALE + "\n// compiled once")
    for k in range(3):
        x = np.arange(8, dtype=np.float32) - k
        close(program.run(device, x=x, a=4.0), x * 4 + 1)
    assert counts.solves == 1 and counts.prepares == 1
    assert len(program._blocks.lowered) == 1
