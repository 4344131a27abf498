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


def test_reductions_of_several_numbers_and_of_lists():
    """`mean(1, 2, 3)`, `argmax(3, 1)` and `argmin(1, 2)` gave nothing (only sum, max and min
    take several numbers): a type error; a list that is not numbers is refused in ZynML's
    words (numpy's "setting an array element with a sequence" was a runtime error)."""
    for src in ("mean(1, 2, 3)", "argmax(3, 1)", "argmin(1, 2)"):
        err = raises("type", f"let v = {src}", 1, 9)
        assert "axis=k" in err.message
    assert run("[sum(1, 2.5), max(1, 4, 2), min(3, -1)]") == [3.5, 4, -1]
    raises("shape", "sum([[1, 2], [3]])", 1, 1)
    raises("type", 'max(["a", "b"])', 1, 1)
    raises("type", "sum(compute_devices())", 1, 1)
    assert float(np.asarray(run("mean([1, 2], axis=0)"))) == 1.5


def test_a_dtype_name_called_on_the_host_says_where_casts_are_written():
    err = raises("type", "let y = float(3)", 1, 9)
    assert "`float` is a dtype name" in err.message and "compute body" in err.message
    raises("type", "let s = 3\nlet t = s |> i32", 2, 9)
    err = raises("type", 'let s = "abc"\ns(1)', 2, 1)
    assert "not a function" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_host_softmax_over_an_axis_of_no_values(device):
    """softmax of a tensor with no values gives no values, in its shape (numpy's max of an
    empty axis raised "zero-size array to reduction operation maximum")."""
    assert run("softmax(zeros([0, 3]), axis=0).shape", device) == [0, 3]
    assert run("softmax(zeros([2, 0])).shape", device) == [2, 0]
    got = np.asarray(run("softmax(x, axis=0)", device, x=np.array([[1.0, 2.0]], np.float32)))
    np.testing.assert_allclose(got, [[1.0, 1.0]])


def test_memory_stats_reset_takes_a_bool():
    err = raises("type", "let s = memory_stats(reset=3)")
    assert "true or false" in err.message
    assert run("memory_stats(reset=true).live_bytes >= 0") is True


# ------------------------------------------------------------------ the device interface

A5 = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float32)
B5 = np.array([1.0, -0.5, -1.0, 0.5, 4.0], np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("body, numpy_answer", [
    # every comparison, == and != included, and a comparison returned as it is: a buffer of
    # f32 ones and zeros (it was a bool buffer that matmul and download refused or kept)
    ("where(xs[0] == xs[1], 10.0, xs[0]) + (xs[0] != 0.0)",
     lambda a, b: np.where(a == b, 10.0, a) + (a != 0)),
    ("xs[0] > xs[1]", lambda a, b: (a > b) * 1.0),
    ("1.0 == xs[1] * 2.0", lambda a, b: (b * 2 == 1.0) * 1.0),
    ("(xs[0] <= xs[1]) * xs[1] - (xs[0] >= 0.5)", lambda a, b: (a <= b) * b - (a >= 0.5)),
    # sum and max of the list of expressions, as of several of them
    ("sum(xs) + max(xs) * 2.0 - min(xs[0], xs[1])",
     lambda a, b: a + b + np.maximum(a, b) * 2 - np.minimum(a, b)),
    ("sum([xs[1]]) * 3", lambda a, b: b * 3),
])
def test_elementwise_comparisons_and_list_reductions_give_f32(body, numpy_answer, device):
    src = f"""
pipeline f(xs):
    return {body}
let r = elementwise([upload(a), upload(b)], 5, f)
let twice = matmul(r, upload([2.0]), 5, 1, 1)
[len(r), download(r), download(twice)]
"""
    n, got, twice = run(src, device, a=A5, b=B5)
    want = numpy_answer(A5.astype(np.float64), B5.astype(np.float64))
    assert n == 5 and got.dtype == "f32"
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(twice), want * 2, rtol=1e-6, atol=1e-6)


def test_elementwise_function_returning_nothing_says_nothing():
    err = raises("type", "pipeline f(xs):\n    let y = 1\nlet r = elementwise([upload([1.0])], 1, f)")
    assert "not nothing" in err.message


