"""The JupyterLab extension in a real browser: JupyterLab with the ZynML kernel and the
zynbook-zynml extension, driven by Playwright in Debian's headless Chromium.

What it checks: ZynML cells, `.zyn` files and `%%compute` cells of Python notebooks carry
the highlighting classes of the ZynML language; a ZynML cell runs and shows its tensor; the
device picker and shader inspector widgets render; the toolbar's device item lists the
kernel's devices and changes the kernel's default device. Screenshots go to
tests/browser/artifacts/ (ignored by git).

Needs: JupyterLab, the Python `playwright` package (no downloaded browsers: it drives
/usr/bin/chromium, or $ZYNBOOK_CHROMIUM), and the built extension (installed, or built in
labextension/ into zynbook/labextension/). Anything missing skips the test with the reason;
ZYNBOOK_REQUIRE_BROWSER=1 turns those skips into failures (for CI).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
EXTENSION = "zynbook-zynml"
CHROMIUM = os.environ.get("ZYNBOOK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
TIMEOUT_MS = 60_000


def _missing(reason: str):
    if os.environ.get("ZYNBOOK_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _installed_extension() -> Path | None:
    """The extension's directory where Jupyter finds it (pip install), if it does."""
    from jupyter_core.paths import jupyter_path

    for base in jupyter_path("labextensions"):
        candidate = Path(base) / EXTENSION / "package.json"
        if candidate.exists():
            return candidate.parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------- notebooks

def _code(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
            "source": source}


ZYNML_CELLS = [
    "// GELU of a 3 x 4 matrix\n"
    "let x = randn([3, 4], seed=1)\n"
    "let y = compute(x) @device(\"cpu\") {\n"
    "    @kernel elementwise\n"
    "    for i in 0..rows, j in 0..cols:\n"
    "        out[i, j] = x[i, j] * 0.5 * (1.0 + tanh(0.7978845608 * x[i, j]))\n"
    "}\n"
    "y",
    "%python from zynbook.widgets import DevicePicker, ShaderInspector\n"
    "%python DevicePicker()",
    "%python ShaderInspector()",
]

VIEW_CELLS = [
    # 0: a block and its generated CUDA in the inspector view of %inspect
    "let A = randn([24, 20], seed=1)\n"
    "let B = randn([20, 16], seed=2)\n"
    "let C = compute(A, B) {\n"
    "    @kernel matmul\n"
    "    for i in 0..M, j in 0..N:\n"
    "        var sum = 0.0\n"
    "        for k in 0..K:\n"
    "            sum += A[i, k] * B[k, j]\n"
    "        out[i, j] = sum\n"
    "}\n"
    "%inspect cuda",
    # 1: four devices compared across sizes
    "%%compare --devices cpu,cpu:native,vulkan:0,webgpu:0 --sizes n=64,256 --repeat 2\n"
    "let x = randn([n], seed=1)\n"
    "let y = compute(x) {\n"
    "    @kernel elementwise\n"
    "    for i in 0..n:\n"
    "        out[i] = tanh(x[i]) * 2.0\n"
    "}\n",
    # 2: the picker widget
    "%python from zynbook.widgets import DevicePicker\n"
    "%python picker = DevicePicker()\n"
    "%python picker",
    # 3: progress shows for any cell (the threshold lowered for the test)
    "%python import zynbook.kernel.progress as progress_module\n"
    "%python progress_module.AFTER = 0.0\n"
    "let z = compute(A) {\n"
    "    @kernel elementwise\n"
    "    for i in 0..rows, j in 0..cols:\n"
    "        out[i, j] = A[i, j] + 1.0\n"
    "}\n",
]

PYTHON_CELLS = [
    "%load_ext zynbook\nimport numpy as np\nx = np.arange(6, dtype=np.float32)",
    "%%compute\n"
    "let z = compute(x) {\n"
    "    @kernel elementwise\n"
    "    for i in 0..n:\n"
    "        out[i] = x[i] * 2.0\n"
    "}\n"
    "z",
]


def _notebook(cells: list[str], kernel: str, language: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": kernel, "display_name": kernel,
                                        "language": language}},
            "cells": [_code(c) for c in cells]}


