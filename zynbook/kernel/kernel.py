"""The ZynML kernel, built on ipykernel's IPythonKernel.

Why IPythonKernel: comms (ipywidgets), rich display, history, execution counts, `%python`
cells and interrupts all come from IPython. A ZynML cell is turned into a few lines of Python
(`ZynMLShell.transform_cell`) that call `ZynMLRunner` on each piece of ZynML, so IPython runs
it like any cell: the last expression's value goes through the display hook (Out[n], `_`),
SIGINT raises KeyboardInterrupt in the running cell, and ZynML errors are caught by a
custom exception handler that shows the ZynML source line and caret instead of a Python stack.

The ZynML namespace (`Session.namespace`) and IPython's user namespace are bridged both ways:
names a ZynML cell reads are taken from Python when Python defined or rebound them, and names
ZynML binds are written back to Python after each piece of ZynML.
"""
from __future__ import annotations

import dataclasses
import functools
import html as _html
import math
import re
import sys
import textwrap
import time
from typing import Any

import numpy as np
from ipykernel.ipkernel import IPythonKernel
from ipykernel.zmqshell import ZMQInteractiveShell
from IPython.display import display
from traitlets import Type

from ..compiler.parser import in_string, parse
from ..errors import ZynMLError
from ..highlight import ANNOTATIONS, BUILTIN_FUNCTIONS, KERNEL_TYPES, KEYWORDS
from . import LANGUAGE_INFO, cells
from .display import (InspectUsageError, ShortValue, bindable, code_bundle, describe,
                      error_evalue, format_seconds, is_tensor, launch_table,
                      normalize_source, kernel_rates_table, parse_inspect_args,
                      register_formatters, sample_stats, show_error, tensor_text)
from . import state
from .builtin_docs import builtin_doc
from .progress import cell_progress
from .state import notebook_session

# the fields `x.` may be followed by in ZynML where x is a tensor (runtime/interp.py's
# `attr`); its methods are `_TENSOR_METHODS` there
TENSOR_ATTRIBUTES = ("shape", "dtype", "device", "ndim", "size", "T")

ANNOTATION_DOCS = {
    "kernel": "@kernel TYPE [params]: the kernel type, the schedule for a recognised shape",
    "device": '@device("cuda:0"): where the compute block runs (cpu, cuda:N, vulkan:N, '
              "metal:N, webgpu:N, browser:N: the page's GPU, auto)",
    "async": "@async: the block returns a future; `await` it for the value",
    "workgroup": "@workgroup(x, y, z): threads per workgroup (a hint)",
    "shared": "@shared(bytes): shared memory per workgroup (a hint)",
    "tile": "@tile(block_q=64, ...): tile sizes (a hint)",
    "broadcast": "@broadcast(name, axis=1): broadcast an input along an axis",
    "parallel": "@parallel(data|model): multi-device split",
    "nofuse": "@nofuse: the block is launched on its own, never fused with its neighbours",
    "autotune": "@autotune: the schedule's choices measured on the device, the fastest kept "
                "(and recorded in the tuning cache)",
}


