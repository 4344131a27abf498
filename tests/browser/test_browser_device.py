"""`browser:0`, the page's own GPU, end to end: JupyterLab with the ZynML kernel and the
extension, Debian's headless Chromium with WebGPU (SwiftShader, no GPU needed), driven by
Playwright; the kernel a page is connected to is driven directly (jupyter_client).

- every example program and every kernel type at odd sizes on `browser:0` equals the CPU
  reference; the device lists the page's adapter, `auto` never picks it;
- `%%compute @device("browser:0")` and `%%compare` in a Python notebook;
- an interrupt stops a launch's wait at once;
- errors: a page without WebGPU, a shader the page's compiler refuses, a limit, and a page
  closed during a launch all come back as ZynML device errors with the ZynML line, and a
  closed page's device disappears;
- `zynbook export`: the exported page opened offline from a file runs every block on the
  reader's GPU and checks the results.

Needs what tests/browser/labserver.py checks; a Chromium without a WebGPU adapter skips (fails
where ZYNBOOK_REQUIRE_BROWSER=1).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import labserver as L  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = L.REPO
TIMEOUT_MS = 60_000

EXPORTED = (
    "let x = randn([1001], seed=3)\n"
    "let y = compute(x) {\n"
    "    @kernel elementwise\n"
    "    for i in 0..n:\n"
    "        out[i] = tanh(x[i]) * 2.0 + 1.0\n"
    "}\n"
    "let A = randn([37, 29], seed=4)\n"
    "let B = randn([29, 41], seed=5)\n"
    "let C = compute(A, B) {\n"
    "    @kernel matmul\n"
    "    for i in 0..M, j in 0..N:\n"
    "        var s = 0.0\n"
    "        for k in 0..K:\n"
    "            s += A[i, k] * B[k, j]\n"
    "        out[i, j] = s\n"
    "}\n"
    "let total = compute(x) {\n"
    "    @kernel reduce(+)\n"
    "    for i in 0..n:\n"
    "        yield x[i]\n"
    "}\n"
    "C"
)

FILES = {
    "device.ipynb": L.notebook(["let x = 1"]),
    "closing.ipynb": L.notebook(["let x = 1"]),
    "nogpu.ipynb": L.notebook(["let x = 1"]),
    "python.ipynb": L.notebook(["%load_ext zynbook\nimport numpy as np"], kernel="python3"),
    "exported.ipynb": L.notebook([EXPORTED]),
}


@pytest.fixture(scope="module")
def lab():
    L.check_tools()
    with L.start_lab(FILES) as lab:
        yield lab


@pytest.fixture(scope="module")
def chromium(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=L.CHROMIUM,
                                    args=L.chromium_args(webgpu=True), headless=True)
        try:
            yield p, browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def gpu_page(lab, chromium):
    """The page with WebGPU, showing device.ipynb, and a client of its kernel."""
    _, browser = chromium
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    L.open_notebook(page, lab, "device.ipynb")
    has = page.evaluate("async () => !!(navigator.gpu && await navigator.gpu.requestAdapter())")
    if not has:
        L.missing("this Chromium offers no WebGPU adapter (--enable-unsafe-webgpu)")
    client = lab.client(lab.kernel_of("device.ipynb"))
    try:
        yield page, client
    finally:
        client.stop_channels()
        context.close()


def _ok(out: dict) -> dict:
    assert out["status"] == "ok", out
    return out


def _json(out: dict):
    _ok(out)
    return json.loads(out["stdout"].strip().splitlines()[-1])


# in the kernel: every example on browser:0 against the CPU reference
EXAMPLES = r'''import json, sys, numpy as np, zynbook
from pathlib import Path
from zynbook.errors import ZynMLError
sys.path.insert(0, REPO + "/tests")
from tolerances import tolerance
report = {}
for path in sorted(Path(REPO, "examples").glob("*.zyn")):
    src = path.read_text()
    try:
        want = zynbook.run(src, device="cpu")
    except ZynMLError:
        continue                       # needs devices the reference cannot stand for
    session = zynbook.Session(device="browser:0")
    try:
        got = session.run(src.replace('@device("auto")', '@device("browser:0")'))
    except Exception as exc:
        report[path.stem] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    entry = {"devices": sorted({l.device for l in session.launches}),
             "kinds": sorted({k.kernel.kernel_type.kind for k in session.last_kernels})}
    if isinstance(want, (int, float, zynbook.Tensor)):
        w, g = np.asarray(want, np.float64), np.asarray(got, np.float64)
        tol = tolerance("f32", "contraction")
        entry["ok"] = bool(w.shape == g.shape and np.allclose(g, w, rtol=10 * tol["rtol"],
                                                              atol=10 * tol["atol"]))
        entry["err"] = float(np.max(np.abs(g - w))) if w.size else 0.0
    report[path.stem] = entry
print(json.dumps(report))
'''

# in the kernel: each kernel type at odd sizes on browser:0 against the CPU reference
ODD_SIZES = r'''import json, sys, numpy as np, zynbook
sys.path.insert(0, REPO + "/tests")
import kernel_sources as K
rng = np.random.default_rng(7)
f = lambda *s: rng.standard_normal(s).astype(np.float32)
cases = {
    "elementwise": (K.MUL_ADD, dict(x=f(1001), y=f(1001))),
    "broadcast": (K.BROADCAST, dict(matrix=f(13, 29), vector=f(29))),
    "reduce_sum": (K.REDUCE_SUM, dict(data=f(4099))),
    "reduce_max": (K.REDUCE_MAX, dict(data=f(4099))),
    "argmax": (K.ARGMAX, dict(data=f(4099))),
    "row_sums": (K.ROW_SUMS, dict(matrix=f(37, 45))),
    "col_max": (K.COL_MAX, dict(matrix=f(37, 45))),
    "argmin_rows": (K.ARGMIN_ROWS, dict(matrix=f(37, 45))),
    "matmul": (K.MATMUL, dict(A=f(37, 29), B=f(29, 41))),
    "batched_matmul": (K.BATCHED_MATMUL, dict(A=f(3, 17, 13), B=f(3, 13, 19))),
    "softmax_fused": (K.SOFTMAX_FUSED, dict(logits=f(1001))),
    "softmax_rows": (K.SOFTMAX_ROWS, dict(x=f(7, 77))),
    "layer_norm": (K.LAYER_NORM, dict(x=f(5, 99), gamma=f(99), beta=f(99), eps=1e-5)),
    "rms_norm": (K.RMS_NORM, dict(x=f(5, 99), weight=f(99), eps=1e-5)),
    "attention": (K.ATTENTION, dict(Q=f(1, 2, 19, 16), K=f(1, 2, 19, 16), V=f(1, 2, 19, 16),
                                     mask=np.tril(np.ones((19, 19), bool)))),
    "flash_attention": (K.FLASH.replace("BLOCK", "8"), dict(
        Q=f(1, 2, 19, 16), K=f(1, 2, 19, 16), V=f(1, 2, 19, 16))),
}
report = {}
for name, (block, inputs) in cases.items():
    src = K.program(block)
    want = zynbook.run(src, device="cpu", **inputs)
    session = zynbook.Session(device="browser:0")
    try:
        got = session.run(src, **inputs)
    except Exception as exc:
        report[name] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    w, g = np.asarray(want, np.float64), np.asarray(got, np.float64)
    report[name] = {"devices": sorted({l.device for l in session.launches}),
                    "ok": bool(w.shape == g.shape and np.allclose(g, w, rtol=1e-3, atol=1e-4)),
                    "err": float(np.max(np.abs(g - w))) if w.size else 0.0,
                    "timing": sorted({l.times.source for l in session.launches})}
print(json.dumps(report))
'''


def test_examples_and_odd_sizes_on_the_page_gpu(gpu_page):
    page, client = gpu_page
    devices = L.wait_for_device(client)
    info = next(d for d in devices if d["id"] == "browser:0")
    # the adapter as the page reports it
    assert info["backend"] == "browser" and info["name"], info
    assert info["limits"]["maxStorageBufferBindingSize"] > 0, info
    assert isinstance(info["features"], list), info
    # `auto` never picks the page
    auto = _json(L.run(client, "%%python\nimport json\nfrom zynbook.backends import registry\n"
                               "print(json.dumps(registry.best_device_id()))"))
    assert auto != "browser:0"

    report = _json(L.run(client, f"%%python\nREPO = {str(REPO)!r}\n" + EXAMPLES, timeout=600))
    assert len(report) >= 15, report
    bad = {k: v for k, v in report.items() if "error" in v or not v.get("ok", True)}
    assert not bad, bad
    for name, entry in report.items():
        if entry["devices"]:
            assert entry["devices"] in (["browser:0"], ["browser:0", "cpu"]), (name, entry)
    kinds = set().union(*(set(e["kinds"]) for e in report.values()))
    assert {"elementwise", "reduce", "matmul", "flash_attention", "fused"} <= kinds, kinds

    report = _json(L.run(client, f"%%python\nREPO = {str(REPO)!r}\n" + ODD_SIZES, timeout=600))
    bad = {k: v for k, v in report.items() if "error" in v or not v["ok"]
           or v["devices"] != ["browser:0"]}
    assert not bad, bad


def test_a_zynml_cell_shows_its_result_and_timing(gpu_page):
    _, client = gpu_page
    L.wait_for_device(client)
    out = _ok(L.run(client,
                    "let v = randn([333], seed=2)\n"
                    "let w = compute(v) @device(\"browser:0\") {\n"
                    "    @kernel elementwise\n"
                    "    for i in 0..n:\n"
                    "        out[i] = v[i] * 3.0\n"
                    "}\n"
                    "%python import numpy as np\n"
                    "%python print(np.allclose(np.asarray(w), np.asarray(v) * 3))\n"
                    "%python print(get_ipython().zynml.last_launches[-1])\n"))
    assert "True" in out["stdout"], out
    assert "browser:0" in out["stdout"], out


def test_errors_come_back_with_the_zynml_line(gpu_page):
    _, client = gpu_page
    L.wait_for_device(client)
    cell = ("let a = randn([64], seed=1)\n"
            "let b = compute(a) @device(\"browser:0\") {\n"
            "    @kernel elementwise\n"
            "    for i in 0..n:\n"
            "        out[i] = a[i] + 1.0\n"
            "}\n")
    # a shader the page's WGSL compiler refuses
    _ok(L.run(client, "%%python\nimport zynbook.backends.browser.plan as P\n"
                      "P._saved = P.browser_source\n"
                      "P.browser_source = lambda s: s + '\\nfn broken( {'\n"))
    try:
        out = L.run(client, cell)
    finally:
        _ok(L.run(client, "%%python\nimport zynbook.backends.browser.plan as P\n"
                          "P.browser_source = P._saved\n"))
    assert out["status"] == "error", out
    assert "device" in out["error"].lower() and "did not compile" in out["error"], out
    assert "line 2" in out["error"], out
    # a limit of the page's adapter
    _ok(L.run(client, "%%python\nfrom zynbook.backends.registry import get_device\n"
                      "d = get_device('browser:0'); d._saved = dict(d.limits)\n"
                      "d.limits['maxStorageBufferBindingSize'] = 64\n"))
    try:
        out = L.run(client, cell.replace("[64]", "[1000]"))
    finally:
        _ok(L.run(client, "%%python\nfrom zynbook.backends.registry import get_device\n"
                          "d = get_device('browser:0'); d.limits.clear(); d.limits.update(d._saved)"))
    assert out["status"] == "error" and "binds at most 64 bytes" in out["error"], out
    assert "line 2" in out["error"], out
    # and the device still works afterwards
    _ok(L.run(client, cell))


def test_compute_magic_and_compare_in_a_python_notebook(lab, chromium):
    _, browser = chromium
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        L.open_notebook(page, lab, "python.ipynb")
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        client = lab.client(lab.kernel_of("python.ipynb"))
        L.wait_for_device(client, zynml=False)
        out = _ok(L.run(client, "x = np.arange(1001, dtype=np.float32)"))
        out = _ok(L.run(client, "%%compute @device(\"browser:0\")\n"
                                "let z = compute(x) {\n"
                                "    @kernel elementwise\n"
                                "    for i in 0..n:\n"
                                "        out[i] = x[i] * 2.0 + 0.5\n"
                                "}\n"))
        out = _ok(L.run(client, "print(np.allclose(np.asarray(z), x * 2 + 0.5))"))
        assert out["stdout"].strip() == "True", out
        out = _ok(L.run(client, "%%compare --devices cpu,browser:0 --sizes n=64,1001 --repeat 2\n"
                                "let v = randn([n], seed=1)\n"
                                "let w = compute(v) {\n"
                                "    @kernel elementwise\n"
                                "    for i in 0..n:\n"
                                "        out[i] = tanh(v[i]) * 2.0\n"
                                "}\n", timeout=300))
        text = out["result"] + out["stdout"]
        assert text.count("browser:0") >= 2 and "failed" not in text, out
        client.stop_channels()
    finally:
        context.close()


def test_a_page_without_webgpu(lab, chromium):
    playwright, _ = chromium
    browser = playwright.chromium.launch(executable_path=L.CHROMIUM,
                                         args=L.chromium_args(webgpu=False), headless=True)
    try:
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        L.open_notebook(page, lab, "nogpu.ipynb")
        client = lab.client(lab.kernel_of("nogpu.ipynb"))
        deadline = time.time() + 60
        while True:        # the page connects, saying why it has no adapter
            n = _json(L.run(client, "%%python\nimport json\n"
                                    "from zynbook.backends.browser import bridge\n"
                                    "print(json.dumps(len(bridge.pages())))"))
            if n or time.time() > deadline:
                break
            time.sleep(0.5)
        assert n == 1
        devices = L.wait_for_device(client, present=False, timeout=5)
        assert "browser:0" not in [d["id"] for d in devices]
        out = L.run(client, "let a = randn([8], seed=1)\n"
                            "let b = compute(a) @device(\"browser:0\") {\n"
                            "    @kernel elementwise\n"
                            "    for i in 0..n:\n"
                            "        out[i] = a[i] + 1.0\n"
                            "}\n")
        assert out["status"] == "error", out
        assert "no WebGPU" in out["error"] and "line 2" in out["error"], out
        client.stop_channels()
    finally:
        browser.close()


def test_export_menu_item(lab, chromium):
    _, browser = chromium
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        L.open_notebook(page, lab, "exported.ipynb")
        page.click(".lm-MenuBar-itemLabel:text-is('File')")
        item = ".lm-Menu-itemLabel:text-is('Export as Live WebGPU Page (ZynBook)')"
        page.wait_for_selector(item)
        page.click(item)
        page.wait_for_selector(".Toastify__toast:has-text('exported.html')", timeout=120_000)
        written = lab.root / "exported.html"
        assert written.exists() and "zb-block" in written.read_text()
    finally:
        context.close()


def test_exported_page_runs_offline(lab, chromium, tmp_path):
    _, browser = chromium
    notebook = lab.root / "exported.ipynb"
    html = tmp_path / "exported.html"
    subprocess.run([sys.executable, "-m", "zynbook.cli", "export", str(notebook), "-o",
                    str(html)], check=True, cwd=REPO, timeout=300, capture_output=True)
    text = html.read_text()
    assert "@kernel matmul" in text and "<script" in text
    assert "http://" not in text.replace("http://www.w3.org", "")     # self-contained
    context = browser.new_context(offline=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(html.as_uri())
        page.wait_for_selector("#run-all")
        page.click("#run-all")
        page.wait_for_function("() => document.body.dataset.state === 'done'", timeout=120_000)
        blocks = page.eval_on_selector_all(
            ".zb-block", "els => els.map(e => [e.dataset.kernel, e.dataset.status,"
                         " e.querySelector('.zb-time').textContent])")
        assert len(blocks) == 3, blocks
        assert all(status == "match" for _, status, _ in blocks), blocks
        assert all("ms" in t for _, _, t in blocks), blocks
    finally:
        context.close()


def _received(page) -> int:
    return page.evaluate("() => window.zynbookLaunchesInFlight().received")


def _until_running(page, received: int, timeout: float = 20):
    """Wait until the page has received launch number `received` + 1 and runs one (the
    page's own counts, so no guess of a time)."""
    page.wait_for_function(
        "n => { const s = window.zynbookLaunchesInFlight(); return s.received > n"
        " && s.running > 0; }", arg=received, timeout=timeout * 1000)
    time.sleep(0.2)


def test_an_interrupt_and_a_page_closed_during_a_launch(lab, chromium):
    # a browser of its own: closing the page leaves its GPU process busy for a while
    playwright, _ = chromium
    browser = playwright.chromium.launch(executable_path=L.CHROMIUM,
                                         args=L.chromium_args(webgpu=True), headless=True)
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    L.open_notebook(page, lab, "closing.ipynb")
    client = lab.client(lab.kernel_of("closing.ipynb"))
    L.wait_for_device(client)
    slow = ("let x = randn([SLOW_N], seed=1)\n"
            "let y = compute(x) @device(\"browser:0\") {\n"
            "    for i in 0..n:\n"
            "        var s = 0.0\n"
            "        for k in 0..SLOW_K:\n"
            "            s += sin(s + x[i])\n"
            "        out[i] = s\n"
            "}\n").replace("SLOW_N", "8192").replace("SLOW_K", "150000")
    # an interrupt stops the wait at once (the page's late result is dropped)
    result: dict = {}
    before = _received(page)
    runner = threading.Thread(target=lambda: result.update(L.run(client, slow, timeout=120)))
    runner.start()
    _until_running(page, before)
    assert runner.is_alive(), result
    t0 = time.time()
    request = urllib.request.Request(
        f"{lab.base}/api/kernels/{lab.kernel_of('closing.ipynb')}/interrupt?token={lab.token}",
        method="POST", data=b"")
    urllib.request.urlopen(request, timeout=10).close()
    runner.join(30)
    assert result.get("status") == "error" and "KeyboardInterrupt" in result["error"], result
    assert time.time() - t0 < 5, time.time() - t0
    assert "browser:0" in [d["id"] for d in L.wait_for_device(client)]

    # a page closed during a launch
    result = {}
    before = _received(page)
    runner = threading.Thread(target=lambda: result.update(L.run(client, slow, timeout=120)))
    runner.start()
    _until_running(page, before)        # the launch is on the page's GPU (it takes ~8 s)
    t0 = time.time()
    assert runner.is_alive(), result
    context.close()
    runner.join(60)
    elapsed = time.time() - t0
    assert result.get("status") == "error", result
    assert "went away" in result["error"] and "line 2" in result["error"], result
    print(f"the kernel noticed the closed page {elapsed:.1f} s after it closed")
    assert elapsed < 15, elapsed
    L.wait_for_device(client, present=False, timeout=20)
    client.stop_channels()
    browser.close()
