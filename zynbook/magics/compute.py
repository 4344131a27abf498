"""`%%compute`, `%zynml_devices`, `%zynml_device`, `%zynml_inspect`."""
from __future__ import annotations

import dataclasses
import functools
import html
import re
import sys

import numpy as np
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand
from IPython.display import display
from IPython.utils.text import DollarFormatter

from ..compiler import ast as A
from ..errors import ZynMLError, ZynMLSyntaxError, source_lines
from ..kernel import cells
from ..kernel.display import (InspectUsageError, bindable, code_bundle, is_tensor,
                              parse_inspect_args)
from ..kernel.progress import cell_progress
from ..kernel.state import after_cell, announce_device, last_run, notebook_session, remember
from ..runtime.tensor import Tensor
from ..runtime.builtins import borrowed
from ..runtime.values import Record
from ..session import _ARRAY_TYPES, _bind_env, bind_value, on_annotation_line, parse_cached

# where `$name` and `{expr}` in a cell magic's line are expanded: the frame that called
# `run_cell_magic` (the cell's code, or a function calling it), seen from `var_expand`
# called by `expand_line` called by the magic. (IPython's own expansion of a cell magic's
# line looks one frame further, into its `run_code`, whose locals `result`, `self` and
# `code_obj` then stood for the notebook's names of those names.)
_EXPAND_DEPTH = 3


def expand_line(shell, line: str) -> str:
    """A cell magic's `line` with the notebook's `$name` and `{expr}` expanded, as IPython
    expands a line magic's (for magics marked `no_var_expand`). An array there is a usage
    error: its printed text is not its value (numpy's is cut short with `...` and rounded),
    and a cell reads the notebook's arrays by their names. The line's comment is kept as
    it is (`# {x} was 64`): nothing reads it."""
    code = cells.magic_code(line)
    if "$" in code or "{" in code or "}" in code:       # else expanding changes nothing
        formatter = _LineFormatter()
        line = shell.var_expand(code, _EXPAND_DEPTH, formatter) + line[len(code):]
        if formatter.refused is not None:
            from IPython.core.error import UsageError
            field, value = formatter.refused
            raise UsageError(
                f"`{field}` on the magic line is {_array_words(value)}, whose printed text is "
                f"not its value; a cell reads the notebook's arrays by their names (write "
                f"the name in the cell), and a line takes numbers, strings and lists")
    return line


class _LineFormatter(DollarFormatter):
    """IPython's expansion of `$name` and `{expr}`, refusing an array (what `refused` holds:
    the field and its value; IPython's `var_expand` keeps the line as it was on any error)."""

    def __init__(self):
        super().__init__()
        self.refused = self.field = None

    def parse(self, fmt_string):
        for literal, field, spec, conversion in super().parse(fmt_string):
            self.field = field
            yield literal, field, spec, conversion

    def format_field(self, value, format_spec):
        if _array_text_is_not_value(value):
            self.refused = (self.field, value)
            raise ValueError("an array on a magic line")
        return super().format_field(value, format_spec)


def _array_text_is_not_value(value) -> bool:
    """An array whose `str` is not its value: every one but a numpy number or 0-d numpy
    array (printed in the fewest digits that read back exactly)."""
    if isinstance(value, np.generic) or type(value) is np.ndarray and value.ndim == 0:
        return False
    return hasattr(value, "__array__") or hasattr(value, "__dlpack__")


def _array_words(value) -> str:
    shape = getattr(value, "shape", None)
    shape = "" if shape is None else f" of shape {tuple(shape)}"
    kind = type(value)
    return f"a `{kind.__module__.split('.')[0]}.{kind.__name__}`{shape}"


def _say_not_expanded(err, source: str, user_ns: dict) -> None:
    """A syntax error at `{name}` in a cell, where the notebook binds `name`: say that a
    cell's text is not expanded (only its magic line is) and that the cell reads `name`
    itself, as data (an array expanded to its printed text would be cut short)."""
    if not (isinstance(err, ZynMLSyntaxError) and err.message.startswith("unexpected '{'")):
        return
    lines = source_lines(source)
    text = lines[err.line - 1][err.column - 1:] if 0 < err.line <= len(lines) else ""
    name = re.match(r"\{\s*([A-Za-z_]\w*)\s*\}", text)
    if name and name.group(1) in user_ns and "is not expanded" not in err.message:
        name = name.group(1)
        err.message += (f" (a cell's text is not expanded as its magic line is: write "
                        f"`{name}`, and the cell reads the notebook's `{name}` as data)")
        err.args = (err.message,)


