"""The ZynML parser: every example and spec snippet parses, each construct gives the right
syntax tree, spans point at the right characters, and syntax errors say where they are."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from zynbook.compiler import ast as A
from zynbook.compiler.parser import parse
from zynbook.errors import Span, ZynMLError, ZynMLSyntaxError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.zyn"))
SPEC_DIR = next((p for p in (ROOT / "spec", ROOT.parent / "shared" / "spec")
                 if (p / "zynml-compute-system.md").exists()), None)


def P(src: str) -> A.Program:
    return parse(textwrap.dedent(src).lstrip("\n"))


def stmt(src: str, i: int = 0):
    return P(src).body[i]


def expr(src: str) -> A.Expr:
    """The value of `let _ = <src>`."""
    node = parse(f"let _ = {src}").body[0]
    assert isinstance(node, A.Let)
    return node.value


def compute_of(src: str) -> A.Compute:
    node = stmt(src)
    assert isinstance(node, A.Let) and isinstance(node.value, A.Compute)
    return node.value


def walk(node):
    """Every AST node under `node` (lists followed), `node` first."""
    if isinstance(node, list):
        for x in node:
            yield from walk(x)
        return
    if not isinstance(node, A.Node):
        return
    yield node
    for value in vars(node).values():
        if isinstance(value, (A.Node, list)):
            yield from walk(value)


def text_at(source: str, span) -> str:
    """The source text a single-line span covers."""
    assert span.line == span.end_line, span
    line = source.splitlines()[span.line - 1]
    return line[span.column - 1: span.end_column - 1]


# ----------------------------------------------------------------------------- examples

def test_examples_exist():
    names = {p.stem for p in EXAMPLES}
    for expected in ("relu", "elementwise_mul_add", "broadcast_scale", "reduce_sum",
                     "reduce_max", "norm_pipe_sqrt", "row_sums_axis", "argmax", "matmul",
                     "batched_matmul", "conv2d", "conv2d_depthwise", "attention_mask",
                     "flash_attention", "softmax_fused", "layer_norm_fused", "gelu", "rope",
                     "devices", "async", "memory", "transformer_block"):
        assert expected in names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses_and_ends_in_its_result(path):
    source = path.read_text()
    assert source.startswith("//"), "each example starts with a header comment"
    program = parse(source)
    assert isinstance(program, A.Program)
    assert program.source == source
    last = program.body[-1]
    assert isinstance(last, A.ExprStmt), "an example ends with its result as an expression"
    assert last.span.line == len(source.rstrip("\n").splitlines())
    # every example but the one about memory runs at least one kernel
    if path.stem != "memory":
        assert any(isinstance(n, A.Compute) for n in walk(program.body))
    # every node that carries a span points inside the source
    n_lines = len(source.splitlines())
    for node in walk(program.body):
        assert 1 <= node.span.line <= n_lines, node


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_kernels_name_their_type(path):
    """Each compute block has a `@kernel TYPE` line whose span points at TYPE."""
    source = path.read_text()
    program = parse(source)
    for comp in (n for n in walk(program.body) if isinstance(n, A.Compute)):
        kernels = [s.annotation for s in comp.body
                   if isinstance(s, A.AnnotationStmt) and s.annotation.name == "kernel"]
        assert len(kernels) == 1
        ann = kernels[0]
        assert ann.kernel and text_at(source, ann.kernel_span) == ann.kernel
        assert text_at(source, ann.span).startswith("@kernel")


# --------------------------------------------------------------------------- the spec

def spec_blocks() -> list[str]:
    if SPEC_DIR is None:
        pytest.skip("the spec is not beside this checkout")
    text = (SPEC_DIR / "zynml-compute-system.md").read_text()
    return re.findall(r"```zynml\n(.*?)```", text, re.S)


def kernel_type_snippets(block: str) -> list[str]:
    """The 'Kernel Types' block cut into its snippets: each top-level `let` and the
    comment lines just above it."""
    lines = block.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("let ")]
    out = []
    for a, b in zip(starts, starts[1:] + [len(lines)]):
        out.append("\n".join(lines[a:b]))
    return out


def test_spec_complete_blocks_parse():
    blocks = spec_blocks()
    complete = [b for b in blocks if "[@device" not in b and "Element-wise" not in b]
    assert len(complete) == 4  # devices, async, memory, transformer block
    for block in complete:
        program = parse(block)
        assert program.body


def test_spec_transformer_block_structure():
    block = next(b for b in spec_blocks() if b.startswith("pipeline transformer_block"))
    (pipe,) = parse(block).body
    assert isinstance(pipe, A.Pipeline) and pipe.name == "transformer_block"
    assert [p.name for p in pipe.params] == ["x", "layer"]
    assert pipe.params[0].type.name == "tensor"
    assert [d.id for d in pipe.params[0].type.dims] == ["batch", "seq", "hidden"]
    assert pipe.params[1].type.name == "int" and pipe.params[1].type.dims is None
    assert [d.id for d in pipe.returns.dims] == ["batch", "seq", "hidden"]
    assert isinstance(pipe.body[-1], A.Return)
    assert pipe.body[-1].value.id == "output"
    computes = [n for n in walk(pipe.body) if isinstance(n, A.Compute)]
    assert len(computes) == 6
    assert any(isinstance(n, A.SharedVar) and n.name == "up" for n in walk(pipe.body))


def test_spec_kernel_types_block_misses_a_brace():
    """The spec's flash attention block lacks its closing `}`: the first line after it that
    sits left of the block's body is reported, asking for the `}`."""
    block = next(b for b in spec_blocks() if "Element-wise" in b)
    with pytest.raises(ZynMLSyntaxError) as info:
        parse(block)
    lines = block.splitlines()
    last = max(k for k, ln in enumerate(lines) if "out[b, h, q_block:q_block+64] = o / l" in ln)
    first_after = next(k for k in range(last + 1, len(lines))
                       if lines[k].strip() and not lines[k].strip().startswith("//"))
    assert info.value.line == first_after + 1
    assert "`}`" in info.value.message
    fixed = block.replace("out[b, h, q_block:q_block+64] = o / l\n",
                          "out[b, h, q_block:q_block+64] = o / l\n}\n")
    program = parse(fixed)
    lets = [s for s in program.body if isinstance(s, A.Let)]
    assert len(lets) == 18 and all(isinstance(s.value, (A.Compute, A.Pipe)) for s in lets)