class ZynMLRunner:
    """Runs the ZynML pieces of cells in the notebook session and bridges the namespaces."""

    def __init__(self, shell):
        self.shell = shell
        self._formatters = False
        self.last_kernels: list = []
        self.last_launches: list = []
        self.kernels_by_source: dict[str, Any] = {}
        # name -> (Python value, ZynML value) as of the last exchange
        self._links: dict[str, tuple] = {}

    @property
    def session(self):
        """The notebook session (made on first use, so the kernel starts fast)."""
        session = notebook_session()
        if session.outside_names is None:
            # a pipeline a cell gave Python reads Python's names when a %python cell calls it
            session.outside_names = functools.partial(self._read_pipeline_globals, session)
        if not self._formatters:
            from ..runtime.builtins import int_text
            register_formatters(self.shell)
            # a ZynML int of any length is shown (Python's repr refuses 4300 digits or more)
            self.shell.display_formatter.formatters["text/plain"].for_type(
                int, lambda n, p, cycle: p.text(int_text(n)))
            self._formatters = True
        return session

    # ----------------------------------------------------------------- namespaces
    def _hidden(self) -> set:
        return set(getattr(self.shell, "user_ns_hidden", {}))

    def python_names(self, source: str) -> dict:
        """Values from the Python namespace for the names `source` reads, where Python has
        a value ZynML has not seen yet."""
        try:
            free, _ = cells.names_of(source)
        except ZynMLError:
            return {}
        # (and the globals of the pipelines it calls, read from the session then)
        free = cells.with_pipeline_globals(free, self.session.namespace, source)
        self._forget_deleted(self.session, free)
        return self._python_values(free)

    def _forget_deleted(self, session, names) -> None:
        """Drop from `session` those of `names` Python deleted (not its own `_` names or
        IPython's, which ZynML keeps to itself)."""
        hidden = self._hidden()
        for name in session.forget_deleted(
                [n for n in names if not n.startswith("_") and n not in hidden],
                self.shell.user_ns):
            self._links.pop(name, None)

    def _read_pipeline_globals(self, session, pipeline) -> None:
        """Before a `%python` cell calls `pipeline`: Python's values of the names it reads
        bound in `session` (cells.bind_pipeline_globals)."""
        def values(names) -> dict:
            self._forget_deleted(session, names)
            return self._python_values(names)

        cells.bind_pipeline_globals(session, pipeline, values)

    def _python_values(self, names) -> dict:
        """Python's values of `names` the session must bind: those ZynML has not seen yet
        (`python_names`)."""
        user_ns, hidden = self.shell.user_ns, self._hidden()
        env = {}
        for name in names:
            if name.startswith("_") or name in hidden or name not in user_ns:
                continue
            value = user_ns[name]
            if self._session_reads(name, value):
                continue
            # a name the session holds is passed whatever Python now holds there (None, a
            # function): the ZynML must not run on the value Python replaced, and the
            # session says why it cannot use the new one
            if bindable(value) or name in self.session.namespace:
                env[name] = value
        return env

    def value_of(self, name: str):
        """The value a cell reading `name` now would see (KeyError if none): the session's,
        unless Python rebound the name since (then Python's) or deleted it."""
        namespace, user_ns = self.session.namespace, self.shell.user_ns
        if name.startswith("_") or name in self._hidden():
            return namespace[name]
        value = user_ns[name]
        if name in namespace and self._session_reads(name, value):
            return namespace[name]
        return value

    def _session_reads(self, name: str, value) -> bool:
        """Whether the session's value of `name` is what a cell reads for Python's `value`:
        the session's own value, which Python holds, or its binding of Python's array. A
        dict, a list or a bf16 torch tensor was bound as a copy (a record, a list, f32
        values): Python changing it in place (`d["w"] = w2`, `lst.append(4)`, `t.mul_(2)`)
        is read again (the cell read the copy of the earlier cell)."""
        link = self._links.get(name)
        return link is not None and (value is link[1] or (
            value is link[0] and self.session.namespace.get(name) is link[1]
            and _binding_of(link[1], value)))

    def export_names(self, before: dict, env: dict, source: str = "") -> None:
        """Write the names the ZynML just run bound or rebound (compared with `before`,
        the namespace as it was) into the Python namespace; names bound from Python (`env`)
        stay as Python has them, unless the ZynML wrote into them (`x[0] = 5.0` on an array
        Python bound: the tensor took a copy, the caller's array is unchanged), when the
        tensor goes to Python: else Python and ZynML hold different values under one name
        from then on, and what Python writes into its array no cell sees."""
        user_ns, namespace = self.shell.user_ns, self.session.namespace
        hidden = self._hidden()
        assigned = _assigned(source) if env and source else ()
        for name, pyvalue in env.items():
            if name in namespace:
                value = namespace[name]
                if name in assigned and not _binding_of(value, pyvalue):
                    # the cell gave it a value of its own (`v += 1` on Python's v): Python's
                    # name holds it too (it kept the value it had)
                    user_ns[name] = value
                    self._links[name] = (value, value)
                else:
                    self._links[name] = (pyvalue, value)
        if source and self._links:
            try:
                read = cells.names_of(source)[0]
            except ZynMLError:
                read = ()
            for name in read:
                link = self._links.get(name)
                if link is not None and link[0] is not link[1] and \
                        namespace.get(name) is link[1] and user_ns.get(name) is link[0] and \
                        _took_a_copy(link[1]):
                    user_ns[name] = link[1]
                    self._links[name] = (link[1], link[1])
        for name, value in list(namespace.items()):
            # IPython's own names (`get_ipython`, `In`, `Out`, `exit`) are not read from
            # Python and not written there either: `let get_ipython = 3` would break
            # every later cell, which calls it
            if name.startswith("_") or name in hidden or before.get(name) is value:
                continue
            if name in env and self._links[name][1] is value:
                continue
            user_ns[name] = value
            self._links[name] = (value, value)

    # ------------------------------------------------------------------- running
    def run(self, source: str, at: tuple | None = None):
        """Run one piece of ZynML; its value if it ends in an expression, else None. `at`:
        (line, column, the cell's line) where `source` is the code after `%time` on that
        line: an error in it points at the cell's line and column."""
        from ..magics.compute import note_python_bounds

        session = self.session
        before = dict(session.namespace)
        env = self.python_names(source)
        try:
            with cell_progress(session):
                # env as a dict: a Python name such as `compute_annotations` is no keyword
                value, is_expr = session._run_cell(source, "", env)
            note_python_bounds(session, env, source)
        except ZynMLError as err:
            from ..magics.compute import _say_not_expanded, _unusable_read

            _say_not_expanded(err, source, self.shell.user_ns)     # `{x}`: write `x`
            # `unknown name x` where Python binds x to a value ZynML cannot use: say so
            unusable = _unusable_read(self.shell, err, source)
            if unusable is not None:
                err = unusable
            if at is not None:
                _on_cell_line(err, source, *at)
            if unusable is not None:
                raise err from None
            raise
        finally:
            self._remember()
            self.export_names(before, env, source)
            state.announce_device(session)      # `config { compute_device }` may set it
        return value if is_expr else None

    def _remember(self) -> None:
        state.remember(self.session)
        kernels = list(self.session.last_kernels or [])
        if kernels:
            self.last_kernels = kernels
            self.last_launches = list(self.session.launches or [])
            for k in kernels:
                text = getattr(k, "zynml", "") or ""
                if text:
                    self.kernels_by_source[normalize_source(text)] = k

    def time(self, source: str, at: tuple | None = None):
        """`%time`: run once, print the wall time and each launch's phases."""
        t0 = time.perf_counter()
        try:
            return self.run(source, at)
        finally:
            wall = time.perf_counter() - t0
            print(f"Wall time: {format_seconds(wall)}")
            launches = list(self.session.launches or [])
            if launches:
                print(launch_table(launches, list(self.session.last_kernels or [])))

    def timeit(self, source: str, args: str = "", at: tuple | None = None):
        """`%timeit [-n N] [-r R]`: the median of R runs of N loops (and their spread), then
        each kernel's median kernel time with its GFLOP/s, GB/s and share of the device's
        peak. The first run compiles and is not counted (its compile time is shown)."""
        # `-n 3` or `-n3`, as cells.split_cell takes them; no runs at all is one
        opts = dict(re.findall(r"-([nr])\s*(\d+)", args))
        number = int(opts.get("n", 0))
        repeat = max(1, int(opts.get("r", 7)))
        self.run(source, at)                 # compile and warm the caches
        first = list(self.session.launches or [])
        compile_s = sum(ln.times.compile or 0.0 for ln in first)
        kernel_samples: dict = {}
        last = {"launches": [], "kernels": []}

        def once():
            self.run(source, at)
            last["launches"] = list(self.session.launches or [])
            last["kernels"] = list(self.session.last_kernels or [])
            for ln in last["launches"]:
                if ln.times.kernel is not None:
                    kernel_samples.setdefault((ln.kernel, ln.device), []).append(
                        ln.times.kernel)
        if not number:
            number = 1
            while True:
                t0 = time.perf_counter()
                for _ in range(number):
                    once()
                if time.perf_counter() - t0 >= 0.2 or number >= 10**6:
                    break
                number *= 10
        per_loop = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                once()
            per_loop.append((time.perf_counter() - t0) / number)
        st = sample_stats(per_loop)
        print(f"{format_seconds(st['median'])} per loop (median of {repeat} "
              f"run{'s' if repeat != 1 else ''}, {number} "
              f"loop{'s' if number != 1 else ''} each; spread {format_seconds(st['min'])} .. "
              f"{format_seconds(st['max'])})" + (f"; the first run compiled for "
                                                 f"{format_seconds(compile_s)}"
                                                 if compile_s else ""))
        if kernel_samples:
            print(kernel_rates_table(kernel_samples, last["launches"], last["kernels"]))
        return None

    # -------------------------------------------------------------------- magics
    def usage(self, message: str):
        """A magic given arguments it does not take: IPython's usage error."""
        from IPython.core.error import UsageError

        raise UsageError(message)

    def device(self, args: str = "", at: tuple | None = None):
        """`%device [ID]`: set (or show) the default device. A `//` or `#` comment ends the
        line, as on every magic's line (`cells.magic_code`). `at`: (the cell's line number,
        its text), where an id no device has is pointed at."""
        from ..errors import Span

        text = cells.magic_code(args).strip()
        args = text.strip("'\"")
        if args:
            try:
                self.session.default_device = args
            except ZynMLError as err:
                if at is not None and err.line <= 0:
                    line, origin = at
                    column = origin.find(text, len("%device")) + 1
                    err.span = Span(line, column, line, column + len(text))
                    err.source = "\n" * (line - 1) + origin
                raise
            state.announce_device(self.session)
            print(f"default device: {self.session.default_device}")
            return None
        from .. import compute_devices

        print(f"default device: {self.session.default_device}")
        for d in compute_devices():
            print(f"  {d.get('id', '?'):<10} {d.get('type', ''):<4} {d.get('name', '')}")
        return None

    def inspect(self, args: str = ""):
        """`%inspect [KERNEL] [LANGUAGE] [--full]`: the generated code of the last cell that
        ran compute blocks: a summary and the kernel (`--full`: the whole text)."""
        from IPython.core.error import UsageError

        kernels, launches = state.last_run(self.session)
        if not kernels:
            print("No compute block has run yet.")
            return None
        want, full = parse_inspect_args(cells.magic_code(args))
        try:
            bundle = code_bundle(kernels, launches, want, full, self.session.namespace)
        except InspectUsageError as err:
            raise UsageError(str(err)) from None
        display(bundle, raw=True)
        return None


