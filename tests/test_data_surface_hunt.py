"""How data goes into a program and comes back (`zynbook.run`, `%%compute`, `zynbook.Tensor`):
dtypes, layouts, scalars and Python values, each compared with numpy or torch written here,
on every device present. Each test is the regression of what the hunt found."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from compute_testing import raises, wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]

SUM = """let s = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
s"""

ROW_SUMS = """let s = compute(x) {
    @kernel reduce(+, axis=1)
    for i in 0..m, j in 0..n:
        yield x[i, j]
}
s"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_bf16_reduction_is_rounded_to_bf16_as_torch_sums(device):
    """A reduce kernel over a torch bf16 tensor gives a bf16 result, accumulated in f32 and
    rounded once, as torch's sum; the reference device kept the f32 sum (100.78125 for a
    hundred bf16(1.01), which no bf16 holds)."""
    torch = pytest.importorskip("torch")
    # multiples of 1/64 below 4: exact in bf16, and their sums exact in f32 in any order
    ints = np.random.default_rng(0).integers(-255, 256, (4, 100))
    x = torch.tensor(ints / 64.0, dtype=torch.bfloat16)
    want = x.sum(1)
    assert not torch.equal(want.double(), x.double().sum(1))    # rounding shows
    session = zynbook.Session(device)
    rows = session.run(ROW_SUMS, x=x)
    assert rows.dtype == "bf16"
    np.testing.assert_array_equal(np.asarray(rows, np.float64), want.double().numpy())
    for r in range(4):
        assert session.run(SUM, x=x[r]) == float(want[r])


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")    # np.matrix's
@pytest.mark.parametrize("device", DEVICES)
def test_an_ndarray_subclass_binds_as_its_plain_array(device):
    """An np.matrix (or a masked array with nothing masked) is bound as the array it holds:
    `*` multiplies elementwise and `x[0]` is a row, as for any tensor; `x * y` of two
    matrices gave their matrix product and `x[0]` a 1 x n matrix, and a masked array's host
    sums skipped the masked values its kernels read (one with an element masked is refused:
    test_surface_hunt11.py)."""
    plain = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    m = np.matrix(plain)
    session = zynbook.Session(device)
    got = session.run("[x * y, x[0], x @ y.T, x.sum()]", x=m, y=m)
    for g, want in zip(got, [plain * plain, plain[0], plain @ plain.T, plain.sum()]):
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6)
    masked = np.ma.masked_array(plain[0], mask=[0, 0, 0])
    total = session.run("x.sum() + compute(x) {\n @kernel reduce(+)\n for i in 0..n:\n"
                        "  yield x[i]\n}", x=masked)
    assert total == 2 * plain[0].sum()


DOUBLE = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
y"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_torch_view_with_its_negative_bit_set_binds_as_its_values(device):
    """`c.conj().imag` of a complex torch tensor is a view whose negation is pending (its
    negative bit): it binds as its values; it was refused, its dtype f32 said to be one
    ZynML has no type for."""
    torch = pytest.importorskip("torch")
    c = torch.tensor([1 + 2j, 3 - 4j, -5 + 0.5j]).conj()
    assert c.imag.is_neg()
    got = zynbook.Session(device).run(DOUBLE, x=c.imag)
    np.testing.assert_array_equal(np.asarray(got), (c.imag * 2.0).numpy())


@pytest.mark.parametrize("make, words", [
    (lambda torch: torch.eye(3).to_sparse(), "Sparse layout"),
    (lambda torch: torch.empty(3, device="meta"), "meta tensor")], ids=["sparse", "meta"])