def test_spec_kernel_type_snippets_parse_one_by_one():
    block = next(b for b in spec_blocks() if "Element-wise" in b)
    snippets = kernel_type_snippets(block)
    assert len(snippets) == 18
    kinds = []
    for snippet in snippets:
        if snippet.startswith("let attn") and "flash_attention" in snippet:
            snippet = snippet.rstrip() + "\n}\n"
        program = parse(snippet)
        comp = next(n for n in walk(program.body) if isinstance(n, A.Compute))
        kinds.append(next(s.annotation.kernel for s in comp.body
                          if isinstance(s, A.AnnotationStmt)))
    assert kinds == ["elementwise", "elementwise", "elementwise", "reduce", "reduce", "reduce",
                     "reduce", "reduce", "matmul", "batched_matmul", "conv2d",
                     "conv2d_depthwise", "attention", "flash_attention", "fused", "fused",
                     "elementwise", "elementwise"]


def test_spec_template_is_not_a_program():
    """The 'Basic Compute Expression' block is a syntax schema with `[optional]` parts."""
    block = spec_blocks()[0]
    with pytest.raises(ZynMLSyntaxError) as info:
        parse(block)
    assert (info.value.line, info.value.column) == (2, 38)  # the `...` argument


# ------------------------------------------------------------------------ declarations

def test_let():
    node = stmt("let y = 1")
    assert isinstance(node, A.Let)
    assert node.names == ["y"] and not node.destructure
    assert node.value.value == 1 and node.type is None
    assert node.name_spans[0] == Span(1, 5, 1, 6)


def test_let_with_type():
    node = stmt("let n: int = 3")
    assert node.type.name == "int" and node.value.value == 3


def test_let_destructure():
    src = "let (q, k, v) = split(qkv, 3, axis=-1)"
    node = stmt(src)
    assert node.names == ["q", "k", "v"] and node.destructure
    assert [text_at(src, s) for s in node.name_spans] == ["q", "k", "v"]
    call = node.value
    assert isinstance(call, A.Call) and call.func.id == "split"
    assert [a.id if isinstance(a, A.Name) else a.value for a in call.args] == ["qkv", 3]
    (kw,) = call.kwargs
    assert kw.name == "axis"
    assert isinstance(kw.value, A.UnaryOp) and kw.value.op == "neg"
    assert kw.value.operand.value == 1


def test_let_destructure_of_await_any():
    node = stmt("let (result, index) = await any(futures)")
    assert node.names == ["result", "index"]
    assert isinstance(node.value, A.Await) and node.value.future.func.id == "any"


def test_var():
    node = stmt("var sum = 0.0")
    assert isinstance(node, A.VarDecl) and node.name == "sum" and node.value.value == 0.0


def test_var_named_var():
    """The spec's layer norm uses `var` as a variable name."""
    body = P("""
        var var = 0.0
        var += diff * diff
        var /= hidden
        let inv_std = rsqrt(var + eps)
        let var = 1
    """).body
    assert isinstance(body[0], A.VarDecl) and body[0].name == "var"
    assert isinstance(body[1], A.Assign) and body[1].target.id == "var" and body[1].op == "+="
    assert isinstance(body[2], A.Assign) and body[2].op == "/="
    assert body[3].value.args[0].left.id == "var"
    assert isinstance(body[4], A.Let) and body[4].names == ["var"]


@pytest.mark.parametrize("op", ["=", "+=", "-=", "*=", "/=", "%="])
def test_assignment_operators(op):
    node = stmt(f"x {op} y * 2")
    assert isinstance(node, A.Assign) and node.op == op
    assert node.target.id == "x"
    assert isinstance(node.value, A.BinOp) and node.value.op == "*"


def test_indexed_and_whole_tile_assignment():
    a, b = P("""
        out[b, h, i, d] = acc
        out = exp_vals / sum_exp
    """).body
    assert isinstance(a.target, A.Index) and a.target.base.id == "out"
    assert [i.id for i in a.target.items] == ["b", "h", "i", "d"]
    assert isinstance(b.target, A.Name) and b.target.id == "out"
    assert b.value.op == "/"