class ZynMLShell(ZMQInteractiveShell):
    """IPython's kernel shell with ZynML cells: see the module docstring."""

    zynml: ZynMLRunner | None = None

    def init_zynml(self) -> None:
        self.zynml = ZynMLRunner(self)
        self.set_custom_exc((ZynMLError, KeyboardInterrupt), show_error)
        from ..magics.compare import CompareMagics

        self.register_magics(CompareMagics)     # %%compare, as in Python notebooks
        from ..backends import browser

        browser.register()                      # pages offer their GPU as `browser:N`

    def python_transform(self, code: str) -> str:
        return super().transform_cell(code)

    def transform_cell(self, raw_cell: str) -> str:
        if self.zynml is None:
            return super().transform_cell(raw_cell)
        return self.zynml_to_python(raw_cell)

    def zynml_to_python(self, cell: str) -> str:
        out = []
        call = "get_ipython().zynml"
        for part in cells.split_cell(cell):
            if part.kind == "python":
                out.append(self.python_transform(_dedent(part.text)))
            elif part.kind == "zynml":
                at = (part.line, part.column, part.origin) if part.origin else None
                if part.timed == "time":
                    out.append(f"{call}.time({part.text!r}, {at!r})\n")
                elif part.timed == "timeit":
                    out.append(f"{call}.timeit({part.text!r}, {part.args!r}, {at!r})\n")
                else:
                    out.append(f"{call}.run({part.text!r})\n")
            elif part.kind == "usage":
                out.append(f"{call}.usage({part.text!r})\n")
            elif part.name == "device":
                out.append(f"{call}.device({part.args!r}, {(part.line, part.origin)!r})\n")
            elif part.name == "inspect":
                out.append(f"{call}.inspect({part.args!r})\n")
            elif part.name.startswith("%%"):
                out.append(f"get_ipython().run_cell_magic({part.name[2:]!r}, {part.args!r}, "
                           f"{part.text!r})\n")
            else:
                out.append(f"get_ipython().run_line_magic({part.name!r}, {part.args!r})\n")
        return "".join(out) or "pass\n"

    def _showtraceback(self, etype, evalue, stb):
        if isinstance(evalue, ZynMLError):
            evalue = ShortValue(error_evalue(evalue))
        return super()._showtraceback(etype, evalue, stb)


