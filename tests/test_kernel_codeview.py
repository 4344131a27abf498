"""Reading generated code (zynbook/kernel/codeview.py and display.code_bundle): the kernel
first, unused helpers folded, ZynML lines linked to generated lines, the inspector's HTML."""
from __future__ import annotations

import re

import numpy as np
import pytest

import zynbook
from zynbook.kernel import state
from zynbook.kernel.builtin_docs import BUILTIN_DOCS
from zynbook.kernel.codeview import (CODE_HEIGHT_PX, line_map, mapped_html, plain_html,
                                     split_source)
from zynbook.kernel.display import InspectUsageError, code_bundle, device_language

PROGRAM = """let x = randn([6, 5], seed=1)
let v = randn([5], seed=2)
let y = compute(x, v) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        let t = x[i, j] * v[j]
        out[i, j] = max(t, 0.0) + 1.0
}
let top = compute(y) {
    @kernel reduce(max)
    for i in 0..rows, j in 0..cols:
        yield y[i, j]
}
let a = randn([24, 20], seed=3)
let w = randn([20, 16], seed=4)
let p = compute(a, w) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += a[i, k] * w[k, j]
        out[i, j] = acc
}
"""
# printed from the launch IR (the schedule's parameters in the first line): helpers only where
# used
PRINTED = {"cuda", "msl", "c", "wgsl"}
LANGS = ("cuda", "wgsl", "msl", "c")
IDENT = re.compile(r"[A-Za-z_]\w*")


@pytest.fixture(scope="module")
def kernels():
    s = zynbook.Session("cpu")
    s.run(PROGRAM)
    out = []
    for k in s.last_kernels:
        srcs = {lang: (t if isinstance(t, str) else t.source) for lang, t in k.sources().items()}
        out.append((k, srcs))
    return s, out


def _definitions(text: str) -> dict:
    """name -> the 0-based lines where a top-level helper of that name starts (a check of
    its own: the identifier before the first parenthesis of a line in column 0, or a
    struct / fn / #define name)."""
    found: dict = {}
    for i, ln in enumerate(text.splitlines()):
        m = (re.match(r"#define\s+(\w+)", ln) or re.match(r"struct\s+(\w+)", ln)
             or re.match(r"fn\s+(\w+)", ln)
             or re.match(r"(?:template\s*<[^>]*>\s*)?[\w\s:*&<>]*?\b(\w+)\s*\(", ln)
             if ln and not ln[0].isspace() and not ln.startswith("//") else None)
        if m:
            found.setdefault(m.group(1), []).append(i)
    return found


@pytest.mark.parametrize("lang", LANGS)
def test_the_kernel_keeps_every_helper_it_calls_and_drops_the_others(kernels, lang):
    _, ks = kernels
    for k, srcs in ks:
        text = srcs[lang]
        sp = split_source(text, lang)
        lines = text.splitlines()
        kernel_part = "\n".join(lines[sp.kernel_start:])
        assert sp.kernel_start > 0
        # the short text starts with the header, then the kernel itself
        assert sp.kernel_text().splitlines()[0] == lines[0]
        short = sp.kernel_text()
        assert "\n".join(ln.rstrip() for ln in kernel_part.strip().splitlines()) in short
        head = len(sp.header[0].lines) if sp.header else 0
        first_code = next(ln for ln in short.splitlines()[head:] if ln.strip())
        assert first_code == lines[sp.kernel_start].rstrip()
        defs = _definitions("\n".join(lines[:sp.kernel_start]))
        used_by_kernel = set(IDENT.findall(kernel_part)) & set(defs)
        for name in used_by_kernel:
            # every definition of a helper the kernel calls is still there
            assert all(lines[i] in short.splitlines() for i in defs[name]), (lang, k.name, name)
        for c in sp.unused():
            # a dropped helper is called neither by the kernel nor by a kept helper
            assert c.name not in IDENT.findall(short), (lang, k.name, c.name)
        if lang in PRINTED and re.search(r"\((generic|reduce): ", lines[0]):
            assert not sp.unused(), (lang, k.name, [c.name for c in sp.unused()])
        elif sp.unused():
            assert len(short.splitlines()) < len(lines), (lang, k.name)


@pytest.mark.parametrize("lang", ("c", "wgsl", "cuda", "msl"))
def test_line_comments_map_generated_lines_to_the_zynml_lines(kernels, lang):
    _, ks = kernels
    k, srcs = ks[0]                 # the elementwise block
    text = srcs[lang]
    mapping = line_map(text, lang, k.zynml, k.kernel.first_line)
    lines = text.splitlines()
    program = PROGRAM.splitlines()
    # the statement `out[i, j] = max(t, 0.0) + 1.0` is ZynML line 7; its generated store
    # (the line that writes the output) is mapped to 7
    store = [i for i, ln in enumerate(lines) if re.search(r"\bu?_?out\[", ln)
             and "=" in ln and "//" not in ln.split("=")[0]]
    assert store, lang
    assert all(mapping.get(i) == 7 for i in store), (lang, [(i, mapping.get(i)) for i in store])
    assert program[7 - 1].strip().startswith("out[i, j] = max(t, 0.0)")
    # every `// line N: text` comment carries the text of line N
    for i, ln in enumerate(lines):
        m = re.match(r"\s*// line (\d+): (.*)", ln)
        if m:
            assert mapping[i] == int(m.group(1))
            assert program[int(m.group(1)) - 1].strip().startswith(m.group(2).strip()[:20])