def test_attribute_assignment_target():
    node = stmt("cfg.size = 4")
    assert isinstance(node.target, A.Attr) and node.target.name == "size"


# ---------------------------------------------------------------------------- compute

def test_compute_with_annotations_after_inputs():
    comp = compute_of("""
        let f = compute(data) @device("cuda:0") @async @parallel(data) {
            @kernel matmul
            ...
        }
    """)
    assert [i.id for i in comp.inputs] == ["data"]
    assert [a.name for a in comp.annotations] == ["device", "async", "parallel"]
    assert comp.annotations[0].args[0].value == "cuda:0"
    assert comp.annotations[1].args == []
    assert comp.annotations[2].args[0].id == "data"
    assert isinstance(comp.body[1], A.Ellipsis)


def test_compute_device_list():
    comp = compute_of("""
        let r = compute(large_data) @device(["cuda:0", "cuda:1"]) @parallel(data) {
            @kernel matmul
            ...
        }
    """)
    (arg,) = comp.annotations[0].args
    assert isinstance(arg, A.ListLit) and [s.value for s in arg.items] == ["cuda:0", "cuda:1"]


def kernel_ann(src: str) -> A.Annotation:
    comp = compute_of(src)
    return next(s.annotation for s in comp.body
                if isinstance(s, A.AnnotationStmt) and s.annotation.name == "kernel")


@pytest.mark.parametrize("kernel", ["elementwise", "matmul", "batched_matmul", "conv2d",
                                    "conv2d_depthwise", "attention", "flash_attention",
                                    "fused", "expensive"])
def test_kernel_type_plain(kernel):
    src = f"let y = compute(x) {{\n    @kernel {kernel}\n    out = x\n}}\n"
    ann = kernel_ann(src)
    assert ann.kernel == kernel and ann.kernel_args == [] and ann.kernel_kwargs == []
    assert (ann.kernel_span.line, ann.kernel_span.column) == (2, 13)
    assert (ann.span.line, ann.span.column) == (2, 5)


def test_kernel_reduce_operator():
    ann = kernel_ann("""
        let s = compute(data) {
            @kernel reduce(+)
            for i in 0..len:
                yield data[i]
        }
    """)
    assert ann.kernel == "reduce"
    (op,) = ann.kernel_args
    assert isinstance(op, A.OpRef) and op.op == "+"


def test_kernel_reduce_max_axis():
    ann = kernel_ann("""
        let s = compute(m) {
            @kernel reduce(max, axis=1)
            for i in 0..rows, j in 0..cols:
                yield m[i, j]
        }
    """)
    assert ann.kernel_args[0].id == "max"
    (kw,) = ann.kernel_kwargs
    assert kw.name == "axis" and kw.value.value == 1


def test_kernel_reduce_plus_axis():
    ann = kernel_ann("""
        let s = compute(m) {
            @kernel reduce(+, axis=1)
            for i in 0..rows, j in 0..cols:
                yield m[i, j]
        }
    """)
    assert ann.kernel_args[0].op == "+" and ann.kernel_kwargs[0].name == "axis"


def test_kernel_reduce_argmax_yields_pair():
    src = textwrap.dedent("""
        let s = compute(data) {
            @kernel reduce(argmax)
            for i in 0..len:
                yield (data[i], i)  // (value, index) pair
        }
    """).lstrip()
    comp = compute_of(src)
    ann = comp.body[0].annotation
    assert ann.kernel_args[0].id == "argmax"
    loop = comp.body[1]
    (y,) = loop.body
    assert isinstance(y, A.Yield) and isinstance(y.value, A.TupleLit)
    value, index = y.value.items
    assert isinstance(value, A.Index) and index.id == "i"
    assert (y.span.line, y.span.column) == (4, 9)
    assert text_at(src, y.value.span) == "(data[i], i)"


def test_body_annotations():
    comp = compute_of("""
        let C = compute(A, B) {
            @kernel matmul
            @workgroup(16, 16)
            @shared(16 * 16 * 4 * 2)  // Tile A and B in shared memory
            @broadcast(vector, axis=1)
            @tile(block_q=64, block_kv=64)
            for i in 0..M, j in 0..N:
                out[i, j] = 0.0
        }
    """)
    anns = [s.annotation for s in comp.body if isinstance(s, A.AnnotationStmt)]
    assert [a.name for a in anns] == ["kernel", "workgroup", "shared", "broadcast", "tile"]
    assert [a.value for a in anns[1].args] == [16, 16]
    shared = anns[2].args[0]
    assert isinstance(shared, A.BinOp) and shared.op == "*"
    assert anns[3].args[0].id == "vector" and anns[3].kwargs[0].name == "axis"
    assert {k.name: k.value.value for k in anns[4].kwargs} == {"block_q": 64, "block_kv": 64}
    assert all(a.kernel is None for a in anns[1:])


def test_body_device_annotation():
    """The transformer block writes `@device("auto")` inside the body."""
    comp = compute_of("""
        let qkv = compute(x, w) {
            @kernel matmul
            @device("auto")
            out = x @ w
        }
    """)
    ann = comp.body[1].annotation
    assert ann.name == "device" and ann.args[0].value == "auto"


