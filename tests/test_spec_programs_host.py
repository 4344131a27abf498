"""Host programs of the language (lets, numbers, builtins, pipelines, errors) against numpy
written here. Host code runs the same whatever the session's device, so these run on every
device present."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.errors import ZynMLError

from compute_testing import raises, wanted_devices  # noqa: E402

DEVICES = [d["id"] for d in zynbook.compute_devices() if not d["id"].startswith("browser")]


def run(src, device="cpu", **inputs):
    return zynbook.Session(device).run(src, **inputs)


@pytest.mark.parametrize("device", DEVICES)
def test_float_arithmetic_of_host_numbers_is_ieee(device):
    """Division by a float zero, overflow and a negative base to a fractional power give
    inf, -inf or NaN as numpy's f64 does (Python's own float arithmetic raises, or gives a
    complex number); integer division by zero stays an error."""
    got = run("[1.0 / 0.0, -7.5 / 0.0, 0.0 / 0.0, 1 / -0.0, 10.0 ** 400, (-8.0) ** (1.0 / 3),"
              " 0.0 ** -1.0, 0 ** -1, 2 ** -2, 2 ** 10, 1.5 ** 2]", device)
    with np.errstate(all="ignore"):
        want = [np.divide(1.0, 0.0), np.divide(-7.5, 0.0), np.divide(0.0, 0.0),
                np.divide(1.0, -0.0), np.power(10.0, 400), np.power(-8.0, 1 / 3),
                np.power(0.0, -1.0), np.power(0.0, -1.0), 0.25, 1024, 2.25]
    np.testing.assert_array_equal(np.array(got, np.float64), np.array(want, np.float64))
    assert isinstance(got[-2], int)
    raises("runtime", "let a = 5 / 0", 1, 9, device)
    raises("runtime", "let a = 5 % 0", 1, 9, device)


@pytest.mark.parametrize("device", DEVICES)
def test_math_builtins_of_host_numbers_are_ieee(device):
    got = run("[log(0), log(0.0), exp(1000.0), sigmoid(-1000.0), sigmoid(1000.0), sqrt(-1.0),"
              " rsqrt(0.0), tanh(1000.0)]", device)
    with np.errstate(all="ignore"):
        x = np.array([0.0, 0.0, 1000.0, -1000.0, 1000.0, -1.0, 0.0, 1000.0])
        want = [np.log(x[0]), np.log(x[1]), np.exp(x[2]), 1 / (1 + np.exp(-x[3])),
                1 / (1 + np.exp(-x[4])), np.sqrt(x[5]), 1 / np.sqrt(x[6]), np.tanh(x[7])]
    np.testing.assert_array_equal(np.array(got, np.float64), np.array(want))


def test_tensor_of_ragged_or_non_numeric_lists_is_refused():
    err = raises("shape", "let t = tensor([[1, 2], [3]])", 1, 9)
    assert "equal lengths" in err.message
    raises("type", 'let t = tensor(["a", "b"])', 1, 9)


@pytest.mark.parametrize("device", DEVICES)
def test_failures_inside_device_operations_point_at_the_call(device):
    """A token id or target past the table fails inside the operation's own kernel: the
    error is a runtime error with its caret under the user's call (not at a line of the
    operation's program), its message names the operation, on every device alike."""
    src = ("let logits = upload(zeros([2, 3]))\n"
           "let t = upload_u32([1, 7])\n"
           "let (loss, g) = cross_entropy_forward_backward(logits, t, 2, 3, 99)\n")
    err = raises("runtime", src, 3, 17, device)
    assert err.message.startswith("cross_entropy_forward_backward(): ")
    assert "cross_entropy_forward_backward(logits" in err.render()
    src = ("let w = upload(ones([4, 2]))\n"
           "let e = embedding(w, upload_u32([0, 4]), 2, 2)\n"
           "download(e)\n")
    err = raises("runtime", src, 2, 9, device)
    assert err.message.startswith("embedding(): ")


