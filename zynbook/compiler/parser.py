"""Parse ZynML text into the syntax tree of `ast.py`.

lark does the parsing (LALR, `grammar.lark`); `BlockIndenter` turns indentation into
_INDENT/_DEDENT tokens. Unlike Python's rules, a `{` opens a fresh indentation context
whose base is the indentation of its first line, so compute bodies may sit at any depth
(inside a list literal, a pipeline or a call) and `}` closes whatever is still open.
"""
from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                             UnexpectedToken, VisitError)

from ..errors import Span, ZynMLError, ZynMLSyntaxError, source_lines
from . import ast as A

_GRAMMAR = Path(__file__).with_name("grammar.lark")


class BlockIndenter:
    """Post-lexer: newline handling and indentation tokens (see the module docstring)."""

    always_accept = ("_NL",)

    def process(self, stream):
        # each context: [opening bracket, indentation levels or None before its first line,
        #                a line left of the block's base waiting for its `}`, the opener,
        #                the indentation of the line the opener is on]
        contexts = [["", [0], None, None, 0]]
        last = None
        line_indent = 0         # of the (physical) line being read
        for tok in stream:
            if tok.type == "_NL":
                opens_suite = last is not None and last.type == "COLON"
                line_indent = self._indent_of(tok)
                if contexts[-1][0] in ("(", "["):
                    continue
                yield from self._newline(tok, contexts, opens_suite)
                last = tok
                continue
            pending = contexts[-1][2]
            if pending is not None:
                if tok.type != "RBRACE":
                    opener = contexts[-1][3]
                    raise ZynMLSyntaxError(
                        "this line is indented left of its block; close the block with `}` "
                        "first", pending,
                        notes=((f"the `{{` on line {opener.line} is still open",
                                _tok_span(opener)),))
                contexts[-1][2] = None
            if tok.type in ("LPAR", "LSQB", "LBRACE"):
                contexts.append([tok.value, None, None, tok, line_indent])
            elif tok.type in ("RPAR", "RSQB", "RBRACE") and len(contexts) > 1:
                ctx = contexts.pop()
                for _ in (ctx[1] or [0])[1:]:
                    yield Token.new_borrow_pos("_DEDENT", "", tok)
            yield tok
            last = tok
        # end of input: a bracket still open is the mistake to point at
        if len(contexts) > 1:
            opener = contexts[-1][3]
            closer = {"(": ")", "[": "]", "{": "}"}[opener.value]
            raise ZynMLSyntaxError(f"unexpected end of input: this `{opener.value}` is never "
                                   f"closed (the source ends before its `{closer}`)",
                                   _tok_span(opener))
        # close the last line and every open level
        if last is not None:
            if last.type != "_NL":
                yield Token.new_borrow_pos("_NL", "\n", last)
            for _ in contexts[0][1][1:]:
                yield Token.new_borrow_pos("_DEDENT", "", last)

    @staticmethod
    def _indent_of(nl_token) -> int:
        return len(BlockIndenter._leading(nl_token).expandtabs(8))

    @staticmethod
    def _leading(nl_token) -> str:
        """The blanks that start the line after `nl_token`."""
        text = nl_token.value.rsplit("\n", 1)[-1]
        return text[: len(text) - len(text.lstrip(" \t"))]

    def _newline(self, nl, contexts, opens_suite=False):
        ctx = contexts[-1]
        indent = self._indent_of(nl)
        yield nl
        line = (nl.line or 1) + nl.value.count("\n")
        # (the column of the line's first character: a tab is 8 wide to the indentation,
        # one character to the column a caret is put under)
        column = len(self._leading(nl)) + 1
        at = dict(line=line, column=column, end_line=line, end_column=column,
                  start_pos=nl.end_pos, end_pos=nl.end_pos)
        if ctx[1] is None:
            if opens_suite and ctx[0] == "{":
                # `{ for i in 0..n:` with its body on the lines below: the loop's statement
                # sits on the `{` line, so the block's base is that line's indentation and
                # the body must be indented past it, as under any other `for`
                ctx[1] = [ctx[4]]
            else:
                # first line inside a `{`: it sets the block's base indentation
                ctx[1] = [indent]
                return
        levels = ctx[1]
        if indent > levels[-1]:
            levels.append(indent)
            yield Token("_INDENT", "", **at)
            return
        while indent < levels[-1] and len(levels) > 1:
            levels.pop()
            yield Token("_DEDENT", "", **at)
        if indent != levels[-1]:
            if ctx[0] == "{" and indent < levels[0]:
                ctx[2] = Span(line, column)     # only its closing `}` may sit here
                return
            raise ZynMLSyntaxError("this line's indentation matches no enclosing block",
                                   Span(line, column))