def test_python_reference_lines_map_by_their_trailing_zynml_text(kernels):
    _, ks = kernels
    k, srcs = ks[0]
    mapping = line_map(srcs["python"], "python", k.zynml, k.kernel.first_line)
    lines = srcs["python"].splitlines()
    store = next(i for i, ln in enumerate(lines) if "v_out[" in ln)
    assert mapping[store] == 7
    assert 5 in mapping.values()


def test_mapped_html_links_both_panes_scrolls_and_copies(kernels):
    _, ks = kernels
    k, srcs = ks[2]                 # the matmul block: the GEMM schedule's CUDA
    page = mapped_html(k.zynml, k.kernel.first_line, srcs["cuda"], "cuda", title="cuda")
    # each mapped ZynML line is a label for its radio button and has a hover/checked rule
    # that reaches the generated lines with the same data-l
    zlines = set(re.findall(r"<label class='zm-line zm-mapped' data-l='(\d+)'", page))
    assert "22" in zlines
    uid = re.search(r"id='(zynml-map-\d+)'", page).group(1)
    for z in zlines:
        assert f"#{uid}:has(#{uid}-r{z}:checked)" in page
        assert f"#{uid}:has(.zm-line[data-l='{z}']:hover)" in page
    assert f"max-height:{CODE_HEIGHT_PX}px" in page and "overflow:auto" in page
    assert "navigator.clipboard.writeText" in page
    # the whole text is what the button copies
    copied = re.search(r"<textarea class='zm-text' hidden readonly>(.*?)</textarea>", page,
                       re.S).group(1)
    import html as H
    assert H.unescape(copied) == srcs["cuda"]
    # unused helpers would sit in a collapsed <details>: the printer of the launch IR writes
    # only the helpers a kernel uses, in every language
    assert "helpers not used by this kernel" not in page
    k0, srcs0 = ks[0]
    wgsl_page = mapped_html(k0.zynml, k0.kernel.first_line, srcs0["wgsl"], "wgsl", title="wgsl")
    assert "helpers not used by this kernel" not in wgsl_page
    # every generated line that holds code is there once, numbered as in the file, and the
    # kernel comes right after the header comment
    numbers = [int(n) for n in re.findall(r"<span class='zm-n'>(\d+)</span>", page)]
    gen_numbers = numbers[len(k.zynml.splitlines()):]
    lines = srcs["cuda"].splitlines()
    assert len(gen_numbers) == len(set(gen_numbers))
    assert {i + 1 for i, ln in enumerate(lines) if ln.strip()} <= set(gen_numbers)
    sp = split_source(srcs["cuda"], "cuda")
    header = len(sp.header[0].lines)
    assert gen_numbers[:header] == list(range(1, header + 1))
    assert gen_numbers[header] == sp.kernel_start + 1
    assert "__global__" in "".join(lines[sp.kernel_start:sp.kernel_start + 2])


def test_code_bundle_prints_a_summary_and_the_kernel_only(kernels):
    s, ks = kernels
    k, srcs = ks[0]
    bundle = code_bundle([k], s.launches, "cuda")
    text = bundle["text/plain"]
    assert text.splitlines()[0].startswith(f"{k.name} = y (elementwise) on cpu")
    assert "stages: zynml (6 lines), cir (" in text
    assert "helpers it does not use left out" not in text      # it has none
    text2 = code_bundle([k], s.launches, "wgsl")["text/plain"]
    assert "fn zyn_k_" in text2 and srcs["wgsl"].count("\n") > 10
    full = code_bundle([k], s.launches, "cuda", full=True)["text/plain"]
    assert srcs["cuda"].strip() in full
    # without a language: the code of the device the kernel ran on (the CPU reference)
    text = code_bundle([k], s.launches)["text/plain"]
    assert "--- python: the kernel ---" in text


def test_an_unknown_language_is_an_error_listing_the_languages(kernels):
    s, ks = kernels
    with pytest.raises(InspectUsageError) as info:
        code_bundle([k for k, _ in ks], s.launches, "cobol")
    message = str(info.value)
    for lang in ("zynml", "cir", "python", "cuda", "wgsl"):
        assert lang in message
    assert ks[0][0].name in message


def test_device_language():
    assert device_language("cpu") == "python"
    assert device_language("cpu:native") == "c"
    assert device_language("cuda:1") == "cuda"
    assert device_language("vulkan:0") == "wgsl"
    assert device_language("metal:0") == "msl"


def test_every_builtin_has_a_signature_and_a_description():
    from zynbook.kernel.kernel import builtin_names, word_doc

    missing = [n for n in builtin_names() if n not in BUILTIN_DOCS]
    assert not missing, missing
    for name in builtin_names():
        doc = word_doc(name)
        assert doc.startswith(name + "(") and "\n" in doc and "builtin function" not in doc


