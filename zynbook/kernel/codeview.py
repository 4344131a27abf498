"""Reading generated code: the kernel first, helpers it does not use folded away, and each
ZynML line linked to the generated lines it became.

Generated sources open with a header comment, then a library of helpers (min/max that
propagate NaN, the error flag, block reductions, ...), then the kernel. `split_source`
cuts a source into those parts and finds which helpers the kernel calls (directly or through
other helpers); `line_map` reads the `// line N: ...` comments the renderers put before the
code of ZynML line N (and, for the CPU reference in Python, the ZynML text each line carries
as a trailing comment).

`mapped_html` draws the ZynML block beside one generated source: hovering or clicking a
ZynML line highlights the lines it became (and the other way round), helpers the kernel does
not use sit in a collapsed section, the code scrolls inside a fixed height and a button
copies the whole text. It is plain HTML and CSS (`:has()` and radio buttons), so it works
in notebook outputs and in widgets without scripts; the button's copy uses an inline handler.
"""
from __future__ import annotations

import html
import itertools
import re
from dataclasses import dataclass, field

CODE_HEIGHT_PX = 420

# where the kernel itself starts, per language (the first line that matches)
_ENTRY = {
    "cuda": re.compile(r"__global__"),
    "msl": re.compile(r"^\s*(\[\[[^\]]*\]\]\s*)?kernel\s+void\b"),
    "metal": re.compile(r"^\s*kernel\s+void\b"),
    "wgsl": re.compile(r"^@compute\b"),
    "c": re.compile(r'^extern\s+"C"'),
    "python": re.compile(r"^def\s"),
}
_LINE_COMMENT = re.compile(r"^\s*(?://|#)\s*line\s+(\d+)\s*:")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DEFINES = [
    re.compile(r"^#define\s+(\w+)"),
    re.compile(r"^(?:template\s*<[^>]*>\s*)?\s*struct\s+(\w+)"),
    re.compile(r"^\s*fn\s+(\w+)"),
    re.compile(r"^\s*(?:@[^;]*?\s)?var(?:<[^>]*>)?\s+(\w+)"),
    re.compile(r"^\s*(?:const|override|alias)\s+(\w+)"),
]
_KEYWORDS = {"if", "for", "while", "return", "sizeof", "template", "typename", "inline",
             "static", "const", "constexpr", "operator", "struct", "unsigned", "void", "int",
             "float", "double", "bool", "long", "T", "I", "Op"}


@dataclass
class Chunk:
    """Top-level lines of a generated source: one helper definition (with the comments just
    above it), or lines that define nothing (includes, blank lines)."""
    start: int                      # 0-based index of the first line
    lines: list
    name: str = ""                  # what it defines ('' for none)

    @property
    def end(self) -> int:
        return self.start + len(self.lines)


@dataclass
class SplitSource:
    lines: list
    header: list = field(default_factory=list)       # Chunks before the helpers (comments)
    helpers: list = field(default_factory=list)      # Chunks between header and kernel
    kernel_start: int = 0                            # 0-based line where the kernel starts
    used: set = field(default_factory=set)           # names of helpers the kernel needs

    def unused(self) -> list:
        return [c for c in self.helpers if c.name and c.name not in self.used]

    def kept_helpers(self) -> list:
        return [c for c in self.helpers if not c.name or c.name in self.used]

    def kernel_text(self) -> str:
        """The header, the kernel, then the helpers it uses (and includes): what a reader
        needs, the kernel first."""
        out = [ln for c in self.header for ln in c.lines]
        if out and out[-1].strip():
            out.append("")
        out += [ln.rstrip() for ln in self.lines[self.kernel_start:]]
        while out and not out[-1].strip():
            out.pop()
        kept = [ln for c in self.kept_helpers() for ln in c.lines if ln.strip()]
        if kept:
            out += ["", f"// ---- before the kernel in the file: includes and the helpers it "
                        f"uses ({len(kept)} lines) ----"] + kept
        return "\n".join(out).rstrip("\n") + "\n"


def _defined_name(first: str) -> str:
    for rx in _DEFINES:
        m = rx.match(first)
        if m:
            return m.group(1)
    if "(" in first:
        before = first[:first.index("(")]
        names = [n for n in _IDENT.findall(before) if n not in _KEYWORDS]
        if names and not first.lstrip().startswith(("#", "//", "@")):
            return names[-1]
    return ""


