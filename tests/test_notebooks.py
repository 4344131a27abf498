"""The tutorials in notebooks/ run top to bottom under nbval and reproduce their saved outputs.

Each notebook is checked by `pytest --nbval` in a subprocess (one test per notebook, so a
failure names the notebook and shows nbval's cell-by-cell diff), with tests/nbval_sanitize.cfg
masking durations, addresses and float digits past the fourth decimal. Cells whose output
depends on the machine (device lists, timings, widgets) carry the `nbval-ignore-output` tag;
the cells after them check results with `assert` and print what the result means (values,
largest differences, which tests/nbval_sanitize.cfg compares by order of magnitude).

The ZynML kernelspec is installed into a temporary prefix for the run, and the kernels import
zynbook from this checkout. The same check by hand, from the repository root:

    python -m zynbook.kernel install --sys-prefix
    python -m pytest --nbval notebooks/ --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SANITIZE = REPO / "tests" / "nbval_sanitize.cfg"

pytest.importorskip("nbval")
pytest.importorskip("ipykernel")


@pytest.fixture(scope="module")
def nbval_env():
    prefix = Path(tempfile.mkdtemp(prefix="zynbook-nbval-"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    subprocess.run([sys.executable, "-m", "zynbook.kernel", "install", "--prefix", str(prefix)],
                   check=True, env=env, cwd=REPO, capture_output=True, timeout=120)
    env["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (str(prefix / "share" / "jupyter"), env.get("JUPYTER_PATH")) if p)
    env.setdefault("ZYNBOOK_CACHE_DIR", str(prefix / "cache"))
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    return env


def test_tutorials_are_in_order():
    names = [p.name for p in NOTEBOOKS]
    assert [n[:2] for n in names] == [f"{i:02d}" for i in range(1, len(names) + 1)], names
    assert len(names) == 8, names


def _nbval(notebook, env):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
           "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout", "600",
           "--rootdir", str(REPO), "-o", "testpaths=", str(notebook)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def nbval_runs(nbval_env, request):
    """The nbval run of every notebook selected, started at once on a pool as wide as the
    machine: each is its own processes (nbval and the notebook's kernel), and the notebooks
    share nothing but the kernel cache, whose entries are written atomically."""
    selected = [item.callspec.params["notebook"] for item in request.session.items
                if item.module is request.module and getattr(item, "originalname", "") == "test_notebook"]
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="nbval")
    runs = {nb: pool.submit(_nbval, nb, nbval_env) for nb in selected}
    yield runs
    for run in runs.values():
        run.cancel()
    pool.shutdown(wait=True)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(notebook, nbval_runs, nbval_env):
    run = nbval_runs.get(notebook)
    result = run.result() if run is not None else _nbval(notebook, nbval_env)
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-3000:]
    assert " passed" in result.stdout, result.stdout[-3000:]