def test_last_run_survives_a_failed_cell():
    s = zynbook.Session("cpu")
    state.set_notebook_session(s)
    try:
        s.run_cell(PROGRAM)
        kernels, launches = state.last_run()
        names = [k.name for k in kernels]
        assert len(names) == 3 and len(launches) == 3
        with pytest.raises(zynbook.ZynMLError):
            s.run_cell("let bad = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                       "        out[i] = x[i] * nowhere\n}\n")
        assert s.last_kernels == []
        assert [k.name for k in state.last_run()[0]] == names
    finally:
        state.set_notebook_session(None)


def test_a_pipeline_block_called_from_a_later_cell_has_its_zynml_text():
    s = zynbook.Session("cpu")
    s.run_cell("pipeline double(t: tensor[n]) -> tensor[n]:\n"
               "    let d = compute(t) {\n        @kernel elementwise\n"
               "        for i in 0..n:\n            out[i] = t[i] * 2.0\n    }\n"
               "    return d\n")
    value, _ = s.run_cell("let a = randn([4], seed=1)\nlet b = double(a)\nb\n")
    np.testing.assert_allclose(value.numpy(), s.namespace["a"].numpy() * 2.0, rtol=1e-6)
    (k,) = s.last_kernels
    assert k.zynml.strip().startswith("let d = compute(t) {")
    assert "out[i] = t[i] * 2.0" in k.zynml
    assert k.kernel.first_line == 2


def test_kernel_labels_name_the_pipeline_and_the_variable():
    from zynbook.kernel.display import code_bundle, kernel_label

    s = zynbook.Session("cpu")
    s.run_cell("pipeline block(t: tensor[n]) -> tensor[n]:\n"
               "    let scaled = compute(t) {\n        @kernel elementwise\n"
               "        for i in 0..n:\n            out[i] = t[i] * 2.0\n    }\n"
               "    return scaled\n")
    s.run_cell("let a = randn([4], seed=1)\nlet b = block(a)\n"
               "let c = compute(a) {\n    @kernel elementwise\n    for i in 0..n:\n"
               "        out[i] = a[i] + 1.0\n}\n")
    inner, outer = s.last_kernels
    assert kernel_label(inner, s.namespace) == "block.scaled"
    assert kernel_label(outer, s.namespace) == "c"
    head = code_bundle(s.last_kernels, s.launches, namespace=s.namespace)["text/plain"]
    assert f"{inner.name} = block.scaled (elementwise)" in head


def test_the_cir_stages_before_and_after_the_passes(kernels):
    from zynbook.kernel.display import kernel_sections

    s, ks = kernels
    k, _ = ks[0]
    sections = dict(kernel_sections(k))
    assert list(sections)[:3] == ["zynml", "cir", "cir-passes"]
    # lowering writes the loop nest as written; the pass pipeline marks it parallel
    assert "parallel for" not in sections["cir"]
    assert "parallel for i" in sections["cir-passes"]
    text = code_bundle([k], s.launches, "cir-passes")["text/plain"]
    assert "--- cir-passes: the whole text ---" in text and "parallel for i" in text
    assert "stages: zynml (6 lines), cir (" in text and "cir-passes (" in text
    page = plain_html(sections["cir-passes"], "cir-passes", title="CIR after passes")
    assert "CIR after passes" in page and "parallel" in page


def test_the_launch_ir_stage_shows_the_schedule_the_device_target_gets(kernels):
    from zynbook.compiler.codegen import launch_ir_text
    from zynbook.kernel.display import kernel_sections
    _, ks = kernels
    reduce_k = ks[1][0]                                 # the reduce block, run on cpu
    # the reference executor runs no launch IR: its stage says so, not CUDA's program
    assert dict(kernel_sections(reduce_k))["launch-ir"].startswith(
        "// cpu (the reference executor) runs no launch IR")
    # no device: the CUDA target's view (as `zynbook source --lang launch-ir`)
    text = launch_ir_text(reduce_k.kernel, None, reduce_k.sizes)
    assert text.startswith("// target: cuda sm_90")
    assert "schedule: reduce(max)" in text and "launch zyn_k_reduce_l9<<<" in text
    assert "warp_reduce(max, _acc)" in text
    # the small matmul: the GEMM schedule
    gemm = ks[2][0]
    assert "schedule: contraction as GEMM: M=24 N=16 K=20" in launch_ir_text(
        gemm.kernel, None, gemm.sizes)
    # a kernel no schedule takes says why: a tile without a bound at the launch's sizes
    from compute_testing import lower_block
    src = """let y = compute(x, n) {
    @kernel fused
    for i in 0..rows:
        var t = zeros(n[i], 4)
        t = t + 1.0
        out[i] = sum(t)
}"""
    k, _, sizes, _ = lower_block(src, {"x": np.ones((3, 4), np.float32), "n": np.ones(3, np.int32)})
    text = launch_ir_text(k, None, sizes)
    assert "no schedule of compiler/schedules/ takes this kernel yet" in text
    assert "block: tile values: tile `t` has no bound" in text
