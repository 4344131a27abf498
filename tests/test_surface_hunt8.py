"""Surface behaviours checked against numpy and torch written here: a weak integer (a literal,
a size, a host int) out of bounds for the narrow integer it meets is refused as numpy 2
refuses it (NEP 50), on every device; BF16 safetensors entries load as bf16 tensors; record
fields come back as the caller's array type; the note on a Python int named like a size
fires in every kind of compute cell."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import zynbook
from compute_testing import raises, wanted_devices
from notebook_shell import cell, shell_fixture

DEVICES = wanted_devices()

U8 = np.array([1, 200, 255], np.uint8)
I8 = np.array([-100, 5, 127], np.int8)


def _kernel(expr: str, pre: str = "") -> str:
    """A program whose one kernel writes `expr` at each i of `b` (its line 3 + pre's)."""
    return f"{pre}let y = compute(b) {{\n    for i in 0..n:\n        out[i] = {expr}\n}}\ny\n"


def _column(src: str, line: int, text: str) -> int:
    """The 1-based column of `text` on line `line` of `src`."""
    return src.splitlines()[line - 1].index(text) + 1


# ------------------------------------------------------------ weak integers out of bounds

# (expression in ZynML, the same in numpy on `b`, the input, the out-of-bounds text)
OUT_OF_BOUNDS = [
    ("b[i] + 256", lambda b: b + 256, U8, "256"),
    ("b[i] - 256", lambda b: b - 256, U8, "256"),
    ("b[i] + (-1)", lambda b: b + (-1), U8, "-1"),
    ("b[i] * 300", lambda b: b * 300, U8, "300"),
    ("b[i] / 256", lambda b: b // 256, U8, "256"),      # ZynML's integer `/` is numpy's //
    ("b[i] % 256", lambda b: b % 256, U8, "256"),
    ("max(b[i], 256)", lambda b: np.maximum(b, 256), U8, "256"),
    ("b[i] ** 131", lambda b: b ** 131, I8, "131"),
    ("b[i] + 200", lambda b: b + 200, I8, "200"),
    ("b[i] - (-129)", lambda b: b - (-129), I8, "-129"),
    ("min(-200, b[i])", lambda b: np.minimum(-200, b), I8, "-200"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", OUT_OF_BOUNDS, ids=[c[0] for c in OUT_OF_BOUNDS])
def test_a_literal_out_of_bounds_for_the_narrow_integer_it_meets_is_a_type_error(device, case):
    expr, numpy_op, b, literal = case
    with pytest.raises(OverflowError, match="out of bounds"):
        numpy_op(b)
    src = _kernel(expr)
    err = raises("type", src, 3, _column(src, 3, literal), device=device, b=b)
    assert "out of bounds for" in str(err) and literal in str(err), err


@pytest.mark.parametrize("device", DEVICES)
def test_a_compound_assignment_of_an_out_of_bounds_literal_is_a_type_error(device):
    src = ("let y = compute(b) {\n    for i in 0..n:\n        var v = b[i]\n"
           "        v += 256\n        out[i] = v\n}\ny\n")
    with pytest.raises(OverflowError):
        U8 + 256
    raises("type", src, 4, _column(src, 4, "256"), device=device, b=U8)


# (expression, numpy on `b`, input): literals that fit, negative literals on signed types,
# comparisons (numpy compares with any Python int) and clip bounds past the type
IN_BOUNDS = [
    ("b[i] + 255", lambda b: b + 255, U8),
    ("b[i] - 1", lambda b: b - 1, U8),
    ("b[i] * 2", lambda b: b * 2, U8),
    ("b[i] + (-128)", lambda b: b + (-128), I8),
    ("b[i] * -1", lambda b: b * -1, I8),
    ("b[i] - 127", lambda b: b - 127, I8),
    ("b[i] < 256", lambda b: b < 256, U8),
    ("b[i] == -1", lambda b: b == -1, U8),
    ("b[i] > -129", lambda b: b > -129, I8),
    ("clamp(b[i], 0, 300)", lambda b: np.clip(b, 0, 300), U8),
    ("clamp(b[i], -200, 50)", lambda b: np.clip(b, -200, 50), I8),
    ("max(b[i], 3)", lambda b: np.maximum(b, 3), U8),
    ("i32(b[i]) + 256", lambda b: b.astype(np.int32) + 256, U8),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", IN_BOUNDS, ids=[c[0] for c in IN_BOUNDS])
def test_weak_integers_in_bounds_and_comparisons_equal_numpy(device, case):
    expr, numpy_op, b = case
    with np.errstate(over="ignore"):
        want = numpy_op(b)
    got = np.asarray(zynbook.run(_kernel(expr), device=device, b=b))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_an_int_literal_times_a_float_literal_on_u8_is_a_float(device):
    # numpy's is f64; a float literal in a kernel is f32 (docs/language.md), the same values
    got = np.asarray(zynbook.run(_kernel("b[i] * 2.0"), device=device, b=U8))
    np.testing.assert_array_equal(got, (U8 * 2.0).astype(np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_int_out_of_bounds_for_the_narrow_integer_it_meets_is_a_type_error(device):
    src = _kernel("b[i] + k")
    with pytest.raises(OverflowError):
        U8 + 300
    err = raises("type", src, 3, _column(src, 3, "k"), device=device, b=U8, k=300)
    assert "`k` is 300" in str(err) and "u8" in str(err), err
    # one that fits is numpy's (wrapping, as numpy's uint8 arithmetic does)
    with np.errstate(over="ignore"):
        want = U8 + 200
    got = np.asarray(zynbook.Session(device).run(src, b=U8, k=200))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


@pytest.mark.parametrize("device", DEVICES)
def test_a_program_int_and_a_size_out_of_bounds_are_type_errors_at_launch(device):
    src = _kernel("b[i] + k", pre="let k = -5\n")
    with pytest.raises(OverflowError):
        U8 + (-5)
    raises("type", src, 4, _column(src, 4, "k"), device=device, b=U8)
    # n is len(b): 3 * 100 passes u8, 2 * 100 does not
    src = _kernel("b[i] + n * 100")
    err = raises("type", src, 3, _column(src, 3, "n * 100"), device=device, b=U8)
    assert "300" in str(err), err
    with np.errstate(over="ignore"):
        want = U8[:2] + 2 * 100
    got = np.asarray(zynbook.run(src, device=device, b=U8[:2]))
    np.testing.assert_array_equal(got, want)


U32 = np.array([0, 5, 4294967295], np.uint32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("expr, b, k, low, high", [
    ("clamp(b[i], 0, k)", U8, 300, 0, 300), ("clamp(b[i], 0, k)", U8, 100, 0, 100),
    ("clamp(b[i], k, 50)", I8, -200, -200, 50), ("clamp(b[i], k, 5)", U32, -1, -1, 5),
])
def test_a_clamp_bound_of_a_host_int_past_the_type_clips_as_numpy(device, expr, b, k, low, high):
    want = np.clip(b, low, high)
    got = np.asarray(zynbook.Session(device).run(_kernel(expr), b=b, k=k))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, literal", [(np.uint16, 65536), (np.int16, -32769),
                                            (np.uint32, -1)])
def test_the_wider_narrow_types_take_their_own_bounds(dtype, literal):
    b = np.array([1, 2, 3], dtype)
    with pytest.raises(OverflowError):
        b + literal
    src = _kernel(f"b[i] + ({literal})")
    raises("type", src, 3, _column(src, 3, str(literal)), b=b)
    edge = int(np.iinfo(dtype).max if literal > 0 else np.iinfo(dtype).min)
    with np.errstate(over="ignore"):
        want = b + edge
    np.testing.assert_array_equal(np.asarray(zynbook.run(_kernel(f"b[i] + ({edge})"), b=b)),
                                  want)


# ----------------------------------------------------------------------- BF16 weights

def _safetensors(path, entries: dict) -> None:
    """A safetensors file of (code, shape, raw bytes) entries, in the format's own layout."""
    header, blob = {}, b""
    for name, (code, shape, raw) in entries.items():
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_weights_load_as_bf16_tensors_of_torchs_values(tmp_path, device):
    torch = pytest.importorskip("torch")
    w = torch.tensor(np.random.default_rng(1).standard_normal((3, 5)) * 100,
                     dtype=torch.bfloat16)
    path = tmp_path / "w.safetensors"
    _safetensors(path, {"layers.0.w": ("BF16", (3, 5), w.view(torch.int16).numpy().tobytes()),
                        "f": ("F32", (2,), np.array([1.5, 2.5], np.float32).tobytes())})
    model = zynbook.load_weights(path, device=device)
    t = model.layers[0].w
    assert t.dtype == "bf16" and t.shape == (3, 5)
    np.testing.assert_array_equal(np.asarray(t, np.float64), w.double().numpy())
    assert model.f.dtype == "f32"
    # a kernel reading it computes with bf16 values (stored back as bf16, torch's rounding)
    got = zynbook.run("let y = compute(w) {\n    for i in 0..m, j in 0..k:\n"
                      "        out[i, j] = w[i, j] * 3.0\n}\ny\n", device=device, w=t)
    assert got.dtype == "bf16"
    np.testing.assert_array_equal(np.asarray(got, np.float64), (w * 3).double().numpy())


def test_bf16_weights_saved_and_loaded_keep_their_bits(tmp_path):
    torch = pytest.importorskip("torch")
    w = torch.tensor([[1.0, -2.5e-3, 3.0e38], [0.1, 65504.0, -7.0]], dtype=torch.bfloat16)
    zynbook.save_weights(tmp_path / "w.safetensors", {"w": w})
    raw = (tmp_path / "w.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert json.loads(raw[8:8 + n])["w"]["dtype"] == "BF16"
    back = zynbook.load_weights(tmp_path / "w.safetensors")
    assert back.w.dtype == "bf16"
    bits = np.asarray(back.w, np.float32).view(np.uint32)
    np.testing.assert_array_equal(bits & 0xFFFF, 0)
    np.testing.assert_array_equal((bits >> 16).astype(np.uint16),
                                  w.view(torch.int16).numpy().view(np.uint16))
    # saving what was loaded gives the same file
    zynbook.save_weights(tmp_path / "again.safetensors", back)
    assert (tmp_path / "again.safetensors").read_bytes() == raw


# ------------------------------------------------------------- records returned to Python

_shell = shell_fixture(("p", "q", "s", "x", "y", "n", "cmp", "h8_model"))


@pytest.fixture
def shell(request):
    """The notebook shell (tests/notebook_shell.py), where IPython is installed."""
    pytest.importorskip("IPython")
    return request.getfixturevalue("_shell")


def test_a_record_a_cell_shows_has_numpy_fields_as_a_tensor_comes_back(shell):
    from zynbook.runtime.values import Record
    w = np.arange(4, dtype=np.float32)
    shell.user_ns["p"] = {"w": w, "k": 3, "inner": {"b": np.ones(2, np.int32)}}
    got = cell(shell, "%%compute\npipeline same(r):\n    return r\nsame(p)")
    assert isinstance(got, Record)
    assert type(got.w) is np.ndarray and type(got.inner.b) is np.ndarray
    np.testing.assert_array_equal(got.w, w)
    np.testing.assert_array_equal(got.inner.b, np.ones(2, np.int32))
    assert got.k == 3
    # the plain return of one field is numpy too, as it was
    assert type(cell(shell, "%%compute\np.w")) is np.ndarray


def test_a_record_a_cell_binds_reaches_python_with_numpy_fields_and_reads_back(shell):
    w = np.linspace(-1, 1, 5).astype(np.float32)
    shell.user_ns["p"] = {"w": w}
    cell(shell, "%%compute\npipeline same(r):\n    return r\nlet q = same(p)")
    q = shell.user_ns["q"]
    assert type(q.w) is np.ndarray
    np.testing.assert_array_equal(q.w, w)
    # the record Python now holds is read by the next cell as the record it was
    got = cell(shell, "%%compute\nlet s = compute(q.w) {\n    for i in 0..n:\n"
                      "        out[i] = q.w[i] * 3.0\n}\ns")
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, w * np.float32(3.0))


def test_weights_loaded_in_python_and_shown_by_a_cell_come_back_as_numpy(shell, tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    zynbook.save_weights(tmp_path / "m.safetensors", {"layers": [{"w": w}]})
    shell.user_ns["h8_model"] = zynbook.load_weights(tmp_path / "m.safetensors")
    got = cell(shell, "%%compute\npipeline same(r):\n    return r\nsame(h8_model)")
    assert type(got.layers[0].w) is np.ndarray
    np.testing.assert_array_equal(got.layers[0].w, w)


# ------------------------------------------------ the note on a Python int bounding a loop

BODY = "    for i in 0..n:\n        out[i] = x[i] * 2.0 + 1.0\n}\n"


def _notes(shell, magic: str, line: str, text: str) -> list:
    """The ZynMLWarning notes running `text` under `%%magic line` issued."""
    import warnings

    from zynbook.errors import ZynMLWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shell.run_cell_magic(magic, line, text)
    return [w.message for w in caught if isinstance(w.message, ZynMLWarning)]


def _says_pythons_n(notes, line: int) -> None:
    assert len(notes) == 1, [str(n) for n in notes]
    note = notes[0]
    assert (note.span.line, note.span.column) == (line, 20), note
    assert "`n` = 5 being read from Python" in note.message, note.message
    assert "covers 5 of the axis's 8 positions" in note.message, note.message


X8 = np.arange(8, dtype=np.float32)


def test_the_python_n_note_fires_for_an_async_block_not_yet_awaited(shell):
    shell.user_ns.update(x=X8, n=5)
    notes = _notes(shell, "compute", "", "let y = compute(x) @async {\n" + BODY)
    _says_pythons_n(notes, 4)
    got = cell(shell, "%%compute\nawait y")
    np.testing.assert_array_equal(got, X8[:5] * np.float32(2.0) + np.float32(1.0))


def test_the_python_n_note_fires_for_a_block_split_across_devices(shell):
    shell.user_ns.update(x=X8, n=5)
    notes = _notes(shell, "compute", "",
                   'let y = compute(x) @device(["cpu", "cpu"]) @parallel(data) {\n' + BODY)
    _says_pythons_n(notes, 4)
    np.testing.assert_array_equal(np.asarray(shell.user_ns["y"]),
                                  X8[:5] * np.float32(2.0) + np.float32(1.0))


def test_the_python_n_note_fires_for_compare(shell):
    shell.user_ns.update(x=X8, n=5)
    notes = _notes(shell, "compare", "--devices cpu --repeat 1 --no-chart --result y --out cmp "
                   "--numpy 'x[:5] * 2.0 + 1.0'", "let y = compute(x) {\n" + BODY)
    _says_pythons_n(notes, 4)           # (line 1 is the magic line)
    rows = shell.user_ns["cmp"].rows
    assert [r.device for r in rows] == ["cpu", "numpy"]
    assert all(not r.error and r.max_diff == 0.0 for r in rows), rows


def test_the_python_n_note_stays_quiet_where_n_covers_the_axis(shell):
    shell.user_ns.update(x=X8, n=8)
    assert not _notes(shell, "compute", "", "let y = compute(x) @async {\n" + BODY)
    assert not _notes(shell, "compare", "--devices cpu --repeat 1 --no-chart --result y",
                      "let y = compute(x) {\n" + BODY)
