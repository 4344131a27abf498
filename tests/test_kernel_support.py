"""Support for the kernel and notebook tests (no tests here): installing the ZynML kernelspec
into a throwaway Jupyter data directory, and talking to a running kernel."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from queue import Empty

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 30


def install_kernelspec() -> Path:
    """Install the kernelspec with `python -m zynbook.kernel install --prefix TMP` and point
    Jupyter at it (JUPYTER_PATH) and the kernel at this checkout (PYTHONPATH). Returns the
    kernelspec directory."""
    prefix = Path(tempfile.mkdtemp(prefix="zynml-kernelspec-"))
    atexit.register(shutil.rmtree, prefix, ignore_errors=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    subprocess.run([sys.executable, "-m", "zynbook.kernel", "install", "--prefix", str(prefix)],
                   check=True, env=env, cwd=REPO, capture_output=True, timeout=120)
    data = prefix / "share" / "jupyter"
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (str(data), os.environ.get("JUPYTER_PATH")) if p)
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    return data / "kernels" / "zynml"


def kernel_client():
    """A ZynML kernel of the installed kernelspec, started, its client yielded, shut down
    after: the body of a module's kernel fixture."""
    from jupyter_client.manager import start_new_kernel

    install_kernelspec()
    km, client = start_new_kernel(kernel_name="zynml", startup_timeout=60)
    try:
        yield client
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def kernel_json(spec_dir: Path) -> dict:
    return json.loads((spec_dir / "kernel.json").read_text())


def execute(kc, code: str, timeout: float = TIMEOUT):
    """Run `code`; returns (execute_reply content, [iopub messages of this request]).
    (stop_on_error=False: an error here must not abort the next request while it queues.)"""
    msg_id = kc.execute(code, stop_on_error=False)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    outputs = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=timeout)
        except Empty:
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        if msg["msg_type"] not in ("status", "execute_input"):
            outputs.append(msg)
    return reply["content"], outputs


def stdout_of(outputs) -> str:
    return "".join(m["content"]["text"] for m in outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def results_of(outputs) -> list[dict]:
    return [m["content"]["data"] for m in outputs
            if m["msg_type"] in ("execute_result", "display_data")]


def errors_of(outputs) -> list[dict]:
    return [m["content"] for m in outputs if m["msg_type"] == "error"]