_UNBOUND = object()


@functools.lru_cache(maxsize=256)
def _cell_form(cell: str) -> tuple:
    """(ZynML source, names it binds, names it reads that the notebook may bind, those of
    them it binds at the top level before any statement reads them) of a cell's text, made
    once per text: a cell run again is neither rebuilt nor walked. The magic line is line 1
    of the cell: ZynML line numbers (errors, kernel names, `// line N` comments in
    generated code) count it, as the notebook shows them."""
    source = "\n" + cell
    free, bound = cells.names_of(source)
    free = tuple(name for name in free if not cells.ipython_name(name))
    program = parse_cached(source)
    first = _bound_before_read(program, free)
    # names the cell assigns (`acc += 1` on a name an earlier cell or the notebook bound)
    # go back to the notebook too
    bound = tuple(dict.fromkeys(bound + tuple(cells.assigned_names(program))))
    return source, bound, free, first


@functools.lru_cache(maxsize=64)
def _line_names(line: str) -> tuple:
    """The names the annotations of a magic's line read (`@device(dev)`): the notebook's
    values of them go to the run as those of the cell's names do (they were left out, and
    a device held in a Python name was `unknown`)."""
    text = _line_words(line)
    if not text:
        return ()
    try:
        free, _ = cells.names_of(f"compute() {text} {{\n}}\n")
    except ZynMLError:
        return ()           # (the run says what is wrong with the line)
    return tuple(name for name in free if not cells.ipython_name(name))


def _bound_before_read(program, names) -> tuple:
    """Those of `names` that a top-level `let`, `var` or `pipeline` of `program` binds
    before any statement reads them (not in the statement that binds them either): a run
    that gets past that statement never sees the value the notebook had."""
    first = {}
    for stmt in program.body:
        for name in cells.names_read(stmt):
            first.setdefault(name, False)       # read first (or where it is bound)
        if isinstance(stmt, A.Let):
            binds = stmt.names
        elif isinstance(stmt, (A.VarDecl, A.Pipeline)):
            binds = (stmt.name,)
        else:
            binds = ()
        for name in binds:
            first.setdefault(name, True)
    return tuple(name for name in names if first.get(name))


# ----------------------------------------------------------------------- values to Python