def _span(meta) -> A.Span:
    if getattr(meta, "empty", True):
        return A.NO_SPAN
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tok_span(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + len(tok.value))


_UNITS_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_UNITS_B = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
            "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def _split_args(items):
    args, kwargs = [], []
    for it in items:
        if it is None:
            continue
        (kwargs if isinstance(it, A.Keyword) else args).append(it)
    return args, kwargs


@v_args(meta=True)
class ToAst(Transformer):
    """lark tree -> ast.py nodes, spans attached."""

    # ---- statements
    def start(self, meta, stmts):
        return A.Program(list(stmts), span=_span(meta))

    def let_stmt(self, meta, c):
        pattern, typ, value = c
        names, spans, destructure = pattern
        return A.Let(names, value, typ, destructure, spans, span=_span(meta))

    def name_pattern(self, meta, c):
        return ([c[0].id], [c[0].span], False)

    def tuple_pattern(self, meta, c):
        return ([n.id for n in c], [n.span for n in c], True)

    def var_stmt(self, meta, c):
        _, name, typ, value = c
        return A.VarDecl(name.id, value, typ, span=_span(meta))

    def type_opt(self, meta, c):
        return c[0] if c else None

    def type(self, meta, c):
        dims = c[1] if len(c) > 1 else None
        return A.TypeExpr(c[0].value, dims, span=_span(meta))

    def assign_stmt(self, meta, c):
        target, op, value = c
        return A.Assign(target, op, value, span=_span(meta))

    def assign_op(self, meta, c):
        return c[0].value

    def expr_stmt(self, meta, c):
        if isinstance(c[0], A.Name) and c[0].id in ("break", "continue"):
            raise ZynMLSyntaxError(f"there is no `{c[0].id}`: a loop runs its whole range; "
                                   "put the steps to skip under an `if`", _span(meta))
        return A.ExprStmt(c[0], span=_span(meta))

    def yield_stmt(self, meta, c):
        return A.Yield(c[0], span=_span(meta))

    def return_stmt(self, meta, c):
        return A.Return(c[0] if c else None, span=_span(meta))

    def shared_stmt(self, meta, c):
        name, dims, typ = c[-3:]
        return A.SharedVar(name.id, dims, typ, span=_span(meta))

    def ellipsis_stmt(self, meta, c):
        return A.Ellipsis(span=_span(meta))

    def annotation(self, meta, c):
        tok = c[0]
        ann = A.Annotation(tok.value[1:], span=_span(meta))
        for part in c[1:]:
            if isinstance(part, tuple) and part[0] == "args":
                ann.args, ann.kwargs = part[1], part[2]
            elif isinstance(part, tuple) and part[0] == "kernel":
                _, ann.kernel, ann.kernel_args, ann.kernel_kwargs, ann.kernel_span = part
        return A.AnnotationStmt(ann, span=_span(meta))

    def kernel_name(self, meta, c):
        args, kwargs = (c[1][1], c[1][2]) if len(c) > 1 else ([], [])
        return ("kernel", c[0].value, args, kwargs, _tok_span(c[0]))

    def call_args(self, meta, c):
        args, kwargs = _split_args(c)
        return ("args", args, kwargs)

    def config_stmt(self, meta, c):
        return A.Config([e for e in c if isinstance(e, A.Keyword)], span=_span(meta))

    def config_entry(self, meta, c):
        return A.Keyword(c[0].id, c[1], span=_span(meta))

    def for_stmt(self, meta, c):
        *iters, body = c
        seen = {}
        for it in iters:
            if it.var in seen:
                raise ZynMLSyntaxError(f"`{it.var}` is the variable of two loops of this `for` "
                                       "(each loop needs its own name)", it.span,
                                       notes=((f"the first loop over `{it.var}`", seen[it.var]),))
            seen[it.var] = it.span
        return A.For(iters, body, span=_span(meta))

    def range_iter(self, meta, c):
        name, start, stop = c[0], c[1], c[2]
        step = c[3] if len(c) > 3 else None
        return A.RangeIter(name.id, start, stop, step, span=_span(meta))

    def each_iter(self, meta, c):
        return A.EachIter(c[0].id, c[1], span=_span(meta))

    def if_stmt(self, meta, c):
        cond, then, *rest = c
        node = A.If(cond, then, span=_span(meta))
        tail = node
        for clause in rest:
            if clause[0] == "elif":
                nested = A.If(clause[1], clause[2], span=clause[3])
                tail.orelse = [nested]
                tail = nested
            else:
                tail.orelse = clause[1]
        return node

    def elif_clause(self, meta, c):
        return ("elif", c[0], c[1], _span(meta))

    def else_clause(self, meta, c):
        return ("else", c[0])

    def pipeline_def(self, meta, c):
        name = c[0].value
        params, ret, body = [], None, c[-1]
        for part in c[1:-1]:
            if isinstance(part, list):
                params = part
            elif isinstance(part, A.TypeExpr):
                ret = part
        return A.Pipeline(name, params, ret, body, span=_span(meta))

    def params(self, meta, c):
        return list(c)

    def param(self, meta, c):
        return A.Param(c[0].id, c[1] if len(c) > 1 else None, span=_span(meta))

    def ret_type(self, meta, c):
        return c[0]

    def suite(self, meta, c):
        return list(c)

    def block(self, meta, c):
        return list(c)

    def expr_list(self, meta, c):
        return list(c)

    # ---- expressions
    def name(self, meta, c):
        return A.Name(c[0].value, span=_tok_span(c[0]))

    def _expr(self, x):
        if isinstance(x, Token):
            return A.Name(x.value, span=_tok_span(x))
        return x

    def __default_token__(self, token):
        return token

    def pipe(self, meta, c):
        return A.Pipe(self._expr(c[0]), self._expr(c[1]), span=_span(meta))

    def _bin(self, op, meta, c):
        return A.BinOp(op, self._expr(c[0]), self._expr(c[-1]), span=_span(meta))

    def or_op(self, meta, c): return self._bin("or", meta, c)
    def and_op(self, meta, c): return self._bin("and", meta, c)
    def add(self, meta, c): return self._bin("+", meta, c)
    def sub(self, meta, c): return self._bin("-", meta, c)
    def mul(self, meta, c): return self._bin("*", meta, c)
    def div(self, meta, c): return self._bin("/", meta, c)
    def mod(self, meta, c): return self._bin("%", meta, c)
    def matmul(self, meta, c): return self._bin("@", meta, c)
    def pow(self, meta, c): return self._bin("**", meta, c)

    def compare(self, meta, c):
        return A.BinOp(c[1], self._expr(c[0]), self._expr(c[2]), span=_span(meta))

    def comp_op(self, meta, c):
        return c[0].value

    def not_op(self, meta, c):
        return A.UnaryOp("not", self._expr(c[0]), span=_span(meta))

    def neg(self, meta, c):
        return A.UnaryOp("neg", self._expr(c[0]), span=_span(meta))

    def pos(self, meta, c):
        return A.UnaryOp("pos", self._expr(c[0]), span=_span(meta))

    def await_expr(self, meta, c):
        c = [self._expr(x) for x in c]
        return A.Await(c[0], c[1] if len(c) > 1 else None, c[2] if len(c) > 2 else None,
                       span=_span(meta))

    def call(self, meta, c):
        _, args, kwargs = c[1]
        return A.Call(self._expr(c[0]), [self._expr(a) for a in args], kwargs, span=_span(meta))

    def kwarg(self, meta, c):
        return A.Keyword(c[0].id, self._expr(c[1]), span=_span(meta))

    def op_add(self, meta, c):
        return A.OpRef("+", span=_span(meta))

    def op_mul(self, meta, c):
        return A.OpRef("*", span=_span(meta))

    def index(self, meta, c):
        return A.Index(self._expr(c[0]), c[1], span=_span(meta))

    def index_list(self, meta, c):
        return [x if isinstance(x, A.SliceItem) else self._expr(x) for x in c]

    def slice(self, meta, c):
        start, stop, step = (self._expr(x) if x is not None else None
                             for x in (list(c) + [None])[:3])
        return A.SliceItem(start, stop, step, span=_span(meta))

    def attr(self, meta, c):
        return A.Attr(self._expr(c[0]), c[1].id, span=_span(meta))

    def int_lit(self, meta, c):
        return A.Number(int(c[0].value), span=_span(meta))

    def float_lit(self, meta, c):
        value = float(c[0].value)
        if value == float("inf"):       # (1e400: Python's float() gives inf, silently)
            raise ZynMLSyntaxError(f"the number {c[0].value} is past the largest float "
                                   f"(about 1.8e308); write inf for infinity", _span(meta))
        return A.Number(value, span=_span(meta))

    def string_lit(self, meta, c):
        return A.String(_unescape(c[0]), span=_span(meta))

    def duration_lit(self, meta, c):
        text = c[0].value
        unit = text.lstrip("0123456789.")
        return A.Duration(float(text[: len(text) - len(unit)]) * _UNITS_S[unit], text,
                          span=_span(meta))

    def size_lit(self, meta, c):
        text = c[0].value
        unit = text.lstrip("0123456789")
        return A.Size(int(text[: len(text) - len(unit)]) * _UNITS_B[unit], text, span=_span(meta))

    def true_lit(self, meta, c):
        return A.Bool(True, span=_span(meta))

    def false_lit(self, meta, c):
        return A.Bool(False, span=_span(meta))

    def tuple_lit(self, meta, c):
        return A.TupleLit([self._expr(x) for x in c if x is not None], span=_span(meta))

    def list_lit(self, meta, c):
        return A.ListLit([self._expr(x) for x in c if x is not None], span=_span(meta))

    def compute_expr(self, meta, c):
        body = c[-1]
        inputs = [self._expr(x) for x in c[:-1] if x is not None and not isinstance(x, A.Annotation)]
        anns = [x for x in c[:-1] if isinstance(x, A.Annotation)]
        return A.Compute(inputs, anns, body, span=_span(meta))

    def compute_annotation(self, meta, c):
        ann = A.Annotation(c[0].value[1:], span=_span(meta))
        if len(c) > 1:
            ann.args, ann.kwargs = c[1][1], c[1][2]
        return ann


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _unescape(tok: Token) -> str:
    raw, out, k = tok.value[1:-1], [], 0
    while k < len(raw):
        ch = raw[k]
        if ch != "\\":
            out.append(ch)
            k += 1
            continue
        nxt = raw[k + 1] if k + 1 < len(raw) else ""
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            k += 2
        elif nxt == "u" and len(raw) >= k + 6 and all(c in "0123456789abcdefABCDEF"
                                                       for c in raw[k + 2:k + 6]):
            out.append(chr(int(raw[k + 2:k + 6], 16)))
            k += 6
        else:
            raise ZynMLSyntaxError(f"unknown escape \\{nxt} in a string; use \\n, \\t, \\\\, "
                                   "\\\" or \\uXXXX", Span(tok.line, tok.column + k + 1))
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(_GRAMMAR.read_text(), parser="lalr", lexer="contextual",
                postlex=BlockIndenter(), propagate_positions=True, maybe_placeholders=True,
                cache=_parser_cache() or False)


