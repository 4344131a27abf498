"""Programs at the edges of the documented surface (docs/language.md, docs/api.md): windows
over fewer elements than they span, sizes only an offset index reads, device names, the
Python API's error positions; compared with numpy written here, or checked for the ZynML
error's kind, line and column."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import assert_equals_numpy, raises, wanted_devices

DEVICES = wanted_devices()


def _run(device, src, /, **inputs):
    return zynbook.Session(device).run(src, **inputs)


# ------------------------------------ a window loop whose bound is below 0 runs no iteration

_WINDOW = """let r = compute(x) {
    for i in 0..n - 2:
        out[i] = x[i] + x[i + 1] + x[i + 2]
}
r"""

_WINDOW_ROWS = """let r = compute(x) {
    for i in 0..rows - 2, j in 0..cols:
        out[i, j] = x[i, j] + x[i + 2, j]
}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
def test_window_over_fewer_elements_than_it_spans_is_empty(device, n):
    x = np.arange(n, dtype=np.float32) * 1.5
    got = _run(device, _WINDOW, x=x)
    assert_equals_numpy(got, x[:-2] + x[1:-1] + x[2:] if n >= 2 else x[:0], 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [1, 4])
def test_window_over_rows_keeps_the_other_axis(device, rows):
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    assert_equals_numpy(_run(device, _WINDOW_ROWS, x=x), x[:-2] + x[2:], 0)


