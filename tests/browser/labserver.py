"""JupyterLab with the ZynML kernel and the zynbook-zynml extension, and Debian's Chromium
with WebGPU, for the browser-device tests and bench/bench_browser.py.

- `start_lab(root_files)`: a context manager giving a `Lab` (base url, token, root, and
  `client(kernel_id)`, a jupyter_client connection to one of its kernels, so a test drives
  the kernel that a page is connected to directly);
- `chromium_args(webgpu)`: the flags; headless Chromium runs WebGPU compute on SwiftShader
  (no GPU needed) with `--enable-unsafe-webgpu`, in a secure context (http://127.0.0.1);
- `missing(reason)`: why something cannot run here (a skip, or a failure where
  ZYNBOOK_REQUIRE_BROWSER=1, as in CI).
"""
from __future__ import annotations

import contextlib
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
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSION = "zynbook-zynml"
CHROMIUM = os.environ.get("ZYNBOOK_CHROMIUM", "/usr/bin/chromium")
BASE_ARGS = ["--headless", "--no-sandbox", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             "--disable-dev-shm-usage"]


def chromium_args(webgpu: bool = True) -> list:
    if webgpu:
        return BASE_ARGS + ["--enable-unsafe-webgpu"]
    # WebGPU off: the page gets no adapter
    return BASE_ARGS + ["--disable-gpu", "--disable-webgpu",
                        "--disable-features=WebGPU,WebGPUService"]


def missing(reason: str):
    if os.environ.get("ZYNBOOK_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def check_tools():
    """Skip (or fail in CI) when JupyterLab, Playwright, Chromium or the extension is missing."""
    for module in ("jupyterlab", "playwright", "jupyter_client"):
        try:
            __import__(module)
        except ImportError:
            missing(f"{module} is not installed")
    if not Path(CHROMIUM).exists():
        missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    if not (REPO / "zynbook" / "labextension" / "package.json").exists():
        missing("the JupyterLab extension is not built "
                "(cd labextension && jlpm install && jlpm build:prod)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    base: str
    token: str
    root: Path
    runtime: Path

    def url(self, path: str) -> str:
        return f"{self.base}/lab/tree/{path}?token={self.token}&reset"

    def api(self, path: str):
        with urllib.request.urlopen(f"{self.base}{path}?token={self.token}", timeout=10) as r:
            return json.load(r)

    def kernel_of(self, notebook: str, timeout: float = 60) -> str:
        """The id of the kernel of an open notebook's session."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for s in self.api("/api/sessions"):
                if s.get("path", "").endswith(notebook) and s.get("kernel"):
                    return s["kernel"]["id"]
            time.sleep(0.3)
        raise AssertionError(f"no kernel for {notebook}")

    def client(self, kernel_id: str):
        from jupyter_client import BlockingKernelClient

        client = BlockingKernelClient(connection_file=str(self.runtime /
                                                          f"kernel-{kernel_id}.json"))
        client.load_connection_file()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        return client


def run(client, code: str, timeout: float = 300) -> dict:
    """Execute `code` on a kernel client: {"status", "stdout", "result", "error"}."""
    out = {"stdout": "", "result": "", "error": ""}

    def hook(msg):
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out["stdout"] += content["text"]
        elif kind in ("execute_result", "display_data"):
            out["result"] += content["data"].get("text/plain", "")
        elif kind == "error":
            out["error"] += content["ename"] + ": " + content["evalue"]

    reply = client.execute_interactive(code, timeout=timeout, output_hook=hook)
    out["status"] = reply["content"]["status"]
    if out["status"] == "error" and not out["error"]:
        out["error"] = reply["content"].get("ename", "") + ": " + reply["content"].get("evalue", "")
    return out


def _notebook(cells: list, kernel: str, language: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": kernel, "display_name": kernel,
                                        "language": language}},
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None,
                       "outputs": [], "source": c} for c in cells]}


def notebook(cells: list, kernel: str = "zynml") -> str:
    return json.dumps(_notebook(cells, kernel, "zynml" if kernel == "zynml" else "python"))


@contextlib.contextmanager
def start_lab(files: dict, nodelay: bool = False):
    """JupyterLab on a free port serving `files` ({name: text}); yields a Lab. `nodelay`:
    TCP_NODELAY on the kernel websockets (the zynbook.serverext server extension)."""
    tmp = Path(tempfile.mkdtemp(prefix="zynbook-lab-"))
    data = tmp / "data"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    subprocess.run([sys.executable, "-m", "zynbook.kernel", "install", "--prefix",
                    str(tmp / "prefix")], check=True, env=env, cwd=REPO,
                   capture_output=True, timeout=120)
    (data / "kernels").mkdir(parents=True)
    shutil.copytree(tmp / "prefix" / "share" / "jupyter" / "kernels" / "zynml",
                    data / "kernels" / "zynml")
    built = REPO / "zynbook" / "labextension"
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
    notification = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    root = tmp / "root"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    port, token = _free_port(), uuid.uuid4().hex
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--allow-root", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        + (["--ServerApp.jpserver_extensions=zynbook.serverext=True"] if nodelay else []),
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
                    raise RuntimeError("JupyterLab did not start:\n"
                                       + (tmp / "server.log").read_text()[-4000:])
                time.sleep(0.5)
        yield Lab(base, token, root, tmp / "runtime")
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def open_notebook(page, lab: Lab, path: str):
    page.goto(lab.url(path))
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined")
    page.wait_for_selector(".jp-MainAreaWidget:not(.lm-mod-hidden)")
    page.wait_for_function(
        "() => { const p = window.jupyterapp.shell.currentWidget;"
        " const s = p && p.sessionContext; return s && s.session && s.session.kernel"
        " && s.kernelDisplayStatus === 'idle'; }")


DEVICES = ("%%python\nimport zynbook, json\n"
           "print(json.dumps(zynbook.compute_devices(), default=str))")


def wait_for_device(client, device: str = "browser:0", timeout: float = 60,
                    present: bool = True, zynml: bool = True) -> list:
    """Poll the kernel's device list until `device` is (or is no longer) in it."""
    deadline = time.time() + timeout
    code = DEVICES if zynml else DEVICES.split("\n", 1)[1]
    while True:
        out = run(client, code)
        assert out["status"] == "ok", out
        devices = json.loads(out["stdout"].strip().splitlines()[-1])
        ids = [d["id"] for d in devices]
        if (device in ids) == present:
            return devices
        if time.time() > deadline:
            raise AssertionError(f"{device} {'never came' if present else 'never left'}: {ids}")
        time.sleep(0.5)