def _parser_cache() -> str | None:
    """Where the built parser's tables are kept (a quarter of a second saved in every new
    process), under the one cache's root: lark keys the file's content by the grammar, its
    options and its own version, and builds again from the grammar where the file is
    missing, stale or unreadable. None where the folder cannot be made."""
    from ..cache import cache_root
    import lark
    folder = cache_root() / "parser"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(folder / f"zynml-lark-{lark.__version__}.cache")


_TOKEN_WORDS = {
    "_NL": "end of line", "_INDENT": "indented block", "_DEDENT": "end of block",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'",
    "RBRACE": "'}'", "COLON": "':'", "COMMA": "','", "EQUAL": "'='", "NAME": "a name",
    "INT": "a number", "FLOAT": "a number", "STRING": "a string", "$END": "end of input",
    "ANNOT": "an annotation",
}


def _word(terminal: str) -> str:
    if terminal in _TOKEN_WORDS:
        return _TOKEN_WORDS[terminal]
    try:
        pattern = _lark().get_terminal(terminal).pattern
    except KeyError:
        return terminal.lower()
    if pattern.type == "str":
        return repr(pattern.value)
    return terminal.lower().replace("_", " ")


def _describe(expected) -> str:
    words = sorted({_word(t) for t in expected})
    if len(words) > 8:
        words = words[:8] + ["..."]
    return ", ".join(words)


