"""The checker and lowering: whole programs checked before they run, the CIR pinned."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import zynbook
from zynbook.compiler import cir
from zynbook.errors import ZynMLShapeError, ZynMLTypeError

ROOT = Path(__file__).resolve().parent.parent
SPEC = Path(os.environ.get("ZYNBOOK_SPEC", ROOT.parent / "shared" / "spec" / "zynml-compute-system.md"))
GOLDEN = Path(__file__).parent / "golden" / "cir"
EXAMPLES = sorted((ROOT / "examples").glob("*.zyn"))


def spec_kernel_block() -> str:
    blocks = re.findall(r"```zynml\n(.*?)```", SPEC.read_text(), re.S)
    block = next(b for b in blocks if "Element-wise" in b)
    # the spec's flash attention block misses its closing brace
    return block.replace("out[b, h, q_block:q_block+64] = o / l\n",
                         "out[b, h, q_block:q_block+64] = o / l\n}\n")


@pytest.mark.skipif(not SPEC.exists(), reason="the spec is not beside the project")
def test_spec_kernel_types_compile_with_free_inputs():
    program = zynbook.compile(spec_kernel_block())
    assert len(program.kernels) == 18
    assert {"x", "A", "B", "Q", "K", "V", "mask", "logits"} <= set(program.free_names)
    assert "y" not in program.free_names       # defined by the first block
    kinds = [k.kernel.kernel_type.kind for k in program.kernels]
    assert kinds.count("elementwise") == 5 and kinds.count("reduce") == 5
    assert "flash_attention" in kinds and "conv2d_depthwise" in kinds


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_checks_and_lowers(path):
    program = zynbook.compile(path.read_text())
    for k in program.kernels:
        text = cir.print_kernel(k.kernel)
        assert text.startswith("kernel ")
        assert k.kernel.stable_hash() == k.kernel.stable_hash()


MATMUL_MISMATCH = """let A = randn([64, 32], seed=1)
let B = randn([48, 16], seed=2)
let C = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
"""


def test_matmul_shape_mismatch_is_refused_at_compile_time_pointing_at_both_sides():
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.compile(MATMUL_MISMATCH)
    err = info.value
    assert (err.line, err.column) == (8, 32)           # B's `k`
    assert "32" in err.message and "48" in err.message
    assert [(s.line, s.column) for _, s in err.notes] == [(8, 25)]   # A's `k`
    rendered = err.render()
    assert rendered.count("sum += A[i, k] * B[k, j]") == 2 and "^" in rendered


def test_the_same_mismatch_from_bound_inputs_is_refused_before_launch():
    import numpy as np
    src = MATMUL_MISMATCH.split("let C = ", 1)[1]
    with pytest.raises(ZynMLShapeError) as info:
        zynbook.run(src, A=np.ones((64, 32), np.float32), B=np.ones((48, 16), np.float32))
    assert info.value.line == 6


def test_kernel_type_mismatch_says_what_was_expected():
    src = """let x = randn([10], seed=1)