def test_device_refusals_inside_library_kernels_point_at_the_call():
    """A library kernel's own program refused by a device (f64 on a WebGPU adapter without
    `shader-f64`, as Mesa's GL one) is reported at the user's call of the library function."""
    no_f64 = [d for d in DEVICES if d.startswith("gl:")]
    if not no_f64:
        pytest.skip("no WebGPU adapter without shader-f64 here")
    err = raises("device", "let x = tensor([1.0, 2.0], dtype=f64)\nlet y = gelu(x)\ny",
                 2, 9, no_f64[0])
    assert err.message.startswith("gelu(): ")


@pytest.mark.parametrize("device", DEVICES)
def test_inputs_of_any_byte_order_and_layout(device):
    """A big-endian array (as read from a file written elsewhere) is bound by value as the
    native array is, and so are Fortran-ordered, transposed and negatively strided ones."""
    base = np.arange(35, dtype=np.float32).reshape(5, 7) - 10.0
    src = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n, j in 0..m:\n"
           "        out[i, j] = x[i, j] * 2.0 + 1.0\n}\ny\n")
    for x in (base.astype(">f4"), np.asfortranarray(base), base.T, base[::-1, ::-2],
              base.astype(">i4")):
        got = np.asarray(run(src, device, x=x))
        np.testing.assert_allclose(got, x.astype(np.float64) * 2 + 1, rtol=1e-6)
    got = run("let y = k * 2\ny\n", device, k=np.array([3], ">i4"))
    np.testing.assert_array_equal(np.asarray(got), [6])


def test_a_pipeline_argument_of_the_wrong_type_or_size_points_at_the_call():
    """The caret is under the argument that does not fit, with a note at the parameter's
    declared type (a pipeline called from several places: the call is what the user needs)."""
    src = ("pipeline addv(a: tensor[n], b: tensor[n]) -> tensor[n]:\n"
           "    return a + b\n"
           "let q = 1\n"
           "addv(x, y)\n")
    err = raises("shape", src, 4, 9, x=np.ones(3, np.float32), y=np.ones(4, np.float32))
    assert err.notes and err.notes[0][1].line == 1 and err.notes[0][1].column == 39
    assert "4 | addv(x, y)" in err.render() and "1 | pipeline addv" in err.render()
    src = "pipeline g(a: int, b: float):\n    return a\ng(b=2.5, a=1.5)\n"
    raises("type", src, 3, 12)
    src = "pipeline g(a: str):\n    return a\nlet v = 1\nv |> g()\n"
    raises("type", src, 4, 6)


def test_pipeline_arguments_by_name_are_bound_exactly_once():
    """An argument given by position and by name is refused (the name's value was silently
    dropped), a missing one is named, and names may come in any order."""
    defs = "pipeline g(a, b, c):\n    return a * 100 + b * 10 + c\n"
    assert run(defs + "g(1, c=3, b=2)") == 123
    assert run(defs + "g(c=3, a=1, b=2)") == 123
    for call, word in (("g(1, 2, 3, b=5)", "twice"), ("g(1, 2, b=5)", "twice"),
                       ("g(1, a=2, c=3)", "twice"), ("g(1, c=3)", "`b`")):
        err = raises("type", defs + call, 3, 1)
        assert word in err.message, (call, err.message)


def test_errors_inside_a_pipeline_of_an_earlier_cell_show_its_own_line():
    session = zynbook.Session("cpu")
    session.run("let pad = 0\nlet pad2 = 0\npipeline f(a):\n    let z = a / 0\n    return z\n"
                "pipeline h(a: int) -> int:\n    return 2.5\n")
    for src, line, text in (("let q = 1\nf(3)\n", 4, "let z = a / 0"),
                            ("let q = 1\nh(3)\n", 6, "pipeline h(a: int) -> int:")):
        with pytest.raises(ZynMLError) as info:
            session.run(src)
        assert info.value.line == line
        assert f"{line} |" in info.value.render() and text in info.value.render()
    assert session.run("f(1.0)") == np.inf