_BREAK_NAMES = {"\r": "a carriage return (\\r) not followed by \\n",
                "\x0b": "a vertical tab", "\x0c": "a form feed", "\x1c": "a file separator",
                "\x1d": "a group separator", "\x1e": "a record separator",
                "\x85": "a next-line character (U+0085)",
                "\u2028": "a line separator (U+2028)", "\u2029": "a paragraph separator (U+2029)"}


def _end_position(source: str) -> tuple[int, int]:
    """(line, column) just past the last code of the source (for "unexpected end")."""
    lines = source_lines(source.rstrip()) or [""]
    return len(lines), len(lines[-1]) + 1


_COMPARISON = re.compile(r"[<>]=?|==|!=")


def _expression_hint(tok, lines) -> str:
    """What to write instead of a Python expression ZynML has not: a chained comparison
    (`a < b < c`) or a conditional expression (`a if c else b`), where `tok` is the token
    the parse broke on; '' where it is neither."""
    text = lines[tok.line - 1] if 0 < tok.line <= len(lines) else ""
    before = code_part(text)[:tok.column - 1]
    if tok.value in ("<", "<=", ">", ">=", "==", "!=") and _COMPARISON.search(before) and \
            not _COMPARISON.search(before.rstrip()[-2:]):      # (`a < < b` lacks an operand)
        return "comparisons do not chain; write `a < b and b < c`"
    number = _python_number(before, code_part(text))
    if number:
        return number
    if tok.value in ("<", ">") and before.rstrip().endswith(tok.value) and \
            not before.rstrip().endswith(tok.value * 2):
        return (f"ZynML has no `{tok.value * 2}` (no bitwise operators): `x * 2 ** k` shifts "
                "an integer left")
    if tok.value == "=" and re.search(r"(\*\*|\^|@)$", before):
        op = re.search(r"(\*\*|\^|@)$", before).group()
        return (f"ZynML has no `{op}=`; write `a = a {op} b` (its compound assignments are "
                "= += -= *= /= %=)")
    if tok.value in (".", "=") and before.endswith(".."):      # 0...n, 0..=n
        return ("a range is `start..stop`, the stop left out; to take n too, write "
                "`0..n + 1`")
    # `for i in 0:n:` parses as `for i in 0:` and a statement `n`, breaking at the last `:`
    if tok.value == ":" and re.match(r"\s*for\b[^:]*\bin\b[^:]*:[^:]*$", before):
        return "a range is written `start..stop`: `for i in 0..n:`"
    if tok.value == "if" and before.strip() == "else":
        return "ZynML writes `else if` as `elif`"
    if tok.value == "if" and before.strip():
        return ("there is no conditional expression (`a if c else b`); write `where(c, a, "
                "b)` or an `if` statement")
    if re.search(r"@kernel\s*$", before):       # compute(x) @kernel elementwise {
        return ("`@kernel type` is written in the body, on a line of its own "
                "(`compute(x) {`, then `@kernel elementwise`)")
    if before.strip() in _MISSING_WORDS:        # `while k < 3:`, `fn f(x)`, `def f(x):`
        return _MISSING_WORDS[before.strip()]
    return ""