let y = compute(x) {
    @kernel matmul
    for i in 0..n:
        out[i] = x[i] + 1.0
}
"""
    with pytest.raises(ZynMLTypeError) as info:
        zynbook.compile(src)
    assert (info.value.line, info.value.column) == (3, 13)
    assert "expects" in info.value.message and "accumulating products" in info.value.message


def test_f16_accumulator_and_weak_literals_keep_the_inputs_dtype():
    src = """compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j] * 0.5
        out[i, j] = sum
}"""
    import numpy as np
    a = np.ones((3, 4), np.float16)
    out = zynbook.run(src, A=a, B=a.T.copy())
    assert out.dtype == "f16"


FLASH_F16 = """compute(q, k, v) {
    @kernel flash_attention
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq step 32:
            var m = -inf
            var l = 0.0
            var o = zeros(min(32, seq - q_block), head_dim%s)
            for kv_block in 0..seq step 32:
                let K_block = k[b, kv_block:kv_block+32, h]
                let V_block = v[b, kv_block:kv_block+32, h]
                let S = q[b, q_block:q_block+32, h] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                o = exp(m - m_new) * o + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, q_block:q_block+32, h] = o / l
}"""


@pytest.mark.parametrize("dtype_arg, want", [("", "f16"), (", dtype=f32", "f32")])
def test_a_tile_of_zeros_is_weak_unless_given_a_dtype(dtype_arg, want):
    """`var o = zeros(...)` is a tile of weak zeros: the flash body on f16 inputs computes
    and returns f16 (as `var l = 0.0` and `max(m, ...)` with `var m = -inf` do), within f16's
    tolerance of numpy; with dtype=f32 the running output, and the result, are f32."""
    import numpy as np
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 45, 3, 16)).astype(np.float16) for _ in range(3))
    out = zynbook.run(FLASH_F16 % dtype_arg, q=q, k=k, v=v)
    assert out.dtype == want
    Q, K, V = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    s = Q @ K.transpose(0, 1, 3, 2) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    want_values = ((p / p.sum(-1, keepdims=True)) @ V).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(np.asarray(out.numpy(), np.float64), want_values, atol=1e-2)


GOLDEN_PROGRAMS = ["matmul", "row_sums_axis", "argmax", "flash_attention", "layer_norm_fused",
                   "rope", "softmax_fused", "conv2d"]


@pytest.mark.parametrize("name", GOLDEN_PROGRAMS)
def test_cir_is_pinned(name):
    """The CIR of these examples is pinned so that changes to lowering are seen
    (ZYNBOOK_UPDATE_GOLDEN=1 rewrites the files)."""
    program = zynbook.compile((ROOT / "examples" / f"{name}.zyn").read_text())
    text = program.cir_text() + "\n"
    path = GOLDEN / f"{name}.cir"
    if os.environ.get("ZYNBOOK_UPDATE_GOLDEN") or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_arange_is_an_integer_tensor_the_checker_follows():
    """`arange` of ints is an i32 tensor of known length, so a gather through it compiles
    (and arithmetic with a float number makes it float, as on the host)."""
    import numpy as np
    src = """
let x = randn([10], seed=1)
let idx = arange(5) * 2
let y = compute(x, idx) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[idx[i]]
}
y
"""
    zynbook.compile(src)
    session = zynbook.Session("cpu")
    got = np.asarray(session.run(src))
    np.testing.assert_array_equal(got, np.asarray(session.namespace["x"])[::2])
    with pytest.raises(zynbook.ZynMLTypeError, match="integer"):
        zynbook.compile(src.replace("arange(5) * 2", "arange(5) * 2.0"))


@pytest.mark.parametrize("literal", ["[0, 3, 9]", "[[1, 2], [3, 4]]", "[true, false]",
                                     "[1, 2.5]", "[3000000000, 1]", "[7]"])
def test_a_tensor_literal_has_the_dtype_the_host_gives_it(literal):
    """`tensor([...])` written in the program is typed at compile time as the host types it
    at run time (it was taken as f32, so a gather through an integer one was refused)."""
    src = f"""
let t = tensor({literal})
let y = compute(t) {{
    for i in 0..n:
        out[i] = t[i]
}}
y
"""
    compiled = zynbook.compile(src).cir[0].inputs[0].dtype
    assert compiled == zynbook.Session("cpu").run(f"tensor({literal})").dtype


def test_a_gather_through_a_tensor_literal_compiles():
    import numpy as np
    src = """
let idx = tensor([0, 3, 9])
let y = compute(x, idx) {
    for i in 0..n:
        out[i] = x[idx[i]]
}
y
"""
    x = np.arange(10, dtype=np.float32) * 1.5
    np.testing.assert_array_equal(np.asarray(zynbook.compile(src).run(x=x)), x[[0, 3, 9]])
