"""`%%compare`: one ZynML cell on several devices, across sizes, beside numpy or torch.

    %%compare --devices cpu,cpu:native,cuda:0 --sizes n=1024,16384,262144 --repeat 7
              --numpy "np.tanh(x) * 2.0" --torch "torch.tanh(x) * 2.0"
    let x = randn([n], seed=1)
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = tanh(x[i]) * 2.0
    }

For every size (bound to the name given, `n` here) the cell runs once on the CPU reference
(the result every other one is checked against), then on each device: once to compile, then
`--repeat` times; a row per device and size gives the median kernel time (the sum of the
cell's launches; wall time where a device cannot time its kernels) with its spread, the
compile time of the first run, GFLOP/s and GB/s from the kernels' loop nests, the share of
the device's peak, and the largest difference from the reference. `--numpy` / `--torch`
expressions are evaluated in Python with the cell's values (numpy arrays, torch tensors) and
timed the same way. The table has the devices as rows so that it fits any output; a chart
(time and share of peak against size) follows when matplotlib is there.

The same magic works in Python notebooks (`%load_ext zynbook`) and in the ZynML kernel.
Anything over about a second shows progress (a widget in notebooks, text elsewhere).
"""
from __future__ import annotations

import argparse
import html
import keyword
import shlex
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from IPython.core.magic import Magics, cell_magic, magics_class, no_var_expand

from ..kernel import cells
from ..kernel.display import format_seconds, sample_stats
from ..kernel.state import notebook_session


@dataclass
class Row:
    size: object
    device: str                      # a device id, or "numpy" / "torch"
    times: list = field(default_factory=list)
    compile: float | None = None
    flops: float | None = None
    bytes: float | None = None
    max_diff: float | None = None
    error: str = ""
    gflops: float | None = None
    gbytes: float | None = None
    peak_share: float | None = None
    bound: str = ""
    clock: str = ""

    @property
    def median(self) -> float | None:
        st = sample_stats(self.times)
        return st.get("median")

    def spread(self) -> str:
        st = sample_stats(self.times)
        if not st:
            return "-"
        return f"{format_seconds(st['min'])} .. {format_seconds(st['max'])}"


class Progress:
    """Progress for anything over `after` seconds: an ipywidgets bar in a notebook kernel,
    a text line on stderr elsewhere; silent for quick work."""

    def __init__(self, total: int, title: str = "", after: float = 1.0):
        self.total, self.title, self.after = max(1, total), title, after
        self.start = time.perf_counter()
        self.done = 0
        self.widget = None
        self.text_shown = False

    def _in_notebook(self) -> bool:
        try:
            from IPython import get_ipython

            ip = get_ipython()
            return ip is not None and getattr(ip, "kernel", None) is not None
        except Exception:
            return False

    def update(self, what: str, step: int = 0) -> None:
        self.done += step
        elapsed = time.perf_counter() - self.start
        if elapsed < self.after and self.widget is None and not self.text_shown:
            return
        label = f"{self.title} {what} · {self.done}/{self.total} · {elapsed:.1f} s"
        if self.widget is None and not self.text_shown and self._in_notebook():
            try:
                import ipywidgets as W
                from IPython.display import display

                self.bar = W.IntProgress(min=0, max=self.total, value=self.done,
                                         layout=W.Layout(width="240px"))
                self.label = W.Label(label)
                self.widget = W.HBox([self.bar, self.label])
                self.widget.add_class("zynml-progress")
                self.handle = display(self.widget, display_id=True)
            except Exception:
                self.widget = None
        if self.widget is not None:
            self.bar.value = self.done
            self.label.value = label
        else:
            self.text_shown = True
            width = 24
            filled = int(width * self.done / self.total)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {label[:100]:<100}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.widget is not None:
            # the bar gives way to one line (a saved notebook keeps text, not a dead widget)
            elapsed = time.perf_counter() - self.start
            text = f"{self.title}: {self.done} of {self.total} steps in {elapsed:.1f} s"
            try:
                self.handle.update({"text/plain": text}, raw=True)
            except Exception:
                pass
            self.widget.close()
        elif self.text_shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