def test_annotation_spans_point_at_the_at_sign():
    src = textwrap.dedent("""
        let y = compute(x) @device("cpu") @async {
            @kernel elementwise
            @workgroup(0)
            for i in 0..len:
                out[i] = x[i]
        }
    """).lstrip()
    comp = compute_of(src)
    dev, asy = comp.annotations
    assert (dev.span.line, dev.span.column) == (1, 20)
    assert text_at(src, dev.span) == '@device("cpu")'
    assert (asy.span.line, asy.span.column) == (1, 35)
    wg = comp.body[1].annotation
    assert (wg.span.line, wg.span.column) == (3, 5)
    assert text_at(src, wg.args[0].span) == "0"


def test_compute_attribute_inputs():
    comp = compute_of("""
        let n = compute(x, weights.ln1_weight, weights.ln1_bias) {
            @kernel fused
            out = x
        }
    """)
    assert isinstance(comp.inputs[1], A.Attr)
    assert comp.inputs[1].base.id == "weights" and comp.inputs[1].name == "ln1_weight"


def test_compute_piped():
    node = stmt("""
        let norm = compute(data) {
            @kernel reduce(+)
            for i in 0..len:
                yield data[i] * data[i]
        } |> sqrt()
    """)
    pipe = node.value
    assert isinstance(pipe, A.Pipe)
    assert isinstance(pipe.value, A.Compute)
    assert isinstance(pipe.func, A.Call) and pipe.func.func.id == "sqrt" and pipe.func.args == []


def test_compute_in_a_list_literal():
    src = textwrap.dedent("""
        let futures = [
            compute(batch1) @async { ... },
            compute(batch2) @async {
                @kernel expensive
                for i in 0..len:
                    out[i] = batch2[i]
            },
            compute(batch3) @async {
              @kernel expensive
              out = batch3
            },
        ]
        let results = await all(futures)
    """).lstrip()
    a, b = parse(src).body
    assert isinstance(a.value, A.ListLit) and len(a.value.items) == 3
    first, second, third = a.value.items
    assert isinstance(first.body[0], A.Ellipsis)
    assert [type(s) for s in second.body] == [A.AnnotationStmt, A.For]
    assert second.annotations[0].name == "async"
    assert [type(s) for s in third.body] == [A.AnnotationStmt, A.Assign]
    assert (second.span.line, second.span.column) == (3, 5)
    assert isinstance(b.value, A.Await)


def test_compute_one_line_body():
    comp = compute_of("let y = compute(x) { out = x * 2.0 }")
    (assign,) = comp.body
    assert isinstance(assign, A.Assign) and assign.target.id == "out"


def test_compute_body_indented_deeper_than_its_line():
    """A `{` opens a fresh indentation context: the first line sets the base."""
    comp = compute_of("""
        let y = compute(x) {
                @kernel elementwise
                for i in 0..n:
                    out[i] = x[i]
        }
    """)
    assert [type(s) for s in comp.body] == [A.AnnotationStmt, A.For]


def test_compute_body_annotations_after_comments_and_blank_lines():
    comp = compute_of("""
        let attn = compute(Q, K, V) {
            // a leading comment

            @kernel flash_attention
            @workgroup(64)

            // and one between
            for b in 0..batch:
                out[b] = Q[b]
        }
    """)
    assert [type(s) for s in comp.body] == [A.AnnotationStmt, A.AnnotationStmt, A.For]


# ------------------------------------------------------------------------------ loops

def test_for_several_ranges_and_step():
    src = "for a in 0..n, b in 0..m step s:\n    out[a, b] = 1.0\n"
    loop = stmt(src)
    assert isinstance(loop, A.For)
    a, b = loop.iters
    assert isinstance(a, A.RangeIter) and a.var == "a" and a.start.value == 0
    assert a.stop.id == "n" and a.step is None
    assert b.var == "b" and b.stop.id == "m" and b.step.id == "s"
    assert text_at(src, a.span) == "a in 0..n"
    assert text_at(src, b.span) == "b in 0..m step s"
    assert isinstance(loop.body[0], A.Assign)


def test_for_range_bounds_are_expressions():
    loop = stmt("for d in 0..head_dim/2, h in 0..3*hidden:\n    x = 1\n")
    d, h = loop.iters
    assert d.stop.op == "/" and d.stop.left.id == "head_dim" and d.stop.right.value == 2
    assert h.stop.op == "*" and h.stop.left.value == 3


def test_for_step_literal():
    loop = stmt("for q_block in 0..seq_len step 64:\n    x = 1\n")
    assert loop.iters[0].step.value == 64


def test_for_each():
    loop = stmt("for layer in layers:\n    x = layer\n")
    (it,) = loop.iters
    assert isinstance(it, A.EachIter) and it.var == "layer" and it.iterable.id == "layers"


def test_for_one_line_body():
    loop = stmt("for i in 0..n: out[i] = 1.0\n")
    assert isinstance(loop.body[0], A.Assign)


def test_nested_loops_and_dedent():
    body = P("""
        for b in 0..batch:
            var mean = 0.0
            for i in 0..hidden:
                mean += x[b, i]
            mean /= hidden
        let z = 1
    """).body
    loop, z = body
    assert [type(s) for s in loop.body] == [A.VarDecl, A.For, A.Assign]
    assert loop.body[2].op == "/="
    assert isinstance(z, A.Let)


# ------------------------------------------------------------------------------ if

