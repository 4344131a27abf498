"""Reading ZynML notebook cells: magics, completeness, the name or block under the cursor.

Pure text functions (no kernel, no IPython), shared by the ZynML kernel and the magics.

A ZynML cell is ZynML source with optional line magics, each a line that starts with `%`
in column 1:

    %device cuda:0          set the session's default device
    %inspect                show the generated code of the last compute block
    %time [code]            run `code` (or the rest of the cell) and report its times
    %timeit [code]          time `code` (or the rest of the cell) over several runs
    %python code            one line of Python in the shared namespace
    %other args             any other IPython line magic

and `%%python` (or `%%time` / `%%timeit`) on the first line makes the whole cell Python
(or times the whole ZynML cell); `%%compare ARGS` runs the cell on several devices and sizes
(zynbook/magics/compare.py), any other `%%name` is IPython's cell magic of that name.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..compiler import ast as A
from ..compiler.parser import code_part, parse
from ..errors import ZynMLError, ZynMLSyntaxError

ZYNML_MAGICS = ("device", "inspect", "time", "timeit", "python")


def magic_code(line: str) -> str:
    """A magic's line (its options, annotations, device id) up to its comment outside
    quotes: `//` as on a ZynML line, or `#` (a Python notebook's magic stands in a Python
    cell, and a ZynML cell's `%device cpu  # note` is the same line), in both kernels. Not
    stripped: what is left keeps its columns in the line. (ZynML code is not a magic's
    line: there `#` is no comment, a syntax error saying so.)"""
    return code_part(line, ("//", "#"))


def line_code(line: str) -> str:
    """A cell line up to its comment: a magic's line (`%name`, `%%name`) ends at `#` or
    `//` (`magic_code`), a ZynML line at `//`."""
    return magic_code(line) if line.lstrip().startswith("%") else code_part(line)


@dataclass
class Part:
    """One piece of a cell, in order.

    kind: "zynml" (text is ZynML, padded with blank lines so that line numbers are those
    of the cell), "python" (Python source), "magic" (name and args), or "usage" (a timer
    magic given options it does not take: text is the message, raised as IPython's
    UsageError where the part runs).
    """
    kind: str
    text: str = ""
    name: str = ""
    args: str = ""
    line: int = 1
    timed: str = ""          # "time" / "timeit" when a ZynML part runs under that magic
    # a `%time CODE` / `%timeit CODE` part: where CODE starts on its line (0-based) and the
    # cell's line, so that an error points at the cell as written (`ZynMLRunner.run`)
    column: int = 0
    origin: str = ""


_MAGIC_LINE = re.compile(r"^%(?!%)([A-Za-z_][\w.]*)[ \t]*(.*)$")


def split_cell(cell: str) -> list[Part]:
    lines = cell.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return []
    head = lines[first].strip()
    if head.startswith("%%"):
        name, _, args = head[2:].partition(" ")
        rest = "\n".join(lines[first + 1:])
        if name == "python":
            return [Part("python", rest, line=first + 2)]
        if name in ("time", "timeit"):
            args = magic_code(args)         # (a `//` or `#` note ends the line)
            opts, left = _timer_args(args)
            bad = args.strip() if name == "time" else _bad_option(left, is_code=False)
            if bad:
                # an option these timers do not take (`%%timeit -q -n 1`): ignored, the cell
                # ran 7 runs of as many loops as fit in 0.2 s instead of what was asked
                return [Part("usage", _timer_usage("%%" + name, bad), name="%%" + name,
                             line=first + 1)]
            body = "\n" * (first + 1) + rest
            return [Part("zynml", body, line=first + 2, timed=name, args=opts)]
        return [Part("magic", rest, name="%%" + name, args=args.strip(), line=first + 1)]

    parts: list[Part] = []
    chunk: list[str] = []
    chunk_start = 0

    def flush(end: int, timed: str = "", args: str = ""):
        nonlocal chunk
        if any(_is_code(ln) for ln in chunk):
            parts.append(Part("zynml", "\n" * chunk_start + "\n".join(chunk),
                              line=chunk_start + 1, timed=timed, args=args))
        chunk = []

    i = 0
    while i < len(lines):
        m = _MAGIC_LINE.match(lines[i])
        if not m:
            if not chunk:
                chunk_start = i
            chunk.append(lines[i])
            i += 1
            continue
        flush(i)
        name, args = m.group(1), m.group(2).rstrip()
        if name == "python":
            parts.append(Part("python", args, line=i + 1))
        elif name in ("time", "timeit"):
            # (%time takes no options: its `-n 3` was dropped and the code run once)
            opts, code = _timer_args(args) if name == "timeit" else ("", args.strip())
            if not magic_code(code).strip():
                code = ""           # a `//` or `#` note alone: the rest of the cell is timed
            bad = _bad_option(code)
            if bad:
                parts.append(Part("usage", _timer_usage("%" + name, bad), name="%" + name,
                                  line=i + 1))
            elif code:
                parts.append(Part("zynml", "\n" * i + code, line=i + 1, timed=name,
                                  args=opts, column=len(lines[i].rstrip()) - len(code),
                                  origin=lines[i]))
            else:
                # the rest of the cell runs under the timer
                chunk_start = i + 1
                chunk = lines[i + 1:]
                flush(len(lines), timed=name, args=opts)
                return parts
        else:
            parts.append(Part("magic", name=name, args=args, line=i + 1, origin=lines[i]))
        i += 1
    flush(len(lines))
    return parts


def _timer_args(args: str) -> tuple[str, str]:
    """`-n 3 -r 2 let a = 1` -> ("-n 3 -r 2", "let a = 1")."""
    # (a number is whole: `-n 1.5` took 1 and timed `.5 x`, a syntax error at the point)
    m = re.match(r"((?:-[nr]\s*\d+(?![\w.])\s*)*)(.*)$", args)
    return m.group(1).strip(), m.group(2).strip()


def _bad_option(code: str, is_code: bool = True) -> str:
    """The option at the start of `code`, the text after a timer's options that it takes,
    which it does not take (`-q`, `-n abc`): '' if none. `is_code`: the text may be ZynML to
    time (after `%timeit`, not `%%timeit`), and is an option only where it does not parse
    (`-x * 2.0` is code)."""
    m = re.match(r"-([A-Za-z]\w*)(?:\s+(\S+))?", code)
    if not m:
        return code.strip() if not is_code else ""
    if is_code:
        try:
            parse(code)
            return ""
        except ZynMLError:
            pass
    return m.group(0) if m.group(1) in ("n", "r") and m.group(2) else "-" + m.group(1)


def _timer_usage(magic: str, bad: str) -> str:
    """The usage error of `magic` (`%time`, `%%timeit`, ...) given `bad`."""
    if magic == "%%time":
        return f"%%time takes nothing on its line, it times the cell below it; not `{bad}`"
    if magic == "%time":
        return f"%time takes no options, only the code to time; not `{bad}`"
    where = "on its line" if magic == "%%timeit" else "before the code"
    return (f"{magic} takes -n N and -r R (whole numbers) {where}; `{bad}` is not one of "
            "them")


def _is_code(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("//")


def zynml_text(cell: str) -> str:
    """The cell's ZynML with magic lines blanked (line numbers kept)."""
    if cell.lstrip().startswith("%%python"):
        return ""
    out = []
    for ln in cell.splitlines():
        m = _MAGIC_LINE.match(ln)
        if m and m.group(1) in ("time", "timeit") and _timer_args(m.group(2))[1]:
            out.append(_timer_args(m.group(2))[1])
        elif m or ln.startswith("%%"):
            out.append("")
        else:
            out.append(ln)
    return "\n".join(out)


# --------------------------------------------------------------------------- is_complete

_OPENERS = {"(": ")", "[": "]", "{": "}"}


def _open_brackets(text: str) -> list[str]:
    """Brackets still open at the end of `text` (strings and // comments skipped)."""
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in _OPENERS:
            stack.append(c)
        elif c in ")]}" and stack and _OPENERS[stack[-1]] == c:
            stack.pop()
        i += 1
    return stack


def _code_of(line: str) -> str:
    """`line` without its `//` comment, right-stripped."""
    return code_part(line).rstrip()


def _statement_head(text: str) -> str:
    """The first line of the statement the last code line of `text` belongs to: that line,
    or the line that opened the brackets it continues."""
    lines = text.split("\n")
    starts, offset = [], 0
    for ln in lines:
        starts.append(offset)
        offset += len(ln) + 1
    code = [i for i, ln in enumerate(lines) if _is_code(ln)]
    i = code[-1]
    while i > 0 and _open_brackets(text[:starts[i]]):
        i -= 1
    return lines[i]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def is_complete(cell: str) -> tuple[str, str]:
    """("complete" | "incomplete" | "invalid", indent for the next line)."""
    if cell.lstrip().startswith("%%"):
        # a cell magic's body goes on until the user runs it (a blank line ends it)
        return ("complete", "") if cell.endswith("\n\n") else ("incomplete", "")
    text = zynml_text(cell)
    lines = [ln for ln in text.splitlines() if _is_code(ln)]
    if not lines:
        return "complete", ""
    last = lines[-1]
    code_last = _code_of(last)
    stack = _open_brackets(text)
    if code_last.endswith(":") or code_last.endswith("\\"):
        return "incomplete", " " * (_indent(last) + 4)
    if stack:
        extra = 4 if stack[-1] == "{" and code_last.endswith("{") else 0
        return "incomplete", " " * (_indent(last) + extra)
    # an indented last line of a `for`/`if`/`pipeline` outside brackets: the block may go on
    # until an empty line ends it, as in Python's console (a line that continues a
    # bracket opened on a line before, `let shape = [2,\n             3]`, is no block's)
    head = _statement_head(text)
    if _indent(head) > 0 and not cell.endswith("\n\n"):
        return "incomplete", " " * _indent(head)
    try:
        parse(text)
    except ZynMLSyntaxError as err:
        if err.message.startswith("unexpected end of input"):
            return "incomplete", ""
        return "invalid", ""
    except ZynMLError:
        return "invalid", ""
    return "complete", ""


# ---------------------------------------------------------------------- cursor helpers

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _clamped(code: str, cursor: int) -> int:
    """A cursor offset within the text: a front end that counts in UTF-16 units (a cell
    with characters beyond the BMP) may send one past its end."""
    return max(0, min(int(cursor), len(code)))


def token_before(code: str, cursor: int) -> tuple[str, int]:
    """The identifier (with a leading `@` or `%` if any) ending at `cursor`, and its start."""
    cursor = start = _clamped(code, cursor)
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
        start -= 1
    if start > 0 and code[start - 1] in "@%":
        start -= 1
        if start > 0 and code[start - 1] == "%":
            start -= 1
    return code[start:cursor], start


def word_at(code: str, cursor: int) -> tuple[str, int, int]:
    """The dotted name under the cursor (`x`, `x.shape`) and its span."""
    cursor = start = _clamped(code, cursor)
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    word = code[start:end].strip(".")
    if not word:
        # right after a name and an opening parenthesis: `exp(|`
        m = re.search(r"([A-Za-z_][\w.]*)\s*\($", code[:cursor])
        if m:
            return m.group(1), m.start(1), m.end(1)
    return word, start, end


def line_col(code: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    before = code[:offset]
    line = before.count("\n") + 1
    col = offset - (before.rfind("\n") + 1) + 1
    return line, col


def defined_names(code: str) -> list[str]:
    """Names a cell's text binds (`let`, `var`, `for`, pipelines), for completion before the
    cell has run; read with a regular expression so that half-written code still counts."""
    names = []
    for m in re.finditer(r"\b(?:let|var)\s+\(?\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)", code):
        names += [n.strip() for n in m.group(1).split(",")]
    names += re.findall(r"\bfor\s+([A-Za-z_]\w*)\s+in\b", code)
    names += re.findall(r",\s*([A-Za-z_]\w*)\s+in\b", code)
    names += re.findall(r"\bpipeline\s+([A-Za-z_]\w*)", code)
    return list(dict.fromkeys(names))


# ------------------------------------------------------------------- syntax-tree helpers

def _children(node):
    if isinstance(node, list):
        for n in node:
            yield from _children(n)
        return
    if isinstance(node, A.Node):
        yield node
        return


def walk(node):
    """Every syntax-tree node below `node` (a Node or a list), depth first."""
    stack = list(_children(node))
    while stack:
        n = stack.pop()
        yield n
        for value in vars(n).values():
            if isinstance(value, (list, A.Node)):
                stack.extend(_children(value))


def _contains(span, line: int, col: int) -> bool:
    if span.line <= 0:
        return False
    after_start = (line, col) >= (span.line, span.column)
    before_end = (line, col) <= (span.end_line, span.end_column)
    return after_start and before_end


def compute_at(program: A.Program, line: int, col: int):
    """The innermost `compute` block whose text holds (line, col), or None."""
    best = None
    for node in walk(program.body):
        if isinstance(node, A.Compute) and _contains(node.span, line, col):
            if best is None or (node.span.line, node.span.column) > \
                    (best.span.line, best.span.column):
                best = node
    return best


def local_meaning(code: str, cursor: int, name: str) -> str | None:
    """What `name` at `cursor` is where the pipeline or the compute block the cursor is in
    binds it (a parameter, with its declared type, or a name its body binds: a `var`, a
    loop's variable): the session's value of that name is not what the code there reads.
    None elsewhere."""
    text = zynml_text(code)
    try:
        program = parse(text)
    except ZynMLError:
        return None
    line, col = line_col(code, cursor)
    for node in program.body:
        if not (isinstance(node, A.Pipeline) and _contains(node.span, line, col)):
            continue
        for q in node.params:
            if q.name == name:
                typ = span_text(text, q.type.span) if q.type is not None else ""
                return f"a parameter of pipeline {node.name}" + (f": {typ}" if typ else "")
        at = _bound_in(node.body, name)
        if at is not None:
            return f"a name pipeline {node.name} binds (line {at})"
    block = compute_at(program, line, col)
    at = _bound_in(block.body, name) if block is not None else None
    if at is not None:
        # (an accumulator or a loop's `i` of the block, not the notebook's `acc` or `i`)
        return f"a name the compute block of line {block.span.line} binds (line {at})"
    return None


def _bound_in(body, name: str) -> int | None:
    """The line where a statement of `body` binds `name` (`let`, `var`, a loop's variable,
    a shared array), None if none does."""
    for n in walk(body):
        names = n.names if isinstance(n, A.Let) else (n.name,) if isinstance(
            n, (A.VarDecl, A.SharedVar)) else (n.var,) if isinstance(
            n, (A.RangeIter, A.EachIter)) else ()
        if name in names:
            return n.span.line
    return None


def compute_blocks(program: A.Program) -> list:
    """Every compute block of the program, in source order."""
    blocks = [n for n in walk(program.body) if isinstance(n, A.Compute)]
    return sorted(blocks, key=lambda n: (n.span.line, n.span.column))


def span_text(source: str, span) -> str:
    lines = source.splitlines()
    if span.line <= 0 or span.line > len(lines):
        return ""
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1:span.end_column - 1]
    first = lines[span.line - 1][span.column - 1:]
    middle = lines[span.line:span.end_line - 1]
    last = lines[span.end_line - 1][:span.end_column - 1] if span.end_line <= len(lines) else ""
    return "\n".join([first, *middle, last])


def free_names(program: A.Program) -> list[str]:
    """Names the program reads (candidates for binding from a host namespace), but those the
    language defines itself (builtins, `e`, `pi`, `inf`, `nan`, dtype names): a Python `e`
    or `inf` in the notebook must not change what a cell's `e` or `inf` means."""
    return [name for name in dict.fromkeys(names_read(program.body))
            if name not in _language_names()]


@functools.lru_cache(maxsize=1)
def _language_names() -> frozenset:
    from ..runtime.builtins import BUILTINS, CONSTANTS, DTYPE_VALUES
    return frozenset(BUILTINS) | frozenset(CONSTANTS) | frozenset(DTYPE_VALUES)


def names_read(tree) -> list[str]:
    """The names `tree` (a node or list of them) reads: each name, and the root of each
    field access (`w` of `w.a.b`)."""
    names = []
    for node in walk(tree):
        if isinstance(node, A.Name):
            names.append(node.id)
        elif isinstance(node, A.Attr):
            base = node.base
            while isinstance(base, A.Attr):
                base = base.base
            if isinstance(base, A.Name):
                names.append(base.id)
    return names


@functools.lru_cache(maxsize=256)
def names_of(source: str) -> tuple:
    """(free names, bound names) of ZynML `source`, found once per text: a cell run again
    is neither parsed nor walked again. Raises the syntax error of a text that does not
    parse."""
    from ..session import parse_cached
    program = parse_cached(source)
    return tuple(free_names(program)), tuple(bound_names(program))


# IPython's own underscore names: output history (`_`, `__`, `_3`), input history (`_i`,
# `_ii`, `_i3`) and dunders; a notebook's other `_name` is a name like any other
_IPYTHON_NAME = re.compile(r"_+|_i{1,3}\d*|_\d+|__\w*__")


def ipython_name(name: str) -> bool:
    return _IPYTHON_NAME.fullmatch(name) is not None


@functools.lru_cache(maxsize=256)
def _globals_of(node: A.Pipeline) -> tuple:
    """The names pipeline `node` reads besides its parameters (its globals, read from the
    session when it is called), but those the language defines."""
    params = {p.name for p in node.params}
    return tuple(name for name in free_names(A.Program(node.body))
                 if name not in params and not ipython_name(name))


@functools.lru_cache(maxsize=256)
def language_names_read(source: str) -> tuple:
    """The names the language defines (builtins, constants, dtype names) that ZynML `source`
    reads."""
    from ..session import parse_cached
    language = _language_names()
    return tuple(name for name in dict.fromkeys(names_read(parse_cached(source).body))
                 if name in language)


def with_pipeline_globals(free: tuple, namespace: dict, source: str = "") -> tuple:
    """`free` (the free names of `source`) and the names of the language `source` reads
    that the session binds (a cell's `let sum = ...`: a name of the notebook from then on),
    and the globals of the pipelines among them (as the session holds them) and of the
    pipelines those read: a call reads them from the session, which must hold what the
    notebook holds now, as for a name the cell reads itself."""
    if source:
        shadowed = [name for name in language_names_read(source) if name in namespace]
        if shadowed:
            free = tuple(free) + tuple(shadowed)
    names = dict.fromkeys(free)
    found = _add_globals(names, [namespace.get(name) for name in free], namespace)
    return tuple(names) if found else free


def pipeline_globals(pipeline, namespace: dict) -> dict:
    """{pipeline: the names it reads besides its parameters} of `pipeline` and of the
    pipelines its globals hold (as the session holds them), those a call may run: what a
    call of it from Python reads from outside ZynML."""
    return {p: _globals_of(p.node) for p in _add_globals({}, [pipeline], namespace)}


def bind_pipeline_globals(session, pipeline, values) -> None:
    """Before `pipeline` is called from Python (a notebook's, the ZynML kernel's `%python`
    cell): bind in `session` Python's values of the names it and the pipelines it calls
    read, as Python holds them now, not as they were when the cell that defined it ran.
    `values(names)`: those of them the session must bind again, the names Python deleted
    dropped from the session, by the front end's rules for a cell. A value ZynML cannot use
    is a type error at the first read of it."""
    from ..session import _bind_env

    reads = pipeline_globals(pipeline, session.namespace)
    names = tuple(dict.fromkeys(name for names in reads.values() for name in names))
    if not names:
        return
    env = values(names)
    for p, names in reads.items():
        mine = {name: env.pop(name) for name in names if name in env}
        if mine:
            session.namespace.update(_bind_env(mine, A.Program([p.node]), p.source))


def _add_globals(names: dict, todo: list, namespace: dict) -> list:
    """Add to `names` the globals of the pipelines among the values `todo` and of the
    pipelines those read; those pipelines."""
    from ..runtime.values import Pipeline

    seen, pipelines = set(), []
    while todo:
        value = todo.pop()
        node = getattr(value, "node", None)
        if type(value) is not Pipeline or node in seen:
            continue
        seen.add(node)
        pipelines.append(value)
        for name in _globals_of(node):
            if name not in names:
                names[name] = None
                todo.append(namespace.get(name))
    return pipelines


def notebook_values(source: str, namespace: dict, user_ns: dict, hidden=(), skip=()) -> dict:
    """The notebook's (`user_ns`) values ZynML can bind of the names `source` reads and of
    the globals of the pipelines it calls (the walk above, through the session's
    `namespace`): what a fresh session running `source` must be given, as Python holds
    them now."""
    from .display import bindable

    free = with_pipeline_globals(names_of(source)[0], namespace, source)
    return {name: user_ns[name] for name in free
            if name in user_ns and name not in hidden and name not in skip
            and not ipython_name(name) and bindable(user_ns[name])}


def assigned_names(program: A.Program) -> list[str]:
    """Names the program's host statements assign (`acc += 1`, `x = ...`, and the root of
    `x[i] = ...` or `r.a = ...`, which change what the name holds: names bound before, by
    an earlier cell or the notebook) or bind in a host `for` or `if` body (a `let` there
    binds at the top level), at the top level and in those bodies (not in pipelines or
    compute blocks, whose names are their own)."""
    names = []

    def visit(stmts):
        for stmt in stmts:
            if isinstance(stmt, A.Assign):
                target = stmt.target
                while isinstance(target, (A.Index, A.Attr)):
                    target = target.base
                if isinstance(target, A.Name):
                    names.append(target.id)
            elif isinstance(stmt, A.Let):
                names.extend(stmt.names)
            elif isinstance(stmt, A.VarDecl):
                names.append(stmt.name)
            elif isinstance(stmt, A.For):
                visit(stmt.body)
            elif isinstance(stmt, A.If):
                visit(stmt.then)
                visit(stmt.orelse)

    visit(program.body)
    return list(dict.fromkeys(names))


def bound_names(program: A.Program) -> list[str]:
    """Names the program's top-level statements bind (`let`, `var`, pipelines)."""
    names = []
    for stmt in program.body:
        if isinstance(stmt, A.Let):
            names += list(stmt.names)
        elif isinstance(stmt, A.VarDecl):
            names.append(stmt.name)
        elif isinstance(stmt, A.Pipeline):
            names.append(stmt.name)
    return list(dict.fromkeys(names))