_USAGE = ("usage: %%compare [--devices a,b] [--sizes n=1,2,3] [--repeat R] [--numpy EXPR] "
          "[--torch EXPR] [--result NAME] [--out NAME] [--no-chart]")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose mistakes are IPython's usage error naming what was wrong
    (argparse prints its own message to stderr and exits)."""

    def error(self, message):
        from IPython.core.error import UsageError

        raise UsageError(f"%%compare: {message}\n{_USAGE}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%compare", add_help=False)
    p.add_argument("--devices", "-d", default=None)      # (None: every device)
    p.add_argument("--sizes", "-s", default="")
    p.add_argument("--repeat", "-r", type=int, default=5)
    p.add_argument("--numpy", default="")
    p.add_argument("--torch", default="")
    p.add_argument("--result", default="")
    p.add_argument("--out", "-o", default="")
    p.add_argument("--no-chart", action="store_true")
    return p


def parse_args(line: str) -> argparse.Namespace:
    from IPython.core.error import UsageError

    from ..kernel.cells import magic_code

    try:
        # (`# why` or `// why`, outside quotes, is a note)
        words = shlex.split(magic_code(line))
    except ValueError as err:       # `--numpy "np.tanh(x)` (no closing quotation)
        raise UsageError(f"%%compare: {err} in the magic line\n{_USAGE}") from None
    parser = _parser()
    try:
        args = parser.parse_args(_values_joined(parser, words))
    except SystemExit:              # (what argparse has not turned into a usage error)
        raise UsageError(_USAGE) from None
    if args.out and not (args.out.isidentifier() and not keyword.iskeyword(args.out)):
        # (it was written into the notebook's namespace under a name no code can read)
        raise UsageError(f"%%compare --out NAME: a Python name to bind the comparison to, "
                         f"not `{args.out}`\n{_USAGE}")
    return args


def _values_joined(parser, words: list) -> list:
    """`words` with an option's value that starts with `-` joined to it (`--numpy -x.sum()`
    as `--numpy=-x.sum()`): argparse took it for an option, and the option for one without
    its value. A word that is one of the options is left to say that the value is missing."""
    options = parser._option_string_actions
    out = []
    for word in words:
        prev = out[-1] if out else ""
        if word.startswith("-") and word.split("=")[0] not in options and \
                prev in options and options[prev].nargs is None and options[prev].const is None:
            out[-1] = f"{prev}={word}"
        else:
            out.append(word)
    return out


def device_list(text: str) -> list[str]:
    """`cpu, vulkan:0` -> ["cpu", "vulkan:0"]."""
    return [d.strip() for d in text.split(",") if d.strip()]


def parse_sizes(text: str) -> tuple[str, list]:
    """`n=256,1024` -> ("n", [256, 1024]); `256,1024` -> ("n", ...); '' -> ("", [None])."""
    if not text:
        return "", [None]
    name, _, values = text.partition("=") if "=" in text else ("n", "", text)
    try:
        sizes = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        sizes = None
    if not name.strip().isidentifier() or not sizes or any(v < 0 for v in sizes):
        from IPython.core.error import UsageError
        raise UsageError(f"--sizes takes a name and integers at least 0, like n=256,1024, "
                         f"not {text!r}")
    return name.strip(), sizes


def _to_numpy(value):
    """`value`'s elements as a numpy array (a torch bf16 or grad tensor, a device's tensor
    too, read as the session reads them), None if it has none."""
    if value is None:
        return None
    from ..runtime.tensor import to_tensor

    try:
        tensor = to_tensor(value)
        return tensor.numpy() if tensor is not None else np.asarray(value)
    except Exception:
        return None


def _max_diff(got, ref) -> float | None:
    """The largest difference of `got` from `ref`: none where both hold NaN or the same
    infinity (NaN - NaN is NaN, and every row said `nan`), infinite where one holds NaN."""
    a, b = _to_numpy(got), _to_numpy(ref)
    if a is None or b is None:
        return None
    try:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if a.shape != b.shape:
        return float("inf")
    if not a.size:
        return 0.0
    with np.errstate(invalid="ignore"):
        diff = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))
    return float(np.nan_to_num(diff, nan=np.inf, posinf=np.inf).max())


def _difference(row: Row, got, ref) -> None:
    """`row.max_diff` from the reference, and `row.error` saying both shapes where they
    differ (the difference alone, infinite, said nothing of why: a Python `n` bounding
    the cell's loop short of the array the numpy expression reads)."""
    row.max_diff = _max_diff(got, ref)
    if row.max_diff == float("inf"):
        a, b = _to_numpy(got), _to_numpy(ref)
        if np.shape(a) != np.shape(b):
            row.error = (f"a result of shape {list(np.shape(a))} where the CPU reference's "
                         f"is {list(np.shape(b))}")


def unplaced(env: dict) -> dict:
    """`env` with each tensor placed on a device on purpose (an earlier cell's block under
    `@device("vulkan:0")`, `to_device`) as a host copy placed nowhere: a block reading it
    ran where it was placed, whichever device the row or bar was said to be."""
    from ..runtime.tensor import Tensor

    return {name: Tensor(np.array(v.numpy()), "cpu", dtype=v.dtype)
            if isinstance(v, Tensor) and v.committed else v for name, v in env.items()}


def _result_of(session, value, is_expr, names, want: str):
    if want:
        return session.namespace.get(want)
    if is_expr:
        return value
    for name in reversed(names):
        if name in session.namespace:
            return session.namespace[name]
    return None


def run_compare(source: str, devices: list, sizes: tuple, env: dict, repeat: int = 5,
                numpy_expr: str = "", torch_expr: str = "", result: str = "",
                user_ns: dict | None = None) -> list:
    """The rows of a comparison (see the module docstring)."""
    from .. import Session
    from ..errors import ZynMLError
    from ..kernel.costs import Cost, device_info, launch_cost, rates

    from ..compiler.parser import parse
    from .compute import note_python_bounds

    names = cells.bound_names(parse(source))
    env = unplaced(env)
    size_name, size_values = sizes
    exprs = [("numpy", numpy_expr), ("torch", torch_expr)]
    exprs = [(k, e) for k, e in exprs if e]
    steps = len(size_values) * (1 + len(devices) + len(exprs)) * (repeat + 1)
    progress = Progress(steps, "compare")
    rows: list = []
    try:
        for size in size_values:
            cell_env = dict(env)
            if size_name:
                cell_env[size_name] = size
            label = f"{size_name}={size}" if size_name else ""
            progress.update(f"reference (cpu) {label}")
            ref_session = Session(device="cpu")
            value, is_expr = ref_session._run_cell(source, "", cell_env)
            if size == size_values[0]:      # (Python's ints are the same at every size)
                note_python_bounds(ref_session, env, source)
            reference = _result_of(ref_session, value, is_expr, names, result)
            cost = Cost(0.0, 0.0)
            for k, ln in zip(ref_session.last_kernels, ref_session.launches):
                c = launch_cost(k)
                if c is not None:
                    cost = Cost(cost.flops + c.flops, cost.bytes + c.bytes,
                                cost.exact and c.exact)
            progress.update(f"reference (cpu) {label}", repeat + 1)
            for device in devices:
                row = Row(size, device)
                rows.append(row)
                try:
                    session = Session(device=device)
                    progress.update(f"{device} {label} compile")
                    session._run_cell(source, "", cell_env)
                    row.compile = sum(ln.times.compile or 0.0 for ln in session.launches) or None
                    progress.update(f"{device} {label}", 1)
                    got = None
                    for r in range(repeat):
                        progress.update(f"{device} {label} run {r + 1}/{repeat}")
                        t0 = time.perf_counter()
                        value, is_expr = session._run_cell(source, "", cell_env)
                        wall = time.perf_counter() - t0
                        kt = [ln.times.kernel for ln in session.launches]
                        if kt and all(t is not None for t in kt):
                            row.times.append(sum(kt))
                            row.clock = session.launches[-1].times.source or "kernel"
                        else:
                            row.times.append(wall)
                            row.clock = "wall"
                        got = _result_of(session, value, is_expr, names, result)
                        progress.update(f"{device} {label}", 1)
                    _difference(row, got, reference)
                    row.flops, row.bytes = cost.flops, cost.bytes
                    rt = rates(cost, row.median, device_info(device))
                    row.gflops, row.gbytes = rt.gflops, rt.gbytes
                    row.peak_share, row.bound = rt.peak_share, rt.bound
                except ZynMLError as err:
                    row.error = err.message
                    progress.update(f"{device} {label} failed", repeat + 1)
                except Exception as err:  # a device that breaks must not hide the others
                    row.error = f"{type(err).__name__}: {err}"
                    progress.update(f"{device} {label} failed", repeat + 1)
            for kind, expr in exprs:
                row = Row(size, kind)
                rows.append(row)
                try:
                    ns = _python_namespace(kind, ref_session, cell_env, user_ns)
                    code = compile(expr, f"<{kind} expression>", "eval")
                    got = eval(code, ns)                    # warm up (and torch's first use)
                    _sync(kind)
                    progress.update(f"{kind} {label}", 1)
                    for r in range(repeat):
                        t0 = time.perf_counter()
                        got = eval(code, ns)
                        _sync(kind)
                        row.times.append(time.perf_counter() - t0)
                        progress.update(f"{kind} {label}", 1)
                    row.clock = "wall"
                    _difference(row, got, reference)
                    row.flops, row.bytes = cost.flops, cost.bytes
                    rt = rates(cost, row.median, device_info(_expr_device(kind, got)))
                    row.gflops, row.gbytes = rt.gflops, rt.gbytes
                    row.peak_share, row.bound = rt.peak_share, rt.bound
                except Exception as err:
                    row.error = f"{type(err).__name__}: {err}"
                    progress.update(f"{kind} {label} failed", repeat + 1)
    finally:
        progress.close()
    return rows


def _sync(kind: str) -> None:
    if kind == "torch":
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except ImportError:
            pass


def _expr_device(kind: str, value) -> str:
    dev = str(getattr(value, "device", "cpu"))
    return "cuda:0" if dev.startswith("cuda") else "cpu"


def _python_namespace(kind: str, session, cell_env: dict, user_ns) -> dict:
    """Names for a numpy / torch expression: the user's, then the cell's values (numpy
    arrays, or torch tensors on the GPU when there is one)."""
    ns = dict(user_ns or {})
    ns.setdefault("np", np)
    values = dict(cell_env)
    values.update({k: v for k, v in session.namespace.items() if not k.startswith("_")})
    if kind == "torch":
        import torch

        ns.setdefault("torch", torch)
        device = "cuda" if torch.cuda.is_available() else "cpu"
    for name, v in values.items():
        if kind == "torch" and isinstance(v, torch.Tensor):
            ns[name] = v.to(device)         # (a bf16 one stays bf16, as torch computes it)
            continue
        arr = _to_numpy(v) if hasattr(v, "shape") else None
        if arr is None:
            if isinstance(v, (int, float)):
                ns[name] = v
            continue
        if kind == "torch":
            t = torch.from_numpy(np.ascontiguousarray(arr))
            # a ZynML bf16 tensor's values, held as f32 on the host
            ns[name] = (t.to(torch.bfloat16) if getattr(v, "dtype", None) == "bf16"
                        else t).to(device)
        else:
            ns[name] = arr
    return ns


# ---------------------------------------------------------------------------- showing

COLUMNS = ("size", "device", "median", "spread", "compile", "GFLOP/s", "GB/s", "% peak",
           "max |diff|")


def _cells(row: Row) -> list:
    from ..kernel.costs import format_rate, format_share

    if row.error:
        return [str(row.size if row.size is not None else "-"), row.device, "failed", "-",
                "-", "-", "-", "-", row.error[:80]]
    diff = "-" if row.max_diff is None else f"{row.max_diff:.1e}"
    share = format_share(row.peak_share) + (f" {row.bound[0]}" if row.bound else "")
    return [str(row.size if row.size is not None else "-"), row.device,
            format_seconds(row.median), row.spread(),
            format_seconds(row.compile) if row.compile else "-",
            format_rate(row.gflops, ""), format_rate(row.gbytes, ""), share, diff]


def table_text(rows: list) -> str:
    data = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(r[i]) for r in data) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in data]
    return "\n".join(lines) + "\n% peak: of the bound resource (c = FP32 compute, m = memory)"