def test_if_and_or():
    node = stmt("if ih >= 0 and ih < in_h and iw >= 0 or flag:\n    sum += 1.0\n")
    assert isinstance(node, A.If)
    cond = node.cond
    assert cond.op == "or" and cond.right.id == "flag"
    left = cond.left
    assert left.op == "and" and left.right.op == ">="
    assert left.left.op == "and" and left.left.left.op == ">=" and left.left.right.op == "<"
    assert node.orelse == []


def test_if_elif_else():
    node = stmt("""
        if x > 0.0:
            y = 1.0
        elif x < 0.0:
            y = -1.0
        elif x == 0.0:
            y = 0.5
        else:
            y = 0.0
    """)
    assert node.cond.op == ">"
    (e1,) = node.orelse
    assert isinstance(e1, A.If) and e1.cond.op == "<"
    (e2,) = e1.orelse
    assert e2.cond.op == "=="
    (last,) = e2.orelse
    assert isinstance(last, A.Assign) and last.value.value == 0.0
    assert (e1.span.line, e1.span.column) == (3, 1)


def test_if_mask_index_condition():
    node = stmt("if mask[i, j]:\n    x = 1\n")
    assert isinstance(node.cond, A.Index)


def test_not_and_comparisons():
    e = expr("not a != b")
    assert isinstance(e, A.UnaryOp) and e.op == "not" and e.operand.op == "!="
    for op in ("==", "!=", "<", "<=", ">", ">="):
        assert expr(f"a {op} b").op == op


# --------------------------------------------------------------------------- indexing

def test_multi_index():
    e = expr("x[b, h, s, d * 2 + 1]")
    assert isinstance(e, A.Index) and e.base.id == "x"
    assert [type(i) for i in e.items] == [A.Name, A.Name, A.Name, A.BinOp]


def test_slices():
    src = "let _ = K[b, h, kv:kv+64]"
    e = parse(src).body[0].value
    b, h, s = e.items
    assert isinstance(s, A.SliceItem)
    assert s.start.id == "kv" and s.stop.op == "+" and s.stop.right.value == 64
    assert text_at(src, s.span) == "kv:kv+64"
    assert text_at(src, e.span) == "K[b, h, kv:kv+64]"


def test_open_slices():
    e = expr("x[:, 1:, :n]")
    a, b, c = e.items
    assert a.start is None and a.stop is None
    assert b.start.value == 1 and b.stop is None
    assert c.start is None and c.stop.id == "n"


def test_slice_assignment():
    node = stmt("out[b, h, q_block:q_block+64] = o / l")
    assert isinstance(node.target.items[2], A.SliceItem)


def test_chained_index_and_attribute():
    e = expr("model.layers[layer].qkv_proj[i, h]")
    assert isinstance(e, A.Index) and [i.id for i in e.items] == ["i", "h"]
    attr = e.base
    assert isinstance(attr, A.Attr) and attr.name == "qkv_proj"
    inner = attr.base
    assert isinstance(inner, A.Index) and inner.items[0].id == "layer"
    assert isinstance(inner.base, A.Attr) and inner.base.name == "layers"
    assert inner.base.base.id == "model"


def test_method_call_with_keywords():
    e = expr('data.to_device("cuda:0", copy=false)')
    assert isinstance(e, A.Call) and isinstance(e.func, A.Attr) and e.func.name == "to_device"
    assert e.args[0].value == "cuda:0"
    assert e.kwargs[0].name == "copy" and isinstance(e.kwargs[0].value, A.Bool)
    assert e.kwargs[0].value.value is False


def test_negative_index():
    e = expr("x[-1]")
    assert e.items[0].op == "neg"


# ----------------------------------------------------------------------- operators

def test_matmul_operator_precedence():
    e = expr("Q[b, h, q:q+64] @ transpose(K_block) / sqrt(head_dim)")
    # `@` binds like `*` and `/`: ((Q @ transpose(K)) / sqrt(d))
    assert e.op == "/" and e.left.op == "@"
    assert e.left.right.func.id == "transpose"
    e = expr("exp(m - m_new) * o + exp(S - m_new) @ V_block")
    assert e.op == "+" and e.left.op == "*" and e.right.op == "@"


def test_arithmetic_precedence_and_associativity():
    e = expr("a - b - c * d")
    assert e.op == "-" and e.left.op == "-" and e.right.op == "*"
    e = expr("-x ** 2")
    assert isinstance(e, A.UnaryOp) and e.op == "neg" and e.operand.op == "**"
    e = expr("2 ^ 3 ^ 2")
    assert e.op == "**" and e.right.op == "**"
    e = expr("a % b")
    assert e.op == "%"


def test_pipes():
    e = expr("x |> f() |> g(2)")
    assert isinstance(e, A.Pipe) and e.func.func.id == "g"
    assert isinstance(e.value, A.Pipe) and e.value.value.id == "x"
    assert e.value.func.func.id == "f"