def to_python(value):
    """A ZynML value as Python code wants it: numpy for a tensor on `cpu`, CuPy (no copy,
    through DLPack) for `cuda:N`, the ZynBook tensor itself on other devices and when it is
    sharded across several (numpy reads it through __array__); lists and
    tuples element by element, a record field by field (still a record); everything else
    as it is."""
    if type(value) is Tensor:       # the usual case: a tensor holding its device's array
        data, device = value.data, value.device
        if device == "cpu":
            if type(data) is np.ndarray:
                return data
        elif device.startswith("cuda"):
            cupy = sys.modules.get("cupy")
            if cupy is not None and type(data) is cupy.ndarray:
                return data
    if isinstance(value, Tensor) or is_tensor(value):
        if hasattr(value, "shards"):        # a sharded tensor stays where its parts are
            return value
        device = value.device
        if device == "cpu":
            return value.numpy()
        if device.startswith("cuda"):
            cupy = sys.modules.get("cupy")
            if cupy is None:
                import cupy

            if isinstance(value.data, cupy.ndarray):
                return value.data       # already the CuPy array on that device
            return cupy.from_dlpack(value)
        return value
    if isinstance(value, list):
        return [to_python(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_python(v) for v in value)
    if isinstance(value, Record):
        return Record({k: to_python(value[k]) for k in value.keys()})
    return value


def _to_notebook(value, was):
    """`to_python(value)`, and a record as a dict where the notebook's value was one: a cell
    writing into an array of a dict (`params.w[0] = 0.0`) leaves Python a dict of arrays,
    as a list stays a list (it held ZynML's read-only record of tensors from then on)."""
    if isinstance(value, Record) and isinstance(was, dict):
        return {k: _to_notebook(value[k], was.get(k)) for k in value.keys()}
    return to_python(value)


def _cell(value) -> str:
    """A device property for the table: memory in GiB, nothing for a missing one."""
    if value is None:
        return ""
    if isinstance(value, int) and value >= 2**30:
        return f"{value / 2**30:.1f} GiB"
    return str(value)


def _notebook_values(shell, names, skip=None, held=()) -> dict:
    """The notebook's values of `names` that a ZynML cell may bind (arrays and what
    `bindable` accepts; not IPython's hidden names), but for the names in `skip`. A name
    the session already holds (`held`) is passed whatever the notebook now holds there
    (None, a function): the cell must not run on the value the notebook replaced, and
    the session says why it cannot use the new one. A name holding the very array of the
    tensor the session holds there, in a dtype numpy has none of (a bf16 result %%compute
    wrote back as f32) or committed to its device, is not passed: the session's tensor is
    read, still bf16 and still placed."""
    user_ns = shell.user_ns
    hidden = getattr(shell, "user_ns_hidden", {})
    env = {}
    for name in names:
        value = user_ns.get(name, _UNBOUND)
        if value is not _UNBOUND and (skip is None or name not in skip) and \
                name not in hidden and (type(value) in _ARRAY_TYPES or bindable(value)
                                        or name in held):
            mine = held.get(name) if held else None
            # (in the tensor's shape still: `y.shape = (2, 3)` in Python binds it again)
            if type(mine) is Tensor and mine.data is value and (mine.dtype == "bf16" or
                                                                mine.committed) and \
                    mine.shape == value.shape:
                borrowed(value)     # (still the notebook's: host code writing copies first)
                continue
            env[name] = value
    return env


def _unusable_read(shell, err, source: str):
    """For `unknown name x` where the notebook binds `x` to a value ZynML cannot use (a
    range, a set, a function, None, bytes), left unbound: the type error naming the value
    at the cell's first read of `x` (as for a name the session held), else None."""
    from ..errors import ZynMLNameError, ZynMLTypeError
    from ..session import _bind_env, _first_use

    name = err.unknown if isinstance(err, ZynMLNameError) else None
    if name is None:
        return None
    value = shell.user_ns.get(name, _UNBOUND)
    if value is _UNBOUND or name in getattr(shell, "user_ns_hidden", {}) or \
            cells.ipython_name(name):
        return None
    program = parse_cached(source)
    try:
        _bind_env({name: value}, program, source)
    except ZynMLError as typed:
        return typed
    span = _first_use(program, name)
    if span is None and err.span.line <= 0:
        return None
    typed = ZynMLTypeError(f"`{name}` is bound to a Python value of type "
                           f"`{type(value).__name__}`, which a ZynML program cannot use; bind "
                           "arrays (numpy, CuPy, torch), numbers, strings, dicts or lists",
                           *((span, source) if span is not None else (err.span, err.source)))
    if span is None:                # read by a pipeline the cell called, where it says
        typed.calls = err.calls
    return typed


def _bind_unreplaced(shell, session, kept: dict) -> None:
    """After a failed run: bind the notebook values left unbound because the cell replaces
    them (`kept`: name -> (the value, what the session held)) where the run did not get
    that far (the session holds what it held before), as binding every value before the
    run would have."""
    values = _notebook_values(shell, kept)
    namespace = session.namespace
    with session.lock:
        for name, value in values.items():
            if value is kept[name][0] and namespace.get(name, _UNBOUND) is kept[name][1]:
                try:
                    namespace[name] = bind_value(value)
                except Exception:       # (a value made from a ZynML one binds)
                    pass


def _read_pipeline_globals(shell, session, pipeline) -> None:
    """Before `pipeline` is called from Python: the notebook's values of the names it
    reads bound in `session` (cells.bind_pipeline_globals)."""
    namespace = session.namespace

    def values(names) -> dict:
        session.forget_deleted(names, shell.user_ns)
        return {name: value for name, value in
                _notebook_values(shell, names, held=namespace).items()
                if not _holds(namespace.get(name, _UNBOUND), value)}

    cells.bind_pipeline_globals(session, pipeline, values)


def _holds(held, value) -> bool:
    """The session's value `held` is the notebook's `value` (or a tensor of that very
    array): nothing to bind again."""
    return held is value or type(held) is Tensor and held.data is value


def _int_of(value):
    """A Python or numpy int, or a 0-d integer array or tensor (a host int to ZynML), as an
    int; None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if getattr(value, "ndim", None) == 0:
        try:
            value = np.asarray(value)
        except Exception:           # (a GPU array: not worth a copy to the host here)
            return None
        return int(value) if value.dtype.kind in "iu" else None
    return None


def note_python_bounds(session, given: dict, source: str) -> None:
    """Warn (a `ZynMLWarning`: the line and a caret) where an int the cell read from Python
    (`given`: the Python values the run bound) bounds a loop short of the axis its
    variable indexes: legal, a bound the host gives being a bound (docs/language.md), but
    not in the cell's text, and most likely a notebook's `n` the cell meant as the size
    solved from the data. For `%%compute`, `%%zynml_timeit`, `%%compare` and the ZynML
    kernel."""
    import warnings

    from ..compiler.dims import short_host_bounds
    from ..errors import ZynMLWarning

    ints = {name: _int_of(v) for name, v in given.items()}
    ints = {name: v for name, v in ints.items() if v is not None}
    if not ints:
        return
    said = set()                    # (one note a name: the first axis it bounds short)
    # the blocks the run planned (an @async one still running, one split across devices or
    # fused), and those it launched by other ways (a replayed graph)
    blocks = [(p.lowered, p.sizes) for p in list(session.last_plans)] + \
        [(k.lowered, k.sizes) for k in session.last_kernels]
    for lowered, sizes in blocks:
        for c, read, covered, size in short_host_bounds(lowered, sizes, ints):
            # (a pipeline's own argument of that name holds another value)
            names = [n for n in read if sizes.get(n) == ints[n] and n not in said]
            if not names:
                continue
            said.update(names)
            values = ", ".join(f"`{n}` = {ints[n]}" for n in names)
            message = (f"{c.what}: the loop covers {covered} of the axis's {size} positions, "
                       f"{values} being read from Python (a bound Python gives is a bound, not "
                       f"a size solved from the shapes; `del {names[0]}` in Python or another "
                       f"name there covers the axis)")
            warnings.warn_explicit(ZynMLWarning(message, c.span, source), ZynMLWarning,
                                   "<zynml>", c.span.line)


def _line_words(line: str) -> str:
    return cells.magic_code(line).strip()


# --------------------------------------------------------------------------------- magics

@magics_class
class ComputeMagics(Magics):
    """See the package docstring."""

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        # name -> id of the Python value %%compute last wrote there (a value made from a
        # ZynML one, so binding it again cannot fail)
        self._written: dict = {}

    @property
    def session(self):
        session = notebook_session()
        # a pipeline a cell gives Python reads the notebook's names when Python calls it
        if session.outside_names is None:
            session.outside_names = functools.partial(_read_pipeline_globals, self.shell,
                                                      session)
        return session

    def _cell_form(self, cell: str) -> tuple:
        """`_cell_form(cell)`; a syntax error at `{name}` says the cell is not expanded."""
        try:
            return _cell_form(cell)
        except ZynMLError as err:
            _say_not_expanded(err, "\n" + cell, self.shell.user_ns)
            raise

    def _program_and_env(self, cell: str, line: str = ""):
        """The cell's ZynML source, the names it binds and the notebook values its free
        names and those of the annotations on its magic `line` bind to (looked up at every
        run: the notebook may have rebound them)."""
        source, bound, free, _ = self._cell_form(cell)
        free = cells.with_pipeline_globals(free + _line_names(line), self.session.namespace,
                                           source)
        self.session.forget_deleted(free, self.shell.user_ns)
        return source, bound, _notebook_values(self.shell, free, held=self.session.namespace)

    @cell_magic
    @no_var_expand
    def compute(self, line, cell):
        """%%compute [@annotation ...]: run the cell as ZynML (see `zynbook.magics`)."""
        shell = self.shell
        line = expand_line(shell, line)
        source, bound, free, first = self._cell_form(cell)
        user_ns = shell.user_ns
        written = self._written
        session = self.session
        namespace = session.namespace
        free = cells.with_pipeline_globals(free + _line_names(line), namespace, source)
        # a name the cell binds before it reads it, holding what this magic last wrote
        # there, is not bound: the run replaces it unread (a run that fails before it does
        # binds it then, see `_bind_unreplaced`)
        kept = None
        for name in first:
            value = user_ns.get(name, _UNBOUND)
            if value is not _UNBOUND and id(value) == written.get(name):
                if kept is None:
                    kept = {}
                kept[name] = (value, namespace.get(name, _UNBOUND))
        env = _notebook_values(shell, free, kept, namespace)   # the other names it reads
        session.forget_deleted(free, user_ns)
        # a value the session kept under a name the notebook has rebound since, which the
        # cell binds before it reads: stale, a run not getting that far must not write it
        # back over the notebook's
        stale = [name for name in bound if name not in env and name in namespace and
                 name not in shell.user_ns_hidden and
                 id(user_ns.get(name, namespace)) != written.get(name, id(namespace))]
        if stale:
            with session.lock:
                for name in stale:
                    namespace.pop(name, None)
        held = [namespace.get(name, _UNBOUND) for name in bound]
        given = {}
        try:
            watched = cell_progress(session)
            try:
                # bound here to tell after the run which of them the cell changed
                given = _bind_env(env, parse_cached(source), source) if env else {}
                if len(given) < len(env):
                    session.forget_unusable(env, given)
                datas = {name: getattr(v, "data", None) for name, v in given.items()}
                # env as a dict: a notebook name such as `source` is no keyword clash
                value, is_expr = session._run_cell(source, _line_words(line), given)
                note_python_bounds(session, given, source)
            finally:
                watched.close()
        except BaseException as err:
            if kept:
                _bind_unreplaced(shell, session, kept)
            unusable = _unusable_read(shell, err, source)
            shown = err if unusable is None else unusable
            if isinstance(shown, ZynMLError) and shown.line == 1 and not shown.calls:
                # line 1 is the magic line (blank in the cell's ZynML): show it as the cell
                # has it, the annotations (parsed stripped, after `compute() `) after blanks
                # (not line 1 of the text of a pipeline the cell called)
                on_annotation_line(shown, f"%%compute {line.rstrip()}" + source,
                                   len(line) - len(line.lstrip()))
            if unusable is not None:
                raise unusable from None
            raise
        finally:
            after_cell(session)     # its kernels kept; the device announced if it changed
            made = made_from = _UNBOUND
            # IPython's own names (`get_ipython`, `In`, `exit`) are neither read from the
            # notebook nor written there: `let get_ipython = 3` would break every cell after
            hidden = shell.user_ns_hidden
            for name, was in zip(bound, held):
                # (a name the notebook deleted that this run did not bind again stays
                # deleted: a cell failing before its `let` brought it back)
                if name not in namespace or name in hidden:
                    continue
                now = namespace[name]
                if name in env:
                    # the notebook's value, unless the cell rebound it or wrote into it (a
                    # tensor then holds a copy): a torch tensor stays one. Not bound (the
                    # binding failed, or the cell never reads it): the run did not start
                    # from it, and what the session held before is not written back
                    if now is given.get(name, was) and (name not in given or (
                            getattr(now, "data", None) is datas[name]
                            and not isinstance(now, (list, Record)))):
                        continue
                elif name not in user_ns and now is was:
                    continue
                made_from = now
                made = user_ns[name] = _to_notebook(now, env.get(name))
                written[name] = id(made)
        if not is_expr:
            return None
        if value is made_from and (made is value or type(value) is Tensor and made is value.data):
            return made         # what to_python gives again (the value, or its own array)
        return to_python(value)

    @cell_magic
    @no_var_expand
    def zynml_timeit(self, line, cell):
        """%%zynml_timeit [-r R] [@annotation ...]: run the cell as %%compute does, once to
        compile and then R times (default 7); print the median wall time with its spread
        and, per kernel, the median kernel time, its interquartile range, GFLOP/s, GB/s and
        share of the device's peak."""
        import re
        import time

        from ..kernel.display import format_seconds, kernel_rates_table, sample_stats

        from IPython.core.error import UsageError

        written = expand_line(self.shell, line).strip()
        # options before a comment only (`// was -r 50, -fast` is a note)
        code = cells.magic_code(written)
        given = re.findall(r"(?:^|(?<=\s))-r(?:\s*(\d+)(?!\S)|\s*(\S*))", code)
        if len(given) > 1 or given and not given[0][0]:
            what = "given twice" if len(given) > 1 else f"not `{given[0][1]}`" \
                if given[0][1] else "given no number"
            # (as the kernel's %timeit, -r 0 runs once)
            raise UsageError(f"%%zynml_timeit -r R: R is how many times to run the cell, a "
                             f"whole number; {what}")
        repeat = int(given[0][0]) if given else 7
        # the option blanked, not removed: the annotations keep their columns in the line
        blanked = re.sub(r"-r\s*\d+", lambda m: " " * len(m.group()), code)
        other = re.search(r"(?:^|\s)(-[A-Za-z]\w*)", blanked)
        if other:
            raise UsageError(f"%%zynml_timeit takes -r R and annotations such as "
                             f"@device(\"cpu\"); `{other.group(1)}` is not one of them")
        annotations = blanked.strip()
        source, _, env = self._program_and_env(cell, annotations)
        session = self.session
        try:
            with cell_progress(session):
                session._run_cell(source, annotations, env)
                note_python_bounds(session, env, source)
                compile_s = sum(ln.times.compile or 0.0 for ln in session.launches)
                walls, samples = [], {}
                for _ in range(max(1, repeat)):
                    t0 = time.perf_counter()
                    session._run_cell(source, annotations, env)
                    walls.append(time.perf_counter() - t0)
                    for ln in session.launches:
                        if ln.times.kernel is not None:
                            samples.setdefault((ln.kernel, ln.device), []).append(
                                ln.times.kernel)
        except ZynMLError as err:
            unusable = _unusable_read(self.shell, err, source)
            shown = err if unusable is None else unusable
            if shown.line == 1 and not shown.calls:
                # line 1 is the magic line: the annotations were parsed after `compute() `
                # (as %%compute's are), here they stand after `%%zynml_timeit ` and blanks
                start = len("%%zynml_timeit ") + len(blanked) - len(blanked.lstrip())
                on_annotation_line(shown, f"%%zynml_timeit {written}" + source,
                                   start - len("compute() "))
            if unusable is not None:
                raise unusable from None
            raise
        remember(session)
        st = sample_stats(walls)
        print(f"{format_seconds(st['median'])} per run (median of {st['n']}; spread "
              f"{format_seconds(st['min'])} .. {format_seconds(st['max'])})"
              + (f"; the first run compiled for {format_seconds(compile_s)}"
                 if compile_s else ""))
        if samples:
            print(kernel_rates_table(samples, list(session.launches),
                                     list(session.last_kernels)))

    @line_magic
    def zynml_devices(self, line=""):
        """List the compute devices ZynBook sees (the default one is marked)."""
        from .. import compute_devices

        if _line_words(line):       # (it listed them, the words unsaid)
            from IPython.core.error import UsageError
            raise UsageError(f"%zynml_devices takes no arguments, not `{_line_words(line)}`; "
                             "%zynml_device ID sets the default device")
        devices = compute_devices()
        default = self.session.default_device
        # the default set under another id the device answers to (`webgpu:0`) marks it too
        default_id = next((d.get("id") for d in devices
                           if default == d.get("id") or default in (d.get("ids") or ())),
                          default)
        keys = ["id", "type", "name", "backend", "memory"]
        rows = [[_cell(d.get(k)) for k in keys] for d in devices]
        widths = [max(len(k), *(len(r[i]) for r in rows)) for i, k in enumerate(keys)]
        text = ["  " + "  ".join(k.ljust(w) for k, w in zip(keys, widths)).rstrip()]
        for d, r in zip(devices, rows):
            mark = "* " if d.get("id") == default_id else "  "
            text.append((mark + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip())
        head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
        bold = " style='font-weight:bold'"
        body = "".join(
            f"<tr{bold if d.get('id') == default_id else ''}>"
            + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
            for d, r in zip(devices, rows))
        display({"text/plain": "\n".join(text) + f"\n(* default device: {default})",
                 "text/html": f"<table><tr>{head}</tr>{body}</table>"
                              f"<div>default device: <code>{html.escape(default)}</code></div>"},
                raw=True)

    @line_magic
    def zynml_device(self, line=""):
        """%zynml_device ID: set the default device of %%compute cells (no ID: show it)."""
        text = _line_words(line)
        device = text.strip("'\"")
        if device:
            try:
                self.session.default_device = device
            except ZynMLError as err:     # the caret under the id on the magic's line
                if err.line <= 0:
                    shown = f"%zynml_device {line.rstrip()}"
                    column = shown.find(text, len("%zynml_device")) + 1
                    err.span = dataclasses.replace(err.span, line=1, column=column,
                                                   end_line=1, end_column=column + len(text))
                    err.source = shown
                raise
            announce_device(self.session)
        print(f"default device: {self.session.default_device}")

    @line_magic
    def zynml_inspect(self, line=""):
        """%zynml_inspect [KERNEL] [LANGUAGE] [--full]: the generated code of the last
        %%compute cell that ran compute blocks: a summary, the stages there are, and the
        kernel in the language of its device (or LANGUAGE) without the helpers it does not
        use; --full shows the whole text."""
        from IPython.core.error import UsageError

        kernels, launches = last_run(self.session)
        if not kernels:
            print("No compute block has run yet.")
            return
        want, full = parse_inspect_args(_line_words(line))
        try:
            bundle = code_bundle(kernels, launches, want, full, self.session.namespace)
        except InspectUsageError as err:
            raise UsageError(str(err)) from None
        display(bundle, raw=True)