def _assigned(source: str) -> tuple:
    """The names ZynML `source` binds or assigns (`let`, `var`, `x = ...`, `x += ...`)."""
    from ..session import parse_cached

    try:
        program = parse_cached(source)
    except ZynMLError:
        return ()
    return tuple(cells.bound_names(program)) + tuple(cells.assigned_names(program))


def _binding_of(value, pyvalue) -> bool:
    """Whether `value`, what the session holds under a name Python bound to `pyvalue`, is
    still the binding of it: `pyvalue` itself, or a tensor holding its array."""
    if value is pyvalue:
        return True
    from ..runtime.tensor import Tensor

    if not isinstance(value, Tensor) or _took_a_copy(value):
        return False
    data = value.data
    try:
        array = pyvalue if data is pyvalue else np.asarray(pyvalue)
        # its memory, in the shape and dtype the tensor took (Python may have reshaped its
        # array in place since, `x.shape = (2, 3)`: the cell read it as the old shape)
        return (data is pyvalue or bool(np.may_share_memory(data, array))) and \
            tuple(value.shape) == array.shape and value.numpy_dtype == array.dtype
    except Exception:  # an array numpy cannot read (on a GPU)
        return False


def _took_a_copy(value) -> bool:
    """Whether `value`, a tensor bound from a Python array without a copy, has taken a copy
    since (host code wrote into it): its array is no longer the caller's."""
    from ..runtime import builtins as B
    from ..runtime.tensor import Tensor

    if not isinstance(value, Tensor):
        return False
    data = value.data
    if type(data).__module__.split(".")[0] not in ("numpy", "cupy"):
        return False
    ref = B._CALLERS.get(id(data))
    return ref is None or ref() is not data