@pytest.mark.parametrize("device", DEVICES)
def test_all_and_any_of_futures_kept_in_names_are_futures(device):
    """`let g = all(fs)` is a future: `g.done()` works and `await g` gives every value later
    (`done` was "_Gather has no attribute", and the value showed as a Python object)."""
    src = """
let f = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let h = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + 1.0
}
let g = all([f, h])
let first = any([h, f])
let both = await g
let (value, index) = await first
[g.done(), first.done(), both, value, index]
"""
    x = np.arange(5, dtype=np.float32)
    done_all, done_any, both, value, index = run(src, device, x=x)
    assert done_all is True and done_any is True and index in (0, 1)
    np.testing.assert_allclose(np.asarray(both[0]), x * 2)
    np.testing.assert_allclose(np.asarray(both[1]), x + 1)
    np.testing.assert_allclose(np.asarray(value), [x + 1, x * 2][index])
    s = zynbook.Session(device)
    assert repr(s.run(src.split("let both")[0] + "g", x=x)) == "all(2 futures)"
    with pytest.raises(zynbook.ZynMLError) as info:
        s.run("g.value")
    assert info.value.kind == "name" and "a future of all(...)" in info.value.message
    with pytest.raises(zynbook.ZynMLError) as info:
        s.run("first + 1")
    assert info.value.kind == "type" and "a future of any(...)" in info.value.message


# ------------------------------------------------------------------ a small model

def _tiny_config(**kw):
    from zynbook.nn.model import GPTConfig
    return GPTConfig(**dict(dict(vocab=7, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, ffn=8,
                                 max_seq=6), **kw))


@pytest.mark.parametrize("field, value, words", [
    ("seed", -1, "`seed` is an int"),            # numpy's ValueError when the weights were drawn
    ("seed", 1.5, "`seed` is an int"),
    ("lr", -0.1, "`lr` is a finite number"),
    ("lr", float("nan"), "`lr` is a finite number"),
    ("eps", -1e-5, "`eps` is a finite number"),
    ("adam_eps", "1e-8", "`adam_eps` is a finite number"),
    ("weight_decay", float("inf"), "`weight_decay` is a finite number"),
    ("rope_base", 0.0, "`rope_base` is a finite number above 0"),
    ("betas", 0.9, "`betas` is a pair"),
    ("betas", (0.9, 1.0), "`betas` is a pair"),
    ("betas", (0.9,), "`betas` is a pair"),
    ("memory_budget", -5, "`memory_budget` is a number of bytes"),
    ("memory_budget", 2.5, "`memory_budget` is a number of bytes"),
])
def test_gpt_config_hyperparameters_outside_their_ranges_are_refused(field, value, words):
    with pytest.raises(zynbook.ZynMLTypeError, match=words):
        _tiny_config(**{field: value})


def test_tiny_gpt_weights_that_do_not_fit_the_config_are_named():
    """Weights missing an array, of another shape or another number of layers are a ZynML
    error naming the weight (a KeyError came from inside the model, or a wrong shape
    surfaced as a matmul's length in the first step)."""
    from zynbook.nn.model import TinyGPT, init_weights
    dev = zynbook.device("cpu")
    c = _tiny_config()
    with pytest.raises(zynbook.ZynMLTypeError, match="no array `embed`"):
        TinyGPT(dev, c, {"a": 1})
    w = init_weights(c)
    del w["layers"][0]["w3"]
    with pytest.raises(zynbook.ZynMLTypeError, match="no array `layers.0.w3`"):
        TinyGPT(dev, c, w)
    w = init_weights(c)
    w["lm_head"] = w["lm_head"].T
    with pytest.raises(zynbook.ZynMLShapeError, match=r"`lm_head` is \[7, 8\].*\[8, 7\]"):
        TinyGPT(dev, c, w)
    w = init_weights(_tiny_config(n_layers=2))
    with pytest.raises(zynbook.ZynMLShapeError, match="2 layers, the config n_layers = 1"):
        TinyGPT(dev, c, w)
    # the weights a model gives back are taken by a new one, which then computes the same
    model = TinyGPT(dev, c)
    again = TinyGPT(dev, c, model.weights())
    assert model.loss([1, 2, 3], [2, 3, 4]) == again.loss([1, 2, 3], [2, 3, 4])