# a Python number ZynML does not read: hex, octal, binary, or digits with `_` between them
_PY_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|"
                        r"\d[\d_]*(\.[\d_]*)?([eE][+-]?\d[\d_]*)?")


def _python_number(before: str, code: str) -> str:
    """What to write for a Python number literal (`0x10`, `1_000`) that the parse broke
    inside of, just after its first digits; '' where it broke elsewhere."""
    digits = re.search(r"(?<![\w.])\d+$", before)
    if digits is None:
        return ""
    literal = _PY_NUMBER.match(code, digits.start())
    text = literal.group() if literal else ""
    if len(text) <= len(digits.group()):
        return ""
    try:
        value = int(text, 0) if text[:2].lower() in ("0x", "0o", "0b") or \
            not any(c in text for c in ".eE") else float(text)
    except ValueError:
        return ""
    return (f"`{text}` is not a ZynML number (it has no hex, octal or binary numbers, nor `_` "
            f"between digits): write {value}")


# the words a statement starts with, for `fro i in 0..n:` (did you mean `for`?)
_STATEMENT_WORDS = ("let", "var", "for", "if", "elif", "else", "return", "pipeline", "config",
                    "yield", "shared", "compute")


def _misspelled_keyword(tok, lines):
    """(message, span) where the parse broke just after a statement's first word, a near
    miss of a keyword (`lett y = x`, `retrun y`): said at that word, not the next token."""
    text = lines[tok.line - 1] if 0 < tok.line <= len(lines) else ""
    before = code_part(text)[:tok.column - 1]
    word = before.strip()
    if not word.isidentifier() or word in _STATEMENT_WORDS or word in _MISSING_WORDS:
        return None
    close = difflib.get_close_matches(word, _STATEMENT_WORDS, n=1, cutoff=0.6)
    if not close:
        return None
    column = len(before) - len(before.lstrip()) + 1
    return (f"unknown word `{word}` starting a statement; did you mean `{close[0]}`?",
            Span(tok.line, column, tok.line, column + len(word)))