def _on_cell_line(err: ZynMLError, source: str, line: int, column: int, text: str) -> None:
    """Point `err`, raised in `source`, the code after `%time` on `line` of a cell (which
    starts at `column` of the cell's line `text`), at the cell: its columns on that line
    move by `column` and its source line is the cell's; so do those of a call in `source`
    that led to an error in a pipeline of another cell."""
    def moved(span):
        if span.line != line:
            return span
        end = span.end_column + column if span.end_line == line else span.end_column
        return dataclasses.replace(span, column=span.column + column, end_column=end)

    cell = "\n" * (line - 1) + text
    if err.source == source:
        err.span = moved(err.span)
        err.notes = tuple((note, moved(span)) for note, span in err.notes)
        err.source = cell
    err.calls = tuple((note, moved(span), cell) if text_ == source else (note, span, text_)
                      for note, span, text_ in err.calls)


def _dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


class ZynMLKernel(IPythonKernel):
    implementation = "zynml"
    implementation_version = "0.1.0"
    language = "zynml"
    language_version = "0.1"
    language_info = dict(LANGUAGE_INFO)
    banner = ("ZynML kernel: compute() kernels on CPU, CUDA and WebGPU.\n"
              "%device ID, %inspect [LANG] [--full], %time, %timeit, %%compare, "
              "%python / %%python")
    help_links = [{"text": "ZynBook Python API", "url": "https://github.com/zynbook/zynbook"}]
    shell_class = Type(ZynMLShell)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.shell.init_zynml()

    @property
    def runner(self) -> ZynMLRunner:
        return self.shell.zynml

    # ------------------------------------------------------------------- execute
    async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                         allow_stdin=False, **kwargs):
        reply = await super().do_execute(code, silent, store_history, user_expressions,
                                         allow_stdin, **kwargs)
        if reply.get("status") == "error":
            result = self.shell.last_execution_result
            err = result and (result.error_in_exec or result.error_before_exec)
            if isinstance(err, ZynMLError):
                reply["evalue"] = error_evalue(err)
        return reply

    # --------------------------------------------------------------- is_complete
    def do_is_complete(self, code):
        if code.lstrip().startswith("%%python"):
            body = code.lstrip().split("\n", 1)[1] if "\n" in code.lstrip() else ""
            return super().do_is_complete(body) if body.strip() else \
                {"status": "incomplete", "indent": ""}
        status, indent = cells.is_complete(code)
        reply = {"status": status}
        if status == "incomplete":
            reply["indent"] = indent
        return reply

    # ---------------------------------------------------------------- completion
    def _python_region(self, code: str, cursor: int):
        """(python code, its offset in `code`) if the cursor is in Python, else None."""
        stripped = code.lstrip()
        if stripped.startswith("%%python"):
            start = code.index("%%python")
            nl = code.find("\n", start)
            if nl >= 0 and cursor > nl:
                return code[nl + 1:], nl + 1
            return None
        line_start = code.rfind("\n", 0, cursor) + 1
        line_end = code.find("\n", cursor)
        line = code[line_start:line_end if line_end >= 0 else len(code)]
        if line.startswith("%python ") and cursor - line_start >= len("%python "):
            return line[len("%python "):], line_start + len("%python ")
        return None

    def do_complete(self, code, cursor_pos):
        # None: the end; past the end (a front end counting UTF-16 units): the end
        cursor_pos = len(code) if cursor_pos is None else max(0, min(cursor_pos, len(code)))
        region = self._python_region(code, cursor_pos)
        if region is not None:
            text, offset = region
            reply = super().do_complete(text, cursor_pos - offset)
            reply["cursor_start"] += offset
            reply["cursor_end"] += offset
            return reply
        matches, start = self.zynml_completions(code, cursor_pos)
        return {"status": "ok", "matches": matches, "cursor_start": start,
                "cursor_end": cursor_pos, "metadata": {}}

    def names_in_scope(self, code: str = "") -> list[str]:
        user_ns, hidden = self.shell.user_ns, set(self.shell.user_ns_hidden)
        # (not those Python deleted since: the next cell forgets them)
        names = [n for n in self.runner.session.namespace
                 if not n.startswith("_") and (n in user_ns or n in hidden)]
        names += [n for n, v in user_ns.items()
                  if not n.startswith("_") and n not in hidden and bindable(v)]
        names += cells.defined_names(code)
        return list(dict.fromkeys(names))

    def lookup(self, dotted: str):
        """The value a dotted name refers to in the ZynML or Python namespace."""
        head, *rest = dotted.split(".")
        value = self.runner.value_of(head)
        for attr in rest:
            value = _attr(value, attr)
        return value

    def zynml_completions(self, code: str, cursor: int) -> tuple[list[str], int]:
        line_start = code.rfind("\n", 0, cursor) + 1
        before = code[line_start:cursor]
        token, start = cells.token_before(code, cursor)
        if len(cells.line_code(before)) < len(before):
            return [], cursor           # a comment: no name of ZynML's is meant there
        # a device id: `%device cp|`, `@device("vul|`, `@device(["cpu", "vul|`,
        # `compute_device: "c|`
        m = re.match(r"%device\s+(\S*)$", before) or \
            re.search(r"(?:@device\(\s*(?:\[(?:\s*(?:\"[^\"]*\"|'[^']*')\s*,)*\s*)?|"
                      r"compute_device\s*:\s*)[\"']([^\"']*)$", before)
        if m:
            return _prefixed(_device_ids(), m.group(1)), cursor - len(m.group(1))
        if in_string(before):
            return [], cursor           # text, not code: no name of ZynML's is meant there
        # `%inspect KERNEL LANG`: the last cell's kernels and the languages
        m = re.match(r"%inspect\s+(?:\S+\s+)*(\S*)$", before)
        if m:
            return _prefixed(self._inspect_words(), m.group(1)), cursor - len(m.group(1))
        if token.startswith("%") and start == line_start:
            names = [f"%{m}" for m in cells.ZYNML_MAGICS]
            names += [f"%{m}" for m in sorted(self.shell.magics_manager.lsmagic()["line"])]
            names += ["%%python", "%%time", "%%timeit", "%%compare"]
            return _prefixed(list(dict.fromkeys(names)), token), start
        if token.startswith("@"):
            return _prefixed([f"@{a}" for a in ANNOTATIONS], token), start
        # `@kernel <type>`
        if re.search(r"@kernel\s+[A-Za-z_]*$", before):
            return _prefixed(list(KERNEL_TYPES), token), start
        # attribute: `x.sh|`
        m = re.search(r"([A-Za-z_][\w.]*)\.([A-Za-z_]\w*)?$", before)
        if m:
            try:
                value = self.lookup(m.group(1))
            except (KeyError, AttributeError):
                return [], start
            return _prefixed(attributes(value), m.group(2) or ""), cursor - len(m.group(2) or "")
        words = list(KEYWORDS) + list(builtin_names()) + list(value_names()) + \
            self.names_in_scope(code)
        if not token:
            return [], start
        return _prefixed(list(dict.fromkeys(words)), token), start

    def _inspect_words(self) -> list[str]:
        """What `%inspect` takes: the last cell's kernel names, the stages and languages."""
        from .display import STAGES

        kernels = self.runner.last_kernels
        words = ["--full"] + [k.name for k in kernels] + list(STAGES)
        for k in kernels:
            try:
                words += list(k.sources())
            except Exception:  # a renderer that fails must not hide the others
                pass
        return list(dict.fromkeys(words))

    # ---------------------------------------------------------------- inspection
    def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        # None: the end; past the end (a front end counting UTF-16 units): the end
        cursor_pos = len(code) if cursor_pos is None else max(0, min(cursor_pos, len(code)))
        region = self._python_region(code, cursor_pos)
        if region is not None:
            text, offset = region
            return super().do_inspect(text, cursor_pos - offset, detail_level, omit_sections)
        data = self.zynml_inspection(code, cursor_pos, detail_level)
        return {"status": "ok", "found": bool(data), "data": data or {}, "metadata": {}}

    def zynml_inspection(self, code: str, cursor: int, detail_level: int = 0) -> dict | None:
        """A value's type, shape and device; inside a compute block, its generated code
        (after a line on the word under the cursor, if it is a ZynML word)."""
        word, start, _ = cells.word_at(code, cursor)
        line_start = code.rfind("\n", 0, start) + 1
        line_end = code.find("\n", start)
        text = code[line_start:line_end if line_end >= 0 else len(code)]
        if start - line_start >= len(cells.line_code(text)) or \
                in_string(code[line_start:start]):
            word = ""               # a word in a comment or a string names nothing
        local = cells.local_meaning(code, cursor, word.split(".")[0]) if word else None
        if local is not None:
            return {"text/plain": f"{word}: {local}"}
        if word:
            try:
                value = self.lookup(word)
            except (KeyError, AttributeError):
                pass
            else:
                text = tensor_text(value) if is_tensor(value) else describe(value)
                return {"text/plain": f"{word}: {text}"}
        doc = word_doc(word.split(".")[-1]) if word else ""
        block = self.block_at(code, cursor)
        if block is not None:
            if doc:
                block = {"text/plain": doc + "\n\n" + block["text/plain"],
                         "text/html": f"<p>{_html.escape(doc)}</p>" + block.get("text/html", "")}
            return block
        return {"text/plain": doc} if doc else None

    def block_at(self, code: str, cursor: int) -> dict | None:
        """The generated code of the compute block under the cursor."""
        text = cells.zynml_text(code)
        try:
            program = parse(text)
        except ZynMLError:
            return None
        line, col = cells.line_col(code, cursor)
        node = cells.compute_at(program, line, col)
        if node is None:
            return None
        block_text = cells.span_text(text, node.span)
        kernel = self.runner.kernels_by_source.get(normalize_source(block_text))
        if kernel is None:
            kernel = self._compile_block(text, program, node)
        if kernel is None:
            return {"text/plain": f"compute block (not run yet):\n{block_text}"}
        return code_bundle([kernel], self.runner.last_launches)

    def _compile_block(self, text, program, node):
        """Compile the cell (without running it) and pick the kernel of `node`."""
        import zynbook

        try:
            compiled = zynbook.compile(text)
        except ZynMLError:
            return None
        blocks = cells.compute_blocks(program)
        kernels = list(getattr(compiled, "kernels", []) or [])
        for k in kernels:
            if normalize_source(getattr(k, "zynml", "") or "") == normalize_source(cells.span_text(text, node.span)):
                return k
        if len(kernels) == len(blocks) and node in blocks:
            return kernels[blocks.index(node)]
        return None


