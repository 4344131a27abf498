"""User mistakes end as ZynML errors naming their kind, line and column, with a message
that says what to write instead: never a Python traceback, a crash or a wrong value."""
from __future__ import annotations

import numpy as np
import pytest

import zynbook
from zynbook.compiler.types import DTYPES, FLOATS
from zynbook.errors import ZynMLError
from compute_testing import wanted_devices


def _error(src, **inputs) -> ZynMLError:
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, **inputs)
    return info.value


def _at(err, kind, line, column, *words):
    assert (err.kind, err.line, err.column) == (kind, line, column), err.render()
    for w in words:
        assert w in err.message, err.message


# ------------------------------------------------- dtype lists read the one table of dtypes

def test_unknown_dtype_lists_every_dtype():
    err = _error("let f32 = 2\nlet z = zeros([2], dtype=f32)\nz")
    _at(err, "type", 2, 26, "unknown dtype 2")
    for name in ("f16", "bf16", "f32", "f64", "i8", "u8", "i16", "u16", "i32", "u32", "i64",
                 "u64", "bool"):
        assert name in err.message
    assert len(DTYPES) == 13


def test_randn_of_an_integer_dtype_lists_the_floats():
    err = _error("let z = randn([2], dtype=i8)\nz")
    _at(err, "type", 1, 9, "f16, bf16, f32 or f64")
    assert FLOATS == ("f16", "bf16", "f32", "f64")


@pytest.mark.parametrize("name, dtype", [("int8", np.int8), ("uint16", np.uint16),
                                         ("uint64", np.uint64), ("double", np.float64)])
def test_every_dtype_alias_is_a_value(name, dtype):
    got = zynbook.run(f"let z = ones([3], dtype={name})\nz")
    np.testing.assert_array_equal(got.numpy(), np.ones(3, dtype))
    assert got.numpy().dtype == dtype


@pytest.mark.parametrize("typo, near", [("uint6", "uint64"), ("flaot32", "float32"),
                                        ("bfloat61", "bfloat16")])
def test_a_misspelled_dtype_suggests_the_near_name(typo, near):
    err = _error(f"let z = zeros([2], dtype={typo})\nz")
    _at(err, "name", 1, 26, f"`{typo}`", f"did you mean `{near}`?")


# ------------------------------------------ a range bound given an array names what it is

_BOUND = "let y = compute(x) {\n    for i in 0..n:\n        out[i] = x[i]\n}\ny"


def test_a_range_bound_given_a_one_element_array_says_what_to_write():
    err = _error(_BOUND, x=np.ones(3, np.float32), n=np.array([2]))
    _at(err, "type", 2, 17, "`n`, an i64 array of 1 axis", "n[0]", "Python int")
    assert "_d0" not in err.message


def test_a_range_bound_given_an_int_runs():
    got = zynbook.run(_BOUND, x=np.arange(3, dtype=np.float32), n=2)
    np.testing.assert_array_equal(got.numpy(), np.arange(2, dtype=np.float32))


def test_a_range_bound_given_a_float_array_or_a_slice():
    err = _error(_BOUND.replace("0..n", "0..x"), x=np.ones(3, np.float32))
    _at(err, "type", 2, 17, "`x`, an f32 array of 1 axis")
    assert "x[0]" not in err.message           # x[0] is no integer either
    err = _error(_BOUND.replace("0..n", "0..x[0:2]"), x=np.ones(3, np.int32))
    _at(err, "type", 2, 17, "an i32 array of 1 axis")
    assert "_d0" not in err.message
    err = _error(_BOUND.replace("0..n", "0..3.5"), x=np.ones(3, np.int32))
    _at(err, "type", 2, 17, "an f32 value")


# --------------------------------------------------------------- the text of the program

@pytest.mark.parametrize("literal", ["1e400", "1e309", "1234567890e300", "1.5E400"])
def test_a_float_literal_past_the_largest_float_is_an_error(literal):
    err = _error(f"let a = 2\nlet y = a * {literal}\ny")
    _at(err, "syntax", 2, 13, literal, "write inf")


def test_the_largest_float_literals_stay_numbers():
    assert zynbook.run("let y = 1.7e308 * 1e-308\ny") == pytest.approx(1.7)
    assert zynbook.run("let y = 1e-400\ny") == 0.0     # underflow is 0, as numpy's


@pytest.mark.parametrize("src, column", [("let ü = 1\nü", 5), ("let aé = 1\naé", 6)])
def test_a_non_ascii_name_says_what_names_are(src, column):
    _at(_error(src), "syntax", 1, column, "ASCII letters, digits and _")