_MISSING_WORDS = {
    "while": "there is no `while` loop; write a `for` loop over a range, with an `if` around "
             "the steps to skip",
    "fn": "there is no `fn`; write a pipeline: `pipeline name(x: tensor[n]):`",
    "def": "there is no `def`; write a pipeline: `pipeline name(x: tensor[n]):`",
}


def _unindented_block(err, tok, lines) -> str:
    """Why a block's first line is refused where one is wanted after a `:` (it is not
    indented past the line that opens it); '' where the parse wanted something else."""
    if "_INDENT" not in (err.expected or ()) or not 1 < tok.line <= len(lines):
        return ""
    above = next((k for k in range(tok.line - 1, 0, -1) if code_part(lines[k - 1]).strip()), 0)
    if not above or not code_part(lines[above - 1]).rstrip().endswith(":"):
        return ""
    tabs = any("\t" in t[:len(t) - len(t.lstrip())] for t in (lines[above - 1], lines[tok.line - 1]))
    return (f"the block after the `:` on line {above} must be indented past that line" +
            (" (a tab counts as 8 columns)" if tabs else ""))


# characters of C and Python operators ZynML has not
_NOT_OPERATORS = {"&": "ZynML has no `&` or `&&` (no bitwise operators): `and` combines bools",
                  "|": "ZynML has no `|` or `||` (no bitwise operators; `|>` is its pipe): "
                       "`or` combines bools",
                  "~": "ZynML has no `~` (no bitwise operators): `not` negates a bool",
                  "!": "ZynML writes `not x` (`!=` is its only `!`)",
                  "?": "ZynML has no `c ? a : b`: write `where(c, a, b)` or an `if` statement"}