def _chunks(lines: list, start: int, end: int) -> list:
    """Cut lines[start:end] into top-level chunks by brace depth; comment lines go with the
    definition that follows them."""
    out: list = []
    pending: list = []              # comment lines waiting for their definition
    pending_start = start
    i = start
    while i < end:
        line = lines[i]
        s = line.strip()
        if s.startswith("//") or s.startswith("#") and not s.startswith("#define") \
                and not s.startswith("#include") and not s.startswith("#pragma") \
                and not s.startswith("#if") and not s.startswith("#endif"):
            if not pending:
                pending_start = i
            pending.append(line)
            i += 1
            continue
        if not s:
            if pending:
                out.append(Chunk(pending_start, pending))
                pending = []
            out.append(Chunk(i, [line]))
            i += 1
            continue
        j, depth, body = i, 0, []
        while j < end:
            body.append(lines[j])
            depth += lines[j].count("{") - lines[j].count("}")
            j += 1
            t = lines[j - 1].rstrip()
            if depth <= 0 and (t.endswith(("}", ";")) or t.startswith("#")
                               or "{" not in "".join(body) and not t.endswith(",")):
                break
        first = body[0]
        name = _defined_name(first)
        if pending:
            out.append(Chunk(pending_start, pending + body, name))
            pending = []
        else:
            out.append(Chunk(i, body, name))
        i = j
    if pending:
        out.append(Chunk(pending_start, pending))
    return out


def kernel_start(text: str, language: str) -> int:
    """0-based line where the kernel starts (with the comments right above it), 0 if the
    language has no helpers to skip."""
    rx = _ENTRY.get(language)
    if rx is None:
        return 0
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if rx.search(ln):
            j = i
            while j > 0 and (lines[j - 1].strip().startswith("//")
                             or lines[j - 1].strip().startswith("@")):
                j -= 1
            # the file's own header comment is not the kernel's
            return j if j > 0 or i == 0 else i
    return 0


def split_source(text: str, language: str) -> SplitSource:
    lines = text.splitlines()
    start = kernel_start(text, language)
    sp = SplitSource(lines, kernel_start=start)
    if start == 0:
        return sp
    h = 0
    while h < start and lines[h].strip().startswith("//"):
        h += 1
    if h:
        sp.header = [Chunk(0, lines[:h])]
    sp.helpers = _chunks(lines, h, start)
    named: dict = {}
    for c in sp.helpers:            # overloads share a name: all of them stay together
        if c.name:
            named.setdefault(c.name, []).append(c)
    # names the kernel uses, then the helpers those helpers use
    todo = set(_IDENT.findall("\n".join(lines[start:])))
    for c in sp.helpers:            # chunks that define nothing (includes) always stay
        if not c.name:
            todo |= set(_IDENT.findall("\n".join(c.lines)))
    used: set = set()
    while todo:
        name = todo.pop()
        if name in named and name not in used:
            used.add(name)
            body = "\n".join(ln for c in named[name] for ln in c.lines)
            todo |= set(_IDENT.findall(body)) - used
    sp.used = used
    return sp


# ------------------------------------------------------------------------- line mapping

def line_map(text: str, language: str, zynml: str = "", first_line: int = 1) -> dict:
    """{0-based generated line: ZynML line number} for the lines that come from a ZynML
    line. C-like sources and WGSL carry `// line N: ...` comments: the lines after one, at
    its indentation or deeper, belong to line N (a closing brace belongs to the enclosing
    line again). The Python reference ends each line with the ZynML text it came from."""
    lines = text.splitlines()
    out: dict = {}
    if language == "python" and zynml:
        by_text: dict = {}
        for n, zl in enumerate(zynml.splitlines(), start=first_line):
            key = zl.strip()
            if key and key not in by_text:
                by_text[key] = n
        for i, ln in enumerate(lines):
            if "  # " in ln:
                tail = ln.rsplit("  # ", 1)[1].strip()
                if tail in by_text:
                    out[i] = by_text[tail]
        return out
    stack: list = []                 # (indent, ZynML line)
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        indent = len(ln) - len(ln.lstrip())
        m = _LINE_COMMENT.match(ln)
        if m:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, int(m.group(1))))
            out[i] = stack[-1][1]
            continue
        while stack and stack[-1][0] > indent:
            stack.pop()
        if stack:
            out[i] = stack[-1][1]
    return out