def table_html(rows: list) -> str:
    head = "".join(f"<th style='text-align:left;padding:1px 8px'>{html.escape(c)}</th>"
                   for c in COLUMNS)
    body = []
    for r in rows:
        style = " style='color:#b00020'" if r.error else ""
        body.append(f"<tr data-device='{html.escape(r.device)}'{style}>" + "".join(
            f"<td style='padding:1px 8px;white-space:nowrap'>{html.escape(c)}</td>"
            for c in _cells(r)) + "</tr>")
    return ("<div class='zynml-compare-table' style='max-width:100%;overflow-x:auto'>"
            "<table style='font-family:var(--jp-code-font-family,monospace);font-size:12px;"
            "border-collapse:collapse;max-width:100%'>"
            f"<tr>{head}</tr>{''.join(body)}</table>"
            "<div style='font-size:11px;color:#666'>median and spread (min .. max) of the "
            "repeats; % peak of the bound resource (c = FP32 compute, m = memory bandwidth); "
            "max |diff| from the CPU reference</div></div>")


def chart(rows: list, size_name: str = "size"):
    """A matplotlib figure: median time and share of peak against size, one line per
    device (Triton's perf_report style); None without matplotlib or sizes."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ok = [r for r in rows if not r.error and r.median is not None and r.size is not None]
    if not ok:
        return None
    fig, (ax_t, ax_p, ax_r) = plt.subplots(1, 3, figsize=(13, 3.4))
    colors = {d: f"C{i}" for i, d in enumerate(dict.fromkeys(r.device for r in ok))}
    for device, color in colors.items():
        mine = sorted((r for r in ok if r.device == device), key=lambda r: r.size)
        xs = [r.size for r in mine]
        st = [sample_stats(r.times) for r in mine]
        ax_t.plot(xs, [s["median"] for s in st], "o-", label=device, color=color)
        ax_t.fill_between(xs, [s["min"] for s in st], [s["max"] for s in st], alpha=0.15,
                          color=color)
        if any(r.peak_share is not None for r in mine):
            ax_p.plot(xs, [100 * (r.peak_share or 0.0) for r in mine], "o-", label=device,
                      color=color)
    for ax in (ax_t, ax_p):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(size_name)
        ax.grid(True, alpha=0.3)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("median time (s)")
    ax_t.set_title("time (band: min .. max)")
    ax_p.set_ylabel("% of peak")
    ax_p.set_title("share of the device's peak")
    ax_t.legend(fontsize=8)
    roofline(ax_r, ok, colors)
    fig.tight_layout()
    return fig


def roofline(ax, rows: list, colors: dict | None = None) -> None:
    """Achieved GFLOP/s against arithmetic intensity (FLOPs per byte), one point per device
    and size, under each device's roof: min(peak FLOP/s, intensity x peak bandwidth)."""
    from ..kernel.costs import device_info, device_peak

    colors = dict(colors or {})
    labeled: set = set()
    for r in rows:
        if not r.flops or not r.bytes or r.gflops is None:
            continue
        first = r.device not in labeled
        labeled.add(r.device)
        color = colors.setdefault(r.device, f"C{len(colors)}")
        ax.plot([r.flops / r.bytes], [r.gflops], "o", color=color,
                label=r.device if first else None)
    xs = np.logspace(-2, 3, 64)
    for device in labeled:
        color = colors[device]
        info = device_info(device if device not in ("numpy", "torch") else "cpu")
        pf, pb, _ = device_peak(info)
        if pf and pb:
            ax.plot(xs, np.minimum(pf, xs * pb) / 1e9, "-", color=color, alpha=0.35, lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOPs per byte")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline (lines: each device's peak)")
    ax.grid(True, alpha=0.3)


