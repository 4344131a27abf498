"""The timing widget: per launch compile / upload / kernel / download, as bars."""
from __future__ import annotations

import html
import time

import ipywidgets as W

from ..errors import ZynMLError
from ..kernel.display import bindable, format_seconds
from ..kernel.state import notebook_session

PHASES = ("compile", "upload", "kernel", "download")
COLORS = {"compile": "#9e9e9e", "upload": "#42a5f5", "kernel": "#ef6c00",
          "download": "#66bb6a"}
BAR_WIDTH = 360
ROW_HEIGHT = 22


def _legend() -> str:
    items = "".join(f"<span style='margin-right:12px'><span style='display:inline-block;"
                    f"width:10px;height:10px;background:{COLORS[p]};margin-right:4px'></span>"
                    f"{p}</span>" for p in PHASES)
    return f"<div style='font-size:12px;margin:4px 0'>{items}</div>"


def timing_svg(launches, scale: float | None = None) -> str:
    """One row per launch: its phases as stacked bars, `scale` seconds full width (default:
    the longest launch)."""
    totals = [sum(getattr(ln.times, p) or 0.0 for p in PHASES) for ln in launches]
    scale = scale or max(totals, default=0.0) or 1.0
    label_w, text_w = 150, 80
    height = ROW_HEIGHT * max(1, len(launches)) + 4
    width = label_w + BAR_WIDTH + text_w
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"class='zynml-timing' font-family='monospace' font-size='11'>"]
    for row, (ln, total) in enumerate(zip(launches, totals)):
        y = row * ROW_HEIGHT + 2
        parts.append(f"<text x='0' y='{y + 14}'>{html.escape(ln.kernel[:20])}</text>")
        x = float(label_w)
        for p in PHASES:
            t = getattr(ln.times, p)
            if not t:
                continue
            w = BAR_WIDTH * t / scale
            parts.append(f"<rect x='{x:.2f}' y='{y}' width='{max(w, 0.5):.2f}' "
                         f"height='{ROW_HEIGHT - 6}' fill='{COLORS[p]}' data-phase='{p}'>"
                         f"<title>{p}: {format_seconds(t)}</title></rect>")
            x += w
        parts.append(f"<text x='{label_w + BAR_WIDTH + 6}' y='{y + 14}'>"
                     f"{html.escape(format_seconds(total))}</text>")
    parts.append("</svg>")
    return "".join(parts)


def timing_table(launches) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("kernel", "device", *PHASES, "clock", "geometry"))
    rows = []
    for ln in launches:
        t = ln.times
        geometry = ", ".join(f"{k}={v}" for k, v in ln.geometry.items())
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            ln.kernel, ln.device, *(format_seconds(getattr(t, p)) for p in PHASES),
            t.source or "-", geometry or "-")) + "</tr>")
    return (f"<table class='zynml-timing-table' style='font-family:monospace;font-size:12px'>"
            f"<tr>{head}</tr>{''.join(rows)}</table>")


def timing_html(launches) -> str:
    """The launches of one run: legend, bar chart, table."""
    if not launches:
        return "<i>No launches.</i>"
    return _legend() + timing_svg(launches) + timing_table(launches)


def compare_html(results: dict) -> str:
    """Side by side: one column per device with its chart, all on one time scale."""
    ok = {d: r for d, r in results.items() if "error" not in r}
    scale = max((sum(getattr(ln.times, p) or 0.0 for p in PHASES)
                 for r in ok.values() for ln in r["launches"]), default=0.0) or None
    cols = []
    for device, r in results.items():
        if "error" in r:
            body = f"<pre style='color:#b00020'>{html.escape(r['error'])}</pre>"
            summary = "failed"
        else:
            kernel = sum(ln.times.kernel or 0.0 for ln in r["launches"])
            body = timing_svg(r["launches"], scale)
            summary = (f"wall {format_seconds(r['wall'])} · kernel "
                       f"{format_seconds(kernel)} · {len(r['launches'])} launch(es)")
        cols.append(f"<td style='vertical-align:top;padding:4px 12px 4px 0' "
                    f"data-device='{html.escape(device)}'><b>{html.escape(device)}</b>"
                    f"<div style='font-size:12px;color:#444'>{html.escape(summary)}</div>"
                    f"{body}</td>")
    return _legend() + f"<table class='zynml-compare'><tr>{''.join(cols)}</tr></table>"


class TimingWidget(W.VBox):
    """Bars of per-launch times. `TimingWidget()` shows the session's last launches;
    `TimingWidget.compare(source, devices)` runs `source` on each device and shows them side
    by side."""

    def __init__(self, launches=None, session=None, **kwargs):
        self.session = session
        self.mode = W.ToggleButtons(options=["launches", "compare"], value="launches",
                                    style={"button_width": "90px"})
        self.chart = W.HTML()
        self.results: dict = {}
        super().__init__([self.mode, self.chart], **kwargs)
        self.mode.observe(lambda change: self._render(), names="value")
        self.update(launches)

    def _session(self):
        return self.session if self.session is not None else notebook_session()

    def update(self, launches=None) -> None:
        """Show `launches` (default: the session's last run)."""
        if launches is None:
            launches = list(self._session().launches or [])
        self.launches = list(launches)
        self._render()

    def _render(self) -> None:
        self.mode.layout.display = "" if self.results else "none"
        if self.mode.value == "compare" and self.results:
            self.chart.value = compare_html(self.results)
        else:
            self.chart.value = timing_html(self.launches)

    def run_compare(self, source: str, devices=None, env=None, repeat: int = 2) -> dict:
        """Run `source` on every device (default: all of compute_devices()) `repeat` times in
        a fresh session each; keep the launches and wall time of the last run (the first one
        compiles). `env`: names the source reads (default: the notebook session's values)."""
        from .. import Session, compute_devices

        if devices is None:
            devices = [d["id"] for d in compute_devices()]
        if env is None:
            env = {k: v for k, v in self._session().namespace.items()
                   if not k.startswith("_") and bindable(v)}
        results = {}
        for device in devices:
            try:
                session = Session(device=device)
                wall = 0.0
                for _ in range(max(1, repeat)):
                    t0 = time.perf_counter()
                    session.run(source, **env)
                    wall = time.perf_counter() - t0
                results[device] = {"launches": list(session.launches or []), "wall": wall}
            except ZynMLError as err:
                results[device] = {"error": err.render()}
            except Exception as err:  # a device that breaks must not hide the others
                results[device] = {"error": f"{type(err).__name__}: {err}"}
        self.results = results
        self.mode.value = "compare"
        self._render()
        return results

    @classmethod
    def compare(cls, source: str, devices=None, env=None, repeat: int = 2, session=None):
        widget = cls(launches=[], session=session)
        widget.run_compare(source, devices, env, repeat)
        return widget