# --------------------------------------------------------------------------------- HTML

_uid = itertools.count(1)

MAP_CSS = """
.zynml-map{font-family:var(--jp-code-font-family,monospace);font-size:12px;line-height:1.45;
 width:100%%;max-width:100%%;box-sizing:border-box;min-width:0}
.widget-html-content:has(> .zynml-map){min-width:0;max-width:100%%;flex:1 1 auto}
.zynml-map .zm-bar{display:flex;gap:10px;align-items:center;margin:2px 0 4px;color:#555}
.zynml-map .zm-copy{font-size:11px;padding:1px 8px;cursor:pointer}
.zynml-map .zm-panes{display:flex;gap:10px;align-items:flex-start;width:100%%}
.zynml-map .zm-src,.zynml-map .zm-gen{overflow:auto;max-height:%dpx;border:1px solid #ddd;
 border-radius:3px;background:var(--jp-layout-color0,#fff)}
.zynml-map .zm-src{flex:0 0 36%%;min-width:0;max-width:36%%}
.zynml-map .zm-gen{flex:1 1 0;min-width:0}
.zynml-map .zm-only{flex:1 1 100%%}
.zynml-map .zm-line{white-space:pre;padding:0 6px 0 0;display:block}
.zynml-map label.zm-line{cursor:pointer}
.zynml-map .zm-n{display:inline-block;width:3.2em;color:#999;text-align:right;
 margin-right:8px;user-select:none}
.zynml-map .zm-mapped .zm-n{color:#6a8fd0}
.zynml-map input.zm-pick{display:none}
.zynml-map details{margin:0}
.zynml-map summary{color:#777;cursor:pointer;padding:1px 6px;background:#f6f6f6;
 font-style:italic}
.zynml-map .zm-summary{color:#555;margin:0 0 3px}
""" % CODE_HEIGHT_PX