@dataclass
class Comparison:
    rows: list
    size_name: str = ""

    def _repr_html_(self) -> str:
        return table_html(self.rows)

    def __repr__(self) -> str:
        return table_text(self.rows)


@magics_class
class CompareMagics(Magics):
    """`%%compare`: see the module docstring."""

    @cell_magic
    @no_var_expand
    def compare(self, line, cell):
        """%%compare [--devices a,b] [--sizes n=1,2,3] [--repeat R] [--numpy EXPR]
        [--torch EXPR] [--result NAME] [--out NAME] [--no-chart]: run the ZynML cell on
        each device across sizes; a table (devices as rows) and a chart."""
        from IPython.display import display

        from .. import compute_devices
        from ..compiler.parser import parse

        from ..errors import ZynMLError
        from .compute import _say_not_expanded, expand_line

        args = parse_args(expand_line(self.shell, line))
        devices = None if args.devices is None else device_list(args.devices)
        if devices == []:
            # (`--devices ,` ran on every device, as if no list were given)
            from IPython.core.error import UsageError
            raise UsageError(f"%%compare --devices a,b: device ids, such as cpu,vulkan:0; "
                             f"`{args.devices}` names none")
        if args.repeat < 0:
            # (a count: -3 ran once, as if it were one; 0 runs once, as %timeit -r 0 does)
            from IPython.core.error import UsageError
            raise UsageError(f"%%compare --repeat R: R is how many times to run the cell on "
                             f"each device, a whole number; not `{args.repeat}`")
        source = "\n" + cell                 # line 1 is the magic line, as the notebook shows
        user_ns = self.shell.user_ns
        try:
            program = parse(source)
        except ZynMLError as err:
            _say_not_expanded(err, source, user_ns)
            raise
        hidden = set(getattr(self.shell, "user_ns_hidden", {}))
        size_name, size_values = parse_sizes(args.sizes)
        namespace = notebook_session().namespace
        if size_name and size_name not in cells.with_pipeline_globals(
                cells.names_of(source)[0], namespace, source):
            # (every row would run at the same size: a table of one size, told as several)
            from IPython.core.error import UsageError
            raise UsageError(f"--sizes {args.sizes.strip()}: the cell reads no "
                             f"`{size_name}`; give the sizes to a name it reads (the `n` of "
                             f"`randn([n])` or of a loop's `0..n`)")
        bound = list(dict.fromkeys(cells.bound_names(program) + cells.assigned_names(program)))
        if args.result and args.result not in bound:
            from IPython.core.error import UsageError
            raise UsageError(f"--result {args.result}: the cell binds no `{args.result}` "
                             f"(it binds: {', '.join(bound) or 'nothing'})")
        # (ZynML values besides: the pipelines earlier cells defined, and their globals)
        env = cells.notebook_values(source, namespace, user_ns, hidden, (size_name,))
        devices = devices or [d["id"] for d in compute_devices()]
        rows = run_compare(source, devices, (size_name, size_values), env,
                           max(1, args.repeat), args.numpy, args.torch, args.result, user_ns)
        result = Comparison(rows, size_name)
        display({"text/plain": table_text(rows), "text/html": table_html(rows)}, raw=True)
        if not args.no_chart and size_name:
            fig = chart(rows, size_name)
            if fig is not None:
                import matplotlib.pyplot as plt

                display(fig)
                plt.close(fig)
        if args.out:
            user_ns[args.out] = result
        return None