def test_a_torch_tensor_that_cannot_be_read_is_a_type_error_saying_why(make, words):
    """A sparse or meta torch tensor is refused with torch's reason, at the name's first
    read; the error said its dtype f32 was one ZynML has no type for."""
    torch = pytest.importorskip("torch")
    err = raises("type", "let a = 1\n" + DOUBLE, 2, 17, x=make(torch))
    assert "cannot be read as an array" in err.message and words in err.message
    assert "no type for" not in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_np_array_of_a_tensor_is_a_copy_as_numpy_s_protocol_says(device):
    """`np.array(t)` (copy=True) gives memory of its own, as for a numpy array: writing
    into it changed the tensor, and with it the session's name and the caller's input;
    `np.asarray(t)` still reads the tensor without a copy."""
    x = np.arange(6, dtype=np.float32)
    session = zynbook.Session(device)
    y = session.run(DOUBLE, x=x)
    same = session.run("x")
    for t, want in ((y, x * 2.0), (same, x.copy())):
        c = np.array(t)
        c[:] = -1.0
        np.testing.assert_array_equal(np.asarray(t), want)
        assert not np.shares_memory(np.array(t, dtype=np.float64), np.asarray(t))
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(session.run("y + x")), x * 3.0)
    with pytest.raises(ValueError):
        np.array(y, dtype=np.float64, copy=False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8", "int32"])
def test_a_block_over_0d_inputs_runs_on_every_device(device, dtype):
    """A block over 0-d tensors (a number np.array(3.0) stands for) has no size to infer:
    WebGPU built only its program of every size set, which no schedule gives a serial body,
    and refused it ("block: shared arrays need the sizes of the launch")."""
    x, y = np.array(7, dtype), np.array(3, dtype)
    src = "compute(x, y) {\n    out = x * y - max(x, y)\n}"
    with np.errstate(over="ignore"):
        want = x * y - np.maximum(x, y)
    got = zynbook.Session(device).run(src, x=x, y=y)
    assert np.asarray(got).shape == ()
    assert float(got) == float(want)
    flags = zynbook.Session(device).run("compute(x, y) {\n    out = x > y\n}", x=x, y=y)
    assert bool(flags) is True


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("device", DEVICES)
def test_a_host_float_past_f32_is_its_infinity_without_a_warning(device):
    """A host float is an f32 argument: 1e300 is f32's infinity there, as numpy's cast
    makes it, on every device and without numpy's overflow warning (WebGPU's uniform
    packing printed one into the cell's output)."""
    x = np.array([1.0, -2.0, 0.0], np.float32)
    src = "compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * s\n}"
    got = zynbook.Session(device).run(src, x=x, s=1e300)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x * np.float32(1e300)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("device", DEVICES)
def test_a_tensor_is_true_float_or_int_as_numpy_reads_its_array(device):
    """bool(), float() and int() of a tensor read it as numpy reads its array: bool() was
    len() > 0, so a tensor holding 0.0 was true and a 0-d one raised TypeError."""
    session = zynbook.Session(device)
    for value in (np.array([0.0], np.float32), np.array(0.0, np.float32),
                  np.array([2.5], np.float32), np.array(-3, np.int32)):
        t = session.run(DOUBLE if value.ndim else "x", x=value)
        arr = value * 2.0 if value.ndim else value
        assert isinstance(t, zynbook.Tensor)
        assert bool(t) == bool(arr)
        if not value.ndim:
            assert float(t) == float(arr) and int(t) == int(arr)
    with pytest.raises(ValueError):        # numpy's: the truth of several values
        bool(session.run(DOUBLE, x=np.zeros(2, np.float32)))


SCALE = """pipeline scale(x: tensor[n], k: float) -> tensor[n]:
    let y = compute(x) {
        for i in 0..n:
            out[i] = x[i] * k
    }
    return y
scale"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("args, kwargs, param, what", [
    ((np.ones(2, np.float32), 1j), {}, "k", "type `complex`"),
    ((np.ones(2, np.float32),), {"k": object()}, "k", "type `object`"),
    ((np.array(["a", "b"]), 2.0), {}, "x", "dtype `<U1`")])
def test_a_pipeline_argument_no_zynml_value_stands_for_is_named(device, args, kwargs, param,
                                                                 what):
    """A Python argument a pipeline cannot take is a type error naming its parameter, the
    caret under that parameter; it named no parameter, the caret under `pipeline`. A
    good call still runs after it."""
    scale = zynbook.Session(device).run(SCALE)
    with pytest.raises(zynbook.ZynMLTypeError) as info:
        scale(*args, **kwargs)
    err = info.value
    column = SCALE.index(f"{param}: ") + 1
    assert (err.line, err.column) == (1, column), err.render()
    assert err.message.startswith(f"argument `{param}` of pipeline scale: ") and what in err.message
    assert "^" in err.render()
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(scale(x, 1.5)), x * np.float32(1.5))


from notebook_shell import shell  # noqa: E402,F401  (the fixture)

@pytest.mark.parametrize("device", DEVICES)
def test_a_bf16_result_stays_bf16_in_the_next_compute_cell(shell, device):
    """%%compute writes a bf16 result back as f32 numpy (numpy has no bf16); the next cell
    reading it bound that array again, an f32 tensor, so its block computed in f32 where
    torch computes in bf16."""
    torch = pytest.importorskip("torch")
    x = torch.tensor(np.random.default_rng(4).standard_normal(64), dtype=torch.bfloat16)
    shell.user_ns["hunt_x"] = x
    line = f'@device("{device}")'
    shell.run_cell_magic("compute", line, "let hunt_z = compute(hunt_x) {\n"
                         "    for i in 0..n:\n        out[i] = hunt_x[i] * 2.0 + 1.0\n}")
    got = shell.run_cell_magic("compute", line, "let hunt_w = compute(hunt_z) {\n"
                               "    for i in 0..n:\n        out[i] = hunt_z[i] * 3.0 - 0.7\n}\n"
                               "[hunt_z.dtype, hunt_w.dtype, hunt_w]")
    # each block computes in f32 and rounds to bf16 where it stores, as torch's fused
    # kernels do
    z = (x.float() * 2.0 + 1.0).bfloat16()
    in_f32 = z.float() * 3.0 - 0.7
    want = in_f32.bfloat16()
    assert got[:2] == ["bf16", "bf16"]
    assert not torch.equal(want.float(), in_f32)
    host = got[2].get() if hasattr(got[2], "get") else got[2]     # CuPy's on cuda:N
    np.testing.assert_array_equal(np.asarray(host, np.float64), want.double().numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["max", "sum", "f32", "float", "exp", "where"])
def test_a_host_value_named_like_a_kernel_builtin_is_read_by_the_body(device, name):
    """A value bound under a builtin's name (`max = 2.5`) is that value where a compute body
    reads the name, as in host code and as `inf`, `pi` and `e` are shadowed; the body said
    "`max` is a function; call it". A call of the builtin still calls it."""
    y = np.arange(5, dtype=np.float32) - 2
    src = (f"compute(y) {{\n    for i in 0..n:\n"
           f"        out[i] = max(y[i], 0.0) * {name} + {name}\n}}")
    session = zynbook.Session(device)
    for value in (2.5, 3):
        got = session.run(src, y=y, **{name: value})
        want = np.maximum(y, 0) * np.float32(value) + np.float32(value)
        np.testing.assert_array_equal(np.asarray(got), want)
        assert session.run(f"{name} * 2", **{name: value}) == value * 2     # as in host code
    err = raises("type", src, 3, 35, device, y=y)             # unbound: still the builtin
    assert f"`{name}` is a function" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_the_command_line_binds_a_bf16_input_as_bf16(device, tmp_path, capsys):
    """`zynbook run --shape x=64:bf16` binds a bf16 tensor (its values rounded to bf16), as
    torch makes one; it bound f32 values, so the block computed and wrote f32."""
    import ast

    torch = pytest.importorskip("torch")
    from zynbook import cli
    path = tmp_path / "scale.zyn"
    path.write_text("let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i] * 3.0 - 1.0\n}\n"
                    "[x.dtype, y.dtype, compute(y) {\n    @kernel reduce(+)\n"
                    "    for i in 0..n:\n        yield y[i]\n}]\n")
    assert cli.main(["run", str(path), "--device", device, "--shape", "x=64:bf16"]) in (0, None)
    got = ast.literal_eval(capsys.readouterr().out.strip())
    # the command line's data: seeded standard normal draws, as torch rounds them to bf16
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(64, dtype=np.float32))
    y = (x.bfloat16().float() * 3.0 - 1.0).bfloat16()
    assert got[:2] == ["bf16", "bf16"]
    assert got[2] == pytest.approx(float(y.float().sum()), rel=1e-2)
    assert got[2] != pytest.approx(float((x * 3.0 - 1.0).sum()), rel=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_an_integer_element_of_a_tensor_is_an_integer_for_shapes_ranges_and_indices(device):
    """An element of an integer tensor (`s[0]`, np.array(3) or torch.tensor(3) bound from
    Python) is an integer wherever host code needs one, as numpy reads a 0-d array: a
    shape, arange, reshape, a range bound, a slice bound, a list index. Each was a type
    error ("one of its sizes is tensor[] i32")."""
    torch = pytest.importorskip("torch")
    session = zynbook.Session(device)
    src = """let a = zeros([s[0], n]).shape
let b = arange(s[1])
let c = arange(12).reshape([s[0], -1]).shape
var t = 0
for i in 0..s[0]:
    t = t + i
let d = arange(10)[s[0]:s[1] + n]
[a, b, c, t, d, [10, 20, 30][s[0]]]"""
    s = np.array([2, 5])
    got = session.run(src, s=s, n=np.array(3))
    assert got[0] == list(np.zeros((s[0], 3)).shape) and got[2] == [2, 6] and got[3] == 1
    np.testing.assert_array_equal(np.asarray(got[1]), np.arange(s[1]))
    np.testing.assert_array_equal(np.asarray(got[4]), np.arange(10)[s[0]:s[1] + 3])
    assert got[5] == [10, 20, 30][s[0]]
    assert session.run("zeros(n).shape", n=torch.tensor(4)) == [4]
    err = raises("type", "let a = 1\nzeros([n]).shape", 2, 1, device, n=np.array(2.5))
    assert "f64" in err.message                  # a float is still not a size