def _highlight_lines(text: str, language: str) -> list:
    """Each line of `text` as highlighted HTML (Pygments closes its spans at line ends)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    from ..highlight import lexer_for

    if not text:
        return []
    out = highlight(text, lexer_for(language), HtmlFormatter(nowrap=True))
    lines = out.split("\n")
    want = len(text.splitlines())
    lines = lines[:want] + [""] * (want - len(lines))
    return lines


def _pygments_css() -> str:
    from ..highlight import highlight_css

    return highlight_css("zynml-map")


def _line_html(uid: str, n: int, code_html: str, zline: int | None, pickable: bool) -> str:
    if zline is None:
        return f"<span class='zm-line'><span class='zm-n'>{n}</span>{code_html or ' '}</span>"
    attrs = f"class='zm-line zm-mapped' data-l='{zline}'"
    tag = "label" if pickable else "span"
    extra = f" for='{uid}-r{zline}'" if pickable else ""
    return (f"<{tag} {attrs}{extra} title='ZynML line {zline}'><span class='zm-n'>{n}"
            f"</span>{code_html or ' '}</{tag}>")


def _map_rules(uid: str, zlines) -> str:
    rules = []
    for z in sorted(set(zlines)):
        sel = f"[data-l='{z}']"
        rules.append(f"#{uid}:has(.zm-line{sel}:hover) .zm-line{sel},"
                     f"#{uid}:has(#{uid}-r{z}:checked) .zm-line{sel}"
                     f"{{background:#fff2a8}}")
    return "\n".join(rules)


def mapped_html(zynml: str, first_line: int, generated: str, language: str,
                title: str = "", fold_helpers: bool = True, height: int = CODE_HEIGHT_PX) -> str:
    """The ZynML block beside `generated` (see the module docstring); `first_line`: the
    block's line in its cell, so that the numbers match the `// line N` comments."""
    uid = f"zynml-map-{next(_uid)}"
    gen_lines = generated.splitlines()
    mapping = line_map(generated, language, zynml, first_line) if zynml else {}
    zlines_mapped = set(mapping.values())
    parts = [f"<div class='zynml-map' id='{uid}' data-language='{html.escape(language)}'>",
             f"<style>{MAP_CSS}\n{_pygments_css()}\n{_map_rules(uid, zlines_mapped)}</style>"]
    if height != CODE_HEIGHT_PX:
        parts.append(f"<style>#{uid} .zm-src,#{uid} .zm-gen{{max-height:{height}px}}</style>")
    # radio buttons for click-to-pin (one per mapped ZynML line, and one to clear)
    parts += [f"<input type='radio' class='zm-pick' name='{uid}' id='{uid}-r{z}'>"
              for z in sorted(zlines_mapped)]
    n_lines = len(gen_lines)
    sp = split_source(generated, language) if fold_helpers else SplitSource(gen_lines)
    unused = sp.unused()
    summary = f"{n_lines} lines"
    if unused:
        hidden = sum(len(c.lines) for c in unused)
        summary += f", {hidden} of them helpers this kernel does not use (folded)"
    if zlines_mapped:
        summary += " · hover or click a ZynML line to see the lines it became"
    copy_js = ("var t=this.closest('.zynml-map').querySelector('textarea.zm-text');"
               "navigator.clipboard.writeText(t.value);this.textContent='copied';"
               "var b=this;setTimeout(function(){b.textContent='copy'},1500)")
    parts.append(f"<div class='zm-bar'>{'<b>' + html.escape(title) + '</b>' if title else ''}"
                 f"<span class='zm-summary'>{html.escape(summary)}</span>"
                 f"<button class='zm-copy' data-copy='{uid}' onclick=\"{copy_js}\">copy"
                 f"</button></div>")
    parts.append(f"<textarea class='zm-text' hidden readonly>{html.escape(generated)}"
                 f"</textarea>")
    parts.append("<div class='zm-panes'>")
    if zynml:
        z_html = _highlight_lines(zynml, "zynml")
        rows = []
        for k, code in enumerate(z_html):
            n = first_line + k
            rows.append(_line_html(uid, n, code, n if n in zlines_mapped else None, True))
        parts.append(f"<div class='zm-src'>{''.join(rows)}</div>")
    g_html = _highlight_lines(generated, language)
    def line(k: int) -> str:
        return _line_html(uid, k + 1, g_html[k] if k < len(g_html) else "", mapping.get(k),
                          bool(zynml))

    def folded(title: str, ks: list) -> str:
        inner = "".join(line(k) for k in ks)
        return f"<details><summary>{html.escape(title)}</summary>{inner}</details>"

    body = []
    if fold_helpers and sp.kernel_start > 0:
        # the header comment, then the kernel, then what comes before it in the file: the
        # helpers it uses (and includes), and, apart, the helpers it does not use
        head = len(sp.header[0].lines) if sp.header else 0
        body += [line(k) for k in range(head)]
        body += [line(k) for k in range(sp.kernel_start, n_lines)]
        unused_lines = {k for c in unused for k in range(c.start, c.end)}
        kept = [k for k in range(head, sp.kernel_start)
                if k not in unused_lines and gen_lines[k].strip()]
        if kept:
            names = [c.name for c in sp.kept_helpers() if c.name]
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            body.append(folded(f"{len(kept)} lines before the kernel: includes and the "
                               f"helpers it uses" + (f" ({shown})" if shown else ""), kept))
        if unused:
            names = list(dict.fromkeys(c.name for c in unused))
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            body.append(folded(f"{len(unused_lines)} lines: helpers not used by this kernel "
                               f"({shown})", sorted(unused_lines)))
    else:
        body += [line(k) for k in range(n_lines)]
    cls = "zm-gen" if zynml else "zm-gen zm-only"
    # open at the kernel: the header and used helpers are short, the kernel is what matters
    parts.append(f"<div class='{cls}'>{''.join(body)}</div>")
    parts.append("</div></div>")
    return "".join(parts)


def plain_html(text: str, language: str, title: str = "", height: int = CODE_HEIGHT_PX) -> str:
    """A source without ZynML beside it (CIR, the ZynML tab): numbered lines, fixed height,
    copy button."""
    return mapped_html("", 1, text, language, title, fold_helpers=False, height=height)