def test_a_pipe_chain_continues_on_lines_that_start_with_the_pipe():
    """A line starting with `|>` continues the statement before it, blank and comment lines
    between, at any indentation, in a pipeline's body and after a compute block's `}` (it
    was a syntax error at the `|>`; the chain had to sit in parentheses)."""
    prog = P("""
        let y = x
            |> f()
            // the next step
        
            |> g(2)
        let z = compute(data) {
            for i in 0..n:
                out[i] = data[i]
        }
        |> sqrt()
        pipeline h(t):
            return t
                |> f()
        let w = 1 // a comment |> is not a pipe
        w
    """)
    y, z, h, w, last = prog.body
    assert isinstance(y.value, A.Pipe) and y.value.func.func.id == "g"
    assert isinstance(y.value.value, A.Pipe) and y.value.value.value.id == "x"
    assert (y.value.func.span.line, y.value.func.span.column) == (5, 8)
    assert isinstance(z.value, A.Pipe) and isinstance(z.value.value, A.Compute)
    assert isinstance(h.body[0].value, A.Pipe) and h.body[0].value.func.func.id == "f"
    assert isinstance(w.value, A.Number) and isinstance(last, A.ExprStmt)
    with pytest.raises(ZynMLSyntaxError) as err:
        P("let y = x\n|>\n")
    assert err.value.line == 2


def test_pipe_binds_loosest():
    e = expr("a + b |> sqrt()")
    assert isinstance(e, A.Pipe) and e.value.op == "+"


def test_reduce_call_with_operator_argument():
    e = expr("reduce(+, exp_vals)")
    assert isinstance(e.args[0], A.OpRef) and e.args[0].op == "+"
    assert e.args[1].id == "exp_vals"
    e = expr("reduce(max, logits)")
    assert e.args[0].id == "max"


# ------------------------------------------------------------------------- literals

def test_negative_infinity():
    e = expr("-inf")
    assert isinstance(e, A.UnaryOp) and e.op == "neg" and e.operand.id == "inf"


@pytest.mark.parametrize("text,value", [("1e-6", 1e-6), ("0.044715", 0.044715),
                                        ("1.5E3", 1500.0), ("2e10", 2e10), ("0.0", 0.0)])
def test_float_literals(text, value):
    e = expr(text)
    assert isinstance(e, A.Number) and isinstance(e.value, float) and e.value == value


def test_int_literal():
    e = expr("1024")
    assert isinstance(e, A.Number) and e.value == 1024 and isinstance(e.value, int)


@pytest.mark.parametrize("text,nbytes", [("1GB", 10**9), ("24GB", 24 * 10**9),
                                         ("512MB", 512 * 10**6), ("4KiB", 4096),
                                         ("2GiB", 2 * 2**30)])
def test_size_literals(text, nbytes):
    e = expr(text)
    assert isinstance(e, A.Size) and e.nbytes == nbytes and e.text == text


@pytest.mark.parametrize("text,seconds", [("1000ms", 1.0), ("2s", 2.0), ("5us", 5e-6),
                                          ("1.5s", 1.5)])
def test_duration_literals(text, seconds):
    e = expr(text)
    assert isinstance(e, A.Duration) and e.seconds == pytest.approx(seconds)


def test_strings_and_bools():
    assert expr('"cuda:0"').value == "cuda:0"
    assert expr("'cpu'").value == "cpu"
    assert expr('"a\\"b"').value == 'a"b'
    assert expr("true").value is True and expr("false").value is False


def test_list_and_tuple_literals():
    e = expr("[1024, 1024]")
    assert isinstance(e, A.ListLit) and [i.value for i in e.items] == [1024, 1024]
    assert expr("[]").items == []
    e = expr("[1,\n 2,\n 3,\n]")
    assert [i.value for i in e.items] == [1, 2, 3]
    t = expr("(a, b)")
    assert isinstance(t, A.TupleLit) and len(t.items) == 2
    assert isinstance(expr("(a)"), A.Name)


def test_keyword_arguments():
    e = expr('allocate(shape=[1024, 1024], dtype=float32, device="cpu", pinned=true)')
    assert e.args == []
    assert [k.name for k in e.kwargs] == ["shape", "dtype", "device", "pinned"]
    assert e.kwargs[1].value.id == "float32"
    e = expr("memory_pool(device=\"cuda:0\", size=1GB)")
    assert e.kwargs[1].value.nbytes == 10**9
    e = expr("randn([2, 3], seed=7)")
    assert isinstance(e.args[0], A.ListLit) and e.kwargs[0].value.value == 7


def test_comments_everywhere():
    body = P("""
        // a comment line
        let x = 1  // trailing
        // another

        let y = [1, // inside brackets
                 2]
        let z = 2
        // at the end, no newline""").body
    assert [s.names[0] for s in body] == ["x", "y", "z"]


def test_crlf_line_endings():
    program = parse("let x = 1\r\nfor i in 0..n:\r\n    out[i] = x\r\n")
    assert [type(s) for s in program.body] == [A.Let, A.For]


def test_tabs_indent():
    program = parse("for i in 0..n:\n\tout[i] = 1\n\tout[i] += 1\n")
    assert len(program.body[0].body) == 2


def test_empty_program():
    assert parse("").body == []
    assert parse("// only a comment\n").body == []
    assert parse("\n\n").body == []


# ------------------------------------------------------------------- kernel statements

def test_shared_var_and_barrier():
    comp = compute_of("""
        let y = compute(x) {
            @kernel fused
            for b in 0..batch:
                shared var up[ffn_hidden]
                up[0] = 1.0
                barrier()
                out[b] = up[0]
        }
    """)
    loop = comp.body[1]
    sv, _, bar, _ = loop.body
    assert isinstance(sv, A.SharedVar) and sv.name == "up" and sv.dims[0].id == "ffn_hidden"
    assert isinstance(bar, A.ExprStmt) and bar.expr.func.id == "barrier" and bar.expr.args == []