@pytest.mark.parametrize("device", DEVICES)
def test_assigning_an_element_of_a_tensor_on_any_device(device):
    """`t[i] = v` on a tensor held in a device's own buffers (WebGPU) changes it (the host
    copy was changed and dropped), and later blocks and host arithmetic see the change."""
    src = (f'var t = tensor([1.0, 2.0, 3.0]).to_device("{device}")\n'
           "let a = compute(t) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = t[i] + 1.0\n}\n"
           "t[0] = 50.0\nt[1] += 2.0\nt[2:] = -1.0\n"
           "let b = compute(t) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = t[i] + 1.0\n}\n"
           "[t, a, b, t * 2.0]\n")
    t, a, b, doubled = (np.asarray(v) for v in run(src, device))
    want = np.array([50.0, 4.0, -1.0], np.float32)
    np.testing.assert_array_equal(t, want)
    np.testing.assert_array_equal(a, [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(b, want + 1)
    np.testing.assert_array_equal(doubled, want * 2)


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_copies_where_two_devices_share_host_memory(device):
    """`x.to_device(id)` copies (copy=true is the default): changing an element of the copy
    leaves the input, a caller's numpy array, as it was."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run(f'var t = x.to_device("{device}")\nt[0, 1] = 9.0\n[t, x]', "cpu", x=x)
    np.testing.assert_array_equal(np.asarray(got[0])[0], [0.0, 9.0, 2.0])
    np.testing.assert_array_equal(np.asarray(got[1]), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3))


def test_host_indexing_and_reduction_mistakes_are_zynml_errors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for src, kind, line, col in (
            ("x[1.5]", "type", 1, 3), ('x["a"]', "type", 1, 3), ("x[true]", "type", 1, 3),
            ("x[0:1.5]", "type", 1, 5), ("len(tensor(5))", "type", 1, 1),
            ("mean(x, axis=5)", "shape", 1, 14), ("sum(x, axis=1.0)", "type", 1, 13),
            ("argmax(zeros([0, 3]), axis=0)", "shape", 1, 1), ("concat([])", "type", 1, 1),
            ("var t = tensor([1, 2, 3])\nt[5] = 1", "shape", 2, 3),
            ("var xs = [1, 2]\nxs[2] = 5", "shape", 2, 4)):
        raises(kind, src, line, col, x=x)
    np.testing.assert_array_equal(np.asarray(run("sum(x, axis=[0, 1])", x=x)), x.sum())
    np.testing.assert_array_equal(np.asarray(run("x[x > 2.0]", x=x)), x[x > 2.0])
    np.testing.assert_array_equal(np.asarray(run("x[tensor([1, 0])]", x=x)), x[[1, 0]])


@pytest.mark.parametrize("device", wanted_devices())
def test_a_pipe_chain_over_several_lines_runs(device):
    """The spec's `compute(...) { ... } |> sqrt()`, its chain continued on lines that start
    with `|>` (a syntax error before), gives numpy's value on every device."""
    x = np.linspace(-1.0, 2.0, 7).astype(np.float32)
    src = ("pipeline scale(t, a):\n    return t * a\n"
           "let norm = compute(x) {\n    @kernel reduce(+)\n    for i in 0..n:\n"
           "        yield x[i] * x[i]\n}\n"
           "    |> sqrt()\n    // then scaled\n\n    |> scale(3.0)\nnorm\n")
    got = run(src, device, x=x)
    np.testing.assert_allclose(float(np.asarray(got)), 3.0 * np.sqrt(np.sum(x * x)), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_an_int_tensor_to_a_negative_int_power_is_a_clear_error(device):
    """numpy refuses integers to negative integer powers; that is a runtime error at the
    expression saying what to change (it was numpy's "Integers to negative integer powers
    are not allowed."), and the float forms give numpy's values."""
    for src, column, low in (("let a = arange(4)\nlet b = a ** -1\n", 9, -1),
                             ("let a = arange(4)\nlet b = 1 + 2 ** (a - 2)\n", 13, -2)):
        err = raises("runtime", src, 2, column, device)
        assert f"an integer to a negative power (here {low})" in err.message, err
        assert "make the base or the exponent a float" in err.message
        assert "Integers to negative" not in err.message
    a = np.arange(1, 5)
    got = run("let a = arange(1, 5)\n[a ** -1.0, 2.0 ** (a - 2), a ** 2]", device)
    for g, w in zip(got, (a ** -1.0, 2.0 ** (a - 2), a ** 2)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_int_past_64_bits_read_by_a_kernel_is_refused(device):
    """Host ints are unbounded; a kernel's widest integer is 64 bits. Such a value read by a
    block is a type error at the place it is read (cpu:native passed 2**70 as 0, the
    reference as a float, or failed with numpy's overflow), also in a warm cell."""
    src = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = x[i] + k\n}\ny")
    session = zynbook.Session(device)
    x = np.zeros(2, np.float32)
    np.testing.assert_array_equal(np.asarray(session.run(src, x=x, k=2)), [2.0, 2.0])
    for k in (2**70, 2**63, -2**63 - 1):
        with pytest.raises(ZynMLError) as info:
            session.run(src, x=x, k=k)
        assert (info.value.kind, info.value.line, info.value.column) == ("type", 4, 25)
    if device in ("cpu", "cpu:native"):        # WebGPU has no 64-bit integers
        np.testing.assert_array_equal(np.asarray(session.run(src, x=x, k=-2**63)),
                                      [-2.0**63] * 2)


def test_a_program_that_is_not_text_is_a_zynml_error():
    for source in (b"let a = 1", None, 3):
        with pytest.raises(ZynMLError) as info:
            zynbook.run(source)
        assert info.value.kind == "type"


def test_device_ids_and_seeds_that_no_device_or_generator_takes_point_at_the_value():
    x = np.ones(3, np.float32)
    block = ("let y = compute(x) @device(\"cuda:3\") {\n    @kernel elementwise\n"
             "    for i in 0..n:\n        out[i] = x[i]\n}\ny\n")
    raises("device", block, 1, 28, x=x)
    raises("device", 'config { compute_device: "vulkan:7" }', 1, 26)
    raises("type", "config { compute_device: 5 }", 1, 26)   # not a string: a type error
    raises("type", "config { seed: -1 }", 1, 16)         # numpy's message, at column 1
    raises("type", "config { seed: true }", 1, 16)
    raises("type", "randn([2], seed=-3)", 1, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_device_interface_argument_mistakes_point_at_the_argument(device):
    raises("type", 'let x = upload(["a", "b"])', 1, 16, device)
    raises("type", "let x = upload([[1.0, 2.0], [3.0]])", 1, 16, device)
    raises("type", "let a = upload(ones([3]))\ndownload(elementwise([a], 3, 5))", 2, 30, device)
    raises("type", "let a = upload(ones([3]))\ndownload(elementwise(a, 3, 5))", 2, 22, device)


def test_errors_of_method_calls_point_at_the_call():
    src = ("let pool = memory_pool(device=\"cpu\", size=1KB)\n"
           "let t1 = pool.allocate(shape=[200])\n"
           "let t2 = pool.allocate(shape=[60])\n")
    raises("memory", src, 3, 10)
    raises("type", "let pool = memory_pool(device=\"cpu\", size=1KB)\nlet a = 1\n"
                   "let t1 = upload(ones([10]))\nlet b = pool.free(t1)", 4, 9)
    # a second free names the freed tensor where it is read, as any later use of it does
    raises("runtime", "let pool = memory_pool(device=\"cpu\", size=1KB)\nlet a = 1\n"
                      "let t1 = pool.allocate(shape=[10])\npool.free(t1)\nlet b = pool.free(t1)",
           5, 19)


def test_adamw_hyperparameters_outside_their_ranges_are_refused():
    """The ranges torch.optim.AdamW takes: beta1 = 1 turned every parameter into NaN, a
    negative learning rate stepped uphill silently."""
    setup = ("let p = upload(ones([3]))\nlet g = upload(ones([3]))\n"
             "let m = alloc(3)\nlet v = alloc(3)\n")
    for args, col in (("0.1, 1.0, 0.999, 1e-8, 0.0, 1", 29), ("-0.1, 0.9, 0.999, 1e-8, 0.0, 1", 24),
                      ("0.1, 0.9, 1.5, 1e-8, 0.0, 1", 34), ("0.1, 0.9, 0.999, -1.0, 0.0, 1", 41),
                      ('"a", 0.9, 0.999, 1e-8, 0.0, 1', 24)):
        raises("type", setup + f"adamw_step(p, g, m, v, {args})", 5, col)


def test_a_non_number_eps_is_a_type_error_under_it():
    raises("type", 'let x = upload(ones([8]))\nlet y = rms_norm(x, upload(ones([4])), 2, 4, "a")',
           2, 46)


def test_weights_that_cannot_be_written_are_a_zynml_error(tmp_path):
    """A missing directory or a directory in the file's place: a runtime error naming the
    path (Python's FileNotFoundError before), and no temporary file left behind."""
    from zynbook.errors import ZynMLRuntimeError
    with pytest.raises(ZynMLRuntimeError, match="cannot write weights"):
        zynbook.save_weights(tmp_path / "missing" / "w.safetensors", {"a": np.ones(2)})
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(ZynMLRuntimeError, match="cannot write weights"):
        zynbook.save_weights(tmp_path / "d.safetensors", {"a": np.ones(2)})
    assert [p.name for p in tmp_path.iterdir()] == ["d.safetensors"]


def test_declared_types_of_vars_and_pipeline_parameters():
    """`var v: int = 2.5` is checked as a let's type is (it was not checked at all), and a
    pipeline with two parameters of one name is refused (the second silently won)."""
    raises("type", "var v: int = 2.5", 1, 8)
    raises("shape", "var v: tensor[n] = zeros([2, 2])", 1, 8)
    assert run("var acc: f16 = 0.0\nacc += 1\nacc") == 1.0
    src = "pipeline p(a, b: int, a):\n    return a\np(1, 2, 3)\n"
    raises("type", src, 1, 23)
    with pytest.raises(ZynMLError) as info:
        zynbook.compile(src)
    assert (info.value.line, info.value.column) == (1, 23)


def test_the_caret_lines_up_under_tab_indented_code():
    """A tab before the column is a tab in the caret's line too: with any tab width the
    caret stays under the name (it was under other characters where tabs are wide)."""
    err = raises("name", "if true:\n\tlet a = b_undefined + 1\n", 2, 10)
    source_line, caret_line = err.render().splitlines()[1:3]
    for width in (2, 4, 8):
        at = caret_line.expandtabs(width).index("^")
        assert source_line.expandtabs(width)[at:at + 11] == "b_undefined"


def test_the_command_line_refuses_a_file_that_is_not_text(tmp_path):
    import subprocess
    import sys
    path = tmp_path / "bin.zyn"
    path.write_bytes(b"\xff\xfe let a = 1")
    r = subprocess.run([sys.executable, "-m", "zynbook.cli", "run", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_and_arange_of_integers_past_32_bits(device):
    """Integers that do not fit i32 make an i64 tensor (u64 past i64), as numpy infers them;
    they were cast to i32 and wrapped (3000000000 became -1294967296)."""
    got = run("[tensor([3000000000, 1]), tensor([-3000000000]), arange(3000000000, 3000000002),"
              " tensor([18446744073709551615]), tensor([1, 2]), arange(4)]", device)
    want = [np.array([3000000000, 1]), np.array([-3000000000]),
            np.arange(3000000000, 3000000002), np.array([2**64 - 1], np.uint64),
            np.array([1, 2], np.int32), np.arange(4, dtype=np.int32)]
    for g, w in zip(got, want):
        assert g.dtype == {np.dtype(np.int64): "i64", np.dtype(np.uint64): "u64",
                           np.dtype(np.int32): "i32"}[w.dtype]
        np.testing.assert_array_equal(np.asarray(g), w)
    raises("type", "tensor([2 ** 70])", 1, 1, device)
    raises("type", "arange(2 ** 70)", 1, 1, device)


F64_SCALE = ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
             "        out[i] = x[i] * scale + (1.0 - scale) * 2.0\n}\n"
             "let b = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
             "        out[i] = x[i] > scale\n}\n"
             "let h = compute(h32) {\n    @kernel elementwise\n    for i in 0..n:\n"
             "        out[i] = h32[i] * scale\n}\n"
             "let m = compute(x, h32) {\n    @kernel elementwise\n    for i in 0..n:\n"
             "        out[i] = x[i] * scale + h32[i] * scale\n}\n"
             "let d = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
             "        let third = scale / 3.0\n        out[i] = x[i] * third\n}\n"
             "[y, b, h, m, d]\n")


def _f64_scale_want(x, h32, scale):
    """numpy's answer: a Python float meeting f64 is f64, meeting f32 it is f32."""
    return (x * scale + (1.0 - scale) * 2.0, x > scale, h32 * np.float32(scale),
            x * scale + h32 * np.float32(scale), x * (scale / 3.0))


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_float_in_an_f64_kernel_keeps_f64_precision(device):
    """A host float (a `let` of the program, or a Python float given to `Session.run`) read by
    an f64 kernel is an f64 value there, as numpy reads a Python float beside f64 data: it
    was passed as f32, so `3 * 0.1` gave 0.30000000447 on every device; beside f32 data it
    stays f32. An adapter without shader-f64 refuses the f64 kernel, naming f64."""
    x = np.array([3.0, 0.1, -7.25, 0.3], np.float64)
    h32 = np.array([3.0, 0.1, -7.25, 0.3], np.float32)
    webgpu = next(d for d in zynbook.compute_devices() if d["id"] == device).get("backend") \
        in ("vulkan", "gl", "metal", "dx12")
    no_f64 = webgpu and "shader-f64" not in next(
        d for d in zynbook.compute_devices() if d["id"] == device).get("features", [])
    for src, env in ((f"let scale = 0.1\n{F64_SCALE}", {}), (F64_SCALE, {"scale": 0.1})):
        if no_f64:
            with pytest.raises(ZynMLError) as info:
                run(src, device, x=x, h32=h32, **env)
            assert info.value.kind == "device" and "shader-f64" in info.value.message
            continue
        y, b, h, m, d = (np.asarray(v) for v in run(src, device, x=x, h32=h32, **env))
        want_y, want_b, want_h, want_m, want_d = _f64_scale_want(x, h32, 0.1)
        assert y.dtype == np.float64 and h.dtype == np.float32
        np.testing.assert_allclose(y, want_y, rtol=1e-15, atol=0)
        np.testing.assert_array_equal(b, want_b)
        np.testing.assert_array_equal(h, want_h)
        np.testing.assert_allclose(m, want_m, rtol=1e-15, atol=0)
        np.testing.assert_allclose(d, want_d, rtol=1e-15, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_writing_into_an_input_leaves_the_callers_array_as_it_was(device):
    """`x[0] = 50.0` on a tensor bound from the caller's numpy array changes the program's
    `x` (later blocks and host code see it), never the caller's array, on every device: the
    write copies the array first (it wrote into the caller's array where the tensor held it
    without a copy). A view made of it (a reshape, a slice) is written the same way."""
    src = ("x[0] = 50.0\nx[1:3] = -1.0\n"
           "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
           "        out[i] = x[i] * 2.0\n}\n"
           "var v = w.reshape([2, 2])\nv[1, 1] = 7.0\nlet s = u[0:2]\ns[0] = 9.0\n"
           "[x, y, v, s]\n")
    x, w, u = (np.arange(4, dtype=np.float32) for _ in range(3))
    session = zynbook.Session(device)
    got_x, y, v, s = (np.asarray(t) for t in session.run(src, x=x, w=w, u=u))
    want = np.array([50.0, -1.0, -1.0, 3.0], np.float32)
    np.testing.assert_array_equal(got_x, want)
    np.testing.assert_array_equal(y, want * 2.0)
    np.testing.assert_array_equal(v, [[0.0, 1.0], [2.0, 7.0]])
    np.testing.assert_array_equal(s, [9.0, 1.0])
    for caller in (x, w, u):
        np.testing.assert_array_equal(caller, np.arange(4))
    session.run("x[3] = 8.0")           # the program's x, already its own copy
    np.testing.assert_array_equal(np.asarray(session.namespace["x"]), [50.0, -1.0, -1.0, 8.0])
    np.testing.assert_array_equal(x, np.arange(4))
