"""The widgets, through their models: options, values, and what they display."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("ipywidgets")

import zynbook  # noqa: E402
from zynbook.backends.base import Launch, LaunchTimes  # noqa: E402
from zynbook.widgets import DevicePicker, ShaderInspector, TimingWidget  # noqa: E402
from zynbook.widgets.inspector import tab_title  # noqa: E402
from zynbook.widgets.timing import timing_svg  # noqa: E402

TWO_BLOCKS = """let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let s = compute(y) {
    @kernel reduce(+)
    for i in 0..n:
        yield y[i]
}
"""


@pytest.fixture
def session():
    s = zynbook.Session(device="cpu")
    s.run(TWO_BLOCKS, x=np.arange(16, dtype=np.float32))
    return s


# ------------------------------------------------------------------------- device picker

def test_device_picker_lists_compute_devices(session):
    picker = DevicePicker(session=session)
    ids = [value for _, value in picker.dropdown.options]
    assert ids[: len(zynbook.compute_devices())] == [d["id"] for d in zynbook.compute_devices()]
    assert "cpu" in ids and "auto" in ids
    assert picker.value == session.default_device == "cpu"
    assert "default device: <code>cpu</code>" in picker.status.value


def test_device_picker_sets_the_default_device(session):
    picker = DevicePicker(session=session)
    picker.value = "auto"
    assert session.default_device == "auto"
    picker.value = "cpu"
    assert session.default_device == "cpu"
    assert "<code>cpu</code>" in picker.status.value


def test_device_picker_reverts_on_a_device_that_fails(session):
    devices = zynbook.compute_devices() + [{"id": "cuda:57", "type": "gpu", "name": "gone"}]
    picker = DevicePicker(session=session, devices=devices)
    picker.value = "cuda:57"
    assert session.default_device == "cpu"
    assert picker.value == "cpu"
    assert "b00020" in picker.status.value        # the error is shown in red


# ----------------------------------------------------------------------- shader inspector

def test_inspector_tabs_hold_source_cir_and_generated_code(session):
    inspector = ShaderInspector(session=session)
    titles = list(inspector.tabs.titles)
    assert titles[:4] == ["ZynML", "CIR", "CIR after passes", "Launch IR"]
    assert "CPU (Python)" in titles
    langs = list(session.last_kernels[0].sources())
    assert len(titles) == 4 + len(langs)
    # (a run on the reference executor, which has no launch IR: the tab says so)
    assert "cpu (the reference executor) runs no launch IR" in inspector.tabs.children[3].value
    zynml_html = inspector.tabs.children[0].value
    assert "zynml-map" in zynml_html
    # highlighted: the annotation is a decorator token, the keyword a keyword token
    assert re.search(r'<span class="nd">@kernel</span>', zynml_html)
    assert re.search(r'<span class="k">for</span>', zynml_html)
    cir_html = inspector.tabs.children[1].value
    assert "elementwise" in cir_html
    # lowering writes the loop nest as written; the passes mark it parallel
    passed_html = inspector.tabs.children[2].value
    assert "parallel" not in cir_html and "parallel" in passed_html
    assert "device" in inspector.info.value and "cpu" in inspector.info.value


def test_inspector_picks_among_several_kernels(session):
    inspector = ShaderInspector(session=session)
    assert len(inspector.picker.options) == 2
    assert inspector.picker.layout.display == ""
    def tab(language):
        return inspector.tabs.children[inspector.tabs.titles.index(tab_title(language))].value

    first = tab("zynml")
    inspector.picker.value = 1
    second = tab("zynml")
    assert first != second
    assert "yield" in second and "reduce" in inspector.info.value
    # the reduction reads `y`, a top-level name: its fusion tab, first, says so
    assert inspector.tabs.titles[0] == tab_title("fusion") and "top-level name" in tab("fusion")


def test_inspector_without_kernels():
    inspector = ShaderInspector(kernels=[], launches=[])
    assert "No compute block has run yet" in inspector.info.value
    assert len(inspector.tabs.children) == 0


# ---------------------------------------------------------------------------- timing

def _launch(name, compile_s, upload, kernel, download):
    return Launch(name, "cpu", LaunchTimes(compile_s, upload, kernel, download, "host-clock"),
                  {"threads": 16})


def test_timing_bars_are_proportional():
    launches = [_launch("a", 0.0, 0.001, 0.004, 0.001), _launch("b", 0.0, 0.0, 0.002, None)]
    svg = timing_svg(launches)
    widths = {}
    for row, m in enumerate(re.finditer(r"<rect[^>]*width='([\d.]+)'[^>]*data-phase='(\w+)'",
                                        svg)):
        widths.setdefault(m.group(2), []).append(float(m.group(1)))
    # launch a: 6 ms in all fills the bar; its kernel phase is 4/6 of it, b's is 2/6
    assert widths["kernel"][0] == pytest.approx(2 * widths["kernel"][1], rel=1e-3)
    assert widths["upload"][0] == pytest.approx(widths["kernel"][0] / 4, rel=1e-3)
    assert "download" in widths and len(widths["download"]) == 1    # None draws nothing
    assert "compile" not in widths                                  # zero draws nothing


def test_timing_widget_shows_the_sessions_launches(session):
    widget = TimingWidget(session=session)
    assert len(widget.launches) == len(session.launches) == 2
    html = widget.chart.value
    assert html.count("<tr>") == 1 + len(session.launches)       # header + one per launch
    for ln in session.launches:
        assert ln.kernel[:20] in html
    assert "data-phase='kernel'" in html
    assert widget.mode.layout.display == "none"                  # nothing to compare yet


def test_timing_widget_compare_runs_on_each_device(session):
    widget = TimingWidget.compare(TWO_BLOCKS, devices=["cpu", "nosuch:3"],
                                  env={"x": np.ones(8, np.float32)}, session=session)
    assert widget.mode.value == "compare" and widget.mode.layout.display == ""
    assert set(widget.results) == {"cpu", "nosuch:3"}
    assert len(widget.results["cpu"]["launches"]) == 2
    assert "error" in widget.results["nosuch:3"]
    html = widget.chart.value
    assert "data-device='cpu'" in html and "data-device='nosuch:3'" in html
    assert "data-phase='kernel'" in html
    widget.mode.value = "launches"
    assert "data-device" not in widget.chart.value


def test_timing_table_gives_rates_from_the_loop_nest(session):
    from zynbook.kernel.costs import device_peak

    widget = TimingWidget(session=session)
    html = widget.chart.value
    assert "GFLOP/s" in html and "GB/s" in html and "% peak" in html
    rows = re.findall(r"<tr><td>(.*?)</tr>", html)
    assert len(rows) == 2
    for ln, row in zip(session.launches, rows):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", "<td>" + row)
        assert cells[0].split(" = ")[0] == ln.kernel
        assert cells[2] == "-"                      # the CPU reference compiles nothing
        # x * 2.0 over 16 elements: 16 FLOPs; the reduce: 16 combines
        gflops = 16 / ln.times.kernel / 1e9
        shown = float(cells[6])
        assert shown == pytest.approx(gflops, rel=0.05)
        moved = {"elementwise": 16 * 4 * 2, "reduce": 16 * 4 + 4}[ln.kernel.split("_l")[0]]
        assert float(cells[7]) == pytest.approx(moved / ln.times.kernel / 1e9, rel=0.05)
        flops_peak, bw_peak, _ = device_peak({"id": "cpu", "type": "cpu"})
        share = max(gflops * 1e9 / flops_peak, moved / ln.times.kernel / bw_peak) * 100
        assert float(cells[8].split("%")[0]) == pytest.approx(share, rel=0.05)


def test_compare_puts_devices_in_rows_that_fit_the_width(session):
    widget = TimingWidget.compare(TWO_BLOCKS, devices=["cpu", "nosuch:3", "cpu"],
                                  env={"x": np.ones(8, np.float32)}, session=session,
                                  repeat=3)
    html = widget.chart.value
    assert "<td" not in html                        # no device columns side by side
    assert html.count("class='zynml-compare-row'") == 2
    assert "max-width:100%" in html and "viewBox=" in html
    assert len(widget.results["cpu"]["walls"]) == 3
    assert "median of 3" in html


def test_pickers_follow_device_changes_made_elsewhere(session):
    from zynbook.kernel import state

    a, b = DevicePicker(session=session), DevicePicker(session=session)
    a.value = "auto"                             # one picker: the other follows
    assert session.default_device == "auto" and b.value == "auto"
    assert "auto" in b.status.value
    # `config { compute_device }` in a cell: announced after the cell, pickers follow
    session.run_cell('config { compute_device: "cpu" }')
    assert state.announce_device(session)
    assert a.value == b.value == "cpu"
    assert not state.announce_device(session)    # nothing new to announce
    # a picker of another session is left alone
    other = zynbook.Session(device="cpu")
    c = DevicePicker(session=other)
    a.value = "auto"
    assert c.value == "cpu" and b.value == "auto"