def test_tiny_gpt_generate_checks_temperature_and_seed():
    from zynbook.nn.model import TinyGPT
    model = TinyGPT(zynbook.device("cpu"), _tiny_config())
    for kw, words in (({"seed": -1}, "`seed` is an int"), ({"temperature": "hot"}, "temperature"),
                      ({"temperature": float("nan")}, "temperature")):
        with pytest.raises(zynbook.ZynMLTypeError, match=words):
            model.generate([1, 2], 2, **kw)
    greedy = model.generate([1, 2], 3, temperature=0)
    assert greedy == model.generate([1, 2], 3, temperature=-1.0) and len(greedy) == 5
    assert model.generate([1], 2, seed=3) == model.generate([1], 2, seed=3)


# ------------------------------------------------------------------ zynbook.compile

@pytest.mark.parametrize("src", [
    "var n = 4\nn = 6\nlet c = matmul(alloc(n), alloc(6), 2, 3, 2)\nlen(c)",
    "let a = alloc(6)\nvar m = 2\nm += 1\nlet c = matmul(a, alloc(6), m, 2, 3)\nlen(c)",
    "var shape = [2, 3]\nshape = [7]\nlet c = matmul(upload(zeros(shape)), alloc(1), 7, 1, 1)\n"
    "len(c)",
    "var x = zeros([2, 3])\nx = zeros([4])\nlet y = compute(x) {\n    @kernel elementwise\n"
    "    for i in 0..n:\n        out[i] = x[i] * 2.0\n}\ny.shape",
    # a pipeline, defined before the var, that changes it
    "pipeline grow():\n    n = 6\nvar n = 4\ngrow()\nlet c = matmul(alloc(n), alloc(6), 2, 3, 2)\n"
    "len(c)",
])
def test_compile_follows_a_var_no_further_than_its_first_value(src):
    """zynbook.compile refused programs that run: the checker kept a var's first value (an
    int, a list, a buffer's length, a tensor's shape) after an assignment changed it."""
    program = zynbook.compile(src)
    assert program is not None
    run(src)


def test_compile_still_refuses_what_a_var_never_changed():
    for src, column in (("var n = 4\nlet c = matmul(alloc(n), alloc(6), 2, 3, 2)", 16),
                        ("var n = 4\nlet k = n\nn = 6\nlet c = matmul(alloc(k), alloc(6), 2, 3, 2)",
                         16)):
        with pytest.raises(zynbook.ZynMLShapeError) as info:
            zynbook.compile(src)
        assert info.value.column == column


@pytest.mark.parametrize("device", DEVICES)
def test_upload_u32_of_no_ids_is_an_empty_buffer(device):
    """upload_u32([]) was refused as not integers (numpy reads [] as float64), where
    upload([]) and alloc(0) give empty buffers."""
    assert run("let b = upload_u32([])\n[len(b), download(b).dtype, len(upload([]))]",
               device) == [0, "u32", 0]
    assert run("len(upload_u32(zeros([0, 3])))", device) == 0
    raises("type", "let b = upload_u32([1.5])", 1, 9, device)


@pytest.mark.parametrize("size, shown", [("0", "not 0"), ("-5", "not -5"), ("1.5", "not 1.5"),
                                         ("true", "not a bool"), ('"1GB"', "not a string")])
def test_memory_pool_size_that_is_not_a_positive_number_of_bytes(size, shown):
    """A size given that no pool can have says so under it (it said `needs size=`, and
    size=true made a pool of 1 byte)."""
    err = raises("type", f'let p = memory_pool(device="cpu", size={size})', 1, 40)
    assert "positive whole number of bytes" in err.message and shown in err.message
    raises("type", 'let p = memory_pool("cpu", 16)', 1, 9)
    assert run('memory_pool(device="cpu", size=1KB).size') == 1000