@pytest.mark.parametrize("src, line, column, word, near", [
    ("let y = compute(x) {\n    fro i in 0..n:\n        out[i] = x[i]\n}\ny", 2, 5, "fro", "for"),
    ("lett y = x\ny", 1, 1, "lett", "let"),
    ("let y = x\nretrun y", 2, 1, "retrun", "return"),
    ("let y = x\nif y[0] > 0:\n    print(1)\nels:\n    print(2)", 4, 1, "els", "else"),
])
def test_a_misspelled_keyword_is_named_at_its_place(src, line, column, word, near):
    err = _error(src, x=np.ones(3, np.float32))
    _at(err, "syntax", line, column, f"`{word}`", f"did you mean `{near}`?")
    assert err.span.end_column == column + len(word)


# ------------------------------------------------------------------ config { ... } keys

@pytest.mark.parametrize("entry", ["fuse: false", "allow_tf32: true", "autotune: false",
                                   'cuda_graph: "auto"', "seed: 3"])
def test_compile_takes_every_config_key_the_interpreter_sets(entry):
    x = np.arange(4, dtype=np.float32)
    program = zynbook.compile(f"config {{ {entry} }}\nlet y = x * 2.0 + 1.0\ny")
    np.testing.assert_array_equal(program.run(x=x).numpy(), x * 2 + 1)


@pytest.mark.parametrize("typo, near", [("allow_tf33", "allow_tf32"), ("sed", "seed")])
def test_a_misspelled_config_key_suggests_the_near_one(typo, near):
    for compile_first in (False, True):
        src = f"config {{ {typo}: 1 }}\nlet y = 1\ny"
        with pytest.raises(ZynMLError) as info:
            zynbook.compile(src) if compile_first else zynbook.run(src)
        _at(info.value, "name", 1, 10, f"`{typo}`", f"did you mean `{near}`?")


@pytest.mark.parametrize("sizes, threads", [("100000", 100000), ("64, 64, 64", 262144)])
def test_a_workgroup_past_1024_threads_is_written_as_the_user_wrote_it(sizes, threads):
    src = f"let y = compute(x) {{\n    @workgroup({sizes})\n    for i in 0..n:\n" \
          f"        out[i] = x[i]\n}}\ny"
    err = _error(src, x=np.ones(3, np.float32))
    _at(err, "type", 2, 5, f"@workgroup({sizes}) has {threads} threads; at most 1024")


@pytest.mark.parametrize("shape, index, column, said", [
    ((3,), "x[i, 0]", 23, "`x` has 1 axis but"),
    ((3, 2), "x[i, 0, 1]", 26, "`x` has 2 axes but")])
def test_too_many_indices_point_at_the_first_extra_one(shape, index, column, said):
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = {index}\n}}\ny"
    err = _error(src, x=np.ones(shape, np.float32))
    _at(err, "shape", 3, column, said)


@pytest.mark.parametrize("call, kind, column", [
    ("softmax(x, axis=5)", "shape", 25), ("sum(x, axis=3)", "shape", 21),
    ("mean(x, axis=1.0)", "type", 22), ('ones([2], dtype="f32x")', "type", 25),
    ("split(x, 2, axis=4)", "shape", 26), ('concat([x, x], axis="a")', "type", 29),
    ('softmax(x, axis="a")', "type", 25), ("x.sum(axis=7)", "shape", 20),
])
def test_a_bad_axis_or_dtype_is_pointed_at_where_it_is_written(call, kind, column):
    err = _error(f"let y = {call}\ny", x=np.ones((2, 3), np.float32))
    _at(err, kind, 1, column)


@pytest.mark.parametrize("value, what", [('"a"', "a string"), ("[1, 2]", "a list")])
def test_a_host_value_in_a_kernel_is_named(value, what):
    src = f"let y = compute(x) {{\n    for i in 0..n:\n        out[i] = x[i] + {value}\n}}\ny"
    err = _error(src, x=np.ones(3, np.float32))
    _at(err, "type", 3, 25, f"{what} is a value of host code")


@pytest.mark.parametrize("device", wanted_devices())
def test_a_tile_mismatch_in_an_inlined_let_is_reported_at_the_let(device):
    """A tile let the C-like printers inline into the statements that read it keeps its own
    line for its checks: the inner sizes of `@` that differ in `let S = Q @ transpose(K)`
    were reported at the next statement (`let m_new`) on cpu:native and Vulkan."""
    from kernel_sources import FLASH_TEMPLATE
    src = (FLASH_TEMPLATE.replace("BLOCK", "16")
           .replace("K[b, h, kv_block:kv_block+16]", "K[b, h, kv_block:kv_block+16, 0:4]")
           + "attn\n")
    at = next(k for k, text in enumerate(src.splitlines(), 1) if "let S =" in text)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 20, 8)).astype(np.float32)
    with pytest.raises(ZynMLError) as info:
        zynbook.run(src, device=device, Q=q, K=q, V=q)
    assert info.value.kind == "runtime" and info.value.line == at, str(info.value)
    assert "inner sizes of @ differ" in str(info.value)
