"""The widgets' HTML (timing bars and tables, launch details, device labels): plain text,
usable without ipywidgets (nbconvert, a report, the timing of a script)."""
from __future__ import annotations

import html

from ..kernel.display import format_seconds

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
    # scales down to the output's width (viewBox), never wider than its natural size
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
             f"viewBox='0 0 {width} {height}' style='max-width:100%;height:auto' "
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


def timing_table(launches, kernels=(), labels: dict | None = None) -> str:
    """A row per launch: phases (compile '-' where nothing was compiled), GFLOP/s, GB/s and
    the share of the device's peak from the kernel's FLOPs and bytes."""
    from ..kernel.costs import format_rate, format_share
    from ..kernel.display import compile_text, launch_rates

    cols = ("kernel", "device", *PHASES, "GFLOP/s", "GB/s", "% peak", "clock", "geometry")
    head = "".join(f"<th>{h}</th>" for h in cols)
    rows = []
    for ln in launches:
        t = ln.times
        _, r = launch_rates(ln, kernels)
        geometry = ", ".join(f"{k}={v}" for k, v in ln.geometry.items())
        share = format_share(r.peak_share) + (f" ({r.bound})" if r.bound else "")
        title = f" title='peak: {html.escape(r.peak_source)}'" if r.peak_source else ""
        name = ln.kernel + (f" = {labels[ln.kernel]}" if (labels or {}).get(ln.kernel) else "")
        cells = [name, ln.device, compile_text(t.compile),
                 *(format_seconds(getattr(t, p)) for p in PHASES[1:]),
                 format_rate(r.gflops, ""), format_rate(r.gbytes, "")]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                    + f"<td{title}>{html.escape(share)}</td>"
                    + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
                        t.source or "-", geometry or "-")) + "</tr>")
    return (f"<table class='zynml-timing-table' style='font-family:monospace;font-size:12px'>"
            f"<tr>{head}</tr>{''.join(rows)}</table>")


def timing_html(launches, kernels=(), labels: dict | None = None) -> str:
    """The launches of one run: legend, bar chart, table."""
    if not launches:
        return "<i>No launches.</i>"
    return _legend() + timing_svg(launches) + timing_table(launches, kernels, labels)


def compare_html(results: dict) -> str:
    """One row per device (so that any number of devices fits the output's width), each
    with its median wall time and spread, its kernel time, GFLOP/s and share of peak, and
    its launches' bars, all on one time scale."""
    from ..kernel.costs import format_rate, format_share
    from ..kernel.display import launch_rates, sample_stats

    ok = {d: r for d, r in results.items() if "error" not in r}
    scale = max((sum(getattr(ln.times, p) or 0.0 for p in PHASES)
                 for r in ok.values() for ln in r["launches"]), default=0.0) or None
    rows = []
    for device, r in results.items():
        if "error" in r:
            body = f"<pre style='color:#b00020;white-space:pre-wrap'>{html.escape(r['error'])}</pre>"
            summary = "failed"
        else:
            kernel = sum(ln.times.kernel or 0.0 for ln in r["launches"])
            walls = r.get("walls") or [r["wall"]]
            st = sample_stats(walls)
            flops = sum((launch_rates(ln, r.get("kernels", []))[0] or _NO_COST).flops
                        for ln in r["launches"])
            rates = [launch_rates(ln, r.get("kernels", []))[1] for ln in r["launches"]]
            shares = [x.peak_share for x in rates if x.peak_share is not None]
            summary = (f"wall {format_seconds(st['median'])} (median of {st['n']}, "
                       f"{format_seconds(st['min'])} .. {format_seconds(st['max'])}) · kernel "
                       f"{format_seconds(kernel)} · "
                       f"{format_rate(flops / kernel / 1e9 if kernel and flops else None, 'GFLOP/s')}"
                       f" · peak {format_share(max(shares) if shares else None)} · "
                       f"{len(r['launches'])} launch(es)")
            body = timing_svg(r["launches"], scale)
        rows.append(f"<div class='zynml-compare-row' data-device='{html.escape(device)}' "
                    f"style='margin:4px 0 8px;max-width:100%'><b>{html.escape(device)}</b> "
                    f"<span style='font-size:12px;color:#444'>{html.escape(summary)}</span>"
                    f"<div>{body}</div></div>")
    return _legend() + f"<div class='zynml-compare' style='max-width:100%'>{''.join(rows)}</div>"


class _NoCost:
    flops = 0.0


_NO_COST = _NoCost()


TAB_TITLES = {"fusion": "Fusion", "zynml": "ZynML", "cir": "CIR", "cir-passes": "CIR after passes",
              "launch-ir": "Launch IR",
              "python": "CPU (Python)", "c": "CPU (C)",
              "numba": "CPU (Numba)", "cuda": "CUDA C", "ptx": "PTX", "wgsl": "WGSL",
              "msl": "MSL", "spirv": "SPIR-V"}


def tab_title(language: str) -> str:
    return TAB_TITLES.get(language, language.upper())


def launch_info_html(kernel, launches, devices: dict | None = None) -> str:
    """Kernel type, device, arch and launch geometry of `kernel`'s last launch."""
    ktype = getattr(getattr(kernel, "kernel", None), "kernel_type", None)
    rows = [("kernel", kernel.name)]
    if ktype is not None:
        params = ", ".join(f"{k}={v}" for k, v in ktype.params)
        rows.append(("type", ktype.kind + (f"({params})" if params else "")))
    mine = [ln for ln in launches if ln.kernel == kernel.name]
    note = getattr(kernel, "note", "")
    if note:        # no launch: where it was to run and why not (as %inspect says)
        rows.append(("device", f"{kernel.device.id} ({note})"))
    elif mine:
        last = mine[-1]
        rows.append(("device", last.device))
        info = (devices or {}).get(last.device, {})
        arch = last.geometry.get("arch") or info.get("arch") or info.get("compute_capability")
        if arch:
            rows.append(("arch", str(arch)))
        geometry = {k: v for k, v in last.geometry.items() if k != "arch"}
        if geometry:
            rows.append(("launch", ", ".join(f"{k}={v}" for k, v in geometry.items())))
        rows.append(("launches", str(len(mine))))
    else:
        rows.append(("device", "not launched"))
    cells = "".join(f"<tr><th style='text-align:left;padding-right:12px;color:#666'>"
                    f"{html.escape(k)}</th><td><code>{html.escape(str(v))}</code></td></tr>"
                    for k, v in rows)
    return f"<table class='zynml-launch-info'>{cells}</table>"


def device_label(info: dict) -> str:
    """`cuda:0 · NVIDIA H100 (gpu)`"""
    name = info.get("name") or info.get("backend") or ""
    kind = info.get("type", "")
    return f"{info['id']} · {name}" + (f" ({kind})" if kind else "")