@pytest.mark.parametrize("src, column", [
    ('max("s", 1)', 9), ('min(upload([1.0]), 2.5)', 9), ("sum(compute_devices()[0], 1)", 9),
    ("max(1, [])", 9), ("sum(true, 1)", 9),
])
def test_several_arguments_of_max_min_sum_that_are_not_numbers(src, column):
    """Python's TypeError ('<' not supported between instances of ...) came out of the
    session for max/min/sum of several values that are not numbers."""
    err = raises("type", f"let v = {src}", 1, column)
    assert "takes numbers" in err.message


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, column", [
    ("let v = true - tensor([true])", 9), ("let v = tensor([true]) - tensor([false])", 9),
    ("let v = -tensor([true, false])", 9),
])
def test_arithmetic_numpy_refuses_on_bools_is_a_type_error(src, column, device):
    """numpy's TypeError for - of bool tensors came out of the session."""
    raises("type", src, 1, column, device)
    got = run("[-tensor([1, 2]), tensor([true]) * 2]", device)
    assert np.asarray(got[0]).tolist() == [-1, -2] and np.asarray(got[1]).tolist() == [2]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("value, kind", [
    ('[1, "a"]', "type"), ("compute_devices()[0]", "type"), ('"s"', "type"), ("p", "type"),
    ("[7, 8, 9]", "shape"), ("ones([3, 3])", "shape"),
])
def test_assigning_what_does_not_fit_into_a_tensor_element(value, kind, device):
    """`z[0] = <a record, a pipeline, text>` was Python's TypeError from numpy's int() or
    float(), and values of another shape numpy's broadcast message as a runtime error."""
    src = f"pipeline p(a):\n    return a\nvar z = ones([2, 2])\nz[0] = {value}"
    raises(kind, src, 4, 8, device)
    got = run("var z = ones([2, 2])\nz[0] = [7, 8]\nz[1, 0] = 5\nz", device)
    assert np.asarray(got).tolist() == [[7, 8], [5, 1]]


def test_mistakes_of_a_pipeline_called_from_python_point_at_its_definition():
    """A pipeline called from Python with too few or many arguments, a name it has no
    parameter for, or a value ZynML has no type for: the caret is under the definition (the
    error had no line, column or caret)."""
    s = zynbook.Session("cpu")
    s.run("let a = 1\npipeline scale(x: tensor[n], k: float) -> tensor[n]:\n    return x * k\n")
    f = s.namespace["scale"]
    # a value ZynML has no type for: the caret under its parameter (x at 16, k at 30)
    for args, kwargs, words, column in (((np.ones(2),), {}, "takes 2", 1), ((np.ones(2), 1, 2), {}, "takes 2", 1),
                                        ((np.ones(2),), {"q": 1}, "no parameter `q`", 1),
                                        ((object(), 1.0), {}, "type `object`", 16),
                                        ((), {"x": np.ones(2), "k": {"a": object()}}, "type `object`", 30)):
        with pytest.raises(zynbook.ZynMLTypeError) as info:
            f(*args, **kwargs)
        err = info.value
        assert words in err.message and (err.line, err.column) == (2, column), err
        assert "^" in err.render() and "pipeline scale(" in err.render()
    with pytest.raises(zynbook.ZynMLTypeError) as info:     # an argument's own type: its place
        f(np.ones(2), "a")
    assert (info.value.line, info.value.column) == (2, 33)
    np.testing.assert_allclose(np.asarray(f(np.ones(2), 2.0)), [2.0, 2.0])


@pytest.mark.parametrize("src, column", [
    ("let b = alloc(2 ** 64)", 15),
    ("let b = kv_attention(alloc(1), alloc(1), alloc(1), 2 ** 64, 1, 1, 1, 1)", 52),
    ("let p = upload([1.0])\nadamw_step(p, upload([1.0]), alloc(1), alloc(1), 0.1, 0.9, 0.99, "
     "1e-8, 0.0, 2 ** 70)", 77),
])
def test_device_interface_sizes_past_64_bits_are_named(src, column):
    """alloc(2 ** 64) said its kernel's own `n` did not fit 64 bits and to pass a float."""
    err = raises("shape", src, src.count("\n") + 1, column)
    assert "past 2^63 - 1" in err.message and "`n`" not in err.message