# ------------------------------------------------------------------------- server

@pytest.fixture(scope="module")
def lab():
    """A JupyterLab server on a free port with a token: (base url, token, root dir)."""
    for module in ("jupyterlab", "playwright"):
        try:
            __import__(module)
        except ImportError:
            _missing(f"{module} is not installed")
    if not Path(CHROMIUM).exists():
        _missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")

    tmp = Path(tempfile.mkdtemp(prefix="zynbook-lab-"))
    data = tmp / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    # the ZynML kernelspec, in a data directory of this server only
    subprocess.run([sys.executable, "-m", "zynbook.kernel", "install", "--prefix",
                    str(tmp / "prefix")], check=True, env=env, cwd=REPO,
                   capture_output=True, timeout=120)
    (data / "kernels").mkdir(parents=True)
    shutil.copytree(tmp / "prefix" / "share" / "jupyter" / "kernels" / "zynml",
                    data / "kernels" / "zynml")
    # the extension: as built in this checkout (ahead of an installed copy on JUPYTER_PATH,
    # which may be older), else the installed one (pip install)
    built = REPO / "zynbook" / "labextension"
    if (built / "package.json").exists() or _installed_extension() is None:
        if not (built / "package.json").exists():
            _missing("the JupyterLab extension is not built "
                     "(cd labextension && jlpm install && jlpm build:prod)")
        shutil.copytree(built, data / "labextensions" / EXTENSION,
                        ignore=shutil.ignore_patterns(".gitignore"))
        shutil.copy(REPO / "labextension" / "install.json",
                    data / "labextensions" / EXTENSION / "install.json")
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(data), env.get("JUPYTER_PATH")) if p)
    for name, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                      ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                      ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")):
        env[name] = str(tmp / sub)
    env["ZYNBOOK_CACHE_DIR"] = str(tmp / "cache")
    # no "news" pop-up over the screenshots
    notification = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))

    root = tmp / "root"
    root.mkdir()
    (root / "zynml.ipynb").write_text(json.dumps(_notebook(ZYNML_CELLS, "zynml", "zynml")))
    (root / "views.ipynb").write_text(json.dumps(_notebook(VIEW_CELLS, "zynml", "zynml")))
    (root / "python.ipynb").write_text(json.dumps(_notebook(PYTHON_CELLS, "python3",
                                                            "python")))
    shutil.copy(REPO / "examples" / "matmul.zyn", root / "matmul.zyn")

    port, token = _free_port(), uuid.uuid4().hex
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--allow-root",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class="
         "jupyterlab.NeverCheckForUpdate"],
        env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    log.flush()
                    pytest.fail("JupyterLab did not start:\n"
                                + (tmp / "server.log").read_text()[-4000:])
                time.sleep(0.5)
        with urllib.request.urlopen(f"{base}/lab/api/extensions?token={token}",
                                    timeout=10) as r:
            names = [e["name"] for e in json.load(r)]
        assert EXTENSION in names, names
        yield base, token, root
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                    headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.console_errors = errors
    try:
        yield page
    finally:
        context.close()


