"""nvcc for the tests. Each compile is an nvcc process of its own, so a pool of threads runs
several at a time; a (source, flags) pair is compiled once a run, whichever test asks first.

`run(source, flags)` compiles (or waits for the same compile already queued) and gives its
`Result`; `queue(source, flags)` starts one without waiting, which a module's fixture does
for every case of its parametrisation, so the compiles overlap one another and the tests'
own work; `cancel(futures)` drops the queued ones no test asked for (a `-k` run).

The tests compile device code as the CUDA device does (NVRTC to PTX or a cubin): `--ptx` or
`-cubin`, never `-c`, whose host-side compile and fat binary the device never makes."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

NVCC = shutil.which("nvcc")

_SUFFIX = {"--ptx": ".ptx", "-ptx": ".ptx", "-cubin": ".cubin", "--cubin": ".cubin", "-c": ".o"}
_lock = threading.Lock()
_runs: dict[tuple, Future] = {}
_pool: ThreadPoolExecutor | None = None


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    ptx: str                # the PTX, where --ptx asked for it (objects are not kept)


def _compile(source: str, flags: tuple) -> Result:
    suffix = next((_SUFFIX[f] for f in flags if f in _SUFFIX), ".out")
    with tempfile.TemporaryDirectory(prefix="zyn-nvcc-") as d:
        src, out = os.path.join(d, "k.cu"), os.path.join(d, "k" + suffix)
        with open(src, "w") as f:
            f.write(source)
        res = subprocess.run([NVCC, *flags, "-o", out, src], capture_output=True, text=True, cwd=d)
        ptx = ""
        if suffix == ".ptx" and os.path.exists(out):
            with open(out) as f:
                ptx = f.read()
        return Result(res.returncode, res.stdout, res.stderr, ptx)


def queue(source: str, flags) -> Future:
    """The compile of `source` with `flags` (everything but -o and the file), started."""
    global _pool
    key = (source, tuple(flags))
    with _lock:
        fut = _runs.get(key)
        if fut is None or fut.cancelled():
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                           thread_name_prefix="nvcc")
            fut = _runs[key] = _pool.submit(_compile, source, key[1])
        return fut


def run(source: str, flags) -> Result:
    return queue(source, flags).result()


def cancel(futures) -> None:
    for fut in futures:
        fut.cancel()