def word_doc(word: str) -> str:
    """One line on a ZynML word: annotation, kernel type, builtin or keyword."""
    if word in ANNOTATION_DOCS:
        return ANNOTATION_DOCS[word]
    kernel_type = (f"kernel type {word}: the schedule for the {word.replace('_', ' ')} "
                   f"shape (@kernel {word})") if word in KERNEL_TYPES else ""
    if word in builtin_names():
        doc = builtin_doc(word) or f"{word}: ZynML builtin function"
        return doc + (f"\n{kernel_type}" if kernel_type else "")
    if kernel_type:
        return kernel_type
    if word in KEYWORDS:
        return f"{word}: ZynML keyword"
    from ..runtime.builtins import CONSTANTS, DTYPE_VALUES

    if word in CONSTANTS:
        return f"{word}: the constant {CONSTANTS[word]!r}"
    if word in DTYPE_VALUES:
        same = "" if DTYPE_VALUES[word] == word else f" (the name of {DTYPE_VALUES[word]})"
        return f"{word}: a dtype{same}, as in zeros([4], dtype={word})"
    return ""


def _attr(value, name):
    """`value.name` as a cell reads it, for the fields inspection shows (a tensor's shape is
    a list there; a record's fields are its keys)."""
    from ..runtime.values import Record

    if isinstance(value, dict):
        return value[name]
    if isinstance(value, Record):
        if name not in value.keys():
            raise KeyError(name)
        return value.get(name)
    if name in TENSOR_ATTRIBUTES and not is_tensor(value) and attributes(value):
        # an array Python holds (numpy, torch) is read by a cell as its tensor: `.shape` a
        # list, `.dtype` `f32` (numpy's tuple and dtype('float32') were shown)
        from ..runtime.tensor import to_tensor

        tensor = to_tensor(value)
        value = value if tensor is None else tensor
    if name == "shape" and is_tensor(value):
        return list(value.shape)
    return getattr(value, name)


