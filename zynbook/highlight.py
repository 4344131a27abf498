"""Syntax highlighting of ZynML for Pygments (nbconvert, the inspector widget, Sphinx).

Registered under the `pygments.lexers` entry point as `zynml`, so `get_lexer_by_name("zynml")`
finds it once the package is installed; `lexer_for(language)` below also finds it without the
entry point and maps the languages of generated code to Pygments lexers.
"""
from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

__all__ = ["ZynMLLexer", "KEYWORDS", "KERNEL_TYPES", "ANNOTATIONS", "lexer_for",
           "highlight_html", "highlight_css"]

KEYWORDS = ("let", "var", "for", "in", "if", "elif", "else", "pipeline", "return", "yield",
            "await", "timeout", "compute", "config", "shared", "step", "and", "or", "not",
            "true", "false")
KERNEL_TYPES = ("elementwise", "reduce", "matmul", "batched_matmul", "conv2d",
                "conv2d_depthwise", "attention", "flash_attention", "fused")
ANNOTATIONS = ("kernel", "device", "async", "workgroup", "shared", "tile", "broadcast",
               "parallel", "autotune", "nofuse")
TYPE_NAMES = ("tensor", "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16",
              "u32", "u64", "bool", "int", "float", "str", "float16", "float32", "float64",
              "int32", "int64")
BUILTIN_FUNCTIONS = (
    "sin", "cos", "tan", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor", "ceil",
    "round", "tanh", "sinh", "cosh", "sigmoid", "relu", "silu", "gelu", "erf", "pow", "min",
    "max", "clamp", "transpose", "row_max", "row_sum", "zeros", "ones", "sum", "dot", "reduce",
    "barrier", "compute_devices", "allocate", "memory_pool", "all", "any", "split", "reshape",
    "len", "print", "range")


class ZynMLLexer(RegexLexer):
    """ZynML: `let`/`compute` programs with `@annotations` and `//` comments."""

    name = "ZynML"
    aliases = ["zynml", "zyn"]
    filenames = ["*.zyn"]
    mimetypes = ["text/x-zynml"]
    url = "https://github.com/zynbook/zynbook"

    tokens = {
        "root": [
            (r"\n", Whitespace),
            (r"[ \t\f]+", Whitespace),
            (r"\\\n", Text),
            (r"//.*?$", Comment.Single),
            # line magics of the ZynML kernel (%device cuda:0, %%python)
            (r"^%%?[A-Za-z_]\w*.*?$", Comment.Preproc),
            (r"(@kernel)(\s+)([A-Za-z_]\w*)",
             bygroups(Name.Decorator, Whitespace, Name.Builtin.Pseudo)),
            (r"@[A-Za-z_]\w*", Name.Decorator),
            (r"(pipeline)(\s+)([A-Za-z_]\w*)", bygroups(Keyword, Whitespace, Name.Function)),
            (words(("true", "false", "inf"), suffix=r"\b"), Keyword.Constant),
            (words(("let", "var", "config", "shared"), suffix=r"\b"), Keyword.Declaration),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(TYPE_NAMES, prefix=r"(?<![.\w])", suffix=r"\b(?=\s*[\[,)=\]>]|\s*$)"),
             Keyword.Type),
            (words(BUILTIN_FUNCTIONS, prefix=r"(?<![.\w])", suffix=r"\b(?=\s*\()"),
             Name.Builtin),
            (r"\bout\b", Name.Builtin.Pseudo),
            (r"\d+(\.\d+)?(ms|us|ns|s)\b", Number.Float),
            (r"\d+(KB|MB|GB|TB|KiB|MiB|GiB|TiB|B)\b", Number.Integer),
            (r"\d+\.\d+([eE][-+]?\d+)?|\d+[eE][-+]?\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r'"([^"\\\n]|\\.)*"', String.Double),
            (r"'([^'\\\n]|\\.)*'", String.Single),
            (r"\.\.\.|\.\.", Operator),
            (r"\|>|->|\*\*|[-+*/%]=|==|!=|<=|>=|[-+*/%@^<>=]", Operator),
            (r"[()\[\]{}:,.]", Punctuation),
            (r"[A-Za-z_]\w*", Name),
        ],
    }


# languages of CompiledKernel.sources() (and the inspector's own tabs) -> Pygments lexer names
_LEXER_NAMES = {
    "zynml": None, "cir": None, "python": "python", "numpy": "python", "c": "c",
    "numba": "python", "cuda": "cuda", "wgsl": "wgsl", "msl": "cpp", "metal": "cpp",
    "ptx": None, "spirv": None, "launch-ir": None,
}


def lexer_for(language: str):
    """A Pygments lexer instance for a generated-code language (plain text if unknown)."""
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    lang = language.lower()
    if lang in ("zynml", "cir", "cir-passes"):
        return ZynMLLexer()
    name = _LEXER_NAMES.get(lang, lang)
    if name is None:
        return TextLexer()
    try:
        return get_lexer_by_name(name)
    except ClassNotFound:
        return TextLexer()


def highlight_html(code: str, language: str, css_class: str = "zynml-hl") -> str:
    """`code` as highlighted HTML (a <div class=css_class> with inline-free classes)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    return highlight(code, lexer_for(language), HtmlFormatter(cssclass=css_class, nowrap=False))


def highlight_css(css_class: str = "zynml-hl") -> str:
    """The stylesheet for `highlight_html` output."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(cssclass=css_class).get_style_defs(f".{css_class}")