def test_shared_var_two_dims_with_type():
    node = stmt("shared var tile[16, 16]: f32")
    assert [d.value for d in node.dims] == [16, 16] and node.type.name == "f32"


def test_yield_expression():
    node = stmt("yield data[i] * data[i]")
    assert isinstance(node, A.Yield) and node.value.op == "*"


def test_ellipsis_statement():
    (e,) = P("...").body
    assert isinstance(e, A.Ellipsis)


# --------------------------------------------------------------- pipelines, config, await

def test_pipeline_definition():
    src = textwrap.dedent("""
        pipeline block(x: tensor[batch, seq, hidden], layer: int) -> tensor[batch, seq, hidden]:
            let weights = model.layers[layer]
            let y = compute(x) {
                @kernel elementwise
                for b in 0..batch, s in 0..seq, h in 0..hidden:
                    out[b, s, h] = x[b, s, h] * 2.0
            }
            return y
        block(x, 0)
    """).lstrip()
    pipe, call = parse(src).body
    assert isinstance(pipe, A.Pipeline) and pipe.name == "block"
    x, layer = pipe.params
    assert x.name == "x" and x.type.name == "tensor"
    assert [d.id for d in x.type.dims] == ["batch", "seq", "hidden"]
    assert layer.type.name == "int"
    assert [type(s) for s in pipe.body] == [A.Let, A.Let, A.Return]
    assert isinstance(pipe.body[1].value, A.Compute)
    assert pipe.body[2].value.id == "y"
    assert isinstance(call, A.ExprStmt) and call.expr.func.id == "block"
    assert (pipe.span.line, pipe.span.column) == (1, 1)
    assert (x.span.line, x.span.column) == (1, 16)
    assert (call.span.line, call.span.column) == (9, 1)


def test_pipeline_without_params_or_return_type():
    pipe = stmt("""
        pipeline process_metadata():
            return 4
    """)
    assert pipe.params == [] and pipe.returns is None
    assert pipe.body[0].value.value == 4


def test_bare_return():
    pipe = stmt("pipeline p(x):\n    return\n")
    assert isinstance(pipe.body[0], A.Return) and pipe.body[0].value is None
    assert pipe.params[0].type is None


def test_config_block():
    node = stmt("""
        config {
            compute_device: "cuda:0"  // or "metal:0", "cpu", "auto"
            memory_limit: 8GB
        }
    """)
    assert isinstance(node, A.Config)
    assert [e.name for e in node.entries] == ["compute_device", "memory_limit"]
    assert node.entries[0].value.value == "cuda:0"
    assert node.entries[1].value.nbytes == 8 * 10**9


def test_config_one_line():
    node = stmt('config { compute_device: "cpu", precision: "f32" }')
    assert [e.value.value for e in node.entries] == ["cpu", "f32"]


def test_await_forms():
    a = expr("await future")
    assert isinstance(a, A.Await) and a.future.id == "future"
    assert a.timeout is None and a.default is None
    b = expr("await all(futures)")
    assert b.future.func.id == "all" and b.future.args[0].id == "futures"
    c = expr("await any(futures)")
    assert c.future.func.id == "any"
    d = expr("await future timeout 1000ms else default_value")
    assert d.future.id == "future"
    assert isinstance(d.timeout, A.Duration) and d.timeout.seconds == 1.0
    assert d.default.id == "default_value"


def test_await_binds_tighter_than_arithmetic():
    e = expr("await f + 1")
    assert e.op == "+" and isinstance(e.left, A.Await)


# ---------------------------------------------------------------------------- spans

def test_spans_of_a_kernel():
    src = textwrap.dedent("""
        let z = compute(x, y) {
            @kernel elementwise
            for i in 0..len:
                out[i] = x[i] * y[i] + 1.0
        }
    """).lstrip()
    let = parse(src).body[0]
    assert (let.span.line, let.span.column) == (1, 1)
    assert (let.span.end_line, let.span.end_column) == (5, 2)
    comp = let.value
    assert (comp.span.line, comp.span.column) == (1, 9)
    assert [text_at(src, i.span) for i in comp.inputs] == ["x", "y"]
    loop = comp.body[1]
    assert (loop.span.line, loop.span.column) == (3, 5)
    assign = loop.body[0]
    assert (assign.span.line, assign.span.column) == (4, 9)
    assert text_at(src, assign.target.span) == "out[i]"
    value = assign.value
    assert text_at(src, value.span) == "x[i] * y[i] + 1.0"
    assert text_at(src, value.left.span) == "x[i] * y[i]"
    assert text_at(src, value.left.right.span) == "y[i]"
    assert text_at(src, value.left.right.items[0].span) == "i"
    assert text_at(src, value.right.span) == "1.0"
    assert text_at(src, loop.iters[0].stop.span) == "len"


def test_spans_of_names_in_host_code():
    src = "let a = randn([4], seed=1)\nlet b = a + foo\n"
    b = parse(src).body[1]
    assert (b.value.right.span.line, b.value.right.span.column) == (2, 13)
    assert text_at(src, b.value.right.span) == "foo"
    call = parse(src).body[0].value
    assert text_at(src, call.kwargs[0].span) == "seed=1"
    assert text_at(src, call.args[0].span) == "[4]"