def _syntax_error(err: UnexpectedInput, source: str) -> ZynMLSyntaxError:
    line, column = getattr(err, "line", 0) or 0, getattr(err, "column", 0) or 0
    lines = source_lines(source)
    if isinstance(err, UnexpectedToken):
        tok = err.token
        if tok.type == "$END":
            line, column = _end_position(source)
            msg = "unexpected end of input"
        elif tok.type in ("_NL", "_INDENT", "_DEDENT"):
            msg = {"_NL": "unexpected end of line", "_INDENT": "unexpected indentation",
                   "_DEDENT": "unexpected end of block"}[tok.type]
            if tok.type == "_NL":
                # point just past the code of the line the statement broke on
                line = tok.line
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                column = len(code_part(text).rstrip()) + 1
        else:
            msg = f"unexpected {tok.value!r}"
            typo = _misspelled_keyword(tok, lines)
            if typo is not None:
                return ZynMLSyntaxError(typo[0], typo[1], source)
            hint = _expression_hint(tok, lines)
            if hint:
                return ZynMLSyntaxError(f"{msg}: {hint}", Span(tok.line, tok.column), source)
            unindented = _unindented_block(err, tok, lines)
            if unindented:
                return ZynMLSyntaxError(f"{msg}: {unindented}", Span(tok.line, tok.column),
                                        source)
            opener = _left_open(lines, tok.line)
            if opener is not None:      # said at the new statement, where the parse broke
                (bracket, at), (word, here) = opener
                closer = {"(": ")", "[": "]"}[bracket]
                return ZynMLSyntaxError(
                    f"`{word}` starts a new statement while the `{bracket}` on line {at.line} "
                    f"is still open: close it with `{closer}` first", here, source,
                    notes=((f"the `{bracket}` opened here", at),))
        if err.expected:
            msg += f"; expected {_describe(err.expected)}"
    elif isinstance(err, UnexpectedCharacters):
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        ch = text[column - 1] if 0 < column <= len(text) else ""
        if ch in _BREAK_NAMES:
            msg = f"{_BREAK_NAMES[ch]} does not end a line in ZynML; lines end with \\n " \
                "(or \\r\\n)"
        elif ch in "\"'" and ch not in text[column:]:
            msg = f"unterminated string: no closing {ch} on this line"
        elif ch == "#":             # (a Python habit; the same line of a magic ends there)
            msg = "unexpected character '#': ZynML comments start with //"
        elif ch in _NOT_OPERATORS:
            msg = f"unexpected character {ch!r}: {_NOT_OPERATORS[ch]}"
        elif ch.isidentifier() or ch.isalnum():
            msg = f"unexpected character {ch!r}: names are ASCII letters, digits and _"
        elif ch:
            msg = f"unexpected character {ch!r}"
        else:
            msg = "unexpected character"
    elif isinstance(err, UnexpectedEOF):
        line, column = _end_position(source)
        msg = "unexpected end of input"
    else:
        msg = str(err).splitlines()[0]
    if line > len(lines):       # never past the end of the source
        line, column = _end_position(source)
    return ZynMLSyntaxError(msg, Span(max(line, 1), max(column, 1)), source)


# keywords that start a statement and cannot stand inside ( ) or [ ]
_STATEMENT_WORDS = frozenset(("let", "var", "for", "if", "elif", "else", "pipeline",
                              "config", "return"))


def _left_open(lines: list, line_no: int) -> tuple | None:
    """((bracket, its span), (keyword, its span)) where line `line_no` begins with a
    statement's keyword inside a ( or [ that the lines before left open (else None)."""
    text = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
    word = text.split(maxsplit=1)[0] if text.strip() else ""
    if word.rstrip(":") not in _STATEMENT_WORDS:
        return None
    stack = []
    for n, line in enumerate(lines[: line_no - 1], 1):
        quote = None
        for k, ch in enumerate(code_part(line), 1):
            if quote:
                quote = None if ch == quote and line[k - 2] != "\\" else quote
            elif ch in "\"'":
                quote = ch
            elif ch in "([{":
                stack.append((ch, Span(n, k, n, k + 1)))
            elif ch in ")]}" and stack:
                stack.pop()
    if not stack or stack[-1][0] not in "([":
        return None
    column = len(text) - len(text.lstrip()) + 1
    word = word.rstrip(":")
    return stack[-1], (word, Span(line_no, column, line_no, column + len(word)))


