"""How ZynML values and errors look in a notebook (the ZynML kernel and the Python magics).

Tensors show their shape, dtype, device and a preview (an HTML table for small 2-D data);
errors become Jupyter errors whose traceback is the ZynML source line with a caret.
"""
from __future__ import annotations

import html

import numpy as np

from ..errors import ZynMLError

TABLE_MAX_ROWS = 16
TABLE_MAX_COLS = 16
PREVIEW_THRESHOLD = 200          # numpy summarises arrays with more elements than this


def is_tensor(value) -> bool:
    """A ZynBook tensor (duck-typed on the documented attributes, so views work too)."""
    try:
        from .. import Tensor
    except ImportError:
        Tensor = None
    if Tensor is not None and isinstance(value, Tensor):
        return True
    return all(hasattr(value, a) for a in ("shape", "dtype", "device", "numpy")) \
        and not isinstance(value, np.ndarray) and isinstance(getattr(value, "device"), str)


def shape_text(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def tensor_summary(t) -> str:
    """`f32[3, 4] on cpu`"""
    return f"{t.dtype}{shape_text(t.shape)} on {t.device}"


def _host(t) -> np.ndarray:
    return np.asarray(t.numpy())


def _preview(data: np.ndarray) -> str:
    """numpy's text of `data`, its booleans spelt as ZynML spells them (`true`, as the
    HTML table's cells are, not Python's `True`)."""
    return np.array2string(data, threshold=PREVIEW_THRESHOLD, edgeitems=3, max_line_width=100,
                           precision=6, formatter={"bool": lambda v: "true" if v else "false"})


def tensor_text(t) -> str:
    return f"Tensor {tensor_summary(t)}\n{_preview(_host(t))}"


def _cell(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    return html.escape(str(v))


_STYLE = ("<style>.zynml-tensor table{border-collapse:collapse;font-family:monospace;"
          "font-size:12px}.zynml-tensor td,.zynml-tensor th{border:1px solid #ccc;"
          "padding:1px 6px;text-align:right}.zynml-tensor th{background:#f3f3f3;"
          "color:#666;font-weight:normal}.zynml-tensor .zynml-meta{font-family:monospace;"
          "color:#444;margin-bottom:4px}</style>")


def tensor_html(t) -> str:
    data = _host(t)
    where = html.escape(t.device)
    if hasattr(t, "placement_text"):        # sharded across devices (or Dask workers)
        where = "sharded along " + html.escape(t.placement_text())
        link = getattr(t, "dashboard_link", "")
        if link:
            where += f" &middot; <a href='{html.escape(link)}' target='_blank'>Dask dashboard</a>"
    meta = (f"<div class='zynml-meta'><b>{html.escape(type(t).__name__)}</b> "
            f"{html.escape(t.dtype)}{html.escape(shape_text(t.shape))} &middot; {where}</div>")
    if data.ndim in (1, 2) and data.size and data.shape[0] <= TABLE_MAX_ROWS \
            and (data.ndim == 1 or data.shape[1] <= TABLE_MAX_COLS):
        rows = data.reshape(1, -1) if data.ndim == 1 else data
        if data.ndim == 1 and data.shape[0] > TABLE_MAX_COLS:
            rows = None
        if rows is not None:
            head = "<tr><th></th>" + "".join(f"<th>{j}</th>" for j in range(rows.shape[1])) \
                + "</tr>"
            body = "".join(
                "<tr><th>" + (str(i) if data.ndim == 2 else "") + "</th>"
                + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                for i, row in enumerate(rows))
            return f"<div class='zynml-tensor'>{_STYLE}{meta}<table>{head}{body}</table></div>"
    pre = html.escape(_preview(data))
    return f"<div class='zynml-tensor'>{_STYLE}{meta}<pre>{pre}</pre></div>"


def describe(value) -> str:
    """One line about a value: its type, and shape/dtype/device for tensors."""
    if is_tensor(value):
        return f"Tensor {tensor_summary(value)}"
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray {value.dtype}{shape_text(value.shape)} on cpu"
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "shape"):
        dev = getattr(getattr(value, "device", None), "id", 0)
        return f"{type(value).__module__}.{type(value).__name__} {value.dtype}" \
            f"{shape_text(value.shape)} on cuda:{dev}"
    if hasattr(value, "__dlpack__") and hasattr(value, "shape") and hasattr(value, "dtype"):
        # a torch (or other DLPack) array, as numpy's is (it was `Tensor: tensor([...])`,
        # the word ZynML's tensors are shown with)
        module = type(value).__module__.split(".")[0]
        return f"{module}.{type(value).__name__} {value.dtype}{shape_text(value.shape)} " \
            f"on {getattr(value, 'device', 'cpu')}"
    kind = type(value).__name__
    text = repr(value)
    if len(text) > 200:
        text = text[:200] + "..."
    return f"{kind}: {text}"


def bindable(value) -> bool:
    """Whether a Python value can become a ZynML value (the Session's env rules): ZynML's own
    values too (a record, a pipeline a cell made, under another Python name: `r2 = r`)."""
    if isinstance(value, (bool, int, float, str, list, tuple, dict, np.ndarray, np.generic)):
        return True
    from ..session import _zynml_value

    if _zynml_value(value):
        return True
    if isinstance(value, type) or callable(value) and not hasattr(value, "__dlpack__"):
        return False
    return any(hasattr(value, a) for a in ("__dlpack__", "__array__", "__array_interface__",
                                          "__cuda_array_interface__"))


def register_formatters(shell) -> None:
    """Show ZynBook tensors richly in `shell` (an IPython InteractiveShell)."""
    try:
        from .. import Tensor
    except ImportError:
        return
    formatters = shell.display_formatter.formatters
    formatters["text/plain"].for_type(Tensor, lambda t, p, cycle: p.text(tensor_text(t)))
    formatters["text/html"].for_type(Tensor, tensor_html)


# ------------------------------------------------------------------------------- errors

def error_evalue(err: ZynMLError) -> str:
    where = f" (line {err.line}, column {err.column})" if err.line > 0 else ""
    return f"{err.message}{where}"


def error_ename(err: ZynMLError) -> str:
    return type(err).__name__


_RED, _BOLD, _RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


def error_traceback(err: ZynMLError, color: bool = True) -> list[str]:
    """The Jupyter `traceback` lines of a ZynML error: the rendered error with its caret."""
    lines = err.render().splitlines()
    if color and lines:
        lines[0] = f"{_RED}{_BOLD}{lines[0]}{_RESET}"
        lines = [f"{_RED}{ln}{_RESET}" if ln.strip() and set(ln.strip()) == {"^"} else ln
                 for ln in lines]
    return lines


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"


def compile_text(seconds: float | None) -> str:
    """A launch's compile time; '-' where nothing was compiled (the CPU reference, a kernel
    from the cache)."""
    return format_seconds(seconds) if seconds else "-"


def launch_kernel(launch, kernels):
    """The CompiledKernel of a launch (the one made for it, else one of the same name)."""
    for k in kernels:
        if getattr(k, "launch", None) is launch:
            return k
    for k in kernels:
        if getattr(k, "name", None) == launch.kernel:
            return k
    return None


def launch_rates(launch, kernels=()):
    """(Cost or None, Rates) of one launch: FLOPs and bytes from its kernel's loop nest and
    sizes, against its kernel time and its device's peak."""
    from .costs import device_info, launch_cost, rates

    k = launch_kernel(launch, kernels)
    cost = launch_cost(k) if k is not None else None
    return cost, rates(cost, launch.times.kernel, device_info(launch.device))


def launch_table(launches, kernels=()) -> str:
    """Per-launch times as text rows, with GFLOP/s, GB/s and the share of the device's peak
    where the launch's kernel is known (`kernels`: the CompiledKernels of the run)."""
    from .costs import format_rate, format_share

    rows = [f"{'launch':<24} {'device':<10} {'compile':>9} {'upload':>9} {'kernel':>9} "
            f"{'download':>9} {'GFLOP/s':>9} {'GB/s':>8} {'% peak':>7}  clock"]
    notes = set()
    for ln in launches:
        t = ln.times
        _, r = launch_rates(ln, kernels)
        if r.peak_source:
            notes.add(f"{ln.device}: peak {r.peak_source}")
        share = format_share(r.peak_share) + (f" {r.bound[0]}" if r.bound else "")
        rows.append(f"{ln.kernel:<24} {ln.device:<10} {compile_text(t.compile):>9} "
                    f"{format_seconds(t.upload):>9} {format_seconds(t.kernel):>9} "
                    f"{format_seconds(t.download):>9} {format_rate(r.gflops, ''):>9} "
                    f"{format_rate(r.gbytes, ''):>8} {share:>7}  {t.source}")
    if notes:
        rows.append("% peak: of the bound resource (c = FP32 compute, m = memory bandwidth); "
                    + "; ".join(sorted(notes)))
    return "\n".join(rows)


def sample_stats(samples) -> dict:
    """median, min, max, q1, q3 of a list of seconds."""
    xs = sorted(x for x in samples if x is not None)
    if not xs:
        return {}

    def q(p):
        pos = (len(xs) - 1) * p
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
    return {"median": q(0.5), "min": xs[0], "max": xs[-1], "q1": q(0.25), "q3": q(0.75),
            "n": len(xs)}


def kernel_rates_table(samples: dict, launches, kernels) -> str:
    """Text rows per (kernel, device) of `samples` (lists of kernel seconds): the median
    and interquartile range, GFLOP/s, GB/s and the share of the device's peak at the
    median."""
    from .costs import device_info, format_rate, format_share, launch_cost, rates

    rows = [f"{'kernel':<24} {'device':<10} {'median':>9} {'IQR':>19} {'GFLOP/s':>9} "
            f"{'GB/s':>8} {'% peak':>9}"]
    for (name, device), xs in samples.items():
        st = sample_stats(xs)
        ln = next((ln for ln in launches if ln.kernel == name and ln.device == device), None)
        k = launch_kernel(ln, kernels) if ln is not None else None
        cost = launch_cost(k) if k is not None else None
        r = rates(cost, st["median"], device_info(device))
        iqr = f"{format_seconds(st['q1'])} .. {format_seconds(st['q3'])}"
        share = format_share(r.peak_share) + (f" {r.bound}" if r.bound else "")
        rows.append(f"{name:<24} {device:<10} {format_seconds(st['median']):>9} {iqr:>19} "
                    f"{format_rate(r.gflops, ''):>9} {format_rate(r.gbytes, ''):>8} "
                    f"{share:>9}")
    return "\n".join(rows)


class ShortValue:
    """Stands in for an exception value where only its short text is wanted (the `evalue`
    of a Jupyter error message)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def normalize_source(text: str) -> str:
    return "\n".join(ln.rstrip() for ln in text.strip().splitlines())


def kernel_sections(kernel, language: str = "") -> list[tuple[str, str]]:
    """(title, text) sections for a compiled kernel: the blocks fused into it and why
    adjacent ones were not (when the lazy graph launched it), ZynML, CIR (as lowered), CIR
    after the passes (what the devices run), the launch IR its schedule builds, then each
    generated source."""
    fused = getattr(kernel, "fusion_text", "") or ""
    out = [("fusion", fused)] if fused else []
    out += [("zynml", getattr(kernel, "zynml", "") or ""),
           ("cir", getattr(kernel, "lowered_cir_text", "") or getattr(kernel, "cir_text", "")
            or ""),
           ("cir-passes", getattr(kernel, "cir_text", "") or ""),
           ("launch-ir", getattr(kernel, "launch_ir_text", "") or "")]
    try:
        sources = kernel.sources()
    except Exception as err:  # a renderer that fails must not hide the others
        sources = {"error": f"{type(err).__name__}: {err}"}
    out += [(lang, _text_of(src)) for lang, src in sources.items()]
    if language:
        out = [s for s in out if s[0] == language] or out
    return out


def _text_of(source) -> str:
    """Generated code as text (a renderer may hand back an object that carries its text)."""
    if isinstance(source, str):
        return source
    text = getattr(source, "source", None)
    return text if isinstance(text, str) else str(source)


# the generated code a device runs, by device kind
DEVICE_LANGUAGE = (("cpu:native", "c"), ("cpu", "python"), ("cuda", "cuda"),
                   ("vulkan", "wgsl"), ("webgpu", "wgsl"), ("metal", "msl"))
STAGES = ("fusion", "zynml", "cir", "cir-passes", "launch-ir")


def device_language(device: str) -> str:
    """The language of the code `device` runs (`cuda:0` -> `cuda`), '' if unknown."""
    for prefix, lang in DEVICE_LANGUAGE:
        if device == prefix or device.startswith(prefix + ":") and prefix != "cpu":
            return lang
    return ""


class InspectUsageError(ValueError):
    """`%inspect WHAT` named neither a kernel nor a language."""


def parse_inspect_args(args: str) -> tuple[str, bool]:
    """`cuda --full` -> ("cuda", True); `reduce_l7 wgsl` -> ("reduce_l7 wgsl", False) (a
    kernel and a language, see `_choose`)."""
    words = args.split()
    full = any(w in ("--full", "-f", "--all") for w in words)
    rest = [w for w in words if w not in ("--full", "-f", "--all")]
    return " ".join(rest), full


def _choose(kernels, want: str):
    """(kernels to show, language or '') for `%inspect want`: `want` is up to a kernel name
    and a language, in either order (`reduce_l7 wgsl`); InspectUsageError if a word names
    neither a kernel nor a language of them, or two languages."""
    chosen, language, languages = [], "", None
    for word in want.split():
        picked = [k for k in kernels if getattr(k, "name", "") == word]
        if picked:
            chosen += [k for k in picked if k not in chosen]
            continue
        if languages is None:
            languages = list(STAGES)
            for k in kernels:
                try:
                    languages += [lang for lang in k.sources() if lang not in languages]
                except Exception:  # a renderer that fails must not hide the others
                    pass
        if word in languages and not language:
            language = word
            continue
        if word in languages:
            raise InspectUsageError(f"one language at a time: `{language}` and `{word}`")
        names = ", ".join(getattr(k, "name", "?") for k in kernels)
        raise InspectUsageError(
            f"`{word}` is neither a language nor a kernel of the last compute cell; "
            f"languages: {', '.join(languages)}; kernels: {names}")
    return (chosen or list(kernels)), language


def _kernel_launches(kernel, launches):
    return [ln for ln in launches if ln.kernel == getattr(kernel, "name", "")]


def kernel_label(kernel, namespace: dict | None = None) -> str:
    """A name a reader can map back to the program: `transformer_block.qkv` for the block
    bound to `qkv` in pipeline `transformer_block` (a pipeline of `namespace` whose text holds
    the block), `C` for `let C = compute(...)` at the top level; '' when the block is bound
    to no name."""
    import re

    text = getattr(kernel, "zynml", "") or ""
    m = re.match(r"\s*(?:let|var)\s+\(?\s*([A-Za-z_]\w*)", text)
    if not m:
        return ""
    var = m.group(1)
    line = getattr(getattr(kernel, "kernel", None), "first_line", 0)
    for value in (namespace or {}).values():
        node = getattr(value, "node", None)
        span = getattr(node, "span", None)
        source = getattr(value, "source", None)
        if node is None or span is None or not isinstance(source, str) \
                or type(node).__name__ != "Pipeline":
            continue
        if span.line <= line <= (span.end_line or span.line) and text.strip() in source:
            return f"{value.name}.{var}"
    return var


def kernel_summary(kernel, launches=(), namespace: dict | None = None) -> str:
    """`matmul_l3 (matmul) on cuda:0 grid=(3, 2), block=(16, 16) · ZynML line 3`"""
    head = f"{kernel.name}"
    label = kernel_label(kernel, namespace)
    if label:
        head += f" = {label}"
    kt = getattr(getattr(kernel, "kernel", None), "kernel_type", None)
    if kt is not None:
        head += f" ({kt.kind})"
    mine = _kernel_launches(kernel, launches)
    if getattr(kernel, "note", ""):       # no launch: why
        head += f" on {kernel.device.id} ({kernel.note})"
    elif mine:
        head += f" on {mine[-1].device}"
        if mine[-1].geometry:
            head += " " + ", ".join(f"{a}={b}" for a, b in mine[-1].geometry.items())
        if len(mine) > 1:
            head += f", {len(mine)} launches"
    line = getattr(getattr(kernel, "kernel", None), "first_line", 0)
    if line:
        head += f" · ZynML line {line}"
    return head


def default_language(kernel, launches, sources: dict) -> str:
    """The language of the device the kernel last ran on, else the first generated one."""
    mine = _kernel_launches(kernel, launches)
    device = mine[-1].device if mine else getattr(getattr(kernel, "device", None), "id", "")
    lang = device_language(device) if device else ""
    if lang in sources:
        return lang
    return next(iter(sources), "cir")


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def code_bundle(kernels, launches=(), want: str = "", full: bool = False,
                namespace: dict | None = None) -> dict:
    """A display bundle (text/plain and text/html) of kernels' generated code: for each
    kernel a summary, the stages there are (with their sizes), and the code of one language
    (`want`, else the one of the device it ran on), starting at the kernel with only the
    helpers it uses (`full`: the whole text). The HTML puts the ZynML block beside it with
    each ZynML line linked to the lines it became. `want` naming neither a kernel nor a
    language raises InspectUsageError."""
    from .codeview import mapped_html, split_source

    chosen, language = _choose(kernels, want)
    plain, rich = [], []
    for k in chosen:
        sections = dict(kernel_sections(k))
        generated = {t: v for t, v in sections.items() if t not in STAGES}
        lang = language or default_language(k, launches, generated)
        text = sections.get(lang, "")
        sp = split_source(text, lang)
        stage_list = ", ".join(f"{t} ({_lines(len(v.splitlines()))})"
                               for t, v in sections.items())
        head = kernel_summary(k, launches, namespace)
        plain.append(head)
        plain.append(f"stages: {stage_list}")
        if lang not in sections:
            # (a stage some kernels have: `fusion` where a block met another; it showed
            # as an empty text)
            shown = ""
            note = f"--- {lang}: none for {k.name} (its stages are listed above) ---"
        elif full or lang in STAGES:
            shown = text
            note = f"--- {lang}: the whole text ---"
        else:
            shown = sp.kernel_text()
            left = len(text.splitlines()) - len(shown.splitlines())
            note = f"--- {lang}: the kernel" + (
                f" ({_lines(left)} of helpers it does not use left out; --full shows all)"
                if left > 0 else "") + " ---"
        plain.append(note)
        plain.append(shown.rstrip("\n"))
        zynml = sections.get("zynml", "")
        first = getattr(getattr(k, "kernel", None), "first_line", 0) or 1
        rich.append(f"<div class='zynml-inspect' data-kernel='{html.escape(k.name)}'>"
                    f"<h4 style='margin:6px 0 2px'>{html.escape(head)}</h4>"
                    f"<div style='font-size:12px;color:#555'>stages: "
                    f"{html.escape(stage_list)}</div>"
                    + (mapped_html("" if lang == "zynml" else zynml, first, text, lang,
                                   title=lang, fold_helpers=not full) if lang in sections
                       else f"<p><i>{html.escape(note.strip('- '))}</i></p>")
                    + "</div>")
    return {"text/plain": "\n".join(plain), "text/html": "\n".join(rich)}


def show_error(shell, etype, value, tb, tb_offset=None):
    """IPython custom exception handler: a ZynML error as its source line and caret (no
    Python stack), an interrupt as one line."""
    if isinstance(value, KeyboardInterrupt):
        stb = ["\x1b[31mKeyboardInterrupt\x1b[0m: the cell was interrupted"]
    else:
        stb = error_traceback(value)
        value = ShortValue(error_evalue(value))
    shell._showtraceback(etype, value, stb)
    return stb