def test_spans_of_examples_name_nodes():
    """Every Name node of every example covers exactly its identifier."""
    for path in EXAMPLES:
        source = path.read_text()
        for node in walk(parse(source).body):
            if isinstance(node, A.Name):
                assert text_at(source, node.span) == node.id, (path.name, node.span)


# --------------------------------------------------------------------- syntax errors

def syntax_error(src: str) -> ZynMLSyntaxError:
    src = textwrap.dedent(src).lstrip("\n")
    with pytest.raises(ZynMLSyntaxError) as info:
        parse(src)
    err = info.value
    assert isinstance(err, ZynMLError) and err.kind == "syntax"
    return err


def test_error_missing_colon_points_at_end_of_line():
    err = syntax_error("""
        let y = compute(x) {
            @kernel elementwise
            for i in 0..len
                out[i] = x[i]
        }
    """)
    assert (err.line, err.column) == (3, 20)
    assert "end of line" in err.message and "':'" in err.message
    rendered = err.render()
    assert "    for i in 0..len" in rendered and "^" in rendered


def test_error_missing_colon_on_if():
    err = syntax_error("if x > 1\n    y = 2\n")
    assert (err.line, err.column) == (1, 9)


def test_error_unclosed_brace():
    err = syntax_error("""
        let y = compute(x) {
            for i in 0..len:
                out[i] = x[i]
    """)
    # the caret sits under the `{` that is never closed
    assert err.line == 1 and "end of input" in err.message and "never closed" in err.message


def test_error_unclosed_paren_reported_at_next_token():
    err = syntax_error("let x = randn([4], seed=1\nlet y = 2\n")
    assert (err.line, err.column) == (2, 1)


def test_error_stray_token():
    err = syntax_error("let x = 1 2\n")
    assert (err.line, err.column) == (1, 11)
    assert "'2'" in err.message


def test_error_unexpected_character():
    err = syntax_error("let x = a $ b\n")
    assert (err.line, err.column) == (1, 11)
    assert "'$'" in err.message


def test_error_let_without_value():
    err = syntax_error("let x\nlet y = 1\n")
    assert (err.line, err.column) == (1, 6)


def test_error_dedent_to_no_level():
    err = syntax_error("""
        for i in 0..n:
            for j in 0..m:
                out[i, j] = 1
          out[i, 0] = 2
    """)
    assert (err.line, err.column) == (4, 3)
    assert "indentation" in err.message


def test_error_render_has_line_and_caret():
    err = syntax_error("let a = 1\nlet b = (2 + )\n")
    rendered = err.render()
    assert rendered.startswith("ZynML syntax error at line 2, column 14")
    lines = rendered.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.endswith("let b = (2 + )"))
    caret = lines[i + 1]
    assert caret.index("^") == lines[i].index(")")


def test_error_messages_name_tokens_readably():
    err = syntax_error("let y = foo 1\n")
    assert "anon" not in err.message


def test_error_unexpected_indent_points_at_the_indented_line():
    err = syntax_error("let x = 1\n    let y = 2\n")
    assert (err.line, err.column) == (2, 5)


def test_error_line_left_of_block_base():
    syntax_error("""
        let y = compute(x) {
                for i in 0..n:
                    out[i] = 1.0
            out[0] = 2.0
        }
    """)


def test_error_bad_string_escape():
    err = syntax_error('let s = "\\x"\n')
    assert (err.line, err.column) == (1, 10)        # at the backslash of the bad escape
    assert "escape" in err.message


def test_non_ascii_string_kept():
    assert expr('"température"').value == "température"


def test_long_expression_does_not_crash():
    try:
        e = expr(" + ".join(["x"] * 600))
    except ZynMLError:
        return
    assert e.op == "+"


def test_the_parser_tables_are_kept_in_the_cache(tmp_path):
    """A new process reads the built parser from the cache's `parser/` folder; a damaged
    file there is built again from the grammar, and the program still parses."""
    import os
    import subprocess
    import sys as _sys
    code = ("from zynbook.compiler import parser; "
            "print(len(parser.parse('let x = 1\\nx\\n').body))")
    env = dict(os.environ, ZYNBOOK_CACHE_DIR=str(tmp_path))

    def run():
        out = subprocess.run([_sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()
    first = run()
    kept = list((tmp_path / "parser").iterdir())
    assert len(kept) == 1 and kept[0].stat().st_size > 1000
    written = kept[0].stat().st_mtime_ns
    assert run() == first and kept[0].stat().st_mtime_ns == written     # read, not rebuilt
    for damage in (b"not a cache", kept[0].read_bytes()[:4000]):
        kept[0].write_bytes(damage)
        assert run() == first
        assert kept[0].stat().st_size > 1000       # written again


@pytest.mark.parametrize("src, col, quote", [('let s = "a\nb"', 9, '"'), ("let s = 'abc", 9, "'"),
                                             ('let s = "ok" + "x', 16, '"')])
def test_an_unterminated_string_is_named(src, col, quote):
    with pytest.raises(ZynMLSyntaxError) as info:
        parse(src)
    assert (info.value.line, info.value.column) == (1, col)
    assert f"unterminated string: no closing {quote}" in info.value.message