def code_part(line: str, comments: tuple = ("//",)) -> str:
    """`line` up to its `//` comment (a `//` inside a string, as in a URL, is none); a
    magic's line in a Python cell also ends at `#` (`comments=("//", "#")`)."""
    return line[:_code_end(line, comments)[0]]


def in_string(line: str) -> bool:
    """Whether `line` (the text of a line before a cursor) ends inside a string literal."""
    return _code_end(line)[1]


def _code_end(line: str, comments: tuple = ("//",)) -> tuple[int, bool]:
    """Where `line`'s comment (one of `comments`) starts (its length if none), and whether
    its code ends inside a string it does not close (strings are one line long)."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            if j >= n:
                return n, True
            i = j + 1
            continue
        if line.startswith(comments, i):
            return i, False
        i += 1
    return n, False


def parse(source: str) -> A.Program:
    """Parse a ZynML program. Raises ZynMLSyntaxError with line and column."""
    text = source if source.endswith("\n") else source + "\n"
    _refuse_floor_assignment(source)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, source) from None
    except ZynMLSyntaxError as err:
        raise err.with_source(source) from None
    try:
        program = ToAst().transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, ZynMLError):
            raise err.orig_exc.with_source(source) from None
        if isinstance(err.orig_exc, RecursionError):
            raise _too_deep(source) from None
        raise
    except RecursionError:
        raise _too_deep(source) from None
    program.source = source
    return program


def _refuse_floor_assignment(source: str) -> None:
    """Python's `a //= 2` is `a` and the comment `= 2` to ZynML: a statement that does
    nothing on the host, silently. Refused at the `//`."""
    for number, line in enumerate(source_lines(source), 1):
        end, _ = _code_end(line)
        code, comment = line[:end].rstrip(), line[end + 2:]
        if re.match(r"=(?!=)", comment) and re.search(r"[\w)\]]$", code):
            named = re.search(r"(?<![\w.\]])[A-Za-z_][\w.]*(\[[^\[\]]*\])?$", code)
            target = named.group() if named else "a"
            raise ZynMLSyntaxError(
                f"`//=` is not ZynML: `//` starts a comment, so this line ends before it; for "
                f"floor division write `{target} = floor({target} / 2.0)` (its compound "
                "assignments are = += -= *= /= %=)", Span(number, end + 1), source)


def warn_floor_division(source: str) -> None:
    """Warn where a `//` comment that is a number, or a number and more arithmetic, follows
    an operand (`x[i] // 2`, `x[i] // 2 + 1`): Python's floor division, which ZynML reads as
    `x[i]` and a comment."""
    import warnings
    from ..errors import ZynMLWarning
    for number, line in enumerate(source_lines(source), 1):
        end, _ = _code_end(line)
        code, comment = line[:end].rstrip(), line[end + 2:].strip()
        divisor = re.fullmatch(r"(\d+(\.\d*)?)(\s*[-+*/%)\]]\s*[\w(.]*.*)?", comment)
        if end < len(line) and divisor and re.search(r"[\w)\]]$", code):
            # (a float divisor: `/` of two integers truncates toward zero, floor(-3 / 2) -1)
            d = divisor.group(1) if "." in divisor.group(1) else divisor.group(1) + ".0"
            warnings.warn_explicit(ZynMLWarning(
                f"`//` starts a comment in ZynML, so this line ends before `// {comment}`; "
                f"for floor division write floor(a / {d})", Span(number, end + 1), source),
                ZynMLWarning, "<zynml>", number)


def _too_deep(source: str) -> ZynMLSyntaxError:
    return ZynMLSyntaxError("this program nests expressions too deeply to compile; split long "
                            "expressions with `let`", Span(1, 1), source)