def _open(page, lab, path: str):
    base, token, _ = lab
    page.goto(f"{base}/lab/tree/{path}?token={token}&reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
    page.wait_for_selector(".jp-MainAreaWidget:not(.lm-mod-hidden)")


def _shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _texts(page, selector: str, within: str = "") -> list[str]:
    return page.eval_on_selector_all(f"{within} {selector}".strip(),
                                     "els => els.map(e => e.textContent)")


def _wait_idle(page):
    page.wait_for_function(
        "() => { const p = window.jupyterapp.shell.currentWidget;"
        " const s = p && p.sessionContext; return s && s.session && s.session.kernel"
        " && s.kernelDisplayStatus === 'idle'; }")


# -------------------------------------------------------------------------- tests

def test_zynml_notebook(lab, page):
    _open(page, lab, "zynml.ipynb")
    first = ".jp-Notebook .jp-Cell:nth-child(1) .cm-content"
    page.wait_for_selector(f"{first} .zyn-annotation")

    # highlighting: the language's own classes and the standard tok-* ones
    assert "@kernel" in _texts(page, ".zyn-annotation", first)
    assert "@device" in _texts(page, ".zyn-annotation", first)
    assert "elementwise" in _texts(page, ".zyn-kernel-type", first)
    keywords = _texts(page, ".tok-keyword", first)
    for word in ("let", "compute", "for", "in"):
        assert word in keywords, keywords
    assert "0.5" in _texts(page, ".tok-number", first)
    assert '"cpu"' in _texts(page, ".tok-string", first)
    assert any("GELU" in t for t in _texts(page, ".tok-comment", first))
    assert "tanh" in _texts(page, ".tok-variableName", first)
    assert "*" in _texts(page, ".tok-operator", first)
    # `%python` lines: the magic, then Python
    second = ".jp-Notebook .jp-Cell:nth-child(2) .cm-content"
    assert "%python" in _texts(page, ".zyn-magic", second)
    assert "import" in _texts(page, ".tok-keyword", second)

    # run every cell
    _wait_idle(page)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    out1 = ".jp-Notebook .jp-Cell:nth-child(1) .jp-OutputArea-output"
    page.wait_for_selector(f"{out1} table")
    text = page.inner_text(out1)
    assert "f32[3, 4]" in text and "cpu" in text, text

    # the device picker and the shader inspector (ipywidgets views)
    out2 = ".jp-Notebook .jp-Cell:nth-child(2) .jp-OutputArea-output"
    page.wait_for_selector(f"{out2} .widget-dropdown select")
    options = _texts(page, ".widget-dropdown option", out2)
    assert any(o.startswith("cpu") for o in options), options
    assert "default device" in page.inner_text(out2)
    out3 = ".jp-Notebook .jp-Cell:nth-child(3) .jp-OutputArea-output"
    page.wait_for_selector(f"{out3} .widget-tab")
    tabs = _texts(page, ".lm-TabBar-tabLabel", out3)
    for title in ("ZynML", "CIR", "CPU (Python)"):
        assert title in tabs, tabs
    assert "elementwise" in page.inner_text(out3)
    # a generated-code tab: the ZynML beside the code, both inside the output's width
    page.click(f"{out3} .lm-TabBar-tab:has-text('CPU (Python)')")
    widths = page.eval_on_selector(
        f"{out3} .zynml-map >> visible=true",
        "e => [e.querySelector('.zm-gen').getBoundingClientRect().right,"
        " e.closest('.jp-OutputArea-output').getBoundingClientRect().right]")
    assert widths[0] <= widths[1] + 1, widths

    # the toolbar item: the kernel's devices, and choosing one sets the kernel's default
    item = ".jp-NotebookPanel:not(.lm-mod-hidden) .zyn-DeviceToolbarItem"
    page.wait_for_selector(f"{item}[data-device='cpu'] select")
    values = page.eval_on_selector_all(f"{item} option", "els => els.map(e => e.value)")
    assert "cpu" in values and "auto" in values, values
    _shot(page, "zynml-notebook")
    page.select_option(f"{item} select", "auto")
    page.wait_for_selector(f"{item}[data-device='auto']")
    # the kernel agrees: a cell asking for the default device sees `auto`
    page.evaluate("""() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = nb.widgets.length - 1;
        return window.jupyterapp.commands.execute('notebook:insert-cell-below');
    }""")
    page.evaluate("""() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCell.model.sharedModel.setSource('%device');
        return window.jupyterapp.commands.execute('notebook:run-cell');
    }""")
    last = ".jp-Notebook .jp-Cell:nth-child(4) .jp-OutputArea-output"
    page.wait_for_selector(f"{last}:has-text('default device')")
    assert "default device: auto" in page.inner_text(last)
    errors = [e for e in page.console_errors if "zynbook" in e.lower() or "zyn" in e]
    assert not errors, errors


def test_compute_cells_in_a_python_notebook(lab, page):
    _open(page, lab, "python.ipynb")
    magic = ".jp-Notebook .jp-Cell:nth-child(2) .cm-content"
    plain = ".jp-Notebook .jp-Cell:nth-child(1) .cm-content"
    page.wait_for_selector(f"{magic} .zyn-annotation")
    _wait_idle(page)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    out = ".jp-Notebook .jp-Cell:nth-child(2) .jp-OutputArea-output"
    page.wait_for_selector(f"{out}:has-text('10.')")
    assert "array([ 0.,  2.,  4.,  6.,  8., 10.]" in page.inner_text(out)
    # still ZynML once the kernel is up and the cell has run
    assert "%%compute" in _texts(page, ".zyn-magic", magic)
    assert "elementwise" in _texts(page, ".zyn-kernel-type", magic)
    assert "let" in _texts(page, ".tok-keyword", magic)
    # the first cell is Python: no ZynML classes, Python's keywords
    assert not page.query_selector_all(f"{plain} .zyn-magic")
    assert "import" in [t.strip() for t in page.eval_on_selector_all(
        f"{plain} span", "els => els.map(e => e.textContent)")]
    # the device item stays hidden: this is not a ZynML notebook
    assert not page.is_visible(".jp-NotebookPanel:not(.lm-mod-hidden) .zyn-DeviceToolbarItem")
    _shot(page, "python-compute-cells")

    # editing: adding the magic makes a cell ZynML, taking it away makes it Python again
    def set_source(index: int, text: str):
        page.evaluate("""([i, text]) => window.jupyterapp.shell.currentWidget.content
            .widgets[i].model.sharedModel.setSource(text)""", [index, text])

    set_source(0, "%%compute\nlet w = compute(x) {\n    @kernel elementwise\n"
                  "    for i in 0..n:\n        out[i] = x[i] + 1.0\n}")
    page.wait_for_selector(f"{plain} .zyn-annotation")
    set_source(0, "import numpy as np\n@decorated\ndef f(): pass")
    page.wait_for_function(
        "sel => !document.querySelector(sel + ' .zyn-annotation')", arg=plain)
    assert not page.query_selector_all(f"{plain} .zyn-magic")


def test_zyn_file_in_the_editor(lab, page):
    _open(page, lab, "matmul.zyn")
    editor = ".jp-FileEditor .cm-content"
    page.wait_for_selector(f"{editor} .zyn-kernel-type")
    assert "matmul" in _texts(page, ".zyn-kernel-type", editor)
    assert {"@kernel", "@workgroup", "@shared"} <= set(_texts(page, ".zyn-annotation", editor))
    assert "var" in _texts(page, ".tok-keyword", editor)
    _shot(page, "zyn-file")


def test_inspector_compare_progress_and_device_state(lab, page):
    """The inspector's line mapping and height, the compare table of four devices inside
    the output's width, the progress item, and the picker, toolbar and %device in step."""
    _open(page, lab, "views.ipynb")
    _wait_idle(page)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    # the inspector: fixed height with scrolling, ZynML lines linked to generated lines
    out0 = ".jp-Notebook .jp-Cell:nth-child(1) .jp-OutputArea-output"
    page.wait_for_selector(f"{out0} .zynml-map .zm-gen")
    gen = page.eval_on_selector(f"{out0} .zm-gen", "e => [e.clientHeight, e.scrollHeight]")
    assert 100 < gen[0] <= 422 and gen[1] > gen[0], gen        # it scrolls inside 420 px
    line = page.eval_on_selector(
        f"{out0} .zm-src [data-l]:has-text('out[i, j] = sum')", "e => e.dataset.l")
    target = f"{out0} .zm-gen [data-l='{line}']"
    assert page.query_selector_all(target), "the ZynML line maps to generated lines"
    background = "e => getComputedStyle(e).backgroundColor"
    assert page.eval_on_selector(target, background) in ("rgba(0, 0, 0, 0)", "transparent")
    page.hover(f"{out0} .zm-src [data-l='{line}']")
    assert page.eval_on_selector(target, background) == "rgb(255, 242, 168)"
    page.click(f"{out0} .zm-src [data-l='{line}']")           # pins the highlight
    page.mouse.move(0, 0)
    assert page.eval_on_selector(target, background) == "rgb(255, 242, 168)"
    # (a source prints only the helpers its kernel uses; their folding is checked on a
    # source with a prelude in tests/test_kernel_codeview.py)
    page.eval_on_selector(f"{out0} .zynml-map", "e => e.scrollIntoView()")
    _shot(page, "inspector-mapping")

    # compare: four devices as rows, inside the output's width
    out1 = ".jp-Notebook .jp-Cell:nth-child(2) .jp-OutputArea-output"
    page.wait_for_selector(f"{out1} .zynml-compare-table table", timeout=300_000)
    devices = page.eval_on_selector_all(f"{out1} tr[data-device]",
                                        "els => els.map(e => e.dataset.device)")
    assert sorted(set(devices)) == ["cpu", "cpu:native", "vulkan:0", "webgpu:0"], devices
    widths = page.eval_on_selector(
        f"{out1} .zynml-compare-table",
        "e => [e.querySelector('table').getBoundingClientRect().width,"
        " e.closest('.jp-OutputArea-output').getBoundingClientRect().width]")
    assert widths[0] <= widths[1], widths
    page.wait_for_selector(f"{out1} img")                        # the chart
    page.eval_on_selector(f"{out1} .zynml-compare-table", "e => e.scrollIntoView()")
    _shot(page, "compare-four-devices")

    # progress: the toolbar item shows the last cell's kernel and time
    item = ".jp-NotebookPanel:not(.lm-mod-hidden) .zyn-ProgressItem"
    out3 = ".jp-Notebook .jp-Cell:nth-child(4)"
    page.wait_for_selector(f"{out3} .jp-InputArea-prompt:has-text('[4]')")
    try:
        page.wait_for_selector(f"{item}:has-text('cell finished in')", timeout=20_000)
    except Exception:
        _shot(page, "progress-missing")
        raise AssertionError(page.inner_text(out3) + "\n" + str(page.eval_on_selector_all(
            ".zyn-ProgressItem", "els => els.map(e => e.outerHTML)")))
    assert page.eval_on_selector(item, "e => e.dataset.kernel").startswith("elementwise_l")
    _shot(page, "progress-item")

    # one device state: %device, the picker and the toolbar follow each other
    toolbar = ".jp-NotebookPanel:not(.lm-mod-hidden) .zyn-DeviceToolbarItem"
    out2 = ".jp-Notebook .jp-Cell:nth-child(3) .jp-OutputArea-output"
    page.wait_for_selector(f"{out2} .widget-dropdown select")
    labels = _texts(page, "option", f"{out2} .widget-dropdown")
    auto = next(label for label in labels if label.startswith("auto"))
    page.select_option(f"{out2} .widget-dropdown select", label=auto)  # the picker ...
    page.wait_for_selector(f"{toolbar}[data-device='auto']")        # ... moves the toolbar
    page.select_option(f"{toolbar} select", "cpu")                   # the toolbar ...
    picked = ("([sel, id]) => document.querySelector(sel).selectedOptions[0]"
              ".textContent.replace(/\\s/g, ' ').startsWith(id)")
    try:
        page.wait_for_function(picked, arg=[f"{out2} .widget-dropdown select", "cpu "],
                               timeout=15_000)
    except Exception:
        _shot(page, "device-missing")
        raise AssertionError(str(page.eval_on_selector(
            f"{out2} .widget-dropdown select",
            "e => [e.value, e.selectedIndex, e.selectedOptions[0] && "
            "e.selectedOptions[0].textContent]")) + " toolbar: " + str(page.eval_on_selector(
                toolbar, "e => [e.dataset.device, e.title]")))
    page.evaluate("""() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = nb.widgets.length - 1;
        return window.jupyterapp.commands.execute('notebook:insert-cell-below');
    }""")
    page.evaluate("""() => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCell.model.sharedModel.setSource('config { compute_device: "auto" }');
        return window.jupyterapp.commands.execute('notebook:run-cell');
    }""")
    page.wait_for_selector(f"{toolbar}[data-device='auto']")
    page.wait_for_function(picked, arg=[f"{out2} .widget-dropdown select", "auto"])
    _shot(page, "device-state")
