"""Execute every notebook in notebooks/ with nbclient and report, per notebook, the device
`auto` chose, the time taken and the first failing cell. Used on GPU machines, where
nbconvert and JupyterLab are not installed (nbclient and ipykernel travel as wheels; see
scripts/gpu_tests.sh), and usable anywhere:

    python scripts/run_notebooks.py [--out DIR] [notebooks/05_*.ipynb ...]

Exit status 1 when a notebook fails."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _kernel_env() -> None:
    """The ZynML kernelspec in a temporary prefix; kernels import zynbook from this checkout."""
    prefix = Path(tempfile.mkdtemp(prefix="zynbook-kernels-"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    subprocess.run([sys.executable, "-m", "zynbook.kernel", "install", "--prefix", str(prefix)],
                   check=True, cwd=REPO, capture_output=True, timeout=120)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (str(prefix / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")) if p)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")


def _first_error(nb) -> str:
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i}: {out.get('ename')}: {out.get('evalue')}"[:500]
    return ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "notebooks",
                        help="where the executed notebooks are written")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    _kernel_env()
    sys.path.insert(0, str(REPO))
    from zynbook.backends.registry import get_device
    print(f"device auto -> {get_device('auto').id}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    paths = args.notebooks or sorted((REPO / "notebooks").glob("*.ipynb"))
    failed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        status, detail = "ok", ""
        try:
            # the kernels' own stderr (transport notices) is not the notebook's output
            NotebookClient(nb, timeout=args.timeout,
                           resources={"metadata": {"path": str(REPO / "notebooks")}}
                           ).execute(stderr=subprocess.DEVNULL)
        except CellExecutionError as err:
            status, detail = "FAILED", _first_error(nb) or str(err).splitlines()[0][:500]
        except Exception as err:            # a kernel that died, a timeout
            status, detail = "FAILED", f"{type(err).__name__}: {err}"[:500]
        failed += status != "ok"
        nbformat.write(nb, args.out / path.name)
        print(f"{path.name:45s} {status:6s} {time.perf_counter() - start:7.1f}s  {detail}",
              flush=True)
    print(f"{len(paths) - failed} of {len(paths)} notebooks ran; executed copies in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