_GUARDED_WINDOW = """let r = compute(x) {{
    for i in 0..n:
        if {guard}:
            out[i] = x[i] + x[i + 2]
}}
r"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("guard", ["i < n - 2", "i + 2 < n", "i + 3 <= n"])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_window_under_a_guard_no_iteration_passes_is_empty(device, guard, n):
    # (`i + 2 < n` gave out n elements, the last two zeros, as a guard it did not read)
    x = np.arange(n, dtype=np.float32) - 0.5
    got = _run(device, _GUARDED_WINDOW.format(guard=guard), x=x)
    assert_equals_numpy(got, x[:-2] + x[2:] if n >= 2 else x[:0], 0)


def test_writes_that_all_land_below_zero_are_still_a_shape_error():
    err = raises("shape", """let r = compute(x) {
    for i in 0..n:
        out[i - 10] = x[i]
}
r""", 1, 9, x=np.ones(6, np.float32))
    assert "-4 elements" in str(err)


# ------------------------------ a size a loop reads an input at only an offset of cannot be told

def test_size_read_only_at_an_offset_names_the_read():
    err = raises("name", """let r = compute(x) {
    for i in 0..n:
        out[i] = x[i + 10]
}
r""", 2, 17, x=np.ones(12, np.float32))
    assert "`x[i + 10]`" in str(err) and "`i` alone" in str(err)
    assert "bounds no loop that indexes an input" not in str(err)


@pytest.mark.parametrize("loop, body, said", [
    ("0..n - 1 step 2", "x[i] + x[i + 1]", "runs from 0 by steps of 2"),
    ("1..n", "x[i]", "runs from 1 by steps of 1"),
])
def test_size_of_a_loop_not_from_0_by_1_says_so(loop, body, said):
    err = raises("name", f"""let r = compute(x) {{
    for i in {loop}:
        out[i] = {body}
}}
r""", 2, 17, x=np.ones(6, np.float32))
    assert f"its loop indexes `x` with `i` but {said}" in str(err)


def test_size_of_a_loop_that_reads_nothing_keeps_its_message():
    err = raises("name", """let r = compute(x) {
    for i in 0..n:
        out[i] = 1.0
}
r""", 2, 17, x=np.ones(3, np.float32))
    assert "bounds no loop that indexes an input" in str(err)


# ------------------------------------------------------- a device id typed without its index

@pytest.mark.parametrize("device", [d for d in DEVICES if ":" in d and d.split(":")[1].isdigit()])
def test_a_device_family_without_its_index_suggests_the_first_device(device):
    from zynbook.errors import ZynMLDeviceError
    family = device.split(":")[0]
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.run("1 + 1", device=family)
    assert f"did you mean `{family}:0`?" in str(info.value)


def test_a_family_with_no_device_here_says_ids_take_an_index():
    from zynbook.errors import ZynMLDeviceError
    present = {d.split(":")[0] for d in DEVICES}
    family = next(f for f in ("metal", "cuda", "dx12") if f not in present)
    with pytest.raises(ZynMLDeviceError) as info:
        zynbook.Session(family)
    assert f"as `{family}:0`" in str(info.value)


# ------------------------------------ Session.run_cell: errors in the annotations point there

_BLOCK = """let x = ones([3])
let y = compute(x) {
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""


@pytest.mark.parametrize("annotations, kind, column, width", [
    ('@device("cpu") @device("cpu")', "type", 16, 14),
    ("@workgroup(0)", "type", 1, 13),
    ('  @devic("cpu")', "name", 3, 13),
    ('@async @kernel foo', "syntax", 16, 1),
])
def test_run_cell_errors_in_the_annotations_point_into_them(annotations, kind, column, width):
    from zynbook.errors import ZynMLError
    session = zynbook.Session("cpu")
    with pytest.raises(ZynMLError) as info:
        session.run_cell(_BLOCK, annotations)
    err = info.value
    assert (err.kind, err.line, err.column) == (kind, 1, column), err
    shown = err.render().splitlines()
    assert shown[1] == "   1 | " + annotations
    assert shown[2] == " " * (6 + column) + "^" * width
    assert session.run("1 + 1") == 2


def test_run_cell_errors_in_the_program_stay_there_beside_annotations():
    from zynbook.errors import ZynMLError
    session = zynbook.Session("cpu")
    with pytest.raises(ZynMLError) as info:
        session.run_cell("let y = nope + 1\ny", "@async")
    err = info.value
    assert (err.kind, err.line, err.column) == ("name", 1, 9), err
    assert "   1 | let y = nope + 1" in err.render()
    value, is_expr = session.run_cell(_BLOCK, '@device("cpu")')
    assert is_expr
    assert_equals_numpy(value, np.full(3, 2.0, np.float32), 0)


@pytest.mark.parametrize("annotations", [5, ["@async"], b"@async"])
def test_run_cell_annotations_that_are_not_text_are_a_type_error(annotations):
    from zynbook.errors import ZynMLTypeError
    session = zynbook.Session("cpu")
    with pytest.raises(ZynMLTypeError, match="compute annotations are text"):
        session.run_cell(_BLOCK, annotations)
    with pytest.raises(ZynMLTypeError, match="compute annotations are text"):
        session.run_cell(_BLOCK, compute_annotations=annotations)
    assert session.run("1 + 1") == 2


# --------------------------------------------------------------- zynbook.compile(...).sources

def test_program_sources_of_an_unknown_language_name_the_languages():
    from zynbook.errors import ZynMLNameError
    program = zynbook.compile(_BLOCK)
    assert "def " in program.sources("python")[0]
    with pytest.raises(ZynMLNameError, match=r"`klingon`; languages: .*python"):
        program.sources("klingon")
    assert zynbook.compile("1 + 1").sources("klingon") == []


# ------------------------------------------- @parallel of a loop that runs to an expression

def test_parallel_split_of_a_window_loop_names_its_bound():
    err = raises("device", """let y = compute(x) {
    @device(["cpu", "cpu"])
    @parallel(data)
    for i in 0..n - 2:
        out[i] = x[i] + x[i + 2]
}
y""", x=np.arange(7, dtype=np.float32))
    assert "it runs to `n - 2`, not to a size" in str(err)


# ------------------------------------- an unbound scalar a body reads is not taken for `false`

def test_an_unbound_scale_suggests_no_literal():
    err = raises("name", """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * scale
}
y""", 4, 25, x=np.ones(3, np.float32))
    assert "unknown name `scale`" in str(err) and "did you mean" not in str(err)


def test_run_cell_annotations_may_end_with_a_newline():
    session = zynbook.Session("cpu")
    value, _ = session.run_cell(_BLOCK, '@device("cpu")\n')
    assert_equals_numpy(value, np.full(3, 2.0, np.float32), 0)