def attributes(value) -> list[str]:
    """Completion candidates after `value.`: what a ZynML cell may read after the dot
    (runtime/interp.py's `attr`), not the Python object's attributes (`x.nbytes`,
    `rec.keys`, `x.shape.count` are name errors in a cell): record fields, a tensor's fields
    and methods, a memory pool's and a future's."""
    from ..runtime.interp import _TENSOR_METHODS, _FirstOf, _Gather
    from ..runtime.values import Future, MemoryPool, Record

    if isinstance(value, dict):
        return sorted(str(k) for k in value)
    if isinstance(value, Record):
        return sorted(str(k) for k in value.keys())
    if is_tensor(value) or isinstance(value, np.ndarray) or not isinstance(value, np.generic) \
            and any(hasattr(value, a) for a in ("__dlpack__", "__array_interface__",
                                                "__cuda_array_interface__")):
        # a tensor, or an array a cell binds as one (numpy, torch, CuPy)
        return sorted(TENSOR_ATTRIBUTES + _TENSOR_METHODS)
    if isinstance(value, MemoryPool):
        return sorted(("allocate", "free", "reset", "size", "used", "free_bytes"))
    if isinstance(value, (Future, _Gather, _FirstOf)):
        return ["done"]
    return []


def builtin_names() -> tuple:
    """ZynML builtins: the host interpreter's functions and the kernel math functions."""
    from ..runtime.builtins import BUILTINS

    return tuple(sorted(set(BUILTINS) | set(BUILTIN_FUNCTIONS)))


def _device_ids() -> list[str]:
    """The ids `%device` and `@device(...)` take: the devices present, each under every id it
    answers to (`webgpu:0` is also `vulkan:0`), then `auto`."""
    from .. import compute_devices

    try:
        ids = []
        for d in compute_devices():
            ids += [d["id"], *d.get("ids", ())]
        return list(dict.fromkeys(ids)) + ["auto"]
    except Exception:  # device discovery failing must not break completion
        return ["cpu", "auto"]


def value_names() -> tuple:
    """The names ZynML defines as values: its constants (e, pi, inf, nan) and dtypes."""
    from ..runtime.builtins import CONSTANTS, DTYPE_VALUES

    return tuple(CONSTANTS) + tuple(DTYPE_VALUES)


def _prefixed(words, prefix: str) -> list[str]:
    return sorted(w for w in set(words) if w.startswith(prefix))


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `python -m zynbook.kernel`")
